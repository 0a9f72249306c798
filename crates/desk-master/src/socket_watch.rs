//! The watch on the master's socket file: whether the file at the socket's path is still the
//! socket this master listens on.
//!
//! Owns an inotify watch on the socket file itself — inotify reports its link count dropping
//! (`IN_ATTRIB`) or its being renamed (`IN_MOVE_SELF`) — so nothing else in the runtime
//! directory wakes the master, and the identity (device, inode) of the file it watches.
//! Rebinding is the loop's ([`super::socket`]).

use mio::Interest;
use mio::unix::SourceFd;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// An inotify watch on the master's socket file, and which file that is (device, inode).
pub(super) struct SocketWatch {
    inotify: Inotify,
    watch: Option<WatchDescriptor>,
    bound: Option<(u64, u64)>,
}

/// The file at `path`, as (device, inode), if there is one.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl SocketWatch {
    /// Watch the socket just bound at `path`, registered with `poll` under `token`.
    pub(super) fn start(path: &Path, poll: &mio::Poll, token: mio::Token) -> anyhow::Result<SocketWatch> {
        use anyhow::Context;
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).context("cannot start inotify")?;
        let mut watch = SocketWatch { inotify, watch: None, bound: None };
        watch.follow(path)?;
        poll.registry()
            .register(&mut SourceFd(&watch.inotify.as_fd().as_raw_fd()), token, Interest::READABLE)
            .context("cannot register the socket watch")?;
        Ok(watch)
    }

    /// Watch the file now at `path` (the socket this master listens on).
    pub(super) fn follow(&mut self, path: &Path) -> anyhow::Result<()> {
        use anyhow::Context;
        if let Some(old) = self.watch.take() {
            // Gone already when its file was deleted; either way it is no longer wanted.
            let _ = self.inotify.rm_watch(old);
        }
        let flags = AddWatchFlags::IN_ATTRIB | AddWatchFlags::IN_MOVE_SELF | AddWatchFlags::IN_DELETE_SELF;
        self.watch =
            Some(self.inotify.add_watch(path, flags).with_context(|| format!("cannot watch {}", path.display()))?);
        self.bound = file_id(path);
        Ok(())
    }

    /// Read what inotify has (the events themselves say nothing the path does not).
    pub(super) fn drain(&self) {
        while let Ok(events) = self.inotify.read_events() {
            if events.is_empty() {
                break;
            }
        }
    }

    /// Whether the file at `path` is still the socket this master listens on.
    pub(super) fn intact(&self, path: &Path) -> bool {
        self.bound.is_some() && file_id(path) == self.bound
    }
}
