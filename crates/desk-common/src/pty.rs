//! Pseudo-terminals and the child process on them.
//!
//! Owns opening a PTY pair, starting the child as a session leader with the slave as its
//! controlling terminal, and the small fd operations the master needs (size, non-blocking).
//! Invariants: the child starts with the requested window size already set (never 0x0), a clean
//! signal mask, default dispositions for every catchable signal, and none of desk's descriptors
//! (the master fd is CLOEXEC and non-blocking before the child is spawned). With
//! [`spawn_gated`], the child's program does not start before the caller's step that needs its
//! pid (the master's session record) is done: the forked child waits on a pipe, the gate, until
//! the caller opens it — or closes it, when that step failed: the child holds only its own ends
//! of the pipes, so it then sees the end of the gate and exits without running the program.

use anyhow::{Context, Result};
use nix::fcntl::{FcntlArg, FdFlag, OFlag, fcntl};
use nix::pty::{Winsize, openpty};
use std::ffi::{CString, OsString};
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use desk_wire::Foreground;

/// What to run on a new PTY.
#[derive(Debug, Clone)]
pub struct Spawn {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub cwd: Option<PathBuf>,
    /// Variables set on top of the inherited environment.
    pub env: Vec<(OsString, OsString)>,
    pub cols: u16,
    pub rows: u16,
}

/// A running child on a PTY.
#[derive(Debug)]
pub struct Child {
    /// The PTY master: non-blocking, close-on-exec.
    pub master: OwnedFd,
    /// The child's pid, which is also its process group and session id.
    pub pid: u32,
}

fn winsize(cols: u16, rows: u16) -> Winsize {
    Winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 }
}

/// Start `spec` on a fresh PTY.
pub fn spawn(spec: &Spawn) -> Result<Child> {
    spawn_gated(spec, |_| Ok(()))
}

/// Start `spec` on a fresh PTY, running `before_exec` with the child's pid after the fork and
/// before the child's program starts. Anything the program could look for early (the session
/// record its own `desk attach` reads) is then in place when it runs. When `before_exec` fails
/// the program never starts and its error is returned.
///
/// Forks on the calling thread (no thread of its own, no pipe for the pid: `fork` returns it)
/// and learns the outcome of the exec from a close-on-exec pipe, as the standard library's
/// `Command` does: its end means the program runs; four bytes are the errno of the step that
/// failed. `desk new` waits on all of this (docs/benchmarks.md §25).
pub fn spawn_gated(spec: &Spawn, before_exec: impl FnOnce(u32) -> Result<()>) -> Result<Child> {
    let pty = openpty(Some(&winsize(spec.cols, spec.rows)), None).context("cannot open a pseudo-terminal")?;
    set_cloexec(pty.master.as_fd())?;
    set_cloexec(pty.slave.as_fd())?;
    set_nonblocking(pty.master.as_fd())?;
    let exec = Exec::prepare(spec)?;
    let program = spec.program.to_string_lossy();
    let last_signal = libc::SIGRTMAX();
    // The child reads `gate_rx` until a byte (go) or the end (the parent gave up), and reports
    // a failure on `error_tx`. Both pipes are CLOEXEC: the program inherits neither.
    let (gate_rx, gate_tx) = nix::unistd::pipe2(OFlag::O_CLOEXEC).context("cannot create a pipe")?;
    let (error_rx, error_tx) = nix::unistd::pipe2(OFlag::O_CLOEXEC).context("cannot create a pipe")?;
    let slave = pty.slave.as_raw_fd();
    let (gate_fd, error_fd) = (gate_rx.as_raw_fd(), error_tx.as_raw_fd());
    let parent_ends = [gate_tx.as_raw_fd(), error_rx.as_raw_fd()];
    // Signals stay blocked across the fork, so none of the master's handlers runs in the child
    // before it has reset them; the parent restores its mask at once.
    // SAFETY: a zeroed sigset_t is a valid (empty) set; sigfillset and pthread_sigmask write
    // only the sets we own.
    let old = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        old
    };
    // SAFETY: after the fork the child calls only async-signal-safe functions (close, dup2,
    // fcntl, chdir, setsid, ioctl, signal, sigprocmask, read, write, execve, _exit) on memory
    // prepared before it, and allocates nothing.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: in the child, see above; `child_exec` returns only with the errno of a failure.
        unsafe {
            let errno = child_exec(&exec, slave, parent_ends, gate_fd, last_signal).to_ne_bytes();
            libc::write(error_fd, errno.as_ptr().cast(), errno.len());
            libc::_exit(127);
        }
    }
    let forked = std::io::Error::last_os_error();
    // SAFETY: restores the mask saved above.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
    drop((gate_rx, error_tx, pty.slave));
    if pid < 0 {
        return Err(anyhow::Error::new(forked).context(format!("could not execute {program}")));
    }
    let before = before_exec(pid as u32);
    let mut gate = std::fs::File::from(gate_tx);
    if before.is_ok() {
        // A failed write closes the gate all the same: the child then gives up.
        let _ = gate.write_all(&[1]);
    }
    drop(gate);
    let execed = exec_outcome(error_rx);
    if before.is_err() || execed.is_err() {
        reap(pid);
    }
    before?;
    execed.with_context(|| format!("could not execute {program}"))?;
    Ok(Child { master: pty.master, pid: pid as u32 })
}

