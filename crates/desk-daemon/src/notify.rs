//! The daemon's notifications: running the operator's notify command when a session needs a
//! person.
//!
//! Owns carrying out what `desk_core::notify` decides: building the notification's JSON, running
//! `[notify] command` from the config file through `sh -c` with that JSON on stdin (and its main
//! fields in `DESK_NOTIFY_*` variables), and asking the session's master to journal a `notify`
//! event (the daemon's loop sends it; see [`Notifications::take_records`]). Invariants: nothing
//! here blocks the daemon's loop — each command runs on a short-lived thread of its own that
//! writes its stdin, waits for it at most [`COMMAND_TIMEOUT`] (then kills its process group)
//! and reaps it; at most [`MAX_RUNNING`] commands run at once and a notification beyond that is
//! logged and not run, and counted in its session's next notification's `suppressed` (as is one
//! not run because the config file cannot be read); every failure (no shell, an exit code, a timeout, a bad config file) is
//! logged, never raised. The config file is read when a notification is due, so an edit takes
//! effect without restarting the daemon.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tracing::{info, warn};

use desk_common::paths::Paths;
use desk_core::notify::{Notice, Notifier, StateMirror};
use desk_term::text::cut_bytes;
use desk_wire::events::Event;
use desk_wire::operator::{ClientEvent, MAX_NOTIFY_MESSAGE};

/// 10 s for one notify command: a webhook with curl or a phone push answers in well under a
/// second; one still running after this is hung, and is killed so that it cannot pile up.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// 8 commands at once: the rate limit lets at most a few out per session, so this is only hit
/// when many sessions need someone at the same moment (a fleet-wide outage); eight popups say
/// as much as a hundred, and a hung command cannot grow the daemon's threads without bound.
pub const MAX_RUNNING: usize = 8;

/// How often a command's thread looks whether it has finished: its delay is all it costs (the
/// thread does nothing else), and a person does not notice 20 ms.
const WAIT_POLL: Duration = Duration::from_millis(20);

/// 2 KiB of a failed command's stderr go into the log: enough for its error message.
const STDERR_KEPT: usize = 2048;

/// The daemon's notification state: the decisions, and the commands running.
pub struct Notifications {
    paths: Paths,
    notifier: Notifier,
    runner: Runner,
    /// `notify` events waiting for the loop to send to their session's master.
    records: VecDeque<(String, ClientEvent)>,
}

impl Notifications {
    pub fn new(paths: Paths) -> Notifications {
        Notifications {
            paths,
            notifier: Notifier::new(),
            runner: Runner::new(MAX_RUNNING, COMMAND_TIMEOUT),
            records: VecDeque::new(),
        }
    }

    /// A master welcomed the daemon: the state its session is in now is not news.
    pub fn on_connected(&mut self, session: &str, generation: u32, state: Option<&desk_core::state::StateView>) {
        let mirror = state
            .map(|s| StateMirror {
                lifecycle: s.lifecycle.value.as_str().to_string(),
                activity: s.activity.value.as_str().to_string(),
                health: s.health.value.as_str(),
                wait: s.wait.clone(),
            })
            .unwrap_or_default();
        self.notifier.on_connected(session, generation, mirror, Instant::now());
    }

    /// A session event from a master.
    pub fn on_event(&mut self, session: &str, event: &Event) {
        if let Some(notice) = self.notifier.on_event(session, event, Instant::now()) {
            self.notify(notice);
        }
    }

    /// A delivery item turned stuck.
    pub fn on_stuck(&mut self, item: &desk_core::delivery::item::Item) {
        let class = item.stuck.map_or("stuck", |c| c.as_str());
        let first = item.text.lines().next().unwrap_or("");
        let first = cut_bytes(first, 120);
        if let Some(notice) = self.notifier.on_stuck(&item.session, item.id.as_str(), class, first, Instant::now()) {
            self.notify(notice);
        }
    }

