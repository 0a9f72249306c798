//! `desk relay`: the host's end of a remote link, run by `ssh HOST desk relay`.
//!
//! Owns the relay's I/O: it writes the handshake (desk_wire::relay) first, then reads envelopes
//! from standard input and serves each stream the local desk opens — a connection to a
//! session's master socket or to `desk serve`'s control socket, carried byte for byte, or a run
//! of this desk with arguments (standard output, standard error, exit code) — writing what comes
//! back as envelopes on standard output. Invariants: nothing but envelopes follows the handshake
//! on standard output (one writer at a time, under a lock, each envelope whole); a stream's
//! failure closes that stream with a reason and never the link; when the local side goes away
//! (standard input ends) every stream is shut and every command still running is killed (by its
//! pid), so a dropped connection leaves no relay behind. Masters are not its children: they are
//! started by `desk new` detached (setsid), and under the host's systemd user manager when it has
//! one ([`enter_user_scope`]), so they outlive the ssh login that asked for them.
//!
//! One thread per stream's sending direction, blocking I/O: a relay serves one person's handful
//! of streams. What comes for a stream is handed to its socket without blocking the link's
//! reader, and each stream's sender keeps within the window its reader granted
//! ([`super::flow`]), so a reader that stops holds back its own stream and no other.

use anyhow::{Context, Result};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use desk_wire::relay::{EnvelopeDecoder, Handshake, Kind, LINK_STREAM, MAX_ENVELOPE, RELAY_VERSION, Target};

use super::HostFacts;
use super::flow::{Drain, DrainTo, Grant, SendError, Windows};
use crate::paths::{Paths, SessionName};
use crate::session::{self, Probe};

/// 64 KiB: one read of a socket or a command's output per envelope; the envelope's limit is
/// larger, so a read never needs cutting.
const READ_CHUNK: usize = 64 * 1024;

/// The relay's standard output: envelopes from every stream's thread, one whole envelope at a
/// time, each in one write. The descriptor itself, not `std::io::Stdout`: that one is line
/// buffered, which cut every envelope whose payload holds a newline into two writes (up to the
/// last newline, then the rest at the flush), so ssh forwarded it as two packets. With it, the
/// send windows of the streams it carries (what the other side's readers granted).
#[derive(Clone)]
pub(super) struct Out {
    file: Arc<Mutex<std::fs::File>>,
    pub(super) windows: Arc<Windows>,
}

impl Out {
    pub(super) fn new(file: std::fs::File) -> Out {
        Out { file: Arc::new(Mutex::new(file)), windows: Windows::new() }
    }

    /// Bytes before any envelope (the handshake).
    pub(super) fn write_raw(&self, bytes: &[u8]) -> std::io::Result<()> {
        self.file.lock().unwrap_or_else(|p| p.into_inner()).write_all(bytes)
    }

    pub(super) fn send(&self, stream: u32, kind: Kind, payload: &[u8]) -> std::io::Result<()> {
        let mut bytes = Vec::with_capacity(payload.len() + desk_wire::relay::ENVELOPE_HEADER);
        desk_wire::relay::encode_parts(stream, kind, payload, &mut bytes)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        self.write_raw(&bytes)
    }

    /// DATA or STDERR of stream `id`, within its window (waiting for the reader's grants).
    pub(super) fn send_data(&self, id: u32, kind: Kind, payload: &[u8]) -> std::io::Result<()> {
        match self.windows.send(id, payload, |piece| self.send(id, kind, piece)) {
            Ok(()) => Ok(()),
            Err(SendError::Send(e)) => Err(e),
            Err(SendError::Closed(_)) => Err(std::io::Error::other("the stream is closed")),
        }
    }

    /// What grants the sender of stream `id` on the other side more window.
    pub(super) fn grant(&self, id: u32) -> Grant {
        let out = self.clone();
        Box::new(move |n| {
            let _ = out.send(id, Kind::Window, &n.to_be_bytes());
        })
    }
}

/// What the relay writes a stream's incoming bytes to.
pub(super) enum Inlet {
    Socket(Drain),
    /// A command's standard input and its pid (to kill it if the link ends).
    Command(Drain, u32),
    /// A run of the linked host's desk through a shared link ([`super::linkd`]): the local end
    /// of its standard input, and what closes its stream on the link.
    Upstream {
        input: Drain,
        close: Box<dyn FnOnce() + Send>,
    },
}

pub(super) type Inlets = Arc<Mutex<HashMap<u32, Inlet>>>;

