//! The delivery engine: a pure state machine, events and a clock in, actions out.
//!
//! Owns every session's queue and the one delivery in flight per session: the gate (ready,
//! not blocked, not paused, nobody typing, `when=idle` waits for idle), the transport steps
//! (claim, baseline, paste, echo, settle, Enter, submit) and their verification against the
//! master's screen, hook and activity evidence. It performs no I/O: [`Engine::handle`] returns
//! [`Action`]s that the daemon's loop carries out in order, feeding results back as [`Input`]s.
//!
//! Invariants:
//! - persist before inject: an item's durable state changes (an [`Action::Persist`]) before
//!   the action that has a side effect (the paste, an Enter) appears in the same batch; the
//!   loop aborts a batch at a failed persist and reports it, so nothing is typed for an item
//!   whose state is not on disk;
//! - one delivery in flight per session; a newcomer waits for it and then goes on its own;
//! - results are fenced: every request carries a token naming its attempt; a late result for
//!   an attempt that is over (or a session generation that is gone) changes nothing;
//! - never re-paste automatically; an extra Enter only while the text verifiably sits in the
//!   input area, and never while an approval dialog is on screen;
//! - never Esc, Ctrl-C or any other key: only the text and Enter.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::item::{Item, ItemId, State, StuckClass, When};
use super::settings::DeliverySettings;
use super::text::{self, Fingerprint, Presence};
use crate::state::hooks::{HookEvent, PromptSig};
use crate::state::{Activity, Lifecycle, RuleSet};

mod io;
pub use io::{
    Action, Command, Hold, Input, ScreenView, SessionView, TimerKey, TimerKind, Token, WriteError, WriteKind,
};

/// While a controller has typed within the last 2 s, delivery waits: a paste must not land in
/// the middle of what a person is typing.
pub const TYPING_HOLD: Duration = Duration::from_secs(2);

/// How a hold for a draft in the input box begins (`desk force` recognises it).
const DRAFT_HOLD: &str = "the input box holds text typed by someone";

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the baseline screen.
    Baseline,
    /// The paste was sent; waiting for the master to accept it.
    Pasting,
    /// Polling until the paste shows in the input area.
    Echo,
    /// Waiting out the settle delay.
    Settle,
    /// Enter sent; waiting for the master to accept it.
    Entering,
    /// Polling for evidence of submission.
    Submit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// An ordinary delivery: paste then Enter.
    Deliver,
    /// An operator's force on a submit-stuck item: Enter only.
    ForceEnter,
    /// After a restart, an item found `sending`: settle it from evidence.
    Recover,
}

#[derive(Debug, Clone)]
struct Flight {
    attempt: u64,
    items: Vec<ItemId>,
    text: String,
    fingerprint: Fingerprint,
    /// The whole prompt's signature, to recognise its UserPromptSubmit hook.
    prompt: PromptSig,
    /// The operator chose to paste onto text someone typed (`desk force --over-draft`).
    over_draft: bool,
    generation: u32,
    mode: Mode,
    phase: Phase,
    /// Token of the request the current phase waits for.
    waiting: Option<Token>,
    baseline: Presence,
    enters: u32,
    pasted_ms: Option<u64>,
    enter_ms: Option<u64>,
    /// Activity before the Enter, to recognise "turned working" as evidence.
    activity_at_enter: Activity,
    /// The operator client awaiting the outcome of a force.
    reply_to: Option<u64>,
    /// Snapshot reads that failed in this phase.
    read_failures: u32,
    /// The current Enter's verification window is over: the next look decides (Enter again,
    /// or stuck); nothing is decided on an older look.
    deadline_passed: bool,
    /// The cursor's row (index and text) at the latest look, and at the look before the
    /// current Enter: where an input area has no borders, the row the text was typed on
    /// changing is the evidence that the Enter was taken.
    last_cursor_row: Option<(usize, String)>,
    enter_cursor_row: Option<(usize, String)>,
    /// A dialog showed during this Enter's verification (noted once per Enter).
    dialog_seen: bool,
    /// At the first Enter, the activity predated the previous prompt's Enter (it was stale).
    stale_at_enter: bool,
    /// At the first Enter, earlier prompts were still waiting in the agent's own queue.
    queue_ahead_at_enter: bool,
}

#[derive(Debug)]
struct SessionQ {
    live: Option<SessionView>,
    paused: Option<String>,
    /// Item ids in state queued or stuck or sending, by id order (= creation order).
    items: Vec<ItemId>,
    flight: Option<Flight>,
    hold: Option<Hold>,
    failures: u32,
    retry_at: Option<Instant>,
    /// Submissions reported by hooks: (Unix ms, the prompt's signature).
    hooks: VecDeque<(u64, PromptSig)>,
    /// Items delivered on other evidence whose UserPromptSubmit hook has not come yet (an
    /// agent that queued one mid-turn reports it when the turn ends), as last persisted
    /// (`hook_owed` names the digest). A hook that matches one of these is theirs, not evidence
    /// for an identical prompt in flight. Oldest first, bounded by [`RECENT_HOOKS`] prompts.
    owed: VecDeque<Item>,
    /// When the reported activity last changed (Unix ms), and when the last prompt's Enter was
    /// pressed: an activity older than that Enter is stale (see [`STATE_AFTER_SUBMIT`]).
    activity_changed_ms: u64,
    last_enter_ms: Option<u64>,
    /// Whether the session was reported down since start (for recovering `sending` items).
    known_down: bool,
}

