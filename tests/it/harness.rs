//! PTY test harness shared by every integration test.
//!
//! Owns the processes a test starts and what they showed. [`PtyCommand::spawn`] runs any
//! program on a fresh pseudo-terminal of a chosen size (its own session, the PTY as its
//! controlling terminal); a reader thread feeds every output byte into a `vt100` screen
//! emulator and a byte counter, records the titles the program sets, and — like a real
//! terminal, unless told not to — answers cursor-position (`ESC[6n`) and device-attribute
//! (`ESC[c`) queries. Tests look at the screen only through [`Pty::wait_until`], which waits on
//! a deadline for a condition and, when it times out, fails with the whole screen printed.
//! Invariants: no fixed sleeps as synchronisation; every spawned process group is killed and
//! reaped on `Drop`, so nothing outlives a test even when it panics; PTY descriptors are
//! created and made close-on-exec under one lock, so a concurrently spawned test process can
//! never inherit another test's terminal.

#![allow(dead_code)]

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::pty::{Winsize, openpty};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// 15 s: far longer than any single step takes even on a loaded 2-core machine running the
/// tests in parallel, short enough that a hung test fails quickly with a useful screen.
pub(crate) const PATIENCE: Duration = Duration::from_secs(15);

/// 20 ms: longest a wait sleeps between checks when nothing is printed, so conditions that also
/// read files (a prompt log, a hook log) are re-checked promptly.
const RECHECK: Duration = Duration::from_millis(20);

/// 256 titles: enough to see every state change of a test (a spinner changes the title ten
/// times a second); older titles are dropped first.
const MAX_TITLES: usize = 256;

/// 1 s: a synchronized update (`ESC[?2026h` … `ESC[?2026l`) still open after this long is
/// shown anyway, as terminals time such updates out; an app that forgets to close one must not
/// hang every wait.
const SYNC_TIMEOUT: Duration = Duration::from_secs(1);

/// Serialises PTY creation with spawning; see the module documentation.
static SPAWN_LOCK: Mutex<()> = Mutex::new(());

/// A fresh temporary directory to use as `DESK_HOME` (desk's tests always set it), removed when
/// dropped.
pub(crate) struct TempHome {
    dir: tempfile::TempDir,
}

impl TempHome {
    pub(crate) fn new() -> anyhow::Result<Self> {
        let dir =
            tempfile::Builder::new().prefix("desk-it-").tempdir().context("cannot create a temporary DESK_HOME")?;
        Ok(Self { dir })
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// The `DESK_HOME` environment entry for a [`PtyCommand`].
    pub(crate) fn env(&self) -> (&'static str, OsString) {
        ("DESK_HOME", self.dir.path().as_os_str().to_owned())
    }
}

/// What to run on a PTY, and how; build it, then [`PtyCommand::spawn`].
#[derive(Debug, Clone)]
pub(crate) struct PtyCommand {
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    cwd: Option<PathBuf>,
    cols: u16,
    rows: u16,
    answer_queries: bool,
}

impl PtyCommand {
    /// Run `program` (e.g. `env!("CARGO_BIN_EXE_desk-demo-agent")`) on an 80x24 PTY with
    /// `TERM=xterm-256color`, answering terminal queries.
    pub(crate) fn new(program: impl AsRef<OsStr>) -> Self {
        Self {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            env: vec![("TERM".into(), "xterm-256color".into())],
            cwd: None,
            cols: 80,
            rows: 24,
            answer_queries: true,
        }
    }

    pub(crate) fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub(crate) fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args.extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    pub(crate) fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env.push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    pub(crate) fn home(self, home: &TempHome) -> Self {
        let (k, v) = home.env();
        self.env(k, v)
    }

    pub(crate) fn cwd(mut self, dir: impl AsRef<Path>) -> Self {
        self.cwd = Some(dir.as_ref().to_owned());
        self
    }

    pub(crate) fn size(mut self, cols: u16, rows: u16) -> Self {
        self.cols = cols;
        self.rows = rows;
        self
    }