/// What a relay does with a stream the local side opens, and with its pings: the host's relay
/// reaches this host's sockets and desk ([`Host`]); a shared link forwards them to the host it
/// links ([`super::linkd`]). The rest — envelopes to and from open streams — is one piece of
/// code for both ([`serve_on`]).
pub(super) trait Opener {
    /// Open stream `id` to `target`: Ok once it is open (OPENED sent) or why not.
    fn open(&self, id: u32, target: Target, out: &Out, inlets: &Inlets) -> Result<(), String>;
    /// Answer a PING's payload (with a PONG).
    fn ping(&self, payload: Vec<u8>, out: &Out);
}

/// What a run of this desk printed and its exit code, when the relay answers it itself.
pub struct Ran {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// The runs of this desk the relay answers in its own process (`desk ls --json`, which `desk ls
/// --all` and the dashboard ask every host for), instead of starting the desk again: what
/// answers a run of these arguments, `None` for any other, which is run. Given by the desk
/// binary, which has the commands' code.
pub type InProcess = fn(&[String]) -> Option<fn(&Paths) -> Ran>;

/// The host's own relay: this host's sessions, daemon and desk.
struct Host<'a> {
    paths: &'a Paths,
    exe: PathBuf,
    in_process: InProcess,
}

impl Opener for Host<'_> {
    fn open(&self, id: u32, target: Target, out: &Out, inlets: &Inlets) -> Result<(), String> {
        match target {
            Target::Exec(args) if args.first().is_some_and(|a| a != "relay") => {
                answer_in_process(id, args, self.paths, self.in_process, out)
                    .map_or_else(|args| run_command(id, &self.exe, &args, out, inlets), |()| Ok(()))
            }
            target => open(id, target, self.paths, &self.exe, out, inlets),
        }
    }

    fn ping(&self, payload: Vec<u8>, out: &Out) {
        let _ = out.send(LINK_STREAM, Kind::Pong, &payload);
    }
}

/// Serve the link on standard input and output until the local side closes it; the runs of this
/// desk that `in_process` answers are answered in this process.
pub fn serve(paths: &Paths, in_process: InProcess) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find this desk's own executable")?;
    let stdout = std::io::stdout().as_fd().try_clone_to_owned().context("cannot use the standard output")?;
    let out = Out::new(std::fs::File::from(stdout));
    let handshake = Handshake {
        relay_version: RELAY_VERSION,
        wire_version: desk_wire::PROTOCOL_VERSION,
        desk_version: env!("CARGO_PKG_VERSION").to_string(),
    };
    out.write_raw(&handshake.encode()).context("cannot write the handshake")?;
    serve_on(std::io::stdin().lock(), &out, &Host { paths, exe, in_process });
    Ok(())
}

/// Read envelopes from `input` until it ends, serving each stream through `opener` and writing
/// what comes back on `out`; then shut every stream and stop every command still running.
pub(super) fn serve_on(mut input: impl Read, out: &Out, opener: &dyn Opener) {
    let inlets: Inlets = Arc::new(Mutex::new(HashMap::new()));
    let mut decoder = EnvelopeDecoder::new();
    let mut buf = vec![0u8; READ_CHUNK];
    let ended = loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break "the local side closed the link".to_string(),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => break format!("cannot read the link: {e}"),
        };
        decoder.push(&buf[..n]);
        let mut broken = None;
        loop {
            match decoder.next_envelope() {
                Ok(Some(envelope)) => on_envelope(envelope, opener, out, &inlets),
                Ok(None) => break,
                Err(e) => {
                    broken = Some(format!("the local side sent {e}"));
                    break;
                }
            }
        }
        if let Some(why) = broken {
            break why;
        }
    };
    tracing::debug!("relay: {ended}");
    // Shut every stream; kill the commands still running (a `desk events --follow`).
    out.windows.close_all();
    let mut inlets = inlets.lock().unwrap_or_else(|p| p.into_inner());
    for (_, inlet) in inlets.drain() {
        inlet.close();
    }
}

impl Inlet {
    fn drain(&self) -> Drain {
        match self {
            Inlet::Socket(drain) | Inlet::Command(drain, _) | Inlet::Upstream { input: drain, .. } => drain.clone(),
        }
    }

    /// The local side is done with the stream: shut its socket, stop its command.
    fn close(self) {
        match self {
            Inlet::Socket(socket) => socket.close(),
            Inlet::Command(stdin, pid) => {
                stdin.close();
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::SIGTERM);
            }
            Inlet::Upstream { input, close } => {
                input.close();
                close();
            }
        }
    }
}

