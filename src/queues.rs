//! Every session's pending prompts, as `desk ls`, `desk queue` and `desk dash` read them: from
//! `desk serve` when it runs, else from the store on disk (then the whole truth: nothing is
//! being delivered).
//!
//! Owns the store's answer in the daemon's shape (so that a reader handles one shape) and the
//! one way pending prompts are counted per session (queued, sending, stuck, and still in the
//! intake). Invariants: reading the store creates nothing; a daemon that does not answer in
//! time is reported as such, never as empty queues. May not depend on the CLI's commands or
//! the dashboard, which both use it.

use anyhow::Result;
use std::time::Duration;

use desk_common::daemon_client;
use desk_common::paths::{Paths, SessionName};
use desk_core::delivery::item::{Item, ItemId};
use desk_daemon::store::Store;
use desk_wire::control::{Request, Response};

/// Said when `queue` and `stuck` read the store themselves.
pub(crate) const DAEMON_DOWN: &str =
    "desk serve is not running; showing what the store holds (nothing is being delivered; start it with: desk serve)";

/// The pending queues as the store holds them, in the shape the daemon answers `queue` with
/// (no hold or in-flight: those exist only in a running daemon). Items still in the intake are
/// listed under `intake`: the daemon queues them when it starts.
pub(crate) fn stored_queues(paths: &Paths, session: Option<&SessionName>) -> Result<Response> {
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
    let data: Vec<serde_json::Value> = queues
        .into_iter()
        .filter(|(name, _)| session.is_none_or(|s| s.as_str() == name))
        .map(|(name, (items, intake))| {
            serde_json::json!({
                "session": name,
                "paused": pauses.sessions.get(&name).map(|p| p.reason.clone()),
                "items": items,
                "intake": intake,
            })
        })
        .collect();
    Ok(Response::ok(DAEMON_DOWN, serde_json::Value::Array(data)))
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
    let resp = if offline {
        if !paths.state.join("delivery").exists() {
            // Nothing was ever sent: no queues, and nothing is created to say so.
            return Ok((Default::default(), true));
        }
        stored_queues(paths, None).map_err(|e| format!("{e:#}"))?
    } else {
        daemon_client::request(
            &desk_common::daemon_client::socket_path(paths),
            &Request::Queue { session: None },
            timeout,
        )
        .map_err(|e| format!("desk serve did not answer: {e:#}"))?
    };
    if !resp.ok {
        return Err(resp.error.unwrap_or_else(|| "desk serve refused".into()));
    }
    let mut pending = std::collections::HashMap::new();
    for q in resp.data.as_array().map_or(&[][..], Vec::as_slice) {
        let Some(session) = q["session"].as_str() else { continue };
        let parse = |key: &str| -> Vec<Item> {
            q[key].as_array().into_iter().flatten().filter_map(|i| serde_json::from_value(i.clone()).ok()).collect()
        };
        let (mut items, intake) = (parse("items"), parse("intake"));
        items.sort_by_key(|i| i.state != desk_core::delivery::item::State::Stuck);
        let stuck = items.iter().filter(|i| i.state == desk_core::delivery::item::State::Stuck).count();
        items.extend(intake);
        let entry = Pending {
            queue: items.len() as u32,
            stuck: stuck as u32,
            paused: q["paused"].as_str().map(String::from),
            items,
        };
        pending.insert(session.to_string(), entry);
    }
    Ok((pending, offline))
}
