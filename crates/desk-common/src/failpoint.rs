//! Crash failpoints: the tests' way to kill a process, or fail a write, at a named step.
//!
//! Owns reading `DESK_FAILPOINT` and acting on it. Invariant: without the `failpoints` feature
//! (every release build) a failpoint is nothing at all and the variable is never read. The
//! steps themselves are named where they are (the delivery pipeline's in
//! `desk_daemon::store::FAILPOINTS`).

/// The crash points of a session's start: the CLI killed after it wrote the generation counter
/// and the launch record, before it started the master (`src/launch/start.rs`); the master
/// killed after it reported ready, before it made the start's records durable
/// (`desk_master`'s `durable_start`). `tests/it/sessions.rs` stops at each.
pub const FAILPOINTS: [&str; 2] = ["new-before-master", "master-after-ready"];

/// Kill the process here when `DESK_FAILPOINT` names this step: the crash tests' way to stop
/// the daemon at every step of the pipeline. SIGKILL, like the OOM killer: nothing runs on the
/// way out, and no core file is left behind. Compiled only with the `failpoints` feature (the
/// test and bench builds enable it through the desk package's dev-dependency on itself); a
/// release build ignores `DESK_FAILPOINT`.
#[cfg(feature = "failpoints")]
pub fn failpoint(step: &str) {
    if std::env::var("DESK_FAILPOINT").is_ok_and(|v| v == step) {
        tracing::warn!("failpoint {step}: killing this process");
        let _ = nix::sys::signal::kill(nix::unistd::getpid(), nix::sys::signal::Signal::SIGKILL);
    }
}

/// Without the `failpoints` feature a failpoint is nothing at all.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn failpoint(_step: &str) {}

/// Fail here with "no space left on device" when `DESK_FAILPOINT` names this step: the tests'
/// way to make a step that writes a file fail as it does on a full disk, without filling one.
/// Compiled only with the `failpoints` feature, like [`failpoint`]; otherwise it never fails.
pub fn failpoint_full_disk(step: &str) -> std::io::Result<()> {
    if cfg!(feature = "failpoints") && std::env::var("DESK_FAILPOINT").is_ok_and(|v| v == step) {
        return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
    }
    Ok(())
}

/// Whether a failpoint may fire in this process: the feature is compiled in and
/// `DESK_FAILPOINT` is set (the daemon then flushes writes before a failpoint, so the crash
/// comes after the bytes reached the master).
pub fn failpoints_armed() -> bool {
    cfg!(feature = "failpoints") && std::env::var_os("DESK_FAILPOINT").is_some()
}
