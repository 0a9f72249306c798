//! Per-process log files for background processes (masters, later the daemon).
//!
//! Owns a `tracing` writer that appends synchronously to one file and rotates it by rename when
//! it passes a size cap. Invariants: there are never more than two files (`X` and `X.1`), so a
//! log uses at most twice the cap; a line is written with one `write` call and never split
//! across files; no thread is started (the master is single-threaded by design).

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// 1 MiB per file: a session logs a few lines per client connection and per error, so this
/// holds days of history while bounding the disk a misbehaving client can make us use.
pub const LOG_CAP: u64 = 1 << 20;

struct State {
    path: PathBuf,
    file: Option<File>,
    size: u64,
    cap: u64,
}

impl State {
    fn open(path: &Path) -> Option<(File, u64)> {
        let file = crate::fsutil::private_options().create(true).append(true).open(path).ok()?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        Some((file, size))
    }

    fn write_line(&mut self, line: &[u8]) {
        if self.size + line.len() as u64 > self.cap && self.size > 0 {
            let mut rotated = self.path.clone().into_os_string();
            rotated.push(".1");
            let _ = std::fs::rename(&self.path, rotated);
            self.file = None;
        }
        if self.file.is_none()
            && let Some((file, size)) = Self::open(&self.path)
        {
            self.file = Some(file);
            self.size = size;
        }
        if let Some(file) = &mut self.file
            && file.write_all(line).is_ok()
        {
            self.size += line.len() as u64;
        }
    }
}

/// A size-capped, rotating, synchronous log file.
pub struct CappedLog {
    state: Mutex<State>,
}

impl CappedLog {
    pub fn new(path: &Path, cap: u64) -> CappedLog {
        let (file, size) = match State::open(path) {
            Some((file, size)) => (Some(file), size),
            None => (None, 0),
        };
        CappedLog { state: Mutex::new(State { path: path.to_path_buf(), file, size, cap }) }
    }
}

/// One event's bytes, written out in a single call when dropped.
pub struct LineWriter<'a> {
    log: &'a CappedLog,
    buf: Vec<u8>,
}

impl Write for LineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter<'_> {
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        if let Ok(mut state) = self.log.state.lock() {
            state.write_line(&self.buf);
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for CappedLog {
    type Writer = LineWriter<'a>;
    fn make_writer(&'a self) -> Self::Writer {
        LineWriter { log: self, buf: Vec::new() }
    }
}

/// Log a panic (message and location) before the process dies: background processes have no
/// terminal to print it on.
pub fn log_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        tracing::error!("panic: {info}");
        previous(info);
    }));
}

/// Send this process's `tracing` output to `path`. Level from `DESK_LOG` (default `info`).
pub fn init_file(path: &Path) {
    let level = match std::env::var("DESK_LOG").as_deref() {
        Ok("trace") => tracing::Level::TRACE,
        Ok("debug") => tracing::Level::DEBUG,
        Ok("warn") => tracing::Level::WARN,
        Ok("error") => tracing::Level::ERROR,
        _ => tracing::Level::INFO,
    };
    let subscriber = FileSubscriber { log: CappedLog::new(path, LOG_CAP), max: level };
    let _ = tracing::subscriber::set_global_default(subscriber);
}

/// A `tracing` subscriber that writes each event as one line to a [`CappedLog`], laid out as
/// tracing-subscriber's `fmt()` lays it out without colours and targets (RFC 3339 time in
/// microseconds, the level, the message, then `key=value` fields; control characters in the
/// message escaped), which the tests check line for line. Not `fmt()` itself: that builds a
/// span registry whose slab takes 32 KiB in every process from the start, an eighth of an idle
/// master's whole budget, and desk records no spans (spans are accepted and ignored here).
struct FileSubscriber {
    log: CappedLog,
    max: tracing::Level,
}

impl tracing::Subscriber for FileSubscriber {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= self.max
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::from_level(self.max))
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let micros = now.as_micros();
        let stamp = desk_core::time::iso8601((micros / 1000) as u64);
        let mut line = String::with_capacity(128);
        // "....mmmZ" from iso8601 becomes "....mmmuuuZ".
        line.push_str(stamp.strip_suffix('Z').unwrap_or(&stamp));
        let _ = write!(line, "{:03}Z {:>5} ", micros % 1000, event.metadata().level().as_str());
        event.record(&mut LineFields { line: &mut line, empty: true });
        line.push('\n');
        if let Ok(mut state) = self.log.state.lock() {
            state.write_line(line.as_bytes());
        }
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

/// Writes an event's fields the way tracing-subscriber's default field formatter does.
struct LineFields<'a> {
    line: &'a mut String,
    empty: bool,
}

