//! The delivery engine: a pure state machine, events and a clock in, actions out.
//!
//! Owns every session's queue and the one delivery in flight per session: the gate (ready,
//! not blocked, not paused, nobody typing, `when=idle` waits for idle), the transport steps
//! (claim, baseline, paste, echo, settle, Enter, submit) and their verification against the
//! master's screen, hook and activity evidence. It performs no I/O: [`Engine::handle`] returns
//! [`Action`]s that the daemon's loop carries out in order, feeding results back as [`Input`]s.
//!
//! This file holds the engine's state (its sessions' queues, the items, the tokens of requests
//! in flight), the dispatch of an [`Input`], and the bookkeeping every part shares (a state
//! change persisted, a timer armed, a snapshot asked for). The parts, each in its own file:
//! `gate` (whether queued items may go, and the start of a flight); `flight` (what one attempt
//! is) and `transport` (its steps: baseline, paste, echo, settle, Enter, submit); `outcome`
//! (how a flight ends); `evidence` (live views, hooks, journals, generations ending); `owed`
//! (delivered prompts whose hook is still to come); `recovery` (items found `sending` after a
//! restart); `operator` (pause, resume, drop, force); `unsent` (desk's own prompt left in the
//! input box); `io` (the inputs and actions).
//!
//! Invariants:
//! - persist before inject: an item's durable state changes (an [`Action::Persist`]) before
//!   the action that has a side effect (the paste, an Enter) appears in the same batch; the
//!   loop aborts a batch at a failed persist and reports it, so nothing is typed for an item
//!   whose state is not on disk;
//! - one delivery in flight per session; a newcomer waits for it and then goes on its own;
//! - results are fenced: every request carries a token naming its attempt; a late result for
//!   an attempt that is over (or a session generation that is gone) changes nothing;
//! - evidence is fenced by generation and time: a hook, an idle or an exit settles only items
//!   of its own session generation, and a hook only items typed before it; one generation's
//!   agent being idle never settles what another generation's agent was handed;
//! - an item is judged when its generation ends ([`Input::Journal`] replays what the session
//!   recorded while the engine was not told, and the daemon gives it before it reports the
//!   session down or its new generation): a prompt the agent may have queued and was not seen
//!   taking is stuck/interrupted, never left `delivered`; a stuck/interrupted item whose
//!   paste is on record is delivered if its hook comes after all;
//! - never re-paste automatically; an extra Enter only while the text verifiably sits in the
//!   input area, and never while an approval dialog is on screen;
//! - never Esc, Ctrl-C or any other key: only the text and Enter.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::item::{Item, ItemId, State, StuckClass};
use super::text::{self, Held};
use crate::state::RuleSet;
use crate::state::hooks::PromptSig;
use crate::time::Backoff;

/// Names the tests (`engine/tests.rs`, `use super::*`) take from here that the engine's own
/// code here no longer names.
#[cfg(test)]
use crate::state::{Activity, Lifecycle};

mod evidence;
mod flight;
mod gate;
mod io;
mod operator;
mod outcome;
mod owed;
mod recovery;
mod transport;
mod unsent;
use flight::{Flight, Launch, Look, Mode, Phase};
pub use io::{
    Action, Command, Hold, Input, Past, PastEvent, ScreenView, SessionView, TimerKey, TimerKind, Token, WriteError,
    WriteKind,
};

/// While a controller has typed within the last 2 s, delivery waits: a paste must not land in
/// the middle of what a person is typing.
pub const TYPING_HOLD: Duration = Duration::from_secs(2);

/// While delivery is held by something only a person or the program ends (a draft in the input
/// box, a program not reading a line), the screen is looked at again once a second: one screen
/// read, and the prompt goes within a second of the box being cleared.
pub const HOLD_RECHECK: Duration = Duration::from_secs(1);

/// After a prompt is submitted, the session's activity is stale until it changes: the agent
/// shows the turn it started (a spinner title, a hook, a working screen) within a few hundred
/// milliseconds. Until then, or until 3 s have passed with no change (the prompt started
/// nothing), "idle" is not trusted for `when=idle` items or agents that steer mid-turn, and a
/// prompt typed meanwhile may sit in the agent's own queue.
pub const STATE_AFTER_SUBMIT: Duration = Duration::from_secs(3);

