//! The master's session policy: who may connect, what each connection may do, when one is
//! closed, what size the session has, and how a stop or an exit plays out — with no I/O.
//!
//! Owns, per connection: the handshake deadline ([`HANDSHAKE_DEADLINE`]), the role rules
//! (`Role::streams_output`, `may_input`, `may_signal` in desk-wire are the vocabulary; RESIZE is
//! for controllers, HOOK for every role but viewer), the slow-client rule (a client whose
//! backlog was discarded and that has not drained since is closed [`SLOW_CLIENT_DEADLINE`] after
//! it fell behind), the client count limit ([`MAX_CLIENTS`]), and for the session: its size
//! ([`SizePolicy`]), the kill escalation ([`STOP_GRACE`] for a stop of the master itself) and
//! the exit flush ([`EXIT_FLUSH_DEADLINE`]).
//!
//! Shape (quinn-proto's): [`SessionPolicy`] is a state machine fed inputs — a connection
//! accepted or closed, a typed frame received, a queue's state, a timer due, the child's exit —
//! each with `now`; it queues [`Effect`]s that the master's event loop takes with
//! [`SessionPolicy::poll_effect`] and carries out (send this frame, close that client, arm this
//! timer, resize the terminal, signal the session), and it returns its [`Verdict`] on each
//! frame, handing back the content the loop is to act on (INPUT bytes to queue, a HOOK or EVENT
//! to interpret, a SNAPSHOT_REQUEST to answer). The loop routes; this decides.
//!
//! Invariants: a connection is closed at most once and gets no effect after it was closed
//! (except the cancellation of its timers); a connection's timers are cancelled when it leaves
//! or no longer needs them; the session's size only ever changes to a size `valid_size`
//! accepts, and only through a controller (viewers, observers and queries never resize).
//! Byte-free: the bytes of OUTPUT and INPUT, and the per-client queues that hold them, stay in
//! the loop; the output hot path does not pass through here. May not depend on mio, nix, libc,
//! files or sockets, and never reads the clock.

mod handover;
mod name;
mod size;
#[cfg(test)]
mod tests;

pub use handover::{SavedConn, SavedPolicy};
pub use name::{MAX_NAME_LEN, NameError, check_name, parse_size};
pub use size::{SizePolicy, UnknownSizePolicy};

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use desk_wire::{ErrorCode, Frame, OLDEST_PROTOCOL_VERSION, PROTOCOL_VERSION, Role};

/// A connection must complete its HELLO within this long. Every desk client sends HELLO at once;
/// a peer that connects and says nothing (a stuck script, a port scanner of sockets) would
/// otherwise hold one of the session's client slots for ever.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);

/// A client that stays behind the stream this long (its backlog discarded and not drained
/// since) is disconnected: it is not reading at all, and holding its queue helps nobody.
pub const SLOW_CLIENT_DEADLINE: Duration = Duration::from_secs(15);

/// After the child exits, clients get this long to read the last output and the EXIT frame.
pub const EXIT_FLUSH_DEADLINE: Duration = Duration::from_secs(2);

/// Grace period when the master itself is asked to stop (SIGTERM/SIGINT) before the session
/// gets SIGKILL: a program that handles SIGTERM (restores its terminal, writes its state) does
/// so in well under a second, and a shutdown that stops many masters at once is not held up.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// Most clients one master serves at once; each may hold up to its queue limits (1 MiB of
/// output and 1 MiB of replies), so 64 keep a master within about 128 MiB even when all stall,
/// far beyond the handful of terminals and the one daemon a session normally has.
pub const MAX_CLIENTS: usize = 64;

/// SIGTERM's number on Linux (the only platform desk runs on), spelt out because this crate
/// may not depend on libc.
const SIGTERM: i32 = 15;

/// One connection, named by the loop (its poll token). Never reused within a master's life, so
/// a stale timer can never reach a newer connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientId(pub u64);

