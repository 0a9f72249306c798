//! The session log: the text of every line that scrolled off a session's main screen, on disk.
//!
//! Owns the log's two files in the session's state directory (`screen.log`, and `screen.log.1`
//! after a rotation), appending (the master) and reading back (`desk log`). Invariants: the
//! two files together hold at most `cap` bytes (a file is rotated when appending would take it
//! past half the cap, replacing the older one); every line the master appends ends in `\n`, so
//! only a crash mid-write leaves a last line without one, and the next master to open the log
//! ends it first (truncated-tail recovery), and readers take the text as UTF-8 lossily, so a
//! character cut by such a crash reads as U+FFFD. Lines wait in memory until the master
//! flushes them (at most [`FLUSH_AFTER`] later, before it answers a snapshot request, and at
//! exit); while they wait, no more than `cap` bytes of the newest whole lines are kept, so the
//! files end up as they would have had every line been written at once, without writing the
//! lines rotation would have thrown away. The log is kept after the session exits and removed
//! by `desk rm` with the rest of the session's state. Both files are 0600 whatever the umask,
//! like every file desk writes. May not depend on the master's event loop
//! or the wire.

use anyhow::{Context, Result};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The log's cap when `desk new --log-cap` does not say: 8 MiB keeps ~80,000 lines of typical
/// output (many times the in-memory history) for a few seconds of disk writes over a session's
/// life, and stays small beside the disk of any machine running agents.
pub const DEFAULT_LOG_CAP: u64 = 8 * 1024 * 1024;

/// Smallest non-zero cap: below 4 KiB a single long line could not fit in half of it.
pub const MIN_LOG_CAP: u64 = 4096;

/// How long scrolled-off lines may wait in memory before the master writes them. A reader
/// sees them within that (`desk log` asks the master for its screen first, which writes them;
/// `--follow` polls every 200 ms anyway); a flood that scrolls more than the cap off within it
/// writes only the cap's newest lines, not every byte that rotation would then discard: with
/// the 8 MiB default, a 50 MB `cat` writes ~16 MiB instead of 50 MB, and the master's share of
/// the flood's CPU drops by a sixth (docs/benchmarks.md, section 1).
pub const FLUSH_AFTER: Duration = Duration::from_millis(500);

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
    /// Whole lines not yet written, oldest first; at most `cap` bytes (older ones are dropped,
    /// as the files could not have kept them either).
    pending: VecDeque<u8>,
}

impl LogWriter {
    /// Opens (or creates) the log in `state_dir` for appending with a total cap of `cap`
    /// bytes. A last line left without its `\n` by a crash is ended first.
    pub fn open(state_dir: &Path, cap: u64) -> Result<LogWriter> {
        let path = current(state_dir);
        let mut file = crate::fsutil::private_options()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        // A log an older master created under a lax umask becomes private too: it holds
        // everything the session printed.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("cannot make {} private", path.display()))?;
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
        Ok(LogWriter { dir: state_dir.to_path_buf(), file, len, cap: cap.max(MIN_LOG_CAP), pending: VecDeque::new() })
    }

    /// Takes `text` (whole lines of UTF-8) to be written by the next [`LogWriter::flush`].
    /// Returns whether nothing was waiting before: the caller then arms the flush,
    /// [`FLUSH_AFTER`] from now.
    pub fn push(&mut self, text: &[u8]) -> bool {
        if text.is_empty() {
            return false;
        }
        let first = self.pending.is_empty();
        self.pending.extend(text);
        let excess = self.pending.len().saturating_sub(self.cap as usize);
        if excess > 0 {
            // Keep the newest lines that fit: drop through the end of the line the excess ends in.
            let cut = next_line_start(&self.pending, excess);
            self.pending.drain(..cut);
        }
        first
    }

    /// The cap it was opened with (at least the smallest cap a log has).
    pub fn cap(&self) -> u64 {
        self.cap
    }

    /// Whether lines are waiting to be written.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Writes the waiting lines. When they are more than half the cap, the older part goes to
    /// the rotated file and the newest half-cap's worth to the current one, as line-by-line
    /// appends would have left them.
    pub fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut pending = std::mem::take(&mut self.pending);
        let bytes = pending.make_contiguous();
        let half = (self.cap / 2) as usize;
        let result = if bytes.len() > half {
            let split = next_line_start_in(bytes, bytes.len() - half);
            let (older, newer) = bytes.split_at(split);
            self.append(older).and_then(|()| self.append(newer))
        } else {
            self.append(bytes)
        };
        // Keep the allocation for the next burst; [`LogWriter::release_memory`] gives it back.
        pending.clear();
        self.pending = pending;
        result
    }

    /// Gives back the memory of the waiting lines once they are written (an idle session).
    pub fn release_memory(&mut self) {
        if self.pending.is_empty() {
            self.pending = VecDeque::new();
        }
    }

    /// Appends `bytes` (whole lines) to the files, rotating first when they would take the
    /// current file past half the cap. More than half the cap keeps only its end.
    fn append(&mut self, mut bytes: &[u8]) -> Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let half = self.cap / 2;
        if bytes.len() as u64 > half {
            // Only the newest lines fit; start at a line boundary.
            bytes = &bytes[next_line_start_in(bytes, bytes.len() - half as usize)..];
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
        self.file = crate::fsutil::private_options()
            .create(true)
            .append(true)
            .open(&cur)
            .with_context(|| format!("cannot open {}", cur.display()))?;
        self.len = 0;
        Ok(())
    }

    /// Writes what is waiting and makes the log durable (at exit).
    pub fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.file.sync_all().context("cannot fsync the session log")
    }
}

