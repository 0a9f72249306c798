//! The gate: whether a session's queued items may go now, and the start of their flight.
//!
//! Owns the decision to launch a delivery: the session's state (not paused, running, ready, no
//! dialog reported), the backoff after a failure, `when=idle` items waiting for a trusted idle,
//! at most [`MAX_DIGEST`] items as one digest, and the last look at the screen before anything
//! is typed (a dialog, a person typing, a program not reading a line, a draft in the input
//! box). Invariants: a hold writes nothing to disk — its items stay as they were (queued, or
//! stuck for a force) and the hold says why; at most one flight per session is started; a hold
//! that passes by itself arms a look again. It decides and arms; it never types, and it does
//! not know how a flight goes on once started (`transport`) or how items found `sending` after
//! a restart are settled (`recovery`).

use std::time::{Duration, Instant};

use crate::delivery::item::{Item, ItemId, State, When};
use crate::delivery::settings::DeliverySettings;
use crate::delivery::text::{Held, Presence};
use crate::delivery::{line, text};
use crate::state::hooks::PromptSig;
use crate::state::{Activity, Lifecycle};

use super::unsent::OWN_PASTE_HOLD;
use super::{
    Action, CONNECTING, Engine, Flight, HOLD_RECHECK, Launch, Look, MAX_DIGEST, Mode, Out, Phase, STATE_AFTER_SUBMIT,
    SessionView, prompt_text, typing_hold,
};

/// How a hold for a draft in the input box begins (`desk force` recognises it).
pub(super) const DRAFT_HOLD: &str = "the input box holds text typed by someone";

/// The start of a text, for a message: at most 40 characters and `…`.
fn preview(text: &str) -> String {
    desk_term::text::ellipsize(text, 41)
}

impl Engine {
    pub(super) fn pump(&mut self, session: &str, out: &mut Out<'_>) {
        if self.flight(session).is_some() {
            return;
        }
        self.keep_watch(session, out);
        let mut queued: Vec<ItemId> = self.session(session).items.clone();
        queued.retain(|id| self.items.get(id).is_some_and(|i| i.state == State::Queued));
        if queued.is_empty() {
            self.session(session).hold = None;
            return;
        }
        let live = match self.session_gate(session) {
            Ok(live) => live,
            Err(why) => return self.set_hold(session, why, out.now_ms),
        };
        if self.retry_pending(session, out.now) {
            return;
        }
        self.retarget(&queued, live.generation, out);
        match self.releasable(session, &live, &queued, out.now_ms) {
            Ok(ids) => {
                self.session(session).hold = None;
                let launch = Launch { ids, mode: Mode::Deliver, reply_to: None, over_draft: false };
                self.start_flight(session, live, launch, out);
            }
            Err((why, None)) => self.set_hold(session, why, out.now_ms),
            Err((why, Some(recheck))) => {
                self.set_hold(session, why, out.now_ms);
                let at = out.now + recheck;
                self.session(session).retry_at = Some(at);
                self.arm_retry(session, at, out);
            }
        }
    }

    /// The session's state lets a delivery start (not paused, running, ready, no dialog up):
    /// its live view; otherwise why not.
    fn session_gate(&self, session: &str) -> Result<SessionView, String> {
        let q = self.sessions.get(session).ok_or("the session is not running")?;
        if let Some(reason) = &q.paused {
            let reason = if reason.is_empty() { String::new() } else { format!(": {reason}") };
            return Err(format!("paused by the operator{reason}"));
        }
        let live = q.live.clone().ok_or(if q.connecting { CONNECTING } else { "the session is not running" })?;
        if live.lifecycle == Lifecycle::Exited {
            return Err("the session has exited".into());
        }
        if live.lifecycle == Lifecycle::Starting || !live.ready {
            return Err("the session is starting (its TUI is not ready yet)".into());
        }
        if live.activity == Activity::Blocked {
            let wait = live.wait.as_deref().unwrap_or("the operator");
            return Err(format!("the agent is waiting for {wait}; nothing is typed into its dialog"));
        }
        Ok(live)
    }

    /// Whether a backoff is still running (a retry that is due is cleared).
    fn retry_pending(&mut self, session: &str, now: Instant) -> bool {
        let q = self.session(session);
        match q.retry_at {
            Some(at) if now < at => true,
            _ => {
                q.retry_at = None;
                false
            }
        }
    }

    /// Items for an older generation follow the session into its new one.
    fn retarget(&mut self, ids: &[ItemId], generation: u32, out: &mut Out<'_>) {
        for id in ids {
            let Some(item) = self.items.get_mut(id) else { continue };
            let Some(from) = item.generation.filter(|g| *g != generation) else { continue };
            item.generation = Some(generation);
            let detail = format!("the session restarted; now for generation {generation} (was {from})");
            self.transition(id, State::Queued, "retargeted", detail, out);
        }
    }

