//! `desk events`: a session's event history, and its live continuation; with `--all`, the
//! whole fleet's.
//!
//! Owns reading the journal and following a running master as an observer (one session) or
//! every master through [`desk_common::fleet`] (`--all`). Invariant: with `--follow`, the
//! subscription is opened before the journal is read, so no event falls in between; events are
//! printed once each, in sequence order per session.

use anyhow::Result;
use std::collections::HashMap;
use std::io::Write as _;

use super::output::ErrorCode;
use desk_common::fleet::{FleetEvent, FleetWatch};
use desk_common::journal;
use desk_common::master_client::Connection;
use desk_common::paths::{Paths, SessionName};
use desk_common::session::{self, Probe};
use desk_wire::events::{Event, EventBody};
use desk_wire::{Frame, Role};

/// Every event type, as `--type` takes it and JSON's `type` names it (`EventBody::kind`).
pub(super) const TYPES: [&str; 18] = [
    "started",
    "title",
    "bell",
    "notification",
    "mode",
    "output",
    "attach",
    "detach",
    "resize",
    "report",
    "hook",
    "state",
    "exit",
    "keys",
    "answer",
    "notify",
    "gap",
    "upgraded",
];

fn print(event: &Event, json: bool) {
    if json {
        if let Ok(line) = serde_json::to_string(event) {
            println!("{line}");
        }
    } else {
        let time = desk_common::clock::local_time(event.ts_ms);
        println!("{:>6}  {time}  g{}  {}", event.seq, event.generation, event.body.describe());
    }
}

/// Print a session's events after `since`; with `types` not empty, only events of those types.
pub(super) fn events(name: &SessionName, follow: bool, json: bool, since: u64, types: &[String]) -> Result<i32> {
    let wanted = |event: &Event| types.is_empty() || types.iter().any(|t| t == event.body.kind());
    let paths = Paths::from_env()?;
    paths.ensure_runtime()?;
    let files = paths.session(name);
    let mut live = None;
    if follow && let Probe::Live(stream) = session::probe(&files)? {
        let mut conn = Connection::open(stream, Role::Observer, 0, 0)?;
        // Following waits for events as long as the session lives.
        conn.set_deadline(None);
        live = Some(conn);
    }
    let dir = paths.session_state(name);
    let history = journal::read_all(&dir)?;
    if history.is_empty() && live.is_none() && !files.meta.exists() {
        return Err(super::fail(
            ErrorCode::NoSuchSession,
            desk_common::suggest::unknown_session_in(&paths, name.as_str()),
        ));
    }
    let mut last = since;
    for event in history.iter().filter(|e| e.seq > since) {
        if wanted(event) {
            print(event, json);
        }
        last = event.seq;
    }
    let Some(mut conn) = live else { return Ok(0) };
    loop {
        let frame = match conn.recv() {
            Ok(frame) => frame,
            // The master closes the connection once the session has exited.
            Err(_) => return Ok(0),
        };
        if let Frame::Event(map) = frame {
            let Ok(event) = Event::from_json_map(map) else { continue };
            if event.seq <= last {
                continue;
            }
            last = event.seq;
            if wanted(&event) {
                print(&event, json);
                use std::io::Write;
                let _ = std::io::stdout().flush();
            }
            if matches!(event.body, EventBody::Exit { .. }) {
                return Ok(0);
            }
        }
    }
}

/// One event of `session` in the fleet-wide stream: JSON gains a `session` key; text names the
/// session after the time.
pub(super) fn print_tagged(session: &str, event: &Event, json: bool) {
    if json {
        let mut map = event.to_json_map();
        map.insert("session".into(), session.into());
        if let Ok(line) = serde_json::to_string(&map) {
            println!("{line}");
        }
    } else {
        let time = desk_common::clock::local_time(event.ts_ms);
        println!("{time}  {session:<16} {:>6}  g{}  {}", event.seq, event.generation, event.body.describe());
    }
}

