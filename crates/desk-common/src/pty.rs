//! Pseudo-terminals and the child process on them.
//!
//! Owns opening a PTY pair, starting the child as a session leader with the slave as its
//! controlling terminal, and the small fd operations the master needs (size, non-blocking).
//! Invariants: the child starts with the requested window size already set (never 0x0), a clean
//! signal mask, default dispositions for every catchable signal, and none of desk's descriptors
//! (the master fd is CLOEXEC and non-blocking before the child is spawned). With
//! [`spawn_gated`], the child's program does not start before the caller's step that needs its
//! pid (the master's session record) is done: the forked child sends its pid over a pipe and
//! waits on a second one, the gate, until the caller opens it — or closes it, when that step
//! failed: the child holds only its own ends of the pipes, so it then sees the end of the gate
//! and exits without running the program.

use anyhow::{Context, Result};
use nix::fcntl::{FcntlArg, FdFlag, OFlag, fcntl};
use nix::pty::{Winsize, openpty};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

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
pub fn spawn_gated(spec: &Spawn, before_exec: impl FnOnce(u32) -> Result<()>) -> Result<Child> {
    let pty = openpty(Some(&winsize(spec.cols, spec.rows)), None).context("cannot open a pseudo-terminal")?;
    set_cloexec(pty.master.as_fd())?;
    set_cloexec(pty.slave.as_fd())?;
    set_nonblocking(pty.master.as_fd())?;

    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args);
    if let Some(cwd) = &spec.cwd {
        cmd.current_dir(cwd);
    }
    for (key, value) in &spec.env {
        cmd.env(key, value);
    }
    let slave = pty.slave;
    cmd.stdin(Stdio::from(slave.try_clone().context("cannot duplicate the PTY slave")?))
        .stdout(Stdio::from(slave.try_clone().context("cannot duplicate the PTY slave")?))
        .stderr(Stdio::from(slave));
    let last_signal = libc::SIGRTMAX();
    // The child writes its pid to `pid_tx`, then reads `gate_rx` until a byte (go) or the end
    // (the parent gave up). Both pipes are CLOEXEC: the program inherits neither.
    let (pid_rx, pid_tx) = nix::unistd::pipe2(OFlag::O_CLOEXEC).context("cannot create a pipe")?;
    let (gate_rx, gate_tx) = nix::unistd::pipe2(OFlag::O_CLOEXEC).context("cannot create a pipe")?;
    let (pid_fd, gate_fd) = (pid_tx.as_raw_fd(), gate_rx.as_raw_fd());
    let parent_ends = [pid_rx.as_raw_fd(), gate_tx.as_raw_fd()];
    // SAFETY: the closure runs between fork and exec and calls only async-signal-safe functions
    // (close, setsid, ioctl, sigaction, sigprocmask, getpid, read, write); it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            // The fork copied the parent's ends of both pipes too. Holding the gate's write end
            // itself, the child would never see the end of the pipe when the parent gives up
            // (its `before_exec` failed), and would wait for ever.
            for fd in parent_ends {
                libc::close(fd);
            }
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::ioctl(0, libc::TIOCSCTTY as _, 0) == -1 {
                return Err(std::io::Error::last_os_error());
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
            let pid = libc::getpid().to_ne_bytes();
            if libc::write(pid_fd, pid.as_ptr().cast(), pid.len()) != pid.len() as isize {
                return Err(std::io::Error::last_os_error());
            }
            let mut go = 0u8;
            loop {
                match libc::read(gate_fd, (&raw mut go).cast(), 1) {
                    1 => return Ok(()),
                    0 => return Err(std::io::Error::from_raw_os_error(libc::ECANCELED)),
                    _ if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) => {}
                    _ => return Err(std::io::Error::last_os_error()),
                }
            }
        });
    }
    // `spawn` returns only once the program runs (or failed to), which waits for the gate: it
    // runs on a thread of its own while this one reads the pid and opens the gate. That thread
    // holds the parent's ends of the child's pipes and closes them as soon as `spawn` returns,
    // so a fork that failed before the pid was sent reads here as the end of the pipe.
    let program = spec.program.to_string_lossy();
    std::thread::scope(|scope| {
        let spawner = scope.spawn(move || {
            let spawned = cmd.spawn();
            drop((pid_tx, gate_rx));
            spawned
        });
        let mut pid = [0u8; std::mem::size_of::<libc::pid_t>()];
        let told = std::fs::File::from(pid_rx).read_exact(&mut pid);
        let before = match told {
            Ok(()) => before_exec(libc::pid_t::from_ne_bytes(pid) as u32),
            Err(_) => Ok(()),
        };
        let mut gate = std::fs::File::from(gate_tx);
        if told.is_ok() && before.is_ok() {
            // A failed write closes the gate all the same: the child then gives up.
            let _ = gate.write_all(&[1]);
        }
        drop(gate);
        let spawned = spawner.join().map_err(|_| anyhow::anyhow!("the thread starting {program} panicked"))?;
        before?;
        let child = spawned.with_context(|| format!("could not execute {program}"))?;
        Ok(Child { master: pty.master, pid: child.id() })
    })
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
