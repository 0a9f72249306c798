//! The delivery in flight: what one attempt is, and what each look at the screen decides for it.
//!
//! Owns the [`Flight`] — the items going as one prompt, its text and signature, the transport
//! [`Phase`] it is in (Baseline → Pasting → Echo → Settle → Entering → Submit, or the erase of a
//! drop), its [`Mode`] (a delivery, a forced Enter, a recovery, a clearing drop) and the
//! evidence gathered on the way (the baseline presence, Enters pressed, the cursor's row, a
//! dialog seen) — the [`Look`] taken of the screen for it, and the machine itself: the flight's
//! phase changes ([`Flight::pasting`], [`Flight::entering`]), which timers ask for a look
//! ([`Flight::look_due`]), and what a look after the paste decides ([`Flight::echo_look`],
//! [`Flight::enter_look`], [`Flight::submit_look`], [`Flight::unreadable`]), as a
//! [`Decision`] the engine carries out. Invariants: one flight per session; a result counts
//! only for the request the flight waits for ([`Flight::answers`]); `paste_written` and
//! `enters` say exactly what it typed (an operator is told); a decision never pastes again,
//! never presses Enter into a dialog or onto someone's text, and is taken on a fresh look once
//! a window is over. Pure: it reads only the flight, the look and the provider's delivery
//! settings — never the engine's queues or items, never a clock — and types nothing itself.

use crate::delivery::item::{ItemId, StuckClass};
use crate::delivery::settings::DeliverySettings;
use crate::delivery::text::{Fingerprint, Presence};
use crate::delivery::{line, text};
use crate::state::Activity;
use crate::state::hooks::PromptSig;

use super::{ScreenView, TimerKey, TimerKind, Token};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Waiting for the baseline screen.
    Baseline,
    /// The paste was sent; waiting for the master to accept it.
    Pasting,
    /// Polling until the paste shows in the input area.
    Echo,
    /// Waiting out the settle delay.
    Settle,
    /// Enter sent; waiting for the master to accept it.
    Entering,
    /// Polling for evidence of submission.
    Submit,
    /// Backspaces sent to clear desk's own prompt; waiting for the master to accept them.
    Erasing,
    /// Looking whether the input box is clear.
    Erased,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// An ordinary delivery: paste then Enter.
    Deliver,
    /// An operator's force on a submit-stuck item: Enter only.
    ForceEnter,
    /// After a restart, an item found `sending`: settle it from evidence.
    Recover,
    /// An operator's drop of a stuck item whose prompt sits unsent in the input box: erase it
    /// there, once the box is proven to hold exactly that prompt (see `unsent`).
    Clear,
}

