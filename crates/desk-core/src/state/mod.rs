//! The agent state authority: what desk says a session's agent is doing, and why.
//!
//! Owns three independent axes — lifecycle (starting / running / exited), activity (working /
//! idle / blocked / unknown) and health (ok / degraded with a bounded reason) — each with the
//! evidence that set it and when. Evidence arrives from hooks (strongest), provider rules over
//! the title, the screen and notifications ([`rules`]), output flow and the process itself.
//! Pure: the caller passes the clock (`now` for leases, `now_ms` for display) and gets back
//! the changes to announce. Invariants: "working" holds only under a lease that fresh evidence
//! must renew — when evidence stops, activity becomes unknown, never a stale value; a visible
//! approval dialog wins over everything but exit; otherwise the newest claim wins (every source
//! is strongest for the moment it describes), and no claim holds against what the screen
//! plainly shows; exit dominates every other reading; lifecycle only moves forward.

mod handover;
pub mod hooks;
pub mod rules;
pub mod typed;

use std::time::{Duration, Instant};

use EvidenceSource as Source;
use desk_wire::events::Axis;
pub use desk_wire::state::{Activity, AxisView, Evidence, EvidenceSource, Health, Lifecycle, StateView};
pub use handover::SavedAuthority;
pub use hooks::{Fact, HookFact};
pub use rules::{ReadySignal, Rule, RuleSet};

/// Longest health reason kept: a short sentence.
pub const REASON_CAP: usize = 160;

/// Without hooks or a bracketed-paste switch, a session is ready once its output has been
/// quiet this long (and at least this long after start): the TUI has drawn itself.
pub const READY_QUIET: Duration = Duration::from_millis(1000);

/// A session still not ready this long after start turns health degraded, saying which signal
/// it waits for: its deliveries are held, and the operator should know why rather than see
/// "starting" forever. The slowest start recorded (OpenCode, whose input box appears up to 20 s
/// after it starts) takes a third of this.
pub const READY_WITHIN: Duration = Duration::from_secs(60);

/// A change to announce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub axis: Axis,
    pub from: String,
    pub to: String,
    pub evidence: String,
}

/// One source's current claim about activity.
#[derive(Debug, Clone)]
struct Claim {
    activity: Activity,
    wait: Option<String>,
    detail: String,
    at: Instant,
    at_ms: u64,
    /// Working claims lapse at this instant unless renewed.
    expires: Option<Instant>,
}

impl Claim {
    /// A rule's claim; working claims hold for `lease` unless renewed.
    fn from_rule(rule: &Rule, lease: Duration, now: Instant, now_ms: u64) -> Claim {
        Claim {
            activity: rule.activity,
            wait: rule.wait.clone(),
            detail: rule.name.clone(),
            at: now,
            at_ms: now_ms,
            expires: (rule.activity == Activity::Working).then(|| now + lease),
        }
    }

    fn valid(&self, now: Instant) -> bool {
        self.expires.is_none_or(|t| now < t)
    }
}

#[derive(Debug, Clone)]
pub struct Authority {
    rules: RuleSet,
    started: Instant,
    lifecycle: AxisView<Lifecycle>,
    activity: AxisView<Activity>,
    wait: Option<String>,
    health: AxisView<Health>,
    ready: bool,
    hook: Option<Claim>,
    /// The program's own report of its state (Codex's OSC 7501).
    report: Option<Claim>,
    screen: Option<Claim>,
    title: Option<Claim>,
    notification: Option<Claim>,
    /// Open tool calls reported by hooks: working holds while one runs (bounded).
    open_tools: usize,
    last_output: Option<(Instant, u64)>,
    last_hook: Option<(Instant, u64)>,
    last_title: String,
    /// When a dialog last disappeared from the screen: a blocked claim from before it (a hook,
    /// a notification) is about that dialog, and it is gone.
    dialog_gone: Option<Instant>,
    /// What was typed into the session lately: its echo on the screen is not the agent's.
    typed: typed::Typed,
}

fn bounded(reason: String) -> String {
    desk_term::text::ellipsize(&reason, REASON_CAP)
}

