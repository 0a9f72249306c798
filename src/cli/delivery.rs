//! The delivery commands: `serve`, `send`, `queue`, `item`, `stuck`, `force`, `drop`, `pause`,
//! `resume`.
//!
//! Owns talking to `desk serve` over its control socket and presenting the answers. `send`
//! writes the prompt durably to the intake first, so it is never lost: if the daemon is down,
//! the prompt waits there until it starts. Invariant: every command reports what actually
//! happened (a force waits for the outcome of its delivery and says it).

use anyhow::{Context, Result};
use std::path::PathBuf;
use std::time::Duration;

use super::output::{self, ErrorCode};
use super::{fail, failure};
use crate::queues::DAEMON_DOWN;
use crate::queues::Queues;
use desk_common::clock::now_ms;
use desk_common::daemon_client;
use desk_common::master_client::Connection;
use desk_common::paths::{Paths, SessionName};
use desk_common::session::{self, ExitRecord, Probe};
use desk_core::delivery::answer::{IN_INTAKE, Ingested, ItemAnswer, ListedItem, ListedQueue, Pid};
use desk_core::delivery::item::{Item, ItemId, State, When};
use desk_core::delivery::text;
use desk_daemon::store::Store;
use desk_wire::Role;
use desk_wire::control::{Answer, Request, Response};

/// Short requests are answered in milliseconds; this bounds a wedged daemon.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long `desk send` waits for a running daemon to queue its item. Queueing takes
/// milliseconds; a daemon that cannot (a full disk) retries within about 8 s of the cause
/// going away, so this covers a short hiccup without leaving the sender hanging.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// A force waits for its delivery to settle: echo and submit windows plus retries.
const FORCE_TIMEOUT: Duration = Duration::from_secs(60);

/// Prompts above 256 KiB are refused: far beyond any prompt an agent's input box takes.
const MAX_PROMPT: usize = 256 * 1024;

/// How long `desk send` waits for the daemon's first decision on a prompt for a running
/// session, to say at once when it is held: the daemon looks at the screen within
/// milliseconds of queueing it; a second covers a loaded machine, and a send is never held up
/// longer than that.
const FIRST_LOOK: Duration = Duration::from_secs(1);

/// How often `desk send` asks meanwhile.
const FIRST_LOOK_POLL: Duration = Duration::from_millis(10);

fn paths() -> Result<Paths> {
    let paths = Paths::from_env()?;
    paths.ensure_runtime()?;
    paths.ensure_state()?;
    Ok(paths)
}

/// One request to the daemon; not reaching it is [`ErrorCode::DaemonUnavailable`].
fn request(paths: &Paths, req: &Request, timeout: Duration) -> Result<Response> {
    let socket = desk_common::daemon_client::socket_path(paths);
    daemon_client::request(&socket, req, timeout).map_err(|e| {
        fail(ErrorCode::DaemonUnavailable, format!("{e:#}\n(is `desk serve` running? start it with: desk serve)"))
    })
}

/// One request and its typed answer; the daemon's failure is a failure of its kind.
fn ask<T: serde::de::DeserializeOwned>(paths: &Paths, req: &Request, timeout: Duration) -> Result<Answer<T>> {
    request(paths, req, timeout)?.into_answer().map_err(desk_common::failure::from_control)
}

// ----- serve -----

