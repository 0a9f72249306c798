//! `desk peek`: a session's screen (and history) now, or as it ended.

#[allow(unused_imports)]
use super::*;

/// `desk peek`; `history`: how many history lines to print above the screen (`None`: none).
pub(in crate::cli) fn peek(name: &SessionName, json: bool, history: Option<u32>) -> Result<i32> {
    let paths = paths()?;
    let files = paths.session(name);
    let stream = match session::probe_settled(&files)? {
        Probe::Live(stream) => stream,
        Probe::Absent | Probe::Stale => match session::read_exit(&files)? {
            Some(exit) => return PeekReport::ended(name, exit, history)?.render(json),
            None if files.meta.exists() => {
                return Err(fail(ErrorCode::NotRunning, format!("session {name} is not running")));
            }
            None => {
                return Err(fail(
                    ErrorCode::NoSuchSession,
                    desk_common::suggest::unknown_session_in(&paths, name.as_str()),
                ));
            }
        },
    };
    let Some(lines) = history else {
        let report = match screen_now(&paths, name, stream)? {
            ScreenNow::Live(snapshot) => PeekReport::Live { name, snapshot, history: None },
            ScreenNow::Ended(exit) => PeekReport::ended(name, exit, None)?,
        };
        return report.render(json);
    };
    let mut conn = Connection::open(stream, Role::Query, 0, 0).map_err(|e| ended(&paths, name, e))?;
    // The history comes a page at a time and goes to stdout as it comes: the master holds one
    // page per request, and so does this process, however long the history is.
    let (snapshot, read) = HistoryRead::start(&mut conn, lines).map_err(|e| ended(&paths, name, e))?;
    PeekReport::Live { name, snapshot: Box::new(snapshot), history: Some(read) }.render(json)
}

/// What `desk peek` shows: a running session's screen (and the history still to be read from
/// its master, a page at a time while it is written), or the screen an exited session left.
enum PeekReport<'a, 'c> {
    Live {
        name: &'a SessionName,
        snapshot: Box<desk_wire::SnapshotReply>,
        history: Option<HistoryRead<'c>>,
    },
    Ended {
        name: &'a SessionName,
        exit: ExitRecord,
        /// Its last screen's rows.
        rows: Vec<String>,
        /// How many lines of its history were asked for.
        history: Option<u32>,
    },
}

impl<'a> PeekReport<'a, '_> {
    /// An exited session's report; one whose last screen was not recorded has nothing to show.
    fn ended(name: &'a SessionName, exit: ExitRecord, history: Option<u32>) -> Result<Self> {
        let Some(rows) = exit.last_screen.clone() else {
            let why = desk_common::signals::describe_exit(exit.status);
            return Err(fail(ErrorCode::NotRunning, format!("session {name} {why}; its last screen was not recorded")));
        };
        Ok(PeekReport::Ended { name, exit, rows, history })
    }

    /// Once as text or once as JSON.
    fn render(self, json: bool) -> Result<i32> {
        match self {
            PeekReport::Live { name, snapshot, mut history } => print_peek(name, json, &snapshot, history.as_mut()),
            PeekReport::Ended { name, exit, rows, history } => print_exited(name, &exit, &rows, json, history),
        }
    }
}

