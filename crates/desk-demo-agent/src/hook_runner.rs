//! Running one hook command, bounded in time.
//!
//! Owns the child process of one hook invocation: `sh -c CMD` in its own process group, the
//! event's JSON on its stdin, its stdout and stderr discarded (they must never reach the
//! agent's terminal). Invariants: [`run_hook`] returns within the timeout plus a few
//! milliseconds whatever the command does — it does not read its stdin, never exits, or forks
//! children that keep running — because on the deadline the whole process group is killed and
//! reaped; and it never panics or aborts the agent: every failure is a [`HookError`] the caller
//! reports and ignores.

use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

/// 1 ms: first pause between checks for the hook's exit; doubled up to [`WAIT_STEP_MAX`]. Most
/// hooks (`cat >> file`) finish in about a millisecond, so the first checks come quickly.
const WAIT_STEP_MIN: Duration = Duration::from_millis(1);
/// 20 ms: longest pause between checks, so a slow hook costs at most this much extra latency.
const WAIT_STEP_MAX: Duration = Duration::from_millis(20);

#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("cannot start `sh -c` for the hook: {0}")]
    Spawn(std::io::Error),
    #[error("cannot give the hook its input: {0}")]
    Input(std::io::Error),
    #[error("the hook did not finish within {0:?} and was killed")]
    Timeout(Duration),
    #[error("the hook exited unsuccessfully ({0})")]
    Failed(ExitStatus),
    #[error("cannot wait for the hook: {0}")]
    Wait(std::io::Error),
}

/// Run `sh -c cmd` in `cwd` with `input` on stdin; wait at most `timeout` in total.
pub fn run_hook(cmd: &str, input: &[u8], cwd: &Path, timeout: Duration) -> Result<(), HookError> {
    let deadline = Instant::now() + timeout;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(cwd)
        .env("CLAUDE_PROJECT_DIR", cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(HookError::Spawn)?;
    let fed = feed_stdin(&mut child, input, deadline);
    let waited = wait_until(&mut child, deadline);
    match (fed, waited) {
        (_, Err(e)) => Err(e),
        (Err(HookError::Timeout(_)), Ok(_)) => {
            kill_group(&mut child);
            Err(HookError::Timeout(timeout))
        }
        (Err(e), Ok(_)) => Err(e),
        (Ok(()), Ok(None)) => {
            kill_group(&mut child);
            Err(HookError::Timeout(timeout))
        }
        (Ok(()), Ok(Some(status))) if status.success() => Ok(()),
        (Ok(()), Ok(Some(status))) => Err(HookError::Failed(status)),
    }
}

/// Write `input` to the child's stdin without blocking past `deadline`, then close it. A hook
/// that exits without reading its input is not an error.
fn feed_stdin(child: &mut Child, input: &[u8], deadline: Instant) -> Result<(), HookError> {
    let Some(mut stdin) = child.stdin.take() else {
        return Ok(());
    };
    let flags = fcntl(stdin.as_fd(), FcntlArg::F_GETFL).map_err(|e| HookError::Input(e.into()))?;
    let flags = OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK;
    fcntl(stdin.as_fd(), FcntlArg::F_SETFL(flags)).map_err(|e| HookError::Input(e.into()))?;
    let mut rest = input;
    while !rest.is_empty() {
        match stdin.write(rest) {
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(HookError::Timeout(Duration::ZERO));
                }
                let ms = u16::try_from(left.as_millis().max(1)).unwrap_or(u16::MAX);
                let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLOUT)];
                match poll(&mut fds, PollTimeout::from(ms)) {
                    Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                    Err(e) => return Err(HookError::Input(e.into())),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(HookError::Input(e)),
        }
    }
    Ok(())
}

/// The child's exit status if it exits before `deadline`, `None` if it is still running then.
fn wait_until(child: &mut Child, deadline: Instant) -> Result<Option<ExitStatus>, HookError> {
    let mut step = WAIT_STEP_MIN;
    loop {
        if let Some(status) = child.try_wait().map_err(HookError::Wait)? {
            return Ok(Some(status));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        std::thread::sleep(step.min(left));
        step = (step * 2).min(WAIT_STEP_MAX);
    }
}

/// Kill the hook's whole process group and reap the hook itself.
fn kill_group(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_receives_its_input() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("out");
        let cmd = format!("cat > '{}'", out.display());
        run_hook(&cmd, b"{\"a\":1}\n", dir.path(), Duration::from_secs(5)).expect("hook ran");
        assert_eq!(std::fs::read(&out).expect("output"), b"{\"a\":1}\n");
    }

    #[test]
    fn failing_hook_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = run_hook("exit 7", b"x", dir.path(), Duration::from_secs(5));
        assert!(matches!(err, Err(HookError::Failed(_))), "{err:?}");
    }

    #[test]
    fn hung_hook_is_killed_at_the_deadline() {
        let dir = tempfile::tempdir().expect("tempdir");
        let start = Instant::now();
        let err = run_hook("sleep 30", b"", dir.path(), Duration::from_millis(200));
        assert!(matches!(err, Err(HookError::Timeout(_))), "{err:?}");
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn hook_that_never_reads_a_large_input_is_bounded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let big = vec![b'x'; 4 << 20];
        let start = Instant::now();
        let err = run_hook("sleep 30", &big, dir.path(), Duration::from_millis(200));
        assert!(matches!(err, Err(HookError::Timeout(_))), "{err:?}");
        assert!(start.elapsed() < Duration::from_secs(5));
    }
}