pub(super) fn serve(foreground: bool, stop: bool) -> Result<i32> {
    let paths = paths()?;
    if stop {
        if crate::autostart::daemon_down(&paths) {
            // What the caller wanted is true already; a script stopping desk is not an error.
            println!("desk serve is not running; nothing to stop");
            return Ok(0);
        }
        let answer = request(&paths, &Request::Stop, REQUEST_TIMEOUT)?
            .into_answer::<Pid>()
            .map_err(|e| failure(1, format!("desk serve did not stop: {}", e.message)))?;
        // Stopped means gone: wait for the process, not just its promise.
        {
            let pid = nix::unistd::Pid::from_raw(answer.data.pid as i32);
            let deadline = std::time::Instant::now() + REQUEST_TIMEOUT;
            // A zombie has stopped too (its reaper may be slow, or absent in a container).
            let running = || {
                nix::sys::signal::kill(pid, None).is_ok()
                    && !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z ")
            };
            while running() {
                if std::time::Instant::now() > deadline {
                    return Err(failure(1, format!("desk serve (pid {pid}) said it was stopping but still runs")));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        println!("desk serve stopped");
        return Ok(0);
    }
    if foreground {
        desk_daemon::run(desk_daemon::spawn::ready_pipe())?;
        return Ok(0);
    }
    let pid = crate::autostart::start_detached()?;
    println!("desk serve started (pid {pid})");
    Ok(0)
}

// ----- send -----

pub(super) struct SendArgs {
    pub name: SessionName,
    pub text: Option<String>,
    pub file: Option<PathBuf>,
    pub when: When,
    pub from: Option<String>,
    /// Queue even when no session of this name ever existed.
    pub queue_for_later: bool,
    pub json: bool,
}

/// What `desk send` found at the target name before queueing.
enum Target {
    /// A master answered (its generation, when it told us).
    Running(Option<u32>),
    /// The session ran and ended; its exit record is still there.
    Exited(ExitRecord),
    /// Files of the session remain but nothing answers and no exit was recorded.
    NotRunning,
    /// No socket, metadata or exit record at all: the name is probably a typo.
    Unknown,
}

fn target(paths: &Paths, name: &SessionName) -> Result<Target> {
    let files = paths.session(name);
    Ok(match session::probe_settled(&files)? {
        // The generation is nice to have, not worth waiting for: a stopped master must not
        // make every send slow.
        Probe::Live(stream) => Target::Running(
            Connection::open_within(stream, Role::Query, 0, 0, session::PROBE_DEADLINE).ok().map(|c| c.info.generation),
        ),
        Probe::Absent | Probe::Stale => match session::read_exit(&files).ok().flatten() {
            Some(exit) => Target::Exited(exit),
            None if files.meta.exists() => Target::NotRunning,
            None => Target::Unknown,
        },
    })
}

pub(super) fn send(args: SendArgs) -> Result<i32> {
    let paths = paths()?;
    // The name first: a typo must not leave a prompt waiting forever for a session nobody
    // will start, and must not consume stdin.
    let target = target(&paths, &args.name)?;
    if matches!(target, Target::Unknown) && !args.queue_for_later {
        let unknown = desk_common::suggest::unknown_session_in(&paths, args.name.as_str());
        return Err(fail(
            ErrorCode::NoSuchSession,
            format!("{unknown}; --queue-for-later queues the prompt until a session of that name exists"),
        ));
    }
    let raw = match (&args.text, &args.file) {
        (Some(t), None) if t == "-" => read_stdin()?,
        (Some(t), None) => t.clone(),
        (None, Some(f)) if f.as_os_str() == "-" => read_stdin()?,
        (None, Some(f)) => read_prompt_file(f)?,
        (None, None) => read_stdin()?,
        (Some(_), Some(_)) => return Err(failure(2, "give the prompt as TEXT or --file, not both")),
    };
    if raw.len() > MAX_PROMPT {
        return Err(failure(2, format!("the prompt is {} bytes; the limit is {MAX_PROMPT}", raw.len())));
    }
    let clean = text::sanitize(&raw);
    if clean.trim().is_empty() {
        if raw.trim().is_empty() {
            return Err(failure(2, "the prompt is empty"));
        }
        return Err(failure(2, "the prompt is empty once control characters and escape sequences are removed"));
    }
    if let Target::Running(_) = target
        && let Some((line, len)) = text::overlong_line(&clean)
        && reads_lines(&paths, &args.name)
    {
        return Err(failure(
            2,
            format!(
                "line {line} of the prompt is {len} bytes, and session {} reads lines the kernel edits (canonical mode), \
                 which cuts a line at {} bytes: it would be refused at delivery. Split the line, or send it to a program \
                 that reads raw input",
                args.name,
                text::CANONICAL_LINE_MAX
            ),
        ));
    }
    let removed = raw.chars().count() - clean.chars().count();
    // Target the generation running now, if any (a restart later retargets it, visibly).
    let generation = match &target {
        Target::Running(generation) => *generation,
        _ => None,
    };
    let name = &args.name;
    match &target {
        Target::Running(_) => {}
        Target::Exited(exit) => eprintln!(
            "desk: warning: session {name} {}; the prompt is queued and held until a session named {name} runs again",
            desk_common::signals::describe_exit(exit.status)
        ),
        Target::NotRunning => {
            eprintln!("desk: warning: session {name} is not running; the prompt is queued and held until it runs again")
        }
        Target::Unknown => eprintln!("desk: note: no session named {name} exists yet; the prompt waits for it"),
    }
    let from = args.from.unwrap_or_else(|| std::env::var("USER").unwrap_or_else(|_| "operator".into()));
    let now = now_ms();
    let mut item =
        Item::new(desk_common::ids::fresh_item_id(now), args.name.to_string(), generation, clean, args.when, from, now);
    if removed > 0 {
        item.note(now, "sanitized", format!("{removed} control character(s) removed"));
    }
    let store = Store::open(&paths.state)?;
    store.write_intake(&item)?;
    let id = item.id.clone();
    let socket = desk_common::daemon_client::socket_path(&paths);
    // The prompt is durable; the daemon delivers it, so it is started if it is not running.
    let notes: Vec<String> = crate::autostart::ensure_daemon(&paths).say(args.json).into_iter().collect();
    // Why the queue waits, said at once: paused by the operator, a session that is not
    // running, and a running one whose screen holds it back (a job has the terminal, a draft, a
    // dialog).
    let hold_of = |socket: &std::path::Path| match (paused(socket, name), &target) {
        (Some(reason), _) => Some(format!("paused by the operator{reason} (desk resume {name} lets it go on)")),
        (None, Target::Running(_)) => first_hold(socket, name, &id),
        (None, _) => current_hold(socket, name),
    };
    let print = |state: &str, hold: Option<String>| {
        if let Some(reason) = &hold {
            eprintln!("desk: queue {name} is held: {reason}");
        }
        if args.json {
            let data = serde_json::json!({ "id": id, "session": args.name.as_str(), "state": state, "hold": hold });
            output::print_ok("sent", data, &notes)
        } else {
            println!("{id}");
            Ok(())
        }
    };
    let answer = daemon_client::request(&socket, &Request::Ingest { id: id.clone() }, SEND_TIMEOUT)
        .map(Response::into_answer::<Ingested>);
    match answer {
        Ok(Ok(answer)) => {
            print(answer.data.state.as_str(), hold_of(&socket))?;
            Ok(0)
        }
        Ok(Err(e)) => {
            if !args.json {
                print("refused", None)?;
            }
            Err(fail(ErrorCode::Refused, format!("desk serve did not queue item {id}: {}", e.message)))
        }
        Err(e) if timed_out(&e) => {
            if !args.json {
                print("intake", None)?;
            }
            Err(fail(
                ErrorCode::DaemonUnavailable,
                format!(
                    "desk serve has not queued item {id} within {} s; it stays in the intake and desk serve \
                     keeps trying (see: desk item {id})",
                    SEND_TIMEOUT.as_secs()
                ),
            ))
        }
        Err(_) => {
            eprintln!("desk: desk serve is not running; the prompt waits in the intake until it starts");
            print("intake", None)?;
            Ok(0)
        }
    }
}

/// Whether a control request failed by running out of time (the daemon is there but did not
/// answer), rather than finding no daemon.
fn timed_out(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.is::<daemon_client::TimedOut>()
            || c.downcast_ref::<std::io::Error>()
                .is_some_and(|e| matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut))
    })
}

