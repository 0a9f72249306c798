//! desk-master: the session master, one process per session that owns the PTY, the child, the
//! screen model and the listening socket.
//!
//! desk runs as three kinds of process: this **master** (one per session, the `desk-master`
//! executable; `desk master` runs the same code from the `desk` executable), the **daemon**
//! (`desk serve`, the crate desk-daemon: prompt delivery, channels, notifications) and the
//! **CLI** (`desk`: commands, `desk attach`, `desk dash`), which starts masters with `desk new`.
//! Masters hear from both only over their socket, in the wire protocol (`desk_wire`).
//!
//! ```text
//!   desk (CLI) ------------> desk-master (this crate)
//!                               |
//!                               v
//!                           desk-common --> desk-core --> desk-wire --> desk-term
//! ```
//!
//! An arrow is "may depend on"; nothing points up, and `tests/it/architecture.rs` checks it.
//! The session's policy (handshakes, roles, slow clients, size, kill escalation) is
//! desk-core's (`desk_core::session`) and the screen model desk-term's; this crate routes
//! bytes and events into them. May not depend on the daemon's crate or the CLI's, nor on an
//! argument parser or a terminal UI library: every page of code an idle master touches stays
//! resident in each of a fleet's masters.
//!
//! This file owns start-up: verifying the runtime directory, binding the socket (0600, inside
//! the verified 0700 directory), starting the child at its initial size, writing the session's
//! metadata and telling the launching `desk new` that the session is ready (or why it is not)
//! through an inherited pipe. The running loop lives in [`event_loop`]. Invariants: `desk new`
//! hears "ready" only once the socket accepts connections and the child runs; the session's
//! record exists before the child's program starts ([`pty::spawn_gated`]), and is durable — with
//! the generation counter and the launch record the CLI wrote — before the loop serves any
//! client ([`durable_start`], which says what a crash at each point of a start leaves); a master
//! holds its name's [`session::MasterLock`] from before it binds its socket until it exits.

mod answer;
pub mod args;
mod client;
mod clients;
mod durable_start;
mod event_loop;
mod events;
mod handover;
mod handover_request;
mod held;
mod history;
mod hook;
mod info;
mod journal_sink;
mod memory;
mod noise;
mod operator;
mod queue;
mod screen;
mod socket;
mod socket_watch;
mod state;
mod terminal;
mod timers;
mod typing;
mod views;

pub use client::CLIENT_QUEUE_LIMIT;
pub use desk_core::session::{HANDSHAKE_DEADLINE, MAX_CLIENTS, SLOW_CLIENT_DEADLINE};
pub use handover::{FORMATS_ARG, parse_formats};
pub use queue::{Flush, InputFull, InputQueue, OutQueue};
pub use terminal::INPUT_QUEUE_LIMIT;

use anyhow::{Context, Result, bail};
use mio::net::UnixListener;
use mio::unix::SourceFd;
use mio::{Interest, Poll, Token};
use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGTERM, SIGUSR1};
use signal_hook_mio::v1_0::Signals;
use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use tracing::info;

use desk_common::journal::{JOURNAL_CAP, Journal};
use desk_common::paths::{Paths, SessionName};
use desk_common::pty::{self, Spawn};
use desk_common::session::{self, SessionMeta};
use desk_core::provider::Provider;
use desk_core::session::SizePolicy;
use desk_core::state::{Authority, RuleSet};
use desk_term::screen::Screen;

/// Everything `desk master` needs to start a session.
#[derive(Debug, Clone)]
pub struct MasterOptions {
    pub name: SessionName,
    pub program: OsString,
    pub args: Vec<OsString>,
    pub cwd: Option<PathBuf>,
    pub env: Vec<(OsString, OsString)>,
    pub cols: u16,
    pub rows: u16,
    pub generation: u32,
    pub provider: Provider,
    /// How the session's size follows its controllers (`desk new --size-policy`).
    pub size_policy: SizePolicy,
    /// A pipe inherited from `desk new`: "ok" or an error message is written to it.
    pub ready_fd: Option<RawFd>,
    /// History lines the screen model keeps (`desk new --history`).
    pub history: usize,
    /// Cap of the session log in bytes (`desk new --log-cap`); 0 keeps no log.
    pub log_cap: u64,
}

/// The master's process entry (`desk-master ARGS`, or `desk master ARGS`): parse, run, and
/// return the exit code: 0 after the child exited, 2 for bad arguments, 1 for a failure.
pub fn main(args: impl IntoIterator<Item = OsString>) -> i32 {
    memory::one_arena();
    memory::forget_own_tunables();
    let args: Vec<OsString> = args.into_iter().collect();
    if args.len() == 1 && args[0] == "--version" {
        // `desk doctor` checks that `desk` and its `desk-master` are of one version.
        println!("{}", version_line());
        return 0;
    }
    if args.len() == 1 && args[0] == handover::FORMATS_ARG {
        // `desk upgrade` asks before it hands a master over to this binary.
        println!("{}", handover::formats_line());
        return 0;
    }
    if args.len() == 1 && args[0] == handover::HANDOVER_ARG {
        return handover::resume();
    }
    let opts = match args::parse(args) {
        Ok(opts) => opts,
        Err(e) => {
            eprintln!("desk master: {e}");
            return 2;
        }
    };
    match run(opts) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("desk master: {e:#}");
            1
        }
    }
}

