//! The master's listening socket, which stays where clients look for it.
//!
//! Owns [`Socket`]: the listener while the session runs, and the check ([`super::socket_watch`]:
//! on SIGUSR1, which `desk serve` sends when it sees the socket go, or on the periodic timer)
//! that finds its file removed or replaced (a cleaner of temporary files, a person's `rm`) and
//! binds it again, with the session's record beside it: `desk attach`, `desk ls` and the daemon
//! then find the session as before, and the name's lock ([`desk_common::session::MasterLock`])
//! keeps any other master from taking it meanwhile. Invariants: a rebind happens only while the
//! session runs (not once its exit closed the socket and removed it on purpose), and the file at
//! the path is replaced only when it is not the socket this master listens on; the log says
//! which check found it.

use mio::net::{UnixListener, UnixStream};
use mio::{Interest, Registry, Token};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use tracing::{debug, info, warn};

use super::socket_watch::{Check, SocketWatch};
use desk_common::paths::SessionPaths;
use desk_common::session::SessionMeta;

/// The listening socket's poll token.
pub(super) const LISTENER: Token = Token(0);

pub(super) struct Socket {
    /// `None` once the session's exit closed it.
    listener: Option<UnixListener>,
    /// Which file the socket is, checked on SIGUSR1 and on a timer.
    watch: SocketWatch,
}

impl Socket {
    /// The socket `listener`, bound at `files.socket` and registered under [`LISTENER`].
    pub(super) fn new(listener: UnixListener, files: &SessionPaths) -> Socket {
        Socket { listener: Some(listener), watch: SocketWatch::new(&files.socket) }
    }

    /// The next connection waiting, if the socket is open and one waits.
    pub(super) fn accept(&self) -> Option<io::Result<UnixStream>> {
        let listener = self.listener.as_ref()?;
        Some(listener.accept().map(|(stream, _)| stream))
    }

    /// The listener's descriptor, while the socket is open (for a handover).
    pub(super) fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.listener.as_ref().map(AsFd::as_fd)
    }

    /// Stop listening for good (the session exited).
    pub(super) fn close(&mut self, registry: &Registry) {
        if let Some(mut listener) = self.listener.take() {
            let _ = registry.deregister(&mut listener);
        }
    }

    /// When the socket file is no longer this master's socket, bind it again; whether it was.
    pub(super) fn check(
        &mut self,
        check: Check,
        registry: &Registry,
        files: &SessionPaths,
        meta: &SessionMeta,
    ) -> bool {
        if self.listener.is_none() || self.watch.intact(&files.socket) {
            debug!(why = check.why(), "the socket is in place");
            return false;
        }
        let found = check.why();
        match self.rebind(registry, files, meta) {
            Ok(()) => {
                info!(socket = %files.socket.display(), "the socket was found removed or replaced {found}; bound it again");
                true
            }
            Err(e) => {
                warn!("the socket was found removed or replaced {found}, and cannot be bound again: {e:#}");
                false
            }
        }
    }

    fn rebind(&mut self, registry: &Registry, files: &SessionPaths, meta: &SessionMeta) -> anyhow::Result<()> {
        let name = desk_common::paths::SessionName::parse(&meta.name)?;
        desk_common::paths::Paths::from_env()?.ensure_runtime()?;
        // Whatever is at the path is not this master's socket (checked above).
        desk_common::fsutil::remove_if_exists(&files.socket)?;
        let mut listener: UnixListener = super::bind(&files.socket, &name)?;
        registry.register(&mut listener, LISTENER, Interest::READABLE)?;
        if let Some(mut old) = self.listener.replace(listener) {
            let _ = registry.deregister(&mut old);
        }
        self.watch.follow(&files.socket);
        // The record beside it may have gone with it (a whole directory cleaned).
        if !files.meta.exists() {
            desk_common::session::write_meta(files, meta)?;
        }
        Ok(())
    }
}
