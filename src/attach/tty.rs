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

/// The user's terminal under a remote attach ([`super::remote`]), which hands it to ssh most of
/// the time and reads it itself, raw, only while no ssh runs. Invariant: the settings found at
/// open are put back whenever ssh is to have the terminal and when it is dropped (so a ssh that
/// died without restoring them cannot leave the shell raw).
pub(super) struct Terminal {
    fd: OwnedFd,
    cooked: Termios,
}

impl Terminal {
    /// Open the controlling terminal (non-blocking, a descriptor of its own) and keep its
    /// settings.
    pub(super) fn open() -> Result<Terminal> {
        let fd = match open(
            "/dev/tty",
            OFlag::O_RDWR | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC | OFlag::O_NOCTTY,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(_) => bail!("desk attach needs a terminal, and this process has none"),
        };
        let cooked = termios::tcgetattr(&fd).context("cannot read the terminal settings")?;
        Ok(Terminal { fd, cooked })
    }

    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Raw mode, for reading keys one by one.
    pub(super) fn raw(&self) -> Result<()> {
        let mut raw = self.cooked.clone();
        termios::cfmakeraw(&mut raw);
        termios::tcsetattr(&self.fd, SetArg::TCSANOW, &raw).context("cannot switch the terminal to raw mode")
    }

    /// The settings found at open.
    pub(super) fn cooked(&self) {
        let _ = termios::tcsetattr(&self.fd, SetArg::TCSANOW, &self.cooked);
    }

    /// Write all of `bytes` (few: a notice, a bell), waiting for room when the terminal is
    /// behind.
    pub(super) fn write_all(&self, mut bytes: &[u8]) {
        let mut spins = 0;
        while !bytes.is_empty() && spins < 1000 {
            match nix::unistd::write(&self.fd, bytes) {
                Ok(n) => bytes = &bytes[n..],
                Err(nix::errno::Errno::EAGAIN) => {
                    spins += 1;
                    let mut fds = [nix::poll::PollFd::new(self.fd.as_fd(), nix::poll::PollFlags::POLLOUT)];
                    let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(10u16));
                }
                Err(nix::errno::Errno::EINTR) => {}
                Err(_) => break,
            }
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        self.cooked();
    }
}
