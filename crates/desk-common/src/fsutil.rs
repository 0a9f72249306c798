//! Durable small-file writes.
//!
//! Owns the one way desk replaces a file's contents: write a temporary file in the same
//! directory, fsync it, rename it over the target, fsync the directory. Invariant: after
//! [`write_atomic`] returns, a crash leaves either the old or the new contents, never a mix, and
//! the new contents survive a power loss. A writer killed mid-write leaves its temporary file
//! (`.<name>.tmp.<pid>`) behind; [`sweep_stale_tmp`] removes those whose writer is gone. Every
//! file desk opens for writing is opened through [`private_options`]: never through a symbolic
//! link, never inherited by a child, and created readable by its owner only.

use anyhow::{Context, Result};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// How desk opens its own files: `O_NOFOLLOW` (a symbolic link planted at the path is refused,
/// not followed), `O_CLOEXEC` (no child it starts inherits the descriptor) and, when the open
/// creates the file, mode 0600. The caller adds the access it needs (read, write, append,
/// create, truncate).
pub fn private_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.mode(0o600).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    options
}

/// Atomically replace `path` with `bytes` (mode 0600), durably.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    replace(path, bytes, true)
}

/// Replace `path` with `bytes` (mode 0600) through a temporary file and a rename, without
/// fsync: readers see the old or the new contents, never a mix, but a crash may lose it. For
/// records nothing needs after a crash (a master's info file).
pub fn replace_volatile(path: &Path, bytes: &[u8]) -> Result<()> {
    replace(path, bytes, false)
}

fn replace(path: &Path, bytes: &[u8], durable: bool) -> Result<()> {
    let dir = path.parent().context("path has no parent directory")?;
    let file_name = path.file_name().context("path has no file name")?.to_string_lossy();
    let tmp = dir.join(tmp_name(&file_name, std::process::id()));
    let result = (|| -> Result<()> {
        full_disk(path).with_context(|| format!("cannot write {}", tmp.display()))?;
        let mut file = private_options()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        file.write_all(bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
        if durable {
            file.sync_all().with_context(|| format!("cannot fsync {}", tmp.display()))?;
        }
        fs::rename(&tmp, path).with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))?;
        if durable { sync_dir(dir) } else { Ok(()) }
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// A full disk on demand, for the tests of what a full disk does, without the privileges a
/// small tmpfs needs: while the file `DESK_FULL_DISK` names exists, writing any file in its
/// directory (or below) fails with ENOSPC, as it would on a full filesystem. Compiled only with
/// the `failpoints` feature, like the crash failpoints (`crate::failpoint`).
#[cfg(feature = "failpoints")]
fn full_disk(path: &Path) -> std::io::Result<()> {
    let Some(marker) = std::env::var_os("DESK_FULL_DISK").map(std::path::PathBuf::from) else { return Ok(()) };
    match marker.parent() {
        Some(full) if path.starts_with(full) && marker.exists() => Err(std::io::Error::from_raw_os_error(libc::ENOSPC)),
        _ => Ok(()),
    }
}

/// Without the `failpoints` feature the disk is never full on demand.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
fn full_disk(_path: &Path) -> std::io::Result<()> {
    Ok(())
}

/// fsync a directory so a rename or unlink inside it is durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).with_context(|| format!("cannot fsync directory {}", dir.display()))
}

/// Remove a file; a file that is already gone is not an error.
pub fn remove_if_exists(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot remove {}", path.display())),
    }
}

/// Why [`read_bounded`] refused.
#[derive(Debug, thiserror::Error)]
pub enum BoundedReadError {
    /// The source holds more than the limit; nothing beyond `limit + 1` bytes was read.
    #[error("{what} is larger than {limit} bytes, the limit")]
    TooLarge { what: String, limit: usize },
    #[error("cannot read {what}: {source}")]
    Io { what: String, source: std::io::Error },
}

/// Read all of `reader`, but never more than `limit + 1` bytes: a source of untrusted size
/// (`/dev/zero`, a huge file, an endless pipe) is refused with an error naming the limit
/// instead of growing memory without end. `what` names the source in the error.
pub fn read_bounded(reader: impl std::io::Read, limit: usize, what: &str) -> Result<Vec<u8>, BoundedReadError> {
    use std::io::Read as _;
    let mut buf = Vec::new();
    reader
        .take(limit as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|source| BoundedReadError::Io { what: what.to_string(), source })?;
    if buf.len() > limit {
        return Err(BoundedReadError::TooLarge { what: what.to_string(), limit });
    }
    Ok(buf)
}

/// Room set aside on disk for one small file that must be written even when the disk is full
/// later (a session's exit record): a temporary file of the reserved size, written now, whose
/// blocks [`Reserved::commit`] overwrites in place and renames over the target. It is named
/// like [`write_atomic`]'s temporary files, so [`sweep_stale_tmp`] removes it when its process
/// was killed; dropped without a commit, it removes itself.
#[derive(Debug)]
pub struct Reserved {
    tmp: std::path::PathBuf,
    target: std::path::PathBuf,
    file: Option<File>,
}