/// An agent takes the next prompt from its own queue soon after a turn ends: the demo agent at
/// once, Claude Code 0.18–0.29 s and OpenCode 0.11–2.9 s after the previous reply finished
/// streaming (`tests/data/agents/*/queue.results.json`). One that has stayed idle for 5 s, well
/// past the slowest seen, has nothing queued, so every prompt typed before it went idle was
/// taken.
pub const QUEUE_DRAINED: Duration = Duration::from_secs(5);

/// At most 20 items go into one digest prompt; more wait for the next turn.
pub const MAX_DIGEST: usize = 20;

/// First retry 1 s after a failure that allows one (nothing was typed), doubling to 60 s.
pub const BACKOFF_BASE: Duration = Duration::from_secs(1);
pub const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// Hook submissions remembered per session for verification and crash recovery.
const RECENT_HOOKS: usize = 32;

/// Why a queue waits while desk serve's connection to the session's master is open and its first
/// report not yet in (a daemon that just started, a master just replaced): a state of the
/// daemon's for a few milliseconds, which `desk send` waits out rather than report as a hold.
pub const CONNECTING: &str = "desk serve is connecting to the session (its first report is not in yet)";

/// Prompts that may still sit in one agent's own queue (`queued_by_agent`) tracked per session.
/// Each is judged when its agent goes (taken, or stuck), so none is forgotten while fewer than
/// this wait; 256 is far beyond what an agent holds (every one is a turn of its own).
const QUEUED_BY_AGENT_MAX: usize = 256;

/// A hook stamped up to 50 ms before a paste or an Enter is still counted after it: the master
/// stamps hooks and the daemon stamps its notes with their own reads of the same clock.
const HOOK_SKEW_MS: u64 = 50;

/// A submission reported by the agent's UserPromptSubmit hook.
#[derive(Debug, Clone)]
struct Heard {
    /// When the master recorded it (Unix ms).
    at_ms: u64,
    generation: u32,
    sig: PromptSig,
}

#[derive(Debug)]
struct SessionQ {
    live: Option<SessionView>,
    paused: Option<String>,
    /// Item ids in state queued or stuck or sending, by id order (= creation order).
    items: Vec<ItemId>,
    flight: Option<Flight>,
    hold: Option<Hold>,
    backoff: Backoff,
    retry_at: Option<Instant>,
    /// Submissions reported by hooks, oldest first.
    hooks: VecDeque<Heard>,
    /// Items delivered on other evidence whose UserPromptSubmit hook has not come yet (an
    /// agent that queued one mid-turn reports it when the turn ends), as last persisted
    /// (`hook_owed` names the digest). A hook that matches one of these is theirs, not evidence
    /// for an identical prompt in flight. Oldest first, bounded by [`RECENT_HOOKS`] prompts
    /// besides those that may sit in the agent's own queue (bounded by [`QUEUED_BY_AGENT_MAX`]).
    owed: VecDeque<Item>,
    /// When the reported activity last changed (Unix ms), and when the last prompt's Enter was
    /// pressed: an activity older than that Enter is stale (see [`STATE_AFTER_SUBMIT`]).
    activity_changed_ms: u64,
    last_enter_ms: Option<u64>,
    /// Whether the session was reported down since start (for recovering `sending` items).
    known_down: bool,
    /// A connection to the master is open and its first report not yet in (no live view yet
    /// means "not known yet", not "not running").
    connecting: bool,
    /// The next look for desk's own stuck prompt in the input box, when one is armed, and the
    /// token of the look in progress (see `unsent`).
    watch_at: Option<Instant>,
    watching: Option<Token>,
    /// The prompts typed into the session lately: their echo (in the input box, in the
    /// transcript) is never taken for a dialog, however much it reads like one.
    typed: crate::state::typed::Typed,
}

impl SessionQ {
    fn new() -> SessionQ {
        SessionQ {
            live: None,
            paused: None,
            items: Vec::new(),
            flight: None,
            hold: None,
            backoff: Backoff::new(BACKOFF_BASE, BACKOFF_MAX),
            retry_at: None,
            hooks: VecDeque::new(),
            owed: VecDeque::new(),
            activity_changed_ms: 0,
            last_enter_ms: None,
            known_down: false,
            connecting: false,
            watch_at: None,
            watching: None,
            typed: Default::default(),
        }
    }
}

