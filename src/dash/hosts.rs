//! The dashboard's remote hosts (docs/remote.md): each configured host's sessions as rows named
//! `HOST:NAME`, with their items and CPU and memory, the host's events and open dialogs, the
//! host's reachability for the header, and the link its previews and actions go through.
//!
//! Owns, per `[hosts.NAME]`, the listing thread ([`watch`]), which keeps one link to the host
//! open (a single `ssh HOST desk relay`, so the host's sshd and login shell are paid once, not
//! per refresh) and asks the host's desk for `ls --json` every [`HOST_REFRESH`] (and `queue
//! --json` when a session there has pending items; two listings make a CPU rate); a link that
//! drops is replaced at the next round, after a back-off. The events thread
//! ([`follow_events`]) follows the host's `events --all --local --follow` over that link, and
//! [`approvals`] reads the host's `inbox --json` over it. Invariants: every wait on a host is
//! bounded ([`LISTING_TIMEOUT`], the link's own handshake and open timeouts; the events thread
//! looks every [`LINK_CHECK`] whether its link was replaced), and only these threads, the
//! preview's and the actions' wait on a host: the dashboard's loop never does; the host stays
//! the authority for its sessions (a row says what the host's desk said, nothing is inferred
//! here); an event is passed on once (each session's `(generation, seq)` only grows). Pure
//! parsing of a listing row into a [`Row`] is [`row_from_listing`]. May depend on the link and
//! the model; nothing in the model depends on it.

use std::collections::HashMap;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use desk_common::config::Host;
use desk_common::paths::Paths;
use desk_common::remote::link::{ExecEvent, HANDSHAKE_TIMEOUT, Link};
use desk_common::session::ExitRecord;
use desk_wire::ExitStatus;
use desk_wire::events::Event;
use desk_wire::state::{Activity, Lifecycle};

use super::model::{self, ItemLine, QueueCounts, Row};

/// 2 s: how often each host is asked for its sessions: the pace of the local queue refresh
/// ([`super::QUEUE_REFRESH`]). One `desk ls --json` over a link already open is one round trip
/// and a few milliseconds of the host's time; the rows of a remote host are at most this old
/// (live events are not streamed from hosts yet).
pub const HOST_REFRESH: Duration = Duration::from_secs(2);

/// 10 s: how long one listing may take on a link already open (`desk ls` reads its sessions in
/// well under a second): a host that takes longer is shown as not answering, and its link is
/// replaced.
const LISTING_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest pause between two attempts to reach a host that did not answer: a host that
/// comes back is seen within this, and a host that stays down costs one ssh attempt per period.
const MAX_BACKOFF: Duration = Duration::from_secs(16);

/// The open link to each host, shared between its listing thread (which makes and replaces
/// it) and the previews and actions that open streams on it.
#[derive(Clone, Default)]
pub struct Links(Arc<Mutex<HashMap<String, Arc<Link>>>>);

/// The dashboard's links (one dashboard per process).
static LINKS: std::sync::LazyLock<Links> = std::sync::LazyLock::new(Links::default);

impl Links {
    /// The process's links: every clone shares them.
    pub fn shared() -> Links {
        LINKS.clone()
    }

    /// The host's link, while one is up.
    pub fn get(&self, host: &str) -> Option<Arc<Link>> {
        let links = self.0.lock().unwrap_or_else(|p| p.into_inner());
        links.get(host).filter(|l| l.down().is_none()).cloned()
    }

    fn set(&self, host: &str, link: Option<Arc<Link>>) {
        let mut links = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match link {
            Some(link) => links.insert(host.to_string(), link),
            None => links.remove(host),
        };
    }
}

/// The event types a host's events stream carries to the events pane: what the pane tells,
/// without the spinner titles and output (a working agent sends many a second; a host's titles
/// are in its rows).
const EVENT_TYPES: &str =
    "started,bell,notification,attach,detach,hook,state,exit,keys,answer,notify,gap,upgraded,resize";

/// 1 s: how often the events thread looks whether the host's link it reads was replaced (the
/// listing thread replaces a link that stopped answering) while no event comes.
const LINK_CHECK: Duration = Duration::from_secs(1);

