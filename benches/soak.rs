//! `make soak`: a randomized crash soak of prompt delivery, judged against ground truth.
//!
//! Several demo-agent sessions (each with its own options and a prompt log, the ground truth of
//! what the agent actually submitted) run under `desk serve`. Hundreds of prompts of every shape
//! are sent with `desk send` while random faults hit the system, by profile (`--profile`):
//! - `mixed` (the default): SIGKILL of the daemon (restarted, sometimes with a `DESK_FAILPOINT`
//!   that kills it again mid-pipeline), of a session's master and of a session's agent (the
//!   session is then started again with `desk new` of the same name, so its queued items move
//!   to the new generation); quick agents;
//! - `restarts`: the daemon killed or stopped while agents die and sessions restart, also while
//!   the daemon is down (an outage: the restarted daemon finds a new generation running and
//!   prompts the old one had queued); agents with turns of 0.7–5 s;
//! - `slow-agents`: only the daemon is killed (SIGKILL, failpoints), and the agents' turns last
//!   2.5–6 s, so they take queued prompts and report them while nobody listens.
//!
//! Then the faults stop, everything settles (items, then the agents' own queues), and every item
//! is judged (`soak/judge.rs`) by its state and by where and how often its unique token appears
//! in the prompt logs. Only two outcomes pass: delivered and submitted once by its own session's
//! agent; or stuck and never submitted (an item still queued, say behind a stuck item's unsent
//! paste, waits for the forcing). Everything else fails the run: lost (delivered but never
//! submitted, or vanished), duplicated, submitted by another session, stuck although submitted
//! (a force would send it twice). Then every stuck item is forced, as `desk stuck` advises, the
//! queues settle again (at most three rounds), and in the end every item must have been
//! submitted exactly once — nothing left queued or sending. Failures are printed with their
//! evidence and the faults around them, the last line is the run's row for docs/benchmarks.md
//! (`SOAK-ROW | …`), and the run exits 1 on any failure.
//!
//! Options: `--profile P`, `--prompts N` (default 300 / 200 / 120 by profile), `--seed S`
//! (default: from the clock, printed), `--minutes M` (bound on the sending phase, default 10),
//! `--sessions K` (default 4), `--settle-secs S` (how long the end waits for items to settle,
//! default 180), `--fault-rate P` (chance of a fault before each send, default 0.1).
//!
//! It never leaks processes: everything it started (daemons, masters, agents and whatever those
//! started) is killed by pid at the end, also on a panic.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

#[path = "soak/judge.rs"]
mod judge;

const DESK: &str = env!("CARGO_BIN_EXE_desk");
const AGENT: &str = env!("CARGO_BIN_EXE_desk-demo-agent");

/// splitmix64: a small, well-mixed generator, so a run is reproducible from its seed without a
/// dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Run `desk` with extra environment; never panics on a failing command.
fn desk_env(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(DESK);
    // The soak starts, kills and restarts the daemon itself (with failpoints): a `desk send`
    // that autostarts one while it is down would race the soak's own start.
    cmd.env("DESK_HOME", home)
        .env("DESK_AUTOSTART", "0")
        .env_remove("DESK_SESSION")
        .env_remove("DESK_FAILPOINT")
        .args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run desk")
}

fn desk(home: &Path, args: &[&str]) -> Output {
    desk_env(home, args, &[])
}

fn alive(pid: i32) -> bool {
    pid > 0 && desk_common::procfs::alive(pid as u32)
}

fn sigkill(pid: i32) {
    if pid > 0 {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
    }
}

fn serve_pid(home: &Path) -> Option<i32> {
    std::fs::read_to_string(home.join("state/delivery/serve.lock")).ok()?.trim().parse().ok()
}

fn ls(home: &Path) -> Vec<serde_json::Value> {
    let out = desk(home, &["ls", "--json"]);
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .ok()
        .and_then(|v| v["data"].as_array().cloned())
        .unwrap_or_default()
}

