//! The session commands: `new`, `ls`, `peek`, `kill`, `rm`.
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
pub(super) struct NewSession {
    pub name: SessionName,
    pub cwd: Option<PathBuf>,
    pub size: (u16, u16),
    /// How the size follows the controllers.
    pub size_policy: desk_core::session::SizePolicy,
    pub env: Vec<(OsString, OsString)>,
    pub provider: Option<String>,
    pub command: Vec<OsString>,
    /// Arguments the config file adds to each provider's own agent command.
    pub provider_args: std::collections::BTreeMap<String, Vec<String>>,
    /// Print the started session as JSON.
    pub json: bool,
    /// History lines the master keeps.
    pub history: usize,
    /// Cap of the session log in bytes (0: none).
    pub log_cap: u64,
}

pub(super) fn new(req: NewSession) -> Result<i32> {
    let NewSession {
        name,
        cwd,
        size: (cols, rows),
        size_policy,
        env,
        provider,
        command,
        provider_args,
        json,
        history,
        log_cap,
    } = req;
    let default_command = command.is_empty();
    let (provider, mut command) = crate::providers::resolve(provider.as_deref(), command).map_err(|e| failure(2, e))?;
    let program = command.first().cloned().unwrap_or_default();
    if default_command && let Some(args) = provider_args.get(provider.as_str()) {
        // The agent's own command, started for the user: with their configured arguments. A
        // command they typed is used as typed.
        command.extend(args.iter().map(OsString::from));
    }
    let paths = paths()?;
    let cwd = match cwd {
        Some(dir) => std::fs::canonicalize(&dir)
            .with_context(|| format!("working directory {} does not exist", dir.display()))?,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    if !cwd.is_dir() {
        return Err(failure(1, format!("{} is not a directory", cwd.display())));
    }
    let inherited = crate::launch::inherited_config(&env);
    crate::launch::start(
        &paths,
        crate::launch::StartRequest {
            name: name.clone(),
            cwd,
            size: (cols, rows),
            size_policy,
            env,
            inherited,
            provider,
            command: command.clone(),
            run: command,
            history,
            log_cap,
            fleet: crate::launch::FleetFacts::default(),
            started_by: desk_common::launch_record::StartedBy::Operator { command: "desk new".into() },
        },
    )
    .map_err(|e| match crate::launch::agent_not_found(&e, default_command.then_some(program.as_os_str())) {
        Some(program) => failure(
            1,
            format!(
                "{e:#}\n`{program}` is not on your PATH: install it, or give its path: \
                     desk new {name} --provider {provider} -- /path/to/{program}"
            ),
        ),
        None => e,
    })?;
    let code = 0;
    // An agent's prompts are the daemon's to deliver: it is started now, not at the first send.
    let notes: Vec<String> = if crate::launch::needs_daemon(provider) {
        crate::autostart::ensure_daemon(&paths).say(json).into_iter().collect()
    } else {
        Vec::new()
    };
    if json {
        let deadline = Instant::now() + session::PROBE_DEADLINE;
        let mut row = listing(&paths, &name, deadline)?;
        if let Some(row) = &mut row {
            row.delivery =
                super::delivery::queue_counts(&paths).map(|mut c| c.remove(name.as_str()).unwrap_or_default());
        }
        output::print_ok("session", row, &notes)?;
    }
    Ok(code)
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
    /// How the size follows the controllers (absent for sessions of older masters).
    size_policy: Option<String>,
    clients: Option<Clients>,
    title: Option<String>,
    generation: Option<u32>,
    provider: Option<String>,
    /// The agent state (running sessions only), `health` shaped like the other axes.
    #[serde(serialize_with = "output::serialize_state")]
    state: Option<desk_core::state::StateView>,
    started_at_ms: Option<u64>,
    started_at: Option<String>,
    exit: Option<ExitJson>,
    /// Why the status is not simply running or exited.
    note: Option<String>,
    /// Its delivery queue (absent when neither the daemon nor the store could be read).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    delivery: Option<super::delivery::QueueCounts>,
    /// Its manifest, restart policy, supervision health, conversation and how its generation
    /// started (absent for a session without a launch record).
    #[serde(skip_serializing_if = "Option::is_none")]
    fleet: Option<crate::launch::view::FleetView>,
    /// How its master stands against this desk (running and unresponsive sessions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    master: Option<MasterSkew>,
}

/// Version skew: whether a session's master runs the desk-master this desk would start, and
/// which wire-protocol version it speaks (docs/upgrading.md).
#[derive(Debug, Serialize)]
struct MasterSkew {
    /// The newest protocol version its master speaks (1: a master whose record names none).
    protocol: u16,
    /// `current`: the desk-master this desk starts; `older`: another file — the one it was
    /// started from was replaced since (an upgrade) or is another desk's; `unknown`: it cannot
    /// be told.
    binary: &'static str,
    /// What moving it to this desk takes today (absent when it is current).
    #[serde(skip_serializing_if = "Option::is_none")]
    upgrade: Option<&'static str>,
}

/// What moving a session to this desk's master takes: `desk upgrade`, which a master from
/// before in-place upgrades refuses (docs/upgrading.md).
const UPGRADE_IN_PLACE: &str = "desk upgrade hands it over to this desk's master in place, its agent running on; if its master predates in-place upgrades it refuses, and only restarting the session moves it";

/// What moving a session whose master speaks protocol 1 takes: such a master cannot hand over.
const UPGRADE_BY_RESTART: &str =
    "its master (protocol 1) cannot hand over in place; restart the session to move it to this desk";

/// The skew of the master of a row that has one, against `installed` (the identity of the
/// desk-master this desk starts).
fn master_skew(paths: &Paths, row: &Listing, installed: Option<(u64, u64)>) -> Option<MasterSkew> {
    if !matches!(row.status, "running" | "unresponsive") {
        return None;
    }
    let master_pid = row.master_pid?;
    let name = SessionName::parse(&row.name).ok()?;
    let meta = session::read_meta(&paths.session(&name)).ok().flatten();
    let protocol = meta.map_or(desk_wire::OLDEST_PROTOCOL_VERSION, |m| m.protocol.unwrap_or(1));
    let binary = match (desk_common::procfs::exe_identity(master_pid), installed) {
        (Some(theirs), Some(ours)) if theirs == ours => "current",
        (Some(_), Some(_)) => "older",
        _ => "unknown",
    };
    let stale = binary == "older" || protocol < desk_wire::PROTOCOL_VERSION;
    let upgrade = if protocol < 2 { UPGRADE_BY_RESTART } else { UPGRADE_IN_PLACE };
    Some(MasterSkew { protocol, binary, upgrade: stale.then_some(upgrade) })
}

/// The identity of the desk-master this desk starts ([`crate::launch::master_command`]'s program).
fn installed_master() -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let exe = std::env::current_exe().ok()?;
    let program = crate::launch::master_command(&exe).get_program().to_owned();
    let meta = std::fs::metadata(program).ok()?;
    Some((meta.dev(), meta.ino()))
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

/// Every session's row. A running master's row comes from its info file when that can be
/// believed ([`from_info_file`]); the other masters are asked all at once ([`super::probe::ask_all`]), so that
/// all of them together take at most [`session::PROBE_DEADLINE`]: a stopped or dripping
/// master is shown as `unresponsive` rather than holding up the listing. A session that
/// recorded its exit is listed from its record without asking; a master that answers is
/// listed from its WELCOME alone (its metadata file is read only for a session whose master
/// did not answer).
fn listings(paths: &Paths) -> Result<Vec<Listing>> {
    let (names, exits): (Vec<SessionName>, Vec<bool>) = paths.session_names_and_exits()?.into_iter().unzip();
    let budget = session::PROBE_DEADLINE;
    let deadline = Instant::now() + budget;
    // The files of a large fleet are read by two threads: each session costs a few system
    // calls (its info file, its master's `/proc` entry), most of a listing's time.
    let read = |(name, has_exit): (&SessionName, bool)| -> Option<Listing> {
        let files = paths.session(name);
        // A record written after the directory was read belongs to a session that was running
        // then; `unexited` looks again for a master that does not answer.
        let exit = if has_exit { session::read_exit(&files).unwrap_or(None) } else { None };
        match exit {
            Some(exit) => Some(exited(name, &files, &exit)),
            None => from_info_file(name, &files),
        }
    };
    let pairs: Vec<(&SessionName, bool)> = names.iter().zip(exits).collect();
    let mut rows: Vec<Option<Listing>> = if pairs.len() >= LISTING_SPLIT {
        let (first, second) = pairs.split_at(pairs.len() / 2);
        std::thread::scope(|scope| {
            let helper = scope.spawn(|| second.iter().map(|p| read(*p)).collect::<Vec<_>>());
            let mut rows: Vec<Option<Listing>> = first.iter().map(|p| read(*p)).collect();
            match helper.join() {
                Ok(more) => rows.extend(more),
                // It cannot panic short of a bug; read its half here then.
                Err(_) => rows.extend(second.iter().map(|p| read(*p))),
            }
            rows
        })
    } else {
        pairs.iter().map(|p| read(*p)).collect()
    };
    let ask: Vec<usize> = (0..rows.len()).filter(|i| rows[*i].is_none()).collect();
    let sockets: Vec<std::path::PathBuf> = ask.iter().map(|i| paths.session(&names[*i]).socket).collect();
    let answers = super::probe::ask_all(&sockets, deadline, budget)?;
    for (i, answer) in ask.into_iter().zip(answers) {
        rows[i] = unexited(paths, &names[i], answer)?;
    }
    let mut rows: Vec<Listing> = rows.into_iter().flatten().collect();
    add_fleet(paths, &mut rows);
    Ok(rows)
}

/// The fleet's part of a listing: each session's [`crate::launch::view::FleetView`]; a session
/// a manifest declares that is not running is `down` (with how it ended, and what the
/// supervisor says); and the sessions a registered manifest declares that never ran here.
fn add_fleet(paths: &Paths, rows: &mut Vec<Listing>) {
    let supervision = desk_daemon::supervisor::read_state(paths);
    for row in rows.iter_mut() {
        add_fleet_to(paths, row, &supervision);
    }
    let known: Vec<String> = rows.iter().map(|r| r.name.clone()).collect();
    for (manifest, spec) in crate::launch::view::declared_down(paths, &known) {
        let Ok(name) = SessionName::parse(&spec.name) else { continue };
        let mut row = from_files(&name, None, "down");
        row.provider = Some(spec.provider.as_str().to_string());
        row.command = spec.command.clone().unwrap_or_default();
        row.note = Some(format!("declared in {manifest}; not started yet (desk up)"));
        rows.push(row);
    }
}

/// 64 sessions: below this a second thread costs more to start than it saves.
const LISTING_SPLIT: usize = 64;

/// A running session's row from the info file its master keeps current
/// ([`desk_common::info_file`]), without waking the master: `running` with what it would answer to
/// HELLO while the process the file names is that master, alive and not stopped;
/// `unresponsive` when it is stopped; `None` when there is no file to believe (none yet, not
/// this session's, or its master is gone), and the master is asked instead.
fn from_info_file(name: &SessionName, files: &desk_common::paths::SessionPaths) -> Option<Listing> {
    use desk_common::info_file::MasterCheck;
    let record = desk_common::info_file::read(&files.info)?;
    if record.info.name != name.as_str() {
        return None;
    }
    match desk_common::info_file::check(&record) {
        MasterCheck::Running => {
            let mut row = from_files(name, None, "running");
            row.size_policy = record.size_policy;
            apply_info(&mut row, record.info);
            Some(row)
        }
        MasterCheck::Stopped => {
            let meta: Option<SessionMeta> = session::read_meta(files).unwrap_or(None);
            let mut row = from_files(name, meta.as_ref(), "unresponsive");
            row.note = Some("its master is stopped (SIGSTOP or a debugger) and cannot answer".into());
            Some(row)
        }
        MasterCheck::NotTheMaster => None,
    }
}

/// A row's [`crate::launch::view::FleetView`]; a session a manifest declares that is not
/// running is `down`.
fn add_fleet_to(paths: &Paths, row: &mut Listing, supervision: &desk_core::fleet::supervise::Supervisor) {
    let Ok(name) = SessionName::parse(&row.name) else { return };
    let running = matches!(row.status, "running" | "unresponsive");
    row.fleet = crate::launch::view::of(paths, &name, running, supervision, desk_common::clock::now_ms());
    if !running && row.fleet.as_ref().is_some_and(|f| f.manifest.is_some()) {
        row.status = "down";
    }
}

/// One session's row (for `desk new --json`), asked like `desk ls` asks them all.
fn listing(paths: &Paths, name: &SessionName, deadline: Instant) -> Result<Option<Listing>> {
    let files = paths.session(name);
    if let Some(exit) = session::read_exit(&files).unwrap_or(None) {
        return Ok(Some(exited(name, &files, &exit)));
    }
    let budget = deadline.saturating_duration_since(Instant::now());
    let answer = super::probe::ask_all(std::slice::from_ref(&files.socket), deadline, budget)?.pop();
    let mut row = match answer {
        Some(answer) => unexited(paths, name, answer)?,
        None => None,
    };
    if let Some(row) = &mut row {
        add_fleet_to(paths, row, &desk_daemon::supervisor::read_state(paths));
    }
    Ok(row)
}

/// The row of a session that recorded its exit.
fn exited(name: &SessionName, files: &desk_common::paths::SessionPaths, exit: &ExitRecord) -> Listing {
    let meta: Option<SessionMeta> = session::read_meta(files).unwrap_or(None);
    let mut row = from_files(name, meta.as_ref(), "exited");
    row.exit = Some(ExitJson::from(exit));
    row.cols = exit.cols.or(row.cols);
    row.rows = exit.rows.or(row.rows);
    row.title = exit.title.clone();
    row
}

/// The row of a session with no exit record when it was listed, from what its master
/// answered; `None` for a name with neither a socket nor a metadata file.
fn unexited(paths: &Paths, name: &SessionName, answer: Answer) -> Result<Option<Listing>> {
    let files = paths.session(name);
    // A master that did not answer may have exited while it was being asked: its record then
    // says how.
    if !matches!(answer, Answer::Welcome(_))
        && let Some(exit) = session::read_exit(&files).unwrap_or(None)
    {
        return Ok(Some(exited(name, &files, &exit)));
    }
    let meta = || -> Option<SessionMeta> { session::read_meta(&files).unwrap_or(None) };
    let row = match answer {
        Answer::Welcome(info) => {
            let mut row = from_files(name, None, "running");
            apply_info(&mut row, *info);
            // WELCOME does not carry it (the C codec's SessionInfo has a fixed set of keys);
            // it never changes in a session's life, so its metadata file has it.
            row.size_policy = meta().and_then(|m| m.size_policy);
            row
        }
        Answer::Unresponsive(why) => {
            let mut row = from_files(name, meta().as_ref(), "unresponsive");
            row.note = Some(why);
            row
        }
        Answer::Stale => {
            if let Some(lock) = NameLock::try_acquire(paths, name)? {
                session::clean_stale(paths, name, &lock)?;
            }
            let mut row = from_files(name, meta().as_ref(), "lost");
            row.note = Some(
                unreadable_records(name, &files)
                    .unwrap_or_else(|| "its master died without recording an exit; the socket was stale".into()),
            );
            row
        }
        Answer::Absent => {
            let Some(meta) = meta() else {
                // Records this desk cannot read (damaged, or a newer desk's) are named, never
                // passed over as no session at all.
                return Ok(unreadable_records(name, &files).map(|note| {
                    let mut row = from_files(name, None, "lost");
                    row.note = Some(note);
                    row
                }));
            };
            if let Some(note) = unreadable_records(name, &files) {
                let mut row = from_files(name, Some(&meta), "lost");
                row.note = Some(note);
                return Ok(Some(row));
            }
            if let Some(why) = session::master_without_socket(paths, name) {
                let mut row = from_files(name, Some(&meta), "unresponsive");
                row.note = Some(why);
                return Ok(Some(row));
            }
            let mut row = from_files(name, Some(&meta), "lost");
            row.note = Some("its master is gone and recorded no exit".into());
            row
        }
    };
    Ok(Some(row))
}

fn apply_info(row: &mut Listing, info: SessionInfo) {
    row.pid = Some(info.pid);
    row.master_pid = Some(info.master_pid);
    row.command = typed_command(Some(&info.provider), &info.command);
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

/// What is wrong with a session's records when this desk cannot read one of them (damaged, or
/// written by a newer desk), and how to acknowledge it; `None` when every record present reads.
fn unreadable_records(name: &SessionName, files: &desk_common::paths::SessionPaths) -> Option<String> {
    let errors: Vec<String> = [session::read_meta(files).err(), session::read_exit(files).err()]
        .into_iter()
        .flatten()
        .map(|e| format!("{e:#}"))
        .collect();
    if errors.is_empty() {
        return None;
    }
    Some(format!(
        "{}; the records are kept as they are. Look at them, then acknowledge with: desk rm {name}",
        errors.join("; ")
    ))
}

/// A session's row as its record on disk describes it, with `status`; what only its master
/// knows (clients, title, state, exit) left empty.
fn from_files(name: &SessionName, meta: Option<&SessionMeta>, status: &'static str) -> Listing {
    Listing {
        name: name.to_string(),
        status,
        pid: meta.map(|m| m.pid),
        master_pid: meta.map(|m| m.master_pid),
        command: meta.map(|m| typed_command(Some(&m.provider), &m.command)).unwrap_or_default(),
        cwd: meta.map(|m| m.cwd.clone()),
        cols: meta.map(|m| m.cols),
        rows: meta.map(|m| m.rows),
        size_policy: meta.and_then(|m| m.size_policy.clone()),
        clients: None,
        title: None,
        generation: meta.map(|m| m.generation),
        provider: meta.map(|m| m.provider.clone()),
        state: None,
        started_at_ms: meta.map(|m| m.started_at_ms),
        started_at: meta.map(|m| iso8601(m.started_at_ms)),
        exit: None,
        note: None,
        delivery: None,
        fleet: None,
        master: None,
    }
}

pub(super) fn ls(json: bool) -> Result<i32> {
    let paths = paths()?;
    // The delivery queues are asked for while the masters are probed.
    let queues = {
        let paths = paths.clone();
        std::thread::spawn(move || super::delivery::queue_counts(&paths))
    };
    let mut rows = listings(&paths)?;
    if let Ok(Some(mut counts)) = queues.join() {
        for row in &mut rows {
            row.delivery = Some(counts.remove(&row.name).unwrap_or_default());
        }
    }
    let installed = installed_master();
    for row in &mut rows {
        row.master = master_skew(&paths, row, installed);
    }
    if json {
        output::print_ok("sessions", &rows, &[])?;
        return Ok(0);
    }
    if rows.is_empty() {
        match demo_home_elsewhere() {
            Some(home) => println!(
                "no sessions here; the demo fleet (make demo) runs under DESK_HOME={0}\n\
                 see it with: export DESK_HOME={0}   (or run: make demo-shell)",
                home.display()
            ),
            None => println!("no sessions; start one with: desk new NAME -- CMD"),
        }
        return Ok(0);
    }
    // One write for the table (a line-buffered stdout makes one per row).
    let mut text = String::new();
    for line in ls_table(&rows, desk_common::clock::now_ms(), super::table::terminal_width()) {
        text.push_str(&line);
        text.push('\n');
    }
    text.push_str(&skew_footer(&rows));
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).context("cannot write the listing")?;
    Ok(0)
}

/// The line under the table that names the sessions whose master is not this desk's (empty
/// when there are none).
fn skew_footer(rows: &[Listing]) -> String {
    let stale = older_masters_of(rows);
    if stale.is_empty() {
        return String::new();
    }
    let who = if stale.len() == 1 { "1 session runs".to_string() } else { format!("{} sessions run", stale.len()) };
    format!(
        "\n{who} an older master than this desk's: {}. `desk upgrade` hands each over to this desk's master in place; one that predates in-place upgrades refuses, and then only restarting the session moves it (docs/upgrading.md).\n",
        stale.join(", ")
    )
}

/// The sessions whose master is older than this desk's, each as `NAME (why)`: what `desk
/// doctor` reports (`desk ls` says it under its table).
pub(super) fn older_masters(paths: &Paths) -> Result<Vec<String>> {
    let mut rows = listings(paths)?;
    let installed = installed_master();
    for row in &mut rows {
        row.master = master_skew(paths, row, installed);
    }
    Ok(older_masters_of(&rows))
}

fn older_masters_of(rows: &[Listing]) -> Vec<String> {
    rows.iter()
        .filter_map(|r| {
            let skew = r.master.as_ref()?;
            skew.upgrade?;
            let why = match (skew.binary, skew.protocol) {
                ("older", p) if p < desk_wire::PROTOCOL_VERSION => format!("an older desk-master, protocol {p}"),
                ("older", _) => "an older desk-master".to_string(),
                (_, p) => format!("protocol {p}"),
            };
            Some(format!("{} ({why})", r.name))
        })
        .collect()
}

/// The home of a demo fleet (`make demo`: `target/demo-home` of a desk checkout) that has
/// sessions, when this listing looked elsewhere (no `DESK_HOME`): beside the `target` directory
/// this `desk` runs from, or in the current directory or one above it (looked at first).
fn demo_home_elsewhere() -> Option<PathBuf> {
    if std::env::var_os("DESK_HOME").is_some_and(|h| !h.is_empty()) {
        return None;
    }
    let beside_exe = std::env::current_exe().ok().and_then(|exe| Some(exe.parent()?.parent()?.join("demo-home")));
    let cwd = std::env::current_dir().ok();
    let above_cwd = cwd.iter().flat_map(|d| d.ancestors()).map(|d| d.join("target").join("demo-home"));
    above_cwd.chain(beside_exe).find(|home| Paths::in_home(home).session_names().is_ok_and(|names| !names.is_empty()))
}

/// Widest a column other than the last gets, in cells: room for an agent's title (they are
/// short: `✳ Fix the parser tests`) without one long title pushing every later column off an
/// 80-column screen.
const LS_COLUMN_CAP: usize = 30;

/// `desk ls`'s table: one row per session, fitted to `fit` cells when given.
/// The running session that most needs a person (blocked on a dialog, then a stuck item, then
/// degraded; the one waiting longest first), with a few words on why: what `desk attach --next`
/// attaches to. The ranking is the dashboard's (`dash::model::rank`).
pub(crate) fn most_needing_person(paths: &Paths) -> Result<Option<(SessionName, String)>> {
    use crate::dash::model::{Urgency, rank};
    let counts = super::delivery::queue_counts(paths).unwrap_or_default();
    let mut best: Option<(Urgency, u64, &Listing)> = None;
    let rows = listings(paths)?;
    for row in &rows {
        let Some(state) = &row.state else { continue };
        if row.exit.is_some() {
            continue;
        }
        let stuck = counts.get(&row.name).map_or(0, |c| c.stuck);
        let urgency = rank(None, true, state.activity.value, stuck, &state.health.value);
        if !urgency.needs_person() {
            continue;
        }
        let key = (urgency, state.activity.since_ms);
        if best.as_ref().is_none_or(|(u, since, _)| key < (*u, *since)) {
            best = Some((urgency, state.activity.since_ms, row));
        }
    }
    let Some((urgency, _, row)) = best else { return Ok(None) };
    let state = row.state.as_ref().map(|s| (s.wait.clone(), s.health.value.clone()));
    let why = match (urgency, state) {
        (Urgency::Blocked, Some((wait, _))) => {
            crate::words::activity(desk_core::state::Activity::Blocked, wait.as_deref())
        }
        (Urgency::Blocked, _) => "blocked".to_string(),
        (Urgency::Stuck, _) => "a prompt is stuck".to_string(),
        (_, Some((_, health))) => health.as_str(),
        _ => "needs a person".to_string(),
    };
    Ok(Some((SessionName::parse(&row.name)?, why)))
}

fn ls_table(rows: &[Listing], now: u64, fit: Option<usize>) -> Vec<String> {
    // The columns a glance needs first; the command (you typed it) last, as it is cut first.
    let header =
        ["NAME", "STATUS", "ACTIVITY", "QUEUE", "STUCK", "TITLE", "PID", "CLIENTS", "STARTED", "SIZE", "COMMAND"];
    let mut table = vec![header.map(String::from).to_vec()];
    for r in rows {
        let mut status = match &r.exit {
            Some(e) => {
                let how = match (e.code, e.signal) {
                    (Some(code), _) => crate::words::ended(ExitStatus::Code(code)),
                    (_, Some(signal)) => crate::words::ended(ExitStatus::Signal(signal)),
                    _ => "exited".into(),
                };
                let how = format!("{how} {}", desk_core::time::ago(now, e.exited_at_ms));
                if r.status == "down" { format!("down: {how}") } else { how }
            }
            None => r.status.to_string(),
        };
        // The conversation a running generation resumed (its id's start; `--json` has it all).
        if let Some(desk_core::fleet::resume::ResumePlan::Resume { conversation, .. }) =
            r.fleet.as_ref().filter(|_| r.exit.is_none()).and_then(|f| f.start.as_ref())
        {
            status.push_str(&format!(" ↺ {}", crate::launch::view::short(conversation)));
        }
        let clients =
            r.clients.as_ref().map_or_else(|| "-".into(), |c| crate::words::clients(c.controllers, c.viewers));
        let activity = match (&r.state, r.fleet.as_ref().and_then(|f| f.health.as_ref())) {
            // What the supervisor says of a session that is down.
            (None, Some(health)) => health.clone(),
            (Some(s), _) if s.lifecycle.value == desk_core::state::Lifecycle::Starting => "starting".to_string(),
            (Some(s), _) => format!(
                "{} {}",
                crate::words::activity(s.activity.value, s.wait.as_deref()),
                desk_core::time::span(now.saturating_sub(s.activity.since_ms))
            ),
            (None, None) => "-".into(),
        };
        let (queue, stuck) = match &r.delivery {
            Some(d) => {
                let mut queue = d.queue.to_string();
                if d.paused.is_some() {
                    queue.push_str(" paused");
                }
                (queue, d.stuck.to_string())
            }
            None => ("?".into(), "?".into()),
        };
        table.push(vec![
            r.name.clone(),
            status,
            activity,
            queue,
            stuck,
            r.title.as_deref().filter(|t| !t.is_empty()).map_or("-".into(), super::table::printable),
            r.pid.map_or("-".into(), |p| p.to_string()),
            clients,
            r.started_at_ms.map_or("-".into(), |t| desk_core::time::ago(now, t)),
            match (r.cols, r.rows) {
                (Some(c), Some(rw)) => format!("{c}x{rw}"),
                _ => "-".into(),
            },
            super::table::printable(&super::table::shell_words(&r.command)),
        ]);
    }
    super::table::render(&table, LS_COLUMN_CAP, fit)
}

/// The command as the user typed it: without the hook wiring `desk new` adds right after an
/// agent's program (`providers::wire_hooks`: Claude Code's `--settings FILE`, Codex's
/// `-c notify=[…]`, the demo agent's `--hook-cmd …`), which is desk's business, not theirs.
pub(crate) fn typed_command(provider: Option<&str>, command: &[String]) -> Vec<String> {
    let wired = match (provider, command.get(1).map(String::as_str), command.get(2)) {
        (Some("claude"), Some("--settings"), Some(v)) => v.ends_with("/claude-settings.json"),
        (Some("codex"), Some("-c"), Some(v)) => {
            v.starts_with("notify=") && v.contains(r#""hook","--provider","codex"]"#)
        }
        (Some("demo"), Some("--hook-cmd"), Some(v)) => v.ends_with(" hook --provider demo"),
        _ => false,
    };
    let mut typed = command.to_vec();
    if wired {
        typed.drain(1..3);
    }
    typed
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

/// `desk resize NAME COLSxROWS`: set a `fixed` session's size. The master refuses it under the
/// other policies (their size follows the controllers); a PING after the RESIZE tells success
/// (PONG, frames are answered in order) from refusal (ERROR first).
pub(super) fn resize(name: &SessionName, (cols, rows): (u16, u16)) -> Result<i32> {
    let paths = paths()?;
    let mut conn = connect(&paths, name)?;
    conn.send(&Frame::Resize { cols, rows })?;
    conn.send(&Frame::Ping(1))?;
    conn.set_deadline(Some(session::PROBE_DEADLINE));
    loop {
        match conn.recv().map_err(|e| ended(&paths, name, e))? {
            Frame::Pong(_) => break,
            Frame::Error { message, .. } => return Err(failure(1, format!("cannot resize session {name}: {message}"))),
            _ => continue,
        }
    }
    println!("resized session {name} to {cols}x{rows}");
    Ok(0)
}

/// Lines `desk log` prints without `--since-start`: a few screens more than a terminal's
/// usual scrollback view, enough for "what just happened", short enough to read.
const LOG_TAIL_LINES: usize = 1000;

/// How often `desk log --follow` looks for new lines: well under the time a reader notices,
/// a negligible cost for a process that only stats a file.
const LOG_FOLLOW_POLL: Duration = Duration::from_millis(200);

/// `desk log`: the session log's text (newest `LOG_TAIL_LINES` lines, or all it keeps with
/// `since_start`), then the current (or last) screen; with `follow`, new lines as they scroll
/// off until the session ends, then its last screen.
pub(super) fn log(name: &SessionName, follow: bool, since_start: bool) -> Result<i32> {
    use std::io::Write;
    let paths = paths()?;
    let files = paths.session(name);
    let state = paths.session_state(name);
    if !files.meta.exists() && !files.exit.exists() && !desk_common::screen_log::current(&state).exists() {
        return Err(fail(ErrorCode::NoSuchSession, desk_common::suggest::unknown_session_in(&paths, name.as_str())));
    }
    // The screen first: a live master writes the lines waiting for the log before it answers,
    // so the files then hold everything that scrolled off above this screen.
    let screen = current_screen(&paths, name)?;
    let (text, read) = desk_common::screen_log::read_all(&state)?;
    let lines: Vec<&str> = text.lines().collect();
    let from = if since_start { 0 } else { lines.len().saturating_sub(LOG_TAIL_LINES) };
    let mut out = std::io::stdout().lock();
    for line in &lines[from..] {
        writeln!(out, "{line}")?;
    }
    if follow {
        out.flush()?;
        drop(out);
        follow_log(&files, &state, read)?;
    } else {
        for row in screen {
            writeln!(out, "{row}")?;
        }
    }
    Ok(0)
}

/// The session's screen now (live) or as it ended (exit record), trailing blank rows dropped.
fn current_screen(paths: &Paths, name: &SessionName) -> Result<Vec<String>> {
    let files = paths.session(name);
    let mut rows = match session::probe_settled(&files)? {
        Probe::Live(stream) => {
            let mut conn = Connection::open(stream, Role::Query, 0, 0).map_err(|e| ended(paths, name, e))?;
            conn.send(&Frame::SnapshotRequest { history: None }).map_err(|e| ended(paths, name, e))?;
            loop {
                match conn.recv().map_err(|e| ended(paths, name, e))? {
                    Frame::Snapshot(s) => break s.screen.lines,
                    Frame::Error { message, .. } => return Err(failure(1, message)),
                    _ => continue,
                }
            }
        }
        Probe::Absent | Probe::Stale => session::read_exit(&files)?.and_then(|e| e.last_screen).unwrap_or_default(),
    };
    while rows.last().is_some_and(|l| l.trim().is_empty()) {
        rows.pop();
    }
    Ok(rows)
}

/// Prints what is appended to the log (across a rotation) after the first `offset` bytes of
/// its current file until the session is no longer live, then the last screen.
fn follow_log(files: &desk_common::paths::SessionPaths, state: &std::path::Path, mut offset: u64) -> Result<()> {
    use std::io::Write;
    use std::io::{Read, Seek, SeekFrom};
    let current = desk_common::screen_log::current(state);
    let mut out = std::io::stdout();
    loop {
        let live = matches!(session::probe_settled(files)?, Probe::Live(_));
        let len = std::fs::metadata(&current).map_or(0, |m| m.len());
        if len < offset {
            // Rotated: the rest of the old file first.
            if let Ok(mut f) = std::fs::File::open(desk_common::screen_log::rotated(state)) {
                f.seek(SeekFrom::Start(offset))?;
                std::io::copy(&mut f, &mut out)?;
            }
            offset = 0;
        }
        if len > offset {
            let mut f = std::fs::File::open(&current)?;
            f.seek(SeekFrom::Start(offset))?;
            let mut chunk = Vec::new();
            f.take(len - offset).read_to_end(&mut chunk)?;
            out.write_all(String::from_utf8_lossy(&chunk).as_bytes())?;
            out.flush()?;
            offset = len;
        }
        if !live {
            let rows = session::read_exit(files)?.and_then(|e| e.last_screen).unwrap_or_default();
            for row in rows {
                writeln!(out, "{row}")?;
            }
            return Ok(());
        }
        std::thread::sleep(LOG_FOLLOW_POLL);
    }
}

/// `desk peek`; `history`: how many history lines to print above the screen (`None`: none).
pub(super) fn peek(name: &SessionName, json: bool, history: Option<u32>) -> Result<i32> {
    let paths = paths()?;
    let files = paths.session(name);
    let mut conn = match session::probe_settled(&files)? {
        Probe::Live(stream) => Connection::open(stream, Role::Query, 0, 0).map_err(|e| ended(&paths, name, e))?,
        Probe::Absent | Probe::Stale => match session::read_exit(&files)? {
            Some(exit) => return peek_exited(name, &exit, json, history),
            None if files.meta.exists() => {
                return Err(fail(ErrorCode::NotRunning, format!("session {name} is not running")));
            }
            None => {
                return Err(fail(
                    ErrorCode::NoSuchSession,
                    desk_common::suggest::unknown_session_in(&paths, name.as_str()),
                ));
            }
        },
    };
    let Some(lines) = history else {
        conn.send(&Frame::SnapshotRequest { history: None }).map_err(|e| ended(&paths, name, e))?;
        let snapshot = loop {
            match conn.recv().map_err(|e| ended(&paths, name, e))? {
                Frame::Snapshot(s) => break *s,
                Frame::Error { message, .. } => return Err(failure(1, message)),
                _ => continue,
            }
        };
        return print_peek(name, json, &snapshot, None);
    };
    // The history comes a page at a time and goes to stdout as it comes: the master holds one
    // page per request, and so does this process, however long the history is.
    let (snapshot, mut read) = HistoryRead::start(&mut conn, lines).map_err(|e| ended(&paths, name, e))?;
    print_peek(name, json, &snapshot, Some(&mut read))
}

/// Prints what `desk peek` shows: `snapshot`'s screen and, when asked, the history `read` reads
/// (above the screen in text; `history` in JSON), with what could not be shown of it as notes
/// (stderr in text).
fn print_peek(
    name: &SessionName,
    json: bool,
    snapshot: &desk_wire::SnapshotReply,
    read: Option<&mut HistoryRead<'_>>,
) -> Result<i32> {
    let read = read.map(std::cell::RefCell::new);
    let notes = || read.as_ref().map(|r| r.borrow().notes().to_vec()).unwrap_or_default();
    if json {
        // The snapshot as the wire carries it, with the session's name, and the state shaped
        // as everywhere else on the command line; the history streamed into its place.
        let mut data = serde_json::to_value(snapshot)?;
        if let Some(map) = data.as_object_mut() {
            map.insert("name".into(), name.as_str().into());
            map.insert("state".into(), snapshot.state.as_ref().map(output::state_json).into());
            for key in ["history", "history_start", "history_first", "history_end"] {
                map.remove(key);
            }
            if read.is_some() {
                map.insert("history".into(), serde_json::Value::Null);
            }
        }
        output::print_ok_streamed("screen", PeekData { data, history: read.as_ref() }, notes)?;
    } else {
        use std::io::Write;
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        let mut history_lines = 0usize;
        if let Some(read) = &read {
            read.borrow_mut().for_each(|row| {
                history_lines += 1;
                Ok(writeln!(out, "{}", row.text)?)
            })?;
        }
        if history_lines > 0 {
            // Where the history ends and the screen begins.
            writeln!(out, "{}", screen_separator("the screen", snapshot.screen.cols, snapshot.screen.rows))?;
        }
        let mut lines = snapshot.screen.lines.clone();
        while lines.last().is_some_and(|l| l.trim().is_empty()) {
            lines.pop();
        }
        for line in lines {
            writeln!(out, "{line}")?;
        }
        out.flush()?;
        for note in notes() {
            eprintln!("desk: warning: {note}");
        }
    }
    Ok(0)
}

/// `desk peek --json`'s `data`: the snapshot's keys in order, the `history` key's rows read from
/// the session while they are written.
struct PeekData<'a, 'c> {
    data: serde_json::Value,
    history: Option<&'a std::cell::RefCell<&'a mut HistoryRead<'c>>>,
}

impl Serialize for PeekData<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        struct Rows<'a, 'c>(&'a std::cell::RefCell<&'a mut HistoryRead<'c>>);
        impl Serialize for Rows<'_, '_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                let mut seq = s.serialize_seq(None)?;
                let mut read = self.0.borrow_mut();
                while let Some(rows) = read.next_page() {
                    for row in &rows {
                        seq.serialize_element(row)?;
                    }
                }
                seq.end()
            }
        }
        let Some(map) = self.data.as_object() else { return self.data.serialize(s) };
        let mut out = s.serialize_map(Some(map.len()))?;
        for (key, value) in map {
            match self.history {
                Some(read) if key == "history" => out.serialize_entry(key, &Rows(read))?,
                _ => out.serialize_entry(key, value)?,
            }
        }
        out.end()
    }
}

