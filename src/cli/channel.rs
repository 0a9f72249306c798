//! The channel commands: `desk channel new|ls|add|remove|read|post`.
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

// ----- new, add, remove -----

pub(super) fn new(name: &str, goal: Option<String>, checkin_after: Option<u64>, json: bool) -> Result<i32> {
    let name = parse_name(name)?;
    let (_, store) = store()?;
    match store.create_with(&name, goal.as_deref().unwrap_or(""), checkin_after, now_ms())? {
        Some(roster) => print_roster("channel", &roster, json, &format!("created #{name}")),
        None => Err(fail(ErrorCode::AlreadyExists, format!("channel #{name} already exists"))),
    }
}

pub(super) fn add(name: &str, member: &str, role: Role, queue_for_later: bool, json: bool) -> Result<i32> {
    let name = parse_name(name)?;
    let (paths, store) = store()?;
    // An agent member is a session: a name that is none is most often a typo, refused as `desk
    // send` refuses it (a person's name is anyone's).
    if role.is_agent()
        && !queue_for_later
        && let Ok(session) = SessionName::parse(member)
        && !super::session_known(&paths, &session)
    {
        let unknown = desk_common::suggest::unknown_session_in(&paths, member);
        return Err(fail(
            ErrorCode::NoSuchSession,
            format!("{unknown}; --queue-for-later adds it before it exists (its onboarding prompt waits for it)"),
        ));
    }
    let (roster, changed) = store.add_member(&name, member, role, now_ms()).map_err(post_error)?;
    // An agent's onboarding prompt is the daemon's to deliver.
    let daemon = if changed && role.is_agent() { crate::autostart::ensure_daemon(&paths) } else { Daemon::Running };
    let notes: Vec<String> = daemon.note().into_iter().collect();
    if !json {
        for n in &notes {
            eprintln!("desk: note: {n}");
        }
    }
    let human = if changed {
        if role.is_agent() {
            format!("added {member} to #{name} as {}; its onboarding prompt is queued", role.as_str())
        } else {
            format!("added {member} to #{name} as a person (mentions of @{member} notify the operator)")
        }
    } else {
        format!("{member} is already a {} of #{name}", role.as_str())
    };
    if json {
        output::print_ok("channel", &roster, &notes)?;
        return Ok(0);
    }
    print_roster("channel", &roster, json, &human)
}

pub(super) fn remove(name: &str, member: &str, json: bool) -> Result<i32> {
    let name = parse_name(name)?;
    let (_, store) = store()?;
    if !store.remove_member(&name, member).map_err(post_error)? {
        return Err(fail(ErrorCode::NotAMember, format!("{member} is not a member of #{name}")));
    }
    let roster = roster(&store, &name)?;
    print_roster("channel", &roster, json, &format!("removed {member} from #{name}"))
}

// ----- ls -----

pub(super) fn ls(json: bool) -> Result<i32> {
    let (_, store) = store()?;
    let list: Vec<Summary> = store.list()?.iter().map(|n| summarize(&store, n)).collect::<Result<Vec<_>>>()?;
    if json {
        output::print_ok("channel-list", &list, &[])?;
        return Ok(0);
    }
    if list.is_empty() {
        println!("no channels; create one with: desk channel new NAME --goal TEXT");
        return Ok(0);
    }
    println!(
        "{:<24} {:>7} {:>8} {:>7} {:>6} {:>6}  GOAL",
        "CHANNEL", "MEMBERS", "MESSAGES", "THREADS", "UNREAD", "@HUMAN"
    );
    for c in &list {
        println!(
            "{:<24} {:>7} {:>8} {:>7} {:>6} {:>6}  {}",
            format!("#{}", c.name),
            c.members,
            c.messages,
            c.threads,
            c.unread,
            c.human_mentions,
            c.goal
        );
        if let Some(stall) = &c.stalled {
            println!("  ! {}", stall_line(&c.name, stall));
        }
    }
    Ok(0)
}

