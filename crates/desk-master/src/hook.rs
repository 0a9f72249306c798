//! A HOOK frame from `desk hook`: what an agent's own hook says it is doing.
//!
//! Owns turning a hook report into the session's state: the report is checked to belong to
//! this generation, read in its provider's format (`desk_core::state::hooks`), journalled as a
//! `hook` event, and weighed by the state authority (`super::state`). Invariant: a hook is never
//! weighed against a screen older than the output before it (the screen rules run first when a
//! check of the screen is due).

use desk_core::provider::Provider;
use std::time::Instant;
use tracing::debug;

use super::event_loop::Master;
use desk_common::clock::now_ms;
use desk_core::state::hooks;
use desk_wire::events::EventBody;
use desk_wire::hook::HookReport;
use desk_wire::{ErrorCode, Frame};

impl Master {
    /// A HOOK frame from `desk hook`.
    pub(super) fn on_hook_frame(
        &mut self,
        body: serde_json::Map<String, serde_json::Value>,
        now: Instant,
    ) -> Result<(), Frame> {
        let report = HookReport::from_body(body).map_err(|e| Frame::error(ErrorCode::Malformed, e))?;
        if let Some(generation) = report.generation
            && generation != u64::from(self.meta().generation)
        {
            debug!(generation, "ignoring a hook from another generation of this session");
            return Err(Frame::error(
                ErrorCode::NotPermitted,
                format!(
                    "this hook belongs to generation {generation}; the session is now generation {}",
                    self.meta().generation
                ),
            ));
        }
        // The hook names the format of its payload; a name desk does not know means the
        // session's own provider's format.
        let provider = report
            .provider
            .as_deref()
            .and_then(|p| p.parse::<Provider>().ok())
            .unwrap_or_else(|| Provider::or_shell(&self.meta().provider));
        let fact = hooks::interpret(provider, &report.payload);
        // Weigh the hook against the screen as it is now, not as it was at the last check (up
        // to SCREEN_CHECK_DELAY old): Codex 0.171.0's turn-complete notify from another thread
        // came 2 ms after its approval dialog was drawn, and the session read idle for the 46
        // ms until the screen was next read, with the dialog up (docs/agents-observed.md §8.4).
        if self.agent().screen_check_armed() {
            self.check_screen(now);
        }
        self.emit(EventBody::Hook {
            provider: fact.provider.to_string(),
            event: fact.event.clone(),
            detail: fact.detail.clone(),
            prompt: fact.prompt.clone(),
        });
        let state = self.observe(|a| a.on_hook(&fact, now, now_ms()));
        self.emit_all(state);
        Ok(())
    }
}
