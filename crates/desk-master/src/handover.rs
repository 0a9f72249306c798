//! In-place handover: the master re-executes another `desk-master` binary (`desk upgrade`) and
//! keeps its process, its child, its terminal, its socket, its clients and its state.
//!
//! Owns both halves. The old image takes the request ([`Master::request_handover`]: checked
//! whole before anything changes), waits for a quiet point ([`Master::try_handover`]: the
//! screen model not inside an escape sequence, at the end of a loop turn, so no byte read from
//! the terminal is half-handled; bytes the child writes meanwhile wait in the kernel's PTY
//! buffer), flushes what it must (held-back title and noise events, the session log, what each
//! client's socket takes), writes the [`Record`] into a memfd, clears close-on-exec on exactly
//! the descriptors handed over (the terminal, the listening socket, the name's lock, each
//! client, the memfd, and a descriptor of its own binary for the way back) and executes the
//! new binary with [`HANDOVER_ARG`]. The new image ([`resume`]) reads and checks the record
//! before it touches a descriptor, takes them over (close-on-exec again at once, so the agent's
//! later children never inherit them), rebuilds the loop, sends every streaming client a
//! keyframe, journals an `upgraded` event and answers the requester.
//!
//! Invariants: a handover refused or failed before the exec leaves the master running its old
//! binary, every client connected, and the requester told why; an exec that returns is undone
//! (close-on-exec set again) and reported the same way; a new image that cannot read the record
//! executes the old binary again (through the descriptor kept of it, so this works even after
//! the old file was replaced or deleted), which reads its own record and tells the requester
//! why the new one could not; only when that too fails does the master end, logging why in its
//! log, and the agent loses its terminal as at a master crash (docs/upgrading.md). The record
//! is versioned under `desk_common::format`'s rule ([`FORMAT`]), and a binary says which
//! versions it reads (`desk-master --handover-formats`) so that `desk upgrade` never starts a
//! handover the new binary cannot finish.

