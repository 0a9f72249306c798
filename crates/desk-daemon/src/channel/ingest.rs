//! Channel ingest: routed messages become delivery items, each (message, member) pair exactly
//! once, across any crash and any hand edit.
//!
//! Owns the ingest cursor (`channels/<name>/ingest.json`: per conversation file, the mark — the
//! byte offset just past the last ingested record, and that record's id) and the pass that
//! advances it; the ledger of ingested messages is [`super::ledger`]'s, the stall record
//! [`super::stall`]'s. One pass over a channel: for every conversation file that changed,
//! check it against its mark (desk-core's `cursor`); in step, parse the whole records after the
//! mark; out of step (edited by hand), parse it from its start and take as new only records
//! whose ids the ledger lacks. Then read the roster, route each new record (desk-core's
//! `route`), write one `queued` item per recipient into the delivery store — unless a file of
//! that item already exists — and only then append the records' ids to the ledger and write
//! the new cursor (atomically, like the item files). Invariants: an item's id is a function of
//! (message, member) (`delivery_item_id`), so a pass cut by a crash at any point and run again
//! finds the items it already wrote and writes only the missing ones; a re-read file is checked
//! against the ledger, not the items (which the delivery store sweeps after a day) — nothing
//! is lost (the cursor never passes a record whose items are not all durable and whose id is
//! not in the ledger) and nothing is doubled; records are never skipped because they existed
//! when the daemon started (messages written while it was down are ingested when it comes
//! back); a torn or damaged tail is never ingested, and the cursor never passes it; a cursor
//! that cannot be read is rebuilt from the ledger, and without a ledger to trust the channel
//! stops (visibly) rather than start over or skip ahead. Messages are routed against the
//! roster read after the files, to members that had joined when the message was posted.

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::ledger::{self, LEDGER_FILE};
use super::stall;
use super::store::{ChannelStore, ROOT_FILE};
use crate::store::{Store, failpoint};
use desk_common::format::{self as record, Format};
use desk_common::fsutil;
use desk_core::channel::cursor::{Mark, Resume, ingested_prefix, resume};
use desk_core::channel::format::{self, Tail};
use desk_core::channel::route::{Recipient, ThreadContext, Why, route};
use desk_core::channel::{ChannelName, Kind, Message, Roster, delivery_item_id, prompt};
use desk_core::delivery::item::{Item, ItemId, State, When};

/// The cursor's format: version 2 since marks name their record (and the channel has a
/// ledger, `ingested.log`, whose fixed 27-byte lines are versioned with it); version 1 is still
/// read, and its first pass makes the ledger from it ([`Books::open`]).
pub const CURSOR_FORMAT: Format = Format { name: "channel ingest cursor", oldest: 1, current: 2 };

/// The cursor file's name in a channel directory.
pub const CURSOR_FILE: &str = "ingest.json";

/// Steps of a pass where the crash tests kill the daemon (`DESK_FAILPOINT`).
pub const FAILPOINTS: [&str; 5] = [
    "channel-before-items",
    "channel-mid-items",
    "channel-after-items",
    "channel-after-ledger",
    "channel-after-cursor",
];

/// How far each conversation file has been ingested.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// 2 since marks name their record (and the channel has a ledger); 1 before.
    pub version: u32,
    /// File name → byte offset just past the last ingested record.
    pub files: BTreeMap<String, u64>,
    /// File name → the id of that record (absent in version 1, and for a file with no record).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub last: BTreeMap<String, ItemId>,
}

impl Cursor {
    fn mark(&self, file: &str) -> Option<Mark> {
        let offset = *self.files.get(file)?;
        Some(Mark { offset, last: self.last.get(file).cloned() })
    }

    fn set(&mut self, file: &str, mark: Mark) {
        self.files.insert(file.to_string(), mark.offset);
        match mark.last {
            Some(id) => self.last.insert(file.to_string(), id),
            None => self.last.remove(file),
        };
    }
}

/// A message that mentions the operator or a person member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mention {
    pub message: String,
    pub author: String,
    /// The author is an agent member (a session the notification can be about).
    pub author_is_agent: bool,
    /// Who it mentions: `human`, person members.
    pub people: Vec<String>,
    pub body: String,
}

/// What one pass did.
#[derive(Debug, Default)]
pub struct Pass {
    /// Items written by this pass (not those found already there), for the engine.
    pub items: Vec<Item>,
    /// Items found already written (a pass cut by a crash, run again).
    pub existing: usize,
    /// Messages ingested.
    pub messages: usize,
    /// Messages that notify people (`@human`, person members), once each.
    pub notify: Vec<Mention>,
    /// Files found out of step with the cursor (edited by hand) and re-read from their start
    /// against the ledger, each with how, for the log.
    pub resynced: Vec<String>,
    /// Damage seen: bytes that are no record, after which nothing of that file is ingested
    /// until a person fixes it (the channel's stall, with a failed pass's error).
    pub damage: Vec<String>,
    /// Torn tails and other things for the log that stop nothing.
    pub problems: Vec<String>,
}

