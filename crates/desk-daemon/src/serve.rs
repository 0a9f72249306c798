//! `desk serve`: the per-user delivery daemon.
//!
//! Owns one mio loop that routes between the delivery engine (`desk_core::delivery::engine`, pure)
//! and the world: the control socket (`desk send`, `queue`, `force`, ...), an observer
//! connection to every running session master ([`masters`]), the item store, inotify on the
//! runtime and intake directories (so it notices sessions and prompts without polling, and asks
//! a master whose socket file was removed to bind it again: masters hold no inotify instance
//! of their own), channel
//! ingest (`crate::channel::ingest`: inotify on every channel directory; every channel is
//! ingested from its durable cursor at start, so messages posted while it was down are
//! delivered), signals and timers. Before the engine judges a session's items — at start, when
//! a master welcomes the daemon, when a connection ends with no master left — it is given what
//! the session's events journal recorded since the engine last heard from it ([`evidence`]:
//! hooks, activity, exits, new generations, from a durable per-session cursor), and no
//! journalled hook is given twice. Invariants: one daemon per user (an exclusive lock on `serve.lock`, released by
//! the kernel when the process dies, so a stale lock is simply taken over); actions are carried
//! out in the order the engine gave them and a failed persist stops the rest of its batch; no
//! failure of one item or session stops the daemon — each is logged and reported to the engine,
//! which holds, retries with backoff or marks the item stuck. An intake file leaves the intake
//! only queued or, when it cannot be parsed, set aside; any other failure leaves it for a
//! retry with backoff. Nothing but HELLO is ever sent to a master of another protocol
//! version. Every control client is bounded: unread replies (reading stops past
//! [`CONTROL_OUT_LIMIT`]), idle time ([`CONTROL_IDLE_TIMEOUT`]) and their number. When a
//! session needs a person (blocked, a stuck item, degraded, a failed exit, the agent's own
//! notification) it runs the operator's notify command ([`notify`](crate::notify)) off the loop's thread.
//! Sessions with a restart policy are restarted by [`supervisor`](crate::supervisor) (backoff,
//! crash-loop limit, durable state), through `desk restart` run off the loop.

use anyhow::{Context, Result};
use mio::net::{UnixListener, UnixStream};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook_mio::v1_0::Signals;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tracing::{info, warn};

use crate::channel::store::ChannelStore;
use crate::evidence;
use crate::masters::{self, MasterConn};
use crate::outbox::{Next, Outbox};
use crate::store::{self, IngestError, Store};
use desk_common::clock::now_ms;
use desk_common::detach::Ready;
use desk_common::paths::{Paths, SessionName};
use desk_core::channel::ChannelName;
use desk_core::delivery::engine::{self, Action, Engine, Input, TimerKey};
use desk_core::delivery::item::{ItemId, State};
use desk_core::provider::Provider;
use desk_core::state::RuleSet;
use desk_core::time::Backoff;
use desk_wire::control::{self, ErrorKind, Response};

mod control_requests;
#[cfg(test)]
mod tests;

const LISTENER: Token = Token(0);
const SIGNALS: Token = Token(1);
const INOTIFY: Token = Token(2);
/// The restart supervisor's waker: a supervised restart (run off the loop) finished.
const SUPERVISOR: Token = Token(3);
const FIRST_CONN: usize = 16;

/// How often channels with supervisor check-ins are looked at: a check-in waits for workers
/// idle for at least a second (the flag's smallest value), usually minutes, so 5 s late is
/// nothing; and only a daemon with such a channel keeps this timer.
const CHECKIN_EVERY: Duration = Duration::from_secs(5);

/// Finished items and tombstones are swept hourly: the only timer an idle daemon keeps.
const SWEEP_EVERY: Duration = Duration::from_secs(3600);

/// Control clients beyond this many are refused (after the longest-idle one is closed to make
/// room); each CLI call is one short connection.
const MAX_CONTROL_CLIENTS: usize = 64;

/// A control client that owes nothing and has neither sent nor read a byte for this long is
/// closed: the CLI sends its request as soon as it connects and gives up on an answer after
/// 10 s itself, so a connection idle longer only holds a slot.
const CONTROL_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// Replies waiting for one control client beyond this many bytes stop the daemon from reading
/// that client's next request until it reads: a client pipelining requests without reading
/// costs at most this plus one reply. 1 MiB holds hundreds of listing replies.
const CONTROL_OUT_LIMIT: usize = 1 << 20;

/// First new attempt at a master that speaks another protocol version: it will not change
/// until it is restarted (a new master is noticed at once, through inotify), so retries are
/// only a safety net and start slow.
const REFUSED_RETRY_FIRST: Duration = Duration::from_secs(5);

/// Retries of such a master back off (doubling) to this: one connection and one log line per
/// five minutes for a session that stays incompatible.
const REFUSED_RETRY_MAX: Duration = Duration::from_secs(300);

/// A master this daemon cannot talk to, and when to try it again.
struct Refusal {
    reason: String,
    retry_at: Instant,
    backoff: Backoff,
}

/// First retry of an intake file that could not be queued (a full disk, an I/O error): soon
/// enough that a `desk send` waiting for its item sees it taken within its deadline once the
/// cause is gone.
const INTAKE_RETRY_FIRST: Duration = Duration::from_millis(250);

/// Retries back off (doubling) to this: a disk that stays full costs one attempt and one log
/// line per intake file every 30 s, and a freed disk is noticed within 30 s.
const INTAKE_RETRY_MAX: Duration = Duration::from_secs(30);

fn lock_path(paths: &Paths) -> PathBuf {
    paths.state.join("delivery").join("serve.lock")
}

/// How long a starting daemon waits for the lock while its holder is exiting (or already
/// gone): a killed process releases its files within milliseconds, even a large one; a bound
/// keeps a holder stuck in its exit (a hung filesystem) from hanging `desk serve`.
const LOCK_TAKEOVER_WAIT: Duration = Duration::from_secs(2);

/// Hold the one-daemon-per-user lock for the life of the returned file.
pub fn take_lock(paths: &Paths) -> Result<File> {
    match desk_common::pidlock::take(&lock_path(paths), LOCK_TAKEOVER_WAIT, |_| false)? {
        Ok(file) => Ok(file),
        Err(held) => {
            let holder = held.pid.map(|p| p.to_string()).unwrap_or_else(|| "unknown".into());
            Err(AlreadyRunning(holder).into())
        }
    }
}

