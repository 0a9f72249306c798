//! Typing an operator's keys into a session: the one path `desk keys` and the dashboard's
//! answer panel share.
//!
//! Owns the request (connect to the session's master as a query client, send a `keys` EVENT
//! naming who sends it, then a PING) and reading its outcome: the PONG proves the master queued
//! the keys (frames are answered in order), an ERROR before it says why it did not. The master
//! turns the names into bytes in the cursor-key mode the program has at that moment and
//! journals a `keys` event (`desk_master`'s `operator` module). Invariants: keys are checked here first
//! (`desk_term::keys`), so a bad key is a usage error that reaches no session; an exited session
//! is refused with [`KeysError::NotRunning`], never typed into; every wait is bounded by the
//! wire client's deadline. Delivery never calls this: typing keys is an operator's act.

use std::fmt;

use crate::master_client::Connection;
use crate::paths::{Paths, SessionName};
use crate::session::{self, Probe};
use desk_wire::operator::{ClientEvent, MAX_KEYS, MAX_KEYS_BYTES};
use desk_wire::{Frame, Role};

/// Who sends the keys, as the session's journal records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sender {
    pub user: String,
    pub tty: Option<String>,
    /// `cli` or `dash`.
    pub via: &'static str,
}

impl Sender {
    /// This process's user and its terminal (stdin's), sending via `via`.
    pub fn this_process(via: &'static str) -> Sender {
        let user = std::env::var("USER")
            .ok()
            .filter(|u| !u.is_empty())
            .or_else(|| nix::unistd::User::from_uid(nix::unistd::getuid()).ok().flatten().map(|u| u.name))
            .unwrap_or_else(|| format!("uid {}", nix::unistd::getuid()));
        let tty = nix::unistd::ttyname(std::io::stdin()).ok().map(|p| p.display().to_string());
        Sender { user, tty, via }
    }
}

/// Why keys were not typed; the CLI maps each to its error code.
#[derive(Debug)]
pub enum KeysError {
    /// A key that is no key, or too many (nothing reached the session).
    Usage(String),
    NoSuchSession(String),
    /// The session has exited (or is exiting).
    NotRunning(String),
    /// The master refused the keys (its input queue is full, a key it could not read).
    Refused(String),
    /// The session could not be reached.
    Failed(anyhow::Error),
}

impl fmt::Display for KeysError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeysError::Usage(m) | KeysError::NoSuchSession(m) | KeysError::NotRunning(m) | KeysError::Refused(m) => {
                f.write_str(m)
            }
            KeysError::Failed(e) => write!(f, "{e:#}"),
        }
    }
}

impl std::error::Error for KeysError {}

/// Check `keys` without sending them: each must parse, and together they stay in bounds.
pub fn check(keys: &[String]) -> Result<(), KeysError> {
    if keys.is_empty() {
        return Err(KeysError::Usage("name at least one key".into()));
    }
    if keys.len() > MAX_KEYS {
        return Err(KeysError::Usage(format!(
            "{} keys at once; at most {MAX_KEYS} (send prompts with desk send)",
            keys.len()
        )));
    }
    let parsed = desk_term::keys::parse_all(keys)
        .map_err(|(at, e)| KeysError::Usage(format!("key {at} ({:?}): {e}", keys[at - 1])))?;
    // `Entr` is typed as four letters, but meant Enter: a word one slip away from a key name is
    // refused rather than typed into an agent's dialog.
    for (at, (arg, key)) in keys.iter().zip(&parsed).enumerate() {
        if let desk_term::keys::Key::Text(word) = key
            && !arg.starts_with(desk_term::keys::TEXT_PREFIX)
            && let Some(name) = near_key_name(word)
        {
            return Err(KeysError::Usage(format!(
                "key {} ({arg:?}) is no key name: did you mean {name}? (text:{arg} types it)",
                at + 1
            )));
        }
    }
    // Both cursor-key modes spell every key in the same number of bytes, so this bound holds
    // in whichever mode the program is.
    let bytes = desk_term::keys::encode(&parsed, false).len();
    if bytes > MAX_KEYS_BYTES {
        return Err(KeysError::Usage(format!(
            "{bytes} bytes of keys; at most {MAX_KEYS_BYTES} (send prompts with desk send)"
        )));
    }
    Ok(())
}