/// An item as the daemon reports it (over its control socket), or as `desk item --json` reads it
/// from disk when the daemon does not answer; `Null` if neither knows the id.
fn item(home: &Path, id: &str) -> serde_json::Value {
    const SECS_5: Duration = Duration::from_secs(5);
    let paths =
        desk_common::paths::Paths { runtime: home.join("run"), state: home.join("state"), config: home.join("config") };
    let socket = desk_common::daemon_client::socket_path(&paths);
    if let Some(id) = desk_wire::names::ItemId::parse(id)
        && let Ok(r) = desk_common::daemon_client::request(&socket, &desk_wire::control::Request::Item { id }, SECS_5)
        && let Ok(answer) = r.into_answer::<serde_json::Value>()
        && answer.data.is_object()
    {
        return answer.data;
    }
    let out = desk(home, &["item", id, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["data"].clone()
}

/// One demo-agent session and the options that make it differ from the others.
struct Session {
    name: String,
    args: Vec<String>,
    log: PathBuf,
    master_pid: i32,
    agent_pid: i32,
    /// When a killed session is to be started again.
    restart_at: Option<Instant>,
    starts: u32,
}

/// One prompt sent.
struct Sent {
    token: String,
    session: usize,
    shape: &'static str,
    idle: bool,
    id: String,
    at_s: f64,
}

/// Everything the soak started, killed by pid when dropped (also on a panic).
struct Soak {
    home: PathBuf,
    profile: Profile,
    rng: Rng,
    t0: Instant,
    sessions: Vec<Session>,
    /// Every pid the soak ever started or learned of (daemons, masters, agents).
    pids: Vec<i32>,
    /// The running daemon's pid and the failpoint it was started with.
    daemon: Option<(i32, Option<&'static str>)>,
    daemon_restart_at: Option<Instant>,
    /// (seconds since the start, session index if the fault hit a session, what happened).
    faults: Vec<(f64, Option<usize>, String)>,
    /// Unix ms at `t0`, to put the items' evidence on the same clock.
    t0_ms: u64,
    fault_counts: BTreeMap<&'static str, usize>,
}

impl Drop for Soak {
    fn drop(&mut self) {
        self.kill_everything();
    }
}

impl Soak {
    fn now_s(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    fn fault(&mut self, kind: &'static str, session: Option<usize>, what: String) {
        let at = self.now_s();
        *self.fault_counts.entry(kind).or_default() += 1;
        self.faults.push((at, session, what));
    }

    /// Unix ms as seconds since the start of the run.
    fn rel(&self, ms: u64) -> f64 {
        (ms as f64 - self.t0_ms as f64) / 1000.0
    }

    fn kill_everything(&mut self) {
        if let Some(pid) = serve_pid(&self.home) {
            self.pids.push(pid);
        }
        for s in ls(&self.home) {
            for key in ["pid", "master_pid"] {
                if let Some(pid) = s[key].as_i64() {
                    self.pids.push(pid as i32);
                }
            }
        }
        // Helpers first (the masters are their subreapers), then everything by pid.
        for pid in self.pids.clone() {
            for p in desk_common::procfs::descendants(pid as u32) {
                sigkill(p.pid as i32);
            }
        }
        for pid in self.pids.clone() {
            sigkill(pid);
        }
    }

    fn start_daemon(&mut self, mut failpoint: Option<&'static str>) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let env: Vec<(&str, &str)> = failpoint.map(|f| vec![("DESK_FAILPOINT", f)]).unwrap_or_default();
            let out = desk_env(&self.home, &["serve"], &env);
            if out.status.success()
                && let Some(pid) = serve_pid(&self.home)
                && alive(pid)
            {
                self.pids.push(pid);
                self.daemon = Some((pid, failpoint));
                return;
            }
            // The failpoint killed it during its start (the restore's own group commit, say):
            // a crash mid-recovery, as intended; the next start goes without one.
            if let Some(f) = failpoint.take() {
                let at = self.now_s();
                *self.fault_counts.entry("daemon died at a failpoint").or_default() += 1;
                self.faults.push((at, None, format!("daemon died at failpoint {f} while starting")));
                continue;
            }
            assert!(Instant::now() < deadline, "desk serve does not start: {}", String::from_utf8_lossy(&out.stderr));
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn start_session(&mut self, i: usize) {
        let s = &self.sessions[i];
        let mut args = vec!["new".to_string(), s.name.clone(), "--provider".into(), "demo".into(), "--".into()];
        args.push(AGENT.into());
        args.extend(["--prompt-log".to_string(), s.log.to_string_lossy().into_owned()]);
        args.extend(s.args.iter().cloned());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // `desk new` can briefly refuse a name whose master is still on its way out.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let out = desk(&self.home, &args);
            if out.status.success() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "desk new {} keeps failing: {}",
                self.sessions[i].name,
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let name = self.sessions[i].name.clone();
        let row = ls(&self.home).into_iter().find(|r| r["name"] == name.as_str()).unwrap_or_default();
        let s = &mut self.sessions[i];
        s.master_pid = row["master_pid"].as_i64().unwrap_or(0) as i32;
        s.agent_pid = row["pid"].as_i64().unwrap_or(0) as i32;
        s.restart_at = None;
        s.starts += 1;
        let (m, a) = (s.master_pid, s.agent_pid);
        self.pids.extend([m, a]);
    }

    /// Restart what is due: a daemon a failpoint killed, sessions whose restart time came.
    fn watchdog(&mut self, faults_on: bool) {
        if let Some((pid, failpoint)) = self.daemon
            && !alive(pid)
        {
            let at = self.now_s();
            if let Some(f) = failpoint {
                *self.fault_counts.entry("daemon died at a failpoint").or_default() += 1;
                self.faults.push((at, None, format!("daemon {pid} died at failpoint {f}")));
            }
            self.daemon = None;
            self.daemon_restart_at = Some(Instant::now() + Duration::from_millis(self.rng.range(0, 800) as u64));
        }
        if self.daemon.is_none() && self.daemon_restart_at.is_none_or(|t| !faults_on || Instant::now() >= t) {
            let failpoint =
                (faults_on && self.rng.chance(0.3)).then(|| *self.rng.pick(&desk_daemon::store::FAILPOINTS));
            self.start_daemon(failpoint);
            let pid = self.daemon.map(|d| d.0).unwrap_or(0);
            let at = self.now_s();
            self.faults.push((at, None, format!("daemon {pid} started (failpoint {failpoint:?})")));
            self.daemon_restart_at = None;
        }
        for i in 0..self.sessions.len() {
            if self.sessions[i].restart_at.is_some_and(|t| !faults_on || Instant::now() >= t) {
                // The old agent must be gone, or two agents would write one prompt log.
                let old = self.sessions[i].agent_pid;
                let until = Instant::now() + Duration::from_secs(5);
                while alive(old) && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(10));
                }
                sigkill(old);
                self.start_session(i);
                let at = self.now_s();
                let s = &self.sessions[i];
                self.faults.push((at, None, format!("session {} restarted (agent {})", s.name, s.agent_pid)));
            }
        }
    }

    fn random_fault(&mut self) {
        match self.profile {
            Profile::Mixed => match self.rng.below(3) {
                0 => self.kill_daemon(),
                1 => self.kill_session(true),
                _ => self.kill_session(false),
            },
            Profile::Restarts => match self.rng.below(4) {
                0 => self.kill_daemon(),
                1 => self.stop_daemon(),
                2 => self.kill_session(false),
                _ => self.outage(),
            },
            Profile::SlowAgents => self.kill_daemon(),
        }
    }

    /// SIGKILL the daemon; the watchdog starts it again after up to 1.5 s.
    fn kill_daemon(&mut self) {
        if let Some((pid, _)) = self.daemon.take() {
            sigkill(pid);
            self.fault("daemon SIGKILL", None, format!("SIGKILL daemon {pid}"));
            self.daemon_restart_at = Some(Instant::now() + Duration::from_millis(self.rng.range(0, 1500) as u64));
        }
    }

    /// `desk serve --stop`; the watchdog starts it again after up to 1.5 s.
    fn stop_daemon(&mut self) {
        if let Some((pid, _)) = self.daemon.take() {
            let out = desk(&self.home, &["serve", "--stop"]);
            sigkill(pid);
            let how = if out.status.success() { "stopped" } else { "stop failed; SIGKILLed" };
            self.fault("daemon stop", None, format!("daemon {pid} {how}"));
            self.daemon_restart_at = Some(Instant::now() + Duration::from_millis(self.rng.range(0, 1500) as u64));
        }
    }

    /// SIGKILL a random session's master (its agent then ends on SIGHUP) or agent; the session
    /// is started again after up to 2 s. Returns the session.
    fn kill_session(&mut self, master: bool) {
        let i = self.rng.below(self.sessions.len());
        if self.sessions[i].restart_at.is_some() {
            return;
        }
        let delay = Duration::from_millis(self.rng.range(0, 2000) as u64);
        let s = &mut self.sessions[i];
        let (label, pid) = if master { ("master SIGKILL", s.master_pid) } else { ("agent SIGKILL", s.agent_pid) };
        sigkill(pid);
        if master {
            // The agent loses its terminal and ends on SIGHUP; make sure of it.
            let agent = s.agent_pid;
            let until = Instant::now() + Duration::from_secs(3);
            while alive(agent) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
            }
            sigkill(agent);
        }
        s.restart_at = Some(Instant::now() + delay);
        let name = s.name.clone();
        self.fault(label, Some(i), format!("{label} {name} (pid {pid})"));
    }

    /// The daemon goes (SIGKILL or stop); while it is down the agent of a session — a working
    /// one when there is one, as its own queue may hold delivered prompts — is SIGKILLed and
    /// the session started again; the daemon returns after up to 1.5 s (the watchdog), to find
    /// a new generation running.
    fn outage(&mut self) {
        if self.daemon.is_none() {
            return;
        }
        if self.rng.chance(0.5) {
            self.kill_daemon()
        } else {
            self.stop_daemon()
        }
        let rows = ls(&self.home);
        let free: Vec<usize> = (0..self.sessions.len()).filter(|i| self.sessions[*i].restart_at.is_none()).collect();
        let working: Vec<usize> = free
            .iter()
            .copied()
            .filter(|i| {
                rows.iter().any(|r| {
                    r["name"] == self.sessions[*i].name.as_str() && r["state"]["activity"]["value"] == "working"
                })
            })
            .collect();
        let pool = if working.is_empty() { free } else { working };
        if pool.is_empty() {
            return;
        }
        let i = pool[self.rng.below(pool.len())];
        let agent = self.sessions[i].agent_pid;
        sigkill(agent);
        let until = Instant::now() + Duration::from_secs(5);
        while alive(agent) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.start_session(i);
        let s = &self.sessions[i];
        let what = format!(
            "outage: agent {agent} of {} SIGKILLed and the session started again (agent {}) while the daemon was down",
            s.name, s.agent_pid
        );
        self.fault("outage (agent killed, session restarted, daemon down)", Some(i), what);
    }

    fn send(
        &mut self,
        session: usize,
        shape: &'static str,
        token: String,
        text: &str,
        idle: bool,
        sent: &mut Vec<Sent>,
    ) {
        assert!(text.contains(&token), "a {shape} prompt lost its token {token}: {text:?}");
        let name = self.sessions[session].name.clone();
        let file = self.home.join("prompt.txt");
        let mut args = vec!["send", name.as_str()];
        if idle {
            args.extend(["--when", "idle"]);
        }
        // Control bytes (and anything odd) go through a file; the rest as an argument.
        let plain = !text.chars().any(|c| c.is_control() && c != '\n');
        if plain {
            args.push(text);
        } else {
            let mut f = std::fs::File::create(&file).expect("write the prompt file");
            f.write_all(text.as_bytes()).expect("write the prompt file");
            args.extend(["--file", file.to_str().expect("utf-8 home")]);
        }
        let out = desk(&self.home, &args);
        assert!(out.status.success(), "desk send ({shape}) failed: {}\n{text:?}", String::from_utf8_lossy(&out.stderr));
        let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let at_s = self.now_s();
        sent.push(Sent { token, session, shape, idle, id, at_s });
    }
}

const WORDS: &[&str] = &[
    "fix",
    "the",
    "flaky",
    "test",
    "in",
    "module",
    "parser",
    "and",
    "then",
    "rerun",
    "suite",
    "check",
    "logs",
    "refactor",
    "error",
    "handling",
    "update",
    "docs",
    "add",
    "benchmark",
    "review",
    "diff",
    "branch",
    "merge",
];
const UNICODE: &[&str] =
    &["漢字のテスト", "全角文字", "🚀", "🔥", "👍🏽", "👨‍👩‍👧", "é", "ñ", "Ω≈ç√", "한국어", "ก่", "a\u{0308}", "Z̤͔ͧ̑"];
const NASTY: &[&str] = &[
    "\x1b[31mred\x1b[0m",
    "\x07bell",
    "\x08back",
    "\x1b[201~",
    "\x1b[200~",
    "\r",
    "\x00nul",
    "\x1b]0;title\x07",
    "\x7f",
    "\u{9b}csi",
    "\t",
];

fn words(rng: &mut Rng, n: usize) -> String {
    (0..n).map(|_| *rng.pick(WORDS)).collect::<Vec<_>>().join(" ")
}

/// One prompt of `shape` carrying `token`.
fn prompt(rng: &mut Rng, shape: &str, token: &str) -> String {
    match shape {
        "word" => token.to_string(),
        "continue" => format!("continue {token}"),
        "prefix" => format!(
            "Please review the following change carefully and report every problem you find, {} {token}",
            words(rng, 3)
        ),
        "multiline" => {
            let n = rng.range(2, 40);
            let at = rng.below(n);
            let mut lines: Vec<String> = (0..n)
                .map(|_| {
                    let count = rng.range(1, 12);
                    words(rng, count)
                })
                .collect();
            // Some share their first line with many others.
            if rng.chance(0.5) {
                lines[0] = "Here is the plan for the next step:".into();
            }
            lines[at] = format!("{} {token}", lines[at]);
            lines.join("\n")
        }
        "long" => {
            let mut text = String::new();
            while text.len() < rng.range(1100, 3000) {
                text.push_str(&words(rng, 10));
                text.push(' ');
            }
            let cut = rng.below(text.len());
            let cut = (0..=cut).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
            text.insert_str(cut, &format!(" {token} "));
            text
        }
        "unicode" => {
            let mut parts: Vec<String> = (0..rng.range(2, 8)).map(|_| rng.pick(UNICODE).to_string()).collect();
            parts.insert(rng.below(parts.len() + 1), token.to_string());
            parts.join(" ")
        }
        "escapes" => {
            let mut parts: Vec<String> = (0..rng.range(2, 6)).map(|_| rng.pick(NASTY).to_string()).collect();
            parts.push(words(rng, 2));
            parts.insert(rng.below(parts.len() + 1), format!(" {token} "));
            parts.concat()
        }
        _ => unreachable!("unknown shape {shape}"),
    }
}

/// Chance of a fault before each send (or burst): about one fault every 1.5 s at the sending
/// pace (a send and a gap of up to 250 ms), so a 300-prompt run sees a few dozen faults while
/// most prompts still travel between faults, as in real life.
const FAULT_RATE: f64 = 0.1;

const SHAPES: &[&str] = &["word", "continue", "prefix", "multiline", "long", "unicode", "escapes"];

/// Which faults hit the run, and how the agents behave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Profile {
    /// SIGKILL of the daemon (some restarts with a failpoint), of a master, of an agent; quick
    /// agents (turns of 60–900 ms).
    Mixed,
    /// The daemon is killed or stopped while agents die and sessions are started again — also
    /// while the daemon is down (an outage), so that the restarted daemon finds prompts the old
    /// generation's agent had queued and a new generation running. Turns of 0.7–5 s, so that
    /// many prompts wait in the agents' own queues.
    Restarts,
    /// Slow agents (turns of 2.5–6 s) and only the daemon is killed (SIGKILL, failpoints): the
    /// agents take queued prompts and report them while nobody listens.
    SlowAgents,
}

impl Profile {
    fn parse(name: &str) -> Profile {
        match name {
            "mixed" => Profile::Mixed,
            "restarts" => Profile::Restarts,
            "slow-agents" => Profile::SlowAgents,
            other => panic!("--profile {other:?}: one of mixed, restarts, slow-agents"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Profile::Mixed => "mixed",
            Profile::Restarts => "restarts",
            Profile::SlowAgents => "slow-agents",
        }
    }

    /// Prompts per run unless `--prompts` says: slow agents take each mid-turn prompt as a
    /// turn of its own, so fewer keep a run's settling within minutes.
    fn default_prompts(self) -> usize {
        match self {
            Profile::Mixed => 300,
            Profile::Restarts => 200,
            Profile::SlowAgents => 120,
        }
    }

    /// Agent options per session: turn lengths and paste handling.
    fn agent_args(self, i: usize) -> Vec<String> {
        let v: &[&str] = match (self, i % 4) {
            (Profile::Mixed, 0) => &["--work-ms", "60"],
            (Profile::Mixed, 1) => {
                &["--work-ms", "400", "--paste-collapse-lines", "2", "--paste-collapse-chars", "200"]
            }
            (Profile::Mixed, 2) => &["--work-ms", "150", "--paste-burst-ms", "20"],
            (Profile::Mixed, _) => &["--work-ms", "900", "--no-paste-collapse"],
            (Profile::Restarts, 0) => &["--work-ms", "700"],
            (Profile::Restarts, 1) => &["--work-ms", "1500", "--paste-collapse-lines", "2"],
            (Profile::Restarts, 2) => &["--work-ms", "3000", "--paste-burst-ms", "20"],
            (Profile::Restarts, _) => &["--work-ms", "5000", "--no-paste-collapse"],
            (Profile::SlowAgents, 0) => &["--work-ms", "2500"],
            (Profile::SlowAgents, 1) => &["--work-ms", "4000", "--paste-collapse-lines", "2"],
            (Profile::SlowAgents, 2) => &["--work-ms", "5000", "--paste-burst-ms", "20"],
            (Profile::SlowAgents, _) => &["--work-ms", "6000", "--no-paste-collapse"],
        };
        v.iter().map(|s| s.to_string()).collect()
    }
}

struct Opts {
    profile: Profile,
    prompts: usize,
    seed: u64,
    minutes: f64,
    sessions: usize,
    settle: Duration,
    fault_rate: f64,
}

fn opts() -> Opts {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let seed = value("--seed").map(|s| s.parse().expect("--seed S: an integer")).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
    });
    let profile = Profile::parse(&value("--profile").unwrap_or_else(|| "mixed".into()));
    Opts {
        profile,
        prompts: value("--prompts").map(|s| s.parse().expect("--prompts N")).unwrap_or(profile.default_prompts()),
        seed,
        minutes: value("--minutes").map(|s| s.parse().expect("--minutes M")).unwrap_or(10.0),
        sessions: value("--sessions").map(|s| s.parse().expect("--sessions K")).unwrap_or(4).max(1),
        settle: Duration::from_secs(value("--settle-secs").map(|s| s.parse().expect("--settle-secs S")).unwrap_or(180)),
        fault_rate: value("--fault-rate").map(|s| s.parse().expect("--fault-rate P")).unwrap_or(FAULT_RATE),
    }
}

