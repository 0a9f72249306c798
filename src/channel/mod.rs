//! Channels as the desk package runs them: the pure pieces from desk-core (`format`, `mention`,
//! `route`, `prompt`, `cursor`, and the model in [`desk_core::channel`]) and, here, what touches
//! the disk: [`store`] (the channel directories: conversation files, members, the per-channel
//! lock), [`ingest`] (turning routed messages into delivery items exactly once, with a durable
//! cursor), [`ledger`] (which messages were ingested, what a file edited under the cursor is
//! checked against), [`stall`] (a channel whose messages stopped, and why, for people) and
//! [`summary`] (a channel at a glance, and the operator's read marker). The daemon
//! (`crate::daemon`) runs the ingest; the CLI (`crate::cli::channel`) posts and reads. See
//! `docs/channels.md`.

pub mod ingest;
pub mod ledger;
pub mod stall;
pub mod store;
pub mod summary;

pub use desk_core::channel::*;