/// `desk peek` on an exited session: the screen its child left, under a line saying how it
/// ended (JSON: the exit record, whose `last_screen` holds the rows).
fn peek_exited(name: &SessionName, exit: &ExitRecord, json: bool, history: Option<u32>) -> Result<i32> {
    let Some(rows) = &exit.last_screen else {
        let why = desk_common::signals::describe_exit(exit.status);
        return Err(fail(ErrorCode::NotRunning, format!("session {name} {why}; its last screen was not recorded")));
    };
    if json {
        // The live answer's shape where it applies (`name`, `lines`), and how it ended.
        let record = ExitRecord { last_screen: None, last_history: None, ..exit.clone() };
        let mut data = serde_json::json!({ "name": name.as_str(), "lines": rows, "exit": record });
        if let (Some(n), Some(map)) = (history, data.as_object_mut()) {
            map.insert("history".into(), exit.history_tail(n).into());
        }
        output::print_ok("last-screen", data, &[])?;
    } else {
        println!("{}", exit.headline(name.as_str(), desk_common::clock::now_ms()));
        let lines = history.map(|n| exit.history_tail(n)).unwrap_or_default();
        for line in &lines {
            println!("{line}");
        }
        if !lines.is_empty() {
            let (cols, rows_n) = (exit.cols.unwrap_or(0), exit.rows.unwrap_or(rows.len() as u16));
            println!("{}", screen_separator("its last screen", cols, rows_n));
        }
        for row in rows {
            println!("{row}");
        }
    }
    Ok(0)
}

