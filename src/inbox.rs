//! The approvals inbox: every open dialog in the fleet, and answering one — only the one the
//! operator was shown.
//!
//! Owns reading a session's dialog (its screen from its master, read by the provider's dialog
//! rules, `desk_core::dialog`, the same rules the master checks an answer against), listing the
//! dialogs of every session desk reports blocked ([`list`]), and sending an answer ([`answer`]:
//! an `answer` EVENT naming the option and the fingerprint of the dialog that was shown, then a
//! PING; the master checks the fingerprint against its own screen, types the provider's keys and
//! journals it; this then watches the dialog go). `desk inbox`, `desk approve`/`deny` and the
//! dashboard's approvals view use it. Invariants: nothing is typed here (the master types, and
//! only after its own check); a refusal says what the dialog is now, and, when the dialog that
//! was shown is known, what changed; every wait is bounded.

use std::time::{Duration, Instant};

use crate::attention::FleetReader;
use desk_common::keys::Sender;
use desk_common::master_client::Connection;
use desk_common::paths::{Paths, SessionName};
use desk_common::session::{self, Probe};
use desk_core::dialog::{Choice, Dialog};
use desk_wire::operator::ClientEvent;
use desk_wire::state::Activity;
use desk_wire::{ErrorCode, Frame, Role};

/// 3 s after the last key is due: how long an answer waits for its dialog to leave the screen
/// before saying it is still there. Agents take a dialog down within a quarter of a second of
/// the key that answers it (docs/agents-observed.md §8.1).
const GONE_PATIENCE: Duration = Duration::from_secs(3);

/// 50 ms between two looks at the screen while waiting for that.
const GONE_POLL: Duration = Duration::from_millis(50);

/// 500 ms: how long after a session became blocked its dialog may still be on its way to the
/// screen. The signal can come first: the demo agent sets its `✋` title in the write before
/// the frame that draws the dialog, and a hook's permission notice reaches desk before the
/// agent's redraw; agents draw within a frame or two (16-100 ms) of it. A session blocked for
/// longer than this with no readable dialog is reported at once as unreadable.
const DRAW_PATIENCE: Duration = Duration::from_millis(500);

/// 25 ms between two looks at a just-blocked session's screen while its dialog is drawn.
const DRAW_POLL: Duration = Duration::from_millis(25);

/// One open dialog.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Open {
    pub session: String,
    pub provider: String,
    /// Since when the session is blocked (Unix ms; 0: not known).
    pub since_ms: u64,
    pub dialog: Dialog,
}

/// Why a session's dialog could not be read or answered.
#[derive(Debug)]
pub enum InboxError {
    NoSuchSession(String),
    NotRunning(String),
    /// The screen shows no dialog the provider's rules read.
    NoDialog(String),
    /// The dialog on the screen is not the one that was shown: what it is now, and the
    /// message.
    Changed(Option<Box<Dialog>>, String),
    /// The master refused for another reason (keys still being typed, a full input queue).
    Refused(String),
    /// An option that is not the dialog's, or an answer that needs to be named.
    Usage(String),
    Failed(anyhow::Error),
}

impl std::fmt::Display for InboxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InboxError::NoSuchSession(m)
            | InboxError::NotRunning(m)
            | InboxError::NoDialog(m)
            | InboxError::Changed(_, m)
            | InboxError::Refused(m)
            | InboxError::Usage(m) => f.write_str(m),
            InboxError::Failed(e) => write!(f, "{e:#}"),
        }
    }
}

impl std::error::Error for InboxError {}

/// A connection to `name`'s master as a query client.
fn connect(paths: &Paths, name: &SessionName) -> Result<Connection, InboxError> {
    let files = paths.session(name);
    match session::probe_settled(&files).map_err(InboxError::Failed)? {
        Probe::Live(stream) => {
            Connection::open(stream, Role::Query, 0, 0).map_err(|e| match session::current_exit(&files) {
                Some(exit) => InboxError::NotRunning(format!(
                    "session {name} {}",
                    desk_common::signals::describe_exit(exit.status)
                )),
                None => InboxError::Failed(e),
            })
        }
        Probe::Absent | Probe::Stale => Err(match session::current_exit(&files) {
            Some(exit) => {
                InboxError::NotRunning(format!("session {name} {}", desk_common::signals::describe_exit(exit.status)))
            }
            None if files.meta.exists() => InboxError::NotRunning(format!("session {name} is not running")),
            None => InboxError::NoSuchSession(format!("no session named {name}")),
        }),
    }
}

