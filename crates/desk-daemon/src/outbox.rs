//! The engine's actions waiting to be carried out, and the group commit they wait on.
//!
//! Owns the order in which the daemon carries out what the delivery engine asks within one turn
//! of its loop. Every engine call's actions form a batch, in order. Persists are not written one
//! by one: each is staged into the next group commit ([`crate::store::Store::persist_group`]:
//! every record written, then all synced at once), and the actions after it wait for that
//! commit. Invariants: an action other than a persist is carried out only once every persist
//! before it (in the engine's order, whatever its batch) is durable — a claim before its paste,
//! a paste's record before anything after it —, and such actions keep their order; a persist may
//! join a group ahead of another batch's waiting actions (that is the sharing), but never ahead
//! of an action of its own batch, nor ahead of a waiting write or screen read of its own
//! session; a batch whose persist failed loses the rest of its actions (they depended on it).
//! No I/O here: the daemon writes, syncs and acts.

use std::collections::{HashMap, HashSet, VecDeque};

use desk_core::delivery::engine::{Action, Token};
use desk_core::delivery::item::{Item, ItemId, State};

/// One persist staged into the next group commit.
#[derive(Debug)]
pub(crate) struct Staged {
    pub(crate) batch: u64,
    pub(crate) token: Token,
    pub(crate) item: Item,
    pub(crate) from: State,
    /// The group entry (one per item) that makes it durable.
    pub(crate) entry: usize,
}

/// What the daemon does next. (Returned once per action and consumed at once, never stored:
/// the size of its one large variant costs nothing.)
#[derive(Debug, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Next {
    /// Carry out this action now.
    Perform(Action),
    /// Everything that can go is staged: commit the group, then ask again.
    Commit,
    /// Nothing is waiting.
    Idle,
}

#[derive(Debug, Default)]
pub(crate) struct Outbox {
    queue: VecDeque<(u64, Action)>,
    next_batch: u64,
    staged: Vec<Staged>,
    /// The group's entries: each item once, with its newest record and the state it has on
    /// disk (the `from` of its first persist in the group).
    entries: Vec<(Item, State)>,
    entry_of: HashMap<ItemId, usize>,
}

impl Outbox {
    /// One engine call's actions, as one batch.
    pub(crate) fn push(&mut self, actions: Vec<Action>) {
        let batch = self.next_batch;
        self.next_batch += 1;
        self.queue.extend(actions.into_iter().map(|a| (batch, a)));
    }

    pub(crate) fn has_staged(&self) -> bool {
        !self.staged.is_empty()
    }

    /// Stage every persist that may join the group now, and return the action at the head if
    /// it may be carried out (nothing staged is before it).
    pub(crate) fn next(&mut self) -> Next {
        let mut blocked: HashSet<u64> = HashSet::new();
        let mut waiting_sessions: HashSet<String> = HashSet::new();
        let mut i = 0;
        while i < self.queue.len() {
            let (batch, action) = &self.queue[i];
            let batch = *batch;
            if blocked.contains(&batch) {
                i += 1;
                continue;
            }
            match action {
                Action::Persist { item, .. } => {
                    if waiting_sessions.contains(&item.session) {
                        blocked.insert(batch);
                        i += 1;
                        continue;
                    }
                    if let Some((batch, Action::Persist { token, item, from })) = self.queue.remove(i) {
                        self.stage(batch, token, item, from);
                    }
                }
                other => {
                    if i == 0 && self.staged.is_empty() {
                        return self.queue.pop_front().map_or(Next::Idle, |(_, a)| Next::Perform(a));
                    }
                    if let Action::Write { session, .. } | Action::Snapshot { session, .. } = other {
                        waiting_sessions.insert(session.clone());
                    }
                    blocked.insert(batch);
                    i += 1;
                }
            }
        }
        if self.staged.is_empty() { Next::Idle } else { Next::Commit }
    }

    fn stage(&mut self, batch: u64, token: Token, item: Item, from: State) {
        let entry = match self.entry_of.get(&item.id) {
            Some(&e) => {
                self.entries[e].0 = item.clone();
                e
            }
            None => {
                self.entries.push((item.clone(), from));
                self.entry_of.insert(item.id.clone(), self.entries.len() - 1);
                self.entries.len() - 1
            }
        };
        self.staged.push(Staged { batch, token, item, from, entry });
    }

    /// The group to commit (each item once) and the persists it carries, in the engine's order.
    pub(crate) fn take_group(&mut self) -> (Vec<(Item, State)>, Vec<Staged>) {
        self.entry_of.clear();
        (std::mem::take(&mut self.entries), std::mem::take(&mut self.staged))
    }