    /// Whether the emulated terminal answers `ESC[6n` and `ESC[c` (default yes). Off, the
    /// program sees a terminal that never replies, as when no client is attached.
    pub(crate) fn answer_queries(mut self, answer: bool) -> Self {
        self.answer_queries = answer;
        self
    }

    /// Start the program on a new PTY.
    pub(crate) fn spawn(self) -> anyhow::Result<Pty> {
        let winsize = Winsize { ws_row: self.rows, ws_col: self.cols, ws_xpixel: 0, ws_ypixel: 0 };
        let (master, child) = {
            let _guard = SPAWN_LOCK.lock().unwrap_or_else(|e| e.into_inner());
            let pty = openpty(Some(&winsize), None).context("openpty failed")?;
            set_cloexec(&pty.master)?;
            set_cloexec(&pty.slave)?;
            let mut cmd = Command::new(&self.program);
            cmd.args(&self.args)
                .envs(self.env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::from(pty.slave.try_clone()?))
                .stdout(Stdio::from(pty.slave.try_clone()?))
                .stderr(Stdio::from(pty.slave));
            if let Some(dir) = &self.cwd {
                cmd.current_dir(dir);
            }
            // SAFETY: only async-signal-safe calls between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::setsid() == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                    if libc::ioctl(0, libc::TIOCSCTTY as _, 0) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // std does not clear the blocked-signal mask it inherited.
                    let mut empty: libc::sigset_t = std::mem::zeroed();
                    libc::sigemptyset(&mut empty);
                    libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
                    Ok(())
                });
            }
            let child = cmd.spawn().with_context(|| format!("cannot start {:?}", self.program))?;
            (pty.master, child)
        };
        let pid = Pid::from_raw(i32::try_from(child.id()).context("pid out of range")?);
        let reader = File::from(master.try_clone().context("cannot dup the PTY master")?);
        let writer = Arc::new(Mutex::new(File::from(master)));
        let rows = std::num::NonZeroU16::new(self.rows.max(1)).context("rows")?;
        let cols = std::num::NonZeroU16::new(self.cols.max(1)).context("cols")?;
        let recorder = Recorder { answer_queries: self.answer_queries, ..Recorder::default() };
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                parser: vt100::Parser::new_with_callbacks(rows, cols, 0, recorder),
                bytes: 0,
                eof: false,
                panic: None,
                replies: Vec::new(),
                sync_since: None,
            }),
            changed: Condvar::new(),
        });
        let thread_shared = Arc::clone(&shared);
        let thread_writer = Arc::clone(&writer);
        std::thread::Builder::new()
            .name(format!("pty-reader-{pid}"))
            .spawn(move || read_loop(reader, &thread_shared, &thread_writer))
            .context("cannot start the PTY reader thread")?;
        Ok(Pty { pid, child, reaped: None, writer, shared, program: self.program })
    }
}

fn set_cloexec(fd: &OwnedFd) -> anyhow::Result<()> {
    fcntl(fd.as_fd(), FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).context("cannot set FD_CLOEXEC")?;
    Ok(())
}

/// vt100 callbacks: titles and replies to terminal queries.
#[derive(Debug, Default)]
struct Recorder {
    answer_queries: bool,
    title: String,
    titles: Vec<String>,
    cursor_queries: usize,
    bells: usize,
    replies: Vec<u8>,
    /// Inside a synchronized update: the screen is half drawn.
    sync_open: bool,
}

impl vt100::Callbacks for Recorder {
    fn audible_bell(&mut self, _: &mut vt100::Screen) {
        self.bells += 1;
    }

    fn set_window_title(&mut self, _: &mut vt100::Screen, title: &[u8]) {
        self.title = String::from_utf8_lossy(title).into_owned();
        if self.titles.len() == MAX_TITLES {
            self.titles.remove(0);
        }
        self.titles.push(self.title.clone());
    }

