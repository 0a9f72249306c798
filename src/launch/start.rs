//! Starting a session: the master, under the name's lock, with its launch record.
//!
//! Owns what every start does, whoever asks (`desk new`, `desk up`, `desk restart`, the
//! daemon's supervisor through `desk restart`): take the name's lock, refuse a session that is
//! running, clean a stale socket, allocate the generation, write the [`LaunchRecord`] (before
//! the master runs, so a hook of the new generation and the daemon find it), start the master
//! — in a systemd user scope of its own where one can be made ([`super::scope`]), so that it
//! outlives the login that started it — and wait for its report. The counter and the launch
//! record are written without waiting on the disk: the master makes them durable once it has
//! reported, before it serves anyone (what a crash at each point leaves:
//! `desk_master`'s `durable_start`), so a start waits on no sync. Invariants: returns only once
//! the master listens and the child runs, or with the master's own error; a failed start removes what it created
//! (a state directory of a name that had none, a log where there was none, the lock file) and
//! leaves an earlier session's files of the name alone.

use anyhow::{Context, Result};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use desk_common::detach::{self, READY_FD, Ready};
use desk_common::failure::{ErrorCode, fail, failure};
use desk_common::launch_record::{self, LaunchRecord, StartedBy, WorktreeUse};
use desk_common::master_client::Connection;
use desk_common::paths::{Paths, SessionName};
use desk_common::session::{self, NameLock, Probe};
use desk_core::fleet::resume::ResumePlan;
use desk_core::fleet::supervise::RestartPolicy;
use desk_core::provider::Provider;
use desk_core::session::SizePolicy;
use desk_wire::Role;

/// What a session is started with.
pub struct StartRequest {
    pub name: SessionName,
    /// An existing directory, absolute.
    pub cwd: PathBuf,
    pub size: (u16, u16),
    pub size_policy: SizePolicy,
    pub env: Vec<(OsString, OsString)>,
    /// The config variables the agent inherits ([`LaunchRecord::inherited`]), set for it
    /// below `env`.
    pub inherited: std::collections::BTreeMap<String, String>,
    pub provider: Provider,
    /// The command as the user means it (recorded; `desk up` compares it).
    pub command: Vec<OsString>,
    /// The command to run: `command`, with desk's resume words where it resumes. desk's hook
    /// wiring is added to it here.
    pub run: Vec<OsString>,
    pub history: usize,
    pub log_cap: u64,
    /// What the fleet knows of it (all empty for `desk new`).
    pub fleet: FleetFacts,
    pub started_by: StartedBy,
}

/// The fleet's part of a launch record.
#[derive(Debug, Clone, Default)]
pub struct FleetFacts {
    pub restart: RestartPolicy,
    pub manifest: Option<PathBuf>,
    pub worktree: Option<WorktreeUse>,
    pub group: Option<String>,
    pub labels: Vec<String>,
    pub conversation: Option<ResumePlan>,
}

/// A started session.
#[derive(Debug, Clone, Copy)]
pub struct Started {
    pub generation: u32,
}

fn lossy(words: &[OsString]) -> Vec<String> {
    words.iter().map(|w| w.to_string_lossy().into_owned()).collect()
}

