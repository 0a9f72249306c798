//! `desk attach`: connect the user's terminal to a session.
//!
//! Owns the client side of a terminal attach: raw mode, the handshake, copying the session's
//! output (a keyframe, then raw bytes) to the terminal and typed input to the session, window
//! size changes, the detach key, and the way out. Invariants: the terminal is restored on every
//! way out (detach, child exit, signal, lost connection, error); the client reads from the
//! session only while its terminal keeps up, so a slow terminal makes the master discard and
//! redraw rather than grow any buffer here beyond one read; the process exits with the child's
//! exit code (128 + N for signal N) when the session ends.

mod keys;
mod modes;
mod tty;

pub use keys::{DEFAULT_DETACH_KEY, find_detach_key};
pub use modes::epilogue;

use anyhow::{Context, Result};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use signal_hook::consts::{SIGCONT, SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGWINCH};
use signal_hook_mio::v1_0::Signals;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;

use desk_common::paths::{Paths, SessionName};
use desk_common::session::{self, Probe};
use desk_wire::{ErrorCode, ExitStatus, Frame, FrameDecoder, OLDEST_PROTOCOL_VERSION, PROTOCOL_VERSION, Role};

const TTY: Token = Token(0);
const SOCKET: Token = Token(1);
const SIGNALS: Token = Token(2);

/// Read from the session only while less than this is waiting for the terminal: one socket
/// read's worth, so backpressure reaches the master instead of piling up here.
const TTY_BACKLOG_LIMIT: usize = 256 * 1024;

/// Socket read size: several OUTPUT frames per system call during floods.
const SOCKET_READ_CHUNK: usize = 256 * 1024;

pub struct AttachOptions {
    pub name: SessionName,
    pub read_only: bool,
    pub detach_key: Option<u8>,
    /// History lines to write into the terminal before attaching.
    pub history: u32,
    /// Ask for a status line naming both sizes while this terminal's size differs from the
    /// session's (the master renders it as the view's last row).
    pub status_line: bool,
}

enum Ending {
    Detached,
    Exited(ExitStatus, bool),
    Signal(i32),
    Lost(String),
}

/// Writes what goes above the session's screen to the terminal (standard output): the
/// session's newest `lines` history lines in their colours, then `notes` (the attach banner,
/// a warning), then enough line feeds to scroll them all into the terminal's own scrollback —
/// the keyframe that follows starts with a reset that clears the visible screen, so they stand
/// right above the session's screen there and never over it. The history is asked over a query
/// connection of its own, before the attach's handshake, a page at a time (each page written
/// before the next is asked); what could not be read is said on stderr.
fn write_preamble(files: &desk_common::paths::SessionPaths, lines: u32, notes: &[String]) -> Result<()> {
    use std::os::fd::AsFd;
    let out = io::stdout();
    let (_, rows) = desk_common::pty::get_size(out.as_fd()).unwrap_or((80, 24));
    let mut out = io::BufWriter::new(out.lock());
    if lines > 0 {
        let Probe::Live(stream) = session::probe_settled(files)? else {
            return Ok(());
        };
        let mut conn = desk_common::master_client::Connection::open(stream, Role::Query, 0, 0)
            .context("cannot ask the session for its history")?;
        let (_, mut read) = desk_common::history::HistoryRead::start(&mut conn, lines)
            .context("cannot ask the session for its history")?;
        let written = read.for_each(|row| {
            out.write_all(row.to_ansi().as_bytes())?;
            Ok(out.write_all(b"\r\n")?)
        });
        written.and_then(|()| Ok(out.flush()?)).context("cannot write the history to the terminal")?;
        for note in read.notes() {
            eprintln!("desk: warning: {note}");
        }
    }
    for note in notes {
        // Dim, so it reads as desk's and not the session's.
        out.write_all(format!("\x1b[2m{note}\x1b[m\r\n").as_bytes()).context("cannot write to the terminal")?;
    }
    out.write_all("\r\n".repeat(usize::from(rows)).as_bytes())
        .and_then(|()| out.flush())
        .context("cannot write the history to the terminal")
}