    fn unhandled_csi(
        &mut self,
        screen: &mut vt100::Screen,
        i1: Option<u8>,
        _i2: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        match (i1, params, c) {
            (None, [[6]], 'n') => {
                self.cursor_queries += 1;
                if self.answer_queries {
                    let (row, col) = screen.cursor_position();
                    let reply = format!("\x1b[{};{}R", row + 1, col + 1);
                    self.replies.extend_from_slice(reply.as_bytes());
                }
            }
            (None, [] | [[0]], 'c') if self.answer_queries => {
                self.replies.extend_from_slice(b"\x1b[?1;2c");
            }
            (Some(b'?'), params, 'h' | 'l') if params.contains(&&[2026][..]) => {
                self.sync_open = c == 'h';
            }
            _ => {}
        }
    }
}

struct State {
    parser: vt100::Parser<Recorder>,
    bytes: u64,
    eof: bool,
    panic: Option<String>,
    /// Query replies not yet written to the program.
    replies: Vec<u8>,
    /// When the currently open synchronized update began, if one is open.
    sync_since: Option<Instant>,
}

impl State {
    /// False while the program is in the middle of a synchronized frame: conditions are not
    /// judged on half-drawn screens (unless the update is stuck open, see [`SYNC_TIMEOUT`]).
    fn settled(&self) -> bool {
        self.sync_since.is_none_or(|t| t.elapsed() >= SYNC_TIMEOUT)
    }
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn read_loop(mut reader: File, shared: &Shared, writer: &Mutex<File>) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => 0,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // EIO: every slave descriptor is closed (the program and its children exited).
            Err(_) => 0,
        };
        let mut st = shared.lock();
        if n == 0 {
            st.eof = true;
            drop(st);
            shared.changed.notify_all();
            return;
        }
        st.bytes += n as u64;
        let bytes = &buf[..n];
        let parsed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            st.parser.process(bytes);
        }));
        if let Err(e) = parsed {
            let what = e
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| e.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            st.panic = Some(format!("the vt100 emulator panicked: {what}"));
        }
        let replies = std::mem::take(&mut st.parser.callbacks_mut().replies);
        st.replies.extend(replies);
        st.sync_since = match (st.parser.callbacks().sync_open, st.sync_since) {
            (false, _) => None,
            (true, Some(t)) => Some(t),
            (true, None) => Some(Instant::now()),
        };
        let has_replies = !st.replies.is_empty();
        drop(st);
        shared.changed.notify_all();
        // Never block on the writer: a test may be in the middle of a large write, and then it
        // sends the replies itself when done.
        if has_replies && let Ok(mut w) = writer.try_lock() {
            let replies = std::mem::take(&mut shared.lock().replies);
            let _ = w.write_all(&replies);
        }
    }
}

/// A snapshot of the emulated terminal.
#[derive(Debug, Clone)]
pub(crate) struct Screen {
    rows: Vec<String>,
    contents: String,
    title: String,
    titles: Vec<String>,
    cursor: (u16, u16),
    size: (u16, u16),
    bracketed_paste: bool,
    alternate_screen: bool,
    cursor_queries: usize,
    bells: usize,
    bytes: u64,
    eof: bool,
}

impl Screen {
    fn capture(st: &State) -> Self {
        let screen = st.parser.screen();
        let (rows, cols) = screen.size();
        let rec = st.parser.callbacks();
        Self {
            rows: screen.rows(0, cols.get()).collect(),
            contents: screen.contents(),
            title: rec.title.clone(),
            titles: rec.titles.clone(),
            cursor: screen.cursor_position(),
            size: (cols.get(), rows.get()),
            bracketed_paste: screen.bracketed_paste(),
            alternate_screen: screen.alternate_screen(),
            cursor_queries: rec.cursor_queries,
            bells: rec.bells,
            bytes: st.bytes,
            eof: st.eof,
        }
    }

    /// All text on the screen, rows joined by newlines (soft-wrapped rows joined), trailing
    /// blanks trimmed.
    pub(crate) fn contents(&self) -> &str {
        &self.contents
    }

