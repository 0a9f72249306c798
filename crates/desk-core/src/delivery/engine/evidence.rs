//! What the sessions report: live views, downs, UserPromptSubmit hooks and replayed journals.
//!
//! Owns weighing the evidence a session gives about delivered and in-flight prompts: a new
//! live view (a new generation ends the old one's items; "turned working" after an Enter is
//! evidence of a submit), a session going down, a hook heard live or replayed from the
//! journal, an agent's idle that drains its own queue, and the end of a generation.
//! Invariants: evidence is fenced by generation and time — a hook settles only items of its
//! own generation typed before it (within [`HOOK_SKEW_MS`]); one generation's agent being idle
//! never settles what another's was handed; when a generation ends, a prompt its agent may
//! have queued and was not seen taking becomes stuck/interrupted, never left `delivered`. It
//! types nothing: the live view that follows a replay starts deliveries.

use crate::delivery::item::{Item, ItemId, State, StuckClass};
use crate::state::Activity;
use crate::state::hooks::{HookEvent, PromptSig};

use super::{
    Action, Engine, HOOK_SKEW_MS, Heard, Out, Past, PastEvent, Phase, QUEUE_DRAINED, RECENT_HOOKS, SessionView,
    TimerKey, TimerKind,
};

impl Engine {
    pub(super) fn on_session(&mut self, view: SessionView, out: &mut Out<'_>) {
        let (now, now_ms) = (out.now, out.now_ms);
        let name = view.name.clone();
        let q = self.session(&name);
        let old_generation = q.live.as_ref().map(|l| l.generation);
        let was = q.live.as_ref().map(|l| l.activity);
        q.known_down = false;
        if old_generation.is_some_and(|g| g != view.generation) {
            // A new generation: whatever was in flight for the old one is cut off.
            self.interrupt(&name, "the session restarted (new generation) during delivery", out);
        }
        // The agents of earlier generations are gone (the daemon replayed the journal first, so
        // what they reported is weighed); nothing this generation does settles their items.
        let generation = view.generation;
        let why = format!("the session restarted (generation {generation} runs now)");
        self.generation_over(&name, |g| g < generation, &why, out);
        self.boxes_gone(&name, generation, out);
        let q = self.session(&name);
        // From idle (or unknown) to working after our Enter; back to work after a dialog was
        // answered is the agent resuming its own turn, not evidence of our prompt.
        let turned_working =
            !matches!(was, Some(Activity::Working | Activity::Blocked)) && view.activity == Activity::Working;
        let activity = view.activity;
        if was != Some(activity) {
            q.activity_changed_ms = now_ms;
        }
        q.live = Some(view);
        q.connecting = false;
        if activity == Activity::Idle && was != Some(Activity::Idle) && q.owed.iter().any(|i| i.queued_by_agent) {
            // Idle for QUEUE_DRAINED from now on means the agent's queue is empty.
            out.actions.push(Action::Arm {
                at: now + QUEUE_DRAINED,
                key: TimerKey { session: name.clone(), attempt: None, kind: TimerKind::Drained, step: 0 },
            });
        }
        if turned_working
            && let Some(f) = self.flight(&name)
            && f.phase == Phase::Submit
            && f.activity_at_enter != Activity::Working
            && !f.dialog_seen
            // With a prompt of its own queue ahead, the turn may be that prompt's.
            && !f.queue_ahead_at_enter
        {
            self.submitted(&name, "the agent's activity turned working after Enter".into(), false, out);
            return;
        }
        // Items found `sending` at start-up are settled once their session is observable.
        self.recover(&name, out);
        self.pump(&name, out);
    }

    pub(super) fn on_down(&mut self, session: &str, generation: Option<u32>, out: &mut Out<'_>) {
        let q = self.session(session);
        // A report about another generation than the live one is old news.
        if let Some(generation) = generation
            && q.live.as_ref().is_some_and(|l| l.generation != generation)
        {
            return;
        }
        q.live = None;
        q.known_down = true;
        q.connecting = false;
        self.interrupt(session, "the session went away during delivery", out);
        // That generation's agent (every earlier one's too) is gone.
        self.generation_over(session, |g| generation.is_none_or(|down| g <= down), "the session ended", out);
        self.pump(session, out);
    }