/// Whether a running session's program reads lines the kernel edits (canonical mode) now.
fn reads_lines(paths: &Paths, name: &SessionName) -> bool {
    let snapshot = || -> Result<bool> {
        let Probe::Live(stream) = session::probe(&paths.session(name))? else { return Ok(false) };
        let mut conn = Connection::open_within(stream, Role::Query, 0, 0, session::PROBE_DEADLINE)?;
        conn.send(&desk_wire::Frame::SnapshotRequest { history: None })?;
        loop {
            if let desk_wire::Frame::Snapshot(reply) = conn.recv()? {
                return Ok(reply.canonical);
            }
        }
    };
    snapshot().unwrap_or(false)
}

/// Why the daemon holds a just-queued item of a running session, once it has looked: `None`
/// as soon as the item is on its way (or delivered), waits behind another delivery, or no
/// decision came within [`FIRST_LOOK`].
fn first_hold(socket: &std::path::Path, session: &SessionName, id: &ItemId) -> Option<String> {
    let deadline = std::time::Instant::now() + FIRST_LOOK;
    loop {
        let queue = live_queue(socket, session)?;
        let item = queue.items.iter().find(|i| i.item.id == *id)?;
        if item.item.state != State::Queued {
            return None;
        }
        if let Some(hold) = queue.hold {
            return Some(hold.reason);
        }
        if !queue.in_flight.is_empty() && !queue.in_flight.contains(id) {
            return None;
        }
        if std::time::Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(FIRST_LOOK_POLL);
    }
}

