//! Channel directories on disk.
//!
//! Owns `<state>/channels/<name>/`: `members.json` (the [`Roster`]: goal and members, replaced
//! atomically), `root.md` (the root conversation), `thread-<ID>.md` (one per thread, named by
//! the root message it replies to), `.lock` (the per-channel lock, `flock`, empty) and
//! `ingest.json` (the daemon's ingest cursor, owned by [`super::ingest`]). Invariants: every
//! append and every roster change happens under the channel's lock; an append writes one
//! whole record with one `write` on an `O_APPEND` descriptor and fsyncs it (and the directory,
//! when it created the file) before it returns, so a message `post` reported is durable; before
//! appending to a file the lock holder cuts a torn tail (a record a killed writer left half
//! written) and never appends after bytes it cannot parse ([`PostError::Corrupt`]); readers
//! take no lock and see only whole records. Nothing outside this module writes these files
//! (except the ingest cursor).

use anyhow::{Context, Result};
use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use desk_common::fsutil;
use desk_common::paths::{Paths, ensure_private_dir};
use desk_core::channel::format::{self, Parsed, Tail};
use desk_core::channel::{BodyError, ChannelName, Kind, Member, Message, RESERVED_NAMES, Role, Roster};
use desk_core::delivery::item::ItemId;

/// The root conversation's file name.
pub const ROOT_FILE: &str = "root.md";

/// `members.json`'s format ([`Roster`] carries its `version`). It versions the whole channel
/// directory: the markdown record layout of `root.md` and the thread files is the one its
/// version names (desk-core's `channel::format`, version 1).
pub const ROSTER_FORMAT: desk_common::format::Format = desk_common::format::Format::first("channel members");

/// The members file's name.
pub const MEMBERS_FILE: &str = "members.json";

/// A thread's file name.
pub fn thread_file(parent: &ItemId) -> String {
    format!("thread-{parent}.md")
}

/// The thread a conversation file holds (`None`: the root), from its name.
pub fn file_thread(name: &str) -> Option<Option<ItemId>> {
    if name == ROOT_FILE {
        return Some(None);
    }
    let id = name.strip_prefix("thread-")?.strip_suffix(".md")?;
    Some(Some(ItemId::parse(id)?))
}

/// Why a post (or a roster change) was refused; the CLI maps each to an error code.
#[derive(Debug, thiserror::Error)]
pub enum PostError {
    #[error("no channel named {0}; create it with: desk channel new {0}")]
    NoChannel(ChannelName),
    #[error("{who} is not a member of #{channel}; add it with: desk channel add {channel} {who}")]
    NotMember { channel: ChannelName, who: String },
    #[error("#{channel} has no message {thread} to reply to (a thread starts at a root message)")]
    NoSuchThread { channel: ChannelName, thread: ItemId },
    #[error("{0}")]
    BadMember(String),
    #[error(transparent)]
    Body(#[from] BodyError),
    #[error(
        "{} is damaged at byte {at} ({reason}); desk does not append after bytes it cannot read. Fix or move the file, then post again",
        path.display()
    )]
    Corrupt { path: PathBuf, at: usize, reason: String },
    #[error(transparent)]
    Io(#[from] anyhow::Error),
}

/// A message to post.
#[derive(Debug, Clone)]
pub struct Draft {
    pub author: String,
    pub thread: Option<ItemId>,
    pub body: String,
}

/// The lock on one channel, held until dropped.
#[derive(Debug)]
pub struct ChannelLock {
    _file: File,
}

/// What reading a conversation file found.
#[derive(Debug, Clone, Default)]
pub struct FileRead {
    pub messages: Vec<Message>,
    /// A torn tail (not yet cut) or damage, with its offset, for a warning.
    pub problem: Option<String>,
}

/// The channel directories under the state directory.
#[derive(Debug, Clone)]
pub struct ChannelStore {
    root: PathBuf,
}

impl ChannelStore {
    /// The store under `paths.state`, created (0700) if needed.
    pub fn open(paths: &Paths) -> Result<ChannelStore> {
        paths.ensure_state()?;
        let root = paths.state.join("channels");
        ensure_private_dir(&root)?;
        Ok(ChannelStore { root })
    }

