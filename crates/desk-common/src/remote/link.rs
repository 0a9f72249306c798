//! The local side of one `ssh HOST desk relay`: a link that opens streams on the host.
//!
//! Owns the ssh child, the handshake check and the demultiplexing of what the relay sends.
//! [`Link::open`] gives the caller an ordinary connected Unix socket (one end of a socket pair
//! whose other end this module carries over the link), so every client of a master or of the
//! daemon — the attach client, the blocking request clients — speaks to a remote one exactly as
//! to a local one. [`Link::exec`] runs the host's desk with arguments and hands back its output
//! and exit code. Invariants: [`Link::connect`] returns within its timeout, whatever the host
//! does (the ssh child is killed by its pid past it); a host that prints before the handshake,
//! answers with another relay protocol or has no desk is an error naming the host and what to
//! do; when the link drops, every open stream's socket is shut (its reader sees the end) and
//! every pending open, exec and ping fails with why, so nothing waits on a dead link. One
//! thread reads the link and never blocks on a stream's reader (each stream's bytes are handed
//! over within the window its sender keeps to, [`super::flow`]); one thread per stream copies its
//! socket to the link, within the window the relay's side grants.

use anyhow::{Result, anyhow, bail};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use desk_wire::relay::{
    EnvelopeDecoder, Handshake, HandshakeError, Kind, LINK_STREAM, MAX_ENVELOPE, RELAY_VERSION, Target,
};

use super::flow::{Drain, DrainTo, Tally, Windows};
use crate::config::Host;
use crate::paths::Paths;

/// 12 s: ssh's own connect timeout ([`super::ssh::CONNECT_TIMEOUT_S`], 5 s) plus the host's login
/// shell and desk starting (a few hundred milliseconds measured, seconds on a loaded host). A
/// host that has not said its handshake by then is unreachable for this command.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(12);

/// 10 s: how long opening a stream waits for the relay's answer (a session's master answers
/// a connect in microseconds; the rest is the network).
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// 4 KiB of ssh's standard error kept for the error message: its last lines say why.
const STDERR_KEPT: usize = 4096;

/// 500 ms: how long a link that failed waits for ssh's standard error to end after ssh exited,
/// so that its last words are read before they are quoted. It ends at once unless ssh left a
/// ControlMaster holding it, which a failed connection does not; a person does not notice.
const STDERR_END_PATIENCE: Duration = Duration::from_millis(500);

/// 500 ms: after its input closes, ssh ends when the relay has (milliseconds); one that has
/// not by then is killed, so a command never waits on a host to say goodbye.
const CLOSE_GRACE: Duration = Duration::from_millis(500);

/// 64 KiB per read of a stream's local socket: well under an envelope's limit.
const READ_CHUNK: usize = 64 * 1024;

/// What a run of the host's desk produced, in order.
#[derive(Debug)]
pub enum ExecEvent {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    /// It exited with this code.
    Exit(i32),
    /// The stream ended; `Some(why)` when it ended without an exit code (the link dropped).
    Closed(Option<String>),
}

/// Where what the relay sends on a stream goes.
enum Sink {
    Socket {
        ours: Drain,
        opened: Option<Sender<Result<(), String>>>,
    },
    /// A run's output is taken from the link as it comes (held in `events` until its reader
    /// takes it), so its window is granted as it arrives.
    Exec {
        events: Sender<ExecEvent>,
        opened: Option<Sender<Result<(), String>>>,
        tally: Tally,
    },
    Facts {
        data: Vec<u8>,
        done: Sender<Result<Vec<u8>, String>>,
    },
}

/// Where envelopes to the host are written: ssh's standard input, or the socket of the shared
/// link of this host ([`super::linkd`]).
enum Outlet {
    Ssh(ChildStdin),
    Shared(UnixStream),
}

impl Write for Outlet {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Outlet::Ssh(w) => w.write(buf),
            Outlet::Shared(w) => w.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Outlet::Ssh(w) => w.flush(),
            Outlet::Shared(w) => w.flush(),
        }
    }
}

