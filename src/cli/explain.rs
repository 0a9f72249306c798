//! `desk explain`: what desk believes about a session's agent, and the evidence.
//!
//! Owns presenting the state authority's view (each axis with its value, since when and the
//! evidence behind it) together with the recent events that changed it, read from the
//! journal. Invariant: it reports what the master says; for a session whose master is gone it
//! says so and shows only what the journal and exit record hold.

use anyhow::Result;
use serde::Serialize;

use super::output::{self, ErrorCode};
use desk_common::journal;
use desk_common::master_client::Connection;
use desk_common::paths::{Paths, SessionName};
use desk_common::session::{self, Probe};
use desk_core::state::{AxisView, StateView};
use desk_wire::Role;
use desk_wire::events::{Event, EventBody};

/// How many state-changing events `explain` lists.
const RECENT: usize = 12;

#[derive(Serialize)]
struct Explanation {
    name: String,
    running: bool,
    generation: Option<u32>,
    provider: Option<String>,
    /// The session's size policy (absent for sessions of older masters).
    size_policy: Option<String>,
    #[serde(serialize_with = "output::serialize_state")]
    state: Option<StateView>,
    exit: Option<session::ExitRecord>,
    recent: Vec<Event>,
    /// The running master's screen size (the text shows it; the JSON has never carried it).
    #[serde(skip)]
    size: Option<(u16, u16)>,
}

/// One axis in two lines: its value (`shown`, or as its JSON says it) and since when, then its
/// evidence.
fn axis<T: Serialize>(name: &str, a: &AxisView<T>, shown: Option<String>, now: u64) -> String {
    let value = shown.unwrap_or_else(|| axis_value(&a.value));
    format!(
        "{name:<10} {value:<10} since {} ({})\n{:<10} evidence: {} — {} (observed {})",
        desk_common::clock::local_time(a.since_ms),
        desk_core::time::ago(now, a.since_ms),
        "",
        a.evidence.source,
        a.evidence.detail,
        desk_core::time::ago(now, a.evidence.at_ms)
    )
}

/// An axis's value as its JSON says it (`degraded: reason` for a degraded health).
fn axis_value<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value).ok().map_or_else(String::new, |v| match v {
        serde_json::Value::String(s) => s,
        serde_json::Value::Object(o) => match (o.get("status"), o.get("reason")) {
            (Some(s), Some(r)) => format!("{}: {}", s.as_str().unwrap_or(""), r.as_str().unwrap_or("")),
            (Some(s), None) => s.as_str().unwrap_or("").to_string(),
            _ => String::new(),
        },
        other => other.to_string(),
    })
}

pub(super) fn explain(name: &SessionName, json: bool) -> Result<i32> {
    let paths = Paths::from_env()?;
    paths.ensure_runtime()?;
    let files = paths.session(name);
    let meta = session::read_meta(&files).unwrap_or(None);
    let info = match session::probe_settled(&files)? {
        Probe::Live(stream) => match Connection::open(stream, Role::Query, 0, 0) {
            Ok(conn) => Some(conn.info),
            // A master leaving as we connect: its exit record tells the rest.
            Err(_) if session::current_exit(&files).is_some() => None,
            Err(e) => return Err(e),
        },
        _ => None,
    };
    // Read after the probe, so an exit that happened meanwhile is in it.
    let exit = session::read_exit(&files).unwrap_or(None);
    let history = journal::read_all(&paths.session_state(name))?;
    if info.is_none() && meta.is_none() && history.is_empty() {
        return Err(super::fail(
            ErrorCode::NoSuchSession,
            desk_common::suggest::unknown_session_in(&paths, name.as_str()),
        ));
    }
    let recent: Vec<Event> = {
        let changes: Vec<&Event> = history
            .iter()
            .filter(|e| {
                matches!(
                    e.body,
                    EventBody::State { .. }
                        | EventBody::Hook { .. }
                        | EventBody::Exit { .. }
                        | EventBody::Started { .. }
                )
            })
            .collect();
        changes[changes.len().saturating_sub(RECENT)..].iter().map(|e| (*e).clone()).collect()
    };
    let report = Explanation {
        name: name.to_string(),
        running: info.is_some(),
        generation: info.as_ref().map(|i| i.generation).or(meta.as_ref().map(|m| m.generation)),
        provider: info.as_ref().map(|i| i.provider.clone()).or(meta.as_ref().map(|m| m.provider.clone())),
        size_policy: meta.as_ref().and_then(|m| m.size_policy.clone()),
        state: info.as_ref().and_then(|i| i.state.clone()),
        exit: if info.is_some() { None } else { exit },
        recent,
        size: info.as_ref().map(|i| (i.cols, i.rows)),
    };
    report.render(json)?;
    Ok(0)
}

impl Explanation {
    /// Once as text (the state, axis by axis, then the recent changes) or once as JSON.
    fn render(&self, json: bool) -> Result<()> {
        if json {
            return output::print_ok("explanation", self, &[]);
        }
        let now = desk_common::clock::now_ms();
        println!(
            "session {}: generation {}, provider {}",
            self.name,
            self.generation.map_or("?".into(), |g| g.to_string()),
            self.provider.as_deref().unwrap_or("?")
        );
        if let Some((cols, rows)) = self.size {
            println!("size: {cols}x{rows} (size policy {})", self.size_policy.as_deref().unwrap_or("latest"));
        }
        match &self.state {
            Some(s) => {
                println!("rules: {}", s.rules);
                println!("{}", axis("lifecycle", &s.lifecycle, None, now));
                let activity = crate::words::activity(s.activity.value, s.wait.as_deref());
                println!("{}", axis("activity", &s.activity, Some(activity), now));
                println!("{}", axis("health", &s.health, None, now));
                println!(
                    "ready: {}; last output: {}; last hook: {}",
                    if s.ready { "yes" } else { "no" },
                    s.last_output_ms.map_or("never".into(), |t| desk_core::time::ago(now, t)),
                    s.last_hook_ms.map_or("never".into(), |t| desk_core::time::ago(now, t)),
                );
            }
            None => match &self.exit {
                Some(exit) => {
                    println!(
                        "lifecycle  {:<10} {} ({})",
                        crate::words::ended(exit.status),
                        desk_common::signals::describe_exit(exit.status),
                        desk_core::time::ago(now, exit.exited_at_ms)
                    )
                }
                None => println!("the master is not running and recorded no exit: state unknown"),
            },
        }
        if !self.recent.is_empty() {
            println!("\nrecent changes:");
            for e in &self.recent {
                println!(
                    "{:>6}  {}  g{}  {}",
                    e.seq,
                    desk_common::clock::local_time(e.ts_ms),
                    e.generation,
                    e.body.describe()
                );
            }
        }
        Ok(())
    }
}