    /// The store at `root` without creating anything (for readers that must not write).
    pub fn at(paths: &Paths) -> ChannelStore {
        ChannelStore { root: paths.state.join("channels") }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn dir(&self, name: &ChannelName) -> PathBuf {
        self.root.join(name.as_str())
    }

    pub fn exists(&self, name: &ChannelName) -> bool {
        self.dir(name).join(MEMBERS_FILE).is_file()
    }

    /// Every channel, sorted by name (directories whose name is no channel name are skipped).
    pub fn list(&self) -> Result<Vec<ChannelName>> {
        let mut names: Vec<ChannelName> = read_dir(&self.root)?
            .into_iter()
            .filter_map(|p| p.file_name().and_then(|n| n.to_str()).and_then(|n| ChannelName::parse(n).ok()))
            .filter(|n| self.exists(n))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Create a channel. Returns `Ok(None)` if it already exists.
    pub fn create(&self, name: &ChannelName, goal: &str, now_ms: u64) -> Result<Option<Roster>> {
        self.create_with(name, goal, None, now_ms)
    }

    /// Create a channel with supervisor check-ins after `checkin_after_s` seconds of idle
    /// workers (`None`: off).
    pub fn create_with(
        &self,
        name: &ChannelName,
        goal: &str,
        checkin_after_s: Option<u64>,
        now_ms: u64,
    ) -> Result<Option<Roster>> {
        let dir = self.dir(name);
        ensure_private_dir(&dir)?;
        let _lock = self.lock(name)?;
        if self.exists(name) {
            return Ok(None);
        }
        let root = dir.join(ROOT_FILE);
        if !root.exists() {
            fsutil::write_atomic(&root, format::title(name.as_str(), None).as_bytes())?;
        }
        let mut roster = Roster::new(name.clone(), goal.trim().to_string(), now_ms);
        roster.checkin_after_s = checkin_after_s;
        self.save_roster(&roster)?;
        Ok(Some(roster))
    }

    /// Take the channel's lock (blocking: appends hold it for milliseconds).
    pub fn lock(&self, name: &ChannelName) -> Result<ChannelLock> {
        let path = self.dir(name).join(".lock");
        let file = desk_common::fsutil::private_options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        file.lock().with_context(|| format!("cannot lock {}", path.display()))?;
        Ok(ChannelLock { _file: file })
    }

    /// The channel's roster, or `Ok(None)` if there is no such channel.
    pub fn roster(&self, name: &ChannelName) -> Result<Option<Roster>> {
        let path = self.dir(name).join(MEMBERS_FILE);
        match fs::read(&path) {
            Ok(bytes) => desk_common::format::decode(&ROSTER_FORMAT, &bytes).map(Some).with_context(|| {
                format!("{} cannot be read; fix it, or upgrade desk if a newer one wrote it", path.display())
            }),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    fn save_roster(&self, roster: &Roster) -> Result<()> {
        let mut bytes = serde_json::to_vec_pretty(roster).context("cannot encode a roster")?;
        bytes.push(b'\n');
        fsutil::write_atomic(&self.dir(&roster.name).join(MEMBERS_FILE), &bytes)
    }

    fn roster_or_missing(&self, name: &ChannelName) -> Result<Roster, PostError> {
        self.roster(name)?.ok_or_else(|| PostError::NoChannel(name.clone()))
    }

    /// Add a member (or change its role) and append its `joined` record, which the daemon turns
    /// into the onboarding prompt. Returns the roster and whether anything changed (adding a
    /// member again with the same role changes nothing and queues nothing).
    pub fn add_member(
        &self,
        name: &ChannelName,
        member: &str,
        role: Role,
        now_ms: u64,
    ) -> Result<(Roster, bool), PostError> {
        if !desk_core::channel::valid_member_name(member) || RESERVED_NAMES.contains(&member) {
            return Err(PostError::BadMember(format!(
                "{member:?} cannot be a member: a member is a session name; 'human' and 'channel' are mention words and 'desk' signs check-ins"
            )));
        }
        let _lock = self.lock_existing(name)?;
        let mut roster = self.roster_or_missing(name)?;
        if let Some(known) = roster.member(member).filter(|m| m.role == role) {
            // Its joined record is there unless a crash came between the roster and the
            // append below: then adding it again appends the record it lacks.
            let since = known.added_ms;
            let (root, _) = self.read(name, None)?;
            if root.iter().any(|m| m.kind == Kind::Joined && m.author == member && m.ts_ms >= since) {
                return Ok((roster, false));
            }
        } else {
            roster.members.retain(|m| m.name != member);
            roster.members.push(Member { name: member.to_string(), role, added_ms: now_ms });
            // The roster first: the joined record is routed against it. A crash between the
            // two leaves a member without an onboarding prompt until it is added again (the
            // branch above), never a prompt for a non-member.
            self.save_roster(&roster)?;
        }
        let joined = Message {
            id: desk_common::ids::fresh_item_id(now_ms),
            author: member.to_string(),
            ts_ms: now_ms,
            thread: None,
            kind: Kind::Joined,
            body: role.as_str().to_string(),
        };
        self.append_locked(name, &joined)?;
        Ok((roster, true))
    }

    /// Append desk's check-in record (routed to the supervisors by the daemon's ingest).
    pub fn append_checkin(&self, name: &ChannelName, body: &str, now_ms: u64) -> Result<Message, PostError> {
        let _lock = self.lock_existing(name)?;
        let msg = Message {
            id: desk_common::ids::fresh_item_id(now_ms),
            author: desk_core::channel::CHECKIN_AUTHOR.to_string(),
            ts_ms: now_ms,
            thread: None,
            kind: Kind::Checkin,
            body: desk_core::channel::check_body(body)?,
        };
        self.append_locked(name, &msg)?;
        Ok(msg)
    }

    /// Every message of a channel, root and threads (whole records only).
    pub fn all_messages(&self, name: &ChannelName) -> Result<Vec<Message>> {
        let mut all = Vec::new();
        for (file, _) in self.files(name)? {
            all.extend(self.read_file(&self.dir(name).join(file))?.messages);
        }
        Ok(all)
    }

    /// Remove a member. Returns whether it was one.
    pub fn remove_member(&self, name: &ChannelName, member: &str) -> Result<bool, PostError> {
        let _lock = self.lock_existing(name)?;
        let mut roster = self.roster_or_missing(name)?;
        let before = roster.members.len();
        roster.members.retain(|m| m.name != member);
        if roster.members.len() == before {
            return Ok(false);
        }
        self.save_roster(&roster)?;
        Ok(true)
    }

    fn lock_existing(&self, name: &ChannelName) -> Result<ChannelLock, PostError> {
        if !self.exists(name) {
            return Err(PostError::NoChannel(name.clone()));
        }
        Ok(self.lock(name)?)
    }

    /// Post a message: checked (member, thread, body), given a fresh id, appended whole and
    /// durable when this returns.
    pub fn post(&self, name: &ChannelName, draft: Draft, now_ms: u64) -> Result<Message, PostError> {
        let body = desk_core::channel::check_body(&draft.body)?;
        let _lock = self.lock_existing(name)?;
        let roster = self.roster_or_missing(name)?;
        if !roster.may_post(&draft.author) {
            return Err(PostError::NotMember { channel: name.clone(), who: draft.author });
        }
        if let Some(thread) = &draft.thread {
            let root = self.read_file(&self.dir(name).join(ROOT_FILE))?;
            if !root.messages.iter().any(|m| &m.id == thread && m.kind == Kind::Post) {
                return Err(PostError::NoSuchThread { channel: name.clone(), thread: thread.clone() });
            }
        }
        let msg = Message {
            id: desk_common::ids::fresh_item_id(now_ms),
            author: draft.author,
            ts_ms: now_ms,
            thread: draft.thread,
            kind: Kind::Post,
            body,
        };
        self.append_locked(name, &msg)?;
        Ok(msg)
    }

    /// Append one record to the file it belongs in; the caller holds the lock.
    fn append_locked(&self, name: &ChannelName, msg: &Message) -> Result<(), PostError> {
        let dir = self.dir(name);
        let file_name = msg.thread.as_ref().map_or_else(|| ROOT_FILE.to_string(), thread_file);
        let path = dir.join(&file_name);
        let created = !path.exists();
        if created {
            fsutil::write_atomic(&path, format::title(name.as_str(), msg.thread.as_ref()).as_bytes())?;
        } else {
            self.cut_torn_tail(&path)?;
        }
        let mut file = desk_common::fsutil::private_options()
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        file.write_all(&format::serialize(msg)).with_context(|| format!("cannot append to {}", path.display()))?;
        file.sync_all().with_context(|| format!("cannot fsync {}", path.display()))?;
        Ok(())
    }

    /// Under the lock: cut a torn tail off `path`, durably. Damage is an error.
    fn cut_torn_tail(&self, path: &Path) -> Result<(), PostError> {
        let bytes = fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let parsed = format::parse(&bytes, 0);
        match parsed.tail {
            Tail::Clean => Ok(()),
            Tail::Torn { at } => {
                let file = desk_common::fsutil::private_options()
                    .write(true)
                    .open(path)
                    .with_context(|| format!("cannot open {}", path.display()))?;
                file.set_len(at as u64).with_context(|| format!("cannot cut the torn tail of {}", path.display()))?;
                file.sync_all().with_context(|| format!("cannot fsync {}", path.display()))?;
                tracing::warn!(path = %path.display(), at, cut = bytes.len() - at, "cut a torn record (a writer died mid-append)");
                Ok(())
            }
            Tail::Corrupt { at, reason } => Err(PostError::Corrupt { path: path.to_path_buf(), at, reason }),
        }
    }

    /// The whole records of one conversation file (missing: none).
    pub fn read_file(&self, path: &Path) -> Result<FileRead> {
        let bytes = match fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(FileRead::default()),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let Parsed { records, tail } = format::parse(&bytes, 0);
        let problem = match tail {
            Tail::Clean => None,
            Tail::Torn { at } => Some(format!(
                "{}: a record cut short at byte {at} (a writer died mid-append); it is not a message and is cut at the next post",
                path.display()
            )),
            Tail::Corrupt { at, reason } => {
                Some(format!("{}: damaged at byte {at} ({reason}); nothing after it is shown", path.display()))
            }
        };
        Ok(FileRead { messages: records.into_iter().map(|r| r.message).collect(), problem })
    }

    /// The conversation files of a channel: the root first, then the threads by name.
    pub fn files(&self, name: &ChannelName) -> Result<Vec<(String, Option<ItemId>)>> {
        let mut threads: Vec<(String, Option<ItemId>)> = read_dir(&self.dir(name))?
            .into_iter()
            .filter_map(|p| p.file_name().and_then(|n| n.to_str()).map(String::from))
            .filter_map(|n| file_thread(&n).filter(Option::is_some).map(|t| (n, t)))
            .collect();
        threads.sort();
        let mut files = vec![(ROOT_FILE.to_string(), None)];
        files.extend(threads);
        Ok(files)
    }

    /// A channel's messages: the root conversation (each root message followed by nothing of
    /// its thread), or one thread (its root message first, then the replies). Problems found
    /// (torn tails, damage) come with them.
    pub fn read(&self, name: &ChannelName, thread: Option<&ItemId>) -> Result<(Vec<Message>, Vec<String>)> {
        let dir = self.dir(name);
        let root = self.read_file(&dir.join(ROOT_FILE))?;
        let mut problems: Vec<String> = root.problem.into_iter().collect();
        let messages = match thread {
            None => root.messages,
            Some(id) => {
                let replies = self.read_file(&dir.join(thread_file(id)))?;
                problems.extend(replies.problem);
                root.messages.into_iter().filter(|m| &m.id == id).chain(replies.messages).collect()
            }
        };
        Ok((messages, problems))
    }

    /// Per thread: the root message it replies to, its number of replies and its newest
    /// reply's id (for the root view and the operator's read marker).
    pub fn thread_counts(&self, name: &ChannelName) -> Result<Vec<(ItemId, usize, Option<ItemId>)>> {
        let dir = self.dir(name);
        let mut out = Vec::new();
        for (file, thread) in self.files(name)? {
            if let Some(id) = thread {
                let messages = self.read_file(&dir.join(file))?.messages;
                let newest = messages.iter().map(|m| m.id.clone()).max();
                out.push((id, messages.len(), newest));
            }
        }
        Ok(out)
    }
}

fn read_dir(dir: &Path) -> Result<Vec<PathBuf>> {
    match fs::read_dir(dir) {
        Ok(entries) => Ok(entries.filter_map(|e| e.ok().map(|e| e.path())).collect()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| format!("cannot list {}", dir.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, ChannelStore, ChannelName) {
        let tmp = tempfile::tempdir().unwrap();
        let store = ChannelStore { root: tmp.path().join("channels") };
        ensure_private_dir(&store.root).unwrap();
        let name = ChannelName::parse("build").unwrap();
        store.create(&name, "ship it", 1).unwrap().unwrap();
        (tmp, store, name)
    }

    fn draft(author: &str, body: &str) -> Draft {
        Draft { author: author.into(), thread: None, body: body.into() }
    }

    #[test]
    fn posts_append_and_read_back_in_order_with_threads_apart() {
        let (_tmp, store, ch) = store();
        assert!(store.create(&ch, "", 2).unwrap().is_none(), "exists already");
        store.add_member(&ch, "alice", Role::Worker, 3).unwrap();
        let a = store.post(&ch, draft("alice", "first"), 10).unwrap();
        let b = store.post(&ch, draft("human", "second"), 11).unwrap();
        let r = store.post(&ch, Draft { thread: Some(a.id.clone()), ..draft("alice", "reply") }, 12).unwrap();
        let (root, problems) = store.read(&ch, None).unwrap();
        assert!(problems.is_empty());
        let bodies: Vec<&str> = root.iter().filter(|m| m.kind == Kind::Post).map(|m| m.body.as_str()).collect();
        assert_eq!(bodies, ["first", "second"]);
        let (thread, _) = store.read(&ch, Some(&a.id)).unwrap();
        assert_eq!(thread.iter().map(|m| &m.id).collect::<Vec<_>>(), vec![&a.id, &r.id]);
        assert_eq!(store.thread_counts(&ch).unwrap(), vec![(a.id.clone(), 1, Some(r.id.clone()))]);
        assert!(b.id > a.id);
        let text = fs::read_to_string(store.dir(&ch).join(ROOT_FILE)).unwrap();
        assert!(text.starts_with("# #build\n\n"), "{text}");
    }

    #[test]
    fn a_non_member_is_refused_and_a_reply_needs_a_root_message() {
        let (_tmp, store, ch) = store();
        assert!(matches!(store.post(&ch, draft("mallory", "hi"), 5), Err(PostError::NotMember { .. })));
        let bad = Draft { thread: Some(ItemId::sequential(1)), ..draft("human", "x") };
        assert!(matches!(store.post(&ch, bad, 5), Err(PostError::NoSuchThread { .. })));
        let other = ChannelName::parse("nope").unwrap();
        assert!(matches!(store.post(&other, draft("human", "x"), 5), Err(PostError::NoChannel(_))));
        let long = "x".repeat(desk_core::channel::MAX_BODY + 1);
        assert!(matches!(store.post(&ch, draft("human", &long), 5), Err(PostError::Body(BodyError::TooLong(_)))));
        assert!(store.add_member(&ch, "human", Role::Worker, 5).is_err(), "reserved");
    }

    #[test]
    fn a_torn_tail_is_cut_on_the_next_post_and_never_read_as_a_message() {
        let (_tmp, store, ch) = store();
        let a = store.post(&ch, draft("human", "whole"), 10).unwrap();
        let path = store.dir(&ch).join(ROOT_FILE);
        let whole_len = fs::metadata(&path).unwrap().len() as usize;
        let torn = Message {
            id: ItemId::sequential(11),
            author: "human".into(),
            ts_ms: 11,
            thread: None,
            kind: Kind::Post,
            body: "half".into(),
        };
        let bytes = format::serialize(&torn);
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&bytes[..bytes.len() - 5]).unwrap();
        let (msgs, problems) = store.read(&ch, None).unwrap();
        assert_eq!(msgs.iter().map(|m| &m.id).collect::<Vec<_>>(), vec![&a.id]);
        assert!(problems[0].contains("cut short"), "{problems:?}");
        let c = store.post(&ch, draft("human", "after"), 12).unwrap();
        let (msgs, problems) = store.read(&ch, None).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(msgs.iter().map(|m| &m.id).collect::<Vec<_>>(), vec![&a.id, &c.id]);
        assert_eq!(fs::metadata(&path).unwrap().len() as usize, whole_len + format::serialize(&msgs[1]).len());
    }

    #[test]
    fn damage_is_never_appended_after() {
        let (_tmp, store, ch) = store();
        store.post(&ch, draft("human", "whole"), 10).unwrap();
        let path = store.dir(&ch).join(ROOT_FILE);
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"hand edit\n").unwrap();
        f.write_all(&format::serialize(&Message {
            id: ItemId::sequential(11),
            author: "x".into(),
            ts_ms: 11,
            thread: None,
            kind: Kind::Post,
            body: "later".into(),
        }))
        .unwrap();
        let before = fs::read(&path).unwrap();
        assert!(matches!(store.post(&ch, draft("human", "more"), 12), Err(PostError::Corrupt { .. })));
        assert_eq!(fs::read(&path).unwrap(), before, "nothing cut, nothing appended");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Posts interleaved with writers killed mid-append (each cuts a torn tail first, as
        /// the lock holder does, then leaves a random prefix of its own record): a read shows
        /// exactly the posts that returned, in order, never a torn record.
        #[test]
        fn posts_and_torn_appends_read_back_as_exactly_the_posts_that_returned(
            steps in proptest::collection::vec((proptest::bool::ANY, "[a-z @`\n]{1,40}", 0.0f64..1.0), 1..12)
        ) {
            let (_tmp, store, ch) = store();
            let path = store.dir(&ch).join(ROOT_FILE);
            let mut posted = Vec::new();
            for (i, (torn, body, cut)) in steps.into_iter().enumerate() {
                if body.trim().is_empty() {
                    continue;
                }
                if torn {
                    let doomed = Message {
                        id: ItemId::sequential(1_000 + i as u64),
                        author: "human".into(),
                        ts_ms: 1_000 + i as u64,
                        thread: None,
                        kind: Kind::Post,
                        body: body.clone(),
                    };
                    let bytes = format::serialize(&doomed);
                    let keep = 1 + ((bytes.len() - 2) as f64 * cut) as usize;
                    // A writer holds the lock and cuts a torn tail before it appends, like
                    // `post`; this one then dies part way through its own record.
                    store.cut_torn_tail(&path).unwrap();
                    let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
                    f.write_all(&bytes[..keep]).unwrap();
                } else {
                    posted.push(store.post(&ch, draft("human", &body), 2_000 + i as u64).unwrap());
                }
                let (read, _) = store.read(&ch, None).unwrap();
                let got: Vec<&ItemId> = read.iter().map(|m| &m.id).collect();
                let want: Vec<&ItemId> = posted.iter().map(|m| &m.id).collect();
                proptest::prop_assert_eq!(got, want);
            }
            let (read, _) = store.read(&ch, None).unwrap();
            proptest::prop_assert_eq!(read, posted);
        }
    }

    #[test]
    fn adding_a_member_appends_one_joined_record_and_again_none() {
        let (_tmp, store, ch) = store();
        assert!(store.add_member(&ch, "bob", Role::Worker, 5).unwrap().1);
        assert!(!store.add_member(&ch, "bob", Role::Worker, 6).unwrap().1);
        assert!(store.add_member(&ch, "bob", Role::Supervisor, 7).unwrap().1, "a role change");
        let (msgs, _) = store.read(&ch, None).unwrap();
        let joined: Vec<&str> = msgs.iter().filter(|m| m.kind == Kind::Joined).map(|m| m.body.as_str()).collect();
        assert_eq!(joined, ["worker", "supervisor"]);
        assert_eq!(store.roster(&ch).unwrap().unwrap().members.len(), 1);
        assert!(store.remove_member(&ch, "bob").unwrap());
        assert!(!store.remove_member(&ch, "bob").unwrap());
        assert_eq!(store.list().unwrap(), vec![ch]);
    }

    /// A crash between the roster and the joined record: adding the member again appends the
    /// record it lacks (its onboarding prompt), once.
    #[test]
    fn adding_again_after_a_crash_before_the_joined_record_appends_it() {
        let (_tmp, store, ch) = store();
        let mut roster = store.roster(&ch).unwrap().unwrap();
        roster.members.push(Member { name: "bob".into(), role: Role::Worker, added_ms: 5 });
        store.save_roster(&roster).unwrap();
        assert!(store.add_member(&ch, "bob", Role::Worker, 6).unwrap().1, "the missing record is appended");
        assert!(!store.add_member(&ch, "bob", Role::Worker, 7).unwrap().1, "and only once");
        let (msgs, _) = store.read(&ch, None).unwrap();
        assert_eq!(msgs.iter().filter(|m| m.kind == Kind::Joined && m.author == "bob").count(), 1);
    }
}
