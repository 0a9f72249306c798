//! Prompts delivered on other evidence whose UserPromptSubmit hook is still owed.
//!
//! Owns the per-session list of delivered items whose hook has not come (`hook_owed` on disk),
//! among them those that may still sit in the agent's own queue (`queued_by_agent`): paying
//! them when their hook comes, recording them taken when their agent has stayed idle for
//! [`QUEUE_DRAINED`], and a stuck/interrupted item whose paste is on record delivered by its
//! late hook. Invariants: a hook that pays an owed prompt is never taken as evidence for an
//! identical prompt in flight; the list is bounded ([`RECENT_HOOKS`] that surely reached the
//! agent, [`QUEUED_BY_AGENT_MAX`] that may not have), and one that may sit in the agent's queue
//! is kept until its agent goes; every change to an owed item is persisted.

use crate::delivery::item::{Item, ItemId, State, StuckClass};
use crate::state::Activity;
use crate::state::hooks::PromptSig;

use super::{Action, Engine, HOOK_SKEW_MS, Out, QUEUE_DRAINED, QUEUED_BY_AGENT_MAX, RECENT_HOOKS, typed_at};

impl Engine {
    /// A submission hook that is the late report of a prompt already delivered (one the agent
    /// had queued), not of the one in flight: that prompt is paid — every item of it, a
    /// digest's too — on disk as well. Whether the hook was such a report. Only a hook of the
    /// prompt's own generation, made after its paste, can be its report.
    pub(super) fn pay_owed(
        &mut self,
        session: &str,
        generation: u32,
        sig: &PromptSig,
        at_ms: u64,
        out: &mut Out<'_>,
    ) -> bool {
        let q = self.session(session);
        let theirs = |i: &Item| {
            i.hook_owed.as_deref() == Some(sig.digest.as_str())
                && i.generation.is_none_or(|g| g == generation)
                && typed_at(i).is_none_or(|t| at_ms + HOOK_SKEW_MS >= t)
        };
        let Some(first) = q.owed.iter().position(theirs) else {
            return false;
        };
        let id = q.owed[first].id.clone();
        let digest_with = q.owed[first].digest_with.clone();
        let (paid, kept): (Vec<Item>, Vec<Item>) =
            q.owed.drain(..).partition(|i| i.id == id || digest_with.contains(&i.id));
        q.owed = kept.into();
        for mut item in paid {
            item.hook_owed = None;
            item.queued_by_agent = false;
            let note = "the agent's UserPromptSubmit hook for it came (it had queued it)";
            self.record_delivered(item, "hook", note.into(), out);
        }
        true
    }

    /// A hook for a prompt that was cut off after its paste and left stuck/interrupted (see
    /// [`Engine::await_hook`]): the agent did take it (typically from its own queue, after the
    /// restart that cut the delivery off), so it is delivered — every stuck item of its digest
    /// with it — and a force can no longer send it twice. Only a hook of the item's own
    /// generation, made after its paste, counts.
    pub(super) fn settle_stuck_by_hook(
        &mut self,
        session: &str,
        generation: u32,
        sig: &PromptSig,
        at_ms: u64,
        out: &mut Out<'_>,
    ) {
        let awaits = |i: &Item| {
            i.state == State::Stuck
                && i.stuck == Some(StuckClass::Interrupted)
                && i.hook_owed.as_deref() == Some(sig.digest.as_str())
                && i.generation == Some(generation)
                && typed_at(i).is_some_and(|t| at_ms + HOOK_SKEW_MS >= t)
        };
        let Some(q) = self.sessions.get(session) else { return };
        let Some(first) = q.items.iter().filter_map(|id| self.items.get(id)).find(|i| awaits(i)) else { return };
        let mut ids = vec![first.id.clone()];
        ids.extend(first.digest_with.iter().filter(|d| self.items.get(*d).is_some_and(awaits)).cloned());
        for id in ids {
            if let Some(item) = self.items.get_mut(&id) {
                item.hook_owed = None;
                item.stuck = None;
            }
            let note = "the agent's UserPromptSubmit hook for it came after it was stuck: the agent took it";
            self.transition(&id, State::Delivered, "hook", note.into(), out);
        }
    }