fn on_envelope(envelope: desk_wire::relay::Envelope, opener: &dyn Opener, out: &Out, inlets: &Inlets) {
    let id = envelope.stream;
    match envelope.kind {
        Kind::Ping => opener.ping(envelope.payload, out),
        Kind::Open => {
            let opened = Target::decode(&envelope.payload)
                .map_err(|e| e.to_string())
                .and_then(|target| opener.open(id, target, out, inlets));
            match opened {
                Ok(()) => {}
                Err(why) => {
                    let _ = out.send(id, Kind::Close, why.as_bytes());
                }
            }
        }
        // Never blocks: a stream whose reader here stops has its bytes queued (within the
        // window its sender keeps to), and the link's other streams go on.
        Kind::Data => {
            if let Some(drain) = inlets.lock().unwrap_or_else(|p| p.into_inner()).get(&id).map(Inlet::drain) {
                drain.push(&envelope.payload);
            }
        }
        Kind::Eof => {
            if let Some(drain) = inlets.lock().unwrap_or_else(|p| p.into_inner()).get(&id).map(Inlet::drain) {
                drain.end();
            }
        }
        Kind::Close => {
            out.windows.close(id);
            let removed = inlets.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
            if let Some(inlet) = removed {
                inlet.close();
            }
        }
        Kind::Window => {
            let n = envelope.payload.get(..4).and_then(|b| b.try_into().ok()).map_or(0, u32::from_be_bytes);
            out.windows.grant(id, n);
        }
        // What only the relay sends, or nothing: ignored.
        Kind::Opened | Kind::Stderr | Kind::Exit | Kind::Pong => {}
    }
}

/// Open stream `id` to `target`: Ok once it is open (OPENED sent) or why not.
fn open(id: u32, target: Target, paths: &Paths, exe: &Path, out: &Out, inlets: &Inlets) -> Result<(), String> {
    match target {
        Target::Session(name) => {
            let name = SessionName::parse(&name).map_err(|e| format!("{name:?} is not a session name: {e}"))?;
            let files = paths.session(&name);
            match session::probe_settled(&files).map_err(|e| format!("{e:#}"))? {
                Probe::Live(stream) => carry_socket(id, stream, out, inlets),
                Probe::Absent | Probe::Stale => Err(match session::read_exit(&files).ok().flatten() {
                    Some(exit) => format!("session {name} {}", crate::signals::describe_exit(exit.status)),
                    None => crate::suggest::unknown_session_in(paths, name.as_str()),
                }),
            }
        }
        Target::Control => {
            let socket = crate::daemon_client::socket_path(paths);
            let stream = UnixStream::connect(&socket).map_err(|e| format!("desk serve is not running here ({e})"))?;
            carry_socket(id, stream, out, inlets)
        }
        Target::Exec(args) => run_command(id, exe, &args, out, inlets),
        Target::Facts => {
            let facts = HostFacts::of_this_host(paths);
            let json = serde_json::to_vec(&facts).map_err(|e| e.to_string())?;
            out.send(id, Kind::Opened, &[]).map_err(|e| e.to_string())?;
            let _ = out.send(id, Kind::Data, &json);
            let _ = out.send(id, Kind::Close, &[]);
            Ok(())
        }
    }
}

/// Carry a connected socket: OPENED, then its bytes as DATA until it ends (then CLOSE).
pub(super) fn carry_socket(id: u32, stream: UnixStream, out: &Out, inlets: &Inlets) -> Result<(), String> {
    let reader = stream.try_clone().map_err(|e| e.to_string())?;
    out.windows.open(id);
    inlets
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id, Inlet::Socket(Drain::new(DrainTo::Socket(stream), out.grant(id))));
    out.send(id, Kind::Opened, &[]).map_err(|e| e.to_string())?;
    let out = out.clone();
    let inlets = inlets.clone();
    std::thread::spawn(move || {
        let why = pump(reader, id, Kind::Data, &out);
        inlets.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
        out.windows.close(id);
        let _ = out.send(id, Kind::Close, why.as_bytes());
    });
    Ok(())
}

