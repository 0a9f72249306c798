//! A session's files and how to reach its master.
//!
//! Owns the metadata record a master writes when it starts, the exit record it writes when its
//! child ends, the per-name lock that serialises `new`/`rm`/stale cleanup, the lock a master
//! holds on its name for its whole life ([`MasterLock`]), and the connect-probe that tells a
//! live master from a stale socket. Invariants: the exit record is
//! written durably before the socket is removed, so a session whose socket is gone is either
//! exited (record present) or lost (its master died without one); a socket is only unlinked
//! while holding the name's lock after a connect was refused.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::format::{self, Format};
use crate::fsutil;
use crate::paths::{Paths, SessionName, SessionPaths};
use desk_wire::ExitStatus;

/// `<runtime>/<name>.json`, [`SessionMeta`]: version 1 (records of masters from before desk
/// stamped versions have no `version` key).
pub const META_FORMAT: Format = Format::first("session");

/// `<runtime>/<name>.exit`, [`ExitRecord`]: version 1, likewise.
pub const EXIT_FORMAT: Format = Format::first("exit");

/// Written by the master once its child is forked, before the child's program starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionMeta {
    pub name: String,
    /// Which incarnation of this name: grows by one with every `desk new`.
    pub generation: u32,
    /// Agent provider (`claude`, `codex`, `opencode`, `shell`, ...), for state rules and hooks.
    pub provider: String,
    pub pid: u32,
    pub master_pid: u32,
    /// The master's start time in clock ticks since boot (`/proc/PID/stat` field 22), so that a
    /// process that later reuses its pid is not taken for it ([`enclosing`]). Absent in the
    /// records of older masters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_start: Option<u64>,
    pub command: Vec<String>,
    pub cwd: String,
    pub cols: u16,
    pub rows: u16,
    pub started_at_ms: u64,
    /// How the session's size follows its controllers (`latest`, `smallest`, `largest`,
    /// `fixed`); absent in the records of older masters, which all followed `latest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_policy: Option<String>,
    /// The newest wire-protocol version the master speaks; absent in the records of masters of
    /// version 1, which do not negotiate (clients say HELLO 1 to them: [`hello_version`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<u16>,
}

/// Written by the master when its child has been reaped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitRecord {
    pub generation: u32,
    pub status: ExitStatus,
    /// The child outlived a kill request's grace period and was sent SIGKILL.
    pub escalated: bool,
    pub exited_at_ms: u64,
    /// The session's size and title when it ended (absent in records of older masters), so
    /// that `desk ls` shows them rather than the size it started with and no title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cols: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The screen as the child left it, one string per row, blank rows at the bottom dropped
    /// (absent in records of older masters, and when the disk was full at exit), so an exited
    /// session's last words stay readable (`desk peek`, `desk attach`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_screen: Option<Vec<String>>,
    /// The newest history lines (scrolled off above `last_screen`) as text, oldest first, at
    /// most [`LAST_HISTORY_LINES`] and [`LAST_SCREEN_CAP`] bytes (absent in records of older
    /// masters, of sessions without history, and when the disk was full at exit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_history: Option<Vec<String>>,
}

impl ExitRecord {
    /// The newest `n` lines of the recorded history tail, oldest first.
    pub fn history_tail(&self, n: u32) -> Vec<String> {
        let lines = self.last_history.as_deref().unwrap_or_default();
        lines[lines.len().saturating_sub(n as usize)..].to_vec()
    }

    /// The line that heads an exited session's last screen: how and when it ended.
    pub fn headline(&self, name: &str, now_ms: u64) -> String {
        let when = desk_core::time::iso8601(self.exited_at_ms);
        let ago = now_ms.saturating_sub(self.exited_at_ms) / 1000;
        format!(
            "[desk: session {name} {} at {} UTC ({ago}s ago); its last screen:]",
            crate::signals::describe_exit(self.status),
            &when[..19].replace('T', " ")
        )
    }
}