/// Summary of one session for `desk queue`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct QueueView {
    pub session: String,
    pub generation: Option<u32>,
    pub paused: Option<String>,
    pub hold: Option<Hold>,
    pub in_flight: Vec<ItemId>,
    pub items: Vec<Item>,
}

pub struct Engine {
    sessions: BTreeMap<String, SessionQ>,
    items: HashMap<ItemId, Item>,
    /// Requests in flight: token → (session, the attempt it belongs to; none for a persist
    /// outside a delivery).
    tokens: HashMap<Token, (String, Option<u64>)>,
    next_token: Token,
    next_attempt: u64,
}

impl Default for Engine {
    fn default() -> Self {
        Engine::new()
    }
}

/// What one [`Engine::handle`] call works with: the clock it was given and the actions it
/// returns. Every step of the state machine takes this instead of the time twice and a list.
struct Out<'a> {
    actions: &'a mut Vec<Action>,
    now: Instant,
    now_ms: u64,
}

impl Engine {
    pub fn new() -> Engine {
        Engine {
            sessions: BTreeMap::new(),
            items: HashMap::new(),
            tokens: HashMap::new(),
            next_token: 1,
            next_attempt: 1,
        }
    }

    // ----- reading -----

    pub fn item(&self, id: &ItemId) -> Option<&Item> {
        self.items.get(id)
    }

    pub fn queues(&self) -> Vec<QueueView> {
        self.sessions
            .iter()
            .filter(|(_, q)| !q.items.is_empty() || q.paused.is_some())
            .map(|(name, q)| QueueView {
                session: name.clone(),
                generation: q.live.as_ref().map(|l| l.generation),
                paused: q.paused.clone(),
                hold: q.hold.clone(),
                in_flight: q.flight.as_ref().map(|f| f.items.clone()).unwrap_or_default(),
                items: q.items.iter().filter_map(|id| self.items.get(id).cloned()).collect(),
            })
            .collect()
    }

    /// Why a session's queue is held, if it is.
    pub fn hold(&self, session: &str) -> Option<Hold> {
        self.sessions.get(session).and_then(|q| q.hold.clone())
    }

    pub fn stuck(&self) -> Vec<Item> {
        let mut v: Vec<Item> = self.items.values().filter(|i| i.state == State::Stuck).cloned().collect();
        v.sort_by(|a, b| a.id.cmp(&b.id));
        v
    }

    /// Whether any delivery is in flight (the daemon keeps polling only then).
    pub fn busy(&self) -> bool {
        self.sessions.values().any(|q| q.flight.is_some())
    }

    // ----- the state machine -----

    pub fn handle(&mut self, input: Input, now: Instant, now_ms: u64) -> Vec<Action> {
        let mut actions = Vec::new();
        let mut out = Out { actions: &mut actions, now, now_ms };
        match input {
            Input::Restore(items) => self.on_restore(items, &mut out),
            Input::Ingested(item) => {
                let name = item.session.clone();
                self.adopt(item);
                self.pump(&name, &mut out);
            }
            Input::Paused { session, reason } => {
                self.session(&session).paused = Some(reason);
            }
            Input::Connecting { session } => {
                let q = self.session(&session);
                q.connecting = q.live.is_none();
            }
            Input::Session(view) => self.on_session(view, &mut out),
            Input::SessionDown { session, generation } => self.on_down(&session, generation, &mut out),
            Input::Hook { session, generation, event, prompt, at_ms, .. } => {
                self.on_hook(&session, generation, &event, prompt, at_ms, &mut out)
            }
            Input::Journal { session, events } => self.on_journal(&session, events, &mut out),
            Input::Snapshot { token, result } => {
                if let Some((session, attempt)) = self.tokens.remove(&token) {
                    self.on_snapshot(&session, attempt, token, result, &mut out);
                }
            }
            Input::Written { token, result } => {
                if let Some((session, attempt)) = self.tokens.remove(&token) {
                    self.on_written(&session, attempt, token, result, &mut out);
                }
            }
            Input::PersistFailed { token, error } => {
                if let Some((session, attempt)) = self.tokens.remove(&token) {
                    self.on_persist_failed(&session, attempt, &error, &mut out);
                }
            }
            Input::Timer(key) => self.on_timer(key, &mut out),
            Input::Command { client, command } => self.on_command(client, command, &mut out),
            Input::ChannelMembers { channel, receivers } => self.on_channel_members(&channel, &receivers, &mut out),
        }
        actions
    }

