//! The shared link of a host: one process per configured host that keeps one `ssh HOST desk
//! relay` open across commands, so that a command pays a local socket's connect instead of an ssh
//! session and the host's login shell (docs/remote.md, "The shared link").
//!
//! Owns starting it on demand ([`reach`]), and its life ([`serve`]): it takes a lock of its own
//! (one per host entry), brings the link up, listens on a 0600 socket in `<runtime>/links/`
//! (under desk's 0700 runtime directory), and serves every command that connects exactly as a
//! host's relay does — the same envelopes, the same handshake after one status byte — by opening
//! each stream on the host through its link. Invariants: a command is given the link only once
//! the host answered a ping on it, within [`CHECK_TIMEOUT`] (one round trip per command); when the
//! link goes down (ssh died, the host dropped it, a ping went unanswered) the socket is removed
//! and the process ends, so every command on it sees its end, and the next command starts a
//! fresh one: a dead link is replaced, never waited on; a link with no command on it for
//! [`idle`] ends the same way. The socket is removed only by the holder of the lock, so a new
//! link's socket is never removed by an old one. A socket file left by a link killed outright
//! refuses connections, and [`reach`] starts a new link over it.

use anyhow::{Context, Result, anyhow, bail};
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use desk_wire::relay::{Kind, LINK_STREAM, Target};

use super::flow::{Drain, DrainTo};
use super::link::{ExecEvent, HANDSHAKE_TIMEOUT, Link};
use super::relay::{Inlet, Inlets, Opener, Out};
use crate::config::Host;
use crate::detach::{self, Ready};
use crate::paths::Paths;

/// 600 s with no command on it: as long as ssh keeps its ControlMaster (`ControlPersist=600`,
/// [`super::ssh`]), for the same reason — a burst of commands, or a person's next command a few
/// minutes later, pays the host's session start once. `DESK_LINK_IDLE_MS` sets it (tests).
const IDLE: Duration = Duration::from_secs(600);

/// 3 s for the ping each command's connection begins with (a link may have died without a word:
/// a network that went away, a ControlMaster wedged, are only found by ssh's keepalives, within
/// 45 s): a loopback or LAN host answers in milliseconds, a far one in a few hundred; one that
/// has not answered in 3 s is replaced (a new ssh, with ssh's own 5 s connect timeout).
const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// 50 ms between tries of a link another command is starting: its ssh takes hundreds of
/// milliseconds to come up, so tighter tries would only start more processes meanwhile.
const ALREADY_RUNNING_PAUSE: Duration = Duration::from_millis(50);

/// The status byte before the handshake: the link is up. (One that could not come up says why
/// to the command that started it, on its report pipe, and listens to nobody.)
const UP: u8 = 0;

/// How long the shared link of a host lives with no command on it.
fn idle() -> Duration {
    std::env::var("DESK_LINK_IDLE_MS").ok().and_then(|v| v.parse().ok()).map_or(IDLE, Duration::from_millis)
}

/// The directory of the shared links' sockets and locks: in desk's 0700 runtime directory.
pub fn dir(paths: &Paths) -> PathBuf {
    paths.runtime.join("links")
}