    pub(super) fn on_hook(
        &mut self,
        session: &str,
        generation: u32,
        event: &HookEvent,
        prompt: Option<PromptSig>,
        at_ms: u64,
        out: &mut Out<'_>,
    ) {
        if *event != HookEvent::UserPromptSubmit {
            return;
        }
        // A hook that does not say what was submitted proves nothing about our prompt.
        let Some(sig) = prompt else { return };
        let q = self.session(session);
        if q.hooks.len() >= RECENT_HOOKS {
            q.hooks.pop_front();
        }
        q.hooks.push_back(Heard { at_ms, generation, sig: sig.clone() });
        // A hook is evidence about its own generation's items only (a replayed journal carries
        // hooks of generations that are over).
        if self.pay_owed(session, generation, &sig, at_ms, out) {
            return;
        }
        // Items found `sending` after a restart are settled by their hook as soon as it is
        // heard (in a recovery or not), not only at a later look: the daemon's journal cursor
        // moves past a hook once the engine has heard it.
        if self.settle_found_sending_by_hook(session, generation, &sig, out) {
            return;
        }
        // Only once Enter was pressed: before it, the agent cannot have submitted our text.
        let flight = self.flight(session).filter(|f| {
            f.generation == generation
                && f.pasted_ms.is_some_and(|p| at_ms + HOOK_SKEW_MS >= p)
                && matches!(f.phase, Phase::Entering | Phase::Submit)
        });
        let Some(f) = flight else {
            self.settle_stuck_by_hook(session, generation, &sig, at_ms, out);
            return;
        };
        if sig.digest == f.prompt.digest {
            let evidence =
                format!("the agent's UserPromptSubmit hook reported the whole prompt ({} characters)", sig.chars);
            return self.submitted(session, evidence, true, out);
        }
        if sig.carries_more_than(&f.prompt) {
            let detail = format!(
                "the agent's UserPromptSubmit hook reports one message of {} characters that carries this prompt ({} characters) and text someone else typed: the message begins {:?} and ends {:?}; the prompt begins {:?} and ends {:?}. It was submitted glued to that text, not as a message of its own",
                sig.chars, f.prompt.chars, sig.head, sig.tail, f.prompt.head, f.prompt.tail
            );
            return self.stick_flight(session, StuckClass::Merged, detail, out);
        }
        self.settle_stuck_by_hook(session, generation, &sig, at_ms, out);
    }

    /// Replay what a session's journal recorded while the engine was not told (a restart, a
    /// lost connection): hooks settle what they report; an agent that stayed idle for
    /// [`QUEUE_DRAINED`] took what it had queued before; an exit or a new generation ends the
    /// generations before it ([`Engine::generation_over`]). Nothing is typed here: the live
    /// view that follows starts deliveries.
    pub(super) fn on_journal(&mut self, session: &str, events: Vec<Past>, out: &mut Out<'_>) {
        // The replayed generation's idle, and since when.
        let mut idle: Option<(u32, u64)> = None;
        for past in events {
            let generation = past.generation;
            match past.what {
                PastEvent::Hook { event, prompt } => {
                    self.on_hook(session, generation, &event, prompt, past.at_ms, out);
                }
                PastEvent::Activity(activity) => {
                    if let Some((g, since)) = idle.take() {
                        self.idle_until(session, g, since, past.at_ms, out);
                    }
                    idle = (activity == Activity::Idle).then_some((generation, past.at_ms));
                }
                PastEvent::Exit => {
                    if let Some((g, since)) = idle.take() {
                        self.idle_until(session, g, since, past.at_ms, out);
                    }
                    let why = format!("the session's agent exited (generation {generation})");
                    self.generation_over(session, |g| g <= generation, &why, out);
                }
                PastEvent::Started => {
                    // When the earlier generation ended is not known (its master may have been
                    // killed): its idle proves nothing past this.
                    idle = None;
                    let why = format!("the session restarted (generation {generation} started)");
                    self.generation_over(session, |g| g < generation, &why, out);
                }
            }
        }
    }