/// Attach and run until detach or exit; returns the process exit code.
pub fn run(opts: &AttachOptions) -> Result<i32> {
    let paths = Paths::from_env()?;
    paths.ensure_runtime()?;
    let files = paths.session(&opts.name);
    let stream = match session::probe_settled(&files)? {
        Probe::Live(stream) => stream,
        Probe::Absent | Probe::Stale => {
            use desk_common::failure::{ErrorCode, fail};
            if let Some(exit) = session::read_exit(&files)? {
                let Some(rows) = &exit.last_screen else {
                    let why = desk_common::signals::describe_exit(exit.status);
                    return Err(fail(
                        ErrorCode::NotRunning,
                        format!("session {} {why}; nothing to attach to", opts.name),
                    ));
                };
                // Nothing to attach to, but the last screen is the answer to "what happened".
                println!("{}", exit.headline(opts.name.as_str(), desk_common::clock::now_ms()));
                for line in exit.history_tail(opts.history) {
                    println!("{line}");
                }
                for row in rows {
                    println!("{row}");
                }
                eprintln!(
                    "desk: session {} {}; nothing to attach to",
                    opts.name,
                    desk_common::signals::describe_exit(exit.status)
                );
                return Ok(exit.status.shell_code());
            }
            // Exit 2, like every command given a session that does not exist (docs/cli.md).
            return Err(fail(
                ErrorCode::NoSuchSession,
                desk_common::suggest::unknown_session_in(&paths, opts.name.as_str()),
            ));
        }
    };
    refuse_own_session(&paths, &files, &opts.name)?;
    // The session this terminal is inside, if any: by the process tree, else as DESK_SESSION says
    // (a session of another DESK_HOME).
    let inside = session::enclosing(&paths)
        .unwrap_or_default()
        .into_iter()
        .find(|outer| *outer != opts.name)
        .map(|outer| outer.to_string())
        .or_else(|| std::env::var("DESK_SESSION").ok());
    let notes = attach_notes(&opts.name, opts.read_only, opts.detach_key, inside);
    write_preamble(&files, opts.history, &notes)?;
    let raw = tty::RawTty::open()?;
    let (cols, rows) = desk_common::pty::get_size(raw.fd()).unwrap_or((80, 24));
    stream.set_nonblocking(true).context("cannot make the socket non-blocking")?;
    let mut sock = mio::net::UnixStream::from_std(stream);

    let poll = Poll::new().context("cannot create the event loop")?;
    poll.registry().register(&mut SourceFd(&raw.fd().as_raw_fd()), TTY, Interest::READABLE | Interest::WRITABLE)?;
    poll.registry().register(&mut sock, SOCKET, Interest::READABLE | Interest::WRITABLE)?;
    let mut signals = Signals::new([SIGWINCH, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCONT])?;
    poll.registry().register(&mut signals, SIGNALS, Interest::READABLE)?;

    let role = if opts.read_only { Role::Viewer } else { Role::Controller };
    let hello = session::hello_version(&files.socket);
    let mut client = Client {
        poll,
        sock,
        raw,
        signals,
        role,
        detach_key: opts.detach_key,
        to_master: Frame::Hello { version: hello, role, cols, rows, status_line: opts.status_line }.to_bytes(),
        hello,
        to_tty: Vec::new(),
        to_tty_off: 0,
        decoder: FrameDecoder::new(),
        session_drawn: false,
        sock_readable: false,
        sock_writable: false,
        tty_writable: false,
        tty_readable: false,
        ending: None,
        welcomed: false,
        handshake_deadline: std::time::Instant::now() + desk_common::master_client::REQUEST_TIMEOUT,
        refused: None,
    };
    // The terminal is put back however the loop ends, an error included.
    let ending = client.run();
    let epilogue = modes::epilogue(client.session_drawn);
    client.write_tty_blocking(&epilogue);
    client.raw.restore();
    let refused = client.refused.take();
    drop(client);
    let name = &opts.name;
    if let Some((times, why)) = refused {
        eprintln!("[desk: {name} refused typed input {times} time(s): {why}]");
    }
    Ok(match ending? {
        Ending::Detached => {
            eprintln!("[desk: detached from {name}]");
            0
        }
        Ending::Exited(status, escalated) => {
            let how = if escalated { " after SIGKILL escalation" } else { "" };
            eprintln!("[desk: {name} {}{how}]", desk_common::signals::describe_exit(status));
            status.shell_code()
        }
        Ending::Signal(signal) => {
            eprintln!("[desk: detached from {name} on signal {signal}]");
            128 + signal
        }
        Ending::Lost(why) => {
            eprintln!("[desk: lost {name}: {why}]");
            1
        }
    })
}

