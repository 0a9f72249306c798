//! The session log: the text of every line that scrolled off a session's main screen, on disk.
//!
//! Owns the log's two files in the session's state directory (`screen.log`, and `screen.log.1`
//! after a rotation), appending (the master) and reading back (`desk log`). Invariants: the
//! two files together hold at most `cap` bytes (a file is rotated when appending would take it
//! past half the cap, replacing the older one); every line the master appends ends in `\n`, so
//! only a crash mid-write leaves a last line without one, and the next master to open the log
//! ends it first (truncated-tail recovery), and readers take the text as UTF-8 lossily, so a
//! character cut by such a crash reads as U+FFFD. The log is kept after the session exits and
//! removed by `desk rm` with the rest of the session's state. May not depend on the master's
//! event loop or the wire.

use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The log's cap when `desk new --log-cap` does not say: 8 MiB keeps ~80,000 lines of typical
/// output (many times the in-memory history) for a few seconds of disk writes over a session's
/// life, and stays small beside the disk of any machine running agents.
pub const DEFAULT_LOG_CAP: u64 = 8 * 1024 * 1024;

/// Smallest non-zero cap: below 4 KiB a single long line could not fit in half of it.
pub const MIN_LOG_CAP: u64 = 4096;

/// The current file of a session's log.
pub fn current(state_dir: &Path) -> PathBuf {
    state_dir.join("screen.log")
}

/// The rotated (older) file of a session's log.
pub fn rotated(state_dir: &Path) -> PathBuf {
    state_dir.join("screen.log.1")
}

/// The master's side: appends scrolled-off text, rotating at half the cap.
pub struct LogWriter {
    dir: PathBuf,
    file: File,
    len: u64,
    cap: u64,
}

impl LogWriter {
    /// Opens (or creates) the log in `state_dir` for appending with a total cap of `cap`
    /// bytes. A last line left without its `\n` by a crash is ended first.
    pub fn open(state_dir: &Path, cap: u64) -> Result<LogWriter> {
        let path = current(state_dir);
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let mut len = file.metadata().with_context(|| format!("cannot stat {}", path.display()))?.len();
        if len > 0 {
            let mut last = [0u8];
            file.seek(SeekFrom::Start(len - 1))?;
            file.read_exact(&mut last).with_context(|| format!("cannot read {}", path.display()))?;
            if last[0] != b'\n' {
                file.write_all(b"\n").with_context(|| format!("cannot write {}", path.display()))?;
                len += 1;
            }
        }
        Ok(LogWriter { dir: state_dir.to_path_buf(), file, len, cap: cap.max(MIN_LOG_CAP) })
    }

    /// Appends `text` (whole lines), rotating first when it would take the current file past
    /// half the cap. Text longer than half the cap keeps only its end.
    pub fn append(&mut self, text: &str) -> Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        let half = self.cap / 2;
        let mut bytes = text.as_bytes();
        if bytes.len() as u64 > half {
            // Only the newest lines fit; start at a line boundary.
            let from = bytes.len() - half as usize;
            let start = bytes[from..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |i| from + i + 1);
            bytes = &bytes[start..];
        }
        if self.len + bytes.len() as u64 > half {
            self.rotate()?;
        }
        self.file.write_all(bytes).context("cannot write the session log")?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    fn rotate(&mut self) -> Result<()> {
        let (cur, old) = (current(&self.dir), rotated(&self.dir));
        std::fs::rename(&cur, &old).with_context(|| format!("cannot rotate {}", cur.display()))?;
        self.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&cur)
            .with_context(|| format!("cannot open {}", cur.display()))?;
        self.len = 0;
        Ok(())
    }

    /// Makes what was written durable (at exit).
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync_all().context("cannot fsync the session log")
    }
}

/// Everything the log holds, oldest first (the rotated file, then the current one), as text.
pub fn read_all(state_dir: &Path) -> Result<String> {
    let mut bytes = Vec::new();
    for path in [rotated(state_dir), current(state_dir)] {
        match File::open(&path) {
            Ok(mut f) => {
                f.read_to_end(&mut bytes).with_context(|| format!("cannot read {}", path.display()))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot open {}", path.display())),
        }
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_rotate_at_half_the_cap_and_the_total_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogWriter::open(dir.path(), MIN_LOG_CAP).unwrap();
        for i in 0..2000 {
            log.append(&format!("line {i:04}\n")).unwrap();
        }
        let size = |p: PathBuf| std::fs::metadata(p).map_or(0, |m| m.len());
        assert!(size(current(dir.path())) + size(rotated(dir.path())) <= MIN_LOG_CAP);
        let text = read_all(dir.path()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.last(), Some(&"line 1999"));
        // Oldest first, none lost between the two files.
        let first: usize = lines[0][5..].parse().unwrap();
        let want: Vec<String> = (first..2000).map(|i| format!("line {i:04}")).collect();
        assert_eq!(lines, want);
    }

    #[test]
    fn a_truncated_tail_is_ended_before_new_lines_and_reads_lossily() {
        let dir = tempfile::tempdir().unwrap();
        // A crash cut the last line inside a UTF-8 character.
        let mut cut = b"whole line\npartial \xe4\xb8".to_vec();
        std::fs::write(current(dir.path()), &cut).unwrap();
        assert_eq!(read_all(dir.path()).unwrap(), "whole line\npartial \u{fffd}");
        let mut log = LogWriter::open(dir.path(), DEFAULT_LOG_CAP).unwrap();
        log.append("next\n").unwrap();
        log.sync().unwrap();
        cut.extend_from_slice(b"\nnext\n");
        assert_eq!(std::fs::read(current(dir.path())).unwrap(), cut);
        assert_eq!(read_all(dir.path()).unwrap(), "whole line\npartial \u{fffd}\nnext\n");
    }

    #[test]
    fn text_longer_than_half_the_cap_keeps_its_newest_lines() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogWriter::open(dir.path(), MIN_LOG_CAP).unwrap();
        let text: String = (0..1000).map(|i| format!("l{i:03}\n")).collect();
        log.append(&text).unwrap();
        let read = read_all(dir.path()).unwrap();
        assert!(read.len() as u64 <= MIN_LOG_CAP / 2);
        assert!(read.ends_with("l999\n") && read.starts_with('l'), "{read}");
    }
}
