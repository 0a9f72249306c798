//! Tracks whether the vte parser is in its ground state, byte by byte.
//!
//! vte does not expose its state, but two things need it: the fast path (which may only bypass
//! vte while vte would be in ground state) and the master, which may only take a keyframe where
//! no escape sequence is half-parsed (`Screen::at_ground_state`). This module follows the same
//! transitions as vte 0.15's `Parser::advance` (Paul Williams' DEC parser, 7-bit, plus
//! BEL-terminated OSC), tracking only the state, not parameters. UTF-8 in ground state is not
//! tracked: `Screen` decodes it itself and hands vte ground state only in front of ESC or DEL,
//! so vte never buffers a partial character. Invariant: for the bytes `Screen` hands vte,
//! `is_ground()` is true exactly when vte is in `State::Ground`. A property test checks that
//! against vte itself (`tests` below and `tests/it/screen/props.rs`).

/// The parser states that matter for "is vte in ground?".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    #[default]
    Ground,
    Escape,
    EscapeIntermediate,
    CsiEntry,
    CsiParam,
    CsiIntermediate,
    CsiIgnore,
    DcsEntry,
    DcsParam,
    DcsIntermediate,
    DcsIgnore,
    DcsPassthrough,
    OscString,
    SosPmApcString,
}

/// Shadow of the vte parser state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct GroundTracker {
    state: State,
}

/// C0 controls that vte executes inside escape sequences (everything but CAN, SUB and ESC).
fn is_executed(b: u8) -> bool {
    matches!(b, 0x00..=0x17 | 0x19 | 0x1C..=0x1F)
}

impl GroundTracker {
    /// True when no escape sequence is partially parsed.
    pub(super) fn is_ground(&self) -> bool {
        self.state == State::Ground
    }

    /// Feeds one byte.
    #[inline]
    pub(super) fn advance(&mut self, b: u8) {
        self.state = Self::next(self.state, b);
    }

    /// "Anywhere" transitions: CAN/SUB abort to ground, ESC starts a new sequence.
    fn anywhere(state: State, b: u8) -> State {
        match b {
            0x18 | 0x1A => State::Ground,
            0x1B => State::Escape,
            _ => state,
        }
    }

    #[inline]
    fn next(state: State, b: u8) -> State {
        use State::*;
        match state {
            // Only ESC leaves ground. (A UTF-8 lead byte would make vte buffer a partial
            // character, but `Screen` never hands vte one in ground.)
            Ground => {
                if b == 0x1B {
                    Escape
                } else {
                    Ground
                }
            }
            Escape => match b {
                _ if is_executed(b) => Escape,
                0x20..=0x2F => EscapeIntermediate,
                0x50 => DcsEntry,
                0x58 | 0x5E | 0x5F => SosPmApcString,
                0x5B => CsiEntry,
                0x5D => OscString,
                0x30..=0x7E => Ground,
                0x18 | 0x1A => Ground,
                _ => Escape, // ESC, DEL and 8-bit bytes are ignored here
            },
            EscapeIntermediate => match b {
                _ if is_executed(b) => state,
                0x20..=0x2F | 0x7F => state,
                0x30..=0x7E => Ground,
                _ => Self::anywhere(state, b),
            },
            CsiEntry => match b {
                _ if is_executed(b) => state,
                0x20..=0x2F => CsiIntermediate,
                0x30..=0x3F => CsiParam,
                0x40..=0x7E => Ground,
                _ => Self::anywhere(state, b),
            },
            CsiParam => match b {
                _ if is_executed(b) => state,
                0x20..=0x2F => CsiIntermediate,
                0x30..=0x3B | 0x7F => state,
                0x3C..=0x3F => CsiIgnore,
                0x40..=0x7E => Ground,
                _ => Self::anywhere(state, b),
            },
            CsiIntermediate => match b {
                _ if is_executed(b) => state,
                0x20..=0x2F => state,
                0x30..=0x3F => CsiIgnore,
                0x40..=0x7E => Ground,
                _ => Self::anywhere(state, b),
            },
            CsiIgnore => match b {
                _ if is_executed(b) => state,
                0x20..=0x3F | 0x7F => state,
                0x40..=0x7E => Ground,
                _ => Self::anywhere(state, b),
            },
            DcsEntry => match b {
                _ if is_executed(b) => state,
                0x20..=0x2F => DcsIntermediate,
                0x30..=0x3F => DcsParam,
                0x40..=0x7E => DcsPassthrough,
                0x7F => state,
                _ => Self::anywhere(state, b),
            },
            DcsParam => match b {
                _ if is_executed(b) => state,
                0x20..=0x2F => DcsIntermediate,
                0x30..=0x3B | 0x7F => state,
                0x3C..=0x3F => DcsIgnore,
                0x40..=0x7E => DcsPassthrough,
                _ => Self::anywhere(state, b),
            },
            DcsIntermediate => match b {
                _ if is_executed(b) => state,
                0x20..=0x2F | 0x7F => state,
                0x30..=0x3F => DcsIgnore,
                0x40..=0x7E => DcsPassthrough,
                _ => Self::anywhere(state, b),
            },
            DcsIgnore | SosPmApcString => Self::anywhere(state, b),
            DcsPassthrough => match b {
                0x18 | 0x1A | 0x9C => Ground,
                0x1B => Escape,
                _ => state,
            },
            OscString => match b {
                0x07 | 0x18 | 0x1A => Ground,
                0x1B => Escape,
                _ => state,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(bytes: &[u8]) -> bool {
        let mut t = GroundTracker::default();
        for &b in bytes {
            t.advance(b);
        }
        t.is_ground()
    }

    #[test]
    fn complete_sequences_return_to_ground() {
        assert!(after(b"\x1b[1;31mhello"));
        assert!(after(b"\x1b]0;title\x07"));
        assert!(after(b"\x1b]0;title\x1b\\"));
        assert!(after(b"\x1b(0"));
        assert!(after("中".as_bytes()));
        assert!(after(b"\x1bP1$r\x1b\\"));
        assert!(after(b"\x1b[?1;2<m"));
    }

    #[test]
    fn partial_sequences_are_not_ground() {
        assert!(!after(b"\x1b"));
        assert!(!after(b"\x1b["));
        assert!(!after(b"\x1b[12;"));
        assert!(!after(b"\x1b]0;tit"));
        assert!(!after(b"\x1b("));
        assert!(!after(b"\x1bP1$r"));
    }

    #[test]
    fn esc_after_non_ascii_starts_a_sequence() {
        assert!(after(b"\xe4\xb8A"));
        assert!(after(b"\xff"));
        assert!(!after(b"\xe4\xb8\x1b"));
    }
}
