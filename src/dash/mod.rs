//! `desk dash`: the fleet dashboard.
//!
//! Owns the dashboard's process edge: the terminal (raw mode, alternate screen, and putting both
//! back on every way out: quit, SIGTERM, SIGHUP, a panic), and the threads that feed one loop.
//! The state and the keys live in [`model`], the drawing in [`view`] (the answer panel's in
//! [`answer`](mod@answer)); this module only moves messages between them and the world.
//!
//! Shape: every source of news runs on a thread of its own and sends [`Msg`]s down one channel;
//! the main thread blocks on that channel, applies what arrived to the model and redraws (a key
//! at once, fleet news at most every [`FRAME_INTERVAL`], however fast it comes). The
//! sources are the fleet watcher ([`desk_common::fleet::FleetWatch`], which blocks in its own poll and
//! is never slowed by a stopped master), the terminal's input (crossterm's blocking reader, one
//! event per permit so that an attach gets every keystroke), the signals, the daemon's queue and
//! stuck items (the daemon has no push for them: asked every [`QUEUE_REFRESH`]), the channels'
//! unread and `@human` counts (read from their files at the same pace), CPU and memory
//! samples ([`USAGE_REFRESH`]), operator actions, sends and typed keys (a force can take a
//! minute; keys go through `desk_common::keys`, as `desk keys` sends them), and the
//! live preview (a viewer connection to the selected session's master, whose keyframe and
//! output feed a local screen model), and each configured host's listing, events and dialogs
//! ([`hosts`]). A thread per source keeps each one's blocking call out of
//! the others' way without a second event loop beside the watcher's, and the main thread never
//! connects to, reads from or waits on a master: a stopped one at worst leaves its own thread
//! waiting. Enter suspends the dashboard for a `desk attach` child on the same terminal.
//! Invariants: the terminal is restored exactly by [`restore_terminal`], which is idempotent
//! and called by the guard's drop, the panic hook and the signal path; while the dashboard owns
//! the terminal no thread but the main one writes to it.

pub mod answer;
pub mod approvals;
pub mod channels;
pub mod hosts;
pub mod key;
pub mod look;
pub mod model;
pub mod view;

#[cfg(test)]
mod answer_tests;
#[cfg(test)]
mod panes_tests;
#[cfg(test)]
mod tests;

use anyhow::{Context, Result, bail};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event as TermEvent, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{cursor, execute, terminal};
use std::collections::HashMap;
use std::io::{IsTerminal, Stdout};
use std::os::unix::net::UnixStream;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use desk_common::daemon_client;
use desk_common::fleet::{FleetEvent, FleetWatch};
use desk_common::paths::Paths;
use desk_common::session;
use desk_core::delivery::item::Item;
use desk_term::screen::HistoryRow;
use desk_term::screen::Screen;
use desk_wire::control;
use desk_wire::history::HistoryPager;
use desk_wire::{Frame, Role};
use key::Key;
use look::Look;
use model::{Action, Dash, ItemLine, Link, QueueCounts, Row};
use view::Preview;

/// 2 s: how often the daemon is asked for queue and stuck counts (it has no push for them).
/// Items move in seconds (a delivery's verify window is longer), so a count two seconds old is
/// current enough to sort by, and one small request every two seconds costs nothing.
pub const QUEUE_REFRESH: Duration = Duration::from_secs(2);

/// 2 s: how often the fleet's CPU and memory use is sampled (one pass over `/proc`, a few
/// milliseconds with hundreds of processes). CPU % is averaged over this period, long enough
/// that a percentage is not noise and short enough to see a busy agent as busy.
pub const USAGE_REFRESH: Duration = Duration::from_secs(2);

/// 1 s: how long one queue request may take. The daemon answers in milliseconds; a daemon that
/// does not answer in a second is shown as such rather than holding up the next refresh.
const QUEUE_TIMEOUT: Duration = Duration::from_secs(1);

/// How long an action may take: a force waits for its delivery to settle (echo and submit
/// windows plus retries, as `desk force` does), a drop for desk's own prompt to be erased from
/// the input box; the others answer at once.
fn action_timeout(action: &Action) -> Duration {
    match action {
        Action::Force(_) | Action::Drop(_) => Duration::from_secs(60),
        _ => Duration::from_secs(10),
    }
}

/// 1 s: how long the preview waits for the selected master's WELCOME (they answer in
/// microseconds; a stopped master gets a note instead of a preview).
const PREVIEW_PATIENCE: Duration = Duration::from_secs(1);

/// 5 s: the same for a host's session, whose WELCOME crosses ssh (a round trip of
/// milliseconds on a LAN, a second on a slow link) on a link shared with the host's listings.
const REMOTE_PREVIEW_PATIENCE: Duration = Duration::from_secs(5);

/// 2000 lines: how much of a session's history the preview asks its master for, and keeps of
/// its own as more scrolls by. tmux's default `history-limit`: the last several turns of an
/// agent's conversation, a few hundred KiB to a couple of MiB of wide coloured lines, read
/// once per selection a page at a time.
pub const PREVIEW_HISTORY_LINES: u32 = 2000;

/// 50 ms: the shortest time between two frames drawn for fleet news (keys are drawn at once).
/// A third of a 100-agent fleet working sends ~330 title changes a second (a spinner frame
/// every 100 ms each); drawing each one would cost a frame per event, while 20 frames a second
/// still look live and add at most 50 ms to a state change's way to the screen (the target
/// is 200 ms).
const FRAME_INTERVAL: Duration = Duration::from_millis(50);

/// 1 s: with no news, redraw this often anyway so the ages in the table ("idle 12s") move.
const AGE_TICK: Duration = Duration::from_secs(1);

