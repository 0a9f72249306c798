//! The controlling terminal's mode and size, for the demo agent's event loop.
//!
//! Owns the saved terminal attributes. Invariants: [`RawMode::enter`] saves stdin's termios
//! before changing anything, and the saved state is written back exactly once — by
//! [`RawMode::restore`] on an orderly exit, or by `Drop` on an early return or a panic unwinding
//! through the loop. When stdin is not a terminal nothing is changed or restored.

use std::os::fd::AsFd;

use nix::sys::termios::{SetArg, Termios, cfmakeraw, tcgetattr, tcsetattr};

/// Size assumed when the terminal does not report one (a pipe, or a PTY created at 0x0): the
/// classic VT100 size every TUI handles.
pub const FALLBACK_SIZE: (u16, u16) = (80, 24);

/// Stdin in raw mode until restored; see the module documentation.
pub struct RawMode {
    saved: Option<Termios>,
}

impl RawMode {
    /// Put stdin's terminal in raw mode (no echo, no line editing, no signals from keys, no
    /// output post-processing). A non-terminal stdin is left alone.
    pub fn enter() -> anyhow::Result<Self> {
        let stdin = std::io::stdin();
        if !nix::unistd::isatty(stdin.as_fd()).unwrap_or(false) {
            return Ok(Self { saved: None });
        }
        let saved = tcgetattr(stdin.as_fd())
            .map_err(|e| anyhow::anyhow!("cannot read the terminal's settings on stdin ({e}); is it a terminal?"))?;
        let mut raw = saved.clone();
        cfmakeraw(&mut raw);
        // TCSANOW, not TCSAFLUSH: input already typed must reach the agent (which then decides
        // to swallow it), as with real agents.
        tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw)
            .map_err(|e| anyhow::anyhow!("cannot put the terminal in raw mode: {e}"))?;
        Ok(Self { saved: Some(saved) })
    }

    /// Write the saved settings back (after pending output drains). Idempotent; errors are
    /// ignored because the terminal may already be gone (hangup).
    pub fn restore(&mut self) {
        if let Some(saved) = self.saved.take() {
            let _ = tcsetattr(std::io::stdin().as_fd(), SetArg::TCSADRAIN, &saved);
        }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        self.restore();
    }
}

/// The terminal's size as (cols, rows), from stdout or else stdin; [`FALLBACK_SIZE`] if neither
/// reports a non-zero size.
pub fn window_size() -> (u16, u16) {
    for fd in [libc::STDOUT_FILENO, libc::STDIN_FILENO] {
        let mut ws = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
        // SAFETY: TIOCGWINSZ writes one `winsize` into the struct we pass and nothing else.
        let rc = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) };
        if rc == 0 && ws.ws_col > 0 && ws.ws_row > 0 {
            return (ws.ws_col, ws.ws_row);
        }
    }
    FALLBACK_SIZE
}