/// Start a session; see the module documentation.
pub fn start(paths: &Paths, req: StartRequest) -> Result<Started> {
    let name = &req.name;
    let files = paths.session(name);
    files.check_socket_len()?;
    let lock = NameLock::acquire(paths, name)?;
    match session::probe_settled(&files)? {
        Probe::Live(stream) => {
            let pid =
                Connection::open_within(stream, Role::Query, 0, 0, session::PROBE_DEADLINE).map(|c| c.info.pid).ok();
            let pid = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
            return Err(fail(
                ErrorCode::AlreadyExists,
                format!("session {name} already exists and is running{pid}; attach with: desk attach {name}"),
            ));
        }
        Probe::Stale => {
            session::clean_stale(paths, name, &lock)?;
        }
        Probe::Absent => {}
    }
    // No socket, yet a master may still run the session: its socket was removed.
    if let Some(why) = session::master_without_socket(paths, name) {
        return Err(fail(ErrorCode::AlreadyExists, why));
    }
    // What a failed start must not leave behind is whatever it created itself: the state
    // directory of a name that never had one, a log where there was none, the lock file.
    let state_existed = paths.session_state(name).exists();
    let log_existed = files.log.exists();
    let started = (|| -> Result<Started> {
        let generation = launch_record::allocate_generation(paths, name, &lock)?;
        let (cols, rows) = req.size;
        let record = LaunchRecord {
            generation,
            started_at_ms: desk_common::clock::now_ms(),
            started_by: req.started_by.clone(),
            provider: req.provider,
            command: lossy(&req.command),
            ran: lossy(&req.run),
            cwd: req.cwd.to_string_lossy().into_owned(),
            env: req
                .env
                .iter()
                .map(|(k, v)| (k.to_string_lossy().into_owned(), v.to_string_lossy().into_owned()))
                .collect(),
            inherited: req.inherited.clone(),
            cols,
            rows,
            size_policy: req.size_policy.name().to_string(),
            history: req.history,
            log_cap: req.log_cap,
            restart: req.fleet.restart,
            manifest: req.fleet.manifest.clone(),
            worktree: req.fleet.worktree.clone(),
            group: req.fleet.group.clone(),
            labels: req.fleet.labels.clone(),
            conversation: req.fleet.conversation.clone(),
        };
        launch_record::write_volatile(paths, name, &record)?;
        // The crash tests' point: the counter and the record written, no master started.
        desk_common::failpoint::failpoint("new-before-master");
        let args = MasterArgs {
            cwd: req.cwd.clone(),
            cols,
            rows,
            size_policy: req.size_policy,
            env: req
                .inherited
                .iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v)))
                .chain(req.env.iter().cloned())
                .collect(),
            provider: req.provider,
            command: req.run.clone(),
            history: req.history,
            log_cap: req.log_cap,
        };
        let scoped = super::scope::available();
        match start_master(paths, name, &files, generation, &args, scoped) {
            Ok(()) => Ok(Started { generation }),
            Err(MasterFailure::Scope(why)) => {
                eprintln!(
                    "desk: note: cannot start the master of {name} in a systemd scope ({why}); starting it without"
                );
                match start_master(paths, name, &files, generation, &args, false) {
                    Ok(()) => Ok(Started { generation }),
                    Err(MasterFailure::Other(e)) => Err(e),
                    Err(MasterFailure::Scope(why)) => Err(anyhow::anyhow!(why)),
                }
            }
            Err(MasterFailure::Other(e)) => Err(e),
        }
    })();
    if started.is_err() {
        forget_failed_start(paths, name, state_existed, log_existed);
    }
    drop(lock);
    started
}

/// The agent program a failed start could not execute, when it was given bare (looked up on
/// `PATH`) as a provider's own agent command (`claude`, for `--provider claude` without a
/// command): the agent is not installed, and the caller says how to give its path instead.
/// `program`: the command's first word, only where the command was the provider's default.
pub fn agent_not_found<'a>(e: &anyhow::Error, program: Option<&'a std::ffi::OsStr>) -> Option<&'a str> {
    let program = program?.to_str()?;
    (!program.contains('/') && format!("{e:#}").contains("could not execute")).then_some(program)
}

/// Whether a session of `provider` needs `desk serve` once it runs: an agent's prompts are the
/// daemon's to deliver, so it is started with the session, not at the first send; a plain
/// shell needs none.
pub fn needs_daemon(provider: Provider) -> bool {
    provider != Provider::Shell
}

/// How long `desk new` waits for its master to report. Starting is milliseconds; this bounds a
/// master stuck on something unexpected (a hung filesystem) so the caller does not hang too.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// What `desk new` hands its master, checked.
struct MasterArgs {
    cwd: PathBuf,
    cols: u16,
    rows: u16,
    size_policy: desk_core::session::SizePolicy,
    env: Vec<(OsString, OsString)>,
    provider: desk_core::provider::Provider,
    command: Vec<OsString>,
    history: usize,
    log_cap: u64,
}