/// The dialog `conn`'s session shows now, read by its provider's rules (the configuration
/// directory's table, else the built-in one).
fn read_on(paths: &Paths, conn: &mut Connection) -> Result<Option<Dialog>, InboxError> {
    conn.send(&Frame::SnapshotRequest { history: None }).map_err(InboxError::Failed)?;
    let snapshot = loop {
        match conn.recv().map_err(InboxError::Failed)? {
            Frame::Snapshot(s) => break s,
            Frame::Error { message, .. } => return Err(InboxError::Refused(message)),
            _ => continue,
        }
    };
    let provider = desk_core::provider::Provider::or_shell(&conn.info.provider);
    let rules = desk_common::rules::load(provider, &paths.config)
        .unwrap_or_else(|_| desk_core::state::RuleSet::builtin(provider));
    let scope = format!("{}/{}", conn.info.name, conn.info.generation);
    Ok(rules.dialog.and_then(|spec| spec.read(&snapshot.screen.lines, None, &scope)))
}

/// The dialog session `name` shows now, if any.
///
/// A session that became blocked less than [`DRAW_PATIENCE`] ago is given the rest of it to
/// draw its dialog, so that a listing made just after the signal does not call it unreadable.
pub fn read(paths: &Paths, name: &SessionName) -> Result<Option<Open>, InboxError> {
    let mut conn = connect(paths, name)?;
    let since_ms =
        conn.info.state.as_ref().filter(|s| s.activity.value == Activity::Blocked).map_or(0, |s| s.activity.since_ms);
    let blocked_for = Duration::from_millis(desk_common::clock::now_ms().saturating_sub(since_ms));
    let deadline = Instant::now() + DRAW_PATIENCE.saturating_sub(blocked_for);
    let dialog = loop {
        let dialog = read_on(paths, &mut conn)?;
        if dialog.is_some() || since_ms == 0 || Instant::now() >= deadline {
            break dialog;
        }
        std::thread::sleep(DRAW_POLL);
    };
    Ok(dialog.map(|dialog| Open {
        session: name.as_str().to_string(),
        provider: conn.info.provider.clone(),
        since_ms,
        dialog,
    }))
}

/// How `desk inbox` says that `session` is blocked with no dialog it can read (a note of its
/// JSON answer too, where another machine's dashboard reads it back with [`unread_in`]).
pub fn unread_note(session: &str) -> String {
    format!("{session}{UNREAD_MIDDLE}{session}")
}

/// Between the session's name and its name again in [`unread_note`].
const UNREAD_MIDDLE: &str = " is blocked, but its screen shows no dialog desk can read: desk peek ";

/// The session an [`unread_note`] names; `None` for any other note.
pub fn unread_in(note: &str) -> Option<&str> {
    let (session, again) = note.split_once(UNREAD_MIDDLE)?;
    (session == again && !session.is_empty()).then_some(session)
}

/// A place's `desk inbox --json` answer (its dialogs, its notes) as dialogs and unreadable
/// sessions, each session written `{prefix}NAME` (`HOST:` for a host's; empty for this
/// machine's). A row of another shape (another desk's) is skipped.
pub fn from_answer(prefix: &str, rows: &[serde_json::Value], notes: &[String]) -> (Vec<Open>, Vec<String>) {
    let unread = notes.iter().filter_map(|n| unread_in(n)).map(|s| format!("{prefix}{s}")).collect();
    let open = rows
        .iter()
        .filter_map(|row| {
            Some(Open {
                session: format!("{prefix}{}", row.get("session")?.as_str()?),
                provider: row.get("provider").and_then(|p| p.as_str()).unwrap_or_default().to_string(),
                since_ms: row.get("since_ms").and_then(serde_json::Value::as_u64).unwrap_or(0),
                dialog: serde_json::from_value(row.clone()).ok()?,
            })
        })
        .collect();
    (open, unread)
}

/// The dialogs waiting longest first (those whose wait is not known last), then by session.
pub fn sort(open: &mut [Open]) {
    open.sort_by_key(|o| (if o.since_ms == 0 { u64::MAX } else { o.since_ms }, o.session.clone()));
}

/// Every open dialog in the fleet, the one waiting longest first; and the blocked sessions
/// whose screen shows no dialog the rules read (the operator should look at those another
/// way).
pub fn list(paths: &Paths) -> (Vec<Open>, Vec<String>) {
    let mut fleet = FleetReader::new(paths.clone());
    fleet.read_sessions();
    let mut open = Vec::new();
    let mut unread = Vec::new();
    for look in fleet.looks().into_iter().filter(|l| l.exited.is_none() && l.activity == Activity::Blocked) {
        let Ok(name) = SessionName::parse(&look.name) else { continue };
        match read(paths, &name) {
            Ok(Some(o)) => open.push(o),
            // A session whose screen cannot be read now is listed with those whose dialog
            // cannot be read: blocked, and not answerable from the inbox.
            Ok(None) | Err(_) => unread.push(look.name.clone()),
        }
    }
    sort(&mut open);
    (open, unread)
}

/// What became of an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered {
    /// The keys the provider's rules give for it (what the master types).
    pub keys: Vec<String>,
    /// The dialog left the screen (within the patience), and how long after the answer.
    pub gone_after: Option<Duration>,
}

