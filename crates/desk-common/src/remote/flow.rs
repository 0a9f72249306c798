//! Per-stream flow control of a remote link (docs/remote.md, "Flow control"): credit windows,
//! as an SSH channel's.
//!
//! Owns both halves, the same on either end of a link: what a sender may still send on each of
//! its streams ([`Windows`]: it blocks that stream's sending thread, and only it, when its window
//! is spent), and how a receiver hands a stream's bytes to its local reader without ever blocking
//! the one thread that reads the link ([`Drain`]: written at once when the reader's socket takes
//! them, else queued for a writer thread of that stream's own), granting the sender more window
//! ([`desk_wire::relay::Kind::Window`]) as its reader takes them ([`Tally`]). Invariants: a sender
//! never has more than [`INITIAL_WINDOW`] bytes of a stream unacknowledged, so a receiver queues
//! at most that much per stream; a stream's bytes reach its reader in order, whole, and only the
//! stream's own sender waits on a reader that stopped; a closed stream or a link that went down
//! wakes every sender waiting on it (it sends nothing more). Bytes whose reader is gone are
//! counted as taken, so a dead reader never holds its sender waiting. Only std and nix.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::net::UnixStream;
use std::process::ChildStdin;
use std::sync::{Arc, Condvar, Mutex};

use desk_wire::relay::INITIAL_WINDOW;

/// 256 KiB: a receiver grants window once its reader has taken this much since its last grant:
/// one WINDOW envelope per 256 KiB (none at all for typing), and a sender whose reader keeps up
/// still holds three quarters of its window while the grant travels.
const GRANT_AT: u64 = INITIAL_WINDOW as u64 / 4;

/// What a sender may still send on one stream.
struct Window {
    state: Mutex<Credit>,
    more: Condvar,
}

struct Credit {
    left: u64,
    closed: bool,
}

/// The send windows of one end of a link, by stream id.
#[derive(Default)]
pub(super) struct Windows {
    streams: Mutex<HashMap<u32, Arc<Window>>>,
    /// Set when the link went down: no stream opens any more.
    down: Mutex<bool>,
}

/// Why a sender may send no more on a stream.
#[derive(Debug)]
pub(super) struct StreamClosed;

impl Windows {
    pub(super) fn new() -> Arc<Windows> {
        Arc::new(Windows::default())
    }

    /// Stream `id` opens: its window starts at [`INITIAL_WINDOW`].
    pub(super) fn open(&self, id: u32) {
        let closed = *self.down.lock().unwrap_or_else(|p| p.into_inner());
        let window =
            Window { state: Mutex::new(Credit { left: u64::from(INITIAL_WINDOW), closed }), more: Condvar::new() };
        self.streams.lock().unwrap_or_else(|p| p.into_inner()).insert(id, Arc::new(window));
    }

    /// The other side's reader took `n` more bytes of stream `id`.
    pub(super) fn grant(&self, id: u32, n: u32) {
        let window = self.streams.lock().unwrap_or_else(|p| p.into_inner()).get(&id).cloned();
        if let Some(window) = window {
            let mut credit = window.state.lock().unwrap_or_else(|p| p.into_inner());
            credit.left += u64::from(n);
            window.more.notify_all();
        }
    }

    /// Stream `id` is over: whoever waits to send on it stops.
    pub(super) fn close(&self, id: u32) {
        if let Some(window) = self.streams.lock().unwrap_or_else(|p| p.into_inner()).remove(&id) {
            window.close();
        }
    }

    /// The link went down: every stream is over.
    pub(super) fn close_all(&self) {
        *self.down.lock().unwrap_or_else(|p| p.into_inner()) = true;
        for (_, window) in self.streams.lock().unwrap_or_else(|p| p.into_inner()).drain() {
            window.close();
        }
    }

    /// Send `payload` on stream `id` through `send`, in pieces no larger than the window allows,
    /// waiting for grants between them.
    pub(super) fn send<E>(
        &self,
        id: u32,
        payload: &[u8],
        mut send: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), SendError<E>> {
        let window = self.streams.lock().unwrap_or_else(|p| p.into_inner()).get(&id).cloned();
        let Some(window) = window else { return Err(SendError::Closed(StreamClosed)) };
        let mut rest = payload;
        while !rest.is_empty() {
            let n = window.take(rest.len()).map_err(SendError::Closed)?;
            send(&rest[..n]).map_err(SendError::Send)?;
            rest = &rest[n..];
        }
        Ok(())
    }
}

