//! Operator commands: `desk pause`, `resume`, `drop` and `force` as the engine takes them.
//!
//! Owns turning a command into the change it asks for and its reply: a pause or resume of a
//! session's queue, a drop (of an item not in flight; a stuck item whose prompt sits unsent in
//! the box goes through `unsent`'s erase first), and a force — which items may be forced and
//! when, and the forced Enter's one look before it presses. Invariants: a force never pastes
//! over a draft unless the operator said `--over-draft`, never presses Enter into a dialog, onto
//! text someone typed beside the prompt, or while someone is typing, and never forces a
//! `merged` item; an item in flight is never dropped; every command gets exactly one reply
//! (a force or a clearing drop, once its flight ends). It may not type except by starting a
//! flight.

use crate::delivery::item::{Item, ItemId, State, StuckClass};
use crate::delivery::line;
use crate::state::{Activity, Lifecycle};

use super::gate::DRAFT_HOLD;
use super::{Action, Command, Engine, Launch, Look, Mode, Out, SessionView, typing_hold};

impl Engine {
    pub(super) fn on_command(&mut self, client: u64, command: Command, out: &mut Out<'_>) {
        let reply = |out: &mut Out<'_>, ok: bool, message: String| {
            out.actions.push(Action::Reply { client, ok, acted: false, message, item: None })
        };
        match command {
            Command::Pause { session, reason } => {
                let session = String::from(session);
                self.session(&session).paused = Some(reason);
                self.pump(&session, out);
                reply(out, true, format!("paused delivery to {session}"));
            }
            Command::Resume { session } => {
                let session = String::from(session);
                let was = self.session(&session).paused.take();
                self.session(&session).retry_at = None;
                self.pump(&session, out);
                let message = match was {
                    Some(_) => format!("resumed delivery to {session}"),
                    None => format!("{session} was not paused"),
                };
                reply(out, true, message);
            }
            Command::Drop(id) => {
                let Some((state, session)) = self.items.get(&id).map(|i| (i.state, i.session.clone())) else {
                    return reply(out, false, format!("no pending item {id} (it may be delivered or dropped already)"));
                };
                if state == State::Sending || self.flight(&session).is_some_and(|f| f.items.contains(&id)) {
                    return reply(
                        out,
                        false,
                        format!("item {id} is being delivered right now; drop it once it settles"),
                    );
                }
                if let Some(live) = self.clearable(&id) {
                    // Its prompt may sit unsent in the input box: look, and erase it there
                    // if the box holds exactly that prompt; the drop replies once done.
                    let launch = Launch { ids: vec![id], mode: Mode::Clear, reply_to: Some(client), over_draft: false };
                    return self.start_flight(&session, live, launch, out);
                }
                self.transition(&id, State::Dropped, "dropped", "dropped by the operator".into(), out);
                reply(out, true, format!("dropped {id}"));
                self.pump(&session, out);
            }
            Command::Force { id, over_draft } => {
                if let Err(message) = self.force(client, id, over_draft, out) {
                    reply(out, false, message);
                }
            }
        }
    }

    /// An operator's force: a stuck item goes again (Enter only when it is submit-stuck), and
    /// so does a queued one held by a draft, with `over_draft`. Why not, when it cannot go now.
    fn force(&mut self, client: u64, id: ItemId, over_draft: bool, out: &mut Out<'_>) -> Result<(), String> {
        let item = self.items.get(&id).cloned().ok_or_else(|| format!("no pending item {id}"))?;
        self.forceable(&item, over_draft)?;
        let live = self.force_gate(&item.session)?;
        let mode = if item.stuck == Some(StuckClass::SubmitStuck) { Mode::ForceEnter } else { Mode::Deliver };
        // A digest pasted together goes again together: its prompt may sit in the box whole.
        let ids = self.pasted_group(&item);
        let with = match ids.len() {
            1 => String::new(),
            n => format!(" (with the {} other item(s) of its digest)", n - 1),
        };
        let note = match mode {
            Mode::ForceEnter => format!("operator: press Enter{with}"),
            _ if over_draft => format!("operator: paste, even onto text someone typed{with}"),
            _ => format!("operator: paste again, or press Enter if its prompt sits unsent in the box{with}"),
        };
        self.note_items(&ids, "forced", &note, out.now_ms);
        let launch = Launch { ids, mode, reply_to: Some(client), over_draft };
        self.start_flight(&item.session, live, launch, out);
        Ok(())
    }

    /// Whether an item's state allows a force: stuck (but not merged with someone's text), or
    /// queued behind a draft when the operator chose to paste over it.
    fn forceable(&self, item: &Item, over_draft: bool) -> Result<(), String> {
        let id = &item.id;
        let hold = self.sessions.get(&item.session).and_then(|q| q.hold.as_ref());
        let held_by_draft = hold.is_some_and(|h| h.reason.starts_with(DRAFT_HOLD));
        match (item.state, item.stuck) {
            (State::Stuck, Some(StuckClass::Merged)) => Err(format!(
                "item {id} is merged with text someone else typed (see desk item {id}): forcing could send it a second time, or submit that text with it. Check the agent, then desk drop {id}, or desk send it again if it must arrive on its own"
            )),
            (State::Stuck, _) => Ok(()),
            (State::Queued, _) if self.held_by_own_paste(&item.session) => Err(format!(
                "item {id} is held: {}. Deal with that item first (force or drop it); its prompt, not someone's draft, is what the box holds",
                hold.map(|h| h.reason.as_str()).unwrap_or_default()
            )),
            (State::Queued, _) if held_by_draft && !over_draft => Err(format!(
                "item {id} is held: {}. Forcing it would paste the prompt after that text and submit both as one message; run desk force {id} --over-draft to do that, or wait until the box is sent or cleared",
                hold.map(|h| h.reason.as_str()).unwrap_or_default()
            )),
            (State::Queued, _) if held_by_draft => Ok(()),
            (state, _) => {
                let hold = match (state, hold) {
                    (State::Queued, Some(h)) => format!("; it waits because {}", h.reason),
                    _ => String::new(),
                };
                Err(format!(
                    "item {id} is {}, not stuck{hold}; only stuck items, and items held by a draft in the input box (with --over-draft), are forced",
                    state.as_str()
                ))
            }
        }
    }

    /// Whether a session can take a forced delivery now (nothing else in flight, running, no
    /// dialog up): its live view.
    fn force_gate(&mut self, session: &str) -> Result<SessionView, String> {
        let q = self.session(session);
        if q.flight.is_some() {
            return Err(format!("another delivery to {session} is in flight; force again when it settles"));
        }
        let live = q.live.clone().ok_or_else(|| match q.connecting {
            true => {
                format!("session {session} has not answered desk serve yet (it is connecting); force again in a moment")
            }
            false => format!("session {session} is not running"),
        })?;
        if live.lifecycle != Lifecycle::Running {
            return Err(format!("session {session} is {}", live.lifecycle.as_str()));
        }
        if live.activity == Activity::Blocked {
            return Err(format!("the agent in {session} is waiting for the operator; answer it first"));
        }
        Ok(live)
    }

    /// An operator's force on a submit-stuck item: Enter only, and only onto the text still in
    /// the box.
    pub(super) fn force_enter_look(&mut self, session: &str, look: &Look, out: &mut Out<'_>) {
        if let Some(rule) = &look.dialog {
            return self.stick_for_dialog(session, rule, out);
        }
        if let Some(why) = line::job_in_foreground(&look.screen) {
            let detail = format!("{why}; no Enter pressed (force again once it has)");
            return self.stick_flight(session, StuckClass::SubmitStuck, detail, out);
        }
        if let Some(rest) = self.flight(session).and_then(|flight| self.beside_own_paste(session, flight, look)) {
            // An Enter now would submit someone's text along with the prompt.
            let detail = format!(
                "the input box holds this prompt together with other text ({rest:?}); no Enter pressed, as it would submit both as one message"
            );
            return self.stick_flight(session, StuckClass::SubmitStuck, detail, out);
        }
        if typing_hold(&look.screen, out.now_ms).is_some() {
            // An Enter now would submit what that person typed along with the prompt.
            let detail = "someone is typing in an attached terminal; no Enter pressed (force again when they stop)";
            return self.stick_flight(session, StuckClass::SubmitStuck, detail.into(), out);
        }
        if look.presence.text == 0 && look.presence.placeholders == 0 {
            // Nothing to press Enter for. It may have been submitted after all, or the box was
            // cleared: the operator decides, with a re-paste one force away.
            let detail = "the text is no longer in the input area (it may have been submitted, or cleared); no Enter pressed. Check the agent, then desk force re-pastes it or desk drop forgets it";
            return self.stick_flight(session, StuckClass::PasteMissing, detail.into(), out);
        }
        self.enter_on_text_in_box(session, out);
    }
}