/// The child's program, its arguments and environment as the exec takes them, prepared before
/// the fork (the child may not allocate).
struct Exec {
    /// The program as given: what `execvpe` searches `PATH` for.
    program: CString,
    /// The first file of `PATH` that `execvpe` would run, found before the fork (see
    /// [`resolve`]); `None`: leave the search to `execvpe`.
    resolved: Option<CString>,
    cwd: Option<CString>,
    /// Owners of the pointers below.
    _args: Vec<CString>,
    _env: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

impl Exec {
    fn prepare(spec: &Spawn) -> Result<Exec> {
        let c = |s: &std::ffi::OsStr| {
            CString::new(s.as_bytes()).with_context(|| format!("{} contains a NUL byte", s.to_string_lossy()))
        };
        let program = c(&spec.program)?;
        let args: Vec<CString> =
            std::iter::once(&spec.program).chain(&spec.args).map(|a| c(a)).collect::<Result<_>>()?;
        // The inherited environment with the spec's variables on top, a later one winning, as
        // `Command::env` makes it.
        let mut vars: std::collections::BTreeMap<OsString, OsString> = std::env::vars_os().collect();
        for (key, value) in &spec.env {
            vars.insert(key.clone(), value.clone());
        }
        let resolved = vars.get(std::ffi::OsStr::new("PATH")).and_then(|path| resolve(&spec.program, path));
        let env: Vec<CString> = vars
            .iter()
            .map(|(k, v)| {
                let mut pair = k.clone();
                pair.push("=");
                pair.push(v);
                c(&pair)
            })
            .collect::<Result<_>>()?;
        let cwd = spec.cwd.as_ref().map(|d| c(d.as_os_str())).transpose()?;
        let argv = args.iter().map(|a| a.as_ptr()).chain(std::iter::once(std::ptr::null())).collect();
        let envp = env.iter().map(|e| e.as_ptr()).chain(std::iter::once(std::ptr::null())).collect();
        Ok(Exec { program, resolved, cwd, _args: args, _env: env, argv, envp })
    }
}

/// The file `execvpe` would run for `program` with `path` as `PATH`, where that can be told
/// without trying: the first `DIR/program` of an absolute directory of `path` that is an
/// executable regular file, every directory before it having none (a missing file or a
/// directory, which `execvpe` passes over too). `None` — the program has a slash, or an entry
/// is relative or cannot be looked at — leaves the search to `execvpe` in the child. The
/// child still falls back to `execvpe` when the resolved file fails to run, so this only saves
/// the failed `execve` of each directory before the right one (nine on a common `PATH`).
fn resolve(program: &std::ffi::OsStr, path: &std::ffi::OsStr) -> Option<CString> {
    use std::os::unix::fs::PermissionsExt;
    if program.is_empty() || program.as_bytes().contains(&b'/') {
        return None;
    }
    for dir in path.as_bytes().split(|&b| b == b':') {
        if dir.first() != Some(&b'/') {
            return None;
        }
        let candidate = std::path::Path::new(std::ffi::OsStr::from_bytes(dir)).join(program);
        match std::fs::metadata(&candidate) {
            Ok(meta) if meta.is_file() && meta.permissions().mode() & 0o111 != 0 => {
                let candidate = CString::new(candidate.into_os_string().into_vec()).ok()?;
                // SAFETY: access reads the NUL-terminated path we own.
                if unsafe { libc::access(candidate.as_ptr(), libc::X_OK) } == 0 {
                    return Some(candidate);
                }
            }
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {}
            Err(_) => return None,
        }
    }
    None
}

/// The child's side of [`spawn_gated`], between the fork and the exec: the PTY's slave as its
/// standard streams and controlling terminal, a session of its own, clean signals, none of
/// desk's descriptors, the gate, then the program. Returns the errno of the step that failed.
///
/// # Safety
/// Only in the child of a fork, with `exec` prepared before it.
unsafe fn child_exec(exec: &Exec, slave: RawFd, parent_ends: [RawFd; 2], gate_fd: RawFd, last_signal: i32) -> i32 {
    let errno = || std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
    // SAFETY: every call below is async-signal-safe and touches only memory prepared before
    // the fork.
    unsafe {
        // The fork copied the parent's ends of both pipes too. Holding the gate's write end
        // itself, the child would never see the end of the pipe when the parent gives up (its
        // `before_exec` failed), and would wait for ever.
        for fd in parent_ends {
            libc::close(fd);
        }
        for target in 0..=2 {
            if slave == target {
                // dup2 onto itself would keep the flag: clear it, so the program keeps it.
                if libc::fcntl(slave, libc::F_SETFD, 0) == -1 {
                    return errno();
                }
            } else if libc::dup2(slave, target) == -1 {
                return errno();
            }
        }
        if let Some(cwd) = &exec.cwd
            && libc::chdir(cwd.as_ptr()) == -1
        {
            return errno();
        }
        if libc::setsid() == -1 {
            return errno();
        }
        if libc::ioctl(0, libc::TIOCSCTTY as _, 0) == -1 {
            return errno();
        }
        // Every signal, real-time ones included, back to its default: whoever started desk
        // may have ignored some, and the child must not inherit that.
        for signal in 1..=last_signal {
            if signal != libc::SIGKILL && signal != libc::SIGSTOP {
                libc::signal(signal, libc::SIG_DFL);
            }
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        cloexec_from(3);
        let mut go = 0u8;
        loop {
            match libc::read(gate_fd, (&raw mut go).cast(), 1) {
                1 => break,
                0 => return libc::ECANCELED,
                _ if errno() == libc::EINTR => {}
                _ => return errno(),
            }
        }
        if let Some(resolved) = &exec.resolved {
            libc::execve(resolved.as_ptr(), exec.argv.as_ptr(), exec.envp.as_ptr());
        }
        libc::execvpe(exec.program.as_ptr(), exec.argv.as_ptr(), exec.envp.as_ptr());
        errno()
    }
}

/// Whether the child's program runs: the end of its error pipe (closed by the exec), or the
/// errno the child sent before it exited.
fn exec_outcome(error_rx: OwnedFd) -> std::io::Result<()> {
    let mut errno = [0u8; 4];
    let mut pipe = std::fs::File::from(error_rx);
    let mut got = 0;
    while got < errno.len() {
        match pipe.read(&mut errno[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    match got {
        0 => Ok(()),
        4 => Err(std::io::Error::from_raw_os_error(i32::from_ne_bytes(errno))),
        _ => Err(std::io::Error::other("the child's report of its failure was cut short")),
    }
}

/// Wait for a child that gave up before its program ran, so it leaves no zombie.
fn reap(pid: libc::pid_t) {
    loop {
        // SAFETY: waitpid on our own child, with no status pointer.
        let rc = unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        if rc != -1 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
    }
}

/// Mark every descriptor from `first` up close-on-exec, so a child never inherits one that
/// reached us without the flag (whoever started desk may have leaked some). Marking rather than
/// closing keeps the standard library's exec-error pipe working. Async-signal-safe: for use
/// between fork and exec.
pub fn cloexec_from(first: libc::c_uint) {
    // SAFETY: close_range and fcntl are async-signal-safe system calls on plain integers.
    unsafe {
        if libc::syscall(libc::SYS_close_range, first, libc::c_uint::MAX, libc::CLOSE_RANGE_CLOEXEC) == 0 {
            return;
        }
        // Kernels before 5.11: walk the descriptor table.
        let max = libc::sysconf(libc::_SC_OPEN_MAX);
        let max = if max <= 0 { 65536 } else { max.min(1 << 20) as libc::c_int };
        for fd in first as libc::c_int..max {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
}

pub fn set_cloexec(fd: BorrowedFd<'_>) -> Result<()> {
    fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).context("cannot set FD_CLOEXEC")?;
    Ok(())
}

pub fn set_nonblocking(fd: BorrowedFd<'_>) -> Result<()> {
    let flags = fcntl(fd, FcntlArg::F_GETFL).context("cannot read file status flags")?;
    let flags = OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK;
    fcntl(fd, FcntlArg::F_SETFL(flags)).context("cannot set O_NONBLOCK")?;
    Ok(())
}

/// Whether the terminal behind `fd` is in canonical (line-edited) mode. For a PTY master this
/// reads the slave's settings, i.e. what the child asked for.
pub fn is_canonical(fd: BorrowedFd<'_>) -> bool {
    nix::sys::termios::tcgetattr(fd).is_ok_and(|t| t.local_flags.contains(nix::sys::termios::LocalFlags::ICANON))
}

/// The path of the terminal behind the PTY master `fd` (`/dev/pts/N`), as the child's
/// descriptors name it in `/proc/PID/fd`.
pub fn slave_name(fd: BorrowedFd<'_>) -> Option<String> {
    let mut number: libc::c_uint = 0;
    // SAFETY: TIOCGPTN writes one unsigned int through the pointer, which outlives the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGPTN, &raw mut number) };
    (rc == 0).then(|| format!("/dev/pts/{number}"))
}

/// Who has the terminal behind the PTY master `fd`: its foreground process group (asked of the
/// master side, which the kernel answers for the slave), whether that is the group of the
/// session's program `program_pid` (a session leader, so its group id is its pid), the
/// program the group's leader runs, and — in canonical mode only, where the kernel holds a typed
/// line until someone reads it — whether a process of the group waits reading the terminal
/// `tty`. `None` when the terminal has no foreground group (the session is gone).
pub fn foreground(fd: BorrowedFd<'_>, program_pid: u32, tty: Option<&str>, canonical: bool) -> Option<Foreground> {
    let pgid = nix::unistd::tcgetpgrp(fd).ok()?.as_raw();
    let pgid = u32::try_from(pgid).ok().filter(|p| *p > 0)?;
    let reading = match tty {
        Some(tty) if canonical => crate::procfs::group_reads_terminal(pgid, tty),
        _ => None,
    };
    let program = crate::procfs::comm(pgid).unwrap_or_default();
    Some(Foreground { pgid, program, own: pgid == program_pid, reading })
}

nix::ioctl_write_ptr_bad!(set_winsize_ioctl, libc::TIOCSWINSZ, Winsize);
nix::ioctl_read_bad!(get_winsize_ioctl, libc::TIOCGWINSZ, Winsize);

/// Set the window size of the terminal behind `fd` (the kernel then signals SIGWINCH to the
/// terminal's foreground process group).
pub fn set_size(fd: BorrowedFd<'_>, cols: u16, rows: u16) -> Result<()> {
    let ws = winsize(cols, rows);
    // SAFETY: `fd` is a valid descriptor for the duration of the call and `ws` outlives it.
    unsafe { set_winsize_ioctl(fd.as_raw_fd(), &ws) }.context("cannot set the window size")?;
    Ok(())
}

/// Read the window size of the terminal behind `fd`, as (cols, rows).
pub fn get_size(fd: BorrowedFd<'_>) -> Result<(u16, u16)> {
    let mut ws = winsize(0, 0);
    // SAFETY: `fd` is valid for the call and `ws` is a properly aligned Winsize.
    unsafe { get_winsize_ioctl(fd.as_raw_fd(), &mut ws) }.context("cannot read the window size")?;
    Ok((ws.ws_col, ws.ws_row))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn resolve_finds_the_first_executable_file_execvp_would_run() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("c"));
        for d in [&a, &b, &c] {
            std::fs::create_dir(d).unwrap();
        }
        // a: a directory of the name, b: a file that may not be run, c: the program.
        std::fs::create_dir(a.join("prog")).unwrap();
        std::fs::write(b.join("prog"), "").unwrap();
        std::fs::write(c.join("prog"), "").unwrap();
        std::fs::set_permissions(c.join("prog"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("/nonexistent:{}:{}:{}", a.display(), b.display(), c.display());
        let found = resolve(OsStr::new("prog"), OsStr::new(&path)).unwrap();
        assert_eq!(found.as_bytes(), c.join("prog").as_os_str().as_bytes());
    }

    #[test]
    fn resolve_leaves_the_search_to_execvp_where_it_cannot_tell() {
        // A path with a slash is not searched; a relative or empty entry is the child's cwd.
        assert!(resolve(OsStr::new("./prog"), OsStr::new("/bin")).is_none());
        assert!(resolve(OsStr::new("sh"), OsStr::new("relative:/bin")).is_none());
        assert!(resolve(OsStr::new("sh"), OsStr::new(":/bin")).is_none());
        assert!(resolve(OsStr::new("no-such-program-of-desk"), OsStr::new("/bin:/usr/bin")).is_none());
    }

    #[test]
    fn a_failed_gate_step_is_returned_and_the_program_never_runs() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let spec = Spawn {
            program: "touch".into(),
            args: vec![marker.clone().into_os_string()],
            cwd: None,
            env: Vec::new(),
            cols: 80,
            rows: 24,
        };
        let err = spawn_gated(&spec, |_| Err(anyhow::anyhow!("no record"))).unwrap_err();
        assert_eq!(err.to_string(), "no record");
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!marker.exists());
    }

    #[test]
    fn an_exec_failure_is_reported_with_its_reason() {
        let spec = Spawn {
            program: "/nonexistent/program".into(),
            args: Vec::new(),
            cwd: None,
            env: Vec::new(),
            cols: 80,
            rows: 24,
        };
        let err = spawn(&spec).unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains("could not execute /nonexistent/program: No such file or directory"), "{text}");
    }
}
