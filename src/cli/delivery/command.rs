//! `desk force`, `drop`, `pause` and `resume`: one request to the daemon, and what it did.

use anyhow::Result;
use std::time::Duration;

use super::{REQUEST_TIMEOUT, ask, paths, request, require_delivery_target};
use crate::cli::output;
use desk_common::paths::{Paths, SessionName};
use desk_core::delivery::item::ItemId;
use desk_wire::control::Request;

/// A force waits for its delivery to settle: echo and submit windows plus retries.
const FORCE_TIMEOUT: Duration = Duration::from_secs(60);

/// `force`, `drop`, `pause`, `resume`: one request, its answer printed; `kind` names the JSON,
/// `ids` says how the item's id is written in the text.
pub(in crate::cli) fn command(kind: &str, req: Request, json: bool, ids: &output::Ids) -> Result<i32> {
    let paths = paths()?;
    // A drop may erase desk's own prompt from the input box and look again: up to 45 s.
    let timeout =
        if matches!(req, Request::Force { .. } | Request::Drop { .. }) { FORCE_TIMEOUT } else { REQUEST_TIMEOUT };
    if let Request::Pause { session, .. } | Request::Resume { session } = &req {
        require_delivery_target(&paths, session)?;
    }
    let (id, session) = match &req {
        Request::Force { id, .. } | Request::Drop { id } => (Some(id.clone()), None),
        Request::Pause { session, .. } | Request::Resume { session } => (None, Some(session.clone())),
        _ => (None, None),
    };
    // Only the daemon can carry these out.
    let notes: Vec<String> = crate::autostart::ensure_daemon(&paths).say(json).into_iter().collect();
    let message = ask::<()>(&paths, &req, timeout)?.message;
    CommandReport { id, message, session }.render(kind, &notes, json, ids)?;
    Ok(0)
}

/// What `force`, `drop`, `pause` or `resume` did: the daemon's words, and the item or session
/// it acted on (in JSON, the keys in the order the earlier map gave them).
#[derive(serde::Serialize)]
struct CommandReport {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<ItemId>,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<SessionName>,
}

impl CommandReport {
    /// Once as text (the daemon's sentence, the item it names written as `ids` says) or once as
    /// JSON (`kind` names the envelope; the daemon's sentence as it is).
    fn render(&self, kind: &str, notes: &[String], json: bool, ids: &output::Ids) -> Result<()> {
        if json {
            return output::print_ok(kind, self, notes);
        }
        match &self.id {
            Some(id) => println!("{}", ids.show_in(&self.message, id)),
            // The daemon's sentence names the session first (`paused delivery to api`, `api was
            // not paused`).
            None => match &self.session {
                Some(session) => println!("{}", ids.session_in(&self.message, session.as_str())),
                None => println!("{}", self.message),
            },
        }
        Ok(())
    }
}

/// Drop each of `ids` through the daemon (started if need be); returns what a command says
/// about it and the ids that were dropped (one the daemon refuses — delivered meanwhile — is
/// named in the notes).
pub(in crate::cli) fn drop_all(paths: &Paths, ids: &[ItemId], json: bool) -> Result<(Vec<String>, Vec<ItemId>)> {
    let mut notes: Vec<String> = crate::autostart::ensure_daemon(paths).say(json).into_iter().collect();
    let mut dropped = Vec::new();
    for id in ids {
        // As `desk drop` waits: a drop may erase desk's own prompt from the box first.
        match request(paths, &Request::Drop { id: id.clone() }, FORCE_TIMEOUT)?.into_answer::<()>() {
            Ok(_) => dropped.push(id.clone()),
            Err(e) => notes.push(format!("{id} was not dropped: {}", e.message)),
        }
    }
    Ok((notes, dropped))
}
