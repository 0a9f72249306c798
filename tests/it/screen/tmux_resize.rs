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
use std::process::{Command, Output};

use anyhow::{Context, Result, bail};
use desk::screen::Screen;

/// History lines on both sides: more than any case produces, so tmux's trimming of its
/// history in tenths of the limit never comes into play (the bound is a property test).
const LIMIT: usize = 2000;

struct Tmux<'a> {
    socket: &'a Path,
}

impl Tmux<'_> {
    fn run(&self, args: &[&str]) -> Result<Output> {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(self.socket)
            .args(args)
            .output()
            .with_context(|| format!("tmux {args:?}"))?;
        if !out.status.success() {
            bail!("tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(out)
    }

    /// Every line tmux holds (history, then the screen), trailing blanks trimmed, and the
    /// cursor as `(row, col)`.
    fn capture(&self) -> Result<(Vec<String>, (u16, u16))> {
        let text = String::from_utf8(self.run(&["capture-pane", "-p", "-S", "-"])?.stdout)?;
        let lines = text.lines().map(|l| l.trim_end().to_string()).collect();
        let cursor = String::from_utf8(self.run(&["display", "-p", "#{cursor_y} #{cursor_x}"])?.stdout)?;
        let (y, x) = cursor.trim().split_once(' ').context("cursor")?;
        Ok((lines, (y.parse()?, x.parse()?)))
    }
}

/// Asserts equality, naming the first line that differs.
fn same(ours: (Vec<String>, (u16, u16)), tmux: (Vec<String>, (u16, u16)), what: &str) {
    let first = ours.0.iter().zip(&tmux.0).position(|(a, b)| a != b);
    assert!(
        ours == tmux,
        "{what}: first difference at line {first:?} of {} (ours) / {} (tmux); cursor {:?} / {:?}\nours: {:?}\ntmux: {:?}",
        ours.0.len(),
        tmux.0.len(),
        ours.1,
        tmux.1,
        ours.0.iter().skip(first.unwrap_or(0)).take(6).collect::<Vec<_>>(),
        tmux.0.iter().skip(first.unwrap_or(0)).take(6).collect::<Vec<_>>(),
    );
}

fn ours(screen: &Screen) -> (Vec<String>, (u16, u16)) {
    let mut lines = screen.history_text(usize::MAX);
    lines.extend(screen.text_rows());
    (lines, screen.cursor())
}

fn check_case(dir: &Path, name: &str, cols: u16, rows: u16, stream: &[u8], resizes: &[u16]) -> Result<()> {
    let file = dir.join(format!("{name}.bytes"));
    std::fs::write(&file, stream)?;
    let conf = dir.join("tmux.conf");
    std::fs::write(&conf, format!("set -g status off\nset -g history-limit {LIMIT}\n"))?;
    let socket = dir.join(format!("{name}.sock"));
    let tmux = Tmux { socket: &socket };
    let channel = format!("desk-{name}");
    let script = format!(
        "stty raw -echo; cat '{}'; tmux -S '{}' wait-for -S {channel}; exec sleep 600",
        file.display(),
        socket.display()
    );
    let (c, r) = (cols.to_string(), rows.to_string());
    let conf_s = conf.to_string_lossy().into_owned();
    let out = Command::new("tmux")
        .arg("-S")
        .arg(&socket)
        .args(["-f", &conf_s, "new-session", "-d", "-x", &c, "-y", &r, &script])
        .output()?;
    if !out.status.success() {
        bail!("tmux new-session: {}", String::from_utf8_lossy(&out.stderr));
    }
    let result = (|| -> Result<()> {
        // (tmux 3.3a exits when `window-size manual` is in its config file.)
        tmux.run(&["set", "-g", "window-size", "manual"])?;
        tmux.run(&["wait-for", &channel])?;
        let mut screen = Screen::with_history(cols, rows, LIMIT);
        screen.process(stream);
        same(ours(&screen), tmux.capture()?, &format!("{name}: after the stream at {cols}x{rows}"));
        for &to in resizes {
            tmux.run(&["resize-window", "-x", &c, "-y", &to.to_string()])?;
            screen.resize(cols, to);
            same(ours(&screen), tmux.capture()?, &format!("{name}: after resizing to {cols}x{to}"));
        }
        Ok(())
    })();
    // The server is ours alone (its own socket): stop it whatever happened.
    let _ = tmux.run(&["kill-server"]);
    result
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
