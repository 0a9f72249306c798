//! Lending the terminal to the session's master (docs/protocol.md §5.16).
//!
//! Owns when a local attach hands its terminal to the master and how it takes it back. While
//! the master holds it, typed keys go from the terminal straight to the master, and the screen
//! straight back: the attach process is out of the path of every key and every byte of output
//! (one process wake-up less each way: issue 22's keystroke echo, as tmux's server reads its
//! clients' terminals). The attach lends only while nothing of its own needs the terminal — no
//! prompt or overlay open, no keyframe half written, a master that speaks protocol version 3 on
//! this machine (never over a link to a host) — and takes it back whenever the master meets a
//! key it keeps (the detach key, the prefix), with the rest of that read.
//!
//! Invariants: the terminal is read by exactly one side at a time (attach stops before TAKE and
//! starts again at GIVE); what the attach draws of its own while the terminal is lent (the
//! status line, a bell) goes to the master as PAINT, never straight to the terminal, so it
//! never lands inside the session's output; READY is sent only once everything that came
//! before TAKEN is written; the attach writes its way out (the epilogue) only after the master
//! has let go of the terminal (or a deadline passed), so nothing of the master's lands after it.

use anyhow::Result;
use std::io::{self, IoSlice};
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use desk_wire::{Frame, TerminalOp};

use super::{Client, TTY};

/// 1 s: how long a way out waits for the master to let go of a lent terminal (it does within a
/// turn of its loop of our DETACH or its EXIT); a master that does not is not waited for longer
/// than a person would notice.
const RECLAIM_WITHIN: Duration = Duration::from_secs(1);

/// Where lending the terminal stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lending {
    /// Attach reads and writes the terminal.
    Own,
    /// TAKE is sent; attach no longer reads the terminal but still writes what comes.
    Asked,
    /// TAKEN came: once what came before it is written, READY.
    Draining,
    /// The master reads and writes the terminal.
    Lent,
}

impl Client {
    /// Lend the terminal to the master if nothing of attach's own needs it now.
    pub(super) fn maybe_lend(&mut self) -> Result<()> {
        let idle = self.lending == Lending::Own
            && !self.lend_refused
            && self.welcomed
            && self.wire >= desk_wire::TERMINAL_VERSION
            && self.ending.is_none()
            && self.session_drawn
            && !self.in_keyframe
            && !self.own.ui.reading()
            && !self.own.ui.overlay_open()
            && !self.own.drew_over
            && self.own.answer_pending.is_none()
            && !self.own.asked_dialog
            && self.to_tty_off == self.to_tty.len()
            && self.to_master.is_empty()
            && self.sock_writable;
        if !idle {
            return Ok(());
        }
        let keys: Vec<u8> = self.detach_key.into_iter().chain(self.own.ui_prefix()).collect();
        let take = Frame::Terminal(TerminalOp::Take { keys }).to_bytes();
        let fds = [self.raw.fd().as_raw_fd()];
        let rights = [nix::sys::socket::ControlMessage::ScmRights(&fds)];
        // Not a byte of the terminal is read from here on: a key typed now waits in it for the
        // master (or for GIVE).
        self.lending = Lending::Asked;
        self.watch_tty()?;
        match nix::sys::socket::sendmsg::<()>(
            self.sock.as_raw_fd(),
            &[IoSlice::new(&take)],
            &rights,
            nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
            None,
        ) {
            Ok(n) => self.to_master.extend_from_slice(&take[n..]),
            Err(nix::errno::Errno::EAGAIN) => {
                self.sock_writable = false;
                self.lending = Lending::Own;
            }
            Err(_) => {
                // The connection's own reads and writes find out what is wrong.
                self.lending = Lending::Own;
                self.lend_refused = true;
            }
        }
        Ok(())
    }

    /// The master's side of the hand-over.
    pub(super) fn on_terminal(&mut self, op: TerminalOp) {
        match op {
            TerminalOp::Taken if self.lending == Lending::Asked => self.lending = Lending::Draining,
            TerminalOp::Give(unread) => {
                // GIVE in answer to TAKE: the master would not take it; not asked again.
                if self.lending == Lending::Asked {
                    self.lend_refused = true;
                }
                self.lending = Lending::Own;
                // Keys may have waited in the terminal since it stopped being read here.
                self.tty_readable = true;
                self.take_input(&unread);
            }
            TerminalOp::Redrawn => self.draw_status(true),
            _ => {}
        }
    }

    /// READY once what came before TAKEN is on the terminal.
    pub(super) fn ready_if_drained(&mut self) {
        if self.lending == Lending::Draining && self.to_tty_off == self.to_tty.len() {
            Frame::Terminal(TerminalOp::Ready).encode(&mut self.to_master);
            self.lending = Lending::Lent;
        }
    }

    /// Bytes of attach's own for the terminal: written here, or painted by the master that
    /// holds it.
    pub(super) fn tty_out(&mut self, bytes: &[u8]) {
        if self.lending == Lending::Lent {
            for piece in bytes.chunks(desk_wire::MAX_PAYLOAD - 1) {
                Frame::Terminal(TerminalOp::Paint(piece.to_vec())).encode(&mut self.to_master);
            }
        } else {
            self.to_tty.extend_from_slice(bytes);
        }
    }

    /// Watch the terminal for what this side needs of it: input while it is attach's own,
    /// room while a write is blocked; nothing at all while the master reads it (its keys would
    /// wake this process too).
    pub(super) fn watch_tty(&mut self) -> Result<()> {
        let (read, write) = (self.lending == Lending::Own, !self.tty_writable);
        self.tty_watch.set(self.poll.registry(), self.raw.fd().as_raw_fd(), TTY, read, write)?;
        Ok(())
    }

    /// On the way out with the terminal lent (or being lent): wait until the master has let go
    /// of it (it closes the connection after our DETACH, or exits after its EXIT), so that
    /// nothing it writes lands after the epilogue.
    pub(super) fn reclaim(&mut self) {
        if self.lending == Lending::Own {
            return;
        }
        let deadline = Instant::now() + RECLAIM_WITHIN;
        let _ = io::Write::write(&mut self.sock, &self.to_master);
        let mut buf = [0u8; 4096];
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let mut fds = [nix::poll::PollFd::new(self.sock.as_fd(), nix::poll::PollFlags::POLLIN)];
            let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
            if nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms)).unwrap_or(0) == 0 {
                continue;
            }
            match io::Read::read(&mut self.sock, &mut buf) {
                Ok(0) => break,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
                Ok(_) => {}
            }
        }
        self.lending = Lending::Own;
    }
}