/// One delivery attempt in flight for a session. Not `Clone`: there is one of it, in its
/// session's queue, and every step reads and writes that one.
#[derive(Debug)]
pub(super) struct Flight {
    pub(super) attempt: u64,
    pub(super) items: Vec<ItemId>,
    pub(super) text: String,
    pub(super) fingerprint: Fingerprint,
    /// The whole prompt's signature, to recognise its UserPromptSubmit hook.
    pub(super) prompt: PromptSig,
    /// The operator chose to paste onto text someone typed (`desk force --over-draft`).
    pub(super) over_draft: bool,
    pub(super) generation: u32,
    pub(super) mode: Mode,
    pub(super) phase: Phase,
    /// Token of the request the current phase waits for.
    pub(super) waiting: Option<Token>,
    /// This flight wrote a paste (accepted or not): an operator is told it pasted again.
    pub(super) paste_written: bool,
    pub(super) baseline: Presence,
    pub(super) enters: u32,
    pub(super) pasted_ms: Option<u64>,
    pub(super) enter_ms: Option<u64>,
    /// Activity before the Enter, to recognise "turned working" as evidence.
    pub(super) activity_at_enter: Activity,
    /// The operator client awaiting the outcome of a force.
    pub(super) reply_to: Option<u64>,
    /// Snapshot reads that failed in this phase.
    pub(super) read_failures: u32,
    /// The current Enter's verification window is over: the next look decides (Enter again,
    /// or stuck); nothing is decided on an older look.
    pub(super) deadline_passed: bool,
    /// The cursor's row (index and text) at the latest look, and at the look before the
    /// current Enter: where an input area has no borders, the row the text was typed on
    /// changing is the evidence that the Enter was taken.
    pub(super) last_cursor_row: Option<(usize, String)>,
    pub(super) enter_cursor_row: Option<(usize, String)>,
    /// A dialog showed during this Enter's verification (noted once per Enter).
    pub(super) dialog_seen: bool,
    /// At the first Enter, the activity predated the previous prompt's Enter (it was stale).
    pub(super) stale_at_enter: bool,
    /// At the first Enter, earlier prompts were still waiting in the agent's own queue.
    pub(super) queue_ahead_at_enter: bool,
    /// Typed at a shell's empty prompt (its own line editor reads it): its Enter is taken on
    /// the shell's evidence ([`line::shell_took_line`]).
    pub(super) at_shell_prompt: bool,
    /// Typed line by line (no bracketed paste) as this many lines, each ended by an Enter: the
    /// program takes them as that many submissions (0: pasted whole).
    pub(super) typed_lines: u32,
}

/// What a look at the screen (or a failed one) decides for the flight in progress. The flight
/// decides ([`Flight::echo_look`], [`Flight::enter_look`], [`Flight::submit_look`],
/// [`Flight::unreadable`]); the engine carries the decision out: the note first, on every item
/// of the flight, then the step.
#[derive(Debug)]
pub(super) struct Decision {
    /// A note for the items' timelines (kind, detail), written before the step is taken.
    pub(super) note: Option<(&'static str, String)>,
    pub(super) step: Step,
}

impl From<Step> for Decision {
    fn from(step: Step) -> Decision {
        Decision { note: None, step }
    }
}

/// The next step of a flight after a look at the screen.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Nothing is decided yet: look again after the provider's poll interval.
    Poll,
    /// The paste showed; wait the provider's settle delay, then look once more before the
    /// Enter (the flight is in [`Phase::Settle`] now).
    Settle,
    /// Nothing stands in the way of an Enter: press it.
    Enter,
    /// Delivered, on this evidence (not the agent's hook: that one is still owed).
    Submitted(String),
    /// The text is, or may be, in the box and a dialog (this rule) shows: stuck, no Enter into it.
    StuckForDialog(String),
    /// The box holds the prompt together with this text someone else typed: an Enter would
    /// submit both as one message.
    Merged(String),
    /// Stuck, with this class and reason.
    Stuck(StuckClass, String),
}

impl Flight {
    /// A look while the paste is expected in the input area ([`Phase::Echo`]): once it shows,
    /// on to the Enter — now, or after the provider's settle delay; while a dialog may hide it,
    /// or the echo window is open, look again; when the window closes without it, stuck (it is
    /// never pasted again).
    pub(super) fn echo_look(&mut self, look: &Look, settings: &DeliverySettings) -> Decision {
        if look.presence.more_than(self.baseline) {
            let (text, placeholders) = (look.presence.text, look.presence.placeholders);
            let note = ("echoed", format!("in the input area: {text} text, {placeholders} placeholder(s)"));
            let step = if let Some(rule) = &look.dialog {
                Step::StuckForDialog(rule.clone())
            } else if settings.submit_delay.is_zero() {
                self.enter_look(look, settings)
            } else {
                self.phase = Phase::Settle;
                Step::Settle
            };
            return Decision { note: Some(note), step };
        }
        if let Some(rule) = &look.dialog {
            // A dialog that opened over the input box may hide the paste: wait for it to go
            // until the window ends; the text may then sit under it, and an Enter would answer it.
            if self.deadline_passed {
                let detail = format!(
                    "a dialog ({rule}) opened before the paste showed in the input area and stayed; the text may sit under it, and no Enter is pressed into a dialog"
                );
                return Step::Stuck(StuckClass::SubmitStuck, detail).into();
            }
            return Step::Poll.into();
        }
        if !self.deadline_passed {
            return Step::Poll.into();
        }
        if !settings.knows_composer()
            && let Err(why) = line::reader(&look.screen, settings)
        {
            // The program stopped reading a line (an editor, or a job, took over): what the keys
            // did there cannot be seen, so it is not "missing" — a force would type it again.
            let detail = format!(
                "the program left line input ({why}) and the text is not on screen; what became of the keys cannot be seen. Not re-pasting"
            );
            return Step::Stuck(StuckClass::Unobservable, detail).into();
        }
        let detail = format!(
            "the paste did not show in the input area within {} ms; desk does not paste it again by itself (it is watched for, in case it shows later)",
            settings.echo_timeout.as_millis()
        );
        Step::Stuck(StuckClass::PasteMissing, detail).into()
    }