/// The timers the policy arms; the loop reports them back through [`SessionPolicy::on_timer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Timer {
    /// This client's handshake deadline: close it if it has not said HELLO.
    Handshake(ClientId),
    /// Check whether this client is still behind the output stream.
    SlowClient(ClientId),
    /// A kill's grace period ended: SIGKILL the session if it still runs.
    Escalate,
    /// The exit flush deadline passed: the loop may end with clients still unread.
    ExitFlush,
}

/// What the loop must do. Effects come out in the order they must be carried out.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Answer the client's HELLO with WELCOME (the loop fills in the session's info), and from
    /// now on treat it as `role`.
    /// Answer WELCOME in `version`, the version of the connection from now on.
    Welcome { client: ClientId, role: Role, version: u16 },
    /// The client streams output: its first stream frame is a keyframe.
    StartStream { client: ClientId },
    /// A client (not a query) attached: announce it.
    Attached { client: ClientId, role: Role },
    /// Queue a control frame for the client (a reply or a refusal); the connection stays open.
    Send { client: ClientId, frame: Frame },
    /// Send `error`, read nothing more from the client, and close it once its queue is written.
    Close { client: ClientId, error: Frame },
    /// The client asked to go (DETACH, or an ERROR of its own): close it without a reply.
    Release { client: ClientId },
    /// The client is too slow: discard its backlog, send `error` best-effort and close it now,
    /// without waiting for a queue it does not read.
    Evict { client: ClientId, error: Frame },
    /// The child exited: send the client what it is owed (a pending keyframe, then EXIT) and
    /// close it once that is written.
    Exit { client: ClientId },
    /// Arm a timer (a later arming of the same timer does not replace an earlier one).
    Arm { at: Instant, timer: Timer },
    /// Forget every pending instance of a timer.
    Cancel { timer: Timer },
    /// Resize the session's terminal (and the screen model) to this valid size.
    Resize { cols: u16, rows: u16 },
    /// Send `signal` to the session's process group; with `helpers`, also to the session's
    /// processes that left the group (a kill ends the whole session).
    Signal { signal: i32, helpers: bool },
    /// The grace period ran out: SIGKILL the session's helpers and, with `group`, its process
    /// group (the child still runs).
    Kill { group: bool },
}

/// The policy's verdict on the frame at hand ([`SessionPolicy::on_frame`]): what the loop is to
/// do with its content, which the policy hands back rather than keeping (it holds no bytes).
/// Everything else a frame causes (replies, refusals, closes, resizes, signals) comes out as
/// [`Effect`]s, which the loop carries out before acting on the verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Nothing for the loop beyond the effects: the frame was answered, refused or consumed.
    Done,
    /// The client's INPUT is permitted: queue these bytes for the child and report the outcome
    /// with [`SessionPolicy::on_input_queued`] (or refuse them when the queue is full).
    Input(Vec<u8>),
    /// Answer the client's SNAPSHOT_REQUEST, with the history lines it asks for.
    Snapshot { history: Option<desk_wire::HistoryRequest> },
    /// Interpret the client's HOOK frame.
    Hook(serde_json::Map<String, serde_json::Value>),
    /// Act on and record the client's EVENT frame: `keys` or `answer` (type them; the
    /// session's terminal is open), `notify` (record it) or `upgrade` (hand the master over),
    /// `desk_wire::operator::ClientEvent`.
    Event(serde_json::Map<String, serde_json::Value>),
    /// A streaming client hands its terminal over, says it is ready, or paints on it
    /// (docs/protocol.md §5.16): the loop owns the descriptor and carries it out.
    Terminal(desk_wire::TerminalOp),
}

/// The policy's view of one connection.
#[derive(Debug)]
struct Conn {
    /// Set by HELLO; `None` until then.
    role: Option<Role>,
    /// Closed (or closing) by the policy or by its own request; nothing more is decided for it.
    closed: bool,
    /// The terminal size this streaming client (controller or viewer) reported, if valid.
    size: Option<(u16, u16)>,
    /// When this controller last said HELLO or had INPUT queued.
    last_active: Instant,
    /// When this client fell behind the output stream, if it has not drained since.
    behind_since: Option<Instant>,
}

