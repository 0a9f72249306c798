//! The per-session events journal: JSON lines on disk.
//!
//! Owns `events.jsonl` in a session's state directory: one event per line, appended with a
//! single `write`; when the file would pass its cap it is renamed to `events.jsonl.1`
//! (replacing the previous one) and a new file is started, so the journal never uses more than
//! twice the cap. Invariants: on open, a torn last line (a crash mid-append) is cut off and the
//! file ends on a line boundary, and a failed append (a full disk) cuts off what it wrote, so
//! a half line never swallows the next event; the next sequence number is one past the last
//! one recorded in either file; durable events are fsynced before `append` returns; events
//! that are not durable (titles, bells, modes, output flow, ...) fill at most
//! [`NOISE_SHARE`] of a file and are left out of the journal beyond it, so noise can never
//! rotate durable evidence (hooks, state changes) out of the journal.

use anyhow::{Context, Result};
use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use desk_wire::events::{Event, EventBody};

/// A journal line known by its `type` tag alone: what opening the journal needs to count its
/// noise. Not the whole [`Event`]: a master decodes no other event, and the decoder of every
/// event body was 49 KB of code in it, resident in every idle master.
#[derive(serde::Deserialize)]
struct Tag<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
}

/// 1 MiB per file: several thousand events, hours of a busy agent's titles and state changes;
/// two files bound a session's journal to 2 MiB.
pub const JOURNAL_CAP: u64 = 1 << 20;

pub const FILE_NAME: &str = "events.jsonl";

/// Events that are not durable may fill half of each journal file. The other half is kept for
/// durable evidence: a hook event survives at least a full file of further durable events,
/// however much noise a session makes (one noisy child rotated its journal every 5 s, pushing
/// out the hook events crash recovery reads).
pub const NOISE_SHARE: f64 = 0.5;

pub struct Journal {
    path: PathBuf,
    file: File,
    size: u64,
    cap: u64,
    next_seq: u64,
    /// Bytes of events that are not durable in the current file.
    noise: u64,
    /// Events left out of the journal because noise had filled its share.
    noise_skipped: u64,
    /// A failed append's partial line could not be cut off: the next line starts with a
    /// newline, so the fragment stays a line of its own (skipped by readers).
    torn: bool,
}

fn rotated(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".1");
    PathBuf::from(p)
}

fn open_append(path: &Path) -> Result<File> {
    crate::fsutil::private_options()
        .create(true)
        .append(true)
        .read(true)
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
        let noise = bytes
            .split(|b| *b == b'\n')
            .filter(|line| !line.is_empty())
            .filter(|line| serde_json::from_slice::<Tag>(line).is_ok_and(|t| !EventBody::is_durable_kind(&t.kind)))
            .map(|line| line.len() as u64 + 1)
            .sum();
        Ok(Journal { path, file, size: good as u64, cap, next_seq, noise, noise_skipped: 0, torn: false })
    }

    fn noise_cap(&self) -> u64 {
        (self.cap as f64 * NOISE_SHARE) as u64
    }

    /// Events left out because noise had filled its share of the journal (since open).
    pub fn noise_skipped(&self) -> u64 {
        self.noise_skipped
    }

    /// The sequence number the next event gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Number events from `next_seq` on if that is beyond what the file shows: a master that
    /// re-executed itself goes on from the number its previous image had reached, journalled
    /// or not (a full disk may have kept events out of the file).
    pub fn continue_from(&mut self, next_seq: u64) {
        self.next_seq = self.next_seq.max(next_seq);
    }

    /// Take the next sequence number.
    pub fn allocate_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Append one event as one line; fsync when `durable`. An event that is not durable is
    /// left out (and counted) once noise fills its share of the current file. On an error
    /// nothing of the line stays in the file (or, if it cannot be cut off, the next line
    /// starts on a fresh one).
    pub fn append(&mut self, event: &Event, durable: bool) -> Result<()> {
        let mut line = serde_json::to_vec(event).context("cannot encode an event")?;
        line.push(b'\n');
        if !durable && self.noise + line.len() as u64 > self.noise_cap() {
            self.noise_skipped += 1;
            return Ok(());
        }
        if self.size > 0 && self.size + line.len() as u64 > self.cap {
            self.rotate()?;
        }
        if self.torn {
            if self.file.set_len(self.size).is_ok() {
                self.torn = false;
            } else {
                line.insert(0, b'\n');
            }
        }
        if let Err(e) = self.file.write_all(&line) {
            // A short write leaves part of the line: cut it off (shrinking needs no space).
            self.torn = self.file.set_len(self.size).is_err();
            return Err(e).with_context(|| format!("cannot append to {}", self.path.display()));
        }
        if self.torn {
            self.size = self.file.metadata().map_or(self.size + line.len() as u64, |m| m.len());
            self.torn = false;
        } else {
            self.size += line.len() as u64;
        }
        if !durable {
            self.noise += line.len() as u64;
        }
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
        self.noise = 0;
        if let Some(dir) = self.path.parent() {
            crate::fsutil::sync_dir(dir)?;
        }
        Ok(())
    }
}

