//! Starting a desk process that outlives its starter: a session's master, the daemon.
//!
//! Owns the one way desk detaches a process of its own and hears whether it started: the child
//! gets a session of its own (`setsid`, so no terminal's signals reach it), no standard streams,
//! no descriptor of its starter but the write end of a pipe as [`READY_FD`], on which it writes
//! one line once it is ready — `ok`, or why it is not ([`Ready`]). Invariants: between fork and
//! exec only async-signal-safe calls; the starter waits for the report at most its timeout and
//! never reads more than [`MAX_REPORT`]; a child that closes the pipe without a word has died.

use anyhow::{Context, Result};
use std::fs::File;
use std::io::Write as _;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The descriptor a detached child reports on.
pub const READY_FD: i32 = 3;

/// 64 KiB of report: far more than one line of error needs, and a child that writes more (a
/// runaway loop) cannot make its starter read without end.
pub const MAX_REPORT: usize = 64 * 1024;

/// What a detached child says on [`READY_FD`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ready {
    /// It runs.
    Ok,
    /// Another process already does its work (the daemon's lock is held); its words.
    AlreadyRunning(String),
    /// It could not start; its words.
    Failed(String),
    /// It closed the pipe without a word: it died while starting.
    Died,
}

/// The tag of [`Ready::AlreadyRunning`] on the pipe, before its words.
const ALREADY_RUNNING: &str = "already-running: ";

impl Ready {
    /// The line a child writes.
    fn line(&self) -> String {
        match self {
            Ready::Ok => "ok".into(),
            Ready::AlreadyRunning(why) => format!("{ALREADY_RUNNING}{why}"),
            Ready::Failed(why) => why.clone(),
            Ready::Died => String::new(),
        }
    }

    /// A report as its starter reads it. A report with no tag is a failure's words (a master
    /// writes `ok` or why it could not start).
    fn parse(text: &str) -> Ready {
        match text.trim() {
            "" => Ready::Died,
            "ok" => Ready::Ok,
            text => match text.strip_prefix(ALREADY_RUNNING) {
                Some(why) => Ready::AlreadyRunning(why.to_string()),
                None => Ready::Failed(text.to_string()),
            },
        }
    }

    /// The child's side: say it, once, on the pipe its starter gave it.
    pub fn report(&self, fd: OwnedFd) {
        let mut pipe = File::from(fd);
        let _ = writeln!(pipe, "{}", self.line());
    }
}

/// Start `cmd` detached, with the write end of a report pipe as [`READY_FD`]; returns the
/// child and the read end ([`wait_ready`]).
pub fn spawn(mut cmd: Command) -> Result<(Child, OwnedFd)> {
    let (read_end, write_end) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("cannot create a pipe")?;
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    let pipe_fd = write_end.as_raw_fd();
    // SAFETY: between fork and exec only async-signal-safe calls: setsid, dup2, fcntl, close.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            if pipe_fd == READY_FD {
                if libc::fcntl(READY_FD, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(pipe_fd, READY_FD) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // Whatever else our caller leaked to us must not reach the child.
            crate::pty::cloexec_from(READY_FD as libc::c_uint + 1);
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    drop(write_end);
    Ok((child, read_end))
}

/// The starter's side: the child's report, waiting at most `timeout`; `Err` when none came in
/// time (the child is left to the caller).
pub fn wait_ready(read_end: OwnedFd, timeout: Duration) -> Result<Ready, NoReport> {
    let mut fds = [nix::poll::PollFd::new(read_end.as_fd(), nix::poll::PollFlags::POLLIN)];
    let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
    match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms)) {
        Ok(0) => return Err(NoReport::TimedOut(timeout)),
        Ok(_) => {}
        Err(e) => return Err(NoReport::Poll(e)),
    }
    let bytes = crate::fsutil::read_bounded(File::from(read_end), MAX_REPORT, "the report").unwrap_or_default();
    Ok(Ready::parse(&String::from_utf8_lossy(&bytes)))
}

/// Why no report was read.
#[derive(Debug, thiserror::Error)]
pub enum NoReport {
    #[error("no report within {} s", .0.as_secs())]
    TimedOut(Duration),
    #[error("cannot wait for the report: {0}")]
    Poll(nix::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_reads_back_as_it_was_written() {
        for ready in [
            Ready::Ok,
            Ready::AlreadyRunning("desk serve is already running (pid 7)".into()),
            Ready::Failed("no".into()),
            Ready::Died,
        ] {
            assert_eq!(Ready::parse(&format!("{}\n", ready.line())), ready);
        }
    }

    #[test]
    fn a_detached_child_reports_on_its_pipe_in_a_session_of_its_own() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "[ \"$(ps -o sid= -p $$)\" -eq $$ ] && echo ok >&3 || echo 'not a session leader' >&3"]);
        let (mut child, read_end) = spawn(cmd).unwrap();
        assert_eq!(wait_ready(read_end, Duration::from_secs(10)).unwrap(), Ready::Ok);
        child.wait().unwrap();
        let (mut child, read_end) = spawn(Command::new("true")).unwrap();
        assert_eq!(wait_ready(read_end, Duration::from_secs(10)).unwrap(), Ready::Died);
        child.wait().unwrap();
    }
}