    /// The agent of `generation` was idle from `since` to `until` (Unix ms): if that lasted
    /// [`QUEUE_DRAINED`], it took every prompt it had queued before `since`.
    fn idle_until(&mut self, session: &str, generation: u32, since: u64, until: u64, out: &mut Out<'_>) {
        if until >= since + QUEUE_DRAINED.as_millis() as u64 {
            self.take_from_queue(session, generation, since, out);
        }
    }

    /// The agent of every generation `over` names is gone: what it was handed and never
    /// reported taking is judged now, on the evidence heard so far (the daemon replays the
    /// session's journal before it reports a session down or a new generation, so nothing
    /// recorded is missed). A prompt that may have waited in that agent's own queue is
    /// stuck/interrupted; an item found `sending` after a restart is delivered if a hook of its
    /// generation reported it after its paste, stuck/interrupted otherwise. Evidence from
    /// another generation never settles these items.
    fn generation_over(&mut self, session: &str, over: impl Fn(u32) -> bool, why: &str, out: &mut Out<'_>) {
        let ended = |i: &Item| i.generation.is_none_or(&over);
        if self.flight(session).is_some_and(|f| over(f.generation)) {
            self.interrupt(session, &format!("{why} during delivery"), out);
        }
        let q = self.session(session);
        let (gone, kept): (Vec<Item>, Vec<Item>) = q.owed.drain(..).partition(|i| ended(i));
        q.owed = kept.into();
        for mut item in gone.into_iter().filter(|i| i.queued_by_agent) {
            item.stuck = Some(StuckClass::Interrupted);
            item.hook_owed = None;
            let id = item.id.clone();
            let q = self.session(session);
            let pos = q.items.partition_point(|i| *i < id);
            q.items.insert(pos, id.clone());
            self.items.insert(id.clone(), item);
            let detail = format!(
                "interrupted: {why} while this prompt may still have waited in the agent's own queue: neither its UserPromptSubmit hook nor the agent staying idle after it showed that the agent took it"
            );
            self.transition(&id, State::Stuck, "stuck", detail, out);
        }
        // Items found `sending` at start-up (not in flight) of a generation that is over.
        let in_flight: Vec<ItemId> = self.flight(session).map(|f| f.items.clone()).unwrap_or_default();
        let Some(q) = self.sessions.get(session) else { return };
        let mut sending: Vec<ItemId> = q
            .items
            .iter()
            .filter(|id| !in_flight.contains(id))
            .filter(|id| self.items.get(*id).is_some_and(|i| i.state == State::Sending && ended(i)))
            .cloned()
            .collect();
        while let Some(first) = sending.first().cloned() {
            let group = self.digest_group(&first);
            sending.retain(|id| !group.contains(id));
            let Some(item) = self.items.get(&first) else { continue };
            let generation = item.generation;
            let prompt = self.prompt_of(&group);
            let heard = generation.and_then(|g| self.hook_for_recovered(session, &group, &prompt, g));
            self.settle_found_sending(&group, heard, why, out);
        }
    }

    /// Items left submit-stuck in an earlier generation's input box: that box is gone with its
    /// agent, so an Enter has nothing to submit, and whether someone submitted the text before
    /// the agent ended is unknown. They are interrupted (a force pastes them again).
    fn boxes_gone(&mut self, session: &str, generation: u32, out: &mut Out<'_>) {
        let Some(q) = self.sessions.get(session) else { return };
        let left: Vec<ItemId> = q
            .items
            .iter()
            .filter(|id| {
                self.items.get(*id).is_some_and(|i| {
                    i.stuck == Some(StuckClass::SubmitStuck) && i.generation.is_some_and(|g| g != generation)
                })
            })
            .cloned()
            .collect();
        for id in left {
            let why = format!(
                "the session restarted (generation {generation} runs now) while the text sat unsubmitted in the old input box; whether someone submitted it there is unknown"
            );
            self.stick(&id, StuckClass::Interrupted, why, out);
        }
    }
}
