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

use super::item::{Item, ItemId, State, StuckClass, When};
use super::line;
use super::settings::DeliverySettings;
use super::text::{self, Fingerprint, Held, Presence};
use crate::state::hooks::{HookEvent, PromptSig};
use crate::state::{Activity, Lifecycle, RuleSet};
use crate::time::Backoff;
use unsent::OWN_PASTE_HOLD;

mod io;
mod unsent;
pub use io::{
    Action, Command, Hold, Input, Past, PastEvent, ScreenView, SessionView, TimerKey, TimerKind, Token, WriteError,
    WriteKind,
};

/// While a controller has typed within the last 2 s, delivery waits: a paste must not land in
/// the middle of what a person is typing.
pub const TYPING_HOLD: Duration = Duration::from_secs(2);

/// Why an item found `sending` is stuck although a hook reported its text.
const SAME_TEXT_NO_PASTE: &str = "a UserPromptSubmit hook reported the same text, but this item's own paste is not on record (the daemon stopped between claiming and pasting it), so the hook may be the late report of an earlier identical prompt";

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
    /// Backspaces sent to clear desk's own prompt; waiting for the master to accept them.
    Erasing,
    /// Looking whether the input box is clear.
    Erased,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// An ordinary delivery: paste then Enter.
    Deliver,
    /// An operator's force on a submit-stuck item: Enter only.
    ForceEnter,
    /// After a restart, an item found `sending`: settle it from evidence.
    Recover,
    /// An operator's drop of a stuck item whose prompt sits unsent in the input box: erase it
    /// there, once the box is proven to hold exactly that prompt (see `unsent`).
    Clear,
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
    /// This flight wrote a paste (accepted or not): an operator is told it pasted again.
    paste_written: bool,
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
    /// Typed at a shell's empty prompt (its own line editor reads it): its Enter is taken on
    /// the shell's evidence ([`line::shell_took_line`]).
    at_shell_prompt: bool,
    /// Typed line by line (no bracketed paste) as this many lines, each ended by an Enter: the
    /// program takes them as that many submissions (0: pasted whole).
    typed_lines: u32,
}

impl Flight {
    /// What this flight typed, in words for the operator who forced it.
    fn did(&self) -> String {
        let enters = match self.enters {
            0 => String::new(),
            1 => "pressed Enter".to_string(),
            n => format!("pressed Enter {n} times"),
        };
        match (self.paste_written, enters.is_empty()) {
            (true, true) => "pasted again".into(),
            (true, false) => format!("pasted again and {enters}"),
            (false, false) => enters,
            (false, true) => "typed nothing".into(),
        }
    }

    /// Whether this flight typed anything.
    fn acted(&self) -> bool {
        self.paste_written || self.enters > 0
    }
}

/// How a forced delivery that did not deliver ended, in words for the operator.
fn forced_outcome(class: StuckClass, detail: &str) -> String {
    match class {
        StuckClass::PasteMissing if detail.starts_with("the paste did not show") => {
            format!("still not seen in the input area: the item stays stuck (paste-missing): {detail}")
        }
        _ => format!("stuck ({}): {detail}", class.as_str()),
    }
}

/// What a new flight is: which items, how they go, and who waits for its outcome.
#[derive(Debug)]
struct Launch {
    ids: Vec<ItemId>,
    mode: Mode,
    /// The operator client awaiting the outcome of a force.
    reply_to: Option<u64>,
    /// Paste even onto text someone typed (`desk force --over-draft`).
    over_draft: bool,
}

/// One look at the screen during a delivery, and what the engine reads from it.
#[derive(Debug)]
struct Look {
    screen: ScreenView,
    /// How often the prompt (or the provider's paste placeholder) shows in the input area.
    presence: Presence,
    /// The dialog on screen: a blocked screen rule's name, or the agent reporting it waits.
    dialog: Option<String>,
    /// The cursor's row: its index and its text.
    cursor_row: (usize, String),
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

    /// Start-up: adopt the items found on disk, settle half-settled digests, start what may go.
    fn on_restore(&mut self, items: Vec<Item>, out: &mut Out<'_>) {
        let settled: HashMap<ItemId, Item> = items
            .iter()
            .filter(|i| matches!(i.state, State::Delivered | State::Stuck))
            .map(|i| (i.id.clone(), i.clone()))
            .collect();
        for item in items {
            self.adopt(item);
        }
        self.settle_with_digest_siblings(&settled, out);
        let names: Vec<String> = self.sessions.keys().cloned().collect();
        for name in names {
            self.pump(&name, out);
        }
    }

