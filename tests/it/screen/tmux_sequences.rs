//! Sequences where the screen model once differed from a terminal, checked against tmux as the
//! independent emulator (alacritty's source agrees; docs/screen-model.md gives the evidence):
//! DECSCA with the selective erases DECSED and DECSEL, EL while a wrap is pending, and DECCOLM.
//! Each case plays a stream into tmux and into the model and requires the same history, screen
//! and cursor.

use anyhow::Result;
use desk_term::screen::Screen;

use super::tmux::{Tmux, ours, same};

/// History lines on both sides, more than any case produces.
const LIMIT: usize = 100;

/// tmux 3.2 and later move the screen into the history when a program clears all of it
/// (`scroll-on-clear`, on by default), and DECCOLM clears it that way; alacritty, xterm and
/// the model do not, so the option is off for the comparison.
const CONF: &str = "set -g scroll-on-clear off";

/// Plays `stream` into tmux and a fresh model of the same size, requires the two to agree,
/// and returns the model for the case's own checks. Its tests need tmux (shown as ignored
/// where it is missing, failing where CI is set: see `crate::suite`).
fn agrees_with_tmux(name: &str, cols: u16, rows: u16, stream: &[u8]) -> Result<Screen> {
    crate::suite::require(crate::suite::Needs::Program("tmux"));
    let dir = tempfile::Builder::new().prefix("desk-tmux-").tempdir()?;
    let tmux = Tmux::play(dir.path(), name, cols, rows, LIMIT, CONF, stream)?;
    let mut screen = Screen::with_history(cols, rows, LIMIT);
    screen.process(stream);
    same(ours(&screen), tmux.capture()?, name);
    Ok(screen)
}

#[test]
#[cfg_attr(desk_missing_tmux, ignore = "needs tmux")]
fn protected_characters_survive_a_selective_erase_as_in_tmux() -> Result<()> {
    // `CSI 1 " q` protects what follows, `CSI 0 " q` and `CSI 2 " q` end it; DECSED and DECSEL
    // in each mode, on rows holding protected and unprotected text.
    let stream = concat!(
        "A\x1b[1\"qB\x1b[2\"qC\x1b[0\"qD\x1b[?2J\r\n",
        "plain \x1b[1\"qkept\x1b[0\"q plain\x1b[?2K\r\n",
        "left \x1b[1\"qkept\x1b[0\"q right\x1b[1;3H\x1b[?K\x1b[2;3H\x1b[?1K\r\n",
        "\x1b[?0J\x1b[?1J\x1b[4;1Hend",
    );
    let screen = agrees_with_tmux("selective_erase", 30, 6, stream.as_bytes())?;
    let rows = screen.text_rows();
    assert_eq!(rows[0], "ABCD", "the protected B, and everything else, survive");
    assert!(rows[1].contains("kept") && rows[2].contains("kept"), "{rows:?}");
    Ok(())
}

#[test]
#[cfg_attr(desk_missing_tmux, ignore = "needs tmux")]
fn erase_in_line_with_a_wrap_pending_matches_tmux() -> Result<()> {
    // Each row is filled to its last column (the wrap is pending), then erased with EL 0, 1 or
    // 2, then a character follows: it wraps, and EL 0 left the row as it was.
    let stream = concat!(
        "abcdefghij\x1b[KX\r\n",
        "abcdefghij\x1b[0KY\r\n",
        "abcdefghij\x1b[1KZ\r\n",
        "abcdefghij\x1b[44m\x1b[2K\x1b[0mW\r\n",
        "abcdefghij\x1b[Kend",
    );
    let screen = agrees_with_tmux("erase_line_pending_wrap", 10, 4, stream.as_bytes())?;
    let history = screen.history_text(LIMIT);
    assert_eq!(history[..2], ["abcdefghij", "X"], "EL 0 erased nothing and kept the wrap");
    Ok(())
}

#[test]
#[cfg_attr(desk_missing_tmux, ignore = "needs tmux")]
fn column_mode_clears_the_screen_and_homes_the_cursor_as_in_tmux() -> Result<()> {
    // DECSET and DECRST 3 on the main screen (the history stays as it was), and on the
    // alternate screen (the main screen comes back untouched).
    let stream = concat!(
        "1\r\n2\r\n3\r\n4\r\n5\r\nhalf a line\x1b[?3hX\r\n",
        "after\x1b[44m\x1b[?3l\x1b[0mY\r\n",
        "main\r\n\x1b[?1049halt\r\nscreen\x1b[?3hZ\x1b[?1049lback",
    );
    let screen = agrees_with_tmux("column_mode", 12, 4, stream.as_bytes())?;
    assert_eq!(screen.size(), (12, 4), "the session's size does not change");
    assert_eq!(screen.history_text(LIMIT), ["1", "2"], "a clear puts nothing into the history");
    Ok(())
}