/// 256 KiB: the most of a last screen an exit record keeps (a 500-column, 200-row screen of
/// wide characters is larger; its top rows go first). Far below [`MAX_RECORD`].
pub const LAST_SCREEN_CAP: usize = 256 * 1024;

/// The rows to keep as a last screen: trailing blank rows dropped, then top rows dropped until
/// the text fits [`LAST_SCREEN_CAP`].
pub fn last_screen(mut rows: Vec<String>) -> Vec<String> {
    while rows.last().is_some_and(|r| r.trim().is_empty()) {
        rows.pop();
    }
    let mut total: usize = rows.iter().map(|r| r.len() + 1).sum();
    let mut skip = 0;
    while total > LAST_SCREEN_CAP && skip < rows.len() {
        total -= rows[skip].len() + 1;
        skip += 1;
    }
    rows.drain(..skip);
    rows
}

/// History lines an exit record keeps: enough for the output that led to the end (a
/// compiler's errors, a stack trace) in a record that stays a few hundred KiB at most; the
/// whole history belongs in the session log.
pub const LAST_HISTORY_LINES: usize = 1000;

/// The history tail to keep in an exit record: at most [`LAST_HISTORY_LINES`] lines, then
/// oldest lines dropped until the text fits [`LAST_SCREEN_CAP`]; `None` when there is none.
pub fn last_history(lines: Vec<String>) -> Option<Vec<String>> {
    let mut lines = lines;
    let extra = lines.len().saturating_sub(LAST_HISTORY_LINES);
    lines.drain(..extra);
    let mut total: usize = lines.iter().map(|r| r.len() + 1).sum();
    let mut skip = 0;
    while total > LAST_SCREEN_CAP && skip < lines.len() {
        total -= lines[skip].len() + 1;
        skip += 1;
    }
    lines.drain(..skip);
    (!lines.is_empty()).then_some(lines)
}

/// 1 MiB: a session record is a few hundred bytes (a long command line makes it a few KiB); a
/// file this large is not one, and is refused rather than read whole.
const MAX_RECORD: usize = 1 << 20;

/// A record's bytes (at most [`MAX_RECORD`]); `None` when the file does not exist.
fn read_bytes(path: &Path) -> Result<Option<Vec<u8>>> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    Ok(Some(fsutil::read_bounded_file(&file, MAX_RECORD, &path.display().to_string())?))
}

/// A desk record (JSON, at most [`MAX_RECORD`] bytes); `None` when the file does not exist.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    let Some(bytes) = read_bytes(path)? else { return Ok(None) };
    serde_json::from_slice(&bytes).map(Some).with_context(|| format!("{} is not a valid desk record", path.display()))
}

/// A versioned record of `format` ([`crate::format`]); `None` when the file does not exist.
pub fn read_record<T: serde::de::DeserializeOwned>(format: &Format, path: &Path) -> Result<Option<T>> {
    let Some(bytes) = read_bytes(path)? else { return Ok(None) };
    format::decode(format, &bytes).map(Some).with_context(|| format!("{} cannot be read", path.display()))
}

/// [`read_record`] of a record already open (through [`crate::session_dirs`], say), read into
/// `buf`, which keeps its room for the next; `what` names the file in an error.
pub fn read_open_record<T: serde::de::DeserializeOwned>(
    format: &Format,
    file: &File,
    what: &str,
    buf: &mut Vec<u8>,
) -> Result<T> {
    fsutil::read_bounded_file_into(file, MAX_RECORD, what, buf)?;
    format::decode(format, buf).with_context(|| format!("{what} cannot be read"))
}

/// [`read_record`] for the record's owner, about to write the file anew: a record it cannot
/// read (damaged, or a newer desk's) is set aside (`<file>.bad`, [`format::set_aside`]) and
/// named in a warning with how to acknowledge it, and reads as absent — so writing does not
/// drop it silently.
pub fn read_record_or_set_aside<T: serde::de::DeserializeOwned>(format: &Format, path: &Path) -> Option<T> {
    match read_record(format, path) {
        Ok(record) => record,
        Err(e) => {
            match format::set_aside(path, format!("{e:#}")) {
                Ok(aside) => tracing::warn!("{}", aside.message()),
                Err(r) => tracing::warn!("{e:#}; and it cannot be set aside: {r:#}"),
            }
            None
        }
    }
}