fn cursor_path(channels: &ChannelStore, name: &ChannelName) -> PathBuf {
    channels.dir(name).join(CURSOR_FILE)
}

/// The channel's cursor (none yet: `Ok(None)`).
pub fn read_cursor(channels: &ChannelStore, name: &ChannelName) -> Result<Option<Cursor>> {
    let path = cursor_path(channels, name);
    match fs::read(&path) {
        Ok(bytes) => record::decode(&CURSOR_FORMAT, &bytes)
            .map(Some)
            .with_context(|| format!("{} cannot be read", path.display())),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Written through the delivery store's spares, like the items it follows: rewritten by every
/// pass, it then creates and frees no inode (each freed inode is one more that every later
/// file created near it — the next pass's items — scans past, on ext4 without a journal).
fn save_cursor(channels: &ChannelStore, items: &Store, name: &ChannelName, cursor: &Cursor) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(cursor).context("cannot encode a cursor")?;
    bytes.push(b'\n');
    items.write_beside(&cursor_path(channels, name), bytes)
}

/// One ingest pass over a channel. `now_ms` stamps the items' evidence. A pass that fails
/// part way (a full disk) still returns the items it wrote before the failure, with the error:
/// the caller must hand those to the engine (the next pass will find them already written and
/// write only the rest), and try again later. What stops the channel (damage, the error) is
/// recorded for `desk channel ls`, `post`, `desk queue` and the dashboard ([`stall`]), and
/// cleared by a pass that is stopped by nothing.
pub fn ingest_channel(channels: &ChannelStore, items: &Store, name: &ChannelName, now_ms: u64) -> (Pass, Result<()>) {
    let mut pass = Pass::default();
    let result = run_pass(channels, items, name, now_ms, &mut pass);
    let mut reasons = pass.damage.clone();
    if let Err(e) = &result {
        reasons.push(format!("desk serve cannot ingest it: {e:#} (it tries again, at least every 30 s)"));
    }
    if channels.exists(name)
        && let Err(e) = stall::record(&channels.dir(name), &reasons, now_ms)
    {
        pass.problems.push(format!("{e:#}"));
    }
    (pass, result)
}

/// What the pass knows of what was ingested before it: the cursor, and the ledger once a file
/// needs it.
struct Books {
    dir: PathBuf,
    cursor: Cursor,
    /// The cursor could not be used: every file is read from its start, for this reason.
    unusable: Option<String>,
    ledger: Option<HashSet<ItemId>>,
}

impl Books {
    /// The cursor and the ledger as they are, made consistent: a channel never ingested gets
    /// an empty ledger; one last ingested by a desk without ledgers gets one from its cursor
    /// (the records before each file's mark), if every file is still in step with it.
    fn open(channels: &ChannelStore, name: &ChannelName) -> Result<Books> {
        let dir = channels.dir(name);
        let mut books = Books { dir: dir.clone(), cursor: Cursor::default(), unusable: None, ledger: None };
        let cursor = read_cursor(channels, name);
        if ledger::exists(&dir) {
            match cursor {
                Ok(Some(c)) => books.cursor = c,
                Ok(None) => books.unusable = Some(format!("there is no {CURSOR_FILE}")),
                // Rebuilt from the ledger, which is the truth; the file is kept aside, not
                // written over (it may be a newer desk's).
                Err(e) => {
                    books.unusable =
                        Some(match record::set_aside(&cursor_path(channels, name), format!("{:#}", e.root_cause())) {
                            Ok(aside) => aside.message(),
                            Err(moved) => format!("{e:#}; and it cannot be set aside: {moved:#}"),
                        });
                }
            }
            return Ok(books);
        }
        match cursor {
            Ok(None) => {
                ledger::create(&dir, &[])?;
                books.ledger = Some(HashSet::new());
            }
            Ok(Some(mut c)) => {
                let mut ids = Vec::new();
                for (file, offset) in c.files.clone() {
                    let Some(mark) = c.mark(&file) else { continue };
                    let bytes = match fs::read(dir.join(&file)) {
                        Ok(bytes) => bytes,
                        Err(e) if e.kind() == ErrorKind::NotFound && offset == 0 => continue,
                        Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.join(&file).display())),
                    };
                    let records = format::parse(&bytes, 0).records;
                    let Some(done) = ingested_prefix(&records, &mark) else {
                        bail!(
                            "{} is out of step with {CURSOR_FILE} (edited by hand?), and the channel has no {LEDGER_FILE} \
                             to re-synchronise with (it was last ingested by an older desk), so which of its messages \
                             were delivered cannot be told. Restore the file as it was, or remove {} to ingest the \
                             channel from its start (messages delivered more than a day ago would be delivered again)",
                            dir.join(&file).display(),
                            cursor_path(channels, name).display()
                        );
                    };
                    ids.extend(done.iter().map(|r| r.message.id.clone()));
                    let last = done.last().map(|r| r.message.id.clone());
                    c.set(&file, Mark { offset, last });
                }
                ledger::create(&dir, &ids)?;
                books.cursor = c;
                books.ledger = Some(ids.into_iter().collect());
            }
            Err(e) => bail!(
                "{e:#}, and the channel has no {LEDGER_FILE} to re-synchronise with (it was last ingested by an \
                 older desk), so which of its messages were delivered cannot be told. Restore the file, or \
                 remove it to ingest the channel from its start (messages delivered more than a day ago would \
                 be delivered again)"
            ),
        }
        Ok(books)
    }

    /// Where ingest of the file resumes (and, when the file is out of step, why).
    fn resume(&self, file: &str, bytes: &[u8]) -> Resume {
        match &self.unusable {
            Some(why) => Resume::FromStart { why: Some(why.clone()) },
            None => resume(bytes, self.cursor.mark(file).as_ref()),
        }
    }

    /// Whether the file is as the cursor left it, from its length and its last bytes alone
    /// (the common case of a pass: most files did not change).
    fn unchanged(&self, path: &Path, file: &str, len: u64) -> bool {
        let Some(Mark { offset, last: Some(id) }) = self.cursor.mark(file) else { return false };
        if self.unusable.is_some() || offset != len {
            return false;
        }
        let end = format::end_mark(&id);
        let mut tail = vec![0u8; end.len()];
        use std::os::unix::fs::FileExt;
        let read = fs::File::open(path).and_then(|f| f.read_exact_at(&mut tail, len.saturating_sub(end.len() as u64)));
        read.is_ok() && tail == end.as_bytes()
    }

    fn ingested(&mut self) -> Result<&HashSet<ItemId>> {
        if self.ledger.is_none() {
            let ids =
                ledger::read(&self.dir)?.with_context(|| format!("{} is gone", ledger::path(&self.dir).display()))?;
            self.ledger = Some(ids);
        }
        Ok(self.ledger.get_or_insert_default())
    }
}

