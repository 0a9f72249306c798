//! Starting an inotify instance, and saying plainly when Linux allows the user no more.
//!
//! Owns [`start`], through which every desk process that watches files opens its instance
//! (`desk serve`, the fleet watcher of `desk dash` and `desk events --all`, `desk channel`'s
//! waits), so the per-user limit (`fs.inotify.max_user_instances`, 128 by default) is reported
//! the same way everywhere: what the limit is, its value, and the `sysctl` that raises it.
//! Masters hold no instance (desk-master's `socket_watch`), so a fleet of sessions does not use
//! the limit up, but the user's other programs (editors, file managers, language servers) may.
//! Invariant: nothing counts the instances in use — that reads the file descriptors of every
//! process — only the limit is read (one small file under `/proc/sys`).

use anyhow::{Result, anyhow};
use nix::errno::Errno;
use nix::sys::inotify::{InitFlags, Inotify};

/// Where Linux keeps the per-user limit of inotify instances.
const MAX_USER_INSTANCES: &str = "/proc/sys/fs/inotify/max_user_instances";

/// The same limit for the user namespace this process runs in (a container's), which may be
/// lower: the kernel holds a user to every namespace's limit up to the machine's.
const NAMESPACE_MAX: &str = "/proc/sys/user/max_inotify_instances";

/// Open an inotify instance, close-on-exec, with `flags` besides. When the user's instances
/// are all taken the error is a [`LimitReached`] (callers may downcast to it).
pub fn start(flags: InitFlags) -> Result<Inotify> {
    Inotify::init(flags | InitFlags::IN_CLOEXEC).map_err(|e| match e {
        // EMFILE is also this process's own limit of open files (`ulimit -n`): when another
        // file still opens, it is the per-user limit of inotify instances.
        Errno::EMFILE if std::fs::File::open("/dev/null").is_ok() => anyhow::Error::new(LimitReached::now()),
        e => anyhow!("cannot start inotify: {e}"),
    })
}

/// Opening an instance failed with `EMFILE`: the user's instances are all taken.
#[derive(Debug)]
pub struct LimitReached {
    /// `fs.inotify.max_user_instances`, if it could be read.
    pub limit: Option<u64>,
    /// `user.max_inotify_instances` of this process's user namespace, when it is lower.
    pub namespace_limit: Option<u64>,
}

impl LimitReached {
    fn now() -> LimitReached {
        let read = |path: &str| std::fs::read_to_string(path).ok().and_then(|s| s.trim().parse::<u64>().ok());
        let limit = read(MAX_USER_INSTANCES);
        let namespace_limit = read(NAMESPACE_MAX).filter(|n| limit.is_none_or(|l| *n < l));
        LimitReached { limit, namespace_limit }
    }

    /// What was found, without the fix.
    pub fn finding(&self) -> String {
        let value = self.limit.map(|n| format!(" = {n}")).unwrap_or_default();
        let namespace = self
            .namespace_limit
            .map(|n| format!("; this user namespace allows {n} (user.max_inotify_instances)"))
            .unwrap_or_default();
        format!(
            "this user already holds as many inotify instances as Linux allows \
             (fs.inotify.max_user_instances{value}, counted over all of the user's processes{namespace})"
        )
    }

    /// What to do about it.
    pub fn fix(&self) -> String {
        let raise = self.limit.map_or(1024, |n| n.saturating_mul(2).max(1024));
        let namespace = match self.namespace_limit {
            Some(_) => format!(" (and the namespace's, by its owner: sysctl user.max_inotify_instances={raise})"),
            None => String::new(),
        };
        format!(
            "raise the limit with: sudo sysctl fs.inotify.max_user_instances={raise}{namespace} (and put that \
             setting in a file under /etc/sysctl.d/ to keep it), or end programs that hold many \
             (list them with: find /proc/*/fd -lname anon_inode:inotify 2>/dev/null | cut -d/ -f3 | sort | uniq -c)"
        )
    }
}

impl std::fmt::Display for LimitReached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot start inotify: {}. Fix: {}", self.finding(), self.fix())
    }
}

impl std::error::Error for LimitReached {}