/// Write a record of `format` in its current version, atomically.
pub fn write_record<T: Serialize>(format: &Format, path: &Path, record: &T) -> Result<()> {
    fsutil::write_atomic(path, &format::encode(format, record)?)
}

pub fn read_meta(paths: &SessionPaths) -> Result<Option<SessionMeta>> {
    read_record(&META_FORMAT, &paths.meta)
}

pub fn read_exit(paths: &SessionPaths) -> Result<Option<ExitRecord>> {
    read_record(&EXIT_FORMAT, &paths.exit)
}

pub fn write_meta(paths: &SessionPaths, meta: &SessionMeta) -> Result<()> {
    fsutil::write_atomic(&paths.meta, &format::encode(&META_FORMAT, meta)?)
}

/// [`write_meta`] without waiting on the disk: every process sees the record at once, and a
/// power loss may lose it. A starting master writes it so and makes it durable once `desk new`
/// has heard "ready", before it serves anyone (`desk_master`'s `durable_start`).
pub fn write_meta_volatile(paths: &SessionPaths, meta: &SessionMeta) -> Result<()> {
    fsutil::replace_volatile(&paths.meta, &format::encode(&META_FORMAT, meta)?)
}

/// The exit record's bytes as [`write_exit`] writes them (for the room reserved on a full disk).
pub fn encode_exit(record: &ExitRecord) -> Result<Vec<u8>> {
    format::encode(&EXIT_FORMAT, record)
}

pub fn write_exit(paths: &SessionPaths, record: &ExitRecord) -> Result<()> {
    fsutil::write_atomic(&paths.exit, &encode_exit(record)?)
}

/// The version to say HELLO in to the master listening at `socket` (`<runtime>/<name>.sock`),
/// from the session record beside it (`<name>.json`): what the master names, or 1 when its
/// record names none (a master of version 1, which refuses any other HELLO). Without a
/// readable record (a master still starting, say), this build's version: a master of version
/// 2 or later negotiates down from it, and one of version 1 refuses it in words.
pub fn hello_version(socket: &Path) -> u16 {
    match read_record::<SessionMeta>(&META_FORMAT, &socket.with_extension("json")) {
        Ok(Some(meta)) => desk_wire::hello_version(meta.protocol),
        _ => desk_wire::PROTOCOL_VERSION,
    }
}

/// The sessions of this desk (`paths`) that this process runs inside, nearest first: those
/// whose master is this process's parent, grandparent, ... as `/proc` says, not as any
/// environment variable claims (a child can set `DESK_SESSION` to anything, or unset it). A
/// master is known by its session's record (`<name>.json`), and by its start time where the
/// record has one, so a pid that a later process reused is not taken for a master. A session
/// started from inside another (its master adopted by the outer master, a subreaper) comes
/// before the outer one. Records that cannot be read are skipped.
pub fn enclosing(paths: &Paths) -> Result<Vec<SessionName>> {
    let ancestors = crate::procfs::ancestors_of_self();
    let mut found: Vec<(usize, SessionName)> = Vec::new();
    for name in paths.session_names()? {
        let Ok(Some(meta)) = read_meta(&paths.session(&name)) else { continue };
        let Some(depth) = ancestors.iter().position(|pid| *pid == meta.master_pid) else { continue };
        let same_process = match meta.master_start {
            Some(start) => crate::procfs::state_and_start(meta.master_pid).is_some_and(|(_, s)| s == start),
            None => true,
        };
        if same_process {
            found.push((depth, name));
        }
    }
    found.sort();
    Ok(found.into_iter().map(|(_, name)| name).collect())
}

/// The generation counter of a session name (`<state>/sessions/<name>/generation`).
pub fn generation_file(paths: &Paths, name: &SessionName) -> std::path::PathBuf {
    paths.session_state(name).join(GENERATION_FILE)
}

