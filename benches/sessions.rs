//! `make bench`: desk measured side by side with dtach and tmux in one run.
//!
//! Three measurements, each repeated and reported as medians:
//! - fan-out: a child `cat`s a large text file through the session while 0, 1 or 4 clients are
//!   attached, each on its own pseudo-terminal read by a byte-counting consumer. Reported: the
//!   throughput from the moment the child is let go until the `cat` has ended *and* every
//!   client has received its last byte (a holder still draining its clients' queues is still
//!   working), the holder's CPU time, each attach client's CPU time, bytes each client
//!   received, and whether each client's whole final screen, bottom row included, equals the
//!   screen the file produces on a terminal (checked with the vt100 crate) — throughput without
//!   loss accounting would reward dropping bytes. With one
//!   client, a "raw PTY" row runs the same `cat` directly on the consumer's pseudo-terminal (no
//!   holder): the ceiling for any holder on this machine. Each run's 1-client ratios (desk to
//!   dtach, desk to raw PTY) are printed, and their medians.
//! - attach: time from starting the attach command until its terminal shows a full 40-line
//!   screen (desk and tmux; dtach keeps no screen to redraw from).
//! - idle: private memory of the holder process and its context switches over an idle period.
//! - history: private memory of a master whose history is full (10,000 lines of mixed-colour
//!   output) beside one that printed nothing, and the same for a tmux server.
//! - fleet: 10, 100, 300 idle sessions of desk beside as many tmux sessions (one server): the
//!   private memory each desk master keeps (and its heap), what each extra session adds to the
//!   tmux server, and the wall time of `desk ls` and `tmux ls` at each size.
//!
//! - typing (issue 22): keystroke echo through an attached terminal, desk (with its status line
//!   and with `--no-status`) beside tmux and dtach (`sessions/typing.rs`).
//! - commands (issue 22): `desk new` beside `tmux new-session -d` and `dtach -n`
//!   (`sessions/commands.rs`).
//!
//! - attention: the CPU an attached client spends on its status line while a fleet of sessions
//!   changes their titles ten times a second (beside `--no-status`), and the time from the
//!   prefix key's `l` to the other session's screen on the terminal (issue 21).
//!
//! Pinning: this process and the attach clients run on CPU 1, holders and their children on
//! CPU 0 (`taskset`), so every tool gets the same split; the fleet part pins nothing (a listing
//! may use both cores, as it would for a user). Options: `--runs N` (default 5), `--mb N`
//! (default 50), `--only fanout|attach|idle|history|fleet|attention|typing|commands`, `--idle-secs N` (default 10), `--sessions
//! N,N,..` (fleet sizes, default 10,100,300), `--ls-runs N` (timed listings per size, default 20),
//! `--baseline DIR` (another build's `desk` and `desk-master`, say main's before a change, measured
//! in the same run as a holder of its own, `desk (baseline)`, and in the fleet part as a fleet of
//! its own after this build's), `--keys N` (typing: keys a run, default 300), `--key-gap-ms N`
//! (typing: pause between an echo and the next key, default 0), `--new-runs N` (commands: starts
//! of each command, default 30).

use desk_common::pty::{Spawn, spawn};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const COLS: u16 = 120;
const ROWS: u16 = 40;

struct Opts {
    runs: usize,
    mb: usize,
    only: Option<String>,
    idle_secs: u64,
    sessions: Vec<usize>,
    ls_runs: usize,
    baseline: Option<PathBuf>,
    /// Typing: keys a run, and the pause between an echo and the next key.
    keys: usize,
    key_gap_ms: u64,
    /// Commands: starts of each command.
    new_runs: usize,
}

fn parse_opts() -> Opts {
    let mut opts = Opts {
        runs: 5,
        mb: 50,
        only: None,
        idle_secs: 10,
        sessions: vec![10, 100, 300],
        ls_runs: 20,
        baseline: None,
        keys: 300,
        key_gap_ms: 0,
        new_runs: 30,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = || args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--runs" => opts.runs = value().parse().expect("--runs N"),
            "--mb" => opts.mb = value().parse().expect("--mb N"),
            "--only" => opts.only = Some(value()),
            "--idle-secs" => opts.idle_secs = value().parse().expect("--idle-secs N"),
            "--sessions" => {
                opts.sessions = value().split(',').map(|n| n.trim().parse().expect("--sessions N,N,...")).collect();
                opts.sessions.sort_unstable();
            }
            "--ls-runs" => opts.ls_runs = value().parse().expect("--ls-runs N"),
            "--baseline" => opts.baseline = Some(PathBuf::from(value())),
            "--keys" => opts.keys = value().parse().expect("--keys N"),
            "--key-gap-ms" => opts.key_gap_ms = value().parse().expect("--key-gap-ms N"),
            "--new-runs" => opts.new_runs = value().parse().expect("--new-runs N"),
            "--bench" => {
                i += 1;
                continue;
            }
            other => panic!("unknown option {other}"),
        }
        i += 2;
    }
    opts
}