    /// The last look before an Enter (after the echo, or after the settle delay): none into a
    /// dialog, none for a job in the foreground, none onto text someone else typed.
    pub(super) fn enter_look(&self, look: &Look, settings: &DeliverySettings) -> Step {
        if let Some(rule) = &look.dialog {
            return Step::StuckForDialog(rule.clone());
        }
        if let Some(why) = line::job_in_foreground(&look.screen) {
            // The Enter would go to that job, or wait for the program with the text.
            return Step::Stuck(StuckClass::SubmitStuck, format!("after the paste, {why}; no Enter pressed"));
        }
        if let Some(rest) = foreign_text(settings, self, &look.screen.lines) {
            return Step::Merged(rest);
        }
        Step::Enter
    }

    /// A look at the screen after an Enter ([`Phase::Submit`]) in `session`: submitted, still
    /// waiting, Enter again, or stuck.
    pub(super) fn submit_look(&mut self, session: &str, look: &Look, settings: &DeliverySettings) -> Decision {
        if let Some(rule) = &look.dialog {
            return self.dialog_after_enter(look, rule, settings);
        }
        if self.at_shell_prompt {
            match line::shell_took_line(&look.screen, settings) {
                Some(line::AfterEnter::Ran(evidence)) => return Step::Submitted(evidence).into(),
                Some(line::AfterEnter::Incomplete) => {
                    let detail = format!(
                        "the shell read the line but waits for the rest of the command (a continuation prompt: an unclosed quote or block), so it has not run it. Cancel it (desk keys {session} C-c) and send the command whole"
                    );
                    return Step::Stuck(StuckClass::SubmitStuck, detail).into();
                }
                None => {}
            }
        }
        if !look.presence.more_than(self.baseline) {
            return Step::Submitted("the text left the input area".into()).into();
        }
        // Without input borders, in a session whose line the kernel edits (canonical mode: a
        // shell, `cat`), an Enter always ends the line, and its echo moves the cursor on: the
        // line it was typed on changing is the evidence. A raw-mode application may take an
        // Enter as a newline in its own box, so there the cursor moving proves nothing.
        if !settings.bordered()
            && look.screen.canonical
            && let Some(before) = &self.enter_cursor_row
            && *before != look.cursor_row
        {
            let (from, to) = (before.0, look.cursor_row.0);
            let evidence = format!("the line it was typed on changed after Enter (cursor row {from} → {to})");
            return Step::Submitted(evidence).into();
        }
        if !self.deadline_passed {
            return Step::Poll.into();
        }
        if self.enters <= settings.enter_retries {
            let note = "the text still sits in the input area (looked again); pressing Enter again";
            return Decision { note: Some(("retry", note.into())), step: Step::Enter };
        }
        let detail = format!("the text stayed in the input area after {} Enter(s)", self.enters);
        Step::Stuck(StuckClass::SubmitStuck, detail).into()
    }

