//! `desk log`: the session log, then the current (or last) screen.

#[allow(unused_imports)]
use super::*;

/// Lines `desk log` prints without `--since-start`: a few screens more than a terminal's
/// usual scrollback view, enough for "what just happened", short enough to read.
const LOG_TAIL_LINES: usize = 1000;

/// How often `desk log --follow` looks for new lines: well under the time a reader notices,
/// a negligible cost for a process that only stats a file.
const LOG_FOLLOW_POLL: Duration = Duration::from_millis(200);

/// `desk log`: the session log's text (newest `LOG_TAIL_LINES` lines, or all it keeps with
/// `since_start`), then the current (or last) screen; with `follow`, new lines as they scroll
/// off until the session ends, then its last screen.
pub(in crate::cli) fn log(name: &SessionName, follow: bool, since_start: bool) -> Result<i32> {
    let paths = paths()?;
    let files = paths.session(name);
    let state = paths.session_state(name);
    if !files.meta.exists() && !files.exit.exists() && !desk_common::screen_log::current(&state).exists() {
        return Err(fail(ErrorCode::NoSuchSession, desk_common::suggest::unknown_session_in(&paths, name.as_str())));
    }
    // The screen first: a live master writes the lines waiting for the log before it answers,
    // so the files then hold everything that scrolled off above this screen.
    let screen = current_screen(&paths, name)?;
    let (text, read) = desk_common::screen_log::read_all(&state)?;
    let report = LogReport { text, since_start, screen };
    report.render_log()?;
    if follow {
        follow_log(&files, &state, read)?;
    } else {
        report.render_screen()?;
    }
    Ok(0)
}

/// What `desk log` prints (it has no JSON form): the log's text, then the screen.
struct LogReport {
    /// The text the log keeps, oldest first.
    text: String,
    /// Print all of it, not only the newest [`LOG_TAIL_LINES`] lines.
    since_start: bool,
    /// The screen now or as it ended, trailing blank rows dropped (not printed with `--follow`,
    /// whose last screen comes when the session ends).
    screen: Vec<String>,
}

impl LogReport {
    /// The log's lines: all of them, or the newest [`LOG_TAIL_LINES`].
    fn render_log(&self) -> Result<()> {
        use std::io::Write;
        let lines: Vec<&str> = self.text.lines().collect();
        let from = if self.since_start { 0 } else { lines.len().saturating_sub(LOG_TAIL_LINES) };
        let mut out = std::io::stdout().lock();
        for line in &lines[from..] {
            writeln!(out, "{line}")?;
        }
        out.flush()?;
        Ok(())
    }

    /// The screen below the log.
    fn render_screen(&self) -> Result<()> {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        for row in &self.screen {
            writeln!(out, "{row}")?;
        }
        Ok(())
    }
}

/// The session's screen now (live) or as it ended (exit record), trailing blank rows dropped.
fn current_screen(paths: &Paths, name: &SessionName) -> Result<Vec<String>> {
    let files = paths.session(name);
    let mut rows = match session::probe_settled(&files)? {
        Probe::Live(stream) => match screen_now(paths, name, stream)? {
            ScreenNow::Live(snapshot) => snapshot.screen.lines,
            ScreenNow::Ended(exit) => exit.last_screen.unwrap_or_default(),
        },
        Probe::Absent | Probe::Stale => session::read_exit(&files)?.and_then(|e| e.last_screen).unwrap_or_default(),
    };
    while rows.last().is_some_and(|l| l.trim().is_empty()) {
        rows.pop();
    }
    Ok(rows)
}

/// Prints what is appended to the log (across a rotation) after the first `offset` bytes of
/// its current file until the session is no longer live, then the last screen.
fn follow_log(files: &desk_common::paths::SessionPaths, state: &std::path::Path, mut offset: u64) -> Result<()> {
    use std::io::Write;
    use std::io::{Read, Seek, SeekFrom};
    let current = desk_common::screen_log::current(state);
    let mut out = std::io::stdout();
    loop {
        let live = matches!(session::probe_settled(files)?, Probe::Live(_));
        let len = std::fs::metadata(&current).map_or(0, |m| m.len());
        if len < offset {
            // Rotated: the rest of the old file first.
            if let Ok(mut f) = std::fs::File::open(desk_common::screen_log::rotated(state)) {
                f.seek(SeekFrom::Start(offset))?;
                std::io::copy(&mut f, &mut out)?;
            }
            offset = 0;
        }
        if len > offset {
            let mut f = std::fs::File::open(&current)?;
            f.seek(SeekFrom::Start(offset))?;
            let mut chunk = Vec::new();
            f.take(len - offset).read_to_end(&mut chunk)?;
            out.write_all(String::from_utf8_lossy(&chunk).as_bytes())?;
            out.flush()?;
            offset = len;
        }
        if !live {
            let rows = session::read_exit(files)?.and_then(|e| e.last_screen).unwrap_or_default();
            for row in rows {
                writeln!(out, "{row}")?;
            }
            return Ok(());
        }
        std::thread::sleep(LOG_FOLLOW_POLL);
    }
}