/// Follow the host's events (`desk events --all --local --follow` run by the host's desk over
/// the link the listing thread keeps) for as long as the dashboard runs, sending them, named
/// `HOST:NAME`, with `wrap`. While the host has no link this waits for one; a stream on a link
/// that was replaced is dropped and begun again on the new one, and the history the host gives
/// again then is left out (each session's `(generation, seq)` only grows).
pub fn follow_events<M>(name: String, links: Links, tx: Sender<M>, wrap: fn(Vec<(String, Event)>) -> M) {
    let mut seen: HashMap<String, (u32, u64)> = HashMap::new();
    let args: Vec<String> =
        ["events", "--all", "--local", "--json", "--follow", "--type", EVENT_TYPES].map(String::from).to_vec();
    loop {
        let Some(link) = links.get(&name) else {
            std::thread::sleep(HOST_REFRESH);
            continue;
        };
        let Ok(events) = link.exec(&args, None) else {
            std::thread::sleep(HOST_REFRESH);
            continue;
        };
        let mut partial = Vec::new();
        loop {
            let bytes = match events.recv_timeout(LINK_CHECK) {
                Ok(ExecEvent::Stdout(bytes)) => bytes,
                Ok(ExecEvent::Closed(_)) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                Ok(_) => continue,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if links.get(&name).is_some_and(|now| Arc::ptr_eq(&now, &link)) {
                        continue;
                    }
                    break;
                }
            };
            partial.extend_from_slice(&bytes);
            let Some(end) = partial.iter().rposition(|b| *b == b'\n') else { continue };
            let lines: Vec<u8> = partial.drain(..=end).collect();
            let batch: Vec<(String, Event)> =
                lines.split(|b| *b == b'\n').filter_map(|line| parse_event(&name, line, &mut seen)).collect();
            if !batch.is_empty() && tx.send(wrap(batch)).is_err() {
                return;
            }
        }
        drop(link);
        std::thread::sleep(HOST_REFRESH);
    }
}

/// One line of a host's `desk events --all --json` as the pane's (`HOST:NAME`, event), unless
/// it is not an event or one already seen.
fn parse_event(host: &str, line: &[u8], seen: &mut HashMap<String, (u32, u64)>) -> Option<(String, Event)> {
    let serde_json::Value::Object(mut map) = serde_json::from_slice(line).ok()? else { return None };
    let session = map.remove("session")?.as_str()?.to_string();
    let event = Event::from_json_map(map).ok()?;
    let at = (event.generation, event.seq);
    if seen.get(&session).is_some_and(|last| *last >= at) {
        return None;
    }
    seen.insert(session.clone(), at);
    Some((format!("{host}:{session}"), event))
}

/// The host's open dialogs, as its `desk inbox --json` reads them over the host's link (the
/// one its listing thread keeps), and its blocked sessions whose dialog it cannot read (the
/// answer's notes), each session named `HOST:NAME`; within [`LISTING_TIMEOUT`].
pub fn approvals(name: &str, links: &Links) -> Result<(Vec<crate::inbox::Open>, Vec<String>), String> {
    let link = links.get(name).ok_or_else(|| format!("host {name} is not connected"))?;
    let (rows, notes) = answer(&link, &["inbox", "--json"])?;
    Ok(crate::inbox::from_answer(&format!("{name}:"), &rows, &notes))
}

/// `HOST:NAME` split into the host and the session's name on it (local names have no `:`).
pub fn split(session: &str) -> Option<(&str, &str)> {
    session.split_once(':')
}

/// Ask `host` for its sessions for as long as the dashboard runs, sending each answer (its rows
/// or why not) with `wrap`.
pub fn watch<M>(name: String, host: Host, paths: Paths, links: Links, tx: Sender<M>, wrap: fn(String, HostNews) -> M) {
    let mut backoff = desk_core::time::Backoff::new(HOST_REFRESH, MAX_BACKOFF);
    let mut cpu = CpuRates::default();
    loop {
        let answer = list_once(&name, &host, &paths, &links);
        let wait = match &answer {
            Ok(_) => {
                backoff.reset();
                HOST_REFRESH
            }
            Err(_) => backoff.fail(),
        };
        let news = match answer {
            Ok((rows, items)) => HostNews { usage: cpu.rates(&rows, Instant::now()), items, answer: Ok(rows) },
            Err(why) => HostNews { answer: Err(why), items: HashMap::new(), usage: HashMap::new() },
        };
        if tx.send(wrap(name.clone(), news)).is_err() {
            return;
        }
        std::thread::sleep(wait);
    }
}

/// What one round of asking a host found.
pub struct HostNews {
    /// The host's `desk ls --json` rows, or why they could not be had.
    pub answer: Result<Vec<serde_json::Value>, String>,
    /// The pending items of each of its sessions (by its name there) that has any, as its
    /// `desk queue --json` lists them.
    pub items: HashMap<String, Vec<ItemLine>>,
    /// CPU % (of one core) and resident KiB of each of its running sessions (by its name
    /// there), from two listings in a row.
    pub usage: HashMap<String, (f32, u64)>,
}

/// The CPU time each of a host's sessions had at the last listing, to make a rate of the next.
#[derive(Default)]
struct CpuRates {
    last: HashMap<String, (u64, Instant)>,
}