/// The master's session policy. See the module documentation.
#[derive(Debug)]
pub struct SessionPolicy {
    size_policy: SizePolicy,
    /// The session's size, as last applied.
    size: (u16, u16),
    clients: BTreeMap<ClientId, Conn>,
    /// The most recently active controller.
    latest: Option<ClientId>,
    child_exited: bool,
    terminal_open: bool,
    /// A signal with a grace period was sent; later ones do not extend it.
    kill_requested: bool,
    /// The escalation timer is armed and has not fired.
    escalation_armed: bool,
    /// The child was sent SIGKILL because it outlived its grace period.
    escalated: bool,
    /// When the exit flush ends.
    exit_deadline: Option<Instant>,
    /// The newest protocol version this master speaks ([`desk_wire::negotiate`]).
    speaks: u16,
    effects: VecDeque<Effect>,
}

impl SessionPolicy {
    /// A session whose terminal starts at `size` (valid), under `size_policy`.
    pub fn new(size: (u16, u16), size_policy: SizePolicy) -> SessionPolicy {
        SessionPolicy {
            size_policy,
            size,
            clients: BTreeMap::new(),
            latest: None,
            child_exited: false,
            terminal_open: true,
            kill_requested: false,
            escalation_armed: false,
            escalated: false,
            exit_deadline: None,
            speaks: PROTOCOL_VERSION,
            effects: VecDeque::new(),
        }
    }

    /// The same master speaking protocol versions up to `version` only: 1 is version 1's rule
    /// (exactly one version, no negotiation), what a master started by a desk of that version
    /// does — desk-master's compatibility mode, the peer the tests of negotiation talk to.
    pub fn speaking(mut self, version: u16) -> SessionPolicy {
        self.speaks = version;
        self
    }

    /// The newest protocol version this master speaks.
    pub fn speaks(&self) -> u16 {
        self.speaks
    }

    /// The next effect to carry out, in order.
    pub fn poll_effect(&mut self) -> Option<Effect> {
        self.effects.pop_front()
    }

    // ----- queries -----

    /// The session's size, as last applied.
    pub fn size(&self) -> (u16, u16) {
        self.size
    }

    /// The size of a streaming client's terminal (a controller's or viewer's HELLO and
    /// RESIZE), if it reported a valid one: the session's size follows the controllers', and
    /// the loop renders a client whose size differs from the session's a view of its own.
    pub fn client_size(&self, client: ClientId) -> Option<(u16, u16)> {
        self.clients.get(&client).and_then(|c| c.size)
    }

    pub fn size_policy(&self) -> SizePolicy {
        self.size_policy
    }

    /// Connections open (welcomed or not), as counted against [`MAX_CLIENTS`].
    pub fn client_count(&self) -> usize {
        self.clients.len()
    }

    /// Whether the session was SIGKILLed for outliving a grace period.
    pub fn escalated(&self) -> bool {
        self.escalated
    }

    /// A kill's escalation is still to come: after the child's exit, the loop waits for the
    /// session's helpers until then, or they would outlive the master unescalated.
    pub fn escalation_pending(&self) -> bool {
        self.escalation_armed
    }

    /// Whether the loop may end: the child has exited, and every client has read what it was
    /// owed (`all_drained`) or the exit flush deadline has passed.
    pub fn may_finish(&self, all_drained: bool, now: Instant) -> bool {
        self.exit_deadline.is_some_and(|deadline| all_drained || now >= deadline)
    }

    // ----- inputs -----

    /// A connection was accepted. `Err` carries the refusal to write before dropping it (the
    /// session is full); otherwise it is admitted and has [`HANDSHAKE_DEADLINE`] to say HELLO.
    pub fn on_connect(&mut self, client: ClientId, now: Instant) -> Result<(), Frame> {
        if self.clients.len() >= MAX_CLIENTS {
            return Err(Frame::error(
                ErrorCode::SessionFull,
                format!("the session already has {MAX_CLIENTS} clients connected; try again when one has left"),
            ));
        }
        self.clients
            .insert(client, Conn { role: None, closed: false, size: None, last_active: now, behind_since: None });
        self.effect(Effect::Arm { at: now + HANDSHAKE_DEADLINE, timer: Timer::Handshake(client) });
        Ok(())
    }

