//! `desk keys NAME KEY...`: type keys into a session from the command line.
//!
//! Owns the command's output and error codes; the request itself is the library's
//! ([`desk_common::keys`], shared with the dashboard). Sends as the invoking user on their terminal.

use anyhow::Result;
use serde::Serialize;

use super::output::{self, ErrorCode};
use desk_common::keys::{KeysError, Sender};
use desk_common::paths::{Paths, SessionName};

/// `desk keys NAME KEY...`, journalled as coming `via` the command line or the dashboard.
/// `ids` says how the text names the session.
pub(super) fn keys(name: &SessionName, keys: &[String], json: bool, via: super::Via, ids: &output::Ids) -> Result<i32> {
    // A bad key is a usage error before anything else is looked at.
    desk_common::keys::check(keys).map_err(to_failure)?;
    let paths = Paths::from_env()?;
    let sent = desk_common::keys::send(&paths, name, keys, &Sender::this_process(via.as_str())).map_err(to_failure)?;
    KeysReport { generation: sent.generation, keys, session: name }.render(json, ids)?;
    Ok(0)
}

/// What `desk keys` typed, and into which generation of the session. In JSON its keys come in
/// the order `desk keys --json` has always had (sorted).
#[derive(Serialize)]
struct KeysReport<'a> {
    generation: u32,
    keys: &'a [String],
    session: &'a SessionName,
}

impl KeysReport<'_> {
    /// Once as text (one line) or once as JSON.
    fn render(&self, json: bool, ids: &output::Ids) -> Result<()> {
        if json {
            return output::print_ok("keys", self, &[]);
        }
        println!("typed {} into {}", self.keys.join(" "), ids.session(self.session.as_str()));
        Ok(())
    }
}

fn to_failure(e: KeysError) -> anyhow::Error {
    match e {
        KeysError::Usage(m) => super::fail(ErrorCode::Usage, m),
        KeysError::NoSuchSession(m) => super::fail(ErrorCode::NoSuchSession, m),
        KeysError::NotRunning(m) => super::fail(ErrorCode::NotRunning, m),
        KeysError::Refused(m) => super::fail(ErrorCode::Refused, m),
        KeysError::Failed(e) => e,
    }
}