/// The key name `word` is one edit (a letter missing, extra, wrong or two swapped) away from,
/// for a word of three letters or more: `Entr`, `Ecs`, `Tba`, `F13`. Shorter words (`y`, `1`,
/// `ok`) are one edit from too many names (`Up`, `F1`) to be taken for slips.
fn near_key_name(word: &str) -> Option<String> {
    const SHORTEST: usize = 3;
    if word.chars().count() < SHORTEST || word.contains(char::is_whitespace) {
        return None;
    }
    let lower = word.to_lowercase();
    desk_term::keys::names()
        .filter(|name| name.len() >= SHORTEST)
        .find(|name| strsim::damerau_levenshtein(&lower, &name.to_lowercase()) == 1)
        .map(|name| name.into_owned())
}

/// What was typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The session generation that took the keys.
    pub generation: u32,
}

/// Type `keys` into the session `name`, as `by`.
pub fn send(paths: &Paths, name: &SessionName, keys: &[String], by: &Sender) -> Result<Sent, KeysError> {
    check(keys)?;
    let files = paths.session(name);
    let not_running = |exit: Option<session::ExitRecord>| match exit {
        Some(exit) => KeysError::NotRunning(format!(
            "session {name} {}; keys are not sent",
            crate::signals::describe_exit(exit.status)
        )),
        None => KeysError::NotRunning(format!("session {name} is not running; keys are not sent")),
    };
    let stream = match session::probe_settled(&files).map_err(KeysError::Failed)? {
        Probe::Live(stream) => stream,
        Probe::Absent | Probe::Stale => {
            return Err(match session::current_exit(&files) {
                Some(exit) => not_running(Some(exit)),
                None if files.meta.exists() => not_running(None),
                None => KeysError::NoSuchSession(crate::suggest::unknown_session_in(paths, name.as_str())),
            });
        }
    };
    // A failure mid-request of a session that has just exited says so.
    let ended = |e: anyhow::Error| match session::current_exit(&files) {
        Some(exit) => not_running(Some(exit)),
        None => KeysError::Failed(e),
    };
    let mut conn = Connection::open(stream, Role::Query, 0, 0).map_err(ended)?;
    let request =
        ClientEvent::Keys { keys: keys.to_vec(), user: by.user.clone(), tty: by.tty.clone(), via: by.via.to_string() };
    conn.send(&request.to_frame()).map_err(ended)?;
    conn.send(&Frame::Ping(1)).map_err(ended)?;
    loop {
        match conn.recv().map_err(ended)? {
            Frame::Pong(_) => return Ok(Sent { generation: conn.info.generation }),
            Frame::Error { code: desk_wire::ErrorCode::Exiting, .. } => return Err(not_running(None)),
            Frame::Error { message, .. } => {
                return Err(KeysError::Refused(format!("session {name} refused the keys: {message}")));
            }
            _ => continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(keys: &[&str]) -> String {
        let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        match check(&keys) {
            Err(KeysError::Usage(m)) => m,
            other => panic!("{keys:?}: {other:?}"),
        }
    }

    #[test]
    fn a_word_one_slip_from_a_key_name_is_refused_with_the_name_and_the_way_to_type_it() {
        assert_eq!(usage(&["Entr"]), "key 1 (\"Entr\") is no key name: did you mean Enter? (text:Entr types it)");
        assert!(usage(&["1", "Ecs"]).contains("did you mean Esc?"), "{}", usage(&["1", "Ecs"]));
        assert!(usage(&["F13"]).contains("did you mean F1"), "{}", usage(&["F13"]));
        assert!(usage(&["Escpae"]).contains("did you mean Escape?"));
    }

    #[test]
    fn words_far_from_any_key_name_and_forced_text_are_typed() {
        let ok = |keys: &[&str]| check(&keys.iter().map(|k| k.to_string()).collect::<Vec<_>>()).is_ok();
        assert!(ok(&["text:Entr", "Enter"]));
        assert!(ok(&["yes", "Enter"]));
        assert!(ok(&["y", "n", "1", "ok", "fix the tests", "Down"]));
    }
}
