//! Desk's own prompt left unsent in the agent's input box.
//!
//! Owns recognising a stuck item's paste in the composer, and what follows from it: the item
//! says so (`submit-stuck`, "the prompt sits unsent in the agent's input box"); the session's
//! other items are held with the reason naming that item; `desk force` presses Enter only on it
//! (never a second paste over it); `desk drop` erases it there. A paste can land after its echo
//! window closed (the agent was stopped, or slow), so while a session has stuck items that desk
//! pasted, the box is looked at once every [`HOLD_RECHECK`].
//!
//! Invariants: a box is desk's own text only when it holds *exactly* the prompt desk pasted
//! (its digest's, when it went as one) — character for character once whitespace is compared
//! away, or as one placeholder whose counts agree ([`text::held`]); anything less is treated as
//! someone's draft. Nothing here types while a dialog shows or a person typed in the last 2 s;
//! backspaces are typed only onto a box proven to hold exactly that prompt, and the box is
//! looked at again after them.

use std::time::Duration;

use super::{Action, Engine, Flight, HOLD_RECHECK, Held, Look, Out, Phase, typing_hold};
use crate::delivery::engine::io::{ScreenView, SessionView, TimerKey, TimerKind, WriteError, WriteKind};
use crate::delivery::item::{Item, ItemId, State, StuckClass};
use crate::delivery::text;
use crate::state::{Activity, Lifecycle};

/// What an item says once its paste is seen sitting in the box.
pub(super) const UNSENT: &str = "the prompt sits unsent in the agent's input box";

/// How a hold for desk's own unsent prompt in the box begins (a force of another item
/// recognises it).
pub(super) const OWN_PASTE_HOLD: &str = "the input box holds the unsent prompt of stuck item";

/// Backspace (DEL), as a terminal sends it.
const BACKSPACE: u8 = 0x7f;

/// How long an agent may take per backspace before the box is judged: OpenCode took between
/// 2.5 s and 5.5 s to work through 3,967 of them (its 64-line placeholder; `make e2e-agents` on
/// the loaded 2-core machine), under 1.4 ms each; 3 ms leaves twice that.
const ERASE_PER_KEY: Duration = Duration::from_millis(3);

/// The most the look after erasing waits, whatever the prompt's length (a 256 KiB prompt would
/// otherwise be waited for for minutes): past it, the box is reported as not cleared.
const ERASE_MAX: Duration = Duration::from_secs(45);

impl Engine {
    /// The items pasted as one prompt with `item`: itself, and the other items of its digest
    /// that are still stuck beside it (by id, the order the digest listed them).
    pub(super) fn pasted_group(&self, item: &Item) -> Vec<ItemId> {
        let mut ids = vec![item.id.clone()];
        if item.state == State::Stuck {
            ids.extend(item.digest_with.iter().filter(|id| self.is_stuck(id)).cloned());
        }
        ids.sort();
        ids
    }

    fn is_stuck(&self, id: &ItemId) -> bool {
        self.items.get(id).is_some_and(|i| i.state == State::Stuck)
    }

    /// The prompt desk pasted for `item`: the digest it went in (while every item of it is
    /// still pending, so the digest reads as it did), or its own text.
    pub(super) fn pasted_text(&self, item: &Item) -> String {
        let group: Option<Vec<&Item>> =
            std::iter::once(&item.id).chain(item.digest_with.iter()).map(|id| self.items.get(id)).collect();
        match group {
            Some(mut items) if items.len() > 1 => {
                items.sort_by(|a, b| a.id.cmp(&b.id));
                super::prompt_text(&items)
            }
            _ => super::prompt_text(&[item]),
        }
    }

    /// Of the session's stuck items that desk pasted, the one prompt (its items) that the
    /// composer's text holds, and how.
    pub(super) fn unsent_in_box(&self, session: &str, composer: &str) -> Option<(Vec<ItemId>, Held)> {
        let q = self.sessions.get(session)?;
        let placeholder = q.live.as_ref().and_then(|l| l.rules.delivery.placeholder.clone());
        q.items.iter().filter_map(|id| self.items.get(id)).filter(|i| pasted_and_stuck(i)).find_map(|item| {
            match text::held(composer, &self.pasted_text(item), placeholder.as_ref()) {
                Held::Not => None,
                held => Some((self.pasted_group(item), held)),
            }
        })
    }