/// Why [`Windows::send`] stopped.
#[derive(Debug)]
pub(super) enum SendError<E> {
    /// The stream or the link closed.
    Closed(StreamClosed),
    /// The sending itself failed.
    Send(E),
}

impl Window {
    /// Up to `want` bytes of window, waiting until there is some.
    fn take(&self, want: usize) -> Result<usize, StreamClosed> {
        let mut credit = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if credit.closed {
                return Err(StreamClosed);
            }
            if credit.left > 0 {
                let n = credit.left.min(want as u64);
                credit.left -= n;
                return Ok(n as usize);
            }
            credit = self.more.wait(credit).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn close(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).closed = true;
        self.more.notify_all();
    }
}

/// Bytes of a stream its reader took since the last grant.
#[derive(Default)]
pub(super) struct Tally {
    taken: u64,
}

impl Tally {
    /// The reader took `n` bytes: the window to grant now, if it is time.
    pub(super) fn took(&mut self, n: usize) -> Option<u32> {
        self.taken += n as u64;
        if self.taken < GRANT_AT {
            return None;
        }
        let grant = u32::try_from(self.taken).unwrap_or(u32::MAX);
        self.taken -= u64::from(grant);
        Some(grant)
    }
}

/// What grants window to a stream's sender (a WINDOW envelope on the link).
pub(super) type Grant = Box<dyn Fn(u32) + Send + Sync>;

/// Where a stream's bytes go on this end.
pub(super) enum DrainTo {
    /// A connected socket (a stream's local end, a session's master, the daemon).
    Socket(UnixStream),
    /// A command's standard input.
    Pipe(ChildStdin),
}

enum Item {
    Bytes(Vec<u8>),
    /// The sender's EOF: shut the socket's write side, close the pipe.
    End,
    /// The stream is over: shut the socket both ways, close the pipe.
    Close,
}

struct DrainState {
    /// Bytes (and the end) the writer thread has still to write, in order.
    queue: VecDeque<Item>,
    /// Whether a writer thread runs (then nothing is written but by it, so order holds).
    writing: bool,
    /// The reader is gone (a write failed) or the stream closed: what comes is dropped.
    dropped: bool,
    tally: Tally,
}

struct DrainInner {
    into: Mutex<Option<DrainTo>>,
    state: Mutex<DrainState>,
    grant: Grant,
}

/// A stream's bytes on their way to its reader on this end, never blocking the link's reader.
#[derive(Clone)]
pub(super) struct Drain(Arc<DrainInner>);

impl Drain {
    pub(super) fn new(into: DrainTo, grant: Grant) -> Drain {
        Drain(Arc::new(DrainInner {
            into: Mutex::new(Some(into)),
            state: Mutex::new(DrainState {
                queue: VecDeque::new(),
                writing: false,
                dropped: false,
                tally: Tally::default(),
            }),
            grant,
        }))
    }

    /// Hand `bytes` to the reader: at once if its socket takes them all, the rest queued for
    /// the stream's writer thread. Never blocks on the reader.
    pub(super) fn push(&self, bytes: &[u8]) {
        let mut state = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.dropped {
            let grant = state.tally.took(bytes.len());
            drop(state);
            self.grant(grant);
            return;
        }
        let mut rest = bytes;
        if !state.writing && state.queue.is_empty() {
            match self.try_write(bytes) {
                Ok(n) => rest = &bytes[n..],
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => {
                    state.dropped = true;
                    rest = &[];
                }
            }
            let grant = state.tally.took(bytes.len() - rest.len());
            if rest.is_empty() {
                drop(state);
                self.grant(grant);
                return;
            }
            // A grant while bytes are queued: those taken so far.
            if let Some(n) = grant {
                (self.0.grant)(n);
            }
        }
        state.queue.push_back(Item::Bytes(rest.to_vec()));
        self.wake_writer(&mut state);
    }

    /// The sender's EOF: after the bytes before it, the reader sees the end.
    pub(super) fn end(&self) {
        let mut state = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
        if !state.writing && state.queue.is_empty() {
            drop(state);
            self.shut_write();
            return;
        }
        state.queue.push_back(Item::End);
        self.wake_writer(&mut state);
    }