/// What the loop hears.
enum Msg {
    Fleet(Vec<FleetEvent>),
    FleetFailed(String),
    Term(TermEvent),
    Signal(i32),
    /// Every session's queue, and a word for the header when they were read from the store.
    Queues(Result<(HashMap<String, QueueCounts>, Option<String>), String>),
    /// Bytes for the preview with this id (a keyframe chunk or output).
    PreviewBytes(u64, Vec<u8>),
    /// History lines for the preview with this id: the next page of the master's answer.
    PreviewHistory(u64, HistoryPiece),
    /// The preview with this id connected; the loop keeps this handle to its stream.
    PreviewConnected(u64, UnixStream),
    /// The preview with this id ended, and why.
    PreviewEnded(u64, String),
    /// An operator action finished: what the daemon said.
    ActionDone(String),
    /// The daemon dropped this item (the items pane shows it at once, not at the next refresh).
    Dropped(model::ItemRef),
    /// CPU % and resident KiB by session id.
    Usage(HashMap<u32, (f32, u64)>),
    /// Every channel at a glance (unread and `@human` counts for the header).
    Channels(Vec<desk_daemon::channel::summary::Summary>),
    /// The fleet's notes by session, and the declared sessions that never ran (name, provider).
    FleetNotes(HashMap<String, String>, Vec<(String, String)>),
    /// Every channel's members, by channel (for grouping the table by channel).
    Rosters(HashMap<String, Vec<String>>),
    /// The open dialogs of this machine (`None`) or a host, and the blocked sessions without a
    /// readable one (the approvals view, while it is open).
    Approvals(Option<String>, Vec<crate::inbox::Open>, Vec<String>),
    /// An answer from the approvals view came back: the session, and what became of it.
    Answered(String, String),
    /// A post to a channel came back: the channel, the thread, and what became of it.
    Posted(String, Option<desk_core::delivery::item::ItemId>, String),
    /// A host's sessions, or why it could not be reached ([`hosts`]).
    Host(String, hosts::HostNews),
    /// A host's events (sessions named `HOST:NAME`), for the events pane.
    HostEvents(Vec<(String, desk_wire::events::Event)>),
}

/// 1 s: how often the open approvals view reads the fleet's dialogs again (a snapshot of each
/// blocked session, a few milliseconds): a card is at most this old when a key answers it, and
/// the answer is checked against the screen anyway.
const APPROVALS_REFRESH: Duration = Duration::from_secs(1);

/// The approvals view is open: its thread reads the fleet's dialogs (one dashboard per process).
static APPROVALS_OPEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A page of the master's history for the preview, oldest first (see [`HistoryPager`]).
struct HistoryPiece {
    rows: Vec<HistoryRow>,
    /// The range ends where the preview's screen is now (this answer followed the output
    /// before it): the lines the preview's own model has kept are the range's newest.
    sets_end: bool,
    /// The last page; `notes` says what of the range could not be read.
    done: bool,
    notes: Vec<String>,
}

/// The selected session's viewer connection and the screen model it feeds.
struct PreviewConn {
    id: u64,
    session: String,
    /// The stream the preview thread reads, to shut it down when the selection moves.
    stream: Option<UnixStream>,
    screen: Option<Screen>,
    /// The master's history from before `screen` kept its own, oldest first (see
    /// [`Msg::PreviewHistory`]); emptied once `screen`'s history is full, as the two would
    /// no longer meet.
    older: Vec<HistoryRow>,
    /// The master's history read so far, until its last page makes it `older`; and how many
    /// of its lines the preview's own model kept from output before the range's end.
    fetched: Vec<HistoryRow>,
    own_at_end: usize,
    note: String,
    /// The connection ended; not retried until the session joins again or is reselected.
    ended: bool,
    /// Made for a live session (a connection was tried): kept until the selection moves or the
    /// session joins again, whatever became of the connection.
    for_live: bool,
    /// The history above `screen` is all in: the master's last page came, the connection
    /// ended, or the screen came from an exit record. Until then a scroll back is kept.
    history_in: bool,
}

impl Drop for PreviewConn {
    fn drop(&mut self) {
        if let Some(stream) = &self.stream {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Put the terminal back as the shell left it: cooked mode, main screen, cursor shown. Safe to
/// call more than once and from a panic hook.
pub fn restore_terminal() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(std::io::stdout(), terminal::LeaveAlternateScreen, cursor::Show);
}

/// Raw mode and the alternate screen, for as long as it lives.
struct TerminalGuard;

impl TerminalGuard {
    fn enter() -> Result<TerminalGuard> {
        terminal::enable_raw_mode().context("cannot put the terminal in raw mode")?;
        let guard = TerminalGuard;
        execute!(std::io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)
            .context("cannot switch to the alternate screen")?;
        Ok(guard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

/// Run the dashboard until `q` or a signal; returns the exit code.
pub fn run() -> Result<i32> {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        bail!("desk dash draws on a terminal; run it with stdin and stdout on one");
    }
    let paths = Paths::from_env()?;
    paths.ensure_runtime()?;
    let look = Look { color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) };
    let (tx, rx) = mpsc::channel();

    // The watcher first, so a session starting while we read the files is seen by one or both.
    let watch = FleetWatch::open(paths.clone())?;
    let mut dash = Dash::new();
    // The dashboard's queues, force, drop and pause are the daemon's: it is started if it is
    // not running, and the footer says so.
    dash.status = crate::autostart::ensure_daemon(&paths).note();
    for row in rows_from_files(&paths)? {
        dash.insert(row);
    }
    dash.backlog(recent_events(&paths));
    spawn("fleet", tx.clone(), move |tx| watch_fleet(watch, tx))?;
    let signal_tx = tx.clone();
    let mut signals = signal_hook::iterator::Signals::new([libc::SIGTERM, libc::SIGHUP, libc::SIGINT])
        .context("cannot install signal handlers")?;
    spawn("signals", signal_tx, move |tx| {
        for sig in signals.forever() {
            if tx.send(Msg::Signal(sig)).is_err() {
                return;
            }
        }
    })?;
    let queue_paths = paths.clone();
    spawn("queues", tx.clone(), move |tx| {
        loop {
            if tx.send(Msg::Queues(ask_queues(&queue_paths))).is_err() {
                return;
            }
            std::thread::sleep(QUEUE_REFRESH);
        }
    })?;

    spawn("usage", tx.clone(), sample_usage)?;
    // Each configured host's sessions, on a thread of its own: a slow or lost host holds up
    // only its own thread.
    let links = hosts::Links::shared();
    for (name, host) in desk_common::config::load(&paths)?.hosts {
        dash.hosts.insert(name.clone(), Some("connecting...".into()));
        // Its dialogs for the approvals view, only while it is open, on a thread of its own
        // (a host slow to answer holds up no other place's cards).
        let (dialogs_name, dialogs_links) = (name.clone(), links.clone());
        spawn("host approvals", tx.clone(), move |tx| {
            loop {
                if APPROVALS_OPEN.load(std::sync::atomic::Ordering::Relaxed) {
                    // A host not answering has no cards (its header says why).
                    let (open, unread) = hosts::approvals(&dialogs_name, &dialogs_links).unwrap_or_default();
                    if tx.send(Msg::Approvals(Some(dialogs_name.clone()), open, unread)).is_err() {
                        return;
                    }
                }
                std::thread::sleep(APPROVALS_REFRESH);
            }
        })?;
        let (events_name, events_links) = (name.clone(), links.clone());
        spawn("host events", tx.clone(), move |tx| {
            hosts::follow_events(events_name, events_links, tx, Msg::HostEvents)
        })?;
        let (paths, links) = (paths.clone(), links.clone());
        spawn("host", tx.clone(), move |tx| hosts::watch(name, host, paths, links, tx, Msg::Host))?;
    }
    {
        let paths = paths.clone();
        spawn("fleet", tx.clone(), move |tx| sample_fleet(&paths, tx))?;
    }
    let channel_paths = paths.clone();
    spawn("channels", tx.clone(), move |tx| {
        let store = desk_daemon::channel::store::ChannelStore::at(&channel_paths);
        loop {
            let list = store.list().unwrap_or_default();
            let summaries =
                list.iter().filter_map(|n| desk_daemon::channel::summary::summarize(&store, n).ok()).collect();
            if tx.send(Msg::Channels(summaries)).is_err() {
                return;
            }
            std::thread::sleep(QUEUE_REFRESH);
        }
    })?;

    let roster_paths = paths.clone();
    spawn("rosters", tx.clone(), move |tx| {
        let store = desk_daemon::channel::store::ChannelStore::at(&roster_paths);
        loop {
            let rosters = store
                .list()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|n| {
                    let roster = store.roster(&n).ok().flatten()?;
                    Some((n.as_str().to_string(), roster.members.into_iter().map(|m| m.name).collect()))
                })
                .collect();
            if tx.send(Msg::Rosters(rosters)).is_err() {
                return;
            }
            std::thread::sleep(QUEUE_REFRESH);
        }
    })?;
    // The approvals view's cards: read only while it is open.
    let approvals_paths = paths.clone();
    spawn("approvals", tx.clone(), move |tx| {
        loop {
            if APPROVALS_OPEN.load(std::sync::atomic::Ordering::Relaxed) {
                let (open, unread) = crate::inbox::list(&approvals_paths);
                if tx.send(Msg::Approvals(None, open, unread)).is_err() {
                    return;
                }
            }
            std::thread::sleep(APPROVALS_REFRESH);
        }
    })?;

    let previous_hook = std::panic::take_hook();
    // Any panic, on any thread, ends the dashboard: restored first, so the message is readable
    // and nothing draws over the shell afterwards.
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal();
        previous_hook(info);
        std::process::exit(101);
    }));
    let guard = TerminalGuard::enter()?;
    // The input thread reads one event per permit: while an attach owns the terminal no permit
    // is given, so not a keystroke meant for the session is read by the dashboard.
    let (permit_tx, permit_rx) = mpsc::channel::<()>();
    spawn("input", tx.clone(), move |tx| {
        while permit_rx.recv().is_ok() {
            let Ok(ev) = event::read() else { return };
            if tx.send(Msg::Term(ev)).is_err() {
                return;
            }
        }
    })?;
    let _ = permit_tx.send(());
    let mut term = Terminal::new(CrosstermBackend::new(std::io::stdout())).context("cannot draw on the terminal")?;
    let code = run_loop(&mut term, &mut dash, &paths, &tx, &rx, &permit_tx, look);
    drop(guard);
    code
}

