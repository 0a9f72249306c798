//! The master's event loop: one thread, one `mio::Poll`, no blocking calls.
//!
//! Owns the routing between the PTY, the listening socket, the clients, signals and timers. It
//! reads the PTY until it would block on every readiness (bounded per turn for fairness), feeds
//! every byte to the screen model, and queues each chunk once, shared, to every streaming
//! client; input goes to the child through a bounded queue drained on writability. Who may
//! connect, what each client may do, when one is closed, the session's size, kill escalation and
//! the exit flush are decided by the session policy (`desk_core::session`): this loop feeds it
//! what it observes, with the time, carries out the effects it returns ([`Master::carry`]) and
//! acts on its verdict on each client frame (`Verdict`: the INPUT bytes to queue, the HOOK or
//! EVENT to interpret, the SNAPSHOT_REQUEST to answer). [`Master`] is a composition of owned
//! parts, each keeping its own state and invariants behind its methods: the session's terminal
//! ([`Terminal`](super::terminal::Terminal): the PTY, its read buffer, the input queue), the
//! screen model and its log ([`SessionScreen`]), the state authority and what feeds it
//! ([`AgentState`]), the clients ([`ClientTable`](super::clients::ClientTable)), the listening
//! socket ([`Socket`]), the repaints of views ([`Views`]), the journal
//! ([`JournalSink`](super::journal_sink::JournalSink)), the rate limits of titles and noise
//! (`super::noise`), an operator's waiting keys ([`KeyQueue`](super::typing::KeyQueue)), the
//! timers and the info file ([`InfoFile`](super::info::InfoFile)). Its fields are private to this file: the modules that
//! extend it (answer, events, hook, operator, handover) go through its methods. A client's
//! terminal size is kept in one place, the policy (`SessionPolicy::client_size`).
//! Invariants: the PTY is read no matter how slow any client is; no client can block the loop or
//! another client; the output path does not pass through the policy (only a client falling
//! behind or catching up is reported, once per turn); the child's exit is recorded durably
//! before clients are told and before the socket disappears.

use anyhow::{Context, Result};
use desk_core::session::{Effect, SessionPolicy, SizePolicy, Verdict};
use mio::net::UnixListener;
use mio::{Events, Interest, Poll, Token};
use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use nix::unistd::Pid;
use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGTERM, SIGUSR1};
use signal_hook_mio::v1_0::Signals;
use std::io;
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tracing::{debug, info, warn};

use super::client::{Client, Gone, keyframe_chunks, output_chunks, output_frame};
use super::clients::{client_id, token_of};
use super::held::{Held, Stage, TERMINAL_BIT, recv_with_fd};
use super::screen::SessionScreen;
use super::socket::{LISTENER, Socket};
use super::state::{AgentState, Announced};
use super::terminal::{ReadEnd, interest};
use super::timers::{Timer, Timers};
use super::views::Views;
use desk_common::journal::Journal;
use desk_common::paths::SessionPaths;
use desk_common::session::{self, ExitRecord, SessionMeta};
use desk_core::state::{Authority, Change};
use desk_term::screen::Screen;
use desk_wire::events::EventBody;
use desk_wire::{ErrorCode, ExitStatus, Frame, MAX_PAYLOAD, Role, SessionInfo, SnapshotReply, TerminalOp};

const PTY: Token = Token(1);
const SIGNALS: Token = Token(2);
/// Client tokens start here and are never reused within a master's life, so a stale event or
/// timer can never reach a newer client.
const FIRST_CLIENT: usize = 16;

/// 8 KiB per client read, on the stack: a client sends small frames (HELLO, keystrokes,
/// requests), and a large paste just takes more reads. Stack pages once touched stay resident
/// for the master's life, so this is kept small; and it is not the PTY's heap buffer, which an
/// idle master has given back: a `desk ls` against hundreds of idle masters would otherwise
/// make each of them fault that buffer in again (measured: most of a master's 60 µs per
/// listing went to page faults).
const CLIENT_READ_CHUNK: usize = 8 * 1024;

/// Stop reading the PTY after this many bytes in one loop turn and come back after serving
/// clients and timers: a child that writes faster than we parse cannot starve everything else.
const PTY_TURN_BUDGET: usize = 1 << 20;

/// Bytes reserved for the exit record: it is a few hundred bytes plus a title of at most
/// 1 KiB, so 4 KiB (one page or block) always holds it.
const EXIT_RECORD_RESERVE: usize = 4096;

/// What start-up hands to the loop.
pub(super) struct Parts {
    pub files: SessionPaths,
    pub poll: Poll,
    pub listener: UnixListener,
    pub pty: OwnedFd,
    pub signals: Signals,
    pub meta: SessionMeta,
    pub screen: Screen,
    pub journal: Journal,
    pub authority: Authority,
    /// The master is a child subreaper: orphaned descendants of the session are re-parented to
    /// it, so it must reap them, and it finds every descendant through parent links.
    pub subreaper: bool,
    /// Decides for the clients and the session's size, stop and exit: a new one
    /// ([`new_policy`]), or one handed over.
    pub policy: SessionPolicy,
    /// The session log (`desk log`), when the session keeps one; the screen's log text is on.
    pub log: Option<desk_common::screen_log::LogWriter>,
    /// The name's lock, held until the master exits.
    pub lock: desk_common::session::MasterLock,
}

pub(super) struct Master {
    files: SessionPaths,
    poll: Poll,
    /// The listening socket, and the check that keeps it where clients look.
    socket: Socket,
    /// The session's terminal: the PTY, its read buffer and the input waiting for the child.
    terminal: super::terminal::Terminal,
    signals: Signals,
    meta: SessionMeta,
    /// The screen model and the session log.
    screen: SessionScreen,
    /// Numbers and journals the session's events ([`Master::emit`] streams them).
    journal: super::journal_sink::JournalSink,
    /// Room reserved at start for the exit record, used when the disk is full at exit (so
    /// `desk ls` does not call a clean exit `lost`).
    exit_reserve: Option<desk_common::fsutil::Reserved>,
    /// The rate limits of title events and of the other noisy ones.
    titles: super::noise::TitleLimiter,
    noise: super::noise::NoiseLimiter,
    /// The state authority and what feeds it (output flow, screen checks, a person's typing).
    agent: AgentState,
    /// An operator's keys still to be typed, one per [`super::typing::KEY_GAP`].
    pending_keys: super::typing::KeyQueue,
    child_status: Option<ExitStatus>,
    subreaper: bool,
    /// The connected clients and the tokens to come.
    clients: super::clients::ClientTable,
    /// Decides for the clients and the session's size, stop and exit; see [`Master::carry`].
    policy: SessionPolicy,
    timers: Timers,
    /// The repaint timer of the clients that take views.
    views: Views,
    uid: u32,
    /// The info file's bookkeeping (`super::info`).
    info_file: super::info::InfoFile,
    /// The name's lock: no other master runs this session while this one lives.
    _lock: desk_common::session::MasterLock,
    /// A handover to another binary (`desk upgrade`) waiting for a quiet point.
    handover: Option<super::handover_request::Request>,
}

impl Master {
    pub(super) fn new(parts: Parts) -> Master {
        let Parts {
            files,
            poll,
            listener,
            pty,
            signals,
            meta,
            screen,
            journal,
            authority,
            subreaper,
            policy,
            log,
            lock,
        } = parts;
        let mut timers = Timers::default();
        timers.arm(Instant::now() + super::socket_watch::CHECK_INTERVAL, Timer::SocketCheck);
        let exit_reserve = desk_common::fsutil::Reserved::new(&files.exit, EXIT_RECORD_RESERVE)
            .map_err(|e| warn!("cannot reserve room for the exit record: {e:#}"))
            .ok();
        let info_file = super::info::InfoFile::new(files.info.clone());
        let socket = Socket::new(listener, &files);
        Master {
            info_file,
            exit_reserve,
            files,
            poll,
            socket,
            terminal: super::terminal::Terminal::new(pty),
            signals,
            meta,
            screen: SessionScreen::new(screen, log),
            journal: super::journal_sink::JournalSink::new(journal),
            titles: Default::default(),
            noise: Default::default(),
            agent: AgentState::new(authority),
            pending_keys: Default::default(),
            child_status: None,
            subreaper,
            clients: super::clients::ClientTable::new(FIRST_CLIENT),
            policy,
            timers,
            views: Views::default(),
            uid: nix::unistd::geteuid().as_raw(),
            _lock: lock,
            handover: None,
        }
    }

    // ----- for the modules that extend the master (answer, events, hook, operator, handover) -----

    /// The session's record.
    pub(super) fn meta(&self) -> &SessionMeta {
        &self.meta
    }

    /// The session's files.
    pub(super) fn files(&self) -> &SessionPaths {
        &self.files
    }

    /// The screen model.
    pub(super) fn screen(&self) -> &Screen {
        self.screen.model()
    }

    /// The connected clients.
    pub(super) fn clients(&self) -> &super::clients::ClientTable {
        &self.clients
    }

    pub(super) fn clients_mut(&mut self) -> &mut super::clients::ClientTable {
        &mut self.clients
    }

    /// The session policy, to ask it (what it decides reaches the loop as effects).
    pub(super) fn policy(&self) -> &SessionPolicy {
        &self.policy
    }

    /// The session's terminal.
    pub(super) fn terminal(&self) -> &super::terminal::Terminal {
        &self.terminal
    }

    pub(super) fn terminal_mut(&mut self) -> &mut super::terminal::Terminal {
        &mut self.terminal
    }

    /// The journal of the session's events.
    pub(super) fn journal(&self) -> &super::journal_sink::JournalSink {
        &self.journal
    }

    pub(super) fn journal_mut(&mut self) -> &mut super::journal_sink::JournalSink {
        &mut self.journal
    }

    /// The rate limit of title events.
    pub(super) fn titles_mut(&mut self) -> &mut super::noise::TitleLimiter {
        &mut self.titles
    }

    /// The rate limit of the other noisy events.
    pub(super) fn noise_mut(&mut self) -> &mut super::noise::NoiseLimiter {
        &mut self.noise
    }

    /// Whether a handover waits for a quiet point.
    pub(super) fn handover_waiting(&self) -> bool {
        self.handover.is_some()
    }

    /// Keep `request` until the next quiet point (the end of a loop turn, or its timer).
    pub(super) fn wait_for_quiet_point(&mut self, request: super::handover_request::Request) {
        self.handover = Some(request);
    }

