//! The dashboard's state, as a value: the fleet's rows, the fleet events pane, the selection,
//! the filter, the grouping, how far the preview is scrolled back, and what a key press does to
//! them.
//!
//! Owns no I/O and reads no clock: [`Dash::apply`] takes what the fleet watcher saw,
//! [`Dash::set_queues`] what the daemon answered, [`Dash::on_key`] a key, and each returns or
//! records what changed; the loop in `dash::mod` performs the rest. Invariants: there is at most
//! one row per session name; the selection is a session name (so it follows its row when the
//! order changes) and, while any row is visible, names a visible row; the events pane holds at
//! most [`EVENT_LOG_LIMIT`] lines, newest first; rows of one group are contiguous in the table
//! order; the preview's scroll never passes the history the loop last reported, and is 0 (live)
//! whenever the selection moves. May not depend on the terminal, sockets or files.

use std::collections::{HashMap, VecDeque};

use desk_common::fleet::FleetEvent;
use desk_common::session::ExitRecord;
use desk_wire::control::{ItemId, Request, SessionName};
use desk_wire::events::{AxisChange, Event, EventBody};
use desk_wire::state::{Activity, Health, Lifecycle};
use desk_wire::{ExitStatus, Role, SessionInfo};

use super::key::Key;

/// 500 lines: ten screens of the tallest events pane the dashboard draws, far more than an
/// operator scrolls back through; older lines are in each session's journal (`desk events`).
pub const EVENT_LOG_LIMIT: usize = 500;

/// How a session's master is reachable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// Known from its files; no answer from its master yet.
    Connecting,
    /// Its master answered and streams events.
    Live,
    /// Its master did not answer in time (stopped or wedged); it may still wake.
    Unresponsive,
    /// The child exited, as the record says.
    Exited(ExitRecord),
    /// Its master is gone and recorded no exit.
    Lost,
    /// A manifest declares it and it has never run here (`desk up` starts it).
    Down,
}

/// One session's row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub name: String,
    pub provider: String,
    pub link: Link,
    pub lifecycle: Lifecycle,
    pub activity: Activity,
    /// Unix ms since the activity holds (0: unknown).
    pub activity_since_ms: u64,
    /// What a blocked agent waits for.
    pub wait: Option<String>,
    pub health: Health,
    pub controllers: u32,
    pub viewers: u32,
    pub title: String,
    /// The session's size (for the preview).
    pub cols: u16,
    pub rows: u16,
    /// Its pending items, stuck ones, paused (None: neither the daemon nor the store answered).
    pub queue: Option<QueueCounts>,
    /// The child's pid, which is also its session id (0: not known).
    pub pid: u32,
    /// CPU % (of one core) and resident KiB of the child's whole session, while it runs.
    pub usage: Option<(f32, u64)>,
    /// The fleet's word on it (`crate::launch::view`): the supervisor's health while it is down
    /// (`failed: …`, `restarting in 4 s`), or the conversation its generation resumed.
    pub fleet: Option<String>,
}

/// A session's queue as the daemon last described it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueCounts {
    /// Items pending: queued, sending or stuck (as `desk ls`'s QUEUE counts them).
    pub queued: u32,
    pub stuck: u32,
    pub paused: bool,
    /// Its stuck items first, then the waiting ones, as the daemon listed them.
    pub items: Vec<ItemLine>,
}

/// One delivery item, as the items pane shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemLine {
    pub id: ItemId,
    /// `queued`, `sending`, `stuck`, ...
    pub state: String,
    /// The stuck class (`submit-stuck`, `paste-missing`, `merged`, ...), for a stuck item.
    pub class: Option<String>,
    /// The prompt's first line.
    pub preview: String,
    /// The newest stuck/refused evidence, in a few words.
    pub why: String,
}

/// A session as the dashboard hands it to the loop: this machine's (`host` none) or a host's,
/// by its name there. Rows are named `HOST:NAME` for a host's sessions; the reference is
/// parsed from the row once, so nothing downstream splits a string again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRef {
    pub host: Option<String>,
    pub name: SessionName,
}

impl SessionRef {
    /// The session the row named `row` stands for; a name that does not parse is said.
    pub fn of_row(row: &str) -> Result<SessionRef, String> {
        let (host, name) = match row.split_once(':') {
            Some((host, name)) => (Some(host.to_string()), name),
            None => (None, row),
        };
        Ok(SessionRef { host, name: SessionName::parse(name).map_err(|e| e.to_string())? })
    }
}

impl std::fmt::Display for SessionRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.host {
            Some(host) => write!(f, "{host}:{}", self.name),
            None => write!(f, "{}", self.name),
        }
    }
}

/// An item as the dashboard hands it to the loop: this machine's daemon's, or a host's (then
/// written `HOST:ITEMID`, as the CLI takes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemRef {
    pub host: Option<String>,
    pub id: ItemId,
}

impl std::fmt::Display for ItemRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.host {
            Some(host) => write!(f, "{host}:{}", self.id),
            None => write!(f, "{}", self.id),
        }
    }
}

/// An operator action on a daemon (this machine's, or the host's of the session or item it
/// names), run by the loop once confirmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Force(ItemRef),
    Drop(ItemRef),
    Pause(SessionRef),
    Resume(SessionRef),
}

impl Action {
    /// The host whose daemon performs it (`None`: this machine's).
    pub fn host(&self) -> Option<&str> {
        match self {
            Action::Force(item) | Action::Drop(item) => item.host.as_deref(),
            Action::Pause(session) | Action::Resume(session) => session.host.as_deref(),
        }
    }

    /// The request that daemon is sent (names as that daemon knows them).
    pub fn request(&self) -> Request {
        match self {
            // Never over someone's draft from here: the daemon refuses and says so; the CLI's
            // `desk force --over-draft` is the deliberate way.
            Action::Force(item) => Request::Force { id: item.id.clone(), over_draft: false },
            Action::Drop(item) => Request::Drop { id: item.id.clone() },
            Action::Pause(s) => {
                Request::Pause { session: s.name.clone(), reason: Some("paused from desk dash".into()) }
            }
            Action::Resume(s) => Request::Resume { session: s.name.clone() },
        }
    }
}

