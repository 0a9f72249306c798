//! `desk attach`: connect the user's terminal to a session.
//!
//! Owns the client side of a terminal attach: raw mode, the handshake, copying the session's
//! output (a keyframe, then raw bytes, or the master's rendering of its view) to the terminal
//! and typed input to the session, window size changes, the detach key, and the way out; and,
//! with [`ui`], attach's own part of the terminal: the status line on its last row (this
//! session's state and the fleet's attention, read by [`crate::attention::FleetReader`] as the
//! runtime directory changes), the command prefix and its keys, and switching to another session
//! without leaving (the connection is replaced; the new session's keyframe redraws the terminal).
//! With the status line the client reports one row less than its terminal has and asks the master
//! for a view at any size (HELLO's view option, docs/protocol.md §5.1): the session keeps that
//! size, as under tmux's status line, and nothing it draws can reach the last row.
//!
//! Invariants: the terminal is restored on every way out (detach, child exit, signal, lost
//! connection, error); the client reads from the session only while its terminal keeps up, so a
//! slow terminal makes the master discard and redraw rather than grow any buffer here beyond one
//! read; the status row is drawn only between whole frames (never inside a keyframe's chunks);
//! while an overlay (the session list, the help) is open, the session's output is not written
//! and a fresh keyframe is asked for when it closes; the process exits with the child's exit code
//! (128 + N for signal N) when the attached session ends.

mod keys;
mod lend;
mod modes;
mod own;
mod prefix;
mod remote;
mod tty;
mod ui;

pub use keys::{DEFAULT_DETACH_KEY, find_detach_key};
pub use modes::epilogue;
pub use prefix::DEFAULT_PREFIX_KEY;

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
use ui::Command;

const TTY: Token = Token(0);
const SOCKET: Token = Token(1);
const SIGNALS: Token = Token(2);
const FLEET: Token = Token(3);

/// 250 ms: the most often the fleet's files are read again while they change (a working agent's
/// master rewrites its info file up to ten times a second, with its title): the status line is
/// at most this late, and a busy fleet costs at most four reads a second of what changed.
const FLEET_READ_INTERVAL: std::time::Duration = std::time::Duration::from_millis(250);

/// 2 s: how often stuck items and channel mentions are read (the dashboard's pace: the daemon
/// has no push for them, and they move in seconds).
const SLOW_READ_INTERVAL: std::time::Duration = std::time::Duration::from_secs(2);

/// 1 s: the status line's ages (`blocked 12s`) move this often.
const TICK: std::time::Duration = std::time::Duration::from_secs(1);

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
    /// Attach's own status line on the terminal's last row (when it has room).
    pub status: bool,
    /// The command prefix; `None`: none.
    pub prefix_key: Option<u8>,
    /// Where the status line reads the sessions' stuck items (the CLI's delivery counts).
    pub stuck: crate::attention::StuckSource,
    /// The host the session runs on (`HOST:NAME`), by its name and config; `None`: this machine.
    pub host: Option<(String, desk_common::config::Host)>,
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
    if let Some((host, entry)) = &opts.host {
        return remote::run(opts, &paths, host, entry);
    }
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
    let mut notes = attach_notes(&opts.name, opts.read_only, opts.detach_key, inside);
    notes[0] = notes[0].replacen(opts.name.as_str(), &shown(&opts.name), 1);
    write_preamble(&files, opts.history, &notes)?;
    let hello = session::hello_version(&files.socket);
    drive(opts, paths, stream, hello)
}

