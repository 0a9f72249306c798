//! `desk keys NAME KEY...`: type keys into a session from the command line.
//!
//! Owns the command's output and error codes; the request itself is the library's
//! ([`desk_common::keys`], shared with the dashboard). Sends as the invoking user on their terminal.

use anyhow::Result;

use super::output::{self, ErrorCode};
use desk_common::keys::{KeysError, Sender};
use desk_common::paths::{Paths, SessionName};

pub(super) fn keys(name: &SessionName, keys: &[String], json: bool) -> Result<i32> {
    // A bad key is a usage error before anything else is looked at.
    desk_common::keys::check(keys).map_err(to_failure)?;
    let paths = Paths::from_env()?;
    let sent = desk_common::keys::send(&paths, name, keys, &Sender::this_process("cli")).map_err(to_failure)?;
    if json {
        output::print_ok(
            "keys",
            serde_json::json!({ "session": name.as_str(), "keys": keys, "generation": sent.generation }),
            &[],
        )?;
    } else {
        println!("typed {} into {name}", keys.join(" "));
    }
    Ok(0)
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
