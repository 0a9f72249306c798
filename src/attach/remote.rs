//! Attaching a session on another host (`desk attach HOST:NAME`, docs/remote.md).
//!
//! Owns a remote attach from end to end: the host is asked first (over its shared link, so a host
//! without desk, with another desk, or without the session is an error saying so, as for every
//! remote command); then `ssh -t HOST desk attach NAME` runs with the user's terminal, and this
//! process only waits: the host's own attach lends the pty ssh made there to the session's
//! master (docs/protocol.md §5.16), so a key goes terminal → ssh (a ControlMaster client hands
//! its descriptors to the shared connection) → sshd → the master, and nothing of desk's on this
//! machine is in its way. The host's attach says what happened (detached, the session's exit)
//! naming the session `HOST:NAME` ([`AS_HOST`]), and its exit code is this one's.
//!
//! ssh exits 255 when the connection fails, and so does a session whose child exited 255: the
//! host is asked again to tell them apart. While no ssh runs, this process reads the terminal
//! itself, raw: it says `connection to HOST lost, reconnecting…`, tries the host with a growing
//! pause between tries ([`BACKOFF`]) in a thread of its own, and starts ssh again once the host
//! answers with the session live (the host's attach redraws the whole screen from a keyframe).
//! Invariants: input typed while disconnected is refused (the bell rings; attach says how often
//! when it ends), never buffered to arrive late; the detach key works throughout, because no
//! try ever blocks the loop that reads the terminal; a host that answers but no longer has the
//! session ends the attach with the host's reason instead of trying forever; the terminal's
//! settings are put back before every ssh and on every way out.

use anyhow::{Context, Result, anyhow};
use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError, channel};
use std::time::{Duration, Instant};

use desk_common::config::Host;
use desk_common::paths::Paths;
use desk_common::remote::link::HANDSHAKE_TIMEOUT;
use desk_common::remote::linkd;
use desk_wire::relay::Target;

use super::AttachOptions;
use super::tty::Terminal;

/// The variable that tells a host's `desk attach` which host name the attaching machine uses:
/// its banner and its last line then name the session `HOST:NAME`, as the user typed it. A desk
/// that does not know it names the session alone, and attaches all the same.
pub(super) const AS_HOST: &str = "DESK_ATTACH_AS_HOST";

/// Pauses between tries: at once, then 0.5 s, 1 s, 2 s, 4 s, and 8 s from then on. A host that
/// blinked is back within a second; one that rebooted is found within 8 s of its sshd starting,
/// without a tight loop of ssh processes meanwhile.
const BACKOFF: [Duration; 6] = [
    Duration::ZERO,
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
];

/// 10 s: an ssh that ran this long had a working connection, so the next loss starts the
/// backoff again from the start; one that failed sooner (a host that lets ssh in and drops it)
/// keeps climbing it, so a flapping host is not hammered.
const SETTLED: Duration = Duration::from_secs(10);

/// 500 ms: after ssh exits 255, how long the host's first answer may take before the terminal
/// is told the connection is lost. The first try asks over the host's shared link, which
/// outlives a session's end, so a host still there answers in milliseconds; when it says the
/// session is gone, the 255 was the session's own exit code (the host's attach printed it), and
/// no notice is shown. A lost host takes longer than this to fail (a new ssh connection), and
/// is said to be lost.
const NOTICE_GRACE: Duration = Duration::from_millis(500);

/// How a try ended.
enum Tried {
    /// The host answered, and the session is live there.
    Back,
    /// The host did not answer (try again).
    Unreachable,
    /// The host answered, and the session is not there any more (stop).
    Gone(String),
}

/// How a remote attach ended.
enum Ending {
    /// ssh ended with this code: the host's attach's (it said why).
    Code(i32),
    /// The detach key, typed while disconnected.
    Detached,
    /// The host answered without the session, after the connection was lost.
    Gone(String),
    Signal(i32),
}

/// What the time between two ssh runs came to.
enum Between {
    Back,
    End(Ending),
}

