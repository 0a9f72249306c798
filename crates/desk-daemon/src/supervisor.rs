//! The daemon's restart supervisor: restart policies carried out.
//!
//! Owns the durable supervision state (`state/fleet/supervisor.json`, the whole
//! [`desk_core::fleet::supervise::Supervisor`], replaced atomically after every change) and
//! what feeds it: a session's master going away (its end is judged from its records: the exit
//! record, the operator's stop mark, the launch's resumed conversation and the agent's last
//! screen), a master coming up (a restart done, or the operator starting it again), the daemon's
//! own start (ends that happened while it was down are judged then; a restart found begun is
//! not begun again). A due restart runs `desk restart NAME --supervised GEN` in a child process
//! watched by a thread, which wakes the loop when it is done, so the loop never waits for a
//! master to start and the restart goes through the very path an operator's does (resume
//! included). Invariants: one restart at a time (the fleet allows one a minute anyway); the
//! state is persisted before a restart is started; a session without a launch record, or whose
//! policy is `never` and nothing holds, is not tracked.

use anyhow::{Context, Result};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};
use tracing::{info, warn};

use desk_common::launch_record::{self, LaunchRecord, StartedBy};
use desk_common::paths::{Paths, SessionName};
use desk_core::fleet::resume;
use desk_core::fleet::supervise::{self, Cause, Decision, Ended, EndedHow, Limits, RestartPolicy, Supervisor};
use desk_wire::ExitStatus;

/// How long a supervised restart may take before its child is killed and the attempt counts as
/// failed: a master reports within milliseconds, but a resume may first ask OpenCode for its
/// session list (up to ~45 s on a loaded machine).
const RESTART_TIMEOUT: Duration = Duration::from_secs(90);

/// What a finished restart reported.
struct Finished {
    session: String,
    replacing: u32,
    result: Result<(), String>,
}

/// The supervisor as the daemon runs it.
pub struct Supervision {
    paths: Paths,
    state: Supervisor,
    file: PathBuf,
    /// The restart running now, if any: its session.
    in_flight: Option<String>,
    done_tx: Sender<Finished>,
    done_rx: Receiver<Finished>,
    waker: Arc<mio::Waker>,
}

/// The supervisor's times: the real ones. A build with the `failpoints` feature (the tests')
/// divides every one by `DESK_SUPERVISE_COMPRESS`, so that a crash loop plays out in seconds.
fn limits() -> Limits {
    #[cfg(feature = "failpoints")]
    if let Some(factor) = std::env::var("DESK_SUPERVISE_COMPRESS").ok().and_then(|v| v.parse().ok()) {
        return Limits::compressed(factor);
    }
    Limits::default()
}

/// The state file.
pub fn state_file(paths: &Paths) -> PathBuf {
    paths.state.join("fleet").join("supervisor.json")
}

/// `state/fleet/supervisor.json`: version 1 (a file without a `version` key is version 1).
pub const FORMAT: desk_common::format::Format = desk_common::format::Format::first("supervisor state");

/// The supervision state as the daemon last wrote it (for `desk ls`; empty when none or when
/// this desk cannot read it — the daemon, its owner, sets such a file aside when it starts).
pub fn read_state(paths: &Paths) -> Supervisor {
    desk_common::session::read_record(&FORMAT, &state_file(paths)).ok().flatten().unwrap_or_default()
}