    /// Row `i` (0-based) as text, trailing blanks trimmed; empty past the last row.
    pub(crate) fn row(&self, i: usize) -> &str {
        self.rows.get(i).map(String::as_str).unwrap_or("")
    }

    pub(crate) fn rows(&self) -> &[String] {
        &self.rows
    }

    /// Index of the first row containing `needle`.
    pub(crate) fn find_row(&self, needle: &str) -> Option<usize> {
        self.rows.iter().position(|r| r.contains(needle))
    }

    pub(crate) fn contains(&self, needle: &str) -> bool {
        self.contents.contains(needle)
    }

    /// The current window title (OSC 0/2).
    pub(crate) fn title(&self) -> &str {
        &self.title
    }

    /// Every title set so far, oldest first (at most the last 256).
    pub(crate) fn titles_seen(&self) -> &[String] {
        &self.titles
    }

    /// (row, col), 0-based.
    pub(crate) fn cursor(&self) -> (u16, u16) {
        self.cursor
    }

    /// (cols, rows).
    pub(crate) fn size(&self) -> (u16, u16) {
        self.size
    }

    pub(crate) fn bracketed_paste(&self) -> bool {
        self.bracketed_paste
    }

    pub(crate) fn alternate_screen(&self) -> bool {
        self.alternate_screen
    }

    /// How many `ESC[6n` queries the program has sent.
    pub(crate) fn cursor_queries(&self) -> usize {
        self.cursor_queries
    }

    /// Bells (BEL outside any sequence) the program has rung so far.
    pub(crate) fn bells(&self) -> usize {
        self.bells
    }

    /// Bytes the program has written so far.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// True once the PTY reported end of output (all slave descriptors closed).
    pub(crate) fn eof(&self) -> bool {
        self.eof
    }
}

impl fmt::Display for Screen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (cols, rows) = self.size;
        writeln!(
            f,
            "--- screen {cols}x{rows}, title {:?}, cursor {:?}, {} bytes read{} ---",
            self.title,
            self.cursor,
            self.bytes,
            if self.eof { ", output closed" } else { "" }
        )?;
        for (i, row) in self.rows.iter().enumerate() {
            writeln!(f, "{i:>3}|{row}")?;
        }
        write!(f, "--- titles seen: {:?}", self.titles)
    }
}

/// A program running on a PTY; see the module documentation.
pub(crate) struct Pty {
    pid: Pid,
    child: Child,
    reaped: Option<ExitStatus>,
    writer: Arc<Mutex<File>>,
    shared: Arc<Shared>,
    program: OsString,
}

impl Pty {
    pub(crate) fn pid(&self) -> Pid {
        self.pid
    }

    /// Write `bytes` to the program's terminal input in one `write_all`.
    pub(crate) fn write(&self, bytes: impl AsRef<[u8]>) -> anyhow::Result<()> {
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        w.write_all(bytes.as_ref()).context("cannot write to the PTY")?;
        let replies = std::mem::take(&mut self.shared.lock().replies);
        if !replies.is_empty() {
            w.write_all(&replies).context("cannot write to the PTY")?;
        }
        Ok(())
    }

    /// `text` wrapped in bracketed-paste markers, in one write.
    pub(crate) fn paste(&self, text: &str) -> anyhow::Result<()> {
        self.write(format!("\x1b[200~{text}\x1b[201~"))
    }

    /// Resize the terminal (the program gets SIGWINCH).
    pub(crate) fn resize(&self, cols: u16, rows: u16) -> anyhow::Result<()> {
        let nz = |n: u16| std::num::NonZeroU16::new(n.max(1)).context("size");
        self.shared.lock().parser.set_size(nz(rows)?, nz(cols)?);
        let ws = libc::winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
        let w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: TIOCSWINSZ reads one `winsize` from the struct we pass.
        let rc = unsafe { libc::ioctl(w.as_raw_fd(), libc::TIOCSWINSZ, &ws) };
        if rc == -1 {
            return Err(std::io::Error::last_os_error()).context("TIOCSWINSZ failed");
        }
        Ok(())
    }

