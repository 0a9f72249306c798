//! Putting the user's terminal back when an attach ends.
//!
//! Owns the epilogue: the bytes written to the user's terminal after the last byte of the
//! session, so that the shell the user returns to gets a clean terminal whatever the session
//! left switched on (alternate screen, hidden cursor, mouse reporting, bracketed paste, focus
//! events, keypad and cursor-key modes, a scroll region, origin mode, insert mode, line-drawing
//! character sets, a cursor shape, the kitty keyboard stack), with the session's last screen
//! left visible and the cursor on a fresh line below it.
//!
//! Invariant: the epilogue does not depend on the session's state, so the attach client parses
//! nothing (DESIGN.md §2.5: one parse per output byte, in the master). That is possible because
//! the attach client's first frame from the session is a keyframe, which starts with RIS: from
//! then on everything in the user's terminal belongs to the session, so every mode can simply be
//! reset, and the alternate screen left, without knowing whether the session set them. Leaving
//! the alternate screen with `CSI ? 1049 l` when the terminal is on the main screen restores the
//! saved cursor (xterm's DECRC: position, pen, character sets, origin mode, autowrap); everything
//! that restores is reset right after it.

/// Bytes that return the user's terminal to a sane state after detaching. `session_drawn`:
/// something from the session was written to the terminal (it got the keyframe); without it the
/// terminal is still the user's own, and its screen buffer is left alone.
pub fn epilogue(session_drawn: bool) -> Vec<u8> {
    let mut out = Vec::new();
    if session_drawn {
        // Back to the main screen (a no-op there, apart from DECRC, which the resets below undo).
        out.extend_from_slice(b"\x1b[?1049l");
    }
    out.extend_from_slice(
        // Pen, scroll region, origin mode, autowrap, cursor shown, cursor keys, keypad.
        b"\x1b[0m\x1b[r\x1b[?6l\x1b[?7h\x1b[?25h\x1b[?1l\x1b>\
          \x1b[4l\x1b[0 q\x1b(B\x1b)B\x0f\
          \x1b[?2004l\x1b[?1004l\
          \x1b[?9l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l\x1b[<99u\
          \x1b[999;1H\r\n",
    );
    // (Line 2 above: insert mode off, default cursor shape, G0 and G1 ASCII and G0 invoked.
    // Line 3: bracketed paste, focus events. Line 4: mouse tracking and encodings, the kitty
    // keyboard stack; then the last row and a fresh line.)
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use desk_term::screen::{Modes, MouseEncoding, MouseMode, Screen};
    use proptest::prelude::*;

    /// The terminal a user has after power-on, as the screen model reports it.
    fn clean() -> Modes {
        Screen::new(80, 24).modes()
    }

    /// Plays `session` into a terminal (the screen model standing in for the user's), the way
    /// an attach does: keyframe first (it starts with RIS), then the raw output, then the
    /// epilogue. Returns the terminal.
    fn detach_after(session: &[u8]) -> Screen {
        let mut user = Screen::new(80, 24);
        // The user's shell had been busy before the attach.
        user.process(b"\x1b(0\x1b7\x1b[?1049h\x1b[31;1m\x1b[?2004h");
        user.process(&Screen::new(80, 24).render_keyframe());
        user.process(session);
        user.process(&epilogue(true));
        user
    }

    fn assert_clean(user: &mut Screen) {
        let modes = user.modes();
        assert_eq!(modes, clean(), "modes left behind");
        assert_eq!(user.scroll_region(), (0, 23));
        assert_eq!(user.pen(), Screen::new(1, 1).pen(), "pen left behind");
        let (row, _) = user.cursor();
        assert_eq!(row, 23, "the cursor is on the last row, below the session's screen");
        // The character sets are ASCII again: `q` is a `q`, not a line.
        user.process(b"q");
        assert_eq!(user.cell(23, 0).map(|c| c.text), Some("q".to_string()));
    }

    #[test]
    fn detaching_from_a_full_screen_program_leaves_the_alternate_screen() {
        let mut user = detach_after(b"\x1b[10;1Hmain text\x1b[?1049h\x1b[?2004h\x1b[?1000h\x1b[?25lIN-ALT");
        assert!(!user.modes().alternate_screen);
        // The fresh line at the bottom scrolled everything up by one row.
        assert_eq!(user.text_rows()[8], "main text", "the main screen is back: {:?}", user.text_rows());
        assert_clean(&mut user);
    }

    #[test]
    fn detaching_from_the_main_screen_keeps_the_sessions_last_screen() {
        let mut user = detach_after(b"\x1b[10;1Hline one\r\nline two\x1b[5;20r\x1b[?6h\x1b[4h");
        // The fresh line at the bottom scrolled everything up by one row.
        assert_eq!(user.text_rows()[8..10], ["line one", "line two"]);
        assert_clean(&mut user);
    }

    /// The old epilogue knew only the alternate screen: a session that left G0 on DEC line
    /// drawing (as curses programs do while drawing boxes) left the user's shell printing lines
    /// for letters, and one in insert mode left it inserting.
    #[test]
    fn line_drawing_and_insert_mode_are_undone() {
        let mut user = detach_after(b"\x1b(0lqqk\x1b[4h");
        assert_clean(&mut user);
        let mut user = detach_after(b"\x1b(0\x1b7\x1b(B\x1b[?1049h\x1b[?1049l");
        assert_clean(&mut user);
    }

    fn fragment() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            "[a-z ]{0,12}".prop_map(|s| s.into_bytes()),
            Just(b"\r\n".to_vec()),
            Just(b"\x1b[?1049h".to_vec()),
            Just(b"\x1b[?1049l".to_vec()),
            Just(b"\x1b[?47h".to_vec()),
            Just(b"\x1b[?1047h".to_vec()),
            Just(b"\x1b[?1047l".to_vec()),
            Just(b"\x1b7".to_vec()),
            Just(b"\x1b8".to_vec()),
            Just(b"\x1b(0".to_vec()),
            Just(b"\x1b)0\x0e".to_vec()),
            Just(b"\x1b[3;10r".to_vec()),
            Just(b"\x1b[?6h".to_vec()),
            Just(b"\x1b[?7l".to_vec()),
            Just(b"\x1b[4h".to_vec()),
            Just(b"\x1b[1;4;7;38;5;200m".to_vec()),
            Just(b"\x1b[?25l".to_vec()),
            Just(b"\x1b[?1h\x1b=".to_vec()),
            Just(b"\x1b[?2004h".to_vec()),
            Just(b"\x1b[?1004h".to_vec()),
            Just(b"\x1b[?1000;1006h".to_vec()),
            Just(b"\x1b[?1003h\x1b[?1015h".to_vec()),
            Just(b"\x1b[?9h\x1b[?1005h".to_vec()),
            Just(b"\x1b[5 q".to_vec()),
            Just(b"\x1b[10;5H".to_vec()),
            Just(b"\x1bc".to_vec()),
        ]
    }

    proptest! {
        /// Whatever the session switched on, in whatever order, the user's terminal is clean
        /// after the epilogue: no state of the session needs to be known.
        #[test]
        fn any_session_leaves_a_clean_terminal(parts in proptest::collection::vec(fragment(), 0..30)) {
            let mut user = detach_after(&parts.concat());
            prop_assert!(!user.modes().alternate_screen);
            assert_clean(&mut user);
            prop_assert_eq!(user.modes().mouse, MouseMode::None);
            prop_assert_eq!(user.modes().mouse_encoding, MouseEncoding::Default);
        }
    }
}