    /// The stream is over: after the bytes queued before it (its sender sent them, so its reader
    /// gets them), the socket is shut both ways, the pipe closed.
    pub(super) fn close(&self) {
        let mut state = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
        if !state.writing && state.queue.is_empty() {
            drop(state);
            self.shut_both();
            return;
        }
        state.queue.push_back(Item::Close);
        self.wake_writer(&mut state);
    }

    fn shut_both(&self) {
        match self.0.into.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(DrainTo::Socket(socket)) => {
                let _ = socket.shutdown(std::net::Shutdown::Both);
            }
            Some(DrainTo::Pipe(pipe)) => drop(pipe),
            None => {}
        }
    }

    fn grant(&self, grant: Option<u32>) {
        if let Some(n) = grant {
            (self.0.grant)(n);
        }
    }

    /// One write that does not wait: a socket's send with MSG_DONTWAIT (the descriptor stays
    /// blocking for the writer thread and for whoever else holds it); a pipe always waits, so
    /// its bytes always go to the writer thread.
    fn try_write(&self, bytes: &[u8]) -> std::io::Result<usize> {
        use nix::sys::socket::{MsgFlags, send};
        let into = self.0.into.lock().unwrap_or_else(|p| p.into_inner());
        match into.as_ref() {
            Some(DrainTo::Socket(socket)) => loop {
                match send(socket.as_raw_fd(), bytes, MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL) {
                    Ok(n) => return Ok(n),
                    Err(nix::errno::Errno::EINTR) => {}
                    Err(e) => return Err(e.into()),
                }
            },
            Some(DrainTo::Pipe(_)) => Err(std::io::ErrorKind::WouldBlock.into()),
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        }
    }

    fn shut_write(&self) {
        let mut into = self.0.into.lock().unwrap_or_else(|p| p.into_inner());
        match into.as_ref() {
            Some(DrainTo::Socket(socket)) => {
                let _ = socket.shutdown(std::net::Shutdown::Write);
            }
            Some(DrainTo::Pipe(_)) => drop(into.take()),
            None => {}
        }
    }

    fn wake_writer(&self, state: &mut DrainState) {
        if state.writing {
            return;
        }
        state.writing = true;
        let drain = self.clone();
        std::thread::spawn(move || drain.write_queued());
    }

    /// The writer thread: the queue, in order, with blocking writes, until it is empty.
    fn write_queued(&self) {
        loop {
            let item = {
                let mut state = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
                match state.queue.pop_front() {
                    Some(item) => item,
                    None => {
                        state.writing = false;
                        return;
                    }
                }
            };
            match item {
                Item::Bytes(bytes) => {
                    let written = self.write_all(&bytes);
                    let grant = {
                        let mut state = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
                        if !written {
                            state.dropped = true;
                            let left: usize = state
                                .queue
                                .drain(..)
                                .map(|item| match item {
                                    Item::Bytes(b) => b.len(),
                                    Item::End | Item::Close => 0,
                                })
                                .sum();
                            state.tally.took(bytes.len() + left)
                        } else {
                            state.tally.took(bytes.len())
                        }
                    };
                    self.grant(grant);
                }
                Item::End => self.shut_write(),
                Item::Close => self.shut_both(),
            }
        }
    }

    /// A blocking write of all of `bytes`: whether the reader took them.
    fn write_all(&self, bytes: &[u8]) -> bool {
        // The descriptor is cloned out of the lock, so that a close meanwhile is not held up
        // behind a write that waits on the reader.
        let into = self.0.into.lock().unwrap_or_else(|p| p.into_inner());
        match into.as_ref() {
            Some(DrainTo::Socket(socket)) => match socket.try_clone() {
                Ok(socket) => {
                    drop(into);
                    (&socket).write_all(bytes).is_ok()
                }
                Err(_) => false,
            },
            Some(DrainTo::Pipe(pipe)) => match pipe.as_fd().try_clone_to_owned() {
                Ok(fd) => {
                    drop(into);
                    std::fs::File::from(fd).write_all(bytes).is_ok()
                }
                Err(_) => false,
            },
            None => false,
        }
    }
}
