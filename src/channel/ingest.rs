//! Channel ingest: routed messages become delivery items, each (message, member) pair exactly
//! once, across any crash.
//!
//! Owns the ingest cursor (`channels/<name>/ingest.json`: per conversation file, the byte offset
//! up to which every whole record has been turned into items) and the pass that advances it.
//! One pass over a channel: for every conversation file longer than its cursor, parse the whole
//! records after the cursor, route each one (desk-core's `route`), write one `queued` item per
//! recipient into the delivery store — unless a file of that item already exists — and only
//! then write the new cursor (atomically, like the item files). Invariants: an item's id is a
//! function of (message, member) (`delivery_item_id`), so a pass cut by a crash at any point
//! and run again finds the items it already wrote and writes only the missing ones — nothing is
//! lost (the cursor never passes a record whose items are not all durable) and nothing is
//! doubled; records are never skipped because they existed when the daemon started (messages
//! written while it was down are ingested when it comes back); a torn or damaged tail is never
//! ingested, and the cursor never passes it; a cursor that cannot be read stops that channel's
//! ingest (logged) rather than starting over. Messages are routed against the roster at ingest
//! time, to members that had joined when the message was posted.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::io::ErrorKind;
use std::path::PathBuf;

use super::format::{self, Tail};
use super::route::{Recipient, ThreadContext, Why, route};
use super::store::{ChannelStore, ROOT_FILE};
use super::{ChannelName, Kind, Message, Roster, delivery_item_id, prompt};
use crate::delivery::item::{Item, State, When};
use crate::delivery::store::{Store, failpoint};
use crate::fsutil;

/// The cursor file's name in a channel directory.
pub const CURSOR_FILE: &str = "ingest.json";

/// Steps of a pass where the crash tests kill the daemon (`DESK_FAILPOINT`).
pub const FAILPOINTS: [&str; 4] =
    ["channel-before-items", "channel-mid-items", "channel-after-items", "channel-after-cursor"];

/// How far each conversation file has been ingested.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub version: u32,
    /// File name → byte offset just past the last ingested record.
    pub files: BTreeMap<String, u64>,
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
    /// Torn tails and damage seen (not ingested), for the log.
    pub problems: Vec<String>,
}

fn cursor_path(channels: &ChannelStore, name: &ChannelName) -> PathBuf {
    channels.dir(name).join(CURSOR_FILE)
}

/// The channel's cursor (none yet: every file from its start).
pub fn load_cursor(channels: &ChannelStore, name: &ChannelName) -> Result<Cursor> {
    let path = cursor_path(channels, name);
    match fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).with_context(|| {
            format!("{} is corrupt; ingest of #{name} stops until it is fixed (see docs/channels.md)", path.display())
        }),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Cursor { version: 1, files: BTreeMap::new() }),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

fn save_cursor(channels: &ChannelStore, name: &ChannelName, cursor: &Cursor) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(cursor).context("cannot encode a cursor")?;
    bytes.push(b'\n');
    fsutil::write_atomic(&cursor_path(channels, name), &bytes)
}

/// One ingest pass over a channel. `now_ms` stamps the items' evidence. A pass that fails
/// part way (a full disk) still returns the items it wrote before the failure, with the error:
/// the caller must hand those to the engine (the next pass will find them already written and
/// write only the rest), and try again later.
pub fn ingest_channel(channels: &ChannelStore, items: &Store, name: &ChannelName, now_ms: u64) -> (Pass, Result<()>) {
    let mut pass = Pass::default();
    let result = run_pass(channels, items, name, now_ms, &mut pass);
    (pass, result)
}

fn run_pass(channels: &ChannelStore, items: &Store, name: &ChannelName, now_ms: u64, pass: &mut Pass) -> Result<()> {
    let Some(roster) = channels.roster(name)? else { return Ok(()) };
    let mut cursor = load_cursor(channels, name)?;
    let before = cursor.clone();
    let dir = channels.dir(name);
    // The root conversation, parsed once per pass if a thread needs its parent's author.
    let mut root: Option<Vec<Message>> = None;
    for (file, thread) in channels.files(name)? {
        let path = dir.join(&file);
        let from = cursor.files.get(&file).copied().unwrap_or(0);
        let len = match fs::metadata(&path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot inspect {}", path.display())),
        };
        if len <= from {
            if len < from {
                pass.problems
                    .push(format!("{} is shorter than what was ingested of it; edited by hand?", path.display()));
            }
            continue;
        }
        // A thread is read whole (its earlier authors are the participants); the root from the
        // cursor on.
        let bytes = fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let start = if thread.is_some() { 0 } else { from as usize };
        let Some(slice) = bytes.get(start..) else { continue };
        let parsed = format::parse(slice, start);
        match &parsed.tail {
            Tail::Clean => {}
            // A writer may be mid-append right now: not a problem until it stays.
            Tail::Torn { .. } => {}
            Tail::Corrupt { at, reason } => {
                pass.problems.push(format!("{} is damaged at byte {at}: {reason}", path.display()))
            }
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
        let mut end = from;
        for record in &parsed.records {
            let msg = &record.message;
            if (record.start as u64) < from {
                if !participants.contains(&msg.author) {
                    participants.push(msg.author.clone());
                }
                continue;
            }
            let ctx = ThreadContext { parent_author: parent_author.as_deref(), participants: &participants };
            let routing = route(msg, &roster.members, &ctx);
            write_items(items, &roster, name, msg, &routing.prompts, now_ms, pass)?;
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
            if !participants.contains(&msg.author) {
                participants.push(msg.author.clone());
            }
            end = record.end as u64;
        }
        if end > from {
            cursor.files.insert(file, end);
        }
    }
    if cursor != before {
        failpoint("channel-after-items");
        cursor.version = 1;
        save_cursor(channels, name, &cursor)?;
        failpoint("channel-after-cursor");
    }
    Ok(())
}

/// The items of one message, each written unless it already exists.
fn write_items(
    items: &Store,
    roster: &Roster,
    name: &ChannelName,
    msg: &Message,
    recipients: &[Recipient],
    now_ms: u64,
    pass: &mut Pass,
) -> Result<()> {
    if !recipients.is_empty() {
        failpoint("channel-before-items");
    }
    for (i, to) in recipients.iter().enumerate() {
        let id = delivery_item_id(&msg.id, msg.ts_ms, &to.member);
        if items.exists(&id, &to.member)? {
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
        item.note(now_ms, "channel", format!("#{name} message {} ({})", msg.id, to.why.phrase()));
        items.persist(&item, State::Queued)?;
        if i == 0 && recipients.len() > 1 {
            failpoint("channel-mid-items");
        }
        pass.items.push(item);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::Role;
    use crate::channel::store::Draft;
    use crate::paths::Paths;

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
            id: crate::delivery::item::ItemId::sequential(11),
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
        assert_eq!(load_cursor(&channels, &name).unwrap().files[ROOT_FILE], whole);
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

    #[test]
    fn a_corrupt_cursor_stops_the_channel_instead_of_starting_over() {
        let (_tmp, channels, items, name) = setup();
        fs::write(channels.dir(&name).join(CURSOR_FILE), b"{garbage").unwrap();
        let err = ingest_channel(&channels, &items, &name, 1).1.unwrap_err();
        assert!(format!("{err:#}").contains("is corrupt"), "{err:#}");
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