/// The file name of a host entry's link, without its extension: a hash of everything in the
/// entry, so that an edited entry gets a new link instead of the old one.
fn key(name: &str, host: &Host) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let parts = [name, &host.ssh, &host.desk].into_iter().chain(host.ssh_args.iter().map(String::as_str));
    for part in parts {
        for byte in part.bytes().chain([0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

/// The socket of a host entry's shared link.
pub fn socket_path(paths: &Paths, name: &str, host: &Host) -> PathBuf {
    dir(paths).join(format!("{}.sock", key(name, host)))
}

fn lock_path(paths: &Paths, name: &str, host: &Host) -> PathBuf {
    dir(paths).join(format!("{}.lock", key(name, host)))
}

/// Reach the host through its shared link, started here when none runs (or when the one found is
/// gone or its ssh died), within `timeout`.
pub fn connect(name: &str, host: &Host, paths: &Paths, timeout: Duration) -> Result<Link> {
    let deadline = Instant::now() + timeout;
    let socket = reach(name, host, paths, timeout)?;
    Link::over_socket(name, socket, deadline.saturating_duration_since(Instant::now()))
}

/// A connected socket to the host's shared link, its handshake next; the link is started when
/// none answers. Within `timeout`.
fn reach(name: &str, host: &Host, paths: &Paths, timeout: Duration) -> Result<UnixStream> {
    let deadline = Instant::now() + timeout;
    let socket = socket_path(paths, name, host);
    loop {
        // A connection that ends before its status is a link on its way out (idle, or its ssh
        // died): a new one is started as when none answers.
        if let Ok(stream) = UnixStream::connect(&socket)
            && let Some(stream) = greeted(stream, name, deadline)?
        {
            return Ok(stream);
        }
        if Instant::now() >= deadline {
            bail!("host {name}: its shared link did not start within {} s", timeout.as_secs());
        }
        start(name, host, deadline)?;
    }
}

/// The link's status on a new connection: `Some(stream)` when it is up, `None` when the
/// connection ended first, its words when it could not come up.
fn greeted(mut stream: UnixStream, name: &str, deadline: Instant) -> Result<Option<UnixStream>> {
    let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    stream.set_read_timeout(Some(left))?;
    let mut status = [0u8; 1];
    match stream.read(&mut status) {
        Ok(0) => return Ok(None),
        Ok(_) => {}
        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
            bail!("host {name}: its shared link did not answer in time")
        }
        Err(_) => return Ok(None),
    }
    if status[0] != UP {
        bail!("host {name}: its shared link answered with an unknown status {}", status[0]);
    }
    stream.set_read_timeout(None)?;
    Ok(Some(stream))
}

/// Start the host's shared link and wait until it is up (or another process already runs it).
fn start(name: &str, host: &Host, deadline: Instant) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find this desk's own executable")?;
    let entry = serde_json::to_string(host)?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["link", name, &entry]);
    let (mut child, ready) = detach::spawn(cmd).context("cannot start the shared link")?;
    let left = deadline.saturating_duration_since(Instant::now());
    let report = detach::wait_ready(ready, left);
    // The link's process is its own (setsid); it is waited for by nobody here once it runs, so
    // reap it now if it already ended.
    let _ = child.try_wait();
    match report {
        Ok(Ready::Ok) => Ok(()),
        // Another command's link is starting (or an old one is on its way out): a moment for
        // it before its socket is tried again.
        Ok(Ready::AlreadyRunning(_)) => {
            std::thread::sleep(ALREADY_RUNNING_PAUSE);
            Ok(())
        }
        Ok(Ready::Failed(why)) => Err(anyhow!("{why}")),
        Ok(Ready::Died) => bail!("host {name}: its shared link died while starting"),
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            bail!("host {name}: its shared link did not start: {e}")
        }
    }
}

/// What happened to the link's process, for its main thread.
enum Event {
    /// The link went down (why).
    Down(String),
    /// A command left.
    Left,
}

/// Who is connected, and whether the link is closing (then nobody else is admitted).
struct Admission {
    clients: usize,
    closing: bool,
}

/// `desk link NAME ENTRY`: the shared link of host NAME (ENTRY: its `[hosts.NAME]` as JSON),
/// reporting on `ready` once it is up. Returns when it ends.
pub fn serve(name: &str, host: &Host, paths: &Paths, ready: OwnedFd) -> Result<()> {
    paths.ensure_runtime()?;
    crate::paths::ensure_private_dir(&dir(paths))?;
    let lock = match crate::pidlock::take(&lock_path(paths, name, host), Duration::from_secs(1), |_| false)? {
        Ok(lock) => lock,
        Err(held) => {
            let pid = held.pid.map_or(String::new(), |p| format!(" (pid {p})"));
            Ready::AlreadyRunning(format!("the shared link of host {name} runs{pid}")).report(ready);
            return Ok(());
        }
    };
    let link = match Link::connect(name, host, paths, HANDSHAKE_TIMEOUT) {
        Ok(link) => Arc::new(link),
        Err(e) => {
            Ready::Failed(format!("{e:#}")).report(ready);
            return Ok(());
        }
    };
    let socket = socket_path(paths, name, host);
    // Ours (we hold the lock): whatever is there is a killed link's.
    crate::fsutil::remove_if_exists(&socket)?;
    let listener = match UnixListener::bind(&socket) {
        Ok(listener) => listener,
        Err(e) => {
            Ready::Failed(format!("cannot listen on {}: {e}", socket.display())).report(ready);
            return Ok(());
        }
    };
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
    Ready::Ok.report(ready);

    let (events, heard) = channel();
    {
        let events = events.clone();
        let down = link.on_down();
        std::thread::spawn(move || {
            if let Ok(why) = down.recv() {
                let _ = events.send(Event::Down(why));
            }
        });
    }
    let admission = Arc::new(Mutex::new(Admission { clients: 0, closing: false }));
    {
        let (link, admission) = (link.clone(), admission.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                {
                    let mut admission = admission.lock().unwrap_or_else(|p| p.into_inner());
                    if admission.closing {
                        // Ends before its status: the command starts a new link.
                        continue;
                    }
                    admission.clients += 1;
                }
                let (link, events) = (link.clone(), events.clone());
                std::thread::spawn(move || {
                    serve_command(stream, &link, &events);
                    let _ = events.send(Event::Left);
                });
            }
        });
    }
    let idle = idle();
    let mut quiet_since = Instant::now();
    let why = loop {
        let wait = {
            let admission = admission.lock().unwrap_or_else(|p| p.into_inner());
            if admission.clients == 0 { idle.saturating_sub(quiet_since.elapsed()) } else { Duration::from_secs(3600) }
        };
        match heard.recv_timeout(wait) {
            Ok(Event::Down(why)) => break why,
            Ok(Event::Left) => {
                let mut admission = admission.lock().unwrap_or_else(|p| p.into_inner());
                admission.clients -= 1;
                quiet_since = Instant::now();
            }
            Err(_) => {
                let mut admission = admission.lock().unwrap_or_else(|p| p.into_inner());
                if admission.clients == 0 && quiet_since.elapsed() >= idle {
                    admission.closing = true;
                    break format!("no command for {} s", idle.as_secs());
                }
            }
        }
    };
    admission.lock().unwrap_or_else(|p| p.into_inner()).closing = true;
    tracing::debug!("shared link of {name}: {why}");
    let _ = std::fs::remove_file(&socket);
    drop(lock);
    Ok(())
}

