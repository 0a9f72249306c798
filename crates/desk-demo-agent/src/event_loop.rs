//! The demo agent's single-threaded I/O loop.
//!
//! Owns the process's file descriptors and the clock: stdin (read), stdout (written), the
//! prompt log, the conversation's transcript, hook processes, and SIGWINCH/SIGTERM/SIGHUP/SIGINT through signal-hook-mio. It
//! decides nothing: every byte read and every signal becomes an [`Event`] for the [`Agent`],
//! every [`Output`] is performed in the order given, and timers are the poll timeout taken from
//! [`Agent::next_deadline`]. Invariants: no other threads; stdin is never read when it has
//! nothing to give (mio is edge-triggered and stdin stays blocking, because making it
//! non-blocking would also affect the shared terminal description behind stdout, so each
//! readiness event is drained with a zero-timeout `poll` check between reads); the terminal's
//! mode is restored on every way out of [`run`], including errors; a prompt-log failure is
//! fatal, because a log that misses a submitted prompt would make desk's delivery tests lie.

use std::io::Write;
use std::os::fd::AsFd;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGWINCH};
use signal_hook_mio::v1_0::Signals;

use super::agent::{Agent, Event, ExitRequest, Output};
use super::config::Config;
use super::hook::payload;
use super::hook_runner::run_hook;
use super::prompt_log::{PromptLog, PromptRecord};
use super::terminal::{RawMode, window_size};
use super::text::sanitize_char;

const STDIN: Token = Token(0);
const SIGNALS: Token = Token(1);

/// 64 KiB per read: a whole typical paste in one read, so its keys are decoded with one `now`
/// (which is what makes an Enter written together with a paste land inside the paste-burst
/// window, as with a real terminal).
const READ_CHUNK: usize = 64 << 10;

/// Run the demo agent on this process's stdin/stdout until it exits; returns how to exit.
pub fn run(cfg: Config) -> anyhow::Result<ExitRequest> {
    let log = cfg.prompt_log.as_deref().map(PromptLog::open).transpose()?;
    let mut poll = Poll::new().context("cannot create the event poller")?;
    let mut signals = Signals::new([SIGWINCH, SIGTERM, SIGHUP, SIGINT]).context("cannot install signal handlers")?;
    poll.registry().register(&mut signals, SIGNALS, Interest::READABLE).context("cannot watch signals")?;
    let stdin_fd = libc::STDIN_FILENO;
    // Regular files and /dev/null cannot be registered with epoll; they never block either,
    // so they are simply read on every turn of the loop.
    let stdin_pollable = poll.registry().register(&mut SourceFd(&stdin_fd), STDIN, Interest::READABLE).is_ok();
    let mut raw = RawMode::enter()?;
    let (cols, rows) = window_size();
    let mut agent = Agent::new(cfg.clone(), cols, rows);
    let conversation = cfg.session_id.clone();
    let mut io = Io { cfg, log, conversation };
    let result = io.serve(&mut agent, &mut poll, &mut signals, stdin_pollable);
    if result.is_err() {
        // Leave the screen usable before the error is printed.
        let bytes = agent.shutdown_bytes();
        io.write(&bytes);
    }
    raw.restore();
    result
}

/// End the process as `request` says: exit with a code, or die by a signal (with its default
/// action, so the parent's wait status shows the signal).
pub fn exit_process(request: ExitRequest) -> ! {
    let _ = std::io::stdout().flush();
    match request {
        ExitRequest::Code(code) => std::process::exit(code),
        ExitRequest::Signal(sig) => {
            let _ = signal_hook::low_level::emulate_default_handler(sig);
            // Still alive: the signal's default action is to ignore it (e.g. SIGWINCH).
            std::process::exit(128 + sig)
        }
    }
}

struct Io {
    cfg: Config,
    log: Option<PromptLog>,
    /// The conversation now ([`Output::Conversation`]): hooks carry it, prompts go to its
    /// transcript.
    conversation: String,
}

impl Io {
    /// The current conversation's transcript, once it has one.
    fn transcript(&self) -> Option<std::path::PathBuf> {
        let dir = self.cfg.transcript_dir.as_deref()?;
        crate::transcript::path(dir, &self.conversation).filter(|p| p.is_file())
    }
}