impl Authority {
    pub fn new(rules: RuleSet, now: Instant, now_ms: u64) -> Authority {
        let evidence = Evidence { source: Source::Process, detail: "started".into(), at_ms: now_ms };
        Authority {
            rules,
            started: now,
            lifecycle: AxisView { value: Lifecycle::Starting, since_ms: now_ms, evidence: evidence.clone() },
            activity: AxisView {
                value: Activity::Unknown,
                since_ms: now_ms,
                evidence: Evidence { source: Source::None, detail: "no evidence yet".into(), at_ms: now_ms },
            },
            wait: None,
            health: AxisView { value: Health::Ok, since_ms: now_ms, evidence },
            ready: false,
            hook: None,
            report: None,
            screen: None,
            title: None,
            notification: None,
            open_tools: 0,
            last_output: None,
            last_hook: None,
            last_title: String::new(),
            dialog_gone: None,
            typed: typed::Typed::default(),
        }
    }

    /// Someone typed into the session (a paste, a person's keys, `desk keys`): screen rules do
    /// not take its echo (in the input box, in the transcript) for what the agent draws.
    pub fn on_typed(&mut self, bytes: &[u8]) {
        self.typed.on_input(bytes);
    }

    pub fn rules(&self) -> &RuleSet {
        &self.rules
    }

    pub fn lifecycle(&self) -> Lifecycle {
        self.lifecycle.value
    }

    pub fn activity(&self) -> Activity {
        self.activity.value
    }

    pub fn view(&self) -> StateView {
        StateView {
            provider: self.rules.provider.clone(),
            lifecycle: self.lifecycle.clone(),
            activity: self.activity.clone(),
            wait: self.wait.clone(),
            health: self.health.clone(),
            ready: self.ready,
            last_output_ms: self.last_output.map(|(_, ms)| ms),
            last_hook_ms: self.last_hook.map(|(_, ms)| ms),
            rules: self.rules.origin.clone(),
        }
    }

    // ----- evidence in -----

    /// A chunk of output arrived.
    pub fn on_output(&mut self, now: Instant, now_ms: u64) -> Vec<Change> {
        self.last_output = Some((now, now_ms));
        // Output keeps a screen "working" claim alive.
        if let Some(claim) = &mut self.screen
            && claim.activity == Activity::Working
        {
            claim.expires = Some(now + self.rules.leases.screen_working);
        }
        Vec::new()
    }

    /// Output has been quiet for the quiescence period.
    pub fn on_quiet(&mut self, now: Instant, now_ms: u64) -> Vec<Change> {
        let mut changes = Vec::new();
        if now.duration_since(self.started) >= READY_QUIET && self.rules.ready_on.contains(&ReadySignal::Quiet) {
            self.become_ready(Source::Output, "output quiet after start", now_ms, &mut changes);
        }
        changes.extend(self.settle(now, now_ms));
        changes
    }

    pub fn on_mode(&mut self, mode: desk_term::events::Mode, on: bool, now: Instant, now_ms: u64) -> Vec<Change> {
        let mut changes = Vec::new();
        if mode == desk_term::events::Mode::BracketedPaste && on && self.rules.ready_on.contains(&ReadySignal::Mode) {
            self.become_ready(Source::Mode, "bracketed paste enabled", now_ms, &mut changes);
        }
        changes.extend(self.settle(now, now_ms));
        changes
    }

    pub fn on_title(&mut self, title: &str, now: Instant, now_ms: u64) -> Vec<Change> {
        let changed = title != self.last_title;
        self.last_title = title.to_string();
        match self.rules.match_title(title) {
            Some(rule) => {
                let renew = changed || self.title.as_ref().is_none_or(|c| c.detail != rule.name);
                if renew {
                    self.title = Some(Claim::from_rule(rule, self.rules.leases.title_working, now, now_ms));
                }
            }
            None => self.title = None,
        }
        self.settle(now, now_ms)
    }

    pub fn on_notification(&mut self, text: &str, now: Instant, now_ms: u64) -> Vec<Change> {
        if let Some(rule) = self.rules.match_notification(text) {
            self.notification = Some(Claim::from_rule(rule, self.rules.leases.title_working, now, now_ms));
        }
        self.settle(now, now_ms)
    }