    /// A dialog is on screen after an Enter. It may cover the input area, so the text not
    /// showing there proves nothing, and an Enter would answer the dialog: wait for it to go
    /// until the verification window ends, then stuck. Unless the agent's composer is on the
    /// screen beside the dialog, empty: then the text left it (an agent that took the prompt and
    /// at once asks to run something). The first such look of an Enter is noted.
    fn dialog_after_enter(&mut self, look: &Look, rule: &str, settings: &DeliverySettings) -> Decision {
        if settings.knows_composer()
            && !look.presence.more_than(self.baseline)
            && settings.composer_text(&look.screen.lines).is_some_and(|t| t.is_empty())
        {
            let evidence = format!("the text left the input area; the box shows empty beside a dialog ({rule})");
            return Step::Submitted(evidence).into();
        }
        let note = (!self.dialog_seen).then(|| {
            let note =
                format!("a dialog ({rule}) is on screen after Enter; the input area is no evidence while it shows");
            ("dialog", note)
        });
        self.dialog_seen = true;
        let step = if self.deadline_passed {
            let detail = format!(
                "a dialog ({rule}) showed after Enter and stayed; whether the prompt was submitted is unknown, and no Enter is pressed into a dialog"
            );
            Step::Stuck(StuckClass::SubmitStuck, detail)
        } else {
            Step::Poll
        };
        Decision { note, step }
    }

    /// A look at the screen failed (`error`) once the flight typed, or was to type, something:
    /// stuck when its phase's decision is due now (a verification window over, the look before
    /// an Enter, the first look of a recovery or a force), else look again until the deadline
    /// decides. (A delivery's first look and a drop's are the engine's: nothing was typed.)
    pub(super) fn unreadable(&mut self, error: &str) -> Step {
        match self.phase {
            Phase::Baseline => Step::Stuck(StuckClass::Unobservable, format!("cannot read the screen: {error}")),
            Phase::Echo if self.deadline_passed => Step::Stuck(
                StuckClass::Unobservable,
                format!("cannot read the screen at the end of the echo window: {error}; not re-pasting"),
            ),
            Phase::Settle => Step::Stuck(
                StuckClass::SubmitStuck,
                format!("the text was echoed, but the look before the Enter failed: {error}; no Enter pressed blind"),
            ),
            Phase::Submit if self.deadline_passed => Step::Stuck(
                StuckClass::Unobservable,
                format!(
                    "cannot read the screen at the end of the verification window: {error}; no Enter pressed blind"
                ),
            ),
            _ => {
                // Keep trying until the phase's deadline; it decides.
                self.read_failures += 1;
                Step::Poll
            }
        }
    }

    /// Whether a result answers the request this flight waits for: its own attempt, the token
    /// of its current phase's request. Anything else is late or foreign and changes nothing.
    pub(super) fn answers(&self, attempt: Option<u64>, token: Token) -> bool {
        Some(self.attempt) == attempt && self.waiting == Some(token)
    }

    /// A timer of this flight went off: whether it asks for a fresh look at the screen now. A
    /// timer of another attempt, or (but for a poll) of an earlier Enter, asks nothing. A
    /// verification deadline closes the window first: the next look decides, never an older
    /// one (a paste that showed after the last poll is there, and so is a submit).
    pub(super) fn look_due(&mut self, key: &TimerKey) -> bool {
        if Some(self.attempt) != key.attempt || (key.kind != TimerKind::Poll && key.step != self.enters) {
            return false;
        }
        let watching = matches!(self.phase, Phase::Echo | Phase::Submit | Phase::Erased);
        match key.kind {
            TimerKind::Poll => watching && self.waiting.is_none(),
            TimerKind::Settle => self.phase == Phase::Settle,
            TimerKind::Deadline if watching => {
                self.deadline_passed = true;
                self.waiting.is_none()
            }
            TimerKind::Deadline | TimerKind::Retry | TimerKind::Drained | TimerKind::Watch => false,
        }
    }