    /// Whether the session's queue is held by desk's own unsent prompt in the box.
    pub(super) fn held_by_own_paste(&self, session: &str) -> bool {
        self.sessions.get(session).and_then(|q| q.hold.as_ref()).is_some_and(|h| h.reason.starts_with(OWN_PASTE_HOLD))
    }

    /// The composer's text on a screen, when the provider knows where it is and no dialog
    /// covers it.
    fn composer_on(&self, session: &str, screen: &ScreenView) -> Option<String> {
        let rules = self.rules(session)?;
        let blocked = self.dialog_rule(session, &rules, &screen.lines).is_some();
        let reported = self.live(session).is_some_and(|l| l.activity == Activity::Blocked);
        if blocked || reported || !rules.delivery.knows_composer() {
            return None;
        }
        rules.delivery.composer_text(&screen.lines)
    }

    fn live(&self, session: &str) -> Option<&SessionView> {
        self.sessions.get(session)?.live.as_ref()
    }

    /// A look found desk's own paste in the box: its items say so (once).
    pub(super) fn mark_unsent_on_screen(&mut self, session: &str, look: &Look, out: &mut Out<'_>) {
        let Some(composer) = self.composer_on(session, &look.screen) else { return };
        if let Some((ids, Held::Exactly)) = self.unsent_in_box(session, &composer) {
            self.mark_unsent(&ids, out);
        }
    }

    fn mark_unsent(&mut self, ids: &[ItemId], out: &mut Out<'_>) {
        let first = ids[0].clone();
        for id in ids {
            let Some(item) = self.items.get(id) else { continue };
            let said = item.stuck == Some(StuckClass::SubmitStuck)
                && item.evidence.iter().rev().find(|n| n.kind == "stuck").is_some_and(|n| n.detail.contains(UNSENT));
            if said {
                continue;
            }
            let detail = format!(
                "{UNSENT} (its paste showed there, and was not submitted): desk force {first} presses Enter on it, desk drop {first} clears it"
            );
            self.stick(id, StuckClass::SubmitStuck, detail, out);
        }
    }

    /// Whether a forced flight's prompt already sits, exactly and unsent, in the box (and
    /// nothing stops an Enter: no dialog, nobody typing).
    pub(super) fn own_paste_in_box(&self, session: &str, flight: &Flight, look: &Look, now_ms: u64) -> bool {
        if look.dialog.is_some() || typing_hold(&look.screen, now_ms).is_some() {
            return false;
        }
        let Some(composer) = self.composer_on(session, &look.screen) else { return false };
        let placeholder = self.rules(session).and_then(|r| r.delivery.placeholder.clone());
        text::held(&composer, &flight.text, placeholder.as_ref()) == Held::Exactly
    }

    /// Text someone else typed beside the flight's prompt in the box, if the box shows both.
    pub(super) fn beside_own_paste(&self, session: &str, flight: &Flight, look: &Look) -> Option<String> {
        let composer = self.composer_on(session, &look.screen)?;
        let placeholder = self.rules(session).and_then(|r| r.delivery.placeholder.clone());
        match text::held(&composer, &flight.text, placeholder.as_ref()) {
            Held::Among(rest) => Some(rest),
            _ => None,
        }
    }

    /// A force found its prompt unsent in the box: claim it as a forced Enter and press Enter.
    pub(super) fn enter_on_own_paste(&mut self, session: &str, flight: Flight, out: &mut Out<'_>) {
        for id in &flight.items {
            let Some(item) = self.items.get_mut(id) else { continue };
            item.attempts += 1;
            let detail = format!(
                "attempt {}: {UNSENT}; the operator's force presses Enter on it, with no second paste",
                item.attempts
            );
            self.transition(id, State::Sending, "forced", detail, out);
        }
        if let Some(f) = self.flight_mut(session) {
            f.mode = super::Mode::ForceEnter;
        }
        self.enter_on_text_in_box(session, out);
    }

    // ----- the watch: a paste that lands after its echo window -----

