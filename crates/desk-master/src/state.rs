//! The master's side of the agent state authority.
//!
//! Owns [`AgentState`]: the authority (`desk_core::state`) and what the loop keeps beside it to
//! feed it — whether output is flowing and when it last came, whether a look at the screen is
//! scheduled, the lease timer armed for the authority's next deadline, and when a person last
//! typed. Every observation goes in through a method that announces the changes it causes as
//! `state` events (handed back to the caller, which journals and streams them) and re-arms the
//! lease timer. Invariants: the screen rules run at most once per [`SCREEN_CHECK_DELAY`] during
//! a burst of output (and early, before a hook is weighed, when output came since they last
//! ran), and not at all while the session is quiet; output counts as quiet after
//! [`OUTPUT_QUIET_AFTER`] without any; the lease timer is armed for the authority's next
//! deadline whenever that changes.

use std::time::{Duration, Instant};

use super::timers::{Timer, Timers};
use desk_common::clock::now_ms;
use desk_core::state::{Authority, Change, SavedAuthority};
use desk_term::screen::Screen;
use desk_wire::events::{AxisChange, EventBody};
use desk_wire::state::Activity;

/// 50 ms after output the screen is read for the provider's screen rules: an agent redraws
/// its whole TUI within a few milliseconds, and state need not be fresher than this.
pub(super) const SCREEN_CHECK_DELAY: Duration = Duration::from_millis(50);

/// Output that stops for this long counts as quiet: longer than an agent's redraw bursts,
/// short enough that "quiet" is fresh evidence for readiness.
pub(super) const OUTPUT_QUIET_AFTER: Duration = Duration::from_millis(1000);

/// Events to journal and stream, in order, as an observation produced them.
pub(super) type Announced = Vec<EventBody>;

pub(super) struct AgentState {
    authority: Authority,
    /// When the armed [`Timer::StateTick`] fires, if one is armed.
    lease_timer: Option<Instant>,
    /// A [`Timer::ScreenCheck`] is armed.
    screen_check_armed: bool,
    /// When a controller (or an operator's `keys`) last typed (Unix ms): delivery does not
    /// type over a person.
    last_person_input_ms: Option<u64>,
    output_active: bool,
    last_output: Instant,
}

impl AgentState {
    pub(super) fn new(authority: Authority) -> AgentState {
        AgentState {
            authority,
            lease_timer: None,
            screen_check_armed: false,
            last_person_input_ms: None,
            output_active: false,
            last_output: Instant::now(),
        }
    }

    pub(super) fn authority(&self) -> &Authority {
        &self.authority
    }

    #[cfg(test)]
    pub(super) fn set_authority(&mut self, authority: Authority) {
        self.authority = authority;
    }

    /// Feed the authority an observation (`observe` returns the changes it made) and announce
    /// them.
    pub(super) fn observe(
        &mut self,
        timers: &mut Timers,
        observe: impl FnOnce(&mut Authority) -> Vec<Change>,
    ) -> Announced {
        let changes = observe(&mut self.authority);
        self.announce(changes, timers)
    }

    /// The `state` events of `changes`; re-arms the lease timer.
    pub(super) fn announce(&mut self, changes: Vec<Change>, timers: &mut Timers) -> Announced {
        let mut out = Vec::with_capacity(changes.len());
        for c in changes {
            let blocked = matches!(c.change, AxisChange::Activity { to: Activity::Blocked, .. });
            let wait = blocked.then(|| self.authority.view().wait).flatten();
            out.push(EventBody::State { change: c.change, evidence: c.evidence, wait });
        }
        if let Some(at) = self.authority.next_deadline(Instant::now())
            && self.lease_timer != Some(at)
        {
            self.lease_timer = Some(at);
            timers.arm(at, Timer::StateTick);
        }
        out
    }

    /// The lease timer fired.
    pub(super) fn tick(&mut self, now: Instant, timers: &mut Timers) -> Announced {
        self.lease_timer = None;
        let changes = self.authority.tick(now, now_ms());
        self.announce(changes, timers)
    }