/// Copy `from` into envelopes of `kind` until it ends, within the stream's window: "" at its
/// end, else why it failed.
pub(super) fn pump(mut from: impl Read, id: u32, kind: Kind, out: &Out) -> String {
    let mut buf = vec![0u8; READ_CHUNK.min(MAX_ENVELOPE)];
    loop {
        match from.read(&mut buf) {
            Ok(0) => return String::new(),
            Ok(n) => {
                if let Err(e) = out.send_data(id, kind, &buf[..n]) {
                    return format!("cannot write the link: {e}");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return format!("{e}"),
        }
    }
}

/// Answer a run of this desk in this process when `in_process` can (OPENED, its output, EXIT,
/// CLOSE, from a thread of its own, so the link's reader goes on meanwhile), else give `args`
/// back to be run. What the local side sends on the stream (its standard input, which these runs
/// do not read) finds no inlet and is dropped.
fn answer_in_process(
    id: u32,
    args: Vec<String>,
    paths: &Paths,
    in_process: InProcess,
    out: &Out,
) -> Result<(), Vec<String>> {
    let Some(answer) = in_process(&args) else { return Err(args) };
    out.windows.open(id);
    if out.send(id, Kind::Opened, &[]).is_err() {
        return Ok(());
    }
    let (paths, out) = (paths.clone(), out.clone());
    std::thread::spawn(move || {
        let ran = answer(&paths);
        let sent =
            ran.stdout.chunks(READ_CHUNK).try_for_each(|piece| out.send_data(id, Kind::Data, piece)).and_then(|()| {
                ran.stderr.chunks(READ_CHUNK).try_for_each(|piece| out.send_data(id, Kind::Stderr, piece))
            });
        out.windows.close(id);
        if sent.is_ok() {
            let _ = out.send(id, Kind::Exit, &ran.code.to_be_bytes());
        }
        let _ = out.send(id, Kind::Close, &[]);
    });
    Ok(())
}

/// Run this desk with `args`: its output as DATA and STDERR, then EXIT with its code.
fn run_command(id: u32, exe: &Path, args: &[String], out: &Out, inlets: &Inlets) -> Result<(), String> {
    if args.first().is_some_and(|a| a == "relay") {
        return Err("a relay does not run another relay".into());
    }
    let mut child: Child = Command::new(exe)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    out.windows.open(id);
    if let Some(stdin) = child.stdin.take() {
        let stdin = Drain::new(DrainTo::Pipe(stdin), out.grant(id));
        inlets.lock().unwrap_or_else(|p| p.into_inner()).insert(id, Inlet::Command(stdin, child.id()));
    }
    out.send(id, Kind::Opened, &[]).map_err(|e| e.to_string())?;
    let errors = stderr.map(|stderr| {
        let out = out.clone();
        std::thread::spawn(move || pump(stderr, id, Kind::Stderr, &out))
    });
    let out = out.clone();
    let inlets = inlets.clone();
    std::thread::spawn(move || {
        if let Some(stdout) = stdout {
            pump(stdout, id, Kind::Data, &out);
        }
        if let Some(errors) = errors {
            let _ = errors.join();
        }
        let code = match child.wait() {
            Ok(status) => {
                use std::os::unix::process::ExitStatusExt;
                status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
            }
            Err(_) => 1,
        };
        inlets.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
        out.windows.close(id);
        let _ = out.send(id, Kind::Exit, &code.to_be_bytes());
        let _ = out.send(id, Kind::Close, &[]);
    });
    Ok(())
}

/// Where the host's systemd keeps the user's bus, when it has a user manager.
fn user_bus(uid: u32) -> Option<PathBuf> {
    let bus = PathBuf::from(format!("/run/user/{uid}/bus"));
    (Path::new("/run/systemd/system").is_dir() && bus.exists()).then_some(bus)
}

/// On a host whose systemd runs a user manager, run the relay again inside a transient scope
/// of it (`systemd-run --user --scope`), so that what it starts (masters, `desk serve`) belongs to
/// the user's manager and not to the ssh login's session, which logind ends (and, with
/// `KillUserProcesses`, kills) when the login closes. Returns only when it does not: no systemd,
/// no user manager, no `systemd-run`, or already in such a scope (`DESK_RELAY_SCOPED`).
pub fn enter_user_scope() {
    use std::os::unix::process::CommandExt;
    if std::env::var_os("DESK_RELAY_SCOPED").is_some() {
        return;
    }
    let uid = nix::unistd::geteuid().as_raw();
    if user_bus(uid).is_none() {
        return;
    }
    let Some(systemd_run) = std::env::var_os("PATH")
        .and_then(|path| std::env::split_paths(&path).map(|d| d.join("systemd-run")).find(|p| p.is_file()))
    else {
        return;
    };
    let Ok(exe) = std::env::current_exe() else { return };
    let mut cmd = Command::new(systemd_run);
    cmd.args(["--user", "--scope", "--quiet", "--collect", "--"]).arg(exe).arg("relay");
    cmd.env("DESK_RELAY_SCOPED", "1");
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        cmd.env("XDG_RUNTIME_DIR", format!("/run/user/{uid}"));
    }
    // exec: only returns on failure, and then the relay runs as it is.
    let e = cmd.exec();
    tracing::warn!("relay: cannot enter a systemd user scope: {e}");
}