/// The banner an attach prints above the session's screen (`desk: attached to api · Ctrl-\
/// detaches`), and a warning when this terminal is itself inside a session (`inside`, from
/// `DESK_SESSION`): there the outer attach sees the detach key first, so it would detach that
/// one, not this.
fn attach_notes(name: &SessionName, read_only: bool, detach_key: Option<u8>, inside: Option<String>) -> Vec<String> {
    let how = if read_only { "watching" } else { "attached to" };
    let key = match detach_key {
        Some(key) => format!("{} detaches", desk_common::syntax::detach_key_name(key)),
        None => "no detach key (--detach-key none): close the terminal to leave".into(),
    };
    let mut notes = vec![format!("desk: {how} {name} · {key}")];
    if let Some(outer) = inside.filter(|outer| !outer.is_empty() && outer != name.as_str()) {
        let other = if detach_key == Some(0x1d) { "^_" } else { "^]" };
        notes.push(format!(
            "desk: warning: this terminal is inside session {outer}: an attach to {outer} around it sees \
             {} first and detaches from {outer}, not from {name}; to leave {name} alone, attach it with \
             another key: desk attach {name} --detach-key {other}",
            detach_key.map_or_else(|| "its detach key".into(), desk_common::syntax::detach_key_name)
        ));
    }
    notes
}

/// Refuse to attach a session from inside itself: its output would come back to it as this
/// client's terminal output, round and round (a busy loop that outlives the outer client).
/// Inside is when the session's master is an ancestor of this process ([`session::enclosing`]);
/// `DESK_SESSION` (which the master gives its child) naming the session counts too, unless the
/// session's record shows its master is not among our ancestors (the same name under another
/// `DESK_HOME`).
fn refuse_own_session(paths: &Paths, files: &desk_common::paths::SessionPaths, name: &SessionName) -> Result<()> {
    let recorded = session::read_meta(files).ok().flatten().is_some();
    let ours = session::enclosing(paths).unwrap_or_default().contains(name);
    let named = std::env::var_os("DESK_SESSION").is_some_and(|v| v == name.as_str());
    if ours || (named && !recorded) {
        return Err(desk_common::failure::failure(
            2,
            format!(
                "this terminal is session {name} itself; attaching it to itself would feed its output back \
                 into it. Use `desk peek {name}` to see its screen, or attach from another terminal"
            ),
        ));
    }
    Ok(())
}

struct Client {
    /// Input the session refused: how many times, and its last reason.
    refused: Option<(u64, String)>,
    poll: Poll,
    sock: mio::net::UnixStream,
    raw: tty::RawTty,
    signals: Signals,
    role: Role,
    detach_key: Option<u8>,
    to_master: Vec<u8>,
    to_tty: Vec<u8>,
    /// Bytes of `to_tty` already written; the buffer is compacted only when it empties, so a
    /// slow terminal taking a few KiB per write does not cost a memmove of the rest each time.
    to_tty_off: usize,
    decoder: FrameDecoder,
    /// Something from the session reached the terminal (the keyframe at least): the terminal
    /// is the session's until the epilogue.
    session_drawn: bool,
    sock_readable: bool,
    sock_writable: bool,
    tty_writable: bool,
    tty_readable: bool,
    ending: Option<Ending>,
    welcomed: bool,
    /// The protocol version of its HELLO (docs/protocol.md §12).
    hello: u16,
    /// Until WELCOME arrives, the whole handshake has this deadline (a master that drips bytes
    /// or never answers must not hold the terminal in raw mode forever); after it, the
    /// session's output may pause as long as it likes.
    handshake_deadline: std::time::Instant,
}