/// A question on the footer line, waiting for y (anything else cancels).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirm {
    pub question: String,
    pub action: Action,
}

// The ranking is the fleet's one (`desk attach --next`, attach's status line and jump key).
pub use desk_core::attention::{Urgency, rank};

impl Row {
    fn new(name: &str) -> Row {
        Row {
            name: name.to_string(),
            provider: String::new(),
            link: Link::Connecting,
            lifecycle: Lifecycle::Starting,
            activity: Activity::Unknown,
            activity_since_ms: 0,
            wait: None,
            health: Health::Ok,
            controllers: 0,
            viewers: 0,
            title: String::new(),
            cols: 80,
            rows: 24,
            queue: None,
            pid: 0,
            usage: None,
            fleet: None,
        }
    }

    /// A row for a session a manifest declares that has never run here.
    pub fn down(name: &str, provider: &str) -> Row {
        let mut row = Row::new(name);
        row.provider = provider.to_string();
        row.link = Link::Down;
        row.lifecycle = Lifecycle::Exited;
        row
    }

    /// A row for a session that has exited, from its exit record.
    pub fn exited(name: &str, provider: &str, exit: ExitRecord) -> Row {
        let mut row = Row::new(name);
        row.provider = provider.to_string();
        row.lifecycle = Lifecycle::Exited;
        row.title = exit.title.clone().unwrap_or_default();
        row.activity_since_ms = exit.exited_at_ms;
        row.link = Link::Exited(exit);
        row
    }

    /// A running session's row, as its files describe it, until its master answers.
    pub fn connecting(name: &str, provider: &str, pid: u32, cols: u16, rows: u16) -> Row {
        let mut row = Row::new(name);
        row.pid = pid;
        row.provider = provider.to_string();
        row.cols = cols;
        row.rows = rows;
        row
    }

    fn apply_info(&mut self, info: &SessionInfo) {
        self.provider = info.provider.clone();
        self.link = Link::Live;
        self.pid = info.pid;
        self.controllers = info.controllers;
        self.viewers = info.viewers;
        self.title = info.title.clone();
        self.cols = info.cols;
        self.rows = info.rows;
        if let Some(state) = &info.state {
            self.lifecycle = state.lifecycle.value;
            self.activity = state.activity.value;
            self.activity_since_ms = state.activity.since_ms;
            self.wait = state.wait.clone();
            self.health = state.health.value.clone();
        }
    }

    pub fn urgency(&self) -> Urgency {
        let stuck = self.queue.as_ref().map_or(0, |q| q.stuck);
        match &self.link {
            Link::Exited(exit) => rank(Some(exit.status), true, self.activity, stuck, &self.health),
            Link::Down => Urgency::ExitedCleanly,
            Link::Unresponsive | Link::Lost => rank(None, false, self.activity, stuck, &self.health),
            Link::Connecting | Link::Live => rank(None, true, self.activity, stuck, &self.health),
        }
    }

    /// What the row's lifecycle column says: the lifecycle, or how the master is (not) reached.
    pub fn lifecycle_word(&self) -> String {
        let word = self.link_word();
        match &self.fleet {
            Some(note) => format!("{word} · {note}"),
            None => word,
        }
    }

    fn link_word(&self) -> String {
        match &self.link {
            Link::Connecting => "starting".into(),
            Link::Live => self.lifecycle.as_str().into(),
            Link::Unresponsive => "unresponsive".into(),
            Link::Lost => "lost".into(),
            Link::Down => "down".into(),
            Link::Exited(exit) => crate::words::ended(exit.status),
        }
    }

    fn on_event(&mut self, event: &Event) {
        match &event.body {
            EventBody::Started { provider, cols, rows, .. } => {
                self.provider = provider.clone();
                self.cols = *cols;
                self.rows = *rows;
            }
            EventBody::Title { title } => self.title = title.clone(),
            EventBody::Resize { cols, rows } => {
                self.cols = *cols;
                self.rows = *rows;
            }
            EventBody::Attach { role, .. } => match role {
                Role::Controller => self.controllers += 1,
                Role::Viewer => self.viewers += 1,
                _ => {}
            },
            EventBody::Detach { role, .. } => match role {
                Role::Controller => self.controllers = self.controllers.saturating_sub(1),
                Role::Viewer => self.viewers = self.viewers.saturating_sub(1),
                _ => {}
            },
            EventBody::State { change, wait, .. } => match change {
                AxisChange::Lifecycle { to, .. } => self.lifecycle = *to,
                AxisChange::Activity { to, .. } => {
                    self.activity = *to;
                    self.activity_since_ms = event.ts_ms;
                    self.wait = wait.clone();
                }
                AxisChange::Health { to, .. } => self.health = to.clone(),
            },
            _ => {}
        }
    }
}

/// One line of the fleet events pane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Unix ms.
    pub at_ms: u64,
    pub session: String,
    pub text: String,
    /// Something a person should look at (blocked, degraded, an error exit, a notification).
    pub alert: bool,
}

/// What the loop must do after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Quit,
    /// Suspend the dashboard and attach this terminal to the session.
    Attach(String),
    /// Ask the daemon (confirmed where it changes an item).
    Run(Action),
    /// Queue this prompt for the session (as `desk send` does).
    Send {
        session: String,
        text: String,
    },
    /// Type these keys into the session (as `desk keys` does): the answer panel's choice.
    Keys {
        session: String,
        keys: Vec<String>,
    },
    /// Answer `session`'s dialog — the one with fingerprint `seen` — with `option` (`None`:
    /// refuse it), as `desk approve`/`deny` do: the approvals view's choice.
    Answer {
        session: String,
        option: Option<u8>,
        seen: String,
        said: String,
    },
    /// Read this channel (this thread) into the channel pane.
    LoadChannel {
        channel: String,
        thread: Option<desk_core::delivery::item::ItemId>,
    },
    /// Post this text to the channel (in the thread) as the operator.
    Post {
        channel: String,
        thread: Option<desk_core::delivery::item::ItemId>,
        text: String,
    },
}