/// `desk attach HOST:NAME`; returns the process exit code.
pub(super) fn run(opts: &AttachOptions, paths: &Paths, host_name: &str, host: &Host) -> Result<i32> {
    let session = opts.name.as_str();
    first(host_name, host, paths, session)?;
    let term = Terminal::open()?;
    let wake = Wake::new()?;
    let command = attach_command(host_name, &host.desk, opts);
    let mut loss = Loss { host_name, host, paths, session, term: &term, wake: &wake, opts, tries: 0, refused: 0 };
    let ending = loop {
        let started = Instant::now();
        let child = desk_common::remote::ssh::terminal_command(host, paths, &command)
            .spawn()
            .map_err(|e| anyhow!("cannot run ssh to reach host {host_name}: {e}; is OpenSSH's client installed?"))?;
        match wake.wait_for(child)? {
            Waited::Signal(signal) => break Ending::Signal(signal),
            Waited::Exited(Some(code)) if code != 255 => break Ending::Code(code),
            // 255, or ssh killed by a signal: the connection, or the session's own 255.
            Waited::Exited(_) => {}
        }
        // The terminal closing hangs up ssh and this process alike.
        if let Some(signal) = wake.signal() {
            break Ending::Signal(signal);
        }
        if started.elapsed() >= SETTLED {
            loss.tries = 0;
        }
        match loss.wait()? {
            Between::Back => {}
            Between::End(ending) => break ending,
        }
    };
    let shown = format!("{host_name}:{session}");
    if !matches!(ending, Ending::Code(_)) {
        // The host's attach had no chance to put the terminal back.
        term.write_all(&super::modes::epilogue(true));
    }
    term.cooked();
    if loss.refused > 0 {
        eprintln!("[desk: {shown} refused typed input {} time(s): not connected to host {host_name}]", loss.refused);
    }
    Ok(match ending {
        Ending::Code(code) => code,
        Ending::Detached => {
            eprintln!("[desk: detached from {shown}]");
            0
        }
        Ending::Gone(why) => {
            eprintln!("[desk: lost {shown}: {why}]");
            1
        }
        Ending::Signal(signal) => {
            eprintln!("[desk: detached from {shown} on signal {signal}]");
            128 + signal
        }
    })
}

/// The shell command line that runs the host's attach of `opts.name` with what the user asked
/// here: the keys resolved here (this machine's config and flags), read-only, history, the size
/// line, and no status line when it is off here (when on, the host's attach shows the host's own
/// status line: its state and the host's fleet, as its config says).
fn attach_command(host_name: &str, desk: &str, opts: &AttachOptions) -> String {
    let mut args = vec!["attach".to_string()];
    if opts.read_only {
        args.push("--read-only".into());
    }
    args.extend(["--detach-key".into(), key_spec(opts.detach_key)]);
    args.extend(["--prefix-key".into(), key_spec(opts.prefix_key)]);
    if opts.history > 0 {
        args.extend(["--history".into(), opts.history.to_string()]);
    }
    if opts.status_line {
        args.push("--status".into());
    }
    if !opts.status {
        args.push("--no-status".into());
    }
    args.extend(["--".into(), opts.name.as_str().into()]);
    let quoted: Vec<String> = args.iter().map(|a| shell_quote(a)).collect();
    // `env` runs under any login shell (`VAR=value command` is sh's alone).
    format!("env {} {desk} {}", shell_quote(&format!("{AS_HOST}={host_name}")), quoted.join(" "))
}

/// A key as `--detach-key` and `--prefix-key` read it: `^X`, `^?`, or `none`.
fn key_spec(key: Option<u8>) -> String {
    match key {
        None => "none".into(),
        Some(0x7f) => "^?".into(),
        Some(key) => format!("^{}", char::from((key & 0x1f) | 0x40)),
    }
}

/// `text` as one word of a POSIX shell command line.
fn shell_quote(text: &str) -> String {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_=.,:/@+".contains(&b)) {
        return text.into();
    }
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The host asked whether the session is there: Ok when it is; an error naming the host and
/// what is wrong (no desk there, another desk, no such session) otherwise.
fn first(name: &str, host: &Host, paths: &Paths, session: &str) -> Result<()> {
    let link = linkd::connect(name, host, paths, HANDSHAKE_TIMEOUT)?;
    let stream = link.open(Target::Session(session.to_string())).map_err(|e| {
        desk_common::failure::fail(desk_common::failure::ErrorCode::NoSuchSession, format!("on host {name}: {e:#}"))
    })?;
    if link.down().is_some() {
        return Err(anyhow!("connection to host {name} lost"));
    }
    drop(stream);
    Ok(())
}

/// One try: whether the host answers, and has the session.
fn try_once(name: &str, host: &Host, paths: &Paths, session: &str) -> Tried {
    let Ok(link) = linkd::connect(name, host, paths, HANDSHAKE_TIMEOUT) else { return Tried::Unreachable };
    match link.open(Target::Session(session.to_string())) {
        Ok(_) => Tried::Back,
        Err(_) if link.down().is_some() => Tried::Unreachable,
        Err(e) => Tried::Gone(format!("{e:#}")),
    }
}

/// The time between two ssh runs: the terminal read here, the host tried until it answers.
struct Loss<'a> {
    host_name: &'a str,
    host: &'a Host,
    paths: &'a Paths,
    session: &'a str,
    term: &'a Terminal,
    wake: &'a Wake,
    opts: &'a AttachOptions,
    /// Tries since the last ssh that settled ([`SETTLED`]).
    tries: usize,
    /// Typed input refused while disconnected.
    refused: u64,
}