/// One line on a channel whose messages stopped reaching their members (`post`, `ls` and
/// `desk queue` say it alike).
pub(super) fn stall_line(channel: &str, stall: &desk_daemon::channel::stall::Stall) -> String {
    let since = if stall.since_ms > 0 {
        format!(" for {}", desk_core::time::span(now_ms().saturating_sub(stall.since_ms)))
    } else {
        String::new()
    };
    format!("#{channel}'s messages have not been reaching its members{since}: {}", stall.reasons.join("; "))
}

/// A line for each channel whose messages stopped reaching their members.
pub(super) fn stall_lines(paths: &Paths) -> Vec<String> {
    let store = ChannelStore::at(paths);
    let names = store.list().unwrap_or_default();
    names
        .iter()
        .filter_map(|n| desk_daemon::channel::stall::read(&store.dir(n)).map(|s| stall_line(n.as_str(), &s)))
        .collect()
}

// ----- read -----

#[derive(Serialize)]
struct MessageView<'a> {
    #[serde(flatten)]
    message: &'a Message,
    /// Replies in this message's thread (root messages of the root view only).
    #[serde(skip_serializing_if = "Option::is_none")]
    replies: Option<usize>,
}

#[derive(Serialize)]
struct ReadView<'a> {
    channel: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    thread: Option<&'a ItemId>,
    messages: Vec<MessageView<'a>>,
    problems: &'a [String],
}

pub(super) struct ReadArgs {
    pub name: String,
    pub thread: Option<String>,
    pub since: Option<String>,
    pub follow: bool,
    pub json: bool,
}

pub(super) fn read(args: ReadArgs) -> Result<i32> {
    let name = parse_name(&args.name)?;
    let thread = args.thread.as_deref().map(|t| parse_id(t, "--thread")).transpose()?;
    let since = args.since.as_deref().map(|s| parse_id(s, "--since")).transpose()?;
    let paths = Paths::from_env()?;
    let store = ChannelStore::at(&paths);
    if !store.exists(&name) {
        return Err(post_error(PostError::NoChannel(name)));
    }
    // A follower watches before it reads, so nothing posted in between is missed.
    let watch = if args.follow { Some(watch_channel(&store, &name)?) } else { None };
    let (messages, problems) = store.read(&name, thread.as_ref())?;
    let known: std::collections::HashSet<ItemId> = messages.iter().map(|m| m.id.clone()).collect();
    if let Some(t) = &thread
        && !messages.iter().any(|m| &m.id == t)
    {
        return Err(fail(ErrorCode::Usage, format!("#{name} has no root message {t}")));
    }
    // The newest message anywhere in the channel (the root's, or a thread's newest reply).
    let threads = if thread.is_none() { store.thread_counts(&name)? } else { Vec::new() };
    let newest = messages.iter().map(|m| &m.id).chain(threads.iter().filter_map(|t| t.2.as_ref())).max().cloned();
    let messages: Vec<Message> = messages.into_iter().filter(|m| since.as_ref().is_none_or(|s| &m.id > s)).collect();
    let replies: HashMap<ItemId, usize> = threads.into_iter().map(|(id, n, _)| (id, n)).collect();
    for p in &problems {
        eprintln!("desk: warning: {p}");
    }
    // The operator reading the root view has seen the channel (the dashboard's unread counts).
    if thread.is_none()
        && std::env::var_os("DESK_SESSION").is_none_or(|s| s.is_empty())
        && matches!(caller(&paths), Ok(None))
        && let Some(id) = newest
    {
        mark_seen_by_operator(&store, &name, &id)?;
    }
    if args.json && !args.follow {
        let view = ReadView {
            channel: name.as_str(),
            thread: thread.as_ref(),
            messages: messages
                .iter()
                .map(|m| MessageView {
                    message: m,
                    replies: thread.is_none().then(|| replies.get(&m.id).copied().unwrap_or(0)),
                })
                .collect(),
            problems: &problems,
        };
        output::print_ok("channel-messages", &view, &[])?;
        return Ok(0);
    }
    // One buffered writer, flushed after the history and after each followed message: a line
    // per write(2) made a 10,000-message read three times slower.
    let out = std::cell::RefCell::new(std::io::BufWriter::new(std::io::stdout().lock()));
    let zone = jiff::tz::TimeZone::system();
    let show = |m: &Message, replies: Option<usize>| {
        let mut out = out.borrow_mut();
        let written = if args.json {
            serde_json::to_string(&MessageView { message: m, replies })
                .map_err(std::io::Error::other)
                .and_then(|line| writeln!(out, "{line}"))
        } else {
            write_message(&mut *out, &zone, &name, m, replies)
        };
        // A reader that went away ends the command (as SIGPIPE would).
        if written.is_err() {
            std::process::exit(0);
        }
    };
    for m in &messages {
        show(m, thread.is_none().then(|| replies.get(&m.id).copied().unwrap_or(0)));
    }
    out.borrow_mut().flush().context("cannot write to stdout")?;
    if let Some(inotify) = watch {
        let show = |m: &Message, replies: Option<usize>| {
            show(m, replies);
            if out.borrow_mut().flush().is_err() {
                std::process::exit(0);
            }
        };
        follow(&inotify, &store, &name, thread.as_ref(), &known, &show)?;
    }
    Ok(0)
}

