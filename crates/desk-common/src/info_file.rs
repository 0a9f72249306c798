//! A running session's info file: what its master would answer to HELLO, kept on disk.
//!
//! Owns the record a master keeps current in `<runtime>/<name>.info` (its `SessionInfo`, the
//! session's size policy, the master's own start time as `/proc` counts it, the protocol
//! and executable it runs ([`MasterIdentity`]) and what a listing shows of its launch record),
//! how it is
//! written and read, and the check that decides whether a reader may believe it. `desk ls`
//! reads these files instead of waking every master (a master-per-session fleet of 300 idle
//! sessions otherwise costs 300 wake-ups per listing).
//!
//! Invariants: the file is replaced whole (write a temporary file, rename), so a reader sees
//! one record or another, never a mix; a master rewrites it within [`INFO_FILE_INTERVAL`] of
//! any change to what it would answer, and not at all while nothing changes (an idle master
//! does not wake for it); it is removed when the master has recorded its exit. A record is
//! believed only while the process named as its master is alive, not stopped, and has the
//! recorded start time (so a reused pid is not taken for the master): a master that died or
//! stopped is never shown as running from its file. What the file cannot show is a master
//! that is alive but wedged (busy in a loop): it keeps its last record. The record is not
//! durable (the runtime directory is usually a tmpfs, and a restart makes it moot). May depend
//! on the wire types, `/proc` and the file system; nothing of the master's loop.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

use desk_wire::SessionInfo;

/// 100 ms: how late a change that output made (a title, a state read from the screen) may
/// reach the record while output flows. The master compares its info with the record at most
/// this often during a flood (ten comparisons a second in a loop that is awake anyway); a
/// change made by a client, a signal or a timer is written in its own turn.
pub const INFO_FILE_INTERVAL: Duration = Duration::from_millis(100);

/// 1 s: how stale the times that move with every read of output (`state.last_output_ms`, and
/// when each axis's evidence was last seen) may be in the record while output flows. A flood
/// rewrites the record once a second for them (a rename is a quarter of a millisecond on a
/// disk-backed runtime directory), not ten times.
pub const INFO_OUTPUT_TIME_INTERVAL: Duration = Duration::from_secs(1);

/// 64 KiB: a record is a few hundred bytes (a title of at most 1 KiB, the command line, the
/// state); a larger file is not one a master wrote.
const INFO_FILE_LIMIT: usize = 64 * 1024;

/// What `<name>.info` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InfoRecord {
    /// The master's start time in clock ticks since boot (`/proc/PID/stat` field 22), so that a
    /// reader can tell the master from a later process that reused its pid.
    pub master_start: u64,
    /// The session's size policy (WELCOME does not carry it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_policy: Option<String>,
    /// What the master answers to HELLO, as of the write.
    pub info: SessionInfo,
    /// What the version-skew check of `desk ls` needs of the master, so that it reads neither
    /// the session record nor `/proc/PID/exe` (absent in the files of older masters: the
    /// listing then reads both, as before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master: Option<MasterIdentity>,
    /// What a listing shows of the launch record of the master's generation, so that it need
    /// not read that record (absent when the session has none of this generation — a master
    /// started by hand — and in the files of older masters: the listing then reads it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<crate::launch_record::LaunchFacts>,
}

/// Which master wrote a record: the protocol it speaks and the executable it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MasterIdentity {
    /// The newest wire-protocol version it speaks (1 where its session record names none).
    pub protocol: u16,
    /// Device and inode of the executable it runs, as `/proc/PID/exe` shows them (which stay
    /// those of the file it started from after that file is replaced); absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exe: Option<(u64, u64)>,
}

impl MasterIdentity {
    /// This process's identity, speaking `protocol` (`None`: version 1).
    pub fn of_self(protocol: Option<u16>) -> MasterIdentity {
        MasterIdentity {
            protocol: protocol.unwrap_or(desk_wire::OLDEST_PROTOCOL_VERSION),
            exe: crate::procfs::exe_identity(std::process::id()),
        }
    }
}

/// Replace `path` with `bytes` (mode 0600) through a temporary file and a rename, without
/// fsync: readers see the old or the new record, and nothing needs it after a crash.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::fsutil::replace_volatile(path, bytes).context("cannot write the info file")
}

