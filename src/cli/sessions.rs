//! The session commands: `new`, `ls`, `peek`, `kill`, `rm`.
//!
//! Owns what each command does with session files and masters, and how it reports the result.
//! Invariants: `new` returns only once the master listens (or with the master's own error);
//! `ls` never reports a session as running unless its master answered; `kill` reports what
//! happened (exit status, SIGKILL escalation, processes that survived) rather than assuming.

use anyhow::{Context, Result};
use serde::Serialize;
use std::ffi::OsString;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::failure;
use crate::paths::{Paths, SessionName};
use crate::session::{self, Connection, ExitRecord, NameLock, Probe, SessionMeta, iso8601};
use crate::wire::{ExitStatus, Frame, Role, SessionInfo};

/// How long `desk new` waits for its master to report. Starting is milliseconds; this bounds a
/// master stuck on something unexpected (a hung filesystem) so the caller does not hang too.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Extra time `desk kill` waits for the exit report beyond the grace period (the master needs a
/// moment to reap, record and report after SIGKILL).
const KILL_REPORT_SLACK: Duration = Duration::from_secs(5);

/// How often `desk kill` looks whether the helpers it reports are gone: a tenth of the smallest
/// useful grace period, and cheap (one `kill(pid, 0)` per helper).
const HELPER_POLL: Duration = Duration::from_millis(20);

fn paths() -> Result<Paths> {
    let paths = Paths::from_env()?;
    paths.ensure_runtime()?;
    Ok(paths)
}

/// What `desk new` was asked to start.
pub struct NewSession {
    pub name: SessionName,
    pub cwd: Option<PathBuf>,
    pub size: (u16, u16),
    pub env: Vec<(OsString, OsString)>,
    pub provider: Option<String>,
    pub command: Vec<OsString>,
}

pub fn new(req: NewSession) -> Result<i32> {
    let NewSession { name, cwd, size: (cols, rows), env, provider, command } = req;
    let (provider, command) = crate::providers::resolve(provider.as_deref(), command).map_err(|e| failure(2, e))?;
    let paths = paths()?;
    let files = paths.session(&name);
    files.check_socket_len()?;
    let cwd = match cwd {
        Some(dir) => std::fs::canonicalize(&dir)
            .with_context(|| format!("working directory {} does not exist", dir.display()))?,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    if !cwd.is_dir() {
        return Err(failure(1, format!("{} is not a directory", cwd.display())));
    }
    let lock = NameLock::acquire(&paths, &name)?;
    match session::probe(&files)? {
        Probe::Live(stream) => {
            let pid = Connection::open(stream, Role::Query, 0, 0).map(|c| c.info.pid).ok();
            let pid = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
            return Err(failure(
                2,
                format!("session {name} already exists and is running{pid}; attach with: desk attach {name}"),
            ));
        }
        Probe::Stale => {
            session::clean_stale(&paths, &name, &lock)?;
        }
        Probe::Absent => {}
    }

    let generation = session::allocate_generation(&paths, &name, &lock)?;
    let exe = std::env::current_exe().context("cannot find the desk executable")?;
    let command = crate::providers::wire_hooks(&provider, command, &paths.session_state(&name), &exe)?;
    let (read_end, write_end) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("cannot create a pipe")?;
    let mut cmd = master_command(&exe);
    cmd.arg("--name")
        .arg(name.as_str())
        .arg("--size")
        .arg(format!("{cols}x{rows}"))
        .arg("--cwd")
        .arg(&cwd)
        .arg("--generation")
        .arg(generation.to_string())
        .arg("--provider")
        .arg(&provider)
        .arg("--ready-fd")
        .arg("3");
    for (key, value) in &env {
        let mut pair = key.clone();
        pair.push("=");
        pair.push(value);
        cmd.arg("--env").arg(pair);
    }
    cmd.arg("--").args(&command).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    let pipe_fd = write_end.as_raw_fd();
    // SAFETY: between fork and exec only async-signal-safe calls: setsid, dup2, fcntl.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            if pipe_fd == 3 {
                if libc::fcntl(3, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(pipe_fd, 3) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // Whatever else our caller leaked to us must not reach the master.
            crate::pty::cloexec_from(4);
            Ok(())
        });
    }
    let mut child = cmd.spawn().context("cannot start the session master")?;
    drop(write_end);
    let report = read_report(read_end, START_TIMEOUT);
    drop(lock);
    match report {
        Ok(line) if line.trim() == "ok" => Ok(0),
        Ok(line) if !line.trim().is_empty() => {
            let _ = child.wait();
            Err(failure(1, format!("cannot start session {name}: {}", line.trim())))
        }
        Ok(_) => {
            let status = child.wait().ok();
            Err(failure(
                1,
                format!("the master of {name} died while starting ({status:?}); see {}", files.log.display()),
            ))
        }
        Err(e) => {
            let _ = child.kill();
            Err(e)
        }
    }
}