    /// The handover waiting for a quiet point, taken: it is carried out or given up now.
    pub(super) fn take_handover_request(&mut self) -> Option<super::handover_request::Request> {
        self.handover.take()
    }

    /// The name's lock's descriptor (for a handover).
    pub(super) fn lock_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self._lock.as_fd()
    }

    /// Whether the master is its session's child subreaper.
    pub(super) fn subreaper(&self) -> bool {
        self.subreaper
    }

    /// The session log's cap, when the session keeps one.
    pub(super) fn log_cap(&self) -> Option<u64> {
        self.screen.log_cap()
    }

    /// Arm a timer of the loop's.
    pub(super) fn arm(&mut self, at: Instant, timer: Timer) {
        self.timers.arm(at, timer);
    }

    pub(super) fn cancel(&mut self, timer: Timer) {
        self.timers.cancel(timer);
    }

    /// Something HELLO would be answered with may have changed: compare the info file at the
    /// next refresh.
    pub(super) fn poke_info_file(&mut self) {
        self.info_file.poke();
    }

    /// Take over a client of a handover: registered for readability, its terminal's `size` told
    /// to the policy.
    pub(super) fn adopt_client(&mut self, token: Token, mut client: Client, size: Option<(u16, u16)>) -> Result<()> {
        self.poll
            .registry()
            .register(&mut client.stream, token, Interest::READABLE)
            .context("cannot register a client")?;
        self.policy.adopt_client_size(client_id(token), size);
        self.clients.insert(token, client);
        Ok(())
    }

    /// The listening socket's descriptor, while it is open (for a handover).
    pub(super) fn socket_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.socket.fd()
    }

    /// The first event of every generation.
    pub(super) fn started(&mut self) {
        self.emit(EventBody::Started {
            pid: self.meta.pid,
            command: self.meta.command.clone(),
            cols: self.meta.cols,
            rows: self.meta.rows,
            provider: self.meta.provider.clone(),
        });
        let now = Instant::now();
        self.timers.arm(now + desk_core::state::READY_QUIET, Timer::ReadyCheck);
        self.announce(Vec::new());
    }

    fn child(&self) -> Pid {
        Pid::from_raw(self.meta.pid as i32)
    }

    /// Run until the child has exited and clients were told (or the flush deadline passed).
    pub(super) fn run(mut self) -> Result<ExitStatus> {
        let mut events = Events::with_capacity(256);
        // The child may have exited before the signal source was polled the first time.
        self.reap();
        loop {
            let now = Instant::now();
            if self.fire_timers(now) {
                self.info_file.poke();
            }
            // Every change of this turn and the last (events, then timers) is in by now.
            self.refresh_info_file(now);
            if self.child_status.is_some() && !self.awaiting_helpers() {
                let drained = self.clients.drained();
                if self.policy.may_finish(drained, now) {
                    break;
                }
            }
            let timeout = if self.terminal.has_pending() {
                Some(Duration::ZERO)
            } else {
                self.timers.next_deadline().map(|at| at.saturating_duration_since(now))
            };
            // Every write of this turn is made: ask for writability where one was blocked.
            let timeout = if self.watch_writability() { Some(Duration::ZERO) } else { timeout };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e).context("poll failed");
            }
            if self.terminal.has_pending() {
                self.read_pty(Instant::now());
            }
            for event in events.iter() {
                let now = Instant::now();
                // Anything but the PTY may change what HELLO would be answered at once.
                if event.token() != PTY {
                    self.info_file.poke();
                }
                match event.token() {
                    LISTENER => self.accept(now),
                    PTY => {
                        if event.is_writable() {
                            self.terminal.on_writable();
                        }
                        if event.is_readable() || event.is_read_closed() || event.is_error() {
                            self.read_pty(now);
                        }
                    }
                    SIGNALS => self.handle_signals(now),
                    Token(held) if held & TERMINAL_BIT != 0 => {
                        let token = Token(held & !TERMINAL_BIT);
                        if event.is_writable() {
                            self.terminal_writable(token);
                        }
                        if event.is_readable() || event.is_read_closed() || event.is_error() {
                            self.terminal_readable(token, now);
                        }
                    }
                    token => {
                        if event.is_writable() {
                            self.client_writable(token);
                        }
                        if event.is_readable() || event.is_read_closed() || event.is_error() {
                            self.client_readable(token, now);
                        }
                    }
                }
            }
            self.settle(Instant::now());
            if self.handover.is_some() {
                self.try_handover(Instant::now());
            }
        }
        // Lines that scrolled off after the exit (a helper still writing) are waiting.
        if self.screen.log_has_pending() {
            self.screen.sync_log();
        }
        let status = self.child_status.unwrap_or(ExitStatus::Code(0));
        info!(status = %desk_common::signals::describe_exit(status), "master exiting");
        Ok(status)
    }

    // ----- PTY -----

    fn read_pty(&mut self, now: Instant) {
        let mut buf = self.terminal.take_read_buf();
        let mut turn = 0;
        self.terminal.set_pending(false);
        loop {
            let (filled, end) = self.terminal.fill(&mut buf);
            if filled > 0 {
                self.on_output(&buf[..filled], now);
                turn += filled;
            }
            match end {
                ReadEnd::Closed => {
                    self.close_pty();
                    break;
                }
                ReadEnd::Blocked => break,
                ReadEnd::Full => {}
            }
            if turn >= PTY_TURN_BUDGET && self.child_status.is_none() {
                self.terminal.set_pending(true);
                break;
            }
        }
        self.terminal.put_read_buf(buf);
    }

    /// Hands the lines the screen scrolled off since the last call to the session log, which
    /// writes them within [`desk_common::screen_log::FLUSH_AFTER`] (or sooner, see [`Master::flush_log`]).
    pub(super) fn drain_log(&mut self, now: Instant) {
        if self.screen.drain_log() {
            self.timers.arm(now + desk_common::screen_log::FLUSH_AFTER, Timer::LogFlush);
        }
    }

    /// Writes the session log's waiting lines: when they are due, before a snapshot is
    /// answered (so `desk log`, which asks for the screen first, reads every line that
    /// scrolled off above it), and when the session goes idle. A log that cannot be written is
    /// given up (with a warning): the session goes on without it.
    pub(super) fn flush_log(&mut self) {
        self.screen.flush_log();
    }

    fn close_pty(&mut self) {
        if self.terminal.close(self.poll.registry()) {
            self.policy.on_terminal_closed();
        }
    }

    fn on_output(&mut self, data: &[u8], now: Instant) {
        // The one parse of these bytes: the screen model, and the events it finds on the way.
        let mut found = self.screen.feed(data);
        self.drain_log(now);
        if !found.is_empty() {
            self.on_output_events(found.drain(..), now);
        }
        self.screen.recycle(found);
        self.note_output(now);
        let replies = self.screen.take_replies();
        if !replies.is_empty() && !self.clients.controller_attached() {
            // Nobody's terminal will answer: answer from the model so a headless TUI does not
            // hang. A child that stopped reading cannot take more; dropping a reply it would
            // never read is harmless.
            let _ = self.terminal.queue_input(&replies);
        }
        if !self.clients.values().any(|c| c.view.is_some() || c.streams_output()) {
            return;
        }
        for piece in data.chunks(MAX_PAYLOAD) {
            let frame = output_frame(piece);
            for (token, client) in self.clients.iter_mut() {
                if client.view.is_some() {
                    // Bytes drawn for the session's size are wrong at this client's: it gets a
                    // repaint of its view from the model instead (see `repaint_views`).
                    client.view_dirty = true;
                    client.view_unsent += piece.len();
                    continue;
                }
                // Falling behind is reported to the session policy at the end of the turn.
                if client.streams_output() && client.push_output(&frame, piece.len(), now) {
                    debug!(client = token.0, "client fell behind; backlog discarded, keyframe pending");
                }
            }
        }
    }

    /// Register writability only where a write was blocked, and drop it once that queue has
    /// drained, as tmux (libevent) does. Registered for good, edge-triggered, every write the
    /// master made came back as an `EPOLLOUT` event and one more turn of this loop (issue 22:
    /// four wake-ups per typed key where two carried data). Called just before the loop waits,
    /// when every write of the turn is made; a registration made while the peer has room again
    /// already is reported at once (`EPOLL_CTL_MOD` polls the file), so the room a peer made
    /// between the blocked write and this call is not missed. Returns whether a client could
    /// not be registered (it is marked gone: the loop must not sleep before removing it).
    pub(super) fn watch_writability(&mut self) -> bool {
        let registry = self.poll.registry();
        self.terminal.watch_writability(registry, PTY);
        let mut failed = false;
        for (token, client) in &mut self.clients {
            let want = !client.writable && client.alive();
            if want != client.watches_out && client.alive() {
                match registry.reregister(&mut client.stream, *token, interest(want)) {
                    Ok(()) => client.watches_out = want,
                    Err(e) => {
                        client.gone = Some(Gone::Failed(format!("cannot watch its socket: {e}")));
                        failed = true;
                    }
                }
            }
            if let Some(held) = client.held.as_mut().filter(|_| client.gone.is_none())
                && let Err(e) = held.watch(registry, Token(token.0 | TERMINAL_BIT))
            {
                client.gone = Some(Gone::Failed(format!("cannot watch the terminal it handed over: {e}")));
                failed = true;
            }
        }
        failed
    }

    // ----- clients -----

    fn accept(&mut self, now: Instant) {
        loop {
            let Some(accepted) = self.socket.accept() else { return };
            let mut stream = match accepted {
                Ok(stream) => stream,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    warn!("accept failed: {e}");
                    return;
                }
            };
            let creds = getsockopt(&stream, PeerCredentials);
            let (uid, pid) = match creds {
                Ok(c) => (c.uid(), c.pid()),
                Err(e) => {
                    warn!("cannot read peer credentials, refusing: {e}");
                    continue;
                }
            };
            if uid != self.uid {
                warn!(peer_uid = uid, peer_pid = pid, "refused a connection from another user");
                let refusal = Frame::error(
                    ErrorCode::PeerRefused,
                    format!("this session belongs to uid {}; uid {uid} may not connect", self.uid),
                );
                let _ = io::Write::write(&mut stream, &refusal.to_bytes());
                continue;
            }
            let token = self.clients.next_token();
            if let Err(refusal) = self.policy.on_connect(client_id(token), now) {
                warn!(peer_pid = pid, "refused a connection: {} clients already connected", self.policy.client_count());
                let _ = io::Write::write(&mut stream, &refusal.to_bytes());
                continue;
            }
            // Writability only once a write to it would block (`watch_writability`).
            if let Err(e) = self.poll.registry().register(&mut stream, token, Interest::READABLE) {
                warn!("cannot register a client: {e}");
                self.policy.on_closed(&[client_id(token)]);
                self.carry(now);
                continue;
            }
            debug!(client = token.0, peer_pid = pid, "client connected");
            self.admit(token, Client::new(stream, Some(pid)), now);
        }
    }

    /// Take in a connection the session policy accepted; it has the policy's handshake deadline
    /// to say HELLO.
    fn admit(&mut self, token: Token, client: Client, now: Instant) {
        self.clients.insert(token, client);
        self.carry(now);
    }

    fn client_writable(&mut self, token: Token) {
        if let Some(client) = self.clients.get_mut(&token) {
            client.writable = true;
            client.flush();
        }
    }

    fn client_readable(&mut self, token: Token, now: Instant) {
        let mut buf = [0u8; CLIENT_READ_CHUNK];
        while let Some(client) = self.clients.get_mut(&token) {
            if !client.alive() || client.closing.is_some() {
                break;
            }
            match recv_with_fd(&client.stream, &mut buf) {
                Ok((0, _)) => {
                    client.gone.get_or_insert(Gone::Left);
                    break;
                }
                Ok((n, passed)) => {
                    if passed.is_some() {
                        client.passed = passed;
                    }
                    client.decoder.push(&buf[..n]);
                    self.client_frames(token, now);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    client.gone.get_or_insert(Gone::Failed(format!("read failed: {e}")));
                    break;
                }
            }
        }
    }

    fn client_frames(&mut self, token: Token, now: Instant) {
        loop {
            let Some(client) = self.clients.get_mut(&token) else { return };
            if !client.alive() || client.closing.is_some() {
                return;
            }
            match client.decoder.next_client_frame() {
                Ok(Some(frame)) => self.client_frame(token, frame, now),
                Ok(None) => return,
                Err(e) => {
                    self.policy.on_undecodable(client_id(token), e.code(), e.to_string());
                    self.carry(now);
                    return;
                }
            }
        }
    }

    /// A frame from a client: the session policy decides, this carries it out.
    fn client_frame(&mut self, token: Token, frame: Frame, now: Instant) {
        // A streaming client's own terminal size (which the policy keeps) decides whether it
        // gets the raw output or a view (`update_views`); the view's options are the loop's.
        if let Some(client) = self.clients.get_mut(&token)
            && client.closing.is_none()
        {
            match frame {
                Frame::Hello { role, status_line, view, .. } if client.role.is_none() && role.streams_output() => {
                    client.status_line = status_line;
                    client.always_view = view;
                }
                // Its terminal may have been drawn over (desk attach's session list): a RESIZE
                // gets it a fresh keyframe of its view, even at the same size.
                Frame::Resize { cols, rows }
                    if client.role.is_some_and(Role::streams_output)
                        && desk_term::screen::valid_size(cols, rows)
                        && client.always_view =>
                {
                    client.view = None;
                }
                _ => {}
            }
        }
        let verdict = self.policy.on_frame(client_id(token), frame, now);
        self.carry(now);
        match verdict {
            Verdict::Done => return,
            Verdict::Input(bytes) => {
                let _ = self.queue_input(token, &bytes, now);
            }
            Verdict::Snapshot { history } => self.answer_snapshot(token, history),
            Verdict::Hook(body) => {
                if let Err(reply) = self.on_hook_frame(body, now) {
                    self.clients.reply(token, &reply);
                }
            }
            Verdict::Event(body) => {
                if let Err(reply) = self.on_client_event(token, body, now) {
                    self.clients.reply(token, &reply);
                }
            }
            Verdict::Terminal(op) => self.on_terminal_op(token, op),
        }
        // Acting on it may have given the policy more to decide (input makes a controller the
        // latest, which may resize the session).
        self.carry(now);
    }

    // ----- terminals clients hand over (docs/protocol.md §5.16) -----

    /// A client's TAKE, READY or PAINT, permitted by the session policy.
    fn on_terminal_op(&mut self, token: Token, op: TerminalOp) {
        let Some(client) = self.clients.get_mut(&token) else { return };
        match op {
            TerminalOp::Take { keys } => {
                let taken = match (client.passed.take(), &client.held) {
                    (_, Some(_)) => Err("it holds this client's terminal already".to_string()),
                    (None, None) => Err("no descriptor came with TAKE".to_string()),
                    (Some(fd), None) => Held::take(fd, keys),
                };
                match taken {
                    Ok(held) => {
                        client.held = Some(held);
                        client.push_control(&Frame::Terminal(TerminalOp::Taken));
                        debug!(client = token.0, "terminal handed over");
                    }
                    // Refused: the terminal stays the client's, which says so by taking it back.
                    Err(why) => {
                        debug!(client = token.0, %why, "terminal not taken");
                        client.push_control(&Frame::Terminal(TerminalOp::Give(Vec::new())));
                    }
                }
            }
            TerminalOp::Ready => {
                if let Some(held) = client.held.as_mut().filter(|h| h.stage == Stage::Waiting) {
                    held.stage = Stage::Holding;
                    client.flush();
                }
            }
            TerminalOp::Paint(bytes) => {
                if client.held.as_ref().is_some_and(Held::takes_stream) && client.streams_output() {
                    for frame in output_chunks(&bytes) {
                        client.out.push_to(frame, super::queue::Sink::Terminal);
                    }
                    client.flush();
                }
            }
            // The policy passes on only what a client sends.
            TerminalOp::Taken | TerminalOp::Give(_) | TerminalOp::Redrawn => {}
        }
    }

    fn terminal_writable(&mut self, token: Token) {
        if let Some(client) = self.clients.get_mut(&token)
            && let Some(held) = &mut client.held
        {
            held.writable = true;
            client.flush();
        }
    }

    /// Keys typed on a held terminal: the session's up to the first key the client keeps, as
    /// its INPUT would be; from that key on, back to the client with the terminal.
    fn terminal_readable(&mut self, token: Token, now: Instant) {
        let mut buf = [0u8; CLIENT_READ_CHUNK];
        loop {
            let Some(client) = self.clients.get_mut(&token) else { return };
            let Some(held) = client.held.as_ref().filter(|h| h.stage == Stage::Holding) else { return };
            if !client.alive() || client.closing.is_some() {
                return;
            }
            let n = match held.read(&mut buf) {
                Ok(0) => return self.give_back(token, Vec::new()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    debug!(client = token.0, "cannot read the terminal handed over: {e}");
                    return self.give_back(token, Vec::new());
                }
            };
            let kept = desk_term::kept::find_first(&buf[..n], &held.keys).map(|(at, _, _)| at);
            let typed = &buf[..kept.unwrap_or(n)];
            if !typed.is_empty() && client.role == Some(Role::Controller) {
                self.client_frame(token, Frame::Input(typed.to_vec()), now);
            }
            if let Some(at) = kept {
                return self.give_back(token, buf[at..n].to_vec());
            }
        }
    }

    /// Give client `token` its terminal back: nothing more is read from it; GIVE, carrying
    /// `unread`, follows the last bytes queued for it, and it is closed once they are written.
    fn give_back(&mut self, token: Token, unread: Vec<u8>) {
        let Some(client) = self.clients.get_mut(&token) else { return };
        let Some(held) = client.held.as_mut().filter(|h| h.stage != Stage::Giving) else { return };
        held.stage = Stage::Giving;
        client.push_control(&Frame::Terminal(TerminalOp::Give(unread)));
    }

    /// Give every held terminal back at once, with what was queued for it (a master about to
    /// hand its clients over to another image: the descriptors do not travel; each client gets
    /// a keyframe from the new image, and hands its terminal over again).
    pub(super) fn give_back_terminals(&mut self) {
        let registry = self.poll.registry();
        for client in self.clients.values_mut() {
            let Some(mut held) = client.held.take() else { continue };
            held.forget(registry);
            client.out.drop_terminal_frames();
            if held.stage != Stage::Giving {
                client.push_control(&Frame::Terminal(TerminalOp::Give(Vec::new())));
            }
        }
    }

    /// Answer a SNAPSHOT_REQUEST the session policy permitted.
    fn answer_snapshot(&mut self, token: Token, history: Option<desk_wire::HistoryRequest>) {
        self.flush_log();
        let (canonical, foreground) = self.terminal.foreground(self.meta.pid);
        let mut reply = SnapshotReply {
            generation: self.meta.generation,
            last_input_ms: self.agent.last_person_input_ms(),
            canonical,
            state: Some(self.agent.authority().view()),
            foreground,
            ..SnapshotReply::of_screen(self.screen.model().snapshot())
        };
        if let Some(ask) = history {
            super::history::fill(self.screen.model(), ask, &mut reply);
        }
        self.clients.reply(token, &Frame::Snapshot(Box::new(reply)));
    }

    /// Carry out the session policy's effects, in order, until it has none left.
    pub(super) fn carry(&mut self, now: Instant) {
        let mut keyframe: Option<Vec<Rc<[u8]>>> = None;
        while let Some(effect) = self.policy.poll_effect() {
            match effect {
                Effect::Arm { at, timer } => self.timers.arm(at, Timer::Policy(timer)),
                Effect::Cancel { timer } => self.timers.cancel(Timer::Policy(timer)),
                Effect::Resize { cols, rows } => self.apply_size(cols, rows),
                Effect::Signal { signal, helpers } => self.signal_session(signal, helpers),
                Effect::Kill { group } => self.kill_session(group),
                Effect::Welcome { client: id, role, version } => {
                    let info = self.info();
                    let Some(client) = self.clients.get_mut(&token_of(id)) else { continue };
                    client.role = Some(role);
                    if role != Role::Query {
                        // Counted in the info file before it hears WELCOME: whatever it or its
                        // user does next (`desk ls`) sees it attached.
                        self.info_file.poke();
                        self.refresh_info_file(now);
                    }
                    let Some(client) = self.clients.get_mut(&token_of(id)) else { continue };
                    client.push_control(&Frame::Welcome { version, info: Box::new(info) });
                    if role == Role::Query {
                        debug!(client = id.0, peer_pid = client.pid, "query client connected");
                    } else {
                        info!(client = id.0, peer_pid = client.pid, ?role, "client attached");
                    }
                }
                Effect::StartStream { client } => {
                    if let Some(client) = self.clients.get_mut(&token_of(client)) {
                        client.needs_keyframe = true;
                    }
                }
                Effect::Attached { client, role } => self.emit(EventBody::Attach { client: client.0, role }),
                Effect::Send { client, frame } => {
                    if let Some(client) = self.clients.get_mut(&token_of(client)) {
                        client.push_control(&frame);
                    }
                }
                Effect::Close { client: id, error } => {
                    let Some(client) = self.clients.get_mut(&token_of(id)) else { continue };
                    let reason = error_message(&error);
                    if matches!(error, Frame::Error { code: ErrorCode::Exiting, .. }) {
                        debug!(client = id.0, "closing client: {reason}");
                    } else {
                        warn!(client = id.0, "closing client: {reason}");
                    }
                    client.close_with(error, reason);
                }
                Effect::Release { client } => {
                    if let Some(client) = self.clients.get_mut(&token_of(client)) {
                        client.gone.get_or_insert(Gone::Left);
                    }
                }
                Effect::Evict { client: id, error } => {
                    let Some(client) = self.clients.get_mut(&token_of(id)) else { continue };
                    let reason = error_message(&error);
                    warn!(client = id.0, "{reason}");
                    client.out.discard_backlog();
                    client.close_with(error, reason);
                    // It is not reading; do not wait for the error frame to drain.
                    client.gone = Some(Gone::Closed("too slow".into()));
                }
                Effect::Exit { client: id } => {
                    let Some(status) = self.child_status else { continue };
                    let needs_keyframe =
                        self.clients.get(&token_of(id)).is_some_and(|c| c.needs_keyframe && c.streams_output());
                    let has_view = self.clients.get(&token_of(id)).is_some_and(|c| c.view.is_some());
                    if needs_keyframe && !has_view && keyframe.is_none() {
                        keyframe = Some(self.keyframe_frames());
                    }
                    let escalated = self.policy.escalated();
                    let Some(client) = self.clients.get_mut(&token_of(id)) else { continue };
                    if needs_keyframe && let Some(view) = client.view.as_mut() {
                        let frames = keyframe_chunks(&view.keyframe(self.screen.model()));
                        client.push_keyframe(&frames);
                    } else if client.view.is_some() && client.view_dirty {
                        // The last repaint (one, whatever is queued), so the view ends on the
                        // child's last screen.
                        let bytes = client.view.as_mut().map(|v| v.render(self.screen.model())).unwrap_or_default();
                        client.push_repaint(&output_chunks(&bytes), bytes.len());
                    } else if let Some(frames) = keyframe.as_deref()
                        && needs_keyframe
                    {
                        client.push_keyframe(frames);
                    }
                    client.push_control(&Frame::Exit { status, escalated });
                    if client.closing.is_none() {
                        client.closing = Some("the session exited".into());
                    }
                }
            }
        }
    }

    /// An INPUT frame the session policy permitted: queue it whole for the child, or refuse it
    /// when the queue cannot take it.
    /// Returns whether the bytes were queued.
    pub(super) fn queue_input(&mut self, token: Token, bytes: &[u8], now: Instant) -> bool {
        if let Err(full) = self.terminal.queue_input(bytes) {
            if let Some(client) = self.clients.get_mut(&token) {
                client.push_control(&Frame::error(
                    ErrorCode::InputFull,
                    format!(
                        "input refused: {} bytes are already waiting for the child to read (limit {}); \
                         nothing of this {}-byte frame was queued",
                        full.queued,
                        full.limit,
                        bytes.len()
                    ),
                ));
            }
            return false;
        }
        // What someone typed (a person, a paste of desk's): its echo is not the agent's screen.
        self.agent.on_typed(bytes);
        if self.clients.get(&token).is_some_and(|c| c.role == Some(Role::Controller)) {
            self.agent.person_typed();
        }
        self.policy.on_input_queued(client_id(token), now);
        true
    }

    fn apply_size(&mut self, cols: u16, rows: u16) {
        if !desk_term::screen::valid_size(cols, rows) || self.screen.model().size() == (cols, rows) {
            return;
        }
        if let Err(e) = self.terminal.set_size(cols, rows) {
            warn!("{e:#}");
            return;
        }
        self.screen.resize(cols, rows);
        // At once, not at the end of the turn: output read later in this turn must not reach
        // a client as raw bytes drawn for a size that is no longer its own.
        self.update_views();
        // A view kept across the resize shows a resized screen (and its status line the new
        // size) even if the child draws nothing.
        for client in self.clients.values_mut().filter(|c| c.view.is_some()) {
            client.view_dirty = true;
        }
        let now = Instant::now();
        self.drain_log(now);
        debug!(cols, rows, "resized");
        self.emit_noise(EventBody::Resize { cols, rows }, now);
    }

    /// Keep the info file what HELLO would be answered now (`super::info` says when it is
    /// compared and written).
    pub(super) fn refresh_info_file(&mut self, now: Instant) {
        let Master { info_file, meta, screen, clients, agent, timers, .. } = self;
        let info = || session_info(meta, screen.model(), clients, agent.authority());
        if let Some(at) = info_file.refresh(now, &meta.size_policy, info) {
            timers.arm(at, Timer::InfoFile);
        }
    }

    pub(super) fn info(&self) -> SessionInfo {
        session_info(&self.meta, self.screen.model(), &self.clients, self.agent.authority())
    }

    /// Per-turn housekeeping: keyframes for clients that wait for one, telling the session
    /// policy which clients fell behind or caught up, closing and removing clients that are done.
    pub(super) fn settle(&mut self, now: Instant) {
        self.update_views();
        let waiting = self.clients.values().any(|c| {
            c.needs_keyframe && c.view.is_none() && c.out.is_empty() && c.streams_output() && c.stream_writable()
        });
        if waiting && self.screen.model().at_ground_state() {
            let frames = self.keyframe_frames();
            for client in self.clients.values_mut() {
                if client.needs_keyframe
                    && client.view.is_none()
                    && client.out.is_empty()
                    && client.streams_output()
                    && client.stream_writable()
                {
                    client.push_keyframe(&frames);
                }
            }
        }
        self.repaint_views(now);
        // After the keyframes (whose writes may drain a queue), and before any timer can fire.
        for (token, client) in &mut self.clients {
            if let Some((caught_up, behind_since)) = client.take_lag_news() {
                if caught_up {
                    self.policy.on_drained(client_id(*token));
                }
                if let Some(at) = behind_since {
                    self.policy.on_backlog_discarded(client_id(*token), at);
                }
            }
        }
        let mut removed = Vec::new();
        for (token, client) in &mut self.clients {
            if client.terminal_released()
                && let Some(mut held) = client.held.take()
            {
                held.forget(self.poll.registry());
                debug!(client = token.0, "terminal given back");
            }
            if client.gone.is_none()
                && let Some(reason) = &client.closing
                && client.out.is_empty()
            {
                client.gone = Some(Gone::Closed(reason.clone()));
            }
            if client.gone.is_some() {
                removed.push(*token);
            }
        }
        let mut gone = Vec::with_capacity(removed.len());
        for token in removed {
            if let Some(mut client) = self.clients.remove(&token) {
                gone.push(client_id(token));
                let _ = self.poll.registry().deregister(&mut client.stream);
                if let Some(held) = &mut client.held {
                    held.forget(self.poll.registry());
                }
                if client.role == Some(Role::Query) || client.role.is_none() {
                    debug!(client = token.0, reason = ?client.gone, "query client left");
                } else {
                    let reason = match &client.gone {
                        Some(Gone::Left) | None => "left".to_string(),
                        Some(Gone::Failed(why)) | Some(Gone::Closed(why)) => why.clone(),
                    };
                    if let Some(role) = client.role {
                        self.emit(EventBody::Detach { client: token.0 as u64, role, reason });
                    }
                    info!(
                        client = token.0,
                        reason = ?client.gone,
                        output_bytes = client.output_bytes,
                        keyframes = client.keyframes,
                        "client left"
                    );
                }
            }
        }
        if !gone.is_empty() {
            self.policy.on_closed(&gone);
        }
        self.carry(now);
    }

    fn keyframe_frames(&self) -> Vec<Rc<[u8]>> {
        keyframe_chunks(&self.screen.model().render_keyframe())
    }

    /// Give each streaming client the view it needs (`super::views::update`).
    fn update_views(&mut self) {
        super::views::update(&mut self.clients, self.screen.model().size(), &self.policy);
    }

    /// Keyframes and repaints for view clients (`super::views::Views::repaint`).
    fn repaint_views(&mut self, now: Instant) {
        self.views.repaint(&mut self.clients, self.screen.model(), now, &mut self.timers);
    }

    // ----- signals, the child, timers -----

    fn handle_signals(&mut self, now: Instant) {
        let pending: Vec<i32> = self.signals.pending().collect();
        for signal in pending {
            match signal {
                SIGCHLD => self.reap(),
                SIGTERM | SIGINT => {
                    info!(signal, "asked to stop; terminating the session");
                    self.policy.on_stop_requested(now);
                    self.carry(now);
                }
                SIGHUP => debug!("ignoring SIGHUP"),
                SIGUSR1 => self.check_socket(super::socket_watch::Check::Signal),
                _ => {}
            }
        }
    }

    /// Signal the session's process group and, for a kill (`helpers`), the session's processes
    /// that left it.
    fn signal_session(&mut self, signal: i32, helpers: bool) {
        let name = desk_common::signals::name(signal);
        info!(signal = %name, helpers, "signalling the session's process group");
        // Raw, because nix's `Signal` knows only 1..=31 and the wire allows every Linux signal
        // up to 64, real-time ones included.
        // SAFETY: killpg takes two integers and touches no memory of ours.
        if unsafe { libc::killpg(self.meta.pid as libc::pid_t, signal) } != 0 {
            let e = Errno::last();
            if e != Errno::ESRCH {
                warn!("killpg failed: {e}");
            }
        }
        if !helpers {
            return;
        }
        // A kill ends the whole session: helpers that left the process group (their own group,
        // `setsid`, a double fork) get the signal too. Those inside the group already had it.
        for helper in self.helpers() {
            // SAFETY: getpgid and kill take integers and touch no memory of ours.
            let in_group = unsafe { libc::getpgid(helper.pid as libc::pid_t) } == self.meta.pid as libc::pid_t;
            if !in_group {
                info!(pid = helper.pid, command = %helper.command, "signalling a helper outside the process group");
                // SAFETY: kill takes integers and touches no memory of ours.
                unsafe { libc::kill(helper.pid as libc::pid_t, signal) };
            }
        }
    }

    /// A kill's grace period ran out: SIGKILL the process group if the child still runs
    /// (`group`), and every helper of the session that is left.
    fn kill_session(&mut self, group: bool) {
        if group {
            warn!("the session outlived its grace period; sending SIGKILL");
            let _ = killpg(self.child(), Signal::SIGKILL);
        }
        for helper in self.helpers() {
            warn!(pid = helper.pid, command = %helper.command, "a helper outlived the grace period; sending SIGKILL");
            let _ = nix::sys::signal::kill(Pid::from_raw(helper.pid as i32), Signal::SIGKILL);
        }
    }

    /// Every live process of the session other than the child itself: its descendants (all of
    /// them when the master is a subreaper, since orphans are re-parented to it) and whatever
    /// else still carries the child's session id.
    fn helpers(&self) -> Vec<desk_common::procfs::ProcessInfo> {
        let mut found = desk_common::procfs::descendants(std::process::id());
        for member in desk_common::procfs::session_members(self.meta.pid) {
            if !found.iter().any(|p| p.pid == member.pid) {
                found.push(member);
            }
        }
        found.retain(|p| p.pid != self.meta.pid);
        found
    }

    /// After the child exited during a kill, the master stays until its helpers are gone or the
    /// grace period ran out and they were sent SIGKILL: if it left earlier, they would be
    /// re-parented past it and nobody would escalate.
    fn awaiting_helpers(&self) -> bool {
        self.subreaper && self.policy.escalation_pending() && self.child_status.is_some() && !self.helpers().is_empty()
    }

    /// Fire every timer due at `now`; whether any was.
    fn fire_timers(&mut self, now: Instant) -> bool {
        let mut fired = false;
        while let Some(timer) = self.timers.pop_due(now) {
            // The socket check changes nothing HELLO would be answered with (a rebind pokes
            // the info file itself), so an idle master's periodic wake-up is one `lstat`.
            fired |= timer != Timer::SocketCheck;
            match timer {
                Timer::Policy(timer) => {
                    self.policy.on_timer(timer, now);
                    self.carry(now);
                }
                Timer::TitleFlush => self.flush_title(now),
                Timer::NoiseFlush => self.flush_noise(now),
                Timer::OutputQuiet => self.check_output_quiet(now),
                Timer::ScreenCheck => self.check_screen(now),
                Timer::StateTick => self.state_tick(now),
                Timer::InfoFile => self.info_file.timer_fired(),
                Timer::LogFlush => self.flush_log(),
                Timer::KeysNext => self.type_next_key(now),
                Timer::Handover => self.try_handover(now),
                Timer::SocketCheck => {
                    self.check_socket(super::socket_watch::Check::Timer);
                    self.timers.arm(now + super::socket_watch::CHECK_INTERVAL, Timer::SocketCheck);
                }
                Timer::ViewRepaint => {
                    self.views.timer_fired();
                    self.repaint_views(now);
                }
                Timer::ReadyCheck => {
                    if !self.agent.output_active() {
                        let events = self.agent.quiet(now, &mut self.timers);
                        self.emit_all(events);
                        // Start-up is over and the child is quiet: drop what starting needed.
                        self.release_idle_memory();
                    }
                }
            }
        }
        fired
    }

    /// Collect the child's status if it has exited and, as a subreaper, every adopted orphan
    /// that has exited (they are not the session's child: their exit ends nothing).
    pub(super) fn reap(&mut self) {
        // Only a subreaper waits for any child: in any other process (the unit tests) other
        // children may belong to someone else.
        let which = if self.subreaper { -1 } else { self.meta.pid as libc::pid_t };
        loop {
            if !self.subreaper && self.child_status.is_some() {
                return;
            }
            let mut raw: libc::c_int = 0;
            // Raw, because nix's waitpid reaps a child killed by a real-time signal and then
            // fails to name the signal, which would lose the status.
            // SAFETY: waitpid writes only to `raw`, which outlives the call.
            let pid = unsafe { libc::waitpid(which, &mut raw, libc::WNOHANG) };
            if pid == 0 {
                return;
            }
            if pid < 0 {
                match Errno::last() {
                    Errno::EINTR => continue,
                    e => {
                        if self.child_status.is_none() {
                            warn!("waitpid failed: {e}");
                            self.on_child_exit(ExitStatus::Code(-1));
                        }
                        return;
                    }
                }
            }
            if pid as u32 != self.meta.pid {
                debug!(pid, "reaped an orphaned helper of the session");
                continue;
            }
            if libc::WIFEXITED(raw) {
                self.on_child_exit(ExitStatus::Code(libc::WEXITSTATUS(raw)));
            } else if libc::WIFSIGNALED(raw) {
                self.on_child_exit(ExitStatus::Signal(libc::WTERMSIG(raw)));
            } else {
                // Stopped or continued (not asked for): the next SIGCHLD asks again.
                return;
            }
        }
    }

    // ----- the state authority -----

    /// Feed the state authority an observation (`observe` returns its changes); the `state`
    /// events it causes, for the caller to [`Master::emit_all`] where they belong in the
    /// journal.
    pub(super) fn observe(&mut self, observe: impl FnOnce(&mut Authority) -> Vec<Change>) -> Announced {
        self.agent.observe(&mut self.timers, observe)
    }

    /// Announce state changes (none: just re-arm the lease timer).
    pub(super) fn announce(&mut self, changes: Vec<Change>) {
        let events = self.agent.announce(changes, &mut self.timers);
        self.emit_all(events);
    }

    /// Number, journal and broadcast one event.
    pub(super) fn emit(&mut self, body: EventBody) {
        let (event, gap) = self.journal.record(desk_common::clock::now_ms(), self.meta.generation, body);
        let frame: Rc<[u8]> = Rc::from(Frame::Event(event.to_json_map()).to_bytes());
        for client in self.clients.values_mut() {
            if client.role == Some(Role::Observer) && client.alive() {
                client.push_control_bytes(&frame);
            }
        }
        if let Some((from_seq, to_seq, reason)) = gap {
            warn!(from_seq, to_seq, "events journal works again; recording the gap");
            self.emit(EventBody::Gap { from_seq, to_seq, reason });
        }
    }

    /// Give back what only a busy session needs (`super::memory` says what and when).
    fn release_idle_memory(&mut self) {
        self.terminal.release_read_buf();
        self.screen.release_idle_memory();
        self.clients.release_idle_memory();
        super::memory::trim_allocator();
    }

    /// Number, journal and broadcast these events, in order.
    pub(super) fn emit_all(&mut self, events: Announced) {
        for body in events {
            self.emit(body);
        }
    }

    /// The state authority's view, and what feeds it.
    pub(super) fn agent(&self) -> &AgentState {
        &self.agent
    }

    /// The screen rules run on the screen as it is now (the scheduled look, or an early one
    /// before a hook is weighed).
    pub(super) fn check_screen(&mut self, now: Instant) {
        let events = self.agent.check_screen(self.screen.model(), now, &mut self.timers);
        self.emit_all(events);
    }

    fn state_tick(&mut self, now: Instant) {
        let events = self.agent.tick(now, &mut self.timers);
        self.emit_all(events);
    }

    /// Called for every chunk of output.
    fn note_output(&mut self, now: Instant) {
        let events = self.agent.on_output(now, &mut self.timers);
        self.emit_all(events);
    }

    fn check_output_quiet(&mut self, now: Instant) {
        if let Some(events) = self.agent.check_output_quiet(now, &mut self.timers) {
            self.emit_all(events);
            self.release_idle_memory();
        }
    }

    /// Type `bytes` for a person (an operator's key): queued whole or not at all.
    pub(super) fn type_for_person(&mut self, bytes: &[u8]) -> Result<(), super::queue::InputFull> {
        self.terminal.queue_input(bytes)?;
        self.agent.on_typed(bytes);
        self.agent.person_typed();
        Ok(())
    }

    /// An operator's keys waiting their turn.
    pub(super) fn pending_keys(&self) -> &super::typing::KeyQueue {
        &self.pending_keys
    }

    pub(super) fn pending_keys_mut(&mut self) -> &mut super::typing::KeyQueue {
        &mut self.pending_keys
    }

    /// A person typed (an operator's keys or answer), even if their keys wait their turn.
    pub(super) fn person_typed(&mut self) {
        self.agent.person_typed();
    }

    /// Take over the state side of a handover record (`super::handover`).
    pub(super) fn resume_state(
        &mut self,
        last_person_input_ms: Option<u64>,
        screen_check_armed: bool,
        output_ms_ago: Option<u64>,
        now: Instant,
    ) {
        self.agent.resume_person_input(last_person_input_ms);
        if screen_check_armed {
            self.agent.resume_screen_check(now, &mut self.timers);
        }
        if let Some(ms_ago) = output_ms_ago {
            self.agent.resume_output(ms_ago, now, &mut self.timers);
        }
    }

    /// When the socket file is no longer this master's socket, bind it again (`super::socket`).
    fn check_socket(&mut self, check: super::socket_watch::Check) {
        if self.socket.check(check, self.poll.registry(), &self.files, &self.meta) {
            self.info_file.poke();
        }
    }

    fn on_child_exit(&mut self, status: ExitStatus) {
        info!(status = %desk_common::signals::describe_exit(status), escalated = self.policy.escalated(), "child exited");
        self.child_status = Some(status);
        let now = Instant::now();
        // Whatever the child wrote before it died is still in the PTY; deliver it first.
        if self.terminal.is_open() {
            self.read_pty(now);
        }
        // A title held back by the rate limit is the session's last word on its title: journal
        // it before the exit, not never.
        self.flush_title(now);
        self.flush_all_noise();
        self.drain_log(now);
        self.screen.sync_log();
        let record = ExitRecord {
            generation: self.meta.generation,
            status,
            escalated: self.policy.escalated(),
            exited_at_ms: desk_common::clock::now_ms(),
            cols: Some(self.screen.model().size().0),
            rows: Some(self.screen.model().size().1),
            title: Some(self.screen.model().title().to_string()),
            last_screen: Some(session::last_screen(self.screen.model().text_rows())),
            last_history: session::last_history(self.screen.model().history_text(session::LAST_HISTORY_LINES)),
        };
        match session::write_exit(&self.files, &record) {
            // The unused reserve is removed once the socket is gone, not in between.
            Ok(()) => {}
            Err(e) => {
                // A full disk: the reserved room takes it, without the last screen (the
                // reserve is sized for the record alone).
                let record = ExitRecord { last_screen: None, last_history: None, ..record };
                let reserved = match (self.exit_reserve.take(), session::encode_exit(&record)) {
                    (Some(reserve), Ok(bytes)) => reserve.commit(&bytes),
                    (None, _) => Err(anyhow::anyhow!("no room was reserved")),
                    (_, Err(e)) => Err(e),
                };
                match reserved {
                    Ok(()) => warn!("recorded the exit in its reserved room: {e:#}"),
                    Err(r) => warn!("cannot record the exit: {e:#}; nor in its reserved room: {r:#}"),
                }
            }
        }
        let (code, signal) = match status {
            ExitStatus::Code(c) => (Some(c), None),
            ExitStatus::Signal(s) => (None, Some(s)),
        };
        let events = self
            .observe(|a| a.on_exit(&desk_common::signals::describe_exit(status), now, desk_common::clock::now_ms()));
        self.emit_all(events);
        self.emit(EventBody::Exit { code, signal, escalated: self.policy.escalated() });
        // EXIT (after a pending keyframe) to welcomed clients, EXITING to the others.
        self.policy.on_child_exited(now);
        self.carry(now);
        self.socket.close(self.poll.registry());
        if let Err(e) = desk_common::fsutil::remove_if_exists(&self.files.socket) {
            warn!("{e:#}");
        }
        self.info_file.stop();
        drop(self.exit_reserve.take());
    }
}