    /// Evaluate the screen rules over the visible rows.
    pub fn on_screen(&mut self, rows: &[String], now: Instant, now_ms: u64) -> Vec<Change> {
        let mut changes = Vec::new();
        let matched = self.rules.match_screen(rows, &self.typed).cloned();
        if let Some(rule) = &matched
            && rule.activity == Activity::Idle
            && self.rules.ready_on.contains(&ReadySignal::Screen)
        {
            self.become_ready(Source::Screen, &format!("{} on screen", rule.name), now_ms, &mut changes);
        }
        let was_dialog = self.screen.as_ref().is_some_and(|c| c.activity == Activity::Blocked);
        if was_dialog && matched.as_ref().is_none_or(|r| r.activity != Activity::Blocked) {
            self.dialog_gone = Some(now);
        }
        match matched {
            Some(rule) => {
                let same = self.screen.as_ref().is_some_and(|c| c.detail == rule.name);
                if !same {
                    // Renewed by every chunk of output (see on_output).
                    self.screen = Some(Claim::from_rule(&rule, self.rules.leases.screen_working, now, now_ms));
                }
            }
            None => self.screen = None,
        }
        // A notification claim is about the moment it was shown; a later screen without the
        // dialog ends it.
        if self.notification.as_ref().is_some_and(|c| c.activity == Activity::Blocked)
            && self.screen.as_ref().is_none_or(|c| c.activity != Activity::Blocked)
            && self.rules.has_screen_rules()
        {
            self.notification = None;
        }
        changes.extend(self.settle(now, now_ms));
        changes
    }

    pub fn on_hook(&mut self, fact: &HookFact, now: Instant, now_ms: u64) -> Vec<Change> {
        self.last_hook = Some((now, now_ms));
        let mut changes = Vec::new();
        let lease = self.rules.leases.hook_working;
        let label = match &fact.detail {
            Some(d) => format!("{} ({d})", fact.event),
            None => fact.event.to_string(),
        };
        let claim =
            |activity, wait, expires| Claim { activity, wait, detail: label.clone(), at: now, at_ms: now_ms, expires };
        match &fact.fact {
            Fact::SessionStart => {
                if self.rules.ready_on.contains(&ReadySignal::Hook) {
                    self.become_ready(Source::Hook, &format!("{} hook", fact.event), now_ms, &mut changes);
                }
                self.open_tools = 0;
                self.hook = Some(claim(Activity::Idle, None, None));
            }
            Fact::SessionEnd | Fact::Ignored => {}
            Fact::Working => self.hook = Some(claim(Activity::Working, None, Some(now + lease))),
            Fact::Idle => {
                self.open_tools = 0;
                self.hook = Some(claim(Activity::Idle, None, None));
            }
            Fact::Blocked { wait } => self.hook = Some(claim(Activity::Blocked, Some(wait.clone()), None)),
            Fact::ToolStart { .. } => {
                self.open_tools = (self.open_tools + 1).min(64);
                self.hook = Some(claim(Activity::Working, None, Some(now + lease)));
            }
            Fact::ToolEnd { .. } => {
                self.open_tools = self.open_tools.saturating_sub(1);
                self.hook = Some(claim(Activity::Working, None, Some(now + lease)));
            }
            Fact::Heartbeat => {
                if let Some(c) = &mut self.hook
                    && c.activity == Activity::Working
                {
                    c.expires = Some(now + lease);
                }
            }
        }
        changes.extend(self.settle(now, now_ms));
        changes
    }

    /// The program reported its state in its output (`working`, `idle`, `done`, `blocked`).
    pub fn on_report(&mut self, state: &str, kind: Option<&str>, now: Instant, now_ms: u64) -> Vec<Change> {
        let (activity, wait) = match state {
            "working" => (Activity::Working, None),
            "idle" | "done" => (Activity::Idle, None),
            "blocked" => {
                let wait = match kind {
                    Some("permission") | None => "approval".to_string(),
                    Some(other) => other.to_string(),
                };
                (Activity::Blocked, Some(wait))
            }
            _ => return Vec::new(),
        };
        let expires = (activity == Activity::Working).then(|| now + self.rules.leases.hook_working);
        let detail = match kind {
            Some(k) => format!("state={state} ({k})"),
            None => format!("state={state}"),
        };
        let mut changes = Vec::new();
        if self.rules.ready_on.contains(&ReadySignal::Report) {
            self.become_ready(Source::Report, &detail, now_ms, &mut changes);
        }
        self.report = Some(Claim { activity, wait, detail, at: now, at_ms: now_ms, expires });
        changes.extend(self.settle(now, now_ms));
        changes
    }

    pub fn on_exit(&mut self, detail: &str, now: Instant, now_ms: u64) -> Vec<Change> {
        let mut changes = Vec::new();
        if self.lifecycle.value != Lifecycle::Exited {
            let evidence = Evidence { source: Source::Process, detail: detail.to_string(), at_ms: now_ms };
            changes.push(self.set_lifecycle(Lifecycle::Exited, evidence));
        }
        self.hook = None;
        self.report = None;
        self.screen = None;
        self.title = None;
        self.notification = None;
        changes.extend(self.settle(now, now_ms));
        changes
    }

