//! The delivery in flight: what one attempt is, and what a look at the screen shows of it.
//!
//! Owns the [`Flight`] — the items going as one prompt, its text and signature, the transport
//! [`Phase`] it is in (Baseline → Pasting → Echo → Settle → Entering → Submit, or the erase of a
//! drop), its [`Mode`] (a delivery, a forced Enter, a recovery, a clearing drop) and the
//! evidence gathered on the way (the baseline presence, Enters pressed, the cursor's row, a
//! dialog seen) — and the [`Look`] taken of the screen for it. Invariants: one flight per
//! session; a result counts only for the request the flight waits for (`waiting`, by token);
//! `paste_written` and `enters` say exactly what it typed (an operator is told). Pure data and
//! readings of it: it may not depend on the engine's queues or items, nor type anything.

use crate::delivery::item::ItemId;
use crate::delivery::settings::DeliverySettings;
use crate::delivery::text;
use crate::delivery::text::{Fingerprint, Presence};
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

#[derive(Debug, Clone)]
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

impl Flight {
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
pub(super) fn foreign_text(settings: &DeliverySettings, flight: &Flight, lines: &[String]) -> Option<String> {
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
