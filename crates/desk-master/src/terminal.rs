//! The session's terminal as the master holds it: the PTY's master side.
//!
//! Owns the PTY's descriptor and what the loop knows of it: whether it is still open, whether
//! the last write to it went through whole (and so whether it is registered for writability),
//! whether the last read turn ran out of its budget with more to read, the read buffer, and
//! the queue of input waiting for the child to read it. Invariants: bytes reach the child only
//! through the input queue, in the order they were queued; a closed terminal is deregistered
//! once and then neither read, written, resized nor watched; the terminal is registered for
//! writability only while a write to it is blocked; the read buffer holds [`PTY_READ_CHUNK`]
//! bytes while the session is busy and nothing once it has gone idle (`super::memory`). What
//! is done with the bytes read is the loop's (`super::event_loop`).

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use nix::errno::Errno;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use tracing::{debug, warn};

use super::queue::{Flush, InputFull, InputQueue};

/// 64 KiB per PTY read: Linux hands out PTY data in up to 4 KiB pieces, so several reads are
/// coalesced into one OUTPUT frame, which keeps per-frame costs (headers, syscalls on every
/// client socket) small during floods. The buffer is allocated on first use and given back
/// when the session goes idle (`memory.rs`).
pub(super) const PTY_READ_CHUNK: usize = 64 * 1024;

/// 1 MiB of input may wait for the child: far more than any typing or prompt paste. A child
/// that has stopped reading is reported to the sender by refusing further INPUT frames.
pub const INPUT_QUEUE_LIMIT: usize = 1 << 20;

/// How one fill of the read buffer ended, besides the bytes it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReadEnd {
    /// The buffer is full; there may be more to read.
    Full,
    /// Nothing more to read for now.
    Blocked,
    /// The terminal is closed (every process of the session let go of it, or reading failed).
    Closed,
}

pub(super) struct Terminal {
    fd: OwnedFd,
    /// The session's terminal as its processes name it (`/dev/pts/N`), to see who reads it.
    tty: Option<String>,
    open: bool,
    /// The PTY took the last write whole (or nothing was written yet); false from a write that
    /// would block until the PTY reports writability.
    writable: bool,
    /// The PTY is registered for writability: only while `writable` is false (see
    /// [`Terminal::watch_writability`]).
    watches_out: bool,
    /// The PTY had more to read when the loop's turn budget ran out.
    pending: bool,
    /// Holds [`PTY_READ_CHUNK`] bytes while the session is busy, nothing while it is idle.
    read_buf: Vec<u8>,
    input: InputQueue,
}

impl Terminal {
    /// The PTY's master side `fd`, open, registered for readability under its token.
    pub(super) fn new(fd: OwnedFd) -> Terminal {
        let tty = desk_common::pty::slave_name(fd.as_fd());
        Terminal {
            fd,
            tty,
            open: true,
            writable: true,
            watches_out: false,
            pending: false,
            read_buf: Vec::new(),
            input: InputQueue::new(INPUT_QUEUE_LIMIT),
        }
    }

    /// The PTY's descriptor (to hand over, to ask about the terminal).
    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub(super) fn is_open(&self) -> bool {
        self.open
    }

    /// The last read turn ran out of budget with more to read.
    pub(super) fn has_pending(&self) -> bool {
        self.pending
    }

    /// Note whether the terminal is left with more to read at the end of a read turn.
    pub(super) fn set_pending(&mut self, pending: bool) {
        self.pending = pending && self.open;
    }

    /// The read buffer, [`PTY_READ_CHUNK`] bytes, allocated if the session was idle. The caller
    /// gives it back with [`Terminal::put_read_buf`] when done.
    pub(super) fn take_read_buf(&mut self) -> Vec<u8> {
        let mut buf = std::mem::take(&mut self.read_buf);
        if buf.len() != PTY_READ_CHUNK {
            buf = vec![0; PTY_READ_CHUNK];
        }
        buf
    }

    pub(super) fn put_read_buf(&mut self, buf: Vec<u8>) {
        self.read_buf = buf;
    }

    /// Drop the read buffer: the session has gone idle.
    pub(super) fn release_read_buf(&mut self) {
        self.read_buf = Vec::new();
    }

    #[cfg(test)]
    pub(super) fn read_buf(&self) -> &Vec<u8> {
        &self.read_buf
    }