    /// A session's agent mentioned the operator in a channel message.
    pub fn on_mention(&mut self, session: &str, channel: &str, message_id: &str, body: &str) {
        let first = cut_bytes(body.lines().find(|l| !l.trim().is_empty()).unwrap_or(""), 120);
        if let Some(notice) = self.notifier.on_mention(session, channel, message_id, first, Instant::now()) {
            self.notify(notice);
        }
    }

    /// The supervisor holds a session down (`health`: `failed: …`).
    pub fn on_failed(&mut self, session: &str, health: &str) {
        if let Some(notice) = self.notifier.on_failed(session, health, Instant::now()) {
            self.notify(notice);
        }
    }

    /// The `notify` events to journal, by session, in order.
    pub fn take_records(&mut self) -> Vec<(String, ClientEvent)> {
        self.records.drain(..).collect()
    }

    fn notify(&mut self, notice: Notice) {
        let message = cut_bytes(&notice.message, MAX_NOTIFY_MESSAGE).to_string();
        info!(session = %notice.session, kind = notice.kind.as_str(), "notify: {message}");
        self.records.push_back((
            notice.session.clone(),
            ClientEvent::Notify {
                kind: notice.kind.as_str().to_string(),
                message: message.clone(),
                item: notice.item.clone(),
                suppressed: notice.suppressed,
            },
        ));
        // A notice whose command does not run is counted in the session's next `suppressed`.
        let command = match desk_common::config::load(&self.paths) {
            Ok(config) => config.notify_command,
            Err(e) => {
                warn!("not running the notify command: {e:#}");
                self.notifier.not_delivered(&notice.session, Instant::now());
                return;
            }
        };
        let Some(command) = command else { return };
        let json = notice_json(&notice, &message, desk_common::clock::now_ms());
        if !self.runner.start(command, json, notice.session.clone()) {
            // Not run (the cap, or no thread): counted with the next one that goes out.
            self.notifier.not_delivered(&notice.session, Instant::now());
        }
    }
}

/// The notify commands running: at most `max` at once, each on a thread of its own for at
/// most `timeout` ([`MAX_RUNNING`] and [`COMMAND_TIMEOUT`] in the daemon; tests give it their
/// own, so that they need not wait 10 s).
struct Runner {
    running: Arc<AtomicUsize>,
    max: usize,
    timeout: Duration,
}

impl Runner {
    fn new(max: usize, timeout: Duration) -> Runner {
        Runner { running: Arc::new(AtomicUsize::new(0)), max, timeout }
    }

    /// Run `command` for `session`'s notification, unless `max` are running already (then it
    /// is logged and dropped). Whether it was started.
    fn start(&self, command: String, json: serde_json::Value, session: String) -> bool {
        if self.running.load(Ordering::SeqCst) >= self.max {
            warn!(session = %session, "not running the notify command: {} are still running", self.max);
            return false;
        }
        self.running.fetch_add(1, Ordering::SeqCst);
        let (running, timeout) = (self.running.clone(), self.timeout);
        let spawned = std::thread::Builder::new().name("notify".into()).spawn(move || {
            if let Err(why) = run_command(&command, &json, timeout) {
                warn!(session = %session, "the notify command failed: {why}");
            }
            running.fetch_sub(1, Ordering::SeqCst);
        });
        if let Err(e) = spawned {
            self.running.fetch_sub(1, Ordering::SeqCst);
            warn!("cannot start a thread for the notify command: {e}");
            return false;
        }
        true
    }
}

/// The JSON a notify command reads on stdin (docs/operator-guide.md).
fn notice_json(notice: &Notice, message: &str, now_ms: u64) -> serde_json::Value {
    serde_json::json!({
        "kind": notice.kind.as_str(),
        "session": notice.session,
        "generation": notice.generation,
        "message": message,
        "state": {
            "lifecycle": notice.state.lifecycle,
            "activity": notice.state.activity,
            "health": notice.state.health,
            "wait": notice.state.wait,
        },
        "item": notice.item,
        "suppressed": notice.suppressed,
        "ts_ms": now_ms,
        "ts": desk_core::time::iso8601(now_ms),
    })
}

