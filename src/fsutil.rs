//! Durable small-file writes.
//!
//! Owns the one way desk replaces a file's contents: write a temporary file in the same
//! directory, fsync it, rename it over the target, fsync the directory. Invariant: after
//! [`write_atomic`] returns, a crash leaves either the old or the new contents, never a mix, and
//! the new contents survive a power loss.

use anyhow::{Context, Result};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Atomically replace `path` with `bytes` (mode 0600), durably.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().context("path has no parent directory")?;
    let file_name = path.file_name().context("path has no file name")?.to_string_lossy();
    let tmp = dir.join(format!(".{file_name}.tmp.{}", std::process::id()));
    let result = (|| -> Result<()> {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        file.write_all(bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
        file.sync_all().with_context(|| format!("cannot fsync {}", tmp.display()))?;
        fs::rename(&tmp, path).with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
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
}