impl Client {
    fn run(&mut self) -> Result<Ending> {
        let mut events = Events::with_capacity(64);
        let mut buf = vec![0u8; SOCKET_READ_CHUNK];
        loop {
            // Leaving: what the terminal still has to show is written out on the way.
            if let Some(ending) = self.ending.take() {
                return Ok(ending);
            }
            let timeout = if self.welcomed {
                None
            } else {
                match self.handshake_deadline.checked_duration_since(std::time::Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => {
                        return Ok(Ending::Lost(format!(
                            "the session did not answer within {} s",
                            desk_common::master_client::REQUEST_TIMEOUT.as_secs()
                        )));
                    }
                }
            };
            match self.poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).context("poll failed"),
            }
            for event in events.iter() {
                match event.token() {
                    SOCKET => {
                        if event.is_readable() || event.is_read_closed() || event.is_error() {
                            self.sock_readable = true;
                        }
                        if event.is_writable() {
                            self.sock_writable = true;
                        }
                    }
                    TTY => {
                        if event.is_readable() || event.is_read_closed() {
                            self.tty_readable = true;
                        }
                        if event.is_writable() {
                            self.tty_writable = true;
                        }
                    }
                    SIGNALS => self.on_signals(),
                    _ => {}
                }
            }
            self.pump(&mut buf);
        }
    }

    /// Move bytes until every side would block (or the terminal is behind).
    fn pump(&mut self, buf: &mut [u8]) {
        loop {
            let mut progressed = false;
            if self.tty_readable && self.ending.is_none() {
                progressed |= self.read_tty(buf);
            }
            if self.sock_writable && !self.to_master.is_empty() {
                progressed |= self.write_socket();
            }
            if self.tty_writable && self.to_tty_off < self.to_tty.len() {
                progressed |= self.write_tty();
            }
            if self.sock_readable && self.to_tty.len() - self.to_tty_off < TTY_BACKLOG_LIMIT && self.ending.is_none() {
                progressed |= self.read_socket(buf);
            }
            if !progressed {
                return;
            }
        }
    }

    fn read_tty(&mut self, buf: &mut [u8]) -> bool {
        let n = match nix::unistd::read(self.raw.fd(), buf) {
            Ok(0) => {
                self.ending = Some(Ending::Lost("the terminal closed".into()));
                return false;
            }
            Ok(n) => n,
            Err(nix::errno::Errno::EAGAIN) => {
                self.tty_readable = false;
                return false;
            }
            Err(nix::errno::Errno::EINTR) => return true,
            Err(e) => {
                self.ending = Some(Ending::Lost(format!("cannot read the terminal: {e}")));
                return false;
            }
        };
        let input = &buf[..n];
        let (forward, detach) = match self.detach_key.and_then(|key| find_detach_key(input, key)) {
            Some((at, _)) => (&input[..at], true),
            None => (input, false),
        };
        if !forward.is_empty() && self.role == Role::Controller {
            Frame::Input(forward.to_vec()).encode(&mut self.to_master);
        }
        if detach {
            Frame::Detach.encode(&mut self.to_master);
            self.write_socket();
            self.ending = Some(Ending::Detached);
        }
        true
    }

    fn write_socket(&mut self) -> bool {
        match self.sock.write(&self.to_master) {
            Ok(n) => {
                self.to_master.drain(..n);
                n > 0
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.sock_writable = false;
                false
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => true,
            Err(e) => {
                self.lose(format!("cannot write to the session: {e}"));
                false
            }
        }
    }

    fn write_tty(&mut self) -> bool {
        match nix::unistd::write(self.raw.fd(), &self.to_tty[self.to_tty_off..]) {
            Ok(n) => {
                self.to_tty_off += n;
                if self.to_tty_off == self.to_tty.len() {
                    self.to_tty.clear();
                    self.to_tty_off = 0;
                }
                n > 0
            }
            Err(nix::errno::Errno::EAGAIN) => {
                self.tty_writable = false;
                false
            }
            Err(nix::errno::Errno::EINTR) => true,
            Err(e) => {
                self.ending = Some(Ending::Lost(format!("cannot write to the terminal: {e}")));
                self.to_tty.clear();
                self.to_tty_off = 0;
                false
            }
        }
    }

    /// Used once, on the way out: the terminal is ours alone and the bytes are few.
    fn write_tty_blocking(&mut self, bytes: &[u8]) {
        let mut pending: Vec<u8> = self.to_tty.split_off(self.to_tty_off);
        self.to_tty.clear();
        self.to_tty_off = 0;
        pending.extend_from_slice(bytes);
        let mut offset = 0;
        let mut spins = 0;
        while offset < pending.len() && spins < 1000 {
            match nix::unistd::write(self.raw.fd(), &pending[offset..]) {
                Ok(n) => offset += n,
                Err(nix::errno::Errno::EAGAIN) => {
                    spins += 1;
                    let mut fds = [nix::poll::PollFd::new(self.raw.fd(), nix::poll::PollFlags::POLLOUT)];
                    let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(10u16));
                }
                Err(nix::errno::Errno::EINTR) => {}
                Err(_) => break,
            }
        }
    }

    fn read_socket(&mut self, buf: &mut [u8]) -> bool {
        let n = match self.sock.read(buf) {
            Ok(0) => {
                self.lose("the session closed the connection".into());
                return false;
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.sock_readable = false;
                return false;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return true,
            Err(e) => {
                self.lose(format!("cannot read from the session: {e}"));
                return false;
            }
        };
        self.decoder.push(&buf[..n]);
        loop {
            match self.decoder.next_frame() {
                Ok(Some(frame)) => self.on_frame(frame),
                Ok(None) => break,
                Err(e) => {
                    self.lose(format!("the session sent a malformed frame: {e}"));
                    break;
                }
            }
        }
        true
    }

    fn lose(&mut self, why: String) {
        if self.ending.is_none() {
            self.ending = Some(Ending::Lost(why));
        }
    }

    fn on_frame(&mut self, frame: Frame) {
        match frame {
            Frame::Welcome { version, .. } if desk_wire::welcome_accepted(self.hello, version) => self.welcomed = true,
            Frame::Welcome { version, .. } => self.lose(format!(
                "the session answered in protocol version {version} to a HELLO in {}; this desk speaks {OLDEST_PROTOCOL_VERSION} to {PROTOCOL_VERSION}",
                self.hello
            )),
            Frame::Output(data) | Frame::Keyframe { data, .. } => {
                self.session_drawn = true;
                self.to_tty.extend_from_slice(&data);
            }
            Frame::Exit { status, escalated } => self.ending = Some(Ending::Exited(status, escalated)),
            Frame::Error { code, message } => match code {
                // Refused input: the attach goes on, the bell says so now, and the reason is
                // printed when the attach ends (writing it over the agent's screen would not do).
                ErrorCode::InputFull | ErrorCode::NotPermitted => {
                    self.to_tty.push(0x07);
                    let times = self.refused.as_ref().map_or(0, |(n, _)| *n);
                    self.refused = Some((times + 1, message));
                }
                _ => self.lose(message),
            },
            Frame::Ping(nonce) => Frame::Pong(nonce).encode(&mut self.to_master),
            _ => {}
        }
    }

    fn on_signals(&mut self) {
        let pending: Vec<i32> = self.signals.pending().collect();
        for signal in pending {
            match signal {
                SIGWINCH => {
                    // A viewer reports its size too: it never resizes the session, but the
                    // master renders it a view of its own size.
                    if let Ok((cols, rows)) = desk_common::pty::get_size(self.raw.fd())
                        && desk_term::screen::valid_size(cols, rows)
                    {
                        Frame::Resize { cols, rows }.encode(&mut self.to_master);
                    }
                }
                SIGCONT => {
                    // Someone stopped us from outside; the terminal may have been reset meanwhile.
                    let _ = nix::sys::termios::tcgetattr(self.raw.fd()).map(|mut t| {
                        nix::sys::termios::cfmakeraw(&mut t);
                        let _ = nix::sys::termios::tcsetattr(self.raw.fd(), nix::sys::termios::SetArg::TCSANOW, &t);
                    });
                }
                other => {
                    Frame::Detach.encode(&mut self.to_master);
                    self.write_socket();
                    self.ending = Some(Ending::Signal(other));
                }
            }
        }
    }
}
