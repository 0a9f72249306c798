//! `desk events`: a session's event history, and its live continuation.
//!
//! Owns reading the journal and following a running master as an observer. Invariant: with
//! `--follow`, the subscription is opened before the journal is read, so no event falls in
//! between; events are printed once each, in sequence order.

use anyhow::Result;

use super::output::ErrorCode;
use crate::events::{Event, EventBody, journal};
use crate::paths::{Paths, SessionName};
use crate::session::{self, Probe};
use crate::wire::client::Connection;
use crate::wire::{Frame, Role};

/// Every event type, as `--type` takes it and JSON's `type` names it (`EventBody::kind`).
pub const TYPES: [&str; 14] = [
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
    "gap",
];

fn print(event: &Event, json: bool) {
    if json {
        if let Ok(line) = serde_json::to_string(event) {
            println!("{line}");
        }
    } else {
        let time = crate::clock::local_time(event.ts_ms);
        println!("{:>6}  {time}  g{}  {}", event.seq, event.generation, event.body.describe());
    }
}

/// Print a session's events after `since`; with `types` not empty, only events of those types.
pub fn events(name: &SessionName, follow: bool, json: bool, since: u64, types: &[String]) -> Result<i32> {
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
        return Err(super::fail(ErrorCode::NoSuchSession, format!("no session named {name}")));
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