/// `session`'s queue as the running daemon has it, if it has one and answers.
fn live_queue(socket: &std::path::Path, session: &SessionName) -> Option<ListedQueue> {
    let request = Request::Queue { session: Some(session.clone()) };
    let resp = daemon_client::request(socket, &request, REQUEST_TIMEOUT).ok()?;
    resp.into_answer::<Vec<ListedQueue>>().ok()?.data.into_iter().find(|q| q.session == session.as_str())
}

/// Whether the operator paused `session`'s queue: `: reason` (empty without one), or `None`.
fn paused(socket: &std::path::Path, session: &SessionName) -> Option<String> {
    let reason = live_queue(socket, session)?.paused?;
    Some(if reason.is_empty() { String::new() } else { format!(": {reason}") })
}

/// The reason the daemon holds `session`'s queue, if it holds it.
fn current_hold(socket: &std::path::Path, session: &SessionName) -> Option<String> {
    live_queue(socket, session)?.hold.map(|h| h.reason)
}

fn prompt_text(bytes: Vec<u8>, what: &str) -> Result<String> {
    String::from_utf8(bytes).map_err(|_| failure(2, format!("{what} is not UTF-8 text")))
}

fn bounded(e: desk_common::fsutil::BoundedReadError) -> anyhow::Error {
    match e {
        desk_common::fsutil::BoundedReadError::TooLarge { what, .. } => failure(
            2,
            format!("{what} is larger than {MAX_PROMPT} bytes ({} KiB), the limit for a prompt", MAX_PROMPT / 1024),
        ),
        other => failure(1, other.to_string()),
    }
}

/// Read a prompt file, never more than the prompt limit and one byte (`/dev/zero` or a huge
/// file is refused, not read whole).
fn read_prompt_file(path: &std::path::Path) -> Result<String> {
    let what = path.display().to_string();
    let file = std::fs::File::open(path).with_context(|| format!("cannot read {what}"))?;
    let bytes = desk_common::fsutil::read_bounded(file, MAX_PROMPT, &what).map_err(bounded)?;
    prompt_text(bytes, &what)
}

fn read_stdin() -> Result<String> {
    if nix::unistd::isatty(std::io::stdin()).unwrap_or(false) {
        // Otherwise a bare `desk send NAME` on a terminal just sits there, silently waiting.
        eprintln!("desk: reading the prompt from stdin; end it with Ctrl-D on a line of its own");
    }
    let bytes = desk_common::fsutil::read_bounded(std::io::stdin().lock(), MAX_PROMPT, "the prompt on stdin")
        .map_err(bounded)?;
    prompt_text(bytes, "the prompt on stdin")
}

// ----- inspection -----

fn fmt_age(ms: u64) -> String {
    desk_core::time::span(now_ms().saturating_sub(ms))
}

/// What `desk ls` shows of a session's delivery.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub(super) struct QueueCounts {
    /// Items pending for it: queued, sending or stuck (and still in the intake).
    pub queue: u32,
    /// Of those, the stuck ones.
    pub stuck: u32,
    /// The pause reason (`""` when none was given) while delivery to it is paused.
    pub paused: Option<String>,
}

/// How long `desk ls` waits for the daemon's queues: as long as it waits for the masters (the
/// two are asked at the same time), so a wedged daemon costs a listing no more than a master.
const LS_QUEUE_TIMEOUT: Duration = session::PROBE_DEADLINE;