fn spawn(name: &str, tx: Sender<Msg>, body: impl FnOnce(Sender<Msg>) + Send + 'static) -> Result<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || body(tx))
        .with_context(|| format!("cannot start the {name} thread"))?;
    Ok(())
}

fn watch_fleet(mut watch: FleetWatch, tx: Sender<Msg>) {
    loop {
        match watch.wait(None) {
            Ok(events) => {
                if tx.send(Msg::Fleet(events)).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = tx.send(Msg::FleetFailed(format!("{e:#}")));
                return;
            }
        }
    }
}

fn run_loop(
    term: &mut Terminal<CrosstermBackend<Stdout>>,
    dash: &mut Dash,
    paths: &Paths,
    tx: &Sender<Msg>,
    rx: &Receiver<Msg>,
    permit: &Sender<()>,
    look: Look,
) -> Result<i32> {
    let mut preview: Option<PreviewConn> = None;
    let mut next_preview_id = 0u64;
    let links = &hosts::Links::shared();
    loop {
        follow_selection(dash, paths, links, tx, &mut preview, &mut next_preview_id);
        APPROVALS_OPEN.store(dash.approvals.is_some(), std::sync::atomic::Ordering::Relaxed);
        // The answer panel reads its dialog off the preview of the session it answers.
        if let Some(PreviewConn { session, screen: Some(screen), .. }) = &preview {
            dash.dialog_seen(session, &screen.text_rows());
        }
        let now_ms = desk_common::clock::now_ms();
        let size = term.size().context("cannot read the terminal's size")?;
        let height = view::preview_height(ratatui::layout::Rect::new(0, 0, size.width, size.height), dash);
        match &preview {
            Some(PreviewConn { screen: Some(screen), older, history_in: true, .. }) => {
                dash.set_preview_extent(view::preview_back_max(older.len(), screen, height), height.saturating_sub(1))
            }
            Some(PreviewConn { screen: Some(screen), older, .. }) => {
                let bound = view::preview_back_max(older.len(), screen, height) + PREVIEW_HISTORY_LINES as usize;
                dash.set_preview_extent_loading(bound, height.saturating_sub(1))
            }
            _ => dash.set_preview_extent(0, height),
        }
        term.draw(|frame| {
            let shown = match &preview {
                Some(PreviewConn { session, screen: Some(screen), older, for_live, .. }) => {
                    Preview::Screen { session, screen, older, live: *for_live }
                }
                Some(PreviewConn { session, note, .. }) => Preview::Note { session, text: note },
                None => Preview::None,
            };
            view::render(frame, dash, &shown, now_ms, look)
        })
        .context("cannot draw")?;
        let drawn = Instant::now();
        // Wait for news, then take everything that comes until the next frame is due: a key or
        // a session's change is drawn at once; titles and output at most every
        // FRAME_INTERVAL, however many come.
        let first = match rx.recv_timeout(AGE_TICK) {
            Ok(msg) => msg,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return Ok(0),
        };
        let due = drawn + FRAME_INTERVAL;
        // A key or a row's change ends the wait for more at once.
        let mut keyed = false;
        let mut next = Some(first);
        while let Some(msg) = next {
            let key = matches!(msg, Msg::Term(_));
            keyed |= key || changes_a_row(&msg);
            match handle(msg, dash, &mut preview) {
                Flow::Run(action) => run_action(paths, links, tx, action, dash),
                Flow::Send { session, text } => send_prompt(tx, session, text, dash),
                Flow::Keys { session, keys } => send_keys(paths, tx, session, keys, dash),
                Flow::Answer { session, option, seen, said } => answer(paths, tx, session, option, seen, said, dash),
                Flow::LoadChannel { channel, thread } => match channels::load(paths, &channel, thread.as_ref()) {
                    Ok(view) => dash.channel_loaded(view),
                    Err(e) => dash.status = Some(format!("cannot read #{channel}: {e:#}")),
                },
                Flow::Post { channel, thread, text } => post(paths, tx, channel, thread, text, dash),
                Flow::Go => {}
                Flow::Exit(code) => return Ok(code),
                Flow::Attach(name) => {
                    // Its viewer connection would pile up output while we are away.
                    preview = None;
                    attach(term, &name)?;
                }
            }
            if key {
                let _ = permit.send(());
            }
            next = match rx.try_recv() {
                Ok(msg) => Some(msg),
                Err(_) if keyed => None,
                Err(_) => rx.recv_timeout(due.saturating_duration_since(Instant::now())).ok(),
            };
        }
    }
}