impl tracing::field::Visit for LineFields<'_> {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"))
        } else {
            self.record_debug(field, &value)
        }
    }

    fn record_error(&mut self, field: &tracing::field::Field, value: &(dyn std::error::Error + 'static)) {
        match value.source() {
            Some(source) => {
                let mut sources = Vec::new();
                let mut next = Some(source);
                while let Some(error) = next {
                    sources.push(Escaped(error.to_string()));
                    next = error.source();
                }
                let text = format!("{} {}.sources={sources:?}", Escaped(value.to_string()), field.name());
                self.record_debug(field, &format_args!("{text}"))
            }
            None => self.record_debug(field, &format_args!("{}", Escaped(value.to_string()))),
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if !self.empty {
            self.line.push(' ');
        }
        self.empty = false;
        let _ = match field.name() {
            "message" => write!(self.line, "{}", Escaped(format!("{value:?}"))),
            name => write!(self.line, "{}={value:?}", name.strip_prefix("r#").unwrap_or(name)),
        };
    }
}

/// Text with the control characters a terminal would act on written as escapes, so that a
/// log shown with `cat` cannot drive the terminal.
struct Escaped(String);

impl std::fmt::Display for Escaped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for ch in self.0.chars() {
            match ch {
                '\x1b' => f.write_str("\\x1b")?,
                '\x07' => f.write_str("\\x07")?,
                '\x08' => f.write_str("\\x08")?,
                '\x0c' => f.write_str("\\x0c")?,
                '\x7f' => f.write_str("\\x7f")?,
                c if ('\u{80}'..='\u{9f}').contains(&c) => write!(f, "\\u{{{:x}}}", c as u32)?,
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

impl std::fmt::Debug for Escaped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines our subscriber writes equal tracing-subscriber's `fmt()` lines (what the logs
    /// held before), but for the time.
    #[test]
    fn log_lines_read_as_tracing_subscribers_fmt_lines() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("outer failed")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        fn events() {
            let command = vec!["sleep".to_string(), "100000".to_string()];
            tracing::info!(pid = 12091u32, generation = 1, command = ?command, cols = 120, "session started");
            tracing::warn!("PTY read failed: {}", "EIO \x1b[31mred\x07 \u{9b}");
            tracing::warn!(reason = "a str", shown = %"displayed", flag = true, ratio = 0.5, neg = -3, "plain");
            tracing::error!(r#type = "raw", "raw identifier");
            let io = std::io::Error::other("inner cause");
            tracing::error!(error = &Outer(io) as &(dyn std::error::Error + 'static), "with sources");
            tracing::debug!("filtered out at info");
            tracing::info!(only = 1);
        }
        let tmp = tempfile::tempdir().unwrap();
        let ours = tmp.path().join("ours.log");
        let theirs = tmp.path().join("theirs.log");
        let subscriber = FileSubscriber { log: CappedLog::new(&ours, LOG_CAP), max: tracing::Level::INFO };
        tracing::subscriber::with_default(subscriber, events);
        let reference = tracing_subscriber::fmt()
            .with_writer(CappedLog::new(&theirs, LOG_CAP))
            .with_ansi(false)
            .with_target(false)
            .with_max_level(tracing::Level::INFO)
            .finish();
        tracing::subscriber::with_default(reference, events);
        let read = |p: &Path| std::fs::read_to_string(p).unwrap();
        let (ours, theirs) = (read(&ours), read(&theirs));
        assert_eq!(ours.lines().count(), 6, "{ours}");
        for (a, b) in ours.lines().zip(theirs.lines()) {
            // "2026-12-01T01:08:31.310053Z" is 27 characters.
            assert!(a.len() > 27 && a.as_bytes()[10] == b'T' && a.as_bytes()[26] == b'Z', "{a}");
            assert_eq!(a[27..], b[27..]);
        }
        assert_eq!(ours.lines().count(), theirs.lines().count(), "{ours}\n{theirs}");
    }

    #[test]
    fn log_rotates_by_rename_and_keeps_lines_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s.log");
        let log = CappedLog::new(&path, 100);
        for i in 0..30 {
            let mut w = tracing_subscriber::fmt::MakeWriter::make_writer(&log);
            writeln!(w, "line number {i:04}").unwrap();
        }
        let current = std::fs::read_to_string(&path).unwrap();
        let rotated = std::fs::read_to_string(tmp.path().join("s.log.1")).unwrap();
        assert!(current.len() <= 100 && rotated.len() <= 100);
        assert!(current.ends_with("line number 0029\n"));
        for text in [current, rotated] {
            assert!(text.lines().all(|l| l.starts_with("line number ") && l.len() == 16), "{text}");
        }
    }
}