/// A new session's policy: its terminal at the record's size, under `size_policy`.
pub(super) fn new_policy(meta: &SessionMeta, size_policy: SizePolicy) -> SessionPolicy {
    SessionPolicy::new((meta.cols, meta.rows), size_policy)
        // What its session record says it speaks (none: version 1, the compatibility mode).
        .speaking(meta.protocol.unwrap_or(1))
}

/// What HELLO is answered with: the session as it is now.
fn session_info(
    meta: &SessionMeta,
    screen: &Screen,
    clients: &super::clients::ClientTable,
    authority: &Authority,
) -> SessionInfo {
    let count = |role: Role| clients.count(role);
    let (cols, rows) = screen.size();
    SessionInfo {
        name: meta.name.clone(),
        generation: meta.generation,
        provider: meta.provider.clone(),
        pid: meta.pid,
        master_pid: meta.master_pid,
        command: meta.command.clone(),
        cwd: meta.cwd.clone(),
        cols,
        rows,
        controllers: count(Role::Controller),
        viewers: count(Role::Viewer),
        observers: count(Role::Observer),
        title: screen.title().to_string(),
        started_at_ms: meta.started_at_ms,
        state: Some(authority.view()),
    }
}

/// An ERROR frame's message, as the reason a client is closed for.
fn error_message(frame: &Frame) -> String {
    match frame {
        Frame::Error { message, .. } => message.clone(),
        other => other.kind().name().to_string(),
    }
}

