//! desk keeps coding agents alive on pseudo-terminals, lets people attach terminals to them and
//! reports their state. This crate holds every module; `src/main.rs` only parses arguments.

pub mod attach;
pub mod channel;
pub mod cli;
pub mod clock;
pub mod daemon;
pub mod dash;
pub mod delivery;
pub mod events;
pub mod fleet;
pub mod fsutil;
pub mod info_file;
pub mod journal;
pub mod keys;
pub mod launch;
pub mod logging;
pub mod manifest;
pub mod master;
pub mod paths;
pub mod pidlock;
pub mod procfs;
pub use desk_core::provider;
pub mod providers;
pub mod pty;
pub mod rules;
/// The output events the screen model's parse finds (named apart from `events`, the session
/// events they become).
pub use desk_term::events as term_events;
pub use desk_term::screen;
pub mod screen_log;
pub mod session;
pub mod signals;
pub mod worktree;
pub use desk_core::state;
pub use desk_wire as wire;
