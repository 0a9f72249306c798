//! tmux as an independent emulator for the screen model's tests: a stream of bytes is played
//! into a pane of a private tmux server (its own socket, no status line, `window-size manual`),
//! and what tmux then holds (history plus screen, and the cursor) is read back to compare with
//! the model. A machine without tmux skips these tests, saying so.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Context, Result, bail};
use desk_term::screen::Screen;

/// Every line and the cursor: `(lines, (row, col))`, trailing blanks of each line trimmed.
pub(super) type Capture = (Vec<String>, (u16, u16));

/// A private tmux server whose one pane has played a stream; killed on drop.
pub(super) struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    /// Starts a server on a socket of its own under `dir`, with `history` lines of history and
    /// the lines of `conf` in its configuration, plays `stream` into its `cols`x`rows` pane
    /// (the pane's terminal raw, so every byte reaches tmux as it is) and returns once tmux has
    /// read all of it.
    pub(super) fn play(
        dir: &Path,
        name: &str,
        cols: u16,
        rows: u16,
        history: usize,
        conf: &str,
        stream: &[u8],
    ) -> Result<Tmux> {
        let file = dir.join(format!("{name}.bytes"));
        std::fs::write(&file, stream)?;
        let conf_file = dir.join(format!("{name}.conf"));
        std::fs::write(&conf_file, format!("set -g status off\nset -g history-limit {history}\n{conf}\n"))?;
        let tmux = Tmux { socket: dir.join(format!("{name}.sock")) };
        let channel = format!("desk-{name}");
        let script = format!(
            "stty raw -echo; cat '{}'; tmux -S '{}' wait-for -S {channel}; exec sleep 600",
            file.display(),
            tmux.socket.display()
        );
        let (c, r) = (cols.to_string(), rows.to_string());
        let conf_s = conf_file.to_string_lossy().into_owned();
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&tmux.socket)
            .args(["-f", &conf_s, "new-session", "-d", "-x", &c, "-y", &r, &script])
            .output()?;
        if !out.status.success() {
            bail!("tmux new-session: {}", String::from_utf8_lossy(&out.stderr));
        }
        // (tmux 3.3a exits when `window-size manual` is in its config file.)
        tmux.run(&["set", "-g", "window-size", "manual"])?;
        tmux.run(&["wait-for", &channel])?;
        Ok(tmux)
    }

    pub(super) fn run(&self, args: &[&str]) -> Result<Output> {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .with_context(|| format!("tmux {args:?}"))?;
        if !out.status.success() {
            bail!("tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(out)
    }

    /// Every line tmux holds (history, then the screen) and the cursor.
    pub(super) fn capture(&self) -> Result<Capture> {
        let text = String::from_utf8(self.run(&["capture-pane", "-p", "-S", "-"])?.stdout)?;
        let lines = text.lines().map(|l| l.trim_end().to_string()).collect();
        let cursor = String::from_utf8(self.run(&["display", "-p", "#{cursor_y} #{cursor_x}"])?.stdout)?;
        let (y, x) = cursor.trim().split_once(' ').context("cursor")?;
        Ok((lines, (y.parse()?, x.parse()?)))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // The server is ours alone (its own socket): stop it whatever happened.
        let _ = self.run(&["kill-server"]);
    }
}

/// The model's side of [`Tmux::capture`]: its history, then its screen, and its cursor.
pub(super) fn ours(screen: &Screen) -> Capture {
    let mut lines = screen.history_text(usize::MAX);
    lines.extend(screen.text_rows());
    (lines, screen.cursor())
}

/// Asserts equality, naming the first line that differs.
pub(super) fn same(ours: Capture, tmux: Capture, what: &str) {
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