    /// Arm the next look at the box, if the session has stuck items desk pasted and nothing
    /// else looks at its screen.
    pub(super) fn keep_watch(&mut self, session: &str, out: &mut Out<'_>) {
        let watchable = self.watchable(session);
        let q = self.session(session);
        if !watchable || q.flight.is_some() || q.watch_at.is_some() || q.watching.is_some() {
            return;
        }
        let at = out.now + HOLD_RECHECK;
        q.watch_at = Some(at);
        out.actions.push(Action::Arm {
            at,
            key: TimerKey { session: session.to_string(), attempt: None, kind: TimerKind::Watch, step: 0 },
        });
    }

    fn watchable(&self, session: &str) -> bool {
        let Some(q) = self.sessions.get(session) else { return false };
        let running =
            q.live.as_ref().is_some_and(|l| l.lifecycle == Lifecycle::Running && l.rules.delivery.knows_composer());
        running && q.items.iter().filter_map(|id| self.items.get(id)).any(pasted_and_stuck)
    }

    pub(super) fn on_watch_timer(&mut self, session: &str, out: &mut Out<'_>) {
        let due = self.sessions.get(session).and_then(|q| q.watch_at).is_some_and(|at| out.now >= at);
        if !due {
            return;
        }
        self.session(session).watch_at = None;
        if !self.watchable(session) || self.flight(session).is_some() {
            return self.keep_watch(session, out);
        }
        let Some(generation) = self.live(session).map(|l| l.generation) else { return };
        let token = self.token(session, None);
        self.session(session).watching = Some(token);
        out.actions.push(Action::Snapshot { token, session: session.to_string(), generation });
    }

    pub(super) fn on_watch_look(&mut self, session: &str, result: Result<ScreenView, String>, out: &mut Out<'_>) {
        self.session(session).watching = None;
        if let Ok(screen) = result
            && self.flight(session).is_none()
            && let Some(composer) = self.composer_on(session, &screen)
            && let Some((ids, Held::Exactly)) = self.unsent_in_box(session, &composer)
        {
            self.mark_unsent(&ids, out);
        }
        self.pump(session, out);
    }

    // ----- drop: erase desk's own prompt from the box -----

    /// The live session a drop may clear the box of: the item is stuck after a paste, and the
    /// provider knows where the composer is.
    pub(super) fn clearable(&self, id: &ItemId) -> Option<SessionView> {
        let item = self.items.get(id).filter(|i| pasted_and_stuck(i))?;
        let q = self.sessions.get(&item.session)?;
        let live = q.live.clone().filter(|l| l.lifecycle == Lifecycle::Running)?;
        (q.flight.is_none() && live.rules.delivery.knows_composer()).then_some(live)
    }

    /// The look before erasing: only a box that holds exactly the prompt, with no dialog up and
    /// nobody typing, is erased; otherwise the item is dropped and the box left alone.
    pub(super) fn clear_look(&mut self, session: &str, flight: &Flight, look: &Look, out: &mut Out<'_>) {
        let why_not = if let Some(rule) = &look.dialog {
            Some(format!("a dialog ({rule}) is on screen"))
        } else if typing_hold(&look.screen, out.now_ms).is_some() {
            Some("someone is typing in an attached terminal".to_string())
        } else {
            match self.composer_on(session, &look.screen) {
                None => Some("the input box cannot be read".to_string()),
                Some(composer) => {
                    let placeholder = self.rules(session).and_then(|r| r.delivery.placeholder.clone());
                    match text::held(&composer, &flight.text, placeholder.as_ref()) {
                        Held::Exactly => None,
                        Held::Among(rest) => {
                            Some(format!("the input box holds its prompt together with other text ({rest:?})"))
                        }
                        Held::Not => Some("the input box does not hold its prompt".to_string()),
                    }
                }
            }
        };
        if let Some(why) = why_not {
            self.take_flight(session);
            return self.finish_clear(session, flight, &format!("{why}; the input box was left as it is"), out);
        }
        // One backspace per character of the prompt as pasted: the cursor sits at its end. An
        // agent that holds a paste as one unit behind a placeholder takes it with the first, and
        // the rest fall on an empty box.
        let count = flight.text.chars().count().max(1);
        let token = self.token(session, Some(flight.attempt));
        if let Some(f) = self.flight_mut(session) {
            f.phase = Phase::Erasing;
            f.waiting = Some(token);
        }
        let note = format!("the input box holds exactly its prompt, unsent; erasing it ({count} backspaces)");
        self.note_items(&flight.items, "erase", &note, out.now_ms);
        out.actions.push(Action::Write {
            token,
            session: session.to_string(),
            generation: flight.generation,
            kind: WriteKind::Erase,
            bytes: vec![BACKSPACE; count],
        });
    }

