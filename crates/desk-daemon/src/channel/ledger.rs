//! The ingest ledger: which messages ingest has turned into delivery items.
//!
//! Owns `channels/<name>/ingested.log`: one message id per line (26 characters and a newline, so
//! every line is [`LINE`] bytes), appended by `desk serve` and never rewritten. The cursor says
//! where ingest goes on in a file; the ledger says what it did, and is what a file out of step
//! with its cursor is checked against (`desk_core::channel::cursor`): a message whose id is
//! here is never turned into items again — even once the delivery store has swept its
//! delivered items (after a day), which is why the items' fixed ids alone could not say so.
//! Invariants: an id is appended only after every item of its message is durable, and before
//! the cursor passes it (so the ledger holds every message the cursor passed, and an id missing
//! after a crash belongs to a message whose items the next pass finds by their fixed ids);
//! appends are whole lines followed by fsync; a torn last line (a crash mid-append) is cut
//! before the next append and ignored by readers; any other line that is not an id is damage,
//! and a damaged ledger is not used. Only the daemon writes it, one pass at a time.

use anyhow::{Context, Result, bail};
use std::collections::HashSet;
use std::fs;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use desk_common::fsutil;
use desk_core::delivery::item::ItemId;

/// The ledger's file name in a channel directory.
pub const LEDGER_FILE: &str = "ingested.log";

/// Bytes per line: an item id (26 characters) and a newline.
pub const LINE: usize = 27;

pub fn path(dir: &Path) -> PathBuf {
    dir.join(LEDGER_FILE)
}

/// Whether the channel in `dir` has a ledger (a channel last ingested by an older desk has
/// none until its first pass makes one).
pub fn exists(dir: &Path) -> bool {
    path(dir).is_file()
}

fn lines(ids: &[ItemId]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(ids.len() * LINE);
    for id in ids {
        bytes.extend_from_slice(id.as_str().as_bytes());
        bytes.push(b'\n');
    }
    bytes
}

/// Create the ledger with `ids` (none, for a channel nothing was ingested of yet), atomically
/// and durably.
pub fn create(dir: &Path, ids: &[ItemId]) -> Result<()> {
    fsutil::write_atomic(&path(dir), &lines(ids))
}

/// Record that `ids` were ingested: their lines appended whole, then fsync. A torn last line
/// left by a crash is cut first.
pub fn append(dir: &Path, ids: &[ItemId]) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let path = path(dir);
    let mut file = desk_common::fsutil::private_options()
        .read(true)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let len = file.metadata().with_context(|| format!("cannot inspect {}", path.display()))?.len();
    let torn = len % LINE as u64;
    if torn > 0 {
        file.set_len(len - torn).with_context(|| format!("cannot cut the torn line of {}", path.display()))?;
    }
    use std::io::Seek;
    file.seek(std::io::SeekFrom::End(0)).with_context(|| format!("cannot seek in {}", path.display()))?;
    file.write_all(&lines(ids)).with_context(|| format!("cannot append to {}", path.display()))?;
    file.sync_all().with_context(|| format!("cannot fsync {}", path.display()))
}

/// Every id in the ledger; `None` if there is none. Damage (a whole line that is not an id) is
/// an error naming the line.
pub fn read(dir: &Path) -> Result<Option<HashSet<ItemId>>> {
    let path = path(dir);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut ids = HashSet::with_capacity(bytes.len() / LINE);
    // A last line shorter than LINE is torn (a crash mid-append): not an id, not damage.
    for (n, line) in bytes.chunks_exact(LINE).enumerate() {
        let id = std::str::from_utf8(&line[..LINE - 1]).ok().and_then(ItemId::parse);
        match (id, line[LINE - 1]) {
            (Some(id), b'\n') => {
                ids.insert(id);
            }
            _ => bail!("{} is damaged at line {}: not a message id", path.display(), n + 1),
        }
    }
    Ok(Some(ids))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_appended_read_back_and_a_torn_line_is_cut_before_the_next_append() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path()).unwrap().is_none());
        let ids: Vec<ItemId> = (1..=3).map(ItemId::sequential).collect();
        create(dir.path(), &ids[..1]).unwrap();
        append(dir.path(), &ids[1..2]).unwrap();
        // A crash mid-append leaves part of a line.
        let mut f = std::fs::OpenOptions::new().append(true).open(path(dir.path())).unwrap();
        f.write_all(&ids[2].as_str().as_bytes()[..10]).unwrap();
        let got = read(dir.path()).unwrap().unwrap();
        assert_eq!(got, ids[..2].iter().cloned().collect());
        append(dir.path(), &ids[2..]).unwrap();
        assert_eq!(read(dir.path()).unwrap().unwrap(), ids.iter().cloned().collect());
        assert_eq!(fs::metadata(path(dir.path())).unwrap().len(), 3 * LINE as u64);
    }

    #[test]
    fn a_line_that_is_not_an_id_is_damage() {
        let dir = tempfile::tempdir().unwrap();
        create(dir.path(), &[ItemId::sequential(1)]).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(path(dir.path())).unwrap();
        f.write_all(b"this line is no message id\n").unwrap();
        let err = read(dir.path()).unwrap_err();
        assert!(format!("{err:#}").contains("damaged at line 2"), "{err:#}");
    }
}