    fn session(&mut self, name: &str) -> &mut SessionQ {
        self.sessions.entry(name.to_string()).or_insert_with(SessionQ::new)
    }

    fn adopt(&mut self, item: Item) {
        if item.state == State::Delivered && item.hook_owed.is_some() {
            return self.owe(item);
        }
        if item.state.is_final() || self.items.contains_key(&item.id) {
            return;
        }
        let q = self.session(&item.session);
        let pos = q.items.partition_point(|id| *id < item.id);
        q.items.insert(pos, item.id.clone());
        self.items.insert(item.id.clone(), item);
    }

    fn token(&mut self, session: &str, attempt: Option<u64>) -> Token {
        let t = self.next_token;
        self.next_token += 1;
        self.tokens.insert(t, (session.to_string(), attempt));
        t
    }

    fn set_hold(&mut self, session: &str, reason: impl Into<String>, now_ms: u64) {
        let reason = reason.into();
        let q = self.session(session);
        if q.hold.as_ref().is_none_or(|h| h.reason != reason) {
            q.hold = Some(Hold { reason, since_ms: now_ms });
        }
    }

    /// Change an item's state (and notes) and persist it.
    fn transition(&mut self, id: &ItemId, to: State, kind: &str, detail: String, out: &mut Out<'_>) -> Option<Token> {
        let now_ms = out.now_ms;
        let session = self.items.get(id)?.session.clone();
        let attempt = self.flight(&session).map(|f| f.attempt);
        let token = self.token(&session, attempt);
        let item = self.items.get_mut(id)?;
        let from = item.state;
        debug_assert!(from == to || from.can_become(to), "{from:?} -> {to:?}");
        item.state = to;
        if from != to {
            item.state_since_ms = now_ms;
        }
        if to != State::Stuck {
            item.stuck = None;
        }
        item.note(now_ms, kind, detail);
        let snapshot = item.clone();
        if to.is_final() {
            self.items.remove(id);
            if let Some(q) = self.sessions.get_mut(&session) {
                q.items.retain(|i| i != id);
            }
        }
        out.actions.push(Action::Persist { token, item: snapshot, from });
        Some(token)
    }

    fn stick(&mut self, id: &ItemId, class: StuckClass, detail: String, out: &mut Out<'_>) {
        if let Some(item) = self.items.get_mut(id) {
            item.stuck = Some(class);
        }
        self.transition(id, State::Stuck, "stuck", format!("{}: {detail}", class.as_str()), out);
    }

    // ----- sessions -----

    // ----- the gate -----

    fn request_snapshot(&mut self, session: &str, out: &mut Out<'_>) {
        let Some((attempt, generation)) = self.flight(session).map(|f| (f.attempt, f.generation)) else {
            return;
        };
        let token = self.token(session, Some(attempt));
        if let Some(f) = self.flight_mut(session) {
            f.waiting = Some(token);
        }
        out.actions.push(Action::Snapshot { token, session: session.to_string(), generation });
    }

    fn arm(&mut self, session: &str, kind: TimerKind, at: Instant, out: &mut Out<'_>) {
        let (attempt, step) = self.flight(session).map_or((None, 0), |f| (Some(f.attempt), f.enters));
        out.actions.push(Action::Arm { at, key: TimerKey { session: session.to_string(), attempt, kind, step } });
    }

    fn arm_retry(&mut self, session: &str, at: Instant, out: &mut Out<'_>) {
        out.actions.push(Action::Arm {
            at,
            key: TimerKey { session: session.into(), attempt: None, kind: TimerKind::Retry, step: 0 },
        });
    }

    /// The live session's provider rules (its delivery settings among them).
    fn rules(&self, session: &str) -> Option<Rc<RuleSet>> {
        self.sessions.get(session)?.live.as_ref().map(|l| l.rules.clone())
    }

    // ----- the delivery in flight: the one place it is looked up -----

    fn flight(&self, session: &str) -> Option<&Flight> {
        self.sessions.get(session)?.flight.as_ref()
    }