impl Loss<'_> {
    /// From ssh's exit 255 until the host answers (or the user leaves).
    fn wait(&mut self) -> Result<Between> {
        self.term.raw()?;
        let between = self.tries_until_back();
        self.term.cooked();
        between
    }

    fn tries_until_back(&mut self) -> Result<Between> {
        let lost_at = Instant::now();
        let mut noticed = false;
        let mut next = Instant::now() + BACKOFF[self.tries.min(BACKOFF.len() - 1)];
        let mut under_way: Option<Receiver<Tried>> = None;
        let mut first = true;
        let mut buf = [0u8; 4096];
        loop {
            let now = Instant::now();
            if under_way.is_none() && now >= next {
                under_way = Some(self.start_try());
            }
            if !noticed && now >= lost_at + NOTICE_GRACE {
                noticed = true;
                self.notice();
            }
            let mut wakes = vec![];
            if under_way.is_none() {
                wakes.push(next);
            }
            if !noticed {
                wakes.push(lost_at + NOTICE_GRACE);
            }
            let timeout = wakes.into_iter().min().map(|at| at.saturating_duration_since(now));
            let readable = self.wake.poll_with(self.term.fd(), timeout)?;
            if let Some(signal) = self.wake.signal() {
                return Ok(Between::End(Ending::Signal(signal)));
            }
            if readable {
                match nix::unistd::read(self.term.fd(), &mut buf) {
                    Ok(0) => return Ok(Between::End(Ending::Signal(SIGHUP))),
                    Ok(n) => {
                        if let Some(ending) = self.typed(&buf[..n]) {
                            return Ok(Between::End(ending));
                        }
                    }
                    Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => {}
                    Err(e) => return Err(e).context("cannot read the terminal"),
                }
            }
            let answer = match under_way.as_ref().map(Receiver::try_recv) {
                Some(Ok(tried)) => tried,
                Some(Err(TryRecvError::Empty)) | None => continue,
                Some(Err(TryRecvError::Disconnected)) => Tried::Unreachable,
            };
            under_way = None;
            self.tries += 1;
            let was_first = std::mem::take(&mut first);
            match answer {
                Tried::Back => {
                    if !noticed {
                        self.notice();
                    }
                    return Ok(Between::Back);
                }
                // Asked right after ssh's 255, the host says the session ended: its child exited
                // 255 (the host's attach said so on the terminal).
                Tried::Gone(_) if was_first => return Ok(Between::End(Ending::Code(255))),
                Tried::Gone(why) => return Ok(Between::End(Ending::Gone(why))),
                Tried::Unreachable => {
                    if !noticed {
                        noticed = true;
                        self.notice();
                    }
                    next = Instant::now() + BACKOFF[self.tries.min(BACKOFF.len() - 1)];
                }
            }
        }
    }

    /// Try the host in a thread of its own; its answer comes on the receiver, and wakes the loop.
    fn start_try(&self) -> Receiver<Tried> {
        let (tx, rx) = channel();
        let (name, host, paths, session) =
            (self.host_name.to_string(), self.host.clone(), self.paths.clone(), self.session.to_string());
        let waker = self.wake.waker();
        std::thread::spawn(move || {
            let _ = tx.send(try_once(&name, &host, &paths, &session));
            if let Ok(mut waker) = waker {
                let _ = std::io::Write::write(&mut waker, &[1]);
            }
        });
        rx
    }

    fn notice(&self) {
        let text = format!("\r\n\x1b[m\x1b[7m[desk: connection to {} lost, reconnecting…]\x1b[m\r\n", self.host_name);
        self.term.write_all(text.as_bytes());
    }

    /// Keys typed while disconnected: the detach key leaves; anything else is refused (the bell
    /// now, the count at the end), never kept to arrive late.
    fn typed(&mut self, input: &[u8]) -> Option<Ending> {
        let detach = self.opts.detach_key.and_then(|key| super::find_detach_key(input, key));
        let before = detach.map_or(input, |(at, _)| &input[..at]);
        if !before.is_empty() && !self.opts.read_only {
            self.refused += 1;
            self.term.write_all(&[0x07]);
        }
        detach.map(|_| Ending::Detached)
    }
}

/// How waiting for ssh ended.
enum Waited {
    /// ssh's exit code (`None`: killed by a signal).
    Exited(Option<i32>),
    /// This process was told to stop (ssh is killed, by its pid).
    Signal(i32),
}

/// What wakes this process: a child's exit, a signal that ends the attach, a try's answer. Each
/// writes a byte to one socket pair, so one poll waits for all of them and nothing polls on a
/// timer.
struct Wake {
    read: UnixStream,
    write: UnixStream,
    /// The last of SIGHUP, SIGTERM, SIGINT or SIGQUIT received; 0: none.
    signal: Arc<AtomicUsize>,
}

