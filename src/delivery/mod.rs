//! Prompt delivery: exactly once, or visibly stuck with the evidence of why.
//!
//! The pieces: [`item`] (the durable record of one prompt), [`text`] (what is typed and how it
//! is recognised on screen), [`settings`] (per-provider transport and verification settings),
//! [`engine`] (the pure state machine: events and a clock in, actions out) and [`store`] (item
//! files on disk, moved by atomic rename with fsync). The daemon (`crate::daemon`) runs the
//! engine in its event loop. See `docs/delivery.md` for states, files and crash behaviour.

pub mod engine;
pub mod item;
pub mod settings;
pub mod store;
pub mod text;