    /// Forget the rest of a batch whose persist failed.
    pub(crate) fn drop_batch(&mut self, batch: u64) {
        self.queue.retain(|(b, _)| *b != batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use desk_core::delivery::engine::WriteKind;
    use desk_core::delivery::item::When;

    fn item(n: u64, session: &str, state: State) -> Item {
        let mut it = Item::new(ItemId::sequential(n), session.into(), Some(1), "hi".into(), When::Now, "t".into(), 1);
        it.state = state;
        it
    }

    fn persist(token: Token, it: Item, from: State) -> Action {
        Action::Persist { token, item: it, from }
    }

    fn write(token: Token, session: &str) -> Action {
        Action::Write { token, session: session.into(), generation: 1, kind: WriteKind::Paste, bytes: vec![] }
    }

    #[test]
    fn persists_of_many_batches_share_one_group_and_nothing_after_them_goes_first() {
        let mut out = Outbox::default();
        // Two sessions, each: claim, then paste.
        out.push(vec![persist(1, item(1, "a", State::Sending), State::Queued), write(2, "a")]);
        out.push(vec![persist(3, item(2, "b", State::Sending), State::Queued), write(4, "b")]);
        assert_eq!(out.next(), Next::Commit, "both claims staged, no paste before them");
        let (entries, staged) = out.take_group();
        assert_eq!(entries.len(), 2);
        assert_eq!(staged.iter().map(|s| s.token).collect::<Vec<_>>(), [1, 3]);
        assert!(matches!(out.next(), Next::Perform(Action::Write { token: 2, .. })));
        assert!(matches!(out.next(), Next::Perform(Action::Write { token: 4, .. })));
        assert_eq!(out.next(), Next::Idle);
    }

    #[test]
    fn a_persist_never_goes_ahead_of_its_own_batch_nor_of_a_waiting_write_to_its_session() {
        let mut out = Outbox::default();
        out.push(vec![persist(1, item(1, "a", State::Sending), State::Queued), write(2, "a")]);
        // Same session, later: must not be durable before the paste above is written.
        out.push(vec![persist(3, item(1, "a", State::Stuck), State::Sending)]);
        // Another session's batch: a write, then a persist after it.
        out.push(vec![write(4, "b"), persist(5, item(2, "b", State::Delivered), State::Sending)]);
        assert_eq!(out.next(), Next::Commit);
        let (entries, staged) = out.take_group();
        assert_eq!(staged.iter().map(|s| s.token).collect::<Vec<_>>(), [1]);
        assert_eq!(entries[0].0.state, State::Sending);
        assert!(matches!(out.next(), Next::Perform(Action::Write { token: 2, .. })));
        // Now session a's later persist may go; b's write comes after it in order, so waits.
        assert_eq!(out.next(), Next::Commit);
        let (_, staged) = out.take_group();
        assert_eq!(staged.iter().map(|s| s.token).collect::<Vec<_>>(), [3]);
        assert!(matches!(out.next(), Next::Perform(Action::Write { token: 4, .. })));
        assert_eq!(out.next(), Next::Commit);
        assert_eq!(out.take_group().1[0].token, 5);
        assert_eq!(out.next(), Next::Idle);
    }

    #[test]
    fn an_item_persisted_twice_in_a_group_is_one_entry_from_its_state_on_disk() {
        let mut out = Outbox::default();
        let mut it = item(1, "a", State::Sending);
        out.push(vec![persist(1, it.clone(), State::Queued)]);
        it.note(2, "pasted", "x");
        out.push(vec![persist(2, it.clone(), State::Sending)]);
        assert_eq!(out.next(), Next::Commit);
        let (entries, staged) = out.take_group();
        assert_eq!(entries, vec![(it, State::Queued)]);
        assert_eq!(staged.iter().map(|s| s.entry).collect::<Vec<_>>(), [0, 0]);
    }

    #[test]
    fn a_failed_batch_loses_the_rest_of_its_actions_only() {
        let mut out = Outbox::default();
        out.push(vec![persist(1, item(1, "a", State::Sending), State::Queued), write(2, "a")]);
        out.push(vec![persist(3, item(2, "b", State::Sending), State::Queued), write(4, "b")]);
        assert_eq!(out.next(), Next::Commit);
        let (_, staged) = out.take_group();
        out.drop_batch(staged[0].batch);
        assert!(matches!(out.next(), Next::Perform(Action::Write { token: 4, .. })));
        assert_eq!(out.next(), Next::Idle);
    }
}