/// Every session's delivery counts, from the daemon when it runs, else from the store; `None`
/// when neither answers (a wedged daemon, an unreadable store).
pub(super) fn queue_counts(paths: &Paths) -> Option<std::collections::HashMap<String, QueueCounts>> {
    let (pending, _) = crate::queues::pending_by_session(paths, LS_QUEUE_TIMEOUT).ok()?;
    let counts = pending
        .into_iter()
        .map(|(session, p)| (session, QueueCounts { queue: p.queue, stuck: p.stuck, paused: p.paused }))
        .collect();
    Some(counts)
}

pub(super) fn queue(session: Option<SessionName>, json: bool) -> Result<i32> {
    let paths = paths()?;
    if let Some(name) = &session {
        require_delivery_target(&paths, name)?;
    }
    let offline = crate::autostart::daemon_down(&paths);
    let queues = if offline {
        if !json {
            eprintln!("desk: {DAEMON_DOWN}");
        }
        Queues::Stored(crate::queues::stored_queues(&paths, session.as_ref())?)
    } else {
        Queues::Live(ask(&paths, &Request::Queue { session }, REQUEST_TIMEOUT)?.data)
    };
    if json {
        let mut notes: Vec<String> = if offline { vec![DAEMON_DOWN.to_string()] } else { vec![] };
        notes.extend(super::channel::stall_lines(&paths));
        output::print_ok("queues", queues.to_json()?, &notes)?;
        return Ok(0);
    }
    let queues = queues.iter();
    let not_queued = print_not_queued(&paths)?;
    if queues.is_empty() {
        if !not_queued {
            println!("no pending items");
        }
        return Ok(0);
    }
    for q in queues {
        let mut head = q.session.to_string();
        if let Some(p) = q.paused {
            head.push_str(&format!("  [paused{}]", if p.is_empty() { String::new() } else { format!(": {p}") }));
        }
        if let Some(why) = q.refused {
            head.push_str(&format!("  [cannot deliver: {why}]"));
        }
        if let Some(hold) = q.hold {
            head.push_str(&format!("  held: {} ({})", hold.reason, fmt_age(hold.since_ms)));
        }
        println!("{head}");
        for item in q.items {
            let mut state = item.state.as_str().to_string();
            if let Some(class) = item.stuck {
                state.push_str(&format!("({})", class.as_str()));
            }
            println!("  {}  {:<24} {:>4}  {}", item.id, state, fmt_age(item.created_ms), item.preview(60));
        }
        for item in q.intake {
            println!("  {}  {:<24} {:>4}  {}", item.id, "intake", fmt_age(item.created_ms), item.preview(60));
        }
    }
    Ok(0)
}

/// Prompts the daemon has not queued: intake files still waiting (a full disk, or no daemon),
/// records set aside because they cannot be parsed, and channels whose messages stopped
/// becoming prompts (`desk_daemon::channel::stall`). Returns whether there were any.
fn print_not_queued(paths: &Paths) -> Result<bool> {
    let store = Store::open(&paths.state)?;
    let waiting = store.pending_intake()?;
    let set_aside = store.set_aside_records()?;
    if !waiting.is_empty() {
        println!("intake  [not queued yet; `desk item ID` says why]");
        for path in &waiting {
            let id = path.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
            let since = std::fs::metadata(path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_millis() as u64);
            match Store::read_record(path) {
                Ok(item) => println!("  {id}  {:<24} {:>4}  {}", item.session, fmt_age(since), item.preview(60)),
                Err(_) => println!("  {id}  {:<24} {:>4}", "?", fmt_age(since)),
            }
        }
    }
    if !set_aside.is_empty() {
        println!("set aside  [cannot be parsed; never delivered]");
        for p in &set_aside {
            println!("  {}  {}", p.path.display(), p.error);
        }
    }
    let stalled = super::channel::stall_lines(paths);
    if !stalled.is_empty() {
        println!("channels  [stalled: their messages are stored but not turned into prompts]");
        for line in &stalled {
            println!("  {line}");
        }
    }
    Ok(!waiting.is_empty() || !set_aside.is_empty() || !stalled.is_empty())
}