/// Whether a message changes what a row says about a session (a state change, a session
/// joining or leaving, a master not answering): drawn at once like a key, not coalesced like
/// the flood of spinner titles and output that a working fleet sends.
fn changes_a_row(msg: &Msg) -> bool {
    let Msg::Fleet(events) = msg else { return false };
    events.iter().any(|e| match e {
        FleetEvent::Event { event, .. } => !matches!(
            event.body,
            desk_wire::events::EventBody::Title { .. } | desk_wire::events::EventBody::Output { .. }
        ),
        _ => true,
    })
}

/// What the loop does after a message.
enum Flow {
    Go,
    Send { session: String, text: String },
    Keys { session: String, keys: Vec<String> },
    Answer { session: String, option: Option<u8>, seen: String, said: String },
    LoadChannel { channel: String, thread: Option<desk_core::delivery::item::ItemId> },
    Post { channel: String, thread: Option<desk_core::delivery::item::ItemId>, text: String },
    Run(Action),
    Exit(i32),
    Attach(String),
}

/// Leave the dashboard's screen and raw mode, run `desk attach NAME` on this terminal (the
/// full attach: its own detach key, resizes and restore; a separate process, so its signal
/// handling and terminal state never mix with ours), then take the terminal back and redraw
/// everything.
fn attach(term: &mut Terminal<CrosstermBackend<Stdout>>, name: &str) -> Result<()> {
    restore_terminal();
    let exe = std::env::current_exe().context("cannot find the desk binary")?;
    let status = std::process::Command::new(exe).arg("attach").arg(name).status();
    terminal::enable_raw_mode().context("cannot put the terminal back in raw mode")?;
    execute!(std::io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)
        .context("cannot switch back to the alternate screen")?;
    term.clear().context("cannot redraw")?;
    status.with_context(|| format!("cannot run desk attach {name}"))?;
    Ok(())
}