    /// A chunk of output arrived: note it, schedule a look at the screen, and start the output
    /// flow (an `output` event) if it was quiet.
    pub(super) fn on_output(&mut self, now: Instant, timers: &mut Timers) -> Announced {
        self.last_output = now;
        let changes = self.authority.on_output(now, now_ms());
        if !self.screen_check_armed {
            self.screen_check_armed = true;
            timers.arm(now + SCREEN_CHECK_DELAY, Timer::ScreenCheck);
        }
        let mut out = self.announce(changes, timers);
        if !self.output_active {
            self.output_active = true;
            out.push(EventBody::Output { active: true });
            timers.arm(now + OUTPUT_QUIET_AFTER, Timer::OutputQuiet);
        }
        out
    }

    /// A look at the screen is scheduled and has not been taken yet.
    pub(super) fn screen_check_armed(&self) -> bool {
        self.screen_check_armed
    }

    /// Run the screen rules on `screen` now (the scheduled look, or an early one).
    pub(super) fn check_screen(&mut self, screen: &Screen, now: Instant, timers: &mut Timers) -> Announced {
        self.screen_check_armed = false;
        let rows = screen.text_rows();
        let changes = self.authority.on_screen(&rows, now, now_ms());
        self.announce(changes, timers)
    }

    pub(super) fn output_active(&self) -> bool {
        self.output_active
    }

    /// The [`Timer::OutputQuiet`] fired: whether output has now gone quiet (then the flow
    /// stops, with an `output` event, and the authority hears of the quiet), or the timer is
    /// armed again for when it would.
    pub(super) fn check_output_quiet(&mut self, now: Instant, timers: &mut Timers) -> Option<Announced> {
        if !self.output_active {
            return None;
        }
        let quiet_at = self.last_output + OUTPUT_QUIET_AFTER;
        if now < quiet_at {
            timers.arm(quiet_at, Timer::OutputQuiet);
            return None;
        }
        self.output_active = false;
        let mut out = vec![EventBody::Output { active: false }];
        out.extend(self.quiet(now, timers));
        Some(out)
    }

    /// The authority hears that output is quiet.
    pub(super) fn quiet(&mut self, now: Instant, timers: &mut Timers) -> Announced {
        let changes = self.authority.on_quiet(now, now_ms());
        self.announce(changes, timers)
    }

    /// Bytes were queued for the child: their echo is not the agent's screen.
    pub(super) fn on_typed(&mut self, bytes: &[u8]) {
        self.authority.on_typed(bytes);
    }

    /// A person (a controller, an operator's keys or answer) typed just now.
    pub(super) fn person_typed(&mut self) {
        self.last_person_input_ms = Some(now_ms());
    }

    pub(super) fn last_person_input_ms(&self) -> Option<u64> {
        self.last_person_input_ms
    }

    /// What a handover record keeps of it.
    pub(super) fn saved(&self, now: Instant) -> SavedState {
        SavedState {
            authority: self.authority.save(now),
            output_active: self.output_active,
            last_output_ms_ago: u64::try_from(now.saturating_duration_since(self.last_output).as_millis()).unwrap_or(0),
            last_person_input_ms: self.last_person_input_ms,
            screen_check_armed: self.screen_check_armed,
        }
    }

    /// Take over when a person last typed, from a handover record.
    pub(super) fn resume_person_input(&mut self, last_person_input_ms: Option<u64>) {
        self.last_person_input_ms = last_person_input_ms;
    }

    /// Take over a scheduled look at the screen, from a handover record.
    pub(super) fn resume_screen_check(&mut self, now: Instant, timers: &mut Timers) {
        self.screen_check_armed = true;
        timers.arm(now + SCREEN_CHECK_DELAY, Timer::ScreenCheck);
    }

    /// Take over flowing output, last seen `ms_ago`, from a handover record: whether it has gone
    /// quiet is judged at once.
    pub(super) fn resume_output(&mut self, ms_ago: u64, now: Instant, timers: &mut Timers) {
        self.output_active = true;
        self.last_output = now.checked_sub(Duration::from_millis(ms_ago)).unwrap_or(now);
        timers.arm(now, Timer::OutputQuiet);
    }
}

/// What [`AgentState::saved`] keeps for a handover record.
pub(super) struct SavedState {
    pub authority: SavedAuthority,
    pub output_active: bool,
    pub last_output_ms_ago: u64,
    pub last_person_input_ms: Option<u64>,
    pub screen_check_armed: bool,
}