struct Shared {
    /// Where envelopes go; taken (closed) when the link is dropped.
    stdin: Mutex<Option<Outlet>>,
    /// Told why, once, when the link goes down ([`Link::on_down`]).
    watchers: Mutex<Vec<Sender<String>>>,
    sinks: Mutex<HashMap<u32, Sink>>,
    pings: Mutex<HashMap<u64, Sender<()>>>,
    /// Why the link is down, once it is.
    down: Mutex<Option<String>>,
    next: AtomicU32,
    nonce: AtomicU64,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// What this side may still send on each stream.
    windows: Arc<Windows>,
}

impl Shared {
    /// A link's shared state, writing its envelopes to `outlet`; `stderr` is what ssh said.
    fn new(outlet: Outlet, stderr: Arc<Mutex<Vec<u8>>>) -> Arc<Shared> {
        Arc::new(Shared {
            stdin: Mutex::new(Some(outlet)),
            watchers: Mutex::new(Vec::new()),
            sinks: Mutex::new(HashMap::new()),
            pings: Mutex::new(HashMap::new()),
            down: Mutex::new(None),
            next: AtomicU32::new(1),
            nonce: AtomicU64::new(1),
            stderr,
            windows: Windows::new(),
        })
    }

    /// DATA of stream `id`, within its window (waiting for the relay side's grants).
    fn send_data(&self, id: u32, payload: &[u8]) -> Result<()> {
        match self.windows.send(id, payload, |piece| self.send(id, Kind::Data, piece)) {
            Ok(()) => Ok(()),
            Err(super::flow::SendError::Send(e)) => Err(e),
            Err(super::flow::SendError::Closed(_)) => bail!("the stream is closed"),
        }
    }

    /// Grant the relay side `n` more bytes of stream `id`.
    fn grant(&self, id: u32, n: u32) {
        let _ = self.send(id, Kind::Window, &n.to_be_bytes());
    }

    fn send(&self, stream: u32, kind: Kind, payload: &[u8]) -> Result<()> {
        if let Some(why) = self.down.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            bail!("{why}");
        }
        let mut bytes = Vec::with_capacity(payload.len() + desk_wire::relay::ENVELOPE_HEADER);
        desk_wire::relay::encode_parts(stream, kind, payload, &mut bytes)?;
        let mut stdin = self.stdin.lock().unwrap_or_else(|p| p.into_inner());
        let Some(stdin) = stdin.as_mut() else { bail!("the link was closed") };
        stdin.write_all(&bytes).and_then(|()| stdin.flush()).map_err(|e| anyhow!("cannot write to ssh: {e}"))
    }
}

/// One `ssh HOST desk relay`.
pub struct Link {
    /// The host's name in the config (`gpu`), for messages.
    pub host: String,
    /// What the relay said it is.
    pub handshake: Handshake,
    shared: Arc<Shared>,
    /// The ssh child of a link of its own; `None` for one through the shared link.
    child: Mutex<Option<Child>>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link").field("host", &self.host).field("handshake", &self.handshake).finish()
    }
}