    /// The queued items that may go now (at most [`MAX_DIGEST`], as one digest), or why none
    /// may and, when the reason passes by itself, when to look again.
    fn releasable(
        &self,
        session: &str,
        live: &SessionView,
        queued: &[ItemId],
        now_ms: u64,
    ) -> Result<Vec<ItemId>, (String, Option<Duration>)> {
        // "Idle" from before the last prompt's Enter: the turn that prompt started may not show
        // yet, so it is not trusted where being idle matters.
        let stale = if live.activity == Activity::Idle { self.activity_stale(session, now_ms) } else { None };
        let stale_hold = |wait: u64| {
            ("waiting to see the agent's state after the last prompt".to_string(), Some(Duration::from_millis(wait)))
        };
        let steers = live.rules.delivery.hold_while_working;
        if steers && let Some(wait) = stale {
            return Err(stale_hold(wait));
        }
        if steers && live.activity == Activity::Working {
            let why = "the agent is working and would take a prompt now as an interruption of its turn; waiting for it to finish";
            return Err((why.into(), None));
        }
        let idle = live.activity == Activity::Idle && stale.is_none();
        // A digest's header and separator lines would be commands to a shell, or lines of input
        // to a program reading them: without an agent's input box, each prompt goes alone.
        let batch = if live.rules.delivery.knows_composer() { MAX_DIGEST } else { 1 };
        let ids: Vec<ItemId> = queued
            .iter()
            .filter(|id| self.items.get(*id).is_some_and(|i| i.when == When::Now || idle))
            .take(batch)
            .cloned()
            .collect();
        match (ids.is_empty(), stale) {
            (false, _) => Ok(ids),
            (true, Some(wait)) => Err(stale_hold(wait)),
            (true, None) => Err((format!("waiting for the agent to be idle (it is {})", live.activity.as_str()), None)),
        }
    }

    /// Whether the session's activity predates the last Enter (and that Enter is recent).
    pub(super) fn activity_stale(&self, session: &str, now_ms: u64) -> Option<u64> {
        let q = self.sessions.get(session)?;
        let enter = q.last_enter_ms?;
        let until = enter + STATE_AFTER_SUBMIT.as_millis() as u64;
        (q.activity_changed_ms < enter && now_ms < until).then(|| until - now_ms)
    }

    pub(super) fn start_flight(&mut self, session: &str, live: SessionView, launch: Launch, out: &mut Out<'_>) {
        let Launch { ids, mode, reply_to, over_draft } = launch;
        // Whatever held the queue before is past: items behind a flight wait for it, not for a
        // hold, and the next pump says anew what holds them once it has settled.
        self.session(session).hold = None;
        let attempt = self.next_attempt;
        self.next_attempt += 1;
        let items: Vec<&Item> = ids.iter().filter_map(|id| self.items.get(id)).collect();
        let text = match (mode, items.as_slice()) {
            // What was pasted: the digest it went in, or its own text.
            (Mode::Clear, [item]) => self.pasted_text(item),
            _ => prompt_text(&items),
        };
        let fingerprint = text::fingerprint(&text);
        let prompt = PromptSig::of(&text);
        self.session(session).flight = Some(Flight {
            attempt,
            items: ids.clone(),
            text,
            fingerprint,
            prompt,
            over_draft,
            generation: live.generation,
            mode,
            phase: Phase::Baseline,
            waiting: None,
            paste_written: false,
            baseline: Presence::default(),
            enters: 0,
            pasted_ms: None,
            enter_ms: None,
            activity_at_enter: live.activity,
            reply_to,
            read_failures: 0,
            deadline_passed: false,
            last_cursor_row: None,
            enter_cursor_row: None,
            dialog_seen: false,
            stale_at_enter: false,
            queue_ahead_at_enter: false,
            at_shell_prompt: false,
            typed_lines: 0,
        });
        self.enlist(&ids, mode, live.generation, out);
        self.request_snapshot(session, out);
    }