#[cfg(test)]
mod tests {
    //! The master driven directly: clients are socket pairs inserted into its table, frames are
    //! handed to `client_frame` and what each client receives is read from the other end.

    use super::*;
    use crate::views::{SMALL_CHANGE, VIEW_REPAINT_INTERVAL};
    use desk_core::session::{HANDSHAKE_DEADLINE, MAX_CLIENTS, SLOW_CLIENT_DEADLINE};
    use desk_wire::FrameDecoder;
    use desk_wire::PROTOCOL_VERSION;
    use std::io::Read;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream as PeerStream;

    struct Rig {
        master: Master,
        _dir: tempfile::TempDir,
        _slave: OwnedFd,
    }

    #[test]
    fn output_times_alone_are_not_a_change_to_write_at_once() {
        let rig = rig(1);
        let a = rig.master.info();
        let mut b = a.clone();
        let state = b.state.as_mut().expect("the master has a state");
        state.last_output_ms = Some(42);
        state.activity.evidence.at_ms += 5;
        state.lifecycle.evidence.at_ms += 5;
        assert!(crate::info::same_but_output_times(&a, &b));
        let mut titled = b.clone();
        titled.title = "new".into();
        assert!(!crate::info::same_but_output_times(&a, &titled));
        let mut moved = b.clone();
        moved.state.as_mut().expect("a state").activity.since_ms += 1;
        assert!(!crate::info::same_but_output_times(&a, &moved));
        let mut attached = b;
        attached.viewers += 1;
        assert!(!crate::info::same_but_output_times(&a, &attached));
    }

