//! `desk queue`: every pending prompt per session, and the prompts the daemon has not queued.

use anyhow::Result;
use std::path::Path;

use super::{REQUEST_TIMEOUT, ask, paths, require_delivery_target};
use crate::cli::output;
use crate::queues::{DAEMON_DOWN, Queues};
use desk_common::clock::now_ms;
use desk_common::paths::{Paths, SessionName};
use desk_core::delivery::answer::ListedQueue;
use desk_core::delivery::item::{Item, ItemId};
use desk_daemon::store::{Problem, Store};
use desk_wire::control::Request;

pub(in crate::cli) fn queue(session: Option<SessionName>, json: bool, ids: output::Ids) -> Result<i32> {
    let paths = paths()?;
    if let Some(name) = &session {
        require_delivery_target(&paths, name)?;
    }
    QueueReport::read(&paths, session, json, ids)?.render(json)?;
    Ok(0)
}

/// `desk queue --all`'s part for this machine: what `desk queue` prints, less its "no pending
/// items"; whether it printed anything. That this machine's daemon is down is said only when
/// something of it is listed (a machine that only reaches hosts may never run one).
pub(in crate::cli) fn print_local_queues() -> Result<bool> {
    let paths = paths()?;
    let report = QueueReport::read(&paths, None, false, output::Ids::here())?;
    let printed = report.print_text();
    if report.offline && printed {
        eprintln!("desk: this machine's {DAEMON_DOWN}");
    }
    Ok(printed)
}

/// A host's queues as its `desk queue --json` answered (`rows`, from its daemon or, when that
/// is down, its store), printed as `desk queue` prints them with the host's sessions and item
/// ids written `HOST:…`, so that what is shown is what `item`, `force` and `drop` take here;
/// whether it printed anything. Rows of neither shape (another desk's) are skipped.
pub(in crate::cli) fn print_host_queues(host: &str, rows: Vec<serde_json::Value>) -> bool {
    let live: Result<Vec<ListedQueue>, _> = rows.iter().map(|r| serde_json::from_value(r.clone())).collect();
    let queues = match live {
        Ok(live) => Queues::Live(live),
        Err(_) => Queues::Stored(rows.into_iter().filter_map(|r| serde_json::from_value(r).ok()).collect()),
    };
    let report = QueueReport {
        queues,
        offline: false,
        stalled: Vec::new(),
        not_queued: None,
        ids: output::Ids::of_host(Some(host)),
    };
    report.print_text()
}

/// `desk queue`: the pending queues, from the daemon or (when it is down) the store, and what
/// stops prompts from becoming items.
struct QueueReport {
    queues: Queues,
    /// Read from the store: the daemon is not running.
    offline: bool,
    /// Channels whose messages stopped becoming prompts (`desk_daemon::channel::stall`).
    stalled: Vec<String>,
    /// What the daemon has not queued (read for the text only).
    not_queued: Option<NotQueued>,
    /// How item ids are written in text.
    ids: output::Ids,
}

/// Prompts the daemon has not queued: intake files still waiting (a full disk, or no daemon)
/// and records set aside because they cannot be parsed.
struct NotQueued {
    waiting: Vec<Waiting>,
    set_aside: Vec<Problem>,
}

/// One intake file still waiting.
struct Waiting {
    /// The file's stem: the item's id when the file is desk's.
    id: String,
    /// When it was written (its modification time), ms since the epoch; 0 when unknown.
    since_ms: u64,
    /// The record, when it parses.
    item: Option<Item>,
}

impl NotQueued {
    fn read(paths: &Paths) -> Result<NotQueued> {
        let store = Store::open(&paths.state)?;
        let waiting = store
            .pending_intake()?
            .iter()
            .map(|path| Waiting {
                id: path.file_stem().and_then(|s| s.to_str()).unwrap_or("?").to_string(),
                since_ms: modified_ms(path),
                item: Store::read_record(path).ok(),
            })
            .collect();
        Ok(NotQueued { waiting, set_aside: store.set_aside_records()? })
    }
}

