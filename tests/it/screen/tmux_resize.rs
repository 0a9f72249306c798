//! The resize policy checked against tmux as an independent emulator.
//!
//! Each case of the corpus writes a byte stream to a `W`x`H` terminal and then changes the
//! number of rows several times. tmux runs the stream in a pane (`cat` of a file, no status
//! line, manual window size) and is resized with `resize-window`; our model gets the same
//! stream and resizes. After every step, tmux's history plus screen (`capture-pane -p -S -`)
//! and cursor must equal ours (`history_text` + `text_rows`, `cursor`). The width stays fixed:
//! tmux reflows lines when the width changes and our model cuts them (docs/screen-model.md).
//! A machine without tmux skips the corpus, saying so.

use std::path::Path;

use anyhow::Result;
use desk_term::screen::Screen;

use super::tmux::{Tmux, ours, same};

/// History lines on both sides: more than any case produces, so tmux's trimming of its
/// history in tenths of the limit never comes into play (the bound is a property test).
const LIMIT: usize = 2000;

fn check_case(dir: &Path, name: &str, cols: u16, rows: u16, stream: &[u8], resizes: &[u16]) -> Result<()> {
    let tmux = Tmux::play(dir, name, cols, rows, LIMIT, "", stream)?;
    let mut screen = Screen::with_history(cols, rows, LIMIT);
    screen.process(stream);
    same(ours(&screen), tmux.capture()?, &format!("{name}: after the stream at {cols}x{rows}"));
    let c = cols.to_string();
    for &to in resizes {
        tmux.run(&["resize-window", "-x", &c, "-y", &to.to_string()])?;
        screen.resize(cols, to);
        same(ours(&screen), tmux.capture()?, &format!("{name}: after resizing to {cols}x{to}"));
    }
    Ok(())
}

fn numbered(from: usize, to: usize) -> Vec<u8> {
    (from..=to).map(|n| format!("{n}\r\n")).collect::<String>().into_bytes()
}

#[test]
#[cfg_attr(desk_missing_tmux, ignore = "needs tmux")]
fn resizing_rows_matches_tmux_on_the_corpus() -> Result<()> {
    crate::suite::require(crate::suite::Needs::Program("tmux"));
    let dir = tempfile::Builder::new().prefix("desk-tmux-").tempdir()?;
    let long: String = (0..30).map(|i| format!("line {i} {}\r\n", "x".repeat(i * 3))).collect();
    let coloured: String = (0..40).map(|i| format!("\x1b[3{}m{i} coloured\x1b[0m text\r\n", i % 8)).collect();
    // (name, columns, rows, stream, the row counts to resize to in turn)
    type Case = (&'static str, u16, u16, Vec<u8>, Vec<u16>);
    let cases: Vec<Case> = vec![
        // The case: 100x30, seq 1 300, then 100x15 and back.
        ("seq300", 100, 30, numbered(1, 300), vec![15, 30, 10, 40]),
        // The cursor near the top: rows below it go first.
        ("cursor_top", 20, 10, b"a\r\nb\r\nc\r\nd\x1b[2;1H".to_vec(), vec![4, 2, 10, 12]),
        // Few lines: growing pulls back what history has, then blank rows.
        ("short", 20, 6, numbered(1, 8), vec![3, 12, 2, 20]),
        // Output without a trailing newline, the cursor mid-row.
        ("prompt", 30, 8, [numbered(1, 20), b"$ partial".to_vec()].concat(), vec![5, 9, 3, 8]),
        // Lines that wrap at the width.
        ("wrapped", 25, 8, long.into_bytes(), vec![5, 12, 4, 20]),
        // Colour does not change the text of the history.
        ("coloured", 40, 10, coloured.into_bytes(), vec![4, 15, 10]),
    ];
    for (name, cols, rows, stream, resizes) in cases {
        check_case(dir.path(), name, cols, rows, &stream, &resizes)?;
    }
    Ok(())
}
