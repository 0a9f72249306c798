//! The user's terminal during an attach.
//!
//! Owns a private, non-blocking descriptor for `/dev/tty` (never the shared stdin description,
//! whose O_NONBLOCK flag would leak into the user's shell) and raw mode on it. Invariant: the
//! original settings are restored when the [`RawTty`] is dropped, including on panic unwinds
//! and error returns.

use anyhow::{Context, Result, bail};
use nix::fcntl::{OFlag, open};
use nix::sys::stat::Mode;
use nix::sys::termios::{self, SetArg, Termios};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

pub(super) struct RawTty {
    fd: OwnedFd,
    saved: Termios,
}

impl RawTty {
    /// Open the controlling terminal and switch it to raw mode.
    pub(super) fn open() -> Result<RawTty> {
        let fd = match open(
            "/dev/tty",
            OFlag::O_RDWR | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC | OFlag::O_NOCTTY,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(_) => bail!("desk attach needs a terminal, and this process has none"),
        };
        let saved = termios::tcgetattr(&fd).context("cannot read the terminal settings")?;
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        termios::tcsetattr(&fd, SetArg::TCSANOW, &raw).context("cannot switch the terminal to raw mode")?;
        Ok(RawTty { fd, saved })
    }

    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Put back the settings found at open (also done on drop).
    pub(super) fn restore(&self) {
        let _ = termios::tcsetattr(&self.fd, SetArg::TCSANOW, &self.saved);
    }
}

impl Drop for RawTty {
    fn drop(&mut self) {
        self.restore();
    }
}