/// One message for a person: the local time with its offset (as every desk command shows
/// times), the author and the id, then the body indented.
fn write_message(
    out: &mut dyn Write,
    zone: &jiff::tz::TimeZone,
    channel: &ChannelName,
    m: &Message,
    replies: Option<usize>,
) -> std::io::Result<()> {
    let time = match jiff::Timestamp::from_millisecond(i64::try_from(m.ts_ms).unwrap_or(i64::MAX)) {
        Ok(t) => t.to_zoned(zone.clone()).strftime("%Y-%m-%d %H:%M:%S %:z").to_string(),
        Err(_) => format!("@{}ms", m.ts_ms),
    };
    match m.kind {
        Kind::Joined => writeln!(out, "{time}  — {} joined #{channel} as {}  [{}]", m.author, m.body, m.id),
        Kind::Checkin => writeln!(out, "{time}  — desk checked in with the supervisors: {}  [{}]", m.body, m.id),
        Kind::Post => {
            writeln!(out, "{time}  {}  [{}]", m.author, m.id)?;
            for line in m.body.lines() {
                writeln!(out, "    {line}")?;
            }
            match replies.filter(|n| *n > 0) {
                Some(n) => writeln!(
                    out,
                    "    ↳ {n} repl{}: desk channel read {channel} --thread {}",
                    if n == 1 { "y" } else { "ies" },
                    m.id
                ),
                None => Ok(()),
            }
        }
    }
}

fn watch_channel(store: &ChannelStore, name: &ChannelName) -> Result<nix::sys::inotify::Inotify> {
    use nix::sys::inotify::{AddWatchFlags, InitFlags};
    let dir = store.dir(name);
    let inotify = desk_common::inotify::start(InitFlags::empty())?;
    inotify
        .add_watch(&dir, AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO)
        .with_context(|| format!("cannot watch {}", dir.display()))?;
    Ok(inotify)
}

/// Print messages as they are appended, until interrupted: `inotify` watched the channel
/// directory before the history (`known`) was read; what the file holds beyond the history is
/// printed at once, then each file is read on from the end of its last whole record.
fn follow(
    inotify: &nix::sys::inotify::Inotify,
    store: &ChannelStore,
    name: &ChannelName,
    thread: Option<&ItemId>,
    known: &std::collections::HashSet<ItemId>,
    show: &dyn Fn(&Message, Option<usize>),
) -> Result<i32> {
    let dir = store.dir(name);
    let files: Vec<PathBuf> = match thread {
        None => vec![dir.join(ROOT_FILE)],
        Some(t) => vec![dir.join(thread_file(t))],
    };
    let mut offsets = Vec::new();
    for path in &files {
        let bytes = std::fs::read(path).unwrap_or_default();
        let parsed = format::parse(&bytes, 0);
        for r in parsed.records.iter().filter(|r| !known.contains(&r.message.id)) {
            show(&r.message, None);
        }
        offsets.push(parsed.records.last().map_or(0, |r| r.end));
    }
    loop {
        inotify.read_events().context("cannot read inotify events")?;
        for (path, offset) in files.iter().zip(offsets.iter_mut()) {
            let Ok(bytes) = std::fs::read(path) else { continue };
            if bytes.len() < *offset {
                *offset = 0;
            }
            let parsed = format::parse(&bytes[*offset..], *offset);
            for r in &parsed.records {
                show(&r.message, None);
            }
            if let Some(last) = parsed.records.last() {
                *offset = last.end;
            }
        }
    }
}