/// Serve one command on the shared link: check the link, say it is up, then relay the command's
/// envelopes through it until the command closes its socket.
fn serve_command(stream: UnixStream, link: &Arc<Link>, events: &Sender<Event>) {
    if let Err(e) = link.round_trip(CHECK_TIMEOUT) {
        // The link is closed, and the command sees its connection end before the status: it
        // starts a new link.
        let _ = events.send(Event::Down(format!("{e:#}")));
        return;
    }
    let Ok(reader) = stream.try_clone() else { return };
    let out = Out::new(std::fs::File::from(OwnedFd::from(stream)));
    let mut hello = vec![UP];
    hello.extend_from_slice(&link.handshake.encode());
    if out.write_raw(&hello).is_err() {
        return;
    }
    super::relay::serve_on(reader, &out, &Through { link: link.clone() });
}

/// Streams opened on the host through its link.
struct Through {
    link: Arc<Link>,
}

impl Opener for Through {
    fn open(&self, id: u32, target: Target, out: &Out, inlets: &Inlets) -> Result<(), String> {
        match target {
            Target::Session(_) | Target::Control => {
                let socket = self.link.open(target).map_err(|e| format!("{e:#}"))?;
                super::relay::carry_socket(id, socket, out, inlets)
            }
            Target::Exec(args) => {
                let (ours, theirs) = UnixStream::pair().map_err(|e| e.to_string())?;
                let (upstream, events) =
                    self.link.exec_stream(&args, Some(Box::new(theirs))).map_err(|e| format!("{e:#}"))?;
                let link = self.link.clone();
                out.windows.open(id);
                let input = Drain::new(DrainTo::Socket(ours), out.grant(id));
                inlets
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(id, Inlet::Upstream { input, close: Box::new(move || link.close(upstream)) });
                out.send(id, Kind::Opened, &[]).map_err(|e| e.to_string())?;
                let (out, inlets) = (out.clone(), inlets.clone());
                std::thread::spawn(move || {
                    let mut why = String::new();
                    for event in events {
                        let sent = match event {
                            ExecEvent::Stdout(bytes) => out.send_data(id, Kind::Data, &bytes),
                            ExecEvent::Stderr(bytes) => out.send_data(id, Kind::Stderr, &bytes),
                            ExecEvent::Exit(code) => out.send(id, Kind::Exit, &code.to_be_bytes()),
                            ExecEvent::Closed(said) => {
                                why = said.unwrap_or_default();
                                break;
                            }
                        };
                        if sent.is_err() {
                            break;
                        }
                    }
                    inlets.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                    out.windows.close(id);
                    let _ = out.send(id, Kind::Close, why.as_bytes());
                });
                Ok(())
            }
            Target::Facts => {
                let facts = self.link.facts().map_err(|e| format!("{e:#}"))?;
                let json = serde_json::to_vec(&facts).map_err(|e| e.to_string())?;
                out.send(id, Kind::Opened, &[]).map_err(|e| e.to_string())?;
                let _ = out.send(id, Kind::Data, &json);
                let _ = out.send(id, Kind::Close, &[]);
                Ok(())
            }
        }
    }

    /// A command's ping is the host's round trip, not this process's.
    fn ping(&self, payload: Vec<u8>, out: &Out) {
        let (link, out) = (self.link.clone(), out.clone());
        std::thread::spawn(move || {
            if link.round_trip(CHECK_TIMEOUT).is_ok() {
                let _ = out.send(LINK_STREAM, Kind::Pong, &payload);
            }
        });
    }
}