    /// Connections are gone (the loop removed them, for whatever reason). Reported together,
    /// so the session's size is decided once, among the controllers that remain.
    pub fn on_closed(&mut self, gone: &[ClientId]) {
        let mut resize = false;
        for client in gone {
            if let Some(conn) = self.clients.remove(client) {
                self.effect(Effect::Cancel { timer: Timer::Handshake(*client) });
                self.effect(Effect::Cancel { timer: Timer::SlowClient(*client) });
                resize |= conn.role == Some(Role::Controller);
            }
            if self.latest == Some(*client) {
                self.latest = None;
            }
        }
        if resize {
            if self.latest.is_none() {
                // The most recently active of the remaining controllers takes over.
                self.latest = self
                    .clients
                    .iter()
                    .filter(|(_, c)| c.role == Some(Role::Controller) && !c.closed)
                    .max_by_key(|(id, c)| (c.last_active, **id))
                    .map(|(id, _)| *id);
            }
            self.apply_size();
        }
    }

    /// A frame arrived from `client`, decoded: the verdict says what the loop does with its
    /// content, after carrying out the effects queued for it.
    pub fn on_frame(&mut self, client: ClientId, frame: Frame, now: Instant) -> Verdict {
        let Some(conn) = self.clients.get(&client) else { return Verdict::Done };
        if conn.closed {
            return Verdict::Done;
        }
        let Some(role) = conn.role else {
            self.on_hello(client, &frame, now);
            return Verdict::Done;
        };
        let refuse = |what: &str| Effect::Send {
            client,
            frame: Frame::error(ErrorCode::NotPermitted, format!("a {role:?} client may not {what}").to_lowercase()),
        };
        match frame {
            Frame::Input(bytes) => {
                if !role.may_input() {
                    self.effect(refuse("send input"));
                } else if self.child_exited || !self.terminal_open {
                    self.effect(Effect::Send {
                        client,
                        frame: Frame::error(ErrorCode::Exiting, "the session is exiting"),
                    });
                } else {
                    return Verdict::Input(bytes);
                }
            }
            Frame::Resize { cols, rows } => match role {
                Role::Controller => {
                    self.note_size(client, cols, rows);
                    self.apply_size();
                }
                // A viewer's size is its own view's (the loop renders it a view of that size);
                // it never changes the session's.
                Role::Viewer => self.note_size(client, cols, rows),
                // An operator's `desk resize`: the only way a `fixed` session changes size.
                // Under the other policies the size follows the controllers and a one-off
                // resize would be undone by the next keystroke, so it is refused.
                Role::Query => {
                    if self.size_policy != SizePolicy::Fixed {
                        let reason = format!(
                            "the session's size follows its controllers (size policy {}); only a session \
                             started with --size-policy fixed is resized by hand",
                            self.size_policy
                        );
                        self.effect(Effect::Send { client, frame: Frame::error(ErrorCode::NotPermitted, reason) });
                    } else if desk_term::screen::valid_size(cols, rows) && (cols, rows) != self.size {
                        self.size = (cols, rows);
                        self.effect(Effect::Resize { cols, rows });
                    }
                }
                Role::Observer => self.effect(refuse("resize the session")),
            },
            Frame::SnapshotRequest { history } => return Verdict::Snapshot { history },
            Frame::Ping(nonce) => self.effect(Effect::Send { client, frame: Frame::Pong(nonce) }),
            Frame::Pong(_) => {}
            Frame::Detach | Frame::Error { .. } => self.release(client),
            Frame::Signal { signal, grace_ms } => {
                if !role.may_signal() {
                    self.effect(refuse("signal the session"));
                    return Verdict::Done;
                }
                self.signal(i32::from(signal), Duration::from_millis(u64::from(grace_ms)), now);
            }
            Frame::Hook(body) => {
                if role == Role::Viewer {
                    self.effect(refuse("report hooks"));
                } else {
                    return Verdict::Hook(body);
                }
            }
            Frame::Hello { .. } => {
                self.close(client, ErrorCode::BadHello, "HELLO may be sent only once per connection")
            }
            // An operator's keys or answer, or the daemon's notify record (docs/protocol.md
            // §5.9): every role but a read-only viewer; keys and answers only while the
            // terminal takes input.
            // An operator's `desk upgrade` (docs/upgrading.md): every role but a read-only
            // viewer, while the session runs. A master in version 1's compatibility mode refuses
            // it as a master from before in-place upgrades does (below: an EVENT type it does
            // not know), which is what the tests of that refusal talk to.
            Frame::Event(body) if self.speaks > 1 && body.get("type").is_some_and(|t| t == "upgrade") => {
                if role == Role::Viewer {
                    self.effect(refuse("upgrade the session's master"));
                } else if let Some(why) = self.handover_refusal() {
                    self.effect(Effect::Send {
                        client,
                        frame: Frame::error(ErrorCode::NotPermitted, format!("cannot hand over now: {why}")),
                    });
                } else {
                    return Verdict::Event(body);
                }
            }
            Frame::Event(body) if body.get("type").is_some_and(|t| t == "keys" || t == "answer" || t == "notify") => {
                let types = body.get("type").is_some_and(|t| t == "keys" || t == "answer");
                if role == Role::Viewer {
                    self.effect(refuse("send keys, answers or notify events"));
                } else if types && (self.child_exited || !self.terminal_open) {
                    self.effect(Effect::Send {
                        client,
                        frame: Frame::error(ErrorCode::Exiting, "the session is exiting"),
                    });
                } else {
                    return Verdict::Event(body);
                }
            }
            // A client's side of handing its terminal over: a client that takes the stream, of a
            // master that speaks version 3 (one in version 1 or 2's compatibility mode does not
            // know the frame type, and closes as such a master does).
            Frame::Terminal(
                op @ (desk_wire::TerminalOp::Take { .. }
                | desk_wire::TerminalOp::Ready
                | desk_wire::TerminalOp::Paint(_)),
            ) if self.speaks >= desk_wire::TERMINAL_VERSION => {
                if role.streams_output() {
                    return Verdict::Terminal(op);
                }
                self.effect(refuse("hand over a terminal"));
            }
            Frame::Terminal(op) if self.speaks >= desk_wire::TERMINAL_VERSION => {
                let reason = format!("TERMINAL op {} is sent by the master, not by clients", op.code());
                self.close(client, ErrorCode::Malformed, reason);
            }
            Frame::Terminal(_) => {
                let reason = "unknown frame type 0x11".to_string();
                self.close(client, ErrorCode::UnknownType, reason);
            }
            Frame::Welcome { .. }
            | Frame::Output(_)
            | Frame::Keyframe { .. }
            | Frame::Snapshot(_)
            | Frame::Event(_)
            | Frame::Exit { .. } => {
                let reason = format!("{} frames are sent by the master, not by clients", frame.kind().name());
                self.close(client, ErrorCode::Malformed, reason);
            }
        }
        Verdict::Done
    }