/// The line `desk peek --history` prints between the history and the screen, as wide as the
/// screen: `── the screen (40x10) ───…` (history above it, the screen below).
fn screen_separator(what: &str, cols: u16, rows: u16) -> String {
    let head = if cols > 0 { format!("── {what} ({cols}x{rows}) ") } else { format!("── {what} ") };
    let width = usize::from(cols).max(head.chars().count() + 2);
    format!("{head}{}", "─".repeat(width - head.chars().count()))
}

/// What `desk kill --json` prints.
#[derive(Serialize)]
struct KillReport<'a> {
    name: &'a str,
    signal: String,
    /// How the session ended; `null` with `--grace 0` (not waited for).
    exit: Option<KillExit>,
    helpers: Vec<HelperFate>,
}

#[derive(Serialize)]
struct KillExit {
    code: Option<i32>,
    signal: Option<i32>,
    escalated: bool,
}

#[derive(Serialize)]
struct HelperFate {
    pid: u32,
    command: String,
    /// `ended`, `killed` (SIGKILL after the grace period) or `running`.
    fate: &'static str,
}

/// Wait for the EXIT a master reports after a SIGNAL frame (`sig`, for messages): how the
/// session ended and whether the grace period ran out.
fn wait_exit(conn: &mut Connection, name: &SessionName, sig: &str, grace: Duration) -> Result<(ExitStatus, bool)> {
    conn.set_deadline(Some(grace + KILL_REPORT_SLACK));
    loop {
        match conn.recv() {
            Ok(Frame::Exit { status, escalated }) => return Ok((status, escalated)),
            Ok(Frame::Error { message, .. }) => return Err(failure(1, message)),
            Ok(_) => continue,
            Err(e) => {
                return Err(failure(1, format!("sent {sig} to session {name}, but it did not report an exit: {e:#}")));
            }
        }
    }
}

