//! `desk kill`, and the quiet stop `desk up`, `down` and `restart` use.
//!
//! Owns signalling a session through its master and finding out what happened: how the session
//! ended (its exit status, and whether the master had to send SIGKILL after the grace period)
//! and what became of the helper processes that ran outside its process group (a subreaper's
//! strays: `setsid` daemons, double forks). `desk kill` computes all of that as one
//! [`KillReport`], then renders it once, as text or as JSON. Invariant: nothing is reported that
//! was not seen — a helper is `ended` only if its death was seen before the grace period ran
//! out, and one still alive at the deadline is reported as running, with exit status 1.

use anyhow::Result;
use serde::Serialize;
use std::time::{Duration, Instant};

use super::{connect, paths};
use crate::cli::output::{self, ErrorCode};
use crate::cli::{fail, failure};
use desk_common::master_client::Connection;
use desk_common::paths::{Paths, SessionName};
use desk_common::procfs::ProcessInfo;
use desk_wire::{ExitStatus, Frame};

/// Extra time `desk kill` waits for the exit report beyond the grace period (the master needs a
/// moment to reap, record and report after SIGKILL).
const KILL_REPORT_SLACK: Duration = Duration::from_secs(5);

/// How often `desk kill` looks whether the helpers it reports are gone: a tenth of the smallest
/// useful grace period, and cheap (one `kill(pid, 0)` per helper).
const HELPER_POLL: Duration = Duration::from_millis(20);

/// What `desk kill` did and saw.
struct KillReport {
    name: SessionName,
    /// The signal's name (`SIGTERM`).
    signal: String,
    /// The session's process group (its child's pid).
    group: u32,
    grace: Duration,
    /// How the session ended and whether SIGKILL followed the grace period; `None` with
    /// `--grace 0` (not waited for).
    ended: Option<(ExitStatus, bool)>,
    /// The helpers outside the process group, each with what became of it.
    helpers: Vec<(ProcessInfo, Fate)>,
}

/// What became of a helper process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Its death was seen within the grace period.
    Ended,
    /// Its death was seen after the grace period (the master sent it SIGKILL).
    Killed,
    /// Still alive at the deadline.
    Running,
}

impl Fate {
    /// In `desk kill`'s text.
    fn words(self) -> &'static str {
        match self {
            Fate::Ended => "ended",
            Fate::Killed => "killed with SIGKILL after the grace period",
            Fate::Running => "running",
        }
    }

    /// In `desk kill --json`.
    fn name(self) -> &'static str {
        match self {
            Fate::Ended => "ended",
            Fate::Killed => "killed",
            Fate::Running => "running",
        }
    }
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
/// `ids` says how the text names the session (`HOST:NAME` when a host runs it for another
/// machine).
pub(in crate::cli) fn kill(
    name: &SessionName,
    signal: i32,
    grace: f64,
    json: bool,
    by: &str,
    ids: &crate::cli::output::Ids,
) -> Result<i32> {
    if !(0.0..=3600.0).contains(&grace) {
        return Err(failure(2, "--grace must be between 0 and 3600 seconds"));
    }
    let report = signal_session(&paths()?, name, signal, Duration::from_secs_f64(grace), by)?;
    if json { report.print_json() } else { Ok(report.print_text(ids)) }
}

/// Signal the session, then watch it (and its helpers) end, up to the grace period and the
/// report's slack.
fn signal_session(paths: &Paths, name: &SessionName, signal: i32, grace: Duration, by: &str) -> Result<KillReport> {
    let mut conn = connect(paths, name)?;
    desk_common::launch_record::mark_stopped(paths, name, conn.info.generation, by)?;
    let group = conn.info.pid;
    // Named before they get the signal: most end on it at once.
    let helpers = helpers_outside_group(conn.info.master_pid, group);
    let signalled_at = Instant::now();
    conn.send(&Frame::Signal { signal: signal as u8, grace_ms: grace.as_millis() as u32 })?;
    let mut report = KillReport {
        name: name.clone(),
        signal: desk_common::signals::name(signal).to_string(),
        group,
        grace,
        ended: None,
        helpers: Vec::new(),
    };
    if grace.is_zero() {
        return Ok(report);
    }
    report.ended = Some(wait_exit(&mut conn, name, &report.signal, grace)?);
    // The master (the helpers' subreaper) signalled them too and stays until they are gone or
    // it sent them SIGKILL at the end of the grace period.
    report.helpers = watch_helpers(helpers, signalled_at + grace);
    Ok(report)
}

