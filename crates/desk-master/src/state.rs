//! The master's side of the agent state authority.
//!
//! Owns feeding the authority what the loop observes (output events, output flow, screen
//! contents after output settles, hook frames, the exit), keeping one timer armed for its next
//! lease deadline, and announcing every change as a `state` event. Invariants: the screen rules
//! run at most once per [`SCREEN_CHECK_DELAY`] during a burst of output (and early, before a
//! hook is weighed, when output came since they last ran), and not at all while the session is
//! quiet; a hook is never weighed against a screen older than the output before it.

use desk_core::provider::Provider;
use std::time::{Duration, Instant};
use tracing::debug;

use super::event_loop::Master;
use super::timers::Timer;
use desk_common::clock::now_ms;
use desk_core::state::{Change, hooks};
use desk_wire::events::AxisChange;
use desk_wire::events::EventBody;
use desk_wire::hook::HookReport;
use desk_wire::state::Activity;
use desk_wire::{ErrorCode, Frame};

/// 50 ms after output the screen is read for the provider's screen rules: an agent redraws
/// its whole TUI within a few milliseconds, and state need not be fresher than this.
pub(super) const SCREEN_CHECK_DELAY: Duration = Duration::from_millis(50);

impl Master {
    /// Announce state changes and re-arm the lease timer.
    pub(super) fn announce(&mut self, changes: Vec<Change>) {
        for c in changes {
            let blocked = matches!(c.change, AxisChange::Activity { to: Activity::Blocked, .. });
            let wait = blocked.then(|| self.authority.view().wait).flatten();
            self.emit(EventBody::State { change: c.change, evidence: c.evidence, wait });
        }
        if let Some(at) = self.authority.next_deadline(Instant::now())
            && self.state_timer != Some(at)
        {
            self.state_timer = Some(at);
            self.timers.arm(at, Timer::StateTick);
        }
    }

    pub(super) fn state_tick(&mut self, now: Instant) {
        self.state_timer = None;
        let changes = self.authority.tick(now, now_ms());
        self.announce(changes);
    }

    /// Output arrived: note it and schedule a look at the screen.
    pub(super) fn state_output(&mut self, now: Instant) {
        let changes = self.authority.on_output(now, now_ms());
        if !self.screen_check_armed {
            self.screen_check_armed = true;
            self.timers.arm(now + SCREEN_CHECK_DELAY, Timer::ScreenCheck);
        }
        self.announce(changes);
    }

    pub(super) fn check_screen(&mut self, now: Instant) {
        self.screen_check_armed = false;
        let rows = self.screen.text_rows();
        let changes = self.authority.on_screen(&rows, now, now_ms());
        self.announce(changes);
    }

    pub(super) fn state_quiet(&mut self, now: Instant) {
        let changes = self.authority.on_quiet(now, now_ms());
        self.announce(changes);
    }

    /// A HOOK frame from `desk hook`.
    pub(super) fn on_hook_frame(
        &mut self,
        body: serde_json::Map<String, serde_json::Value>,
        now: Instant,
    ) -> Result<(), Frame> {
        let report = HookReport::from_body(body).map_err(|e| Frame::error(ErrorCode::Malformed, e))?;
        if let Some(generation) = report.generation
            && generation != u64::from(self.meta.generation)
        {
            debug!(generation, "ignoring a hook from another generation of this session");
            return Err(Frame::error(
                ErrorCode::NotPermitted,
                format!(
                    "this hook belongs to generation {generation}; the session is now generation {}",
                    self.meta.generation
                ),
            ));
        }
        // The hook names the format of its payload; a name desk does not know means the
        // session's own provider's format.
        let provider = report
            .provider
            .as_deref()
            .and_then(|p| p.parse::<Provider>().ok())
            .unwrap_or_else(|| Provider::or_shell(&self.meta.provider));
        let fact = hooks::interpret(provider, &report.payload);
        // Weigh the hook against the screen as it is now, not as it was at the last check (up
        // to SCREEN_CHECK_DELAY old): Codex 0.171.0's turn-complete notify from another thread
        // came 2 ms after its approval dialog was drawn, and the session read idle for the 46
        // ms until the screen was next read, with the dialog up (docs/agents-observed.md §8.4).
        if self.screen_check_armed {
            self.check_screen(now);
        }
        self.emit(EventBody::Hook {
            provider: fact.provider.to_string(),
            event: fact.event.clone(),
            detail: fact.detail.clone(),
            prompt: fact.prompt.clone(),
        });
        let changes = self.authority.on_hook(&fact, now, now_ms());
        self.announce(changes);
        Ok(())
    }
}
