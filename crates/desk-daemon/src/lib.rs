//! desk-daemon: `desk serve`, the per-user daemon that delivers prompts and channel messages.
//!
//! desk runs as three kinds of process: a **master** per session (`desk-master`, the crate
//! desk-master: the PTY, the screen model, the socket terminals attach to), this **daemon**
//! (one per user) and the **CLI** (`desk`: commands, `desk attach`, `desk dash`), which starts
//! the others and talks to them. The daemon runs the delivery engine (`desk_core::delivery`,
//! pure) against the world: it is an observer client of every running master, keeps the item
//! store, ingests channels, notifies the operator and restarts sessions whose restart policy
//! says so (`desk_core::fleet::supervise`, pure).
//!
//! ```text
//!   desk (CLI) ------------> desk-daemon (this crate)
//!                               |
//!                               v
//!                           desk-common --> desk-core --> desk-wire --> desk-term
//! ```
//!
//! An arrow is "may depend on"; nothing points up, and `tests/it/architecture.rs` checks it.
//! The CLI depends on this crate because `desk serve` runs in the `desk` executable, and
//! `desk send` and `desk channel` write the stores directly (durably) before asking the daemon
//! to act, and `desk ls` and the dashboard read the supervisor's state file. Modules: [`serve`]
//! (the event loop and the control socket's server side), [`spawn`] (starting it in the
//! background and its start-up report), [`masters`] (a connection to one master), [`outbox`]
//! (the engine's actions waiting on a group commit), [`evidence`] (the sessions' journals and
//! how far the daemon has read them),
//! [`notify`] (running the operator's notify command), [`store`] (delivery items on disk),
//! [`channel`] (the channel directories and their ingest) and [`supervisor`] (restart policies
//! carried out: it runs `desk restart`, the CLI's start path, in a child process, so the daemon
//! never starts a master itself). May not depend on the master's crate or the CLI's, nor on an
//! argument parser
//! or a terminal UI library.

pub mod channel;
pub mod evidence;
pub mod masters;
pub mod notify;
mod outbox;
pub mod serve;
pub mod spawn;
pub mod store;
pub mod supervisor;

pub use serve::{run, take_lock};
