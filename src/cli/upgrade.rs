//! `desk upgrade [NAME...] [--all] [--master PATH] [--json]`: hand running masters over to the
//! installed `desk-master` in place (docs/upgrading.md).
//!
//! Owns choosing the sessions (named ones; all running ones with `--all`; otherwise those whose
//! master runs another binary than the one this desk starts, or an older protocol: what
//! `desk ls` reports as skew), asking the new binary which handover formats it reads, asking
//! each master in turn over its socket (an `upgrade` EVENT, docs/protocol.md §5.9), and
//! reporting per session: upgraded (from which binary to which, how long the request took and
//! how long the agent's output waited), skipped (already current), or failed (why, in the
//! master's words, or that the master predates in-place upgrades). The handover itself is the
//! master's (`desk-master`'s `handover.rs`). Exits 1 when any session failed.

use anyhow::{Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::output::{self, ErrorCode};
use desk_common::keys::Sender;
use desk_common::master_client::Connection;
use desk_common::paths::{Paths, SessionName};
use desk_common::session::{self, Probe};
use desk_wire::operator::ClientEvent;
use desk_wire::{Frame, Role};

/// How long one master may take to answer: it waits up to 2 s for a quiet point, then
/// serialises, executes the new binary and restores; a few seconds more cover a loaded machine.
const ANSWER_WITHIN: Duration = Duration::from_secs(15);

pub(super) struct UpgradeArgs {
    pub names: Vec<SessionName>,
    pub all: bool,
    /// The desk-master to hand over to, instead of the one this desk starts.
    pub master: Option<PathBuf>,
    pub json: bool,
}

/// One session's outcome.
#[derive(Debug, Serialize)]
struct Outcome {
    session: String,
    /// `upgraded`, `skipped` or `failed`.
    result: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    to: Option<String>,
    /// How long the request took, from asking to the new binary's answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    took_ms: Option<u64>,
    /// How long the agent's output was not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pause_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

impl Outcome {
    fn new(session: &SessionName, result: &'static str, reason: Option<String>) -> Outcome {
        Outcome { session: session.to_string(), result, from: None, to: None, took_ms: None, pause_ms: None, reason }
    }

    fn line(&self) -> String {
        let name = &self.session;
        match self.result {
            "upgraded" => format!(
                "{name}: upgraded from {} to {} in {} ms (output paused {} ms)",
                self.from.as_deref().unwrap_or("?"),
                self.to.as_deref().unwrap_or("?"),
                self.took_ms.unwrap_or(0),
                self.pause_ms.unwrap_or(0)
            ),
            result => format!("{name}: {result}: {}", self.reason.as_deref().unwrap_or("")),
        }
    }
}

/// The binary to hand over to: `(program, arguments before the master's own)`.
fn target(master: Option<PathBuf>) -> Result<(PathBuf, Vec<String>)> {
    if let Some(path) = master {
        let path = std::path::absolute(&path).with_context(|| format!("cannot resolve {}", path.display()))?;
        return Ok((path, Vec::new()));
    }
    let exe = std::env::current_exe().context("cannot find this desk's executable")?;
    let command = crate::launch::master_command(&exe);
    let program = PathBuf::from(command.get_program());
    let args = command.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    Ok((program, args))
}

/// What the binary says of itself: its `--version` line and the handover formats it reads.
fn describe(program: &Path, args: &[String]) -> Result<(String, Vec<u32>), String> {
    let run = |flag: &str| {
        std::process::Command::new(program)
            .args(args)
            .arg(flag)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", program.display()))
    };
    let version = run("--version")?;
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    let formats = run(desk_master::FORMATS_ARG)?;
    match desk_master::parse_formats(&formats.stdout).filter(|_| formats.status.success()) {
        Some(formats) => Ok((version, formats)),
        None => Err(format!(
            "{} does not say which handover formats it reads (`{}` failed): it cannot take a master over",
            program.display(),
            desk_master::FORMATS_ARG
        )),
    }
}

fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.dev(), meta.ino()))
}