fn read_report(fd: OwnedFd, timeout: Duration) -> Result<String> {
    let mut fds = [nix::poll::PollFd::new(std::os::fd::AsFd::as_fd(&fd), nix::poll::PollFlags::POLLIN)];
    let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
    let ready = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms)).context("cannot wait for the master")?;
    if ready == 0 {
        return Err(failure(1, format!("the master did not report within {} s", timeout.as_secs())));
    }
    let mut text = String::new();
    std::fs::File::from(fd).read_to_string(&mut text).context("cannot read the master's report")?;
    Ok(text)
}

/// One row of `desk ls`.
#[derive(Debug, Serialize)]
struct Listing {
    name: String,
    status: &'static str,
    pid: Option<u32>,
    master_pid: Option<u32>,
    command: Vec<String>,
    cwd: Option<String>,
    cols: Option<u16>,
    rows: Option<u16>,
    clients: Option<Clients>,
    title: Option<String>,
    generation: Option<u32>,
    provider: Option<String>,
    /// The agent state (running sessions only).
    state: Option<crate::state::StateView>,
    started_at_ms: Option<u64>,
    started_at: Option<String>,
    exit: Option<ExitJson>,
    /// Why the status is not simply running or exited.
    note: Option<String>,
}

#[derive(Debug, Serialize)]
struct Clients {
    controllers: u32,
    viewers: u32,
    observers: u32,
}

#[derive(Debug, Serialize)]
struct ExitJson {
    code: Option<i32>,
    signal: Option<i32>,
    escalated: bool,
    exited_at_ms: u64,
    exited_at: String,
}

impl ExitJson {
    fn from(record: &ExitRecord) -> ExitJson {
        let (code, signal) = match record.status {
            ExitStatus::Code(c) => (Some(c), None),
            ExitStatus::Signal(s) => (None, Some(s)),
        };
        ExitJson {
            code,
            signal,
            escalated: record.escalated,
            exited_at_ms: record.exited_at_ms,
            exited_at: iso8601(record.exited_at_ms),
        }
    }
}

fn listing(paths: &Paths, name: &SessionName) -> Result<Option<Listing>> {
    let files = paths.session(name);
    let meta: Option<SessionMeta> = session::read_meta(&files).unwrap_or(None);
    let exit = session::read_exit(&files).unwrap_or(None);
    let mut row = Listing {
        name: name.to_string(),
        status: "running",
        pid: meta.as_ref().map(|m| m.pid),
        master_pid: meta.as_ref().map(|m| m.master_pid),
        command: meta.as_ref().map(|m| m.command.clone()).unwrap_or_default(),
        cwd: meta.as_ref().map(|m| m.cwd.clone()),
        cols: meta.as_ref().map(|m| m.cols),
        rows: meta.as_ref().map(|m| m.rows),
        clients: None,
        title: None,
        generation: meta.as_ref().map(|m| m.generation),
        provider: meta.as_ref().map(|m| m.provider.clone()),
        state: None,
        started_at_ms: meta.as_ref().map(|m| m.started_at_ms),
        started_at: meta.as_ref().map(|m| iso8601(m.started_at_ms)),
        exit: None,
        note: None,
    };
    if let Some(exit) = &exit {
        row.status = "exited";
        row.exit = Some(ExitJson::from(exit));
        row.cols = exit.cols.or(row.cols);
        row.rows = exit.rows.or(row.rows);
        row.title = exit.title.clone();
        return Ok(Some(row));
    }
    match session::probe(&files)? {
        Probe::Live(stream) => match Connection::open(stream, Role::Query, 0, 0) {
            Ok(conn) => apply_info(&mut row, conn.info),
            Err(e) => {
                row.status = "unresponsive";
                row.note = Some(format!("{e:#}"));
            }
        },
        Probe::Stale => {
            if let Some(lock) = NameLock::try_acquire(paths, name)? {
                session::clean_stale(paths, name, &lock)?;
            }
            row.status = "lost";
            row.note = Some("its master died without recording an exit; the socket was stale".into());
        }
        Probe::Absent => {
            if meta.is_none() {
                return Ok(None);
            }
            row.status = "lost";
            row.note = Some("its master is gone and recorded no exit".into());
        }
    }
    Ok(Some(row))
}