    fn flight_mut(&mut self, session: &str) -> Option<&mut Flight> {
        self.sessions.get_mut(session)?.flight.as_mut()
    }

    /// End the session's flight (whatever settles it), returning it.
    fn take_flight(&mut self, session: &str) -> Option<Flight> {
        self.sessions.get_mut(session)?.flight.take()
    }

    /// Add the same note to every item of a flight.
    fn note_items(&mut self, ids: &[ItemId], kind: &str, detail: &str, now_ms: u64) {
        for id in ids {
            if let Some(item) = self.items.get_mut(id) {
                item.note(now_ms, kind, detail);
            }
        }
    }

    // ----- results: looks at the screen -----

    fn backoff(&mut self, session: &str, why: &str, out: &mut Out<'_>) {
        let (now, now_ms) = (out.now, out.now_ms);
        let q = self.session(session);
        let delay = q.backoff.fail();
        q.retry_at = Some(now + delay);
        self.set_hold(session, format!("{why}; retrying in {} s", delay.as_secs()), now_ms);
        self.arm_retry(session, now + delay, out);
    }

    // ----- channels -----

    /// Withdraw the queued items of `channel` whose session no longer receives its messages.
    fn on_channel_members(&mut self, channel: &str, receivers: &[String], out: &mut Out<'_>) {
        let mut gone: Vec<(ItemId, String)> = self
            .items
            .values()
            .filter(|i| i.state == State::Queued && i.channel.as_deref() == Some(channel))
            .filter(|i| !receivers.contains(&i.session))
            .filter(|i| !self.flight(&i.session).is_some_and(|f| f.items.contains(&i.id)))
            .map(|i| (i.id.clone(), i.session.clone()))
            .collect();
        gone.sort();
        for (id, session) in gone {
            let why = format!("withdrawn: {session} is no longer an agent member of #{channel}");
            self.transition(&id, State::Dropped, "withdrawn", why, out);
            self.pump(&session, out);
        }
    }

    // ----- operator commands -----
}

/// The prompt typed for these items: one item's text, or the digest that lists them.
/// Sanitised here as well as by `desk send`: an intake file may come from elsewhere, and
/// nothing but text, newlines and tabs is ever typed.
fn prompt_text(items: &[&Item]) -> String {
    match items {
        [one] => text::sanitize(&one.text),
        _ => text::sanitize(&text::digest(items)),
    }
}

/// When the item's text was last typed into the session (the `pasted` note of its latest
/// attempt, recorded just before the bytes went out), if that is on record: a later claim whose
/// paste is not on record, or a refusal of the paste, means it was not typed since.
fn typed_at(item: &Item) -> Option<u64> {
    let last = item.evidence.iter().rev().find(|n| matches!(n.kind.as_str(), "pasted" | "claimed" | "refused"))?;
    (last.kind == "pasted").then_some(last.at_ms)
}

/// How much longer to wait because a person typed in an attached terminal within
/// [`TYPING_HOLD`], if they did.
fn typing_hold(screen: &ScreenView, now_ms: u64) -> Option<Duration> {
    let until = screen.last_typed_ms? + TYPING_HOLD.as_millis() as u64;
    (now_ms < until).then(|| Duration::from_millis(until - now_ms))
}

/// Of every item on disk, those a restarted engine needs ([`Input::Restore`]): the pending
/// ones; delivered ones whose hook is still owed; and the settled siblings of a digest found
/// half-settled (they decide its outcome).
pub fn restorable(items: Vec<Item>) -> Vec<Item> {
    let siblings: HashSet<ItemId> =
        items.iter().filter(|i| i.state == State::Sending).flat_map(|i| i.digest_with.iter().cloned()).collect();
    items
        .into_iter()
        .filter(|i| {
            !i.state.is_final() || (i.state == State::Delivered && i.hook_owed.is_some()) || siblings.contains(&i.id)
        })
        .collect()
}

/// Every session with items in any non-final state (for the daemon's bookkeeping).
pub fn sessions_with_items(engine: &Engine) -> HashSet<String> {
    engine.sessions.iter().filter(|(_, q)| !q.items.is_empty()).map(|(n, _)| n.clone()).collect()
}

#[cfg(test)]
mod tests;
