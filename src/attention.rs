//! The fleet's attention as a terminal attached to one session reads it: every session's state,
//! its stuck prompts and the channels' unread `@human` mentions, kept current cheaply.
//!
//! Owns [`FleetReader`]: what it last read of each session (from the info file its master keeps
//! current, `desk_common::info_file`, or its exit record), the delivery counts (from the daemon, else
//! the item store, as `desk ls` reads them) and each channel's summary (`desk_daemon::channel::summary`,
//! recomputed only when one of the channel's files changed size or time). The caller says which
//! sessions' files changed (the attach client watches the runtime directory with inotify) and
//! when to read the slow parts; the ranking is `desk_core::attention`'s, the one the dashboard
//! sorts by. Invariants: a session is read again only when told its files changed (or all are);
//! a master whose record the process table does not back is never shown as running (the same
//! check as `desk ls`); nothing here connects to a master. May depend on the file layout, the
//! daemon's control socket and `/proc`; it draws nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::SystemTime;

use desk_common::info_file::MasterCheck;
use desk_common::paths::{Paths, SessionName};
use desk_core::attention::{Look, Mentions, Need};
use desk_wire::state::{Activity, Health};

/// What was read of one session.
#[derive(Debug, Clone)]
pub struct Seen {
    pub look: Look,
    pub provider: String,
    /// Its window title, for a picker's line.
    pub title: String,
}

/// A channel's files as last summarised: their names, sizes and times.
type Stamp = Vec<(String, u64, Option<SystemTime>)>;

/// The fleet as last read.
pub struct FleetReader {
    paths: Paths,
    sessions: BTreeMap<String, Seen>,
    /// Sessions whose files changed since they were read; `None`: all of them.
    dirty: Option<BTreeSet<String>>,
    stuck: HashMap<String, u32>,
    stuck_source: Option<StuckSource>,
    channels: HashMap<String, (Stamp, Mentions)>,
}

/// Every session's stuck item count; `None` when it cannot be known now.
pub type StuckSource = fn(&Paths) -> Option<HashMap<String, u32>>;

impl FleetReader {
    /// A reader that has read nothing yet (everything is dirty).
    pub fn new(paths: Paths) -> FleetReader {
        FleetReader {
            paths,
            sessions: BTreeMap::new(),
            dirty: None,
            stuck: HashMap::new(),
            stuck_source: None,
            channels: HashMap::new(),
        }
    }

    /// Read stuck items with `source` (the CLI's, from the daemon or the delivery store: this
    /// module reads no queue itself); without one, no session counts as stuck here.
    pub fn with_stuck_source(mut self, source: StuckSource) -> FleetReader {
        self.stuck_source = Some(source);
        self
    }

    /// The files of the session a runtime-directory entry named `file` belongs to changed.
    pub fn file_changed(&mut self, file: &str) {
        let Some(stem) = ["info", "exit", "json", "sock"].iter().find_map(|ext| file.strip_suffix(&format!(".{ext}")))
        else {
            return;
        };
        if let Some(dirty) = &mut self.dirty {
            dirty.insert(stem.to_string());
        }
    }

    /// Everything may have changed (the watch overflowed, or was just set up).
    pub fn all_changed(&mut self) {
        self.dirty = None;
    }

    /// Whether any session waits to be read again.
    pub fn has_changes(&self) -> bool {
        self.dirty.as_ref().is_none_or(|d| !d.is_empty())
    }

    /// Read again the sessions whose files changed.
    pub fn read_sessions(&mut self) {
        let names: Vec<String> = match self.dirty.take() {
            Some(dirty) => dirty.into_iter().collect(),
            None => {
                self.sessions.clear();
                match self.paths.session_names_and_exits() {
                    Ok(all) => all.into_iter().map(|(n, _)| n.as_str().to_string()).collect(),
                    // Unreadable now: everything stays to be read, at the next read.
                    Err(_) => return,
                }
            }
        };
        self.dirty = Some(BTreeSet::new());
        for name in names {
            match SessionName::parse(&name).ok().and_then(|n| self.read_session(&n)) {
                Some(seen) => {
                    self.sessions.insert(name, seen);
                }
                None => {
                    self.sessions.remove(&name);
                }
            }
        }
    }

