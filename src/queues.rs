//! Every session's pending prompts, as `desk ls`, `desk queue` and `desk dash` read them: from
//! `desk serve` when it runs, else from the store on disk (then the whole truth: nothing is
//! being delivered).
//!
//! Owns the store's answer beside the daemon's (one type, [`Queues`], for a reader to handle)
//! and the one way pending prompts are counted per session (queued, sending, stuck, and still in the
//! intake). Invariants: reading the store creates nothing; a daemon that does not answer in
//! time is reported as such, never as empty queues. May not depend on the CLI's commands or
//! the dashboard, which both use it.

use anyhow::Result;
use std::time::Duration;

use desk_common::daemon_client;
use desk_common::paths::{Paths, SessionName};
use desk_core::delivery::answer::ListedQueue;
use desk_core::delivery::engine::Hold;
use desk_core::delivery::item::{Item, ItemId};
use desk_daemon::store::Store;
use desk_wire::control::Request;

/// Said when `queue` and `stuck` read the store themselves.
pub(crate) const DAEMON_DOWN: &str =
    "desk serve is not running; showing what the store holds (nothing is being delivered; start it with: desk serve)";

/// One session's pending prompts as the store holds them: the daemon's `queue` answer without
/// what exists only in a running daemon (hold, in-flight, generation, refusal), and with the
/// items still in the intake, which the daemon queues when it starts.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct StoredQueue {
    pub session: String,
    pub paused: Option<String>,
    pub items: Vec<Item>,
    pub intake: Vec<Item>,
}

/// The pending queues, from the daemon or from the store.
#[derive(Debug, Clone)]
pub(crate) enum Queues {
    Live(Vec<ListedQueue>),
    Stored(Vec<StoredQueue>),
}

/// One queue of [`Queues`], as a reader of either sees it.
pub(crate) struct QueueRef<'a> {
    pub session: &'a str,
    pub paused: Option<&'a str>,
    pub refused: Option<&'a str>,
    pub hold: Option<&'a Hold>,
    /// Queued, sending and stuck items, in queue order.
    pub items: Vec<&'a Item>,
    /// Still in the intake (read from the store only).
    pub intake: &'a [Item],
}

impl Queues {
    pub(crate) fn iter(&self) -> Vec<QueueRef<'_>> {
        match self {
            Queues::Live(queues) => queues
                .iter()
                .map(|q| QueueRef {
                    session: &q.session,
                    paused: q.paused.as_deref(),
                    refused: q.refused.as_deref(),
                    hold: q.hold.as_ref(),
                    items: q.items.iter().map(|i| &i.item).collect(),
                    intake: &[],
                })
                .collect(),
            Queues::Stored(queues) => queues
                .iter()
                .map(|q| QueueRef {
                    session: &q.session,
                    paused: q.paused.as_deref(),
                    refused: None,
                    hold: None,
                    items: q.items.iter().collect(),
                    intake: &q.intake,
                })
                .collect(),
        }
    }

    /// The answer as `--json` shows it: each source's own keys.
    pub(crate) fn to_json(&self) -> serde_json::Result<serde_json::Value> {
        match self {
            Queues::Live(queues) => serde_json::to_value(queues),
            Queues::Stored(queues) => serde_json::to_value(queues),
        }
    }
}

/// The pending queues as the store holds them (no hold or in-flight: those exist only in a
/// running daemon). Items still in the intake are listed under `intake`: the daemon queues
/// them when it starts.
pub(crate) fn stored_queues(paths: &Paths, session: Option<&SessionName>) -> Result<Vec<StoredQueue>> {
    let store = Store::open(&paths.state)?;
    let (items, intake, problems) = store.read_only_view()?;
    for p in &problems {
        eprintln!("desk: cannot read {}: {}", p.path.display(), p.error);
    }
    let pauses = store.load_pauses()?;
    let mut queues: std::collections::BTreeMap<String, (Vec<Item>, Vec<Item>)> = Default::default();
    let known: std::collections::HashSet<ItemId> = items.iter().map(|i| i.id.clone()).collect();
    for item in items.into_iter().filter(|i| !i.state.is_final()) {
        queues.entry(item.session.clone()).or_default().0.push(item);
    }
    for item in intake.into_iter().filter(|i| !known.contains(&i.id)) {
        queues.entry(item.session.clone()).or_default().1.push(item);
    }
    for name in pauses.sessions.keys() {
        queues.entry(name.clone()).or_default();
    }
    Ok(queues
        .into_iter()
        .filter(|(name, _)| session.is_none_or(|s| s.as_str() == name))
        .map(|(name, (items, intake))| StoredQueue {
            paused: pauses.sessions.get(&name).map(|p| p.reason.clone()),
            session: name,
            items,
            intake,
        })
        .collect())
}

/// The queues from the running daemon, waiting at most `timeout`.
pub(crate) fn live_queues(paths: &Paths, timeout: Duration) -> Result<Vec<ListedQueue>, String> {
    let socket = desk_common::daemon_client::socket_path(paths);
    let resp = daemon_client::request(&socket, &Request::Queue { session: None }, timeout)
        .map_err(|e| format!("desk serve did not answer: {e:#}"))?;
    Ok(resp.into_answer().map_err(|e| e.message)?.data)
}

/// One session's pending prompts, counted the one way `desk ls` and `desk dash` count them.
#[derive(Debug, Default, Clone)]
pub(crate) struct Pending {
    /// Items pending for it: queued, sending or stuck, and those still in the intake.
    pub queue: u32,
    /// Of those, the stuck ones.
    pub stuck: u32,
    /// The pause reason (`""` when none was given) while delivery to it is paused.
    pub paused: Option<String>,
    /// The items, stuck ones first, then the rest in queue order (intake last).
    pub items: Vec<Item>,
}

/// Every session's pending prompts, from the daemon when it runs (waiting at most `timeout`),
/// else from the store; with whether the store was read (`true`: the daemon is not running).
/// `Err`: neither answered (a wedged daemon, an unreadable store), and why.
pub(crate) fn pending_by_session(
    paths: &Paths,
    timeout: Duration,
) -> Result<(std::collections::HashMap<String, Pending>, bool), String> {
    let offline = crate::autostart::daemon_down(paths);
    let queues = if offline {
        if !paths.state.join("delivery").exists() {
            // Nothing was ever sent: no queues, and nothing is created to say so.
            return Ok((Default::default(), true));
        }
        Queues::Stored(stored_queues(paths, None).map_err(|e| format!("{e:#}"))?)
    } else {
        Queues::Live(live_queues(paths, timeout)?)
    };
    let mut pending = std::collections::HashMap::new();
    for q in queues.iter() {
        let mut items: Vec<Item> = q.items.iter().map(|i| (*i).clone()).collect();
        items.sort_by_key(|i| i.state != desk_core::delivery::item::State::Stuck);
        let stuck = items.iter().filter(|i| i.state == desk_core::delivery::item::State::Stuck).count();
        items.extend(q.intake.iter().cloned());
        let entry =
            Pending { queue: items.len() as u32, stuck: stuck as u32, paused: q.paused.map(String::from), items };
        pending.insert(q.session.to_string(), entry);
    }
    Ok((pending, offline))
}
