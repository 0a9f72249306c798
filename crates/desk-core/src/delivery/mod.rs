//! Prompt delivery: exactly once, or visibly stuck with the evidence of why.
//!
//! The pieces: [`item`] (the durable record of one prompt), [`answer`] (the typed answers of
//! the daemon's control requests), [`text`] (what is typed and how it
//! is recognised on screen), [`settings`] (per-provider transport and verification settings),
//! [`line`](mod@line) (typing into a program reading a line or a shell at its prompt) and [`engine`] (the pure state machine: events and a clock in, actions out). The item files
//! on disk (`desk_daemon::store`) and the daemon that runs the engine in its event loop live
//! in desk-daemon. See `docs/delivery.md` for states, files and crash behaviour.

pub mod answer;
pub mod engine;
pub mod item;
pub mod line;
pub mod settings;
pub mod text;