/// The inline prompt editor: multi-line text for one session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Editor {
    pub session: String,
    pub text: String,
}

/// How the table groups its rows. Channels (a later issue) become a third variant here: the
/// `v` key cycles through the variants, [`Dash::group_of`] names a row's group and the view
/// draws a header line above each group, so a new grouping needs only its label.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Grouping {
    /// One list, by urgency.
    #[default]
    None,
    /// A group per provider (`claude`, `codex`, `demo`, ...), the group holding the row that
    /// most needs a person first.
    Provider,
    /// A group per channel (`#release`): a session under the first of its channels by name
    /// (one row per session), sessions in none under `-`.
    Channel,
    /// A group per host (`gpu`), this machine's sessions under `this machine`
    /// (docs/remote.md).
    Host,
}

impl Grouping {
    /// The next grouping the `v` key selects.
    fn next(self) -> Grouping {
        match self {
            Grouping::None => Grouping::Provider,
            Grouping::Provider => Grouping::Channel,
            Grouping::Channel => Grouping::Host,
            Grouping::Host => Grouping::None,
        }
    }
}

/// 10 lines: how far PageUp scrolls the preview before the loop has told the model the pane's
/// height (it does before every draw, so this is only the very first key's step).
const DEFAULT_PAGE: usize = 10;

/// The footer's answer to a scroll back with nothing above the live screen.
const NO_HISTORY: &str = "no history to scroll into";

/// The whole dashboard state.
#[derive(Debug, Default)]
pub struct Dash {
    rows: HashMap<String, Row>,
    /// Sessions in table order (recomputed on every change).
    order: Vec<String>,
    selected: Option<String>,
    /// The operator moved the selection; until then it stays on the top row (the session that
    /// most needs a person), wherever rows arriving at start put it.
    pinned: bool,
    /// The filter text (a session is shown when its name, provider or title contains it).
    pub filter: String,
    /// The filter is being typed.
    pub editing_filter: bool,
    log: VecDeque<LogLine>,
    /// The middle pane lists the selected session's items instead of its screen.
    pub items_focus: bool,
    /// The selected item in the items pane (an index into the selected session's items).
    pub item_index: usize,
    /// A question waiting for y.
    pub confirm: Option<Confirm>,
    /// The prompt being written, while the editor is open.
    pub editor: Option<Editor>,
    /// The answer panel, while it is open (`super::answer`).
    pub answer: Option<super::answer::Answer>,
    /// Every key and what it does, over the preview (`?`; any key closes it).
    pub help: bool,
    /// The last action's outcome, or a refusal, for the footer.
    pub status: Option<String>,
    /// Why the queues shown are not the daemon's (read from the store while it is down) or
    /// unknown (neither answered), for the header.
    pub daemon_down: Option<String>,
    /// How the table groups its rows (`v` toggles).
    pub grouping: Grouping,
    /// How many lines the preview is scrolled back from the live screen (0: live). While
    /// scrolled back it stays on the same lines as output arrives ([`Dash::preview_grew`]).
    pub preview_scroll: usize,
    /// The furthest the preview can scroll back now (the history lines it has), and a page:
    /// set by the loop before each draw ([`Dash::set_preview_extent`]).
    preview_back_max: Option<usize>,
    preview_page: usize,
    /// The master's answer about the preview's history is not in yet: `preview_back_max` is
    /// only a bound, and a scroll past what is shown now lands once the answer is in.
    preview_loading: bool,
    /// Every channel at a glance: the header names those with unread messages.
    pub channels: Vec<desk_daemon::channel::summary::Summary>,
    /// The channels each session is a member of, by name (for grouping by channel).
    pub memberships: HashMap<String, Vec<String>>,
    /// The approvals view, while it is open (`super::approvals`).
    pub approvals: Option<super::approvals::Approvals>,
    /// The open dialogs and unreadable blocked sessions each place (this machine: `None`, or a
    /// host) last reported, which the approvals view's cards are made of.
    pub dialogs: HashMap<Option<String>, (Vec<crate::inbox::Open>, Vec<String>)>,
    /// The channel pane, while it is open (`super::channels`).
    pub channel_pane: Option<super::channels::ChannelPane>,
    /// Each configured host, by name, and why it cannot be reached (`None`: its last listing
    /// came back), for the header (`super::hosts`).
    pub hosts: std::collections::BTreeMap<String, Option<String>>,
}

impl Dash {
    pub fn new() -> Dash {
        Dash::default()
    }

    /// Add or replace a row (from the session's files, at start).
    pub fn insert(&mut self, row: Row) {
        self.rows.insert(row.name.clone(), row);
        self.reorder();
    }

    /// The fleet's recent past for the events pane, before the live events come: each
    /// session's newest journal events (`session`, event), in any order. Told as live events
    /// are (spinner frames and output flow left out); the rows are not touched.
    pub fn backlog(&mut self, mut events: Vec<(String, Event)>) {
        events.sort_by_key(|(_, e)| e.ts_ms);
        let mut titles: HashMap<String, String> = HashMap::new();
        for (session, event) in events {
            if let EventBody::Title { title } = &event.body {
                let last = titles.insert(session.clone(), title.clone());
                if last.is_some_and(|last| desk_core::title::only_animation_changed(&last, title)) {
                    continue;
                }
            }
            if let Some((text, alert)) = describe(&event.body) {
                self.log(event.ts_ms, &session, text, alert);
            }
        }
    }

