//! `desk rm`: forget an exited session's records.

#[allow(unused_imports)]
use super::*;
use desk_core::delivery::item::ItemId;

/// How often `desk rm` looks again while an exited session's master finishes leaving: it takes
/// microseconds (more on a loaded machine), so a few milliseconds cost nothing.
const RM_SETTLE_POLL: Duration = Duration::from_millis(5);

/// `desk rm NAME`: forget an exited session's files; the prompts still queued for it stay held
/// for a later session of the name (said on stderr), or with `drop_queued` are dropped (through
/// the daemon, which owns them).
pub(in crate::cli) fn rm(name: &SessionName, drop_queued: bool, json: bool) -> Result<i32> {
    let paths = paths()?;
    let files = paths.session(name);
    let lock = NameLock::acquire(&paths, name)?;
    match session::probe_settled(&files)? {
        Probe::Live(_) => {
            return Err(failure(1, format!("session {name} is running; stop it first with: desk kill {name}")));
        }
        Probe::Stale => {
            session::clean_stale(&paths, name, &lock)?;
        }
        Probe::Absent => {}
    }
    if let Some(why) = session::master_without_socket(&paths, name) {
        return Err(failure(1, why));
    }
    // A master that recorded its exit may still be finishing (it holds the name's master lock
    // until it is gone). Its exit record is what tells a later `desk new` that the holder is
    // leaving, so the record is not removed until it has left (or EXIT_SETTLE has passed):
    // otherwise a `desk new` right after this `rm` takes the leaving master for a running one.
    let settle = Instant::now() + session::EXIT_SETTLE;
    while session::MasterLock::holder(&paths, name).is_some() && Instant::now() < settle {
        std::thread::sleep(RM_SETTLE_POLL);
    }
    let mut removed = false;
    let mut rotated = files.log.clone().into_os_string();
    rotated.push(".1");
    for path in [files.meta.clone(), files.exit.clone(), files.log.clone(), PathBuf::from(rotated), files.info.clone()]
    {
        if path.exists() {
            desk_common::fsutil::remove_if_exists(&path)?;
            removed = true;
        }
    }
    // The session's durable state goes too (events journal, agent settings), all but the
    // generation counter, so a later session of the name never reuses a generation, and the
    // master's lock file, which a master finishing its exit may still hold.
    let state = paths.session_state(name);
    for path in list_dir(&state)? {
        if path.file_name().is_some_and(|f| f == "generation" || f == session::MASTER_LOCK_FILE) {
            continue;
        }
        if path.is_dir() {
            std::fs::remove_dir_all(&path).with_context(|| format!("cannot remove {}", path.display()))?;
        } else {
            desk_common::fsutil::remove_if_exists(&path)?;
        }
        removed = true;
    }
    NameLock::remove_file(&paths, name)?;
    drop(lock);
    let queued = crate::cli::delivery::pending_ids(&paths, name)?;
    if !removed && (queued.is_empty() || !drop_queued) {
        let mut why = desk_common::suggest::unknown_session_in(&paths, name.as_str());
        if !queued.is_empty() {
            why.push_str(&format!(
                "; {} prompt(s) are queued for it (desk rm {name} --drop-queued drops them)",
                queued.len()
            ));
        }
        return Err(fail(ErrorCode::NoSuchSession, why));
    }
    desk_common::fsutil::sync_dir(&paths.runtime)?;
    let (notes, dropped) = if drop_queued && !queued.is_empty() {
        crate::cli::delivery::drop_all(&paths, &queued, json)?
    } else {
        (Vec::new(), Vec::new())
    };
    let held = queued.into_iter().filter(|id| !dropped.contains(id)).collect();
    RmReport { dropped, held, name: name.clone() }.render(notes, json)?;
    Ok(0)
}

/// What `desk rm` did with the prompts still queued for the session it forgot.
/// In JSON its keys come in the order `desk rm --json` has always had (sorted).
#[derive(Serialize)]
struct RmReport {
    /// Dropped with `--drop-queued`.
    dropped: Vec<ItemId>,
    /// Queued for the name, and held for a later session of it.
    held: Vec<ItemId>,
    name: SessionName,
}

impl RmReport {
    /// Once as text (notes on stderr, nothing on stdout) or once as JSON (the notes ride along).
    fn render(&self, mut notes: Vec<String>, json: bool) -> Result<()> {
        let name = &self.name;
        if !self.held.is_empty() {
            notes.push(format!(
                "{} prompt(s) queued for {name} stay held until a session named {name} runs again \
                 (desk queue {name} lists them; desk rm {name} --drop-queued drops them)",
                self.held.len()
            ));
        }
        if !self.dropped.is_empty() {
            notes.push(format!("dropped the {} prompt(s) queued for {name}", self.dropped.len()));
        }
        if json {
            return output::print_ok("removed", self, &notes);
        }
        for note in &notes {
            eprintln!("desk: {note}");
        }
        Ok(())
    }
}

/// The entries of `dir`; none if it does not exist.
fn list_dir(dir: &std::path::Path) -> Result<Vec<PathBuf>> {
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            entries.map(|e| e.map(|e| e.path()).with_context(|| format!("cannot list {}", dir.display()))).collect()
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| format!("cannot list {}", dir.display())),
    }
}