    /// The client's byte stream could not be decoded: the stream cannot be resynchronised.
    pub fn on_undecodable(&mut self, client: ClientId, code: ErrorCode, reason: String) {
        if self.clients.get(&client).is_some_and(|c| !c.closed) {
            self.close(client, code, reason);
        }
    }

    /// The client's INPUT (permitted by [`Verdict::Input`]) is now queued for the child. A
    /// controller's input makes it the most recently active one.
    pub fn on_input_queued(&mut self, client: ClientId, now: Instant) {
        if self.clients.get(&client).is_some_and(|c| c.role == Some(Role::Controller)) {
            self.touch_controller(client, now);
        }
    }

    /// The client's output backlog was discarded (it fell behind) at `at`, and it has not
    /// drained since. Counts only when it was not behind already.
    pub fn on_backlog_discarded(&mut self, client: ClientId, at: Instant) {
        let Some(conn) = self.clients.get_mut(&client) else { return };
        if conn.behind_since.is_some() {
            return;
        }
        conn.behind_since = Some(at);
        self.effect(Effect::Arm { at: at + SLOW_CLIENT_DEADLINE, timer: Timer::SlowClient(client) });
    }

    /// The client's queue drained: whatever it fell behind, it has caught up.
    pub fn on_drained(&mut self, client: ClientId) {
        let Some(conn) = self.clients.get_mut(&client) else { return };
        if conn.behind_since.take().is_some() {
            self.effect(Effect::Cancel { timer: Timer::SlowClient(client) });
        }
    }