    /// Take what the fleet watcher saw; `now_ms` stamps lines that carry no time of their own.
    pub fn apply(&mut self, event: &FleetEvent, now_ms: u64) {
        match event {
            FleetEvent::Joined { session, info } => {
                let row = self.rows.entry(session.clone()).or_insert_with(|| Row::new(session));
                let was_gone = matches!(row.link, Link::Exited(_) | Link::Lost);
                row.apply_info(info);
                // A new session announces itself with its Started event; a name that had ended
                // and runs again is worth a line of its own.
                if was_gone {
                    self.log(now_ms, session, format!("running again (generation {})", info.generation), false);
                }
            }
            FleetEvent::Event { session, event } => {
                let row = self.rows.entry(session.clone()).or_insert_with(|| Row::new(session));
                let relinked = row.link != Link::Live;
                if relinked {
                    row.link = Link::Live;
                }
                // A spinner frame is not news (masters of this desk no longer send them; older
                // ones still do).
                let animation = matches!(&event.body, EventBody::Title { title }
                    if desk_core::title::only_animation_changed(&row.title, title));
                row.on_event(event);
                if let Some((text, alert)) = describe(&event.body).filter(|_| !animation) {
                    self.log(event.ts_ms, session, text, alert);
                }
                // A working fleet sends hundreds of these a second (spinner titles, output);
                // only what can move a row is worth sorting the table again for.
                let title_matters = !self.filter.is_empty();
                let moves = relinked
                    || match &event.body {
                        EventBody::Title { .. } => title_matters,
                        EventBody::Output { .. }
                        | EventBody::Mode { .. }
                        | EventBody::Resize { .. }
                        | EventBody::Report { .. }
                        | EventBody::Bell
                        | EventBody::Notification { .. }
                        | EventBody::Attach { .. }
                        | EventBody::Detach { .. }
                        | EventBody::Hook { .. }
                        | EventBody::Gap { .. }
                        | EventBody::Keys { .. }
                        | EventBody::Answer { .. }
                        | EventBody::Notify { .. }
                        | EventBody::Upgraded { .. } => false,
                        EventBody::Started { .. } | EventBody::State { .. } | EventBody::Exit { .. } => true,
                    };
                if !moves {
                    return;
                }
            }
            FleetEvent::Unresponsive { session } => {
                let row = self.rows.entry(session.clone()).or_insert_with(|| Row::new(session));
                row.link = Link::Unresponsive;
                self.log(now_ms, session, "its master does not answer (stopped or wedged?)".into(), true);
            }
            FleetEvent::Answering { session } => {
                let row = self.rows.entry(session.clone()).or_insert_with(|| Row::new(session));
                row.link = Link::Live;
                self.log(now_ms, session, "its master answers again".into(), false);
            }
            FleetEvent::Left { session, exit } => {
                let row = self.rows.entry(session.clone()).or_insert_with(|| Row::new(session));
                row.usage = None;
                match exit {
                    Some(exit) => {
                        row.lifecycle = Lifecycle::Exited;
                        row.activity_since_ms = exit.exited_at_ms;
                        if let Some(title) = &exit.title {
                            row.title = title.clone();
                        }
                        let clean = exit.status == ExitStatus::Code(0);
                        let text = desk_common::signals::describe_exit(exit.status);
                        row.link = Link::Exited(exit.clone());
                        self.log(exit.exited_at_ms, session, text, !clean);
                    }
                    None => {
                        row.link = Link::Lost;
                        self.log(now_ms, session, "its master went away without recording an exit".into(), true);
                    }
                }
            }
        }
        self.reorder();
    }

    /// Take the fleet's notes by session, and the declared sessions that never ran here
    /// (name, provider): rows `down` for those no other row stands for.
    pub fn set_fleet(&mut self, notes: &HashMap<String, String>, declared: &[(String, String)]) {
        for (name, provider) in declared {
            self.rows.entry(name.clone()).or_insert_with(|| Row::down(name, provider));
        }
        // A declared row whose session is gone from every manifest goes with it.
        self.rows.retain(|name, row| row.link != Link::Down || declared.iter().any(|(n, _)| n == name));
        for row in self.rows.values_mut() {
            row.fleet = notes.get(&row.name).cloned();
        }
    }

    /// Take this machine's sessions' CPU and memory use, by session id (a row's child pid);
    /// exited rows have none. A host's rows keep what their host's listing gave.
    pub fn set_usage(&mut self, usage: &HashMap<u32, (f32, u64)>) {
        for row in self.rows.values_mut().filter(|r| !r.name.contains(':')) {
            let running = matches!(row.link, Link::Live | Link::Unresponsive | Link::Connecting);
            row.usage = if running && row.pid != 0 { usage.get(&row.pid).copied() } else { None };
        }
    }

    /// Take a host's sessions (rows named `HOST:NAME`, from its listing), or why it could not
    /// be reached. A host that does not answer keeps its rows as last seen (marked
    /// unresponsive: the host, not this desk, is their authority) and says why in the header.
    pub fn set_host(&mut self, host: &str, answer: Result<Vec<Row>, String>) {
        let prefix = format!("{host}:");
        match answer {
            Ok(rows) => {
                self.hosts.insert(host.to_string(), None);
                let names: std::collections::HashSet<String> = rows.iter().map(|r| r.name.clone()).collect();
                self.rows.retain(|name, _| !name.starts_with(&prefix) || names.contains(name));
                for row in rows {
                    self.rows.insert(row.name.clone(), row);
                }
            }
            Err(why) => {
                self.hosts.insert(host.to_string(), Some(why));
                for row in self.rows.values_mut().filter(|r| r.name.starts_with(&prefix)) {
                    if matches!(row.link, Link::Live | Link::Connecting) {
                        row.link = Link::Unresponsive;
                    }
                }
            }
        }
        self.reorder();
        let items = self.selected_items().len();
        self.item_index = self.item_index.min(items.saturating_sub(1));
    }