/// The item an operator means by `text`: a whole id, or any unique start of one (like a git
/// hash) or end of one (people copy the end of an id). No match, or several, is a usage error
/// that says which.
pub(super) fn resolve_id(text: &str) -> Result<ItemId> {
    if let Some(id) = ItemId::parse(text) {
        return Ok(id);
    }
    let valid =
        !text.trim().is_empty() && text.trim().bytes().all(|b| b.is_ascii_alphanumeric()) && text.trim().len() < 26;
    if !valid {
        return Err(fail(
            ErrorCode::Usage,
            format!("{text:?} is not an item id (26 characters, or the start or end of one)"),
        ));
    }
    let store = Store::open(&paths()?.state)?;
    let mut ids = store.ids_with_prefix_or_suffix(text)?;
    match ids.len() {
        0 => Err(fail(ErrorCode::NoSuchItem, format!("no item has an id starting or ending with {text:?}"))),
        1 => Ok(ids.remove(0)),
        n => {
            const SHOWN: usize = 10;
            let list: Vec<String> = ids.iter().take(SHOWN).map(|i| format!("  {i}")).collect();
            let more = if n > SHOWN { format!("\n  … and {} more", n - SHOWN) } else { String::new() };
            Err(fail(
                ErrorCode::AmbiguousId,
                format!("{text:?} is the start or end of {n} item ids; give more of it:\n{}{more}", list.join("\n")),
            ))
        }
    }
}

pub(super) fn item(id: &str, json: bool) -> Result<i32> {
    let paths = paths()?;
    let id = resolve_id(id)?;
    // Finished items are read from disk even when the daemon is down.
    let answer = match daemon_client::request(
        &desk_common::daemon_client::socket_path(&paths),
        &Request::Item { id: id.clone() },
        REQUEST_TIMEOUT,
    ) {
        Ok(resp) => resp.into_answer::<ItemAnswer>().map_err(desk_common::failure::from_control)?,
        Err(_) => {
            let store = Store::open(&paths.state)?;
            let whole = |message: &str, item| Answer { message: message.into(), data: ItemAnswer { item, hold: None } };
            match (store.find(&id)?, store.find_intake(&id)?) {
                (Some(item), _) => whole("item", item),
                (None, Some(item)) => whole(IN_INTAKE, item),
                (None, None) => match store.find_set_aside(&id)? {
                    Some(p) => {
                        return Err(failure(
                            1,
                            format!("item {id} was set aside as {}: {}", p.path.display(), p.error),
                        ));
                    }
                    None => return Err(fail(ErrorCode::NoSuchItem, format!("no item {id}"))),
                },
            }
        }
    };
    let in_intake = answer.message == IN_INTAKE;
    if json {
        let notes: Vec<String> = if in_intake { vec!["in the intake, not queued yet".into()] } else { vec![] };
        output::print_ok("item", serde_json::to_value(&answer.data)?, &notes)?;
        return Ok(0);
    }
    let ItemAnswer { item, hold } = answer.data;
    println!("item {}", item.id);
    println!("  session   {} (generation {})", item.session, item.generation.map_or("any".into(), |g| g.to_string()));
    let mut state = item.state.as_str().to_string();
    if let Some(class) = item.stuck {
        state.push_str(&format!(" ({})", class.as_str()));
    }
    if in_intake {
        state = "in the intake, not queued yet".into();
    }
    println!("  state     {state}, since {}", desk_common::clock::local_datetime(item.state_since_ms));
    if let Some(hold) = &hold {
        println!("  held      {}", hold.reason);
    }
    println!("  when      {}", if item.when == When::Idle { "idle" } else { "now" });
    println!("  from      {}", item.from);
    println!("  attempts  {}", item.attempts);
    if !item.digest_with.is_empty() {
        println!(
            "  digest    delivered together with {}",
            item.digest_with.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
        );
    }
    println!("  text      {}", item.preview(100));
    println!("  evidence:");
    for note in &item.evidence {
        println!("    {}  {:<11} {}", desk_common::clock::local_time(note.at_ms), note.kind, note.detail);
    }
    Ok(0)
}

