//! Locks a process holds for its whole life: one daemon per user (`serve.lock`), one master per
//! session name (`master.lock`).
//!
//! Owns taking such a lock (an exclusive `flock` on a 0600 file, which the kernel releases
//! when the holder's last descriptor closes, however it dies), writing the holder's pid into
//! it, and finding out who holds one. Invariants: who holds a lock is asked of the kernel
//! (`/proc/locks`), never believed from the pid in the file, which names whoever wrote it last;
//! looking for the holder takes nothing (a reader that took the lock for a moment could make a
//! starting holder fail); a lock whose holder is on its way out (killed, exiting) is waited
//! for, briefly, rather than refused. The file is never removed while anyone may hold it
//! (removing it would let a second holder lock a new file of the same name).

use anyhow::{Context, Result};
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long the holder must look alive and not exiting before a lock is refused: between a
/// `kill -9` and the moment the kernel marks the process as exiting there is a brief window in
/// which it looks alive; a few retries cover it at a small cost to a genuine refusal.
const CONFIRM: Duration = Duration::from_millis(30);

/// How often the lock is tried again meanwhile: short against the milliseconds an exit takes.
const RETRY: Duration = Duration::from_millis(5);

/// Someone else holds the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The holder's pid, from the kernel, or from the file when the kernel does not say.
    pub pid: Option<u32>,
}

/// Open (creating it 0600 if needed) a lock file: never through a symlink, never inherited by
/// a child.
pub fn open_lock_file(path: &Path) -> Result<File> {
    crate::fsutil::private_options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))
}

/// Take the lock at `path` for the life of the returned file (close-on-exec: no child inherits
/// it) and write this process's pid into it. While the holder is gone or exiting, the lock is
/// tried again for up to `takeover` (a killed process releases its files within milliseconds);
/// so it is while `wait_for` says to wait for a holder that is still alive, up to the same
/// bound. Otherwise, once the holder has looked alive and staying for a moment, `Held`.
pub fn take(path: &Path, takeover: Duration, wait_for: impl Fn(u32) -> bool) -> Result<Result<File, Held>> {
    let mut file = open_lock_file(path)?;
    let meta = file.metadata().with_context(|| format!("cannot inspect {}", path.display()))?;
    let (dev, ino) = (meta.dev(), meta.ino());
    let deadline = Instant::now() + takeover;
    // Since when the holder has looked alive and staying, without a break.
    let mut staying_since: Option<Instant> = None;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder = crate::procfs::flock_holder(dev, ino);
                let now = Instant::now();
                let leaving = holder.is_none_or(|pid| crate::procfs::is_exiting(pid) || wait_for(pid));
                staying_since = if leaving { None } else { Some(staying_since.unwrap_or(now)) };
                let staying = staying_since.is_some_and(|since| now.duration_since(since) >= CONFIRM);
                if staying || now >= deadline {
                    let pid = holder.or_else(|| {
                        let mut text = String::new();
                        let _ = file.read_to_string(&mut text);
                        text.trim().parse().ok()
                    });
                    return Ok(Err(Held { pid }));
                }
                std::thread::sleep(RETRY);
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("cannot lock {}", path.display()));
            }
        }
    }
    file.set_len(0)?;
    write!(file, "{}", std::process::id())?;
    // Not synced: the pid is read only while the lock is held (by a live process, in this
    // boot), so no reader needs it after a power loss — and a master's start waited on it.
    Ok(Ok(file))
}

/// The pid of the process holding the lock at `path`, if one does; `None` also when there is
/// no such file or `/proc/locks` cannot be read. Takes nothing.
pub fn holder(path: &Path) -> Option<u32> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    crate::procfs::flock_holder(meta.dev(), meta.ino())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_names_its_holder_and_is_free_once_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let first = take(&path, Duration::from_millis(50), |_| false).unwrap().expect("free");
        assert_eq!(holder(&path), Some(std::process::id()));
        // flock locks belong to open files: a second open in this process is refused too.
        let second = take(&path, Duration::from_millis(50), |_| false).unwrap();
        assert_eq!(second.unwrap_err(), Held { pid: Some(std::process::id()) });
        drop(first);
        assert_eq!(holder(&path), None);
        assert!(take(&path, Duration::from_millis(50), |_| false).unwrap().is_ok());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), std::process::id().to_string());
    }
}
