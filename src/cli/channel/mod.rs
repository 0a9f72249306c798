//! The channel commands: `desk channel new|ls|add|remove|read|post`, one file each; this file holds
//! what they share (the store, names and ids parsed, a roster printed, who is asking, stall lines).
//!
//! Owns presenting channels and posting to them. Every command works on the channel store
//! directly (`desk_daemon::channel::store`), so all of them work while `desk serve` is down: a post
//! is durable when `post` prints its id, and the daemon turns it into prompts when it runs
//! (`post` says when it is not running). Invariants: the author is who the process tree says
//! is asking ([`desk_common::session::enclosing`]), never what the environment claims — inside a
//! session, that session and nothing else (a session that is not a member is refused;
//! `--as` or a `DESK_SESSION` naming anyone else is refused); outside every session, the
//! operator (`human`), or with `--as` a person member (never an agent member, and never with
//! a `DESK_SESSION` set). Every read has `--json` (the envelope of [`super::output`]; `read
//! --follow --json` is a stream of JSON lines).

mod add;
mod ls;
mod new;
mod post;
mod read;
mod remove;

pub(super) use add::add;
pub(super) use ls::ls;
pub(super) use new::new;
pub(super) use post::{PostArgs, post};
pub(super) use read::{ReadArgs, read};
pub(super) use remove::remove;

use anyhow::{Context, Result};
use serde::Serialize;
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use super::output::{self, ErrorCode};
use super::{fail, failure};
use crate::autostart::Daemon;
use desk_common::clock::now_ms;
use desk_common::paths::{Paths, SessionName};
use desk_core::channel::route::{ThreadContext, route};
use desk_core::channel::{ChannelName, Kind, Message, OPERATOR, Role, Roster, format};
use desk_core::delivery::item::ItemId;
use desk_daemon::channel::store::{ChannelStore, Draft, PostError, ROOT_FILE, thread_file};
use desk_daemon::channel::summary::{Summary, mark_seen_by_operator, summarize};

/// A body read from a file or stdin is cut off just past the limit: enough to say how long it
/// was too long, without reading a huge file whole.
const READ_LIMIT: usize = desk_core::channel::MAX_BODY + 1;

/// How long `post` waits for the daemon to answer a ping: it answers in milliseconds; a wedged
/// one must not slow every post.
const PING_TIMEOUT: Duration = Duration::from_secs(2);

fn store() -> Result<(Paths, ChannelStore)> {
    let paths = Paths::from_env()?;
    let store = ChannelStore::open(&paths)?;
    Ok((paths, store))
}

fn parse_name(name: &str) -> Result<ChannelName> {
    ChannelName::parse(name).map_err(|e| failure(2, format!("{name:?}: {e}")))
}

fn parse_id(id: &str, what: &str) -> Result<ItemId> {
    ItemId::parse(id).ok_or_else(|| failure(2, format!("{id:?} is not a message id ({what})")))
}

fn post_error(e: PostError) -> anyhow::Error {
    let kind = match &e {
        PostError::NoChannel(_) => ErrorCode::NoSuchChannel,
        PostError::NotMember { .. } => ErrorCode::NotAMember,
        PostError::NoSuchThread { .. } | PostError::Body(_) | PostError::BadMember(_) => ErrorCode::Usage,
        PostError::Corrupt { .. } | PostError::Io(_) => ErrorCode::Failed,
    };
    fail(kind, format!("{e:#}"))
}

fn roster(store: &ChannelStore, name: &ChannelName) -> Result<Roster> {
    store.roster(name)?.ok_or_else(|| post_error(PostError::NoChannel(name.clone())))
}

fn print_roster(kind: &str, roster: &Roster, json: bool, human: &str) -> Result<i32> {
    if json {
        output::print_ok(kind, roster, &[])?;
    } else {
        println!("{human}");
    }
    Ok(0)
}

/// One line on a channel whose messages stopped reaching their members (`post`, `ls` and
/// `desk queue` say it alike).
pub(in crate::cli) fn stall_line(channel: &str, stall: &desk_daemon::channel::stall::Stall) -> String {
    let since = if stall.since_ms > 0 {
        format!(" for {}", desk_core::time::span(now_ms().saturating_sub(stall.since_ms)))
    } else {
        String::new()
    };
    format!("#{channel}'s messages have not been reaching its members{since}: {}", stall.reasons.join("; "))
}

/// A line for each channel whose messages stopped reaching their members.
pub(in crate::cli) fn stall_lines(paths: &Paths) -> Vec<String> {
    let store = ChannelStore::at(paths);
    let names = store.list().unwrap_or_default();
    names
        .iter()
        .filter_map(|n| desk_daemon::channel::stall::read(&store.dir(n)).map(|s| stall_line(n.as_str(), &s)))
        .collect()
}

/// Who is asking, as the process tree says: the session this process runs inside (the nearest
/// whose master is an ancestor), or `None` outside every session of this desk: the operator.
/// The environment is never taken on trust: `DESK_SESSION` is checked against it.
fn caller(paths: &Paths) -> Result<Option<SessionName>> {
    let inside = desk_common::session::enclosing(paths).context("cannot tell which session this command runs in")?;
    Ok(inside.into_iter().next())
}