/// Every event still on disk for a session, oldest first. Lines that do not parse (a torn
/// line being written right now) are skipped.
pub fn read_all(dir: &Path) -> Result<Vec<Event>> {
    read_where(dir, |_| true)
}

/// The durable events still on disk for a session (hooks, state changes, exits, starts: the
/// evidence), oldest first, without decoding the noise around them.
pub fn read_durable(dir: &Path) -> Result<Vec<Event>> {
    read_where(dir, EventBody::is_durable_kind)
}

/// The events whose `type` tag `keep` accepts, oldest first.
fn read_where(dir: &Path, keep: impl Fn(&str) -> bool) -> Result<Vec<Event>> {
    let path = dir.join(FILE_NAME);
    let mut events = Vec::new();
    for file in [rotated(&path), path] {
        let bytes = match fs::read(&file) {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
        };
        for line in bytes.split(|b| *b == b'\n') {
            if serde_json::from_slice::<Tag>(line).is_ok_and(|t| keep(&t.kind))
                && let Ok(event) = serde_json::from_slice::<Event>(line)
            {
                events.push(event);
            }
        }
    }
    Ok(events)
}

/// The newest events of a session, oldest first, from at most the last `max_bytes` of its
/// current journal file (a reader that wants the recent past, like the dashboard's events
/// pane, need not read two whole files). A line cut at the window's start is left out.
pub fn read_tail(dir: &Path, max_bytes: u64) -> Result<Vec<Event>> {
    use std::io::{Read, Seek, SeekFrom};
    let path = dir.join(FILE_NAME);
    let mut file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let len = file.metadata().with_context(|| format!("cannot read {}", path.display()))?.len();
    let start = len.saturating_sub(max_bytes);
    file.seek(SeekFrom::Start(start)).with_context(|| format!("cannot read {}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(max_bytes).read_to_end(&mut bytes).with_context(|| format!("cannot read {}", path.display()))?;
    let whole = if start == 0 { &bytes[..] } else { bytes.splitn(2, |b| *b == b'\n').nth(1).unwrap_or(&[]) };
    Ok(whole.split(|b| *b == b'\n').filter_map(|line| serde_json::from_slice::<Event>(line).ok()).collect())
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
    use desk_wire::events::EventBody;

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
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
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
    fn the_tail_holds_the_newest_whole_events() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_tail(dir.path(), 100).unwrap().is_empty(), "no journal, no events");
        let mut j = Journal::open(dir.path(), JOURNAL_CAP).unwrap();
        for _ in 0..50 {
            let seq = j.allocate_seq();
            j.append(&event(seq, "a title of some length"), false).unwrap();
        }
        let line = fs::read_to_string(dir.path().join(FILE_NAME)).unwrap().lines().last().unwrap().len() as u64 + 1;
        // Three lines and a half: the half line is left out, the newest three come oldest first.
        let tail = read_tail(dir.path(), line * 7 / 2).unwrap();
        assert_eq!(tail.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![48, 49, 50]);
        assert_eq!(read_tail(dir.path(), u64::MAX).unwrap().len(), 50);
    }

    fn hook(seq: u64) -> Event {
        Event {
            seq,
            ts_ms: seq * 10,
            generation: 1,
            body: EventBody::Hook {
                provider: "claude".into(),
                event: "UserPromptSubmit".into(),
                detail: None,
                prompt: None,
            },
        }
    }

    #[test]
    fn noise_never_rotates_durable_evidence_out_of_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(dir.path(), 4096).unwrap();
        let seq = j.allocate_seq();
        j.append(&hook(seq), true).unwrap();
        // Far more noise than both files hold.
        for _ in 0..2000 {
            let seq = j.allocate_seq();
            let e = Event { seq, ts_ms: 1, generation: 1, body: EventBody::Bell };
            j.append(&e, e.body.is_durable()).unwrap();
        }
        assert!(j.noise_skipped() > 1900, "noise beyond its share is left out");
        let all = read_all(dir.path()).unwrap();
        assert_eq!(all.first().map(|e| e.seq), Some(1), "the hook is still there");
        assert!(fs::metadata(dir.path().join(FILE_NAME)).unwrap().len() <= 4096 / 2 + 200);
        // Reopened, the share already used is remembered.
        drop(j);
        let mut j = Journal::open(dir.path(), 4096).unwrap();
        let seq = j.allocate_seq();
        j.append(&Event { seq, ts_ms: 1, generation: 1, body: EventBody::Bell }, false).unwrap();
        assert_eq!(j.noise_skipped(), 1);
        // Durable events still go in, and rotate as before.
        for _ in 0..100 {
            let seq = j.allocate_seq();
            j.append(&hook(seq), true).unwrap();
        }
        assert_eq!(read_all(dir.path()).unwrap().last().map(|e| e.seq), Some(j.next_seq() - 1));
    }

    #[test]
    fn rotation_keeps_two_files_and_the_sequence() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(dir.path(), 300).unwrap();
        for _ in 0..20 {
            let seq = j.allocate_seq();
            j.append(&hook(seq), true).unwrap();
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