impl CpuRates {
    /// Each running session's CPU % since the previous listing (none for one first seen) and
    /// its resident KiB, from the `usage` of its listing row.
    fn rates(&mut self, rows: &[serde_json::Value], now: Instant) -> HashMap<String, (f32, u64)> {
        let mut rates = HashMap::new();
        let mut last = HashMap::new();
        for row in rows {
            let Some(name) = row.get("name").and_then(|n| n.as_str()) else { continue };
            let usage = row.get("usage");
            let field = |key: &str| usage.and_then(|u| u.get(key)).and_then(serde_json::Value::as_u64);
            let (Some(cpu_ms), Some(rss_kib)) = (field("cpu_ms"), field("rss_kib")) else { continue };
            if let Some((before, at)) = self.last.get(name) {
                let seconds = now.duration_since(*at).as_secs_f32().max(0.001);
                rates.insert(name.to_string(), (cpu_ms.saturating_sub(*before) as f32 / 10.0 / seconds, rss_kib));
            }
            last.insert(name.to_string(), (cpu_ms, now));
        }
        self.last = last;
        rates
    }
}

type Listing = (Vec<serde_json::Value>, HashMap<String, Vec<ItemLine>>);

fn list_once(name: &str, host: &Host, paths: &Paths, links: &Links) -> Result<Listing, String> {
    let link = match links.get(name) {
        Some(link) => link,
        None => {
            links.set(name, None);
            let link = Link::connect(name, host, paths, HANDSHAKE_TIMEOUT).map_err(|e| format!("{e:#}"))?;
            let link = Arc::new(link);
            links.set(name, Some(link.clone()));
            link
        }
    };
    let answer = listing(&link, &["ls", "--json"]);
    if answer.is_err() {
        // The next round starts a fresh link (a wedged one would make every round wait).
        links.set(name, None);
    }
    let rows = answer?;
    // Its items only when some session has any (most rounds of an idle host ask nothing more).
    let pending = rows.iter().any(|r| r.get("queue").and_then(serde_json::Value::as_u64).unwrap_or(0) > 0);
    let items =
        if pending { listing(&link, &["queue", "--json"]).map(|q| items_by_session(&q)) } else { Ok(HashMap::new()) };
    // A queue that could not be read leaves the items pane empty; the counts stay the listing's.
    Ok((rows, items.unwrap_or_default()))
}

/// A host's `desk queue --json` queues as the items pane's lines, by session.
fn items_by_session(queues: &[serde_json::Value]) -> HashMap<String, Vec<ItemLine>> {
    let mut by_session = HashMap::new();
    for queue in queues {
        let Some(session) = queue.get("session").and_then(|s| s.as_str()) else { continue };
        let items: Vec<ItemLine> = queue
            .get("items")
            .and_then(|i| i.as_array())
            .into_iter()
            .flatten()
            .filter_map(|i| serde_json::from_value::<desk_core::delivery::item::Item>(i.clone()).ok())
            .map(|item| super::item_line(&item))
            .collect();
        // Stuck ones first, as this machine's are listed.
        let (mut stuck, waiting): (Vec<ItemLine>, Vec<ItemLine>) = items.into_iter().partition(|i| i.state == "stuck");
        stuck.extend(waiting);
        by_session.insert(session.to_string(), stuck);
    }
    by_session
}

/// The `data` array of the host's `desk ARGS` (a `--json` command), within [`LISTING_TIMEOUT`].
fn listing(link: &Link, args: &[&str]) -> Result<Vec<serde_json::Value>, String> {
    answer(link, args).map(|(rows, _)| rows)
}