    /// Items of one digest prompt settle together. A crash between their records can leave one
    /// settled and another `sending`; the one left takes its sibling's outcome (recovered on its
    /// own, with its own text, it would look undelivered, and a force would repeat it).
    fn settle_with_digest_siblings(&mut self, settled: &HashMap<ItemId, Item>, out: &mut Out<'_>) {
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
            if let Some(item) = self.items.get_mut(&id) {
                item.hook_owed = sibling.hook_owed.clone();
            }
            match (sibling.state, sibling.stuck) {
                (State::Stuck, Some(class)) => self.stick(&id, class, why, out),
                _ => {
                    if let Some(item) = self.items.get_mut(&id) {
                        item.queued_by_agent = sibling.queued_by_agent;
                    }
                    self.transition(&id, State::Delivered, "delivered", why, out);
                    // Its hook is owed with its sibling's: the one hook pays both.
                    if let Some(Action::Persist { item, .. }) = out.actions.last()
                        && item.hook_owed.is_some()
                    {
                        let item = item.clone();
                        self.owe(item);
                    }
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

    fn on_session(&mut self, view: SessionView, out: &mut Out<'_>) {
        let (now, now_ms) = (out.now, out.now_ms);
        let name = view.name.clone();
        let q = self.session(&name);
        let old_generation = q.live.as_ref().map(|l| l.generation);
        let was = q.live.as_ref().map(|l| l.activity);
        q.known_down = false;
        if old_generation.is_some_and(|g| g != view.generation) {
            // A new generation: whatever was in flight for the old one is cut off.
            self.interrupt(&name, "the session restarted (new generation) during delivery", out);
        }
        // The agents of earlier generations are gone (the daemon replayed the journal first, so
        // what they reported is weighed); nothing this generation does settles their items.
        let generation = view.generation;
        let why = format!("the session restarted (generation {generation} runs now)");
        self.generation_over(&name, |g| g < generation, &why, out);
        self.boxes_gone(&name, generation, out);
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
        if turned_working
            && let Some(f) = self.flight(&name)
            && f.phase == Phase::Submit
            && f.activity_at_enter != Activity::Working
            && !f.dialog_seen
            // With a prompt of its own queue ahead, the turn may be that prompt's.
            && !f.queue_ahead_at_enter
        {
            self.submitted(&name, "the agent's activity turned working after Enter".into(), false, out);
            return;
        }
        // Items found `sending` at start-up are settled once their session is observable.
        self.recover(&name, out);
        self.pump(&name, out);
    }

    fn on_down(&mut self, session: &str, generation: Option<u32>, out: &mut Out<'_>) {
        let q = self.session(session);
        // A report about another generation than the live one is old news.
        if let Some(generation) = generation
            && q.live.as_ref().is_some_and(|l| l.generation != generation)
        {
            return;
        }
        q.live = None;
        q.known_down = true;
        self.interrupt(session, "the session went away during delivery", out);
        // That generation's agent (every earlier one's too) is gone.
        self.generation_over(session, |g| generation.is_none_or(|down| g <= down), "the session ended", out);
        self.pump(session, out);
    }

    /// End the session's flight because its session generation is gone.
    fn interrupt(&mut self, session: &str, why: &str, out: &mut Out<'_>) {
        let now_ms = out.now_ms;
        let Some(flight) = self.take_flight(session) else { return };
        if flight.mode == Mode::Clear {
            // The drop is done all the same; whether the box was cleared cannot be seen now.
            let note = format!("{why}; whether its prompt left the input box is unknown");
            return self.finish_clear(session, &flight, &note, out);
        }
        // Once the paste is written (acknowledged or not) it may have been typed.
        let typed = flight.phase != Phase::Baseline || flight.mode != Mode::Deliver;
        for id in &flight.items {
            if typed {
                // Its generation is over (the journal was replayed first, so no hook of it is
                // still to come): the agent may or may not have taken it.
                let why =
                    format!("{why}; no UserPromptSubmit hook reported it: the agent may or may not have taken it");
                self.stick(id, StuckClass::Interrupted, why, out);
            } else if let Some(item) = self.items.get_mut(id) {
                // Nothing was typed or claimed: it stays as it was (queued, or stuck for a force).
                item.note(now_ms, "released", format!("{why}; nothing had been typed"));
            }
        }
        if let Some(client) = flight.reply_to {
            let message = format!("{}; {why}", flight.did());
            out.actions.push(Action::Reply { client, ok: false, acted: flight.acted(), message, item: None });
        }
    }

    fn on_hook(
        &mut self,
        session: &str,
        generation: u32,
        event: &HookEvent,
        prompt: Option<PromptSig>,
        at_ms: u64,
        out: &mut Out<'_>,
    ) {
        if *event != HookEvent::UserPromptSubmit {
            return;
        }
        // A hook that does not say what was submitted proves nothing about our prompt.
        let Some(sig) = prompt else { return };
        let q = self.session(session);
        if q.hooks.len() >= RECENT_HOOKS {
            q.hooks.pop_front();
        }
        q.hooks.push_back(Heard { at_ms, generation, sig: sig.clone() });
        // A hook is evidence about its own generation's items only (a replayed journal carries
        // hooks of generations that are over).
        if self.pay_owed(session, generation, &sig, at_ms, out) {
            return;
        }
        // Items found `sending` after a restart are settled by their hook as soon as it is
        // heard (in a recovery or not), not only at a later look: the daemon's journal cursor
        // moves past a hook once the engine has heard it.
        if self.settle_found_sending_by_hook(session, generation, &sig, out) {
            return;
        }
        // Only once Enter was pressed: before it, the agent cannot have submitted our text.
        let flight = self.flight(session).filter(|f| {
            f.generation == generation
                && f.pasted_ms.is_some_and(|p| at_ms + HOOK_SKEW_MS >= p)
                && matches!(f.phase, Phase::Entering | Phase::Submit)
        });
        let Some(f) = flight else {
            self.settle_stuck_by_hook(session, generation, &sig, at_ms, out);
            return;
        };
        if sig.digest == f.prompt.digest {
            let evidence =
                format!("the agent's UserPromptSubmit hook reported the whole prompt ({} characters)", sig.chars);
            return self.submitted(session, evidence, true, out);
        }
        if sig.carries_more_than(&f.prompt) {
            let detail = format!(
                "the agent's UserPromptSubmit hook reports one message of {} characters that carries this prompt ({} characters) and text someone else typed: the message begins {:?} and ends {:?}; the prompt begins {:?} and ends {:?}. It was submitted glued to that text, not as a message of its own",
                sig.chars, f.prompt.chars, sig.head, sig.tail, f.prompt.head, f.prompt.tail
            );
            return self.stick_flight(session, StuckClass::Merged, detail, out);
        }
        self.settle_stuck_by_hook(session, generation, &sig, at_ms, out);
    }

    /// A submission hook that is the late report of a prompt already delivered (one the agent
    /// had queued), not of the one in flight: that prompt is paid — every item of it, a
    /// digest's too — on disk as well. Whether the hook was such a report. Only a hook of the
    /// prompt's own generation, made after its paste, can be its report.
    fn pay_owed(&mut self, session: &str, generation: u32, sig: &PromptSig, at_ms: u64, out: &mut Out<'_>) -> bool {
        let q = self.session(session);
        let theirs = |i: &Item| {
            i.hook_owed.as_deref() == Some(sig.digest.as_str())
                && i.generation.is_none_or(|g| g == generation)
                && typed_at(i).is_none_or(|t| at_ms + HOOK_SKEW_MS >= t)
        };
        let Some(first) = q.owed.iter().position(theirs) else {
            return false;
        };
        let id = q.owed[first].id.clone();
        let digest_with = q.owed[first].digest_with.clone();
        let (paid, kept): (Vec<Item>, Vec<Item>) =
            q.owed.drain(..).partition(|i| i.id == id || digest_with.contains(&i.id));
        q.owed = kept.into();
        for mut item in paid {
            item.hook_owed = None;
            item.queued_by_agent = false;
            let note = "the agent's UserPromptSubmit hook for it came (it had queued it)";
            self.record_delivered(item, "hook", note.into(), out);
        }
        true
    }

    /// A hook for a prompt that was cut off after its paste and left stuck/interrupted (see
    /// [`Engine::await_hook`]): the agent did take it (typically from its own queue, after the
    /// restart that cut the delivery off), so it is delivered — every stuck item of its digest
    /// with it — and a force can no longer send it twice. Only a hook of the item's own
    /// generation, made after its paste, counts.
    fn settle_stuck_by_hook(&mut self, session: &str, generation: u32, sig: &PromptSig, at_ms: u64, out: &mut Out<'_>) {
        let awaits = |i: &Item| {
            i.state == State::Stuck
                && i.stuck == Some(StuckClass::Interrupted)
                && i.hook_owed.as_deref() == Some(sig.digest.as_str())
                && i.generation == Some(generation)
                && typed_at(i).is_some_and(|t| at_ms + HOOK_SKEW_MS >= t)
        };
        let Some(q) = self.sessions.get(session) else { return };
        let Some(first) = q.items.iter().filter_map(|id| self.items.get(id)).find(|i| awaits(i)) else { return };
        let mut ids = vec![first.id.clone()];
        ids.extend(first.digest_with.iter().filter(|d| self.items.get(*d).is_some_and(awaits)).cloned());
        for id in ids {
            if let Some(item) = self.items.get_mut(&id) {
                item.hook_owed = None;
                item.stuck = None;
            }
            let note = "the agent's UserPromptSubmit hook for it came after it was stuck: the agent took it";
            self.transition(&id, State::Delivered, "hook", note.into(), out);
        }
    }

    /// A stuck/interrupted item whose text was typed may still reach the agent (it may sit in
    /// the agent's own queue): its hook, if it comes, settles it ([`Engine::settle_stuck_by_hook`]).
    /// Marks the item as awaiting that hook when its paste is on record; returns `why` with a
    /// word on it for the operator.
    fn await_hook(&mut self, id: &ItemId, prompt: &PromptSig, why: &str) -> String {
        let Some(item) = self.items.get_mut(id).filter(|i| typed_at(i).is_some()) else {
            return why.to_string();
        };
        item.hook_owed = Some(prompt.digest.clone());
        format!(
            "{why}; the agent may have taken it (a UserPromptSubmit hook for it, if one comes, settles it delivered)"
        )
    }

    /// The agent of every generation `over` names is gone: what it was handed and never
    /// reported taking is judged now, on the evidence heard so far (the daemon replays the
    /// session's journal before it reports a session down or a new generation, so nothing
    /// recorded is missed). A prompt that may have waited in that agent's own queue is
    /// stuck/interrupted; an item found `sending` after a restart is delivered if a hook of its
    /// generation reported it after its paste, stuck/interrupted otherwise. Evidence from
    /// another generation never settles these items.
    fn generation_over(&mut self, session: &str, over: impl Fn(u32) -> bool, why: &str, out: &mut Out<'_>) {
        let ended = |i: &Item| i.generation.is_none_or(&over);
        if self.flight(session).is_some_and(|f| over(f.generation)) {
            self.interrupt(session, &format!("{why} during delivery"), out);
        }
        let q = self.session(session);
        let (gone, kept): (Vec<Item>, Vec<Item>) = q.owed.drain(..).partition(|i| ended(i));
        q.owed = kept.into();
        for mut item in gone.into_iter().filter(|i| i.queued_by_agent) {
            item.stuck = Some(StuckClass::Interrupted);
            item.hook_owed = None;
            let id = item.id.clone();
            let q = self.session(session);
            let pos = q.items.partition_point(|i| *i < id);
            q.items.insert(pos, id.clone());
            self.items.insert(id.clone(), item);
            let detail = format!(
                "interrupted: {why} while this prompt may still have waited in the agent's own queue: neither its UserPromptSubmit hook nor the agent staying idle after it showed that the agent took it"
            );
            self.transition(&id, State::Stuck, "stuck", detail, out);
        }
        // Items found `sending` at start-up (not in flight) of a generation that is over.
        let in_flight: Vec<ItemId> = self.flight(session).map(|f| f.items.clone()).unwrap_or_default();
        let Some(q) = self.sessions.get(session) else { return };
        let mut sending: Vec<ItemId> = q
            .items
            .iter()
            .filter(|id| !in_flight.contains(id))
            .filter(|id| self.items.get(*id).is_some_and(|i| i.state == State::Sending && ended(i)))
            .cloned()
            .collect();
        while let Some(first) = sending.first().cloned() {
            let group = self.digest_group(&first);
            sending.retain(|id| !group.contains(id));
            let Some(item) = self.items.get(&first) else { continue };
            let generation = item.generation;
            let prompt = self.prompt_of(&group);
            let heard = generation.and_then(|g| self.hook_for_recovered(session, &group, &prompt, g));
            self.settle_found_sending(&group, heard, why, out);
        }
    }

    /// Items found `sending` after a restart, not in flight, settled on what the hooks say (see
    /// [`Engine::hook_for_recovered`]): delivered, stuck because the hook may be another
    /// prompt's, or — `None`, their agent gone (`why`) with no hook for them — stuck.
    fn settle_found_sending(&mut self, group: &[ItemId], heard: Option<bool>, why: &str, out: &mut Out<'_>) {
        for id in group {
            match heard {
                Some(true) => {
                    let note = "a UserPromptSubmit hook reported it after the restart cut its delivery off";
                    self.transition(id, State::Delivered, "delivered", note.into(), out);
                }
                Some(false) => self.stick(id, StuckClass::Interrupted, SAME_TEXT_NO_PASTE.into(), out),
                None => {
                    let detail = format!(
                        "{why} while it was being delivered, and no UserPromptSubmit hook reported it: the agent may or may not have taken it"
                    );
                    self.stick(id, StuckClass::Interrupted, detail, out);
                }
            }
        }
    }

    /// An item and the items of its digest still `sending` (they were claimed together and
    /// settle together), by id.
    fn digest_group(&self, id: &ItemId) -> Vec<ItemId> {
        let Some(item) = self.items.get(id) else { return vec![id.clone()] };
        let mut group: Vec<ItemId> = std::iter::once(id.clone()).chain(item.digest_with.iter().cloned()).collect();
        group.retain(|id| self.items.get(id).is_some_and(|i| i.state == State::Sending));
        group.sort();
        group
    }

    /// The signature of the prompt typed for these items (one item's text, or their digest).
    fn prompt_of(&self, ids: &[ItemId]) -> PromptSig {
        let items: Vec<&Item> = ids.iter().filter_map(|id| self.items.get(id)).collect();
        PromptSig::of(&prompt_text(&items))
    }

    /// Replay what a session's journal recorded while the engine was not told (a restart, a
    /// lost connection): hooks settle what they report; an agent that stayed idle for
    /// [`QUEUE_DRAINED`] took what it had queued before; an exit or a new generation ends the
    /// generations before it ([`Engine::generation_over`]). Nothing is typed here: the live
    /// view that follows starts deliveries.
    fn on_journal(&mut self, session: &str, events: Vec<Past>, out: &mut Out<'_>) {
        // The replayed generation's idle, and since when.
        let mut idle: Option<(u32, u64)> = None;
        for past in events {
            let generation = past.generation;
            match past.what {
                PastEvent::Hook { event, prompt } => {
                    self.on_hook(session, generation, &event, prompt, past.at_ms, out);
                }
                PastEvent::Activity(activity) => {
                    if let Some((g, since)) = idle.take() {
                        self.idle_until(session, g, since, past.at_ms, out);
                    }
                    idle = (activity == Activity::Idle).then_some((generation, past.at_ms));
                }
                PastEvent::Exit => {
                    if let Some((g, since)) = idle.take() {
                        self.idle_until(session, g, since, past.at_ms, out);
                    }
                    let why = format!("the session's agent exited (generation {generation})");
                    self.generation_over(session, |g| g <= generation, &why, out);
                }
                PastEvent::Started => {
                    // When the earlier generation ended is not known (its master may have been
                    // killed): its idle proves nothing past this.
                    idle = None;
                    let why = format!("the session restarted (generation {generation} started)");
                    self.generation_over(session, |g| g < generation, &why, out);
                }
            }
        }
    }

    /// The agent of `generation` was idle from `since` to `until` (Unix ms): if that lasted
    /// [`QUEUE_DRAINED`], it took every prompt it had queued before `since`.
    fn idle_until(&mut self, session: &str, generation: u32, since: u64, until: u64, out: &mut Out<'_>) {
        if until >= since + QUEUE_DRAINED.as_millis() as u64 {
            self.take_from_queue(session, generation, since, out);
        }
    }

    // ----- the gate -----

    fn pump(&mut self, session: &str, out: &mut Out<'_>) {
        if self.flight(session).is_some() {
            return;
        }
        self.keep_watch(session, out);
        let mut queued: Vec<ItemId> = self.session(session).items.clone();
        queued.retain(|id| self.items.get(id).is_some_and(|i| i.state == State::Queued));
        if queued.is_empty() {
            self.session(session).hold = None;
            return;
        }
        let live = match self.session_gate(session) {
            Ok(live) => live,
            Err(why) => return self.set_hold(session, why, out.now_ms),
        };
        if self.retry_pending(session, out.now) {
            return;
        }
        self.retarget(&queued, live.generation, out);
        match self.releasable(session, &live, &queued, out.now_ms) {
            Ok(ids) => {
                self.session(session).hold = None;
                let launch = Launch { ids, mode: Mode::Deliver, reply_to: None, over_draft: false };
                self.start_flight(session, live, launch, out);
            }
            Err((why, None)) => self.set_hold(session, why, out.now_ms),
            Err((why, Some(recheck))) => {
                self.set_hold(session, why, out.now_ms);
                let at = out.now + recheck;
                self.session(session).retry_at = Some(at);
                self.arm_retry(session, at, out);
            }
        }
    }

    /// The session's state lets a delivery start (not paused, running, ready, no dialog up):
    /// its live view; otherwise why not.
    fn session_gate(&self, session: &str) -> Result<SessionView, String> {
        let q = self.sessions.get(session).ok_or("the session is not running")?;
        if let Some(reason) = &q.paused {
            let reason = if reason.is_empty() { String::new() } else { format!(": {reason}") };
            return Err(format!("paused by the operator{reason}"));
        }
        let live = q.live.clone().ok_or("the session is not running")?;
        if live.lifecycle == Lifecycle::Exited {
            return Err("the session has exited".into());
        }
        if live.lifecycle == Lifecycle::Starting || !live.ready {
            return Err("the session is starting (its TUI is not ready yet)".into());
        }
        if live.activity == Activity::Blocked {
            let wait = live.wait.as_deref().unwrap_or("the operator");
            return Err(format!("the agent is waiting for {wait}; nothing is typed into its dialog"));
        }
        Ok(live)
    }

    /// Whether a backoff is still running (a retry that is due is cleared).
    fn retry_pending(&mut self, session: &str, now: Instant) -> bool {
        let q = self.session(session);
        match q.retry_at {
            Some(at) if now < at => true,
            _ => {
                q.retry_at = None;
                false
            }
        }
    }

    /// Items for an older generation follow the session into its new one.
    fn retarget(&mut self, ids: &[ItemId], generation: u32, out: &mut Out<'_>) {
        for id in ids {
            let Some(item) = self.items.get_mut(id) else { continue };
            let Some(from) = item.generation.filter(|g| *g != generation) else { continue };
            item.generation = Some(generation);
            let detail = format!("the session restarted; now for generation {generation} (was {from})");
            self.transition(id, State::Queued, "retargeted", detail, out);
        }
    }

    /// The queued items that may go now (at most [`MAX_DIGEST`], as one digest), or why none
    /// may and, when the reason passes by itself, when to look again.
    fn releasable(
        &self,
        session: &str,
        live: &SessionView,
        queued: &[ItemId],
        now_ms: u64,
    ) -> Result<Vec<ItemId>, (String, Option<Duration>)> {
        // "Idle" from before the last prompt's Enter: the turn that prompt started may not show
        // yet, so it is not trusted where being idle matters.
        let stale = if live.activity == Activity::Idle { self.activity_stale(session, now_ms) } else { None };
        let stale_hold = |wait: u64| {
            ("waiting to see the agent's state after the last prompt".to_string(), Some(Duration::from_millis(wait)))
        };
        let steers = live.rules.delivery.hold_while_working;
        if steers && let Some(wait) = stale {
            return Err(stale_hold(wait));
        }
        if steers && live.activity == Activity::Working {
            let why = "the agent is working and would take a prompt now as an interruption of its turn; waiting for it to finish";
            return Err((why.into(), None));
        }
        let idle = live.activity == Activity::Idle && stale.is_none();
        // A digest's header and separator lines would be commands to a shell, or lines of input
        // to a program reading them: without an agent's input box, each prompt goes alone.
        let batch = if live.rules.delivery.knows_composer() { MAX_DIGEST } else { 1 };
        let ids: Vec<ItemId> = queued
            .iter()
            .filter(|id| self.items.get(*id).is_some_and(|i| i.when == When::Now || idle))
            .take(batch)
            .cloned()
            .collect();
        match (ids.is_empty(), stale) {
            (false, _) => Ok(ids),
            (true, Some(wait)) => Err(stale_hold(wait)),
            (true, None) => Err((format!("waiting for the agent to be idle (it is {})", live.activity.as_str()), None)),
        }
    }

    fn start_flight(&mut self, session: &str, live: SessionView, launch: Launch, out: &mut Out<'_>) {
        let Launch { ids, mode, reply_to, over_draft } = launch;
        let attempt = self.next_attempt;
        self.next_attempt += 1;
        let items: Vec<&Item> = ids.iter().filter_map(|id| self.items.get(id)).collect();
        let text = match (mode, items.as_slice()) {
            // What was pasted: the digest it went in, or its own text.
            (Mode::Clear, [item]) => self.pasted_text(item),
            _ => prompt_text(&items),
        };
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
            paste_written: false,
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
            at_shell_prompt: false,
            typed_lines: 0,
        });
        self.enlist(&ids, mode, live.generation, out);
        self.request_snapshot(session, out);
    }

    /// Tie a new flight's items to it: the digest they form, the generation they target, and
    /// for a forced Enter or a recovery, the record that it began (an ordinary delivery is
    /// claimed when it is pasted, in the same batch as the paste — persist before inject — so
    /// a look at the screen that holds it back changes nothing on disk).
    fn enlist(&mut self, ids: &[ItemId], mode: Mode, generation: u32, out: &mut Out<'_>) {
        if mode == Mode::Clear {
            // Nothing is typed for the item until the box is proven to hold its prompt; it
            // stays stuck, in the digest it was pasted in, until the drop is done.
            return;
        }
        let digest: &[ItemId] = if ids.len() > 1 { ids } else { &[] };
        for id in ids {
            let from = self.items.get(id).map(|i| i.state);
            let Some(item) = self.items.get_mut(id) else { continue };
            item.digest_with = digest.iter().filter(|d| *d != id).cloned().collect();
            // A stuck item forced into a later generation now targets it: what that
            // generation's agent does (and its end) is what settles it.
            match item.generation.replace(generation) {
                Some(was) if was != generation => {
                    let detail = format!("forced into generation {generation} (was {was})");
                    item.note(out.now_ms, "retargeted", detail);
                }
                _ => {}
            }
            // A forced Enter is an attempt of its own; a recovery goes on with the attempt
            // that was cut off.
            if mode == Mode::ForceEnter {
                item.attempts += 1;
            }
            let attempt = item.attempts;
            let (kind, detail) = match mode {
                Mode::Deliver | Mode::Clear => continue,
                Mode::ForceEnter => ("forced", format!("attempt {attempt}: the operator forced an Enter")),
                Mode::Recover => ("recovering", format!("attempt {attempt}: found sending after a restart")),
            };
            if from == Some(State::Sending) && mode == Mode::Recover {
                self.note_items(std::slice::from_ref(id), kind, &detail, out.now_ms);
            } else {
                self.transition(id, State::Sending, kind, detail, out);
            }
        }
    }

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

    fn on_snapshot(
        &mut self,
        session: &str,
        attempt: Option<u64>,
        token: Token,
        result: Result<ScreenView, String>,
        out: &mut Out<'_>,
    ) {
        if self.sessions.get(session).is_some_and(|q| q.watching == Some(token)) {
            return self.on_watch_look(session, result, out);
        }
        let Some(flight) = self.flight_mut(session) else { return };
        if Some(flight.attempt) != attempt || flight.waiting != Some(token) {
            return;
        }
        flight.waiting = None;
        let flight = flight.clone();
        let Some(rules) = self.rules(session) else { return };
        let screen = match result {
            Ok(screen) => screen,
            Err(e) => return self.read_failed(session, &flight, &e, out),
        };
        let look = self.look(session, &rules, &flight, screen);
        if let Some(f) = self.flight_mut(session) {
            f.last_cursor_row = Some(look.cursor_row.clone());
        }
        let settings = &rules.delivery;
        match flight.phase {
            Phase::Baseline => self.on_baseline(session, flight, look, out),
            Phase::Echo => self.on_echo_look(session, &flight, &look, settings, out),
            // The pre-Enter look after a settle delay.
            Phase::Settle => self.enter_if_clear(session, &flight, &look, settings, out),
            Phase::Submit => self.on_submit_look(session, &flight, &look, settings, out),
            Phase::Erased => self.erased_look(session, &flight, &look, out),
            Phase::Pasting | Phase::Entering | Phase::Erasing => {}
        }
    }

    /// The provider's blocked screen rule matching `lines`, where the match is more than the
    /// echo of a prompt desk typed into the session (one may quote a dialog).
    fn dialog_rule<'r>(&self, session: &str, rules: &'r RuleSet, lines: &[String]) -> Option<&'r crate::state::Rule> {
        let none = crate::state::typed::Typed::default();
        let typed = self.sessions.get(session).map_or(&none, |q| &q.typed);
        rules.match_screen_where(lines, typed, |r| r.activity == Activity::Blocked)
    }

    /// What a screen shows about the flight: the prompt in the input area, a dialog, the cursor.
    fn look(&self, session: &str, rules: &RuleSet, flight: &Flight, screen: ScreenView) -> Look {
        let settings = &rules.delivery;
        let area = settings.prompt_rows(&screen.lines);
        let presence = text::presence(&area, &flight.fingerprint, settings.placeholder.as_ref());
        // A dialog: one of the provider's blocked screen rules matches, or the session reports
        // the agent blocked (a hook or a title may know of a dialog no screen rule describes).
        let reported_blocked = self
            .sessions
            .get(session)
            .and_then(|q| q.live.as_ref())
            .filter(|l| l.activity == Activity::Blocked)
            .map(|l| format!("the agent reports it waits for {}", l.wait.as_deref().unwrap_or("the operator")));
        let dialog = self.dialog_rule(session, rules, &screen.lines).map(|r| r.name.clone()).or(reported_blocked);
        let cursor_row = (screen.cursor_row, screen.lines.get(screen.cursor_row).cloned().unwrap_or_default());
        Look { screen, presence, dialog, cursor_row }
    }

    /// A look while the paste is expected in the input area: once it shows, on to the Enter;
    /// when the echo window closes without it, stuck (never pasted again).
    fn on_echo_look(
        &mut self,
        session: &str,
        flight: &Flight,
        look: &Look,
        settings: &DeliverySettings,
        out: &mut Out<'_>,
    ) {
        if look.presence.more_than(flight.baseline) {
            return self.echoed(session, flight, look, settings, out);
        }
        if let Some(rule) = &look.dialog {
            // A dialog that opened over the input box may hide the paste: wait for it to go
            // until the window ends; the text may then sit under it, and an Enter would answer it.
            if flight.deadline_passed {
                let detail = format!(
                    "a dialog ({rule}) opened before the paste showed in the input area and stayed; the text may sit under it, and no Enter is pressed into a dialog"
                );
                return self.stick_flight(session, StuckClass::SubmitStuck, detail, out);
            }
            return self.arm(session, TimerKind::Poll, out.now + settings.poll, out);
        }
        if !flight.deadline_passed {
            return self.arm(session, TimerKind::Poll, out.now + settings.poll, out);
        }
        if !settings.knows_composer()
            && let Err(why) = line::reader(&look.screen, settings)
        {
            // The program stopped reading a line (an editor, or a job, took over): what the keys
            // did there cannot be seen, so it is not "missing" — a force would type it again.
            let detail = format!(
                "the program left line input ({why}) and the text is not on screen; what became of the keys cannot be seen. Not re-pasting"
            );
            return self.stick_flight(session, StuckClass::Unobservable, detail, out);
        }
        let detail = format!(
            "the paste did not show in the input area within {} ms; desk does not paste it again by itself (it is watched for, in case it shows later)",
            settings.echo_timeout.as_millis()
        );
        self.stick_flight(session, StuckClass::PasteMissing, detail, out);
    }

    /// The paste showed in the input area: Enter now, or after the provider's settle delay.
    fn echoed(&mut self, session: &str, flight: &Flight, look: &Look, settings: &DeliverySettings, out: &mut Out<'_>) {
        let (text, placeholders) = (look.presence.text, look.presence.placeholders);
        let detail = format!("in the input area: {text} text, {placeholders} placeholder(s)");
        self.note_items(&flight.items, "echoed", &detail, out.now_ms);
        if let Some(rule) = &look.dialog {
            return self.stick_for_dialog(session, rule, out);
        }
        if settings.submit_delay.is_zero() {
            return self.enter_if_clear(session, flight, look, settings, out);
        }
        if let Some(f) = self.flight_mut(session) {
            f.phase = Phase::Settle;
        }
        self.arm(session, TimerKind::Settle, out.now + settings.submit_delay, out);
    }

    /// The last look before an Enter: none into a dialog, none onto text someone else typed.
    fn enter_if_clear(
        &mut self,
        session: &str,
        flight: &Flight,
        look: &Look,
        settings: &DeliverySettings,
        out: &mut Out<'_>,
    ) {
        if let Some(rule) = &look.dialog {
            return self.stick_for_dialog(session, rule, out);
        }
        if let Some(why) = line::job_in_foreground(&look.screen) {
            // The Enter would go to that job, or wait for the program with the text.
            let detail = format!("after the paste, {why}; no Enter pressed");
            return self.stick_flight(session, StuckClass::SubmitStuck, detail, out);
        }
        if let Some(rest) = foreign_text(settings, flight, &look.screen.lines) {
            return self.stick_merged_in_box(session, &rest, out);
        }
        self.press_enter(session, out);
    }

    /// A look at the screen after an Enter: submitted, still waiting, Enter again, or stuck.
    fn on_submit_look(
        &mut self,
        session: &str,
        flight: &Flight,
        look: &Look,
        settings: &DeliverySettings,
        out: &mut Out<'_>,
    ) {
        if let Some(rule) = &look.dialog {
            return self.dialog_after_enter(session, flight, look, rule, settings, out);
        }
        if flight.at_shell_prompt {
            match line::shell_took_line(&look.screen, settings) {
                Some(line::AfterEnter::Ran(evidence)) => return self.submitted(session, evidence, false, out),
                Some(line::AfterEnter::Incomplete) => {
                    let detail = format!(
                        "the shell read the line but waits for the rest of the command (a continuation prompt: an unclosed quote or block), so it has not run it. Cancel it (desk keys {session} C-c) and send the command whole"
                    );
                    return self.stick_flight(session, StuckClass::SubmitStuck, detail, out);
                }
                None => {}
            }
        }
        if !look.presence.more_than(flight.baseline) {
            return self.submitted(session, "the text left the input area".into(), false, out);
        }
        // Without input borders, in a session whose line the kernel edits (canonical mode: a
        // shell, `cat`), an Enter always ends the line, and its echo moves the cursor on: the
        // line it was typed on changing is the evidence. A raw-mode application may take an
        // Enter as a newline in its own box, so there the cursor moving proves nothing.
        if !settings.bordered()
            && look.screen.canonical
            && let Some(before) = &flight.enter_cursor_row
            && *before != look.cursor_row
        {
            let (from, to) = (before.0, look.cursor_row.0);
            let evidence = format!("the line it was typed on changed after Enter (cursor row {from} → {to})");
            return self.submitted(session, evidence, false, out);
        }
        if !flight.deadline_passed {
            return self.arm(session, TimerKind::Poll, out.now + settings.poll, out);
        }
        if flight.enters <= settings.enter_retries {
            let note = "the text still sits in the input area (looked again); pressing Enter again";
            self.note_items(&flight.items, "retry", note, out.now_ms);
            return self.press_enter(session, out);
        }
        let detail = format!("the text stayed in the input area after {} Enter(s)", flight.enters);
        self.stick_flight(session, StuckClass::SubmitStuck, detail, out);
    }

    /// A dialog is on screen after an Enter. It may cover the input area, so the text not
    /// showing there proves nothing, and an Enter would answer the dialog: wait for it to go
    /// until the verification window ends, then stuck. Unless the agent's composer is on the
    /// screen beside the dialog, empty: then the text left it (an agent that took the prompt and
    /// at once asks to run something).
    fn dialog_after_enter(
        &mut self,
        session: &str,
        flight: &Flight,
        look: &Look,
        rule: &str,
        settings: &DeliverySettings,
        out: &mut Out<'_>,
    ) {
        if settings.knows_composer()
            && !look.presence.more_than(flight.baseline)
            && settings.composer_text(&look.screen.lines).is_some_and(|t| t.is_empty())
        {
            let evidence = format!("the text left the input area; the box shows empty beside a dialog ({rule})");
            return self.submitted(session, evidence, false, out);
        }
        if !flight.dialog_seen {
            if let Some(f) = self.flight_mut(session) {
                f.dialog_seen = true;
            }
            let note =
                format!("a dialog ({rule}) is on screen after Enter; the input area is no evidence while it shows");
            self.note_items(&flight.items, "dialog", &note, out.now_ms);
        }
        if flight.deadline_passed {
            let detail = format!(
                "a dialog ({rule}) showed after Enter and stayed; whether the prompt was submitted is unknown, and no Enter is pressed into a dialog"
            );
            return self.stick_flight(session, StuckClass::SubmitStuck, detail, out);
        }
        self.arm(session, TimerKind::Poll, out.now + settings.poll, out);
    }

    /// The first look of a flight, before anything is typed (for a recovery or a forced Enter:
    /// before anything more is).
    fn on_baseline(&mut self, session: &str, flight: Flight, look: Look, out: &mut Out<'_>) {
        match flight.mode {
            Mode::Recover => self.recovery_look(session, &flight, &look, out),
            Mode::ForceEnter => self.force_enter_look(session, &flight, &look, out),
            Mode::Deliver => self.delivery_look(session, flight, look, out),
            Mode::Clear => self.clear_look(session, &flight, &look, out),
        }
    }

    /// An item found `sending` after a restart, settled on conclusive evidence only: a hook
    /// that reported the whole prompt after this item's own paste is on record, or the text
    /// sitting in the input area (then an Enter is safe).
    fn recovery_look(&mut self, session: &str, flight: &Flight, look: &Look, out: &mut Out<'_>) {
        if let Some(ours) = self.hook_for_recovered(session, &flight.items, &flight.prompt, flight.generation) {
            return self.recovered_by_hook(session, ours, out);
        }
        if look.presence.text == 0 && look.presence.placeholders == 0 {
            if let Some(why) = never_typed(flight, &self.flight_items(flight), &look.screen) {
                return self.release_flight(session, flight, why, out);
            }
            if look.dialog.is_some() {
                // The dialog may cover the input box and the text under it: settled once the
                // dialog is gone (the session's state changes then; and a look every second).
                self.take_flight(session);
                let at = out.now + HOLD_RECHECK;
                return self.arm_retry(session, at, out);
            }
            let detail = "no evidence settles whether it reached the agent (not in the input area, no hook yet)";
            return self.stick_flight(session, StuckClass::Interrupted, detail.into(), out);
        }
        if let Some(rule) = &look.dialog {
            // The text sits in the box, unsubmitted: as when a dialog opens before a live Enter.
            return self.stick_for_dialog(session, rule, out);
        }
        // On record before the Enter (persist before inject): a second restart must know that
        // this text reached the agent and an Enter was pressed for it.
        for id in &flight.items {
            let note = "found in the input area after the restart; pressing Enter";
            self.transition(id, State::Sending, "echoed", note.into(), out);
        }
        self.enter_on_text_in_box(session, out);
    }

    /// The records of a flight's items.
    fn flight_items(&self, flight: &Flight) -> Vec<&Item> {
        flight.items.iter().filter_map(|id| self.items.get(id)).collect()
    }

    /// A recovered flight that provably never reached the agent goes back to the queue, to be
    /// delivered like any other.
    fn release_flight(&mut self, session: &str, flight: &Flight, why: String, out: &mut Out<'_>) {
        self.take_flight(session);
        for id in &flight.items {
            self.transition(id, State::Queued, "released", why.clone(), out);
        }
        self.pump(session, out);
    }

    /// The recovery in flight is settled by a UserPromptSubmit hook that reported its prompt:
    /// delivered when `ours` (see [`Engine::hook_for_recovered`]), else stuck.
    fn recovered_by_hook(&mut self, session: &str, ours: bool, out: &mut Out<'_>) {
        if ours {
            let evidence = "a UserPromptSubmit hook reported it after the restart cut its delivery off";
            return self.submitted(session, evidence.into(), true, out);
        }
        self.stick_flight(session, StuckClass::Interrupted, SAME_TEXT_NO_PASTE.into(), out);
    }

    /// A hook that reports the prompt of items found `sending` after a restart settles them at
    /// once, durably: the recovery in flight before it has pressed an Enter (after one, the
    /// hook settles it as any delivery's), or a group still waiting for its session. Whether it
    /// did.
    fn settle_found_sending_by_hook(
        &mut self,
        session: &str,
        generation: u32,
        sig: &PromptSig,
        out: &mut Out<'_>,
    ) -> bool {
        if let Some(f) = self
            .flight(session)
            .filter(|f| f.mode == Mode::Recover && f.phase == Phase::Baseline && f.generation == generation)
            && f.prompt.digest == sig.digest
        {
            let (items, prompt) = (f.items.clone(), f.prompt.clone());
            if let Some(ours) = self.hook_for_recovered(session, &items, &prompt, generation) {
                self.recovered_by_hook(session, ours, out);
                return true;
            }
        }
        let in_flight: Vec<ItemId> = self.flight(session).map(|f| f.items.clone()).unwrap_or_default();
        let Some(q) = self.sessions.get(session) else { return false };
        let waiting: Vec<ItemId> = q
            .items
            .iter()
            .filter(|id| !in_flight.contains(id))
            .filter(|id| {
                self.items.get(*id).is_some_and(|i| i.state == State::Sending && i.generation == Some(generation))
            })
            .cloned()
            .collect();
        for id in waiting {
            let group = self.digest_group(&id);
            let prompt = self.prompt_of(&group);
            if prompt.digest != sig.digest {
                continue;
            }
            if let Some(ours) = self.hook_for_recovered(session, &group, &prompt, generation) {
                self.settle_found_sending(&group, Some(ours), "", out);
                return true;
            }
        }
        false
    }

    /// Whether a UserPromptSubmit hook of `generation` on record reported the prompt of items
    /// found `sending` after a restart: `None` when none did; `Some(true)` when one came after
    /// the items' own paste (or came after their claim and the prompt is a digest, whose text
    /// names each message's sender and time, so no earlier prompt was the same); `Some(false)`
    /// when one came but the paste of a single item is not on record — then it may be the late
    /// report of an earlier identical prompt (`continue`, twice).
    fn hook_for_recovered(&self, session: &str, ids: &[ItemId], prompt: &PromptSig, generation: u32) -> Option<bool> {
        let items: Vec<&Item> = ids.iter().filter_map(|id| self.items.get(id)).collect();
        let pasted_at = items.iter().filter_map(|i| typed_at(i)).min();
        let heard = self.sessions.get(session)?.hooks.iter().find(|h| {
            h.generation == generation
                && h.sig.digest == prompt.digest
                && items.iter().any(|i| h.at_ms + HOOK_SKEW_MS >= i.state_since_ms)
        })?;
        let digest = items.iter().any(|i| !i.digest_with.is_empty());
        Some(digest || pasted_at.is_some_and(|p| heard.at_ms + HOOK_SKEW_MS >= p))
    }

    /// An operator's force on a submit-stuck item: Enter only, and only onto the text still in
    /// the box.
    fn force_enter_look(&mut self, session: &str, flight: &Flight, look: &Look, out: &mut Out<'_>) {
        if let Some(rule) = &look.dialog {
            return self.stick_for_dialog(session, rule, out);
        }
        if let Some(why) = line::job_in_foreground(&look.screen) {
            let detail = format!("{why}; no Enter pressed (force again once it has)");
            return self.stick_flight(session, StuckClass::SubmitStuck, detail, out);
        }
        if let Some(rest) = self.beside_own_paste(session, flight, look) {
            // An Enter now would submit someone's text along with the prompt.
            let detail = format!(
                "the input box holds this prompt together with other text ({rest:?}); no Enter pressed, as it would submit both as one message"
            );
            return self.stick_flight(session, StuckClass::SubmitStuck, detail, out);
        }
        if typing_hold(&look.screen, out.now_ms).is_some() {
            // An Enter now would submit what that person typed along with the prompt.
            let detail = "someone is typing in an attached terminal; no Enter pressed (force again when they stop)";
            return self.stick_flight(session, StuckClass::SubmitStuck, detail.into(), out);
        }
        if look.presence.text == 0 && look.presence.placeholders == 0 {
            // Nothing to press Enter for. It may have been submitted after all, or the box was
            // cleared: the operator decides, with a re-paste one force away.
            let detail = "the text is no longer in the input area (it may have been submitted, or cleared); no Enter pressed. Check the agent, then desk force re-pastes it or desk drop forgets it";
            return self.stick_flight(session, StuckClass::PasteMissing, detail.into(), out);
        }
        self.enter_on_text_in_box(session, out);
    }

    /// An ordinary delivery (or a forced re-paste): the last look before typing. Nothing is on
    /// disk yet: a gate that holds it back leaves every item as it was.
    fn delivery_look(&mut self, session: &str, mut flight: Flight, look: Look, out: &mut Out<'_>) {
        flight.items.retain(|id| self.items.get(id).is_some_and(|i| matches!(i.state, State::Queued | State::Stuck)));
        if flight.items.is_empty() {
            self.take_flight(session);
            return self.pump(session, out);
        }
        let Some(rules) = self.rules(session) else { return };
        if flight.reply_to.is_some() && self.own_paste_in_box(session, &flight, &look, out.now_ms) {
            // A force onto desk's own unsent paste: Enter only, never a second paste over it.
            return self.enter_on_own_paste(session, flight, out);
        }
        if let Some((why, recheck)) = self.screen_hold(session, &flight, &look, &rules.delivery, out.now_ms) {
            self.mark_unsent_on_screen(session, &look, out);
            return self.hold_flight(session, flight.reply_to, why, recheck, out);
        }
        if !rules.delivery.knows_composer() && line::reader(&look.screen, &rules.delivery) == Ok(line::Reader::Shell) {
            flight.at_shell_prompt = true;
            if let Some(f) = self.flight_mut(session) {
                f.at_shell_prompt = true;
            }
        }
        // Claimed now, in the same batch as the paste: persist before inject.
        self.claim(&flight, out);
        if look.screen.canonical
            && let Some((line, len)) = text::overlong_line(&flight.text)
        {
            let why = format!(
                "refused: line {line} is {len} bytes and the session reads canonical input, which cuts lines at {} bytes",
                text::CANONICAL_LINE_MAX
            );
            return self.refuse_flight(session, &flight, why, out);
        }
        self.paste(session, &flight, &look, out);
    }

    /// Why the screen says not to type now, and when to look again: a dialog, a person typing,
    /// a program not reading a line, an agent's input box that is missing or holds a draft.
    fn screen_hold(
        &self,
        session: &str,
        flight: &Flight,
        look: &Look,
        settings: &DeliverySettings,
        now_ms: u64,
    ) -> Option<(String, Duration)> {
        if let Some(rule) = &look.dialog {
            return Some((format!("a dialog is on screen ({rule}); nothing is typed into it"), HOLD_RECHECK));
        }
        if let Some(wait) = typing_hold(&look.screen, now_ms) {
            return Some(("someone is typing in an attached terminal".into(), wait));
        }
        if let Some(why) = line::job_in_foreground(&look.screen) {
            // Whatever is typed now goes to that job, or waits for the program in the terminal
            // and is read as a command once the job ends.
            return Some((why, HOLD_RECHECK));
        }
        if !settings.knows_composer() {
            // Not an agent's input box: a program reading a line, or a shell at an empty
            // prompt, or nothing is typed (keys typed into an editor are commands).
            return line::typing_hold(&look.screen, settings, session, &flight.text).map(|why| (why, HOLD_RECHECK));
        }
        if flight.over_draft {
            return None;
        }
        let Some(draft) = settings.composer_text(&look.screen.lines) else {
            let why = "the agent's input box is not on the screen; nothing is typed until it is";
            return Some((why.into(), HOLD_RECHECK));
        };
        (!draft.is_empty()).then(|| (self.draft_hold(session, flight, &draft), HOLD_RECHECK))
    }

    /// Why a draft in the input box holds this flight, in words for the operator: the stuck item
    /// whose unsent prompt it is, when desk's own paste is what the box holds.
    fn draft_hold(&self, session: &str, flight: &Flight, draft: &str) -> String {
        let n = draft.chars().count();
        if let Some((ids, held)) = self.unsent_in_box(session, draft) {
            let first = &ids[0];
            let digest = if ids.len() > 1 { format!(" (one digest of {} items)", ids.len()) } else { String::new() };
            return match held {
                Held::Exactly => format!(
                    "{OWN_PASTE_HOLD} {first}{digest}: desk force {first} submits it (Enter only), desk drop {first} clears it; delivery waits until it is sent or cleared"
                ),
                _ => format!(
                    "the input box holds the prompt of stuck item {first}{digest} together with text typed by someone ({n} characters); delivery waits until it is sent or cleared"
                ),
            };
        }
        match flight.reply_to {
            Some(_) => format!(
                "the input box holds text typed by someone ({n} characters: {:?}); forcing now would paste this prompt after it and submit both as one message. Let them send or clear it, or run desk force {} --over-draft to do it anyway",
                preview(draft),
                flight.items.first().map(|i| i.as_str()).unwrap_or("")
            ),
            None => format!("{DRAFT_HOLD} ({n} characters); delivery waits until it is sent or cleared"),
        }
    }

    /// Hold a flight back before anything was typed: it ends, its items stay as they were, and
    /// the screen is looked at again after `recheck`. A force's operator is told why.
    fn hold_flight(&mut self, session: &str, reply_to: Option<u64>, why: String, recheck: Duration, out: &mut Out<'_>) {
        self.take_flight(session);
        match reply_to {
            Some(client) => out.actions.push(Action::Reply {
                client,
                ok: false,
                acted: false,
                message: format!("refused, nothing typed: {why}"),
                item: None,
            }),
            None => self.set_hold(session, why, out.now_ms),
        }
        let at = out.now + recheck;
        self.session(session).retry_at = Some(at);
        self.arm_retry(session, at, out);
    }

    /// Claim the flight's items (`sending`) before the paste goes out.
    fn claim(&mut self, flight: &Flight, out: &mut Out<'_>) {
        let forced = flight.reply_to.is_some();
        let count = flight.items.len();
        for id in &flight.items {
            // The item's own count: the paste about to go is its next attempt.
            let attempt = self.items.get(id).map_or(1, |i| i.attempts + 1);
            let detail = match (forced, count) {
                (true, _) if flight.over_draft => {
                    format!("attempt {attempt}: the operator forced a paste onto text someone typed")
                }
                (true, _) => format!("attempt {attempt}: the operator forced a new paste"),
                (false, 1) => format!("attempt {attempt}"),
                (false, n) => format!("attempt {attempt}: one digest of {n} items"),
            };
            if let Some(item) = self.items.get_mut(id) {
                // A forced re-paste is verified on its own; an earlier paste's hook no longer
                // settles the item (see `await_hook`).
                item.hook_owed = None;
            }
            self.transition(id, State::Sending, "claimed", detail, out);
        }
    }

    /// A claimed flight that cannot be typed at all: its items are stuck, nothing was typed.
    fn refuse_flight(&mut self, session: &str, flight: &Flight, why: String, out: &mut Out<'_>) {
        self.take_flight(session);
        for id in &flight.items {
            if let Some(item) = self.items.get_mut(id) {
                item.stuck = Some(StuckClass::PasteMissing);
            }
            self.transition(id, State::Stuck, "refused", why.clone(), out);
        }
        if let Some(client) = flight.reply_to {
            let message = format!("refused, nothing typed: {why}");
            out.actions.push(Action::Reply { client, ok: false, acted: false, message, item: None });
        }
        self.pump(session, out);
    }

    /// Type the prompt: one write, bracketed when the application asked for bracketed paste.
    fn paste(&mut self, session: &str, flight: &Flight, look: &Look, out: &mut Out<'_>) {
        let bracketed = look.screen.bracketed_paste;
        let bytes = text::paste_bytes(&flight.text, bracketed);
        let token = self.token(session, Some(flight.attempt));
        // Without bracketed paste every newline is typed as an Enter: the program takes each
        // line on its own.
        let lines = if bracketed { 0 } else { text::typed_lines(&flight.text) };
        if let Some(f) = self.flight_mut(session) {
            f.items = flight.items.clone();
            f.baseline = look.presence;
            f.phase = Phase::Pasting;
            f.waiting = Some(token);
            f.typed_lines = lines;
            f.paste_written = true;
        }
        let how = match (bracketed, lines) {
            (true, _) => "bracketed paste".to_string(),
            (false, 0 | 1) => "plain typing (no bracketed paste)".to_string(),
            (false, n) => format!(
                "plain typing (no bracketed paste): {n} lines, each ended by an Enter, so the program takes them as {n} submissions, not one prompt"
            ),
        };
        let note = format!(
            "input area shows the text {} time(s), {} placeholder(s); {how}",
            look.presence.text, look.presence.placeholders
        );
        for id in &flight.items {
            if let Some(item) = self.items.get_mut(id) {
                item.attempts += 1;
                item.note(out.now_ms, "baseline", note.clone());
            }
        }
        // On record before the bytes go out: after a crash, an item whose paste is not on
        // record was never typed, and a hook can settle an item only if its paste is (a hook
        // for the same text from before it is an earlier prompt's). Recorded when the master
        // acknowledged the paste instead, a crash between the write and that acknowledgement
        // left a typed prompt looking untyped.
        let detail = format!("{} bytes written to the session", flight.text.len());
        for id in &flight.items {
            self.transition(id, State::Sending, "pasted", detail.clone(), out);
        }
        // Its echo, from now on, is the prompt's, not the agent's (a prompt may quote a dialog).
        self.session(session).typed.push_text(&flight.text);
        let (session, generation) = (session.to_string(), flight.generation);
        out.actions.push(Action::Write { token, session, generation, kind: WriteKind::Paste, bytes });
    }

    /// Press Enter on text found sitting in the input box (a force, or a restart): verified
    /// against an empty baseline, as if it had just been pasted.
    fn enter_on_text_in_box(&mut self, session: &str, out: &mut Out<'_>) {
        let now_ms = out.now_ms;
        if let Some(f) = self.flight_mut(session) {
            f.baseline = Presence::default();
            f.pasted_ms = Some(now_ms);
        }
        self.press_enter(session, out);
    }

    fn press_enter(&mut self, session: &str, out: &mut Out<'_>) {
        let now_ms = out.now_ms;
        let Some(flight) = self.flight(session).cloned() else { return };
        let activity =
            self.sessions.get(session).and_then(|q| q.live.as_ref()).map_or(Activity::Unknown, |l| l.activity);
        let stale = activity == Activity::Idle && self.activity_stale(session, now_ms).is_some();
        let token = self.token(session, Some(flight.attempt));
        let q = self.session(session);
        let queue_ahead = q.owed.iter().any(|i| i.queued_by_agent);
        q.last_enter_ms = Some(now_ms);
        if let Some(f) = self.flight_mut(session) {
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
        self.note_items(&flight.items, "enter", &format!("Enter #{}", flight.enters + 1), now_ms);
        out.actions.push(Action::Write {
            token,
            session: session.to_string(),
            generation: flight.generation,
            kind: WriteKind::Enter,
            bytes: b"\r".to_vec(),
        });
    }

    fn on_written(
        &mut self,
        session: &str,
        attempt: Option<u64>,
        token: Token,
        result: Result<(), WriteError>,
        out: &mut Out<'_>,
    ) {
        let Some(flight) = self.flight(session).cloned() else { return };
        if Some(flight.attempt) != attempt || flight.waiting != Some(token) {
            return;
        }
        let Some(rules) = self.rules(session) else { return };
        let settings = &rules.delivery;
        match (flight.phase, result) {
            (Phase::Erasing, result) => self.erase_written(session, result, out),
            (_, Err(WriteError::Unknown(e))) => {
                let what = if flight.phase == Phase::Pasting { WriteKind::Paste } else { WriteKind::Enter };
                let detail = format!(
                    "the connection failed before the session confirmed the {} ({e}); it may or may not have been typed",
                    what.as_str()
                );
                self.stick_flight(session, StuckClass::Interrupted, detail, out);
            }
            (Phase::Pasting, Ok(())) => self.paste_accepted(session, settings, out),
            (Phase::Pasting, Err(WriteError::Refused(e))) => {
                // The master refuses an INPUT frame whole: nothing was typed. Queue it again
                // and back off.
                self.take_flight(session);
                let detail = format!("the session refused the paste: {e}; nothing was typed");
                for id in &flight.items {
                    self.transition(id, State::Queued, "refused", detail.clone(), out);
                }
                self.backoff(session, &format!("the session refused input: {e}"), out);
            }
            (Phase::Entering, Ok(())) => {
                if let Some(f) = self.flight_mut(session) {
                    f.phase = Phase::Submit;
                    f.waiting = None;
                }
                self.arm(session, TimerKind::Deadline, out.now + settings.submit_timeout, out);
                self.arm(session, TimerKind::Poll, out.now + settings.poll, out);
            }
            (Phase::Entering, Err(WriteError::Refused(e))) => {
                let detail = format!("the session refused the Enter: {e}");
                self.stick_flight(session, StuckClass::SubmitStuck, detail, out);
            }
            _ => {}
        }
    }

    /// The master took the paste (on record since before it was written): the echo window
    /// starts.
    fn paste_accepted(&mut self, session: &str, settings: &DeliverySettings, out: &mut Out<'_>) {
        // On record before any Enter can follow it: the `pasted` note (before the write) says
        // the bytes may have gone out; this one that they did. After a crash, an item with
        // neither this nor its text seen in the box since its claim was never submitted by
        // desk ([`never_typed`]).
        if let Some(f) = self.flight(session).filter(|f| f.mode == Mode::Deliver) {
            for id in f.items.clone() {
                self.transition(
                    &id,
                    State::Sending,
                    "written",
                    "the master wrote the paste to the terminal".into(),
                    out,
                );
            }
        }
        if let Some(f) = self.flight_mut(session) {
            f.phase = Phase::Echo;
            f.waiting = None;
            f.pasted_ms = Some(out.now_ms);
        }
        self.arm(session, TimerKind::Deadline, out.now + settings.echo_timeout, out);
        self.arm(session, TimerKind::Poll, out.now + settings.poll.min(Duration::from_millis(10)), out);
    }

    fn read_failed(&mut self, session: &str, flight: &Flight, error: &str, out: &mut Out<'_>) {
        let now = out.now;
        if flight.mode == Mode::Clear {
            self.take_flight(session);
            let note = format!("cannot read the screen ({error}); the input box was left as it is");
            return self.finish_clear(session, flight, &note, out);
        }
        match flight.phase {
            Phase::Baseline if flight.mode == Mode::Deliver => {
                self.take_flight(session);
                for id in &flight.items {
                    self.transition(
                        id,
                        State::Queued,
                        "hold",
                        format!("cannot read the screen: {error}; nothing was typed"),
                        out,
                    );
                }
                self.backoff(session, &format!("cannot read the screen: {error}"), out);
            }
            Phase::Baseline => {
                self.stick_flight(session, StuckClass::Unobservable, format!("cannot read the screen: {error}"), out)
            }
            Phase::Echo if flight.deadline_passed => self.stick_flight(
                session,
                StuckClass::Unobservable,
                format!("cannot read the screen at the end of the echo window: {error}; not re-pasting"),
                out,
            ),
            Phase::Settle => self.stick_flight(
                session,
                StuckClass::SubmitStuck,
                format!("the text was echoed, but the look before the Enter failed: {error}; no Enter pressed blind"),
                out,
            ),
            Phase::Submit if flight.deadline_passed => self.stick_flight(
                session,
                StuckClass::Unobservable,
                format!(
                    "cannot read the screen at the end of the verification window: {error}; no Enter pressed blind"
                ),
                out,
            ),
            _ => {
                // Keep trying until the phase's deadline; it decides.
                if let Some(f) = self.flight_mut(session) {
                    f.read_failures += 1;
                }
                if let Some(rules) = self.rules(session) {
                    let poll = rules.delivery.poll;
                    self.arm(session, TimerKind::Poll, now + poll, out);
                }
            }
        }
    }

    fn on_persist_failed(&mut self, session: &str, attempt: Option<u64>, error: &str, out: &mut Out<'_>) {
        let now_ms = out.now_ms;
        // The rest of that batch did not happen. If it was a claim, nothing was typed; if it
        // was a final state, the item stays `sending` on disk and a restart settles it.
        let Some(flight) = self.flight(session).cloned() else { return };
        if Some(flight.attempt) != attempt {
            return;
        }
        self.take_flight(session);
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
        self.backoff(session, &format!("cannot write delivery state: {error}"), out);
    }

    fn on_timer(&mut self, key: TimerKey, out: &mut Out<'_>) {
        let now = out.now;
        let session = key.session.clone();
        if key.kind == TimerKind::Drained {
            return self.taken_from_queue(&session, out);
        }
        if key.kind == TimerKind::Watch {
            return self.on_watch_timer(&session, out);
        }
        if key.kind == TimerKind::Retry {
            if self.sessions.get(&session).is_some_and(|q| q.retry_at.is_some_and(|t| now < t)) {
                return;
            }
            if let Some(q) = self.sessions.get_mut(&session) {
                q.retry_at = None;
            }
            self.recover(&session, out);
            return self.pump(&session, out);
        }
        let Some(flight) = self.flight(&session).cloned() else { return };
        if Some(flight.attempt) != key.attempt || (key.kind != TimerKind::Poll && key.step != flight.enters) {
            return;
        }
        match key.kind {
            TimerKind::Poll => {
                if matches!(flight.phase, Phase::Echo | Phase::Submit | Phase::Erased) && flight.waiting.is_none() {
                    self.request_snapshot(&session, out);
                }
            }
            TimerKind::Settle => {
                if flight.phase == Phase::Settle {
                    self.request_snapshot(&session, out);
                }
            }
            TimerKind::Deadline if matches!(flight.phase, Phase::Echo | Phase::Submit | Phase::Erased) => {
                // Decide on a fresh look, never on an older one: a paste that showed after the
                // last poll is there, and so is a submit.
                if let Some(f) = self.flight_mut(&session) {
                    f.deadline_passed = true;
                }
                if flight.waiting.is_none() {
                    self.request_snapshot(&session, out);
                }
            }
            TimerKind::Deadline => {}
            TimerKind::Retry | TimerKind::Drained | TimerKind::Watch => {}
        }
    }

    fn backoff(&mut self, session: &str, why: &str, out: &mut Out<'_>) {
        let (now, now_ms) = (out.now, out.now_ms);
        let q = self.session(session);
        let delay = q.backoff.fail();
        q.retry_at = Some(now + delay);
        self.set_hold(session, format!("{why}; retrying in {} s", delay.as_secs()), now_ms);
        self.arm_retry(session, now + delay, out);
    }

    /// The flight is delivered on `evidence`; `by_hook` when that evidence is the agent's own
    /// UserPromptSubmit report (otherwise the report is still owed, see `owed`).
    fn submitted(&mut self, session: &str, evidence: String, by_hook: bool, out: &mut Out<'_>) {
        let Some(flight) = self.take_flight(session) else { return };
        self.session(session).backoff.reset();
        // Delivered on other evidence: its hook is owed, and recorded as owed on disk. Typed
        // into a working agent, one shown idle only from before the previous prompt, or one
        // with earlier prompts still in its own queue (it takes them first, at a turn boundary
        // that can look idle), it may sit in the agent's own queue.
        let mid_turn =
            flight.activity_at_enter == Activity::Working || flight.stale_at_enter || flight.queue_ahead_at_enter;
        // Recorded as what it was: several submissions, one per line typed.
        let split = flight.typed_lines > 1;
        let evidence = if split {
            format!(
                "{evidence}; delivered as {} separate submissions, one per line (typed without bracketed paste), not as one prompt",
                flight.typed_lines
            )
        } else {
            evidence
        };
        for id in &flight.items {
            if let Some(item) = self.items.get_mut(id) {
                if !by_hook {
                    item.hook_owed = Some(flight.prompt.digest.clone());
                    item.queued_by_agent = mid_turn;
                }
                if split {
                    item.submissions = Some(flight.typed_lines);
                }
            }
            self.transition(id, State::Delivered, "delivered", evidence.clone(), out);
            if !by_hook && let Some(Action::Persist { item, .. }) = out.actions.last() {
                let item = item.clone();
                self.owe(item);
            }
        }
        if let Some(client) = flight.reply_to {
            let message = format!("{}; delivered: {evidence}", flight.did());
            out.actions.push(Action::Reply { client, ok: true, acted: true, message, item: None });
        }
        self.pump(session, out);
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
    fn taken_from_queue(&mut self, session: &str, out: &mut Out<'_>) {
        let now_ms = out.now_ms;
        let q = self.session(session);
        let idle_since = q.activity_changed_ms;
        let Some(live) = q.live.as_ref().filter(|l| l.activity == Activity::Idle) else { return };
        let generation = live.generation;
        if now_ms < idle_since + QUEUE_DRAINED.as_millis() as u64 {
            return;
        }
        self.take_from_queue(session, generation, idle_since, out);
    }

    /// The agent of `generation` stayed idle for [`QUEUE_DRAINED`] from `idle_since` on: the
    /// prompts of that generation it may have queued before then were taken. (Another
    /// generation's agent being idle says nothing about them.)
    fn take_from_queue(&mut self, session: &str, generation: u32, idle_since: u64, out: &mut Out<'_>) {
        let q = self.session(session);
        let taken: Vec<usize> = (0..q.owed.len())
            .filter(|j| {
                let i = &q.owed[*j];
                i.queued_by_agent && i.state_since_ms <= idle_since && i.generation.is_none_or(|g| g == generation)
            })
            .collect();
        for i in taken {
            let mut item = self.session(session).owed[i].clone();
            item.queued_by_agent = false;
            let note = format!(
                "the agent has been idle for {} s since after it: its own queue is empty, so it took the prompt",
                QUEUE_DRAINED.as_secs()
            );
            if let Some(item) = self.record_delivered(item, "taken", note, out) {
                self.session(session).owed[i] = item;
            }
        }
    }

    /// Persist a change to a delivered item kept only among the owed ones (it stays delivered,
    /// with a new note); returns the record as written.
    fn record_delivered(&mut self, item: Item, kind: &str, note: String, out: &mut Out<'_>) -> Option<Item> {
        let id = item.id.clone();
        self.items.insert(id.clone(), item);
        self.transition(&id, State::Delivered, kind, note, out);
        match out.actions.last() {
            Some(Action::Persist { item, .. }) => Some(item.clone()),
            _ => None,
        }
    }

    /// Remember a delivered item whose UserPromptSubmit hook is still to come. Past the bound
    /// the oldest that surely reached the agent is forgotten first (its hook is only a
    /// confirmation); one that may still sit in the agent's own queue is kept, to be judged when
    /// its agent goes, unless [`QUEUED_BY_AGENT_MAX`] of them wait.
    fn owe(&mut self, item: Item) {
        let q = self.session(&item.session);
        q.owed.push_back(item);
        while q.owed.len() > RECENT_HOOKS {
            let queued = q.owed.iter().filter(|i| i.queued_by_agent).count();
            match q.owed.iter().position(|i| !i.queued_by_agent) {
                _ if queued > QUEUED_BY_AGENT_MAX => q.owed.pop_front(),
                Some(oldest) => q.owed.remove(oldest),
                None => break,
            };
        }
    }

    /// Items left submit-stuck in an earlier generation's input box: that box is gone with its
    /// agent, so an Enter has nothing to submit, and whether someone submitted the text before
    /// the agent ended is unknown. They are interrupted (a force pastes them again).
    fn boxes_gone(&mut self, session: &str, generation: u32, out: &mut Out<'_>) {
        let Some(q) = self.sessions.get(session) else { return };
        let left: Vec<ItemId> = q
            .items
            .iter()
            .filter(|id| {
                self.items.get(*id).is_some_and(|i| {
                    i.stuck == Some(StuckClass::SubmitStuck) && i.generation.is_some_and(|g| g != generation)
                })
            })
            .cloned()
            .collect();
        for id in left {
            let why = format!(
                "the session restarted (generation {generation} runs now) while the text sat unsubmitted in the old input box; whether someone submitted it there is unknown"
            );
            self.stick(&id, StuckClass::Interrupted, why, out);
        }
    }

    /// The text is (or may be) in the input box, and a dialog shows: an Enter would answer the
    /// dialog, so the item is stuck until the operator has dealt with it (`desk force` then
    /// presses Enter only, if the text is still there).
    fn stick_for_dialog(&mut self, session: &str, rule: &str, out: &mut Out<'_>) {
        self.stick_flight(
            session,
            StuckClass::SubmitStuck,
            format!("a dialog ({rule}) is on screen; not pressing Enter"),
            out,
        );
    }

    /// The composer holds the prompt and text someone else typed: an Enter would submit them as
    /// one message, so none is pressed.
    fn stick_merged_in_box(&mut self, session: &str, rest: &str, out: &mut Out<'_>) {
        let prompt = self.flight(session).map(|f| f.prompt.head.clone()).unwrap_or_default();
        let detail = format!(
            "the input box holds this prompt ({prompt:?}…) together with text someone else typed ({rest:?}); no Enter pressed, as it would submit both as one message"
        );
        self.stick_flight(session, StuckClass::Merged, detail, out);
    }

    fn stick_flight(&mut self, session: &str, class: StuckClass, detail: String, out: &mut Out<'_>) {
        let Some(flight) = self.take_flight(session) else { return };
        for id in &flight.items {
            let detail = match class {
                StuckClass::Interrupted => self.await_hook(id, &flight.prompt, &detail),
                _ => detail.clone(),
            };
            self.stick(id, class, detail, out);
        }
        if let Some(client) = flight.reply_to {
            let message = format!("{}; {}", flight.did(), forced_outcome(class, &detail));
            out.actions.push(Action::Reply { client, ok: false, acted: flight.acted(), message, item: None });
        }
        // The next items go on their own: a stuck one never blocks the queue.
        self.pump(session, out);
    }

    /// Settle items found `sending` at start-up, one at a time, once the session is observable.
    fn recover(&mut self, session: &str, out: &mut Out<'_>) {
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
        self.start_flight(
            session,
            live,
            Launch { ids: group, mode: Mode::Recover, reply_to: None, over_draft: false },
            out,
        );
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

    fn on_command(&mut self, client: u64, command: Command, out: &mut Out<'_>) {
        let reply = |out: &mut Out<'_>, ok: bool, message: String| {
            out.actions.push(Action::Reply { client, ok, acted: false, message, item: None })
        };
        match command {
            Command::Pause { session, reason } => {
                self.session(&session).paused = Some(reason);
                self.pump(&session, out);
                reply(out, true, format!("paused delivery to {session}"));
            }
            Command::Resume { session } => {
                let was = self.session(&session).paused.take();
                self.session(&session).retry_at = None;
                self.pump(&session, out);
                let message = match was {
                    Some(_) => format!("resumed delivery to {session}"),
                    None => format!("{session} was not paused"),
                };
                reply(out, true, message);
            }
            Command::Drop(id) => {
                let Some((state, session)) = self.items.get(&id).map(|i| (i.state, i.session.clone())) else {
                    return reply(out, false, format!("no pending item {id} (it may be delivered or dropped already)"));
                };
                if state == State::Sending || self.flight(&session).is_some_and(|f| f.items.contains(&id)) {
                    return reply(
                        out,
                        false,
                        format!("item {id} is being delivered right now; drop it once it settles"),
                    );
                }
                if let Some(live) = self.clearable(&id) {
                    // Its prompt may sit unsent in the input box: look, and erase it there
                    // if the box holds exactly that prompt; the drop replies once done.
                    let launch = Launch { ids: vec![id], mode: Mode::Clear, reply_to: Some(client), over_draft: false };
                    return self.start_flight(&session, live, launch, out);
                }
                self.transition(&id, State::Dropped, "dropped", "dropped by the operator".into(), out);
                reply(out, true, format!("dropped {id}"));
                self.pump(&session, out);
            }
            Command::Force { id, over_draft } => {
                if let Err(message) = self.force(client, id, over_draft, out) {
                    reply(out, false, message);
                }
            }
        }
    }

    /// An operator's force: a stuck item goes again (Enter only when it is submit-stuck), and
    /// so does a queued one held by a draft, with `over_draft`. Why not, when it cannot go now.
    fn force(&mut self, client: u64, id: ItemId, over_draft: bool, out: &mut Out<'_>) -> Result<(), String> {
        let item = self.items.get(&id).cloned().ok_or_else(|| format!("no pending item {id}"))?;
        self.forceable(&item, over_draft)?;
        let live = self.force_gate(&item.session)?;
        let mode = if item.stuck == Some(StuckClass::SubmitStuck) { Mode::ForceEnter } else { Mode::Deliver };
        // A digest pasted together goes again together: its prompt may sit in the box whole.
        let ids = self.pasted_group(&item);
        let with = match ids.len() {
            1 => String::new(),
            n => format!(" (with the {} other item(s) of its digest)", n - 1),
        };
        let note = match mode {
            Mode::ForceEnter => format!("operator: press Enter{with}"),
            _ if over_draft => format!("operator: paste, even onto text someone typed{with}"),
            _ => format!("operator: paste again, or press Enter if its prompt sits unsent in the box{with}"),
        };
        self.note_items(&ids, "forced", &note, out.now_ms);
        let launch = Launch { ids, mode, reply_to: Some(client), over_draft };
        self.start_flight(&item.session, live, launch, out);
        Ok(())
    }

    /// Whether an item's state allows a force: stuck (but not merged with someone's text), or
    /// queued behind a draft when the operator chose to paste over it.
    fn forceable(&self, item: &Item, over_draft: bool) -> Result<(), String> {
        let id = &item.id;
        let hold = self.sessions.get(&item.session).and_then(|q| q.hold.as_ref());
        let held_by_draft = hold.is_some_and(|h| h.reason.starts_with(DRAFT_HOLD));
        match (item.state, item.stuck) {
            (State::Stuck, Some(StuckClass::Merged)) => Err(format!(
                "item {id} is merged with text someone else typed (see desk item {id}): forcing could send it a second time, or submit that text with it. Check the agent, then desk drop {id}, or desk send it again if it must arrive on its own"
            )),
            (State::Stuck, _) => Ok(()),
            (State::Queued, _) if self.held_by_own_paste(&item.session) => Err(format!(
                "item {id} is held: {}. Deal with that item first (force or drop it); its prompt, not someone's draft, is what the box holds",
                hold.map(|h| h.reason.as_str()).unwrap_or_default()
            )),
            (State::Queued, _) if held_by_draft && !over_draft => Err(format!(
                "item {id} is held: {}. Forcing it would paste the prompt after that text and submit both as one message; run desk force {id} --over-draft to do that, or wait until the box is sent or cleared",
                hold.map(|h| h.reason.as_str()).unwrap_or_default()
            )),
            (State::Queued, _) if held_by_draft => Ok(()),
            (state, _) => {
                let hold = match (state, hold) {
                    (State::Queued, Some(h)) => format!("; it waits because {}", h.reason),
                    _ => String::new(),
                };
                Err(format!(
                    "item {id} is {}, not stuck{hold}; only stuck items, and items held by a draft in the input box (with --over-draft), are forced",
                    state.as_str()
                ))
            }
        }
    }

    /// Whether a session can take a forced delivery now (nothing else in flight, running, no
    /// dialog up): its live view.
    fn force_gate(&mut self, session: &str) -> Result<SessionView, String> {
        let q = self.session(session);
        if q.flight.is_some() {
            return Err(format!("another delivery to {session} is in flight; force again when it settles"));
        }
        let live = q.live.clone().ok_or_else(|| format!("session {session} is not running"))?;
        if live.lifecycle != Lifecycle::Running {
            return Err(format!("session {session} is {}", live.lifecycle.as_str()));
        }
        if live.activity == Activity::Blocked {
            return Err(format!("the agent in {session} is waiting for the operator; answer it first"));
        }
        Ok(live)
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

/// Why a recovered flight, whose text is not in the input area, cannot have reached the agent
/// as a prompt; `None` when it may have. It is claimed (`sending`) but neither the master's
/// acknowledgement of its paste (`written`) nor its text in the input box is on record since,
/// so desk never pressed Enter for it (an Enter follows only one of those records, persisted
/// first; the `pasted` note, recorded before the bytes go out, says nothing of an Enter); the
/// text cannot submit itself (a bracketed paste, or a single line); and nobody has typed in the
/// session since the claim (a person pressing Enter on a paste that did land is the one way
/// such a prompt could have been taken). Whether the paste was written before the daemon died
/// is then unknown, and does not matter: if it was, it is not in the box any more and was not
/// submitted.
fn never_typed(flight: &Flight, items: &[&Item], screen: &ScreenView) -> Option<String> {
    if items.is_empty() || (!screen.bracketed_paste && flight.text.contains('\n')) {
        return None;
    }
    let mut claimed_ms = 0;
    for item in items {
        let claim = item.evidence.iter().rposition(|n| n.kind == "claimed")?;
        if item.evidence[claim..].iter().any(|n| matches!(n.kind.as_str(), "written" | "echoed")) {
            return None;
        }
        claimed_ms = claimed_ms.max(item.evidence[claim].at_ms);
    }
    if screen.last_typed_ms.is_some_and(|t| t >= claimed_ms) {
        return None;
    }
    Some(
        "claimed before the restart, but the master's acknowledgement of its paste is not on record (so no Enter was pressed for it), the text is not in the input area and nobody has typed since: it never reached the agent; queued again".into(),
    )
}

/// The start of a text, for a message: at most 40 characters and `…`.
fn preview(text: &str) -> String {
    desk_term::text::ellipsize(text, 41)
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
