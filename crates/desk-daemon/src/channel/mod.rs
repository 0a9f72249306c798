//! Channels as the daemon runs them: the pure pieces are desk-core's ([`desk_core::channel`]:
//! the model, `format`, `mention`, `route`, `prompt`, `cursor`); here is what touches the disk: [`store`] (the channel directories: conversation files, members, the per-channel
//! lock), [`ingest`] (turning routed messages into delivery items exactly once, with a durable
//! cursor), [`ledger`] (which messages were ingested, what a file edited under the cursor is
//! checked against), [`stall`] (a channel whose messages stopped, and why, for people) and
//! [`summary`] (a channel at a glance, and the operator's read marker). The daemon
//! ([`crate::serve`]) runs the ingest; the CLI (`desk::cli::channel`) posts and reads. See
//! `docs/channels.md`.

pub mod ingest;
pub mod ledger;
pub mod stall;
pub mod store;
pub mod summary;