fn pin_self_to(cpu: usize) {
    // SAFETY: plain syscall on our own process with an initialised cpu set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

fn p95(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * 0.95).ceil() as usize).saturating_sub(1).min(v.len() - 1)]
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

/// `argv` started on a pseudo-terminal of this process, `COLS`x`ROWS`.
fn on_terminal(argv: &[OsString], env: &[(OsString, OsString)]) -> desk_common::pty::Child {
    spawn(&Spawn {
        program: argv[0].clone(),
        args: argv[1..].to_vec(),
        cwd: None,
        env: env.to_vec(),
        cols: COLS,
        rows: ROWS,
    })
    .unwrap_or_else(|e| panic!("cannot start {argv:?} on a pseudo-terminal: {e:#}"))
}

/// A program on a pseudo-terminal whose output is counted (and optionally kept).
struct Consumer {
    pid: u32,
    bytes: Arc<AtomicU64>,
    kept: Arc<Mutex<Vec<u8>>>,
    last: Arc<Mutex<Instant>>,
    stop: Arc<AtomicBool>,
    master: Arc<OwnedFd>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Consumer {
    fn start(argv: &[OsString], env: &[(OsString, OsString)], keep: bool) -> Consumer {
        let child = on_terminal(argv, env);
        let master = Arc::new(child.master);
        let bytes = Arc::new(AtomicU64::new(0));
        let kept = Arc::new(Mutex::new(Vec::new()));
        let last = Arc::new(Mutex::new(Instant::now()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (master, bytes, kept, last, stop) =
                (master.clone(), bytes.clone(), kept.clone(), last.clone(), stop.clone());
            thread::spawn(move || {
                let mut buf = vec![0u8; 256 * 1024];
                while !stop.load(Ordering::Relaxed) {
                    let mut fds = [nix::poll::PollFd::new(master.as_fd(), nix::poll::PollFlags::POLLIN)];
                    if nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(50u16)).unwrap_or(0) == 0 {
                        continue;
                    }
                    match nix::unistd::read(master.as_fd(), &mut buf) {
                        Ok(0) | Err(nix::errno::Errno::EIO) => break,
                        Ok(n) => {
                            bytes.fetch_add(n as u64, Ordering::Relaxed);
                            if keep {
                                kept.lock().unwrap().extend_from_slice(&buf[..n]);
                            }
                            *last.lock().unwrap() = Instant::now();
                        }
                        Err(_) => {}
                    }
                }
            })
        };
        Consumer { pid: child.pid, bytes, kept, last, stop, master, thread: Some(thread) }
    }

    fn write(&self, bytes: &[u8]) {
        let _ = nix::unistd::write(self.master.as_fd(), bytes);
    }

    fn quiet_for(&self, d: Duration) -> bool {
        self.last.lock().unwrap().elapsed() >= d
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid as i32), nix::sys::signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(self.pid as i32), None);
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rfind(')').map(|i| &stat[i + 2..]).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    f.get(11).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
}

