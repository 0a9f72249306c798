//! `desk inbox`, `desk approve NAME [OPTION]`, `desk deny NAME`: every open dialog in the fleet,
//! and answering one without attaching — only the one the operator saw.
//!
//! Owns the commands' output and error codes; reading and answering dialogs is the library's
//! ([`crate::inbox`], shared with the dashboard). What the operator saw is the dialog's
//! fingerprint: `--seen` passes the one `desk inbox` printed, or, on a terminal without it, the
//! command prints the dialog as it is now and asks before answering that one. Either way the
//! master types nothing unless its screen still shows a dialog with that fingerprint.

use anyhow::Result;
use std::io::{BufRead, IsTerminal, Write};

use super::output::{self, ErrorCode};
use crate::inbox::{InboxError, Open};
use desk_common::keys::Sender;
use desk_common::paths::{Paths, SessionName};
use desk_core::dialog::{Choice, Dialog};

pub(super) fn inbox(json: bool) -> Result<i32> {
    let paths = Paths::from_env()?;
    let (open, unread) = crate::inbox::list(&paths);
    InboxReport { open, unread, now: desk_common::clock::now_ms() }.render(json)?;
    Ok(0)
}

/// `desk inbox --all`'s answer: the dialogs (`open`, a host's sessions written `HOST:NAME`, for
/// the text; `rows`, as each place answered with its `host`, for JSON), the unreadable
/// sessions, and the hosts that could not be asked (`lost`: on stderr, and in the JSON notes).
pub(super) fn print_all(
    open: Vec<Open>,
    unread: Vec<String>,
    rows: Vec<serde_json::Value>,
    lost: Vec<String>,
    json: bool,
) -> Result<()> {
    if json {
        let mut notes: Vec<String> = unread.iter().map(|s| crate::inbox::unread_note(s)).collect();
        notes.extend(lost);
        return output::print_ok("inbox", rows, &notes);
    }
    InboxReport { open, unread, now: desk_common::clock::now_ms() }.render(false)?;
    for why in &lost {
        eprintln!("desk: {why}");
    }
    Ok(())
}

/// `desk inbox`: every open dialog, and the blocked sessions whose dialog desk cannot read.
struct InboxReport {
    open: Vec<Open>,
    /// Blocked, with no dialog desk can read on the screen.
    unread: Vec<String>,
    /// When it was read, for the dialogs' ages.
    now: u64,
}

impl InboxReport {
    /// Once as text (each dialog and the commands that answer it, then notes) or once as JSON
    /// (the dialogs; the unreadable ones as notes).
    fn render(&self, json: bool) -> Result<()> {
        let notes: Vec<String> = self.unread.iter().map(|s| crate::inbox::unread_note(s)).collect();
        if json {
            let data: Vec<serde_json::Value> = self.open.iter().map(|o| open_json(o, self.now)).collect();
            return output::print_ok("inbox", data, &notes);
        }
        let mut text = String::new();
        if self.open.is_empty() {
            text.push_str("no open dialogs\n");
        }
        for o in &self.open {
            text.push_str(&describe(o, self.now));
            text.push('\n');
        }
        for note in &notes {
            text.push_str(&format!("note: {note}\n"));
        }
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes()).and_then(|()| out.flush())?;
        Ok(())
    }
}

/// One dialog, as `desk inbox` prints it: a head line, its question, its options, and the two
/// commands that answer it.
fn describe(o: &Open, now: u64) -> String {
    let d = &o.dialog;
    let age = if o.since_ms == 0 {
        String::new()
    } else {
        format!(" · {}", desk_core::time::span(now.saturating_sub(o.since_ms)))
    };
    let mut s = format!("{} · {} · {}{age} · {}\n", o.session, o.provider, d.kind.as_str(), d.asks());
    if d.question != d.asks() {
        s.push_str(&format!("  {}\n", d.question));
    }
    let options: Vec<String> = d
        .options
        .iter()
        .map(|opt| format!("{}{} {}", if opt.highlighted == Some(true) { "❯ " } else { "" }, opt.number, opt.label))
        .collect();
    s.push_str(&format!("  {}\n", options.join(" · ")));
    s.push_str(&format!(
        "  desk approve {} [OPTION] --seen {}   ·   desk deny {} --seen {}\n",
        o.session, d.fingerprint, o.session, d.fingerprint
    ));
    s
}

fn open_json(o: &Open, now: u64) -> serde_json::Value {
    let d = &o.dialog;
    serde_json::json!({
        "session": o.session,
        "provider": o.provider,
        "kind": d.kind.as_str(),
        "asks": d.asks(),
        "tool": d.tool,
        "args": d.args,
        "title": d.title,
        "question": d.question,
        "options": d.options,
        "layout": d.layout,
        "text": d.text,
        "fingerprint": d.fingerprint,
        "since_ms": o.since_ms,
        "age_ms": if o.since_ms == 0 { None } else { Some(now.saturating_sub(o.since_ms)) },
    })
}

