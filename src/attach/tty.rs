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

/// A private, non-blocking descriptor of the controlling terminal.
fn open_tty() -> Result<OwnedFd> {
    match open("/dev/tty", OFlag::O_RDWR | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC | OFlag::O_NOCTTY, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(_) => bail!("desk attach needs a terminal, and this process has none"),
    }
}

/// 1000 waits of at most 10 ms: a terminal that takes nothing for 10 s is gone or stopped, and
/// what is left is dropped rather than holding the way out.
const BLOCKED_WRITE_TRIES: u32 = 1000;

/// Write `bytes` to the non-blocking terminal `fd`, waiting for room when it is behind; used
/// only on the way out and for a few bytes of attach's own, when the terminal is attach's alone.
pub(super) fn write_blocking(fd: BorrowedFd<'_>, bytes: &[u8]) {
    let mut offset = 0;
    let mut spins = 0;
    while offset < bytes.len() && spins < BLOCKED_WRITE_TRIES {
        match nix::unistd::write(fd, &bytes[offset..]) {
            Ok(n) => offset += n,
            Err(nix::errno::Errno::EAGAIN) => {
                spins += 1;
                let mut fds = [nix::poll::PollFd::new(fd, nix::poll::PollFlags::POLLOUT)];
                let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(10u16));
            }
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) => break,
        }
    }
}

pub(super) struct RawTty(Terminal);

impl RawTty {
    /// Open the controlling terminal and switch it to raw mode (put back when dropped, by the
    /// [`Terminal`] it is).
    pub(super) fn open() -> Result<RawTty> {
        let terminal = Terminal::open()?;
        terminal.raw()?;
        Ok(RawTty(terminal))
    }

    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        self.0.fd()
    }

    /// Put back the settings found at open (also done on drop).
    pub(super) fn restore(&self) {
        self.0.cooked();
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
        let fd = open_tty()?;
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

    /// Write all of `bytes` (few: a notice, a bell, the epilogue).
    pub(super) fn write_all(&self, bytes: &[u8]) {
        write_blocking(self.fd.as_fd(), bytes);
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        self.cooked();
    }
}
