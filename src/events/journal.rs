//! The per-session events journal: JSON lines on disk.
//!
//! Owns `events.jsonl` in a session's state directory: one event per line, appended with a
//! single `write`; when the file would pass its cap it is renamed to `events.jsonl.1`
//! (replacing the previous one) and a new file is started, so the journal never uses more than
//! twice the cap. Invariants: on open, a torn last line (a crash mid-append) is cut off and the
//! file ends on a line boundary; the next sequence number is one past the last one recorded
//! in either file; durable events are fsynced before `append` returns.

use anyhow::{Context, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::Event;

/// 1 MiB per file: several thousand events, hours of a busy agent's titles and state changes;
/// two files bound a session's journal to 2 MiB.
pub const JOURNAL_CAP: u64 = 1 << 20;

pub const FILE_NAME: &str = "events.jsonl";

pub struct Journal {
    path: PathBuf,
    file: File,
    size: u64,
    cap: u64,
    next_seq: u64,
}

fn rotated(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".1");
    PathBuf::from(p)
}

fn open_append(path: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))
}

/// The last sequence number in a journal file's complete lines, if any.
fn last_seq(bytes: &[u8]) -> Option<u64> {
    bytes
        .split(|b| *b == b'\n')
        .rev()
        .filter(|line| !line.is_empty())
        .find_map(|line| serde_json::from_slice::<serde_json::Value>(line).ok()?.get("seq")?.as_u64())
}

impl Journal {
    /// Open (creating) the journal in `dir`, repairing a torn tail.
    pub fn open(dir: &Path, cap: u64) -> Result<Journal> {
        let path = dir.join(FILE_NAME);
        let file = open_append(&path)?;
        let mut bytes = fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let good = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        if good < bytes.len() {
            file.set_len(good as u64).with_context(|| format!("cannot repair {}", path.display()))?;
            file.sync_all().with_context(|| format!("cannot fsync {}", path.display()))?;
            bytes.truncate(good);
        }
        let previous = match fs::read(rotated(&path)) {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", rotated(&path).display())),
        };
        let next_seq = last_seq(&bytes).or_else(|| last_seq(&previous)).map_or(1, |s| s + 1);
        Ok(Journal { path, file, size: good as u64, cap, next_seq })
    }

    /// The sequence number the next event gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Take the next sequence number.
    pub fn allocate_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Append one event as one line; fsync when `durable`.
    pub fn append(&mut self, event: &Event, durable: bool) -> Result<()> {
        let mut line = serde_json::to_vec(event).context("cannot encode an event")?;
        line.push(b'\n');
        if self.size > 0 && self.size + line.len() as u64 > self.cap {
            self.rotate()?;
        }
        self.file.write_all(&line).with_context(|| format!("cannot append to {}", self.path.display()))?;
        self.size += line.len() as u64;
        if durable {
            self.file.sync_data().with_context(|| format!("cannot fsync {}", self.path.display()))?;
        }
        Ok(())
    }

    fn rotate(&mut self) -> Result<()> {
        self.file.sync_all().ok();
        fs::rename(&self.path, rotated(&self.path))
            .with_context(|| format!("cannot rotate {}", self.path.display()))?;
        self.file = open_append(&self.path)?;
        self.size = 0;
        if let Some(dir) = self.path.parent() {
            crate::fsutil::sync_dir(dir)?;
        }
        Ok(())
    }
}

/// Every event still on disk for a session, oldest first. Lines that do not parse (a torn
/// line being written right now) are skipped.
pub fn read_all(dir: &Path) -> Result<Vec<Event>> {
    let path = dir.join(FILE_NAME);
    let mut events = Vec::new();
    for file in [rotated(&path), path] {
        let bytes = match fs::read(&file) {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
        };
        for line in bytes.split(|b| *b == b'\n') {
            if let Ok(event) = serde_json::from_slice::<Event>(line) {
                events.push(event);
            }
        }
    }
    Ok(events)
}

/// Remove a session's journal files.
pub fn remove(dir: &Path) -> Result<()> {
    let path = dir.join(FILE_NAME);
    crate::fsutil::remove_if_exists(&rotated(&path))?;
    crate::fsutil::remove_if_exists(&path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventBody;

    fn event(seq: u64, title: &str) -> Event {
        Event { seq, ts_ms: seq * 10, generation: 1, body: EventBody::Title { title: title.into() } }
    }

    #[test]
    fn sequence_numbers_continue_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(dir.path(), JOURNAL_CAP).unwrap();
        assert_eq!(j.next_seq(), 1);
        for _ in 0..3 {
            let seq = j.allocate_seq();
            j.append(&event(seq, "t"), false).unwrap();
        }
        drop(j);
        let j = Journal::open(dir.path(), JOURNAL_CAP).unwrap();
        assert_eq!(j.next_seq(), 4);
        assert_eq!(read_all(dir.path()).unwrap().len(), 3);
    }

    #[test]
    fn a_torn_last_line_is_cut_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(dir.path(), JOURNAL_CAP).unwrap();
        let seq = j.allocate_seq();
        j.append(&event(seq, "whole"), true).unwrap();
        drop(j);
        let path = dir.path().join(FILE_NAME);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"seq":2,"ts_ms":20,"generation":1,"type":"ti"#).unwrap();
        drop(f);
        let mut j = Journal::open(dir.path(), JOURNAL_CAP).unwrap();
        assert_eq!(j.next_seq(), 2);
        let seq = j.allocate_seq();
        j.append(&event(seq, "after"), true).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        let all = read_all(dir.path()).unwrap();
        assert_eq!(all.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);
    }

    #[test]
    fn rotation_keeps_two_files_and_the_sequence() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(dir.path(), 300).unwrap();
        for _ in 0..20 {
            let seq = j.allocate_seq();
            j.append(&event(seq, "some title text"), false).unwrap();
        }
        let path = dir.path().join(FILE_NAME);
        assert!(fs::metadata(&path).unwrap().len() <= 300);
        assert!(fs::metadata(rotated(&path)).unwrap().len() <= 300);
        let all = read_all(dir.path()).unwrap();
        assert_eq!(all.last().unwrap().seq, 20);
        assert!(all.windows(2).all(|w| w[1].seq == w[0].seq + 1));
        drop(j);
        // Right after a rotation the current file is empty: the sequence continues from the
        // rotated one.
        let last_rotated = last_seq(&fs::read(rotated(&path)).unwrap()).unwrap();
        fs::write(&path, b"").unwrap();
        assert_eq!(Journal::open(dir.path(), 300).unwrap().next_seq(), last_rotated + 1);
    }
}
