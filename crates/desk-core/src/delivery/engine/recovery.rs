//! Recovery: items found `sending` after a restart, settled from evidence only.
//!
//! Owns what a restarted engine does with a delivery a crash cut off: digest siblings that take
//! a settled sibling's outcome, the recovery flight (one group at a time, once its session is
//! observable), the UserPromptSubmit hooks that settle such items, and the proof that a claimed
//! item never reached the agent ([`never_typed`]), which sends it back to the queue.
//! Invariants (docs/delivery.md §4, held by the crash oracle in `tests/crash.rs`): never
//! re-paste; an Enter only onto the text found sitting in the input area, recorded (`echoed`)
//! before it is pressed; a hook settles an item delivered only when it is of the item's own
//! generation and came after its own paste (a digest's, after its claim); anything not proven
//! either way is stuck/interrupted. It may not type anything but through the transport steps,
//! and reads no clock but the one [`Out`] carries.

use std::collections::HashMap;

use crate::delivery::item::{Item, ItemId, State, StuckClass};
use crate::state::hooks::PromptSig;

use super::{
    Action, Engine, Flight, HOLD_RECHECK, HOOK_SKEW_MS, Launch, Look, Mode, Out, Phase, ScreenView, prompt_text,
    typed_at,
};

/// Why an item found `sending` is stuck although a hook reported its text.
const SAME_TEXT_NO_PASTE: &str = "a UserPromptSubmit hook reported the same text, but this item's own paste is not on record (the daemon stopped between claiming and pasting it), so the hook may be the late report of an earlier identical prompt";

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

impl Engine {
    /// Start-up: adopt the items found on disk, settle half-settled digests, start what may go.
    pub(super) fn on_restore(&mut self, items: Vec<Item>, out: &mut Out<'_>) {
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

    /// Settle items found `sending` at start-up, one at a time, once the session is observable.
    pub(super) fn recover(&mut self, session: &str, out: &mut Out<'_>) {
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

    /// An item found `sending` after a restart, settled on conclusive evidence only: a hook
    /// that reported the whole prompt after this item's own paste is on record, or the text
    /// sitting in the input area (then an Enter is safe).
    pub(super) fn recovery_look(&mut self, session: &str, look: &Look, out: &mut Out<'_>) {
        let Some(flight) = self.flight(session) else { return };
        if let Some(ours) = self.hook_for_recovered(session, &flight.items, &flight.prompt, flight.generation) {
            return self.recovered_by_hook(session, ours, out);
        }
        if look.presence.text == 0 && look.presence.placeholders == 0 {
            if let Some(why) = never_typed(flight, &self.flight_items(flight), &look.screen) {
                return self.release_flight(session, why, out);
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
        for id in &flight.items.clone() {
            let note = "found in the input area after the restart; pressing Enter";
            self.transition(id, State::Sending, "echoed", note.into(), out);
        }
        self.enter_on_text_in_box(session, out);
    }

    /// A recovered flight that provably never reached the agent goes back to the queue, to be
    /// delivered like any other.
    fn release_flight(&mut self, session: &str, why: String, out: &mut Out<'_>) {
        let Some(flight) = self.take_flight(session) else { return };
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
    pub(super) fn settle_found_sending_by_hook(
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
    pub(super) fn hook_for_recovered(
        &self,
        session: &str,
        ids: &[ItemId],
        prompt: &PromptSig,
        generation: u32,
    ) -> Option<bool> {
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

    /// Items found `sending` after a restart, not in flight, settled on what the hooks say (see
    /// [`Engine::hook_for_recovered`]): delivered, stuck because the hook may be another
    /// prompt's, or — `None`, their agent gone (`why`) with no hook for them — stuck.
    pub(super) fn settle_found_sending(&mut self, group: &[ItemId], heard: Option<bool>, why: &str, out: &mut Out<'_>) {
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
    pub(super) fn digest_group(&self, id: &ItemId) -> Vec<ItemId> {
        let Some(item) = self.items.get(id) else { return vec![id.clone()] };
        let mut group: Vec<ItemId> = std::iter::once(id.clone()).chain(item.digest_with.iter().cloned()).collect();
        group.retain(|id| self.items.get(id).is_some_and(|i| i.state == State::Sending));
        group.sort();
        group
    }

    /// The signature of the prompt typed for these items (one item's text, or their digest).
    pub(super) fn prompt_of(&self, ids: &[ItemId]) -> PromptSig {
        let items: Vec<&Item> = ids.iter().filter_map(|id| self.items.get(id)).collect();
        PromptSig::of(&prompt_text(&items))
    }

    /// The records of a flight's items.
    fn flight_items(&self, flight: &Flight) -> Vec<&Item> {
        flight.items.iter().filter_map(|id| self.items.get(id)).collect()
    }
}