fn ctxt_switches(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .filter(|l| l.starts_with("voluntary_ctxt_switches") || l.starts_with("nonvoluntary_ctxt_switches"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

fn private_kib(pid: u32) -> u64 {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    rollup
        .lines()
        .filter(|l| l.starts_with("Private_Clean") || l.starts_with("Private_Dirty"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

fn find_pid(needle: &str) -> Option<u32> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.starts_with(needle) {
            return Some(pid);
        }
    }
    None
}

/// One holder under test.
trait Holder {
    fn name(&self) -> &'static str;
    /// Start a session running `script` (sh) detached; return the holder process pid.
    fn start(&mut self, script: &str) -> u32;
    fn attach_argv(&self) -> Vec<OsString>;
    fn attach_env(&self) -> Vec<(OsString, OsString)> {
        Vec::new()
    }
    /// Wait until `n` clients are attached.
    fn wait_clients(&self, n: usize);
    /// The session's own idea of its screen, when it has one.
    fn screen(&self) -> Option<Vec<String>>;
    fn stop(&mut self);
    /// Stop every session this holder started.
    fn stop_all(&mut self);
}

struct Desk {
    /// "desk", or "desk (baseline)" for another build's executables (`--baseline`).
    label: &'static str,
    exe: PathBuf,
    home: PathBuf,
    n: usize,
    /// `desk new --history` for this holder's sessions; `None`: the default (10,000 lines).
    history: Option<usize>,
    /// `Some(true)`: attach with attach's status line (a view of the session, one row shorter);
    /// `Some(false)`: with `--no-status`, the raw stream; `None`: a build without a status line
    /// (a `--baseline` from before it), attached as it attaches.
    status: Option<bool>,
}

/// The name of the desk holder whose sessions keep no history (`--history 0`): in the fan-out
/// only, beside the default one, to show what keeping a history costs there.
const DESK_NO_HISTORY: &str = "desk --history 0";

/// The name of the desk holder whose clients attach with the status line (issue 21): in the
/// fan-out only, beside the raw one, to show what the status line costs there.
const DESK_STATUS: &str = "desk, status line";

impl Desk {
    fn cmd(&self) -> Command {
        let mut c = Command::new(&self.exe);
        c.env("DESK_HOME", &self.home);
        c
    }
    fn session(&self) -> String {
        format!("b{}", self.n)
    }
}

impl Holder for Desk {
    fn name(&self) -> &'static str {
        if self.history == Some(0) { DESK_NO_HISTORY } else { self.label }
    }
    fn start(&mut self, script: &str) -> u32 {
        self.n += 1;
        let mut c = Command::new("taskset");
        c.env("DESK_HOME", &self.home).arg("-c").arg("0").arg(&self.exe);
        c.args(["new", &self.session(), "--size", &format!("{COLS}x{ROWS}")]);
        if let Some(n) = self.history {
            c.args(["--history", &n.to_string()]);
        }
        c.args(["--", "sh", "-c", script]);
        run(&mut c);
        let json = run(self.cmd().args(["ls", "--json"]));
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == self.session().as_str())
            .and_then(|s| s["master_pid"].as_u64())
            .unwrap() as u32
    }
    fn attach_argv(&self) -> Vec<OsString> {
        let mut argv: Vec<OsString> = vec![self.exe.clone().into(), "attach".into(), self.session().into()];
        if self.status == Some(false) {
            argv.push("--no-status".into());
        }
        argv
    }
    fn attach_env(&self) -> Vec<(OsString, OsString)> {
        vec![("DESK_HOME".into(), self.home.clone().into())]
    }
    fn wait_clients(&self, n: usize) {
        wait_for("desk clients", Duration::from_secs(10), || {
            let json = run(self.cmd().args(["ls", "--json"]));
            let v: serde_json::Value = serde_json::from_str(&json).unwrap();
            v["data"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["name"] == self.session().as_str() && s["clients"]["controllers"].as_u64() == Some(n as u64))
        });
    }
    fn screen(&self) -> Option<Vec<String>> {
        let json = run(self.cmd().args(["peek", &self.session(), "--json"]));
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        Some(
            v["data"]["lines"].as_array().unwrap().iter().map(|l| l.as_str().unwrap().trim_end().to_string()).collect(),
        )
    }
    fn stop(&mut self) {
        let _ = self.cmd().args(["kill", &self.session(), "--signal", "KILL"]).output();
        let _ = self.cmd().args(["rm", &self.session()]).output();
    }
    fn stop_all(&mut self) {
        let last = self.n;
        for n in 1..=last {
            self.n = n;
            self.stop();
        }
        self.n = last;
    }
}

struct Dtach {
    dir: PathBuf,
    n: usize,
}

impl Dtach {
    fn sock(&self) -> PathBuf {
        self.dir.join(format!("d{}.sock", self.n))
    }
}

impl Holder for Dtach {
    fn name(&self) -> &'static str {
        "dtach"
    }
    fn start(&mut self, script: &str) -> u32 {
        self.n += 1;
        let sock = self.sock();
        run(Command::new("taskset")
            .args(["-c", "0", "dtach", "-n"])
            .arg(&sock)
            .args(["-r", "none", "sh", "-c", script]));
        wait_for("dtach socket", Duration::from_secs(5), || sock.exists());
        find_pid(&format!("dtach -n {}", sock.display())).expect("dtach master pid")
    }
    fn attach_argv(&self) -> Vec<OsString> {
        vec!["dtach".into(), "-a".into(), self.sock().into(), "-r".into(), "none".into(), "-E".into()]
    }
    fn wait_clients(&self, n: usize) {
        // dtach cannot report its clients; give the attach processes a moment to connect.
        if n > 0 {
            thread::sleep(Duration::from_millis(300));
        }
    }
    fn screen(&self) -> Option<Vec<String>> {
        None
    }
    fn stop(&mut self) {
        if let Some(pid) = find_pid(&format!("dtach -n {}", self.sock().display())) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::SIGKILL);
        }
        let _ = std::fs::remove_file(self.sock());
    }
    fn stop_all(&mut self) {
        let last = self.n;
        for n in 1..=last {
            self.n = n;
            self.stop();
        }
        self.n = last;
    }
}

/// No holder at all: the child runs directly on the consumer's own pseudo-terminal, read by the
/// same byte-counting consumer. The ceiling any holder can reach on this machine (the kernel's
/// PTY layer and the consumer); only measured with one client, the consumer itself.
struct RawPty {
    script: String,
}

impl Holder for RawPty {
    fn name(&self) -> &'static str {
        "raw PTY"
    }
    fn start(&mut self, script: &str) -> u32 {
        self.script = script.to_string();
        // No holder process: nothing to charge CPU to (`cpu_ticks` of pid 0 reads as 0).
        0
    }
    fn attach_argv(&self) -> Vec<OsString> {
        ["taskset", "-c", "0", "sh", "-c", &self.script].iter().map(OsString::from).collect()
    }
    fn wait_clients(&self, _n: usize) {}
    fn screen(&self) -> Option<Vec<String>> {
        None
    }
    fn stop(&mut self) {
        // The child is the consumer's own process; dropping the consumer killed it.
    }
    fn stop_all(&mut self) {}
}

