//! The transport steps of a flight: looks at the screen and writes into the session.
//!
//! Owns carrying a flight through its phases: the baseline look (and, for a delivery, the claim and
//! the paste in the same batch), the master's acknowledgements, the echo window, the settle delay,
//! the Enter and its verification, the polls and deadlines, and failed reads and persists. What a
//! look after the paste means is the flight's to decide (`flight`); this file fences the result,
//! takes the look, and carries the [`Decision`] out. Invariants: persist before inject — every
//! item's claim (`claimed`, `pasted`) is an [`Action::Persist`] before the paste's
//! [`Action::Write`] in the same batch, and `written` or `echoed` is on record before any Enter;
//! never a second paste; an Enter only onto text that verifiably sits in the input area, never into
//! a dialog and never onto someone's text beside it; a result or a timer of another attempt changes
//! nothing. How a flight ends is `outcome`'s; the start of one is the gate's.

use std::time::Duration;

use crate::delivery::item::{State, StuckClass};
use crate::delivery::settings::DeliverySettings;
use crate::delivery::text::Presence;
use crate::delivery::{line, text};
use crate::state::{Activity, RuleSet};

use super::flight::{Decision, Step};
use super::{Action, Engine, Look, Mode, Out, Phase, ScreenView, TimerKey, TimerKind, Token, WriteError, WriteKind};

impl Engine {
    pub(super) fn on_snapshot(
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
        if !flight.answers(attempt, token) {
            return;
        }
        flight.waiting = None;
        let phase = flight.phase;
        let Some(rules) = self.rules(session) else { return };
        let settings = &rules.delivery;
        let screen = match result {
            Ok(screen) => screen,
            Err(e) => return self.read_failed(session, &e, settings, out),
        };
        let Some(look) = self.look(session, &rules, screen) else { return };
        let Some(flight) = self.flight_mut(session) else { return };
        flight.last_cursor_row = Some(look.cursor_row.clone());
        let decision = match phase {
            Phase::Baseline => return self.on_baseline(session, look, out),
            Phase::Echo => flight.echo_look(&look, settings),
            // The pre-Enter look after a settle delay.
            Phase::Settle => flight.enter_look(&look, settings).into(),
            Phase::Submit => flight.submit_look(session, &look, settings),
            Phase::Erased => return self.erased_look(session, &look, out),
            Phase::Pasting | Phase::Entering | Phase::Erasing => return,
        };
        self.take_step(session, decision, settings, out);
    }

    /// Carry out what a look decided for the session's flight: its note on every item, then
    /// its step.
    fn take_step(&mut self, session: &str, decision: Decision, settings: &DeliverySettings, out: &mut Out<'_>) {
        if let Some((kind, detail)) = &decision.note {
            self.note_flight(session, kind, detail, out.now_ms);
        }
        match decision.step {
            Step::Poll => self.arm(session, TimerKind::Poll, out.now + settings.poll, out),
            Step::Settle => self.arm(session, TimerKind::Settle, out.now + settings.submit_delay, out),
            Step::Enter => self.press_enter(session, out),
            Step::Submitted(evidence) => self.submitted(session, evidence, false, out),
            Step::StuckForDialog(rule) => self.stick_for_dialog(session, &rule, out),
            Step::Merged(rest) => self.stick_merged_in_box(session, &rest, out),
            Step::Stuck(class, detail) => self.stick_flight(session, class, detail, out),
        }
    }

    /// Add the same note to every item of the session's flight.
    pub(super) fn note_flight(&mut self, session: &str, kind: &str, detail: &str, now_ms: u64) {
        let Some(flight) = self.sessions.get(session).and_then(|q| q.flight.as_ref()) else { return };
        for id in &flight.items {
            if let Some(item) = self.items.get_mut(id) {
                item.note(now_ms, kind, detail);
            }
        }
    }

