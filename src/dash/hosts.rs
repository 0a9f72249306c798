//! The dashboard's remote hosts (docs/remote.md): each configured host's sessions as rows named
//! `HOST:NAME`, the host's reachability for the header, and the link its previews and actions
//! go through.
//!
//! Owns one thread per `[hosts.NAME]`, which keeps one link to the host open (a single `ssh HOST
//! desk relay`, so the host's sshd and login shell are paid once, not per refresh) and asks the
//! host's desk for `ls --json` every [`HOST_REFRESH`]; a link that drops is replaced at the next
//! round, after a back-off. Invariants: every wait on a host is bounded ([`LISTING_TIMEOUT`],
//! the link's own handshake and open timeouts), and only these threads and the preview's wait
//! on a host: the dashboard's loop never does; the host stays the authority for its sessions (a
//! row says what the host's desk said, nothing is inferred here). Pure parsing of a listing row
//! into a [`Row`] is [`row_from_listing`]. May depend on the link and the model; nothing in the
//! model depends on it.

use std::collections::HashMap;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use desk_common::config::Host;
use desk_common::paths::Paths;
use desk_common::remote::link::{ExecEvent, HANDSHAKE_TIMEOUT, Link};
use desk_common::session::ExitRecord;
use desk_wire::ExitStatus;
use desk_wire::state::{Activity, Lifecycle};

use super::model::{self, QueueCounts, Row};

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

/// `HOST:NAME` split into the host and the session's name on it (local names have no `:`).
pub fn split(session: &str) -> Option<(&str, &str)> {
    session.split_once(':')
}

/// Ask `host` for its sessions for as long as the dashboard runs, sending each answer (its rows
/// or why not) with `wrap`.
pub fn watch<M>(name: String, host: Host, paths: Paths, links: Links, tx: Sender<M>, wrap: fn(String, HostNews) -> M) {
    let mut backoff = desk_core::time::Backoff::new(HOST_REFRESH, MAX_BACKOFF);
    loop {
        let answer = list_once(&name, &host, &paths, &links);
        let wait = match &answer {
            Ok(_) => {
                backoff.reset();
                HOST_REFRESH
            }
            Err(_) => backoff.fail(),
        };
        let news = HostNews { answer };
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
}

fn list_once(name: &str, host: &Host, paths: &Paths, links: &Links) -> Result<Vec<serde_json::Value>, String> {
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
    let answer = listing(&link);
    if answer.is_err() {
        // The next round starts a fresh link (a wedged one would make every round wait).
        links.set(name, None);
    }
    answer
}

fn listing(link: &Link) -> Result<Vec<serde_json::Value>, String> {
    let events = link.exec(&["ls".into(), "--json".into()], None).map_err(|e| format!("{e:#}"))?;
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
            Err(_) => return Err(format!("desk ls did not answer within {} s", LISTING_TIMEOUT.as_secs())),
        }
    }
    let value: Option<serde_json::Value> = serde_json::from_slice(&out).ok();
    match value.as_ref().and_then(|v| v.get("data")).and_then(|d| d.as_array()) {
        Some(rows) if code == Some(0) => Ok(rows.clone()),
        _ => Err(format!(
            "desk ls failed (exit {}): {}",
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