struct Tmux {
    label: String,
    n: usize,
}

impl Tmux {
    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.label, "-f", "/dev/null"]);
        c
    }
}

impl Holder for Tmux {
    fn name(&self) -> &'static str {
        "tmux"
    }
    fn start(&mut self, script: &str) -> u32 {
        self.n += 1;
        let name = format!("s{}", self.n);
        let mut c = Command::new("taskset");
        c.args(["-c", "0", "tmux", "-L", &self.label, "-f", "/dev/null", "new-session", "-d", "-s", &name]);
        c.args(["-x", &COLS.to_string(), "-y", &ROWS.to_string(), script]);
        run(&mut c);
        run(self.cmd().args(["set-option", "-g", "status", "off"]));
        run(self.cmd().args(["display", "-p", "#{pid}"])).trim().parse().unwrap()
    }
    fn attach_argv(&self) -> Vec<OsString> {
        let name = format!("s{}", self.n);
        ["tmux", "-L", &self.label, "-f", "/dev/null", "attach", "-t", &name].iter().map(OsString::from).collect()
    }
    fn wait_clients(&self, n: usize) {
        wait_for("tmux clients", Duration::from_secs(10), || {
            run(self.cmd().args(["list-clients"])).lines().count() == n
        });
    }
    fn screen(&self) -> Option<Vec<String>> {
        let name = format!("s{}", self.n);
        Some(
            run(self.cmd().args(["capture-pane", "-p", "-t", &name]))
                .lines()
                .map(|l| l.trim_end().to_string())
                .collect(),
        )
    }
    fn stop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
        // A fresh server for whatever comes next: the old one may still be exiting.
        self.label = format!("{}x", self.label);
    }
    fn stop_all(&mut self) {
        self.stop();
    }
}

fn screen_rows(bytes: &[u8]) -> Vec<String> {
    let nz = |n: u16| std::num::NonZeroU16::new(n).unwrap();
    let mut parser = vt100::Parser::new(nz(ROWS), nz(COLS), 0);
    parser.process(bytes);
    parser.screen().rows(0, COLS).map(|r| r.trim_end().to_string()).collect()
}

/// Nanoseconds since the Unix epoch, the clock `date +%s%N` reads.
fn wall_ns() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

fn strip_trailing_blank(mut rows: Vec<String>) -> Vec<String> {
    while rows.last().is_some_and(|r| r.is_empty()) {
        rows.pop();
    }
    rows
}

#[derive(Default)]
struct FanoutStats {
    mbps: Vec<f64>,
    cpu_s: Vec<f64>,
    /// CPU time of each client's attach process (for the raw PTY: the shell around `cat`).
    client_cpu_s: Vec<f64>,
    client_bytes: Vec<f64>,
    screens_ok: usize,
    screens_checked: usize,
}

