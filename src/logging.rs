//! Per-process log files for background processes (masters, later the daemon).
//!
//! Owns a `tracing` writer that appends synchronously to one file and rotates it by rename when
//! it passes a size cap. Invariants: there are never more than two files (`X` and `X.1`), so a
//! log uses at most twice the cap; a line is written with one `write` call and never split
//! across files; no thread is started (the master is single-threaded by design).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
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
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .ok()?;
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
    let subscriber = tracing_subscriber::fmt()
        .with_writer(CappedLog::new(path, LOG_CAP))
        .with_ansi(false)
        .with_target(false)
        .with_max_level(level)
        .finish();
    let _ = tracing::subscriber::set_global_default(subscriber);
}

#[cfg(test)]
mod tests {
    use super::*;

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