/// The session's processes outside its child's process group (`group`): the master's other
/// descendants and the members of the child's session. The group itself is the session proper
/// and is reported as its exit.
fn helpers_outside_group(master_pid: u32, group: u32) -> Vec<ProcessInfo> {
    let mut helpers = desk_common::procfs::descendants(master_pid);
    for member in desk_common::procfs::session_members(group) {
        if !helpers.iter().any(|p| p.pid == member.pid) {
            helpers.push(member);
        }
    }
    // SAFETY: getpgid takes an integer and touches no memory of ours.
    helpers.retain(|p| p.pid != group && unsafe { libc::getpgid(p.pid as libc::pid_t) } != group as libc::pid_t);
    helpers
}

/// What becomes of each helper by the end of the grace period and the report's slack.
fn watch_helpers(helpers: Vec<ProcessInfo>, grace_end: Instant) -> Vec<(ProcessInfo, Fate)> {
    let deadline = grace_end + KILL_REPORT_SLACK;
    let mut fates = vec![Fate::Running; helpers.len()];
    while !helpers.is_empty() {
        for (helper, fate) in helpers.iter().zip(fates.iter_mut()) {
            if *fate == Fate::Running && !desk_common::procfs::alive(helper.pid) {
                // The clock is read after the death is seen, never before: a reading taken
                // earlier (this process may be descheduled in between, on a loaded machine)
                // would call a helper the master killed at the end of the grace period "ended".
                *fate = if Instant::now() < grace_end { Fate::Ended } else { Fate::Killed };
            }
        }
        if fates.iter().all(|f| *f != Fate::Running) || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(HELPER_POLL);
    }
    helpers.into_iter().zip(fates).collect()
}

/// `desk kill --json`'s `data`.
#[derive(Serialize)]
struct KillJson<'a> {
    name: &'a str,
    signal: &'a str,
    /// How the session ended; `null` with `--grace 0` (not waited for).
    exit: Option<KillExit>,
    helpers: Vec<HelperJson<'a>>,
}

#[derive(Serialize)]
struct KillExit {
    code: Option<i32>,
    signal: Option<i32>,
    escalated: bool,
}

#[derive(Serialize)]
struct HelperJson<'a> {
    pid: u32,
    command: &'a str,
    /// `ended`, `killed` (SIGKILL after the grace period) or `running`.
    fate: &'static str,
}

impl KillReport {
    fn survivors(&self) -> impl Iterator<Item = &ProcessInfo> {
        self.helpers.iter().filter(|(_, fate)| *fate == Fate::Running).map(|(p, _)| p)
    }

    /// The report for people; exit status 1 when a helper outlived the deadline.
    fn print_text(&self, ids: &crate::cli::output::Ids) -> i32 {
        let (name, sig) = (ids.session(self.name.as_str()), &self.signal);
        let Some((status, escalated)) = self.ended else {
            println!("sent {sig} to session {name} (process group {})", self.group);
            return 0;
        };
        let how = desk_common::signals::describe_exit(status);
        if escalated {
            let grace = self.grace.as_secs_f64();
            println!("session {name} was still running {grace} s after {sig}; sent SIGKILL; then it {how}");
        } else {
            println!("sent {sig} to session {name}; it {how}");
        }
        if self.helpers.is_empty() {
            return 0;
        }
        println!("{} helper process(es) of session {name} ran outside its process group:", self.helpers.len());
        for (p, fate) in self.helpers.iter().filter(|(_, fate)| *fate != Fate::Running) {
            println!("  pid {}: {}: {}", p.pid, p.command, fate.words());
        }
        let survivors: Vec<&ProcessInfo> = self.survivors().collect();
        if survivors.is_empty() {
            return 0;
        }
        eprintln!("desk: {} process(es) of session {name} are still running:", survivors.len());
        for p in survivors {
            eprintln!("  pid {}: {}", p.pid, p.command);
        }
        1
    }

    /// The report as one JSON document; a helper that outlived the deadline makes it a failure.
    fn print_json(&self) -> Result<i32> {
        let survivors: Vec<String> = self.survivors().map(|p| p.pid.to_string()).collect();
        if !survivors.is_empty() {
            return Err(fail(
                ErrorCode::Failed,
                format!(
                    "{} process(es) of session {} are still running: pid {}",
                    survivors.len(),
                    self.name,
                    survivors.join(", ")
                ),
            ));
        }
        let exit = self.ended.map(|(status, escalated)| {
            let (code, signal) = match status {
                ExitStatus::Code(c) => (Some(c), None),
                ExitStatus::Signal(s) => (None, Some(s)),
            };
            KillExit { code, signal, escalated }
        });
        let helpers = self
            .helpers
            .iter()
            .map(|(p, fate)| HelperJson { pid: p.pid, command: &p.command, fate: fate.name() })
            .collect();
        let data = KillJson { name: self.name.as_str(), signal: &self.signal, exit, helpers };
        output::print_ok("kill", data, &[])?;
        Ok(0)
    }
}