impl SessionQ {
    fn new() -> SessionQ {
        SessionQ {
            live: None,
            paused: None,
            items: Vec::new(),
            flight: None,
            hold: None,
            failures: 0,
            retry_at: None,
            hooks: VecDeque::new(),
            owed: VecDeque::new(),
            activity_changed_ms: 0,
            last_enter_ms: None,
            known_down: false,
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

struct Out<'a> {
    actions: &'a mut Vec<Action>,
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
        let mut out = Out { actions: &mut actions };
        match input {
            Input::Restore(items) => {
                let settled: HashMap<ItemId, Item> = items
                    .iter()
                    .filter(|i| matches!(i.state, State::Delivered | State::Stuck))
                    .map(|i| (i.id.clone(), i.clone()))
                    .collect();
                for item in items {
                    self.adopt(item);
                }
                self.settle_with_digest_siblings(&settled, now_ms, &mut out);
                let names: Vec<String> = self.sessions.keys().cloned().collect();
                for name in names {
                    self.pump(&name, now, now_ms, &mut out);
                }
            }
            Input::Ingested(item) => {
                let name = item.session.clone();
                self.adopt(item);
                self.pump(&name, now, now_ms, &mut out);
            }
            Input::Paused { session, reason } => {
                self.session(&session).paused = Some(reason);
            }
            Input::Session(view) => self.on_session(view, now, now_ms, &mut out),
            Input::SessionDown { session, generation } => self.on_down(&session, generation, now, now_ms, &mut out),
            Input::Hook { session, generation, event, prompt, at_ms, .. } => {
                self.on_hook(&session, generation, &event, prompt, at_ms, now, now_ms, &mut out)
            }
            Input::Snapshot { token, result } => {
                if let Some((session, attempt)) = self.tokens.remove(&token) {
                    self.on_snapshot(&session, attempt, token, result, now, now_ms, &mut out);
                }
            }
            Input::Written { token, result } => {
                if let Some((session, attempt)) = self.tokens.remove(&token) {
                    self.on_written(&session, attempt, token, result, now, now_ms, &mut out);
                }
            }
            Input::PersistFailed { token, error } => {
                if let Some((session, attempt)) = self.tokens.remove(&token) {
                    self.on_persist_failed(&session, attempt, &error, now, now_ms, &mut out);
                }
            }
            Input::Timer(key) => self.on_timer(key, now, now_ms, &mut out),
            Input::Command { client, command } => self.on_command(client, command, now, now_ms, &mut out),
        }
        actions
    }

    /// Items of one digest prompt settle together. A crash between their records can leave one
    /// settled and another `sending`; the one left takes its sibling's outcome (recovered on its
    /// own, with its own text, it would look undelivered, and a force would repeat it).
    fn settle_with_digest_siblings(&mut self, settled: &HashMap<ItemId, Item>, now_ms: u64, out: &mut Out<'_>) {
        let sending: Vec<(ItemId, Item)> = self
            .items
            .values()
            .filter(|i| i.state == State::Sending && !i.digest_with.is_empty())
            .filter_map(|i| i.digest_with.iter().find_map(|s| settled.get(s)).map(|s| (i.id.clone(), s.clone())))
            .collect();
        for (id, sibling) in sending {
            let why = format!(
                "one digest with {}, which was settled {} before the restart",
                sibling.id,
                sibling.state.as_str()
            );
            match (sibling.state, sibling.stuck) {
                (State::Stuck, Some(class)) => self.stick(&id, class, why, now_ms, out),
                _ => {
                    if let Some(item) = self.items.get_mut(&id) {
                        item.hook_owed = sibling.hook_owed.clone();
                        item.queued_by_agent = sibling.queued_by_agent;
                    }
                    self.transition(&id, State::Delivered, "delivered", why, now_ms, out);
                }
            }
        }
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
    fn transition(
        &mut self,
        id: &ItemId,
        to: State,
        kind: &str,
        detail: String,
        now_ms: u64,
        out: &mut Out<'_>,
    ) -> Option<Token> {
        let session = self.items.get(id)?.session.clone();
        let attempt = self.sessions.get(&session).and_then(|q| q.flight.as_ref()).map(|f| f.attempt);
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

    fn stick(&mut self, id: &ItemId, class: StuckClass, detail: String, now_ms: u64, out: &mut Out<'_>) {
        if let Some(item) = self.items.get_mut(id) {
            item.stuck = Some(class);
        }
        self.transition(id, State::Stuck, "stuck", format!("{}: {detail}", class.as_str()), now_ms, out);
    }

    // ----- sessions -----

    fn on_session(&mut self, view: SessionView, now: Instant, now_ms: u64, out: &mut Out<'_>) {
        let name = view.name.clone();
        let q = self.session(&name);
        let old_generation = q.live.as_ref().map(|l| l.generation);
        let was = q.live.as_ref().map(|l| l.activity);
        q.known_down = false;
        if old_generation.is_some_and(|g| g != view.generation) {
            // A new generation: whatever was in flight for the old one is cut off.
            self.interrupt(&name, "the session restarted (new generation) during delivery", now_ms, out);
        }
        let q = self.session(&name);
        // From idle (or unknown) to working after our Enter; back to work after a dialog was
        // answered is the agent resuming its own turn, not evidence of our prompt.
        let turned_working =
            !matches!(was, Some(Activity::Working | Activity::Blocked)) && view.activity == Activity::Working;
        let activity = view.activity;
        if was != Some(activity) {
            q.activity_changed_ms = now_ms;
        }
        q.live = Some(view);
        if activity == Activity::Idle && was != Some(Activity::Idle) && q.owed.iter().any(|i| i.queued_by_agent) {
            // Idle for QUEUE_DRAINED from now on means the agent's queue is empty.
            out.actions.push(Action::Arm {
                at: now + QUEUE_DRAINED,
                key: TimerKey { session: name.clone(), attempt: None, kind: TimerKind::Drained, step: 0 },
            });
        }
        let q = self.session(&name);
        if turned_working
            && let Some(f) = &q.flight
            && f.phase == Phase::Submit
            && f.activity_at_enter != Activity::Working
            && !f.dialog_seen
        {
            self.submitted(&name, "the agent's activity turned working after Enter".into(), false, now, now_ms, out);
            return;
        }
        // Items found `sending` at start-up are settled once their session is observable.
        self.recover(&name, now, now_ms, out);
        self.pump(&name, now, now_ms, out);
    }

    fn on_down(&mut self, session: &str, generation: Option<u32>, now: Instant, now_ms: u64, out: &mut Out<'_>) {
        let q = self.session(session);
        // A report about another generation than the live one is old news.
        if let Some(generation) = generation
            && q.live.as_ref().is_some_and(|l| l.generation != generation)
        {
            return;
        }
        q.live = None;
        q.known_down = true;
        self.interrupt(session, "the session went away during delivery", now_ms, out);
        self.unpaid_at_exit(session, now_ms, out);
        // Items found `sending` at start-up whose session is gone cannot be settled.
        let sending: Vec<ItemId> = self
            .session(session)
            .items
            .clone()
            .into_iter()
            .filter(|id| self.items.get(id).is_some_and(|i| i.state == State::Sending))
            .collect();
        for id in sending {
            self.stick(
                &id,
                StuckClass::Interrupted,
                "delivery was cut off and the session is gone".into(),
                now_ms,
                out,
            );
        }
        self.pump(session, now, now_ms, out);
    }

    /// End the session's flight because its session generation is gone.
    fn interrupt(&mut self, session: &str, why: &str, now_ms: u64, out: &mut Out<'_>) {
        let Some(flight) = self.session(session).flight.take() else { return };
        // Once the paste is written (acknowledged or not) it may have been typed.
        let typed = flight.phase != Phase::Baseline || flight.mode != Mode::Deliver;
        for id in &flight.items {
            if typed {
                self.stick(id, StuckClass::Interrupted, why.into(), now_ms, out);
            } else if let Some(item) = self.items.get_mut(id) {
                // Nothing was typed or claimed: it stays as it was (queued, or stuck for a force).
                item.note(now_ms, "released", format!("{why}; nothing had been typed"));
            }
        }
        if let Some(client) = flight.reply_to {
            out.actions.push(Action::Reply { client, ok: false, message: why.to_string(), item: None });
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_hook(
        &mut self,
        session: &str,
        generation: u32,
        event: &HookEvent,
        prompt: Option<PromptSig>,
        at_ms: u64,
        now: Instant,
        now_ms: u64,
        out: &mut Out<'_>,
    ) {
        let q = self.session(session);
        if q.live.as_ref().is_some_and(|l| l.generation != generation) {
            return;
        }
        if *event != HookEvent::UserPromptSubmit {
            return;
        }
        // A hook that does not say what was submitted proves nothing about our prompt.
        let Some(sig) = prompt else { return };
        if q.hooks.len() >= RECENT_HOOKS {
            q.hooks.pop_front();
        }
        q.hooks.push_back((at_ms, sig.clone()));
        let owed_generation = |i: &Item| i.generation.is_none_or(|g| g == generation);
        if let Some(first) =
            q.owed.iter().position(|i| i.hook_owed.as_deref() == Some(sig.digest.as_str()) && owed_generation(i))
        {
            // The late report of a prompt already delivered, not of the one in flight: it is
            // paid (every item of that prompt, a digest's too), on disk as well.
            let paid: Vec<Item> = {
                let id = q.owed[first].id.clone();
                let digest_with = q.owed[first].digest_with.clone();
                let (paid, kept): (Vec<Item>, Vec<Item>) =
                    q.owed.drain(..).partition(|i| i.id == id || digest_with.contains(&i.id));
                q.owed = kept.into();
                paid
            };
            for mut item in paid {
                item.hook_owed = None;
                item.queued_by_agent = false;
                let note = "the agent's UserPromptSubmit hook for it came (it had queued it)";
                self.record_delivered(item, "hook", note.into(), now_ms, out);
            }
            return;
        }
        // Only once Enter was pressed: before it, the agent cannot have submitted our text.
        let Some(f) = q.flight.as_ref().filter(|f| {
            f.pasted_ms.is_some_and(|p| at_ms + 50 >= p) && matches!(f.phase, Phase::Entering | Phase::Submit)
        }) else {
            return;
        };
        if sig.digest == f.prompt.digest {
            let evidence =
                format!("the agent's UserPromptSubmit hook reported the whole prompt ({} characters)", sig.chars);
            return self.submitted(session, evidence, true, now, now_ms, out);
        }
        if sig.carries_more_than(&f.prompt) {
            let detail = format!(
                "the agent's UserPromptSubmit hook reports one message of {} characters that carries this prompt ({} characters) and text someone else typed: the message begins {:?} and ends {:?}; the prompt begins {:?} and ends {:?}. It was submitted glued to that text, not as a message of its own",
                sig.chars, f.prompt.chars, sig.head, sig.tail, f.prompt.head, f.prompt.tail
            );
            self.stick_flight(session, StuckClass::Merged, detail, now, now_ms, out);
        }
    }

    // ----- the gate -----

    fn pump(&mut self, session: &str, now: Instant, now_ms: u64, out: &mut Out<'_>) {
        let q = self.session(session);
        if q.flight.is_some() {
            return;
        }
        let queued: Vec<ItemId> = q.items.clone();
        let queued: Vec<ItemId> =
            queued.into_iter().filter(|id| self.items.get(id).is_some_and(|i| i.state == State::Queued)).collect();
        if queued.is_empty() {
            self.session(session).hold = None;
            return;
        }
        let q = self.session(session);
        if let Some(reason) = &q.paused {
            let reason = format!(
                "paused by the operator{}",
                if reason.is_empty() { String::new() } else { format!(": {reason}") }
            );
            self.set_hold(session, reason, now_ms);
            return;
        }
        let Some(live) = q.live.clone() else {
            self.set_hold(session, "the session is not running", now_ms);
            return;
        };
        if live.lifecycle == Lifecycle::Exited {
            self.set_hold(session, "the session has exited", now_ms);
            return;
        }
        if live.lifecycle == Lifecycle::Starting || !live.ready {
            self.set_hold(session, "the session is starting (its TUI is not ready yet)", now_ms);
            return;
        }
        if live.activity == Activity::Blocked {
            let wait = live.wait.clone().unwrap_or_else(|| "the operator".into());
            self.set_hold(
                session,
                format!("the agent is waiting for {wait}; nothing is typed into its dialog"),
                now_ms,
            );
            return;
        }
        if let Some(at) = q.retry_at {
            if now < at {
                return;
            }
            q.retry_at = None;
        }
        // Items for an older generation follow the session into its new one.
        for id in &queued {
            if let Some(from) = self.items.get(id).and_then(|i| i.generation)
                && from != live.generation
            {
                if let Some(item) = self.items.get_mut(id) {
                    item.generation = Some(live.generation);
                }
                self.transition(
                    id,
                    State::Queued,
                    "retargeted",
                    format!("the session restarted; now for generation {} (was {from})", live.generation),
                    now_ms,
                    out,
                );
            }
        }
        // "Idle" from before the last prompt's Enter: the turn that prompt started may not show
        // yet, so it is not trusted where being idle matters.
        let stale = if live.activity == Activity::Idle { self.activity_stale(session, now_ms) } else { None };
        let stale_hold = |engine: &mut Engine, wait: u64, out: &mut Out<'_>| {
            engine.set_hold(session, "waiting to see the agent's state after the last prompt", now_ms);
            let at = now + Duration::from_millis(wait);
            engine.session(session).retry_at = Some(at);
            engine.arm_retry(session, at, out);
        };
        if live.rules.delivery.hold_while_working
            && let Some(wait) = stale
        {
            return stale_hold(self, wait, out);
        }
        if live.rules.delivery.hold_while_working && live.activity == Activity::Working {
            self.set_hold(
                session,
                "the agent is working and would take a prompt now as an interruption of its turn; waiting for it to finish",
                now_ms,
            );
            return;
        }
        let idle = live.activity == Activity::Idle && stale.is_none();
        let releasable: Vec<ItemId> = queued
            .iter()
            .filter(|id| self.items.get(*id).is_some_and(|i| i.when == When::Now || idle))
            .take(MAX_DIGEST)
            .cloned()
            .collect();
        if releasable.is_empty() {
            if let Some(wait) = stale {
                return stale_hold(self, wait, out);
            }
            self.set_hold(
                session,
                format!("waiting for the agent to be idle (it is {})", live.activity.as_str()),
                now_ms,
            );
            return;
        }
        self.session(session).hold = None;
        self.start_flight(session, releasable, live, Mode::Deliver, None, false, now, now_ms, out);
    }

    #[allow(clippy::too_many_arguments)]
    fn start_flight(
        &mut self,
        session: &str,
        ids: Vec<ItemId>,
        live: SessionView,
        mode: Mode,
        reply_to: Option<u64>,
        over_draft: bool,
        now: Instant,
        now_ms: u64,
        out: &mut Out<'_>,
    ) {
        let _ = now;
        let attempt = self.next_attempt;
        self.next_attempt += 1;
        let items: Vec<&Item> = ids.iter().filter_map(|id| self.items.get(id)).collect();
        // Sanitised here as well as by `desk send`: an intake file may come from elsewhere, and
        // nothing but text, newlines and tabs is ever typed.
        let text = text::sanitize(&if items.len() == 1 { items[0].text.clone() } else { text::digest(&items) });
        let fingerprint = text::fingerprint(&text);
        let prompt = PromptSig::of(&text);
        self.session(session).flight = Some(Flight {
            attempt,
            items: ids.clone(),
            text,
            fingerprint,
            prompt,
            over_draft,
            generation: live.generation,
            mode,
            phase: Phase::Baseline,
            waiting: None,
            baseline: Presence::default(),
            enters: 0,
            pasted_ms: None,
            enter_ms: None,
            activity_at_enter: live.activity,
            reply_to,
            read_failures: 0,
            deadline_passed: false,
            last_cursor_row: None,
            enter_cursor_row: None,
            dialog_seen: false,
            stale_at_enter: false,
            queue_ahead_at_enter: false,
        });
        let digest: Vec<ItemId> = if ids.len() > 1 { ids.clone() } else { Vec::new() };
        for id in &ids {
            let from = self.items.get(id).map(|i| i.state);
            if let Some(item) = self.items.get_mut(id) {
                item.digest_with = digest.iter().filter(|d| *d != id).cloned().collect();
                if item.generation.is_none() {
                    item.generation = Some(live.generation);
                }
            }
            let (kind, detail) = match mode {
                // An ordinary delivery is claimed when it is pasted, in the same batch as the
                // paste (persist before inject): a look at the screen that holds it back changes
                // nothing on disk.
                Mode::Deliver => continue,
                Mode::ForceEnter => ("forced", format!("attempt {attempt}: the operator forced an Enter")),
                Mode::Recover => ("recovering", format!("attempt {attempt}: found sending after a restart")),
            };
            if from == Some(State::Sending) && mode == Mode::Recover {
                if let Some(item) = self.items.get_mut(id) {
                    item.note(now_ms, kind, detail);
                }
            } else {
                self.transition(id, State::Sending, kind, detail, now_ms, out);
            }
        }
        self.request_snapshot(session, now, out);
    }

    fn request_snapshot(&mut self, session: &str, _now: Instant, out: &mut Out<'_>) {
        let Some((attempt, generation)) = self.session(session).flight.as_ref().map(|f| (f.attempt, f.generation))
        else {
            return;
        };
        let token = self.token(session, Some(attempt));
        if let Some(f) = self.session(session).flight.as_mut() {
            f.waiting = Some(token);
        }
        out.actions.push(Action::Snapshot { token, session: session.to_string(), generation });
    }

    fn arm(&mut self, session: &str, kind: TimerKind, at: Instant, out: &mut Out<'_>) {
        let (attempt, step) = self.session(session).flight.as_ref().map_or((None, 0), |f| (Some(f.attempt), f.enters));
        out.actions.push(Action::Arm { at, key: TimerKey { session: session.to_string(), attempt, kind, step } });
    }

    fn arm_retry(&mut self, session: &str, at: Instant, out: &mut Out<'_>) {
        out.actions.push(Action::Arm {
            at,
            key: TimerKey { session: session.into(), attempt: None, kind: TimerKind::Retry, step: 0 },
        });
    }

    fn settings(&self, session: &str) -> Option<(Rc<RuleSet>, bool)> {
        self.sessions.get(session)?.live.as_ref().map(|l| (l.rules.clone(), l.bracketed_paste))
    }

    // ----- results -----

    #[allow(clippy::too_many_arguments)]
    fn on_snapshot(
        &mut self,
        session: &str,
        attempt: Option<u64>,
        token: Token,
        result: Result<ScreenView, String>,
        now: Instant,
        now_ms: u64,
        out: &mut Out<'_>,
    ) {
        let Some(flight) = self.session(session).flight.clone() else { return };
        if Some(flight.attempt) != attempt || flight.waiting != Some(token) {
            return;
        }
        if let Some(f) = self.session(session).flight.as_mut() {
            f.waiting = None;
        }
        let Some((rules, _)) = self.settings(session) else { return };
        let settings = &rules.delivery;
        let screen = match result {
            Ok(screen) => screen,
            Err(e) => return self.read_failed(session, &flight, &e, now, now_ms, out),
        };
        let area = settings.input_area(&screen.lines);
        let presence = text::presence(area, &flight.fingerprint, settings.placeholder.as_ref());
        // A dialog: one of the provider's blocked screen rules matches, or the session reports
        // the agent blocked (a hook or a title may know of a dialog no screen rule describes).
        let reported_blocked = self
            .sessions
            .get(session)
            .and_then(|q| q.live.as_ref())
            .filter(|l| l.activity == Activity::Blocked)
            .map(|l| format!("the agent reports it waits for {}", l.wait.as_deref().unwrap_or("the operator")));
        let dialog = rules
            .match_screen_where(&screen.lines, |r| r.activity == Activity::Blocked)
            .map(|r| r.name.clone())
            .or(reported_blocked);
        let cursor_row = (screen.cursor_row, screen.lines.get(screen.cursor_row).cloned().unwrap_or_default());
        if let Some(f) = self.session(session).flight.as_mut() {
            f.last_cursor_row = Some(cursor_row.clone());
        }
        match flight.phase {
            Phase::Baseline => self.on_baseline(session, flight, screen, presence, dialog, now, now_ms, out),
            Phase::Echo => {
                if presence.more_than(flight.baseline) {
                    for id in &flight.items {
                        if let Some(item) = self.items.get_mut(id) {
                            item.note(
                                now_ms,
                                "echoed",
                                format!(
                                    "in the input area: {} text, {} placeholder(s)",
                                    presence.text, presence.placeholders
                                ),
                            );
                        }
                    }
                    if let Some(rule) = dialog {
                        return self.stick_for_dialog(session, &rule, now, now_ms, out);
                    }
                    if settings.submit_delay.is_zero() {
                        if let Some(rest) = foreign_text(settings, &flight, &screen.lines) {
                            return self.stick_merged_in_box(session, &rest, now, now_ms, out);
                        }
                        self.press_enter(session, now, now_ms, out);
                    } else {
                        if let Some(f) = self.session(session).flight.as_mut() {
                            f.phase = Phase::Settle;
                        }
                        self.arm(session, TimerKind::Settle, now + settings.submit_delay, out);
                    }
                } else if flight.deadline_passed && !settings.knows_composer() && !screen.canonical {
                    // The program stopped reading a line (an editor took over): what the keys did
                    // there cannot be seen, so it is not "missing" — a force would type it again.
                    self.stick_flight(
                        session,
                        StuckClass::Unobservable,
                        "the program left line input (raw mode: an editor or full-screen program) and the text is not on screen; what it did with the keys cannot be seen. Not re-pasting".into(),
                        now,
                        now_ms,
                        out,
                    );
                } else if flight.deadline_passed {
                    self.stick_flight(
                        session,
                        StuckClass::PasteMissing,
                        format!(
                            "the paste did not show in the input area within {} ms; not re-pasting",
                            settings.echo_timeout.as_millis()
                        ),
                        now,
                        now_ms,
                        out,
                    );
                } else {
                    self.arm(session, TimerKind::Poll, now + settings.poll, out);
                }
            }
            Phase::Settle => {
                // The pre-Enter look after a settle delay.
                if let Some(rule) = dialog {
                    return self.stick_for_dialog(session, &rule, now, now_ms, out);
                }
                if let Some(rest) = foreign_text(settings, &flight, &screen.lines) {
                    return self.stick_merged_in_box(session, &rest, now, now_ms, out);
                }
                self.press_enter(session, now, now_ms, out);
            }
            Phase::Submit => {
                let line_edited = screen.canonical;
                self.on_submit_look(session, &flight, presence, dialog, cursor_row, line_edited, now, now_ms, out)
            }
            Phase::Pasting | Phase::Entering => {}
        }
    }

    /// A look at the screen after an Enter: submitted, still waiting, Enter again, or stuck.
    #[allow(clippy::too_many_arguments)]
    fn on_submit_look(
        &mut self,
        session: &str,
        flight: &Flight,
        presence: Presence,
        dialog: Option<String>,
        cursor_row: (usize, String),
        line_edited: bool,
        now: Instant,
        now_ms: u64,
        out: &mut Out<'_>,
    ) {
        let Some((rules, _)) = self.settings(session) else { return };
        let settings = &rules.delivery;
        if let Some(rule) = dialog {
            // A dialog may cover the input area: the text not showing there proves nothing,
            // and an Enter would answer the dialog.
            if !flight.dialog_seen {
                if let Some(f) = self.session(session).flight.as_mut() {
                    f.dialog_seen = true;
                }
                for id in &flight.items {
                    if let Some(item) = self.items.get_mut(id) {
                        item.note(
                            now_ms,
                            "dialog",
                            format!("a dialog ({rule}) is on screen after Enter; the input area is no evidence while it shows"),
                        );
                    }
                }
            }
            if flight.deadline_passed {
                return self.stick_flight(
                    session,
                    StuckClass::SubmitStuck,
                    format!(
                        "a dialog ({rule}) showed after Enter and stayed; whether the prompt was submitted is unknown, and no Enter is pressed into a dialog"
                    ),
                    now,
                    now_ms,
                    out,
                );
            }
            return self.arm(session, TimerKind::Poll, now + settings.poll, out);
        }
        if !presence.more_than(flight.baseline) {
            return self.submitted(session, "the text left the input area".into(), false, now, now_ms, out);
        }
        // Without input borders, in a session whose line the kernel edits (canonical mode: a
        // shell, `cat`), an Enter always ends the line, and its echo moves the cursor on: the
        // line it was typed on changing is the evidence. A raw-mode application may take an
        // Enter as a newline in its own box, so there the cursor moving proves nothing.
        if !settings.bordered()
            && line_edited
            && let Some(before) = &flight.enter_cursor_row
            && *before != cursor_row
        {
            return self.submitted(
                session,
                format!("the line it was typed on changed after Enter (cursor row {} → {})", before.0, cursor_row.0),
                false,
                now,
                now_ms,
                out,
            );
        }
        if !flight.deadline_passed {
            return self.arm(session, TimerKind::Poll, now + settings.poll, out);
        }
        if flight.enters <= settings.enter_retries {
            for id in &flight.items {
                if let Some(item) = self.items.get_mut(id) {
                    item.note(
                        now_ms,
                        "retry",
                        "the text still sits in the input area (looked again); pressing Enter again",
                    );
                }
            }
            return self.press_enter(session, now, now_ms, out);
        }
        self.stick_flight(
            session,
            StuckClass::SubmitStuck,
            format!("the text stayed in the input area after {} Enter(s)", flight.enters),
            now,
            now_ms,
            out,
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn on_baseline(
        &mut self,
        session: &str,
        flight: Flight,
        screen: ScreenView,
        presence: Presence,
        dialog: Option<String>,
        now: Instant,
        now_ms: u64,
        out: &mut Out<'_>,
    ) {
        let Some((rules, _)) = self.settings(session) else { return };
        let settings = rules.delivery.clone();
        match flight.mode {
            Mode::Recover => {
                // Conclusive evidence only: a hook that reported the whole prompt after this
                // item's own paste is on record, or the text sitting in the input area (then an
                // Enter is safe). Without its paste on record, a hook with the same text may be
                // the late report of an earlier identical prompt (`continue`, twice).
                let items: Vec<&Item> = flight.items.iter().filter_map(|id| self.items.get(id)).collect();
                let pasted_at = items
                    .iter()
                    .filter_map(|i| i.evidence.iter().rev().find(|n| n.kind == "pasted").map(|n| n.at_ms))
                    .min();
                let same_hook = self.sessions.get(session).and_then(|q| {
                    q.hooks.iter().find(|(at, sig)| {
                        sig.digest == flight.prompt.digest && items.iter().any(|i| *at + 50 >= i.state_since_ms)
                    })
                });
                let hooked = same_hook.is_some_and(|(at, _)| pasted_at.is_some_and(|p| *at + 50 >= p));
                if same_hook.is_some() && !hooked {
                    return self.stick_flight(
                        session,
                        StuckClass::Interrupted,
                        "a UserPromptSubmit hook reported the same text, but this item's own paste is not on record (the daemon stopped between claiming and pasting it), so the hook may be the late report of an earlier identical prompt".into(),
                        now,
                        now_ms,
                        out,
                    );
                }
                if hooked {
                    return self.submitted(
                        session,
                        "a UserPromptSubmit hook reported it before the restart".into(),
                        true,
                        now,
                        now_ms,
                        out,
                    );
                }
                if presence.text > 0 || presence.placeholders > 0 {
                    if let Some(rule) = dialog {
                        return self.stick_flight(
                            session,
                            StuckClass::Interrupted,
                            format!("a dialog ({rule}) is on screen"),
                            now,
                            now_ms,
                            out,
                        );
                    }
                    for id in &flight.items {
                        if let Some(item) = self.items.get_mut(id) {
                            item.note(now_ms, "echoed", "found in the input area after the restart");
                        }
                    }
                    return self.enter_on_text_in_box(session, now, now_ms, out);
                }
                return self.stick_flight(
                    session,
                    StuckClass::Interrupted,
                    "no evidence settles whether it reached the agent (not in the input area, no hook)".into(),
                    now,
                    now_ms,
                    out,
                );
            }
            Mode::ForceEnter => {
                if let Some(rule) = dialog {
                    return self.stick_for_dialog(session, &rule, now, now_ms, out);
                }
                if typing_hold(&screen, now_ms).is_some() {
                    // An Enter now would submit what that person typed along with the prompt.
                    return self.stick_flight(
                        session,
                        StuckClass::SubmitStuck,
                        "someone is typing in an attached terminal; no Enter pressed (force again when they stop)"
                            .into(),
                        now,
                        now_ms,
                        out,
                    );
                }
                if presence.text == 0 && presence.placeholders == 0 {
                    // Nothing to press Enter for. It may have been submitted after all, or the
                    // box was cleared: the operator decides, with a re-paste one force away.
                    return self.stick_flight(
                        session,
                        StuckClass::PasteMissing,
                        "the text is no longer in the input area (it may have been submitted, or cleared); no Enter pressed. Check the agent, then desk force re-pastes it or desk drop forgets it".into(),
                        now,
                        now_ms,
                        out,
                    );
                }
                return self.enter_on_text_in_box(session, now, now_ms, out);
            }
            Mode::Deliver => {}
        }
        // An ordinary delivery (or a forced re-paste): the last look before typing. Nothing is
        // on disk yet: a gate that holds it back leaves every item as it was.
        let mut flight = flight;
        flight.items.retain(|id| self.items.get(id).is_some_and(|i| matches!(i.state, State::Queued | State::Stuck)));
        if flight.items.is_empty() {
            self.session(session).flight = None;
            return self.pump(session, now, now_ms, out);
        }
        let reply_to = flight.reply_to;
        let hold = |engine: &mut Engine, why: String, recheck: Option<Duration>, out: &mut Out<'_>| {
            engine.session(session).flight = None;
            match reply_to {
                // A force: the item stays as it was, and the operator is told why.
                Some(client) => out.actions.push(Action::Reply { client, ok: false, message: why, item: None }),
                None => engine.set_hold(session, why, now_ms),
            }
            if let Some(wait) = recheck {
                engine.session(session).retry_at = Some(now + wait);
                engine.arm_retry(session, now + wait, out);
            }
        };
        if let Some(rule) = dialog {
            return hold(
                self,
                format!("a dialog is on screen ({rule}); nothing is typed into it"),
                Some(HOLD_RECHECK),
                out,
            );
        }
        if let Some(wait) = typing_hold(&screen, now_ms) {
            return hold(self, "someone is typing in an attached terminal".into(), Some(wait), out);
        }
        if !settings.knows_composer() && !screen.canonical {
            // Not an agent's input box, and not a program reading a line: keys typed into an
            // editor or a full-screen program are commands, not a prompt.
            return hold(
                self,
                "the program is not reading a line (raw mode: an editor or full-screen program)".into(),
                Some(HOLD_RECHECK),
                out,
            );
        }
        if settings.knows_composer() && !flight.over_draft {
            let Some(draft) = settings.composer_text(&screen.lines) else {
                return hold(
                    self,
                    "the agent's input box is not on the screen; nothing is typed until it is".into(),
                    Some(HOLD_RECHECK),
                    out,
                );
            };
            if !draft.is_empty() {
                let n = draft.chars().count();
                // Desk's own text, left by a stuck delivery, is no better a place to paste onto.
                let stuck_in_box = self.sessions.get(session).and_then(|q| {
                    q.items.iter().find(|id| {
                        self.items
                            .get(*id)
                            .is_some_and(|i| i.state == State::Stuck && draft.contains(&text::normalize(&i.text)))
                    })
                });
                let why = match reply_to {
                    None if stuck_in_box.is_some() => format!(
                        "the input box holds the text of stuck item {}; desk force submits it, or clear the box; delivery waits until it is sent or cleared",
                        stuck_in_box.map(|i| i.as_str()).unwrap_or("")
                    ),
                    Some(_) => format!(
                        "the input box holds text typed by someone ({n} characters: {:?}); forcing now would paste this prompt after it and submit both as one message. Let them send or clear it, or run desk force {} --over-draft to do it anyway",
                        preview(&draft),
                        flight.items.first().map(|i| i.as_str()).unwrap_or("")
                    ),
                    None => format!("{DRAFT_HOLD} ({n} characters); delivery waits until it is sent or cleared"),
                };
                return hold(self, why, Some(HOLD_RECHECK), out);
            }
        }
        // Claimed now, in the same batch as the paste: persist before inject.
        let attempt = flight.attempt;
        let forced = reply_to.is_some();
        let count = flight.items.len();
        for id in &flight.items {
            let detail = match (forced, count) {
                (true, _) if flight.over_draft => {
                    format!("attempt {attempt}: the operator forced a paste onto text someone typed")
                }
                (true, _) => format!("attempt {attempt}: the operator forced a new paste"),
                (false, 1) => format!("attempt {attempt}"),
                (false, n) => format!("attempt {attempt}: one digest of {n} items"),
            };
            self.transition(id, State::Sending, "claimed", detail, now_ms, out);
        }
        if screen.canonical
            && let Some((line, len)) = text::overlong_line(&flight.text)
        {
            let why = format!(
                "refused: line {line} is {len} bytes and the session reads canonical input, which cuts lines at {} bytes",
                text::CANONICAL_LINE_MAX
            );
            self.session(session).flight = None;
            for id in &flight.items {
                if let Some(item) = self.items.get_mut(id) {
                    item.stuck = Some(StuckClass::PasteMissing);
                }
                self.transition(id, State::Stuck, "refused", why.clone(), now_ms, out);
            }
            if let Some(client) = reply_to {
                out.actions.push(Action::Reply { client, ok: false, message: why, item: None });
            }
            return self.pump(session, now, now_ms, out);
        }
        let bytes = text::paste_bytes(&flight.text, screen.bracketed_paste);
        let token = self.token(session, Some(flight.attempt));
        if let Some(f) = self.session(session).flight.as_mut() {
            f.items = flight.items.clone();
            f.baseline = presence;
            f.phase = Phase::Pasting;
            f.waiting = Some(token);
        }
        for id in &flight.items {
            if let Some(item) = self.items.get_mut(id) {
                item.attempts += 1;
                item.note(
                    now_ms,
                    "baseline",
                    format!(
                        "input area shows the text {} time(s), {} placeholder(s); {}",
                        presence.text,
                        presence.placeholders,
                        if screen.bracketed_paste { "bracketed paste" } else { "plain typing (no bracketed paste)" }
                    ),
                );
            }
        }
        out.actions.push(Action::Write {
            token,
            session: session.to_string(),
            generation: flight.generation,
            kind: WriteKind::Paste,
            bytes,
        });
    }

    /// Press Enter on text found sitting in the input box (a force, or a restart): verified
    /// against an empty baseline, as if it had just been pasted.
    fn enter_on_text_in_box(&mut self, session: &str, now: Instant, now_ms: u64, out: &mut Out<'_>) {
        if let Some(f) = self.session(session).flight.as_mut() {
            f.baseline = Presence::default();
            f.pasted_ms = Some(now_ms);
        }
        self.press_enter(session, now, now_ms, out);
    }

    fn press_enter(&mut self, session: &str, now: Instant, now_ms: u64, out: &mut Out<'_>) {
        let Some(flight) = self.session(session).flight.clone() else { return };
        let activity =
            self.sessions.get(session).and_then(|q| q.live.as_ref()).map_or(Activity::Unknown, |l| l.activity);
        let stale = activity == Activity::Idle && self.activity_stale(session, now_ms).is_some();
        let token = self.token(session, Some(flight.attempt));
        let q = self.session(session);
        let queue_ahead = q.owed.iter().any(|i| i.queued_by_agent);
        q.last_enter_ms = Some(now_ms);
        if let Some(f) = q.flight.as_mut() {
            f.phase = Phase::Entering;
            f.waiting = Some(token);
            f.enters += 1;
            f.enter_ms = Some(now_ms);
            f.deadline_passed = false;
            f.dialog_seen = false;
            f.enter_cursor_row = f.last_cursor_row.clone();
            if f.enters == 1 {
                f.activity_at_enter = activity;
                f.stale_at_enter = stale;
                f.queue_ahead_at_enter = queue_ahead;
            }
        }
        for id in &flight.items {
            if let Some(item) = self.items.get_mut(id) {
                item.note(now_ms, "enter", format!("Enter #{}", flight.enters + 1));
            }
        }
        let _ = now;
        out.actions.push(Action::Write {
            token,
            session: session.to_string(),
            generation: flight.generation,
            kind: WriteKind::Enter,
            bytes: b"\r".to_vec(),
        });
    }

    #[allow(clippy::too_many_arguments)]
    fn on_written(
        &mut self,
        session: &str,
        attempt: Option<u64>,
        token: Token,
        result: Result<(), WriteError>,
        now: Instant,
        now_ms: u64,
        out: &mut Out<'_>,
    ) {
        let Some(flight) = self.session(session).flight.clone() else { return };
        if Some(flight.attempt) != attempt || flight.waiting != Some(token) {
            return;
        }
        let Some((rules, _)) = self.settings(session) else { return };
        let settings: DeliverySettings = rules.delivery.clone();
        if let Err(WriteError::Unknown(e)) = &result {
            let what = if flight.phase == Phase::Pasting { WriteKind::Paste } else { WriteKind::Enter }.as_str();
            return self.stick_flight(
                session,
                StuckClass::Interrupted,
                format!("the connection failed before the session confirmed the {what} ({e}); it may or may not have been typed"),
                now,
                now_ms,
                out,
            );
        }
        match (flight.phase, result) {
            (Phase::Pasting, Ok(())) => {
                if let Some(f) = self.session(session).flight.as_mut() {
                    f.phase = Phase::Echo;
                    f.waiting = None;
                    f.pasted_ms = Some(now_ms);
                }
                // On record before anything else happens: a hook may settle this item after a
                // restart only if its own paste is in its evidence.
                for id in &flight.items {
                    self.transition(
                        id,
                        State::Sending,
                        "pasted",
                        format!("{} bytes accepted by the session", flight.text.len()),
                        now_ms,
                        out,
                    );
                }
                self.arm(session, TimerKind::Deadline, now + settings.echo_timeout, out);
                self.arm(session, TimerKind::Poll, now + settings.poll.min(Duration::from_millis(10)), out);
            }
            (Phase::Pasting, Err(WriteError::Refused(e))) => {
                // The master refuses an INPUT frame whole: nothing was typed. Queue it again
                // and back off.
                self.session(session).flight = None;
                for id in &flight.items {
                    self.transition(
                        id,
                        State::Queued,
                        "refused",
                        format!("the session refused the paste: {e}; nothing was typed"),
                        now_ms,
                        out,
                    );
                }
                self.backoff(session, &format!("the session refused input: {e}"), now, now_ms, out);
            }
            (Phase::Entering, Ok(())) => {
                if let Some(f) = self.session(session).flight.as_mut() {
                    f.phase = Phase::Submit;
                    f.waiting = None;
                }
                self.arm(session, TimerKind::Deadline, now + settings.submit_timeout, out);
                self.arm(session, TimerKind::Poll, now + settings.poll, out);
            }
            (Phase::Entering, Err(WriteError::Refused(e))) => {
                self.stick_flight(
                    session,
                    StuckClass::SubmitStuck,
                    format!("the session refused the Enter: {e}"),
                    now,
                    now_ms,
                    out,
                );
            }
            _ => {}
        }
    }

    fn read_failed(
        &mut self,
        session: &str,
        flight: &Flight,
        error: &str,
        now: Instant,
        now_ms: u64,
        out: &mut Out<'_>,
    ) {
        match flight.phase {
            Phase::Baseline if flight.mode == Mode::Deliver => {
                self.session(session).flight = None;
                for id in &flight.items {
                    self.transition(
                        id,
                        State::Queued,
                        "hold",
                        format!("cannot read the screen: {error}; nothing was typed"),
                        now_ms,
                        out,
                    );
                }
                self.backoff(session, &format!("cannot read the screen: {error}"), now, now_ms, out);
            }
            Phase::Baseline => self.stick_flight(
                session,
                StuckClass::Unobservable,
                format!("cannot read the screen: {error}"),
                now,
                now_ms,
                out,
            ),
            Phase::Echo if flight.deadline_passed => self.stick_flight(
                session,
                StuckClass::Unobservable,
                format!("cannot read the screen at the end of the echo window: {error}; not re-pasting"),
                now,
                now_ms,
                out,
            ),
            Phase::Settle => self.stick_flight(
                session,
                StuckClass::SubmitStuck,
                format!("the text was echoed, but the look before the Enter failed: {error}; no Enter pressed blind"),
                now,
                now_ms,
                out,
            ),
            Phase::Submit if flight.deadline_passed => self.stick_flight(
                session,
                StuckClass::Unobservable,
                format!(
                    "cannot read the screen at the end of the verification window: {error}; no Enter pressed blind"
                ),
                now,
                now_ms,
                out,
            ),
            _ => {
                // Keep trying until the phase's deadline; it decides.
                if let Some(f) = self.session(session).flight.as_mut() {
                    f.read_failures += 1;
                }
                if let Some((rules, _)) = self.settings(session) {
                    let poll = rules.delivery.poll;
                    self.arm(session, TimerKind::Poll, now + poll, out);
                }
            }
        }
    }

    fn on_persist_failed(
        &mut self,
        session: &str,
        attempt: Option<u64>,
        error: &str,
        now: Instant,
        now_ms: u64,
        out: &mut Out<'_>,
    ) {
        // The rest of that batch did not happen. If it was a claim, nothing was typed; if it
        // was a final state, the item stays `sending` on disk and a restart settles it.
        let Some(flight) = self.session(session).flight.clone() else { return };
        if Some(flight.attempt) != attempt {
            return;
        }
        self.session(session).flight = None;
        for id in &flight.items {
            if let Some(item) = self.items.get_mut(id) {
                item.note(now_ms, "error", format!("cannot write the item's state: {error}"));
            }
        }
        if flight.pasted_ms.is_none() && flight.mode == Mode::Deliver {
            for id in &flight.items {
                if let Some(item) = self.items.get_mut(id) {
                    item.state = State::Queued;
                }
            }
        }
        self.backoff(session, &format!("cannot write delivery state: {error}"), now, now_ms, out);
    }

    fn on_timer(&mut self, key: TimerKey, now: Instant, now_ms: u64, out: &mut Out<'_>) {
        let session = key.session.clone();
        if key.kind == TimerKind::Drained {
            return self.taken_from_queue(&session, now_ms, out);
        }
        if key.kind == TimerKind::Retry {
            if self.sessions.get(&session).is_some_and(|q| q.retry_at.is_some_and(|t| now < t)) {
                return;
            }
            if let Some(q) = self.sessions.get_mut(&session) {
                q.retry_at = None;
            }
            return self.pump(&session, now, now_ms, out);
        }
        let Some(flight) = self.sessions.get(&session).and_then(|q| q.flight.clone()) else { return };
        if Some(flight.attempt) != key.attempt || (key.kind != TimerKind::Poll && key.step != flight.enters) {
            return;
        }
        match key.kind {
            TimerKind::Poll => {
                if matches!(flight.phase, Phase::Echo | Phase::Submit) && flight.waiting.is_none() {
                    self.request_snapshot(&session, now, out);
                }
            }
            TimerKind::Settle => {
                if flight.phase == Phase::Settle {
                    self.request_snapshot(&session, now, out);
                }
            }
            TimerKind::Deadline => match flight.phase {
                Phase::Echo => {
                    // Decide on a fresh look: a paste that showed after the last poll is there.
                    if let Some(f) = self.session(&session).flight.as_mut() {
                        f.deadline_passed = true;
                    }
                    if flight.waiting.is_none() {
                        self.request_snapshot(&session, now, out);
                    }
                }
                Phase::Submit => {
                    // Decide on a fresh look, never on an older one.
                    if let Some(f) = self.session(&session).flight.as_mut() {
                        f.deadline_passed = true;
                    }
                    if flight.waiting.is_none() {
                        self.request_snapshot(&session, now, out);
                    }
                }
                _ => {}
            },
            TimerKind::Retry | TimerKind::Drained => {}
        }
    }

    fn backoff(&mut self, session: &str, why: &str, now: Instant, now_ms: u64, out: &mut Out<'_>) {
        let q = self.session(session);
        q.failures = (q.failures + 1).min(16);
        let delay = BACKOFF_BASE.saturating_mul(1 << (q.failures - 1).min(6)).min(BACKOFF_MAX);
        q.retry_at = Some(now + delay);
        self.set_hold(session, format!("{why}; retrying in {} s", delay.as_secs()), now_ms);
        self.arm_retry(session, now + delay, out);
    }

    /// The flight is delivered on `evidence`; `by_hook` when that evidence is the agent's own
    /// UserPromptSubmit report (otherwise the report is still owed, see `owed`).
    fn submitted(
        &mut self,
        session: &str,
        evidence: String,
        by_hook: bool,
        now: Instant,
        now_ms: u64,
        out: &mut Out<'_>,
    ) {
        let Some(flight) = self.session(session).flight.take() else { return };
        self.session(session).failures = 0;
        // Delivered on other evidence: its hook is owed, and recorded as owed on disk. Typed
        // into a working agent, one shown idle only from before the previous prompt, or one
        // with earlier prompts still in its own queue (it takes them first, at a turn boundary
        // that can look idle), it may sit in the agent's own queue.
        let mid_turn =
            flight.activity_at_enter == Activity::Working || flight.stale_at_enter || flight.queue_ahead_at_enter;
        for id in &flight.items {
            if !by_hook && let Some(item) = self.items.get_mut(id) {
                item.hook_owed = Some(flight.prompt.digest.clone());
                item.queued_by_agent = mid_turn;
            }
            self.transition(id, State::Delivered, "delivered", evidence.clone(), now_ms, out);
            if !by_hook && let Some(Action::Persist { item, .. }) = out.actions.last() {
                let item = item.clone();
                self.owe(item);
            }
        }
        if let Some(client) = flight.reply_to {
            out.actions.push(Action::Reply { client, ok: true, message: format!("delivered: {evidence}"), item: None });
        }
        self.pump(session, now, now_ms, out);
    }

    /// Whether the session's activity predates the last Enter (and that Enter is recent).
    fn activity_stale(&self, session: &str, now_ms: u64) -> Option<u64> {
        let q = self.sessions.get(session)?;
        let enter = q.last_enter_ms?;
        let until = enter + STATE_AFTER_SUBMIT.as_millis() as u64;
        (q.activity_changed_ms < enter && now_ms < until).then(|| until - now_ms)
    }

    /// The agent has stayed idle for [`QUEUE_DRAINED`]: its own queue is empty, so every prompt
    /// that may have waited in it and was typed before this idle began was taken. Recorded, so
    /// that an exit later does not count those prompts as lost. (A prompt is never called taken
    /// earlier on the strength of a turn starting: agents go idle for a moment between queued
    /// turns, and which prompt a turn belongs to cannot be seen.)
    fn taken_from_queue(&mut self, session: &str, now_ms: u64, out: &mut Out<'_>) {
        let q = self.session(session);
        let idle_since = q.activity_changed_ms;
        let still_idle = q.live.as_ref().is_some_and(|l| l.activity == Activity::Idle);
        if !still_idle || now_ms < idle_since + QUEUE_DRAINED.as_millis() as u64 {
            return;
        }
        let taken: Vec<usize> = (0..q.owed.len())
            .filter(|j| q.owed[*j].queued_by_agent && q.owed[*j].state_since_ms <= idle_since)
            .collect();
        for i in taken {
            let mut item = self.session(session).owed[i].clone();
            item.queued_by_agent = false;
            let note = format!(
                "the agent has been idle for {} s since after it: its own queue is empty, so it took the prompt",
                QUEUE_DRAINED.as_secs()
            );
            if let Some(item) = self.record_delivered(item, "taken", note, now_ms, out) {
                self.session(session).owed[i] = item;
            }
        }
    }

    /// Persist a change to a delivered item kept only among the owed ones (it stays delivered,
    /// with a new note); returns the record as written.
    fn record_delivered(
        &mut self,
        item: Item,
        kind: &str,
        note: String,
        now_ms: u64,
        out: &mut Out<'_>,
    ) -> Option<Item> {
        let id = item.id.clone();
        self.items.insert(id.clone(), item);
        self.transition(&id, State::Delivered, kind, note, now_ms, out);
        match out.actions.last() {
            Some(Action::Persist { item, .. }) => Some(item.clone()),
            _ => None,
        }
    }

    /// Remember a delivered item whose UserPromptSubmit hook is still to come.
    fn owe(&mut self, item: Item) {
        let q = self.session(&item.session);
        q.owed.push_back(item);
        while q.owed.len() > RECENT_HOOKS {
            q.owed.pop_front();
        }
    }

    /// The session ended: a prompt the agent had queued mid-turn and never reported taking
    /// (its hook never came, though the agent sends hooks) did not reach it.
    fn unpaid_at_exit(&mut self, session: &str, now_ms: u64, out: &mut Out<'_>) {
        let owed: Vec<Item> = self.session(session).owed.drain(..).collect();
        for mut item in owed.into_iter().filter(|i| i.queued_by_agent) {
            item.stuck = Some(StuckClass::Interrupted);
            item.hook_owed = None;
            let id = item.id.clone();
            let q = self.session(session);
            let pos = q.items.partition_point(|i| *i < id);
            q.items.insert(pos, id.clone());
            self.items.insert(id.clone(), item);
            self.transition(
                &id,
                State::Stuck,
                "stuck",
                "interrupted: the session ended while this prompt may still have waited in the agent's own queue: neither its UserPromptSubmit hook nor the agent staying idle after it showed that the agent took it".into(),
                now_ms,
                out,
            );
        }
    }

    /// The text is (or may be) in the input box, and a dialog shows: an Enter would answer the
    /// dialog, so the item is stuck until the operator has dealt with it (`desk force` then
    /// presses Enter only, if the text is still there).
    fn stick_for_dialog(&mut self, session: &str, rule: &str, now: Instant, now_ms: u64, out: &mut Out<'_>) {
        self.stick_flight(
            session,
            StuckClass::SubmitStuck,
            format!("a dialog ({rule}) is on screen; not pressing Enter"),
            now,
            now_ms,
            out,
        );
    }

    /// The composer holds the prompt and text someone else typed: an Enter would submit them as
    /// one message, so none is pressed.
    fn stick_merged_in_box(&mut self, session: &str, rest: &str, now: Instant, now_ms: u64, out: &mut Out<'_>) {
        let prompt = self.session(session).flight.as_ref().map(|f| f.prompt.head.clone()).unwrap_or_default();
        let detail = format!(
            "the input box holds this prompt ({prompt:?}…) together with text someone else typed ({rest:?}); no Enter pressed, as it would submit both as one message"
        );
        self.stick_flight(session, StuckClass::Merged, detail, now, now_ms, out);
    }

    fn stick_flight(
        &mut self,
        session: &str,
        class: StuckClass,
        detail: String,
        now: Instant,
        now_ms: u64,
        out: &mut Out<'_>,
    ) {
        let Some(flight) = self.session(session).flight.take() else { return };
        for id in &flight.items {
            self.stick(id, class, detail.clone(), now_ms, out);
        }
        if let Some(client) = flight.reply_to {
            out.actions.push(Action::Reply {
                client,
                ok: false,
                message: format!("stuck ({}): {detail}", class.as_str()),
                item: None,
            });
        }
        // The next items go on their own: a stuck one never blocks the queue.
        self.pump(session, now, now_ms, out);
    }

    /// Settle items found `sending` at start-up, one at a time, once the session is observable.
    fn recover(&mut self, session: &str, now: Instant, now_ms: u64, out: &mut Out<'_>) {
        let q = self.session(session);
        if q.flight.is_some() {
            return;
        }
        let Some(live) = q.live.clone() else { return };
        let sending: Vec<ItemId> = q
            .items
            .clone()
            .into_iter()
            .filter(|id| self.items.get(id).is_some_and(|i| i.state == State::Sending))
            .collect();
        let Some(first) = sending.first().cloned() else { return };
        let generation_matches =
            self.items.get(&first).is_some_and(|i| i.generation.is_none_or(|g| g == live.generation));
        if !generation_matches {
            for id in sending {
                self.stick(
                    &id,
                    StuckClass::Interrupted,
                    "the session restarted while it was being delivered".into(),
                    now_ms,
                    out,
                );
            }
            return;
        }
        // A digest claimed together is recovered together.
        let group: Vec<ItemId> = match self.items.get(&first) {
            Some(item) if !item.digest_with.is_empty() => {
                let mut g: Vec<ItemId> =
                    std::iter::once(first.clone()).chain(item.digest_with.iter().cloned()).collect();
                g.retain(|id| self.items.get(id).is_some_and(|i| i.state == State::Sending));
                g.sort();
                g
            }
            _ => vec![first],
        };
        self.start_flight(session, group, live, Mode::Recover, None, false, now, now_ms, out);
    }

    // ----- operator commands -----

    fn on_command(&mut self, client: u64, command: Command, now: Instant, now_ms: u64, out: &mut Out<'_>) {
        let reply = |out: &mut Out<'_>, ok: bool, message: String| {
            out.actions.push(Action::Reply { client, ok, message, item: None })
        };
        match command {
            Command::Pause { session, reason } => {
                self.session(&session).paused = Some(reason);
                self.pump(&session, now, now_ms, out);
                reply(out, true, format!("paused delivery to {session}"));
            }
            Command::Resume { session } => {
                let was = self.session(&session).paused.take();
                self.session(&session).retry_at = None;
                self.pump(&session, now, now_ms, out);
                reply(
                    out,
                    true,
                    if was.is_some() {
                        format!("resumed delivery to {session}")
                    } else {
                        format!("{session} was not paused")
                    },
                );
            }
            Command::Drop(id) => match self.items.get(&id).map(|i| (i.state, i.session.clone())) {
                None => reply(out, false, format!("no pending item {id} (it may be delivered or dropped already)")),
                Some((_, session))
                    if self
                        .sessions
                        .get(&session)
                        .and_then(|q| q.flight.as_ref())
                        .is_some_and(|f| f.items.contains(&id)) =>
                {
                    reply(out, false, format!("item {id} is being delivered right now; drop it once it settles"))
                }
                Some((State::Sending, _)) => {
                    reply(out, false, format!("item {id} is being delivered right now; drop it once it settles"))
                }
                Some((_, session)) => {
                    self.transition(&id, State::Dropped, "dropped", "dropped by the operator".into(), now_ms, out);
                    reply(out, true, format!("dropped {id}"));
                    self.pump(&session, now, now_ms, out);
                }
            },
            Command::Force { id, over_draft } => {
                let Some(item) = self.items.get(&id).cloned() else {
                    return reply(out, false, format!("no pending item {id}"));
                };
                let q = self.session(&item.session);
                let held_by_draft = q.hold.as_ref().is_some_and(|h| h.reason.starts_with(DRAFT_HOLD));
                match (item.state, item.stuck) {
                    (State::Stuck, Some(StuckClass::Merged)) => {
                        return reply(
                            out,
                            false,
                            format!(
                                "item {id} is merged with text someone else typed (see desk item {id}): forcing could send it a second time, or submit that text with it. Check the agent, then desk drop {id}, or desk send it again if it must arrive on its own"
                            ),
                        );
                    }
                    (State::Stuck, _) => {}
                    (State::Queued, _) if held_by_draft && !over_draft => {
                        let hold = q.hold.as_ref().map(|h| h.reason.clone()).unwrap_or_default();
                        return reply(
                            out,
                            false,
                            format!(
                                "item {id} is held: {hold}. Forcing it would paste the prompt after that text and submit both as one message; run desk force {id} --over-draft to do that, or wait until the box is sent or cleared"
                            ),
                        );
                    }
                    (State::Queued, _) if held_by_draft => {}
                    (state, _) => {
                        let hold = match (state, &q.hold) {
                            (State::Queued, Some(h)) => format!("; it waits because {}", h.reason),
                            _ => String::new(),
                        };
                        return reply(
                            out,
                            false,
                            format!(
                                "item {id} is {}, not stuck{hold}; only stuck items, and items held by a draft in the input box (with --over-draft), are forced",
                                state.as_str()
                            ),
                        );
                    }
                }
                let q = self.session(&item.session);
                if q.flight.is_some() {
                    return reply(
                        out,
                        false,
                        format!("another delivery to {} is in flight; force again when it settles", item.session),
                    );
                }
                let Some(live) = q.live.clone() else {
                    return reply(out, false, format!("session {} is not running", item.session));
                };
                if live.lifecycle != Lifecycle::Running {
                    return reply(out, false, format!("session {} is {}", item.session, live.lifecycle.as_str()));
                }
                if live.activity == Activity::Blocked {
                    return reply(
                        out,
                        false,
                        format!("the agent in {} is waiting for the operator; answer it first", item.session),
                    );
                }
                let mode = if item.stuck == Some(StuckClass::SubmitStuck) { Mode::ForceEnter } else { Mode::Deliver };
                if let Some(i) = self.items.get_mut(&id) {
                    i.note(
                        now_ms,
                        "forced",
                        match mode {
                            Mode::ForceEnter => "operator: press Enter",
                            _ if over_draft => "operator: paste, even onto text someone typed",
                            _ => "operator: paste again",
                        },
                    );
                }
                let session = item.session.clone();
                self.start_flight(&session, vec![id], live, mode, Some(client), over_draft, now, now_ms, out);
            }
        }
    }
}

/// Text in the composer besides the prompt being delivered, when the composer can be read and
/// shows the prompt (whole, or as the provider's paste placeholder); `None` when there is none
/// or it cannot be told.
fn foreign_text(settings: &DeliverySettings, flight: &Flight, lines: &[String]) -> Option<String> {
    if flight.over_draft || flight.mode != Mode::Deliver || !settings.knows_composer() {
        return None;
    }
    let composer = settings.composer_text(lines)?;
    let ours = text::normalize(&flight.text);
    let rest = if let Some(i) = composer.find(&ours) {
        format!("{} {}", &composer[..i], &composer[i + ours.len()..])
    } else if let Some(re) = settings.placeholder.as_ref().filter(|re| re.is_match(&composer)) {
        re.replace_all(&composer, " ").into_owned()
    } else {
        return None;
    };
    let rest = text::normalize(&rest);
    (!rest.is_empty()).then_some(rest)
}

/// The start of a text, for a message: at most 40 characters.
fn preview(text: &str) -> String {
    let mut out: String = text.chars().take(40).collect();
    if text.chars().count() > 40 {
        out.push('…');
    }
    out
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
