//! When to tell the operator that a session needs them: the decision behind the daemon's notify
//! command, with no I/O.
//!
//! Owns which session events become a notification — activity turning `blocked`, health turning
//! `degraded`, an exit with a non-zero code or by a crash signal, the agent's own desktop
//! notification (OSC 9 / 777) — a stuck delivery item, an agent's channel message that mentions
//! the operator (`@human`), a session the restart supervisor holds down (`failed`), and the
//! per-session rate limit. It
//! keeps a small mirror of each session's state axes for the notification's `state`.
//! Invariants: a notification is made on a *change* (a session already blocked when the daemon
//! starts is not announced again); per session, one kind is announced at most once per
//! [`SAME_KIND_GAP`] (exits excepted: one per generation) and all kinds together at most
//! [`SESSION_BURST`] at once, refilled one per [`SESSION_REFILL`]; what the limit holds back is
//! counted and reported with the next notification that goes out, never silently lost — and so
//! is one the daemon could not deliver ([`Notifier::not_delivered`]). Takes the
//! clock as an argument; knows nothing of commands, processes or files.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use desk_wire::events::{AxisChange, Event, EventBody};
use desk_wire::state::{Activity, Health};

/// One kind announced at most once a minute per session: a dialog that flaps (blocked, working
/// for a second, blocked again on the next tool) is one thing to come and look at, and a minute
/// is shorter than it takes anyone to get to a terminal.
pub const SAME_KIND_GAP: Duration = Duration::from_secs(60);

/// Five notifications at once per session: enough for an agent that gets blocked, has a
/// prompt stuck and then crashes to be told in full.
pub const SESSION_BURST: u32 = 5;

/// Then one more per two minutes (at most 30 an hour per session): a session that keeps
/// needing someone stays visible without drowning the operator's phone.
pub const SESSION_REFILL: Duration = Duration::from_secs(120);

/// The exit signals an operator (or `desk kill`) sends: HUP, INT, KILL, TERM. A session that
/// died by one of them was stopped, not crashed; so was one that caught it and exited with the
/// shell's code for it, 128 + the signal: Claude Code exits with 143 on `desk kill`'s SIGTERM
/// and 129 on SIGHUP (docs/agents-observed.md §2.3, §8).
const STOP_SIGNALS: [i32; 4] = [1, 2, 9, 15];

/// What a notification is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Blocked,
    Stuck,
    Degraded,
    Exited,
    /// The agent's own desktop notification (OSC 9 / 777).
    Notification,
    /// The session's agent mentioned the operator in a channel (`@human`, or a person member).
    Mention,
    /// The daemon's supervisor holds the session down: its crash-loop limit, its agent refusing
    /// the conversation it was given, a rate-limit or login error (`desk_core::fleet::supervise`).
    Failed,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Blocked => "blocked",
            Kind::Stuck => "stuck",
            Kind::Degraded => "degraded",
            Kind::Exited => "exited",
            Kind::Notification => "notification",
            Kind::Mention => "mention",
            Kind::Failed => "failed",
        }
    }
}

/// A session's state axes as the latest events left them (`lifecycle`, `activity`, `health`),
/// for the notification's `state`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateMirror {
    pub lifecycle: String,
    pub activity: String,
    pub health: String,
    /// What a blocked agent waits for.
    pub wait: Option<String>,
}

/// A notification to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub kind: Kind,
    pub session: String,
    pub generation: u32,
    /// One line for a person.
    pub message: String,
    pub state: StateMirror,
    /// The stuck item, for [`Kind::Stuck`].
    pub item: Option<String>,
    /// Notifications of this session the rate limit held back since the previous one.
    pub suppressed: u32,
}

#[derive(Debug)]
struct SessionNotes {
    state: StateMirror,
    generation: u32,
    /// Tokens left, and when the last one was added.
    tokens: u32,
    refilled: Instant,
    last: HashMap<Kind, Instant>,
    suppressed: u32,
}

impl SessionNotes {
    fn new(now: Instant) -> SessionNotes {
        SessionNotes {
            state: StateMirror::default(),
            generation: 0,
            tokens: SESSION_BURST,
            refilled: now,
            last: HashMap::new(),
            suppressed: 0,
        }
    }