    /// Take the daemon's queue counts (`None`: the daemon could not be asked, and why). Rows
    /// of other hosts keep the counts their host's listing gave.
    pub fn set_queues(&mut self, queues: Result<HashMap<String, QueueCounts>, String>) {
        match queues {
            Ok(queues) => {
                self.daemon_down = None;
                for row in self.rows.values_mut().filter(|r| !r.name.contains(':')) {
                    row.queue = Some(queues.get(&row.name).cloned().unwrap_or_default());
                }
            }
            Err(why) => {
                self.daemon_down = Some(format!("queues unknown: {why}"));
                for row in self.rows.values_mut().filter(|r| !r.name.contains(':')) {
                    row.queue = None;
                }
            }
        }
        self.reorder();
        let items = self.selected_items().len();
        self.item_index = self.item_index.min(items.saturating_sub(1));
    }

    /// The daemon dropped item `id`: it leaves its session's items and counts now (the next
    /// queue refresh says the same).
    pub fn item_dropped(&mut self, dropped: &ItemRef) {
        let host = |row: &Row| row.name.split_once(':').map(|(host, _)| host.to_string());
        for row in self.rows.values_mut() {
            if host(row) != dropped.host {
                continue;
            }
            let Some(queue) = row.queue.as_mut() else { continue };
            if let Some(at) = queue.items.iter().position(|i| i.id == dropped.id) {
                let item = queue.items.remove(at);
                queue.queued = queue.queued.saturating_sub(1);
                if item.state == "stuck" {
                    queue.stuck = queue.stuck.saturating_sub(1);
                }
            }
        }
        self.reorder();
        let items = self.selected_items().len();
        self.item_index = self.item_index.min(items.saturating_sub(1));
    }

    /// A host's events for the events pane (`session` named `HOST:NAME`), told as this
    /// machine's are, each in its place by time (a host's history arrives after this machine's
    /// lines). The rows are not touched: a host's rows are its listing.
    /// A resize is the exception: the row takes the new size at once, so that the preview
    /// reconnects at it rather than at the listing's, up to a listing old.
    pub fn host_events(&mut self, events: Vec<(String, Event)>) {
        for (session, event) in events {
            if let (EventBody::Resize { cols, rows }, Some(row)) = (&event.body, self.rows.get_mut(&session)) {
                (row.cols, row.rows) = (*cols, *rows);
            }
            if let Some((text, alert)) = describe(&event.body) {
                let at = self.log.iter().position(|l| l.at_ms <= event.ts_ms).unwrap_or(self.log.len());
                self.log.insert(at, LogLine { at_ms: event.ts_ms, session, text, alert });
            }
        }
        self.log.truncate(EVENT_LOG_LIMIT);
    }

    fn log(&mut self, at_ms: u64, session: &str, text: String, alert: bool) {
        self.log.push_front(LogLine { at_ms, session: session.to_string(), text, alert });
        self.log.truncate(EVENT_LOG_LIMIT);
    }

    /// The fleet events, newest first, those of sessions the filter hides left out.
    pub fn log_lines(&self) -> impl Iterator<Item = &LogLine> {
        self.log.iter().filter(|l| self.rows.get(&l.session).is_none_or(|r| self.matches(r)))
    }

    fn matches(&self, row: &Row) -> bool {
        if self.filter.is_empty() {
            return true;
        }
        let f = self.filter.to_lowercase();
        [&row.name, &row.provider, &row.title].iter().any(|s| s.to_lowercase().contains(&f))
    }

    fn reorder(&mut self) {
        let mut order: Vec<&Row> = self.rows.values().filter(|r| self.matches(r)).collect();
        // Grouped, a group goes where its most urgent row would (ties: by label), and its
        // rows by urgency within it.
        let mut group_rank: HashMap<&str, Urgency> = HashMap::new();
        for row in &order {
            let rank = group_rank.entry(self.group_of(row)).or_insert(Urgency::ExitedCleanly);
            *rank = (*rank).min(row.urgency());
        }
        order.sort_by_cached_key(|r| {
            let group = self.group_of(r);
            (group_rank[group], group, r.urgency(), r.name.as_str())
        });
        self.order = order.into_iter().map(|r| r.name.clone()).collect();
        let keep = self.pinned && self.selected.as_ref().is_some_and(|s| self.order.contains(s));
        if !keep {
            let first = self.order.first().cloned();
            if first != self.selected {
                self.preview_scroll = 0;
            }
            self.selected = first;
        }
    }

    /// The label of the group a row belongs to under the current grouping (`""` ungrouped;
    /// a session with no provider recorded groups under `-`).
    pub fn group_of<'a>(&'a self, row: &'a Row) -> &'a str {
        match self.grouping {
            Grouping::None => "",
            Grouping::Provider if row.provider.is_empty() => "-",
            Grouping::Provider => &row.provider,
            Grouping::Channel => self.memberships.get(&row.name).and_then(|c| c.first()).map_or("-", String::as_str),
            Grouping::Host => row.name.split_once(':').map_or("this machine", |(host, _)| host),
        }
    }

    /// Take which channels each session is a member of (channel → its member names).
    pub fn set_memberships(&mut self, rosters: &HashMap<String, Vec<String>>) {
        let mut by_session: HashMap<String, Vec<String>> = HashMap::new();
        for (channel, members) in rosters {
            for m in members {
                by_session.entry(m.clone()).or_default().push(format!("#{channel}"));
            }
        }
        for channels in by_session.values_mut() {
            channels.sort();
        }
        if by_session != self.memberships {
            self.memberships = by_session;
            self.reorder();
        }
    }