/// Run `command` with `json` on stdin, until it exits or `timeout` passes (then its process
/// group is killed); an `Err` says how it failed. Runs on its own thread.
fn run_command(command: &str, json: &serde_json::Value, timeout: Duration) -> Result<(), String> {
    let field = |k: &str| json[k].as_str().unwrap_or("").to_string();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .env("DESK_NOTIFY_KIND", field("kind"))
        .env("DESK_NOTIFY_SESSION", field("session"))
        .env("DESK_NOTIFY_MESSAGE", field("message"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        // Its own process group, so a timeout kills what it started too.
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot run sh: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A command that does not read its stdin closes it early: not a failure.
        let mut line = json.to_string();
        line.push('\n');
        let _ = stdin.write_all(line.as_bytes());
    }
    let mut stderr = Vec::new();
    if let Some(err) = child.stderr.as_ref() {
        let _ = nix::fcntl::fcntl(err, nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK));
    }
    let deadline = Instant::now() + timeout;
    let status = loop {
        read_some(&mut child, &mut stderr);
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let pgid = nix::unistd::Pid::from_raw(-(child.id() as i32));
                let _ = nix::sys::signal::kill(pgid, nix::sys::signal::SIGKILL);
                let _ = child.wait();
                return Err(format!("still running after {} ms; killed", timeout.as_millis()));
            }
            Ok(None) => std::thread::sleep(WAIT_POLL),
            Err(e) => return Err(format!("cannot wait for it: {e}")),
        }
    };
    read_some(&mut child, &mut stderr);
    if status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&stderr).trim().to_string();
    let said = if said.is_empty() { String::new() } else { format!(": {said}") };
    Err(format!("{status}{said}"))
}