/// Prints what `desk peek` shows: `snapshot`'s screen and, when asked, the history `read` reads
/// (above the screen in text; `history` in JSON), with what could not be shown of it as notes
/// (stderr in text).
fn print_peek(
    name: &SessionName,
    json: bool,
    snapshot: &desk_wire::SnapshotReply,
    read: Option<&mut HistoryRead<'_>>,
) -> Result<i32> {
    let read = read.map(std::cell::RefCell::new);
    let notes = || read.as_ref().map(|r| r.borrow().notes().to_vec()).unwrap_or_default();
    if json {
        // The snapshot as the wire carries it, with the session's name, and the state shaped
        // as everywhere else on the command line; the history streamed into its place.
        let mut data = serde_json::to_value(snapshot)?;
        if let Some(map) = data.as_object_mut() {
            map.insert("name".into(), name.as_str().into());
            map.insert("state".into(), snapshot.state.as_ref().map(output::state_json).transpose()?.into());
            for key in ["history", "history_start", "history_first", "history_end"] {
                map.remove(key);
            }
            if read.is_some() {
                map.insert("history".into(), serde_json::Value::Null);
            }
        }
        output::print_ok_streamed("screen", PeekData { data, history: read.as_ref() }, notes)?;
    } else {
        use std::io::Write;
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        let mut history_lines = 0usize;
        if let Some(read) = &read {
            read.borrow_mut().for_each(|row| {
                history_lines += 1;
                Ok(writeln!(out, "{}", row.text)?)
            })?;
        }
        if history_lines > 0 {
            // Where the history ends and the screen begins.
            writeln!(out, "{}", screen_separator("the screen", snapshot.screen.cols, snapshot.screen.rows))?;
        }
        let mut lines = snapshot.screen.lines.clone();
        while lines.last().is_some_and(|l| l.trim().is_empty()) {
            lines.pop();
        }
        for line in lines {
            writeln!(out, "{line}")?;
        }
        out.flush()?;
        for note in notes() {
            eprintln!("desk: warning: {note}");
        }
    }
    Ok(0)
}

/// `desk peek --json`'s `data`: the snapshot's keys in order, the `history` key's rows read from
/// the session while they are written.
struct PeekData<'a, 'c> {
    data: serde_json::Value,
    history: Option<&'a std::cell::RefCell<&'a mut HistoryRead<'c>>>,
}

impl Serialize for PeekData<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        struct Rows<'a, 'c>(&'a std::cell::RefCell<&'a mut HistoryRead<'c>>);
        impl Serialize for Rows<'_, '_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                let mut seq = s.serialize_seq(None)?;
                let mut read = self.0.borrow_mut();
                while let Some(rows) = read.next_page() {
                    for row in &rows {
                        seq.serialize_element(row)?;
                    }
                }
                seq.end()
            }
        }
        let Some(map) = self.data.as_object() else { return self.data.serialize(s) };
        let mut out = s.serialize_map(Some(map.len()))?;
        for (key, value) in map {
            match self.history {
                Some(read) if key == "history" => out.serialize_entry(key, &Rows(read))?,
                _ => out.serialize_entry(key, value)?,
            }
        }
        out.end()
    }
}

/// `desk peek` on an exited session: the screen its child left (`rows`), under a line saying
/// how it ended (JSON: the exit record, whose `last_screen` holds the rows).
fn print_exited(
    name: &SessionName,
    exit: &ExitRecord,
    rows: &[String],
    json: bool,
    history: Option<u32>,
) -> Result<i32> {
    if json {
        // The live answer's shape where it applies (`name`, `lines`), and how it ended.
        let record = ExitRecord { last_screen: None, last_history: None, ..exit.clone() };
        let mut data = serde_json::json!({ "name": name.as_str(), "lines": rows, "exit": record });
        if let (Some(n), Some(map)) = (history, data.as_object_mut()) {
            map.insert("history".into(), exit.history_tail(n).into());
        }
        output::print_ok("last-screen", data, &[])?;
    } else {
        println!("{}", exit.headline(name.as_str(), desk_common::clock::now_ms()));
        let lines = history.map(|n| exit.history_tail(n)).unwrap_or_default();
        for line in &lines {
            println!("{line}");
        }
        if !lines.is_empty() {
            let (cols, rows_n) = (exit.cols.unwrap_or(0), exit.rows.unwrap_or(rows.len() as u16));
            println!("{}", screen_separator("its last screen", cols, rows_n));
        }
        for row in rows {
            println!("{row}");
        }
    }
    Ok(0)
}

/// The line `desk peek --history` prints between the history and the screen, as wide as the
/// screen: `── the screen (40x10) ───…` (history above it, the screen below).
fn screen_separator(what: &str, cols: u16, rows: u16) -> String {
    let head = if cols > 0 { format!("── {what} ({cols}x{rows}) ") } else { format!("── {what} ") };
    let width = usize::from(cols).max(head.chars().count() + 2);
    format!("{head}{}", "─".repeat(width - head.chars().count()))
}