    pub(super) fn erase_written(&mut self, session: &str, result: Result<(), WriteError>, out: &mut Out<'_>) {
        let Some(rules) = self.rules(session) else { return };
        match result {
            Ok(()) => {
                if let Some(f) = self.flight_mut(session) {
                    f.phase = Phase::Erased;
                    f.waiting = None;
                    f.deadline_passed = false;
                }
                let settings = &rules.delivery;
                let keys = self.flight(session).map_or(1, |f| f.text.chars().count().max(1));
                let wait = (settings.submit_timeout + ERASE_PER_KEY * keys as u32).min(ERASE_MAX);
                self.arm(session, TimerKind::Deadline, out.now + wait, out);
                self.arm(session, TimerKind::Poll, out.now + settings.poll, out);
            }
            Err(e) => {
                let Some(flight) = self.take_flight(session) else { return };
                let e = match e {
                    WriteError::Refused(e) => format!("the session refused the backspaces ({e}); nothing was erased"),
                    WriteError::Unknown(e) => format!("the backspaces may or may not have been typed ({e})"),
                };
                self.finish_clear(session, &flight, &e, out);
            }
        }
    }

    /// A look after the backspaces: the box clear, or (when the window ends) not.
    pub(super) fn erased_look(&mut self, session: &str, flight: &Flight, look: &Look, out: &mut Out<'_>) {
        let composer = self.composer_on(session, &look.screen);
        let placeholder = self.rules(session).and_then(|r| r.delivery.placeholder.clone());
        let gone = composer.as_deref().is_some_and(|c| text::held(c, &flight.text, placeholder.as_ref()) == Held::Not);
        if !gone && !flight.deadline_passed {
            let poll = self.rules(session).map(|r| r.delivery.poll).unwrap_or(HOLD_RECHECK);
            return self.arm(session, TimerKind::Poll, out.now + poll, out);
        }
        self.take_flight(session);
        let note = match composer {
            Some(c) if gone && c.is_empty() => "cleared its prompt from the agent's input box".to_string(),
            Some(c) if gone => format!("erased its prompt from the agent's input box; the box now shows {c:?}"),
            _ => "the backspaces did not clear its prompt from the input box: check the agent".to_string(),
        };
        self.finish_clear_as(session, flight, &note, gone, out);
    }

    pub(super) fn finish_clear(&mut self, session: &str, flight: &Flight, note: &str, out: &mut Out<'_>) {
        self.finish_clear_as(session, flight, note, false, out);
    }

    /// The drop is done: the item dropped with `note`, the operator told; when the box was
    /// cleared, the other items of the digest it held are no longer in it either.
    fn finish_clear_as(&mut self, session: &str, flight: &Flight, note: &str, cleared: bool, out: &mut Out<'_>) {
        let Some(id) = flight.items.first().cloned() else { return };
        let siblings: Vec<ItemId> = self
            .items
            .get(&id)
            .map(|i| i.digest_with.iter().filter(|s| self.is_stuck(s)).cloned().collect())
            .unwrap_or_default();
        self.transition(&id, State::Dropped, "dropped", format!("dropped by the operator; {note}"), out);
        if cleared {
            for s in &siblings {
                let detail = format!(
                    "its digest was erased from the input box when {id} was dropped; nothing of it was submitted. desk force {s} pastes it again"
                );
                self.stick(s, StuckClass::PasteMissing, detail, out);
            }
        }
        if let Some(client) = flight.reply_to {
            let message = format!("dropped {id}; {note}");
            out.actions.push(Action::Reply { client, ok: true, acted: cleared, message, item: None });
        }
        self.pump(session, out);
    }
}

/// A stuck item whose prompt desk pasted (so it may sit in the box), and not merged with
/// someone's text.
fn pasted_and_stuck(item: &Item) -> bool {
    item.state == State::Stuck && item.attempts > 0 && item.stuck != Some(StuckClass::Merged)
}