impl Io {
    fn serve(
        &mut self,
        agent: &mut Agent,
        poll: &mut Poll,
        signals: &mut Signals,
        stdin_pollable: bool,
    ) -> anyhow::Result<ExitRequest> {
        let mut events = Events::with_capacity(16);
        let mut buf = vec![0u8; READ_CHUNK];
        let outputs = agent.handle(Event::Start, Instant::now());
        if let Some(exit) = self.perform(agent, outputs)? {
            return Ok(exit);
        }
        loop {
            let timeout = if stdin_pollable {
                agent.next_deadline().map(|d| d.saturating_duration_since(Instant::now()))
            } else {
                Some(std::time::Duration::ZERO)
            };
            match poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => events.clear(),
                Err(e) => return Err(e).context("waiting for input failed"),
            }
            let mut stdin_ready = !stdin_pollable;
            let mut signalled = false;
            for event in events.iter() {
                match event.token() {
                    STDIN => stdin_ready = true,
                    SIGNALS => signalled = true,
                    _ => {}
                }
            }
            if signalled {
                for signal in signals.pending() {
                    let event = if signal == SIGWINCH {
                        let (cols, rows) = window_size();
                        Event::Resize { cols, rows }
                    } else {
                        Event::Terminate { signal }
                    };
                    let outputs = agent.handle(event, Instant::now());
                    if let Some(exit) = self.perform(agent, outputs)? {
                        return Ok(exit);
                    }
                }
            }
            if stdin_ready && let Some(exit) = self.drain_stdin(agent, &mut buf)? {
                return Ok(exit);
            }
            if agent.next_deadline().is_some_and(|d| Instant::now() >= d) {
                let outputs = agent.handle(Event::Timer, Instant::now());
                if let Some(exit) = self.perform(agent, outputs)? {
                    return Ok(exit);
                }
            }
        }
    }

    /// Read everything stdin has right now, feeding each read to the agent as it arrives.
    fn drain_stdin(&mut self, agent: &mut Agent, buf: &mut [u8]) -> anyhow::Result<Option<ExitRequest>> {
        let stdin = std::io::stdin();
        loop {
            let event = match nix::unistd::read(stdin.as_fd(), buf) {
                Ok(0) | Err(Errno::EIO) => Event::Eof,
                Ok(n) => Event::Input(&buf[..n]),
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => return Ok(None),
                Err(e) => return Err(e).context("cannot read stdin"),
            };
            let eof = event == Event::Eof;
            let outputs = agent.handle(event, Instant::now());
            if let Some(exit) = self.perform(agent, outputs)? {
                return Ok(Some(exit));
            }
            if eof || !readable_now(&stdin) {
                return Ok(None);
            }
        }
    }

    /// Perform outputs in order; `Some` when the agent asked to exit.
    fn perform(&mut self, agent: &mut Agent, outputs: Vec<Output>) -> anyhow::Result<Option<ExitRequest>> {
        let mut queue: std::collections::VecDeque<Output> = outputs.into();
        while let Some(output) = queue.pop_front() {
            match output {
                Output::Write(bytes) => self.write(&bytes),
                Output::SetTitle(title) => {
                    let title: String = title.chars().map(sanitize_char).collect();
                    self.write(format!("\x1b]0;{title}\x07").as_bytes());
                }
                Output::LogPrompt { seq, prompt } => {
                    if let Some(log) = &mut self.log {
                        log.append(&PromptRecord { ts_ms: wall_clock_ms(), seq, prompt })?;
                    }
                }
                Output::Conversation { id, .. } => self.conversation = id,
                Output::Transcript { prompt } => {
                    if let Some(dir) = &self.cfg.transcript_dir {
                        crate::transcript::append(dir, &self.conversation, wall_clock_ms(), &prompt)?;
                    }
                }
                Output::Hook(event) => {
                    let Some(cmd) = &self.cfg.hook_cmd else {
                        continue;
                    };
                    let transcript = self.transcript();
                    let mut doc = payload(&self.cfg, &self.conversation, transcript.as_deref(), &event).to_string();
                    doc.push('\n');
                    let ran = run_hook(cmd, doc.as_bytes(), &self.cfg.cwd, self.cfg.hook_timeout);
                    if ran.is_err() {
                        let more = agent.handle(Event::HookFailed { event: event.name() }, Instant::now());
                        queue.extend(more);
                    }
                }
                Output::ChannelPost(reply) => post_reply(&self.cfg, &reply),
                Output::Exit(request) => return Ok(Some(request)),
            }
        }
        Ok(None)
    }

    /// Write to the terminal. Errors are ignored: they mean the terminal is gone, and the
    /// hangup reaches the agent as end of input.
    fn write(&mut self, bytes: &[u8]) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(bytes);
        let _ = out.flush();
    }
}

/// Post a channel reply with `desk channel post`, waiting for it (a post takes milliseconds;
/// the daemon need not run). Its output would draw over the TUI, so it goes nowhere; a failure
/// is not the agent's to handle (the operator sees the reply missing from the channel).
fn post_reply(cfg: &crate::Config, reply: &crate::channel::Reply) {
    let _ = std::process::Command::new(&cfg.desk)
        .args(["channel", "post", &reply.channel, "--thread", &reply.thread, &reply.text])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

fn readable_now(stdin: &std::io::Stdin) -> bool {
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(n) if n > 0 => fds[0].revents().is_some_and(|r| !r.is_empty()),
        _ => false,
    }
}

fn wall_clock_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)).unwrap_or(0)
}