impl Link {
    /// Run `ssh HOST DESK relay` and check its handshake, within `timeout`.
    pub fn connect(name: &str, host: &Host, paths: &Paths, timeout: Duration) -> Result<Link> {
        paths.ensure_runtime()?;
        super::ssh::replace_dead_master(host, paths)?;
        let remote = format!("{} relay", host.desk);
        let mut child = super::ssh::command(host, paths, &[&remote])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| anyhow!("cannot run ssh to reach host {name}: {e}; is OpenSSH's client installed?"))?;
        let (Some(stdin), Some(mut stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            bail!("cannot talk to ssh for host {name}");
        };
        let kept = Arc::new(Mutex::new(Vec::new()));
        // Told when ssh's standard error has ended: its last words are then all in `kept`.
        let (stderr_done, stderr_ended) = channel::<()>();
        {
            // Never joined: a ControlPersist master may keep ssh's standard error open long after.
            let kept = kept.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 1024];
                while let Ok(n) = stderr.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let mut kept = kept.lock().unwrap_or_else(|p| p.into_inner());
                    kept.extend_from_slice(&buf[..n]);
                    let over = kept.len().saturating_sub(STDERR_KEPT);
                    kept.drain(..over);
                }
                let _ = stderr_done.send(());
            });
        }
        let shared = Shared::new(Outlet::Ssh(stdin), kept.clone());
        let (said, heard) = channel();
        {
            let shared = shared.clone();
            let name = name.to_string();
            std::thread::spawn(move || read_link(&mut stdout, &shared, said, &name));
        }
        let handshake = match heard.recv_timeout(timeout) {
            Ok(Ok(handshake)) => handshake,
            Ok(Err(first)) => {
                let code = wait_briefly(&mut child);
                // ssh has exited, but what it wrote last may still be in the pipe, not yet read:
                // wait for its end (bounded: a master it started may hold the pipe open).
                let _ = stderr_ended.recv_timeout(STDERR_END_PATIENCE);
                let stderr = String::from_utf8_lossy(&kept.lock().unwrap_or_else(|p| p.into_inner())).into_owned();
                return Err(anyhow!(explain_failure(name, host, first, code, stderr.trim())));
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                let _ = child.kill();
                let _ = child.wait();
                let stderr = String::from_utf8_lossy(&kept.lock().unwrap_or_else(|p| p.into_inner())).into_owned();
                let said = last_line(&stderr).map_or(String::new(), |l| format!(" (ssh: {l})"));
                bail!("host {name} ({}) did not answer within {} s{said}", host.ssh, timeout.as_secs());
            }
        };
        let link = Link { host: name.to_string(), handshake, shared, child: Mutex::new(Some(child)) };
        link.check_version()?;
        Ok(link)
    }

    /// A link over `socket`, connected to a process that speaks the relay's side (the shared
    /// link of host `name`, `super::linkd`, which starts it), its handshake next: within
    /// `timeout`.
    pub fn over_socket(name: &str, socket: UnixStream, timeout: Duration) -> Result<Link> {
        let reader = socket.try_clone()?;
        let shared = Shared::new(Outlet::Shared(socket), Arc::new(Mutex::new(Vec::new())));
        let (said, heard) = channel();
        {
            let shared = shared.clone();
            let name = name.to_string();
            std::thread::spawn(move || read_link(&mut &reader, &shared, said, &name));
        }
        let handshake = match heard.recv_timeout(timeout) {
            Ok(Ok(handshake)) => handshake,
            Ok(Err(_)) | Err(_) => bail!("the shared link of host {name} ended before its handshake"),
        };
        let link = Link { host: name.to_string(), handshake, shared, child: Mutex::new(None) };
        link.check_version()?;
        Ok(link)
    }

    fn check_version(&self) -> Result<()> {
        let (name, link) = (&self.host, self);
        if link.handshake.relay_version != RELAY_VERSION {
            bail!(
                "host {name} runs desk {} (relay protocol {}), and this desk is {} (relay protocol {RELAY_VERSION}): install desk {} on {name} (or point hosts.{name}.desk at it)",
                link.handshake.desk_version,
                link.handshake.relay_version,
                env!("CARGO_PKG_VERSION"),
                env!("CARGO_PKG_VERSION")
            );
        }
        Ok(())
    }

    /// Told why when the link goes down (at once if it is).
    pub fn on_down(&self) -> Receiver<String> {
        let (tx, rx) = channel();
        let mut watchers = self.shared.watchers.lock().unwrap_or_else(|p| p.into_inner());
        match self.down() {
            Some(why) => {
                let _ = tx.send(why);
            }
            None => watchers.push(tx),
        }
        rx
    }

    /// Why the link is down, if it is.
    pub fn down(&self) -> Option<String> {
        self.shared.down.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn next_id(&self) -> u32 {
        self.shared.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Open a stream to a session's master or the daemon: a connected socket, or why not.
    pub fn open(&self, target: Target) -> Result<UnixStream> {
        let id = self.next_id();
        let (ours, theirs) = UnixStream::pair()?;
        let reader = ours.try_clone()?;
        let (tx, rx) = channel();
        let shared = Arc::downgrade(&self.shared);
        let grant = Box::new(move |n| {
            if let Some(shared) = shared.upgrade() {
                shared.grant(id, n);
            }
        });
        let ours = Drain::new(DrainTo::Socket(ours), grant);
        self.shared.windows.open(id);
        self.shared.sinks.lock().unwrap_or_else(|p| p.into_inner()).insert(id, Sink::Socket { ours, opened: Some(tx) });
        self.shared.send(id, Kind::Open, &target.encode())?;
        self.wait_opened(id, &rx)?;
        let shared = self.shared.clone();
        std::thread::spawn(move || carry_to_link(reader, id, &shared));
        Ok(theirs)
    }

    fn wait_opened(&self, id: u32, rx: &Receiver<Result<(), String>>) -> Result<()> {
        match rx.recv_timeout(OPEN_TIMEOUT) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(why)) => Err(anyhow!("{why}")),
            Err(_) => {
                self.shared.sinks.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                match self.down() {
                    Some(why) => bail!("{why}"),
                    None => bail!("host {} did not open the stream within {} s", self.host, OPEN_TIMEOUT.as_secs()),
                }
            }
        }
    }

    /// Run the host's desk with `args`; `input` (when given) is copied to its standard input,
    /// which is closed at its end (without it, at once).
    pub fn exec(&self, args: &[String], input: Option<Box<dyn Read + Send>>) -> Result<Receiver<ExecEvent>> {
        self.exec_stream(args, input).map(|(_, events)| events)
    }

    /// [`Link::exec`], with the stream's id (to [`Link::close`] it before it ends).
    pub fn exec_stream(
        &self,
        args: &[String],
        input: Option<Box<dyn Read + Send>>,
    ) -> Result<(u32, Receiver<ExecEvent>)> {
        let id = self.next_id();
        let (events, rx) = channel();
        let (tx, opened) = channel();
        self.shared.windows.open(id);
        self.shared
            .sinks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, Sink::Exec { events, opened: Some(tx), tally: Tally::default() });
        self.shared.send(id, Kind::Open, &Target::Exec(args.to_vec()).encode())?;
        self.wait_opened(id, &opened)?;
        match input {
            None => self.shared.send(id, Kind::Eof, &[])?,
            Some(input) => {
                let shared = self.shared.clone();
                std::thread::spawn(move || carry_to_link(input, id, &shared));
            }
        }
        Ok((id, rx))
    }

    /// End stream `id` early: the host closes its socket or stops its command (by its pid).
    pub fn close(&self, id: u32) {
        self.shared.windows.close(id);
        self.shared.sinks.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
        let _ = self.shared.send(id, Kind::Close, &[]);
    }

    /// Run the host's desk with `args` and collect its output: (exit code, stdout, stderr).
    pub fn exec_output(&self, args: &[String]) -> Result<(i32, Vec<u8>, Vec<u8>)> {
        self.exec_output_with(args, None)
    }

    /// [`Link::exec_output`], with `input` as the command's standard input.
    pub fn exec_output_with(
        &self,
        args: &[String],
        input: Option<Box<dyn Read + Send>>,
    ) -> Result<(i32, Vec<u8>, Vec<u8>)> {
        let rx = self.exec(args, input)?;
        let (mut out, mut err, mut code) = (Vec::new(), Vec::new(), None);
        for event in rx {
            match event {
                ExecEvent::Stdout(b) => out.extend_from_slice(&b),
                ExecEvent::Stderr(b) => err.extend_from_slice(&b),
                ExecEvent::Exit(c) => code = Some(c),
                ExecEvent::Closed(why) => {
                    if code.is_none() {
                        bail!("{}", why.unwrap_or_else(|| "the host ended the command without an exit code".into()));
                    }
                    break;
                }
            }
        }
        Ok((code.unwrap_or(1), out, err))
    }

    /// The host's facts.
    pub fn facts(&self) -> Result<super::HostFacts> {
        let id = self.next_id();
        let (done, rx) = channel();
        self.shared.sinks.lock().unwrap_or_else(|p| p.into_inner()).insert(id, Sink::Facts { data: Vec::new(), done });
        self.shared.send(id, Kind::Open, &Target::Facts.encode())?;
        let bytes = match rx.recv_timeout(OPEN_TIMEOUT) {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(why)) => bail!("{why}"),
            Err(_) => bail!("host {} did not say its facts within {} s", self.host, OPEN_TIMEOUT.as_secs()),
        };
        Ok(serde_json::from_slice(&bytes)?)
    }

    /// One round trip over the link (a PING answered by the relay).
    pub fn round_trip(&self, timeout: Duration) -> Result<Duration> {
        let nonce = self.shared.nonce.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = channel();
        self.shared.pings.lock().unwrap_or_else(|p| p.into_inner()).insert(nonce, tx);
        let start = Instant::now();
        self.shared.send(LINK_STREAM, Kind::Ping, &nonce.to_be_bytes())?;
        match rx.recv_timeout(timeout) {
            Ok(()) => Ok(start.elapsed()),
            Err(_) => bail!("host {} did not answer a ping within {} ms", self.host, timeout.as_millis()),
        }
    }
}