// ----- post -----

pub(super) struct PostArgs {
    pub name: String,
    pub thread: Option<String>,
    pub as_member: Option<String>,
    pub text: Option<String>,
    pub file: Option<PathBuf>,
    pub json: bool,
}

#[derive(Serialize)]
struct Posted<'a> {
    id: &'a ItemId,
    channel: &'a str,
    author: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    thread: Option<&'a ItemId>,
    /// Members the daemon will prompt with it (routed against the roster now).
    to: Vec<String>,
    /// People it notifies (`@human`, person members).
    notify: Vec<String>,
    daemon_running: bool,
}

/// Who is asking, as the process tree says: the session this process runs inside (the nearest
/// whose master is an ancestor), or `None` outside every session of this desk: the operator.
/// The environment is never taken on trust: `DESK_SESSION` is checked against it.
fn caller(paths: &Paths) -> Result<Option<SessionName>> {
    let inside = desk_common::session::enclosing(paths).context("cannot tell which session this command runs in")?;
    Ok(inside.into_iter().next())
}

/// Who posts: the session this runs inside, and nobody else; outside every session the
/// operator, or with `--as` a person member the operator speaks for. Refused (`wrong-author`,
/// saying what and why): a `DESK_SESSION` that is not the session this runs in, `--as` from
/// inside a session naming anyone but itself, `--as` naming an agent member from outside.
fn author(caller: Option<&SessionName>, as_member: Option<&str>, roster: &Roster) -> Result<String> {
    let claimed = std::env::var("DESK_SESSION").ok().filter(|s| !s.is_empty());
    let channel = &roster.name;
    let refuse = |message: String| Err(fail(ErrorCode::WrongAuthor, message));
    match caller {
        Some(s) => {
            if let Some(c) = claimed.as_deref().filter(|c| *c != s.as_str()) {
                return refuse(format!(
                    "DESK_SESSION={c}, but this command runs inside session {s} (its master is an ancestor of this \
                     process): a session posts only as itself. Post without DESK_SESSION={c} to post as {s}"
                ));
            }
            if let Some(a) = as_member.filter(|a| *a != s.as_str()) {
                return refuse(format!(
                    "--as {a} refused: this command runs inside session {s}, which posts only as itself. \
                     Post without --as to post as {s}; only the operator, outside every session, uses --as"
                ));
            }
            Ok(s.to_string())
        }
        None => {
            if let Some(c) = claimed {
                return refuse(format!(
                    "DESK_SESSION={c}, but this command does not run inside session {c} (no master of a session \
                     of this desk is among its ancestors). Outside sessions you post as the operator: unset \
                     DESK_SESSION (env -u DESK_SESSION desk channel post ...)"
                ));
            }
            match as_member {
                None => Ok(OPERATOR.to_string()),
                Some(a) if a == OPERATOR => Ok(a.to_string()),
                Some(a) => match roster.member(a) {
                    Some(m) if m.role.is_agent() => refuse(format!(
                        "--as {a} refused: {a} is an agent session of #{channel}, and only {a} itself posts as {a} \
                         (from inside its session). Post as yourself without --as, or ask it: desk send {a} '...'"
                    )),
                    // A person member, or no member at all (refused as not-a-member by the caller).
                    _ => Ok(a.to_string()),
                },
            }
        }
    }
}