pub(super) fn stuck(json: bool) -> Result<i32> {
    let paths = paths()?;
    let offline = crate::autostart::daemon_down(&paths);
    let items: Vec<ListedItem> = if offline {
        if !json {
            eprintln!("desk: {DAEMON_DOWN}");
        }
        let (items, _, problems) = Store::open(&paths.state)?.read_only_view()?;
        for p in &problems {
            eprintln!("desk: cannot read {}: {}", p.path.display(), p.error);
        }
        // Whole, as the store holds them: a listing is cut to bound the daemon's answer.
        let whole = |item| ListedItem { item, text_chars: None, evidence_total: None };
        items.into_iter().filter(|i| i.state == State::Stuck).map(whole).collect()
    } else {
        ask(&paths, &Request::Stuck, REQUEST_TIMEOUT)?.data
    };
    StuckReport { items, offline }.render(json)?;
    Ok(0)
}

/// `desk stuck`: every stuck item, as the daemon (or, when it is down, the store) holds it.
struct StuckReport {
    items: Vec<ListedItem>,
    /// Read from the store: the daemon is not running.
    offline: bool,
}

impl StuckReport {
    /// Once as text (each item, why it is stuck and what to do) or once as JSON (the items).
    fn render(&self, json: bool) -> Result<()> {
        if json {
            let notes: Vec<String> = if self.offline { vec![DAEMON_DOWN.to_string()] } else { vec![] };
            // Through a `Value`, whose keys are sorted: the order `desk stuck --json` has always had.
            return output::print_ok("stuck", serde_json::to_value(&self.items)?, &notes);
        }
        if self.items.is_empty() {
            println!("nothing is stuck");
        }
        print_stuck(&self.items, None);
        Ok(())
    }
}

/// `desk stuck`'s text for `items`, each id and session written `HOST:…` when they are a
/// host's (`desk stuck -H HOST`), so the commands it suggests reach them.
pub(super) fn print_stuck(items: &[ListedItem], host: Option<&str>) {
    let on_host = |s: &str| host.map_or_else(|| s.to_string(), |h| format!("{h}:{s}"));
    for ListedItem { item, .. } in items {
        let class = item.stuck.map_or("?", |c| c.as_str());
        let why = item
            .evidence
            .iter()
            .rev()
            .find(|n| n.kind == "stuck" || n.kind == "refused")
            .map(|n| n.detail.as_str())
            .unwrap_or_default();
        let (id, session) = (on_host(item.id.as_str()), on_host(&item.session));
        println!("{id}  {session:<12} {class:<14} {}", item.preview(50));
        println!("    {why}");
        println!("    next: {}", next_step(item, &id, &session));
    }
}

/// What an operator can do about a stuck item, by its class (`id` and `session` as the
/// operator names them).
fn next_step(item: &Item, id: &str, session: &str) -> String {
    use desk_core::delivery::item::StuckClass;
    match item.stuck {
        Some(StuckClass::SubmitStuck) => format!(
            "check the agent (desk peek {session}); desk force {id} presses Enter on the text in its box, or desk drop {id}"
        ),
        Some(StuckClass::Merged) => format!(
            "it went, or sits, with someone else's text: check the agent (desk peek {session}), then desk drop {id}; force refuses it"
        ),
        Some(StuckClass::Interrupted) => format!(
            "the agent may have taken it (it was cut off after it was typed, or while it waited in the agent's own queue; its hook, if it comes, settles it delivered): check the agent's transcript (desk peek {session} --history); if it did not get the prompt, desk force {id} pastes it again; otherwise desk drop {id}"
        ),
        _ => format!(
            "check the agent (desk peek {session}): if it did not get the prompt, desk force {id} presses Enter on it when it sits unsent in the input box, or pastes it again; otherwise desk drop {id}"
        ),
    }
}

/// The ids of the prompts still pending for `session` (queued, sending or stuck, or waiting in
/// the intake), oldest first, as the store holds them.
pub(super) fn pending_ids(paths: &Paths, session: &SessionName) -> Result<Vec<ItemId>> {
    if !paths.state.join("delivery").exists() {
        return Ok(Vec::new());
    }
    let (items, intake, _) = Store::open(&paths.state)?.read_only_view()?;
    let mut ids: Vec<ItemId> = items
        .iter()
        .filter(|i| !i.state.is_final())
        .chain(&intake)
        .filter(|i| i.session == session.as_str())
        .map(|i| i.id.clone())
        .collect();
    ids.sort();
    ids.dedup();
    Ok(ids)
}