    /// A timer the policy armed is due.
    pub fn on_timer(&mut self, timer: Timer, now: Instant) {
        match timer {
            Timer::Handshake(client) => {
                if self.clients.get(&client).is_some_and(|c| c.role.is_none() && !c.closed) {
                    let reason = format!("no HELLO within {} s of connecting", HANDSHAKE_DEADLINE.as_secs());
                    self.close(client, ErrorCode::BadHello, reason);
                }
            }
            Timer::SlowClient(client) => {
                // A client being closed is evicted too: it waits for a queue it does not read.
                let Some(conn) = self.clients.get_mut(&client) else { return };
                match conn.behind_since {
                    Some(since) if now.saturating_duration_since(since) >= SLOW_CLIENT_DEADLINE => {
                        conn.closed = true;
                        conn.behind_since = None;
                        let reason = format!(
                            "disconnected: stayed behind the output stream for more than {} s",
                            SLOW_CLIENT_DEADLINE.as_secs()
                        );
                        self.effect(Effect::Evict { client, error: Frame::error(ErrorCode::TooSlow, reason) });
                    }
                    // Not due yet (the timer fired early): look again at the deadline. A drain
                    // cancels the timer, so a later fall arms its own.
                    Some(since) => {
                        self.effect(Effect::Arm { at: since + SLOW_CLIENT_DEADLINE, timer: Timer::SlowClient(client) })
                    }
                    None => {}
                }
            }
            Timer::Escalate => {
                self.escalation_armed = false;
                let group = !self.child_exited;
                self.escalated |= group;
                self.effect(Effect::Kill { group });
            }
            Timer::ExitFlush => {}
        }
    }

    /// The master was asked to stop (SIGTERM, SIGINT): terminate the session, escalating after
    /// [`STOP_GRACE`].
    pub fn on_stop_requested(&mut self, now: Instant) {
        self.signal(SIGTERM, STOP_GRACE, now);
    }

    /// The child's terminal closed: input can no longer reach it.
    pub fn on_terminal_closed(&mut self) {
        self.terminal_open = false;
    }

    /// The child exited (its exit is recorded). Every client is told and closed; the loop may
    /// end once they have read it, or after [`EXIT_FLUSH_DEADLINE`].
    pub fn on_child_exited(&mut self, now: Instant) {
        if self.child_exited {
            return;
        }
        self.child_exited = true;
        let open: Vec<(ClientId, bool)> =
            self.clients.iter().filter(|(_, c)| !c.closed).map(|(id, c)| (*id, c.role.is_some())).collect();
        for (client, welcomed) in open {
            if welcomed {
                if let Some(conn) = self.clients.get_mut(&client) {
                    conn.closed = true;
                }
                self.effect(Effect::Exit { client });
            } else {
                // No WELCOME yet, and no HELLO will be read now: a client's first frame is
                // WELCOME or ERROR, never EXIT.
                self.close(client, ErrorCode::Exiting, "the session has exited");
            }
        }
        let deadline = now + EXIT_FLUSH_DEADLINE;
        self.exit_deadline = Some(deadline);
        self.effect(Effect::Arm { at: deadline, timer: Timer::ExitFlush });
    }

