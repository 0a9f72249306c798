//! Watching the whole fleet at once: every running session's events, as they happen, without
//! polling.
//!
//! Owns one observer connection per running master, opened when the master appears (inotify on
//! the runtime directory: a master renames its metadata into place once it listens) and dropped
//! when it goes, and turns what they send into [`FleetEvent`]s in arrival order. Used by
//! `desk events --all` and meant for the dashboard. Invariants: a stopped or wedged master
//! never blocks the watcher (every socket is non-blocking and its output buffer bounded); a
//! session is announced `Joined` once per connection and `Left` exactly once after it; the
//! watcher survives masters coming and going and a runtime directory that is briefly empty.
//! A master is watched for liveness all along, not only until its WELCOME: one silent for
//! [`LIVENESS_PERIOD`] is sent a PING, and one that then says nothing for
//! [`WELCOME_PATIENCE`] is reported `Unresponsive` (a master stopped with SIGSTOP while
//! watched), and `Answering` once anything arrives from it again.

use anyhow::{Context, Result};
use mio::net::UnixStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use crate::paths::{Paths, SessionName};
use crate::session::{self, ExitRecord};
use desk_wire::events::Event;
use desk_wire::{Frame, FrameDecoder, Role, SessionInfo};

const INOTIFY: Token = Token(0);
const FIRST_MASTER: usize = 1;

/// A master that says nothing after our HELLO for this long is reported `Unresponsive` (once);
/// its connection stays open, so it is picked up again if it wakes. Masters answer in
/// microseconds; this only tells an operator that one is stopped or wedged.
pub const WELCOME_PATIENCE: Duration = Duration::from_millis(500);

/// 2 s: a welcomed master that has sent nothing for this long is sent a PING. An idle master
/// is silent, so this is how often a quiet fleet is asked whether it lives: 100 sessions cost
/// 50 tiny round trips a second, and a stopped master shows as unresponsive within 2.5 s.
pub const LIVENESS_PERIOD: Duration = Duration::from_secs(2);

/// Bytes we may owe one master before we stop writing to it (we only send HELLO and a PING at
/// most every [`LIVENESS_PERIOD`] while it is not flagged: this is far more than ever needed,
/// and bounds what a stopped master can make us hold).
const OUT_LIMIT: usize = 64 * 1024;

/// What the watcher saw.
#[derive(Debug, Clone, PartialEq)]
pub enum FleetEvent {
    /// A master answered our HELLO: the session runs, as `info` describes it.
    Joined { session: String, info: Box<SessionInfo> },
    /// A numbered session event, as the master journalled it.
    Event { session: String, event: Event },
    /// The master did not answer our HELLO, or a PING, within [`WELCOME_PATIENCE`].
    Unresponsive { session: String },
    /// A master reported `Unresponsive` after its WELCOME sends again (it was continued).
    Answering { session: String },
    /// The connection ended: the session exited (`exit` says how) or its master went away.
    Left { session: String, exit: Option<ExitRecord> },
}

struct Conn {
    session: String,
    stream: UnixStream,
    decoder: FrameDecoder,
    out: Vec<u8>,
    welcomed: bool,
    opened: Instant,
    flagged: bool,
    /// When the master last sent anything.
    heard: Instant,
    /// A PING waits for its PONG since then.
    pinged: Option<Instant>,
    /// Nonce of the next PING.
    nonce: u64,
}

/// The fleet watcher. Drive it with [`FleetWatch::wait`].
pub struct FleetWatch {
    paths: Paths,
    poll: Poll,
    events: Events,
    inotify: Inotify,
    conns: HashMap<Token, Conn>,
    by_session: HashMap<String, Token>,
    next_token: usize,
    pending: Vec<FleetEvent>,
}