pub(super) fn upgrade(args: UpgradeArgs) -> Result<i32> {
    if args.all && !args.names.is_empty() {
        return Err(super::fail(ErrorCode::Usage, "name sessions or give --all, not both"));
    }
    let paths = Paths::from_env()?;
    let (program, prefix) = target(args.master)?;
    let described = describe(&program, &prefix);
    let installed = identity(&program);
    let running: Vec<SessionName> = paths
        .session_names_and_exits()?
        .into_iter()
        .filter(|(name, exited)| !exited && paths.session(name).socket.exists())
        .map(|(name, _)| name)
        .collect();
    let chosen: Vec<(SessionName, bool)> = if args.names.is_empty() {
        running.iter().map(|name| (name.clone(), args.all)).collect()
    } else {
        args.names.iter().map(|name| (name.clone(), true)).collect()
    };
    let sender = Sender::this_process("cli");
    let mut outcomes = Vec::new();
    for (name, forced) in chosen {
        let files = paths.session(&name);
        let meta = session::read_meta(&files).ok().flatten();
        let Some(meta) = meta.filter(|_| running.contains(&name)) else {
            let why = if files.meta.exists() || session::current_exit(&files).is_some() {
                "it is not running".to_string()
            } else {
                desk_common::suggest::unknown_session_in(&paths, name.as_str())
            };
            outcomes.push(Outcome::new(&name, "failed", Some(why)));
            continue;
        };
        let current = installed.is_some()
            && desk_common::procfs::exe_identity(meta.master_pid) == installed
            && meta.protocol.unwrap_or(1) >= desk_wire::PROTOCOL_VERSION;
        if current && !forced {
            outcomes.push(Outcome::new(&name, "skipped", Some("already current".into())));
            continue;
        }
        let outcome = match &described {
            Err(why) => Outcome::new(&name, "failed", Some(why.clone())),
            Ok((_, formats)) => ask(&files, &name, &program, &prefix, formats, &sender),
        };
        outcomes.push(outcome);
    }
    let failed = outcomes.iter().filter(|o| o.result == "failed").count();
    if args.json {
        output::print_ok(
            "upgrade",
            serde_json::json!({ "binary": program.display().to_string(), "sessions": outcomes }),
            &[],
        )?;
    } else if outcomes.is_empty() {
        println!("no session runs; nothing to upgrade");
    } else {
        for outcome in &outcomes {
            println!("{}", outcome.line());
        }
    }
    Ok(if failed > 0 { 1 } else { 0 })
}

/// Ask one master to hand over, and wait for its answer.
fn ask(
    files: &desk_common::paths::SessionPaths,
    name: &SessionName,
    program: &Path,
    prefix: &[String],
    formats: &[u32],
    by: &Sender,
) -> Outcome {
    let failed = |why: String| Outcome::new(name, "failed", Some(why));
    let stream = match session::probe_settled(files) {
        Ok(Probe::Live(stream)) => stream,
        Ok(_) => return failed("it is not running".into()),
        Err(e) => return failed(format!("{e:#}")),
    };
    let started = Instant::now();
    let mut conn = match Connection::open(stream, Role::Query, 0, 0) {
        Ok(conn) => conn,
        Err(e) => return failed(format!("{e:#}")),
    };
    conn.set_deadline(Some(ANSWER_WITHIN));
    let request = ClientEvent::Upgrade {
        binary: program.display().to_string(),
        args: prefix.to_vec(),
        formats: formats.to_vec(),
        user: by.user.clone(),
        via: "cli".into(),
    };
    if let Err(e) = conn.send(&request.to_frame()) {
        return failed(format!("{e:#}"));
    }
    loop {
        match conn.recv() {
            Ok(Frame::Event(body)) if body.get("type").is_some_and(|t| t == "upgraded") => {
                let text = |key: &str| body.get(key).and_then(|v| v.as_str()).map(str::to_string);
                return Outcome {
                    session: name.to_string(),
                    result: "upgraded",
                    from: text("from"),
                    to: text("to"),
                    took_ms: Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)),
                    pause_ms: body.get("pause_ms").and_then(|v| v.as_u64()),
                    reason: None,
                };
            }
            Ok(Frame::Error { code: desk_wire::ErrorCode::Malformed, message }) => {
                return failed(format!(
                    "this master is too old to upgrade in place (it does not know the request: {message}); restart the session to move it to the new master (its agent restarts)"
                ));
            }
            Ok(Frame::Error { message, .. }) => return failed(message),
            Ok(_) => continue,
            Err(e) => {
                return failed(format!(
                    "no answer from the master ({e:#}); `desk ls` shows whether it still runs, and its log (desk doctor) why"
                ));
            }
        }
    }
}
