//! `desk channel read`: a channel's or a thread's messages, once or followed.

#[allow(unused_imports)]
use super::*;

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

pub(in crate::cli) struct ReadArgs {
    pub name: String,
    pub thread: Option<String>,
    pub since: Option<String>,
    pub follow: bool,
    pub json: bool,
}

pub(in crate::cli) fn read(args: ReadArgs) -> Result<i32> {
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