/// Apply one message.
fn handle(msg: Msg, dash: &mut Dash, preview: &mut Option<PreviewConn>) -> Flow {
    let now_ms = desk_common::clock::now_ms();
    match msg {
        Msg::Fleet(events) => {
            for event in &events {
                let restart = match event {
                    // The preview asked for the old size: reconnect at the new one.
                    FleetEvent::Event { session, event } => {
                        matches!(event.body, desk_wire::events::EventBody::Resize { .. }).then_some(session)
                    }
                    // A session that (re)joined gets a fresh preview.
                    FleetEvent::Joined { session, .. } => Some(session),
                    _ => None,
                };
                if restart.is_some_and(|s| preview.as_ref().is_some_and(|p| p.session == *s)) {
                    *preview = None;
                }
                dash.apply(event, now_ms);
            }
        }
        Msg::FleetFailed(why) => dash.daemon_down = Some(format!("fleet watch stopped: {why}")),
        Msg::Host(host, mut news) => {
            let answer = news.answer.map(|list| {
                let rows: Vec<Row> = list
                    .iter()
                    .filter_map(|v| hosts::row_from_listing(&host, v))
                    .map(|mut row| {
                        let there = row.name[host.len() + 1..].to_string();
                        if let Some(queue) = row.queue.as_mut() {
                            queue.items = news.items.remove(&there).unwrap_or_default();
                        }
                        row.usage = news.usage.get(&there).copied();
                        row
                    })
                    .collect();
                // The preview asked the master for the old size: reconnect at the new one.
                let resized =
                    |row: &Row| dash.row(&row.name).is_some_and(|old| (old.cols, old.rows) != (row.cols, row.rows));
                if rows.iter().any(|row| preview.as_ref().is_some_and(|p| p.session == row.name) && resized(row)) {
                    *preview = None;
                }
                rows
            });
            dash.set_host(&host, answer);
        }
        Msg::HostEvents(events) => {
            // The preview asked the master for the old size: reconnect at the new one.
            let resized = events.iter().any(|(session, event)| {
                matches!(event.body, desk_wire::events::EventBody::Resize { .. })
                    && preview.as_ref().is_some_and(|p| p.session == *session)
            });
            if resized {
                *preview = None;
            }
            dash.host_events(events);
        }
        Msg::Queues(Ok((queues, note))) => {
            dash.set_queues(Ok(queues));
            dash.daemon_down = note;
        }
        Msg::Queues(Err(why)) => dash.set_queues(Err(why)),
        Msg::ActionDone(outcome) => dash.status = Some(outcome),
        Msg::Dropped(id) => dash.item_dropped(&id),
        Msg::Usage(usage) => dash.set_usage(&usage),
        Msg::Channels(channels) => {
            // A channel shown in the pane that has new messages is read again.
            let reload = dash.channel_pane.as_ref().and_then(|p| {
                let shown = p.channel.as_ref()?;
                let old = dash.channels.iter().find(|c| &c.name == shown)?;
                let new = channels.iter().find(|c| &c.name == shown)?;
                (old.messages != new.messages).then(|| (shown.clone(), p.view.as_ref().and_then(|v| v.thread.clone())))
            });
            dash.channels = channels;
            if let Some((channel, thread)) = reload {
                return Flow::LoadChannel { channel, thread };
            }
        }
        Msg::Rosters(rosters) => dash.set_memberships(&rosters),
        Msg::Approvals(host, open, unread) => dash.set_approvals(host.as_deref(), open, unread),
        Msg::Answered(session, outcome) => dash.answered(&session, outcome),
        Msg::Posted(channel, thread, outcome) => {
            dash.status = Some(outcome);
            if dash.channel_pane.as_ref().is_some_and(|p| p.channel.as_ref() == Some(&channel)) {
                return Flow::LoadChannel { channel, thread };
            }
        }
        Msg::FleetNotes(notes, declared) => dash.set_fleet(&notes, &declared),
        Msg::Signal(sig) => return Flow::Exit(128 + sig),
        Msg::Term(TermEvent::Key(key)) if key.kind != KeyEventKind::Release => {
            let key = match key.code {
                KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => Key::CtrlC,
                // Alt- and Ctrl- chords are not the plain keys the dashboard binds.
                KeyCode::Char(_) if key.modifiers.intersects(KeyModifiers::ALT | KeyModifiers::CONTROL) => {
                    return Flow::Go;
                }
                KeyCode::Char(c) => Key::Char(c),
                KeyCode::Enter if key.modifiers.intersects(KeyModifiers::ALT | KeyModifiers::CONTROL) => Key::SendEnter,
                KeyCode::Up if key.modifiers.contains(KeyModifiers::SHIFT) => Key::LineUp,
                KeyCode::Down if key.modifiers.contains(KeyModifiers::SHIFT) => Key::LineDown,
                KeyCode::Up => Key::Up,
                KeyCode::Down => Key::Down,
                KeyCode::PageUp => Key::PageUp,
                KeyCode::PageDown => Key::PageDown,
                KeyCode::Home => Key::Home,
                KeyCode::End => Key::End,
                KeyCode::Enter => Key::Enter,
                KeyCode::Esc => Key::Esc,
                KeyCode::Backspace => Key::Backspace,
                _ => return Flow::Go,
            };
            match dash.on_key(key) {
                Some(model::Command::Quit) => return Flow::Exit(0),
                Some(model::Command::Attach(name)) => return Flow::Attach(name),
                Some(model::Command::Run(action)) => return Flow::Run(action),
                Some(model::Command::Send { session, text }) => return Flow::Send { session, text },
                Some(model::Command::Keys { session, keys }) => return Flow::Keys { session, keys },
                Some(model::Command::Answer { session, option, seen, said }) => {
                    return Flow::Answer { session, option, seen, said };
                }
                Some(model::Command::LoadChannel { channel, thread }) => return Flow::LoadChannel { channel, thread },
                Some(model::Command::Post { channel, thread, text }) => return Flow::Post { channel, thread, text },
                None => {}
            }
        }
        Msg::Term(_) => {}
        Msg::PreviewBytes(id, bytes) => {
            if let Some(p) = preview.as_mut().filter(|p| p.id == id)
                && let Some(screen) = p.screen.as_mut()
            {
                let before = screen.history_len();
                screen.process(&bytes);
                let after = screen.history_len();
                dash.preview_grew(after.saturating_sub(before));
                if after >= screen.history_limit() {
                    p.older = Vec::new();
                }
            }
        }
        Msg::PreviewHistory(id, piece) => {
            if let Some(p) = preview.as_mut().filter(|p| p.id == id)
                && let Some(screen) = p.screen.as_ref()
            {
                if piece.sets_end {
                    p.own_at_end = screen.history_len();
                }
                p.fetched.extend(piece.rows);
                if piece.done {
                    let mut rows = std::mem::take(&mut p.fetched);
                    // The newest of them are the lines our own model has kept since it started;
                    // once its own history is full, the two no longer meet.
                    rows.truncate(rows.len().saturating_sub(p.own_at_end));
                    p.older = if screen.history_len() >= screen.history_limit() { Vec::new() } else { rows };
                    p.history_in = true;
                    if !piece.notes.is_empty() {
                        dash.status = Some(format!("{}'s history: {}", p.session, piece.notes.join("; ")));
                    }
                }
            }
        }
        Msg::PreviewConnected(id, stream) => match preview.as_mut().filter(|p| p.id == id && !p.ended) {
            Some(p) => p.stream = Some(stream),
            // The selection moved on meanwhile: end it (the thread then ends too).
            None => {
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        },
        Msg::PreviewEnded(id, why) => {
            // The last screen drawn stays; without one, the note says why there is none.
            if let Some(p) = preview.as_mut().filter(|p| p.id == id) {
                p.note = why;
                p.stream = None;
                p.ended = true;
                p.history_in = true;
            }
        }
    }
    Flow::Go
}

/// Ask the daemon on a thread (a force can take a minute); the outcome comes back as a message.
/// A host's session or item is acted on by the host's own `desk serve`, over its control socket
/// through the host's link: an error at once when the link is down, within the link's open
/// timeout when the host does not answer.
fn run_action(paths: &Paths, links: &hosts::Links, tx: &Sender<Msg>, action: Action, dash: &mut Dash) {
    let socket = desk_common::daemon_client::socket_path(paths);
    let host = action.host().map(|host| (host.to_string(), links.clone()));
    let what = match &action {
        Action::Force(item) => format!("forcing {item}"),
        Action::Drop(item) => format!("dropping {item}"),
        Action::Pause(s) => format!("pausing {s}"),
        Action::Resume(s) => format!("resuming {s}"),
    };
    dash.status = Some(format!("{what}: asking desk serve..."));
    let _ = spawn("action", tx.clone(), move |tx| {
        let request = action.request();
        let timeout = action_timeout(&action);
        let answer = match &host {
            Some((host, links)) => links
                .get(host)
                .ok_or_else(|| anyhow::anyhow!("host {host} is not connected"))
                .and_then(|link| link.open(desk_wire::relay::Target::Control))
                .and_then(|stream| daemon_client::request_on(stream, &request, timeout))
                .map(control::Response::into_answer::<()>),
            None => daemon_client::request(&socket, &request, timeout).map(control::Response::into_answer::<()>),
        };
        if let (Action::Drop(item), Ok(Ok(_))) = (&action, &answer) {
            let _ = tx.send(Msg::Dropped(item.clone()));
        }
        let outcome = outcome_line(answer, host.as_ref().map(|(h, _)| h.as_str()));
        let _ = tx.send(Msg::ActionDone(outcome));
    });
}

/// The status line for an action's answer: what the daemon did, and only a refusal (nothing
/// was done) is called one — a force that pasted again and still did not deliver says so.
/// `host`: the daemon asked was that host's.
fn outcome_line(
    answer: anyhow::Result<Result<control::Answer<()>, control::ControlError>>,
    host: Option<&str>,
) -> String {
    match answer {
        Ok(Ok(done)) if done.message.is_empty() => "done".into(),
        Ok(Ok(done)) => done.message,
        Ok(Err(e)) if e.kind.refused() => format!("refused: {}", e.message),
        Ok(Err(e)) => e.message,
        Err(e) => match host {
            Some(host) => format!("not done: {e:#} (is host {host} up, and its desk serve running?)"),
            None => format!("{e:#} (is desk serve running?)"),
        },
    }
}

/// Queue a prompt exactly as `desk send NAME -` does (same sanitising, intake and refusals: it
/// is that command, run with the text on its stdin), on a thread; its answer (the item id, or
/// why not) comes back as a message.
fn send_prompt(tx: &Sender<Msg>, session: String, text: String, dash: &mut Dash) {
    dash.status = Some(format!("sending to {session}..."));
    let _ = spawn("send", tx.clone(), move |tx| {
        let outcome = (|| -> Result<String> {
            use std::io::Write as _;
            use std::process::Stdio;
            let exe = std::env::current_exe().context("cannot find the desk binary")?;
            let mut child = std::process::Command::new(exe)
                .args(["send", &session, "-"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .context("cannot run desk send")?;
            if let Some(mut stdin) = child.stdin.take() {
                stdin.write_all(text.as_bytes()).context("cannot hand the prompt to desk send")?;
            }
            let out = child.wait_with_output().context("desk send failed")?;
            let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
            let err = String::from_utf8_lossy(&out.stderr).trim().replace('\n', "; ");
            Ok(match (out.status.success(), id.is_empty()) {
                (true, false) if err.is_empty() => format!("sent to {session}: item {id}"),
                (true, false) => format!("sent to {session}: item {id} ({err})"),
                _ => format!("not sent: {err}"),
            })
        })();
        let _ = tx.send(Msg::ActionDone(outcome.unwrap_or_else(|e| format!("not sent: {e:#}"))));
    });
}

/// Type the answer panel's key into the session exactly as `desk keys` does (the same library
/// call, journalled `via` `dash`), on a thread; the outcome comes back as a message.
fn send_keys(paths: &Paths, tx: &Sender<Msg>, session: String, keys: Vec<String>, dash: &mut Dash) {
    dash.status = Some(format!("typing {} into {session}...", keys.join(" ")));
    let paths = paths.clone();
    let _ = spawn("keys", tx.clone(), move |tx| {
        let outcome = if hosts::split(&session).is_some() {
            // A host's session: `desk keys HOST:NAME`, which types them on the host (and journals
            // them there `via` `dash`).
            run_desk(
                &[
                    &["keys", VIA_DASH[0], VIA_DASH[1], &session, "--"],
                    &keys.iter().map(String::as_str).collect::<Vec<_>>()[..],
                ]
                .concat(),
            )
            .map_or_else(|e| format!("not typed: {e}"), |()| format!("typed {} into {session}", keys.join(" ")))
        } else {
            match desk_common::paths::SessionName::parse(&session) {
                Ok(name) => {
                    match desk_common::keys::send(
                        &paths,
                        &name,
                        &keys,
                        &desk_common::keys::Sender::this_process("dash"),
                    ) {
                        Ok(_) => format!("typed {} into {session}", keys.join(" ")),
                        Err(e) => format!("not typed: {e}"),
                    }
                }
                Err(e) => format!("not typed: {e}"),
            }
        };
        let _ = tx.send(Msg::ActionDone(outcome));
    });
}

/// The hidden option, after the subcommand, with which the commands the dashboard runs for a
/// host's session journal their keys and answers on the host `via` `dash` (the option goes to
/// the host with the rest of the command line), as this machine's are.
const VIA_DASH: [&str; 2] = ["--via", "dash"];

/// Run this desk with `args` (for a host's session: the command line reaches the host), its
/// error output the error.
fn run_desk(args: &[&str]) -> std::result::Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the desk binary: {e}"))?;
    let out = std::process::Command::new(exe)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run desk {}: {e}", args.first().unwrap_or(&"")))?;
    if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).trim().replace('\n', "; ")) }
}