    // ----- rules -----

    fn on_hello(&mut self, client: ClientId, frame: &Frame, now: Instant) {
        let &Frame::Hello { version, role, cols, rows, .. } = frame else {
            let reason = format!("expected HELLO, got {}", frame.kind().name());
            self.close(client, ErrorCode::BadHello, reason);
            return;
        };
        let Some(version) = desk_wire::negotiate(self.speaks, version) else {
            let speaks = match self.speaks {
                1 => "1".to_string(),
                n => format!("{OLDEST_PROTOCOL_VERSION} to {n}"),
            };
            let reason = format!("protocol version {version} is not supported (this master speaks {speaks})");
            self.close(client, ErrorCode::UnsupportedVersion, reason);
            return;
        };
        let Some(conn) = self.clients.get_mut(&client) else { return };
        conn.role = Some(role);
        if role.streams_output() {
            // A terminal that does not know its size (0x0) leaves the session's size alone.
            conn.size = desk_term::screen::valid_size(cols, rows).then_some((cols, rows));
        }
        self.effect(Effect::Cancel { timer: Timer::Handshake(client) });
        self.effect(Effect::Welcome { client, role, version });
        if self.child_exited {
            self.close(client, ErrorCode::Exiting, "the session has exited");
            return;
        }
        if role.streams_output() {
            self.effect(Effect::StartStream { client });
        }
        if role != Role::Query {
            self.effect(Effect::Attached { client, role });
        }
        if role == Role::Controller {
            self.touch_controller(client, now);
        }
    }

    /// A streaming client's terminal reported its size; one that does not know it (0x0, or
    /// any size `valid_size` refuses) keeps the last it knew.
    fn note_size(&mut self, client: ClientId, cols: u16, rows: u16) {
        if let Some(conn) = self.clients.get_mut(&client)
            && desk_term::screen::valid_size(cols, rows)
        {
            conn.size = Some((cols, rows));
        }
    }

    /// The controller said HELLO or typed: it is the most recently active one.
    fn touch_controller(&mut self, client: ClientId, now: Instant) {
        let Some(conn) = self.clients.get_mut(&client) else { return };
        conn.last_active = now;
        if self.latest != Some(client) {
            self.latest = Some(client);
            self.apply_size();
        }
    }

    /// Resize the session if its size policy now asks for another size.
    fn apply_size(&mut self) {
        let controllers = self
            .clients
            .iter()
            .filter(|(_, c)| c.role == Some(Role::Controller) && !c.closed)
            .filter_map(|(id, c)| c.size.map(|size| (*id, size)));
        let latest = self.latest.and_then(|id| self.clients.get(&id)).and_then(|c| c.size);
        let Some((cols, rows)) = self.size_policy.choose(latest, controllers.map(|(_, size)| size)) else { return };
        if (cols, rows) != self.size && desk_term::screen::valid_size(cols, rows) {
            self.size = (cols, rows);
            self.effect(Effect::Resize { cols, rows });
        }
    }

    fn signal(&mut self, signal: i32, grace: Duration, now: Instant) {
        if self.child_exited {
            return;
        }
        let helpers = !grace.is_zero();
        self.effect(Effect::Signal { signal, helpers });
        if helpers && !self.kill_requested {
            self.kill_requested = true;
            self.escalation_armed = true;
            self.effect(Effect::Arm { at: now + grace, timer: Timer::Escalate });
        }
    }

    fn close(&mut self, client: ClientId, code: ErrorCode, reason: impl Into<String>) {
        let Some(conn) = self.clients.get_mut(&client) else { return };
        conn.closed = true;
        self.effect(Effect::Close { client, error: Frame::error(code, reason) });
    }

    fn release(&mut self, client: ClientId) {
        let Some(conn) = self.clients.get_mut(&client) else { return };
        conn.closed = true;
        self.effect(Effect::Release { client });
    }

    fn effect(&mut self, effect: Effect) {
        self.effects.push_back(effect);
    }
}
