//! The master's socket stays where clients look for it.
//!
//! Owns noticing that the socket file was removed or replaced (a cleaner of temporary files, a
//! person's `rm`), and binding it again, with the session's record beside it: `desk attach`,
//! `desk ls` and the daemon then find the session as before, and the name's lock
//! ([`crate::session::MasterLock`]) keeps any other master from taking it meanwhile.
//! Invariants: the watch is on the socket file itself — inotify reports its link count
//! dropping (`IN_ATTRIB`) or its being renamed (`IN_MOVE_SELF`) — so nothing else in the runtime
//! directory wakes the master; a rebind happens only while the session runs (not once its exit
//! removed the socket on purpose), and the file at the path is replaced only when it is not
//! the socket this master listens on.

use mio::Interest;
use mio::net::UnixListener;
use mio::unix::SourceFd;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use tracing::{info, warn};

use super::event_loop::{LISTENER, Master, SOCKET_WATCH};

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
    /// Watch the socket just bound at `path`, registered with `poll` under [`SOCKET_WATCH`].
    pub(super) fn start(path: &Path, poll: &mio::Poll) -> anyhow::Result<SocketWatch> {
        use anyhow::Context;
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).context("cannot start inotify")?;
        let mut watch = SocketWatch { inotify, watch: None, bound: None };
        watch.follow(path)?;
        poll.registry()
            .register(&mut SourceFd(&watch.inotify.as_fd().as_raw_fd()), SOCKET_WATCH, Interest::READABLE)
            .context("cannot register the socket watch")?;
        Ok(watch)
    }

    /// Watch the file now at `path` (the socket this master listens on).
    fn follow(&mut self, path: &Path) -> anyhow::Result<()> {
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
    fn drain(&self) {
        while let Ok(events) = self.inotify.read_events() {
            if events.is_empty() {
                break;
            }
        }
    }

    /// Whether the file at `path` is still the socket this master listens on.
    fn intact(&self, path: &Path) -> bool {
        self.bound.is_some() && file_id(path) == self.bound
    }
}

impl Master {
    /// The socket file changed: when it is no longer this master's socket, bind it again.
    pub(super) fn socket_changed(&mut self) {
        let Some(watch) = &self.socket_watch else { return };
        watch.drain();
        if self.listener.is_none() || watch.intact(&self.files.socket) {
            return;
        }
        match self.rebind() {
            Ok(()) => {
                info!(socket = %self.files.socket.display(), "the socket was removed or replaced; bound it again")
            }
            Err(e) => warn!("the socket was removed or replaced, and cannot be bound again: {e:#}"),
        }
    }

    fn rebind(&mut self) -> anyhow::Result<()> {
        let name = crate::paths::SessionName::parse(&self.meta.name)?;
        crate::paths::Paths::from_env()?.ensure_runtime()?;
        // Whatever is at the path is not this master's socket (checked above).
        crate::fsutil::remove_if_exists(&self.files.socket)?;
        let mut listener: UnixListener = super::bind(&self.files.socket, &name)?;
        self.poll.registry().register(&mut listener, LISTENER, Interest::READABLE)?;
        if let Some(mut old) = self.listener.replace(listener) {
            let _ = self.poll.registry().deregister(&mut old);
        }
        if let Some(watch) = &mut self.socket_watch {
            watch.follow(&self.files.socket)?;
        }
        // The record beside it may have gone with it (a whole directory cleaned).
        if !self.files.meta.exists() {
            crate::session::write_meta(&self.files, &self.meta)?;
        }
        self.info_poked = true;
        Ok(())
    }
}
