//! Evidence a session journalled while the daemon was not listening.
//!
//! Owns the daemon's reading of every session's events journal (`events.jsonl`, written by
//! the session's master) and how far it has read: one durable cursor per session,
//! `delivery/cursors/<session>.json`, naming the last durable journal event (by sequence number
//! and time) the delivery engine was given. A restarted daemon, or one whose connection to a
//! master ended, replays what came after it — hooks that reached the master while nobody
//! listened, activity changes, exits, new generations — before the engine judges any item.
//!
//! Invariants: a cursor only ever names a durable event (the kinds a master fsyncs, so the
//! event it names is in the journal); it is written atomically (temporary file, fsync, rename,
//! fsync of the directory) and only after the engine has acted on every event up to it, so a
//! crash never skips evidence — at worst some is replayed, which the engine's fences make
//! harmless (a hook settles only an item of its own generation pasted before it; an exit or an
//! idle already weighed changes nothing). [`Cursors::unread`] returns every durable event after
//! the cursor and, before them, the last activity change at or before it (the replay must know
//! since when the agent was idle). A journal begun again (the session was removed and created
//! anew: an event numbered at or below the cursor is newer than the cursor's) is read from its
//! start. It reads
//! journals only; it never writes one.

use anyhow::{Context, Result};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use desk_common::paths::{SessionName, ensure_private_dir};
use desk_core::delivery::engine::{Past, PastEvent};
use desk_wire::events::{AxisChange, Event, EventBody};

/// The last durable journal event of a session the engine was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Cursor {
    seq: u64,
    ts_ms: u64,
}

pub struct Cursors {
    dir: PathBuf,
    /// The store's spare files for group commits.
    spares: PathBuf,
    /// Cursors read or moved since start (a session missing here has not been looked up).
    known: HashMap<String, Option<Cursor>>,
    /// Sessions whose cursor moved since it was last written.
    dirty: HashSet<String>,
}

impl Cursors {
    /// Open (creating) `delivery/cursors/` under the store's root.
    pub fn open(store_root: &Path) -> Result<Cursors> {
        let dir = store_root.join("cursors");
        ensure_private_dir(&dir)?;
        let spares = store_root.join(crate::store::SPARES);
        ensure_private_dir(&spares)?;
        Ok(Cursors { dir, spares, known: HashMap::new(), dirty: HashSet::new() })
    }

    fn path(&self, session: &SessionName) -> PathBuf {
        self.dir.join(format!("{}.json", session.as_str()))
    }

