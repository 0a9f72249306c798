//! Watching a descriptor in a `mio` poll for exactly what its owner needs right now.
//!
//! Owns [`FdWatch`]: what a descriptor is registered for (readable, writable, both, or nothing at
//! all) and the one register / reregister / deregister call that moves it to what is wanted.
//! Used for a terminal that two processes take turns reading (`desk attach` and the master it
//! lends the terminal to, docs/protocol.md §5.16): a side that is not reading must not be
//! registered at all, or every key typed would wake it too. Invariant: the poll's registration
//! always matches what it was last [`FdWatch::set`] to; a descriptor is deregistered before its owner closes
//! it ([`FdWatch::forget`]), since another process's copy keeps the open file — and so the
//! registration — alive.

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use std::io;
use std::os::fd::RawFd;

#[derive(Debug, Default)]
pub struct FdWatch {
    registered: Option<Interest>,
}

impl FdWatch {
    /// A descriptor registered already, for `interest`.
    pub fn registered_for(interest: Interest) -> FdWatch {
        FdWatch { registered: Some(interest) }
    }

    /// Watch `fd` under `token` for reading when `read`, for room when `write`, and not at all
    /// when neither.
    pub fn set(&mut self, registry: &Registry, fd: RawFd, token: Token, read: bool, write: bool) -> io::Result<()> {
        let want = match (read, write) {
            (true, true) => Some(Interest::READABLE | Interest::WRITABLE),
            (true, false) => Some(Interest::READABLE),
            (false, true) => Some(Interest::WRITABLE),
            (false, false) => None,
        };
        if want == self.registered {
            return Ok(());
        }
        match (self.registered, want) {
            (None, Some(interest)) => registry.register(&mut SourceFd(&fd), token, interest)?,
            (Some(_), Some(interest)) => registry.reregister(&mut SourceFd(&fd), token, interest)?,
            (Some(_), None) => registry.deregister(&mut SourceFd(&fd))?,
            (None, None) => {}
        }
        self.registered = want;
        Ok(())
    }

    /// Stop watching `fd` (before it is closed).
    pub fn forget(&mut self, registry: &Registry, fd: RawFd) {
        if self.registered.take().is_some() {
            let _ = registry.deregister(&mut SourceFd(&fd));
        }
    }
}
