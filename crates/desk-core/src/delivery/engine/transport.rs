//! The transport steps of a flight: looks at the screen and writes into the session.
//!
//! Owns carrying a flight through its phases: the baseline look (and, for a delivery, the
//! claim and the paste in the same batch), the master's acknowledgements, the echo window, the
//! settle delay, the Enter and its verification, the polls and deadlines, and failed reads and
//! persists. Invariants: persist before inject — every item's claim (`claimed`, `pasted`) is an
//! [`Action::Persist`] before the paste's [`Action::Write`] in the same batch, and `written` or
//! `echoed` is on record before any Enter; never a second paste; an Enter only onto text that
//! verifiably sits in the input area, never into a dialog and never onto someone's text beside
//! it; a result or a timer of another attempt changes nothing. How a flight ends is `outcome`'s;
//! the start of one is the gate's.

use std::time::Duration;

use crate::delivery::item::{State, StuckClass};
use crate::delivery::settings::DeliverySettings;
use crate::delivery::text::Presence;
use crate::delivery::{line, text};
use crate::state::{Activity, RuleSet};

use super::flight::foreign_text;
use super::{
    Action, Engine, Flight, Look, Mode, Out, Phase, ScreenView, TimerKey, TimerKind, Token, WriteError, WriteKind,
};

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
