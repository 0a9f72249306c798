//! Keys an operator has asked to type, waiting their turn: the pace they are typed at
//! ([`KEY_GAP`]), what each one still expects of the screen ([`PendingKey`]), and the master's
//! one queue of them ([`KeyQueue`]). Shared by `desk keys` (`super::operator`) and answers to
//! dialogs (`super::answer`), which queue into it. Invariant: keys are typed in the order they
//! were queued, a later request's after an earlier one's. Depends on no other module of this
//! crate, so the event loop can hold the queue without importing the modules that fill it.

use std::collections::VecDeque;
use std::time::Duration;

/// 100 ms between two keys of a `desk keys` request, as a person types them. Keys in one write
/// reach the program in one read, and programs handle such a burst in ways a typist never
/// triggers: Claude Code 2.1.197 took `Down Down Enter` in one read as Enter on the option
/// highlighted *before* the arrows (approving a command the operator meant to refuse, 6 times
/// in 6, docs/agents-observed.md §8.2), and Codex treats an Enter within ~20 ms of typed text
/// as a newline (a paste burst). It also keeps an `Esc` from merging with the next key into an
/// Alt chord.
pub(super) const KEY_GAP: Duration = Duration::from_millis(100);

/// A key waiting its turn to be typed.
pub(super) struct PendingKey {
    pub key: desk_term::keys::Key,
    /// For an answer's key: the fingerprint its dialog must still have (`super::answer`).
    pub expect: Option<String>,
    /// How many reads in a row found the dialog changed.
    pub misses: u8,
}

/// The keys waiting their turn, oldest first.
#[derive(Default)]
pub(super) struct KeyQueue {
    keys: VecDeque<PendingKey>,
}

impl KeyQueue {
    pub(super) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub(super) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Queue `keys` after those already waiting.
    pub(super) fn queue(&mut self, keys: impl IntoIterator<Item = PendingKey>) {
        self.keys.extend(keys);
    }

    /// The key whose turn it is.
    pub(super) fn next(&mut self) -> Option<PendingKey> {
        self.keys.pop_front()
    }

    /// Give the key [`KeyQueue::next`] took its turn back: it is to be typed later.
    pub(super) fn put_back(&mut self, key: PendingKey) {
        self.keys.push_front(key);
    }

    /// Drop the waiting keys of the answer to the dialog `seen` at the front; how many.
    pub(super) fn drop_answer(&mut self, seen: &str) -> usize {
        let mut dropped = 0;
        while self.keys.front().is_some_and(|k| k.expect.as_deref() == Some(seen)) {
            self.keys.pop_front();
            dropped += 1;
        }
        dropped
    }

    /// Drop every waiting key.
    pub(super) fn clear(&mut self) {
        self.keys.clear();
    }
}