    /// Let leases run out: call when [`Authority::next_deadline`] passes.
    pub fn tick(&mut self, now: Instant, now_ms: u64) -> Vec<Change> {
        self.settle(now, now_ms)
    }

    /// The next instant after `now` at which a lease or a health check may change the state.
    pub fn next_deadline(&self, now: Instant) -> Option<Instant> {
        let leases = [&self.hook, &self.report, &self.screen, &self.title, &self.notification]
            .into_iter()
            .flatten()
            .filter_map(|c| c.expires);
        let hooks_due = self
            .rules
            .expect_hook_within
            .filter(|_| self.rules.hooks && self.last_hook.is_none() && self.lifecycle.value != Lifecycle::Exited)
            .map(|d| self.started + d);
        let ready_due =
            (!self.ready && self.lifecycle.value == Lifecycle::Starting).then(|| self.started + READY_WITHIN);
        leases.chain(hooks_due).chain(ready_due).filter(|t| *t > now).min()
    }

    // ----- deciding -----

    fn become_ready(&mut self, source: Source, detail: &str, now_ms: u64, changes: &mut Vec<Change>) {
        if self.ready || self.lifecycle.value == Lifecycle::Exited {
            return;
        }
        self.ready = true;
        let evidence = Evidence { source, detail: detail.into(), at_ms: now_ms };
        changes.push(self.set_lifecycle(Lifecycle::Running, evidence));
    }

    fn set_lifecycle(&mut self, to: Lifecycle, evidence: Evidence) -> Change {
        let change = Change {
            axis: Axis::Lifecycle,
            from: self.lifecycle.value.as_str().into(),
            to: to.as_str().into(),
            evidence: format!("{}: {}", evidence.source, evidence.detail),
        };
        self.lifecycle = AxisView { value: to, since_ms: evidence.at_ms, evidence };
        change
    }

    /// Decide activity and health from the claims that are still valid.
    fn settle(&mut self, now: Instant, now_ms: u64) -> Vec<Change> {
        let mut changes = Vec::new();
        let (activity, wait, evidence) = self.decide(now, now_ms);
        let lapsed_from = (self.activity.value == Activity::Working && activity == Activity::Unknown)
            .then(|| self.activity.evidence.clone());
        if activity != self.activity.value || wait != self.wait {
            changes.push(Change {
                axis: Axis::Activity,
                from: self.activity.value.as_str().into(),
                to: activity.as_str().into(),
                evidence: format!("{}: {}", evidence.source, evidence.detail),
            });
            self.activity = AxisView { value: activity, since_ms: now_ms, evidence };
            self.wait = wait;
        } else {
            self.activity.evidence = evidence;
        }
        let health = self.decide_health(now, now_ms, lapsed_from);
        if let Some((health, evidence)) = health
            && health != self.health.value
        {
            changes.push(Change {
                axis: Axis::Health,
                from: self.health.value.as_str(),
                to: health.as_str(),
                evidence: format!("{}: {}", evidence.source, evidence.detail),
            });
            self.health = AxisView { value: health, since_ms: now_ms, evidence };
        }
        changes
    }