fn run_pass(channels: &ChannelStore, items: &Store, name: &ChannelName, now_ms: u64, pass: &mut Pass) -> Result<()> {
    // A channel still being created (no members file yet) is ingested once it has one.
    if channels.roster(name)?.is_none() {
        return Ok(());
    }
    let mut books = Books::open(channels, name)?;
    let before = books.cursor.clone();
    let dir = channels.dir(name);
    // The files first, then the roster: a member is in the members file before any record
    // that needs it is appended (its joined record, posts after it joined), so a roster read
    // after the files knows every member a record read here is routed to. Read before them,
    // a member added in between would miss its onboarding prompt.
    let mut changed = Vec::new();
    for (file, thread) in channels.files(name)? {
        let path = dir.join(&file);
        let len = match fs::metadata(&path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot inspect {}", path.display())),
        };
        if books.unchanged(&path, &file, len) {
            continue;
        }
        match fs::read(&path) {
            Ok(bytes) => changed.push((file, thread, path, bytes)),
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }
    let Some(roster) = channels.roster(name)? else { return Ok(()) };
    // Messages turned into items by this pass, for the ledger.
    let mut done: Vec<ItemId> = Vec::new();
    // Their items, made durable together before the ledger and the cursor pass over them.
    let mut fresh: Vec<Item> = Vec::new();
    // The root conversation, parsed once per pass if a thread needs its parent's author.
    let mut root: Option<Vec<Message>> = None;
    for (file, thread, path, bytes) in changed {
        let resumed = books.resume(&file, &bytes);
        // After the mark: a thread is still read whole (its earlier authors are the
        // participants), the root from the mark on. From the start: each record is checked
        // against the ledger.
        let after = match &resumed {
            Resume::After(offset) => Some(*offset),
            Resume::FromStart { why } => {
                if let Some(why) = why {
                    pass.resynced.push(format!("{}: {why}", path.display()));
                }
                None
            }
        };
        let start = match after {
            Some(offset) if thread.is_none() => offset,
            _ => 0,
        };
        let Some(slice) = bytes.get(start..) else { continue };
        let parsed = format::parse(slice, start);
        match &parsed.tail {
            Tail::Clean => {}
            // A writer may be mid-append right now: not a problem until it stays.
            Tail::Torn { .. } => {}
            Tail::Corrupt { at, reason } => pass.damage.push(format!(
                "{} is damaged at byte {at} ({reason}): nothing after it is delivered until a person fixes the file",
                path.display()
            )),
        }
        let parent_author = match &thread {
            Some(parent) => {
                if root.is_none() {
                    root = Some(channels.read_file(&dir.join(ROOT_FILE))?.messages);
                }
                root.as_ref().and_then(|r| r.iter().find(|m| &m.id == parent)).map(|m| m.author.clone())
            }
            None => None,
        };
        let mut participants: Vec<String> = Vec::new();
        for record in &parsed.records {
            let msg = &record.message;
            let seen = match after {
                Some(offset) => record.start < offset,
                None => books.ingested()?.contains(&msg.id),
            };
            if !seen {
                let ctx = ThreadContext { parent_author: parent_author.as_deref(), participants: &participants };
                let routing = route(msg, &roster.members, &ctx);
                make_items(items, &roster, name, msg, &routing.prompts, now_ms, pass, &mut fresh)?;
                if !routing.notify.is_empty() {
                    pass.notify.push(Mention {
                        message: msg.id.to_string(),
                        author: msg.author.clone(),
                        author_is_agent: roster.member(&msg.author).is_some_and(|m| m.role.is_agent()),
                        people: routing.notify,
                        body: msg.body.clone(),
                    });
                }
                pass.messages += 1;
                done.push(msg.id.clone());
            }
            if !participants.contains(&msg.author) {
                participants.push(msg.author.clone());
            }
        }
        // The new mark: the last whole record. Read from the start, the mark is whatever the
        // file holds now (even nothing) — unless damage hid the rest of it: records past the
        // damage may have been ingested before, so the file is read from its start against
        // the ledger until it is fixed, never resumed after a mark that went back.
        let last = parsed.records.last().map(|r| Mark { offset: r.end as u64, last: Some(r.message.id.clone()) });
        let nothing = Mark { offset: 0, last: None };
        match (after, last) {
            (Some(offset), Some(mark)) if mark.offset > offset as u64 => books.cursor.set(&file, mark),
            (Some(_), _) => {}
            (None, _) if matches!(parsed.tail, Tail::Corrupt { .. }) => books.cursor.set(&file, nothing),
            (None, mark) => books.cursor.set(&file, mark.unwrap_or(nothing)),
        }
    }
    write_items(items, fresh, pass)?;
    if !done.is_empty() || books.cursor != before || books.cursor.version != 2 {
        failpoint("channel-after-items");
        ledger::append(&dir, &done)?;
        failpoint("channel-after-ledger");
        books.cursor.version = 2;
        save_cursor(channels, items, name, &books.cursor)?;
        failpoint("channel-after-cursor");
    }
    Ok(())
}

/// The items of one message, each unless a file of it already exists (or the pass made it
/// already), added to `fresh`.
#[allow(clippy::too_many_arguments)]
fn make_items(
    items: &Store,
    roster: &Roster,
    name: &ChannelName,
    msg: &Message,
    recipients: &[Recipient],
    now_ms: u64,
    pass: &mut Pass,
    fresh: &mut Vec<Item>,
) -> Result<()> {
    for to in recipients {
        let id = delivery_item_id(&msg.id, msg.ts_ms, &to.member);
        if items.exists(&id, &to.member)? || fresh.iter().any(|i| i.id == id) {
            pass.existing += 1;
            continue;
        }
        let text = match (msg.kind, to.why) {
            (Kind::Joined, _) | (_, Why::Joined) => match roster.member(&to.member) {
                Some(member) => prompt::onboarding_prompt(roster, member),
                None => continue,
            },
            (Kind::Checkin, _) => prompt::checkin_prompt(name, msg, to),
            (Kind::Post, _) => prompt::message_prompt(name, msg, to),
        };
        let mut item = Item::new(id, to.member.clone(), None, text, When::Now, prompt::sender(name, msg), now_ms);
        item.channel = Some(name.to_string());
        item.note(now_ms, "channel", format!("#{name} message {} ({})", msg.id, to.why.phrase()));
        fresh.push(item);
    }
    Ok(())
}

/// Make the pass's new items durable, as one group commit (every record written, then all
/// synced together). The ones written go to `pass.items` even when another failed (they are
/// durable, and the next pass skips them); the first failure is returned.
fn write_items(items: &Store, fresh: Vec<Item>, pass: &mut Pass) -> Result<()> {
    if fresh.is_empty() {
        return Ok(());
    }
    failpoint("channel-before-items");
    let group: Vec<(Item, State)> = fresh.into_iter().map(|i| (i, State::Queued)).collect();
    let several = group.len() > 1;
    let results = items.persist_group(&group, |step| {
        // One item's file in place, the others not yet: a crash between two items.
        if step == fsutil::GroupStep::Renamed(0) && several {
            failpoint("channel-mid-items");
        }
    });
    let mut first_error = None;
    for ((item, _), result) in group.into_iter().zip(results) {
        match result {
            Ok(()) => pass.items.push(item),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::store::Draft;
    use desk_common::paths::Paths;
    use desk_core::channel::Role;

    fn setup() -> (tempfile::TempDir, ChannelStore, Store, ChannelName) {
        let tmp = tempfile::tempdir().unwrap();
        let paths =
            Paths { runtime: tmp.path().join("run"), state: tmp.path().join("state"), config: tmp.path().join("c") };
        let channels = ChannelStore::open(&paths).unwrap();
        let items = Store::open(&paths.state).unwrap();
        let name = ChannelName::parse("build").unwrap();
        channels.create(&name, "goal", 1).unwrap();
        (tmp, channels, items, name)
    }

    fn post(
        channels: &ChannelStore,
        name: &ChannelName,
        author: &str,
        body: &str,
        thread: Option<&Message>,
        at: u64,
    ) -> Message {
        let draft = Draft { author: author.into(), thread: thread.map(|m| m.id.clone()), body: body.into() };
        channels.post(name, draft, at).unwrap()
    }

    fn ok((pass, result): (Pass, Result<()>)) -> Pass {
        result.unwrap();
        pass
    }

    fn pairs(items: &Store) -> Vec<(String, String)> {
        let (all, _) = items.load_all().unwrap();
        let mut v: Vec<(String, String)> =
            all.iter().map(|i| (i.session.clone(), i.text.lines().next().unwrap_or("").to_string())).collect();
        v.sort();
        v
    }

    #[test]
    fn each_pair_becomes_one_item_and_a_second_pass_adds_nothing() {
        let (_tmp, channels, items, name) = setup();
        channels.add_member(&name, "alice", Role::Worker, 2).unwrap();
        channels.add_member(&name, "bob", Role::Worker, 2).unwrap();
        channels.add_member(&name, "sup", Role::Supervisor, 2).unwrap();
        let root = post(&channels, &name, "alice", "hello", None, 10);
        post(&channels, &name, "bob", "reply", Some(&root), 11);
        let pass = ok(ingest_channel(&channels, &items, &name, 20));
        // Three onboarding prompts, hello to bob and sup, the reply to alice and sup.
        assert_eq!(pass.items.len(), 7, "{:?}", pass.items.iter().map(|i| &i.session).collect::<Vec<_>>());
        assert_eq!(pass.messages, 5);
        let again = ok(ingest_channel(&channels, &items, &name, 21));
        assert_eq!((again.items.len(), again.messages, again.existing), (0, 0, 0));
        assert_eq!(items.load_all().unwrap().0.len(), 7);
        let onboarding = pairs(&items).into_iter().filter(|(_, l)| l.contains("you joined")).count();
        assert_eq!(onboarding, 3);
    }

    #[test]
    fn a_pass_cut_before_its_cursor_is_written_doubles_nothing() {
        let (_tmp, channels, items, name) = setup();
        channels.add_member(&name, "alice", Role::Worker, 2).unwrap();
        channels.add_member(&name, "bob", Role::Worker, 2).unwrap();
        post(&channels, &name, "human", "hi all", None, 10);
        let first = ok(ingest_channel(&channels, &items, &name, 20));
        assert_eq!(first.items.len(), 4);
        // The crash: the cursor never became durable, and one item of the last message is gone
        // too (the pass died between two items).
        fs::remove_file(channels.dir(&name).join(CURSOR_FILE)).unwrap();
        fs::write(ledger::path(&channels.dir(&name)), b"").unwrap();
        let (all, _) = items.load_all().unwrap();
        let victim = all.iter().find(|i| i.text.contains("hi all")).unwrap();
        fs::remove_file(items.root().join("queue").join(&victim.session).join(format!("{}.queued", victim.id)))
            .unwrap();
        let again = ok(ingest_channel(&channels, &items, &name, 30));
        assert_eq!((again.items.len(), again.existing), (1, 3), "only the missing item is written");
        assert_eq!(again.items[0].id, victim.id);
        assert_eq!(items.load_all().unwrap().0.len(), 4);
    }

    #[test]
    fn a_torn_tail_is_not_ingested_and_the_cursor_stops_before_it() {
        let (_tmp, channels, items, name) = setup();
        channels.add_member(&name, "alice", Role::Worker, 2).unwrap();
        post(&channels, &name, "human", "whole", None, 10);
        let path = channels.dir(&name).join(ROOT_FILE);
        let whole = fs::metadata(&path).unwrap().len();
        let half = Message {
            id: desk_core::delivery::item::ItemId::sequential(11),
            author: "human".into(),
            ts_ms: 11,
            thread: None,
            kind: Kind::Post,
            body: "torn".into(),
        };
        let bytes = format::serialize(&half);
        use std::io::Write;
        fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(&bytes[..bytes.len() / 2]).unwrap();
        let pass = ok(ingest_channel(&channels, &items, &name, 20));
        assert_eq!(pass.items.len(), 2, "onboarding and 'whole' only");
        assert_eq!(read_cursor(&channels, &name).unwrap().unwrap().files[ROOT_FILE], whole);
        // The next post cuts the tail; the pass after it ingests only that post.
        post(&channels, &name, "human", "next", None, 12);
        let pass = ok(ingest_channel(&channels, &items, &name, 21));
        assert_eq!(pass.items.iter().map(|i| i.text.contains("next")).collect::<Vec<_>>(), vec![true]);
    }

    #[test]
    fn a_pass_that_fails_part_way_returns_what_it_wrote_and_the_next_writes_the_rest() {
        let (_tmp, channels, items, name) = setup();
        channels.add_member(&name, "alice", Role::Worker, 2).unwrap();
        channels.add_member(&name, "bob", Role::Worker, 2).unwrap();
        ok(ingest_channel(&channels, &items, &name, 5));
        post(&channels, &name, "human", "to both", None, 10);
        // bob's queue cannot be written: a file is in the way of its directory.
        let bob = items.root().join("queue").join("bob");
        fs::remove_dir_all(&bob).unwrap();
        fs::write(&bob, b"").unwrap();
        let (pass, result) = ingest_channel(&channels, &items, &name, 20);
        assert!(result.is_err());
        assert_eq!(
            pass.items.iter().map(|i| i.session.as_str()).collect::<Vec<_>>(),
            ["alice"],
            "handed to the engine"
        );
        fs::remove_file(&bob).unwrap();
        let again = ok(ingest_channel(&channels, &items, &name, 30));
        assert_eq!(
            (again.items.iter().map(|i| i.session.as_str()).collect::<Vec<_>>(), again.existing),
            (vec!["bob"], 1)
        );
    }

    /// Remove the record of message `id` from `file` by hand, leaving the file well-formed.
    fn delete_record(channels: &ChannelStore, name: &ChannelName, file: &str, id: &ItemId) {
        let path = channels.dir(name).join(file);
        let mut bytes = fs::read(&path).unwrap();
        let parsed = format::parse(&bytes, 0);
        let r = parsed.records.iter().find(|r| &r.message.id == id).unwrap();
        bytes.drain(r.start..r.end);
        fs::write(&path, bytes).unwrap();
        assert_eq!(format::parse(&fs::read(&path).unwrap(), 0).tail, Tail::Clean);
    }

    /// Every item file of the store gone, as the sweep removes delivered items after a day.
    fn sweep_everything(items: &Store) {
        fs::remove_dir_all(items.root().join("queue")).unwrap();
    }

    fn bodies_to(items: &Store, session: &str) -> Vec<String> {
        let (all, _) = items.load_all().unwrap();
        let mut v: Vec<String> = all
            .iter()
            .filter(|i| i.session == session)
            .filter_map(|i| i.text.lines().nth(3).map(String::from))
            .collect();
        v.sort();
        v
    }

    /// Issue 18's finding: M1–M3 ingested, M1's record deleted by hand, M4–M10 posted (M4 as
    /// long as M1, so it ends where the cursor stopped). The file is re-read and checked
    /// against the ledger: M4–M10 become items, M2 and M3 do not again — even though their
    /// items were swept from the store, so the items' fixed ids could not have told.
    #[test]
    fn a_record_deleted_by_hand_is_resynchronised_and_nothing_is_ingested_twice() {
        let (_tmp, channels, items, name) = setup();
        channels.add_member(&name, "alice", Role::Worker, 2).unwrap();
        let first: Vec<Message> =
            (1..=3).map(|i| post(&channels, &name, "human", &format!("M{i}"), None, 10 + i)).collect();
        let pass = ok(ingest_channel(&channels, &items, &name, 20));
        assert_eq!(pass.items.len(), 4, "the onboarding and M1-M3");
        sweep_everything(&items);
        delete_record(&channels, &name, ROOT_FILE, &first[0].id);
        // The edit alone: the file is re-read, nothing is new.
        let pass = ok(ingest_channel(&channels, &items, &name, 21));
        assert_eq!((pass.items.len(), pass.resynced.len()), (0, 1), "{:?}", pass.resynced);
        assert!(pass.resynced[0].contains("shorter than"), "{:?}", pass.resynced);
        for i in 4..=10 {
            post(&channels, &name, "human", &format!("M{i}"), None, 20 + i);
        }
        let pass = ok(ingest_channel(&channels, &items, &name, 40));
        assert!(pass.resynced.is_empty(), "in step again after the first re-read: {:?}", pass.resynced);
        let want: Vec<String> = (4..=10).map(|i| format!("M{i}")).collect();
        let mut want_sorted = want.clone();
        want_sorted.sort();
        assert_eq!(bodies_to(&items, "alice"), want_sorted);
        assert!(stall::read(&channels.dir(&name)).is_none());
    }

    /// The same edit made while the daemon was down, with M4 posted after it: M4 ends where
    /// the cursor stopped, so only the mark's record tells the file changed.
    #[test]
    fn a_record_that_ends_at_the_old_cursor_is_not_taken_for_the_ingested_one() {
        let (_tmp, channels, items, name) = setup();
        channels.add_member(&name, "alice", Role::Worker, 2).unwrap();
        let first: Vec<Message> =
            (1..=3).map(|i| post(&channels, &name, "human", &format!("M{i}"), None, 10 + i)).collect();
        ok(ingest_channel(&channels, &items, &name, 20));
        let mark = read_cursor(&channels, &name).unwrap().unwrap().files[ROOT_FILE];
        delete_record(&channels, &name, ROOT_FILE, &first[0].id);
        post(&channels, &name, "human", "M4", None, 24);
        assert_eq!(fs::metadata(channels.dir(&name).join(ROOT_FILE)).unwrap().len(), mark, "M4 ends at the mark");
        sweep_everything(&items);
        let pass = ok(ingest_channel(&channels, &items, &name, 30));
        assert_eq!(pass.items.iter().map(|i| i.text.lines().nth(3).unwrap_or("")).collect::<Vec<_>>(), ["M4"]);
        assert!(pass.resynced[0].contains("no longer ends at byte"), "{:?}", pass.resynced);
    }

    /// A cursor that cannot be read is rebuilt from the ledger, not started over.
    #[test]
    fn a_corrupt_cursor_is_rebuilt_from_the_ledger_without_doubling() {
        let (_tmp, channels, items, name) = setup();
        channels.add_member(&name, "alice", Role::Worker, 2).unwrap();
        post(&channels, &name, "human", "before", None, 10);
        ok(ingest_channel(&channels, &items, &name, 20));
        sweep_everything(&items);
        fs::write(channels.dir(&name).join(CURSOR_FILE), b"{garbage").unwrap();
        post(&channels, &name, "human", "after", None, 30);
        let pass = ok(ingest_channel(&channels, &items, &name, 40));
        assert_eq!(pass.items.iter().map(|i| i.text.lines().nth(3).unwrap_or("")).collect::<Vec<_>>(), ["after"]);
        assert!(pass.resynced[0].contains("could not be read"), "{:?}", pass.resynced);
        assert!(read_cursor(&channels, &name).unwrap().is_some(), "rewritten");
        let aside = channels.dir(&name).join(format!("{CURSOR_FILE}.bad"));
        assert_eq!(fs::read(&aside).unwrap(), b"{garbage", "the unreadable cursor is kept, not written over");
        assert!(pass.resynced[0].contains(&aside.display().to_string()), "{:?}", pass.resynced);
    }

    /// A channel last ingested by a desk without ledgers: its ledger is made from the cursor
    /// (while every file is in step with it), and re-synchronisation works from then on.
    #[test]
    fn a_version_1_cursor_seeds_the_ledger() {
        let (_tmp, channels, items, name) = setup();
        channels.add_member(&name, "alice", Role::Worker, 2).unwrap();
        let first = post(&channels, &name, "human", "old one", None, 10);
        post(&channels, &name, "human", "old two", None, 11);
        ok(ingest_channel(&channels, &items, &name, 20));
        // What an older desk left: offsets alone, no ledger; and its items long swept.
        let mut cursor = read_cursor(&channels, &name).unwrap().unwrap();
        cursor.version = 1;
        cursor.last.clear();
        save_cursor(&channels, &items, &name, &cursor).unwrap();
        fs::remove_file(ledger::path(&channels.dir(&name))).unwrap();
        sweep_everything(&items);
        post(&channels, &name, "human", "new", None, 30);
        let pass = ok(ingest_channel(&channels, &items, &name, 40));
        assert_eq!(pass.items.iter().map(|i| i.text.lines().nth(3).unwrap_or("")).collect::<Vec<_>>(), ["new"]);
        assert_eq!(ledger::read(&channels.dir(&name)).unwrap().unwrap().len(), 4, "joined, the two old, new");
        // From now on an edit is re-synchronised against it.
        delete_record(&channels, &name, ROOT_FILE, &first.id);
        let pass = ok(ingest_channel(&channels, &items, &name, 50));
        assert_eq!((pass.items.len(), pass.resynced.len()), (0, 1));
    }

    /// Without a ledger an out-of-step file cannot be re-synchronised: the channel stalls,
    /// visibly and saying what to do, and neither starts over nor skips ahead.
    #[test]
    fn an_old_cursor_out_of_step_without_a_ledger_stalls_the_channel_visibly() {
        let (_tmp, channels, items, name) = setup();
        channels.add_member(&name, "alice", Role::Worker, 2).unwrap();
        let first = post(&channels, &name, "human", "one", None, 10);
        ok(ingest_channel(&channels, &items, &name, 20));
        fs::remove_file(ledger::path(&channels.dir(&name))).unwrap();
        delete_record(&channels, &name, ROOT_FILE, &first.id);
        post(&channels, &name, "human", "two", None, 30);
        let (pass, result) = ingest_channel(&channels, &items, &name, 40);
        let err = format!("{:#}", result.unwrap_err());
        assert!(err.contains("out of step") && err.contains("Restore the file"), "{err}");
        assert!(pass.items.is_empty());
        let stall = stall::read(&channels.dir(&name)).expect("recorded");
        assert_eq!(stall.since_ms, 40);
        assert!(stall.reasons[0].contains("out of step"), "{stall:?}");
        // The same with a corrupt cursor.
        fs::write(channels.dir(&name).join(CURSOR_FILE), b"{garbage").unwrap();
        let err = format!("{:#}", ingest_channel(&channels, &items, &name, 50).1.unwrap_err());
        assert!(err.contains("cannot be read") && err.contains("no ingested.log"), "{err}");
        assert_eq!(stall::read(&channels.dir(&name)).unwrap().since_ms, 40, "the same stall");
    }

    /// Damage stops the file at that byte: recorded as the channel's stall until fixed.
    #[test]
    fn damage_stalls_the_channel_until_the_file_is_fixed_and_then_nothing_is_doubled() {
        let (_tmp, channels, items, name) = setup();
        channels.add_member(&name, "alice", Role::Worker, 2).unwrap();
        post(&channels, &name, "human", "one", None, 10);
        let two = post(&channels, &name, "human", "two", None, 11);
        ok(ingest_channel(&channels, &items, &name, 20));
        let path = channels.dir(&name).join(ROOT_FILE);
        let good = fs::read(&path).unwrap();
        // A hand edit changes "two"'s length without fixing its header.
        let text = String::from_utf8(good.clone()).unwrap().replace("\ntwo\n", "\ntwo!\n");
        fs::write(&path, text).unwrap();
        let pass = ok(ingest_channel(&channels, &items, &name, 30));
        assert!(pass.damage[0].contains("is damaged at byte"), "{:?}", pass.damage);
        let stall = stall::read(&channels.dir(&name)).expect("a stall");
        assert!(stall.reasons[0].contains(&format!("record {} does not end", two.id)), "{stall:?}");
        // Fixed: the stall goes, and "two" (ingested before the damage) is not ingested again.
        fs::write(&path, good).unwrap();
        sweep_everything(&items);
        let pass = ok(ingest_channel(&channels, &items, &name, 40));
        assert_eq!(pass.items.len(), 0);
        assert!(stall::read(&channels.dir(&name)).is_none());
    }

    #[test]
    fn a_member_added_later_does_not_get_earlier_messages() {
        let (_tmp, channels, items, name) = setup();
        channels.add_member(&name, "alice", Role::Worker, 2).unwrap();
        post(&channels, &name, "human", "before bob", None, 10);
        channels.add_member(&name, "bob", Role::Worker, 20).unwrap();
        ok(ingest_channel(&channels, &items, &name, 30));
        let got = pairs(&items);
        assert!(!got.iter().any(|(s, l)| s == "bob" && l.contains("from human")), "{got:?}");
        assert!(got.iter().any(|(s, l)| s == "alice" && l.contains("from human")), "{got:?}");
    }
}
