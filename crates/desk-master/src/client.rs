//! One connected client, as the master sees it.
//!
//! Owns a client's socket, its frame decoder, its outgoing queue and the queue mechanics for a
//! client that falls behind: a streaming client (controller or viewer) whose queue would pass
//! [`CLIENT_QUEUE_LIMIT`] has its backlog discarded and is marked `needs_keyframe`, so it later
//! gets one full redraw instead of the bytes it missed; a client of any role that leaves
//! [`CONTROL_QUEUE_LIMIT`] of replies and events unread is disconnected (those cannot be
//! summarised by a keyframe). When it fell behind and when it drained again are noted for the
//! session policy (`desk_core::session`), which owns the deadline for a client that stays
//! behind. Invariants: output deltas are never queued while a keyframe is pending; control
//! frames (replies, errors, EXIT) are never dropped while the client is connected; a queue
//! never exceeds its limit by more than one frame (or the rest of a keyframe already started,
//! which is never cut). The frames queued for clients are built here too, once, shared by
//! every client they go to ([`output_frame`], [`output_chunks`], [`keyframe_chunks`]).

use mio::net::UnixStream;
use std::io;
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::time::Instant;

use super::held::{Held, Stage};
use super::queue::{OutQueue, Sink, Split};
use desk_term::view::View;
use desk_wire::{Frame, FrameDecoder, HEADER_LEN, MAX_PAYLOAD, Role, output_header};

/// 1 MiB of output a streaming client may lag behind before its backlog is replaced by a
/// keyframe. A full 300x100 screen with colours renders to well under 200 KiB, so a client this
/// far behind is better served by a fresh redraw than by catching up byte by byte, and 64
/// clients stay within 64 MiB even when all of them stall.
pub const CLIENT_QUEUE_LIMIT: usize = 1 << 20;

/// 1 MiB of replies, events and errors a client may leave unread before it is disconnected.
/// They cannot be summarised by a keyframe, and a client that keeps asking (PING,
/// SNAPSHOT_REQUEST) without reading would otherwise grow the master without bound.
pub(super) const CONTROL_QUEUE_LIMIT: usize = 1 << 20;

/// Why a client is being removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Gone {
    /// The client went away or asked to (EOF, DETACH).
    Left,
    /// A write or read failed (EPIPE, ECONNRESET, ...).
    Failed(String),
    /// The master closed it after an ERROR frame.
    Closed(String),
}

#[derive(Debug)]
pub(super) struct Client {
    pub stream: UnixStream,
    pub pid: Option<i32>,
    /// Set by HELLO; `None` until then.
    pub role: Option<Role>,
    pub decoder: FrameDecoder,
    pub out: OutQueue,
    /// The socket took the last write whole (or nothing was written yet); false from a write
    /// that would block until the socket reports writability.
    pub writable: bool,
    /// The socket is registered for writability: only while `writable` is false (the loop's
    /// `watch_writability`).
    pub watches_out: bool,
    /// The next thing this client receives from the stream is a keyframe.
    pub needs_keyframe: bool,
    /// When this client started lagging (its backlog was discarded) and has not caught up since.
    pub behind_since: Option<Instant>,
    /// It drained after lagging, and the session policy has not been told yet.
    pub caught_up: bool,
    /// `behind_since` or `caught_up` changed since the session policy was last told.
    pub lag_news: bool,
    /// Stop reading; close once the queue has drained.
    pub closing: Option<String>,
    /// Remove at the next opportunity.
    pub gone: Option<Gone>,
    /// The peer no longer reads (a write failed with EPIPE or ECONNRESET): nothing more is
    /// queued for it, but what it sent before going is still read and acted on — a hook sends
    /// its frame and exits without waiting for the reply.
    pub hung_up: bool,
    /// Output bytes and keyframes sent, for the log line at disconnect.
    pub output_bytes: u64,
    pub keyframes: u64,
    /// The client asked (HELLO's status-line option) for its view's last row to name both
    /// sizes; it has no effect while it takes the raw output.
    pub status_line: bool,
    /// The client asked (HELLO's view option) for a view even at the session's size.
    pub always_view: bool,
    /// Set while the client's size differs from the session's (or always, with HELLO's view
    /// option): it gets repaints of this view
    /// instead of the raw output.
    pub view: Option<View>,
    /// The screen changed since the view was last repainted.
    pub view_dirty: bool,
    /// Output bytes the screen took since the view was last repainted: a small change (a
    /// typed key's echo) is repainted at once, see `SMALL_CHANGE`.
    pub view_unsent: usize,
    /// The earliest time of the next repaint (one per `VIEW_REPAINT_INTERVAL`).
    pub next_repaint: Option<Instant>,
    /// A descriptor that came with the client's bytes, for the TAKE it goes with.
    pub passed: Option<OwnedFd>,
    /// The terminal the client handed over (docs/protocol.md §5.16): stream frames go there.
    pub held: Option<Held>,
}