    /// The session's cursor: from memory, else from its file (none when there is no file; an
    /// unreadable one is logged and read as none, so the whole journal is replayed).
    fn get(&mut self, session: &SessionName) -> Option<Cursor> {
        if let Some(c) = self.known.get(session.as_str()) {
            return *c;
        }
        let path = self.path(session);
        let cursor = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .inspect_err(|e| {
                    tracing::warn!(
                        "{} is not a journal cursor ({e}); reading the journal from its start",
                        path.display()
                    )
                })
                .ok(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                tracing::warn!("cannot read {} ({e}); reading the journal from its start", path.display());
                None
            }
        };
        self.known.insert(session.as_str().to_string(), cursor);
        cursor
    }

    fn set(&mut self, session: &SessionName, cursor: Cursor) {
        self.known.insert(session.as_str().to_string(), Some(cursor));
        self.dirty.insert(session.as_str().to_string());
    }

    /// A durable event that arrived live, now given to the engine: whether it is new to it
    /// (false: a replay of the journal gave it already). Moves the cursor, in memory.
    pub fn see(&mut self, session: &SessionName, seq: u64, ts_ms: u64) -> bool {
        if self.get(session).is_some_and(|c| seq <= c.seq) {
            return false;
        }
        self.set(session, Cursor { seq, ts_ms });
        true
    }

    /// What the session's journal (in `journal_dir`) recorded after the cursor, for the
    /// engine, oldest first; the cursor moves past it (in memory: [`Cursors::save`] once the
    /// engine has taken it).
    pub fn unread(&mut self, session: &SessionName, journal_dir: &Path) -> Result<Vec<Past>> {
        let events = desk_common::journal::read_durable(journal_dir)
            .with_context(|| format!("cannot read the events journal of {session}"))?;
        // A journal begun again numbers its events from 1: an event numbered at or below the
        // cursor that is newer than the cursor's own event is another journal's.
        let cursor = self.get(session).filter(|c| !events.iter().any(|e| e.seq <= c.seq && e.ts_ms > c.ts_ms));
        let after = cursor.map_or(0, |c| c.seq);
        // The activity at the cursor, and since when: the replay's starting point.
        let context = events.iter().rfind(|e| {
            e.seq <= after && matches!(e.body, EventBody::State { change: AxisChange::Activity { .. }, .. })
        });
        let unread: Vec<&Event> = events.iter().filter(|e| e.seq > after).collect();
        if let Some(last) = unread.last() {
            self.set(session, Cursor { seq: last.seq, ts_ms: last.ts_ms });
        }
        Ok(context.into_iter().chain(unread).filter_map(past).collect())
    }

    /// Write the session's cursor if it moved: atomically and durably.
    pub fn save(&mut self, session: &SessionName) -> Result<()> {
        self.save_group(std::slice::from_ref(session)).into_iter().next().map_or(Ok(()), |(_, r)| r)
    }

    /// Write the cursors of these sessions that moved, atomically, as one group commit (all
    /// written, then synced together). Returns each written session with its result.
    pub fn save_group(&mut self, sessions: &[SessionName]) -> Vec<(SessionName, Result<()>)> {
        let mut names = Vec::new();
        let mut writes = Vec::new();
        for session in sessions {
            if !self.dirty.contains(session.as_str()) {
                continue;
            }
            let Some(Some(cursor)) = self.known.get(session.as_str()).copied() else { continue };
            let bytes = match serde_json::to_vec(&cursor) {
                Ok(bytes) => bytes,
                Err(e) => {
                    names.push((session.clone(), Err(anyhow::Error::new(e).context("cannot encode a journal cursor"))));
                    continue;
                }
            };
            writes.push(desk_common::fsutil::GroupWrite { path: self.path(session), bytes, then: None });
            names.push((session.clone(), Ok(())));
        }
        let mut results = desk_common::fsutil::write_atomic_group(&writes, &self.spares, None, |_| {}).into_iter();
        for (session, result) in &mut names {
            if result.is_ok() {
                *result = results.next().unwrap_or(Ok(()));
                if result.is_ok() {
                    self.dirty.remove(session.as_str());
                }
            }
        }
        names
    }

    /// Write every cursor that moved (at a clean stop).
    pub fn save_all(&mut self) {
        for session in self.dirty.clone() {
            if let Ok(name) = SessionName::parse(&session)
                && let Err(e) = self.save(&name)
            {
                tracing::warn!(session, "cannot record how far its journal was read: {e:#}");
            }
        }
    }
}

/// A journal event as the engine weighs it, if it is evidence.
fn past(event: &Event) -> Option<Past> {
    let what = match &event.body {
        EventBody::Started { .. } => PastEvent::Started,
        EventBody::State { change: AxisChange::Activity { to, .. }, .. } => PastEvent::Activity(*to),
        EventBody::Hook { event, prompt, .. } => PastEvent::Hook { event: event.clone(), prompt: prompt.clone() },
        EventBody::Exit { .. } => PastEvent::Exit,
        _ => return None,
    };
    Some(Past { at_ms: event.ts_ms, generation: event.generation, what })
}

#[cfg(test)]
mod tests {
    use super::*;
    use desk_common::journal::{JOURNAL_CAP, Journal};
    use desk_core::state::Activity;

