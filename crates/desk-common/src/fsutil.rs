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
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

pub mod spare_pool;

use spare_pool::SparePool;

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
    let (tmp, file) = write_tmp(path, bytes)?;
    let result = (|| -> Result<()> {
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

/// The first half of an atomic replacement of `path`: `bytes` written (not synced) into its
/// temporary file in the same directory, returned open. On an error nothing is left behind.
fn write_tmp(path: &Path, bytes: &[u8]) -> Result<(std::path::PathBuf, File)> {
    let dir = path.parent().context("path has no parent directory")?;
    let file_name = path.file_name().context("path has no file name")?.to_string_lossy();
    let tmp = dir.join(tmp_name(&file_name, std::process::id()));
    let written = (|| -> Result<File> {
        full_disk(path).with_context(|| format!("cannot write {}", tmp.display()))?;
        let mut file = private_options()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        file.write_all(bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
        Ok(file)
    })();
    match written {
        Ok(file) => Ok((tmp, file)),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// One file of a group commit ([`write_atomic_group`]): `bytes` replace `path` atomically, and
/// then, when `then` names another path in the same directory, the file is renamed there (a
/// move that keeps exactly one file at every instant: the record first, the name second).
#[derive(Debug, Clone)]
pub struct GroupWrite {
    pub path: std::path::PathBuf,
    pub bytes: Vec<u8>,
    pub then: Option<std::path::PathBuf>,
}

/// The steps of a group commit, for the crash tests' failpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupStep {
    /// Every temporary file is written; none is synced, none renamed.
    Written,
    /// Write `i`'s file replaced its path (not yet durable); its second rename (`then`), if
    /// any, is next.
    Renamed(usize),
    /// Every file and every directory is synced: the whole group is durable.
    Synced,
}

/// [`write_atomic`] for many files at once, sharing the waits on the disk (a group commit):
/// every file is written, then all are synced — writeback is started for all of them first, so
/// the syncs after the first find their data (and the inode blocks they share) written —,
/// then each replaces its path (and moves on to `then`), then each directory involved is synced
/// once. Nothing is durable before the last step, and after it everything is; a caller acts on
/// any of it only once this returns. Returns one result per write, in order: a write that
/// fails leaves its path as it was; a directory that cannot be synced fails every write in it
/// (replaced, but not known durable). Each path appears at most once in a group.
///
/// The files are written into spare files of this process in `spares` (a directory of the
/// same filesystem that holds nothing else: `.spare<k>.tmp.<pid>`, named like [`write_atomic`]'s
/// temporary files, so a later start sweeps them), and a spare replaces an existing path by
/// exchanging names with it (`renameat2(RENAME_EXCHANGE)`): the old contents go to the spare
/// for the next write, and no inode is created or freed for a file rewritten in place — on ext4
/// without a journal, creating an inode scans past every recently freed one, which a stream of
/// atomic rewrites made the daemon's largest cost. A new path, or a filesystem that cannot
/// exchange, takes a plain rename (the old inode freed), as [`write_atomic`] does; a path on
/// another filesystem than `spares` is written through a temporary file beside it. A spare
/// that a new path took last time is made again from `pool`'s ready files when it has one (a
/// rename within `spares`: no inode created on this thread), else created here.
pub fn write_atomic_group(
    writes: &[GroupWrite],
    spares: &Path,
    pool: Option<&SparePool>,
    mut step: impl FnMut(GroupStep),
) -> Vec<Result<()>> {
    use std::os::fd::AsRawFd;
    let pid = std::process::id();
    let mut results: Vec<Result<()>> = Vec::with_capacity(writes.len());
    let mut files: Vec<Option<(std::path::PathBuf, File)>> = Vec::with_capacity(writes.len());
    let mut near_spares: Vec<bool> = Vec::with_capacity(writes.len());
    // Whether each directory written to shares the spares' filesystem (else its files are
    // written beside their paths, as `write_atomic` does).
    let spares_dev = fs::metadata(spares).map(|m| m.dev()).ok();
    let mut same_fs: Vec<(&Path, bool)> = Vec::new();
    for (k, w) in writes.iter().enumerate() {
        let dir = w.path.parent().unwrap_or(Path::new("."));
        let near = match same_fs.iter().find(|(d, _)| *d == dir) {
            Some((_, same)) => *same,
            None => {
                let same = spares_dev.is_some() && fs::metadata(dir).map(|m| m.dev()).ok() == spares_dev;
                same_fs.push((dir, same));
                same
            }
        };
        near_spares.push(near);
        let spare = if near {
            spares.join(tmp_name(&format!("spare{k}"), pid))
        } else {
            let name = w.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            dir.join(tmp_name(&name, pid))
        };
        let written = (|| -> Result<File> {
            full_disk(&w.path).with_context(|| format!("cannot write {}", spare.display()))?;
            if near {
                refill(&spare, pool);
            }
            let mut file = private_options()
                .write(true)
                .create(true)
                .open(&spare)
                .with_context(|| format!("cannot open {}", spare.display()))?;
            file.write_all(&w.bytes).with_context(|| format!("cannot write {}", spare.display()))?;
            file.set_len(w.bytes.len() as u64).with_context(|| format!("cannot trim {}", spare.display()))?;
            Ok(file)
        })();
        let staged = written.map(|file| (spare.clone(), file)).inspect_err(|_| {
            let _ = fs::remove_file(&spare);
        });
        match staged {
            Ok(f) => {
                files.push(Some(f));
                results.push(Ok(()));
            }
            Err(e) => {
                files.push(None);
                results.push(Err(e));
            }
        }
    }
    step(GroupStep::Written);
    // Start writeback of every file before waiting on any. Only a hint (the fsyncs below are
    // what guarantee it), so its result is not needed.
    for (_, file) in files.iter().flatten() {
        // SAFETY: sync_file_range takes a descriptor this function owns for the call's length
        // and plain integers; it touches no memory of the process.
        unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
    }
    let synced = in_parallel(files.iter().map(|slot| slot.as_ref().map(|(_, file)| file)).collect(), |file| {
        file.map_or(Ok(()), File::sync_all)
    });
    for ((i, slot), outcome) in files.iter_mut().enumerate().zip(synced) {
        if let Some((spare, _)) = slot
            && let Err(e) = outcome.unwrap_or_else(|| Err(std::io::Error::other("the thread that syncs it failed")))
        {
            results[i] = Err(e).with_context(|| format!("cannot fsync {}", spare.display()));
            let _ = fs::remove_file(&*spare);
            *slot = None;
        }
    }
    let mut dirs: Vec<(std::path::PathBuf, Vec<usize>)> = Vec::new();
    for (i, (w, slot)) in writes.iter().zip(files.iter_mut()).enumerate() {
        let Some((spare, _)) = slot.take() else { continue };
        let put = if near_spares[i] {
            replace_with(&spare, &w.path)
        } else {
            fs::rename(&spare, &w.path)
                .with_context(|| format!("cannot rename {} to {}", spare.display(), w.path.display()))
        };
        let replaced = put.and_then(|()| {
            step(GroupStep::Renamed(i));
            let Some(then) = &w.then else { return Ok(()) };
            fs::rename(&w.path, then)
                .with_context(|| format!("cannot rename {} to {}", w.path.display(), then.display()))
        });
        if let Err(e) = replaced {
            if !near_spares[i] {
                // A temporary file beside its path, if the rename did not take it.
                let _ = fs::remove_file(&spare);
            }
            results[i] = Err(e);
            continue;
        }
        let dir = w.path.parent().unwrap_or(Path::new(".")).to_path_buf();
        match dirs.iter_mut().find(|(d, _)| *d == dir) {
            Some((_, members)) => members.push(i),
            None => dirs.push((dir, vec![i])),
        }
    }
    let synced = in_parallel(dirs.iter().map(|(dir, _)| dir.as_path()).collect(), sync_dir);
    for ((_, members), outcome) in dirs.into_iter().zip(synced) {
        if let Err(e) = outcome.unwrap_or_else(|| Err(anyhow::anyhow!("the thread that syncs it failed"))) {
            for i in members {
                results[i] = Err(anyhow::anyhow!("{e:#}"));
            }
        }
    }
    step(GroupStep::Synced);
    results
}

/// How many of a group's fsyncs wait at once. Each fsync on ext4 ends in a flush of the disk's
/// cache, and the block layer serves every flush that waits while one is in flight with the
/// next one: fsyncs issued one after another pay one flush each (what bound the burst of
/// docs/benchmarks.md §20: the daemon's loop spent most of its time in them), fsyncs waiting
/// together share them. 8: a digest's group (up to 20 records, 1 directory) in 3 rounds, an
/// ingest pass's directories (one per member) in one, for 8 short-lived threads' stacks.
const SYNCS_AT_ONCE: usize = 8;

/// `f` on every input, up to [`SYNCS_AT_ONCE`] at a time on threads of their own (scoped:
/// all have returned when this does); the outcomes in the inputs' order, `None` for an input
/// whose thread panicked or could not be started (the caller fails those writes: nothing is
/// known durable). A single input runs here.
fn in_parallel<T: Send, R: Send>(inputs: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<Option<R>> {
    let n = inputs.len();
    if n <= 1 {
        return inputs.into_iter().map(|input| Some(f(input))).collect();
    }
    let lanes = n.min(SYNCS_AT_ONCE);
    let mut by_lane: Vec<Vec<(usize, T)>> = (0..lanes).map(|_| Vec::new()).collect();
    for (i, input) in inputs.into_iter().enumerate() {
        by_lane[i % lanes].push((i, input));
    }
    let f = &f;
    let run = move |lane: Vec<(usize, T)>| lane.into_iter().map(|(i, input)| (i, f(input))).collect::<Vec<_>>();
    let mut outcomes: Vec<Option<R>> = (0..n).map(|_| None).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = by_lane
            .into_iter()
            .filter_map(|lane| std::thread::Builder::new().spawn_scoped(scope, move || run(lane)).ok())
            .collect();
        for handle in handles {
            for (i, r) in handle.join().unwrap_or_default() {
                outcomes[i] = Some(r);
            }
        }
    });
    outcomes
}

/// Make the missing spare `spare` from one of `pool`'s ready files (a rename in the spares
/// directory), if there is one; else the caller's open creates it.
fn refill(spare: &Path, pool: Option<&SparePool>) {
    let Some(pool) = pool else { return };
    if fs::symlink_metadata(spare).is_ok() {
        return;
    }
    if let Some(ready) = pool.take()
        && fs::rename(&ready, spare).is_err()
    {
        let _ = fs::remove_file(&ready);
    }
}

/// Put the synced file `spare` in `path`'s place, atomically: by exchanging their names when
/// `path` exists and the filesystem can (the old contents stay behind as the spare), else by a
/// rename over it.
fn replace_with(spare: &Path, path: &Path) -> Result<()> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
        match renameat2(AT_FDCWD, spare, AT_FDCWD, path, RenameFlags::RENAME_EXCHANGE) {
            Ok(()) => return Ok(()),
            // No file there yet, a filesystem that cannot exchange, or spares kept on another
            // filesystem than the path: a plain rename (which fails on the last).
            Err(
                nix::errno::Errno::ENOENT
                | nix::errno::Errno::EINVAL
                | nix::errno::Errno::ENOSYS
                | nix::errno::Errno::EXDEV,
            ) => {}
            Err(e) => {
                return Err(e).with_context(|| format!("cannot exchange {} with {}", spare.display(), path.display()));
            }
        }
    }
    fs::rename(spare, path).with_context(|| format!("cannot rename {} to {}", spare.display(), path.display()))
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

/// 4 KiB, a page: what [`read_bounded`] makes room for before its first read. Every record
/// desk reads this way (session, launch, info, exit records, a few hundred bytes to a couple of
/// KiB) then takes one read and the one that finds its end.
const READ_BOUNDED_FIRST: usize = 4096;

/// Read all of `reader`, but never more than `limit + 1` bytes: a source of untrusted size
/// (`/dev/zero`, a huge file, an endless pipe) is refused with an error naming the limit
/// instead of growing memory without end. `what` names the source in the error.
pub fn read_bounded(reader: impl std::io::Read, limit: usize, what: &str) -> Result<Vec<u8>, BoundedReadError> {
    use std::io::Read as _;
    // Room for a whole record at once: from an empty buffer `read_to_end` reads 32 bytes, then
    // doubles, so a record of 800 bytes took six reads (issue 22: `desk ls` reads three records
    // for each session).
    let mut buf = Vec::with_capacity(READ_BOUNDED_FIRST.min(limit + 1));
    reader
        .take(limit as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|source| BoundedReadError::Io { what: what.to_string(), source })?;
    if buf.len() > limit {
        return Err(BoundedReadError::TooLarge { what: what.to_string(), limit });
    }
    Ok(buf)
}

/// [`read_bounded`] for a regular file: a read that returns less than it asked for is taken
/// as the file's end (a regular file's read is short only there), so a record that fits the
/// first buffer costs one `read`, not a second one to see the end (issue 22: `desk ls` reads a
/// few small records for each of a fleet's sessions). Not for pipes, sockets or `/proc`.
pub fn read_bounded_file(file: &File, limit: usize, what: &str) -> Result<Vec<u8>, BoundedReadError> {
    let mut buf = Vec::new();
    read_bounded_file_into(file, limit, what, &mut buf)?;
    Ok(buf)
}

/// [`read_bounded_file`] into `buf` (replacing what it held), so that a caller reading many
/// records in a row (`desk ls`: one per session) reuses one buffer instead of allocating and
/// zeroing a page for each.
pub fn read_bounded_file_into(
    mut file: &File,
    limit: usize,
    what: &str,
    buf: &mut Vec<u8>,
) -> Result<(), BoundedReadError> {
    use std::io::Read as _;
    let first = READ_BOUNDED_FIRST.min(limit + 1);
    // The whole of `buf` is readable room; a reused buffer keeps its earlier size.
    if buf.len() < first {
        buf.resize(first, 0);
    }
    let mut len = 0;
    loop {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => {
                len += n;
                if len < buf.len() {
                    break;
                }
                if len > limit {
                    return Err(BoundedReadError::TooLarge { what: what.to_string(), limit });
                }
                // Full: there may be more.
                let grown = (buf.len() * 2).min(limit + 1);
                buf.resize(grown.max(len + 1), 0);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => return Err(BoundedReadError::Io { what: what.to_string(), source }),
        }
    }
    if len > limit {
        return Err(BoundedReadError::TooLarge { what: what.to_string(), limit });
    }
    buf.truncate(len);
    Ok(())
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
pub(crate) fn tmp_name(file_name: &str, pid: u32) -> String {
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
    fn a_regular_file_is_read_whole_whatever_its_size_and_refused_past_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        for size in [0, 1, READ_BOUNDED_FIRST - 1, READ_BOUNDED_FIRST, READ_BOUNDED_FIRST + 1, 3 * READ_BOUNDED_FIRST] {
            let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            std::fs::write(&path, &bytes).unwrap();
            let file = File::open(&path).unwrap();
            assert_eq!(read_bounded_file(&file, 4 * READ_BOUNDED_FIRST, "f").unwrap(), bytes, "{size} bytes");
            let file = File::open(&path).unwrap();
            let fits = size <= READ_BOUNDED_FIRST;
            assert_eq!(
                read_bounded_file(&file, READ_BOUNDED_FIRST, "f").is_ok(),
                fits,
                "{size} bytes, limit one buffer"
            );
        }
    }

    #[test]
    fn a_group_replaces_moves_and_creates_files_and_reuses_the_old_inodes_as_spares() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        fs::write(dir.join("a.queued"), b"old a").unwrap();
        fs::write(dir.join("b.sending"), b"old b").unwrap();
        let old_a = fs::metadata(dir.join("a.queued")).unwrap().ino();
        let writes = vec![
            // A move: the record in place, then the name.
            GroupWrite { path: dir.join("a.queued"), bytes: b"new a".to_vec(), then: Some(dir.join("a.sending")) },
            // A rewrite in place.
            GroupWrite { path: dir.join("b.sending"), bytes: b"new b".to_vec(), then: None },
            // A new file.
            GroupWrite { path: dir.join("c.queued"), bytes: b"c".to_vec(), then: None },
        ];
        let spares_dir = tempfile::tempdir_in(tmp.path()).unwrap();
        let spares = spares_dir.path();
        let mut steps = Vec::new();
        let results = write_atomic_group(&writes, spares, None, |s| steps.push(s));
        assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
        assert_eq!(steps.first(), Some(&GroupStep::Written));
        assert_eq!(steps.last(), Some(&GroupStep::Synced));
        assert_eq!(fs::read(dir.join("a.sending")).unwrap(), b"new a");
        assert!(!dir.join("a.queued").exists(), "one file per record");
        assert_eq!(fs::read(dir.join("b.sending")).unwrap(), b"new b");
        assert_eq!(fs::read(dir.join("c.queued")).unwrap(), b"c");
        // The old inodes of a and b are kept as spares, beside the records, for the next group.
        let names: Vec<String> = fs::read_dir(spares)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| tmp_writer(n) == Some(std::process::id() as i32))
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        let records = fs::read_dir(dir).unwrap().flatten().filter(|e| e.path().is_file()).count();
        assert_eq!(records, 3, "nothing but the records where they are");
        let again = [GroupWrite { path: dir.join("c.queued"), bytes: b"c2".to_vec(), then: None }];
        assert!(write_atomic_group(&again, spares, None, |_| {})[0].is_ok());
        assert_eq!(fs::read(dir.join("c.queued")).unwrap(), b"c2");
        assert_eq!(fs::metadata(dir.join("c.queued")).unwrap().ino(), old_a, "no inode made for a rewrite");
    }

    #[test]
    fn a_new_file_takes_the_inode_of_a_pooled_file_and_a_spare_is_made_from_the_pool() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let spares_dir = tempfile::tempdir_in(dir).unwrap();
        let spares = spares_dir.path();
        let pool = SparePool::start(spares, 2).unwrap();
        let pooled = |names: &mut Vec<u64>| {
            names.clear();
            for e in fs::read_dir(spares).unwrap().flatten() {
                if e.file_name().to_string_lossy().starts_with(".pool") {
                    names.push(e.metadata().unwrap().ino());
                }
            }
            names.len()
        };
        let mut ready = Vec::new();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while pooled(&mut ready) < 2 {
            assert!(std::time::Instant::now() < end, "the pool did not fill");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let write = [GroupWrite { path: dir.join("n.queued"), bytes: b"new".to_vec(), then: None }];
        assert!(write_atomic_group(&write, spares, Some(&pool), |_| {})[0].is_ok());
        assert_eq!(fs::read(dir.join("n.queued")).unwrap(), b"new");
        let ino = fs::metadata(dir.join("n.queued")).unwrap().ino();
        assert!(ready.contains(&ino), "the new file is one of the pool's inodes, not one made on the way");
    }

    #[test]
    fn syncs_run_together_on_several_threads_and_come_back_in_order() {
        let threads = std::sync::Mutex::new(std::collections::HashSet::new());
        let out = in_parallel((0..20).collect(), |i: usize| {
            threads.lock().unwrap().insert(std::thread::current().id());
            // Long enough that the lanes overlap.
            std::thread::sleep(std::time::Duration::from_millis(5));
            i * 2
        });
        assert_eq!(out, (0..20).map(|i| Some(i * 2)).collect::<Vec<_>>());
        assert_eq!(threads.lock().unwrap().len(), SYNCS_AT_ONCE, "one thread per lane");
        assert_eq!(in_parallel(vec![7], |i: usize| i), vec![Some(7)], "one input runs on the caller's thread");
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
