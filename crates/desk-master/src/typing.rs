//! Keys an operator has asked to type, waiting their turn: the pace they are typed at
//! ([`KEY_GAP`]) and what each one still expects of the screen ([`PendingKey`]). Shared by
//! `desk keys` (`super::operator`) and answers to dialogs (`super::answer`), which queue into
//! the master's one queue of pending keys. Owns no behaviour; depends on no other module of
//! this crate, so the event loop can hold the queue without importing the modules that fill it.

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