    /// Read into `buf` until it is full, the terminal would block or it is closed; the bytes
    /// read and how it ended.
    pub(super) fn fill(&self, buf: &mut [u8]) -> (usize, ReadEnd) {
        let mut filled = 0;
        while filled < buf.len() {
            match nix::unistd::read(self.fd.as_fd(), &mut buf[filled..]) {
                Ok(0) => return (filled, ReadEnd::Closed),
                Ok(n) => filled += n,
                Err(Errno::EAGAIN) => return (filled, ReadEnd::Blocked),
                Err(Errno::EINTR) => continue,
                Err(Errno::EIO) => return (filled, ReadEnd::Closed),
                Err(e) => {
                    warn!("PTY read failed: {e}");
                    return (filled, ReadEnd::Closed);
                }
            }
        }
        (filled, ReadEnd::Full)
    }

    /// Stop reading and watching the terminal; whether it was open until now.
    pub(super) fn close(&mut self, registry: &Registry) -> bool {
        if !self.open {
            return false;
        }
        self.open = false;
        self.pending = false;
        let _ = registry.deregister(&mut SourceFd(&self.fd.as_raw_fd()));
        debug!("PTY closed");
        true
    }

    /// Register writability only while a write is blocked (the loop's `watch_writability`
    /// says why).
    pub(super) fn watch_writability(&mut self, registry: &Registry, token: Token) {
        if self.open && self.watches_out == self.writable {
            let want = !self.writable;
            match registry.reregister(&mut SourceFd(&self.fd.as_raw_fd()), token, interest(want)) {
                Ok(()) => self.watches_out = want,
                Err(e) => warn!("cannot change what the PTY is watched for: {e}"),
            }
        }
    }

    /// The PTY reported writability: write what waits.
    pub(super) fn on_writable(&mut self) {
        self.writable = true;
        self.flush_input();
    }

    /// Queue `bytes` whole for the child and write what the PTY takes now; nothing is queued
    /// when the queue cannot take them all.
    pub(super) fn queue_input(&mut self, bytes: &[u8]) -> Result<(), InputFull> {
        self.input.push(bytes)?;
        self.flush_input();
        Ok(())
    }

    /// Write the waiting input as far as the PTY takes it.
    pub(super) fn flush_input(&mut self) {
        if !self.writable || !self.open || self.input.is_empty() {
            return;
        }
        let mut writer = FdWriter(self.fd.as_fd());
        match self.input.flush_to(&mut writer) {
            Ok(Flush::Drained) => {}
            Ok(Flush::Blocked) => self.writable = false,
            Err(e) => warn!("PTY write failed: {e}"),
        }
    }

    /// Set the terminal's window size.
    pub(super) fn set_size(&self, cols: u16, rows: u16) -> anyhow::Result<()> {
        desk_common::pty::set_size(self.fd.as_fd(), cols, rows)
    }

    /// Whether the terminal is in canonical (line-editing) mode, and who is in its foreground
    /// (`program_pid` being the session's program).
    pub(super) fn foreground(&self, program_pid: u32) -> (bool, Option<desk_wire::Foreground>) {
        let canonical = desk_common::pty::is_canonical(self.fd.as_fd());
        let foreground = desk_common::pty::foreground(self.fd.as_fd(), program_pid, self.tty.as_deref(), canonical);
        (canonical, foreground)
    }

    /// What a handover record keeps: the input still waiting and whether the PTY took the last
    /// write whole.
    pub(super) fn saved(&self) -> (Vec<u8>, bool) {
        (self.input.bytes(), self.writable)
    }

    /// Take back what [`Terminal::saved`] kept, before anything is written.
    pub(super) fn restore(&mut self, input: &[u8], writable: bool) -> Result<(), InputFull> {
        self.writable = writable;
        if input.is_empty() { Ok(()) } else { self.input.push(input) }
    }

    #[cfg(test)]
    pub(super) fn set_writable(&mut self, writable: bool) {
        self.writable = writable;
    }
}

/// `io::Write` over a borrowed non-blocking fd.
struct FdWriter<'a>(BorrowedFd<'a>);

impl io::Write for FdWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        nix::unistd::write(self.0, buf).map_err(io::Error::from)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What a PTY or client is registered for: always readability, writability while a write to
/// it is blocked.
pub(super) fn interest(blocked: bool) -> Interest {
    if blocked { Interest::READABLE | Interest::WRITABLE } else { Interest::READABLE }
}