impl Drop for Link {
    /// Close the link: the relay sees its input end and leaves; ssh exits with it (a
    /// ControlMaster it started stays for the next command, as ControlPersist says).
    fn drop(&mut self) {
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        // Whatever waits to send on a stream stops: nothing more goes out.
        self.shared.windows.close_all();
        let outlet = self.shared.stdin.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(Outlet::Shared(socket)) = &outlet {
            // The reader holds a clone: shut the socket itself, so the shared link sees the end.
            let _ = socket.shutdown(std::net::Shutdown::Both);
        }
        drop(outlet);
        let Some(child) = child.as_mut() else { return };
        if wait_for(child, CLOSE_GRACE).is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Copy a local reader (a stream's socket end, or an exec's input) to the link as DATA, within
/// the stream's window, then EOF at its end.
fn carry_to_link(mut from: impl Read, id: u32, shared: &Shared) {
    let mut buf = vec![0u8; READ_CHUNK.min(MAX_ENVELOPE)];
    loop {
        match from.read(&mut buf) {
            Ok(0) => {
                let _ = shared.send(id, Kind::Eof, &[]);
                return;
            }
            Ok(n) => {
                if shared.send_data(id, &buf[..n]).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => {
                let _ = shared.send(id, Kind::Close, &[]);
                return;
            }
        }
    }
}

/// The link's reader: the handshake (said on `said`), then every envelope to its stream's sink,
/// until the link ends; then everything still open learns why.
fn read_link(stdout: &mut impl Read, shared: &Shared, said: Sender<Result<Handshake, HandshakeFailure>>, host: &str) {
    let mut buf = vec![0u8; READ_CHUNK];
    let mut start = Vec::new();
    // The handshake.
    loop {
        match stdout.read(&mut buf) {
            Ok(0) | Err(_) => {
                let _ = said.send(Err(HandshakeFailure::Ended));
                return;
            }
            Ok(n) => start.extend_from_slice(&buf[..n]),
        }
        match Handshake::decode(&start) {
            Ok(None) => {}
            Ok(Some((handshake, used))) => {
                start.drain(..used);
                let _ = said.send(Ok(handshake));
                break;
            }
            Err(HandshakeError::Noise(seen)) => {
                // What came in this read is what the message shows: reading on could wait
                // for ever (the relay, if it started after the noise, waits for us).
                let _ = said.send(Err(HandshakeFailure::Noise(seen)));
                return;
            }
            Err(HandshakeError::Malformed(why)) => {
                let _ = said.send(Err(HandshakeFailure::Malformed(why)));
                return;
            }
        }
    }
    let mut decoder = EnvelopeDecoder::new();
    decoder.push(&start);
    let why = 'link: loop {
        loop {
            match decoder.next_envelope() {
                Ok(Some(envelope)) => deliver(envelope, shared),
                Ok(None) => break,
                Err(e) => break 'link format!("host {host} sent {e}"),
            }
        }
        match stdout.read(&mut buf) {
            Ok(0) => {
                let stderr =
                    String::from_utf8_lossy(&shared.stderr.lock().unwrap_or_else(|p| p.into_inner())).into_owned();
                break match last_line(&stderr) {
                    Some(line) => format!("connection to host {host} lost: {line}"),
                    None => format!("connection to host {host} lost"),
                };
            }
            Ok(n) => decoder.push(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => break format!("connection to host {host} lost: {e}"),
        }
    };
    *shared.down.lock().unwrap_or_else(|p| p.into_inner()) = Some(why.clone());
    shared.windows.close_all();
    for watcher in shared.watchers.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
        let _ = watcher.send(why.clone());
    }
    shared.pings.lock().unwrap_or_else(|p| p.into_inner()).clear();
    for (_, sink) in shared.sinks.lock().unwrap_or_else(|p| p.into_inner()).drain() {
        match sink {
            Sink::Socket { ours, opened } => {
                ours.close();
                if let Some(opened) = opened {
                    let _ = opened.send(Err(why.clone()));
                }
            }
            Sink::Exec { events, opened, .. } => {
                if let Some(opened) = opened {
                    let _ = opened.send(Err(why.clone()));
                }
                let _ = events.send(ExecEvent::Closed(Some(why.clone())));
            }
            Sink::Facts { done, .. } => {
                let _ = done.send(Err(why.clone()));
            }
        }
    }
}

/// Hand one envelope from the relay to its stream.
fn deliver(envelope: desk_wire::relay::Envelope, shared: &Shared) {
    let id = envelope.stream;
    if envelope.kind == Kind::Pong {
        let nonce = envelope.payload.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes);
        if let Some(tx) = nonce.and_then(|n| shared.pings.lock().unwrap_or_else(|p| p.into_inner()).remove(&n)) {
            let _ = tx.send(());
        }
        return;
    }
    if envelope.kind == Kind::Ping {
        let _ = shared.send(LINK_STREAM, Kind::Pong, &envelope.payload);
        return;
    }
    if envelope.kind == Kind::Window {
        let n = envelope.payload.get(..4).and_then(|b| b.try_into().ok()).map_or(0, u32::from_be_bytes);
        shared.windows.grant(id, n);
        return;
    }
    if envelope.kind == Kind::Close {
        shared.windows.close(id);
    }
    let mut sinks = shared.sinks.lock().unwrap_or_else(|p| p.into_inner());
    let Some(sink) = sinks.get_mut(&id) else { return };
    let mut remove = false;
    match (sink, envelope.kind) {
        (Sink::Socket { opened, .. } | Sink::Exec { opened, .. }, Kind::Opened) => {
            if let Some(opened) = opened.take() {
                let _ = opened.send(Ok(()));
            }
        }
        // Never blocks: a caller that stops reading has its stream's bytes queued, within the
        // window, and the link's other streams go on (docs/remote.md, "Flow control").
        (Sink::Socket { ours, .. }, Kind::Data) => ours.push(&envelope.payload),
        (Sink::Socket { ours, .. }, Kind::Eof) => ours.end(),
        (Sink::Socket { ours, opened }, Kind::Close) => {
            if let Some(opened) = opened.take() {
                let _ = opened.send(Err(String::from_utf8_lossy(&envelope.payload).into_owned()));
            }
            ours.close();
            remove = true;
        }
        (Sink::Exec { events, tally, .. }, Kind::Data) => {
            let grant = tally.took(envelope.payload.len());
            let _ = events.send(ExecEvent::Stdout(envelope.payload));
            if let Some(n) = grant {
                shared.grant(id, n);
            }
        }
        (Sink::Exec { events, tally, .. }, Kind::Stderr) => {
            let grant = tally.took(envelope.payload.len());
            let _ = events.send(ExecEvent::Stderr(envelope.payload));
            if let Some(n) = grant {
                shared.grant(id, n);
            }
        }
        (Sink::Exec { events, .. }, Kind::Exit) => {
            let code = envelope.payload.get(..4).and_then(|b| b.try_into().ok()).map_or(1, i32::from_be_bytes);
            let _ = events.send(ExecEvent::Exit(code));
        }
        (Sink::Exec { events, opened, .. }, Kind::Close) => {
            let why = String::from_utf8_lossy(&envelope.payload).into_owned();
            if let Some(opened) = opened.take() {
                let _ = opened.send(Err(why.clone()));
            }
            let _ = events.send(ExecEvent::Closed((!why.is_empty()).then_some(why)));
            remove = true;
        }
        (Sink::Facts { data, .. }, Kind::Data) => data.extend_from_slice(&envelope.payload),
        (Sink::Facts { .. }, Kind::Close) => {
            if let Some(Sink::Facts { data, done }) = sinks.remove(&id) {
                let why = String::from_utf8_lossy(&envelope.payload).into_owned();
                let _ = done.send(if why.is_empty() { Ok(data) } else { Err(why) });
            }
        }
        _ => {}
    }
    if remove {
        sinks.remove(&id);
    }
}

/// Why no handshake came.
enum HandshakeFailure {
    /// Something else was printed first.
    Noise(Vec<u8>),
    /// The output ended before a whole handshake.
    Ended,
    /// What came is not a handshake of any desk's.
    Malformed(&'static str),
}

/// The error for a link that did not start: the host's own words where they say it best.
fn explain_failure(name: &str, host: &Host, failure: HandshakeFailure, code: Option<i32>, stderr: &str) -> String {
    let version = env!("CARGO_PKG_VERSION");
    match failure {
        HandshakeFailure::Noise(seen) => {
            let text = String::from_utf8_lossy(&seen);
            let shown: String = text.chars().take(80).flat_map(char::escape_default).collect();
            format!(
                "host {name}: something printed \"{shown}\" before desk relay's handshake, most often the login shell's rc file; \
                 ssh exec channels must be quiet: make it print only in interactive shells (bash: put it after `[[ $- == *i* ]] || return`)"
            )
        }
        HandshakeFailure::Ended if code == Some(255) => {
            let why = last_line(stderr).unwrap_or("ssh failed without a word");
            format!("cannot reach host {name} ({}): {why}", host.ssh)
        }
        HandshakeFailure::Ended
            if code == Some(127) || stderr.contains("not found") || stderr.contains("No such file") =>
        {
            format!(
                "host {name} has no desk where hosts.{name}.desk says (`{}`: {}); install desk {version} on {name}, or set hosts.{name}.desk to the command that runs it there",
                host.desk,
                last_line(stderr).unwrap_or("command not found")
            )
        }
        HandshakeFailure::Malformed(why) => {
            format!("host {name} answered with a malformed relay handshake ({why}); install desk {version} on {name}")
        }
        HandshakeFailure::Ended => {
            let why = last_line(stderr).map_or(String::new(), |l| format!(": {l}"));
            let code = code.map_or(String::new(), |c| format!(" (exit {c})"));
            format!(
                "host {name}: `{} relay` ended before its handshake{code}{why}; is desk {version} installed there (`desk relay` came with it)?",
                host.desk
            )
        }
    }
}

fn last_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).rfind(|l| !l.is_empty())
}

/// ssh's exit code within a second (it exits right after the channel ends), else `None`.
fn wait_briefly(child: &mut Child) -> Option<i32> {
    let code = wait_for(child, Duration::from_secs(1));
    if code.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    code
}

fn wait_for(child: &mut Child, within: Duration) -> Option<i32> {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status.code().unwrap_or(255));
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