    /// The provider's blocked screen rule matching `lines`, where the match is more than the
    /// echo of a prompt desk typed into the session (one may quote a dialog).
    pub(super) fn dialog_rule<'r>(
        &self,
        session: &str,
        rules: &'r RuleSet,
        lines: &[String],
    ) -> Option<&'r crate::state::Rule> {
        let none = crate::state::typed::Typed::default();
        let typed = self.sessions.get(session).map_or(&none, |q| &q.typed);
        rules.match_screen_where(lines, typed, |r| r.activity == Activity::Blocked)
    }

    /// What a screen shows about the session's flight: the prompt in the input area, a dialog,
    /// the cursor.
    fn look(&self, session: &str, rules: &RuleSet, screen: ScreenView) -> Option<Look> {
        let flight = self.flight(session)?;
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
        Some(Look { screen, presence, dialog, cursor_row })
    }

    /// The first look of a flight, before anything is typed (for a recovery or a forced Enter:
    /// before anything more is).
    fn on_baseline(&mut self, session: &str, look: Look, out: &mut Out<'_>) {
        let Some(mode) = self.flight(session).map(|f| f.mode) else { return };
        match mode {
            Mode::Recover => self.recovery_look(session, &look, out),
            Mode::ForceEnter => self.force_enter_look(session, &look, out),
            Mode::Deliver => self.delivery_look(session, look, out),
            Mode::Clear => self.clear_look(session, &look, out),
        }
    }

    /// An ordinary delivery (or a forced re-paste): the last look before typing. Nothing is on
    /// disk yet: a gate that holds it back leaves every item as it was.
    fn delivery_look(&mut self, session: &str, look: Look, out: &mut Out<'_>) {
        // Only items still pending go (one settled or dropped meanwhile does not).
        let items = &self.items;
        let Some(flight) = self.sessions.get_mut(session).and_then(|q| q.flight.as_mut()) else { return };
        flight.items.retain(|id| items.get(id).is_some_and(|i| matches!(i.state, State::Queued | State::Stuck)));
        if flight.items.is_empty() {
            self.take_flight(session);
            return self.pump(session, out);
        }
        let Some(rules) = self.rules(session) else { return };
        let Some(flight) = self.flight(session) else { return };
        let reply_to = flight.reply_to;
        if reply_to.is_some() && self.own_paste_in_box(session, flight, &look, out.now_ms) {
            // A force onto desk's own unsent paste: Enter only, never a second paste over it.
            return self.enter_on_own_paste(session, out);
        }
        if let Some((why, recheck)) = self.screen_hold(session, flight, &look, &rules.delivery, out.now_ms) {
            self.mark_unsent_on_screen(session, &look, out);
            return self.hold_flight(session, reply_to, why, recheck, out);
        }
        let overlong = if look.screen.canonical { text::overlong_line(&flight.text) } else { None };
        if !rules.delivery.knows_composer()
            && line::reader(&look.screen, &rules.delivery) == Ok(line::Reader::Shell)
            && let Some(f) = self.flight_mut(session)
        {
            f.at_shell_prompt = true;
        }
        // Claimed now, in the same batch as the paste: persist before inject.
        self.claim(session, out);
        if let Some((line, len)) = overlong {
            let why = format!(
                "refused: line {line} is {len} bytes and the session reads canonical input, which cuts lines at {} bytes",
                text::CANONICAL_LINE_MAX
            );
            return self.refuse_flight(session, why, out);
        }
        self.paste(session, &look, out);
    }

    /// Claim the session's flight's items (`sending`) before the paste goes out.
    fn claim(&mut self, session: &str, out: &mut Out<'_>) {
        let Some(flight) = self.flight(session) else { return };
        let (forced, over_draft, ids) = (flight.reply_to.is_some(), flight.over_draft, flight.items.clone());
        let count = ids.len();
        for id in &ids {
            // The item's own count: the paste about to go is its next attempt.
            let attempt = self.items.get(id).map_or(1, |i| i.attempts + 1);
            let detail = match (forced, count) {
                (true, _) if over_draft => {
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
    fn refuse_flight(&mut self, session: &str, why: String, out: &mut Out<'_>) {
        let Some(flight) = self.take_flight(session) else { return };
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
    fn paste(&mut self, session: &str, look: &Look, out: &mut Out<'_>) {
        let Some(flight) = self.flight(session) else { return };
        let bracketed = look.screen.bracketed_paste;
        let bytes = text::paste_bytes(&flight.text, bracketed);
        // Without bracketed paste every newline is typed as an Enter: the program takes each
        // line on its own.
        let lines = if bracketed { 0 } else { text::typed_lines(&flight.text) };
        let detail = format!("{} bytes written to the session", flight.text.len());
        let (attempt, generation, ids) = (flight.attempt, flight.generation, flight.items.clone());
        let token = self.token(session, Some(attempt));
        if let Some(f) = self.flight_mut(session) {
            f.pasting(token, look.presence, lines);
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
        for id in &ids {
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
        for id in &ids {
            self.transition(id, State::Sending, "pasted", detail.clone(), out);
        }
        // Its echo, from now on, is the prompt's, not the agent's (a prompt may quote a dialog).
        let q = self.session(session);
        if let Some(flight) = &q.flight {
            q.typed.push_text(&flight.text);
        }
        let session = session.to_string();
        out.actions.push(Action::Write { token, session, generation, kind: WriteKind::Paste, bytes });
    }

    pub(super) fn on_written(
        &mut self,
        session: &str,
        attempt: Option<u64>,
        token: Token,
        result: Result<(), WriteError>,
        out: &mut Out<'_>,
    ) {
        let Some(phase) = self.flight(session).filter(|f| f.answers(attempt, token)).map(|f| f.phase) else {
            return;
        };
        let Some(rules) = self.rules(session) else { return };
        let settings = &rules.delivery;
        match (phase, result) {
            (Phase::Erasing, result) => self.erase_written(session, result, out),
            (_, Err(WriteError::Unknown(e))) => {
                let what = if phase == Phase::Pasting { WriteKind::Paste } else { WriteKind::Enter };
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
                let Some(flight) = self.take_flight(session) else { return };
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

    /// Press Enter on text found sitting in the input box (a force, or a restart): verified
    /// against an empty baseline, as if it had just been pasted.
    pub(super) fn enter_on_text_in_box(&mut self, session: &str, out: &mut Out<'_>) {
        let now_ms = out.now_ms;
        if let Some(f) = self.flight_mut(session) {
            f.baseline = Presence::default();
            f.pasted_ms = Some(now_ms);
        }
        self.press_enter(session, out);
    }

    fn press_enter(&mut self, session: &str, out: &mut Out<'_>) {
        let now_ms = out.now_ms;
        let Some(attempt) = self.flight(session).map(|f| f.attempt) else { return };
        let activity =
            self.sessions.get(session).and_then(|q| q.live.as_ref()).map_or(Activity::Unknown, |l| l.activity);
        let stale = activity == Activity::Idle && self.activity_stale(session, now_ms).is_some();
        let token = self.token(session, Some(attempt));
        let q = self.session(session);
        let queue_ahead = q.owed.iter().any(|i| i.queued_by_agent);
        q.last_enter_ms = Some(now_ms);
        let Some(f) = q.flight.as_mut() else { return };
        let enter = f.entering(token, now_ms, activity, stale, queue_ahead);
        let (items, generation) = (f.items.clone(), f.generation);
        self.note_items(&items, "enter", &format!("Enter #{enter}"), now_ms);
        out.actions.push(Action::Write {
            token,
            session: session.to_string(),
            generation,
            kind: WriteKind::Enter,
            bytes: b"\r".to_vec(),
        });
    }

    /// A look at the screen failed: a delivery's first look (nothing typed) goes back to the
    /// queue and the session backs off; a drop leaves the box as it is; otherwise the flight
    /// decides ([`Flight::unreadable`](super::Flight::unreadable)).
    fn read_failed(&mut self, session: &str, error: &str, settings: &DeliverySettings, out: &mut Out<'_>) {
        let Some((mode, phase)) = self.flight(session).map(|f| (f.mode, f.phase)) else { return };
        if mode == Mode::Clear {
            let Some(flight) = self.take_flight(session) else { return };
            let note = format!("cannot read the screen ({error}); the input box was left as it is");
            return self.finish_clear(session, &flight, &note, out);
        }
        if phase == Phase::Baseline && mode == Mode::Deliver {
            let Some(flight) = self.take_flight(session) else { return };
            for id in &flight.items {
                let detail = format!("cannot read the screen: {error}; nothing was typed");
                self.transition(id, State::Queued, "hold", detail, out);
            }
            return self.backoff(session, &format!("cannot read the screen: {error}"), out);
        }
        let Some(step) = self.flight_mut(session).map(|f| f.unreadable(error)) else { return };
        self.take_step(session, step.into(), settings, out);
    }

    pub(super) fn on_persist_failed(&mut self, session: &str, attempt: Option<u64>, error: &str, out: &mut Out<'_>) {
        let now_ms = out.now_ms;
        // The rest of that batch did not happen. If it was a claim, nothing was typed; if it
        // was a final state, the item stays `sending` on disk and a restart settles it.
        if self.flight(session).is_none_or(|f| Some(f.attempt) != attempt) {
            return;
        }
        let Some(flight) = self.take_flight(session) else { return };
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

    pub(super) fn on_timer(&mut self, key: TimerKey, out: &mut Out<'_>) {
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
        if self.flight_mut(&session).is_some_and(|f| f.look_due(&key)) {
            self.request_snapshot(&session, out);
        }
    }
}