fn fanout(holders: &mut [Box<dyn Holder>], opts: &Opts, work: &Path) -> String {
    let data = work.join("flood.txt");
    if !data.exists() {
        // Base64-like text lines: deterministic, printable, 76 columns like `base64` output.
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = Vec::with_capacity(opts.mb << 20);
        let mut x: u64 = 0x9e3779b97f4a7c15;
        while out.len() < opts.mb << 20 {
            for _ in 0..76 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                out.push(alphabet[(x % 64) as usize]);
            }
            out.push(b'\n');
        }
        std::fs::write(&data, &out).unwrap();
    }
    let size = std::fs::metadata(&data).unwrap().len();
    // What a terminal shows after the file went through a PTY (ONLCR turns \n into \r\n).
    let expected = {
        let raw = std::fs::read(&data).unwrap();
        let tail_start = raw.len().saturating_sub(200 * 77);
        let tail_start = raw[tail_start..].iter().position(|b| *b == b'\n').map_or(0, |p| tail_start + p + 1);
        let mut cooked = Vec::new();
        for &b in &raw[tail_start..] {
            if b == b'\n' {
                cooked.push(b'\r');
            }
            cooked.push(b);
        }
        screen_rows(&cooked)
    };
    let mut table = String::from(
        "| holder | clients | throughput MB/s (median) | holder CPU s (median) | client CPU s (median) | bytes per client (median) | final screens exact |\n|---|---|---|---|---|---|---|\n",
    );
    let mut results: BTreeMap<(usize, String), FanoutStats> = BTreeMap::new();
    // The raw PTY only exists with one client: the consumer is its terminal.
    let mut raw: Box<dyn Holder> = Box::new(RawPty { script: String::new() });
    // 1-client throughput per run and holder, for the ratios of the same run.
    let mut one_client: BTreeMap<usize, BTreeMap<&'static str, f64>> = BTreeMap::new();
    for clients in [0usize, 1, 4] {
        for run_no in 0..opts.runs {
            for holder in holders.iter_mut().chain(std::iter::once(&mut raw)) {
                if holder.name() == "raw PTY" && clients != 1 {
                    continue;
                }
                // File names (and the shell script) without the spaces and parentheses a
                // holder's name may have (`desk (baseline)`: `(` is sh syntax).
                let tag: String =
                    holder.name().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
                let go = work.join(format!("go-{tag}-{clients}-{run_no}"));
                let done = work.join(format!("time-{tag}-{clients}-{run_no}"));
                let _ = std::fs::remove_file(&go);
                let _ = std::fs::remove_file(&done);
                nix::unistd::mkfifo(&go, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
                let script = format!(
                    "stty -echo; read x < {go}; cat {data}; e=$(date +%s%N); echo $e > {done}.tmp; mv {done}.tmp {done}; exec sleep 100000",
                    go = go.display(),
                    data = data.display(),
                    done = done.display()
                );
                let pid = holder.start(&script);
                let consumers: Vec<Consumer> =
                    (0..clients).map(|_| Consumer::start(&holder.attach_argv(), &holder.attach_env(), true)).collect();
                holder.wait_clients(clients);
                let cpu_before = cpu_ticks(pid);
                let client_cpu_before: Vec<u64> = consumers.iter().map(|c| cpu_ticks(c.pid)).collect();
                let (go_at, go_wall) = (Instant::now(), wall_ns());
                std::fs::write(&go, "go\n").unwrap();
                wait_for("flood end", Duration::from_secs(300), || done.exists());
                let cat_end: u128 = std::fs::read_to_string(&done).unwrap().trim().parse().unwrap();
                wait_for("clients to go quiet", Duration::from_secs(120), || {
                    consumers.iter().all(|c| c.quiet_for(Duration::from_millis(500)))
                });
                // Done when the `cat` has ended (its own clock: `date +%s%N`, the same wall clock)
                // and every client has received its last byte.
                let cat_s = cat_end.saturating_sub(go_wall) as f64 / 1e9;
                let last_byte_s = consumers
                    .iter()
                    .map(|c| c.last.lock().unwrap().duration_since(go_at).as_secs_f64())
                    .fold(0.0, f64::max);
                let cpu = (cpu_ticks(pid) - cpu_before) as f64 / 100.0;
                let stats = results.entry((clients, holder.name().to_string())).or_default();
                let mbps = size as f64 / 1e6 / cat_s.max(last_byte_s);
                stats.mbps.push(mbps);
                if clients == 1 {
                    one_client.entry(run_no).or_default().insert(holder.name(), mbps);
                }
                stats.cpu_s.push(cpu);
                let reference = holder.screen().map(strip_trailing_blank);
                for (c, before) in consumers.iter().zip(&client_cpu_before) {
                    stats.client_cpu_s.push((cpu_ticks(c.pid) - before) as f64 / 100.0);
                    stats.client_bytes.push(c.bytes.load(Ordering::Relaxed) as f64);
                    let kept = c.kept.lock().unwrap();
                    let mut rows = screen_rows(&kept);
                    // With its status line the client's last row is that line, and the session
                    // above it is one row shorter: its screen is the flood's newest rows but one.
                    let want = if holder.name() == DESK_STATUS {
                        rows.pop();
                        &expected[1..]
                    } else {
                        &expected[..]
                    };
                    stats.screens_checked += 1;
                    // The client's whole screen, every row of it, is the flood's; the holder's
                    // own view (when it has one; `peek` leaves out trailing blank rows) agrees.
                    let screen_ok = rows == want;
                    let model_ok = reference.as_ref().is_none_or(|r| *r == strip_trailing_blank(rows.clone()));
                    if screen_ok && model_ok {
                        stats.screens_ok += 1;
                    }
                }
                drop(consumers);
                holder.stop();
                let _ = std::fs::remove_file(&go);
                let _ = std::fs::remove_file(&done);
            }
        }
    }
    for ((clients, name), mut s) in results {
        let bytes = if clients == 0 { "-".to_string() } else { format!("{:.0}", median(&mut s.client_bytes)) };
        let screens = if clients == 0 { "-".to_string() } else { format!("{}/{}", s.screens_ok, s.screens_checked) };
        let cpu = if name == "raw PTY" { "-".to_string() } else { format!("{:.2}", median(&mut s.cpu_s)) };
        let client_cpu = if clients == 0 || name == "raw PTY" {
            "-".to_string()
        } else {
            format!("{:.2}", median(&mut s.client_cpu_s))
        };
        table.push_str(&format!(
            "| {name} | {clients} | {:.1} | {cpu} | {client_cpu} | {bytes} | {screens} |\n",
            median(&mut s.mbps)
        ));
    }
    // Ratios within each run (holders of one run share the machine's state), then their median.
    // dtach / raw PTY shows where the raw PTY's ceiling puts a target relative to dtach.
    let mut ratios = String::from(
        "\n| run | 1 client MB/s: desk | desk --history 0 | desk, status line | dtach | raw PTY | desk / desk --history 0 | desk, status line / desk | desk / dtach | desk / raw PTY | dtach / raw PTY |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let (mut to_dtach, mut to_raw, mut to_off, mut dtach_to_raw) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut status_to_desk = Vec::new();
    for (run_no, mbps) in &one_client {
        let get = |name: &str| mbps.get(name).copied().unwrap_or(f64::NAN);
        let (desk, off, dtach, raw) = (get("desk"), get(DESK_NO_HISTORY), get("dtach"), get("raw PTY"));
        let status = get(DESK_STATUS);
        to_dtach.push(desk / dtach);
        to_raw.push(desk / raw);
        to_off.push(desk / off);
        status_to_desk.push(status / desk);
        dtach_to_raw.push(dtach / raw);
        ratios.push_str(&format!(
            "| {} | {desk:.1} | {off:.1} | {status:.1} | {dtach:.1} | {raw:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
            run_no + 1,
            desk / off,
            status / desk,
            desk / dtach,
            desk / raw,
            dtach / raw
        ));
    }
    ratios.push_str(&format!(
        "| median | | | | | | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
        median(&mut to_off),
        median(&mut status_to_desk),
        median(&mut to_dtach),
        median(&mut to_raw),
        median(&mut dtach_to_raw)
    ));
    format!("File: {} bytes of base64-style text ({} runs each).\n\n{table}{ratios}", size, opts.runs)
}

fn attach_latency(holders: &mut [Box<dyn Holder>], opts: &Opts, work: &Path) -> String {
    let runs = (opts.runs * 6).max(20);
    let mut table = String::from("| holder | runs | median ms | p95 ms |\n|---|---|---|---|\n");
    for holder in holders.iter_mut().filter(|h| !["dtach", DESK_NO_HISTORY, DESK_STATUS].contains(&h.name())) {
        let script = format!(
            "for i in $(seq 1 39); do printf 'line %02d %s\\n' $i {pad}; done; printf 'FULL-SCREEN-MARKER'; exec sleep 100000",
            pad = "x".repeat(100)
        );
        let _ = work;
        holder.start(&script);
        thread::sleep(Duration::from_millis(200));
        let mut times = Vec::new();
        for _ in 0..runs {
            let t0 = Instant::now();
            let c = Consumer::start(&holder.attach_argv(), &holder.attach_env(), true);
            wait_for("full screen", Duration::from_secs(10), || {
                let kept = c.kept.lock().unwrap();
                let rows = screen_rows(&kept);
                rows.first().is_some_and(|r| r.starts_with("line 01"))
                    && rows.iter().any(|r| r.contains("FULL-SCREEN-MARKER"))
            });
            times.push(t0.elapsed().as_secs_f64() * 1000.0);
            if holder.name().starts_with("desk") {
                c.write(b"\x1c");
            }
            drop(c);
        }
        holder.stop();
        let mut t2 = times.clone();
        table.push_str(&format!("| {} | {runs} | {:.2} | {:.2} |\n", holder.name(), median(&mut times), p95(&mut t2)));
    }
    table
}

fn kib_of(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with(field))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

fn idle(holders: &mut [Box<dyn Holder>], opts: &Opts) -> String {
    let mut table = String::from(
        "| holder | sessions | private KiB per holder (Private_Clean + Private_Dirty) | of which dirty | PSS KiB | context switches over the idle period |\n|---|---|---|---|---|---|\n",
    );
    // A freshly linked executable's pages are dirty in the page cache until written back, and
    // would show as Private_Dirty; write them back first so "dirty" means the holder's own.
    nix::unistd::sync();
    for holder in holders.iter_mut().filter(|h| h.name() != DESK_NO_HISTORY && h.name() != DESK_STATUS) {
        // tmux holds every session in one server: its numbers are for the whole server.
        for count in [1usize, 10] {
            let pids: Vec<u32> = (0..count).map(|_| holder.start("exec sleep 100000")).collect();
            // Let start-up finish (the first second has its one-shot readiness timer).
            thread::sleep(Duration::from_secs(3));
            let before: Vec<u64> = pids.iter().map(|p| ctxt_switches(*p)).collect();
            thread::sleep(Duration::from_secs(opts.idle_secs));
            let after: Vec<u64> = pids.iter().map(|p| ctxt_switches(*p)).collect();
            let switches: u64 = after.iter().zip(&before).map(|(a, b)| a - b).sum();
            let mut private: Vec<f64> = pids.iter().map(|p| private_kib(*p) as f64).collect();
            let mut dirty: Vec<f64> = pids.iter().map(|p| kib_of(*p, "Private_Dirty") as f64).collect();
            let mut pss: Vec<f64> = pids.iter().map(|p| kib_of(*p, "Pss:") as f64).collect();
            let distinct = {
                let mut d = pids.clone();
                d.sort();
                d.dedup();
                d.len()
            };
            holder.stop_all();
            table.push_str(&format!(
                "| {} | {count} | {:.0} | {:.0} | {:.0} | {switches} (over {distinct} process(es)) |\n",
                holder.name(),
                median(&mut private),
                median(&mut dirty),
                median(&mut pss)
            ));
        }
    }
    format!(
        "Idle period: {} s after a 3 s settle, sessions running `sleep`, no client attached. With one \
         session, every page of the holder's executable it touched counts as private; with ten, those \
         pages are shared and what remains is the real per-session cost.\n\n{table}",
        opts.idle_secs
    )
}

/// Lines written for the history measurement: more than the 10,000 a session keeps, so the
/// history is full.
const HISTORY_FILL_LINES: usize = 12_000;

/// Typical agent output for the history measurement: lines of 80-120 columns, each with a few
/// coloured words (indexed and direct colours, bold) between plain text.
fn mixed_colour_lines(n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        let width = 80 + (i * 37) % 41;
        let mut line = String::new();
        let mut visible = 0;
        let mut k = i;
        while visible < width {
            let word = format!("w{k:x} ");
            let take = word.len().min(width - visible);
            match k % 5 {
                0 => line.push_str(&format!("\x1b[3{}m{}\x1b[0m", k % 8, &word[..take])),
                1 => line.push_str(&format!("\x1b[1;38;2;{};{};200m{}\x1b[0m", k % 256, (k * 7) % 256, &word[..take])),
                _ => line.push_str(&word[..take]),
            }
            visible += take;
            k += 1;
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Private memory of a desk master whose history is full of mixed-colour output beside one
/// that printed nothing, and the same for tmux (one server each, `history-limit 10000`).
fn history_memory(opts: &Opts, work: &Path) -> String {
    let file = work.join("history-fill.txt");
    std::fs::write(&file, mixed_colour_lines(HISTORY_FILL_LINES)).unwrap();
    let full_script = format!("cat '{}'; printf DONE; exec sleep 100000", file.display());
    let empty_script = "printf DONE; exec sleep 100000";
    let mut rows = String::from(
        "| holder | runs | private KiB, empty | private KiB, full history | difference KiB | history lines seen (desk: in one `peek --history` frame; tmux: `history_size`) |\n|---|---|---|---|---|---|\n",
    );
    let runs = opts.runs.min(3);
    // desk: two sessions, one master each.
    let (mut empty, mut full, mut lines) = (Vec::new(), Vec::new(), 0);
    for run_no in 0..runs {
        let mut desk = Desk {
            label: "desk",
            exe: PathBuf::from(env!("CARGO_BIN_EXE_desk")),
            home: work.join(format!("home-history-{run_no}")),
            n: 0,
            history: None,
            status: Some(false),
        };
        let full_pid = desk.start(&full_script);
        let full_name = desk.session();
        let empty_pid = desk.start(empty_script);
        let empty_name = desk.session();
        for name in [&full_name, &empty_name] {
            wait_for("the fill to finish", Duration::from_secs(120), || {
                run(desk.cmd().args(["peek", name])).contains("DONE")
            });
        }
        // The master gives back idle buffers once the session is quiet.
        thread::sleep(Duration::from_secs(3));
        full.push(private_kib(full_pid) as f64);
        empty.push(private_kib(empty_pid) as f64);
        let json = run(desk.cmd().args(["peek", &full_name, "--json", "--history"]));
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        lines = v["data"]["history"].as_array().map_or(0, Vec::len);
        desk.stop_all();
    }
    let (e, f) = (median(&mut empty), median(&mut full));
    rows.push_str(&format!("| desk | {runs} | {e:.0} | {f:.0} | {:.0} | {lines} |\n", f - e));
    // tmux: a server with the full pane, a server with an empty one.
    let (mut empty, mut full) = (Vec::new(), Vec::new());
    let conf = work.join("tmux-history.conf");
    std::fs::write(&conf, "set -g history-limit 10000\nset -g status off\n").unwrap();
    let mut tmux_lines = 0;
    for run_no in 0..runs {
        let mut pids = Vec::new();
        for (tag, script) in [("full", full_script.as_str()), ("empty", empty_script)] {
            let label = format!("deskhist{}{tag}{run_no}", std::process::id());
            let tmux = |args: &[&str]| {
                let mut c = Command::new("tmux");
                c.args(["-L", &label, "-f"]).arg(&conf).args(args);
                run(&mut c)
            };
            tmux(&["new-session", "-d", "-x", &COLS.to_string(), "-y", &ROWS.to_string(), script]);
            wait_for("the fill to finish", Duration::from_secs(120), || tmux(&["capture-pane", "-p"]).contains("DONE"));
            thread::sleep(Duration::from_secs(3));
            let pid: u32 = tmux(&["display", "-p", "#{pid}"]).trim().parse().unwrap();
            if tag == "full" {
                tmux_lines = tmux(&["display", "-p", "#{history_size}"]).trim().parse().unwrap_or(0);
            }
            pids.push((pid, label.clone()));
        }
        full.push(private_kib(pids[0].0) as f64);
        empty.push(private_kib(pids[1].0) as f64);
        for (_, label) in pids {
            let _ = Command::new("tmux").args(["-L", &label, "kill-server"]).output();
        }
    }
    let (e, f) = (median(&mut empty), median(&mut full));
    rows.push_str(&format!("| tmux (server) | {runs} | {e:.0} | {f:.0} | {:.0} | {tmux_lines} |\n", f - e));
    format!(
        "{HISTORY_FILL_LINES} lines of mixed-colour output, 80-120 columns, written to a {COLS}x{ROWS} \
         session that keeps 10,000 lines (desk's default, tmux's `history-limit 10000`), beside a \
         session that printed nothing; private memory (Private_Clean + Private_Dirty) 3 s after the \
         output ended, medians.\n\n{rows}"
    )
}

#[path = "sessions/fleet.rs"]
mod fleet;

#[path = "sessions/attention.rs"]
mod attention;

#[path = "sessions/typing.rs"]
mod typing;

#[path = "sessions/commands.rs"]
mod commands;

/// Every holder's sessions are stopped when the bench ends, by return or by panic.
struct StopOnDrop(Vec<Box<dyn Holder>>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        for holder in &mut self.0 {
            holder.stop_all();
        }
    }
}

/// Whether the desk at `exe` has attach's `--no-status` (builds from before issue 21 do not).
fn knows_no_status(exe: &Path) -> bool {
    let out = Command::new(exe).args(["attach", "--help"]).output();
    out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("--no-status"))
}

fn main() {
    let opts = parse_opts();
    let ncpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    pin_self_to(1);
    let work = tempfile::Builder::new().prefix("desk-bench").tempdir().unwrap();
    let home = work.path().join("home");
    let this_build = PathBuf::from(env!("CARGO_BIN_EXE_desk"));
    let mut desks: Vec<Box<dyn Holder>> = vec![Box::new(Desk {
        label: "desk",
        exe: this_build.clone(),
        home: home.clone(),
        n: 0,
        history: None,
        status: Some(false),
    })];
    if let Some(dir) = &opts.baseline {
        let exe = dir.join("desk");
        assert!(
            exe.exists() && dir.join("desk-master").exists(),
            "--baseline {}: no desk and desk-master there",
            dir.display()
        );
        desks.push(Box::new(Desk {
            label: "desk (baseline)",
            // A build from before the status line (issue 21) knows no `--no-status`.
            status: knows_no_status(&exe).then_some(false),
            exe,
            home: work.path().join("home-baseline"),
            n: 0,
            history: None,
        }));
    }
    let mut guard = StopOnDrop(vec![
        Box::new(Desk {
            label: "desk",
            exe: this_build.clone(),
            home: work.path().join("home-no-history"),
            n: 0,
            history: Some(0),
            status: Some(false),
        }),
        Box::new(Desk {
            label: DESK_STATUS,
            exe: this_build.clone(),
            home: work.path().join("home-status"),
            n: 0,
            history: None,
            status: Some(true),
        }),
        Box::new(Dtach { dir: work.path().to_path_buf(), n: 0 }),
        Box::new(Tmux { label: format!("deskbench{}", std::process::id()), n: 0 }),
    ]);
    guard.0.splice(0..0, desks);
    let holders = &mut guard.0;
    let cpus = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("model name"))
        .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        .unwrap_or_default();
    println!(
        "# desk benchmarks\n\nMachine: {} CPUs ({cpus}); grid {COLS}x{ROWS}; medians over repeated runs.\n",
        ncpus
    );
    let want = |what: &str| opts.only.as_deref().is_none_or(|o| o == what);
    if want("fanout") {
        println!("## Fan-out\n\n{}", fanout(holders, &opts, work.path()));
    }
    if want("attach") {
        println!("## Attach to a full screen\n\n{}", attach_latency(holders, &opts, work.path()));
    }
    if want("idle") {
        println!("## Idle holder\n\n{}", idle(holders, &opts));
    }
    if want("history") {
        println!("## A full history\n\n{}", history_memory(&opts, work.path()));
    }
    if opts.only.as_deref() == Some("fleet") {
        let baseline = opts.baseline.as_ref().map(|dir| dir.join("desk"));
        println!(
            "## Fleet of idle sessions\n\n{}",
            fleet::measure(&opts, work.path(), &this_build, "fleet-home", baseline.as_deref())
        );
        if let Some(exe) = &baseline {
            println!(
                "## Fleet of idle sessions, baseline\n\n{}",
                fleet::measure(&opts, work.path(), exe, "fleet-home-baseline", None)
            );
        }
    }
    if want("typing") {
        println!("## Keystroke echo\n\n{}", typing::measure(holders, &opts));
    }
    if want("attention") {
        println!("## The attach status line and switching sessions\n\n{}", attention::measure(&opts, work.path()));
    }
    // Last: it unpins this process (a start may use both cores).
    if want("commands") {
        let baseline = opts.baseline.as_ref().map(|dir| dir.join("desk"));
        println!(
            "## Starting a detached session\n\n{}",
            commands::measure(&opts, work.path(), &this_build, baseline.as_deref())
        );
    }
}