    /// Whether `kind` may go out now; takes a token if so, counts it held back if not.
    fn admit(&mut self, kind: Kind, now: Instant) -> bool {
        while self.tokens < SESSION_BURST && now.saturating_duration_since(self.refilled) >= SESSION_REFILL {
            self.tokens += 1;
            self.refilled += SESSION_REFILL;
        }
        if self.tokens == SESSION_BURST {
            self.refilled = now;
        }
        let too_soon = kind != Kind::Exited
            && self.last.get(&kind).is_some_and(|at| now.saturating_duration_since(*at) < SAME_KIND_GAP);
        if too_soon || self.tokens == 0 {
            self.suppressed += 1;
            return false;
        }
        self.tokens -= 1;
        self.last.insert(kind, now);
        true
    }
}

/// The notification decisions for every session. See the module documentation.
#[derive(Debug, Default)]
pub struct Notifier {
    sessions: HashMap<String, SessionNotes>,
}

impl Notifier {
    pub fn new() -> Notifier {
        Notifier::default()
    }

    /// A session was (re)connected: its state as the master reported it then. Nothing is
    /// announced for the state it is already in.
    pub fn on_connected(&mut self, session: &str, generation: u32, state: StateMirror, now: Instant) {
        let notes = self.sessions.entry(session.to_string()).or_insert_with(|| SessionNotes::new(now));
        notes.generation = generation;
        notes.state = state;
    }

    /// A session event; the notification it calls for, if any and if the limit lets it out.
    pub fn on_event(&mut self, session: &str, event: &Event, now: Instant) -> Option<Notice> {
        let notes = self.sessions.entry(session.to_string()).or_insert_with(|| SessionNotes::new(now));
        if event.generation < notes.generation {
            return None;
        }
        notes.generation = event.generation;
        let (kind, message) = match &event.body {
            EventBody::State { change, wait, .. } => {
                let state = &mut notes.state;
                let (_, word) = change.words();
                match change {
                    AxisChange::Lifecycle { .. } => {
                        state.lifecycle = word;
                        return None;
                    }
                    AxisChange::Activity { from, to } => {
                        state.activity = word;
                        state.wait = wait.clone();
                        if *to != Activity::Blocked || *from == Activity::Blocked {
                            return None;
                        }
                        let on = wait.as_deref().unwrap_or("a dialog");
                        (Kind::Blocked, format!("{session} is waiting for you: {on}"))
                    }
                    AxisChange::Health { from, to } => {
                        state.health = word;
                        let Health::Degraded(reason) = to else { return None };
                        if matches!(from, Health::Degraded(_)) {
                            return None;
                        }
                        (Kind::Degraded, format!("{session} is degraded: {reason}"))
                    }
                }
            }
            EventBody::Exit { code, signal, .. } => {
                notes.state.lifecycle = "exited".into();
                match (code, signal) {
                    (Some(0), _) | (None, None) => return None,
                    (Some(c), _) if STOP_SIGNALS.iter().any(|s| c - 128 == *s) => return None,
                    (Some(c), _) => (Kind::Exited, format!("{session} exited with code {c}")),
                    (None, Some(s)) if STOP_SIGNALS.contains(s) => return None,
                    (None, Some(s)) => (Kind::Exited, format!("{session} was killed by signal {s}")),
                }
            }
            EventBody::Notification { title, body } => {
                let message = match title {
                    Some(t) if !t.is_empty() => format!("{session}: {t}: {body}"),
                    _ => format!("{session}: {body}"),
                };
                (Kind::Notification, message)
            }
            _ => return None,
        };
        self.notice(session, kind, message, None, now)
    }

    /// A delivery item of `session` turned stuck (`class`: paste-missing, submit-stuck, ...).
    pub fn on_stuck(
        &mut self,
        session: &str,
        item: &str,
        class: &str,
        first_line: &str,
        now: Instant,
    ) -> Option<Notice> {
        let message = format!("{session}: prompt {item} is stuck ({class}): {first_line}");
        self.notice(session, Kind::Stuck, message, Some(item.to_string()), now)
    }

    /// The session's agent posted a channel message that mentions the operator.
    pub fn on_mention(
        &mut self,
        session: &str,
        channel: &str,
        message_id: &str,
        first_line: &str,
        now: Instant,
    ) -> Option<Notice> {
        let message = format!("{session} mentioned you in #{channel} (message {message_id}): {first_line}");
        self.notice(session, Kind::Mention, message, None, now)
    }

    /// The supervisor holds the session down; `health` says why (`failed: …`).
    pub fn on_failed(&mut self, session: &str, health: &str, now: Instant) -> Option<Notice> {
        let message = format!("{session}: {health}");
        self.notice(session, Kind::Failed, message, None, now)
    }