/// Stop a session quietly (for `desk up --recreate`, `desk down --json`, `desk restart`):
/// SIGTERM, SIGKILL after `grace`, the end recorded as the operator's (`by`) first; returns how
/// it ended. Helper processes are left to the master, as `desk kill` leaves them.
pub(crate) fn stop(paths: &Paths, name: &SessionName, grace: Duration, by: &str) -> Result<ExitStatus> {
    let mut conn = connect(paths, name)?;
    desk_common::launch_record::mark_stopped(paths, name, conn.info.generation, by)?;
    conn.send(&Frame::Signal { signal: libc::SIGTERM as u8, grace_ms: grace.as_millis() as u32 })?;
    Ok(wait_exit(&mut conn, name, "SIGTERM", grace)?.0)
}

/// `desk kill` (and `desk down`, `desk restart`, named by `by`): the session's end is recorded
/// as the operator's before it is signalled, so the daemon's supervisor never restarts it.
pub(super) fn kill(name: &SessionName, signal: i32, grace: f64, json: bool, by: &str) -> Result<i32> {
    if !(0.0..=3600.0).contains(&grace) {
        return Err(failure(2, "--grace must be between 0 and 3600 seconds"));
    }
    let grace = Duration::from_secs_f64(grace);
    let paths = paths()?;
    let mut conn = connect(&paths, name)?;
    desk_common::launch_record::mark_stopped(&paths, name, conn.info.generation, by)?;
    let pid = conn.info.pid;
    let master_pid = conn.info.master_pid;
    let sig = desk_common::signals::name(signal);
    // The helpers outside the child's process group, named before they get the signal (most
    // end on it at once); the group itself is the session proper and is reported as its exit.
    let mut helpers = desk_common::procfs::descendants(master_pid);
    for member in desk_common::procfs::session_members(pid) {
        if !helpers.iter().any(|p| p.pid == member.pid) {
            helpers.push(member);
        }
    }
    // SAFETY: getpgid takes an integer and touches no memory of ours.
    helpers.retain(|p| p.pid != pid && unsafe { libc::getpgid(p.pid as libc::pid_t) } != pid as libc::pid_t);
    let signalled_at = Instant::now();
    conn.send(&Frame::Signal { signal: signal as u8, grace_ms: grace.as_millis() as u32 })?;
    if grace.is_zero() {
        if json {
            let report = KillReport { name: name.as_str(), signal: sig.to_string(), exit: None, helpers: vec![] };
            output::print_ok("kill", report, &[])?;
        } else {
            println!("sent {sig} to session {name} (process group {pid})");
        }
        return Ok(0);
    }
    let (status, escalated) = wait_exit(&mut conn, name, &sig, grace)?;
    let (code, exit_signal) = match status {
        ExitStatus::Code(c) => (Some(c), None),
        ExitStatus::Signal(s) => (None, Some(s)),
    };
    let mut report = KillReport {
        name: name.as_str(),
        signal: sig.to_string(),
        exit: Some(KillExit { code, signal: exit_signal, escalated }),
        helpers: vec![],
    };
    // With --json, all of it is printed as one document at the end.
    if !json {
        if escalated {
            println!(
                "session {name} was still running {} s after {sig}; sent SIGKILL; then it {}",
                grace.as_secs_f64(),
                desk_common::signals::describe_exit(status)
            );
        } else {
            println!("sent {sig} to session {name}; it {}", desk_common::signals::describe_exit(status));
        }
    }
    // The master (the helpers' subreaper) signalled them too and stays until they are gone or it
    // sent them SIGKILL at the end of the grace period.
    if helpers.is_empty() {
        if json {
            output::print_ok("kill", report, &[])?;
        }
        return Ok(0);
    }
    let grace_end = signalled_at + grace;
    let deadline = grace_end + KILL_REPORT_SLACK;
    let mut fates: Vec<Option<&str>> = vec![None; helpers.len()];
    loop {
        for (helper, fate) in helpers.iter().zip(fates.iter_mut()) {
            if fate.is_none() && !desk_common::procfs::alive(helper.pid) {
                // The clock is read after the death is seen, never before: a reading taken
                // earlier (this process may be descheduled in between, on a loaded machine)
                // would call a helper the master killed at the end of the grace period "ended".
                let seen = Instant::now();
                *fate = Some(if seen < grace_end { "ended" } else { "killed with SIGKILL after the grace period" });
            }
        }
        if fates.iter().all(Option::is_some) || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(HELPER_POLL);
    }
    let survivors = fates.iter().filter(|f| f.is_none()).count();
    if json {
        report.helpers = helpers
            .iter()
            .zip(&fates)
            .map(|(p, fate)| HelperFate {
                pid: p.pid,
                command: p.command.clone(),
                fate: match fate {
                    None => "running",
                    Some(f) if f.starts_with("killed") => "killed",
                    Some(_) => "ended",
                },
            })
            .collect();
        if survivors > 0 {
            let pids: Vec<String> =
                report.helpers.iter().filter(|h| h.fate == "running").map(|h| h.pid.to_string()).collect();
            return Err(fail(
                ErrorCode::Failed,
                format!("{survivors} process(es) of session {name} are still running: pid {}", pids.join(", ")),
            ));
        }
        output::print_ok("kill", report, &[])?;
        return Ok(0);
    }
    println!("{} helper process(es) of session {name} ran outside its process group:", helpers.len());
    for (p, fate) in helpers.iter().zip(&fates) {
        if let Some(fate) = fate {
            println!("  pid {}: {}: {fate}", p.pid, p.command);
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

/// How often `desk rm` looks again while an exited session's master finishes leaving: it takes
/// microseconds (more on a loaded machine), so a few milliseconds cost nothing.
const RM_SETTLE_POLL: Duration = Duration::from_millis(5);

/// `desk rm NAME`: forget an exited session's files; the prompts still queued for it stay held
/// for a later session of the name (said on stderr), or with `drop_queued` are dropped (through
/// the daemon, which owns them).
pub(super) fn rm(name: &SessionName, drop_queued: bool, json: bool) -> Result<i32> {
    let paths = paths()?;
    let files = paths.session(name);
    let lock = NameLock::acquire(&paths, name)?;
    match session::probe_settled(&files)? {
        Probe::Live(_) => {
            return Err(failure(1, format!("session {name} is running; stop it first with: desk kill {name}")));
        }
        Probe::Stale => {
            session::clean_stale(&paths, name, &lock)?;
        }
        Probe::Absent => {}
    }
    if let Some(why) = session::master_without_socket(&paths, name) {
        return Err(failure(1, why));
    }
    // A master that recorded its exit may still be finishing (it holds the name's master lock
    // until it is gone). Its exit record is what tells a later `desk new` that the holder is
    // leaving, so the record is not removed until it has left (or EXIT_SETTLE has passed):
    // otherwise a `desk new` right after this `rm` takes the leaving master for a running one.
    let settle = Instant::now() + session::EXIT_SETTLE;
    while session::MasterLock::holder(&paths, name).is_some() && Instant::now() < settle {
        std::thread::sleep(RM_SETTLE_POLL);
    }
    let mut removed = false;
    let mut rotated = files.log.clone().into_os_string();
    rotated.push(".1");
    for path in [files.meta.clone(), files.exit.clone(), files.log.clone(), PathBuf::from(rotated), files.info.clone()]
    {
        if path.exists() {
            desk_common::fsutil::remove_if_exists(&path)?;
            removed = true;
        }
    }
    // The session's durable state goes too (events journal, agent settings), all but the
    // generation counter, so a later session of the name never reuses a generation, and the
    // master's lock file, which a master finishing its exit may still hold.
    let state = paths.session_state(name);
    for path in list_dir(&state)? {
        if path.file_name().is_some_and(|f| f == "generation" || f == session::MASTER_LOCK_FILE) {
            continue;
        }
        if path.is_dir() {
            std::fs::remove_dir_all(&path).with_context(|| format!("cannot remove {}", path.display()))?;
        } else {
            desk_common::fsutil::remove_if_exists(&path)?;
        }
        removed = true;
    }
    NameLock::remove_file(&paths, name)?;
    drop(lock);
    let queued = super::delivery::pending_ids(&paths, name)?;
    if !removed && (queued.is_empty() || !drop_queued) {
        let mut why = desk_common::suggest::unknown_session_in(&paths, name.as_str());
        if !queued.is_empty() {
            why.push_str(&format!(
                "; {} prompt(s) are queued for it (desk rm {name} --drop-queued drops them)",
                queued.len()
            ));
        }
        return Err(fail(ErrorCode::NoSuchSession, why));
    }
    desk_common::fsutil::sync_dir(&paths.runtime)?;
    let (mut notes, dropped) = if drop_queued && !queued.is_empty() {
        super::delivery::drop_all(&paths, &queued, json)?
    } else {
        (Vec::new(), Vec::new())
    };
    let held: Vec<&desk_core::delivery::item::ItemId> = queued.iter().filter(|id| !dropped.contains(id)).collect();
    if !held.is_empty() {
        notes.push(format!(
            "{} prompt(s) queued for {name} stay held until a session named {name} runs again \
             (desk queue {name} lists them; desk rm {name} --drop-queued drops them)",
            held.len()
        ));
    }
    if !dropped.is_empty() {
        notes.push(format!("dropped the {} prompt(s) queued for {name}", dropped.len()));
    }
    if json {
        let data = serde_json::json!({ "name": name.as_str(), "held": held, "dropped": dropped });
        output::print_ok("removed", data, &notes)?;
    } else {
        for note in &notes {
            eprintln!("desk: {note}");
        }
    }
    Ok(0)
}

/// The entries of `dir`; none if it does not exist.
fn list_dir(dir: &std::path::Path) -> Result<Vec<PathBuf>> {
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            entries.map(|e| e.map(|e| e.path()).with_context(|| format!("cannot list {}", dir.display()))).collect()
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| format!("cannot list {}", dir.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn the_command_shown_is_the_one_typed_not_the_hook_wiring() {
        let wired = words(&["claude", "--settings", "/s/sessions/a/claude-settings.json", "--model", "x"]);
        assert_eq!(typed_command(Some("claude"), &wired), words(&["claude", "--model", "x"]));
        let wired = words(&["codex", "-c", r#"notify=["/bin/desk","hook","--provider","codex"]"#, "exec"]);
        assert_eq!(typed_command(Some("codex"), &wired), words(&["codex", "exec"]));
        let wired = words(&["desk-demo-agent", "--hook-cmd", "/bin/desk hook --provider demo", "--quiet"]);
        assert_eq!(typed_command(Some("demo"), &wired), words(&["desk-demo-agent", "--quiet"]));
        // The user's own flags stay.
        let own = words(&["codex", "-c", "notify=[\"my-notifier\"]"]);
        assert_eq!(typed_command(Some("codex"), &own), own);
        let shell = words(&["sh", "-c", "--settings"]);
        assert_eq!(typed_command(Some("shell"), &shell), shell);
    }
}