    /// The open dialogs of this machine (`host` none) or of a host (sessions named
    /// `HOST:NAME`) as read now, for the approvals view: its cards are every place's, the one
    /// waiting longest first.
    pub fn set_approvals(&mut self, host: Option<&str>, cards: Vec<crate::inbox::Open>, unread: Vec<String>) {
        self.dialogs.insert(host.map(str::to_string), (cards, unread));
        let Some(view) = self.approvals.as_mut() else { return };
        let mut cards: Vec<crate::inbox::Open> = self.dialogs.values().flat_map(|(c, _)| c.iter().cloned()).collect();
        cards.sort_by_key(|o| (if o.since_ms == 0 { u64::MAX } else { o.since_ms }, o.session.clone()));
        let mut unread: Vec<String> = self.dialogs.values().flat_map(|(_, u)| u.iter().cloned()).collect();
        unread.sort();
        view.refresh(cards, unread);
    }

    /// An answer from the approvals view came back: what became of it.
    pub fn answered(&mut self, session: &str, outcome: String) {
        if let Some(view) = self.approvals.as_mut()
            && view.sending.as_deref() == Some(session)
        {
            view.sending = None;
        }
        self.status = Some(outcome);
    }

    /// A channel's messages, read for the channel pane.
    pub fn channel_loaded(&mut self, view: super::channels::ChannelView) {
        if let Some(pane) = self.channel_pane.as_mut() {
            pane.loaded(view);
        }
    }

    /// Tell the model how far the preview can scroll back now (`max_back` history lines above
    /// the live screen) and how tall a page is; a scroll past the history is pulled back.
    pub fn set_preview_extent(&mut self, max_back: usize, page: usize) {
        let asked = self.preview_scroll > 0;
        self.preview_back_max = Some(max_back);
        self.preview_page = page.max(1);
        self.preview_scroll = self.preview_scroll.min(max_back);
        if std::mem::take(&mut self.preview_loading) && asked && self.preview_scroll == 0 {
            self.status = Some(NO_HISTORY.into());
        }
    }

    /// Like [`Dash::set_preview_extent`] while the master's answer about the history is still
    /// on its way: `bound` is the most it can bring. A PgUp pressed now is kept, not refused,
    /// and lands when the answer does (the preview shows what it has meanwhile).
    pub fn set_preview_extent_loading(&mut self, bound: usize, page: usize) {
        self.preview_back_max = Some(bound);
        self.preview_page = page.max(1);
        self.preview_scroll = self.preview_scroll.min(bound);
        self.preview_loading = true;
    }

    /// `lines` new lines went into the preview's history: while scrolled back, stay on the
    /// same lines instead of drifting with the output.
    pub fn preview_grew(&mut self, lines: usize) {
        if self.preview_scroll > 0 {
            self.preview_scroll += lines;
        }
    }

    fn scroll_preview_back(&mut self, lines: usize) {
        let max = self.preview_back_max.unwrap_or(usize::MAX);
        self.preview_scroll = self.preview_scroll.saturating_add(lines).min(max);
        if self.preview_scroll == 0 && !self.preview_loading {
            self.status = Some(NO_HISTORY.into());
        }
    }

    fn page(&self) -> usize {
        if self.preview_page == 0 { DEFAULT_PAGE } else { self.preview_page }
    }

    /// The visible rows, in table order.
    pub fn visible(&self) -> impl Iterator<Item = &Row> {
        self.order.iter().filter_map(|n| self.rows.get(n))
    }

    pub fn row(&self, name: &str) -> Option<&Row> {
        self.rows.get(name)
    }

    /// The selected session's name.
    pub fn selected(&self) -> Option<&str> {
        self.selected.as_deref()
    }

    /// The selected row's position among the visible rows.
    pub fn selected_index(&self) -> Option<usize> {
        let s = self.selected.as_ref()?;
        self.order.iter().position(|n| n == s)
    }

    fn select_index(&mut self, i: usize) {
        if let Some(name) = self.order.get(i) {
            if self.selected.as_ref() != Some(name) {
                self.item_index = 0;
                self.preview_scroll = 0;
            }
            self.selected = Some(name.clone());
            self.pinned = true;
        }
    }

    /// The selected session's items (empty when it has none or the daemon is down).
    pub fn selected_items(&self) -> &[ItemLine] {
        self.selected
            .as_ref()
            .and_then(|s| self.rows.get(s))
            .and_then(|r| r.queue.as_ref())
            .map_or(&[], |q| q.items.as_slice())
    }

    /// The item force or drop acts on: the one selected in the items pane, else the session's
    /// first stuck item.
    fn target_item(&self) -> Option<&ItemLine> {
        let items = self.selected_items();
        if self.items_focus { items.get(self.item_index) } else { items.iter().find(|i| i.state == "stuck") }
    }

    /// Force the target item, after a confirmation that says what force will do. The rules are
    /// the CLI's (`desk force`): only a stuck item; a merged one is refused (it went, or sits,
    /// with someone else's text: check it and drop it); the daemon refuses the rest it must.
    fn ask_force(&mut self) {
        let Some(item) = self.target_item().cloned() else {
            self.status = Some("no stuck item to force here (i lists the session's items)".into());
            return;
        };
        if item.state != "stuck" {
            self.status = Some(format!("{} is {}, not stuck: only a stuck item can be forced", item.id, item.state));
            return;
        }
        let what = match item.class.as_deref() {
            Some("merged") => {
                self.status = Some(format!(
                    "{} went, or sits, with someone else's text: force refuses it; check the agent, then drop it (d)",
                    item.id
                ));
                return;
            }
            Some("submit-stuck") => "press Enter on the text in its input box",
            // Its prompt may have landed late and sit in the box: force looks first.
            _ => "press Enter if its prompt sits unsent in the input box, else paste it again and submit it",
        };
        let item_ref = self.item_ref(&item);
        self.confirm = Some(Confirm {
            question: format!("force {item_ref} ({}): {what}? y/n", item.class.as_deref().unwrap_or("stuck")),
            action: Action::Force(item_ref),
        });
    }

    fn ask_drop(&mut self) {
        let Some(item) = self.target_item().cloned() else {
            self.status = Some("no item to drop here (i lists the session's items)".into());
            return;
        };
        let item_ref = self.item_ref(&item);
        self.confirm = Some(Confirm {
            question: format!("drop {item_ref} (\"{}\"): it will never be delivered? y/n", item.preview),
            action: Action::Drop(item_ref),
        });
    }