const GENERATION_FILE: &str = "generation";

/// Allocate the next generation of a session name: one more than any generation this name ever
/// had, and never handed out twice (`desk rm` keeps the counter). Call with the name's lock
/// held. The counter is written (visible to the next start at once) but not waited on: the
/// master this generation starts makes it durable before it serves anyone, so no record of the
/// generation that another process writes durably can outlive it in a power loss
/// (`desk_master`'s `durable_start`). A start counts on from its launch record too
/// ([`allocate_generation_above`], through `launch_record::allocate_generation`).
///
/// The counter file (`<state>/sessions/<name>/generation`) is format version 1: the number in
/// decimal and a newline. One that does not hold that is set aside (`generation.bad`, named in
/// the log) and the count goes on from the highest generation the name's records show (its
/// session and exit records and its journal), so a damaged counter never stops `desk new` and
/// never hands a generation out again.
pub fn allocate_generation(paths: &Paths, name: &SessionName, lock: &NameLock) -> Result<u32> {
    allocate_generation_above(paths, name, lock, 0)
}

/// [`allocate_generation`], above `floor` too: the highest generation another record of the
/// name shows (its launch record, which a power loss may keep without the counter: the two
/// are made durable together, but the kernel's own writeback may have written one of them).
pub fn allocate_generation_above(paths: &Paths, name: &SessionName, lock: &NameLock, floor: u32) -> Result<u32> {
    let _ = lock;
    let dir = paths.ensure_session_state(name)?;
    let file = dir.join(GENERATION_FILE);
    let counted = match std::fs::read_to_string(&file) {
        Ok(text) => match text.trim().parse::<u32>() {
            Ok(last) => last,
            Err(e) => {
                let aside = format::set_aside(&file, format!("not a generation number: {e}"))?;
                let last = highest_generation_recorded(paths, name);
                tracing::warn!("{}; counting on from generation {last}, the highest its records show", aside.message());
                last
            }
        },
        Err(e) if e.kind() == ErrorKind::NotFound => 0,
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
    };
    let last = counted.max(floor);
    let next = last.checked_add(1).context("generation counter exhausted")?;
    fsutil::replace_volatile(&file, format!("{next}\n").as_bytes())?;
    Ok(next)
}

/// The highest generation of `name` that any record of it still shows (0: none).
fn highest_generation_recorded(paths: &Paths, name: &SessionName) -> u32 {
    let files = paths.session(name);
    let meta = read_meta(&files).ok().flatten().map(|m| m.generation);
    let exit = read_exit(&files).ok().flatten().map(|e| e.generation);
    let journal = crate::journal::read_all(&paths.session_state(name))
        .unwrap_or_default()
        .into_iter()
        .map(|e| e.generation)
        .max();
    [meta, exit, journal].into_iter().flatten().max().unwrap_or(0)
}

/// An exclusive lock on one session name, held for the life of the value.
pub struct NameLock {
    _file: File,
}

impl NameLock {
    fn path(paths: &Paths, name: &SessionName) -> std::path::PathBuf {
        paths.runtime.join(format!("{name}.lock"))
    }

    fn open(paths: &Paths, name: &SessionName) -> Result<File> {
        crate::pidlock::open_lock_file(&Self::path(paths, name))
    }

    /// Wait for the lock.
    pub fn acquire(paths: &Paths, name: &SessionName) -> Result<NameLock> {
        let file = Self::open(paths, name)?;
        file.lock().with_context(|| format!("cannot lock session {name}"))?;
        Ok(NameLock { _file: file })
    }