impl FleetWatch {
    /// Start watching: connect to every master running now, and watch for new ones.
    pub fn open(paths: Paths) -> Result<FleetWatch> {
        paths.ensure_runtime()?;
        let poll = Poll::new().context("cannot create a poll")?;
        let inotify = crate::inotify::start(InitFlags::IN_NONBLOCK)?;
        inotify
            .add_watch(&paths.runtime, AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO)
            .with_context(|| format!("cannot watch {}", paths.runtime.display()))?;
        poll.registry().register(&mut SourceFd(&inotify.as_fd().as_raw_fd()), INOTIFY, Interest::READABLE)?;
        let mut watch = FleetWatch {
            paths,
            poll,
            events: Events::with_capacity(256),
            inotify,
            conns: HashMap::new(),
            by_session: HashMap::new(),
            next_token: FIRST_MASTER,
            pending: Vec::new(),
        };
        // After the watch is set, so a master starting now is seen by one or the other.
        for name in watch.paths.session_names()? {
            watch.connect(name.as_str());
        }
        Ok(watch)
    }

    /// Sessions with an open connection now.
    pub fn sessions(&self) -> Vec<String> {
        let mut names: Vec<String> = self.by_session.keys().cloned().collect();
        names.sort();
        names
    }

    /// Wait up to `timeout` (`None`: until something happens) and return what happened, in
    /// arrival order. An empty result means the time ran out.
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<Vec<FleetEvent>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            if !self.pending.is_empty() {
                return Ok(std::mem::take(&mut self.pending));
            }
            let now = Instant::now();
            let patience = self.next_patience_deadline();
            let until = match (deadline, patience) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let wait = until.map(|u| u.saturating_duration_since(now));
            match self.poll.poll(&mut self.events, wait) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).context("poll failed"),
            }
            let ready: Vec<Token> = self.events.iter().map(|e| e.token()).collect();
            for token in ready {
                if token == INOTIFY {
                    self.on_inotify();
                } else {
                    self.on_master(token);
                }
            }
            self.check_patience(Instant::now());
            if self.pending.is_empty() && deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(Vec::new());
            }
        }
    }

    fn next_patience_deadline(&self) -> Option<Instant> {
        self.conns.values().filter_map(next_check).min()
    }

    fn check_patience(&mut self, now: Instant) {
        for conn in self.conns.values_mut() {
            if conn.flagged {
                continue;
            }
            let waited_since = if conn.welcomed { conn.pinged } else { Some(conn.opened) };
            if let Some(since) = waited_since
                && now >= since + WELCOME_PATIENCE
            {
                conn.flagged = true;
                self.pending.push(FleetEvent::Unresponsive { session: conn.session.clone() });
            } else if conn.welcomed && conn.pinged.is_none() && now >= conn.heard + LIVENESS_PERIOD {
                conn.nonce = conn.nonce.wrapping_add(1);
                Frame::Ping(conn.nonce).encode(&mut conn.out);
                conn.pinged = Some(now);
                // A failed write shows as a hang-up on the next poll.
                flush(conn);
            }
        }
    }

    fn on_inotify(&mut self) {
        let events = match self.inotify.read_events() {
            Ok(events) => events,
            Err(_) => return,
        };
        for event in events {
            let Some(file) = event.name.as_ref().and_then(|n| n.to_str()) else { continue };
            // The metadata is renamed into place once the master listens; a socket file
            // appears at bind time, a moment before. Either may be the first we see.
            let Some(stem) = file.strip_suffix(".json").or_else(|| file.strip_suffix(".sock")) else { continue };
            if SessionName::parse(stem).is_ok() {
                let stem = stem.to_string();
                self.connect(&stem);
            }
        }
    }

    /// Connect to `session`'s master unless already connected. A refused connect (a socket
    /// bound but not yet listening, or a stale one) is dropped silently: the metadata's rename
    /// brings us back once it listens.
    fn connect(&mut self, session: &str) {
        if self.by_session.contains_key(session) {
            return;
        }
        let Ok(name) = SessionName::parse(session) else { return };
        let socket = self.paths.session(&name).socket;
        let Ok(std_stream) = std::os::unix::net::UnixStream::connect(&socket) else { return };
        if std_stream.set_nonblocking(true).is_err() {
            return;
        }
        let mut stream = UnixStream::from_std(std_stream);
        let token = Token(self.next_token);
        self.next_token += 1;
        if self.poll.registry().register(&mut stream, token, Interest::READABLE | Interest::WRITABLE).is_err() {
            return;
        }
        let mut conn = Conn {
            session: session.to_string(),
            stream,
            decoder: FrameDecoder::new(),
            out: Vec::new(),
            welcomed: false,
            opened: Instant::now(),
            flagged: false,
            heard: Instant::now(),
            pinged: None,
            nonce: 0,
        };
        Frame::Hello {
            version: crate::session::hello_version(&socket),
            role: Role::Observer,
            cols: 0,
            rows: 0,
            status_line: false,
            view: false,
        }
        .encode(&mut conn.out);
        flush(&mut conn);
        self.conns.insert(token, conn);
        self.by_session.insert(session.to_string(), token);
    }

    fn on_master(&mut self, token: Token) {
        let Some(conn) = self.conns.get_mut(&token) else { return };
        let mut open = flush(conn);
        let mut buf = [0u8; 16 * 1024];
        while open {
            match conn.stream.read(&mut buf) {
                Ok(0) => open = false,
                Ok(n) => conn.decoder.push(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => open = false,
            }
            loop {
                match conn.decoder.next_frame() {
                    Ok(Some(frame)) => {
                        conn.heard = Instant::now();
                        conn.pinged = None;
                        if conn.flagged && conn.welcomed {
                            self.pending.push(FleetEvent::Answering { session: conn.session.clone() });
                        }
                        conn.flagged = false;
                        if let Some(event) = interpret(conn, frame) {
                            self.pending.push(event);
                        }
                    }
                    Ok(None) => break,
                    Err(_) => {
                        open = false;
                        break;
                    }
                }
            }
        }
        if !open {
            self.drop_conn(token);
        }
    }

    fn drop_conn(&mut self, token: Token) {
        let Some(mut conn) = self.conns.remove(&token) else { return };
        let _ = self.poll.registry().deregister(&mut conn.stream);
        self.by_session.remove(&conn.session);
        let exit = SessionName::parse(&conn.session).ok().and_then(|n| session::current_exit(&self.paths.session(&n)));
        self.pending.push(FleetEvent::Left { session: conn.session, exit });
    }
}