impl Client {
    pub(super) fn new(stream: UnixStream, pid: Option<i32>) -> Client {
        Client {
            stream,
            pid,
            role: None,
            decoder: FrameDecoder::new(),
            out: OutQueue::default(),
            writable: true,
            watches_out: false,
            needs_keyframe: false,
            behind_since: None,
            caught_up: false,
            lag_news: false,
            closing: None,
            gone: None,
            hung_up: false,
            output_bytes: 0,
            keyframes: 0,
            status_line: false,
            always_view: false,
            view: None,
            view_dirty: false,
            view_unsent: 0,
            next_repaint: None,
            passed: None,
            held: None,
        }
    }

    /// Where stream frames pushed now go.
    fn sink(&self) -> Sink {
        if self.held.as_ref().is_some_and(Held::takes_stream) { Sink::Terminal } else { Sink::Socket }
    }

    /// Whether the stream's sink took the last write whole: a keyframe or repaint is worth
    /// pushing now.
    pub(super) fn stream_writable(&self) -> bool {
        match &self.held {
            Some(held) if held.takes_stream() => held.writable,
            _ => self.writable,
        }
    }

    /// Queue a stream frame for its sink; one that wipes the client's own drawing from a held
    /// terminal is followed by REDRAWN, so the client draws it again.
    fn push_stream(&mut self, frame: &Rc<[u8]>) {
        let sink = self.sink();
        self.out.push_to(frame.clone(), sink);
        if sink == Sink::Terminal
            && frame.get(4) == Some(&(desk_wire::FrameType::Output as u8))
            && desk_term::kept::wipes_own_drawing(&frame[desk_wire::HEADER_LEN..])
        {
            self.out.push(redrawn());
        }
    }

    pub(super) fn streams_output(&self) -> bool {
        self.role.is_some_and(Role::streams_output) && self.gone.is_none() && self.closing.is_none()
    }

    pub(super) fn alive(&self) -> bool {
        self.gone.is_none()
    }

    /// Queue one OUTPUT frame, or start the keyframe policy if this client is too far behind.
    /// Returns true when this push made the client fall behind.
    pub(super) fn push_output(&mut self, frame: &Rc<[u8]>, payload_len: usize, now: Instant) -> bool {
        if self.needs_keyframe || !self.alive() || self.hung_up {
            return false;
        }
        if self.out.queued_bytes() + frame.len() > CLIENT_QUEUE_LIMIT {
            self.out.discard_backlog();
            self.needs_keyframe = true;
            let fell_behind = self.behind_since.is_none();
            if fell_behind {
                self.behind_since = Some(now);
                self.lag_news = true;
            }
            return fell_behind;
        }
        self.push_stream(frame);
        self.output_bytes += payload_len as u64;
        self.flush();
        false
    }

    /// Queue a control frame (never dropped). A client whose unread control frames pass
    /// [`CONTROL_QUEUE_LIMIT`] is disconnected instead.
    pub(super) fn push_control(&mut self, frame: &Frame) {
        if !self.alive() {
            return;
        }
        self.push_control_bytes(&Rc::from(frame.to_bytes()));
    }

    /// Queue an already encoded control frame (shared between clients, e.g. an event).
    pub(super) fn push_control_bytes(&mut self, frame: &Rc<[u8]>) {
        if !self.alive() || self.hung_up {
            return;
        }
        self.out.push(frame.clone());
        if self.out.control_bytes() > CONTROL_QUEUE_LIMIT {
            self.gone = Some(Gone::Failed("did not read its replies or events".into()));
            return;
        }
        self.flush();
    }

    /// Queue a keyframe already cut into frames.
    pub(super) fn push_keyframe(&mut self, frames: &[Rc<[u8]>]) {
        if self.hung_up {
            self.needs_keyframe = false;
            return;
        }
        let sink = self.sink();
        for frame in frames {
            self.out.push_to(frame.clone(), sink);
        }
        if sink == Sink::Terminal {
            self.out.push(redrawn());
        }
        self.needs_keyframe = false;
        self.keyframes += 1;
        self.flush();
    }

    /// Queue a view repaint (OUTPUT frames already encoded). Only called when the queue is
    /// empty, so a slow client holds at most one repaint and is later sent the latest view,
    /// never a backlog of them.
    pub(super) fn push_repaint(&mut self, frames: &[Rc<[u8]>], payload_len: usize) {
        if !self.alive() || self.hung_up {
            return;
        }
        for frame in frames {
            self.push_stream(frame);
        }
        self.output_bytes += payload_len as u64;
        self.flush();
    }