/// What `desk-master --version` prints: the package version and the wire protocol it speaks,
/// which a `desk` beside it must match.
pub fn version_line() -> String {
    format!("desk-master {} (protocol {})", env!("CARGO_PKG_VERSION"), desk_wire::PROTOCOL_VERSION)
}

/// Run a master to completion. Returns once the child has exited and clients were told.
pub fn run(opts: MasterOptions) -> Result<()> {
    // SAFETY: `desk new` passes a pipe it opened for us at this fd number, and nothing else in
    // this process owns it.
    let mut ready = opts.ready_fd.map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
    if let Some(fd) = &ready {
        // The child must not inherit it, or `desk new` would wait for the child too.
        pty::set_cloexec(fd.as_fd())?;
    }
    let setup = start(&opts);
    if let Some(fd) = ready.take() {
        let mut pipe = fs::File::from(fd);
        let message = match &setup {
            Ok(_) => "ok\n".to_string(),
            Err(e) => format!("{e:#}\n"),
        };
        let _ = pipe.write_all(message.as_bytes());
    }
    let (parts, paths) = setup?;
    // `desk new` has returned: the socket accepts connections and the child runs. What is left
    // makes the start's records durable, and it is done before the loop serves any client
    // (connections wait in the listen backlog meanwhile): nothing that learns of this
    // generation from the master (the daemon pasting into it, an attach) can outlive a power
    // loss that these records do not (the start records table in `durable_start`).
    desk_common::failpoint::failpoint("master-after-ready");
    durable_start::sync(&paths, &opts.name);
    let mut master = event_loop::Master::new(parts);
    master.started();
    master.run()?;
    Ok(())
}

/// The signals the master's loop handles (`event_loop::Master::handle_signals`), in a fresh
/// start and after a handover alike. SIGUSR1 asks it to check its socket file
/// ([`socket_watch`]); `desk serve` sends it only to a process that catches it.
const HANDLED_SIGNALS: [i32; 5] = [SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGUSR1];