    /// The paste goes out (request `token`): the input area showed `baseline` before it, and
    /// the program takes it as `typed_lines` submissions (0: whole).
    pub(super) fn pasting(&mut self, token: Token, baseline: Presence, typed_lines: u32) {
        self.baseline = baseline;
        self.phase = Phase::Pasting;
        self.waiting = Some(token);
        self.typed_lines = typed_lines;
        self.paste_written = true;
    }

    /// An Enter goes out (request `token`) at `now_ms`: a new verification window, with the
    /// cursor's row as it was before it. The first Enter also records what the session's state
    /// was then (`activity`, whether it was `stale`, whether prompts were queued ahead), which
    /// decides whether the prompt may sit in the agent's own queue. Returns the Enter's number.
    pub(super) fn entering(
        &mut self,
        token: Token,
        now_ms: u64,
        activity: Activity,
        stale: bool,
        queue_ahead: bool,
    ) -> u32 {
        self.phase = Phase::Entering;
        self.waiting = Some(token);
        self.enters += 1;
        self.enter_ms = Some(now_ms);
        self.deadline_passed = false;
        self.dialog_seen = false;
        self.enter_cursor_row = self.last_cursor_row.clone();
        if self.enters == 1 {
            self.activity_at_enter = activity;
            self.stale_at_enter = stale;
            self.queue_ahead_at_enter = queue_ahead;
        }
        self.enters
    }

    /// What this flight typed, in words for the operator who forced it.
    pub(super) fn did(&self) -> String {
        let enters = match self.enters {
            0 => String::new(),
            1 => "pressed Enter".to_string(),
            n => format!("pressed Enter {n} times"),
        };
        match (self.paste_written, enters.is_empty()) {
            (true, true) => "pasted again".into(),
            (true, false) => format!("pasted again and {enters}"),
            (false, false) => enters,
            (false, true) => "typed nothing".into(),
        }
    }

    /// Whether this flight typed anything.
    pub(super) fn acted(&self) -> bool {
        self.paste_written || self.enters > 0
    }
}

/// What a new flight is: which items, how they go, and who waits for its outcome.
#[derive(Debug)]
pub(super) struct Launch {
    pub(super) ids: Vec<ItemId>,
    pub(super) mode: Mode,
    /// The operator client awaiting the outcome of a force.
    pub(super) reply_to: Option<u64>,
    /// Paste even onto text someone typed (`desk force --over-draft`).
    pub(super) over_draft: bool,
}

/// One look at the screen during a delivery, and what the engine reads from it.
#[derive(Debug)]
pub(super) struct Look {
    pub(super) screen: ScreenView,
    /// How often the prompt (or the provider's paste placeholder) shows in the input area.
    pub(super) presence: Presence,
    /// The dialog on screen: a blocked screen rule's name, or the agent reporting it waits.
    pub(super) dialog: Option<String>,
    /// The cursor's row: its index and its text.
    pub(super) cursor_row: (usize, String),
}

/// Text in the composer besides the prompt being delivered, when the composer can be read and
/// shows the prompt (whole, or as the provider's paste placeholder); `None` when there is none
/// or it cannot be told.
fn foreign_text(settings: &DeliverySettings, flight: &Flight, lines: &[String]) -> Option<String> {
    if flight.over_draft || flight.mode != Mode::Deliver || !settings.knows_composer() {
        return None;
    }
    let composer = settings.composer_text(lines)?;
    let ours = text::normalize(&flight.text);
    let rest = if let Some(i) = composer.find(&ours) {
        format!("{} {}", &composer[..i], &composer[i + ours.len()..])
    } else if let Some(re) = settings.placeholder.as_ref().filter(|re| re.is_match(&composer)) {
        re.replace_all(&composer, " ").into_owned()
    } else {
        return None;
    };
    let rest = text::normalize(&rest);
    (!rest.is_empty()).then_some(rest)
}