    /// An item of the selected session, with the host whose daemon holds it.
    fn item_ref(&self, item: &ItemLine) -> ItemRef {
        let host = self.selected.as_ref().and_then(|s| s.split_once(':')).map(|(host, _)| host.to_string());
        ItemRef { host, id: item.id.clone() }
    }

    /// Select the next visible session (after the selected one, wrapping) that needs a person.
    fn next_needing_person(&mut self) {
        let n = self.order.len();
        let start = self.selected_index().map_or(0, |i| i + 1);
        for k in 0..n {
            let i = (start + k) % n;
            if self.rows.get(&self.order[i]).is_some_and(|r| r.urgency().needs_person()) {
                self.select_index(i);
                return;
            }
        }
    }

    /// What `session`'s screen shows now (the preview's rows), for the answer panel open on
    /// it: its dialog's options and highlight; when the dialog it answers changed or went
    /// away, the panel closes and the footer says so.
    pub fn dialog_seen(&mut self, session: &str, rows: &[String]) {
        let Some(answer) = self.answer.as_mut().filter(|a| a.session == session) else { return };
        if !answer.seen(super::answer::dialog_options(rows)) {
            self.answer = None;
            self.status = Some(format!("{session}'s dialog changed or went away (answered?): the answer panel closed"));
        }
    }

    /// React to a key; `Some` when the loop must act.
    pub fn on_key(&mut self, key: Key) -> Option<Command> {
        if key == Key::CtrlC {
            return Some(Command::Quit);
        }
        if let Some(confirm) = self.confirm.take() {
            if key == Key::Char('y') {
                return Some(Command::Run(confirm.action));
            }
            self.status = Some("cancelled".into());
            return None;
        }
        self.status = None;
        if self.help {
            // Any key closes the help; it does nothing else.
            self.help = false;
            return None;
        }
        if let Some(editor) = self.editor.as_mut() {
            match key {
                Key::Char(c) => editor.text.push(c),
                Key::Enter => editor.text.push('\n'),
                Key::Backspace => {
                    editor.text.pop();
                }
                Key::Esc => {
                    self.editor = None;
                    self.status = Some("prompt discarded".into());
                }
                Key::SendEnter if editor.text.trim().is_empty() => {
                    self.status = Some("the prompt is empty".into());
                }
                Key::SendEnter => {
                    let Editor { session, text } = self.editor.take()?;
                    return Some(Command::Send { session, text });
                }
                _ => {}
            }
            return None;
        }
        if let Some(view) = self.approvals.as_mut() {
            let approve = |provider: &str| {
                let provider = desk_core::provider::Provider::or_shell(provider);
                provider.rules().dialog.map_or(1, |d| d.approve_option())
            };
            return match view.on_key(key, approve) {
                super::approvals::Outcome::Stay => None,
                super::approvals::Outcome::Close => {
                    self.approvals = None;
                    None
                }
                super::approvals::Outcome::Answer { session, option, seen, said } => {
                    Some(Command::Answer { session, option, seen, said })
                }
            };
        }
        if let Some(pane) = self.channel_pane.as_mut() {
            return match pane.on_key(key, &self.channels) {
                super::channels::Outcome::Stay => None,
                super::channels::Outcome::Close => {
                    self.channel_pane = None;
                    None
                }
                super::channels::Outcome::Load { channel, thread } => Some(Command::LoadChannel { channel, thread }),
                super::channels::Outcome::Post { channel, thread, text } => {
                    Some(Command::Post { channel, thread, text })
                }
            };
        }
        if let Some(answer) = self.answer.as_mut() {
            return match answer.on_key(key) {
                super::answer::Outcome::Stay => None,
                super::answer::Outcome::Close => {
                    self.answer = None;
                    None
                }
                // The panel stays open: the dialog may take more keys (an arrow, then Enter);
                // it closes when the dialog changes or goes (`dialog_seen`).
                super::answer::Outcome::Type(name) => {
                    Some(Command::Keys { session: answer.session.clone(), keys: vec![name] })
                }
            };
        }
        if self.editing_filter {
            match key {
                Key::Char(c) => self.filter.push(c),
                Key::Backspace => {
                    self.filter.pop();
                }
                Key::Enter => self.editing_filter = false,
                Key::Esc => {
                    self.editing_filter = false;
                    self.filter.clear();
                }
                _ => {}
            }
            self.reorder();
            return None;
        }
        let i = self.selected_index();
        match key {
            // The preview scrolls while it is shown (the items pane takes its place).
            // Scrolled back, Esc (like End) returns it to live first.
            Key::Esc | Key::End if self.preview_scroll > 0 && !self.items_focus => self.preview_scroll = 0,
            Key::PageUp if !self.items_focus => self.scroll_preview_back(self.page()),
            Key::PageDown => self.preview_scroll = self.preview_scroll.saturating_sub(self.page()),
            Key::LineUp if !self.items_focus => self.scroll_preview_back(1),
            Key::LineDown => self.preview_scroll = self.preview_scroll.saturating_sub(1),
            Key::Home if !self.items_focus => self.scroll_preview_back(usize::MAX),
            Key::Char('v') => {
                self.grouping = self.grouping.next();
                self.reorder();
            }
            Key::Char('q') => return Some(Command::Quit),
            Key::Char('?') => self.help = true,
            Key::Char('j') | Key::Down => {
                self.select_index(i.map_or(0, |i| (i + 1).min(self.order.len().saturating_sub(1))))
            }
            Key::Char('k') | Key::Up => self.select_index(i.map_or(0, |i| i.saturating_sub(1))),
            Key::Char('g') => self.select_index(0),
            Key::Char('G') => self.select_index(self.order.len().saturating_sub(1)),
            Key::Char('n') => self.next_needing_person(),
            Key::Char('/') => self.editing_filter = true,
            Key::Char('i') => {
                self.items_focus = !self.items_focus;
                self.item_index = 0;
            }
            Key::Esc if self.items_focus => self.items_focus = false,
            Key::Char('J') | Key::Char(']') if self.items_focus => {
                let n = self.selected_items().len();
                self.item_index = (self.item_index + 1).min(n.saturating_sub(1));
            }
            Key::Char('K') | Key::Char('[') if self.items_focus => self.item_index = self.item_index.saturating_sub(1),
            Key::Char('s') => {
                let session = self.selected.clone()?;
                self.editor = Some(Editor { session, text: String::new() });
            }
            Key::Char('a') => {
                let row = self.selected.as_ref().and_then(|s| self.rows.get(s))?;
                if row.link == Link::Live {
                    self.answer = Some(super::answer::Answer::new(row.name.clone(), row.wait.clone()));
                } else {
                    self.status = Some(format!("{} is not running: nothing to answer", row.name));
                }
            }
            Key::Char('A') => {
                self.approvals = Some(super::approvals::Approvals::default());
                // Every place's dialogs are read again for it: none stale from its last opening.
                self.dialogs.clear();
                self.items_focus = false;
            }
            Key::Char('c') => {
                let (pane, outcome) = super::channels::ChannelPane::open(&self.channels);
                self.channel_pane = Some(pane);
                self.items_focus = false;
                if let super::channels::Outcome::Load { channel, thread } = outcome {
                    return Some(Command::LoadChannel { channel, thread });
                }
            }
            Key::Char('f') => self.ask_force(),
            Key::Char('d') => self.ask_drop(),
            Key::Char('p') => {
                let row = self.selected.as_ref().and_then(|s| self.rows.get(s))?;
                let session = match SessionRef::of_row(&row.name) {
                    Ok(session) => session,
                    Err(why) => {
                        self.status = Some(why);
                        return None;
                    }
                };
                let action = if row.queue.as_ref().is_some_and(|q| q.paused) {
                    Action::Resume(session)
                } else {
                    Action::Pause(session)
                };
                return Some(Command::Run(action));
            }
            Key::Enter => {
                let row = self.selected.as_ref().and_then(|s| self.rows.get(s))?;
                // An exited or lost session has nothing to attach to; its last screen is in
                // the preview already.
                if matches!(row.link, Link::Live | Link::Unresponsive | Link::Connecting) {
                    return Some(Command::Attach(row.name.clone()));
                }
            }
            Key::Esc if !self.filter.is_empty() => {
                self.filter.clear();
                self.reorder();
            }
            _ => {}
        }
        None
    }
}