use anyhow::{Context, Result, anyhow};
use mio::net::{UnixListener, UnixStream};
use mio::unix::SourceFd;
use mio::{Interest, Poll, Token};
use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use serde::{Deserialize, Serialize};
use signal_hook_mio::v1_0::Signals;
use std::ffi::CString;
use std::io::{Read, Seek, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Instant;
use tracing::{info, warn};

use super::client::Client;
use super::clients::client_id;
use super::event_loop::{Master, Parts};
use super::handover_request::{QUIET_POINT_WITHIN, Request};
use super::queue::OutQueue;
use super::socket::LISTENER;
use super::timers::Timer;
use desk_common::clock::now_ms;
use desk_common::format::Format;
use desk_common::journal::{JOURNAL_CAP, Journal};
use desk_common::paths::{Paths, SessionName};
use desk_common::session::{self, MasterLock, SessionMeta};
use desk_core::provider::Provider;
use desk_core::session::{SavedPolicy, SessionPolicy};
use desk_core::state::{Authority, RuleSet, SavedAuthority};
use desk_term::screen::{SavedScreen, Screen};
use desk_wire::events::EventBody;
use desk_wire::{ErrorCode, Frame, Role};

/// The handover record. Version 1 is the first; a binary reads the versions it lists in
/// `--handover-formats`, and a change of the record (or of the screen model's, policy's or
/// authority's saved forms inside it) needs a new version, read by the binaries after it.
pub(crate) const FORMAT: Format = Format::first("master handover");

/// The argument that makes `desk-master` resume a handover instead of starting a session.
pub(crate) const HANDOVER_ARG: &str = "--handover";

/// The argument that makes `desk-master` print the handover formats it reads, one line of
/// numbers separated by spaces, and exit.
pub const FORMATS_ARG: &str = "--handover-formats";

/// The environment variable naming the memfd that holds the record.
const RECORD_ENV: &str = "DESK_HANDOVER_FD";
/// The descriptor of the binary that wrote the record, for the way back.
const FALLBACK_ENV: &str = "DESK_HANDOVER_FALLBACK_FD";
/// Arguments the old binary takes before its own (`master`, when it was `desk` itself).
const FALLBACK_ARGS_ENV: &str = "DESK_HANDOVER_FALLBACK_ARGS";
/// The session, so that a new image that cannot read the record can still log why.
const SESSION_ENV: &str = "DESK_HANDOVER_SESSION";
/// Set when the new image went back to the old binary: why it could not take over.
const FAILED_ENV: &str = "DESK_HANDOVER_FAILED";

/// The largest record read back: a full screen pair, a million history lines of a full row and
/// 64 clients' queues stay far below it; a larger one is not a record of ours.
const MAX_RECORD: u64 = 1 << 30;

/// Everything the new image needs; see the module documentation.
#[derive(Serialize, Deserialize)]
struct Record {
    /// First, under the format rule.
    version: u32,
    /// `desk-master --version` of the binary that wrote it.
    from: String,
    /// When the terminal was last read (Unix ms): the new image measures the pause from it.
    paused_at_ms: u64,
    /// The client that asked (its token).
    requester: usize,
    pty_fd: RawFd,
    listener_fd: RawFd,
    lock_fd: RawFd,
    meta: SessionMeta,
    screen: SavedScreen,
    policy: SavedPolicy,
    authority: SavedAuthority,
    journal_next_seq: u64,
    journal_failed: bool,
    journal_gap: Option<(u64, u64, String)>,
    output_active: bool,
    last_output_ms_ago: u64,
    last_controller_input_ms: Option<u64>,
    /// Bytes still waiting for the child to read them.
    #[serde(with = "hex")]
    input: Vec<u8>,
    pty_writable: bool,
    next_client: usize,
    subreaper: bool,
    /// The session log's cap, when the session keeps one.
    log_cap: Option<u64>,
    screen_check_armed: bool,
    clients: Vec<SavedClient>,
}

#[derive(Serialize, Deserialize)]
struct SavedClient {
    token: usize,
    fd: RawFd,
    pid: Option<i32>,
    role: Option<Role>,
    /// Its terminal's size as the policy knows it; kept in this record for a binary from before
    /// the policy kept viewers' sizes (each side reads it: `adopt_client_size`).
    size: Option<(u16, u16)>,
    status_line: bool,
    always_view: bool,
    /// Received bytes of a frame not complete yet.
    #[serde(with = "hex")]
    decoder: Vec<u8>,
    /// Queued frames (whole), how much of the first was written, and whether the last frame
    /// written was a keyframe chunk with more to follow.
    out: Vec<Hex>,
    head_off: usize,
    mid_keyframe: bool,
    writable: bool,
    output_bytes: u64,
    keyframes: u64,
}

/// Bytes as hex in the record (JSON would spell each byte as a number).
#[derive(Serialize, Deserialize)]
#[serde(transparent)]
struct Hex(#[serde(with = "hex")] Vec<u8>);

mod hex {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        let mut text = String::with_capacity(bytes.len() * 2);
        for b in bytes {
            text.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
            text.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
        }
        s.serialize_str(&text)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
        text.as_bytes()
            .chunks(2)
            .map(|pair| match pair {
                [h, l] => digit(*h).zip(digit(*l)).map(|(h, l)| h << 4 | l),
                _ => None,
            })
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(|| serde::de::Error::custom("not hex"))
    }
}

/// What `desk-master --handover-formats` prints.
pub(crate) fn formats_line() -> String {
    (FORMAT.oldest..=FORMAT.current).map(|v| v.to_string()).collect::<Vec<_>>().join(" ")
}

fn refusal(why: impl std::fmt::Display) -> Frame {
    Frame::error(ErrorCode::NotPermitted, format!("the master keeps its binary: {why}"))
}

fn inherit(fd: BorrowedFd<'_>, inherited: bool) -> nix::Result<()> {
    let flags = if inherited { FdFlag::empty() } else { FdFlag::FD_CLOEXEC };
    fcntl(fd, FcntlArg::F_SETFD(flags)).map(|_| ())
}

fn cstring(bytes: &[u8]) -> Result<CString> {
    CString::new(bytes).map_err(|_| anyhow!("an argument or variable holds a NUL byte"))
}

/// This process's environment for the next image: without the variables of a previous
/// handover, with `extra`.
fn environment(extra: &[(&str, String)]) -> Result<Vec<CString>> {
    let ours = [RECORD_ENV, FALLBACK_ENV, FALLBACK_ARGS_ENV, SESSION_ENV, FAILED_ENV];
    let mut env = Vec::new();
    for (key, value) in std::env::vars_os() {
        if ours.iter().any(|k| key == *k) {
            continue;
        }
        let mut pair = key.as_bytes().to_vec();
        pair.push(b'=');
        pair.extend_from_slice(value.as_bytes());
        env.push(cstring(&pair)?);
    }
    for (key, value) in extra {
        env.push(cstring(format!("{key}={value}").as_bytes())?);
    }
    Ok(env)
}

impl Master {
    /// A client's `upgrade` EVENT: check what can be checked now, then wait for a quiet point.
    /// An `Err` is the ERROR to answer; nothing has changed then.
    pub(super) fn request_handover(
        &mut self,
        token: Token,
        binary: PathBuf,
        args: Vec<String>,
        formats: &[u32],
        now: Instant,
    ) -> Result<(), Frame> {
        if self.handover_waiting() {
            return Err(refusal("a handover is already under way"));
        }
        if !formats.contains(&FORMAT.current) {
            return Err(refusal(format!(
                "{} reads handover formats {formats:?}, and this master writes format {}; restart the session to move it to that binary",
                binary.display(),
                FORMAT.current
            )));
        }
        match std::fs::metadata(&binary) {
            Ok(meta) if meta.is_file() => {}
            Ok(_) => return Err(refusal(format!("{} is not a file", binary.display()))),
            Err(e) => return Err(refusal(format!("cannot use {}: {e}", binary.display()))),
        }
        if let Err(e) = nix::unistd::access(&binary, nix::unistd::AccessFlags::X_OK) {
            return Err(refusal(format!("{} is not executable: {e}", binary.display())));
        }
        if let Some(why) = self.policy().handover_refusal() {
            return Err(refusal(why));
        }
        if !self.pending_keys().is_empty() {
            return Err(refusal("an operator's keys are still being typed; try again when they are"));
        }
        self.arm(now + QUIET_POINT_WITHIN, Timer::Handover);
        self.wait_for_quiet_point(Request { client: token, binary, args, deadline: now + QUIET_POINT_WITHIN });
        Ok(())
    }

    /// At the end of a loop turn (or when [`Timer::Handover`] fires): hand over if the master
    /// is at a quiet point, give up if the deadline passed.
    pub(super) fn try_handover(&mut self, now: Instant) {
        let Some(request) = self.take_handover_request() else { return };
        if !self.clients().contains_key(&request.client) {
            info!("the client that asked for a handover left; not handing over");
            return;
        }
        if let Some(why) = self.policy().handover_refusal() {
            return self.handover_failed(&request, refusal(why));
        }
        if !self.screen().can_save() {
            if now >= request.deadline {
                let why = format!(
                    "the terminal stayed inside an escape sequence for {} s; try again",
                    QUIET_POINT_WITHIN.as_secs()
                );
                return self.handover_failed(&request, refusal(why));
            }
            self.wait_for_quiet_point(request);
            return;
        }
        match self.hand_over(&request, now) {
            // Only an exec that failed returns.
            Ok(()) => {}
            Err(e) => {
                warn!("handover to {} failed: {e:#}", request.binary.display());
                self.handover_failed(&request, refusal(format!("{e:#}")));
            }
        }
    }

    fn handover_failed(&mut self, request: &Request, error: Frame) {
        self.cancel(Timer::Handover);
        if let Some(client) = self.clients_mut().get_mut(&request.client) {
            client.push_control(&error);
        }
    }

    /// Write the record and execute the new binary. Returns only when something failed; the
    /// master then goes on as it was.
    fn hand_over(&mut self, request: &Request, now: Instant) -> Result<()> {
        let screen = self.screen().save().context("the screen model is inside an escape sequence")?;
        // What waits to be written is written (or, for the log, handed to the kernel) now.
        self.flush_title(now);
        self.flush_all_noise();
        self.drain_log(now);
        self.flush_log();
        self.settle(now);
        // Terminals clients handed over do not travel: each is given back, and handed over
        // again to the new image.
        self.give_back_terminals();
        // Left or leaving: its descriptor closes with the exec, as it would have soon.
        let leaving = |client: &Client| !client.alive() || client.closing.is_some() || client.hung_up;
        for client in self.clients_mut().values_mut() {
            client.flush();
            if !leaving(client) && client.streams_output() {
                // The new image sends a keyframe: the stream bytes not started are superseded.
                client.out.discard_backlog();
            }
        }
        let mut clients = Vec::new();
        for (token, client) in self.clients().iter() {
            if leaving(client) {
                continue;
            }
            let (frames, head_off, mid_keyframe) = client.out.saved();
            clients.push(SavedClient {
                token: token.0,
                fd: client.stream.as_raw_fd(),
                pid: client.pid,
                role: client.role,
                size: self.policy().client_size(client_id(*token)),
                status_line: client.status_line,
                always_view: client.always_view,
                decoder: client.decoder.pending().to_vec(),
                out: frames.into_iter().map(|f| Hex(f.to_vec())).collect(),
                head_off,
                mid_keyframe,
                writable: client.writable,
                output_bytes: client.output_bytes,
                keyframes: client.keyframes,
            });
        }
        let mut policy = self.policy().save(now);
        policy.clients.retain(|c| clients.iter().any(|s| s.token as u64 == c.id));
        let listener = self.socket_fd().context("the session's socket is closed")?;
        let (journal_next_seq, journal_failed, journal_gap) = self.journal().saved();
        let (input, pty_writable) = self.terminal().saved();
        let state = self.agent().saved(now);
        let record = Record {
            version: FORMAT.current,
            from: super::version_line(),
            paused_at_ms: now_ms(),
            requester: request.client.0,
            pty_fd: self.terminal().fd().as_raw_fd(),
            listener_fd: listener.as_raw_fd(),
            lock_fd: self.lock_fd().as_raw_fd(),
            meta: self.meta().clone(),
            screen,
            policy,
            authority: state.authority,
            journal_next_seq,
            journal_failed,
            journal_gap,
            output_active: state.output_active,
            last_output_ms_ago: state.last_output_ms_ago,
            last_controller_input_ms: state.last_person_input_ms,
            input,
            pty_writable,
            next_client: self.clients().next_token().0,
            subreaper: self.subreaper(),
            log_cap: self.log_cap(),
            screen_check_armed: state.screen_check_armed,
            clients,
        };
        let bytes = serde_json::to_vec(&record).context("cannot encode the handover record")?;
        let memfd = nix::sys::memfd::memfd_create(c"desk-handover", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
            .context("cannot create a memfd for the handover record")?;
        let mut file = std::fs::File::from(memfd);
        file.write_all(&bytes).context("cannot write the handover record")?;
        file.rewind().context("cannot rewind the handover record")?;
        // The binary running now, for the way back: by descriptor, so it works even once the
        // file was replaced or deleted by the upgrade.
        let me = std::fs::File::open("/proc/self/exe").context("cannot open this master's own binary")?;
        let fallback_args = if std::env::args_os().nth(1).is_some_and(|a| a == "master") { "master" } else { "" };

        let mut program = vec![cstring(request.binary.as_os_str().as_bytes())?];
        for arg in &request.args {
            program.push(cstring(arg.as_bytes())?);
        }
        program.push(cstring(HANDOVER_ARG.as_bytes())?);
        let env = environment(&[
            (RECORD_ENV, file.as_raw_fd().to_string()),
            (FALLBACK_ENV, me.as_raw_fd().to_string()),
            (FALLBACK_ARGS_ENV, fallback_args.to_string()),
            (SESSION_ENV, self.meta().name.clone()),
        ])?;

        let mut handed: Vec<BorrowedFd<'_>> =
            vec![self.terminal().fd(), listener, self.lock_fd(), file.as_fd(), me.as_fd()];
        handed.extend(
            self.clients()
                .values()
                .filter(|c| record.clients.iter().any(|s| s.fd == c.stream.as_raw_fd()))
                .map(|c| c.stream.as_fd()),
        );
        let cleared = handed.iter().try_for_each(|fd| inherit(*fd, true));
        let error = match cleared {
            Ok(()) => {
                info!(binary = %request.binary.display(), bytes = bytes.len(), "handing over to another desk-master");
                match nix::unistd::execve(&program[0], &program, &env) {
                    Err(e) => anyhow!("cannot execute {}: {e}", request.binary.display()),
                }
            }
            Err(e) => anyhow!("cannot pass a descriptor on: {e}"),
        };
        for fd in handed {
            if let Err(e) = inherit(fd, false) {
                warn!("cannot set close-on-exec again after a failed handover: {e}");
            }
        }
        Err(error)
    }
}

/// `desk-master --handover`: the new image. Returns the master's exit code, like `main`.
pub(crate) fn resume() -> i32 {
    let fd_of = |key: &str| std::env::var(key).ok().and_then(|v| v.parse::<RawFd>().ok());
    let session = std::env::var(SESSION_ENV).ok().and_then(|name| SessionName::parse(&name).ok());
    if let (Some(name), Ok(paths)) = (&session, Paths::from_env()) {
        desk_common::logging::init_file(&paths.session(name).log);
        desk_common::logging::log_panics();
    }
    let failed_before = std::env::var(FAILED_ENV).ok();
    let prepared = fd_of(RECORD_ENV).context("no handover record was passed (DESK_HANDOVER_FD)").and_then(read_record);
    // The tests' way to make a new binary that cannot take over (never on the way back).
    let prepared = match (&failed_before, desk_common::failpoint::failpoint_full_disk("handover-resume")) {
        (None, Err(e)) => prepared.and(Err(anyhow!("failpoint handover-resume: {e}"))),
        _ => prepared,
    };
    let (record, prepared) = match prepared.and_then(|record| prepare(&record).map(|p| (record, p))) {
        Ok(both) => both,
        Err(e) => return go_back(fd_of(FALLBACK_ENV), failed_before.is_some(), &format!("{e:#}")),
    };
    // Taken over: the record and the old binary's descriptor are not needed any more.
    for fd in [fd_of(RECORD_ENV), fd_of(FALLBACK_ENV)].into_iter().flatten() {
        // SAFETY: the previous image passed these at these numbers for us alone, and nothing
        // else here holds them (`read_record` gave its descriptor back).
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    let master = match rebuild(record, prepared, failed_before) {
        Ok(master) => master,
        Err(e) => {
            // The descriptors are ours now: nothing to go back with. The agent loses its
            // terminal as at a master crash; the log says why.
            tracing::error!("the handover failed after the descriptors were taken over: {e:#}");
            eprintln!("desk master: the handover failed: {e:#}");
            return 1;
        }
    };
    match master.run() {
        Ok(_) => 0,
        Err(e) => {
            eprintln!("desk master: {e:#}");
            1
        }
    }
}

/// Read the record from the start, leaving the memfd open (the old binary reads it again if
/// this image goes back to it).
fn read_record(fd: RawFd) -> Result<Record> {
    // SAFETY: the previous image passed the memfd at this number for us alone; it is given
    // back (not closed) below.
    let mut file = std::mem::ManuallyDrop::new(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }));
    file.rewind().context("cannot rewind the handover record")?;
    let mut bytes = Vec::new();
    (&*file).take(MAX_RECORD).read_to_end(&mut bytes).context("cannot read the handover record")?;
    Ok(desk_common::format::decode(&FORMAT, &bytes)?)
}

/// What the record holds that must be checked before a descriptor is touched.
struct Prepared {
    screen: Screen,
    policy: SessionPolicy,
    name: SessionName,
    provider: Provider,
}

fn prepare(record: &Record) -> Result<Prepared> {
    let now = Instant::now();
    let screen = Screen::restore(record.screen.clone()).map_err(|e| anyhow!("the saved screen: {e}"))?;
    let policy = SessionPolicy::restore(record.policy.clone(), super::speaks_protocol().unwrap_or(1), now)
        .map_err(|e| anyhow!("the saved session policy: {e}"))?;
    let name = SessionName::parse(&record.meta.name).map_err(|e| anyhow!("the saved session name: {e}"))?;
    let provider = Provider::or_shell(&record.meta.provider);
    let fds: Vec<RawFd> = [record.pty_fd, record.listener_fd, record.lock_fd]
        .into_iter()
        .chain(record.clients.iter().map(|c| c.fd))
        .collect();
    if fds.iter().enumerate().any(|(i, fd)| fds[..i].contains(fd)) {
        anyhow::bail!("the record names one descriptor twice");
    }
    for &fd in &fds {
        // SAFETY: only asked whether it is open; nothing is done with it.
        fcntl(unsafe { BorrowedFd::borrow_raw(fd) }, FcntlArg::F_GETFD)
            .map_err(|e| anyhow!("descriptor {fd} of the record was not passed on: {e}"))?;
    }
    Ok(Prepared { screen, policy, name, provider })
}

/// The new image cannot take over: execute the old binary again with the same record (it
/// reads its own format), telling it why. Returns only when that fails too.
fn go_back(fallback: Option<RawFd>, already_back: bool, why: &str) -> i32 {
    tracing::error!("cannot take over the session: {why}");
    if already_back {
        eprintln!("desk master: the old binary cannot take its session back either: {why}");
        return 1;
    }
    let Some(fd) = fallback else {
        eprintln!("desk master: cannot take over the session, and there is no binary to go back to: {why}");
        return 1;
    };
    let mut program: Vec<CString> = vec![c"desk-master".to_owned()];
    if std::env::var(FALLBACK_ARGS_ENV).is_ok_and(|a| a == "master") {
        program.push(c"master".to_owned());
    }
    program.push(c"--handover".to_owned());
    let env = environment(&[
        (RECORD_ENV, std::env::var(RECORD_ENV).unwrap_or_default()),
        (SESSION_ENV, std::env::var(SESSION_ENV).unwrap_or_default()),
        (FAILED_ENV, why.to_string()),
    ]);
    let error = match env {
        // SAFETY: the previous image passed its binary's descriptor at this number for us alone.
        Ok(env) => match nix::unistd::fexecve(unsafe { BorrowedFd::borrow_raw(fd) }, &program, &env) {
            Err(e) => e.to_string(),
        },
        Err(e) => format!("{e:#}"),
    };
    tracing::error!("cannot go back to the old binary either: {error}");
    eprintln!("desk master: cannot take over the session ({why}), nor go back to the old binary ({error})");
    1
}

fn rebuild(record: Record, prepared: Prepared, failed_before: Option<String>) -> Result<Master> {
    let now = Instant::now();
    let Prepared { screen, policy, name, provider } = prepared;
    let take = |fd: RawFd| {
        // SAFETY: the previous image passed these descriptors at these numbers, open, for this
        // process alone; `prepare` checked that each is open. Each is taken once.
        unsafe { OwnedFd::from_raw_fd(fd) }
    };
    let pty = take(record.pty_fd);
    let listener_fd = take(record.listener_fd);
    let lock = MasterLock::adopt(take(record.lock_fd));
    let client_fds: Vec<OwnedFd> = record.clients.iter().map(|c| take(c.fd)).collect();
    for fd in [pty.as_fd(), listener_fd.as_fd(), lock.as_fd()].into_iter().chain(client_fds.iter().map(AsFd::as_fd)) {
        inherit(fd, false).context("cannot set close-on-exec on a descriptor taken over")?;
    }

    if record.subreaper {
        // Kept across execve by the kernel; set again so that nothing here depends on it.
        // SAFETY: prctl with integer arguments touches no memory of ours.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    }
    let paths = Paths::from_env()?;
    let files = paths.session(&name);
    let state_dir = paths.session_state(&name);
    let poll = Poll::new().context("cannot create the event loop")?;
    let mut listener = UnixListener::from_std(std::os::unix::net::UnixListener::from(listener_fd));
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)
        .context("cannot register the listening socket")?;
    let mut signals = Signals::new(super::HANDLED_SIGNALS).context("cannot install signal handlers")?;
    poll.registry().register(&mut signals, Token(2), Interest::READABLE).context("cannot register signals")?;
    poll.registry()
        .register(&mut SourceFd(&pty.as_raw_fd()), Token(1), Interest::READABLE)
        .context("cannot register the PTY")?;
    let rules = desk_common::rules::load(provider, &paths.config).unwrap_or_else(|e| {
        warn!("{e:#}; using the built-in rules for {provider}");
        RuleSet::builtin(provider)
    });
    let authority = Authority::restore(rules, record.authority, now);
    let mut journal = Journal::open(&state_dir, JOURNAL_CAP)?;
    journal.continue_from(record.journal_next_seq);
    let log = match record.log_cap {
        Some(cap) => match desk_common::screen_log::LogWriter::open(&state_dir, cap) {
            Ok(log) => Some(log),
            Err(e) => {
                warn!("{e:#}; the session keeps no log from here on");
                None
            }
        },
        None => None,
    };
    let mut meta = record.meta;
    // The same process: its pid and start time are the record's; what it speaks is this binary's.
    meta.protocol = super::speaks_protocol();
    let mut master = Master::new(Parts {
        files,
        poll,
        listener,
        pty,
        signals,
        meta,
        screen,
        journal,
        authority,
        subreaper: record.subreaper,
        policy,
        log,
        lock,
    });
    master.clients_mut().continue_from(record.next_client);
    master.journal_mut().resume(record.journal_failed, record.journal_gap);
    if master.terminal_mut().restore(&record.input, record.pty_writable).is_err() {
        warn!("{} bytes of input for the child did not fit the queue; they are dropped", record.input.len());
    }
    for (saved, fd) in record.clients.into_iter().zip(client_fds) {
        let token = Token(saved.token);
        let stream = UnixStream::from_std(std::os::unix::net::UnixStream::from(fd));
        let mut client = Client::new(stream, saved.pid);
        client.role = saved.role;
        client.status_line = saved.status_line;
        client.always_view = saved.always_view;
        client.decoder.push(&saved.decoder);
        client.out =
            OutQueue::restored(saved.out.into_iter().map(|h| h.0).collect(), saved.head_off, saved.mid_keyframe);
        client.writable = saved.writable;
        client.output_bytes = saved.output_bytes;
        client.keyframes = saved.keyframes;
        // Whatever its terminal shows, the next thing it gets from the stream redraws it.
        client.needs_keyframe = client.streams_output();
        // Registered for readability only: what it is still owed is written now, or, if its
        // socket is full (or the old image last found it so), once the loop watches it for
        // writability (`watch_writability`, which an image before issue 22 did not need: it
        // watched every socket for writability all the time).
        client.flush();
        master.adopt_client(token, client, saved.size)?;
    }
    // Timers: the policy's (queued as its effects), the state authority's, and the loop's own.
    master.carry(now);
    master.announce(Vec::new());
    let output_ms_ago = record.output_active.then_some(record.last_output_ms_ago);
    master.resume_state(record.last_controller_input_ms, record.screen_check_armed, output_ms_ago, now);
    // Quiet output is evidence of readiness, which the old image may not have judged yet.
    master.arm(now + desk_core::state::READY_QUIET, Timer::ReadyCheck);
    master.terminal_mut().flush_input();
    let requester = Token(record.requester);
    match failed_before {
        Some(why) => {
            warn!("back on the old binary: the new one could not take over: {why}");
            if let Some(client) = master.clients_mut().get_mut(&requester) {
                client.push_control(&refusal(format!(
                    "the new binary could not take over ({why}); the master went back to its old binary"
                )));
            }
        }
        None => {
            let pause_ms = now_ms().saturating_sub(record.paused_at_ms);
            info!(from = %record.from, pause_ms, "took over the session from another desk-master");
            if let Err(e) = session::write_meta(master.files(), master.meta()) {
                warn!("{e:#}");
            }
            let body = EventBody::Upgraded { from: record.from, to: super::version_line(), pause_ms };
            master.emit(body.clone());
            let reply =
                desk_wire::events::Event { seq: 0, ts_ms: now_ms(), generation: master.meta().generation, body };
            if let Some(client) = master.clients_mut().get_mut(&requester) {
                client.push_control(&Frame::Event(reply.to_json_map()));
            }
        }
    }
    master.poke_info_file();
    master.refresh_info_file(now);
    master.settle(now);
    Ok(master)
}

/// Parse what `--handover-formats` printed.
pub fn parse_formats(out: &[u8]) -> Option<Vec<u32>> {
    let text = std::str::from_utf8(out).ok()?;
    text.split_whitespace().map(|w| w.parse().ok()).collect::<Option<Vec<u32>>>().filter(|v| !v.is_empty())
}