    fn decide(&self, now: Instant, now_ms: u64) -> (Activity, Option<String>, Evidence) {
        let evidence = |source: Source, c: &Claim| Evidence { source, detail: c.detail.clone(), at_ms: c.at_ms };
        if self.lifecycle.value == Lifecycle::Exited {
            let e = Evidence { source: Source::Process, detail: "exited".into(), at_ms: self.lifecycle.since_ms };
            return (Activity::Unknown, None, e);
        }
        // What the screen shows now: a rule that matches the current screen (a working rule only
        // while output keeps renewing it).
        let screen = self.screen.as_ref().filter(|c| c.valid(now));
        // 1. A dialog on screen is the most direct evidence: an Enter would answer it.
        if let Some(c) = screen
            && c.activity == Activity::Blocked
        {
            return (Activity::Blocked, c.wait.clone(), evidence(Source::Screen, c));
        }
        // 2. Otherwise the newest claim wins: every source is strongest for the moment it
        //    describes, and a later observation of another kind (a state report, a spinner
        //    title, a screen rule) supersedes an older hook. At equal times the order below
        //    (hooks first) breaks the tie.
        let valid = |source: Source, c: &Claim| {
            c.valid(now) || (source == Source::Hook && c.activity == Activity::Working && self.open_tools > 0)
        };
        let mut newest: Option<(Source, &Claim)> = None;
        for (source, claim) in [
            (Source::Hook, &self.hook),
            (Source::Report, &self.report),
            (Source::Screen, &self.screen),
            (Source::Title, &self.title),
            (Source::Notification, &self.notification),
        ] {
            if let Some(c) = claim
                && newest.is_none_or(|(_, n)| c.at > n.at)
            {
                newest = Some((source, c));
            }
        }
        let Some((source, c)) = newest else {
            return (
                Activity::Unknown,
                None,
                Evidence { source: Source::None, detail: "no evidence".into(), at_ms: now_ms },
            );
        };
        if !valid(source, c) {
            // The newest evidence was working and nothing renewed it. What the screen shows
            // now still counts; an older claim of another source does not come back.
            if let Some(s) = screen {
                return (s.activity, s.wait.clone(), evidence(Source::Screen, s));
            }
            return (
                Activity::Unknown,
                None,
                Evidence {
                    source: Source::Lease,
                    detail: format!("{source} evidence \"{}\" not renewed", c.detail),
                    at_ms: now_ms,
                },
            );
        }
        // 3. A blocked claim about a dialog that has since left the screen ends once the idle
        //    screen or title shows (agents send no hook when a dialog is dismissed).
        if c.activity == Activity::Blocked
            && self.dialog_gone.is_some_and(|gone| gone >= c.at)
            && let Some((idle_source, idle)) = [(Source::Screen, screen), (Source::Title, self.title.as_ref())]
                .into_iter()
                .find_map(|(s, claim)| claim.filter(|c| c.valid(now) && c.activity == Activity::Idle).map(|c| (s, c)))
        {
            let mut e = evidence(idle_source, idle);
            e.detail = format!("{} (the dialog {source} reported is gone)", idle.detail);
            return (Activity::Idle, None, e);
        }
        // 4. No claim holds against what the screen plainly shows: a working line on screen
        //    outlasts a turn-complete hook from an earlier or abandoned turn (agents finish side
        //    requests late), and the idle prompt on screen means no dialog is up, whatever a
        //    hook or notification said before it was dismissed (agents send no hook for that).
        if let Some(s) = screen
            && source != Source::Screen
        {
            match (s.activity, c.activity) {
                (Activity::Working, Activity::Idle) | (Activity::Idle, Activity::Blocked) => {
                    let mut e = evidence(Source::Screen, s);
                    e.detail = format!("{} (over {source}: {})", s.detail, c.detail);
                    return (s.activity, s.wait.clone(), e);
                }
                _ => {}
            }
        }
        (c.activity, c.wait.clone(), evidence(source, c))
    }

    fn decide_health(&self, now: Instant, now_ms: u64, lapsed_from: Option<Evidence>) -> Option<(Health, Evidence)> {
        if self.lifecycle.value == Lifecycle::Exited {
            return None;
        }
        if self.rules.hooks
            && self.last_hook.is_none()
            && let Some(within) = self.rules.expect_hook_within
            && now.duration_since(self.started) >= within
        {
            let reason = bounded(format!(
                "no hook event in the first {} s; hooks may not be wired (start with desk new --provider {})",
                within.as_secs(),
                self.rules.provider
            ));
            return Some((
                Health::Degraded(reason),
                Evidence { source: Source::Hook, detail: "silent".into(), at_ms: now_ms },
            ));
        }
        if !self.ready && now.duration_since(self.started) >= READY_WITHIN {
            let waited: Vec<&str> = self.rules.ready_on.iter().map(|s| s.describe()).collect();
            let reason = bounded(format!(
                "not ready {} s after start (waiting for {}); deliveries are held",
                READY_WITHIN.as_secs(),
                waited.join(" or ")
            ));
            return Some((
                Health::Degraded(reason),
                Evidence { source: Source::Ready, detail: "no ready signal".into(), at_ms: now_ms },
            ));
        }
        if self.ready && self.health.evidence.source == Source::Ready && self.health.value != Health::Ok {
            return Some((Health::Ok, self.lifecycle.evidence.clone()));
        }
        if let Some(from) = lapsed_from {
            let reason = bounded(format!("working evidence ({}: {}) expired", from.source, from.detail));
            return Some((
                Health::Degraded(reason),
                Evidence { source: Source::Lease, detail: "expired".into(), at_ms: now_ms },
            ));
        }
        if self.activity.value != Activity::Unknown {
            let e = self.activity.evidence.clone();
            return Some((Health::Ok, e));
        }
        None
    }
}

#[cfg(test)]
mod tests;
