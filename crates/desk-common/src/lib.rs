//! desk-common: what desk's three processes share.
//!
//! desk runs as three kinds of process. A **master** (`desk-master`, the crate desk-master) per
//! session holds the agent's pseudo-terminal, the screen model and the socket terminals attach
//! to. The **daemon** (`desk serve`, the crate desk-daemon), one per user, delivers prompts and
//! channel messages into sessions and notifies the operator. The **CLI** (`desk`, the desk
//! package: commands, `desk attach`, `desk dash`) starts both and talks to both. This crate is
//! the shell they have in common, over the pure crates:
//!
//! ```text
//!   desk (CLI: cli, attach, dash)
//!     |        \____________________
//!     |         v                   v
//!     |     desk-daemon         desk-master
//!     |         |                   |
//!     v         v                   v
//!   desk-common  (this crate: files, /proc, PTYs, the clients)
//!     |
//!     v
//!   desk-core --> desk-wire --> desk-term     (pure: no clock reads, no syscalls)
//! ```
//!
//! An arrow is "may depend on"; nothing points up, and `tests/it/architecture.rs` checks both
//! the manifests and each crate's imports. What lives here: where files are ([`paths`]), how
//! they are written ([`fsutil`], with [`fsutil::spare_pool`] making a group commit's new files ahead of need), watched ([`inotify`]: its per-user limit named) and versioned ([`format`](mod@format)), the records of a session ([`session`], [`info_file`], read for a whole fleet through
//! [`session_dirs`],
//! [`screen_log`], [`journal`], and [`launch_record`]: what each start ran and who stopped it,
//! which the CLI writes and the daemon's restart supervisor reads), locks ([`pidlock`]), `/proc` ([`procfs`]), PTYs ([`pty`]),
//! starting a process that outlives its starter and hearing that it is ready ([`detach`]: the
//! masters and the daemon),
//! signal names ([`signals`]), the clock ([`clock`]), logs ([`logging`]), the user's config
//! ([`config`]) and provider rule files ([`rules`]), the failure vocabulary every command
//! answers in ([`failure`]) with its "did you mean …?" for a name that names nothing
//! ([`suggest`]), crash failpoints ([`failpoint`]), and the blocking clients of a
//! master ([`master_client`], [`history`], [`keys`], [`fleet`]) and of the daemon ([`daemon_client`]), and both ends of a link to another host over ssh
//! ([`remote`]). May
//! not depend on the master's, the daemon's or the CLI's crate, nor on an argument parser or a
//! terminal UI library.

pub mod clock;
pub mod config;
pub mod daemon_client;
pub mod detach;
pub mod failpoint;
pub mod failure;
pub mod fleet;
pub mod format;
pub mod fsutil;
pub mod history;
pub mod ids;
pub mod info_file;
pub mod inotify;
pub mod journal;
pub mod keys;
pub mod launch_record;
pub mod logging;
pub mod master_client;
pub mod paths;
pub mod pidlock;
pub mod procfs;
pub mod pty;
pub mod remote;
pub mod rules;
pub mod screen_log;
pub mod session;
pub mod session_dirs;
pub mod signals;
pub mod suggest;
pub mod syntax;
pub mod watch;