impl Wake {
    fn new() -> Result<Wake> {
        let (read, write) = UnixStream::pair().context("cannot make a socket pair")?;
        read.set_nonblocking(true).context("cannot make a socket non-blocking")?;
        write.set_nonblocking(true).context("cannot make a socket non-blocking")?;
        let signal = Arc::new(AtomicUsize::new(0));
        for sig in [SIGHUP, SIGTERM, SIGINT, SIGQUIT] {
            signal_hook::flag::register_usize(sig, signal.clone(), sig as usize).context("cannot handle signals")?;
        }
        // After the flags, so the byte of a signal is written once its flag is set.
        for sig in [SIGCHLD, SIGHUP, SIGTERM, SIGINT, SIGQUIT] {
            let pipe = write.try_clone().context("cannot clone a socket")?;
            signal_hook::low_level::pipe::register(sig, pipe).context("cannot handle signals")?;
        }
        Ok(Wake { read, write, signal })
    }

    fn waker(&self) -> std::io::Result<UnixStream> {
        self.write.try_clone()
    }

    /// The signal that asks this process to end, if one came.
    fn signal(&self) -> Option<i32> {
        match self.signal.load(Ordering::SeqCst) {
            0 => None,
            sig => i32::try_from(sig).ok(),
        }
    }

    /// Wait until `child` exits or a signal ends the attach (then `child` is killed).
    fn wait_for(&self, mut child: Child) -> Result<Waited> {
        loop {
            if let Some(status) = child.try_wait().context("cannot wait for ssh")? {
                return Ok(Waited::Exited(status.code()));
            }
            if let Some(signal) = self.signal() {
                let _ = child.kill();
                let _ = child.wait();
                return Ok(Waited::Signal(signal));
            }
            self.poll_with(self.read.as_fd(), None)?;
        }
    }

    /// Wait for a wake-up or for `fd` to be readable, at most `timeout`; true when `fd` is.
    fn poll_with(&self, fd: std::os::fd::BorrowedFd<'_>, timeout: Option<Duration>) -> Result<bool> {
        use nix::poll::{PollFd, PollFlags, PollTimeout};
        let timeout = match timeout {
            None => PollTimeout::NONE,
            // Rounded up, so a wake-up due in 0.4 ms does not spin.
            Some(t) => PollTimeout::from(u16::try_from(t.as_millis().saturating_add(1)).unwrap_or(u16::MAX)),
        };
        let mut fds = [PollFd::new(self.read.as_fd(), PollFlags::POLLIN), PollFd::new(fd, PollFlags::POLLIN)];
        match nix::poll::poll(&mut fds, timeout) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e).context("poll failed"),
        }
        let readable = fds[1].revents().is_some_and(|r| r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP));
        let mut drain = [0u8; 64];
        while matches!((&self.read).read(&mut drain), Ok(n) if n > 0) {}
        Ok(readable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use desk_common::paths::SessionName;

    fn opts() -> AttachOptions {
        AttachOptions {
            name: SessionName::parse("web").unwrap(),
            read_only: false,
            detach_key: Some(0x1c),
            history: 0,
            status_line: false,
            status: true,
            prefix_key: Some(0x1d),
            stuck: |_| None,
            host: None,
        }
    }

    #[test]
    fn the_hosts_attach_gets_the_keys_resolved_here_and_names_this_host() {
        let command = attach_command("box", "env DESK_HOME=/x desk", &opts());
        assert_eq!(
            command,
            r"env DESK_ATTACH_AS_HOST=box env DESK_HOME=/x desk attach --detach-key '^\' --prefix-key '^]' -- web"
        );
    }

    #[test]
    fn read_only_history_no_status_and_no_keys_are_passed_on() {
        let opts = AttachOptions {
            read_only: true,
            history: 50,
            status: false,
            status_line: true,
            detach_key: None,
            prefix_key: Some(0x7f),
            ..opts()
        };
        let command = attach_command("b'x", "desk", &opts);
        assert_eq!(
            command,
            r"env 'DESK_ATTACH_AS_HOST=b'\''x' desk attach --read-only --detach-key none --prefix-key '^?' --history 50 --status --no-status -- web"
        );
    }

    #[test]
    fn every_key_spec_reads_back_as_the_same_key() {
        for key in (0u8..0x20).chain([0x7f]) {
            let spec = key_spec(Some(key));
            assert_eq!(desk_common::syntax::parse_detach_key(&spec), Ok(Some(key)), "{spec}");
        }
        assert_eq!(desk_common::syntax::parse_detach_key(&key_spec(None)), Ok(None));
    }
}