/// Answer a session's dialog from the approvals view (on a thread: the answer waits for the
/// dialog to go), as `desk approve`/`deny` do.
fn answer(
    paths: &Paths,
    tx: &Sender<Msg>,
    session: String,
    option: Option<u8>,
    seen: String,
    said: String,
    dash: &mut Dash,
) {
    dash.status = Some(format!("answering {session}: {said}..."));
    let paths = paths.clone();
    let _ = spawn("answer", tx.clone(), move |tx| {
        if hosts::split(&session).is_some() {
            // A host's dialog: `desk approve|deny HOST:NAME --seen FINGERPRINT`, which answers
            // it on the host, only if it is still the dialog on the card (journalled there `via`
            // `dash`).
            let number = option.map(|n| n.to_string());
            let args: Vec<&str> = match &number {
                Some(n) => vec!["approve", VIA_DASH[0], VIA_DASH[1], &session, n, "--seen", &seen],
                None => vec!["deny", VIA_DASH[0], VIA_DASH[1], &session, "--seen", &seen],
            };
            let outcome = run_desk(&args)
                .map_or_else(|e| format!("{session} not answered: {e}"), |()| format!("answered {session}: {said}"));
            let _ = tx.send(Msg::Answered(session, outcome));
            return;
        }
        let choice = option.map_or(desk_core::dialog::Choice::Deny, desk_core::dialog::Choice::Option);
        let outcome = match desk_common::paths::SessionName::parse(&session) {
            Ok(name) => {
                match crate::inbox::answer(
                    &paths,
                    &name,
                    &choice,
                    &seen,
                    None,
                    &desk_common::keys::Sender::this_process("dash"),
                ) {
                    Ok(done) if done.gone_after.is_some() => format!("answered {session}: {said}"),
                    Ok(_) => format!("answered {session}: {said}; its dialog is still on its screen"),
                    Err(e) => format!("{session} not answered: {e}"),
                }
            }
            Err(e) => format!("{session} not answered: {e}"),
        };
        let _ = tx.send(Msg::Answered(session, outcome));
    });
}

/// Post to a channel as the operator, from the channel pane (on a thread).
fn post(
    paths: &Paths,
    tx: &Sender<Msg>,
    channel: String,
    thread: Option<desk_core::delivery::item::ItemId>,
    text: String,
    dash: &mut Dash,
) {
    dash.status = Some(format!("posting to #{channel}..."));
    let paths = paths.clone();
    let _ = spawn("post", tx.clone(), move |tx| {
        let outcome = match channels::post(&paths, &channel, thread.as_ref(), &text) {
            Ok(id) => format!("posted to #{channel} as human: {id}"),
            Err(e) => format!("not posted to #{channel}: {e:#}"),
        };
        let _ = tx.send(Msg::Posted(channel, thread, outcome));
    });
}

