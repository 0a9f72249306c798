//! A terminal a local client handed to the master (docs/protocol.md §5.16).
//!
//! Owns the descriptor `desk attach` passed over its socket (`SCM_RIGHTS`), the keys the client
//! keeps for itself, and where the hand-over stands: the master has answered TAKEN and waits for
//! READY (the client is still writing what came before); it holds the terminal (reads the keys,
//! writes the screen); or it is giving it back (GIVE is queued behind the last bytes for the
//! terminal, and the descriptor is closed once those are written). Also reading a client
//! socket together with any descriptor that rides on it ([`recv_with_fd`]).
//!
//! Why: a typed key otherwise wakes four processes on its way to the session and back (attach,
//! master, the child, master, attach); with the terminal held the attach process is out of the
//! path, as a tmux client is out of its server's (issue 22, docs/benchmarks.md).
//!
//! Invariants: the terminal is read only while held and only by the master (the client stops
//! reading before TAKE and starts again at GIVE); input before a kept key is the session's
//! (through the session policy, as the client's INPUT would be), the key and what follows in the
//! same read go back in GIVE; the descriptor is deregistered from the poll before it is closed
//! (the client's own descriptor keeps the open file alive, so closing ours would not remove
//! it, and every key typed later would wake the master); only a terminal is held.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use desk_common::watch::FdWatch;
use mio::{Registry, Token};
use nix::fcntl::{FcntlArg, OFlag, fcntl};

/// Where a hand-over stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// TAKEN is queued or sent; stream frames queue for the terminal but wait for READY.
    Waiting,
    /// Read and written by the master.
    Holding,
    /// GIVE is queued: nothing more is read, and new stream frames go to the socket again.
    Giving,
}

#[derive(Debug)]
pub(super) struct Held {
    file: File,
    /// The control bytes the client keeps (its detach key, its command prefix).
    pub keys: Vec<u8>,
    pub stage: Stage,
    /// The terminal took the last write whole (or none was made); false from a write that would
    /// block until it reports room.
    pub writable: bool,
    /// What the poll watches it for.
    watch: FdWatch,
}

/// The poll token of client `token`'s terminal: the client's own with the top bit set (client
/// tokens count up from 16 and are never reused, so the two never meet).
pub(super) const TERMINAL_BIT: usize = 1 << (usize::BITS - 1);

impl Held {
    /// Take `fd` as the client's terminal: refused unless it is one. Made non-blocking (the
    /// client opened its own description of `/dev/tty` non-blocking already; a writer that
    /// blocked would stall every session's client).
    pub(super) fn take(fd: OwnedFd, keys: Vec<u8>) -> Result<Held, String> {
        if !nix::unistd::isatty(fd.as_fd()).unwrap_or(false) {
            return Err("the descriptor passed is not a terminal".into());
        }
        let flags = fcntl(fd.as_fd(), FcntlArg::F_GETFL).map_err(|e| format!("cannot read its flags: {e}"))?;
        let flags = OFlag::from_bits_truncate(flags);
        if !flags.contains(OFlag::O_NONBLOCK) {
            fcntl(fd.as_fd(), FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))
                .map_err(|e| format!("cannot make it non-blocking: {e}"))?;
        }
        Ok(Held { file: File::from(fd), keys, stage: Stage::Waiting, writable: true, watch: FdWatch::default() })
    }

    /// Whether stream frames pushed now go to the terminal.
    pub(super) fn takes_stream(&self) -> bool {
        self.stage != Stage::Giving
    }

    /// The terminal to offer a flush: `None` while its frames must wait (READY not yet in, or a
    /// write blocked until it reports room).
    pub(super) fn writer(&mut self) -> Option<&mut File> {
        (self.stage != Stage::Waiting && self.writable).then_some(&mut self.file)
    }

    /// Read what was typed; `Ok(0)` when the terminal is gone.
    pub(super) fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        match nix::unistd::read(self.file.as_fd(), buf) {
            Ok(n) => Ok(n),
            // A terminal whose other side is gone reads as EIO.
            Err(nix::errno::Errno::EIO) => Ok(0),
            Err(e) => Err(e.into()),
        }
    }

    /// Watch it for what its stage and writes need (readable while held, writable while a write
    /// is blocked), under `token`; nothing at all once neither.
    pub(super) fn watch(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        self.watch.set(registry, self.file.as_raw_fd(), token, self.stage == Stage::Holding, !self.writable)
    }

    /// Stop watching it (before it is closed).
    pub(super) fn forget(&mut self, registry: &Registry) {
        self.watch.forget(registry, self.file.as_raw_fd());
    }
}

/// The most descriptors one read of a client socket takes in: a client passes one at a time;
/// more are closed unused.
const MAX_PASSED_FDS: usize = 2;

/// Read a client's socket like `read`, keeping the descriptors passed with the bytes (the
/// newest one; any other is closed).
pub(super) fn recv_with_fd(stream: &impl AsRawFd, buf: &mut [u8]) -> io::Result<(usize, Option<OwnedFd>)> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    use std::os::fd::FromRawFd;
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; MAX_PASSED_FDS]);
    let mut iov = [io::IoSliceMut::new(buf)];
    let msg = recvmsg::<()>(stream.as_raw_fd(), &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC)
        .map_err(io::Error::from)?;
    let mut passed = None;
    if let Ok(cmsgs) = msg.cmsgs() {
        for cmsg in cmsgs {
            if let ControlMessageOwned::ScmRights(fds) = cmsg {
                for fd in fds {
                    // SAFETY: the kernel just installed `fd` in this process for this message;
                    // nothing else owns it.
                    passed = Some(unsafe { OwnedFd::from_raw_fd(fd) });
                }
            }
        }
    }
    Ok((msg.bytes, passed))
}