/// The `data` array and the `notes` of the host's `desk ARGS` (a `--json` command), within
/// [`LISTING_TIMEOUT`].
fn answer(link: &Link, args: &[&str]) -> Result<(Vec<serde_json::Value>, Vec<String>), String> {
    let sub = args[0];
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let events = link.exec(&args, None).map_err(|e| format!("{e:#}"))?;
    let deadline = Instant::now() + LISTING_TIMEOUT;
    let (mut out, mut err, mut code) = (Vec::new(), Vec::new(), None);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match events.recv_timeout(left) {
            Ok(ExecEvent::Stdout(b)) => out.extend_from_slice(&b),
            Ok(ExecEvent::Stderr(b)) => err.extend_from_slice(&b),
            Ok(ExecEvent::Exit(c)) => code = Some(c),
            Ok(ExecEvent::Closed(why)) => {
                if code.is_none() {
                    return Err(why.unwrap_or_else(|| "the listing ended without an exit code".into()));
                }
                break;
            }
            Err(_) if code.is_some() => break,
            Err(_) => return Err(format!("desk {sub} did not answer within {} s", LISTING_TIMEOUT.as_secs())),
        }
    }
    let value: Option<serde_json::Value> = serde_json::from_slice(&out).ok();
    let notes = value
        .as_ref()
        .and_then(|v| v.get("notes"))
        .and_then(|n| n.as_array())
        .map(|n| n.iter().filter_map(|n| n.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    match value.as_ref().and_then(|v| v.get("data")).and_then(|d| d.as_array()) {
        Some(rows) if code == Some(0) => Ok((rows.clone(), notes)),
        _ => Err(format!(
            "desk {sub} failed (exit {}): {}",
            code.unwrap_or(1),
            String::from_utf8_lossy(&err).trim().replace('\n', "; ")
        )),
    }
}

/// A dashboard row for one row of a host's `desk ls --json` (docs/cli.md, `desk ls`), named
/// `HOST:NAME`. Its pid stays 0: the host's processes are not this machine's to sample.
pub fn row_from_listing(host: &str, value: &serde_json::Value) -> Option<Row> {
    let text = |key: &str| value.get(key).and_then(|v| v.as_str()).map(str::to_string);
    let number = |v: Option<&serde_json::Value>| v.and_then(serde_json::Value::as_u64);
    let name = format!("{host}:{}", text("name")?);
    let provider = text("provider").unwrap_or_default();
    let cols = number(value.get("cols")).and_then(|c| u16::try_from(c).ok()).unwrap_or(80);
    let rows = number(value.get("rows")).and_then(|r| u16::try_from(r).ok()).unwrap_or(24);
    let mut row = match (text("status").as_deref(), value.get("exit").filter(|e| !e.is_null())) {
        (_, Some(exit)) => {
            let status = match (exit.get("code").and_then(|c| c.as_i64()), exit.get("signal").and_then(|s| s.as_i64()))
            {
                (Some(code), _) => ExitStatus::Code(code as i32),
                (_, Some(signal)) => ExitStatus::Signal(signal as i32),
                _ => ExitStatus::Code(0),
            };
            let record = ExitRecord {
                generation: number(value.get("generation")).unwrap_or(1) as u32,
                status,
                escalated: exit.get("escalated").and_then(|e| e.as_bool()).unwrap_or(false),
                exited_at_ms: number(exit.get("exited_at_ms")).unwrap_or(0),
                cols: Some(cols),
                rows: Some(rows),
                title: text("title"),
                last_screen: None,
                last_history: None,
            };
            Row::exited(&name, &provider, record)
        }
        (Some("running"), None) => {
            let mut row = Row::connecting(&name, &provider, 0, cols, rows);
            row.link = model::Link::Live;
            row
        }
        (Some("unresponsive"), None) => {
            let mut row = Row::connecting(&name, &provider, 0, cols, rows);
            row.link = model::Link::Unresponsive;
            row
        }
        _ => {
            let mut row = Row::connecting(&name, &provider, 0, cols, rows);
            row.link = model::Link::Lost;
            row
        }
    };
    row.title = text("title").unwrap_or(row.title);
    if let Some(clients) = value.get("clients").filter(|c| !c.is_null()) {
        row.controllers = number(clients.get("controllers")).unwrap_or(0) as u32;
        row.viewers = number(clients.get("viewers")).unwrap_or(0) as u32;
    }
    if let Some(state) = value.get("state").filter(|s| !s.is_null()) {
        let axis = |key: &str| state.get(key).and_then(|a| a.get("value")).cloned();
        if let Some(lifecycle) = axis("lifecycle").and_then(|v| serde_json::from_value::<Lifecycle>(v).ok()) {
            row.lifecycle = lifecycle;
        }
        if let Some(activity) = axis("activity").and_then(|v| serde_json::from_value::<Activity>(v).ok()) {
            row.activity = activity;
            row.activity_since_ms = number(state.get("activity").and_then(|a| a.get("since_ms"))).unwrap_or(0);
        }
        row.wait = state.get("wait").and_then(|w| w.as_str()).map(str::to_string);
        if state.get("health").and_then(|h| h.get("value")).and_then(|v| v.as_str()) == Some("degraded") {
            let reason = state.get("health").and_then(|h| h.get("reason")).and_then(|r| r.as_str()).unwrap_or("");
            row.health = desk_core::state::Health::Degraded(reason.to_string());
        }
    }
    if let Some(queued) = number(value.get("queue")) {
        row.queue = Some(QueueCounts {
            queued: queued as u32,
            stuck: number(value.get("stuck")).unwrap_or(0) as u32,
            paused: value.get("paused").is_some_and(|p| !p.is_null()),
            items: Vec::new(),
        });
    }
    Some(row)
}