    /// Take the lock only if nobody holds it.
    pub fn try_acquire(paths: &Paths, name: &SessionName) -> Result<Option<NameLock>> {
        let file = Self::open(paths, name)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(NameLock { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(e).with_context(|| format!("cannot lock session {name}")),
        }
    }

    pub fn remove_file(paths: &Paths, name: &SessionName) -> Result<()> {
        fsutil::remove_if_exists(&Self::path(paths, name))
    }
}

/// The lock a session's master holds for its whole life (`<state>/sessions/<name>/master.lock`):
/// one master per name, even when the socket clients find it by is gone (a cleaner of
/// temporary files removed it). It lives in the state directory, which no such cleaner
/// touches, and is never removed (see [`crate::pidlock`]); `desk rm` leaves it with the
/// generation counter.
pub struct MasterLock {
    _file: File,
}

/// How long a starting master waits for the lock while the name's previous master finishes
/// its exit: it writes its exit record, then flushes its clients for at most
/// [`desk_core::session::EXIT_FLUSH_DEADLINE`]; a second more covers a loaded machine.
pub const MASTER_LOCK_WAIT: Duration = Duration::from_secs(3);

/// The name of a master's lock file in its session's state directory.
pub const MASTER_LOCK_FILE: &str = "master.lock";

/// The `GLIBC_TUNABLES` a master is started with (when the starter has none of its own): no
/// cache of ended threads' stacks. glibc keeps a process's ended thread stacks for reuse, each
/// with the pages its thread touched (8 KiB private), and a master's threads are all
/// short-lived (the start's six syncs) and end before it goes idle;
/// without the cache their stacks go back to the kernel, about 48 KiB less per idle master
/// (docs/benchmarks.md §26). The master takes it out of its environment before anything else,
/// so its child does not inherit it.
pub const MASTER_GLIBC_TUNABLES: &str = "glibc.pthread.stack_cache_size=0";

impl MasterLock {
    fn path(paths: &Paths, name: &SessionName) -> std::path::PathBuf {
        paths.session_state(name).join(MASTER_LOCK_FILE)
    }

    /// Take the lock for this master (the session's state directory exists). While the
    /// previous master of the name finishes after recording its exit (`ending`), or is dying,
    /// it is waited for; a master that still runs the session is refused, by pid.
    pub fn take(paths: &Paths, name: &SessionName, ending: bool) -> Result<std::result::Result<MasterLock, u32>> {
        let path = Self::path(paths, name);
        Ok(match crate::pidlock::take(&path, MASTER_LOCK_WAIT, |_| ending)? {
            Ok(file) => Ok(MasterLock { _file: file }),
            Err(held) => Err(held.pid.unwrap_or(0)),
        })
    }

    /// The open lock file, for a master that hands it over to the binary it re-executes (the
    /// lock is the open file's, so it is held across the exec by the same descriptor).
    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self._file)
    }

    /// The lock a master held before it re-executed itself (`desk upgrade`): `fd` is the
    /// descriptor [`MasterLock::as_fd`] gave, inherited across the exec.
    pub fn adopt(fd: std::os::fd::OwnedFd) -> MasterLock {
        MasterLock { _file: File::from(fd) }
    }

    /// The pid of the master holding the name, if one does (asked of the kernel).
    pub fn holder(paths: &Paths, name: &SessionName) -> Option<u32> {
        crate::pidlock::holder(&Self::path(paths, name))
    }
}

/// Why a name whose socket is gone cannot be started again or removed: a master still runs the
/// session (it holds the name's [`MasterLock`] and recorded no exit). `None` when none does.
pub fn master_without_socket(paths: &Paths, name: &SessionName) -> Option<String> {
    let pid = MasterLock::holder(paths, name)?;
    if current_exit(&paths.session(name)).is_some() {
        // It has recorded its exit and is finishing: it is not the session any more.
        return None;
    }
    let stopped = crate::procfs::state_and_start(pid).is_some_and(|(state, _)| state == 'T' || state == 't');
    let why = if stopped {
        "its master is stopped (SIGSTOP or a debugger) and cannot bind it again"
    } else {
        "its master binds it again as soon as it notices, within moments"
    };
    Some(format!(
        "session {name} is still running under its master (pid {pid}), but its socket {} is gone (a cleaner of \
         temporary files may have removed it); {why}. Reach it with `desk attach {name}` once the socket is \
         back, or end the session with: kill {pid}",
        paths.session(name).socket.display()
    ))
}