    fn rig(child_pid: u32) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let file = |ext: &str| dir.path().join(format!("t.{ext}"));
        let files = SessionPaths {
            socket: file("sock"),
            meta: file("json"),
            exit: file("exit"),
            log: file("log"),
            info: file("info"),
        };
        let listener = UnixListener::bind(&files.socket).unwrap();
        let pty = nix::pty::openpty(None, None).unwrap();
        desk_common::pty::set_nonblocking(pty.master.as_fd()).unwrap();
        let meta = SessionMeta {
            name: "t".into(),
            generation: 1,
            provider: "shell".into(),
            pid: child_pid,
            master_pid: std::process::id(),
            master_start: None,
            command: vec!["sleep".into()],
            cwd: "/".into(),
            cols: 80,
            rows: 24,
            started_at_ms: 0,
            size_policy: None,
            protocol: Some(PROTOCOL_VERSION),
        };
        let signals = Signals::new(Vec::<i32>::new()).unwrap();
        let journal = desk_common::journal::Journal::open(dir.path(), desk_common::journal::JOURNAL_CAP).unwrap();
        let authority = desk_core::state::Authority::new(
            desk_core::state::RuleSet::builtin(desk_core::provider::Provider::Shell),
            Instant::now(),
            0,
        );
        let policy = new_policy(&meta, SizePolicy::default());
        let master = Master::new(Parts {
            files,
            poll: Poll::new().unwrap(),
            listener,
            pty: pty.master,
            signals,
            meta,
            screen: Screen::new(80, 24),
            journal,
            authority,
            subreaper: false,
            policy,
            log: None,
            lock: {
                let root = dir.path().join("home");
                let paths = desk_common::paths::Paths { runtime: root.clone(), state: root.clone(), config: root };
                let name = desk_common::paths::SessionName::parse("t").unwrap();
                paths.ensure_session_state(&name).unwrap();
                desk_common::session::MasterLock::take(&paths, &name, false).unwrap().unwrap()
            },
        });
        Rig { master, _dir: dir, _slave: pty.slave }
    }

    impl Rig {
        fn connect(&mut self) -> (Token, PeerStream) {
            let (ours, theirs) = PeerStream::pair().unwrap();
            ours.set_nonblocking(true).unwrap();
            theirs.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
            let token = self.master.clients.next_token();
            let mut client = Client::new(mio::net::UnixStream::from_std(ours), None);
            client.writable = true;
            self.master.policy.on_connect(client_id(token), Instant::now()).expect("room for a client");
            self.master.admit(token, client, Instant::now());
            (token, theirs)
        }

        /// The child's end reads what the master types, raw (no line editing holds bytes back)
        /// and without blocking; the PTY takes writes at once.
        fn raw_child_side(&mut self) {
            self.master.terminal.set_writable(true);
            let mut raw = nix::sys::termios::tcgetattr(&self._slave).unwrap();
            nix::sys::termios::cfmakeraw(&mut raw);
            nix::sys::termios::tcsetattr(&self._slave, nix::sys::termios::SetArg::TCSANOW, &raw).unwrap();
            crate::pty::set_nonblocking(self._slave.as_fd()).unwrap();
        }

        fn send(&mut self, token: Token, frame: Frame) {
            self.master.client_frame(token, frame, Instant::now());
            self.master.settle(Instant::now());
        }
    }

    /// Everything the peer has received, and whether the master closed the connection.
    fn received(peer: &mut PeerStream) -> (Vec<Frame>, bool) {
        let mut decoder = FrameDecoder::new();
        let mut buf = [0u8; 4096];
        let closed = loop {
            match peer.read(&mut buf) {
                Ok(0) => break true,
                Ok(n) => decoder.push(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break false,
                Err(e) => panic!("read failed: {e}"),
            }
        };
        let mut frames = Vec::new();
        while let Some(frame) = decoder.next_frame().unwrap() {
            frames.push(frame);
        }
        (frames, closed)
    }

    fn hello(role: Role) -> Frame {
        Frame::Hello { version: PROTOCOL_VERSION, role, cols: 0, rows: 0, status_line: false, view: false }
    }

    fn error_code(frame: &Frame) -> Option<ErrorCode> {
        match frame {
            Frame::Error { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// A raw, non-blocking end of a new pseudo-terminal pair: (the user's side, the terminal).
    fn outer_terminal() -> (OwnedFd, OwnedFd) {
        let pair = nix::pty::openpty(None, None).unwrap();
        let mut raw = nix::sys::termios::tcgetattr(&pair.slave).unwrap();
        nix::sys::termios::cfmakeraw(&mut raw);
        nix::sys::termios::tcsetattr(&pair.slave, nix::sys::termios::SetArg::TCSANOW, &raw).unwrap();
        crate::pty::set_nonblocking(pair.master.as_fd()).unwrap();
        crate::pty::set_nonblocking(pair.slave.as_fd()).unwrap();
        (pair.master, pair.slave)
    }

    fn read_all(fd: &OwnedFd) -> Vec<u8> {
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = nix::unistd::read(fd, &mut buf) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
        }
        all
    }

    #[test]
    fn a_lent_terminal_takes_the_stream_after_ready_and_goes_back_at_a_kept_key() {
        let mut rig = rig(0);
        rig.raw_child_side();
        let (client, mut peer) = rig.connect();
        let now = Instant::now();
        rig.send(client, hello(Role::Controller));
        assert!(matches!(received(&mut peer).0[..], [Frame::Welcome { .. }, ..]));
        let (user, terminal) = outer_terminal();
        // A TAKE without a descriptor is refused: the terminal stays the client's.
        rig.send(client, Frame::Terminal(TerminalOp::Take { keys: vec![0x1c] }));
        assert_eq!(received(&mut peer).0, [Frame::Terminal(TerminalOp::Give(Vec::new()))]);
        rig.master.clients.get_mut(&client).unwrap().passed = Some(terminal.try_clone().unwrap());
        rig.send(client, Frame::Terminal(TerminalOp::Take { keys: vec![0x1c] }));
        assert_eq!(received(&mut peer).0, [Frame::Terminal(TerminalOp::Taken)]);
        // Until READY nothing is written to it: the client may still be writing what came before.
        rig.master.on_output(b"early", now);
        rig.master.settle(now);
        assert!(read_all(&user).is_empty() && received(&mut peer).0.is_empty());
        rig.send(client, Frame::Terminal(TerminalOp::Ready));
        assert_eq!(read_all(&user), b"early", "the payload alone, no frame header");
        rig.master.on_output(b" and more", now);
        rig.master.settle(now);
        assert_eq!(read_all(&user), b" and more");
        assert!(received(&mut peer).0.is_empty(), "the stream no longer comes over the socket");
        // The client's own drawing goes in between whole frames.
        rig.send(client, Frame::Terminal(TerminalOp::Paint(b"[status]".to_vec())));
        assert_eq!(read_all(&user), b"[status]");
        // Keys typed: the session's up to the kept key, the rest back to the client.
        nix::unistd::write(&user, b"ab\x1czz").unwrap();
        rig.master.terminal_readable(client, now);
        rig.master.settle(now);
        assert_eq!(received(&mut peer).0, [Frame::Terminal(TerminalOp::Give(b"\x1czz".to_vec()))]);
        assert_eq!(read_all(&rig._slave), b"ab", "typed into the session");
        // Given back: the stream comes over the socket again, and the descriptor is let go.
        rig.master.on_output(b"late", now);
        rig.master.settle(now);
        assert_eq!(received(&mut peer).0, [Frame::Output(b"late".to_vec())]);
        assert!(read_all(&user).is_empty());
        assert!(rig.master.clients[&client].held.is_none());
    }

    #[test]
    fn an_operators_keys_are_typed_one_write_each_a_key_gap_apart_and_a_later_request_follows() {
        // Keys in one write reach the program in one read, and programs take such a burst for
        // something else (docs/agents-observed.md §8.2): the master types them one at a time.
        let mut rig = rig(0);
        rig.raw_child_side();
        let slave = rig._slave.try_clone().unwrap();
        let typed = move || read_all(&slave);
        let keys = |keys: &[&str]| {
            let keys = keys.iter().map(|k| k.to_string()).collect();
            desk_wire::operator::ClientEvent::Keys { keys, user: "ana".into(), tty: None, via: "cli".into() }.to_frame()
        };
        let (client, _peer) = rig.connect();
        let t0 = Instant::now();
        rig.master.client_frame(client, hello(Role::Query), t0);
        rig.master.client_frame(client, keys(&["Down", "Down"]), t0);
        rig.master.settle(t0);
        assert_eq!(typed(), b"\x1b[B", "the first key at once, alone");
        // A second request while the first is still being typed: its key comes after them.
        rig.master.client_frame(client, keys(&["Enter"]), t0);
        rig.master.settle(t0);
        assert_eq!(typed(), b"");
        let gap = super::super::typing::KEY_GAP;
        let steps: [(Duration, &[u8]); 5] = [
            (gap - Duration::from_millis(1), b""),
            (gap, b"\x1b[B"),
            (2 * gap - Duration::from_millis(1), b""),
            (2 * gap, b"\r"),
            (4 * gap, b""),
        ];
        for (at, want) in steps {
            rig.master.fire_timers(t0 + at);
            rig.master.settle(t0 + at);
            assert_eq!(typed(), want, "at {at:?}");
        }
    }

    #[test]
    fn a_client_that_never_says_hello_is_closed_at_the_deadline() {
        let mut rig = rig(0);
        let before = Instant::now();
        let (silent, mut silent_peer) = rig.connect();
        let (talker, mut talker_peer) = rig.connect();
        rig.send(talker, hello(Role::Query));
        rig.master.fire_timers(before + HANDSHAKE_DEADLINE - Duration::from_millis(1));
        rig.master.settle(Instant::now());
        assert!(received(&mut silent_peer).0.is_empty(), "closed before the deadline");
        rig.master.fire_timers(Instant::now() + HANDSHAKE_DEADLINE);
        rig.master.settle(Instant::now());
        let (frames, closed) = received(&mut silent_peer);
        assert_eq!(frames.iter().map(error_code).collect::<Vec<_>>(), vec![Some(ErrorCode::BadHello)]);
        assert!(closed);
        assert!(!rig.master.clients.contains_key(&silent));
        // The welcomed client is untouched.
        let (_, closed) = received(&mut talker_peer);
        assert!(!closed);
        assert!(rig.master.clients.contains_key(&talker));
    }

    /// The slow-client rule is the session policy's (unit-tested in desk-core); this pins that
    /// the loop wires it: a real socket that stops reading falls behind, is reported, and is
    /// evicted when the policy's timer fires at the deadline, while one that drains meanwhile
    /// stays. The clock is shifted by hand; nothing sleeps.
    #[test]
    fn a_viewer_that_stops_reading_is_evicted_at_the_slow_client_deadline_and_one_that_drains_stays() {
        let mut rig = rig(0);
        let t0 = Instant::now();
        let (stalled, mut stalled_peer) = rig.connect();
        let (drains, mut drains_peer) = rig.connect();
        drains_peer.set_nonblocking(true).unwrap();
        rig.send(stalled, hello(Role::Viewer));
        rig.send(drains, hello(Role::Viewer));
        let chunk = b"a line of output to keep the stream going\r\n".repeat(1500);
        let behind = |m: &Master, t: Token| m.clients[&t].behind_since.is_some();
        let mut pushed = 0;
        while !behind(&rig.master, stalled) || !behind(&rig.master, drains) {
            assert!(pushed < 1000, "nobody fell behind after {pushed} chunks");
            rig.master.on_output(&chunk, t0);
            pushed += 1;
        }
        rig.master.settle(t0);
        // One of them reads everything now, and so catches up.
        while !rig.master.clients[&drains].out.is_empty() {
            received(&mut drains_peer);
            rig.master.client_writable(drains);
        }
        rig.master.settle(t0);

        rig.master.fire_timers(t0 + SLOW_CLIENT_DEADLINE - Duration::from_millis(1));
        rig.master.settle(t0 + SLOW_CLIENT_DEADLINE - Duration::from_millis(1));
        assert!(rig.master.clients.contains_key(&stalled), "evicted before the deadline");
        rig.master.fire_timers(t0 + SLOW_CLIENT_DEADLINE);
        rig.master.settle(t0 + SLOW_CLIENT_DEADLINE);
        assert!(!rig.master.clients.contains_key(&stalled), "still connected at the deadline");
        assert!(rig.master.clients.contains_key(&drains), "the client that caught up was evicted");
        let (frames, closed) = received(&mut stalled_peer);
        assert!(closed, "the stalled client's connection is closed");
        // The reason is sent best-effort (behind a full socket buffer it rarely fits).
        for code in frames.iter().filter_map(error_code) {
            assert_eq!(code, ErrorCode::TooSlow);
        }
    }

    /// The bytes of every OUTPUT and KEYFRAME frame, in order.
    fn stream_bytes(frames: &[Frame]) -> Vec<u8> {
        let mut out = Vec::new();
        for frame in frames {
            if let Frame::Output(data) | Frame::Keyframe { data, .. } = frame {
                out.extend_from_slice(data);
            }
        }
        out
    }

    /// A viewer whose size is not the session's (80x24) gets its view: a keyframe, then at most
    /// one repaint per interval holding the latest screen, and while it cannot take one,
    /// nothing queued at all; a controller of the session's size gets the raw bytes.
    #[test]
    fn a_client_of_another_size_gets_coalesced_repaints_of_its_view_and_never_a_backlog() {
        let mut rig = rig(0);
        let (raw, mut raw_peer) = rig.connect();
        rig.send(
            raw,
            Frame::Hello {
                version: PROTOCOL_VERSION,
                role: Role::Controller,
                cols: 80,
                rows: 24,
                status_line: false,
                view: false,
            },
        );
        let (viewer, mut peer) = rig.connect();
        rig.send(
            viewer,
            Frame::Hello {
                version: PROTOCOL_VERSION,
                role: Role::Viewer,
                cols: 40,
                rows: 10,
                status_line: false,
                view: false,
            },
        );
        let (frames, _) = received(&mut peer);
        assert!(matches!(frames[..], [Frame::Welcome { .. }, Frame::Keyframe { .. }, ..]), "{frames:?}");
        let mut seen = stream_bytes(&frames);
        received(&mut raw_peer);

        let t0 = rig.master.clients[&viewer].next_repaint.expect("the keyframe counts as a repaint");
        // More than a small change between them (erases of the line's end change nothing drawn
        // but are output all the same), so the repaint waits for its interval.
        let erases = b"\x1b[K".repeat(SMALL_CHANGE / 6 + 1);
        let first = [b"first".as_slice(), &erases, b"\r\n"].concat();
        let second = [b"second".as_slice(), &erases, b"\r\n"].concat();
        rig.master.on_output(&first, t0 - Duration::from_millis(1));
        rig.master.on_output(&second, t0 - Duration::from_millis(1));
        rig.master.settle(t0 - Duration::from_millis(1));
        let (frames, _) = received(&mut raw_peer);
        assert_eq!(stream_bytes(&frames), [first, second].concat(), "the same-size client gets the raw bytes");
        assert!(received(&mut peer).0.is_empty(), "a repaint before its interval passed");
        assert!(rig.master.timers.next_deadline().is_some_and(|at| at <= t0), "no repaint timer armed");
        rig.master.fire_timers(t0);
        let (frames, _) = received(&mut peer);
        assert_eq!(frames.len(), 1, "one repaint for both changes: {frames:?}");
        seen.extend_from_slice(&stream_bytes(&frames));
        let mut terminal = Screen::new(40, 10);
        terminal.process(&seen);
        assert_eq!(terminal.text_rows()[..3], ["first", "second", ""]);

        // It cannot take a repaint: nothing is queued for it, however much the screen changes.
        rig.master.clients.get_mut(&viewer).unwrap().writable = false;
        for i in 0..50 {
            let at = t0 + VIEW_REPAINT_INTERVAL * (i + 1);
            rig.master.on_output(format!("line {i}\r\n").as_bytes(), at);
            rig.master.settle(at);
        }
        assert!(rig.master.clients[&viewer].out.is_empty(), "repaints queued for a client that cannot take them");
        // Once it can, it gets one repaint: the latest view.
        rig.master.client_writable(viewer);
        rig.master.settle(t0 + VIEW_REPAINT_INTERVAL * 60);
        let (frames, _) = received(&mut peer);
        assert_eq!(frames.len(), 1, "{frames:?}");
        seen.extend_from_slice(&stream_bytes(&frames));
        let mut terminal = Screen::new(40, 10);
        terminal.process(&seen);
        assert_eq!(terminal.text_rows()[8], "line 49");
    }

    /// A typed key's echo reaches a client that takes views at once, not a repaint interval
    /// later (issue 22: with attach's status line every client takes a view, and keys typed
    /// less than 16 ms apart each echoed a frame late).
    #[test]
    fn a_small_change_is_repainted_at_once_inside_the_repaint_interval() {
        let mut rig = rig(0);
        let (viewer, mut peer) = rig.connect();
        rig.send(
            viewer,
            Frame::Hello {
                version: PROTOCOL_VERSION,
                role: Role::Controller,
                cols: 80,
                rows: 23,
                status_line: false,
                view: true,
            },
        );
        let (frames, _) = received(&mut peer);
        assert!(matches!(frames[..], [Frame::Welcome { .. }, Frame::Keyframe { .. }, ..]), "{frames:?}");
        let mut seen = stream_bytes(&frames);
        let t0 = rig.master.clients[&viewer].next_repaint.expect("the keyframe counts as a repaint");
        for (i, key) in [b"a", b"b", b"c"].into_iter().enumerate() {
            // Each key well inside the interval of the repaint before it.
            let at = t0 - VIEW_REPAINT_INTERVAL + Duration::from_millis(1 + i as u64);
            rig.master.on_output(key, at);
            rig.master.settle(at);
            let (frames, _) = received(&mut peer);
            assert_eq!(frames.len(), 1, "key {i}: one repaint at once: {frames:?}");
            seen.extend_from_slice(&stream_bytes(&frames));
        }
        let mut terminal = Screen::new(80, 23);
        terminal.process(&seen);
        assert_eq!(terminal.text_rows()[0], "abc");
    }

    #[test]
    fn a_master_gives_its_read_buffer_and_blank_rows_back_when_output_goes_quiet() {
        let mut rig = rig(0);
        assert!(rig.master.terminal.read_buf().capacity() == 0 && rig.master.screen.model().allocated_rows() == 0);
        nix::unistd::write(&rig._slave, b"hello\r\n\x1b[2J").unwrap();
        let start = Instant::now();
        rig.master.read_pty(start);
        assert_eq!(
            rig.master.terminal.read_buf().len(),
            crate::terminal::PTY_READ_CHUNK,
            "reading allocates the buffer"
        );
        assert_eq!(rig.master.screen.model().allocated_rows(), 1);
        rig.master.check_output_quiet(start + crate::state::OUTPUT_QUIET_AFTER);
        assert!(!rig.master.agent.output_active());
        assert_eq!(rig.master.terminal.read_buf().capacity(), 0, "the read buffer outlived the burst");
        assert_eq!(rig.master.screen.model().allocated_rows(), 0, "a cleared row kept its cells");
        // A query client's visit (a `desk ls`) does not bring the PTY's buffer back.
        let (token, mut peer) = rig.connect();
        std::io::Write::write_all(&mut peer, &hello(Role::Query).to_bytes()).unwrap();
        rig.master.client_readable(token, start);
        rig.master.settle(start);
        assert!(matches!(received(&mut peer).0.first(), Some(Frame::Welcome { .. })));
        assert_eq!(rig.master.terminal.read_buf().capacity(), 0, "a query client's visit allocated the PTY buffer");
        drop(peer);
        rig.master.client_readable(token, start);
        rig.master.settle(start);
        assert!(!rig.master.clients.contains_key(&token));
    }

    /// A resize turns a same-size client into one of another size at once: output read later
    /// in the same loop turn (before `settle`) must not reach it as raw bytes drawn for the
    /// session's new size.
    #[test]
    fn output_after_a_resize_in_the_same_turn_is_not_sent_raw_to_a_client_of_the_old_size() {
        let mut rig = rig(0);
        let (a, mut a_peer) = rig.connect();
        rig.send(
            a,
            Frame::Hello {
                version: PROTOCOL_VERSION,
                role: Role::Controller,
                cols: 80,
                rows: 24,
                status_line: false,
                view: false,
            },
        );
        received(&mut a_peer);
        let (b, _b_peer) = rig.connect();
        // b is the most recently active controller now: the session takes its size.
        rig.master.client_frame(
            b,
            Frame::Hello {
                version: PROTOCOL_VERSION,
                role: Role::Controller,
                cols: 100,
                rows: 30,
                status_line: false,
                view: false,
            },
            Instant::now(),
        );
        assert_eq!(rig.master.screen.model().size(), (100, 30));
        rig.master.on_output(b"drawn for 100 columns", Instant::now());
        let (frames, _) = received(&mut a_peer);
        assert!(!String::from_utf8_lossy(&stream_bytes(&frames)).contains("drawn for"), "{frames:?}");
        rig.master.settle(Instant::now());
        let (frames, _) = received(&mut a_peer);
        assert!(matches!(frames[..], [Frame::Keyframe { .. }, ..]), "a keyframe of its view: {frames:?}");
    }

    #[test]
    fn a_hook_is_weighed_against_the_screen_drawn_since_the_last_check() {
        let mut rig = rig(0);
        let start = Instant::now();
        rig.master.agent.set_authority(desk_core::state::Authority::new(
            desk_core::state::RuleSet::builtin(desk_core::provider::Provider::Codex),
            start,
            0,
        ));
        // Codex draws its approval dialog; the screen check waits SCREEN_CHECK_DELAY for the
        // redraw to settle, and a turn-complete notify from another thread comes first.
        rig.master.on_output(b"\x1b[2J\x1b[20;1HWould you like to run the following command?\r\n  $ touch x", start);
        assert!(rig.master.agent.screen_check_armed());
        let mut body = serde_json::Map::new();
        body.insert("provider".into(), "codex".into());
        body.insert("payload".into(), serde_json::json!({"type": "agent-turn-complete"}));
        rig.master.on_hook_frame(body, start + Duration::from_millis(2)).unwrap();
        let view = rig.master.agent.authority().view();
        assert_eq!(view.activity.value, desk_core::state::Activity::Blocked, "{view:?}");
        assert_eq!(view.wait.as_deref(), Some("approval"));
    }

    #[test]
    fn a_second_hello_fails_the_handshake_and_closes() {
        let mut rig = rig(0);
        let (token, mut peer) = rig.connect();
        rig.send(token, hello(Role::Query));
        rig.send(token, hello(Role::Query));
        let (frames, closed) = received(&mut peer);
        assert!(matches!(frames[0], Frame::Welcome { .. }), "{frames:?}");
        assert_eq!(frames.len(), 2, "{frames:?}");
        assert_eq!(error_code(&frames[1]), Some(ErrorCode::BadHello));
        assert!(closed);
    }

    #[test]
    fn exit_goes_only_to_welcomed_clients_and_is_their_last_frame() {
        let mut rig = rig(0);
        let (welcomed, mut welcomed_peer) = rig.connect();
        rig.send(welcomed, hello(Role::Query));
        let (_silent, mut silent_peer) = rig.connect();
        rig.master.on_child_exit(ExitStatus::Code(3));
        rig.master.settle(Instant::now());

        let (frames, closed) = received(&mut welcomed_peer);
        assert!(matches!(frames[0], Frame::Welcome { .. }), "{frames:?}");
        assert_eq!(frames.last(), Some(&Frame::Exit { status: ExitStatus::Code(3), escalated: false }));
        assert!(closed);

        let (frames, closed) = received(&mut silent_peer);
        assert_eq!(frames.len(), 1, "{frames:?}");
        assert_eq!(error_code(&frames[0]), Some(ErrorCode::Exiting));
        assert!(closed);
    }

    #[test]
    fn a_full_session_refuses_with_its_own_code() {
        let mut rig = rig(0);
        let _held: Vec<_> = (0..MAX_CLIENTS).map(|_| rig.connect()).collect();
        let mut peer = PeerStream::connect(&rig.master.files.socket).unwrap();
        peer.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        rig.master.accept(Instant::now());
        let (frames, closed) = received(&mut peer);
        assert_eq!(frames.iter().map(error_code).collect::<Vec<_>>(), [Some(ErrorCode::SessionFull)]);
        assert!(closed);
        assert_eq!(rig.master.clients.len(), MAX_CLIENTS);
    }

    #[test]
    fn a_controller_that_asks_without_reading_is_disconnected_at_the_control_bound() {
        let mut rig = rig(0);
        let (token, _peer) = rig.connect();
        rig.send(token, hello(Role::Controller));
        let mut asked = 0;
        while rig.master.clients.contains_key(&token) {
            assert!(asked < 100_000, "still connected after {asked} unread snapshots");
            rig.send(token, Frame::SnapshotRequest { history: None });
            asked += 1;
        }
        let reply = SnapshotReply {
            generation: 1,
            state: Some(rig.master.agent.authority().view()),
            ..SnapshotReply::of_screen(rig.master.screen.model().snapshot())
        };
        let snapshot = Frame::Snapshot(Box::new(reply)).to_bytes().len();
        assert!(asked * snapshot > crate::client::CONTROL_QUEUE_LIMIT, "gone after {asked}");
    }

    #[test]
    fn a_realtime_signal_reaches_the_session_and_its_exit_names_it() {
        use std::os::unix::process::CommandExt;
        #[expect(clippy::zombie_processes, reason = "the master under test reaps it")]
        let child = std::process::Command::new("sleep").arg("30").process_group(0).spawn().unwrap();
        let mut rig = rig(child.id());
        let (token, mut peer) = rig.connect();
        rig.send(token, hello(Role::Query));
        rig.send(token, Frame::Signal { signal: 40, grace_ms: 0 });
        let deadline = Instant::now() + Duration::from_secs(5);
        while rig.master.child_status.is_none() {
            assert!(Instant::now() < deadline, "the child outlived signal 40");
            std::thread::sleep(Duration::from_millis(10));
            rig.master.reap();
        }
        rig.master.settle(Instant::now());
        let (frames, _) = received(&mut peer);
        assert_eq!(frames.last(), Some(&Frame::Exit { status: ExitStatus::Signal(40), escalated: false }));
    }
}