/// The record at `path`; `None` when there is none or it is not one a master wrote (too large,
/// not a record): the caller then asks the master.
pub fn read(path: &Path) -> Option<InfoRecord> {
    let file = std::fs::File::open(path).ok()?;
    // One read takes a whole record (a growing buffer would start at 32 bytes and take seven,
    // and a second read to see the end would double the reads of a listing of 300).
    let bytes = crate::fsutil::read_bounded_file(&file, INFO_FILE_LIMIT, "the info file").ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// [`read`] of session `name`'s record, opened relative to `dirs` and read into `buf` (a
/// listing reads one for every session; see [`crate::session_dirs`]).
pub fn read_in(
    dirs: &crate::session_dirs::SessionDirs,
    name: &crate::paths::SessionName,
    buf: &mut Vec<u8>,
) -> Option<InfoRecord> {
    let file = dirs.runtime_file(name, "info").ok()??;
    crate::fsutil::read_bounded_file_into(&file, INFO_FILE_LIMIT, "the info file", buf).ok()?;
    serde_json::from_slice(buf).ok()
}

/// What `/proc` says of the process a record names as its master.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MasterCheck {
    /// Alive, not stopped, and started when the record says: the record is the master's.
    Running,
    /// Stopped (SIGSTOP, a debugger): it cannot answer anyone.
    Stopped,
    /// Gone, a zombie, or another process with the pid: the record proves nothing.
    NotTheMaster,
}

/// Check the process behind `record`.
pub fn check(record: &InfoRecord) -> MasterCheck {
    check_stat(record, crate::procfs::state_and_start(record.info.master_pid))
}

/// [`check`], reading `/proc` through `dirs`.
pub fn check_in(dirs: &crate::session_dirs::SessionDirs, record: &InfoRecord) -> MasterCheck {
    check_stat(record, crate::procfs::state_and_start_in(dirs, record.info.master_pid))
}

/// What the state and start time `/proc` gave for the record's master say.
fn check_stat(record: &InfoRecord, stat: Option<(char, u64)>) -> MasterCheck {
    match stat {
        Some((state, start)) if start == record.master_start => match state {
            'T' | 't' => MasterCheck::Stopped,
            'Z' | 'X' | 'x' => MasterCheck::NotTheMaster,
            _ => MasterCheck::Running,
        },
        _ => MasterCheck::NotTheMaster,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(master_pid: u32, master_start: u64) -> InfoRecord {
        let info = SessionInfo {
            name: "s".into(),
            generation: 3,
            provider: "shell".into(),
            pid: 1,
            master_pid,
            command: vec!["sh".into()],
            cwd: "/".into(),
            cols: 80,
            rows: 24,
            controllers: 1,
            viewers: 0,
            observers: 1,
            title: "t".into(),
            started_at_ms: 5,
            state: None,
        };
        InfoRecord {
            master_start,
            size_policy: Some("latest".into()),
            info,
            master: Some(MasterIdentity { protocol: 2, exe: Some((1, 2)) }),
            launch: None,
        }
    }

    #[test]
    fn a_record_is_read_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.info");
        let written = record(7, 9);
        write(&path, &serde_json::to_vec(&written).unwrap()).unwrap();
        assert_eq!(read(&path), Some(written));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file is left");
        std::fs::write(&path, b"not a record").unwrap();
        assert_eq!(read(&path), None);
    }

    #[test]
    fn only_a_live_process_with_the_recorded_start_counts_as_the_master() {
        let me = std::process::id();
        let (_, start) = crate::procfs::state_and_start(me).unwrap();
        assert_eq!(check(&record(me, start)), MasterCheck::Running);
        assert_eq!(check(&record(me, start + 1)), MasterCheck::NotTheMaster, "a reused pid");
        assert_eq!(check(&record(u32::MAX - 1, start)), MasterCheck::NotTheMaster, "no such process");
    }

    #[test]
    fn a_stopped_master_is_told_from_a_running_one() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        let (_, start) = crate::procfs::state_and_start(pid).unwrap();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGSTOP).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while check(&record(pid, start)) != MasterCheck::Stopped {
            assert!(std::time::Instant::now() < deadline, "the child never showed as stopped");
            std::thread::yield_now();
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(check(&record(pid, start)), MasterCheck::NotTheMaster, "reaped");
    }
}