    /// A session `s`: its journal, and the daemon's cursors (in their own directories).
    struct Fixture {
        state: tempfile::TempDir,
        journal_dir: tempfile::TempDir,
        name: SessionName,
        journal: Journal,
        cursors: Cursors,
    }

    impl Fixture {
        fn new() -> Fixture {
            let state = tempfile::tempdir().unwrap();
            let journal_dir = tempfile::tempdir().unwrap();
            let journal = Journal::open(journal_dir.path(), JOURNAL_CAP).unwrap();
            let cursors = Cursors::open(state.path()).unwrap();
            Fixture { state, journal_dir, name: SessionName::parse("s").unwrap(), journal, cursors }
        }

        fn append(&mut self, ts_ms: u64, body: EventBody) {
            let seq = self.journal.allocate_seq();
            let durable = body.is_durable();
            self.journal.append(&Event { seq, ts_ms, generation: 1, body }, durable).unwrap();
        }

        fn unread(&mut self) -> Vec<Past> {
            self.cursors.unread(&self.name, self.journal_dir.path()).unwrap()
        }
    }

    fn activity(to: &str) -> EventBody {
        let to = serde_json::from_value(serde_json::Value::String(to.into())).unwrap();
        let change = AxisChange::Activity { from: Activity::Unknown, to };
        EventBody::State { change, evidence: "test".into(), wait: None }
    }

    fn started() -> EventBody {
        EventBody::Started { pid: 1, command: vec!["agent".into()], cols: 80, rows: 24, provider: "demo".into() }
    }

    #[test]
    fn unread_gives_what_came_after_the_cursor_with_the_activity_at_it_and_survives_a_restart() {
        let mut f = Fixture::new();
        f.append(10, started());
        f.append(20, activity("idle"));
        f.append(25, EventBody::Title { title: "noise".into() });
        assert_eq!(f.unread().iter().map(|p| p.at_ms).collect::<Vec<_>>(), [10, 20], "durable events only");
        f.cursors.save(&f.name).unwrap();
        // While nobody reads: a hook, then the exit.
        let hook =
            EventBody::Hook { provider: "demo".into(), event: "UserPromptSubmit".into(), detail: None, prompt: None };
        f.append(30, hook);
        f.append(40, EventBody::Exit { code: Some(0), signal: None, escalated: false });
        // A restarted daemon reads its cursor back from disk.
        f.cursors = Cursors::open(f.state.path()).unwrap();
        let next = f.unread();
        let whats: Vec<&PastEvent> = next.iter().map(|p| &p.what).collect();
        assert!(
            matches!(whats[..], [PastEvent::Activity(Activity::Idle), PastEvent::Hook { .. }, PastEvent::Exit]),
            "{next:?}"
        );
        assert_eq!(next[0].at_ms, 20, "the activity at the cursor, and since when");
        assert!(f.unread().iter().all(|p| p.at_ms == 20), "nothing new twice");
    }

    #[test]
    fn a_live_event_the_replay_gave_already_is_not_new() {
        let mut f = Fixture::new();
        f.append(10, started());
        f.append(20, activity("working"));
        f.unread();
        assert!(!f.cursors.see(&f.name, 2, 20), "replayed already");
        assert!(f.cursors.see(&f.name, 3, 30));
        assert!(!f.cursors.see(&f.name, 3, 30));
    }

    #[test]
    fn a_journal_begun_again_is_read_from_its_start() {
        let mut f = Fixture::new();
        for ts in 1..=5 {
            f.append(ts * 10, activity("working"));
        }
        assert_eq!(f.unread().len(), 5);
        // `desk rm`, then `desk new` of the same name: a new journal numbered from 1.
        desk_common::journal::remove(f.journal_dir.path()).unwrap();
        f.journal = Journal::open(f.journal_dir.path(), JOURNAL_CAP).unwrap();
        f.append(100, started());
        f.append(110, activity("idle"));
        assert_eq!(f.unread().iter().map(|p| p.at_ms).collect::<Vec<_>>(), [100, 110]);
    }
}