/// Start the master of `generation` (allocated, with the name's lock held) and wait for its
/// report. `scope`: start it in a systemd user scope of its own ([`super::scope`]).
fn start_master(
    paths: &Paths,
    name: &SessionName,
    files: &desk_common::paths::SessionPaths,
    generation: u32,
    args: &MasterArgs,
    scope: bool,
) -> Result<(), MasterFailure> {
    let MasterArgs { cwd, cols, rows, size_policy, env, provider, command, history, log_cap } = args;
    let (cols, rows, provider) = (*cols, *rows, *provider);
    let exe = std::env::current_exe().context("cannot find the desk executable")?;
    let command = crate::providers::wire_hooks(provider, command.clone(), &paths.session_state(name), &exe)?;
    let mut cmd =
        if scope { super::scope::command(name, generation, master_command(&exe)) } else { master_command(&exe) };
    if std::env::var_os("GLIBC_TUNABLES").is_none() {
        cmd.env("GLIBC_TUNABLES", desk_common::session::MASTER_GLIBC_TUNABLES);
    }
    cmd.arg("--name")
        .arg(name.as_str())
        .arg("--size")
        .arg(format!("{cols}x{rows}"))
        .arg("--size-policy")
        .arg(size_policy.name())
        .arg("--cwd")
        .arg(cwd)
        .arg("--generation")
        .arg(generation.to_string())
        .arg("--provider")
        .arg(provider.as_str())
        .arg("--history")
        .arg(history.to_string())
        .arg("--log-cap")
        .arg(log_cap.to_string())
        .arg("--ready-fd")
        .arg(READY_FD.to_string());
    for (key, value) in env {
        let mut pair = key.clone();
        pair.push("=");
        pair.push(value);
        cmd.arg("--env").arg(pair);
    }
    cmd.arg("--").args(&command);
    let (mut child, ready) = detach::spawn(cmd).context("cannot start the session master")?;
    let report = detach::wait_ready(ready, START_TIMEOUT).map_err(|e| match e {
        detach::NoReport::TimedOut(t) => failure(1, format!("the master did not report within {} s", t.as_secs())),
        detach::NoReport::Poll(e) => anyhow::Error::new(e).context("cannot wait for the master"),
    });
    match report {
        Ok(Ready::Ok) => Ok(()),
        Ok(Ready::Failed(why) | Ready::AlreadyRunning(why)) => {
            let _ = child.wait();
            Err(failure(1, format!("cannot start session {name}: {why}")).into())
        }
        Ok(Ready::Died) => {
            let status = child.wait().ok();
            if scope && !files.meta.exists() {
                // systemd-run itself failed (no user manager after all): no master ran.
                return Err(MasterFailure::Scope(format!("{status:?}")));
            }
            // The log goes with the failed session's other files, so what it says is told here.
            let tail = log_tail(&files.log);
            Err(failure(1, format!("the master of {name} died while starting ({status:?}); its log ended:\n{tail}"))
                .into())
        }
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(e.into())
        }
    }
}

/// Why a master did not start.
enum MasterFailure {
    /// Its systemd scope could not be made: nothing ran; start it without one.
    Scope(String),
    Other(anyhow::Error),
}

impl From<anyhow::Error> for MasterFailure {
    fn from(e: anyhow::Error) -> MasterFailure {
        MasterFailure::Other(e)
    }
}

/// The last lines of a master's log, read from at most its last [`LOG_TAIL`] bytes.
fn log_tail(log: &std::path::Path) -> String {
    use std::io::{Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(log) else { return "(no log)".into() };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL as u64)));
    let bytes = desk_common::fsutil::read_bounded(file, LOG_TAIL, "the master's log").unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

/// 4 KiB: the last few lines of a master's log, enough to say why it died.
const LOG_TAIL: usize = 4096;

/// Remove what a failed `desk new` created (the master has exited). Files of an earlier
/// session of the name stay: its exit record, its log, its journal and generation counter.
fn forget_failed_start(paths: &Paths, name: &SessionName, state_existed: bool, log_existed: bool) {
    let files = paths.session(name);
    if !state_existed {
        let _ = std::fs::remove_dir_all(paths.session_state(name));
    }
    if !log_existed {
        let mut rotated = files.log.clone().into_os_string();
        rotated.push(".1");
        let _ = desk_common::fsutil::remove_if_exists(&files.log);
        let _ = desk_common::fsutil::remove_if_exists(std::path::Path::new(&rotated));
    }
    if !files.meta.exists() && !files.exit.exists() && !files.socket.exists() {
        let _ = NameLock::remove_file(paths, name);
    }
}

/// The command that starts a master: `desk-master` from beside this executable (smaller, so a
/// lone idle master keeps fewer pages of code resident), or `desk master` where it is missing,
/// e.g. when only the `desk` binary was copied somewhere.
pub(crate) fn master_command(exe: &std::path::Path) -> Command {
    let sibling = exe.with_file_name("desk-master");
    if sibling.is_file() {
        Command::new(sibling)
    } else {
        let mut cmd = Command::new(exe);
        cmd.arg("master");
        cmd
    }
}