fn read_body(text: Option<String>, file: Option<PathBuf>) -> Result<String> {
    let bytes = match (text, file) {
        (Some(t), None) if t != "-" => return Ok(t),
        (Some(_), Some(_)) => return Err(failure(2, "give the message as TEXT or --file, not both")),
        (None, Some(f)) if f.as_os_str() != "-" => {
            let what = f.display().to_string();
            let file = std::fs::File::open(&f).with_context(|| format!("cannot read {what}"))?;
            read_capped(file, &what)?
        }
        _ => {
            if nix::unistd::isatty(std::io::stdin()).unwrap_or(false) {
                eprintln!("desk: reading the message from stdin; end it with Ctrl-D on a line of its own");
            }
            read_capped(std::io::stdin().lock(), "the message on stdin")?
        }
    };
    String::from_utf8(bytes).map_err(|_| failure(2, "the message is not UTF-8 text"))
}

fn read_capped(reader: impl std::io::Read, what: &str) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    reader.take(READ_LIMIT as u64).read_to_end(&mut bytes).with_context(|| format!("cannot read {what}"))?;
    if bytes.len() >= READ_LIMIT {
        return Err(failure(
            2,
            format!("{what} is over {} bytes; a channel message holds at most 16 KiB", desk_core::channel::MAX_BODY),
        ));
    }
    Ok(bytes)
}

pub(super) fn post(args: PostArgs) -> Result<i32> {
    let name = parse_name(&args.name)?;
    let thread = args.thread.as_deref().map(|t| parse_id(t, "--thread")).transpose()?;
    let (paths, store) = store()?;
    // The author, the channel and the membership before stdin is read: a refused post must not
    // eat it.
    let roster = roster(&store, &name)?;
    let author = author(caller(&paths)?.as_ref(), args.as_member.as_deref(), &roster)?;
    if !roster.may_post(&author) {
        return Err(post_error(PostError::NotMember { channel: name, who: author }));
    }
    let body = read_body(args.text, args.file)?;
    let body = desk_core::delivery::text::sanitize(&body);
    let msg = store
        .post(&name, Draft { author: author.clone(), thread: thread.clone(), body }, now_ms())
        .map_err(post_error)?;
    // Who it goes to, as the daemon will route it (the roster may change before it does).
    let (parent_author, participants) = match &thread {
        Some(t) => {
            let (msgs, _) = store.read(&name, Some(t))?;
            let parent = msgs.first().map(|m| m.author.clone());
            let earlier: Vec<String> =
                msgs.iter().skip(1).filter(|m| m.id != msg.id).map(|m| m.author.clone()).collect();
            (parent, earlier)
        }
        None => (None, Vec::new()),
    };
    let ctx = ThreadContext { parent_author: parent_author.as_deref(), participants: &participants };
    let routing = route(&msg, &roster.members, &ctx);
    // The message is durable already; the daemon turns it into prompts, so it is started if
    // it is not running (and says so, once).
    let daemon = crate::autostart::ensure_daemon(&paths);
    let running = desk_common::daemon_client::request(
        &desk_common::daemon_client::socket_path(&paths),
        &desk_wire::control::Request::Ping,
        PING_TIMEOUT,
    )
    .is_ok_and(|r| r.into_answer::<desk_core::delivery::answer::Pid>().is_ok());
    let mut notes: Vec<String> = daemon.note().into_iter().collect();
    if !running {
        notes.push(
            "desk serve is not running: the message is stored and its prompts go out when it starts (desk serve)"
                .to_string(),
        );
    }
    if let Some(stall) = desk_daemon::channel::stall::read(&store.dir(&name)) {
        notes.push(format!(
            "{}; this message is stored, and goes out once that is fixed",
            stall_line(name.as_str(), &stall)
        ));
    }
    for u in &routing.unknown {
        notes.push(format!("@{u} is not a member of #{name}; that mention reaches no one"));
    }
    let to: Vec<String> = routing.prompts.iter().map(|p| p.member.clone()).collect();
    if args.json {
        let posted = Posted {
            id: &msg.id,
            channel: name.as_str(),
            author: &author,
            thread: thread.as_ref(),
            to,
            notify: routing.notify,
            daemon_running: running,
        };
        output::print_ok("channel-post", &posted, &notes)?;
    } else {
        println!("{}", msg.id);
        for n in &notes {
            eprintln!("desk: note: {n}");
        }
    }
    Ok(0)
}