/// Make the preview show the selected session: close the old viewer connection and open a new
/// one (on a thread) when the selection moved, or when it ended and the session is live again.
fn follow_selection(
    dash: &Dash,
    paths: &Paths,
    links: &hosts::Links,
    tx: &Sender<Msg>,
    preview: &mut Option<PreviewConn>,
    next_id: &mut u64,
) {
    let Some(name) = dash.selected() else {
        *preview = None;
        return;
    };
    let Some(row) = dash.row(name) else { return };
    let live = row.link == Link::Live;
    if let Some(p) = preview.as_ref()
        && p.session == name
        && (p.for_live || !live)
    {
        return;
    }
    *next_id += 1;
    let id = *next_id;
    let mut conn = PreviewConn {
        id,
        session: name.to_string(),
        stream: None,
        screen: None,
        older: Vec::new(),
        fetched: Vec::new(),
        own_at_end: 0,
        note: String::new(),
        ended: false,
        for_live: live,
        history_in: !live,
    };
    match &row.link {
        Link::Exited(exit) => match &exit.last_screen {
            // Its last screen and the history above it, from the exit record, scroll like a
            // live preview (in default colours: the record keeps text).
            Some(lines) => {
                let (screen, older) = last_screen(lines, exit.last_history.as_deref().unwrap_or_default(), exit);
                conn.screen = Some(screen);
                conn.older = older;
            }
            None => conn.note = "(exited)".into(),
        },
        Link::Live => {
            let (cols, rows) = (row.cols, row.rows);
            conn.screen = Some(Screen::with_history(cols, rows, PREVIEW_HISTORY_LINES as usize));
            conn.note = "connecting...".into();
            if let Some((host, remote)) = hosts::split(name) {
                // A host's session: a viewer stream to its master through the host's link, the
                // same wire protocol as a local master's socket.
                let (host, remote, links) = (host.to_string(), remote.to_string(), links.clone());
                let _ = spawn("preview", tx.clone(), move |tx| {
                    let Some(link) = links.get(&host) else {
                        let _ = tx.send(Msg::PreviewEnded(id, format!("host {host} is not connected")));
                        return;
                    };
                    match link.open(desk_wire::relay::Target::Session(remote)) {
                        Ok(stream) => read_preview(stream, id, cols, rows, REMOTE_PREVIEW_PATIENCE, tx),
                        Err(e) => {
                            let _ = tx.send(Msg::PreviewEnded(id, format!("{e:#}")));
                        }
                    }
                    // The link lives on with the host's listing thread; this clone kept it up
                    // for as long as the preview read from it.
                    drop(link);
                });
            } else {
                let Ok(session_name) = desk_common::paths::SessionName::parse(name) else { return };
                let socket = paths.session(&session_name).socket;
                // Even the connect happens on the thread: to a stopped master whose backlog is
                // full, it would block.
                let _ = spawn("preview", tx.clone(), move |tx| match UnixStream::connect(&socket) {
                    Ok(stream) => read_preview(stream, id, cols, rows, PREVIEW_PATIENCE, tx),
                    Err(e) => {
                        let _ = tx.send(Msg::PreviewEnded(id, format!("cannot connect: {e}")));
                    }
                });
            }
        }
        Link::Connecting => conn.note = "waiting for its master to answer".into(),
        Link::Unresponsive => conn.note = "its master does not answer (stopped or wedged?)".into(),
        Link::Lost => conn.note = "its master is gone and recorded no exit".into(),
        Link::Down => conn.note = "declared in a manifest; not started yet (desk up)".into(),
    }
    *preview = Some(conn);
}

/// An exited session's last screen as a screen model of its last size, and the history lines
/// its exit record kept above it.
fn last_screen(
    lines: &[String],
    history: &[String],
    exit: &desk_common::session::ExitRecord,
) -> (Screen, Vec<HistoryRow>) {
    let widest = lines.iter().map(|l| l.chars().count()).max().unwrap_or(1);
    let cols = exit.cols.unwrap_or(u16::try_from(widest).unwrap_or(u16::MAX)).max(1);
    let rows = exit.rows.unwrap_or(u16::try_from(lines.len()).unwrap_or(u16::MAX)).max(1);
    let mut screen = Screen::new(cols, rows);
    for (i, line) in lines.iter().take(usize::from(rows)).enumerate() {
        // Each row placed by position: nothing scrolls, and a full-width row does not wrap.
        screen.process(format!("\x1b[{};1H{line}", i + 1).as_bytes());
    }
    let older =
        history.iter().map(|text| HistoryRow { text: text.clone(), wrapped: false, runs: Vec::new() }).collect();
    (screen, older)
}

/// A viewer connection at the session's own size (so the master sends its raw output, not a
/// view rendered for another size): the keyframe, then output, each passed to the loop.
fn read_preview(stream: UnixStream, id: u64, cols: u16, rows: u16, patience: Duration, tx: Sender<Msg>) {
    let ended = |why: String| {
        let _ = tx.send(Msg::PreviewEnded(id, why));
    };
    // The loop keeps a handle to shut the connection down when the selection moves on.
    match stream.try_clone() {
        Ok(handle) => {
            if tx.send(Msg::PreviewConnected(id, handle)).is_err() {
                return;
            }
        }
        Err(e) => return ended(format!("cannot use the connection: {e}")),
    }
    let mut conn = match desk_common::master_client::Connection::open_within(stream, Role::Viewer, cols, rows, patience)
    {
        Ok(conn) => conn,
        Err(e) => return ended(format!("{e:#}")),
    };
    conn.set_deadline(None);
    let mut pager: Option<HistoryPager> = None;
    loop {
        match conn.recv() {
            Ok(Frame::Keyframe { data, .. }) => {
                if tx.send(Msg::PreviewBytes(id, data)).is_err() {
                    return;
                }
                // Asked once the keyframe is under way, the first answer comes after it (and
                // after any output sent before it), so the history read ends where the
                // preview's own model begins to keep lines.
                if pager.is_none() {
                    let (reading, first) = HistoryPager::new(PREVIEW_HISTORY_LINES);
                    pager = Some(reading);
                    if let Err(e) = conn.send(&first) {
                        return ended(format!("{e:#}"));
                    }
                }
            }
            Ok(Frame::Output(data)) => {
                if tx.send(Msg::PreviewBytes(id, data)).is_err() {
                    return;
                }
            }
            Ok(Frame::Snapshot(mut reply)) => {
                let Some(reading) = pager.as_mut().filter(|p| !p.done()) else { continue };
                let page = reading.on_reply(&mut reply);
                if let Some(next) = &page.next
                    && let Err(e) = conn.send(next)
                {
                    return ended(format!("{e:#}"));
                }
                let done = page.next.is_none();
                let notes = if done { reading.notes().to_vec() } else { Vec::new() };
                let piece = HistoryPiece { rows: page.rows, sets_end: page.sets_end, done, notes };
                if tx.send(Msg::PreviewHistory(id, piece)).is_err() {
                    return;
                }
            }
            Ok(Frame::Exit { .. }) => return ended("exited".into()),
            Ok(_) => {}
            Err(e) => return ended(format!("{e:#}")),
        }
    }
}