/// Drop each of `ids` through the daemon (started if need be); returns what a command says
/// about it and the ids that were dropped (one the daemon refuses — delivered meanwhile — is
/// named in the notes).
pub(super) fn drop_all(paths: &Paths, ids: &[ItemId], json: bool) -> Result<(Vec<String>, Vec<ItemId>)> {
    let mut notes: Vec<String> = crate::autostart::ensure_daemon(paths).say(json).into_iter().collect();
    let mut dropped = Vec::new();
    for id in ids {
        // As `desk drop` waits: a drop may erase desk's own prompt from the box first.
        match request(paths, &Request::Drop { id: id.clone() }, FORCE_TIMEOUT)?.into_answer::<()>() {
            Ok(_) => dropped.push(id.clone()),
            Err(e) => notes.push(format!("{id} was not dropped: {}", e.message)),
        }
    }
    Ok((notes, dropped))
}

/// A name `pause` or `resume` acts on must name something: a session desk knows, or a queue the
/// store holds for one (prompts sent `--queue-for-later`, a pause kept from before). Anything
/// else is most often a typo, refused as `send` refuses it, with the nearest names.
fn require_delivery_target(paths: &Paths, name: &SessionName) -> Result<()> {
    if super::session_known(paths, name) {
        return Ok(());
    }
    let store = Store::open(&paths.state)?;
    let paused = store.load_pauses().is_ok_and(|p| p.sessions.contains_key(name.as_str()));
    let queued = || {
        store.read_only_view().is_ok_and(|(items, intake, _)| {
            items.iter().filter(|i| !i.state.is_final()).chain(&intake).any(|i| i.session == name.as_str())
        })
    };
    if paused || queued() {
        return Ok(());
    }
    super::require_session(paths, name)
}

/// `force`, `drop`, `pause`, `resume`: one request, its answer printed; `kind` names the JSON.
pub(super) fn command(kind: &str, req: Request, json: bool) -> Result<i32> {
    let paths = paths()?;
    // A drop may erase desk's own prompt from the input box and look again: up to 45 s.
    let timeout =
        if matches!(req, Request::Force { .. } | Request::Drop { .. }) { FORCE_TIMEOUT } else { REQUEST_TIMEOUT };
    if let Request::Pause { session, .. } | Request::Resume { session } = &req {
        require_delivery_target(&paths, session)?;
    }
    let (id, session) = match &req {
        Request::Force { id, .. } | Request::Drop { id } => (Some(id.clone()), None),
        Request::Pause { session, .. } | Request::Resume { session } => (None, Some(session.clone())),
        _ => (None, None),
    };
    // Only the daemon can carry these out.
    let notes: Vec<String> = crate::autostart::ensure_daemon(&paths).say(json).into_iter().collect();
    let message = ask::<()>(&paths, &req, timeout)?.message;
    CommandReport { id, message, session }.render(kind, &notes, json)?;
    Ok(0)
}

/// What `force`, `drop`, `pause` or `resume` did: the daemon's words, and the item or session
/// it acted on (in JSON, the keys in the order the earlier map gave them).
#[derive(serde::Serialize)]
struct CommandReport {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<ItemId>,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<SessionName>,
}

impl CommandReport {
    /// Once as text (the daemon's sentence) or once as JSON (`kind` names the envelope).
    fn render(&self, kind: &str, notes: &[String], json: bool) -> Result<()> {
        if json {
            return output::print_ok(kind, self, notes);
        }
        println!("{}", self.message);
        Ok(())
    }
}

/// Every session's stuck items, from the daemon when it runs, else from the store (the counts
/// `desk ls` shows); `None` when neither answers. For the attention line inside `desk attach`.
pub(super) fn stuck_counts(paths: &Paths) -> Option<std::collections::HashMap<String, u32>> {
    Some(queue_counts(paths)?.into_iter().map(|(session, c)| (session, c.stuck)).collect())
}