/// The index just past the first `\n` at or after `from` in `bytes` (its length if none).
fn next_line_start(bytes: &VecDeque<u8>, from: usize) -> usize {
    let (a, b) = bytes.as_slices();
    if from < a.len() {
        if let Some(i) = memchr::memchr(b'\n', &a[from..]) {
            return from + i + 1;
        }
        return a.len() + next_line_start_in(b, 0);
    }
    a.len() + next_line_start_in(b, from - a.len())
}

/// [`next_line_start`] in one slice.
fn next_line_start_in(bytes: &[u8], from: usize) -> usize {
    memchr::memchr(b'\n', &bytes[from..]).map_or(bytes.len(), |i| from + i + 1)
}

/// Everything the log holds, oldest first (the rotated file, then the current one), as text;
/// and how many bytes of the current file it read (where a follower goes on).
pub fn read_all(state_dir: &Path) -> Result<(String, u64)> {
    let mut bytes = Vec::new();
    let mut from_current = 0;
    for path in [rotated(state_dir), current(state_dir)] {
        match File::open(&path) {
            Ok(mut f) => {
                let n = f.read_to_end(&mut bytes).with_context(|| format!("cannot read {}", path.display()))?;
                from_current = n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => from_current = 0,
            Err(e) => return Err(e).with_context(|| format!("cannot open {}", path.display())),
        }
    }
    Ok((String::from_utf8_lossy(&bytes).into_owned(), from_current))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symbolic_link_planted_at_the_log_is_refused_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, b"not desk's\n").unwrap();
        std::os::unix::fs::symlink(&elsewhere, current(dir.path())).unwrap();
        assert!(LogWriter::open(dir.path(), MIN_LOG_CAP).is_err());
        assert_eq!(std::fs::read(&elsewhere).unwrap(), b"not desk's\n");
    }

    #[test]
    fn appends_rotate_at_half_the_cap_and_the_total_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogWriter::open(dir.path(), MIN_LOG_CAP).unwrap();
        for i in 0..2000 {
            log.push(format!("line {i:04}\n").as_bytes());
            log.flush().unwrap();
        }
        let size = |p: PathBuf| std::fs::metadata(p).map_or(0, |m| m.len());
        assert!(size(current(dir.path())) + size(rotated(dir.path())) <= MIN_LOG_CAP);
        let text = read_all(dir.path()).unwrap().0;
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
        assert_eq!(read_all(dir.path()).unwrap().0, "whole line\npartial \u{fffd}");
        let mut log = LogWriter::open(dir.path(), DEFAULT_LOG_CAP).unwrap();
        log.push(b"next\n");
        log.sync().unwrap();
        cut.extend_from_slice(b"\nnext\n");
        assert_eq!(std::fs::read(current(dir.path())).unwrap(), cut);
        assert_eq!(read_all(dir.path()).unwrap().0, "whole line\npartial \u{fffd}\nnext\n");
    }

    #[test]
    fn text_longer_than_the_cap_keeps_its_newest_lines() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogWriter::open(dir.path(), MIN_LOG_CAP).unwrap();
        let text: String = (0..1000).map(|i| format!("l{i:03}\n")).collect();
        log.push(text.as_bytes());
        log.flush().unwrap();
        let read = read_all(dir.path()).unwrap().0;
        assert!(read.len() as u64 <= MIN_LOG_CAP && read.len() as u64 > MIN_LOG_CAP - 10, "{}", read.len());
        assert!(read.ends_with("l999\n") && read.starts_with('l'), "{read}");
    }

    #[test]
    fn lines_waiting_for_a_flush_keep_the_newest_cap_and_land_across_both_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogWriter::open(dir.path(), MIN_LOG_CAP).unwrap();
        log.push(b"before the flood\n");
        log.flush().unwrap();
        assert!(log.push(b"line 0000\n"), "the first waiting line arms the flush");
        for i in 1..2000 {
            assert!(!log.push(format!("line {i:04}\n").as_bytes()), "later ones find it armed");
            assert!(log.pending.len() as u64 <= MIN_LOG_CAP, "at most the cap waits");
        }
        assert!(read_all(dir.path()).unwrap().0.starts_with("before"), "nothing written before the flush");
        log.flush().unwrap();
        assert!(!log.has_pending());
        let size = |p: PathBuf| std::fs::metadata(p).map_or(0, |m| m.len());
        let (cur, old) = (size(current(dir.path())), size(rotated(dir.path())));
        assert!(cur <= MIN_LOG_CAP / 2 && old <= MIN_LOG_CAP / 2, "{cur} {old}");
        // As line-by-line appends would have left it: the newest lines, in order, none lost
        // between the files, filling all but a line's worth of each half of the cap.
        let text = read_all(dir.path()).unwrap().0;
        assert!(text.len() as u64 > MIN_LOG_CAP - 2 * 10, "{}", text.len());
        let lines: Vec<&str> = text.lines().collect();
        let first: usize = lines[0][5..].parse().unwrap();
        let want: Vec<String> = (first..2000).map(|i| format!("line {i:04}")).collect();
        assert_eq!(lines, want);
        log.release_memory();
        assert_eq!(log.pending.capacity(), 0);
    }

    #[test]
    fn a_line_longer_than_the_cap_waits_as_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogWriter::open(dir.path(), MIN_LOG_CAP).unwrap();
        log.push(b"short\n");
        log.push(format!("{}\n", "x".repeat(2 * MIN_LOG_CAP as usize)).as_bytes());
        assert!(!log.has_pending());
        log.push(b"after\n");
        log.sync().unwrap();
        assert_eq!(read_all(dir.path()).unwrap().0, "after\n");
    }
}