/// Every item as desk knows it now, in the order sent.
fn items(home: &Path, sent: &[Sent]) -> Vec<serde_json::Value> {
    sent.iter().map(|s| item(home, &s.id)).collect()
}

/// Wait (watching over the daemon and sessions, with faults off) until no item is queued or
/// sending, or `until`, or — with `quiet` — until the open items have stayed the same, none of
/// them sending, for that long (a queue held by desk's own unsent paste of a stuck item waits
/// for the operator's force). Returns how many are open.
fn settle_items(soak: &mut Soak, sent: &[Sent], until: Instant, quiet: Option<Duration>) -> usize {
    let mut last: (Vec<String>, Instant) = (Vec::new(), Instant::now());
    loop {
        soak.watchdog(false);
        let open: Vec<String> = items(&soak.home, sent)
            .iter()
            .filter(|i| !matches!(i["state"].as_str(), Some("delivered" | "stuck" | "dropped")) && !i.is_null())
            .map(|i| format!("{}.{}", i["id"].as_str().unwrap_or("?"), i["state"].as_str().unwrap_or("?")))
            .collect();
        if open != last.0 {
            last = (open.clone(), Instant::now());
        }
        let still = quiet.is_some_and(|q| last.1.elapsed() >= q && !open.iter().any(|o| o.ends_with(".sending")));
        if open.is_empty() || Instant::now() >= until || still {
            return open.len();
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Every item's outcome now.
fn judge_all(soak: &Soak, sent: &[Sent]) -> (Vec<serde_json::Value>, judge::Submitted, Vec<judge::Outcome>) {
    let items = items(&soak.home, sent);
    let submitted = judge::submitted(&soak.logs());
    let outcomes = sent
        .iter()
        .zip(&items)
        .map(|(s, i)| {
            let state = i["state"].as_str().unwrap_or("vanished");
            judge::judge(s.session, &s.token, state, i["queued_by_agent"] == true, &submitted)
        })
        .collect();
    (items, submitted, outcomes)
}

/// Let the agents work off what they queued themselves: every agent idle and every prompt log
/// unchanged for 6 s (longer than the 5 s of idle after which desk counts a queue as taken), or
/// `until`.
fn settle_agents(soak: &Soak, until: Instant) {
    let mut last = (Vec::new(), Instant::now());
    loop {
        let sizes: Vec<u64> =
            soak.sessions.iter().map(|s| std::fs::metadata(&s.log).map(|m| m.len()).unwrap_or(0)).collect();
        let idle = ls(&soak.home).iter().all(|r| r["state"]["activity"]["value"] == "idle");
        if sizes != last.0 || !idle {
            last = (sizes, Instant::now());
        } else if last.1.elapsed() > Duration::from_secs(6) {
            return;
        }
        if Instant::now() >= until {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

impl Soak {
    fn logs(&self) -> Vec<PathBuf> {
        self.sessions.iter().map(|s| s.log.clone()).collect()
    }

    /// Force a stuck item as `desk stuck` advises (the item is stuck and was never submitted):
    /// again while the force is refused for a passing reason (another delivery in flight, the
    /// agent starting), at most for `patience`. The force's last answer.
    fn force(&mut self, id: &str, patience: Duration) -> String {
        let until = Instant::now() + patience;
        loop {
            self.watchdog(false);
            let out = desk(&self.home, &["force", id]);
            let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            // Done: delivered, or stuck again (a verdict, judged below), or no longer stuck.
            let state = item(&self.home, id)["state"].as_str().unwrap_or("?").to_string();
            if out.status.success() || said.contains("stuck (") || state != "stuck" || Instant::now() >= until {
                return said.trim().to_string();
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// One run's numbers: the table row of docs/benchmarks.md.
struct Row {
    prompts: usize,
    faults: usize,
    count: BTreeMap<judge::Outcome, usize>,
    forced: usize,
    forced_once: usize,
}

fn main() {
    let o = opts();
    let tmp = tempfile::Builder::new().prefix("desk-soak").tempdir().expect("temp dir");
    let home = tmp.path().to_path_buf();
    println!(
        "soak: profile {} · seed {} · {} prompts · {} sessions · sending bounded to {} min · home {}",
        o.profile.name(),
        o.seed,
        o.prompts,
        o.sessions,
        o.minutes,
        home.display()
    );
    let mut soak = Soak {
        home: home.clone(),
        profile: o.profile,
        rng: Rng(o.seed),
        t0: Instant::now(),
        t0_ms: desk_common::clock::now_ms(),
        sessions: (0..o.sessions)
            .map(|i| Session {
                name: format!("soak{i}"),
                args: o.profile.agent_args(i),
                log: home.join(format!("soak{i}.prompts")),
                master_pid: 0,
                agent_pid: 0,
                restart_at: None,
                starts: 0,
            })
            .collect(),
        pids: Vec::new(),
        daemon: None,
        daemon_restart_at: None,
        faults: Vec::new(),
        fault_counts: BTreeMap::new(),
    };
    soak.start_daemon(None);
    for i in 0..o.sessions {
        soak.start_session(i);
    }

    // Sending, with faults.
    let mut sent: Vec<Sent> = Vec::new();
    let bound = Duration::from_secs_f64(o.minutes * 60.0);
    let mut n = 0;
    while n < o.prompts && soak.t0.elapsed() < bound {
        soak.watchdog(true);
        if soak.rng.chance(o.fault_rate) {
            soak.random_fault();
        }
        let session = soak.rng.below(o.sessions);
        let burst = soak.rng.chance(0.08);
        let count = if burst { soak.rng.range(3, 8).min(o.prompts - n) } else { 1 };
        for _ in 0..count {
            let token = format!("tok{n:06}q");
            let shape = if burst { *soak.rng.pick(&SHAPES[..4]) } else { *soak.rng.pick(SHAPES) };
            let text = prompt(&mut soak.rng, shape, &token);
            let idle = soak.rng.chance(0.15);
            soak.send(session, if burst { "burst" } else { shape }, token, &text, idle, &mut sent);
            n += 1;
        }
        let gap = soak.rng.range(0, 250) as u64;
        std::thread::sleep(Duration::from_millis(gap));
    }
    let sending_s = soak.now_s();
    println!("soak: sent {} prompts in {sending_s:.1} s; faults stop, settling", sent.len());

    // Settle: a daemon without failpoint, every session running, every item settled, every
    // agent done with what it queued (late hooks settle what a restart left stuck).
    if let Some((pid, Some(_))) = soak.daemon {
        sigkill(pid);
        soak.daemon = None;
    }
    let settle_end = Instant::now() + o.settle;
    let open = settle_items(&mut soak, &sent, settle_end, Some(Duration::from_secs(30)));
    println!("soak: items settled ({open} still open) {:.1} s after sending stopped", soak.now_s() - sending_s);
    settle_agents(&soak, settle_end.max(Instant::now() + Duration::from_secs(60)));
    let (items_before, submitted_before, before) = judge_all(&soak, &sent);

    // Every stuck item that was never submitted is forced, as `desk stuck` advises (a queue
    // held by a stuck item's unsent paste moves on then); everything settles again, and what is
    // stuck and never submitted then is forced too, for at most three rounds. In the end every
    // item must have been submitted exactly once.
    let mut force_said: BTreeMap<usize, String> = BTreeMap::new();
    let mut now_outcomes = before.clone();
    for round in 1..=3 {
        let stuck: Vec<usize> = (0..sent.len()).filter(|k| now_outcomes[*k] == judge::Outcome::Stuck).collect();
        let open = now_outcomes.iter().filter(|o| **o == judge::Outcome::Open).count();
        if stuck.is_empty() && (open == 0 || round > 1) {
            break;
        }
        for k in &stuck {
            let said = soak.force(&sent[*k].id, Duration::from_secs(120));
            force_said.insert(*k, said);
        }
        println!("soak: round {round}: forced {} stuck items ({open} open); settling again", stuck.len());
        let until = Instant::now() + o.settle;
        settle_items(&mut soak, &sent, until, None);
        settle_agents(&soak, until.max(Instant::now() + Duration::from_secs(60)));
        now_outcomes = judge_all(&soak, &sent).2;
    }
    let (items_after, submitted_after, after) = judge_all(&soak, &sent);

    let mut row = Row {
        prompts: sent.len(),
        faults: soak.fault_counts.values().sum(),
        count: BTreeMap::new(),
        forced: force_said.len(),
        forced_once: force_said.keys().filter(|k| after[**k] == judge::Outcome::Once).count(),
    };
    for outcome in &before {
        *row.count.entry(*outcome).or_default() += 1;
    }
    report(&soak, &o, &sent, &items_before, &submitted_before, &before, &row);

    // Failures: before any force, anything but "delivered once", "stuck, never submitted" or
    // still open; in the end, anything but "delivered once".
    let mut bad: Vec<(usize, String)> = Vec::new();
    let mut late: BTreeMap<judge::Outcome, usize> = BTreeMap::new();
    for (k, outcome) in before.iter().enumerate() {
        if !outcome.passes() && *outcome != judge::Outcome::Open {
            bad.push((k, outcome.name().to_string()));
        } else if after[k] != judge::Outcome::Once {
            *late.entry(after[k]).or_default() += 1;
            let said = force_said.get(&k).map(String::as_str).unwrap_or("not forced");
            bad.push((k, format!("{} in the end ({said})", after[k].name())));
        }
    }
    let count = |o: judge::Outcome| row.count.get(&o).copied().unwrap_or(0) + late.get(&o).copied().unwrap_or(0);
    for (k, what) in &bad {
        explain(&soak, &sent[*k], &items_after[*k], &submitted_after, what);
    }
    // profile | seed | prompts | faults | delivered | stuck | lost | duplicated | wrong session |
    // stuck but submitted | left open | forced -> once. The first two counts are before any
    // force (items still queued then are neither); the failures include what forcing caused.
    println!(
        "\nSOAK-ROW | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}/{} |",
        o.profile.name(),
        o.seed,
        row.prompts,
        row.faults,
        row.count.get(&judge::Outcome::Once).copied().unwrap_or(0),
        row.count.get(&judge::Outcome::Stuck).copied().unwrap_or(0),
        count(judge::Outcome::Lost),
        count(judge::Outcome::Duplicated),
        count(judge::Outcome::WrongSession),
        count(judge::Outcome::StuckButTaken),
        late.get(&judge::Outcome::Open).copied().unwrap_or(0),
        row.forced_once,
        row.forced,
    );
    soak.kill_everything();
    if !bad.is_empty() {
        // Keep the home for a closer look at the logs and queues.
        let kept = tmp.keep();
        println!("\nFAIL: {} items failed; home kept at {}", bad.len(), kept.display());
        std::process::exit(1);
    }
    println!(
        "\nOK: every prompt delivered once, or stuck without having been submitted and then delivered once by a force"
    );
}

/// The run's tables: outcomes, faults, shapes.
fn report(
    soak: &Soak,
    o: &Opts,
    sent: &[Sent],
    items: &[serde_json::Value],
    submitted: &judge::Submitted,
    outcomes: &[judge::Outcome],
    row: &Row,
) {
    println!("\n## Crash soak: profile {}\n", o.profile.name());
    println!("seed {}, {} sessions, {} prompts, {} faults\n", o.seed, o.sessions, row.prompts, row.faults);
    println!("| outcome (after settling, before any force) | items |\n|---|---|");
    for outcome in judge::Outcome::ALL {
        println!("| {} | {} |", outcome.name(), row.count.get(&outcome).copied().unwrap_or(0));
    }
    let mut classes: BTreeMap<String, usize> = BTreeMap::new();
    for (item, outcome) in items.iter().zip(outcomes) {
        if *outcome == judge::Outcome::Stuck {
            *classes.entry(item["stuck"].as_str().unwrap_or("?").to_string()).or_default() += 1;
        }
    }
    for (class, count) in &classes {
        println!("| · stuck/{class} | {count} |");
    }
    println!("| stuck items forced, then delivered once | {} of {} |", row.forced_once, row.forced);
    println!("\n| fault | count |\n|---|---|");
    for (kind, count) in &soak.fault_counts {
        println!("| {kind} | {count} |");
    }
    let mut by_shape: BTreeMap<&str, BTreeMap<judge::Outcome, usize>> = BTreeMap::new();
    for (s, outcome) in sent.iter().zip(outcomes) {
        *by_shape.entry(s.shape).or_default().entry(*outcome).or_default() += 1;
    }
    println!("\n| shape | delivered once | stuck | failed |\n|---|---|---|---|");
    for (shape, c) in &by_shape {
        let get = |o| c.get(&o).copied().unwrap_or(0);
        let failed: usize = c.iter().filter(|(o, _)| !o.passes()).map(|(_, n)| n).sum();
        println!("| {shape} | {} | {} | {failed} |", get(judge::Outcome::Once), get(judge::Outcome::Stuck));
    }
    let idle_count = sent.iter().filter(|s| s.idle).count();
    let digests = items.iter().filter(|i| i["digest_with"].as_array().is_some_and(|d| !d.is_empty())).count();
    let restarts: u32 = soak.sessions.iter().map(|s| s.starts.saturating_sub(1)).sum();
    let taken_late = items.iter().filter(|i| i["evidence"].to_string().contains("came after it was stuck")).count();
    println!(
        "\n{idle_count} sent with `--when idle`; {digests} delivered inside digests; {restarts} session restarts; {taken_late} stuck after a restart, then delivered by their late hook; {} submissions in the logs.",
        submitted.values().map(Vec::len).sum::<usize>()
    );
}

/// Print what is known about a failed item: its evidence, its submissions, the faults around it.
fn explain(soak: &Soak, s: &Sent, item: &serde_json::Value, submitted: &judge::Submitted, what: &str) {
    println!(
        "\n### {what}: item {} ({}, token {}, shape {}, when {}, sent at {:.2} s)",
        s.id,
        soak.sessions[s.session].name,
        s.token,
        s.shape,
        if s.idle { "idle" } else { "now" },
        s.at_s
    );
    println!("state {} {}", item["state"], item["stuck"]);
    println!("evidence, in seconds since the start of the run:");
    let mut delivered_s = None;
    for e in item["evidence"].as_array().cloned().unwrap_or_default() {
        let at = soak.rel(e["at_ms"].as_u64().unwrap_or(0));
        if e["kind"] == "delivered" {
            delivered_s = Some(at);
        }
        println!("  {at:.3} s: {} — {}", e["kind"].as_str().unwrap_or("?"), e["detail"].as_str().unwrap_or(""));
    }
    for (session, seq, prompt) in submitted.get(&s.token).map(Vec::as_slice).unwrap_or_default() {
        let short: String = prompt.chars().take(300).collect();
        // Every agent of a session counts its submissions from 1: match the prompt too.
        let at = desk_demo_agent::prompt_log::read_prompt_log(&soak.sessions[*session].log)
            .unwrap_or_default()
            .into_iter()
            .find(|r| r.seq == *seq && r.prompt == *prompt)
            .map(|r| soak.rel(r.ts_ms));
        println!("prompt log {} seq {seq} at {:.3} s: {short:?}", soak.sessions[*session].name, at.unwrap_or(-1.0));
    }
    if let Some(at) = delivered_s
        && let Some((kill_at, _, what)) =
            soak.faults.iter().find(|(t, session, _)| *session == Some(s.session) && *t >= at)
    {
        println!("next fault of this session after the delivery: {what} at {kill_at:.3} s (+{:.3} s)", kill_at - at);
    }
    println!("faults within 15 s before and 20 s after it was sent:");
    for (at, _, f) in soak.faults.iter().filter(|(at, _, _)| *at >= s.at_s - 15.0 && *at <= s.at_s + 20.0) {
        println!("  {at:.2} s: {f}");
    }
}