/// Another daemon holds the lock (its pid, or `unknown`).
#[derive(Debug, thiserror::Error)]
#[error("desk serve is already running (pid {0}); one daemon serves all sessions")]
pub struct AlreadyRunning(String);

struct ControlConn {
    stream: UnixStream,
    inbuf: Vec<u8>,
    out: Vec<u8>,
    /// Replies owed to this client (a force waits for its outcome).
    owed: usize,
    closed: bool,
    /// When a byte last moved either way: an idle client is closed after
    /// [`CONTROL_IDLE_TIMEOUT`].
    last_progress: Instant,
}

impl ControlConn {
    /// When this client counts as idle, unless it waits for a reply.
    fn idle_deadline(&self) -> Option<Instant> {
        (self.owed == 0 && !self.closed).then_some(self.last_progress + CONTROL_IDLE_TIMEOUT)
    }
}

struct Daemon {
    paths: Paths,
    poll: Poll,
    listener: UnixListener,
    signals: Signals,
    inotify: Inotify,
    runtime_watch: nix::sys::inotify::WatchDescriptor,
    store: Store,
    /// How far each session's events journal has been given to the engine.
    cursors: evidence::Cursors,
    engine: Engine,
    controls: HashMap<Token, ControlConn>,
    masters: HashMap<Token, MasterConn>,
    by_session: HashMap<String, Token>,
    next_token: usize,
    timers: BinaryHeap<Reverse<(Instant, TimerKey)>>,
    rules: HashMap<Provider, Rc<RuleSet>>,
    inbox: VecDeque<Input>,
    /// The engine's actions not carried out yet, and the persists staged for the next group
    /// commit ([`crate::outbox`]).
    outbox: Outbox,
    /// Sessions whose journal cursor moved: written once the turn's group commit made durable
    /// what the engine did with the evidence it passes over.
    cursor_saves: std::collections::BTreeSet<String>,
    next_sweep: Instant,
    stopping: bool,
    /// Ingest requests waiting for their item to be queued: id → control client.
    ingest_waiters: Vec<(ItemId, Token)>,
    /// Intake files that could not be queued yet, with the last error (shown by `desk item`).
    intake_errors: HashMap<ItemId, String>,
    /// When to try the intake again after a failed ingest, and the delay after that one.
    intake_retry: Option<Instant>,
    intake_backoff: Backoff,
    /// Masters that speak another protocol version, by session: not connected until due.
    refused: HashMap<String, Refusal>,
    /// The channel directories, and the inotify watch on their parent (new channels).
    channels: ChannelStore,
    channels_watch: nix::sys::inotify::WatchDescriptor,
    /// One watch per channel directory (appends, new threads).
    channel_watches: HashMap<nix::sys::inotify::WatchDescriptor, ChannelName>,
    /// When to ingest every channel again after a pass failed, and the delay after that one.
    channel_retry: Option<Instant>,
    channel_backoff: Backoff,
    /// Since when each session's agent has been idle (Unix ms), for supervisor check-ins.
    idle_since: HashMap<String, u64>,
    /// Channels with check-ins on, and when to look at them next.
    checkin_channels: std::collections::BTreeSet<ChannelName>,
    next_checkin: Instant,
    notifications: crate::notify::Notifications,
    /// Restart policies carried out ([`supervisor`](crate::supervisor)).
    supervisor: crate::supervisor::Supervision,
}

/// Run the daemon in this process until SIGTERM/SIGINT or a `stop` request.
pub fn run(ready: Option<std::os::fd::OwnedFd>) -> Result<()> {
    let paths = Paths::from_env()?;
    paths.ensure_runtime()?;
    paths.ensure_state()?;
    let store = Store::open(&paths.state)?;
    let _lock = match take_lock(&paths) {
        Ok(lock) => lock,
        Err(e) => {
            let report = if e.is::<AlreadyRunning>() { Ready::AlreadyRunning } else { Ready::Failed };
            report_ready(ready, report(format!("{e:#}")));
            return Err(e);
        }
    };
    desk_common::logging::init_file(&store.root().join("serve.log"));
    desk_common::logging::log_panics();
    let setup = Daemon::start(paths, store);
    match setup {
        Ok(mut daemon) => {
            report_ready(ready, Ready::Ok);
            info!(pid = std::process::id(), "desk serve started");
            let result = daemon.run();
            let _ = std::fs::remove_file(desk_common::daemon_client::socket_path(&daemon.paths));
            info!("desk serve stopped");
            result
        }
        Err(e) => {
            report_ready(ready, Ready::Failed(format!("{e:#}")));
            Err(e)
        }
    }
}

fn report_ready(ready: Option<std::os::fd::OwnedFd>, report: Ready) {
    if let Some(fd) = ready {
        report.report(fd);
    }
}