    fn read_session(&self, name: &SessionName) -> Option<Seen> {
        let files = self.paths.session(name);
        if let Some(record) = desk_common::info_file::read(&files.info).filter(|r| r.info.name == name.as_str()) {
            let check = desk_common::info_file::check(&record);
            if check != MasterCheck::NotTheMaster {
                let info = record.info;
                let mut look = match &info.state {
                    Some(s) => Look::running(
                        name.as_str(),
                        s.activity.value,
                        s.activity.since_ms,
                        s.wait.clone(),
                        s.health.value.clone(),
                    ),
                    None => Look::running(name.as_str(), Activity::Unknown, 0, None, Health::Ok),
                };
                look.answers = check == MasterCheck::Running;
                return Some(Seen { look, provider: info.provider, title: info.title });
            }
        }
        if let Ok(Some(exit)) = desk_common::session::read_exit(&files) {
            let mut look = Look::running(name.as_str(), Activity::Unknown, 0, None, Health::Ok);
            look.exited = Some(exit.status);
            look.exited_at_ms = exit.exited_at_ms;
            let provider =
                desk_common::session::read_meta(&files).ok().flatten().map(|m| m.provider).unwrap_or_default();
            return Some(Seen { look, provider, title: exit.title.unwrap_or_default() });
        }
        // Starting (its record written, its master not yet answering) or gone without a word.
        let meta = desk_common::session::read_meta(&files).ok().flatten()?;
        let look = Look::running(name.as_str(), Activity::Unknown, 0, None, Health::Ok);
        Some(Seen { look, provider: meta.provider, title: String::new() })
    }

    /// Read the slow parts: stuck items and the channels' mentions.
    pub fn read_slow(&mut self) {
        if let Some(counts) = self.stuck_source.and_then(|source| source(&self.paths)) {
            self.stuck = counts;
        }
        let store = desk_daemon::channel::store::ChannelStore::at(&self.paths);
        let names = store.list().unwrap_or_default();
        self.channels.retain(|k, _| names.iter().any(|n| n.as_str() == k));
        for name in names {
            let stamp = stamp(&store.dir(&name));
            if self.channels.get(name.as_str()).is_some_and(|(old, _)| *old == stamp) {
                continue;
            }
            let Ok(summary) = desk_daemon::channel::summary::summarize(&store, &name) else { continue };
            let mentions = Mentions {
                channel: summary.name.clone(),
                unread: summary.unread_human,
                last_ms: summary.last_ms.unwrap_or(0),
            };
            self.channels.insert(name.as_str().to_string(), (stamp, mentions));
        }
    }

    /// Every session as last read, with its stuck items.
    pub fn looks(&self) -> Vec<Look> {
        self.sessions
            .values()
            .map(|s| {
                let mut look = s.look.clone();
                look.stuck = self.stuck.get(&look.name).copied().unwrap_or(0);
                look
            })
            .collect()
    }

    /// What needs a person, most urgent first.
    pub fn needs(&self) -> Vec<Need> {
        let mentions: Vec<Mentions> = self.channels.values().map(|(_, m)| m.clone()).collect();
        desk_core::attention::needs(&self.looks(), &mentions)
    }

    /// What was read of `name`.
    pub fn session(&self, name: &str) -> Option<&Seen> {
        self.sessions.get(name)
    }

    /// Every session read, by name.
    pub fn sessions(&self) -> impl Iterator<Item = &Seen> {
        self.sessions.values()
    }
}

/// A channel directory's conversation files and read marker: name, size, modification time.
fn stamp(dir: &std::path::Path) -> Stamp {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut stamp: Stamp = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let wanted =
                name.ends_with(".md") || name == desk_daemon::channel::summary::SEEN_FILE || name == "members.json";
            let meta = e.metadata().ok().filter(|_| wanted)?;
            Some((name, meta.len(), meta.modified().ok()))
        })
        .collect();
    stamp.sort();
    stamp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_file_marks_its_session_and_a_full_read_clears_the_marks() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = Paths { runtime: tmp.path().join("r"), state: tmp.path().join("s"), config: tmp.path().join("c") };
        let mut fleet = FleetReader::new(paths);
        assert!(fleet.has_changes(), "nothing read yet");
        fleet.read_sessions();
        assert!(!fleet.has_changes());
        fleet.file_changed("api.info");
        fleet.file_changed("web.exit");
        fleet.file_changed("notes.txt");
        assert_eq!(fleet.dirty.as_ref().unwrap().iter().map(String::as_str).collect::<Vec<_>>(), ["api", "web"]);
        fleet.read_sessions();
        assert!(fleet.sessions.is_empty(), "no files: nothing to show");
    }
}
