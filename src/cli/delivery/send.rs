//! `desk send`: a prompt written durably to the intake, then queued by the daemon; what was
//! found at the name and why its queue waits, said at once.

use anyhow::{Context, Result};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

use super::{REQUEST_TIMEOUT, paths};
use crate::cli::output::{self, ErrorCode};
use crate::cli::{fail, failure};
use desk_common::clock::now_ms;
use desk_common::daemon_client;
use desk_common::master_client::Connection;
use desk_common::paths::{Paths, SessionName};
use desk_common::session::{self, ExitRecord, Probe};
use desk_core::delivery::answer::{Ingested, ListedQueue};
use desk_core::delivery::engine::CONNECTING;
use desk_core::delivery::item::{Item, ItemId, State, When};
use desk_core::delivery::text;
use desk_daemon::store::Store;
use desk_wire::Role;
use desk_wire::control::{Request, Response};

/// How long `desk send` waits for a running daemon to queue its item. Queueing takes
/// milliseconds; a daemon that cannot (a full disk) retries within about 8 s of the cause
/// going away, so this covers a short hiccup without leaving the sender hanging.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// Prompts above 256 KiB are refused: far beyond any prompt an agent's input box takes.
const MAX_PROMPT: usize = 256 * 1024;

/// How long `desk send` waits for the daemon's first decision on a prompt for a running
/// session, to say at once when it is held: the daemon looks at the screen within
/// milliseconds of queueing it; a second covers a loaded machine, and a send is never held up
/// longer than that.
const FIRST_LOOK: Duration = Duration::from_secs(1);

/// How often `desk send` asks meanwhile.
const FIRST_LOOK_POLL: Duration = Duration::from_millis(10);

pub(in crate::cli) struct SendArgs {
    pub name: SessionName,
    pub text: Option<String>,
    pub file: Option<PathBuf>,
    pub when: When,
    pub from: Option<String>,
    /// Queue even when no session of this name ever existed.
    pub queue_for_later: bool,
    pub json: bool,
    /// How the item's id is written in text.
    pub ids: output::Ids,
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

pub(in crate::cli) fn send(args: SendArgs) -> Result<i32> {
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
    let report = |state: &str, hold: Option<String>| SendReport {
        hold,
        id: id.clone(),
        session: name.clone(),
        state: state.into(),
        ids: args.ids.clone(),
    };
    let shown = args.ids.show(&id);
    let answer = daemon_client::request(&socket, &Request::Ingest { id: id.clone() }, SEND_TIMEOUT)
        .map(Response::into_answer::<Ingested>);
    match answer {
        Ok(Ok(answer)) => {
            report(answer.data.state.as_str(), hold_of(&socket)).render(&notes, args.json)?;
            Ok(0)
        }
        Ok(Err(e)) => {
            if !args.json {
                report("refused", None).render(&notes, false)?;
            }
            Err(fail(ErrorCode::Refused, format!("desk serve did not queue item {shown}: {}", e.message)))
        }
        Err(e) if timed_out(&e) => {
            if !args.json {
                report("intake", None).render(&notes, false)?;
            }
            Err(fail(
                ErrorCode::DaemonUnavailable,
                format!(
                    "desk serve has not queued item {shown} within {} s; it stays in the intake and desk serve \
                     keeps trying (see: desk item {shown})",
                    SEND_TIMEOUT.as_secs()
                ),
            ))
        }
        Err(_) => {
            eprintln!("desk: desk serve is not running; the prompt waits in the intake until it starts");
            report("intake", None).render(&notes, args.json)?;
            Ok(0)
        }
    }
}

/// What `desk send` did with the prompt: its id, where it is, and why its queue waits. In
/// JSON its keys come in the order `desk send --json` has always had (sorted).
#[derive(Serialize)]
struct SendReport {
    /// Why the session's queue waits, when it does.
    hold: Option<String>,
    id: ItemId,
    session: SessionName,
    /// The item's state as the daemon queued it, or `intake` / `refused` when it did not.
    state: String,
    /// How `id` is written in text.
    #[serde(skip)]
    ids: output::Ids,
}

impl SendReport {
    /// Once as text (the id on stdout, a hold on stderr) or once as JSON (`notes` ride along).
    fn render(&self, notes: &[String], json: bool) -> Result<()> {
        if let Some(reason) = &self.hold {
            eprintln!("desk: queue {} is held: {reason}", self.session);
        }
        if json {
            return output::print_ok("sent", self, notes);
        }
        println!("{}", self.ids.show(&self.id));
        Ok(())
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
        // desk serve connecting to the master (it just started) is its own state for a few
        // milliseconds, not a reason the session gives: look again.
        if let Some(hold) = queue.hold.filter(|h| h.reason != CONNECTING) {
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
