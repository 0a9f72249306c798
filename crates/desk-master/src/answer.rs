//! An operator's answer to the session's dialog, the one they were shown (docs/protocol.md
//! §5.9, `answer`).
//!
//! Owns checking an `answer` request against the dialog on the screen model (read by the
//! provider's dialog rules, `desk_core::dialog`, with the cells' colours), turning the choice
//! into the provider's keys, typing them through the operator's key queue
//! (`super::operator`: one at a time, [`super::typing::KEY_GAP`] apart) with the dialog's
//! fingerprint on every key, and journalling the answer as an `answer` event with who, from
//! where, the choice, the keys and the dialog's text. Invariants: nothing is typed unless the
//! screen shows a dialog whose fingerprint is the one the operator saw; before each later key
//! the dialog is read again, and when it has changed (or gone) for [`RECHECKS`] reads in a row
//! the rest of the answer is dropped and journalled as `stopped`; an answer is refused while
//! keys of an earlier request are still being typed (two answers never interleave); every
//! answer, typed or refused, is journalled.

use mio::Token;
use std::time::{Duration, Instant};

use super::event_loop::Master;
use super::timers::Timer;
use super::typing::{KEY_GAP, PendingKey};
use desk_core::dialog::{Choice, Dialog};
use desk_wire::events::EventBody;
use desk_wire::{ErrorCode, Frame};

/// 3 reads: how many times in a row the dialog may read as changed before an answer's next key
/// is dropped. An agent redraws its dialog when a highlight moves; a read that lands in the
/// middle of a redraw is not a changed dialog, and the next read, [`RECHECK_GAP`] later, sees
/// the finished one.
pub(super) const RECHECKS: u8 = 3;

/// 50 ms between those reads: agents finish a redraw within a few milliseconds of starting it.
pub(super) const RECHECK_GAP: Duration = Duration::from_millis(50);

/// 40 rows of dialog text kept in the journal: a dialog is a screen at most, and the journal's
/// line stays bounded.
const JOURNAL_DIALOG_ROWS: usize = 40;

/// What became of an answer, for its journal record.
struct Said {
    outcome: &'static str,
    choice: String,
    keys: Vec<String>,
    why: Option<String>,
}

/// Who answers, as the request says.
pub(super) struct Answerer {
    pub user: String,
    pub tty: Option<String>,
    pub via: String,
}

impl Master {
    /// The dialog on the screen now, as the provider's rules read it.
    pub(super) fn dialog_now(&self) -> Option<Dialog> {
        let spec = self.agent().authority().rules().dialog.as_ref()?;
        let scope = format!("{}/{}", self.meta().name, self.meta().generation);
        spec.read(&self.screen().text_rows(), Some(self.screen()), &scope)
    }

