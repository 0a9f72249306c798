//! Empty files made ahead of need, for the group commit's new records.
//!
//! Owns the pool of spare files that [`fsutil::write_atomic_group`](crate::fsutil::write_atomic_group)
//! takes a new record's inode from. A record rewritten in place reuses the inode it replaces
//! (its spare is exchanged with it), but a new record — every item a channel's ingest pass or
//! an intake makes — needs an inode of its own, and creating one on ext4 without a journal
//! scans past every recently freed inode of its block group (`recently_deleted`): during a
//! burst of new items that was most of the daemon's time, spent inside the group commit that
//! everything after it waits on. A pool moves that creation off the loop: a thread of its own
//! creates empty files (`.pool<n>.tmp.<pid>`, named like `fsutil`'s temporary files so the next
//! start sweeps what a killed process left) in the spares directory, keeping a few ready, and
//! more as they are asked for (up to `size`: a daemon that makes few items makes few files
//! ahead); a group commit takes one by renaming it within that directory (no inode made, none
//! freed). Invariants: a pooled file is empty, unsynced and named by nobody but the pool until
//! taken, so a crash at any point leaves only files the sweep removes; nothing durable depends
//! on the pool (an empty pool, or one whose thread stopped on an error, leaves the group commit
//! creating its files itself, as before); the pool's thread touches only the spares directory.
//! A part of `fsutil` (its naming of temporary files and its way of opening files); depends on
//! nothing else of desk.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::sync::{Arc, Mutex};

use super::{private_options, tmp_name};

/// The most files a pool keeps ready by default: a burst's new items (docs/benchmarks.md §20:
/// 4,000 in about 6 s, some 700 a second) find the pool ahead of them for a while and the
/// thread refilling it beside the loop after that, while the files cost an inode each (no data
/// blocks) and are made only as new items ask for them.
pub const DEFAULT_SIZE: usize = 256;

/// Files kept ready before any is asked for: a daemon's first new items (a `desk send`, a
/// channel's first message to a few members) find them, and a daemon that makes none (most of
/// the test suite's) creates no more than these.
const FIRST: usize = 8;

/// What the pool's thread and its takers share.
#[derive(Debug, Default)]
struct Shared {
    stop: AtomicBool,
    /// How many files have been asked for (taken or not): the pool keeps `FIRST` more than
    /// this ready, up to its size.
    asked: AtomicUsize,
    /// How many were taken.
    taken: AtomicUsize,
}

/// A pool of empty spare files kept full by a thread (see the module's documentation).
#[derive(Debug)]
pub struct SparePool {
    ready: Mutex<Receiver<PathBuf>>,
    shared: Arc<Shared>,
    thread: std::thread::Thread,
    dir: PathBuf,
}

impl SparePool {
    /// Start a thread that keeps up to `size` empty files ready in `dir` (the spares directory:
    /// same filesystem as the records, nothing else in it).
    pub fn start(dir: &Path, size: usize) -> std::io::Result<SparePool> {
        let (tx, rx) = sync_channel(size.max(1));
        let shared = Arc::new(Shared::default());
        let (thread_dir, thread_shared) = (dir.to_path_buf(), shared.clone());
        let size = size.max(1);
        let thread = std::thread::Builder::new()
            .name("spare-pool".into())
            .spawn(move || fill(&thread_dir, &thread_shared, size, tx))?
            .thread()
            .clone();
        Ok(SparePool { ready: Mutex::new(rx), shared, thread, dir: dir.to_path_buf() })
    }

    /// The spares directory the pool's files are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A ready empty file, if there is one now (never waits).
    pub fn take(&self) -> Option<PathBuf> {
        self.shared.asked.fetch_add(1, Ordering::SeqCst);
        self.thread.unpark();
        let ready = self.ready.lock().ok()?;
        match ready.try_recv() {
            Ok(path) => {
                self.shared.taken.fetch_add(1, Ordering::SeqCst);
                // Woken again: a filler that looked between the ask and this count saw one file
                // too many ready and went back to sleep.
                self.thread.unpark();
                Some(path)
            }
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => None,
        }
    }
}

impl Drop for SparePool {
    /// Stop the thread and remove every file it made that was not taken: each one it hands
    /// over is removed here, until it has ended (it looks at `stop` before each file).
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.thread.unpark();
        if let Ok(ready) = self.ready.lock() {
            while let Ok(path) = ready.recv() {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// The pool's thread: create empty files one after another while fewer are ready than asked
/// for (`FIRST` more than were asked for so far, at most `size`), else sleep until a taker
/// wakes it. Ends when the pool is dropped, or at the first file it cannot create (a full disk,
/// the directory gone): the group commit then creates its own.
fn fill(dir: &Path, shared: &Shared, size: usize, tx: SyncSender<PathBuf>) {
    let pid = std::process::id();
    let mut made = 0usize;
    for n in 0u64.. {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let asked = shared.asked.load(Ordering::SeqCst);
        // Fewer than `size` are ready when one is sent: the send never waits.
        let ready = made.saturating_sub(shared.taken.load(Ordering::SeqCst));
        if ready >= size.min(FIRST + asked) {
            std::thread::park();
            continue;
        }
        let path = dir.join(tmp_name(&format!("pool{n}"), pid));
        match private_options().write(true).create_new(true).open(&path) {
            Ok(_) => {}
            // Left by an earlier process of the same pid (swept only once that pid is gone).
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(_) => return,
        }
        made += 1;
        if let Err(unsent) = tx.send(path) {
            let _ = std::fs::remove_file(unsent.0);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !cond() {
            assert!(std::time::Instant::now() < end, "timed out: {what}");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    fn files(dir: &Path) -> usize {
        std::fs::read_dir(dir).unwrap().count()
    }

    #[test]
    fn the_pool_fills_to_its_size_hands_out_empty_files_and_removes_the_rest_when_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let pool = SparePool::start(tmp.path(), 4).unwrap();
        wait_for("the pool filled", || files(tmp.path()) == 4);
        let taken = pool.take().expect("a ready file");
        assert_eq!(std::fs::metadata(&taken).unwrap().len(), 0);
        assert!(taken.file_name().unwrap().to_str().unwrap().starts_with(".pool"));
        wait_for("the pool refilled", || files(tmp.path()) == 5);
        drop(pool);
        // Only the taken file is left.
        assert_eq!(files(tmp.path()), 1);
        assert!(taken.exists());
    }

    #[test]
    fn the_pool_keeps_a_few_ready_until_files_are_asked_for_then_more() {
        let tmp = tempfile::tempdir().unwrap();
        let pool = SparePool::start(tmp.path(), 64).unwrap();
        wait_for("the first few", || files(tmp.path()) == FIRST);
        let taken: Vec<PathBuf> = (0..3).filter_map(|_| pool.take()).collect();
        assert_eq!(taken.len(), 3);
        // Three asked for: three more than the first few kept ready, beside the three taken.
        wait_for("more ready", || files(tmp.path()) == 3 + FIRST + 3);
    }
}
