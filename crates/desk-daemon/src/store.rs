//! Delivery items on disk.
//!
//! Owns the files under `<state>/delivery/`: `queue/<session>/<id>.<state>` (one file per item,
//! its whole JSON record, the extension naming its state), `intake/<id>.json` (prompts written
//! by `desk send`, durable before `send` returns) and their `.consumed` tombstones, and
//! `paused.json`. Invariants: every write is atomic and durable (temporary file, fsync,
//! rename, fsync of the directory); an item has exactly one file at any instant — a
//! transition first rewrites the record in place, then renames it to its new extension, so a
//! crash in between leaves the old state with the newer record, never two files and never
//! none; an intake file is tombstoned only after its queued record is durable.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use desk_common::format::{self, Format, SetAside};
use desk_common::fsutil::spare_pool::{self, SparePool};
use desk_common::fsutil::{self, GroupStep, GroupWrite};
use desk_common::paths::{SessionName, ensure_private_dir};
use desk_core::delivery::item::{Item, ItemId, State};

/// An item record: `queue/<session>/<id>.<state>` and `intake/<id>.json`. Version 1 is the
/// layout of [`Item`]; records written before desk stamped versions have no `version` key.
pub const ITEM_FORMAT: Format = Format::first("delivery item");

/// `paused.json`, the operator's holds ([`Pauses`] carries its own `version`).
pub const PAUSES_FORMAT: Format = Format::first("delivery holds");

/// The daemon's spare files for group commits (`fsutil::write_atomic_group`), under the
/// store's root: records go there to be written, and the records they replace come back there.
pub const SPARES: &str = ".spares";

/// Delivered and dropped items (and intake tombstones) are kept this long for inspection.
pub const KEEP_FINISHED_MS: u64 = 24 * 3600 * 1000;

pub use desk_common::failpoint::{failpoint, failpoints_armed};

/// The steps a failpoint can name.
pub const FAILPOINTS: [&str; 11] = [
    "after-queue-write",
    "batch-written",
    "batch-synced",
    "after-ingest",
    "after-claim",
    "before-paste",
    "after-paste",
    "before-submit",
    "after-submit",
    "mid-rename",
    "mid-rename-settle",
];

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Pauses {
    pub version: u32,
    pub sessions: BTreeMap<String, Pause>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pause {
    pub reason: String,
    pub since_ms: u64,
}

/// The state an item file stands for. A move writes the record first (fsync) and renames
/// second, so a file whose record names another state than its extension is a move that a
/// crash cut between the two, and the record says where the item went: the daemon had decided
/// it durably (verified it delivered, stuck it — also out of `delivered`, when the agent that
/// had queued it ended without taking it —, settled a stuck one by its late hook, released it
/// with nothing typed, dropped it). The one exception is a record that says `sending`: a claim
/// (or a force) that never became durable. Nothing was typed for it, so the extension stands.
fn settled_state(extension: State, record: State) -> State {
    if record != extension && record != State::Sending { record } else { extension }
}

/// [`settled_state`], finishing the cut rename on disk. If that fails the file keeps its
/// extension's state (and is settled from evidence, as any `sending` item): one item's file
/// never stops the daemon from starting.
fn settle_torn_rename(path: &Path, extension: State, record: State) -> Result<State> {
    let state = settled_state(extension, record);
    if state == extension {
        return Ok(state);
    }
    let to = path.with_extension(state.as_str());
    tracing::warn!(item = %path.display(), to = state.as_str(), "finishing a state change a crash cut short");
    let finished = fs::rename(path, &to)
        .with_context(|| format!("cannot rename {} to {}", path.display(), to.display()))
        .and_then(|()| path.parent().map_or(Ok(()), fsutil::sync_dir));
    match finished {
        Ok(()) => Ok(state),
        Err(e) => {
            tracing::warn!("{e:#}; leaving it {}", extension.as_str());
            Ok(extension)
        }
    }
}

/// A file the store could not read; it is moved aside (`.bad`), never silently deleted.
#[derive(Debug, Clone)]
pub struct Problem {
    pub path: PathBuf,
    pub error: String,
}

/// Why an intake file was not queued. Callers branch on it: a record that does not parse will
/// never parse and is set aside; anything else (a full disk, an I/O error, a missing
/// directory) may pass on a retry, so the intake file must stay where it is.
#[derive(Debug)]
pub enum IngestError {
    Unparsable(String),
    Transient(anyhow::Error),
}

impl std::fmt::Display for IngestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IngestError::Unparsable(e) => write!(f, "{e}"),
            IngestError::Transient(e) => write!(f, "{e:#}"),
        }
    }
}