impl Daemon {
    fn start(paths: Paths, store: Store) -> Result<Daemon> {
        let poll = Poll::new().context("cannot create the event loop")?;
        let socket = desk_common::daemon_client::socket_path(&paths);
        // We hold the lock, so any socket file there is a dead daemon's.
        desk_common::fsutil::remove_if_exists(&socket)?;
        let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
        let bound = UnixListener::bind(&socket);
        nix::sys::stat::umask(old);
        let mut listener = bound.with_context(|| format!("cannot listen on {}", socket.display()))?;
        poll.registry().register(&mut listener, LISTENER, Interest::READABLE)?;
        let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP])?;
        poll.registry().register(&mut signals, SIGNALS, Interest::READABLE)?;
        let inotify = desk_common::inotify::start(InitFlags::IN_NONBLOCK)?;
        let watch = AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_DELETE;
        // Moves away too: a master whose socket goes is asked to bind it again (`on_inotify`).
        let runtime_watch = inotify
            .add_watch(&paths.runtime, watch | AddWatchFlags::IN_MOVED_FROM)
            .context("cannot watch the runtime directory")?;
        inotify.add_watch(&store.root().join("intake"), watch).context("cannot watch the intake directory")?;
        let channels = ChannelStore::open(&paths)?;
        let channels_watch = inotify
            .add_watch(channels.root(), AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO)
            .context("cannot watch the channels directory")?;
        poll.registry().register(&mut SourceFd(&inotify.as_fd().as_raw_fd()), INOTIFY, Interest::READABLE)?;
        let notifications = crate::notify::Notifications::new(paths.clone());
        let waker = std::sync::Arc::new(mio::Waker::new(poll.registry(), SUPERVISOR).context("cannot create a waker")?);
        let supervisor = crate::supervisor::Supervision::new(paths.clone(), waker);
        let mut daemon = Daemon {
            paths,
            poll,
            listener,
            signals,
            inotify,
            runtime_watch,
            cursors: evidence::Cursors::open(store.root())?,
            store,
            engine: Engine::new(),
            controls: HashMap::new(),
            masters: HashMap::new(),
            by_session: HashMap::new(),
            next_token: FIRST_CONN,
            timers: BinaryHeap::new(),
            rules: HashMap::new(),
            inbox: VecDeque::new(),
            outbox: Outbox::default(),
            cursor_saves: std::collections::BTreeSet::new(),
            next_sweep: Instant::now(),
            stopping: false,
            ingest_waiters: Vec::new(),
            intake_errors: HashMap::new(),
            intake_retry: None,
            intake_backoff: Backoff::new(INTAKE_RETRY_FIRST, INTAKE_RETRY_MAX),
            refused: HashMap::new(),
            channels,
            channels_watch,
            channel_watches: HashMap::new(),
            channel_retry: None,
            channel_backoff: Backoff::new(INTAKE_RETRY_FIRST, INTAKE_RETRY_MAX),
            idle_since: HashMap::new(),
            checkin_channels: std::collections::BTreeSet::new(),
            next_checkin: Instant::now() + CHECKIN_EVERY,
            notifications,
            supervisor,
        };
        daemon.restore()?;
        Ok(daemon)
    }

    /// Remove the temporary files of atomic writes whose writer was killed mid-write (a
    /// `desk send`, a master, an earlier daemon): in the store, the runtime directory and every
    /// session's state directory. A failure is logged; it never stops the start.
    fn sweep_stale_tmp(&self) {
        let root = self.store.root();
        let mut dirs = vec![
            root.to_path_buf(),
            root.join("intake"),
            root.join("cursors"),
            root.join(store::SPARES),
            self.paths.runtime.clone(),
        ];
        for parent in [root.join("queue"), self.paths.state.join("sessions"), self.channels.root().to_path_buf()] {
            if let Ok(entries) = std::fs::read_dir(&parent) {
                dirs.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
            }
        }
        let mut removed = 0;
        for dir in dirs {
            match desk_common::fsutil::sweep_stale_tmp(&dir) {
                Ok(n) => removed += n,
                Err(e) => warn!("cannot sweep temporary files: {e:#}"),
            }
        }
        if removed > 0 {
            info!(removed, "removed temporary files left by interrupted writes");
        }
    }

    /// Start-up: temporary files, pauses, items, intake, sessions.
    fn restore(&mut self) -> Result<()> {
        self.sweep_stale_tmp();
        // After the sweep, so the pool's files (of this pid) are not taken for a dead writer's.
        if let Err(e) = self.store.start_spare_pool() {
            warn!("{e:#}; new items' files are created as they are written");
        }
        let (pauses, aside) = self.store.restore_pauses(now_ms())?;
        if let Some(aside) = aside {
            tracing::error!("{}; every session with a queue is held until the operator resumes it", aside.message());
        }
        for (session, pause) in pauses.sessions {
            self.feed(Input::Paused { session, reason: pause.reason });
        }
        let (items, problems) = self.store.load_all()?;
        for p in problems {
            tracing::error!("{}", p.error);
        }
        let live = engine::restorable(items);
        info!(items = live.len(), "restored pending items");
        let mut sessions: Vec<String> = live.iter().map(|i| i.session.clone()).collect();
        sessions.sort();
        sessions.dedup();
        self.feed(Input::Restore(live));
        // What the sessions journalled while the daemon was down (hooks, exits, new
        // generations) is weighed before anything else is.
        for session in &sessions {
            self.replay_journal(session);
        }
        // Connect to every running master; sessions with items but no master are down. Before
        // the intake is read: a prompt queued for a running session meets "connecting", never
        // "not running", while its master's first report is on its way.
        let mut connected = std::collections::HashSet::new();
        if let Ok(names) = self.paths.session_names() {
            for name in names {
                if self.connect(name.as_str()) {
                    connected.insert(name.to_string());
                }
            }
        }
        for session in sessions {
            if !connected.contains(&session) {
                self.feed(Input::SessionDown { session, generation: None });
            }
        }
        self.ingest_all();
        // Every channel from its cursor: what was posted while the daemon was down goes now.
        self.ingest_channels();
        // Ends of supervised sessions while the daemon was down are judged now.
        let held = self.supervisor.restore(&connected);
        self.notify_failed(held);
        self.settle();
        Ok(())
    }

    /// Tell the operator about sessions the supervisor holds down for a failure.
    fn notify_failed(&mut self, held: impl IntoIterator<Item = (String, String)>) {
        let mut any = false;
        for (session, health) in held {
            self.notifications.on_failed(&session, &health);
            any = true;
        }
        if any {
            self.send_notify_records();
        }
    }

    fn run(&mut self) -> Result<()> {
        let mut events = Events::with_capacity(128);
        while !self.stopping {
            let now = Instant::now();
            if now >= self.next_sweep {
                self.next_sweep = now + SWEEP_EVERY;
                match self.store.sweep(now_ms()) {
                    Ok(n) if n > 0 => info!(removed = n, "swept finished items"),
                    Ok(_) => {}
                    Err(e) => warn!("sweep failed: {e:#}"),
                }
            }
            self.retry_refused_masters(now);
            self.supervisor.tick();
            if self.intake_retry.is_some_and(|at| at <= now) {
                self.intake_retry = None;
                self.ingest_all();
            }
            if self.channel_retry.is_some_and(|at| at <= now) {
                self.channel_retry = None;
                self.ingest_channels();
            }
            if !self.checkin_channels.is_empty() && now >= self.next_checkin {
                self.next_checkin = now + CHECKIN_EVERY;
                self.check_in();
            }
            while let Some(Reverse((at, _))) = self.timers.peek() {
                if *at > now {
                    break;
                }
                let Some(Reverse((_, key))) = self.timers.pop() else { break };
                self.feed(Input::Timer(key));
            }
            let timeout = self.end_turn();
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e).context("poll failed");
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept(),
                    SIGNALS => {
                        for signal in self.signals.pending() {
                            if signal == SIGTERM || signal == SIGINT {
                                info!(signal, "stopping");
                                self.stopping = true;
                            }
                        }
                    }
                    INOTIFY => self.on_inotify(),
                    SUPERVISOR => {
                        let held = self.supervisor.on_wake();
                        self.notify_failed(held);
                    }
                    token if self.controls.contains_key(&token) => self.control_event(token),
                    token if self.masters.contains_key(&token) => self.master_event(token),
                    _ => {}
                }
            }
            self.close_idle_controls(Instant::now());
            self.reap_connections();
        }
        self.settle();
        self.cursors.save_all();
        Ok(())
    }

    /// The end of a turn: everything it made ready committed and carried out ([`Daemon::settle`]),
    /// then how long the loop may wait for events. The wait is known only after the settle: an
    /// action that waited on the group commit may have armed a timer (the echo window's looks
    /// after a paste's `written` record, a retry after a failed persist), and a wait reckoned
    /// before it slept past that timer until some other event or timer came — about one prompt
    /// in twenty to an idle agent took a second more (docs/benchmarks.md §24).
    fn end_turn(&mut self) -> Duration {
        self.settle();
        self.wake_at().saturating_duration_since(Instant::now())
    }

    /// When the loop must wake without an event: the earliest engine timer, retry or deadline.
    fn wake_at(&self) -> Instant {
        let later = self.next_sweep;
        self.timers
            .peek()
            .map_or(later, |Reverse((at, _))| *at)
            .min(later)
            .min(self.intake_retry.unwrap_or(later))
            .min(self.channel_retry.unwrap_or(later))
            .min(if self.checkin_channels.is_empty() { later } else { self.next_checkin })
            .min(self.refused.values().map(|r| r.retry_at).min().unwrap_or(later))
            .min(self.controls.values().filter_map(ControlConn::idle_deadline).min().unwrap_or(later))
            .min(self.supervisor.wake_at().unwrap_or(later))
    }

    /// Close control clients idle past [`CONTROL_IDLE_TIMEOUT`] (their unread replies with them).
    fn close_idle_controls(&mut self, now: Instant) {
        for conn in self.controls.values_mut() {
            if conn.idle_deadline().is_some_and(|at| at <= now) {
                info!(unread = conn.out.len(), "closing an idle control client");
                conn.closed = true;
                conn.out.clear();
            }
        }
    }

    fn new_token(&mut self) -> Token {
        let t = Token(self.next_token);
        self.next_token += 1;
        t
    }

    // ----- engine plumbing -----

    /// Give the engine an input and carry out what follows that needs nothing made durable
    /// first; the rest waits for the turn's group commit ([`Daemon::settle`]).
    fn feed(&mut self, input: Input) {
        self.inbox.push_back(input);
        self.run_engine();
    }

    /// Hand the engine every input waiting, and carry out every action that waits on no
    /// persist; persists are staged for the group commit.
    fn run_engine(&mut self) {
        loop {
            while let Some(input) = self.inbox.pop_front() {
                self.note_activity(&input);
                let actions = self.engine.handle(input, Instant::now(), now_ms());
                self.outbox.push(actions);
            }
            match self.outbox.next() {
                Next::Perform(action) => self.perform(action),
                Next::Commit | Next::Idle if self.inbox.is_empty() => return,
                Next::Commit | Next::Idle => {}
            }
        }
    }

    /// The end of a turn: commit the staged persists together, carry out what waited on them,
    /// and again, until nothing is left; then write the journal cursors that moved (after the
    /// items the evidence they pass over changed).
    fn settle(&mut self) {
        loop {
            self.run_engine();
            if !self.outbox.has_staged() {
                break;
            }
            self.commit();
        }
        let sessions: Vec<SessionName> =
            std::mem::take(&mut self.cursor_saves).iter().filter_map(|s| SessionName::parse(s).ok()).collect();
        for (session, result) in self.cursors.save_group(&sessions) {
            if let Err(e) = result {
                warn!(session = %session, "cannot record how far its journal was read (a restart replays more of it): {e:#}");
            }
        }
    }

    /// One group commit: every staged record written and synced together, then what each
    /// persist's success allows (a failed one stops the rest of its batch: it depended on it).
    fn commit(&mut self) {
        let (entries, staged) = self.outbox.take_group();
        let results = self.store.persist_group(&entries, |step| match step {
            desk_common::fsutil::GroupStep::Written => store::failpoint("batch-written"),
            desk_common::fsutil::GroupStep::Synced => store::failpoint("batch-synced"),
            desk_common::fsutil::GroupStep::Renamed(_) => {}
        });
        let mut failed = std::collections::HashSet::new();
        for s in staged {
            if failed.contains(&s.batch) {
                continue;
            }
            if let Err(e) = &results[s.entry] {
                warn!(item = %s.item.id, "cannot persist: {e:#}");
                // The rest of this batch must not happen: it depended on this write.
                self.inbox.push_back(Input::PersistFailed { token: s.token, error: format!("{e:#}") });
                self.outbox.drop_batch(s.batch);
                failed.insert(s.batch);
                continue;
            }
            if s.from == State::Queued && s.item.state == State::Sending {
                store::failpoint("after-claim");
            }
            if s.item.state == State::Stuck && s.from != State::Stuck {
                self.notifications.on_stuck(&s.item);
                self.send_notify_records();
            }
            self.after_persist(&s.item.id, s.item.state);
        }
    }

    /// Carry out one action (a persist never comes here: the outbox stages it).
    fn perform(&mut self, action: Action) {
        match action {
            Action::Persist { token, item, .. } => {
                // Unreachable by the outbox's contract; failing it is the safe answer.
                warn!(item = %item.id, "a persist reached the daemon outside a group commit");
                self.inbox.push_back(Input::PersistFailed { token, error: "not committed".into() });
            }
            Action::Snapshot { token, session, generation } => match self.master_for(&session, generation) {
                Some(conn) => conn.request_snapshot(token),
                None => self
                    .inbox
                    .push_back(Input::Snapshot { token, result: Err(format!("session {session} is not connected")) }),
            },
            Action::Write { token, session, generation, kind, bytes } => {
                let step = match kind {
                    engine::WriteKind::Paste => Some(("before-paste", "after-paste")),
                    engine::WriteKind::Enter => Some(("before-submit", "after-submit")),
                    engine::WriteKind::Erase => None,
                };
                if let Some((before, _)) = step {
                    store::failpoint(before);
                }
                match self.master_for(&session, generation) {
                    Some(conn) => {
                        conn.write_input(token, bytes);
                        if store::failpoints_armed() {
                            conn.flush_blocking();
                        }
                    }
                    None => self.inbox.push_back(Input::Written {
                        token,
                        result: Err(engine::WriteError::Refused(format!("session {session} is not connected"))),
                    }),
                }
                if let Some((_, after)) = step {
                    store::failpoint(after);
                }
            }
            Action::Arm { at, key } => self.timers.push(Reverse((at, key))),
            Action::Reply { client, ok, acted, message, item } => {
                let response = match (ok, acted, item) {
                    (true, _, Some(item)) => Response::answer(message, &*item),
                    (true, _, None) => Response::done(message),
                    // It typed, and the outcome is not a delivery: not a refusal.
                    (false, true, _) => Response::fail(ErrorKind::NotDelivered, message),
                    (false, false, _) => Response::fail(ErrorKind::Refused, message),
                };
                self.reply(Token(client as usize), response);
            }
        }
    }

    fn after_persist(&mut self, id: &ItemId, state: State) {
        let waiting: Vec<Token> = self.ingest_waiters.iter().filter(|(i, _)| i == id).map(|(_, t)| *t).collect();
        if waiting.is_empty() {
            return;
        }
        self.ingest_waiters.retain(|(i, _)| i != id);
        for client in waiting {
            self.reply(client, Self::ingested(id, state));
        }
    }

    fn master_for(&mut self, session: &str, generation: u32) -> Option<&mut MasterConn> {
        let token = *self.by_session.get(session)?;
        let conn = self.masters.get_mut(&token)?;
        (conn.generation() == Some(generation) && !conn.closed).then_some(conn)
    }

    // ----- intake -----

    /// Try every intake file. Files that fail for a reason that may pass stay in the intake
    /// and are retried with backoff; a pass with no such failure resets the backoff.
    fn ingest_all(&mut self) {
        let files = match self.store.pending_intake() {
            Ok(files) => files,
            Err(e) => {
                warn!("cannot list the intake: {e:#}");
                self.retry_intake_later();
                return;
            }
        };
        let mut failed = false;
        let mut errors = HashMap::new();
        for path in files {
            if let Err((id, error)) = self.ingest_file(&path) {
                failed = true;
                if let Some(id) = id {
                    errors.insert(id, error);
                }
            }
        }
        self.intake_errors = errors;
        if failed {
            self.retry_intake_later();
        } else {
            self.intake_retry = None;
            self.intake_backoff.reset();
        }
    }

    fn retry_intake_later(&mut self) {
        if self.intake_retry.is_none() {
            self.intake_retry = Some(Instant::now() + self.intake_backoff.fail());
        }
    }

    /// Queue one intake file and answer the `desk send`s waiting for it. A transient failure
    /// leaves the file (and its waiters) for a retry and is returned with the item's id when
    /// known; an unparsable file is set aside and its waiters are told.
    fn ingest_file(&mut self, path: &std::path::Path) -> Result<(), (Option<ItemId>, String)> {
        let id = path.file_stem().and_then(|s| s.to_str()).and_then(ItemId::parse);
        match self.store.ingest(path) {
            Ok(ingested) => {
                let id = ingested.item.id.clone();
                self.intake_errors.remove(&id);
                if ingested.fresh {
                    store::failpoint("after-ingest");
                    info!(item = %id, session = %ingested.item.session, "queued");
                    self.feed(Input::Ingested(ingested.item));
                }
                self.answer_ingest_waiters(&id);
                Ok(())
            }
            Err(IngestError::Transient(e)) => {
                let error = format!("{e:#}");
                warn!("cannot queue {} yet; it stays in the intake and is retried: {error}", path.display());
                if let Some(id) = &id {
                    self.intake_errors.insert(id.clone(), error.clone());
                }
                self.retry_intake_later();
                Err((id, error))
            }
            Err(IngestError::Unparsable(error)) => {
                let why = match self.store.set_aside(path) {
                    Ok(bad) => format!("{error}; set aside as {}", bad.display()),
                    Err(e) => format!("{error}; and it cannot be set aside: {e:#}"),
                };
                tracing::error!("{why}");
                if let Some(id) = id {
                    let waiting: Vec<Token> =
                        self.ingest_waiters.iter().filter(|(i, _)| *i == id).map(|(_, t)| *t).collect();
                    self.ingest_waiters.retain(|(i, _)| *i != id);
                    for client in waiting {
                        self.reply(
                            client,
                            Response::fail(ErrorKind::Refused, format!("item {id} was not queued: {why}")),
                        );
                    }
                }
                Ok(())
            }
        }
    }

    /// Answer every `desk send` waiting for `id` with the item's state now.
    fn answer_ingest_waiters(&mut self, id: &ItemId) {
        let waiting: Vec<Token> = self.ingest_waiters.iter().filter(|(i, _)| i == id).map(|(_, t)| *t).collect();
        if waiting.is_empty() {
            return;
        }
        self.ingest_waiters.retain(|(i, _)| i != id);
        let response = self.ingest_answer(id);
        for client in waiting {
            self.reply(client, response.clone());
        }
    }

    // ----- channels -----

    /// Watch every channel directory and ingest every channel from its cursor.
    fn ingest_channels(&mut self) {
        let names = match self.channels.list() {
            Ok(names) => names,
            Err(e) => {
                warn!("cannot list the channels: {e:#}");
                self.retry_channels_later();
                return;
            }
        };
        let mut failed = false;
        for name in names {
            self.watch_channel(&name);
            failed |= !self.ingest_channel(&name);
        }
        if !failed {
            self.channel_backoff.reset();
        }
    }

    fn watch_channel(&mut self, name: &ChannelName) {
        if self.channel_watches.values().any(|n| n == name) {
            return;
        }
        let flags = AddWatchFlags::IN_CLOSE_WRITE | AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_CREATE;
        match self.inotify.add_watch(&self.channels.dir(name), flags) {
            Ok(wd) => {
                self.channel_watches.insert(wd, name.clone());
            }
            Err(e) => warn!(channel = %name, "cannot watch the channel: {e}"),
        }
    }

    /// One ingest pass over a channel; its new items go to the engine. Returns whether it
    /// succeeded (a failure is retried with backoff: nothing was skipped, the cursor did not
    /// move past anything not turned into items).
    fn ingest_channel(&mut self, name: &ChannelName) -> bool {
        if self.channels.roster(name).ok().flatten().is_some_and(|r| r.checkin_after_s.is_some()) {
            self.checkin_channels.insert(name.clone());
        }
        let (pass, result) = crate::channel::ingest::ingest_channel(&self.channels, &self.store, name, now_ms());
        for p in pass.problems.iter().chain(&pass.damage) {
            warn!(channel = %name, "{p}");
        }
        for r in &pass.resynced {
            warn!(channel = %name, "{r}: re-synchronised: every record of the file was checked against the ingest ledger");
        }
        for mention in &pass.notify {
            let people = mention.people.join(", @");
            info!(channel = %name, message = %mention.message, author = %mention.author, "@{people} mentioned: the operator is notified");
            // The notify command speaks of sessions: an agent's mention goes out as one of its own.
            if mention.author_is_agent {
                self.notifications.on_mention(&mention.author, name.as_str(), &mention.message, &mention.body);
            }
        }
        self.send_notify_records();
        if pass.existing > 0 {
            info!(channel = %name, existing = pass.existing, "items of an interrupted ingest were already queued");
        }
        // Items written before a failure too: they are durable, and the next pass skips them.
        for item in pass.items {
            info!(item = %item.id, session = %item.session, channel = %name, "queued from the channel");
            self.feed(Input::Ingested(item));
        }
        // A member removed (a pass follows every change of the members file) does not get the
        // channel's messages still queued for it.
        if let Ok(Some(roster)) = self.channels.roster(name) {
            self.feed(Input::ChannelMembers { channel: name.to_string(), receivers: roster.receivers() });
        }
        match result {
            Ok(()) => true,
            Err(e) => {
                warn!(channel = %name, "cannot ingest the channel yet; retrying: {e:#}");
                self.retry_channels_later();
                false
            }
        }
    }

    /// Keep each session's idle-since for check-ins: set when it turns idle, cleared by
    /// anything else (working, blocked, unknown, its session going down).
    fn note_activity(&mut self, input: &Input) {
        match input {
            Input::Session(view) => {
                if view.activity == desk_core::state::Activity::Idle
                    && view.lifecycle == desk_core::state::Lifecycle::Running
                {
                    self.idle_since.entry(view.name.clone()).or_insert_with(now_ms);
                } else {
                    self.idle_since.remove(&view.name);
                }
            }
            Input::SessionDown { session, .. } => {
                self.idle_since.remove(session);
            }
            _ => {}
        }
    }

    /// Append a check-in to every channel that is due one (`desk_core::channel::checkin`);
    /// ingest routes it to the supervisors like any record.
    fn check_in(&mut self) {
        let now = now_ms();
        for name in self.checkin_channels.clone() {
            let roster = match self.channels.roster(&name) {
                Ok(Some(r)) if r.checkin_after_s.is_some() => r,
                Ok(_) => {
                    self.checkin_channels.remove(&name);
                    continue;
                }
                Err(e) => {
                    warn!(channel = %name, "cannot read the roster for a check-in: {e:#}");
                    continue;
                }
            };
            let messages = match self.channels.all_messages(&name) {
                Ok(m) => m,
                Err(e) => {
                    warn!(channel = %name, "cannot read the channel for a check-in: {e:#}");
                    continue;
                }
            };
            if let Some(body) = desk_core::channel::checkin::due(&roster, &self.idle_since, &messages, now) {
                match self.channels.append_checkin(&name, &body, now) {
                    Ok(msg) => info!(channel = %name, message = %msg.id, "checked in with the supervisors: {body}"),
                    Err(e) => warn!(channel = %name, "cannot append a check-in: {e:#}"),
                }
            }
        }
    }

    fn retry_channels_later(&mut self) {
        if self.channel_retry.is_none() {
            self.channel_retry = Some(Instant::now() + self.channel_backoff.fail());
        }
    }

    // ----- sessions -----

    /// Try again the masters that refused this daemon's protocol version, when due.
    fn retry_refused_masters(&mut self, now: Instant) {
        let due: Vec<String> = self.refused.iter().filter(|(_, r)| r.retry_at <= now).map(|(s, _)| s.clone()).collect();
        for session in due {
            if let Some(r) = self.refused.get_mut(&session) {
                r.retry_at = now + r.backoff.wait();
            }
            self.open_master(&session);
        }
    }

    /// Record that a session's master cannot be talked to, backing off its retries.
    fn note_refusal(&mut self, session: &str, reason: String) {
        let mut backoff =
            self.refused.get(session).map_or(Backoff::new(REFUSED_RETRY_FIRST, REFUSED_RETRY_MAX), |r| r.backoff);
        let wait = backoff.fail();
        warn!(session, "not delivering to {session}: {reason}; next try in {} s", wait.as_secs());
        self.refused.insert(session.to_string(), Refusal { reason, retry_at: Instant::now() + wait, backoff });
    }

    /// Connect to a session's master as an observer, unless it refused this daemon and is not
    /// due for another try. Returns whether it is connected.
    fn connect(&mut self, session: &str) -> bool {
        if self.refused.get(session).is_some_and(|r| r.retry_at > Instant::now()) {
            return false;
        }
        self.open_master(session)
    }

    fn open_master(&mut self, session: &str) -> bool {
        if let Some(token) = self.by_session.get(session)
            && self.masters.get(token).is_some_and(|c| !c.closed)
        {
            return true;
        }
        let Ok(name) = SessionName::parse(session) else { return false };
        let socket = self.paths.session(&name).socket;
        let stream = match std::os::unix::net::UnixStream::connect(&socket) {
            Ok(s) => s,
            Err(_) => return false,
        };
        if stream.set_nonblocking(true).is_err() {
            return false;
        }
        let mut stream = UnixStream::from_std(stream);
        let token = self.new_token();
        if self.poll.registry().register(&mut stream, token, Interest::READABLE | Interest::WRITABLE).is_err() {
            return false;
        }
        info!(session, "observing");
        self.masters.insert(token, MasterConn::new(session.to_string(), stream));
        self.by_session.insert(session.to_string(), token);
        // Until its WELCOME says what runs, the session is "not known yet", not "not running".
        self.feed(Input::Connecting { session: session.to_string() });
        true
    }

    fn master_event(&mut self, token: Token) {
        let Daemon { masters, rules, paths, .. } = self;
        let mut load = |provider: &str| load_rules(rules, &paths.config, provider);
        let mut inbox = VecDeque::new();
        let mut welcomed = None;
        let mut welcomed_now = false;
        let mut seen = Vec::new();
        if let Some(conn) = masters.get_mut(&token) {
            conn.flush();
            conn.readable(&mut load, &mut inbox);
            if conn.view.is_some() {
                welcomed = Some(conn.session.clone());
            }
            welcomed_now = std::mem::take(&mut conn.welcomed_now);
            seen = std::mem::take(&mut conn.seen);
            for what in &seen {
                match what {
                    masters::Seen::Welcome { generation, state } => {
                        self.notifications.on_connected(&conn.session, *generation, state.as_ref());
                        self.supervisor.on_up(&conn.session, *generation);
                    }
                    masters::Seen::Event(event) => self.notifications.on_event(&conn.session, event),
                }
            }
        }
        if !seen.is_empty() {
            self.send_notify_records();
        }
        let Some(session) = welcomed else {
            for observed in inbox {
                self.feed(observed.input);
            }
            return;
        };
        self.refused.remove(&session);
        if welcomed_now {
            // Whatever the session journalled since the engine last heard from it comes first.
            self.replay_journal(&session);
        }
        let Ok(name) = SessionName::parse(&session) else { return };
        let mut heard = false;
        for masters::Observed { input, journal } in inbox {
            if let Some((seq, ts_ms)) = journal {
                let new = self.cursors.see(&name, seq, ts_ms);
                let hook = matches!(input, Input::Hook { .. });
                if hook && !new {
                    // The replay gave it already.
                    continue;
                }
                heard |= hook;
            }
            self.feed(input);
        }
        if heard {
            // A hook is evidence the engine acted on: on record (after what the engine did with
            // it) before the next read, so that a restart replays only what came after it.
            self.cursor_saves.insert(session.clone());
        }
    }

    /// Give the engine what the session's journal recorded since the engine last heard from
    /// it ([`evidence`]): before the session is judged down, or its new master's view is taken.
    fn replay_journal(&mut self, session: &str) {
        let Ok(name) = SessionName::parse(session) else { return };
        match self.cursors.unread(&name, &self.paths.session_state(&name)) {
            Ok(events) if events.is_empty() => {}
            Ok(events) => self.feed(Input::Journal { session: session.to_string(), events }),
            Err(e) => warn!(session, "{e:#}; items of the session are judged on the evidence heard live"),
        }
        self.cursor_saves.insert(session.to_string());
    }

    /// Send the `notify` events the notifications made to their sessions' masters, to be
    /// journalled (a session whose master is gone keeps only the daemon's log line).
    fn send_notify_records(&mut self) {
        for (session, record) in self.notifications.take_records() {
            if let Some(conn) = self.by_session.get(&session).and_then(|t| self.masters.get_mut(t)) {
                conn.record(&record);
            }
        }
    }

    fn reap_connections(&mut self) {
        let closed: Vec<Token> = self.masters.iter().filter(|(_, c)| c.closed).map(|(t, _)| *t).collect();
        for token in closed {
            if let Some(mut conn) = self.masters.remove(&token) {
                let _ = self.poll.registry().deregister(&mut conn.stream);
                if self.by_session.get(&conn.session) == Some(&token) {
                    self.by_session.remove(&conn.session);
                }
                info!(session = %conn.session, "session connection ended");
                if let Some(reason) = conn.refused.take() {
                    // Nothing was ever sent to it but HELLO; no reconnect until due.
                    self.note_refusal(&conn.session, reason);
                    continue;
                }
                let mut inbox = VecDeque::new();
                conn.fail_pending(&mut inbox);
                for input in inbox {
                    self.feed(input);
                }
                // A master may be listening (this one still, or a new one after a quick
                // restart): its WELCOME replays the journal and says which generation runs. Only
                // with none is the session down — after the journal says what its agent did
                // before it went (a hook, an exit), never on the connection's end alone — and
                // only then does the restart supervisor judge the end (a newer generation's
                // start is the operator's or the supervisor's own, judged when it ends).
                let session = conn.session.clone();
                if !self.connect(&session) {
                    let held = match conn.generation() {
                        Some(generation) => {
                            self.replay_journal(&session);
                            self.feed(Input::SessionDown { session: session.clone(), generation: Some(generation) });
                            self.supervisor.on_down(&session, Some(generation))
                        }
                        // Gone before it answered (a command that exits at once): its exit
                        // record, whose arrival was passed over while this connection stood,
                        // tells its end.
                        None => self.supervisor.on_exit_record(&session),
                    };
                    self.notify_failed(held);
                }
            }
        }
        let done: Vec<Token> =
            self.controls.iter().filter(|(_, c)| c.closed && c.out.is_empty()).map(|(t, _)| *t).collect();
        for token in done {
            if let Some(mut conn) = self.controls.remove(&token) {
                let _ = self.poll.registry().deregister(&mut conn.stream);
            }
            self.ingest_waiters.retain(|(_, t)| *t != token);
        }
    }

    fn on_inotify(&mut self) {
        let events = match self.inotify.read_events() {
            Ok(events) => events,
            Err(nix::errno::Errno::EAGAIN) => return,
            Err(e) => {
                warn!("inotify read failed: {e}");
                return;
            }
        };
        let mut ingest = false;
        let mut channels: Vec<ChannelName> = Vec::new();
        for event in events {
            if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                // Events were lost: look at everything again (both passes are idempotent).
                warn!("inotify queue overflowed; ingesting the intake and every channel");
                ingest = true;
                channels.extend(self.channels.list().unwrap_or_default());
                continue;
            }
            if event.wd == self.channels_watch || self.channel_watches.contains_key(&event.wd) {
                let name = event.name.as_ref().and_then(|n| n.to_str()).unwrap_or("");
                let channel = if event.wd == self.channels_watch {
                    ChannelName::parse(name).ok()
                } else if name.ends_with(".md") && !name.starts_with('.') || name == crate::channel::store::MEMBERS_FILE
                {
                    self.channel_watches.get(&event.wd).cloned()
                } else {
                    None
                };
                if let Some(channel) = channel.filter(|c| !channels.contains(c)) {
                    channels.push(channel);
                }
                continue;
            }
            let Some(name) = event.name.as_ref().and_then(|n| n.to_str()).map(String::from) else { continue };
            // A master writes its metadata (by rename) only once it listens; its socket file
            // appears earlier, at bind time, when a connect would still be refused.
            let arrived =
                event.mask.contains(AddWatchFlags::IN_CREATE) || event.mask.contains(AddWatchFlags::IN_MOVED_TO);
            if event.wd == self.runtime_watch {
                // Not on creation: that is a master binding its socket (at start, or again).
                if let Some(session) = name.strip_suffix(".sock")
                    && !event.mask.contains(AddWatchFlags::IN_CREATE)
                {
                    self.socket_changed(session);
                }
                if let Some(session) = name.strip_suffix(".json").or_else(|| name.strip_suffix(".sock"))
                    && arrived
                    && SessionName::parse(session).is_ok()
                {
                    // A new master may speak this daemon's version: try it at once.
                    self.refused.remove(session);
                    self.connect(session);
                } else if let Some(session) = name.strip_suffix(".exit")
                    && arrived
                    && !self.by_session.contains_key(session)
                {
                    // A session that ended before this daemon was connected to it (a command
                    // that exits at once): its end is judged from its records all the same.
                    let held = self.supervisor.on_exit_record(session);
                    self.notify_failed(held);
                }
            } else if name.ends_with(".json") && !name.starts_with('.') {
                ingest = true;
            }
        }
        if ingest {
            self.ingest_all();
        }
        for channel in channels {
            // A new channel directory is watched before its first pass, so nothing appended
            // in between is missed.
            self.watch_channel(&channel);
            self.ingest_channel(&channel);
        }
    }

    /// A session's socket file was deleted, moved away or replaced by a rename: the master this
    /// daemon observes under that name, if any, is asked to check it (SIGUSR1), so a socket a
    /// cleaner of temporary files or a person removed is bound again at once rather than at the
    /// master's next periodic check.
    fn socket_changed(&self, session: &str) {
        let Some(conn) = self.by_session.get(session).and_then(|token| self.masters.get(token)) else { return };
        if let Some(pid) = conn.ask_to_check_socket() {
            info!(session, pid, "its socket was removed or replaced; asked its master to check it");
        }
    }

    // ----- control clients -----

    fn accept(&mut self) {
        loop {
            let (mut stream, _) = match self.listener.accept() {
                Ok(pair) => pair,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    warn!("accept failed: {e}");
                    return;
                }
            };
            let uid =
                nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials).map(|c| c.uid());
            if uid.ok() != Some(nix::unistd::geteuid().as_raw()) {
                let _ = stream.write_all(&Response::fail(ErrorKind::Refused, "refused: not your daemon").to_line());
                continue;
            }
            if self.controls.len() >= MAX_CONTROL_CLIENTS && !self.evict_idle_control() {
                let _ = stream.write_all(
                    &Response::fail(
                        ErrorKind::Refused,
                        format!("refused: {MAX_CONTROL_CLIENTS} clients are waiting for answers"),
                    )
                    .to_line(),
                );
                continue;
            }
            let token = self.new_token();
            if self.poll.registry().register(&mut stream, token, Interest::READABLE | Interest::WRITABLE).is_ok() {
                let conn = ControlConn {
                    stream,
                    inbuf: Vec::new(),
                    out: Vec::new(),
                    owed: 0,
                    closed: false,
                    last_progress: Instant::now(),
                };
                self.controls.insert(token, conn);
            }
        }
    }

    /// Make room for a new control client: forget one that has already hung up (its slot is
    /// only waiting for this turn's clean-up), else close the longest-idle one that owes
    /// nothing. Returns whether one went.
    fn evict_idle_control(&mut self) -> bool {
        let idlest = self
            .controls
            .iter()
            .filter(|(_, c)| c.closed || c.owed == 0)
            .min_by_key(|(_, c)| (!c.closed, c.last_progress))
            .map(|(t, _)| *t);
        let Some(token) = idlest else { return false };
        if let Some(mut conn) = self.controls.remove(&token) {
            if !conn.closed {
                info!("closing the longest-idle control client to make room");
            }
            let _ = self.poll.registry().deregister(&mut conn.stream);
        }
        self.ingest_waiters.retain(|(_, t)| *t != token);
        true
    }

    /// Serve one control client: write what it is owed, then take its requests one at a time
    /// while its unread replies stay under [`CONTROL_OUT_LIMIT`], reading more only when no
    /// complete request is buffered. A client that does not read its replies therefore stops
    /// being read (its socket buffer fills and it blocks), instead of growing the daemon.
    fn control_event(&mut self, token: Token) {
        loop {
            let Some(conn) = self.controls.get_mut(&token) else { return };
            flush_control(conn);
            if conn.closed || conn.out.len() >= CONTROL_OUT_LIMIT {
                return;
            }
            if let Some(end) = conn.inbuf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = conn.inbuf.drain(..=end).collect();
                conn.owed += 1;
                match control::parse_request(&line) {
                    Ok(request) => self.handle_request(token, request),
                    Err(e) => self.reply(token, Response::fail(e.kind, e.message)),
                }
                continue;
            }
            if conn.inbuf.len() > control::MAX_LINE {
                conn.inbuf.clear();
                conn.out.extend_from_slice(&Response::fail(ErrorKind::BadRequest, "request line too long").to_line());
                conn.closed = true;
                flush_control(conn);
                return;
            }
            let mut buf = [0u8; 16 * 1024];
            match conn.stream.read(&mut buf) {
                Ok(0) => {
                    conn.closed = true;
                    return;
                }
                Ok(n) => {
                    conn.inbuf.extend_from_slice(&buf[..n]);
                    conn.last_progress = Instant::now();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    conn.closed = true;
                    return;
                }
            }
        }
    }

    fn reply(&mut self, token: Token, response: Response) {
        if let Some(conn) = self.controls.get_mut(&token) {
            conn.out.extend_from_slice(&response.to_line());
            conn.owed = conn.owed.saturating_sub(1);
            flush_control(conn);
        }
    }

    fn update_pauses(&mut self, change: impl FnOnce(&mut store::Pauses)) -> Result<()> {
        let mut pauses = self.store.load_pauses()?;
        change(&mut pauses);
        self.store.save_pauses(&pauses)
    }
}

/// A provider's rules, loaded once (the config directory's table, or the built-in one). A
/// provider name desk does not know (a master of another version) gets the shell's rules.
fn load_rules(cache: &mut HashMap<Provider, Rc<RuleSet>>, config: &std::path::Path, provider: &str) -> Rc<RuleSet> {
    let provider = Provider::or_shell(provider);
    cache
        .entry(provider)
        .or_insert_with(|| {
            Rc::new(desk_common::rules::load(provider, config).unwrap_or_else(|e| {
                warn!("{e:#}; using the built-in rules for {provider}");
                RuleSet::builtin(provider)
            }))
        })
        .clone()
}

fn flush_control(conn: &mut ControlConn) {
    while !conn.out.is_empty() {
        match conn.stream.write(&conn.out) {
            Ok(0) => {
                conn.closed = true;
                conn.out.clear();
                return;
            }
            Ok(n) => {
                conn.out.drain(..n);
                conn.last_progress = Instant::now();
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                conn.closed = true;
                conn.out.clear();
                return;
            }
        }
    }
}
