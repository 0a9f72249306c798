//! The session commands: `new`, `ls`, `peek`, `log`, `resize`, `kill`, `rm`, one file each.
//!
//! Owns what each command does with session files and masters, and how it reports the result.
//! Invariants: `new` returns only once the master listens (or with the master's own error);
//! `ls` never reports a session as running unless its master answered; `kill` reports what
//! happened (exit status, SIGKILL escalation, processes that survived) rather than assuming.

use anyhow::{Context, Result};
use serde::Serialize;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::output::{self, ErrorCode};
use super::probe::Answer;
use super::{fail, failure};
use desk_common::history::HistoryRead;
use desk_common::master_client::Connection;
use desk_common::paths::{Paths, SessionName};
use desk_common::session::{self, ExitRecord, NameLock, Probe, SessionMeta};
use desk_core::time::iso8601;
use desk_wire::{ExitStatus, Frame, Role, SessionInfo};

mod kill;
mod log;
mod ls;
mod new;
mod peek;
mod resize;
mod rm;

pub(super) use kill::kill;
pub(crate) use kill::stop;
pub(super) use log::log;
pub(crate) use ls::{Need, most_needing_person, needs_person, typed_command};
pub(super) use ls::{json_listing, ls, older_masters};
pub(super) use new::{NewSession, new};
pub(super) use peek::peek;
pub(super) use resize::resize;
pub(super) use rm::rm;

fn paths() -> Result<Paths> {
    let paths = Paths::from_env()?;
    paths.ensure_runtime()?;
    Ok(paths)
}

fn connect(paths: &Paths, name: &SessionName) -> Result<Connection> {
    let files = paths.session(name);
    match session::probe(&files)? {
        Probe::Live(stream) => Connection::open(stream, Role::Query, 0, 0).map_err(|e| ended(paths, name, e)),
        Probe::Absent | Probe::Stale => match session::read_exit(&files)? {
            Some(exit) => Err(fail(
                ErrorCode::NotRunning,
                format!("session {name} {}", desk_common::signals::describe_exit(exit.status)),
            )),
            None if files.meta.exists() => Err(fail(ErrorCode::NotRunning, format!("session {name} is not running"))),
            None => Err(fail(ErrorCode::NoSuchSession, desk_common::suggest::unknown_session_in(paths, name.as_str()))),
        },
    }
}

/// What a master answered a request for its screen with.
enum ScreenNow {
    /// The screen now.
    Live(Box<desk_wire::SnapshotReply>),
    /// The session ended between the probe and the answer: its exit record, which the master
    /// writes before it closes its connections, holds the screen it ended on.
    Ended(ExitRecord),
}

/// The screen of the session whose master answered `stream`'s connect, or its exit record if
/// it ended meanwhile: a command racing an exit shows what one run a moment later would show,
/// not a broken connection.
fn screen_now(paths: &Paths, name: &SessionName, stream: std::os::unix::net::UnixStream) -> Result<ScreenNow> {
    let ask = || -> Result<Box<desk_wire::SnapshotReply>> {
        let mut conn = Connection::open(stream, Role::Query, 0, 0)?;
        conn.send(&Frame::SnapshotRequest { history: None })?;
        loop {
            match conn.recv()? {
                Frame::Snapshot(s) => return Ok(s),
                Frame::Error { message, .. } => return Err(failure(1, message)),
                _ => continue,
            }
        }
    };
    match ask() {
        Ok(snapshot) => Ok(ScreenNow::Live(snapshot)),
        Err(e) => session::current_exit(&paths.session(name)).map(ScreenNow::Ended).ok_or(e),
    }
}

/// A request to a master that failed: if the session has just exited (its master closes the
/// connections it has while it goes), say that rather than the broken connection.
fn ended(paths: &Paths, name: &SessionName, e: anyhow::Error) -> anyhow::Error {
    match session::read_exit(&paths.session(name)) {
        Ok(Some(exit)) => {
            fail(ErrorCode::NotRunning, format!("session {name} {}", desk_common::signals::describe_exit(exit.status)))
        }
        _ => e,
    }
}