    /// A stuck/interrupted item whose text was typed may still reach the agent (it may sit in
    /// the agent's own queue): its hook, if it comes, settles it ([`Engine::settle_stuck_by_hook`]).
    /// Marks the item as awaiting that hook when its paste is on record; returns `why` with a
    /// word on it for the operator.
    pub(super) fn await_hook(&mut self, id: &ItemId, prompt: &PromptSig, why: &str) -> String {
        let Some(item) = self.items.get_mut(id).filter(|i| typed_at(i).is_some()) else {
            return why.to_string();
        };
        item.hook_owed = Some(prompt.digest.clone());
        format!(
            "{why}; the agent may have taken it (a UserPromptSubmit hook for it, if one comes, settles it delivered)"
        )
    }

    /// Remember a delivered item whose UserPromptSubmit hook is still to come. Past the bound
    /// the oldest that surely reached the agent is forgotten first (its hook is only a
    /// confirmation); one that may still sit in the agent's own queue is kept, to be judged when
    /// its agent goes, unless [`QUEUED_BY_AGENT_MAX`] of them wait.
    pub(super) fn owe(&mut self, item: Item) {
        let q = self.session(&item.session);
        q.owed.push_back(item);
        while q.owed.len() > RECENT_HOOKS {
            let queued = q.owed.iter().filter(|i| i.queued_by_agent).count();
            match q.owed.iter().position(|i| !i.queued_by_agent) {
                _ if queued > QUEUED_BY_AGENT_MAX => q.owed.pop_front(),
                Some(oldest) => q.owed.remove(oldest),
                None => break,
            };
        }
    }

    /// Persist a change to a delivered item kept only among the owed ones (it stays delivered,
    /// with a new note); returns the record as written.
    fn record_delivered(&mut self, item: Item, kind: &str, note: String, out: &mut Out<'_>) -> Option<Item> {
        let id = item.id.clone();
        self.items.insert(id.clone(), item);
        self.transition(&id, State::Delivered, kind, note, out);
        match out.actions.last() {
            Some(Action::Persist { item, .. }) => Some(item.clone()),
            _ => None,
        }
    }

    /// The agent has stayed idle for [`QUEUE_DRAINED`]: its own queue is empty, so every prompt
    /// that may have waited in it and was typed before this idle began was taken. Recorded, so
    /// that an exit later does not count those prompts as lost. (A prompt is never called taken
    /// earlier on the strength of a turn starting: agents go idle for a moment between queued
    /// turns, and which prompt a turn belongs to cannot be seen.)
    pub(super) fn taken_from_queue(&mut self, session: &str, out: &mut Out<'_>) {
        let now_ms = out.now_ms;
        let q = self.session(session);
        let idle_since = q.activity_changed_ms;
        let Some(live) = q.live.as_ref().filter(|l| l.activity == Activity::Idle) else { return };
        let generation = live.generation;
        if now_ms < idle_since + QUEUE_DRAINED.as_millis() as u64 {
            return;
        }
        self.take_from_queue(session, generation, idle_since, out);
    }

    /// The agent of `generation` stayed idle for [`QUEUE_DRAINED`] from `idle_since` on: the
    /// prompts of that generation it may have queued before then were taken. (Another
    /// generation's agent being idle says nothing about them.)
    pub(super) fn take_from_queue(&mut self, session: &str, generation: u32, idle_since: u64, out: &mut Out<'_>) {
        let q = self.session(session);
        let taken: Vec<usize> = (0..q.owed.len())
            .filter(|j| {
                let i = &q.owed[*j];
                i.queued_by_agent && i.state_since_ms <= idle_since && i.generation.is_none_or(|g| g == generation)
            })
            .collect();
        for i in taken {
            let mut item = self.session(session).owed[i].clone();
            item.queued_by_agent = false;
            let note = format!(
                "the agent has been idle for {} s since after it: its own queue is empty, so it took the prompt",
                QUEUE_DRAINED.as_secs()
            );
            if let Some(item) = self.record_delivered(item, "taken", note, out) {
                self.session(session).owed[i] = item;
            }
        }
    }
}