/// Answer the dialog of session `name` — only if it is the one whose fingerprint is `seen` —
/// with `choice`, as `by`. `shown` is that dialog when the caller has it (to say what changed
/// if it did).
pub fn answer(
    paths: &Paths,
    name: &SessionName,
    choice: &Choice,
    seen: &str,
    shown: Option<&Dialog>,
    by: &Sender,
) -> Result<Answered, InboxError> {
    let mut conn = connect(paths, name)?;
    let provider = desk_core::provider::Provider::or_shell(&conn.info.provider);
    let rules = desk_common::rules::load(provider, &paths.config)
        .unwrap_or_else(|_| desk_core::state::RuleSet::builtin(provider));
    let now = read_on(paths, &mut conn)?;
    // Why the master refused, in the operator's terms: what the dialog is now.
    let changed = |now: Option<Dialog>| {
        let why = match (&now, shown) {
            (None, _) => {
                return InboxError::NoDialog(format!(
                    "{name} shows no dialog now (answered or dismissed since it was shown); nothing was typed"
                ));
            }
            (Some(d), Some(shown)) => {
                format!("{name}'s dialog changed since it was shown: {}; nothing was typed", shown.changes_to(d))
            }
            (Some(d), None) => format!(
                "{name}'s dialog is not the one shown (fingerprint {seen}): it now asks {} (fingerprint {}); nothing was typed",
                d.asks(),
                d.fingerprint
            ),
        };
        InboxError::Changed(now.map(Box::new), why)
    };
    // The keys, for the caller to show: the master computes its own from its screen, after
    // its own check (which refuses, and journals the refusal, if the dialog is not `seen`).
    let keys = match (now.filter(|d| d.fingerprint == seen), rules.dialog.as_ref()) {
        (Some(dialog), Some(spec)) => match spec.keys(&dialog, choice) {
            Ok(keys) => keys,
            Err(desk_core::dialog::KeysError::NoSuchOption(n)) => {
                return Err(InboxError::Usage(format!("{name}'s dialog has no option {n}; nothing was typed")));
            }
            // A highlight drawn only in colour is read by the master, which has the cells.
            Err(desk_core::dialog::KeysError::HighlightUnknown(_)) => Vec::new(),
        },
        _ => Vec::new(),
    };
    let (option, deny) = match choice {
        Choice::Option(n) => (Some(*n), false),
        Choice::Deny => (None, true),
    };
    let request = ClientEvent::Answer {
        option,
        deny,
        seen: seen.to_string(),
        user: by.user.clone(),
        tty: by.tty.clone(),
        via: by.via.to_string(),
    };
    conn.send(&request.to_frame()).map_err(InboxError::Failed)?;
    conn.send(&Frame::Ping(1)).map_err(InboxError::Failed)?;
    let started = Instant::now();
    loop {
        match conn.recv().map_err(InboxError::Failed)? {
            Frame::Pong(_) => break,
            Frame::Error { code: ErrorCode::NotPermitted, message } => {
                let now = read_on(paths, &mut conn).ok().flatten();
                return Err(match &now {
                    Some(d) if d.fingerprint == seen => {
                        InboxError::Refused(format!("{name} refused the answer: {message}"))
                    }
                    _ => changed(now),
                });
            }
            Frame::Error { code: ErrorCode::Exiting, .. } => {
                return Err(InboxError::NotRunning(format!("session {name} is exiting; nothing was typed")));
            }
            Frame::Error { message, .. } => {
                return Err(InboxError::Refused(format!("{name} refused the answer: {message}")));
            }
            _ => continue,
        }
    }
    // Watch the dialog go: the keys are typed one every 100 ms.
    let deadline = started + GONE_PATIENCE + Duration::from_millis(100) * keys.len().max(1) as u32;
    loop {
        let still = read_on(paths, &mut conn).ok().flatten().is_some_and(|d| d.fingerprint == seen);
        if !still {
            return Ok(Answered { keys, gone_after: Some(started.elapsed()) });
        }
        if Instant::now() >= deadline {
            return Ok(Answered { keys, gone_after: None });
        }
        std::thread::sleep(GONE_POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_s_blocked_sessions_it_cannot_read_come_from_its_inbox_notes_named_host_colon_name() {
        let notes = vec![unread_note("web"), "desk serve is not running".to_string(), unread_note("api.v2")];
        let (cards, unread) = from_answer("gpu:", &[], &notes);
        assert!(cards.is_empty());
        assert_eq!(unread, ["gpu:web", "gpu:api.v2"]);
    }

    #[test]
    fn an_unread_note_gives_back_its_session_and_no_other_note_does() {
        assert_eq!(unread_in(&unread_note("web-1")), Some("web-1"));
        assert_eq!(unread_in("web is blocked, but its screen shows no dialog desk can read: desk peek api"), None);
        assert_eq!(unread_in("no open dialogs"), None);
    }
}