    /// A notice this notifier let out did not reach the operator after all (the daemon could
    /// not run the command for it: too many were running, or the config file could not be
    /// read): it is counted in `session`'s next notice's `suppressed`, like one the rate limit
    /// held back.
    pub fn not_delivered(&mut self, session: &str, now: Instant) {
        self.sessions.entry(session.to_string()).or_insert_with(|| SessionNotes::new(now)).suppressed += 1;
    }

    fn notice(
        &mut self,
        session: &str,
        kind: Kind,
        message: String,
        item: Option<String>,
        now: Instant,
    ) -> Option<Notice> {
        let notes = self.sessions.entry(session.to_string()).or_insert_with(|| SessionNotes::new(now));
        if !notes.admit(kind, now) {
            return None;
        }
        let suppressed = std::mem::take(&mut notes.suppressed);
        Some(Notice {
            kind,
            session: session.to_string(),
            generation: notes.generation,
            message,
            state: notes.state.clone(),
            item,
            suppressed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(generation: u32, body: EventBody) -> Event {
        Event { seq: 1, ts_ms: 1, generation, body }
    }

    fn activity(from: &str, to: &str) -> Event {
        let word = |w: &str| serde_json::from_value(serde_json::Value::String(w.into())).unwrap();
        ev(
            1,
            EventBody::State {
                change: AxisChange::Activity { from: word(from), to: word(to) },
                evidence: "rule".into(),
                wait: (to == "blocked").then(|| "approval: Bash".into()),
            },
        )
    }

    fn exit(code: Option<i32>, signal: Option<i32>) -> Event {
        ev(1, EventBody::Exit { code, signal, escalated: false })
    }

    #[test]
    fn turning_blocked_is_announced_with_what_it_waits_for_and_the_state() {
        let mut n = Notifier::new();
        let t = Instant::now();
        let notice = n.on_event("ask", &activity("working", "blocked"), t).unwrap();
        assert_eq!(notice.kind, Kind::Blocked);
        assert_eq!(notice.message, "ask is waiting for you: approval: Bash");
        assert_eq!(notice.state.activity, "blocked");
        assert_eq!(notice.state.wait.as_deref(), Some("approval: Bash"));
        // Staying blocked (a second rule confirming it) is not news.
        assert_eq!(n.on_event("ask", &activity("blocked", "blocked"), t), None);
        assert_eq!(n.on_event("ask", &activity("blocked", "working"), t), None);
    }

    #[test]
    fn a_state_the_session_was_in_when_connected_is_not_announced() {
        let mut n = Notifier::new();
        let t = Instant::now();
        let state = StateMirror { activity: "blocked".into(), ..StateMirror::default() };
        n.on_connected("ask", 1, state, t);
        assert_eq!(n.on_event("ask", &activity("unknown", "idle"), t), None);
    }

    #[test]
    fn exits_are_announced_for_errors_and_crashes_not_for_clean_or_requested_stops() {
        let mut n = Notifier::new();
        let t = Instant::now();
        assert_eq!(n.on_event("a", &exit(Some(0), None), t), None);
        assert_eq!(n.on_event("b", &exit(None, Some(15)), t), None);
        assert_eq!(n.on_event("c", &exit(None, Some(9)), t), None);
        // An agent that caught the stop signal and exited with its shell code (Claude: 143).
        for code in [129, 130, 137, 143] {
            assert_eq!(n.on_event("f", &exit(Some(code), None), t), None, "code {code}");
        }
        assert_eq!(n.on_event("g", &exit(Some(139), None), t).unwrap().message, "g exited with code 139");
        assert_eq!(n.on_event("d", &exit(Some(3), None), t).unwrap().message, "d exited with code 3");
        assert_eq!(n.on_event("e", &exit(None, Some(11)), t).unwrap().message, "e was killed by signal 11");
        assert_eq!(n.on_event("d", &exit(Some(3), None), t).unwrap().state.lifecycle, "exited");
    }

    #[test]
    fn degraded_health_and_the_agents_own_notifications_are_announced() {
        let mut n = Notifier::new();
        let t = Instant::now();
        let degraded = ev(
            1,
            EventBody::State {
                change: AxisChange::Health { from: Health::Ok, to: Health::Degraded("not ready after 60 s".into()) },
                evidence: "process".into(),
                wait: None,
            },
        );
        assert_eq!(n.on_event("s", &degraded, t).unwrap().message, "s is degraded: not ready after 60 s");
        let osc = ev(1, EventBody::Notification { title: Some("Claude".into()), body: "Needs your permission".into() });
        let notice = n.on_event("s", &osc, t).unwrap();
        assert_eq!((notice.kind, notice.message.as_str()), (Kind::Notification, "s: Claude: Needs your permission"));
        assert_eq!(notice.state.health, "degraded: not ready after 60 s");
        let stuck = n.on_stuck("s", "0001", "submit-stuck", "fix the parser", t).unwrap();
        assert_eq!(stuck.item.as_deref(), Some("0001"));
        assert_eq!(n.on_event("s", &ev(1, EventBody::Bell), t), None);
    }

    /// Issue 18's finding 7: a notice whose command the daemon skipped (the concurrency cap)
    /// is counted in the next one's `suppressed`, never lost silently.
    #[test]
    fn a_notice_that_was_not_delivered_is_counted_in_the_next() {
        let mut n = Notifier::new();
        let t = Instant::now();
        assert_eq!(n.on_stuck("s", "1", "c", "x", t).map(|x| x.suppressed), Some(0));
        n.not_delivered("s", t);
        assert!(n.on_event("s", &activity("working", "blocked"), t).is_some_and(|x| x.suppressed == 1));
        assert!(n.on_mention("s", "ops", "2", "hi", t).is_some_and(|x| x.suppressed == 0), "counted once");
    }

    #[test]
    fn one_kind_goes_out_once_a_minute_and_what_is_held_back_is_counted_on_the_next() {
        let mut n = Notifier::new();
        let t = Instant::now();
        assert!(n.on_event("s", &activity("working", "blocked"), t).is_some());
        assert!(n.on_event("s", &activity("working", "blocked"), t + Duration::from_secs(10)).is_none());
        assert!(n.on_event("s", &activity("working", "blocked"), t + Duration::from_secs(59)).is_none());
        let next = n.on_event("s", &activity("working", "blocked"), t + SAME_KIND_GAP).unwrap();
        assert_eq!(next.suppressed, 2);
        // Other sessions and other kinds have their own gaps.
        assert!(n.on_event("other", &activity("working", "blocked"), t).is_some());
        assert!(n.on_stuck("s", "1", "c", "x", t + SAME_KIND_GAP).is_some());
    }

    #[test]
    fn a_session_gets_a_burst_then_one_per_refill_and_exits_skip_only_the_same_kind_gap() {
        let mut n = Notifier::new();
        let t = Instant::now();
        for i in 0..SESSION_BURST {
            assert!(n.on_stuck("s", &i.to_string(), "c", "x", t + SAME_KIND_GAP * i).is_some(), "{i}");
        }
        let later = t + SAME_KIND_GAP * SESSION_BURST;
        // The budget is spent (minus what refilled meanwhile).
        let refilled = (SAME_KIND_GAP * SESSION_BURST).as_secs() / SESSION_REFILL.as_secs();
        let mut sent = 0;
        for i in 0..10 {
            if n.on_event("s", &exit(Some(1), None), later + Duration::from_millis(i)).is_some() {
                sent += 1;
            }
        }
        assert_eq!(sent, refilled, "exits are limited by the budget only");
        let refill = later + SESSION_REFILL;
        let notice = n.on_event("s", &exit(Some(1), None), refill).unwrap();
        assert_eq!(notice.suppressed, 10 - refilled as u32);
    }

    #[test]
    fn events_of_an_older_generation_are_ignored() {
        let mut n = Notifier::new();
        let t = Instant::now();
        n.on_connected("s", 2, StateMirror::default(), t);
        assert_eq!(n.on_event("s", &exit(Some(1), None), t), None);
    }

    #[test]
    fn a_mention_of_the_operator_is_a_notification_of_its_own_kind() {
        let mut n = Notifier::new();
        let t = Instant::now();
        let notice = n.on_mention("a", "release", "01ID", "@human can you approve the plan?", t).expect("notified");
        assert_eq!(notice.kind, Kind::Mention);
        assert_eq!(notice.message, "a mentioned you in #release (message 01ID): @human can you approve the plan?");
        // The same kind from the same session within a minute waits, counted.
        assert_eq!(n.on_mention("a", "release", "01IE", "again", t + Duration::from_secs(1)), None);
        let later = n.on_mention("a", "release", "01IF", "later", t + SAME_KIND_GAP).expect("after the gap");
        assert_eq!(later.suppressed, 1);
    }
}
