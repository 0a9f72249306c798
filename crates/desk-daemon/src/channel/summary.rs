//! What a channel holds at a glance, and what the operator has not read yet.
//!
//! Owns the per-channel summary `desk channel ls` prints and the dashboard shows (members,
//! messages, threads, `@human` mentions, unread, a stall) and the operator's read marker,
//! `channels/<name>/seen.json` (`{"version":1,"human":"<message id>"}`: the newest message the
//! operator had when it last read the channel's root view). Invariants: a summary is computed
//! from the conversation files alone (whole records only); the marker only moves forward and
//! is written atomically; the operator's own messages and join records are never unread.
//! Reading a summary writes nothing.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::io::ErrorKind;

use super::store::ChannelStore;
use desk_common::fsutil;
use desk_core::channel::mention::mentions;
use desk_core::channel::{ChannelName, Kind, OPERATOR};
use desk_core::delivery::item::ItemId;

/// The marker file's name in a channel directory.
pub const SEEN_FILE: &str = "seen.json";

/// `seen.json`'s format: version 1. A marker this desk cannot read counts as none (every message
/// unread), which only shows more as unread; it is rewritten when the operator next reads.
pub const SEEN_FORMAT: desk_common::format::Format = desk_common::format::Format::first("channel read marker");

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Seen {
    version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    human: Option<ItemId>,
}

/// One channel at a glance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub name: String,
    pub goal: String,
    pub members: usize,
    /// Messages posted (root and threads; join records are not counted).
    pub messages: usize,
    pub threads: usize,
    /// Messages that mention `@human`.
    pub human_mentions: usize,
    /// Messages by others newer than the operator's marker.
    pub unread: usize,
    /// Of those, the ones that mention `@human`.
    pub unread_human: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_ms: Option<u64>,
    /// What stopped its messages from reaching their members, as desk serve's last pass over it
    /// found ([`super::stall`]); absent: nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stalled: Option<super::stall::Stall>,
}

/// The newest message id the operator has seen in `name` (none: nothing read yet).
pub fn seen_by_operator(store: &ChannelStore, name: &ChannelName) -> Result<Option<ItemId>> {
    let path = store.dir(name).join(SEEN_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => Ok(desk_common::format::decode::<Seen>(&SEEN_FORMAT, &bytes).map(|s| s.human).unwrap_or_default()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Record that the operator has read up to `id` (never moves the marker back).
pub fn mark_seen_by_operator(store: &ChannelStore, name: &ChannelName, id: &ItemId) -> Result<()> {
    if seen_by_operator(store, name)?.is_some_and(|seen| &seen >= id) {
        return Ok(());
    }
    let seen = Seen { version: SEEN_FORMAT.current, human: Some(id.clone()) };
    let mut bytes = serde_json::to_vec_pretty(&seen).context("cannot encode the read marker")?;
    bytes.push(b'\n');
    fsutil::write_atomic(&store.dir(name).join(SEEN_FILE), &bytes)
}

/// The newest message id in any of the channel's files.
pub fn newest(store: &ChannelStore, name: &ChannelName) -> Result<Option<ItemId>> {
    let mut newest = None;
    for (file, _) in store.files(name)? {
        let read = store.read_file(&store.dir(name).join(file))?;
        newest = newest.max(read.messages.into_iter().map(|m| m.id).max());
    }
    Ok(newest)
}

/// The summary of one channel.
pub fn summarize(store: &ChannelStore, name: &ChannelName) -> Result<Summary> {
    let roster = store.roster(name)?.with_context(|| format!("no channel named {name}"))?;
    let seen = seen_by_operator(store, name)?;
    let mut s = Summary {
        name: name.to_string(),
        goal: roster.goal,
        members: roster.members.len(),
        messages: 0,
        threads: 0,
        human_mentions: 0,
        unread: 0,
        unread_human: 0,
        last_ms: None,
        stalled: super::stall::read(&store.dir(name)),
    };
    for (file, thread) in store.files(name)? {
        let read = store.read_file(&store.dir(name).join(&file))?;
        s.threads += usize::from(thread.is_some());
        for m in read.messages.iter().filter(|m| m.kind == Kind::Post) {
            s.messages += 1;
            s.last_ms = s.last_ms.max(Some(m.ts_ms));
            let human = mentions(&m.body).iter().any(|n| n == OPERATOR);
            s.human_mentions += usize::from(human);
            if m.author != OPERATOR && seen.as_ref().is_none_or(|seen| &m.id > seen) {
                s.unread += 1;
                s.unread_human += usize::from(human);
            }
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::store::Draft;
    use desk_common::paths::Paths;
    use desk_core::channel::Role;

    #[test]
    fn unread_counts_what_others_posted_after_the_marker() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = Paths { runtime: tmp.path().join("r"), state: tmp.path().join("s"), config: tmp.path().join("c") };
        let store = ChannelStore::open(&paths).unwrap();
        let ch = ChannelName::parse("ops").unwrap();
        store.create(&ch, "g", 1).unwrap();
        store.add_member(&ch, "a", Role::Worker, 2).unwrap();
        let post = |who: &str, body: &str, at| {
            store.post(&ch, Draft { author: who.into(), thread: None, body: body.into() }, at).unwrap()
        };
        post("human", "mine is never unread", 10);
        let first = post("a", "hello", 11);
        post("a", "@human look", 12);
        let s = summarize(&store, &ch).unwrap();
        assert_eq!((s.messages, s.unread, s.unread_human, s.human_mentions, s.members), (3, 2, 1, 1, 1));
        mark_seen_by_operator(&store, &ch, &first.id).unwrap();
        assert_eq!(summarize(&store, &ch).unwrap().unread, 1);
        let newest = newest(&store, &ch).unwrap().unwrap();
        mark_seen_by_operator(&store, &ch, &newest).unwrap();
        mark_seen_by_operator(&store, &ch, &first.id).unwrap();
        let s = summarize(&store, &ch).unwrap();
        assert_eq!((s.unread, s.unread_human, s.human_mentions), (0, 0, 1), "the marker never moves back");
    }
}