/// Read what the child's stderr has now, keeping at most [`STDERR_KEPT`] bytes.
fn read_some(child: &mut Child, kept: &mut Vec<u8>) {
    let Some(err) = child.stderr.as_mut() else { return };
    let mut buf = [0u8; 1024];
    while let Ok(n) = err.read(&mut buf) {
        if n == 0 {
            break;
        }
        let room = STDERR_KEPT.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 18's finding 7: with MAX_RUNNING commands still running, a ninth notification's
    /// command is skipped — and counted in that session's next notification's `suppressed`.
    #[test]
    fn a_command_skipped_at_the_cap_is_counted_in_the_next_suppressed() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths {
            runtime: dir.path().join("run"),
            state: dir.path().join("state"),
            config: dir.path().join("config"),
        };
        std::fs::create_dir_all(&paths.config).unwrap();
        let gate = dir.path().join("gate");
        // Each command waits for the gate file: MAX_RUNNING of them hold every slot.
        let command = format!("cat >/dev/null; while [ ! -e '{}' ]; do sleep 0.02; done", gate.display());
        std::fs::write(paths.config.join("config.toml"), format!("[notify]\ncommand = \"{command}\"\n")).unwrap();
        let mut n = Notifications::new(paths);
        for i in 0..MAX_RUNNING {
            n.on_mention(&format!("s{i}"), "ops", "1", "hello");
        }
        assert_eq!(n.runner.running.load(Ordering::SeqCst), MAX_RUNNING);
        n.on_mention("late", "ops", "2", "one too many");
        assert_eq!(n.runner.running.load(Ordering::SeqCst), MAX_RUNNING, "not run");
        std::fs::write(&gate, b"").unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while n.runner.running.load(Ordering::SeqCst) > 0 {
            assert!(Instant::now() < deadline, "the commands did not end");
            std::thread::sleep(Duration::from_millis(10));
        }
        n.take_records();
        n.on_event("late", &exit_event());
        let records = n.take_records();
        let suppressed = records.iter().find_map(|(s, e)| match e {
            ClientEvent::Notify { suppressed, .. } if s == "late" => Some(*suppressed),
            _ => None,
        });
        assert_eq!(suppressed, Some(1), "{records:?}");
    }

    fn exit_event() -> Event {
        Event {
            seq: 1,
            ts_ms: 1,
            generation: 0,
            body: desk_wire::events::EventBody::Exit { code: Some(3), signal: None, escalated: false },
        }
    }

    #[test]
    fn a_command_gets_the_json_on_stdin_and_failures_say_what_it_printed() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("got");
        let json = serde_json::json!({"kind": "blocked", "session": "s", "message": "s is waiting"});
        let command =
            format!("cat > {}; echo \"$DESK_NOTIFY_KIND $DESK_NOTIFY_SESSION\" >> {}", out.display(), out.display());
        run_command(&command, &json, COMMAND_TIMEOUT).unwrap();
        let got = std::fs::read_to_string(&out).unwrap();
        let mut lines = got.lines();
        assert_eq!(serde_json::from_str::<serde_json::Value>(lines.next().unwrap()).unwrap(), json);
        assert_eq!(lines.next(), Some("blocked s"));
        let e = run_command("echo no webhook >&2; exit 3", &json, COMMAND_TIMEOUT).unwrap_err();
        assert!(e.contains("3") && e.ends_with(": no webhook"), "{e}");
    }

    /// Poll `done` every 10 ms until it holds, or fail after 20 s saying `what`.
    fn eventually(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(Instant::now() < deadline, "never: {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn alive(pid: i32) -> bool {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z ")
    }

    #[test]
    fn a_command_still_running_at_the_timeout_is_killed_with_what_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let pids = dir.path().join("pids");
        // The shell starts a helper in the background, then waits: both must go.
        let command = format!("sleep 600 & echo $! > {p}; echo $$ >> {p}; wait", p = pids.display());
        let timeout = Duration::from_millis(300);
        let e = run_command(&command, &serde_json::json!({}), timeout).unwrap_err();
        assert_eq!(e, "still running after 300 ms; killed");
        let started: Vec<i32> =
            std::fs::read_to_string(&pids).unwrap().lines().map(|l| l.trim().parse().unwrap()).collect();
        assert_eq!(started.len(), 2);
        for pid in started {
            eventually(&format!("process {pid} to be gone"), || !alive(pid));
        }
    }

    #[test]
    fn at_most_eight_commands_run_at_once_and_more_start_once_they_end() {
        let dir = tempfile::tempdir().unwrap();
        let (gate, log) = (dir.path().join("gate"), dir.path().join("started"));
        // Each command says it started, then waits for the gate.
        let command = format!(
            "echo \"$DESK_NOTIFY_SESSION\" >> {}; while [ ! -e {} ]; do sleep 0.01; done",
            log.display(),
            gate.display()
        );
        let started = || std::fs::read_to_string(&log).unwrap_or_default().lines().count();
        let runner = Runner::new(MAX_RUNNING, COMMAND_TIMEOUT);
        let json = |n: usize| serde_json::json!({"session": format!("s{n}")});
        let ran: Vec<bool> =
            (0..MAX_RUNNING + 3).map(|n| runner.start(command.clone(), json(n), format!("s{n}"))).collect();
        assert_eq!(ran.iter().filter(|r| **r).count(), MAX_RUNNING, "{ran:?}");
        assert!(ran[MAX_RUNNING..].iter().all(|r| !r), "the ones past the cap are not run: {ran:?}");
        eventually("eight commands to start", || started() == MAX_RUNNING);
        assert!(!runner.start(command.clone(), json(99), "s99".into()), "still full");
        std::fs::write(&gate, b"").unwrap();
        eventually("the eight to end", || runner.running.load(Ordering::SeqCst) == 0);
        assert!(runner.start(command, json(100), "s100".into()), "room again");
        eventually("the next one to run", || started() == MAX_RUNNING + 1);
        let sessions = std::fs::read_to_string(&log).unwrap();
        assert!(!sessions.contains("s8\n") && !sessions.contains("s99") && sessions.contains("s100"), "{sessions}");
    }
}
