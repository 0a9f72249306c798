//! `desk serve`: run the delivery daemon in the foreground, start it detached, or stop it.

use anyhow::Result;
use std::time::Duration;

use super::{REQUEST_TIMEOUT, paths, request};
use crate::cli::failure;
use desk_core::delivery::answer::Pid;
use desk_wire::control::Request;

/// How often `desk serve --stop` looks whether the daemon's process is gone: it exits within
/// milliseconds of answering, and a stop is not in a hurry.
const STOP_POLL: Duration = Duration::from_millis(20);

pub(in crate::cli) fn serve(foreground: bool, stop: bool) -> Result<i32> {
    let paths = paths()?;
    let report = if stop {
        if crate::autostart::daemon_down(&paths) {
            // What the caller wanted is true already; a script stopping desk is not an error.
            ServeReport::NotRunning
        } else {
            stop_daemon(&paths)?
        }
    } else if foreground {
        desk_daemon::run(desk_daemon::spawn::ready_pipe())?;
        return Ok(0);
    } else {
        ServeReport::Started { pid: crate::autostart::start_detached()? }
    };
    report.render();
    Ok(0)
}

/// Ask the daemon to stop, then wait for its process: stopped means gone, not just promised.
fn stop_daemon(paths: &desk_common::paths::Paths) -> Result<ServeReport> {
    let answer = request(paths, &Request::Stop, REQUEST_TIMEOUT)?
        .into_answer::<Pid>()
        .map_err(|e| failure(1, format!("desk serve did not stop: {}", e.message)))?;
    let pid = nix::unistd::Pid::from_raw(answer.data.pid as i32);
    let deadline = std::time::Instant::now() + REQUEST_TIMEOUT;
    // A zombie has stopped too (its reaper may be slow, or absent in a container).
    let running = || {
        nix::sys::signal::kill(pid, None).is_ok()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z ")
    };
    while running() {
        if std::time::Instant::now() > deadline {
            return Err(failure(1, format!("desk serve (pid {pid}) said it was stopping but still runs")));
        }
        std::thread::sleep(STOP_POLL);
    }
    Ok(ServeReport::Stopped)
}

/// What `desk serve` did (it has no JSON form: a script reads its exit code).
enum ServeReport {
    /// `--stop`, and there was nothing to stop.
    NotRunning,
    /// `--stop`, and the daemon's process is gone.
    Stopped,
    /// Started detached.
    Started { pid: u32 },
}

impl ServeReport {
    fn render(&self) {
        match self {
            ServeReport::NotRunning => println!("desk serve is not running; nothing to stop"),
            ServeReport::Stopped => println!("desk serve stopped"),
            ServeReport::Started { pid } => println!("desk serve started (pid {pid})"),
        }
    }
}