/// Everything up to "ready": the socket bound, the child running, its records written (not yet
/// durable: [`durable_start`]). Returns the loop's parts and the paths.
fn start(opts: &MasterOptions) -> Result<(event_loop::Parts, Paths)> {
    let paths = Paths::from_env()?;
    paths.ensure_runtime()?;
    let files = paths.session(&opts.name);
    files.check_socket_len()?;
    desk_common::logging::init_file(&files.log);
    desk_common::logging::log_panics();

    let state_dir = paths.ensure_session_state(&opts.name)?;
    // One master per name, for its whole life; a previous one that recorded its exit is given
    // the moments it needs to finish. Taken before the socket exists, so a second master
    // never binds one (even where a cleaner of temporary files removed the first's socket).
    let lock = match session::MasterLock::take(&paths, &opts.name, session::current_exit(&files).is_some())? {
        Ok(lock) => lock,
        Err(pid) => bail!(
            "session {} already has a running master (pid {pid}); reach it with `desk attach {}`, or end it with: kill {pid}",
            opts.name,
            opts.name
        ),
    };
    let rules = desk_common::rules::load(opts.provider, &paths.config).unwrap_or_else(|e| {
        tracing::warn!("{e:#}; using the built-in rules for {}", opts.provider);
        RuleSet::builtin(opts.provider)
    });
    let authority = Authority::new(rules, std::time::Instant::now(), desk_common::clock::now_ms());
    let journal = Journal::open(&state_dir, JOURNAL_CAP)?;
    let poll = Poll::new().context("cannot create the event loop")?;
    let mut listener = bind(&files.socket, &opts.name)?;
    poll.registry()
        .register(&mut listener, Token(0), Interest::READABLE)
        .context("cannot register the listening socket")?;
    let mut signals = Signals::new(HANDLED_SIGNALS).context("cannot install signal handlers")?;
    poll.registry().register(&mut signals, Token(2), Interest::READABLE).context("cannot register signals")?;

    let (cols, rows) = if desk_term::screen::valid_size(opts.cols, opts.rows) {
        (opts.cols, opts.rows)
    } else {
        bail!("size {}x{} is out of range", opts.cols, opts.rows);
    };
    let mut env = vec![
        (OsString::from("DESK_SESSION"), OsString::from(opts.name.as_str())),
        (OsString::from("DESK_GENERATION"), OsString::from(opts.generation.to_string())),
    ];
    // The screen model is an xterm with 256 colours; that is what the child talks to, whatever
    // terminal started desk (an explicit --env TERM=... still wins).
    env.push(("TERM".into(), "xterm-256color".into()));
    env.extend(opts.env.iter().cloned());
    // Descendants that leave the child's session or get orphaned (`setsid`, double forks) are
    // re-parented to us instead of init, so `desk kill` can find and end every one of them.
    // SAFETY: prctl with integer arguments touches no memory of ours.
    let subreaper = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } == 0;
    if !subreaper {
        tracing::warn!(
            "cannot become a child subreaper ({}); helpers that leave the session will not be found",
            std::io::Error::last_os_error()
        );
    }
    let spawn =
        Spawn { program: opts.program.clone(), args: opts.args.clone(), cwd: opts.cwd.clone(), env, cols, rows };
    let cwd = match &opts.cwd {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().unwrap_or_default(),
    };
    let mut command = vec![opts.program.to_string_lossy().into_owned()];
    command.extend(opts.args.iter().map(|a| a.to_string_lossy().into_owned()));
    let mut meta = SessionMeta {
        name: opts.name.to_string(),
        generation: opts.generation,
        provider: opts.provider.to_string(),
        pid: 0,
        master_pid: std::process::id(),
        master_start: desk_common::procfs::state_and_start(std::process::id()).map(|(_, start)| start),
        command,
        cwd: cwd.to_string_lossy().into_owned(),
        cols,
        rows,
        started_at_ms: 0,
        size_policy: Some(opts.size_policy.to_string()),
        protocol: speaks_protocol(),
    };
    // The record is written before the child's program starts: whatever the program runs
    // first (`desk attach` on its own session, which must find the record to refuse) sees it.
    // A program that then fails to start leaves the records of the name's last run as they were.
    let previous = (fs::read(&files.meta).ok(), fs::read(&files.exit).ok());
    let mut replaced = false;
    let spawned = pty::spawn_gated(&spawn, |pid| {
        meta.pid = pid;
        meta.started_at_ms = desk_common::clock::now_ms();
        replaced = true;
        desk_common::fsutil::remove_if_exists(&files.exit)?;
        desk_common::failpoint::failpoint_full_disk("master-before-exec").context("cannot write the session record")?;
        // Visible to every process at once; durable after "ready" ([`durable_start`]).
        session::write_meta_volatile(&files, &meta)
    });
    let child = match spawned {
        Ok(child) => child,
        Err(e) => {
            if replaced {
                for (path, bytes) in [(&files.meta, previous.0), (&files.exit, previous.1)] {
                    let _ = match bytes {
                        Some(bytes) => desk_common::fsutil::write_atomic(path, &bytes),
                        None => desk_common::fsutil::remove_if_exists(path),
                    };
                }
            }
            let _ = fs::remove_file(&files.socket);
            return Err(e);
        }
    };
    poll.registry()
        .register(&mut SourceFd(&child.master.as_raw_fd()), Token(1), Interest::READABLE)
        .context("cannot register the PTY")?;
    info!(pid = child.pid, generation = opts.generation, command = ?meta.command, cols, rows, "session started");
    let mut screen = Screen::with_history(cols, rows, opts.history);
    let log = if opts.log_cap > 0 {
        match desk_common::screen_log::LogWriter::open(&state_dir, opts.log_cap) {
            Ok(log) => {
                screen.enable_log();
                Some(log)
            }
            Err(e) => {
                tracing::warn!("{e:#}; the session keeps no log");
                None
            }
        }
    } else {
        None
    };
    let policy = event_loop::new_policy(&meta, opts.size_policy);
    let parts = event_loop::Parts {
        files,
        poll,
        listener,
        pty: child.master,
        signals,
        meta,
        screen,
        journal,
        authority,
        subreaper,
        policy,
        log,
        lock,
    };
    Ok((parts, paths))
}

pub(crate) fn bind(path: &std::path::Path, name: &SessionName) -> Result<UnixListener> {
    // The directory is 0700 already; the umask makes the socket 0600 from its first instant.
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
    let bound = UnixListener::bind(path);
    nix::sys::stat::umask(old);
    let listener = match bound {
        Ok(listener) => listener,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            bail!("session {name} is already running (socket {} exists)", path.display())
        }
        Err(e) => return Err(e).with_context(|| format!("cannot listen on {}", path.display())),
    };
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot set the mode of {}", path.display()))?;
    Ok(listener)
}

/// `DESK_MASTER_PROTOCOL=1` in a master's environment: it speaks protocol version 1 only, as a
/// master started by a desk of that version does — version 1's handshake rule (one version, no
/// negotiation) and a session record that names no version. Version 2 changed nothing else on
/// the wire, so this is the version-1 peer, exactly: what the tests of negotiation talk to
/// (docs/protocol.md §12). Any other value, or none, is this build's version.
pub const PROTOCOL_ENV: &str = "DESK_MASTER_PROTOCOL";

/// The newest protocol version this master speaks, as its session record names it (`None`:
/// version 1, whose records name none).
pub(crate) fn speaks_protocol() -> Option<u16> {
    match std::env::var(PROTOCOL_ENV).as_deref() {
        Ok("1") => None,
        _ => Some(desk_wire::PROTOCOL_VERSION),
    }
}