fn apply_info(row: &mut Listing, info: SessionInfo) {
    row.pid = Some(info.pid);
    row.master_pid = Some(info.master_pid);
    row.command = info.command;
    row.cwd = Some(info.cwd);
    row.cols = Some(info.cols);
    row.rows = Some(info.rows);
    row.clients = Some(Clients { controllers: info.controllers, viewers: info.viewers, observers: info.observers });
    row.title = Some(info.title);
    row.generation = Some(info.generation);
    row.provider = Some(info.provider);
    row.state = info.state;
    row.started_at_ms = Some(info.started_at_ms);
    row.started_at = Some(iso8601(info.started_at_ms));
}

pub fn ls(json: bool) -> Result<i32> {
    let paths = paths()?;
    let mut rows = Vec::new();
    for name in paths.session_names()? {
        if let Some(row) = listing(&paths, &name)? {
            rows.push(row);
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(0);
    }
    if rows.is_empty() {
        println!("no sessions");
        return Ok(0);
    }
    let now = session::now_ms();
    let mut table =
        vec![["NAME", "STATUS", "ACTIVITY", "PID", "SIZE", "CLIENTS", "STARTED", "TITLE", "COMMAND"].map(String::from)];
    for r in &rows {
        let status = match &r.exit {
            Some(e) => match (e.code, e.signal) {
                (Some(code), _) => format!("exited({code})"),
                (_, Some(signal)) => format!("killed({})", crate::signals::name(signal)),
                _ => "exited".into(),
            },
            None => r.status.to_string(),
        };
        let clients = r
            .clients
            .as_ref()
            .map(|c| {
                let mut s = format!("{}", c.controllers + c.viewers);
                if c.viewers > 0 {
                    s.push_str(&format!(" ({} ro)", c.viewers));
                }
                s
            })
            .unwrap_or_else(|| "-".into());
        let activity = match &r.state {
            Some(s) if s.lifecycle.value == crate::state::Lifecycle::Starting => "starting".to_string(),
            Some(s) => {
                let mut a = s.activity.value.as_str().to_string();
                if let Some(wait) = &s.wait {
                    a.push_str(&format!("({wait})"));
                }
                format!("{a} {}", age(now.saturating_sub(s.activity.since_ms)).trim_end_matches(" ago"))
            }
            None => "-".into(),
        };
        table.push([
            r.name.clone(),
            status,
            activity,
            r.pid.map_or("-".into(), |p| p.to_string()),
            match (r.cols, r.rows) {
                (Some(c), Some(rw)) => format!("{c}x{rw}"),
                _ => "-".into(),
            },
            clients,
            r.started_at_ms.map_or("-".into(), |t| age(now.saturating_sub(t))),
            r.title.clone().filter(|t| !t.is_empty()).unwrap_or_else(|| "-".into()),
            r.command.join(" "),
        ]);
    }
    let widths: Vec<usize> =
        (0..9).map(|i| table.iter().map(|row| row[i].chars().count()).max().unwrap_or(0)).collect();
    for row in &table {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i == 8 {
                line.push_str(cell);
            } else {
                let cell: String = cell.chars().take(40).collect();
                line.push_str(&format!("{cell:<w$}  ", w = widths[i].min(40)));
            }
        }
        println!("{}", line.trim_end());
    }
    Ok(0)
}

fn connect(paths: &Paths, name: &SessionName) -> Result<Connection> {
    let files = paths.session(name);
    match session::probe(&files)? {
        Probe::Live(stream) => Connection::open(stream, Role::Query, 0, 0),
        Probe::Absent | Probe::Stale => match session::read_exit(&files)? {
            Some(exit) => Err(failure(1, format!("session {name} has {}", exit.status))),
            None => Err(failure(1, format!("no running session named {name}"))),
        },
    }
}

pub fn peek(name: &SessionName, json: bool) -> Result<i32> {
    let paths = paths()?;
    let mut conn = connect(&paths, name)?;
    conn.send(&Frame::SnapshotRequest)?;
    let snapshot = loop {
        match conn.recv()? {
            Frame::Snapshot(s) => break *s,
            Frame::Error { message, .. } => return Err(failure(1, message)),
            _ => continue,
        }
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&snapshot)?);
    } else {
        let mut lines = snapshot.screen.lines;
        while lines.last().is_some_and(|l| l.trim().is_empty()) {
            lines.pop();
        }
        for line in lines {
            println!("{line}");
        }
    }
    Ok(0)
}

