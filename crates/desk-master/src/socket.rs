//! The master's socket stays where clients look for it.
//!
//! Owns binding the socket again when a check ([`super::socket_watch`]: on SIGUSR1, which
//! `desk serve` sends when it sees the socket go, or on the periodic timer) finds that its file
//! was removed or replaced (a cleaner of temporary files, a person's `rm`), with the session's
//! record beside it: `desk attach`, `desk ls` and the daemon then find the session as before,
//! and the name's lock ([`desk_common::session::MasterLock`]) keeps any other master from
//! taking it meanwhile. Invariants: a rebind happens only while the session runs (not once its
//! exit removed the socket on purpose), and the file at the path is replaced only when it is
//! not the socket this master listens on; the log says which check found it.

use mio::Interest;
use mio::net::UnixListener;
use tracing::{debug, info, warn};

use super::event_loop::{LISTENER, Master};
use super::socket_watch::Check;

impl Master {
    /// When the socket file is no longer this master's socket, bind it again.
    pub(super) fn check_socket(&mut self, check: Check) {
        if self.listener.is_none() || self.socket_watch.intact(&self.files.socket) {
            debug!(why = check.why(), "the socket is in place");
            return;
        }
        let found = check.why();
        match self.rebind() {
            Ok(()) => {
                info!(socket = %self.files.socket.display(), "the socket was found removed or replaced {found}; bound it again")
            }
            Err(e) => warn!("the socket was found removed or replaced {found}, and cannot be bound again: {e:#}"),
        }
    }

    fn rebind(&mut self) -> anyhow::Result<()> {
        let name = desk_common::paths::SessionName::parse(&self.meta.name)?;
        desk_common::paths::Paths::from_env()?.ensure_runtime()?;
        // Whatever is at the path is not this master's socket (checked above).
        desk_common::fsutil::remove_if_exists(&self.files.socket)?;
        let mut listener: UnixListener = super::bind(&self.files.socket, &name)?;
        self.poll.registry().register(&mut listener, LISTENER, Interest::READABLE)?;
        if let Some(mut old) = self.listener.replace(listener) {
            let _ = self.poll.registry().deregister(&mut old);
        }
        self.socket_watch.follow(&self.files.socket);
        // The record beside it may have gone with it (a whole directory cleaned).
        if !self.files.meta.exists() {
            desk_common::session::write_meta(&self.files, &self.meta)?;
        }
        self.info_file.poke();
        Ok(())
    }
}