/// Every session the files know, as its first row: exited ones from their exit record, live
/// ones as connecting (the watcher's WELCOME fills them in), dead masters as lost.
fn rows_from_files(paths: &Paths) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for name in paths.session_names()? {
        let files = paths.session(&name);
        let meta = session::read_meta(&files).unwrap_or(None);
        let provider = meta.as_ref().map(|m| m.provider.clone()).unwrap_or_default();
        if let Some(exit) = session::current_exit(&files) {
            rows.push(Row::exited(name.as_str(), &provider, exit));
            continue;
        }
        let (pid, cols, size_rows) = meta.as_ref().map_or((0, 80, 24), |m| (m.pid, m.cols, m.rows));
        let mut row = Row::connecting(name.as_str(), &provider, pid, cols, size_rows);
        if !master_listens(&files.socket) {
            row.link = Link::Lost;
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Every [`USAGE_REFRESH`]: each session's fleet note (`crate::launch::view`) and the declared
/// sessions that never ran, read from files (no master is asked).
fn sample_fleet(paths: &Paths, tx: Sender<Msg>) {
    loop {
        let names = paths.session_names().unwrap_or_default();
        let supervision = desk_daemon::supervisor::read_state(paths);
        let now = desk_common::clock::now_ms();
        let mut notes = HashMap::new();
        for name in &names {
            let running = master_listens(&paths.session(name).socket);
            let note =
                crate::launch::view::of(paths, name, running, None, &supervision, now).and_then(|v| match v.note() {
                    Some(n) if running => v.start.as_ref().map(|_| n.replacen("generation ", "gen ", 2)),
                    other => other,
                });
            if let Some(note) = note {
                notes.insert(name.to_string(), note);
            }
        }
        let known: Vec<String> = names.iter().map(ToString::to_string).collect();
        let declared = crate::launch::view::declared_down(paths, &known)
            .into_iter()
            .map(|(_, spec)| (spec.name, spec.provider.as_str().to_string()))
            .collect();
        if tx.send(Msg::FleetNotes(notes, declared)).is_err() {
            return;
        }
        std::thread::sleep(USAGE_REFRESH);
    }
}

/// 16 KiB of each session's journal: its last hundred or so events, the recent past the events
/// pane starts with; reading it costs well under a millisecond a session.
const BACKLOG_BYTES: u64 = 16 * 1024;

/// Every session's newest journal events (an unreadable journal gives none).
fn recent_events(paths: &Paths) -> Vec<(String, desk_wire::events::Event)> {
    let mut events = Vec::new();
    for name in paths.session_names().unwrap_or_default() {
        let tail = desk_common::journal::read_tail(&paths.session_state(&name), BACKLOG_BYTES).unwrap_or_default();
        events.extend(tail.into_iter().map(|e| (name.to_string(), e)));
    }
    events
}

/// Every [`USAGE_REFRESH`]: CPU % since the previous sample and resident memory, by session id.
fn sample_usage(tx: Sender<Msg>) {
    use nix::unistd::{SysconfVar, sysconf};
    let ticks_per_s = sysconf(SysconfVar::CLK_TCK).ok().flatten().unwrap_or(100).max(1) as f32;
    let page_kib = (sysconf(SysconfVar::PAGE_SIZE).ok().flatten().unwrap_or(4096).max(1024) / 1024) as u64;
    let mut previous = desk_common::procfs::usage_by_session();
    let mut at = std::time::Instant::now();
    loop {
        std::thread::sleep(USAGE_REFRESH);
        let now = desk_common::procfs::usage_by_session();
        let seconds = at.elapsed().as_secs_f32().max(0.001);
        at = std::time::Instant::now();
        let usage = now
            .iter()
            .map(|(sid, u)| {
                let before = previous.get(sid).map_or(u.cpu_ticks, |p| p.cpu_ticks);
                let pct = u.cpu_ticks.saturating_sub(before) as f32 / ticks_per_s / seconds * 100.0;
                (*sid, (pct, u.rss_pages * page_kib))
            })
            .collect();
        previous = now;
        if tx.send(Msg::Usage(usage)).is_err() {
            return;
        }
    }
}

/// Whether a master may be listening on the socket at `path`: false for no socket or a refused connect (its
/// master died). The connect does not block: a stopped master with a full backlog counts as
/// listening (the watcher then reports it unresponsive), and our side is closed at once.
fn master_listens(path: &std::path::Path) -> bool {
    use nix::errno::Errno;
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, UnixAddr, connect, socket};
    use std::os::fd::AsRawFd;
    let Ok(fd) = socket(AddressFamily::Unix, SockType::Stream, SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC, None)
    else {
        return true;
    };
    let Ok(addr) = UnixAddr::new(path) else { return false };
    !matches!(connect(fd.as_raw_fd(), &addr), Err(Errno::ENOENT | Errno::ECONNREFUSED))
}

/// Every session's queue, counted as `desk ls` counts it (the daemon's when it runs, else the
/// store's), or why it could not be had; with a word for the header when the store was read.
fn ask_queues(paths: &Paths) -> Result<(HashMap<String, QueueCounts>, Option<String>), String> {
    let (pending, offline) = crate::queues::pending_by_session(paths, QUEUE_TIMEOUT)?;
    let counts = pending
        .into_iter()
        .map(|(session, p)| {
            let counts = QueueCounts {
                queued: p.queue,
                stuck: p.stuck,
                paused: p.paused.is_some(),
                items: p.items.iter().map(item_line).collect(),
            };
            (session, counts)
        })
        .collect();
    let note = offline.then(|| "desk serve is not running: the store's queues, nothing is delivered".to_string());
    Ok((counts, note))
}

fn item_line(item: &Item) -> ItemLine {
    ItemLine {
        id: item.id.clone(),
        state: item.state.as_str().to_string(),
        class: item.stuck.map(|c| c.as_str().to_string()),
        preview: item.preview(60),
        why: item
            .evidence
            .iter()
            .rev()
            .find(|n| n.kind == "stuck" || n.kind == "refused")
            .map(|n| n.detail.clone())
            .unwrap_or_default(),
    }
}
