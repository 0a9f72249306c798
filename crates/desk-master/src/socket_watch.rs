//! The check that the file at the master's socket path is still the socket this master listens
//! on, and when it is made.
//!
//! Owns the identity (device, inode) of the socket file bound last. A socket removed or replaced
//! under a running master (a cleaner of temporary files, a person's `rm`) is noticed without an
//! inotify instance: Linux allows a user 128 of them by default
//! (`fs.inotify.max_user_instances`), and a fleet of masters holding one each kept `desk serve`,
//! `desk dash` and `desk events --all` from starting. Instead the master checks
//! - on SIGUSR1 (as tmux recreates its socket on SIGUSR1): `desk serve` sends it when its watch
//!   on the runtime directory sees the socket of a session it observes deleted, moved away or
//!   replaced, and a person may send it by hand (`kill -USR1 <master pid>`);
//! - every [`CHECK_INTERVAL`], the fallback when no daemon runs.
//!
//! Invariants: a check is one `lstat` of the path and touches nothing else, so the periodic one
//! costs an idle master a wake-up and a system call; rebinding is the loop's
//! ([`super::socket`]).

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

/// 10 s: without a daemon, a session whose socket was removed is unreachable at most this long
/// (with one, `desk serve` signals the master at once), and it must stay well inside the 20 s
/// a person (or a test) gives a session to come back. Each check wakes an idle master for one
/// `lstat`: 300 idle masters make 30 wake-ups a second (what that costs: docs/benchmarks.md
/// §21).
pub(super) const CHECK_INTERVAL: Duration = Duration::from_secs(10);

/// What made the master look at its socket file.
#[derive(Debug, Clone, Copy)]
pub(super) enum Check {
    /// SIGUSR1: from `desk serve`, which saw the file go, or from a person.
    Signal,
    /// The periodic check ([`CHECK_INTERVAL`]).
    Timer,
}

impl Check {
    pub(super) fn why(self) -> &'static str {
        match self {
            Check::Signal => "on SIGUSR1",
            Check::Timer => "by the periodic check",
        }
    }
}

/// Which file the master's socket is, as (device, inode).
pub(super) struct SocketWatch {
    bound: Option<(u64, u64)>,
}

/// The file at `path`, as (device, inode), if there is one.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl SocketWatch {
    /// The socket just bound at `path`.
    pub(super) fn new(path: &Path) -> SocketWatch {
        SocketWatch { bound: file_id(path) }
    }

    /// The socket at `path` was bound again: it is the one to check from now on.
    pub(super) fn follow(&mut self, path: &Path) {
        self.bound = file_id(path);
    }

    /// Whether the file at `path` is still the socket this master listens on.
    pub(super) fn intact(&self, path: &Path) -> bool {
        self.bound.is_some() && file_id(path) == self.bound
    }
}
