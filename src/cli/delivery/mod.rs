//! The delivery commands: `serve`, `send`, `queue`, `item`, `stuck`, `force`, `drop`, `pause`,
//! `resume`, one file each.
//!
//! Owns talking to `desk serve` over its control socket and presenting the answers. `send`
//! writes the prompt durably to the intake first, so it is never lost: if the daemon is down,
//! the prompt waits there until it starts. Each command computes a typed report of what it
//! found or did and renders it once, as text or as the JSON envelope. Invariant: every command
//! reports what actually happened (a force waits for the outcome of its delivery and says it).
//! This file holds what they share: the request to the daemon, the name a queue is for, and the
//! counts `desk ls` and `desk attach` show.

mod command;
mod item;
mod queue;
mod send;
mod serve;
mod stuck;

pub(super) use command::{command, drop_all};
pub(super) use item::{item, resolve_id};
pub(super) use queue::{print_host_queues, print_local_queues, queue};
pub(super) use send::{SendArgs, send};
pub(super) use serve::serve;
pub(super) use stuck::{print_stuck, stuck};

use anyhow::Result;
use std::time::Duration;

use super::fail;
use super::output::ErrorCode;
use desk_common::daemon_client;
use desk_common::paths::{Paths, SessionName};
use desk_common::session;
use desk_core::delivery::item::ItemId;
use desk_daemon::store::Store;
use desk_wire::control::{Answer, Request, Response};

/// Short requests are answered in milliseconds; this bounds a wedged daemon.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

fn paths() -> Result<Paths> {
    let paths = Paths::from_env()?;
    paths.ensure_runtime()?;
    paths.ensure_state()?;
    Ok(paths)
}

/// One request to the daemon; not reaching it is [`ErrorCode::DaemonUnavailable`].
fn request(paths: &Paths, req: &Request, timeout: Duration) -> Result<Response> {
    let socket = desk_common::daemon_client::socket_path(paths);
    daemon_client::request(&socket, req, timeout).map_err(|e| {
        fail(ErrorCode::DaemonUnavailable, format!("{e:#}\n(is `desk serve` running? start it with: desk serve)"))
    })
}

/// One request and its typed answer; the daemon's failure is a failure of its kind.
fn ask<T: serde::de::DeserializeOwned>(paths: &Paths, req: &Request, timeout: Duration) -> Result<Answer<T>> {
    request(paths, req, timeout)?.into_answer().map_err(desk_common::failure::from_control)
}

/// What `desk ls` shows of a session's delivery.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub(super) struct QueueCounts {
    /// Items pending for it: queued, sending or stuck (and still in the intake).
    pub queue: u32,
    /// Of those, the stuck ones.
    pub stuck: u32,
    /// The pause reason (`""` when none was given) while delivery to it is paused.
    pub paused: Option<String>,
}

/// How long `desk ls` waits for the daemon's queues: as long as it waits for the masters (the
/// two are asked at the same time), so a wedged daemon costs a listing no more than a master.
const LS_QUEUE_TIMEOUT: Duration = session::PROBE_DEADLINE;

/// Every session's delivery counts, from the daemon when it runs, else from the store; `None`
/// when neither answers (a wedged daemon, an unreadable store).
pub(super) fn queue_counts(paths: &Paths) -> Option<std::collections::HashMap<String, QueueCounts>> {
    let (pending, _) = crate::queues::pending_by_session(paths, LS_QUEUE_TIMEOUT).ok()?;
    let counts = pending
        .into_iter()
        .map(|(session, p)| (session, QueueCounts { queue: p.queue, stuck: p.stuck, paused: p.paused }))
        .collect();
    Some(counts)
}

/// A name `pause` or `resume` acts on must name something: a session desk knows, or a queue the
/// store holds for one (prompts sent `--queue-for-later`, a pause kept from before). Anything
/// else is most often a typo, refused as `send` refuses it, with the nearest names.
fn require_delivery_target(paths: &Paths, name: &SessionName) -> Result<()> {
    if super::session_known(paths, name) {
        return Ok(());
    }
    let store = Store::open(&paths.state)?;
    let paused = store.load_pauses().is_ok_and(|p| p.sessions.contains_key(name.as_str()));
    let queued = || {
        store.read_only_view().is_ok_and(|(items, intake, _)| {
            items.iter().filter(|i| !i.state.is_final()).chain(&intake).any(|i| i.session == name.as_str())
        })
    };
    if paused || queued() {
        return Ok(());
    }
    super::require_session(paths, name)
}

/// The ids of the prompts still pending for `session` (queued, sending or stuck, or waiting in
/// the intake), oldest first, as the store holds them.
pub(super) fn pending_ids(paths: &Paths, session: &SessionName) -> Result<Vec<ItemId>> {
    if !paths.state.join("delivery").exists() {
        return Ok(Vec::new());
    }
    let (items, intake, _) = Store::open(&paths.state)?.read_only_view()?;
    let mut ids: Vec<ItemId> = items
        .iter()
        .filter(|i| !i.state.is_final())
        .chain(&intake)
        .filter(|i| i.session == session.as_str())
        .map(|i| i.id.clone())
        .collect();
    ids.sort();
    ids.dedup();
    Ok(ids)
}

/// Every session's stuck items, from the daemon when it runs, else from the store (the counts
/// `desk ls` shows); `None` when neither answers. For the attention line inside `desk attach`.
pub(super) fn stuck_counts(paths: &Paths) -> Option<std::collections::HashMap<String, u32>> {
    Some(queue_counts(paths)?.into_iter().map(|(session, c)| (session, c.stuck)).collect())
}
