//! How a flight ends: delivered on evidence, stuck with the evidence of why, or cut off.
//!
//! Owns ending the session's flight and every item in it together: delivered (with its
//! UserPromptSubmit hook owed when other evidence decided), stuck with a class and a reason,
//! or interrupted because its session generation is gone; and the one reply a forcing
//! operator waits for. Invariants: a flight ends exactly once (it is taken from its session
//! first); an item that may have been typed is never released to the queue here; a stuck
//! item whose paste is on record awaits its hook (which then delivers it); after an end, the
//! session's next items go on their own (a stuck item never blocks its queue).

use crate::delivery::item::{State, StuckClass};
use crate::state::Activity;

use super::{Action, Engine, Mode, Out, Phase};

/// How a forced delivery that did not deliver ended, in words for the operator.
fn forced_outcome(class: StuckClass, detail: &str) -> String {
    match class {
        StuckClass::PasteMissing if detail.starts_with("the paste did not show") => {
            format!("still not seen in the input area: the item stays stuck (paste-missing): {detail}")
        }
        _ => format!("stuck ({}): {detail}", class.as_str()),
    }
}

impl Engine {
    /// The flight is delivered on `evidence`; `by_hook` when that evidence is the agent's own
    /// UserPromptSubmit report (otherwise the report is still owed, see `owed`).
    pub(super) fn submitted(&mut self, session: &str, evidence: String, by_hook: bool, out: &mut Out<'_>) {
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

    pub(super) fn stick_flight(&mut self, session: &str, class: StuckClass, detail: String, out: &mut Out<'_>) {
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

    /// The text is (or may be) in the input box, and a dialog shows: an Enter would answer the
    /// dialog, so the item is stuck until the operator has dealt with it (`desk force` then
    /// presses Enter only, if the text is still there).
    pub(super) fn stick_for_dialog(&mut self, session: &str, rule: &str, out: &mut Out<'_>) {
        self.stick_flight(
            session,
            StuckClass::SubmitStuck,
            format!("a dialog ({rule}) is on screen; not pressing Enter"),
            out,
        );
    }

    /// The composer holds the prompt and text someone else typed: an Enter would submit them as
    /// one message, so none is pressed.
    pub(super) fn stick_merged_in_box(&mut self, session: &str, rest: &str, out: &mut Out<'_>) {
        let prompt = self.flight(session).map(|f| f.prompt.head.clone()).unwrap_or_default();
        let detail = format!(
            "the input box holds this prompt ({prompt:?}…) together with text someone else typed ({rest:?}); no Enter pressed, as it would submit both as one message"
        );
        self.stick_flight(session, StuckClass::Merged, detail, out);
    }

    /// End the session's flight because its session generation is gone.
    pub(super) fn interrupt(&mut self, session: &str, why: &str, out: &mut Out<'_>) {
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
}