/// A session's latest generation, from its counter.
fn latest_generation(paths: &Paths, name: &SessionName) -> u32 {
    std::fs::read_to_string(desk_common::session::generation_file(paths, name))
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

/// How generation `launch.generation` ended and why, from what the session left on disk.
pub fn ended(paths: &Paths, name: &SessionName, launch: &LaunchRecord, now_ms: u64) -> Ended {
    let exit = desk_common::session::read_exit(&paths.session(name))
        .ok()
        .flatten()
        .filter(|e| e.generation == launch.generation);
    let (how, ended_ms, screen) = match &exit {
        Some(e) => (
            match e.status {
                ExitStatus::Code(c) => EndedHow::Exited(c),
                ExitStatus::Signal(s) => EndedHow::Signalled(s),
            },
            e.exited_at_ms,
            e.last_screen.clone().unwrap_or_default(),
        ),
        None => (EndedHow::Lost, now_ms, Vec::new()),
    };
    let code = match how {
        EndedHow::Exited(c) => Some(c),
        _ => None,
    };
    let cause = if let Some(by) = launch_record::stopped_by(paths, name, launch.generation) {
        Cause::Operator { by }
    } else if let Some(message) = launch.resumed().and_then(|_| resume::rejection(launch.provider, code, &screen)) {
        Cause::ResumeRejected { message }
    } else if let Some(message) = supervise::provider_error(&screen).filter(|_| !how.clean()) {
        Cause::ProviderError { message }
    } else {
        Cause::Unknown
    };
    Ended { generation: launch.generation, started_ms: launch.started_at_ms, ended_ms, how, cause }
}

impl Supervision {
    pub fn new(paths: Paths, waker: Arc<mio::Waker>) -> Supervision {
        let file = state_file(&paths);
        // Unreadable: set aside and named, not overwritten by the next write.
        let mut state: Supervisor = desk_common::session::read_record_or_set_aside(&FORMAT, &file).unwrap_or_default();
        state.limits = limits();
        let (done_tx, done_rx) = channel();
        Supervision { paths, state, file, in_flight: None, done_tx, done_rx, waker }
    }

    fn persist(&self) {
        let write = || -> Result<()> {
            desk_common::paths::ensure_private_dir(self.file.parent().context("no parent")?)?;
            desk_common::session::write_record(&FORMAT, &self.file, &self.state)
        };
        if let Err(e) = write() {
            warn!("cannot record the supervision state: {e:#}");
        }
    }

    /// At the daemon's start: track every session with a launch record whose policy restarts
    /// it, recover restarts found begun, and judge the ends of those that are down (`live`:
    /// the sessions whose masters answered). Returns the sessions now held for a failure, with
    /// their health, to notify.
    pub fn restore(&mut self, live: &HashSet<String>) -> Vec<(String, String)> {
        let mut notices = Vec::new();
        // Sessions forgotten since (`desk rm`: no launch record) are forgotten here too.
        let gone: Vec<String> = self
            .state
            .sessions
            .keys()
            .filter(|s| {
                !SessionName::parse(s).is_ok_and(|n| launch_record::read(&self.paths, &n).ok().flatten().is_some())
            })
            .cloned()
            .collect();
        for session in gone {
            self.state.forget(&session);
        }
        let Ok(entries) = std::fs::read_dir(self.paths.state.join("sessions")) else {
            self.persist();
            return notices;
        };
        let now = desk_common::clock::now_ms();
        for entry in entries.flatten() {
            let Some(name) = entry.file_name().to_str().and_then(|n| SessionName::parse(n).ok()) else { continue };
            let Some(launch) = launch_record::read(&self.paths, &name).ok().flatten() else { continue };
            if launch.restart == RestartPolicy::Never && self.state.get(name.as_str()).is_none() {
                continue;
            }
            self.state.track(name.as_str(), launch.restart);
            self.state.recover(name.as_str(), latest_generation(&self.paths, &name), now);
            if !live.contains(name.as_str()) {
                notices.extend(self.judge(&name, &launch, now));
            }
        }
        self.persist();
        notices
    }

    fn judge(&mut self, name: &SessionName, launch: &LaunchRecord, now: u64) -> Option<(String, String)> {
        let end = ended(&self.paths, name, launch, now);
        let decision = self.state.on_end(name.as_str(), launch.restart, &end, now);
        info!(session = %name, generation = end.generation, how = ?end.how, cause = ?end.cause, ?decision, "judged the end of a generation");
        // Nothing more to keep for a session that never restarts and is not held.
        self.state.track(name.as_str(), launch.restart);
        match decision {
            Decision::Held { hold, notify: true } => Some((name.to_string(), hold.health())),
            _ => None,
        }
    }

    /// A session's master went away (`generation`: the one the daemon was connected to).
    pub fn on_down(&mut self, session: &str, generation: Option<u32>) -> Option<(String, String)> {
        let name = SessionName::parse(session).ok()?;
        let launch = launch_record::read(&self.paths, &name).ok().flatten()?;
        if generation.is_some_and(|g| g != launch.generation) {
            // A newer generation was started already: this end is old news.
            return None;
        }
        let notice = self.judge(&name, &launch, desk_common::clock::now_ms());
        self.persist();
        notice
    }

    /// A session's exit record appeared while the daemon was not connected to its master, or its
    /// master went away before it answered: judge the end of the generation it records (once;
    /// an end judged already changes nothing).
    pub fn on_exit_record(&mut self, session: &str) -> Option<(String, String)> {
        let name = SessionName::parse(session).ok()?;
        let exit = desk_common::session::read_exit(&self.paths.session(&name)).ok().flatten()?;
        let launch = launch_record::read(&self.paths, &name).ok().flatten()?;
        if exit.generation != launch.generation
            || (launch.restart == RestartPolicy::Never && self.state.get(session).is_none())
            // Seen already (the record's arrival, the restart's end and a connection that
            // ended unanswered may each bring it): taking it as up again would forget the
            // restart it scheduled and the failures counted.
            || self.state.get(session).is_some_and(|s| s.judged >= exit.generation)
        {
            return None;
        }
        // Its start (a restart of ours, or the operator's) is taken as up first.
        self.state.on_up(session, launch.generation, matches!(launch.started_by, StartedBy::Supervisor { .. }));
        let notice = self.judge(&name, &launch, desk_common::clock::now_ms());
        self.persist();
        notice
    }

    /// A session's master answered: generation `generation` runs.
    pub fn on_up(&mut self, session: &str, generation: u32) {
        let Ok(name) = SessionName::parse(session) else { return };
        let Some(launch) = launch_record::read(&self.paths, &name).ok().flatten() else { return };
        if launch.generation != generation {
            return;
        }
        let ours = matches!(launch.started_by, StartedBy::Supervisor { .. });
        if self.state.get(session).is_none() && launch.restart == RestartPolicy::Never {
            return;
        }
        self.state.track(session, launch.restart);
        self.state.on_up(session, generation, ours);
        self.persist();
    }

    /// When the loop must call [`Supervision::tick`] next.
    pub fn wake_at(&self) -> Option<Instant> {
        if self.in_flight.is_some() {
            return None;
        }
        let at = self.state.wake_at()?;
        let now = desk_common::clock::now_ms();
        Some(Instant::now() + Duration::from_millis(at.saturating_sub(now)))
    }

    /// Begin the restart that is due, if one is and none is running.
    pub fn tick(&mut self) {
        if self.in_flight.is_some() {
            return;
        }
        let now = desk_common::clock::now_ms();
        let Some((session, replacing)) = self.state.due(now) else { return };
        self.state.begin(&session, now);
        // Recorded as begun before anything starts: a daemon that dies now does not begin it
        // again (`Supervisor::recover`).
        self.persist();
        info!(session, replacing, "restarting by its policy");
        self.in_flight = Some(session.clone());
        let (tx, waker) = (self.done_tx.clone(), self.waker.clone());
        std::thread::spawn(move || {
            let result = run_restart(&session, replacing);
            let _ = tx.send(Finished { session, replacing, result });
            let _ = waker.wake();
        });
    }

    /// The loop was woken: collect finished restarts. Returns sessions now held for a failure.
    pub fn on_wake(&mut self) -> Vec<(String, String)> {
        let mut notices = Vec::new();
        while let Ok(done) = self.done_rx.try_recv() {
            if self.in_flight.as_deref() == Some(done.session.as_str()) {
                self.in_flight = None;
            }
            match done.result {
                Ok(()) => {
                    info!(session = %done.session, "restarted");
                    // The new generation may be gone already (a command that exits at once),
                    // before this daemon saw it up.
                    notices.extend(self.on_exit_record(&done.session));
                }
                Err(why) => {
                    warn!(session = %done.session, "the restart failed: {why}");
                    let now = desk_common::clock::now_ms();
                    if let Decision::Held { hold, notify: true } =
                        self.state.start_failed(&done.session, done.replacing, now)
                    {
                        notices.push((done.session.clone(), hold.health()));
                    }
                    self.persist();
                }
            }
        }
        notices
    }
}

/// `desk restart NAME --supervised GEN`, bounded by [`RESTART_TIMEOUT`]. A session that already
/// runs again (someone started it) counts as done.
fn run_restart(session: &str, replacing: u32) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the desk executable: {e}"))?;
    let mut child = std::process::Command::new(exe)
        .args(["restart", session, "--supervised", &replacing.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run desk restart: {e}"))?;
    let mut stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(s) = stderr.as_mut() {
            let _ = std::io::Read::read_to_string(&mut std::io::Read::take(s, 64 * 1024), &mut text);
        }
        text
    });
    let deadline = Instant::now() + RESTART_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("desk restart did not finish within {} s", RESTART_TIMEOUT.as_secs()));
            }
            Err(e) => return Err(format!("cannot wait for desk restart: {e}")),
        }
    };
    let text = reader.join().unwrap_or_default();
    if status.success() || text.contains("already runs again") {
        Ok(())
    } else {
        Err(text.trim().trim_start_matches("desk: ").to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use desk_common::session::ExitRecord;
    use desk_core::fleet::supervise::Phase;
    use desk_core::provider::Provider;

    fn launch(generation: u32) -> LaunchRecord {
        LaunchRecord {
            generation,
            started_at_ms: 1,
            started_by: StartedBy::Operator { command: "desk up".into() },
            provider: Provider::Shell,
            command: vec!["sh".into(), "-c".into(), "exit 3".into()],
            ran: vec!["sh".into(), "-c".into(), "exit 3".into()],
            cwd: "/".into(),
            env: Default::default(),
            inherited: Default::default(),
            cols: 80,
            rows: 24,
            size_policy: "latest".into(),
            history: 0,
            log_cap: 0,
            restart: RestartPolicy::OnFailure,
            manifest: None,
            worktree: None,
            group: None,
            labels: Vec::new(),
            conversation: None,
        }
    }

    /// The end of a command that exits at once reaches the daemon more than once (the exit
    /// record's arrival, a connection that ended before the master answered, the restart's
    /// own end): the second sighting changes nothing, so the restart the first scheduled and
    /// the failures it counted stay.
    #[test]
    fn an_exit_record_seen_twice_is_judged_once_and_its_restart_kept() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths {
            runtime: dir.path().join("run"),
            state: dir.path().join("state"),
            config: dir.path().join("config"),
        };
        paths.ensure_runtime().unwrap();
        let name = SessionName::parse("flaky").unwrap();
        launch_record::write(&paths, &name, &launch(1)).unwrap();
        let exit = ExitRecord {
            generation: 1,
            status: ExitStatus::Code(3),
            escalated: false,
            exited_at_ms: 2,
            cols: None,
            rows: None,
            title: None,
            last_screen: None,
            last_history: None,
        };
        desk_common::session::write_exit(&paths.session(&name), &exit).unwrap();
        let poll = mio::Poll::new().unwrap();
        let waker = Arc::new(mio::Waker::new(poll.registry(), mio::Token(0)).unwrap());
        let mut supervision = Supervision::new(paths, waker);
        supervision.on_exit_record("flaky");
        let first = supervision.state.get("flaky").cloned().unwrap();
        assert!(matches!(first.phase, Phase::Waiting { of: 1, .. }), "{first:?}");
        assert_eq!((first.judged, first.streak), (1, 0));
        supervision.on_exit_record("flaky");
        assert_eq!(supervision.state.get("flaky"), Some(&first), "the second sighting changed the state");
    }
}
