//! A key, as the dashboard understands it: the loop (`super::run`) translates the terminal's
//! events into these, and the model ([`super::model`]) and the answer panel
//! ([`super::answer`](mod@super::answer)) act on them. No I/O.

/// A key, as the dashboard understands it (the loop translates the terminal's events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Up,
    Down,
    Enter,
    /// Alt-Enter or Ctrl-Enter (where the terminal tells them apart): send the prompt.
    SendEnter,
    Esc,
    Backspace,
    CtrlC,
    /// Scroll the preview back (into the session's history) by a page, or forward by one.
    PageUp,
    PageDown,
    /// Shift-Up / Shift-Down: scroll the preview one line back / forward.
    LineUp,
    LineDown,
    /// The preview's oldest line, or back to live.
    Home,
    End,
}