pub fn kill(name: &SessionName, signal: i32, grace: f64) -> Result<i32> {
    if !(0.0..=3600.0).contains(&grace) {
        return Err(failure(2, "--grace must be between 0 and 3600 seconds"));
    }
    let grace = Duration::from_secs_f64(grace);
    let paths = paths()?;
    let mut conn = connect(&paths, name)?;
    let pid = conn.info.pid;
    let master_pid = conn.info.master_pid;
    let sig = crate::signals::name(signal);
    // The helpers outside the child's process group, named before they get the signal (most
    // end on it at once); the group itself is the session proper and is reported as its exit.
    let mut helpers = crate::procfs::descendants(master_pid);
    for member in crate::procfs::session_members(pid) {
        if !helpers.iter().any(|p| p.pid == member.pid) {
            helpers.push(member);
        }
    }
    // SAFETY: getpgid takes an integer and touches no memory of ours.
    helpers.retain(|p| p.pid != pid && unsafe { libc::getpgid(p.pid as libc::pid_t) } != pid as libc::pid_t);
    let signalled_at = Instant::now();
    conn.send(&Frame::Signal { signal: signal as u8, grace_ms: grace.as_millis() as u32 })?;
    if grace.is_zero() {
        println!("sent {sig} to session {name} (process group {pid})");
        return Ok(0);
    }
    conn.set_read_timeout(Some(grace + KILL_REPORT_SLACK))?;
    let (status, escalated) = loop {
        match conn.recv() {
            Ok(Frame::Exit { status, escalated }) => break (status, escalated),
            Ok(Frame::Error { message, .. }) => return Err(failure(1, message)),
            Ok(_) => continue,
            Err(e) => {
                return Err(failure(1, format!("sent {sig} to session {name}, but it did not report an exit: {e:#}")));
            }
        }
    };
    if escalated {
        println!(
            "session {name} was still running {} s after {sig}; sent SIGKILL; then it {status}",
            grace.as_secs_f64()
        );
    } else {
        println!("sent {sig} to session {name}; it {status}");
    }
    // The master (the helpers' subreaper) signalled them too and stays until they are gone or it
    // sent them SIGKILL at the end of the grace period.
    if helpers.is_empty() {
        return Ok(0);
    }
    let grace_end = signalled_at + grace;
    let deadline = grace_end + KILL_REPORT_SLACK;
    let mut fates: Vec<Option<&str>> = vec![None; helpers.len()];
    loop {
        let now = Instant::now();
        for (helper, fate) in helpers.iter().zip(fates.iter_mut()) {
            if fate.is_none() && !crate::procfs::alive(helper.pid) {
                *fate = Some(if now < grace_end { "ended" } else { "killed with SIGKILL after the grace period" });
            }
        }
        if fates.iter().all(Option::is_some) || now >= deadline {
            break;
        }
        std::thread::sleep(HELPER_POLL);
    }
    println!("{} helper process(es) of session {name} ran outside its process group:", helpers.len());
    let mut survivors = 0;
    for (p, fate) in helpers.iter().zip(&fates) {
        match fate {
            Some(fate) => println!("  pid {}: {}: {fate}", p.pid, p.command),
            None => survivors += 1,
        }
    }
    if survivors == 0 {
        return Ok(0);
    }
    eprintln!("desk: {survivors} process(es) of session {name} are still running:");
    for (p, fate) in helpers.iter().zip(&fates) {
        if fate.is_none() {
            eprintln!("  pid {}: {}", p.pid, p.command);
        }
    }
    Ok(1)
}

pub fn rm(name: &SessionName) -> Result<i32> {
    let paths = paths()?;
    let files = paths.session(name);
    let lock = NameLock::acquire(&paths, name)?;
    match session::probe(&files)? {
        Probe::Live(_) => {
            return Err(failure(1, format!("session {name} is running; stop it first with: desk kill {name}")));
        }
        Probe::Stale => {
            session::clean_stale(&paths, name, &lock)?;
        }
        Probe::Absent => {}
    }
    let mut removed = false;
    let mut rotated = files.log.clone().into_os_string();
    rotated.push(".1");
    for path in [files.meta.clone(), files.exit.clone(), files.log.clone(), PathBuf::from(rotated)] {
        if path.exists() {
            crate::fsutil::remove_if_exists(&path)?;
            removed = true;
        }
    }
    NameLock::remove_file(&paths, name)?;
    drop(lock);
    if !removed {
        return Err(failure(1, format!("no session named {name}")));
    }
    crate::fsutil::sync_dir(&paths.runtime)?;
    Ok(0)
}

/// "5s ago", "3m ago", "2h ago", "4d ago".
fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=59 => format!("{s}s ago"),
        60..=3599 => format!("{}m ago", s / 60),
        3600..=86399 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86400),
    }
}

/// The command that starts a master: `desk-master` from beside this executable (smaller, so a
/// lone idle master keeps fewer pages of code resident), or `desk master` where it is missing,
/// e.g. when only the `desk` binary was copied somewhere.
fn master_command(exe: &std::path::Path) -> Command {
    let sibling = exe.with_file_name("desk-master");
    if sibling.is_file() {
        Command::new(sibling)
    } else {
        let mut cmd = Command::new(exe);
        cmd.arg("master");
        cmd
    }
}