    /// Tie a new flight's items to it: the digest they form, the generation they target, and
    /// for a forced Enter or a recovery, the record that it began (an ordinary delivery is
    /// claimed when it is pasted, in the same batch as the paste — persist before inject — so
    /// a look at the screen that holds it back changes nothing on disk).
    fn enlist(&mut self, ids: &[ItemId], mode: Mode, generation: u32, out: &mut Out<'_>) {
        if mode == Mode::Clear {
            // Nothing is typed for the item until the box is proven to hold its prompt; it
            // stays stuck, in the digest it was pasted in, until the drop is done.
            return;
        }
        let digest: &[ItemId] = if ids.len() > 1 { ids } else { &[] };
        for id in ids {
            let from = self.items.get(id).map(|i| i.state);
            let Some(item) = self.items.get_mut(id) else { continue };
            item.digest_with = digest.iter().filter(|d| *d != id).cloned().collect();
            // A stuck item forced into a later generation now targets it: what that
            // generation's agent does (and its end) is what settles it.
            match item.generation.replace(generation) {
                Some(was) if was != generation => {
                    let detail = format!("forced into generation {generation} (was {was})");
                    item.note(out.now_ms, "retargeted", detail);
                }
                _ => {}
            }
            // A forced Enter is an attempt of its own; a recovery goes on with the attempt
            // that was cut off.
            if mode == Mode::ForceEnter {
                item.attempts += 1;
            }
            let attempt = item.attempts;
            let (kind, detail) = match mode {
                Mode::Deliver | Mode::Clear => continue,
                Mode::ForceEnter => ("forced", format!("attempt {attempt}: the operator forced an Enter")),
                Mode::Recover => ("recovering", format!("attempt {attempt}: found sending after a restart")),
            };
            if from == Some(State::Sending) && mode == Mode::Recover {
                self.note_items(std::slice::from_ref(id), kind, &detail, out.now_ms);
            } else {
                self.transition(id, State::Sending, kind, detail, out);
            }
        }
    }

    /// Why the screen says not to type now, and when to look again: a dialog, a person typing,
    /// a program not reading a line, an agent's input box that is missing or holds a draft.
    pub(super) fn screen_hold(
        &self,
        session: &str,
        flight: &Flight,
        look: &Look,
        settings: &DeliverySettings,
        now_ms: u64,
    ) -> Option<(String, Duration)> {
        if let Some(rule) = &look.dialog {
            return Some((format!("a dialog is on screen ({rule}); nothing is typed into it"), HOLD_RECHECK));
        }
        if let Some(wait) = typing_hold(&look.screen, now_ms) {
            return Some(("someone is typing in an attached terminal".into(), wait));
        }
        if let Some(why) = line::job_in_foreground(&look.screen) {
            // Whatever is typed now goes to that job, or waits for the program in the terminal
            // and is read as a command once the job ends.
            return Some((why, HOLD_RECHECK));
        }
        if !settings.knows_composer() {
            // Not an agent's input box: a program reading a line, or a shell at an empty
            // prompt, or nothing is typed (keys typed into an editor are commands).
            return line::typing_hold(&look.screen, settings, session, &flight.text).map(|why| (why, HOLD_RECHECK));
        }
        if flight.over_draft {
            return None;
        }
        let Some(draft) = settings.composer_text(&look.screen.lines) else {
            let why = "the agent's input box is not on the screen; nothing is typed until it is";
            return Some((why.into(), HOLD_RECHECK));
        };
        (!draft.is_empty()).then(|| (self.draft_hold(session, flight, &draft), HOLD_RECHECK))
    }

    /// Why a draft in the input box holds this flight, in words for the operator: the stuck item
    /// whose unsent prompt it is, when desk's own paste is what the box holds.
    fn draft_hold(&self, session: &str, flight: &Flight, draft: &str) -> String {
        let n = draft.chars().count();
        if let Some((ids, held)) = self.unsent_in_box(session, draft) {
            let first = &ids[0];
            let digest = if ids.len() > 1 { format!(" (one digest of {} items)", ids.len()) } else { String::new() };
            return match held {
                Held::Exactly => format!(
                    "{OWN_PASTE_HOLD} {first}{digest}: desk force {first} submits it (Enter only), desk drop {first} clears it; delivery waits until it is sent or cleared"
                ),
                _ => format!(
                    "the input box holds the prompt of stuck item {first}{digest} together with text typed by someone ({n} characters); delivery waits until it is sent or cleared"
                ),
            };
        }
        match flight.reply_to {
            Some(_) => format!(
                "the input box holds text typed by someone ({n} characters: {:?}); forcing now would paste this prompt after it and submit both as one message. Let them send or clear it, or run desk force {} --over-draft to do it anyway",
                preview(draft),
                flight.items.first().map(|i| i.as_str()).unwrap_or("")
            ),
            None => format!("{DRAFT_HOLD} ({n} characters); delivery waits until it is sent or cleared"),
        }
    }

    /// Hold a flight back before anything was typed: it ends, its items stay as they were, and
    /// the screen is looked at again after `recheck`. A force's operator is told why.
    pub(super) fn hold_flight(
        &mut self,
        session: &str,
        reply_to: Option<u64>,
        why: String,
        recheck: Duration,
        out: &mut Out<'_>,
    ) {
        self.take_flight(session);
        match reply_to {
            Some(client) => out.actions.push(Action::Reply {
                client,
                ok: false,
                acted: false,
                message: format!("refused, nothing typed: {why}"),
                item: None,
            }),
            None => self.set_hold(session, why, out.now_ms),
        }
        let at = out.now + recheck;
        self.session(session).retry_at = Some(at);
        self.arm_retry(session, at, out);
    }
}