    /// Send `signal` to the program's process group.
    pub(crate) fn signal(&self, signal: Signal) -> anyhow::Result<()> {
        killpg(self.pid, signal).with_context(|| format!("cannot send {signal} to {}", self.pid))
    }

    /// Run `f` on the emulator's own screen (cells, colours, `state_formatted`, …) for checks
    /// the text snapshot cannot express. Keep `f` short: output is not processed meanwhile.
    pub(crate) fn with_vt100<T>(&self, f: impl FnOnce(&vt100::Screen) -> T) -> T {
        f(self.shared.lock().parser.screen())
    }

    /// The screen as it is now.
    pub(crate) fn screen(&self) -> Screen {
        Screen::capture(&self.shared.lock())
    }

    /// Wait up to `within` until `cond` holds for the screen; returns that screen. On timeout
    /// the error names `what` and shows the screen.
    pub(crate) fn wait_until(
        &self,
        within: Duration,
        what: &str,
        mut cond: impl FnMut(&Screen) -> bool,
    ) -> anyhow::Result<Screen> {
        let deadline = Instant::now() + within;
        let mut st = self.shared.lock();
        loop {
            let screen = Screen::capture(&st);
            if st.settled() && cond(&screen) {
                return Ok(screen);
            }
            if let Some(panic) = &st.panic {
                bail!("{panic}\nwhile waiting for: {what}\n{screen}");
            }
            let now = Instant::now();
            if now >= deadline {
                bail!("timed out after {within:?} waiting for: {what}\nprogram: {:?}\n{screen}", self.program);
            }
            let wait = (deadline - now).min(RECHECK);
            st = self.shared.changed.wait_timeout(st, wait).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// Wait up to [`PATIENCE`] until the screen contains `text`.
    pub(crate) fn wait_for_text(&self, text: &str) -> anyhow::Result<Screen> {
        self.wait_until(PATIENCE, &format!("screen contains {text:?}"), |s| s.contains(text))
    }

    /// Wait up to `within` for something outside the screen (a file, a log) to satisfy `check`,
    /// which returns `Some` when done; the error shows the screen for context.
    pub(crate) fn wait_for<T>(
        &self,
        within: Duration,
        what: &str,
        mut check: impl FnMut() -> anyhow::Result<Option<T>>,
    ) -> anyhow::Result<T> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(v) = check()? {
                return Ok(v);
            }
            if Instant::now() >= deadline {
                bail!("timed out after {within:?} waiting for: {what}\n{}", self.screen());
            }
            // Re-check on output or after a short pause, whichever comes first.
            let st = self.shared.lock();
            let _ = self.shared.changed.wait_timeout(st, RECHECK);
        }
    }

    /// The exit status, if the program has exited.
    pub(crate) fn try_exit_status(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        if self.reaped.is_none() {
            self.reaped = self.child.try_wait().context("waitpid failed")?;
        }
        Ok(self.reaped)
    }

    /// Wait up to `within` for the program to exit, then (briefly) for its last output to be
    /// read, so the final screen is complete.
    pub(crate) fn wait_exit(&mut self, within: Duration) -> anyhow::Result<ExitStatus> {
        let deadline = Instant::now() + within;
        let status = loop {
            if let Some(status) = self.try_exit_status()? {
                break status;
            }
            if Instant::now() >= deadline {
                bail!("timed out after {within:?} waiting for {:?} to exit\n{}", self.program, self.screen());
            }
            let st = self.shared.lock();
            let _ = self.shared.changed.wait_timeout(st, RECHECK);
        };
        // Output written just before exit is still in the PTY; EOF follows it. A child that
        // left a process holding the terminal never gives EOF, so this wait is bounded.
        let _ = self.wait_until(Duration::from_secs(2), "output to end", |s| s.eof());
        Ok(status)
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        if self.reaped.is_none() {
            let _ = killpg(self.pid, Signal::SIGKILL);
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