/// When `path` was last written, ms since the epoch; 0 when that cannot be read.
fn modified_ms(path: &Path) -> u64 {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64)
}

fn fmt_age(ms: u64) -> String {
    desk_core::time::span(now_ms().saturating_sub(ms))
}

impl QueueReport {
    /// This machine's queues (only `session`'s, when named), from the daemon or, when it is
    /// down, from the store; for text, also what stops prompts from becoming items.
    fn read(paths: &Paths, session: Option<SessionName>, json: bool, ids: output::Ids) -> Result<QueueReport> {
        let offline = crate::autostart::daemon_down(paths);
        let queues = if offline {
            Queues::Stored(crate::queues::stored_queues(paths, session.as_ref())?)
        } else {
            Queues::Live(ask(paths, &Request::Queue { session }, REQUEST_TIMEOUT)?.data)
        };
        let stalled = crate::cli::channel::stall_lines(paths);
        // The intake and the set-aside records have no place in the JSON answer, which therefore
        // reads (and creates) nothing more in the store.
        let not_queued = if json { None } else { Some(NotQueued::read(paths)?) };
        Ok(QueueReport { queues, offline, stalled, not_queued, ids })
    }

    /// Once as text (what is not queued, then each queue and its items) or once as JSON (the
    /// queues; the daemon's absence and stalled channels as notes).
    fn render(&self, json: bool) -> Result<()> {
        if json {
            let mut notes: Vec<String> = if self.offline { vec![DAEMON_DOWN.to_string()] } else { vec![] };
            notes.extend(self.stalled.iter().cloned());
            return output::print_ok("queues", self.queues.to_json()?, &notes);
        }
        if self.offline {
            eprintln!("desk: {DAEMON_DOWN}");
        }
        if !self.print_text() {
            println!("no pending items");
        }
        Ok(())
    }

    /// What is not queued, then each queue and its items; whether there was anything.
    fn print_text(&self) -> bool {
        let queues = self.queues.iter();
        let not_queued = self.print_not_queued();
        let any = not_queued || !queues.is_empty();
        for q in queues {
            let mut head = self.ids.session(q.session);
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
                println!(
                    "  {}  {:<24} {:>4}  {}",
                    self.ids.show(&item.id),
                    state,
                    fmt_age(item.created_ms),
                    item.preview(60)
                );
            }
            for item in q.intake {
                println!(
                    "  {}  {:<24} {:>4}  {}",
                    self.ids.show(&item.id),
                    "intake",
                    fmt_age(item.created_ms),
                    item.preview(60)
                );
            }
        }
        any
    }

    /// Prints what is not queued (the intake, set-aside records, stalled channels); returns
    /// whether there was any.
    fn print_not_queued(&self) -> bool {
        let (waiting, set_aside) = match &self.not_queued {
            Some(n) => (&n.waiting[..], &n.set_aside[..]),
            None => (&[][..], &[][..]),
        };
        if !waiting.is_empty() {
            println!("intake  [not queued yet; `desk item ID` says why]");
            for w in waiting {
                // A file named otherwise is not desk's: its name as it is.
                let id = ItemId::parse(&w.id).map_or_else(|| w.id.clone(), |id| self.ids.show(&id));
                match &w.item {
                    Some(item) => {
                        let session = self.ids.session(&item.session);
                        println!("  {}  {:<24} {:>4}  {}", id, session, fmt_age(w.since_ms), item.preview(60))
                    }
                    None => println!("  {}  {:<24} {:>4}", id, "?", fmt_age(w.since_ms)),
                }
            }
        }
        if !set_aside.is_empty() {
            println!("set aside  [cannot be parsed; never delivered]");
            for p in set_aside {
                println!("  {}  {}", p.path.display(), p.error);
            }
        }
        if !self.stalled.is_empty() {
            println!("channels  [stalled: their messages are stored but not turned into prompts]");
            for line in &self.stalled {
                println!("  {line}");
            }
        }
        !waiting.is_empty() || !set_aside.is_empty() || !self.stalled.is_empty()
    }
}