/// Run the attach over `stream` (connected to the session's master), HELLO in `hello`, until it
/// ends.
fn drive(opts: &AttachOptions, paths: Paths, stream: std::os::unix::net::UnixStream, hello: u16) -> Result<i32> {
    let raw = tty::RawTty::open()?;
    let (cols, rows) = desk_common::pty::get_size(raw.fd()).unwrap_or((80, 24));
    stream.set_nonblocking(true).context("cannot make the socket non-blocking")?;
    let mut sock = mio::net::UnixStream::from_std(stream);

    let poll = Poll::new().context("cannot create the event loop")?;
    // Writability is watched only while a write would block (`watch_writability`).
    poll.registry().register(&mut SourceFd(&raw.fd().as_raw_fd()), TTY, Interest::READABLE)?;
    let tty_watch = desk_common::watch::FdWatch::registered_for(Interest::READABLE);
    poll.registry().register(&mut sock, SOCKET, Interest::READABLE)?;
    let mut signals = Signals::new([SIGWINCH, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCONT])?;
    poll.registry().register(&mut signals, SIGNALS, Interest::READABLE)?;

    let role = if opts.read_only { Role::Viewer } else { Role::Controller };
    let mut client = Client {
        poll,
        sock,
        raw,
        signals,
        role,
        detach_key: opts.detach_key,
        to_master: Vec::new(),
        hello,
        to_tty: Vec::new(),
        to_tty_off: 0,
        decoder: FrameDecoder::new(),
        session_drawn: false,
        sock_readable: false,
        sock_writable: true,
        tty_writable: true,
        tty_readable: false,
        sock_watches_out: false,
        tty_watch,
        lending: lend::Lending::Own,
        lend_refused: false,
        wire: 0,
        ending: None,
        welcomed: false,
        handshake_deadline: std::time::Instant::now() + desk_common::master_client::REQUEST_TIMEOUT,
        refused: None,
        size_line: opts.status_line,
        own: own::Own::new(paths.clone(), opts, cols, rows),
        name: opts.name.clone(),
        provider: String::new(),
        generation: 0,
        in_keyframe: false,
    };
    client.to_master = client.hello();
    if client.own.status_wanted {
        client.own.watch_fleet(&client.poll);
    }
    // The terminal is put back however the loop ends, an error included.
    let ending = client.run();
    client.reclaim();
    let mut epilogue = client.own.leave_status_row();
    epilogue.extend(modes::epilogue(client.session_drawn));
    client.write_tty_blocking(&epilogue);
    client.raw.restore();
    let refused = client.refused.take();
    let name = shown(&client.name);
    drop(client);
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

/// How this attach names session `name` to the user: `HOST:NAME` when it runs for a `desk attach
/// HOST:NAME` on another machine (which says so in [`remote::AS_HOST`]), else the name.
fn shown(name: &SessionName) -> String {
    match std::env::var(remote::AS_HOST) {
        Ok(host) if !host.is_empty() => format!("{host}:{name}"),
        _ => name.to_string(),
    }
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
    /// The socket and the terminal took the last write whole (or nothing was written yet);
    /// false from a write that would block until writability is reported.
    sock_writable: bool,
    tty_writable: bool,
    /// The socket is registered for writability: only while its flag above is false.
    sock_watches_out: bool,
    /// What the poll watches the terminal for (`lend::watch_tty`).
    tty_watch: desk_common::watch::FdWatch,
    /// Whether the terminal is lent to the master ([`lend`]).
    lending: lend::Lending,
    /// The master would not take the terminal: this connection keeps it.
    lend_refused: bool,
    /// The protocol version of the connection (its WELCOME's); 0 before.
    wire: u16,
    tty_readable: bool,
    ending: Option<Ending>,
    welcomed: bool,
    /// The protocol version of its HELLO (docs/protocol.md §12).
    hello: u16,
    /// Until WELCOME arrives, the whole handshake has this deadline (a master that drips bytes
    /// or never answers must not hold the terminal in raw mode forever); after it, the
    /// session's output may pause as long as it likes.
    handshake_deadline: std::time::Instant,
    /// `--status`: the master's line naming both sizes, in a view of another size.
    size_line: bool,
    /// Attach's own part of the terminal: the status line, the prompts, the fleet.
    own: own::Own,
    /// The session attached now (it changes with a switch).
    name: SessionName,
    /// Its provider and generation, from its WELCOME (for reading its dialogs).
    provider: String,
    generation: u32,
    /// A keyframe's chunks are arriving (the last one had MORE): nothing of attach's own may be
    /// drawn between them.
    in_keyframe: bool,
}

impl Client {
    fn run(&mut self) -> Result<Ending> {
        let mut events = Events::with_capacity(64);
        let mut buf = vec![0u8; SOCKET_READ_CHUNK];
        // HELLO is written at once: no writability event will come to say the socket has room.
        self.pump(&mut buf);
        loop {
            // Leaving: what the terminal still has to show is written out on the way.
            if let Some(ending) = self.ending.take() {
                return Ok(ending);
            }
            let now = std::time::Instant::now();
            let handshake = if self.welcomed {
                None
            } else {
                match self.handshake_deadline.checked_duration_since(now) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => {
                        return Ok(Ending::Lost(format!(
                            "the session did not answer within {} s",
                            desk_common::master_client::REQUEST_TIMEOUT.as_secs()
                        )));
                    }
                }
            };
            let own = self.own.due().map(|at| at.saturating_duration_since(now));
            let message = self
                .own
                .ui
                .message_until()
                .map(|until| std::time::Duration::from_millis(until.saturating_sub(desk_common::clock::now_ms())));
            let timeout = [handshake, own, message].into_iter().flatten().min();
            self.watch_writability()?;
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
                    FLEET => self.own.on_inotify(&self.poll),
                    _ => {}
                }
            }
            if self.own.on_timers(&self.poll, std::time::Instant::now(), desk_common::clock::now_ms()) {
                self.draw_status(false);
            }
            self.pump(&mut buf);
            // Once the terminal is idle: READY, or a TAKE (and what they are written with).
            self.ready_if_drained();
            self.maybe_lend()?;
            if !self.to_master.is_empty() {
                self.pump(&mut buf);
            }
        }
    }

    /// Register writability of the socket and the terminal only while a write to it is
    /// blocked, as tmux (libevent) does: registered for good, edge-triggered, each write came
    /// back as an `EPOLLOUT` event and one more turn of the loop, two per typed key (issue 22).
    /// Called just before the loop waits, once every write of the turn is made; a registration
    /// made when there is room again already is reported at once (`EPOLL_CTL_MOD` polls the
    /// file), so no room made since the blocked write is missed.
    fn watch_writability(&mut self) -> Result<()> {
        let interest =
            |blocked: bool| if blocked { Interest::READABLE | Interest::WRITABLE } else { Interest::READABLE };
        self.watch_tty().context("cannot watch the terminal")?;
        if self.sock_watches_out == self.sock_writable {
            let want = !self.sock_writable;
            self.poll
                .registry()
                .reregister(&mut self.sock, SOCKET, interest(want))
                .context("cannot watch the socket")?;
            self.sock_watches_out = want;
        }
        Ok(())
    }

    /// Move bytes until every side would block (or the terminal is behind).
    fn pump(&mut self, buf: &mut [u8]) {
        loop {
            let mut progressed = false;
            if self.tty_readable && self.ending.is_none() && self.lending == lend::Lending::Own {
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
        let input = buf[..n].to_vec();
        self.take_input(&input);
        true
    }

    /// Typed input: the session's, but for the detach key, the prefix and what attach's own
    /// prompts read.
    fn take_input(&mut self, mut rest: &[u8]) {
        while !rest.is_empty() && self.ending.is_none() {
            if self.own.ui.reading() {
                let Some((key, len)) = prefix::next_key(rest) else { break };
                rest = &rest[len..];
                let commands =
                    self.own.ui.on_key(key, self.name.as_str(), &self.own.fleet, desk_common::clock::now_ms());
                for command in commands {
                    self.carry(command);
                }
                continue;
            }
            let found = prefix::find_kept(rest, self.detach_key, self.own.ui_prefix());
            let forward = found.map_or(rest, |(at, _, _)| &rest[..at]);
            if !forward.is_empty() && self.role == Role::Controller {
                Frame::Input(forward.to_vec()).encode(&mut self.to_master);
            }
            let Some((at, len, kept)) = found else { break };
            rest = &rest[at + len..];
            match kept {
                prefix::Kept::Detach => self.detach(),
                prefix::Kept::Prefix => {
                    self.own.read_fleet_now();
                    for command in self.own.ui.prefix_typed() {
                        self.carry(command);
                    }
                }
            }
        }
    }

    fn detach(&mut self) {
        Frame::Detach.encode(&mut self.to_master);
        self.write_socket();
        self.ending = Some(Ending::Detached);
    }

    /// Carry out what attach's own prompt decided.
    fn carry(&mut self, command: Command) {
        let now_ms = desk_common::clock::now_ms();
        match command {
            Command::Detach => self.detach(),
            Command::Switch(name) => self.switch_to(&name),
            Command::SendPrefix => {
                if let Some(key) = self.own.ui_prefix() {
                    Frame::Input(vec![key]).encode(&mut self.to_master);
                }
            }
            Command::AskDialog => {
                self.own.asked_dialog = true;
                Frame::SnapshotRequest { history: None }.encode(&mut self.to_master);
            }
            Command::Answer { option, seen, said } => {
                let by = desk_common::keys::Sender::this_process("attach");
                let request = desk_wire::operator::ClientEvent::Answer {
                    option,
                    deny: option.is_none(),
                    seen,
                    user: by.user,
                    tty: by.tty,
                    via: by.via.into(),
                };
                let nonce = self.own.next_nonce();
                request.to_frame().encode(&mut self.to_master);
                Frame::Ping(nonce).encode(&mut self.to_master);
                self.own.answer_pending = Some((nonce, said));
                self.own.ui.say(format!("answering {}…", self.name), now_ms);
            }
            Command::Repaint => self.repaint(),
            Command::Redraw => self.draw_status(false),
        }
    }

    /// Get the session drawn again from a fresh keyframe (an overlay covered part of it): a
    /// RESIZE at the same size does that for a client that takes views; otherwise attach
    /// again.
    fn repaint(&mut self) {
        if self.own.status_wanted {
            let (cols, rows) = self.own.session_size();
            Frame::Resize { cols, rows }.encode(&mut self.to_master);
        } else {
            let name = self.name.clone();
            self.reconnect(&name);
        }
    }

    /// Attach session `name` instead of the current one, without leaving: its keyframe redraws
    /// the terminal. A session that is not running, or is the one this terminal runs inside,
    /// is refused with a message and the current one stays.
    fn switch_to(&mut self, name: &str) {
        let now_ms = desk_common::clock::now_ms();
        let Ok(target) = SessionName::parse(name) else { return };
        if target == self.name {
            return;
        }
        if session::enclosing(&self.own.paths).unwrap_or_default().contains(&target) {
            self.own.ui.say(format!("{name} is the session this terminal runs in"), now_ms);
            self.draw_status(false);
            return;
        }
        let previous = self.name.clone();
        if self.reconnect(&target) {
            self.own.ui.last = Some(previous.as_str().to_string());
        }
    }

    /// Replace the connection with one to `target`; false (and a message) when it cannot be
    /// reached.
    fn reconnect(&mut self, target: &SessionName) -> bool {
        let now_ms = desk_common::clock::now_ms();
        let files = self.own.paths.session(target);
        let stream = match session::probe_settled(&files) {
            Ok(Probe::Live(stream)) => stream,
            _ => {
                self.own.ui.say(format!("{target} is not running"), now_ms);
                self.draw_status(false);
                return false;
            }
        };
        self.adopt(target, stream)
    }

    /// Attach `target` over `stream` instead of the current connection: the session's WELCOME and keyframe redraw the terminal.
    fn adopt(&mut self, target: &SessionName, stream: std::os::unix::net::UnixStream) -> bool {
        if stream.set_nonblocking(true).is_err() {
            return false;
        }
        let mut sock = mio::net::UnixStream::from_std(stream);
        if self.poll.registry().register(&mut sock, SOCKET, Interest::READABLE).is_err() {
            return false;
        }
        // Leave the old session as a detach (best effort: it is closed right after), and with
        // it whatever was still on its way to the terminal: the new keyframe redraws it all.
        let mut bye = Vec::new();
        Frame::Detach.encode(&mut bye);
        let _ = self.sock.write(&bye);
        let mut old = std::mem::replace(&mut self.sock, sock);
        let _ = self.poll.registry().deregister(&mut old);
        drop(old);
        self.name = target.clone();
        self.provider.clear();
        self.decoder = FrameDecoder::new();
        self.to_master = self.hello();
        self.to_tty.clear();
        self.to_tty_off = 0;
        self.in_keyframe = false;
        self.welcomed = false;
        self.wire = 0;
        self.lend_refused = false;
        self.sock_readable = false;
        // A new socket: written to at once, watched for writability once a write blocks.
        self.sock_writable = true;
        self.sock_watches_out = false;
        self.handshake_deadline = std::time::Instant::now() + desk_common::master_client::REQUEST_TIMEOUT;
        self.own.answer_pending = None;
        self.own.asked_dialog = false;
        self.own.drew_over = false;
        self.own.lost_status();
        true
    }

    /// The HELLO for the current session, at the size the client reports, in the version its
    /// master speaks (its session record says; docs/protocol.md §12).
    fn hello(&mut self) -> Vec<u8> {
        let (cols, rows) = self.own.session_size();
        self.hello = session::hello_version(&self.own.paths.session(&self.name).socket);
        Frame::Hello {
            version: self.hello,
            role: self.role,
            cols,
            rows,
            status_line: self.size_line,
            view: self.own.status_wanted,
        }
        .to_bytes()
    }

    /// Queue the status line (and an open overlay) for the terminal, unless a keyframe is half
    /// written; `force`: even if its text did not change.
    fn draw_status(&mut self, force: bool) {
        if self.in_keyframe || !self.session_drawn {
            return;
        }
        if let Some(bytes) = self.own.status_bytes(self.name.as_str(), force, desk_common::clock::now_ms()) {
            self.tty_out(&bytes);
        }
        // Without the status line a prompt was drawn over the session's last row: once it
        // closes, the session is drawn again.
        if !self.own.status_on && !self.own.ui.reading() && std::mem::take(&mut self.own.drew_over) {
            self.repaint();
        }
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
                self.dropped(format!("cannot write to the session: {e}"));
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
        tty::write_blocking(self.raw.fd(), &pending);
    }

    fn read_socket(&mut self, buf: &mut [u8]) -> bool {
        let n = match self.sock.read(buf) {
            Ok(0) => {
                self.dropped("the session closed the connection".into());
                return false;
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.sock_readable = false;
                return false;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return true,
            Err(e) => {
                self.dropped(format!("cannot read from the session: {e}"));
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

    /// The connection to the session dropped: the end of the attach.
    fn dropped(&mut self, why: String) {
        if self.ending.is_none() {
            self.ending = Some(Ending::Lost(why));
        }
    }

    fn on_frame(&mut self, frame: Frame) {
        let now_ms = desk_common::clock::now_ms();
        match frame {
            Frame::Welcome { version, info } if desk_wire::welcome_accepted(self.hello, version) => {
                self.welcomed = true;
                self.wire = version;
                self.provider = info.provider;
                self.generation = info.generation;
            }
            Frame::Welcome { version, .. } => self.lose(format!(
                "the session answered in protocol version {version} to a HELLO in {}; this desk speaks {OLDEST_PROTOCOL_VERSION} to {PROTOCOL_VERSION}",
                self.hello
            )),
            // While an overlay is up, the session's drawing waits for the keyframe its closing
            // asks for.
            Frame::Output(_) | Frame::Keyframe { .. } if self.own.ui.overlay_open() => {}
            Frame::Output(data) => {
                self.session_drawn = true;
                self.to_tty.extend_from_slice(&data);
                // A switch of screen (or a reset) takes the status row with it.
                if desk_term::kept::wipes_own_drawing(&data) {
                    self.draw_status(true);
                }
            }
            Frame::Keyframe { data, more } => {
                self.session_drawn = true;
                self.to_tty.extend_from_slice(&data);
                self.in_keyframe = more;
                if !more {
                    self.draw_status(true);
                }
            }
            Frame::Snapshot(snapshot) if self.own.asked_dialog => {
                self.own.asked_dialog = false;
                let provider = desk_core::provider::Provider::or_shell(&self.provider);
                let rules = desk_common::rules::load(provider, &self.own.paths.config)
                    .unwrap_or_else(|_| desk_core::state::RuleSet::builtin(provider));
                let scope = format!("{}/{}", self.name, self.generation);
                let dialog = rules.dialog.and_then(|spec| spec.read(&snapshot.screen.lines, None, &scope));
                for command in self.own.ui.dialog_read(self.name.as_str(), dialog, now_ms) {
                    self.carry(command);
                }
            }
            Frame::Pong(nonce) if self.own.answer_pending.as_ref().is_some_and(|(n, _)| *n == nonce) => {
                if let Some((_, said)) = self.own.answer_pending.take() {
                    self.own.ui.say(format!("answered {}: {said}", self.name), now_ms);
                    self.draw_status(false);
                }
            }
            Frame::Exit { status, escalated } => self.ending = Some(Ending::Exited(status, escalated)),
            Frame::Error { code: ErrorCode::NotPermitted, message } if self.own.answer_pending.is_some() => {
                self.own.answer_pending = None;
                self.own.ui.say(format!("{} not answered: {message}", self.name), now_ms);
                self.draw_status(false);
            }
            Frame::Error { code: ErrorCode::BadHello, .. } if !self.welcomed && self.own.status_wanted => {
                // A master older than this desk does not know the view option: attach to it
                // without the status line.
                self.own.status_wanted = false;
                self.own.resized(self.own.term.0, self.own.term.1);
                let name = self.name.clone();
                self.reconnect(&name);
            }
            Frame::Error { code, message } => match code {
                // Refused input: the attach goes on, the bell says so now, and the reason is
                // printed when the attach ends (writing it over the agent's screen would not do).
                ErrorCode::InputFull | ErrorCode::NotPermitted => {
                    self.tty_out(&[0x07]);
                    let times = self.refused.as_ref().map_or(0, |(n, _)| *n);
                    self.refused = Some((times + 1, message));
                }
                _ => self.lose(message),
            },
            Frame::Ping(nonce) => Frame::Pong(nonce).encode(&mut self.to_master),
            Frame::Terminal(op) => self.on_terminal(op),
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
                        self.own.resized(cols, rows);
                        let (cols, rows) = self.own.session_size();
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
                    self.detach();
                    self.ending = Some(Ending::Signal(other));
                }
            }
        }
    }
}