/// What a connect attempt on a session's socket found.
#[derive(Debug)]
pub enum Probe {
    /// A master answered.
    Live(UnixStream),
    /// No socket file.
    Absent,
    /// A socket file nobody listens on: its master died.
    Stale,
}

/// How long `desk ls` and `desk send` wait for all masters together before showing the silent
/// ones as unresponsive: an answering master takes well under a millisecond (tens on a loaded
/// machine), and a listing must not cost seconds because one master is stopped.
pub const PROBE_DEADLINE: Duration = Duration::from_millis(300);

pub fn probe(paths: &SessionPaths) -> Result<Probe> {
    match UnixStream::connect(&paths.socket) {
        Ok(stream) => Ok(Probe::Live(stream)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Probe::Absent),
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => Ok(Probe::Stale),
        Err(e) => Err(e).with_context(|| format!("cannot connect to {}", paths.socket.display())),
    }
}

/// How long a command waits for the master of a session that has recorded its exit to finish
/// going away: it removes its socket right after writing the record (microseconds; more on a
/// loaded machine), and in between a connect still succeeds.
pub const EXIT_SETTLE: Duration = Duration::from_secs(2);

/// How often [`probe_settled`] looks again meanwhile.
const EXIT_SETTLE_POLL: Duration = Duration::from_millis(5);

/// The exit record of the session's current generation, if it has one (not that of an earlier
/// session of the name whose record is still there).
pub fn current_exit(paths: &SessionPaths) -> Option<ExitRecord> {
    let exit = read_exit(paths).ok().flatten()?;
    match read_meta(paths).ok().flatten() {
        Some(meta) if meta.generation != exit.generation => None,
        _ => Some(exit),
    }
}

/// [`probe`], except that a master which answers although its session has recorded its exit
/// is given up to [`EXIT_SETTLE`] to finish leaving, so that a command run right after `desk
/// ls` said "exited" does not find it "running".
pub fn probe_settled(paths: &SessionPaths) -> Result<Probe> {
    let deadline = Instant::now() + EXIT_SETTLE;
    loop {
        match probe(paths)? {
            Probe::Live(_) if current_exit(paths).is_some() && Instant::now() < deadline => {
                std::thread::sleep(EXIT_SETTLE_POLL);
            }
            other => return Ok(other),
        }
    }
}

/// Remove a stale socket, but only if it is still stale once the name's lock is held (a new
/// master may have replaced it meanwhile). Returns whether it removed anything.
pub fn clean_stale(paths: &Paths, name: &SessionName, lock: &NameLock) -> Result<bool> {
    let _ = lock;
    let files = paths.session(name);
    match probe(&files)? {
        Probe::Stale => {
            fsutil::remove_if_exists(&files.socket)?;
            // Its dead master's info file, which no reader believes anyway.
            fsutil::remove_if_exists(&files.info)?;
            Ok(true)
        }
        Probe::Live(_) | Probe::Absent => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_last_screen_drops_blank_bottom_rows_and_its_top_when_too_large() {
        let rows = vec!["top".to_string(), "error: disk full".to_string(), String::new(), "  ".to_string()];
        assert_eq!(last_screen(rows), vec!["top".to_string(), "error: disk full".to_string()]);
        let wide = "x".repeat(LAST_SCREEN_CAP / 2);
        let kept = last_screen(vec!["first".into(), wide.clone(), wide.clone(), "last".into()]);
        assert_eq!(kept.last().map(String::as_str), Some("last"));
        assert!(kept.iter().map(|r| r.len() + 1).sum::<usize>() <= LAST_SCREEN_CAP);
        assert!(!kept.contains(&"first".to_string()));
    }

    #[test]
    fn an_oversized_record_is_refused_not_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.json");
        std::fs::write(&path, vec![b' '; MAX_RECORD + 1]).unwrap();
        let err = read_record::<ExitRecord>(&EXIT_FORMAT, &path).unwrap_err();
        assert!(format!("{err:#}").contains("larger than"), "{err:#}");
    }
}
