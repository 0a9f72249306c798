//! The daemon's answers to its control requests: one small handler per request.
//!
//! Owns turning a [`Request`] into a [`Response`] built from the request's typed answer
//! (`desk_core::delivery::answer`) or a failure with its [`ErrorKind`]. The handlers that act
//! on an item (`force`, `drop`) or a queue (`pause`, `resume`) hand the command to the engine,
//! which answers when it is done; `ingest` of a prompt still in the intake is answered once
//! it is queued. The socket side (accepting, reading lines, bounding replies) is the loop's,
//! in the parent module. May not build or edit JSON by hand.

use mio::Token;

use super::Daemon;
use crate::store::Pause;
use desk_common::clock::now_ms;
use desk_core::delivery::answer::{IN_INTAKE, Ingested, ItemAnswer, ListedItem, ListedQueue, Pid};
use desk_core::delivery::engine::{self, Input};
use desk_core::delivery::item::{ItemId, State};
use desk_wire::control::{ErrorKind, Request, Response, SessionName};

impl Daemon {
    /// Answer one request now, or leave it to be answered when what it started ends.
    pub(super) fn handle_request(&mut self, client: Token, request: Request) {
        let now = match request {
            Request::Ping => Some(Response::answer("desk serve is running", &Pid { pid: std::process::id() })),
            Request::Stop => Some(self.stop()),
            Request::Ingest { id } => self.ingest_request(client, id),
            Request::Queue { session } => Some(self.queue_answer(session.as_ref())),
            Request::Item { id } => Some(self.item_answer(&id)),
            Request::Stuck => {
                let stuck: Vec<ListedItem> = self.engine.stuck().into_iter().map(ListedItem::cut).collect();
                Some(Response::answer("stuck", &stuck))
            }
            Request::Force { id, over_draft } => self.force(client, id, over_draft),
            Request::Drop { id } => {
                self.command(client, engine::Command::Drop(id));
                None
            }
            Request::Pause { session, reason } => self.pause(client, session, reason),
            Request::Resume { session } => self.resume(client, session),
        };
        if let Some(response) = now {
            self.reply(client, response);
        }
    }

    fn command(&mut self, client: Token, command: engine::Command) {
        self.feed(Input::Command { client: client.0 as u64, command });
    }

    fn stop(&mut self) -> Response {
        self.stopping = true;
        Response::answer("stopping", &Pid { pid: std::process::id() })
    }

    /// Queue an intake file now; answered once it is queued (now, or on a retry) or set aside.
    fn ingest_request(&mut self, client: Token, id: ItemId) -> Option<Response> {
        let path = self.store.intake_file(&id);
        if !path.exists() {
            return Some(self.ingest_answer(&id));
        }
        self.ingest_waiters.push((id, client));
        let _ = self.ingest_file(&path);
        None
    }

    /// The answer to an ingest request for an item no longer in the intake.
    pub(super) fn ingest_answer(&self, id: &ItemId) -> Response {
        let state =
            self.engine.item(id).map(|i| i.state).or_else(|| self.store.find(id).ok().flatten().map(|i| i.state));
        match state {
            Some(state) => Self::ingested(id, state),
            None => match self.store.find_set_aside(id).ok().flatten() {
                Some(p) => Response::fail(
                    ErrorKind::Refused,
                    format!("item {id} was set aside as {}: {}", p.path.display(), p.error),
                ),
                None => Response::fail(ErrorKind::NoSuchItem, format!("item {id} was not found")),
            },
        }
    }

    /// The answer to `ingest` for an item in `state`.
    pub(super) fn ingested(id: &ItemId, state: State) -> Response {
        Response::answer(format!("{id} {}", state.as_str()), &Ingested { id: id.clone(), state })
    }

    fn queue_answer(&self, session: Option<&SessionName>) -> Response {
        let queues: Vec<ListedQueue> = self
            .engine
            .queues()
            .into_iter()
            .filter(|q| session.is_none_or(|s| s.as_str() == q.session))
            .map(|q| {
                let refused = self.refused.get(&q.session).map(|r| r.reason.clone());
                ListedQueue::new(q, refused)
            })
            .collect();
        Response::answer("queues", &queues)
    }

    /// One item, from the queues, the store or the intake; a queued one says why it waits.
    fn item_answer(&self, id: &ItemId) -> Response {
        if let Some(item) = self.engine.item(id).cloned().or_else(|| self.store.find(id).ok().flatten()) {
            let hold = if item.state == State::Queued { self.engine.hold(&item.session) } else { None };
            return Response::answer("item", &ItemAnswer { item, hold });
        }
        if let Ok(Some(mut item)) = self.store.find_intake(id) {
            let why = self.intake_errors.get(id).cloned().unwrap_or_else(|| "not taken yet".into());
            item.note(now_ms(), "intake", format!("not queued yet: {why}"));
            return Response::answer(IN_INTAKE, &ItemAnswer { item, hold: None });
        }
        match self.store.find_set_aside(id).ok().flatten() {
            Some(p) => Response::fail(
                ErrorKind::Refused,
                format!("item {id} was set aside as {}: {}", p.path.display(), p.error),
            ),
            None => Response::fail(ErrorKind::NoSuchItem, format!("no item {id}")),
        }
    }

    /// A force goes to the engine; a finished item says how it finished, rather than "no
    /// pending item".
    fn force(&mut self, client: Token, id: ItemId, over_draft: bool) -> Option<Response> {
        if self.engine.item(&id).is_none()
            && let Ok(Some(done)) = self.store.find(&id)
            && done.state.is_final()
        {
            let last = done.evidence.last().map(|n| format!(": {}", n.detail)).unwrap_or_default();
            let message = format!(
                "item {id} was {} at {}{last}; there is nothing to force (desk send it again if it must go once more)",
                done.state.as_str(),
                desk_common::clock::local_datetime(done.state_since_ms)
            );
            return Some(Response::fail(ErrorKind::Refused, message));
        }
        self.command(client, engine::Command::Force { id, over_draft });
        None
    }

    fn pause(&mut self, client: Token, session: SessionName, reason: Option<String>) -> Option<Response> {
        let reason = reason.unwrap_or_default().trim().to_string();
        if let Err(e) = self.update_pauses(|p| {
            p.sessions.insert(session.to_string(), Pause { reason: reason.clone(), since_ms: now_ms() });
        }) {
            return Some(Response::fail(ErrorKind::Refused, format!("cannot record the pause: {e:#}")));
        }
        self.command(client, engine::Command::Pause { session, reason });
        None
    }

    fn resume(&mut self, client: Token, session: SessionName) -> Option<Response> {
        if let Err(e) = self.update_pauses(|p| {
            p.sessions.remove(session.as_str());
        }) {
            return Some(Response::fail(ErrorKind::Refused, format!("cannot record the resume: {e:#}")));
        }
        self.command(client, engine::Command::Resume { session });
        None
    }
}