/// An intake file taken into the queue: its item, and whether this call queued it (`false`
/// when a crash had cut a previous ingest between the queue write and the tombstone).
#[derive(Debug, Clone, PartialEq)]
pub struct Ingested {
    pub item: Item,
    pub fresh: bool,
}

pub struct Store {
    root: PathBuf,
    /// Empty files made ahead of need by a thread, for new records' inodes (the daemon's; see
    /// [`Store::start_spare_pool`]).
    pool: Option<SparePool>,
}

impl Store {
    /// Open (creating) the store under the state directory.
    pub fn open(state: &Path) -> Result<Store> {
        let root = state.join("delivery");
        for dir in [root.clone(), root.join("queue"), root.join("intake"), root.join(SPARES)] {
            ensure_private_dir(&dir)?;
        }
        Ok(Store { root, pool: None })
    }

    /// Keep empty files ready for the records of new items (`fsutil::spare_pool`): a
    /// channel's ingest pass then creates no inode on the daemon's loop. The daemon's, started
    /// after its sweep of temporary files; a store without one creates its files as it writes.
    pub fn start_spare_pool(&mut self) -> Result<()> {
        let pool = SparePool::start(&self.root.join(SPARES), spare_pool::DEFAULT_SIZE)
            .context("cannot start the spare files' thread")?;
        self.pool = Some(pool);
        Ok(())
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn session_dir(&self, session: &str) -> Result<PathBuf> {
        let name = SessionName::parse(session).map_err(|e| anyhow::anyhow!("bad session name in an item: {e}"))?;
        Ok(self.root.join("queue").join(name.as_str()))
    }

    fn item_path(&self, session: &str, id: &ItemId, state: State) -> Result<PathBuf> {
        Ok(self.session_dir(session)?.join(format!("{id}.{}", state.as_str())))
    }

    /// Make `item` durable in its state; `from` is the state it has on disk now (equal to
    /// `item.state` for a new item or a record update).
    pub fn persist(&self, item: &Item, from: State) -> Result<()> {
        self.persist_group(&[(item.clone(), from)], |_| {}).remove(0)
    }

    /// Make many items durable in their states at once, sharing the waits on the disk (a
    /// group commit, [`fsutil::write_atomic_group`]): every record is written, all are synced,
    /// then renamed, then each queue directory is synced once. Each entry is (item, the state
    /// it has on disk now); an item appears at most once. `step` sees the group's steps (the
    /// daemon's crash points). One result per entry, in order; the caller acts on none of them
    /// before this returns.
    pub fn persist_group(&self, items: &[(Item, State)], mut step: impl FnMut(GroupStep)) -> Vec<Result<()>> {
        let mut writes = Vec::with_capacity(items.len());
        let mut results: Vec<Option<Result<()>>> = Vec::with_capacity(items.len());
        let mut made: Vec<PathBuf> = Vec::new();
        // Which entry each write is, and whether it moves a claim (for the crash points).
        let mut of_write = Vec::with_capacity(items.len());
        for (i, (item, from)) in items.iter().enumerate() {
            let write = (|| -> Result<GroupWrite> {
                let dir = self.session_dir(&item.session)?;
                if !made.contains(&dir) {
                    ensure_private_dir(&dir)?;
                    made.push(dir);
                }
                let bytes = format::encode(&ITEM_FORMAT, item)?;
                let old = self.item_path(&item.session, &item.id, *from)?;
                let new = self.item_path(&item.session, &item.id, item.state)?;
                if *from == item.state || !old.exists() {
                    return Ok(GroupWrite { path: new, bytes, then: None });
                }
                // The record first (in place), then the state (by rename): one file at every
                // instant.
                Ok(GroupWrite { path: old, bytes, then: Some(new) })
            })();
            match write {
                Ok(w) => {
                    writes.push(w);
                    of_write.push((i, *from == State::Sending));
                    results.push(None);
                }
                Err(e) => results.push(Some(Err(e))),
            }
        }
        let moves: Vec<bool> = writes.iter().map(|w| w.then.is_some()).collect();
        let written = fsutil::write_atomic_group(&writes, &self.root.join(SPARES), self.pool.as_ref(), |s| {
            if let GroupStep::Renamed(w) = s
                && moves[w]
            {
                failpoint(if of_write[w].1 { "mid-rename-settle" } else { "mid-rename" });
            }
            step(s);
        });
        for ((i, _), result) in of_write.into_iter().zip(written) {
            results[i] = Some(result);
        }
        results.into_iter().map(|r| r.unwrap_or_else(|| Err(anyhow::anyhow!("not written")))).collect()
    }

    /// Replace another durable record of the daemon's (a channel's ingest cursor) atomically
    /// and durably as the item records are, through the spares: a record rewritten in place
    /// keeps its inode. The guarantees of [`fsutil::write_atomic`].
    pub fn write_beside(&self, path: &Path, bytes: Vec<u8>) -> Result<()> {
        let write = GroupWrite { path: path.to_path_buf(), bytes, then: None };
        let mut results = fsutil::write_atomic_group(&[write], &self.root.join(SPARES), self.pool.as_ref(), |_| {});
        results.remove(0)
    }

    /// Every item record in the queues, with the state its extension names.
    fn item_files(&self) -> Result<Vec<(PathBuf, State)>> {
        let mut files = Vec::new();
        for session in read_dir(&self.root.join("queue"))? {
            if !session.is_dir() {
                continue;
            }
            for path in read_dir(&session)? {
                if let Some(state) = path.extension().and_then(|e| e.to_str()).and_then(State::from_ext) {
                    files.push((path, state));
                }
            }
        }
        Ok(files)
    }

    /// Every item on disk (all states), with files that could not be read.
    pub fn load_all(&self) -> Result<(Vec<Item>, Vec<Problem>)> {
        let mut items = Vec::new();
        let mut problems = Vec::new();
        for (path, state) in self.item_files()? {
            match read_item(&path) {
                Ok(mut item) => {
                    item.state = settle_torn_rename(&path, state, item.state)?;
                    items.push(item);
                }
                Err(e) => {
                    let error = match format::set_aside(&path, format!("{:#}", e.root_cause())) {
                        Ok(aside) => aside.message(),
                        Err(moved) => format!("{e:#}; and it cannot be set aside: {moved:#}"),
                    };
                    problems.push(Problem { path, error });
                }
            }
        }
        items.sort_by(|a, b| a.id.cmp(&b.id));
        Ok((items, problems))
    }

    /// Every item on disk and every intake file not yet ingested, without changing anything
    /// (no torn rename finished, no unreadable file set aside): what `desk queue` and `desk
    /// stuck` show while the daemon is down. Unreadable files come back as problems.
    pub fn read_only_view(&self) -> Result<(Vec<Item>, Vec<Item>, Vec<Problem>)> {
        let mut items = Vec::new();
        let mut problems = Vec::new();
        for (path, state) in self.item_files()? {
            match read_item(&path) {
                Ok(mut item) => {
                    item.state = settled_state(state, item.state);
                    items.push(item);
                }
                Err(e) => problems.push(Problem { path, error: format!("{e:#}") }),
            }
        }
        let mut intake = Vec::new();
        for path in self.pending_intake()? {
            match read_item(&path) {
                Ok(item) => intake.push(item),
                Err(e) => problems.push(Problem { path, error: format!("{e:#}") }),
            }
        }
        items.sort_by(|a, b| a.id.cmp(&b.id));
        intake.sort_by(|a, b| a.id.cmp(&b.id));
        Ok((items, intake, problems))
    }

    /// One item, in whatever state it is (read-only: a torn rename is reported as the state
    /// the next daemon start will settle it to).
    pub fn find(&self, id: &ItemId) -> Result<Option<Item>> {
        let queue = self.root.join("queue");
        for session in read_dir(&queue)? {
            for state in State::ALL {
                let path = session.join(format!("{id}.{}", state.as_str()));
                if path.exists() {
                    let mut item = read_item(&path)?;
                    item.state = settled_state(state, item.state);
                    return Ok(Some(item));
                }
            }
        }
        Ok(None)
    }

    /// The ids of every item on disk (queued in any state, or waiting in the intake) that
    /// start or end with `part` (case-insensitive), sorted: how an operator's shortened id is
    /// found (people copy the start of an id, or its end).
    pub fn ids_with_prefix_or_suffix(&self, part: &str) -> Result<Vec<ItemId>> {
        let part = part.trim().to_ascii_uppercase();
        let mut files = read_dir(&self.root.join("intake"))?;
        files.extend(self.item_files()?.into_iter().map(|(path, _)| path));
        let mut ids: Vec<ItemId> = files
            .iter()
            .filter_map(|p| p.file_name()?.to_str()?.split('.').next().and_then(ItemId::parse))
            .filter(|id| id.as_str().starts_with(&part) || id.as_str().ends_with(&part))
            .collect();
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    /// An item still waiting in the intake (written by `desk send`, not yet ingested).
    pub fn find_intake(&self, id: &ItemId) -> Result<Option<Item>> {
        let path = self.intake_path(id, "json");
        if !path.exists() {
            return Ok(None);
        }
        read_item(&path).map(Some)
    }

    /// The item record in one file (an intake file, say), as it is.
    pub fn read_record(path: &Path) -> Result<Item> {
        read_item(path)
    }

    /// Whether any file of this item exists (for intake de-duplication after a crash).
    pub fn exists(&self, id: &ItemId, session: &str) -> Result<bool> {
        for state in State::ALL {
            if self.item_path(session, id, state)?.exists() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    // ----- intake -----

    fn intake_path(&self, id: &ItemId, ext: &str) -> PathBuf {
        self.root.join("intake").join(format!("{id}.{ext}"))
    }

    /// `desk send`'s half: the prompt is durable once this returns.
    pub fn write_intake(&self, item: &Item) -> Result<()> {
        let bytes = format::encode(&ITEM_FORMAT, item)?;
        fsutil::write_atomic(&self.intake_path(&item.id, "json"), &bytes)
    }

    /// Intake files waiting to be ingested, oldest first.
    pub fn pending_intake(&self) -> Result<Vec<PathBuf>> {
        let mut files: Vec<PathBuf> = read_dir(&self.root.join("intake"))?
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        Ok(files)
    }

    pub fn intake_file(&self, id: &ItemId) -> PathBuf {
        self.intake_path(id, "json")
    }

    /// Move one intake file into the queue. On an error the intake file is left exactly where
    /// it was: the caller sets it aside only when [`IngestError::Unparsable`].
    pub fn ingest(&self, path: &Path) -> Result<Ingested, IngestError> {
        let bytes = fs::read(path)
            .with_context(|| format!("cannot read {}", path.display()))
            .map_err(IngestError::Transient)?;
        let item: Item = format::decode(&ITEM_FORMAT, &bytes)
            .map_err(|e| IngestError::Unparsable(format!("{}: {e}", path.display())))?;
        if item.state != State::Queued {
            return Err(IngestError::Unparsable(format!("{} is not a queued item", path.display())));
        }
        if SessionName::parse(&item.session).is_err() {
            return Err(IngestError::Unparsable(format!("{} names no valid session", path.display())));
        }
        let queue = || -> Result<bool> {
            let fresh = !self.exists(&item.id, &item.session)?;
            if fresh {
                self.persist(&item, State::Queued)?;
                failpoint("after-queue-write");
            }
            let mut tomb = path.to_path_buf();
            tomb.set_extension("consumed");
            fs::rename(path, &tomb).with_context(|| format!("cannot tombstone {}", path.display()))?;
            fsutil::sync_dir(&self.root.join("intake"))?;
            Ok(fresh)
        };
        let fresh = queue().map_err(IngestError::Transient)?;
        Ok(Ingested { item, fresh })
    }

    /// Set an intake file that cannot be parsed aside (`<id>.json.bad`), durably: it is never
    /// ingested, and never deleted.
    pub fn set_aside(&self, path: &Path) -> Result<PathBuf> {
        Ok(format::set_aside(path, "not a queued item")?.aside)
    }

    /// Every record set aside as unreadable (intake files and queue records ending `.bad`),
    /// with why it could not be read.
    pub fn set_aside_records(&self) -> Result<Vec<Problem>> {
        let mut dirs = vec![self.root.join("intake")];
        dirs.extend(read_dir(&self.root.join("queue"))?.into_iter().filter(|p| p.is_dir()));
        let mut problems = Vec::new();
        for dir in dirs {
            for path in read_dir(&dir)? {
                if path.extension().is_none_or(|e| e != "bad") {
                    continue;
                }
                let error = match read_item(&path) {
                    Ok(item) if item.state != State::Queued && dir.ends_with("intake") => "not a queued item".into(),
                    Ok(_) => "readable now; rename it without .bad to retry it".into(),
                    Err(e) => format!("{:#}", e.root_cause()),
                };
                problems.push(Problem { path, error });
            }
        }
        problems.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(problems)
    }

    /// The set-aside record of this item id, if any.
    pub fn find_set_aside(&self, id: &ItemId) -> Result<Option<Problem>> {
        let name = id.to_string();
        Ok(self.set_aside_records()?.into_iter().find(|p| {
            p.path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.split('.').next() == Some(name.as_str()))
        }))
    }

    /// Remove finished items and tombstones older than [`KEEP_FINISHED_MS`].
    pub fn sweep(&self, now_ms: u64) -> Result<usize> {
        let cutoff = std::time::SystemTime::UNIX_EPOCH
            + std::time::Duration::from_millis(now_ms.saturating_sub(KEEP_FINISHED_MS));
        let old = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).is_ok_and(|t| t < cutoff);
        let mut removed = 0;
        for session in read_dir(&self.root.join("queue"))? {
            for path in read_dir(&session)? {
                let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
                if matches!(ext, "delivered" | "dropped") && old(&path) {
                    fsutil::remove_if_exists(&path)?;
                    removed += 1;
                }
            }
        }
        for path in read_dir(&self.root.join("intake"))? {
            if path.extension().is_some_and(|e| e == "consumed") && old(&path) {
                fsutil::remove_if_exists(&path)?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    // ----- pauses -----

    fn pauses_path(&self) -> PathBuf {
        self.root.join("paused.json")
    }

    /// The operator's pauses. A file that cannot be read is an error here (failing open would
    /// silently resume every held session); the daemon's start-up uses [`Store::restore_pauses`].
    pub fn load_pauses(&self) -> Result<Pauses> {
        let path = self.pauses_path();
        match fs::read(&path) {
            Ok(bytes) => format::decode(&PAUSES_FORMAT, &bytes)
                .with_context(|| format!("{} cannot be read; fix or remove it", path.display())),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                Ok(Pauses { version: PAUSES_FORMAT.current, ..Pauses::default() })
            }
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// The pauses at start-up, which never fails on the file's content: a file this desk
    /// cannot read (damaged, or written by a newer desk) is set aside, and every session with
    /// a queue is held in its place, durably, with a reason naming the file — it may have held
    /// any of them, and resuming a held session is the operator's call, never a default.
    pub fn restore_pauses(&self, now_ms: u64) -> Result<(Pauses, Option<SetAside>)> {
        let path = self.pauses_path();
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok((self.load_pauses()?, None)),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let error = match format::decode::<Pauses>(&PAUSES_FORMAT, &bytes) {
            Ok(pauses) => return Ok((pauses, None)),
            Err(e) => e,
        };
        let aside = format::set_aside(&path, error.to_string())?;
        let reason = format!(
            "the holds file could not be read and was kept as {}; check it, then resume with desk resume",
            aside.aside.display()
        );
        let mut pauses = Pauses { version: PAUSES_FORMAT.current, ..Pauses::default() };
        for dir in read_dir(&self.root.join("queue"))? {
            if let (true, Some(name)) = (dir.is_dir(), dir.file_name().and_then(|n| n.to_str())) {
                pauses.sessions.insert(name.to_string(), Pause { reason: reason.clone(), since_ms: now_ms });
            }
        }
        self.save_pauses(&pauses)?;
        Ok((pauses, Some(aside)))
    }

    pub fn save_pauses(&self, pauses: &Pauses) -> Result<()> {
        fsutil::write_atomic(&self.pauses_path(), &serde_json::to_vec_pretty(pauses)?)
    }
}

fn read_dir(dir: &Path) -> Result<Vec<PathBuf>> {
    match fs::read_dir(dir) {
        Ok(entries) => Ok(entries.filter_map(|e| e.ok().map(|e| e.path())).collect()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| format!("cannot list {}", dir.display())),
    }
}

fn read_item(path: &Path) -> Result<Item> {
    let bytes = fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    format::decode(&ITEM_FORMAT, &bytes).with_context(|| format!("{} cannot be read", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use desk_core::delivery::item::When;

    fn item(session: &str) -> Item {
        Item::new(ItemId::sequential(1), session.into(), Some(1), "hello".into(), When::Now, "t".into(), 1)
    }

    fn files(store: &Store, session: &str) -> Vec<String> {
        let mut v: Vec<String> = read_dir(&store.root.join("queue").join(session))
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_transition_leaves_exactly_one_file() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path()).unwrap();
        let mut it = item("s");
        store.persist(&it, State::Queued).unwrap();
        assert_eq!(files(&store, "s"), vec![format!("{}.queued", it.id)]);
        it.state = State::Sending;
        it.note(2, "claimed", "attempt 1");
        store.persist(&it, State::Queued).unwrap();
        assert_eq!(files(&store, "s"), vec![format!("{}.sending", it.id)]);
        let (loaded, problems) = store.load_all().unwrap();
        assert!(problems.is_empty());
        assert_eq!(loaded, vec![it.clone()]);
        assert_eq!(store.find(&it.id).unwrap(), Some(it));
    }

    #[test]
    fn a_rename_cut_by_a_crash_is_settled_by_the_record_unless_it_is_a_claim() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path()).unwrap();
        let dir = store.session_dir("s").unwrap();
        ensure_private_dir(&dir).unwrap();
        // A `.sending` file whose record says delivered: the move out of sending was cut.
        let mut done = item("s");
        done.state = State::Delivered;
        fsutil::write_atomic(&dir.join(format!("{}.sending", done.id)), &serde_json::to_vec(&done).unwrap()).unwrap();
        // A `.queued` file whose record says sending: the claim was cut; it stays queued.
        let mut claim = Item::new(ItemId::sequential(5), "s".into(), Some(1), "hi".into(), When::Now, "t".into(), 5);
        claim.state = State::Sending;
        fsutil::write_atomic(&dir.join(format!("{}.queued", claim.id)), &serde_json::to_vec(&claim).unwrap()).unwrap();
        // A `.delivered` file whose record says stuck: a prompt the agent had queued, stuck when
        // that agent ended without taking it; the rename was cut. It must not stay delivered.
        let mut unpaid = Item::new(ItemId::sequential(6), "s".into(), Some(1), "q".into(), When::Now, "t".into(), 6);
        unpaid.state = State::Stuck;
        let path = dir.join(format!("{}.delivered", unpaid.id));
        fsutil::write_atomic(&path, &serde_json::to_vec(&unpaid).unwrap()).unwrap();
        assert_eq!(store.find(&done.id).unwrap().map(|i| i.state), Some(State::Delivered), "reported as it will be");
        assert_eq!(store.find(&unpaid.id).unwrap().map(|i| i.state), Some(State::Stuck));
        assert_eq!(files(&store, "s").len(), 3);
        let (loaded, _) = store.load_all().unwrap();
        let state_of = |id: &ItemId| loaded.iter().find(|i| &i.id == id).map(|i| i.state);
        assert_eq!(
            (state_of(&done.id), state_of(&claim.id), state_of(&unpaid.id)),
            (Some(State::Delivered), Some(State::Queued), Some(State::Stuck))
        );
        let mut want =
            vec![format!("{}.delivered", done.id), format!("{}.queued", claim.id), format!("{}.stuck", unpaid.id)];
        want.sort();
        assert_eq!(files(&store, "s"), want);
    }

    #[test]
    fn the_sweep_forgets_only_finished_items_and_only_after_a_day() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path()).unwrap();
        let mut kept = Vec::new();
        for (i, state) in State::ALL.into_iter().enumerate() {
            let mut it =
                Item::new(ItemId::sequential(10 + i as u64), "s".into(), Some(1), "x".into(), When::Now, "t".into(), 1);
            it.state = state;
            store.persist(&it, state).unwrap();
            if !matches!(state, State::Delivered | State::Dropped) {
                kept.push(format!("{}.{}", it.id, state.as_str()));
            }
        }
        let now = desk_common::clock::now_ms();
        assert_eq!(store.sweep(now).unwrap(), 0, "nothing is a day old yet");
        assert_eq!(files(&store, "s").len(), State::ALL.len());
        let removed = store.sweep(now + KEEP_FINISHED_MS + 60_000).unwrap();
        assert_eq!(removed, 2);
        kept.sort();
        assert_eq!(files(&store, "s"), kept, "queued, sending and stuck items are never swept");
    }

    #[test]
    fn intake_is_ingested_once_even_after_a_crash_before_the_tombstone() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path()).unwrap();
        let it = item("s");
        store.write_intake(&it).unwrap();
        let path = store.pending_intake().unwrap().remove(0);
        // Simulate the crash: the queued record exists but the intake file was not tombstoned.
        store.persist(&it, State::Queued).unwrap();
        assert!(!store.ingest(&path).unwrap().fresh, "already queued: not ingested twice");
        assert!(store.pending_intake().unwrap().is_empty());
        assert_eq!(store.load_all().unwrap().0.len(), 1);
        // A fresh one is ingested and returned.
        let other = item("s");
        store.write_intake(&other).unwrap();
        let path = store.intake_file(&other.id);
        assert_eq!(store.ingest(&path).unwrap(), Ingested { item: other, fresh: true });
    }

    #[test]
    fn an_ingest_that_cannot_write_leaves_the_intake_file_in_place() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path()).unwrap();
        let it = item("s");
        store.write_intake(&it).unwrap();
        let path = store.intake_file(&it.id);
        // The session's queue directory cannot be created: a file is in its way.
        fs::write(store.root.join("queue").join("s"), b"").unwrap();
        let err = store.ingest(&path).unwrap_err();
        assert!(matches!(err, IngestError::Transient(_)), "{err}");
        assert!(path.exists(), "the prompt is still in the intake");
        assert!(store.set_aside_records().unwrap().is_empty());
        // Once the obstacle is gone, the same file is ingested.
        fs::remove_file(store.root.join("queue").join("s")).unwrap();
        assert!(store.ingest(&path).unwrap().fresh);
        assert!(!path.exists());
    }

    #[test]
    fn an_unparsable_intake_file_is_reported_as_such_and_listed_once_set_aside() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path()).unwrap();
        let path = store.root.join("intake").join("01ARZ3NDEKTSV4RRFFQ69G5FAV.json");
        fs::write(&path, b"{\"half\":").unwrap();
        let err = store.ingest(&path).unwrap_err();
        assert!(matches!(err, IngestError::Unparsable(_)), "{err}");
        let bad = store.set_aside(&path).unwrap();
        assert!(bad.ends_with("01ARZ3NDEKTSV4RRFFQ69G5FAV.json.bad") && bad.exists() && !path.exists());
        let listed = store.set_aside_records().unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].path, bad);
        assert!(listed[0].error.contains("EOF"), "{}", listed[0].error);
        let id = ItemId::parse("01ARZ3NDEKTSV4RRFFQ69G5FAV").unwrap();
        assert_eq!(store.find_set_aside(&id).unwrap().map(|p| p.path), Some(bad));
    }

    #[test]
    fn unreadable_records_are_moved_aside_and_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path()).unwrap();
        let dir = store.root.join("queue").join("s");
        ensure_private_dir(&dir).unwrap();
        fs::write(dir.join("01ARZ3NDEKTSV4RRFFQ69G5FAV.queued"), b"{not json").unwrap();
        let (items, problems) = store.load_all().unwrap();
        assert!(items.is_empty());
        assert_eq!(problems.len(), 1);
        assert!(dir.join("01ARZ3NDEKTSV4RRFFQ69G5FAV.queued.bad").exists());
    }

    #[test]
    fn a_corrupt_pause_file_fails_closed() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(tmp.path()).unwrap();
        let mut p = store.load_pauses().unwrap();
        p.sessions.insert("a".into(), Pause { reason: "lunch".into(), since_ms: 5 });
        store.save_pauses(&p).unwrap();
        assert_eq!(store.load_pauses().unwrap().sessions["a"].reason, "lunch");
        fs::write(store.pauses_path(), b"garbage").unwrap();
        assert!(store.load_pauses().is_err());
    }
}