/// `desk events --all`: every session's journal merged by time; with `follow`, then every
/// running master's new events as they happen, sessions that start later included, until
/// interrupted. With `types` not empty, only events of those types.
pub(super) fn all(follow: bool, json: bool, types: &[String]) -> Result<i32> {
    let paths = Paths::from_env()?;
    each_event(&paths, follow, types, &mut |seen| {
        match seen {
            Seen::Event { session, event } => print_tagged(session, event, json),
            Seen::Unresponsive { session } if !json => {
                eprintln!("desk: session {session} does not answer; its events will follow if it wakes")
            }
            Seen::Answering { session } if !json => eprintln!("desk: session {session} answers again"),
            _ => {}
        }
        std::io::stdout().flush().is_ok()
    })?;
    Ok(0)
}

/// What [`each_event`] gives its reader, one at a time.
pub(super) enum Seen<'a> {
    /// An event of `session`'s, once, in sequence order for that session.
    Event { session: &'a str, event: &'a Event },
    /// `session`'s master stopped answering (its events follow if it wakes).
    Unresponsive { session: &'a str },
    /// It answers again.
    Answering { session: &'a str },
}

/// Every session's journal merged by time, then (with `follow`) every running master's new
/// events as they happen, sessions that start later included, each given to `seen` (with
/// `types` not empty, only events of those types): the whole of `desk events --all --local`,
/// for it and for `desk events --all` with hosts, which reads this machine's events in its own
/// process. Ends when the history is given (without `follow`) or when `seen` returns false (its
/// reader is gone).
pub(super) fn each_event(
    paths: &Paths,
    follow: bool,
    types: &[String],
    seen: &mut dyn FnMut(Seen<'_>) -> bool,
) -> Result<()> {
    let wanted = |event: &Event| types.is_empty() || types.iter().any(|t| t == event.body.kind());
    paths.ensure_runtime()?;
    // Subscribe first, so nothing falls between the journals and the live stream.
    let mut watch = if follow { Some(FleetWatch::open(paths.clone())?) } else { None };
    let mut history = Vec::new();
    for name in all_names(paths)? {
        for event in journal::read_all(&paths.session_state(&name))? {
            history.push((name.to_string(), event));
        }
    }
    history.sort_by(|(a, x), (b, y)| (x.ts_ms, a, x.seq).cmp(&(y.ts_ms, b, y.seq)));
    let mut last: HashMap<String, u64> = HashMap::new();
    for (session, event) in &history {
        if wanted(event) && !seen(Seen::Event { session, event }) {
            return Ok(());
        }
        last.insert(session.clone(), event.seq);
    }
    let Some(watch) = watch.as_mut() else { return Ok(()) };
    loop {
        for change in watch.wait(None)? {
            let going_on = match change {
                FleetEvent::Event { session, event } => {
                    let newest = last.entry(session.clone()).or_insert(0);
                    // A restarted session numbers on from its journal; an older number is one
                    // the history already gave.
                    if event.seq <= *newest {
                        continue;
                    }
                    *newest = event.seq;
                    !wanted(&event) || seen(Seen::Event { session: &session, event: &event })
                }
                // Subscribed now: what the master journalled before (since it started, or since
                // we last heard from it) comes from its journal; the stream carries the rest.
                FleetEvent::Joined { session, .. } => {
                    let Ok(name) = SessionName::parse(&session) else { continue };
                    let newest = last.entry(session.clone()).or_insert(0);
                    let mut going_on = true;
                    for event in journal::read_all(&paths.session_state(&name))? {
                        if going_on && event.seq > *newest {
                            *newest = event.seq;
                            going_on = !wanted(&event) || seen(Seen::Event { session: &session, event: &event });
                        }
                    }
                    going_on
                }
                FleetEvent::Unresponsive { session } => seen(Seen::Unresponsive { session: &session }),
                FleetEvent::Answering { session } => seen(Seen::Answering { session: &session }),
                _ => true,
            };
            if !going_on {
                return Ok(());
            }
        }
    }
}

/// Sessions with a journal in the state directory or files in the runtime directory.
fn all_names(paths: &Paths) -> Result<Vec<SessionName>> {
    let mut names = paths.session_names()?;
    if let Ok(entries) = std::fs::read_dir(paths.state.join("sessions")) {
        for entry in entries.flatten() {
            if let Some(name) = entry.file_name().to_str().and_then(|n| SessionName::parse(n).ok()) {
                names.push(name);
            }
        }
    }
    names.sort();
    names.dedup();
    Ok(names)
}