    /// Send an ERROR frame and close once it has been written.
    pub(super) fn close_with(&mut self, frame: Frame, reason: String) {
        self.push_control(&frame);
        if self.closing.is_none() {
            self.closing = Some(reason);
        }
    }

    /// What changed in this client's lag since the last call, for the session policy: whether it
    /// drained after lagging, then since when it is behind (if it is). `None`: nothing changed.
    pub(super) fn take_lag_news(&mut self) -> Option<(bool, Option<Instant>)> {
        if !std::mem::take(&mut self.lag_news) {
            return None;
        }
        Some((std::mem::take(&mut self.caught_up), self.behind_since))
    }

    /// Write what the socket (and a held terminal) take now.
    pub(super) fn flush(&mut self) {
        if !self.alive() {
            return;
        }
        let socket = self.writable.then_some(&mut self.stream);
        let terminal = self.held.as_mut().and_then(Held::writer);
        match self.out.flush_split(socket, terminal) {
            Ok(Split::Drained) => {
                if self.behind_since.take().is_some() {
                    self.caught_up = true;
                    self.lag_news = true;
                }
            }
            Ok(Split::Blocked(Sink::Socket)) => self.writable = false,
            Ok(Split::Blocked(Sink::Terminal)) => {
                if let Some(held) = &mut self.held {
                    held.writable = false;
                }
            }
            Ok(Split::Held(_)) => {}
            Err((Sink::Socket, e))
                if e.kind() == io::ErrorKind::BrokenPipe || e.kind() == io::ErrorKind::ConnectionReset =>
            {
                self.hung_up = true;
                self.out = OutQueue::default();
            }
            Err((Sink::Socket, e)) => self.gone = Some(Gone::Failed(format!("write failed: {e}"))),
            Err((Sink::Terminal, e)) => {
                self.gone = Some(Gone::Failed(format!("cannot write to the terminal it handed over: {e}")))
            }
        }
    }

    /// Whether the held terminal is given back and nothing more is queued for it: it may be
    /// closed.
    pub(super) fn terminal_released(&self) -> bool {
        self.held.as_ref().is_some_and(|h| h.stage == Stage::Giving) && self.out.terminal_frames() == 0
    }
}

/// The REDRAWN notice (docs/protocol.md §5.16), encoded.
fn redrawn() -> Rc<[u8]> {
    Rc::from(desk_wire::Frame::Terminal(desk_wire::TerminalOp::Redrawn).to_bytes())
}

/// A keyframe's bytes cut into KEYFRAME frames (one empty frame for no bytes).
pub(super) fn keyframe_chunks(bytes: &[u8]) -> Vec<Rc<[u8]>> {
    let mut frames = Vec::new();
    let mut chunks = bytes.chunks(MAX_PAYLOAD).peekable();
    if chunks.peek().is_none() {
        frames.push(Rc::from(Frame::Keyframe { more: false, data: Vec::new() }.to_bytes()));
    }
    while let Some(chunk) = chunks.next() {
        let more = chunks.peek().is_some();
        frames.push(Rc::from(Frame::Keyframe { more, data: chunk.to_vec() }.to_bytes()));
    }
    frames
}

/// Terminal bytes cut into OUTPUT frames.
pub(super) fn output_chunks(bytes: &[u8]) -> Vec<Rc<[u8]>> {
    bytes.chunks(MAX_PAYLOAD).map(output_frame).collect()
}

/// One OUTPUT frame carrying `piece` (at most [`MAX_PAYLOAD`] bytes), built in its shared
/// allocation: every byte of a flood is copied once on its way to the clients, not twice.
pub(super) fn output_frame(piece: &[u8]) -> Rc<[u8]> {
    let header = output_header(piece.len());
    let mut frame = Rc::<[u8]>::new_uninit_slice(HEADER_LEN + piece.len());
    let Some(slots) = Rc::get_mut(&mut frame) else {
        // A fresh Rc has no other owner; this is not reached.
        return Rc::from([&header[..], piece].concat());
    };
    let (head, body) = slots.split_at_mut(HEADER_LEN);
    for (slot, byte) in head.iter_mut().zip(header) {
        slot.write(byte);
    }
    for (slot, byte) in body.iter_mut().zip(piece) {
        slot.write(*byte);
    }
    // SAFETY: `head` and `body` together are every slot of the slice, and each was written
    // above.
    unsafe { frame.assume_init() }
}