/// A session event as one line of the events pane, and whether it is an alert; `None` for events
/// too frequent or too technical for the pane (output bursts, modes, resizes).
fn describe(body: &EventBody) -> Option<(String, bool)> {
    Some(match body {
        EventBody::Started { command, .. } => (format!("started: {}", command.join(" ")), false),
        EventBody::Title { title } => (format!("title: {title}"), false),
        EventBody::Bell => ("bell".into(), true),
        EventBody::Notification { title, body } => match title {
            Some(t) => (format!("notification: {t}: {body}"), true),
            None => (format!("notification: {body}"), true),
        },
        EventBody::Attach { role, .. } => (format!("{} attached", role_word(*role)?), false),
        EventBody::Detach { role, reason, .. } => (format!("{} detached ({reason})", role_word(*role)?), false),
        EventBody::Hook { event, detail, .. } => match detail {
            Some(d) => (format!("hook {event}: {d}"), false),
            None => (format!("hook {event}"), false),
        },
        EventBody::State { change, wait, evidence } => {
            let alert = matches!(
                change,
                AxisChange::Activity { to: Activity::Blocked, .. } | AxisChange::Health { to: Health::Degraded(_), .. }
            );
            let (_, to) = change.words();
            let on = wait.as_ref().map(|w| format!(" on {w}")).unwrap_or_default();
            (format!("{} {to}{on} ({evidence})", change.axis().as_str()), alert)
        }
        EventBody::Exit { code, signal, .. } => match (code, signal) {
            (Some(0), _) => ("exited 0".into(), false),
            (Some(c), _) => (format!("exited {c}"), true),
            (None, Some(s)) => (format!("killed by signal {s}"), true),
            (None, None) => ("exited".into(), true),
        },
        EventBody::Keys { keys, user, via, .. } => (format!("keys {} typed by {user} ({via})", keys.join(" ")), false),
        EventBody::Answer { outcome, choice, user, via, why, .. } => {
            let why = why.as_ref().map(|w| format!(": {w}")).unwrap_or_default();
            (format!("answer {choice} by {user} ({via}) {outcome}{why}"), outcome != "typed")
        }
        // What desk told the operator: flagged like the agent's own notifications.
        EventBody::Notify { kind, message, .. } => (format!("notified {kind}: {message}"), true),
        EventBody::Gap { from_seq, to_seq, reason } => (format!("events {from_seq}..{to_seq} lost: {reason}"), true),
        EventBody::Upgraded { to, pause_ms, .. } => {
            (format!("master upgraded in place to {to} ({pause_ms} ms)"), false)
        }
        EventBody::Output { .. } | EventBody::Mode { .. } | EventBody::Resize { .. } | EventBody::Report { .. } => {
            return None;
        }
    })
}

/// A controller is a person at a terminal; viewers (dashboard previews among them) and
/// observers come and go with every selection: not worth a line.
fn role_word(role: Role) -> Option<&'static str> {
    match role {
        Role::Controller => Some("controller"),
        _ => None,
    }
}

/// An age in a few characters: `12s`, `4m`, `3h`, `2d`; nothing for a moment never recorded.
pub fn age(now_ms: u64, since_ms: u64) -> String {
    if since_ms == 0 {
        return String::new();
    }
    desk_core::time::span(now_ms.saturating_sub(since_ms))
}
