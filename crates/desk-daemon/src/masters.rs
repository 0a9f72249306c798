//! The daemon's connections to session masters, as an observer.
//!
//! Owns one non-blocking connection per running session: the handshake, the session's state
//! mirror (built from WELCOME and kept current from state, mode and hook events), screen
//! snapshots requested on behalf of the engine, and input with acknowledgement: every INPUT is
//! followed by a PING carrying the engine's token, so the PONG proves the master accepted the
//! bytes, and an ERROR before it proves it refused them. Invariants: replies are matched to
//! requests strictly in order; when a connection ends, every pending request is answered
//! (a snapshot with an error, a write as "unknown" — it may have been typed); an input made from
//! a journalled event carries that event's place in the journal ([`Observed`]). The events that
//! may call for a notification (state changes, exits, the agent's own notifications) and the
//! state a master reports on connect are kept in [`MasterConn::seen`] for the daemon's
//! notifications ([`super::notify`]).

use mio::net::UnixStream;
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::rc::Rc;

use desk_core::delivery::engine::{self, Input, ScreenView, SessionView, WriteError};
use desk_core::state::{Activity, Lifecycle, RuleSet};
use desk_term::events::Mode;
use desk_wire::events::{AxisChange, Event, EventBody};
use desk_wire::{ErrorCode, Frame, FrameDecoder, OLDEST_PROTOCOL_VERSION, PROTOCOL_VERSION, Role};

/// An input for the engine, and for one made from a journalled (durable) event, that event's
/// place in the session's journal: `(seq, ts_ms)`. The daemon gives the engine no event twice
/// (a replay of the journal may have given it already; see `crate::evidence`).
pub struct Observed {
    pub input: Input,
    pub journal: Option<(u64, u64)>,
}

impl Observed {
    fn live(input: Input) -> Observed {
        Observed { input, journal: None }
    }
}

/// What a connection saw that the notifications need.
pub enum Seen {
    /// The master's WELCOME: its session's generation and state then.
    Welcome { generation: u32, state: Option<desk_core::state::StateView> },
    /// A state change, an exit or an agent's notification.
    Event(Event),
}

pub struct MasterConn {
    pub session: String,
    pub stream: UnixStream,
    decoder: FrameDecoder,
    out: Vec<u8>,
    out_off: usize,
    pub view: Option<SessionView>,
    snapshots: VecDeque<engine::Token>,
    /// Writes awaiting their PONG, with the refusal seen for the head one.
    writes: VecDeque<(engine::Token, Option<String>)>,
    pub closed: bool,
    /// What the notifications need from this connection since the daemon last drained it.
    pub seen: Vec<Seen>,
    /// Why the master and this daemon cannot talk (protocol versions), once known: the
    /// connection is closed and nothing is ever sent to that master.
    pub refused: Option<String>,
    /// The WELCOME came in the last read: the daemon replays the session's journal before it
    /// gives the engine anything from this connection.
    pub welcomed_now: bool,
    /// The protocol version of its HELLO: what its master speaks, from its session record
    /// (docs/protocol.md §12).
    hello: u16,
    /// The master this connection reached, as (pid, start time in `/proc`'s clock ticks), when
    /// the kernel and `/proc` said: a signal goes only to that same process.
    master: Option<(u32, u64)>,
}

