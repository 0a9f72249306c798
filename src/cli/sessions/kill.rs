//! `desk kill` and the quiet stop `desk up`, `down` and `restart` use.

#[allow(unused_imports)]
use super::*;

/// Extra time `desk kill` waits for the exit report beyond the grace period (the master needs a
/// moment to reap, record and report after SIGKILL).
const KILL_REPORT_SLACK: Duration = Duration::from_secs(5);

/// How often `desk kill` looks whether the helpers it reports are gone: a tenth of the smallest
/// useful grace period, and cheap (one `kill(pid, 0)` per helper).
const HELPER_POLL: Duration = Duration::from_millis(20);

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
pub(in crate::cli) fn kill(name: &SessionName, signal: i32, grace: f64, json: bool, by: &str) -> Result<i32> {
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
