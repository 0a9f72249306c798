//! A channel whose messages stopped reaching their members, and why.
//!
//! Owns `channels/<name>/stalled.json` (`{"version":1,"since_ms":…,"reasons":[…]}`), which
//! `desk serve` writes after an ingest pass that something stopped — damage in a conversation
//! file, a pass that failed (a full disk, a cursor that cannot be re-synchronised) — and removes
//! after a pass that nothing stopped. It is how the stall reaches people without the daemon's
//! log: `desk channel post` notes it, `desk channel ls` and the dashboard's header show it, and
//! `desk queue` lists it. Invariants: written atomically, and only when its reasons change (so
//! an unchanged stall keeps the time it began); its absence means the daemon's last pass over
//! the channel was stopped by nothing. While the daemon is down it still says what the last
//! pass found.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::io::ErrorKind;
use std::path::Path;

use desk_common::fsutil;

/// The file's name in a channel directory.
pub const STALL_FILE: &str = "stalled.json";

/// Why a channel's messages are not being delivered, since when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stall {
    pub since_ms: u64,
    /// One sentence each, naming the file or the error and what to do.
    pub reasons: Vec<String>,
}

/// `stalled.json`'s format: version 1. Derived state: one this desk cannot read is reported as
/// a stall saying so, and the next pass writes it anew.
pub const STALL_FORMAT: desk_common::format::Format = desk_common::format::Format::first("channel stall");

#[derive(Serialize, Deserialize)]
struct File {
    version: u32,
    #[serde(flatten)]
    stall: Stall,
}

/// The channel's stall as its last ingest pass recorded it (`None`: nothing stopped it). A
/// file that cannot be read as one counts as a stall saying so.
pub fn read(dir: &Path) -> Option<Stall> {
    let path = dir.join(STALL_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => {
            Some(desk_common::format::decode::<File>(&STALL_FORMAT, &bytes).map(|f| f.stall).unwrap_or_else(|e| {
                Stall {
                    since_ms: 0,
                    reasons: vec![format!(
                        "{} cannot be read ({e}); desk serve rewrites it after its next pass",
                        path.display()
                    )],
                }
            }))
        }
        Err(e) if e.kind() == ErrorKind::NotFound => None,
        Err(e) => Some(Stall { since_ms: 0, reasons: vec![format!("cannot read {}: {e}", path.display())] }),
    }
}

/// Record what stopped the channel's last pass (`reasons` empty: nothing).
pub fn record(dir: &Path, reasons: &[String], now_ms: u64) -> Result<()> {
    let path = dir.join(STALL_FILE);
    if reasons.is_empty() {
        return fsutil::remove_if_exists(&path);
    }
    let old = read(dir);
    if old.as_ref().is_some_and(|s| s.reasons == reasons) {
        return Ok(());
    }
    let since_ms = old.filter(|s| s.since_ms > 0).map_or(now_ms, |s| s.since_ms);
    let file = File { version: STALL_FORMAT.current, stall: Stall { since_ms, reasons: reasons.to_vec() } };
    let mut bytes = serde_json::to_vec_pretty(&file).context("cannot encode a stall")?;
    bytes.push(b'\n');
    fsutil::write_atomic(&path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_keeps_its_start_while_it_lasts_and_goes_with_a_clean_pass() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), None);
        record(dir.path(), &["root.md is damaged".into()], 10).unwrap();
        record(dir.path(), &["root.md is damaged".into()], 20).unwrap();
        assert_eq!(read(dir.path()), Some(Stall { since_ms: 10, reasons: vec!["root.md is damaged".into()] }));
        record(dir.path(), &["root.md is damaged".into(), "disk full".into()], 30).unwrap();
        assert_eq!(read(dir.path()).map(|s| (s.since_ms, s.reasons.len())), Some((10, 2)), "still the same stall");
        record(dir.path(), &[], 40).unwrap();
        assert_eq!(read(dir.path()), None);
    }
}