impl MasterConn {
    pub fn new(session: String, stream: UnixStream) -> MasterConn {
        let hello = stream.peer_addr().ok().and_then(|a| a.as_pathname().map(desk_common::session::hello_version));
        let hello = hello.unwrap_or(PROTOCOL_VERSION);
        let master = nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials)
            .ok()
            .and_then(|c| u32::try_from(c.pid()).ok())
            .and_then(|pid| desk_common::procfs::state_and_start(pid).map(|(_, start)| (pid, start)));
        let mut conn = MasterConn {
            session,
            stream,
            decoder: FrameDecoder::new(),
            out: Vec::new(),
            out_off: 0,
            view: None,
            snapshots: VecDeque::new(),
            writes: VecDeque::new(),
            closed: false,
            seen: Vec::new(),
            refused: None,
            welcomed_now: false,
            hello,
            master,
        };
        conn.send(&Frame::Hello {
            version: hello,
            role: Role::Observer,
            cols: 0,
            rows: 0,
            status_line: false,
            view: false,
        });
        conn
    }

    /// Ask the master to check its socket file, which was seen removed or replaced: SIGUSR1
    /// (desk-master's `socket_watch`), so it binds the socket again at once. Sent only to the
    /// process this connection reached, while it runs (the same start time: not a later process
    /// that reused its pid), and only if it catches SIGUSR1 (a master of an earlier version does
    /// not, and would be ended by it). Returns the pid signalled.
    pub fn ask_to_check_socket(&self) -> Option<u32> {
        let (pid, start) = self.master?;
        if self.closed || desk_common::procfs::state_and_start(pid).map(|(_, s)| s) != Some(start) {
            return None;
        }
        if !desk_common::procfs::catches(pid, libc::SIGUSR1) {
            return None;
        }
        let target = nix::unistd::Pid::from_raw(i32::try_from(pid).ok()?);
        nix::sys::signal::kill(target, nix::sys::signal::Signal::SIGUSR1).ok().map(|()| pid)
    }

    pub fn generation(&self) -> Option<u32> {
        self.view.as_ref().map(|v| v.generation)
    }

    fn send(&mut self, frame: &Frame) {
        frame.encode(&mut self.out);
    }

    pub fn request_snapshot(&mut self, token: engine::Token) {
        self.send(&Frame::SnapshotRequest { history: None });
        self.snapshots.push_back(token);
        self.flush();
    }

    pub fn write_input(&mut self, token: engine::Token, bytes: Vec<u8>) {
        self.send(&Frame::Input(bytes));
        self.send(&Frame::Ping(token));
        self.writes.push_back((token, None));
        self.flush();
    }

    /// Write what the socket takes now. Errors close the connection.
    pub fn flush(&mut self) {
        while self.out_off < self.out.len() {
            match self.stream.write(&self.out[self.out_off..]) {
                Ok(0) => {
                    self.closed = true;
                    return;
                }
                Ok(n) => self.out_off += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.closed = true;
                    return;
                }
            }
        }
        self.out.clear();
        self.out_off = 0;
    }

    /// Block (briefly) until everything queued has been written: used right before a
    /// failpoint, so the crash happens after the bytes reached the master.
    pub fn flush_blocking(&mut self) {
        for _ in 0..200 {
            self.flush();
            if self.out.is_empty() || self.closed {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// Read and interpret what the master sent; inputs for the engine are appended to `inbox`.
    pub fn readable(&mut self, rules: &mut dyn FnMut(&str) -> Rc<RuleSet>, inbox: &mut VecDeque<Observed>) {
        let mut buf = [0u8; 64 * 1024];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => {
                    self.closed = true;
                    break;
                }
                Ok(n) => {
                    self.decoder.push(&buf[..n]);
                    while !self.closed {
                        match self.decoder.next_frame() {
                            Ok(Some(frame)) => self.on_frame(frame, rules, inbox),
                            Ok(None) => break,
                            Err(e) => {
                                tracing::warn!(session = %self.session, "malformed frame from the master: {e}");
                                self.closed = true;
                                break;
                            }
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.closed = true;
                    break;
                }
            }
            if self.closed {
                break;
            }
        }
    }

    fn on_frame(&mut self, frame: Frame, rules: &mut dyn FnMut(&str) -> Rc<RuleSet>, inbox: &mut VecDeque<Observed>) {
        match frame {
            Frame::Welcome { version, .. } if !desk_wire::welcome_accepted(self.hello, version) => {
                // Its frames may mean something else: never type into it.
                self.refuse(format!(
                    "its master answered in protocol version {version} to a HELLO in {}; this daemon speaks {OLDEST_PROTOCOL_VERSION} to {PROTOCOL_VERSION}",
                    self.hello
                ));
            }
            Frame::Welcome { info, .. } => {
                let state = info.state.clone();
                let (lifecycle, activity, wait, ready) = match &state {
                    Some(s) => (s.lifecycle.value, s.activity.value, s.wait.clone(), s.ready),
                    None => (Lifecycle::Running, Activity::Unknown, None, true),
                };
                self.seen.push(Seen::Welcome { generation: info.generation, state: state.clone() });
                let view = SessionView {
                    name: self.session.clone(),
                    generation: info.generation,
                    lifecycle,
                    ready: ready && lifecycle == Lifecycle::Running,
                    activity,
                    wait,
                    bracketed_paste: false,
                    rules: rules(&info.provider),
                };
                self.view = Some(view.clone());
                self.welcomed_now = true;
                inbox.push_back(Observed::live(Input::Session(view)));
            }
            Frame::Event(map) => {
                let Ok(event) = Event::from_json_map(map) else { return };
                self.on_event(event, inbox);
            }
            Frame::Snapshot(reply) => {
                let Some(token) = self.snapshots.pop_front() else { return };
                if let Some(view) = &mut self.view {
                    view.bracketed_paste = reply.screen.modes.bracketed_paste;
                }
                let screen = ScreenView {
                    lines: reply.screen.lines.clone(),
                    bracketed_paste: reply.screen.modes.bracketed_paste,
                    last_typed_ms: reply.last_input_ms,
                    canonical: reply.canonical,
                    cursor_row: usize::from(reply.screen.cursor.row),
                    cursor_col: usize::from(reply.screen.cursor.col),
                    foreground: reply.foreground.clone(),
                };
                inbox.push_back(Observed::live(Input::Snapshot { token, result: Ok(screen) }));
            }
            Frame::Pong(nonce) => {
                if let Some((token, refused)) = self.writes.pop_front() {
                    if token != nonce {
                        tracing::warn!(session = %self.session, "acknowledgement out of order");
                    }
                    let result = match refused {
                        Some(why) => Err(WriteError::Refused(why)),
                        None => Ok(()),
                    };
                    inbox.push_back(Observed::live(Input::Written { token, result }));
                }
            }
            Frame::Error { code: ErrorCode::UnsupportedVersion, message } if self.view.is_none() => {
                self.refuse(format!("its master refused this daemon's protocol version {}: {message}", self.hello));
            }
            Frame::Error { code, message } => match code {
                ErrorCode::InputFull | ErrorCode::Exiting | ErrorCode::NotPermitted => {
                    if let Some((_, refused)) = self.writes.front_mut() {
                        refused.get_or_insert(message);
                    }
                }
                _ => {
                    tracing::warn!(session = %self.session, ?code, "the master reported: {message}");
                }
            },
            _ => {}
        }
    }

    fn refuse(&mut self, why: String) {
        self.refused = Some(why);
        self.closed = true;
        self.out.clear();
        self.out_off = 0;
    }

    fn on_event(&mut self, event: Event, inbox: &mut VecDeque<Observed>) {
        let Some(view) = &mut self.view else { return };
        if event.generation != view.generation {
            return;
        }
        if matches!(event.body, EventBody::State { .. } | EventBody::Exit { .. } | EventBody::Notification { .. }) {
            self.seen.push(Seen::Event(event.clone()));
        }
        let journal = Some((event.seq, event.ts_ms));
        match event.body {
            EventBody::State { change, wait, .. } => {
                match change {
                    AxisChange::Lifecycle { to, .. } => {
                        view.lifecycle = to;
                        view.ready = view.lifecycle == Lifecycle::Running;
                    }
                    AxisChange::Activity { to, .. } => {
                        view.activity = to;
                        view.wait = wait;
                    }
                    AxisChange::Health { .. } => return,
                }
                inbox.push_back(Observed { input: Input::Session(view.clone()), journal });
            }
            EventBody::Mode { mode: Mode::BracketedPaste, on } => {
                view.bracketed_paste = on;
            }
            EventBody::Hook { event: name, detail, prompt, .. } => {
                let input = Input::Hook {
                    session: self.session.clone(),
                    generation: view.generation,
                    event: name,
                    detail,
                    prompt,
                    at_ms: event.ts_ms,
                };
                inbox.push_back(Observed { input, journal });
            }
            _ => {}
        }
    }

    /// Ask the master to journal an event of the daemon's (a `notify` record).
    pub fn record(&mut self, event: &desk_wire::operator::ClientEvent) {
        if self.view.is_some() && !self.closed {
            self.send(&event.to_frame());
            self.flush();
        }
    }

    /// The connection is over: answer everything still pending.
    pub fn fail_pending(&mut self, inbox: &mut VecDeque<Input>) {
        for token in self.snapshots.drain(..) {
            inbox.push_back(Input::Snapshot { token, result: Err("the session went away".into()) });
        }
        for (token, refused) in self.writes.drain(..) {
            let result = match refused {
                Some(why) => Err(WriteError::Refused(why)),
                None => Err(WriteError::Unknown("the session went away before acknowledging".into())),
            };
            inbox.push_back(Input::Written { token, result });
        }
    }
}