/// `desk approve NAME [OPTION]` (`deny`: `desk deny NAME`), journalled as coming `via` the
/// command line or the dashboard.
pub(super) fn answer(
    name: &SessionName,
    option: Option<&str>,
    deny: bool,
    seen: Option<&str>,
    json: bool,
    via: super::Via,
) -> Result<i32> {
    let paths = Paths::from_env()?;
    let by = Sender::this_process(via.as_str());
    // The dialog as it is now: to name an option by its label, and to show it when no
    // fingerprint was given.
    let now = crate::inbox::read(&paths, name).map_err(to_failure)?;
    // Without --seen, the operator is shown the dialog here and confirms before anything is typed.
    let confirm = seen.is_none();
    let (seen, shown): (String, Option<Dialog>) = match seen {
        Some(seen) => {
            let seen = seen.to_ascii_lowercase();
            let shown = now.as_ref().filter(|o| o.dialog.fingerprint == seen).map(|o| o.dialog.clone());
            (seen, shown)
        }
        None => {
            let Some(open) = &now else {
                return Err(super::fail(ErrorCode::NoDialog, format!("{name} shows no dialog now; nothing to answer")));
            };
            if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
                return Err(super::fail(
                    ErrorCode::Usage,
                    format!(
                        "answer only a dialog you saw: pass --seen {} (its fingerprint, which desk inbox prints), or run this on a terminal to be shown it first",
                        open.dialog.fingerprint
                    ),
                ));
            }
            (open.dialog.fingerprint.clone(), Some(open.dialog.clone()))
        }
    };
    let dialog_for_options = shown.as_ref().or(now.as_ref().map(|o| &o.dialog));
    let choice = if deny {
        Choice::Deny
    } else {
        match (option, dialog_for_options) {
            (Some(named), Some(d)) => {
                Choice::Option(d.find_option(named).map_err(|e| super::fail(ErrorCode::Usage, e))?.number)
            }
            (Some(named), None) => match named.parse::<u8>() {
                Ok(n) => Choice::Option(n),
                Err(_) => {
                    return Err(super::fail(
                        ErrorCode::Usage,
                        format!(
                            "name the option by its number: {named:?} cannot be looked up on a dialog that is gone"
                        ),
                    ));
                }
            },
            (None, Some(d)) if d.kind == desk_core::dialog::Kind::Question => {
                return Err(super::fail(
                    ErrorCode::Usage,
                    format!("{name} asks a question: name the answer (desk approve {name} N)"),
                ));
            }
            (None, _) => Choice::Option(approve_option(&paths, name)),
        }
    };
    let said = match (&choice, dialog_for_options) {
        (Choice::Deny, _) => "deny".to_string(),
        (Choice::Option(n), Some(d)) => {
            d.options.iter().find(|o| o.number == *n).map_or(n.to_string(), |o| format!("{n}. {}", o.label))
        }
        (Choice::Option(n), None) => n.to_string(),
    };
    if confirm {
        if let Some(d) = &shown {
            eprint!("{}", show(name, d));
        }
        eprint!("{} {name}'s dialog with {said}? [y/N] ", if deny { "deny" } else { "answer" });
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        if !matches!(line.trim(), "y" | "Y" | "yes") {
            eprintln!("nothing was typed");
            return Ok(1);
        }
    }
    let answered = crate::inbox::answer(&paths, name, &choice, &seen, shown.as_ref(), &by).map_err(to_failure)?;
    let gone_ms = answered.gone_after.map(|d| d.as_millis() as u64);
    if json {
        output::print_ok(
            if deny { "deny" } else { "approve" },
            serde_json::json!({
                "session": name.as_str(),
                "choice": said,
                "keys": answered.keys,
                "fingerprint": seen,
                "gone_after_ms": gone_ms,
            }),
            &[],
        )?;
    } else {
        match gone_ms {
            Some(ms) => println!("answered {name}: {said} (the dialog went {:.2} s later)", ms as f64 / 1000.0),
            None => println!("answered {name}: {said}; the dialog is still on its screen (desk peek {name})"),
        }
    }
    Ok(if gone_ms.is_some() { 0 } else { 1 })
}

/// The option an approval picks when none is named: the provider's (its first, "Yes").
fn approve_option(paths: &Paths, name: &SessionName) -> u8 {
    let provider = desk_common::session::read_meta(&paths.session(name))
        .ok()
        .flatten()
        .map_or(desk_core::provider::Provider::Shell, |m| desk_core::provider::Provider::or_shell(&m.provider));
    desk_common::rules::load(provider, &paths.config)
        .ok()
        .and_then(|r| r.dialog.map(|d| d.approve_option()))
        .unwrap_or(1)
}

/// The dialog, as the confirmation shows it.
fn show(name: &SessionName, d: &Dialog) -> String {
    let mut s = format!("{name} asks {}:\n", d.asks());
    for row in &d.text {
        s.push_str(&format!("  │ {row}\n"));
    }
    s
}

fn to_failure(e: InboxError) -> anyhow::Error {
    match e {
        InboxError::NoSuchSession(m) => super::fail(ErrorCode::NoSuchSession, m),
        InboxError::NotRunning(m) => super::fail(ErrorCode::NotRunning, m),
        InboxError::NoDialog(m) => super::fail(ErrorCode::NoDialog, m),
        InboxError::Changed(_, m) => super::fail(ErrorCode::DialogChanged, m),
        InboxError::Refused(m) => super::fail(ErrorCode::Refused, m),
        InboxError::Usage(m) => super::fail(ErrorCode::Usage, m),
        InboxError::Failed(e) => e,
    }
}
