//! The terminal modes an attached session has switched on in the user's terminal.
//!
//! Owns a small scan of the output stream (DEC private mode set/reset, keypad mode) so that
//! on the way out the attach client can switch off exactly what the session switched on:
//! leave the alternate screen only if it is active, show the cursor, stop mouse reporting and
//! bracketed paste. Invariant: it never changes the bytes that pass through it.

use vte::{Params, Parser, Perform};

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct OuterModes {
    pub alternate_screen: bool,
}

#[derive(Default)]
struct Track {
    modes: OuterModes,
}

impl Perform for Track {
    fn csi_dispatch(&mut self, params: &Params, intermediates: &[u8], _ignore: bool, action: char) {
        if intermediates != b"?" || !matches!(action, 'h' | 'l') {
            return;
        }
        for param in params.iter() {
            if matches!(param.first(), Some(47 | 1047 | 1049)) {
                self.modes.alternate_screen = action == 'h';
            }
        }
    }

    fn esc_dispatch(&mut self, intermediates: &[u8], _ignore: bool, byte: u8) {
        if intermediates.is_empty() && byte == b'c' {
            self.modes = OuterModes::default();
        }
    }
}

#[derive(Default)]
pub struct ModeTracker {
    parser: Parser,
    track: Track,
}

impl ModeTracker {
    pub fn observe(&mut self, bytes: &[u8]) {
        self.parser.advance(&mut self.track, bytes);
    }

    pub fn modes(&self) -> OuterModes {
        self.track.modes
    }

    /// Bytes that return the user's terminal to a sane state after detaching, leaving the
    /// session's last screen visible and the cursor on a fresh line below it.
    pub fn epilogue(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.track.modes.alternate_screen {
            out.extend_from_slice(b"\x1b[?1049l");
        }
        out.extend_from_slice(
            b"\x1b[0m\x1b[r\x1b[?6l\x1b[?7h\x1b[?25h\x1b[?1l\x1b>\x1b[?2004l\x1b[?1004l\
              \x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l\x1b[<99u\
              \x1b[999;1H\r\n",
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternate_screen_is_tracked_across_splits() {
        let mut t = ModeTracker::default();
        t.observe(b"hello\x1b[?10");
        t.observe(b"49h");
        assert!(t.modes().alternate_screen);
        assert!(t.epilogue().starts_with(b"\x1b[?1049l"));
        t.observe(b"\x1b[?1049l");
        assert!(!t.modes().alternate_screen);
        assert!(!t.epilogue().starts_with(b"\x1b[?1049l"));
    }
}
