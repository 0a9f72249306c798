//! Channels as the desk package runs them: the pure pieces from desk-core (`format`, `mention`,
//! `route`, `prompt`, and the model in [`desk_core::channel`]) and, here, what touches the
//! disk: [`store`] (the channel directories: conversation files, members, the per-channel lock)
//! [`ingest`] (turning routed messages into delivery items exactly once, with a durable
//! cursor) and [`summary`] (a channel at a glance, and the operator's read marker). The daemon (`crate::daemon`) runs the ingest; the CLI (`crate::cli::channel`) posts
//! and reads. See `docs/channels.md`.

pub mod ingest;
pub mod store;
pub mod summary;

pub use desk_core::channel::*;