/// When `conn` next needs looking at: its WELCOME's or PING's patience running out, or a PING
/// falling due; `None` once it is reported unresponsive (it then only speaks for itself).
fn next_check(conn: &Conn) -> Option<Instant> {
    match (conn.flagged, conn.welcomed, conn.pinged) {
        (true, ..) => None,
        (false, false, _) => Some(conn.opened + WELCOME_PATIENCE),
        (false, true, Some(at)) => Some(at + WELCOME_PATIENCE),
        (false, true, None) => Some(conn.heard + LIVENESS_PERIOD),
    }
}

/// Write what the socket takes now; false once the connection is unusable.
fn flush(conn: &mut Conn) -> bool {
    while !conn.out.is_empty() {
        match conn.stream.write(&conn.out) {
            Ok(0) => return false,
            Ok(n) => {
                conn.out.drain(..n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return conn.out.len() <= OUT_LIMIT,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

fn interpret(conn: &mut Conn, frame: Frame) -> Option<FleetEvent> {
    let session = conn.session.clone();
    match frame {
        Frame::Welcome { info, .. } => {
            conn.welcomed = true;
            Some(FleetEvent::Joined { session, info })
        }
        Frame::Event(map) => Event::from_json_map(map).ok().map(|event| FleetEvent::Event { session, event }),
        _ => None,
    }
}
