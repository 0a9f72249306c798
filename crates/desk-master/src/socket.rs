//! The master's socket stays where clients look for it.
//!
//! Owns binding the socket again when the [`SocketWatch`](super::socket_watch::SocketWatch)
//! notices that its file was removed or replaced (a cleaner of temporary files, a person's
//! `rm`), with the session's record beside it: `desk attach`,
//! `desk ls` and the daemon then find the session as before, and the name's lock
//! ([`desk_common::session::MasterLock`]) keeps any other master from taking it meanwhile.
//! Invariants: the watch is on the socket file itself — inotify reports its link count
//! dropping (`IN_ATTRIB`) or its being renamed (`IN_MOVE_SELF`) — so nothing else in the runtime
//! directory wakes the master; a rebind happens only while the session runs (not once its exit
//! removed the socket on purpose), and the file at the path is replaced only when it is not
//! the socket this master listens on.

use mio::Interest;
use mio::net::UnixListener;
use tracing::{info, warn};

use super::event_loop::{LISTENER, Master};

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
        let name = desk_common::paths::SessionName::parse(&self.meta.name)?;
        desk_common::paths::Paths::from_env()?.ensure_runtime()?;
        // Whatever is at the path is not this master's socket (checked above).
        desk_common::fsutil::remove_if_exists(&self.files.socket)?;
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
            desk_common::session::write_meta(&self.files, &self.meta)?;
        }
        self.info_file.poke();
        Ok(())
    }
}