    /// An `answer` request from client `token`: check it against the screen, then type its
    /// keys; an `Err` is the ERROR to answer (the refusal is journalled).
    pub(super) fn on_answer(
        &mut self,
        token: Token,
        choice: Choice,
        seen: String,
        who: Answerer,
        now: Instant,
    ) -> Result<(), Frame> {
        let dialog = self.dialog_now();
        let label = |d: Option<&Dialog>| match &choice {
            Choice::Deny => "deny".to_string(),
            Choice::Option(n) => d
                .and_then(|d| d.options.iter().find(|o| o.number == *n))
                .map_or_else(|| n.to_string(), |o| format!("{}. {}", o.number, o.label)),
        };
        let refuse = |master: &mut Master, why: String, keys: Vec<String>| {
            let said = Said { outcome: "refused", choice: label(dialog.as_ref()), keys, why: Some(why.clone()) };
            master.journal_answer(said, &seen, dialog.as_ref(), &who);
            Err(Frame::error(ErrorCode::NotPermitted, why))
        };
        let Some(spec) = self.agent().authority().rules().dialog.clone() else {
            let why = format!("desk has no dialog rules for {} sessions; nothing was typed", self.meta().provider);
            return refuse(self, why, Vec::new());
        };
        let Some(shown) = dialog.clone() else {
            let why = "the session shows no dialog now (answered or dismissed since it was shown); nothing was typed";
            return refuse(self, why.into(), Vec::new());
        };
        if shown.fingerprint != seen {
            let why = format!(
                "the dialog changed since it was shown: it now asks {} (fingerprint {}, not {seen}); nothing was typed",
                shown.asks(),
                shown.fingerprint
            );
            return refuse(self, why, Vec::new());
        }
        if !self.pending_keys().is_empty() {
            let why = "keys of an earlier request are still being typed into the session; nothing was typed";
            return refuse(self, why.into(), Vec::new());
        }
        let keys = match spec.keys(&shown, &choice) {
            Ok(keys) => keys,
            Err(e) => return refuse(self, format!("{e}; nothing was typed"), Vec::new()),
        };
        let parsed = match desk_term::keys::parse_all(&keys) {
            Ok(parsed) => parsed,
            Err((at, e)) => return refuse(self, format!("the rules' key {:?} is no key ({e})", keys[at - 1]), keys),
        };
        let app_cursor = self.screen().modes().app_cursor_keys;
        let mut parsed = parsed.into_iter();
        let Some(first) = parsed.next() else { return Ok(()) };
        if !self.queue_input(token, &desk_term::keys::encode(&[first], app_cursor), now) {
            // Its INPUT_FULL error is on its way to the client.
            let why = Some("the input queue is full".into());
            self.journal_answer(
                Said { outcome: "refused", choice: label(Some(&shown)), keys, why },
                &seen,
                Some(&shown),
                &who,
            );
            return Ok(());
        }
        self.pending_keys_mut().queue(parsed.map(|key| PendingKey { key, expect: Some(seen.clone()), misses: 0 }));
        if !self.pending_keys().is_empty() {
            self.arm(now + KEY_GAP, Timer::KeysNext);
        }
        self.person_typed();
        let said = Said { outcome: "typed", choice: label(Some(&shown)), keys, why: None };
        self.journal_answer(said, &seen, Some(&shown), &who);
        Ok(())
    }

    /// Whether the next key of an answer may be typed now: the dialog still is the one the
    /// operator saw. `None`: look again in [`RECHECK_GAP`]; `Some(false)`: drop the rest.
    pub(super) fn answer_still_holds(&mut self, key: &mut PendingKey) -> Option<bool> {
        let Some(expect) = &key.expect else { return Some(true) };
        if self.dialog_now().is_some_and(|d| &d.fingerprint == expect) {
            return Some(true);
        }
        key.misses += 1;
        if key.misses < RECHECKS { None } else { Some(false) }
    }

    /// The rest of an answer was dropped: the dialog changed while its keys were typed.
    pub(super) fn answer_stopped(&mut self, seen: &str, dropped: usize) {
        let dialog = self.dialog_now();
        let why = match &dialog {
            Some(d) => format!(
                "the dialog changed while its keys were typed (it now asks {}); {dropped} keys were not typed",
                d.asks()
            ),
            None => format!("the dialog went away while its keys were typed; {dropped} keys were not typed"),
        };
        tracing::warn!("{why}");
        let who = Answerer { user: String::new(), tty: None, via: "master".into() };
        let said = Said { outcome: "stopped", choice: String::new(), keys: Vec::new(), why: Some(why) };
        self.journal_answer(said, seen, dialog.as_ref(), &who);
    }

    fn journal_answer(&mut self, said: Said, seen: &str, dialog: Option<&Dialog>, who: &Answerer) {
        let Said { outcome, choice, keys, why } = said;
        self.emit(EventBody::Answer {
            outcome: outcome.into(),
            choice,
            keys,
            seen: seen.into(),
            now: dialog.map(|d| d.fingerprint.clone()).unwrap_or_default(),
            asks: dialog.map(Dialog::asks).unwrap_or_default(),
            dialog: dialog.map(|d| d.text.iter().take(JOURNAL_DIALOG_ROWS).cloned().collect()).unwrap_or_default(),
            why,
            user: who.user.clone(),
            tty: who.tty.clone(),
            via: who.via.clone(),
        });
    }
}