impl Reserved {
    /// Reserve `size` bytes for `target`.
    pub fn new(target: &Path, size: usize) -> Result<Reserved> {
        let dir = target.parent().context("path has no parent directory")?;
        let file_name = target.file_name().context("path has no file name")?.to_string_lossy();
        let tmp = dir.join(tmp_name(&format!("{file_name}.reserve"), std::process::id()));
        let mut reserved = Reserved { tmp: tmp.clone(), target: target.to_path_buf(), file: None };
        let mut file = private_options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        reserved.file = Some(file.try_clone().with_context(|| format!("cannot reopen {}", tmp.display()))?);
        file.write_all(&vec![0u8; size]).with_context(|| format!("cannot reserve room in {}", tmp.display()))?;
        file.sync_all().with_context(|| format!("cannot fsync {}", tmp.display()))?;
        Ok(reserved)
    }

    /// Write `bytes` (at most the reserved size) into the reserved blocks and move them over
    /// the target, durably: needs no free space.
    pub fn commit(mut self, bytes: &[u8]) -> Result<()> {
        use std::os::unix::fs::FileExt;
        let file = self.file.as_ref().context("the reserve was already used")?;
        let len = file.metadata().with_context(|| format!("cannot stat {}", self.tmp.display()))?.len();
        anyhow::ensure!(bytes.len() as u64 <= len, "{} bytes do not fit the {len} reserved", bytes.len());
        file.write_all_at(bytes, 0).with_context(|| format!("cannot write {}", self.tmp.display()))?;
        file.set_len(bytes.len() as u64).with_context(|| format!("cannot trim {}", self.tmp.display()))?;
        file.sync_all().with_context(|| format!("cannot fsync {}", self.tmp.display()))?;
        fs::rename(&self.tmp, &self.target)
            .with_context(|| format!("cannot rename {} to {}", self.tmp.display(), self.target.display()))?;
        // Renamed: nothing is left for the drop to remove.
        self.file = None;
        sync_dir(self.target.parent().unwrap_or(Path::new(".")))
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// The temporary file name [`write_atomic`] uses for `file_name` in process `pid`.
fn tmp_name(file_name: &str, pid: u32) -> String {
    format!(".{file_name}.tmp.{pid}")
}

/// The writer's pid, if `name` is one of [`write_atomic`]'s temporary files.
fn tmp_writer(name: &str) -> Option<i32> {
    let (_, pid) = name.strip_prefix('.')?.rsplit_once(".tmp.")?;
    pid.parse().ok().filter(|p| *p > 0)
}

/// Remove the temporary files in `dir` that a killed writer left behind: those whose writer
/// process no longer exists. A live writer's file is left alone (its rename is about to
/// happen), and so is any file not named like a temporary file. Returns how many were removed.
pub fn sweep_stale_tmp(dir: &Path) -> Result<usize> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e).with_context(|| format!("cannot list {}", dir.display())),
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(tmp_writer) else { continue };
        // ESRCH only: a pid we may not signal (EPERM) belongs to a live process.
        let gone = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) == Err(nix::errno::Errno::ESRCH);
        if gone {
            remove_if_exists(&entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_source_is_refused_at_the_limit_and_a_source_at_the_limit_is_read() {
        let err = read_bounded(std::io::repeat(0), 1000, "zeros").unwrap_err();
        assert!(matches!(err, BoundedReadError::TooLarge { limit: 1000, .. }), "{err}");
        assert_eq!(err.to_string(), "zeros is larger than 1000 bytes, the limit");
        assert_eq!(read_bounded(&[7u8; 1000][..], 1000, "exact").unwrap().len(), 1000);
        assert!(read_bounded(&[7u8; 1001][..], 1000, "one over").is_err());
    }

    #[test]
    fn a_dead_writers_temporary_file_is_swept_and_a_live_ones_is_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let stale = tmp.path().join(tmp_name("item.json", dead));
        let live = tmp.path().join(tmp_name("other.json", std::process::id()));
        let unrelated = tmp.path().join("notes.tmp.1");
        for p in [&stale, &live, &unrelated] {
            fs::write(p, b"x").unwrap();
        }
        write_atomic(&tmp.path().join("item.json"), b"{}").unwrap();
        assert_eq!(sweep_stale_tmp(tmp.path()).unwrap(), 1);
        assert!(!stale.exists() && live.exists() && unrelated.exists());
        assert_eq!(fs::read(tmp.path().join("item.json")).unwrap(), b"{}");
        assert_eq!(sweep_stale_tmp(&tmp.path().join("missing")).unwrap(), 0);
    }

    #[test]
    fn a_reserve_becomes_the_target_or_disappears() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("s.exit");
        let listing = || {
            let mut v: Vec<String> =
                fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
            v.sort();
            v
        };
        let reserve = Reserved::new(&target, 4096).unwrap();
        assert_eq!(listing(), vec![format!(".s.exit.reserve.tmp.{}", std::process::id())]);
        assert!(tmp_writer(&listing()[0]).is_some(), "swept like any temporary file if its writer dies");
        assert!(Reserved::new(&tmp.path().join("t"), 8).unwrap().commit(&[0u8; 9]).is_err(), "too big");
        reserve.commit(b"{\"code\":0}").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"{\"code\":0}");
        assert_eq!(listing(), vec!["s.exit".to_string()]);
        drop(Reserved::new(&target, 10).unwrap());
        assert_eq!(listing(), vec!["s.exit".to_string()], "an unused reserve removes itself");
    }
}
