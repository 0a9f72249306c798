//! Starting `desk serve` in the background, and the daemon's side of its start-up report.
//!
//! Owns how a command starts the daemon detached (`desk serve` without `--foreground`, and
//! autostart): the program it runs (`EXE serve --foreground`, with the report pipe named in
//! `DESK_SERVE_READY_FD`), and what its report means ([`StartError`]). The detaching itself is
//! `desk_common::detach`'s, shared with the masters. Invariant: `start_detached` returns only
//! once the daemon listens, or with why it does not, within [`START_TIMEOUT`].

use std::path::Path;
use std::time::Duration;

use desk_common::detach::{self, READY_FD, Ready};

/// How a daemon started in the background finds its report pipe.
pub const READY_ENV: &str = "DESK_SERVE_READY_FD";

/// 10 s for a daemon to say it listens: it takes milliseconds (open the store, bind the
/// socket); the bound is for a hung filesystem, not for normal starts.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a daemon started in the background is not running.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Another daemon holds the lock; its words (with its pid).
    #[error("{0}")]
    AlreadyRunning(String),
    /// It said why it could not start.
    #[error("{0}")]
    Failed(String),
    /// It ended without a word.
    #[error("desk serve died while starting ({0})")]
    Died(String),
    /// It could not be started at all, or did not report in time.
    #[error("{0:#}")]
    Spawn(anyhow::Error),
}

/// Start `exe serve --foreground` detached and return its pid once it listens.
pub fn start_detached(exe: &Path) -> Result<u32, StartError> {
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["serve", "--foreground"]).env(READY_ENV, READY_FD.to_string());
    let (mut child, ready) = detach::spawn(cmd).map_err(|e| StartError::Spawn(e.context("cannot start desk serve")))?;
    let report = match detach::wait_ready(ready, START_TIMEOUT) {
        Ok(report) => report,
        // Left running: it may yet start (a slow disk), and then it is the daemon.
        Err(e) => return Err(StartError::Spawn(anyhow::anyhow!("desk serve did not say it listens: {e}"))),
    };
    if report == Ready::Ok {
        return Ok(child.id());
    }
    let status = child.wait().ok();
    Err(match report {
        Ready::AlreadyRunning(why) => StartError::AlreadyRunning(why),
        Ready::Failed(why) => StartError::Failed(why),
        _ => StartError::Died(format!("{status:?}")),
    })
}

/// The report pipe a starter gave this process, if it was started by [`start_detached`].
pub fn ready_pipe() -> Option<std::os::fd::OwnedFd> {
    let fd = std::env::var(READY_ENV).ok()?.parse::<i32>().ok()?;
    // SAFETY: the variable names the descriptor `start_detached` left open for this process
    // (the variable is internal to that handshake); it is taken once, here.
    Some(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
}
