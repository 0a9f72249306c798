//! `cargo bench --bench dash`: the dashboard over a fleet of demo agents (issue 11's targets).
//!
//! Starts `desk serve` and `--sessions` (default 100) demo agents, then `desk dash` on a
//! 200x50 pseudo-terminal whose output is parsed by the vt100 crate, as an operator's terminal
//! would. Measured, in this order:
//! - startup: from spawning `desk dash` to its first frame (the header counts every session),
//!   and to a full first frame (no visible row still `starting`, the preview drawn live);
//! - idle-watching: the dashboard's CPU time (utime + stime from /proc, so a loaded machine
//!   inflates it less than wall-clock sampling would) over `--secs` seconds with nothing
//!   happening in the fleet, as % of one core;
//! - redraw: the same with a third of the agents working (each one's spinner redraws and
//!   retitles its session every 100 ms), and the bytes the dashboard wrote meanwhile;
//! - latency: `--samples` idle agents are each sent a prompt that raises an approval dialog;
//!   from the time the master recorded the change (the `ts_ms` of its journalled state event)
//!   to the moment the dashboard's screen shows the row `blocked(approval)`;
//! - memory: the dashboard's resident and private memory with the fleet;
//! - `desk ls`: wall time (median of `--ls-runs`) beside the dashboard with the fleet, then
//!   again after `--more` (default 400) sessions running `cat` are added.
//!
//! Every process started is ended by pid when the bench ends, by return or by panic.

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use desk_wire::{Frame, Role};

const COLS: u16 = 200;
const ROWS: u16 = 50;

/// How long each state of the fleet settles before a CPU measurement: the working agents'
/// first redraws, and the dashboard's start-up allocations, are over well within it.
const SETTLE: Duration = Duration::from_secs(3);

struct Opts {
    sessions: usize,
    secs: u64,
    samples: usize,
    ls_runs: usize,
    more: usize,
}

fn parse_opts() -> Opts {
    let mut opts = Opts { sessions: 100, secs: 20, samples: 20, ls_runs: 10, more: 400 };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = || args.next().and_then(|v| v.parse().ok()).expect("a number");
        match a.as_str() {
            "--sessions" => opts.sessions = num(),
            "--secs" => opts.secs = num() as u64,
            "--samples" => opts.samples = num(),
            "--ls-runs" => opts.ls_runs = num(),
            "--more" => opts.more = num(),
            _ => {} // cargo bench passes --bench
        }
    }
    opts
}

fn now_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() { f64::NAN } else { v[v.len() / 2] }
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rfind(')').map(|i| &stat[i + 2..]).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    f.get(11).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0)
}

fn ticks_per_s() -> f64 {
    // SAFETY: sysconf reads a constant of the system; no memory is passed.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// A field of `/proc/PID/smaps_rollup` or `status` in KiB (the sum of the named lines).
fn proc_kib(pid: u32, file: &str, keys: &[&str]) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).unwrap_or_default();
    text.lines()
        .filter(|l| keys.iter().any(|k| l.starts_with(k)))
        .filter_map(|l| l.split_whitespace().nth(1).and_then(|n| n.parse::<u64>().ok()))
        .sum()
}

/// The desk under test, in a home of its own; remembers every process to end.
struct Desk {
    exe: PathBuf,
    agent: PathBuf,
    home: tempfile::TempDir,
    pids: Vec<i32>,
}

impl Desk {
    fn cmd(&self) -> Command {
        let mut c = Command::new(&self.exe);
        c.env("DESK_HOME", self.home.path());
        c
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.cmd().args(args).stdin(Stdio::null()).output().expect("run desk");
        assert!(out.status.success(), "desk {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn ls(&self) -> Vec<serde_json::Value> {
        let v: serde_json::Value = serde_json::from_str(&self.ok(&["ls", "--json"])).expect("ls json");
        v["data"].as_array().cloned().unwrap_or_default()
    }

    /// Remember every master and child now listed, to end them by pid.
    fn track(&mut self) {
        for s in self.ls() {
            for key in ["master_pid", "pid"] {
                if let Some(pid) = s[key].as_i64() {
                    self.pids.push(pid as i32);
                }
            }
        }
        self.pids.sort_unstable();
        self.pids.dedup();
    }

    /// The session's socket: `run/NAME.sock` under `DESK_HOME` (docs/protocol.md).
    fn socket(&self, name: &str) -> PathBuf {
        self.home.path().join("run").join(format!("{name}.sock"))
    }

    /// Type `bytes` into session `name` as a controller would, then leave.
    fn type_into(&self, socket: &std::path::Path, bytes: &[u8]) {
        let stream = std::os::unix::net::UnixStream::connect(socket).expect("connect");
        let mut conn = desk_common::master_client::Connection::open_within(
            stream,
            Role::Controller,
            80,
            24,
            Duration::from_secs(5),
        )
        .expect("handshake");
        conn.send(&Frame::Input(bytes.to_vec())).expect("input");
        let _ = conn.send(&Frame::Detach);
    }
}

impl Drop for Desk {
    fn drop(&mut self) {
        let _ = self.cmd().args(["serve", "--stop"]).output();
        for pid in &self.pids {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), nix::sys::signal::SIGKILL);
        }
    }
}

/// A row to watch for: while set, the first moment (Unix ms) a screen row contains both
/// strings is recorded.
type Watch = Arc<Mutex<Option<(String, String, Option<f64>)>>>;

/// `desk dash` on a pseudo-terminal, its output parsed by vt100 on a thread of ours.
struct DashPty {
    pid: u32,
    parser: Arc<Mutex<vt100::Parser>>,
    bytes: Arc<AtomicU64>,
    watch: Watch,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
    _master: Arc<OwnedFd>,
}

impl DashPty {
    fn start(desk: &Desk) -> DashPty {
        let child = desk_common::pty::spawn(&desk_common::pty::Spawn {
            program: desk.exe.clone().into(),
            args: vec!["dash".into()],
            cwd: None,
            env: vec![("DESK_HOME".into(), desk.home.path().into())],
            cols: COLS,
            rows: ROWS,
        })
        .expect("spawn desk dash");
        let master = Arc::new(child.master);
        let rows = std::num::NonZeroU16::new(ROWS).expect("rows");
        let cols = std::num::NonZeroU16::new(COLS).expect("cols");
        let parser = Arc::new(Mutex::new(vt100::Parser::new(rows, cols, 0)));
        let bytes = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let watch: Watch = Arc::new(Mutex::new(None));
        let thread = {
            let (master, parser, bytes, stop, watch) =
                (master.clone(), parser.clone(), bytes.clone(), stop.clone(), watch.clone());
            thread::spawn(move || {
                let mut buf = vec![0u8; 256 * 1024];
                while !stop.load(Ordering::Relaxed) {
                    let mut fds = [nix::poll::PollFd::new(master.as_fd(), nix::poll::PollFlags::POLLIN)];
                    if nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(20u16)).unwrap_or(0) == 0 {
                        continue;
                    }
                    match nix::unistd::read(master.as_fd(), &mut buf) {
                        Ok(0) | Err(nix::errno::Errno::EIO) => break,
                        Ok(n) => {
                            bytes.fetch_add(n as u64, Ordering::Relaxed);
                            let mut p = parser.lock().unwrap();
                            p.process(&buf[..n]);
                            let mut w = watch.lock().unwrap();
                            if let Some((a, b, seen @ None)) = w.as_mut() {
                                let text = p.screen().contents();
                                if text.lines().any(|l| l.contains(a.as_str()) && l.contains(b.as_str())) {
                                    *seen = Some(now_ms());
                                }
                            }
                        }
                        Err(_) => {}
                    }
                }
            })
        };
        DashPty { pid: child.pid, parser, bytes, watch, stop, thread: Some(thread), _master: master }
    }

    fn contents(&self) -> String {
        self.parser.lock().unwrap().screen().contents()
    }

    fn wait(&self, what: &str, timeout: Duration, cond: impl Fn(&str) -> bool) -> Instant {
        let deadline = Instant::now() + timeout;
        loop {
            if cond(&self.contents()) {
                return Instant::now();
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}:\n{}", self.contents());
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// The dashboard's CPU over `secs`, as % of one core, and the bytes it drew meanwhile.
    fn cpu(&self, secs: u64) -> (f64, u64) {
        let (t0, b0, at) = (cpu_ticks(self.pid), self.bytes.load(Ordering::Relaxed), Instant::now());
        thread::sleep(Duration::from_secs(secs));
        let (t1, b1) = (cpu_ticks(self.pid), self.bytes.load(Ordering::Relaxed));
        let pct = (t1 - t0) as f64 / ticks_per_s() / at.elapsed().as_secs_f64() * 100.0;
        (pct, b1 - b0)
    }
}

impl Drop for DashPty {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.pid as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(pid, None);
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The visible table rows of a dashboard screen (between the NAME header and the preview).
fn table_rows(screen: &str) -> Vec<String> {
    let lines: Vec<&str> = screen.lines().collect();
    let Some(header) = lines.iter().position(|l| l.contains("NAME") && l.contains("ACTIVITY")) else {
        return Vec::new();
    };
    lines[header + 1..].iter().take_while(|l| !l.contains("──")).map(|l| l.to_string()).collect()
}

/// Wall time of `desk ls`, median over `runs`, in ms.
fn ls_ms(desk: &Desk, runs: usize) -> f64 {
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let at = Instant::now();
            desk.ok(&["ls"]);
            at.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    median(&mut times)
}

/// When the master recorded `session`'s newest change of activity to `to` (Unix ms).
fn recorded_at(desk: &Desk, session: &str, to: &str) -> Option<f64> {
    let out = desk.ok(&["events", session, "--json"]);
    out.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| if v.get("data").is_some() { v["data"].clone() } else { v })
        .filter(|e| e["axis"] == "activity" && e["to"] == to)
        .filter_map(|e| e["ts_ms"].as_f64())
        .next_back()
}

fn main() {
    let opts = parse_opts();
    let mut desk = Desk {
        exe: PathBuf::from(env!("CARGO_BIN_EXE_desk")),
        agent: PathBuf::from(env!("CARGO_BIN_EXE_desk-demo-agent")),
        home: tempfile::tempdir().expect("temp dir"),
        pids: Vec::new(),
    };
    let agent = desk.agent.to_str().expect("utf-8 path").to_string();
    desk.ok(&["serve"]);
    println!("dash bench: {} demo agents, a third of them working later; dashboard at {COLS}x{ROWS}", opts.sessions);
    let names: Vec<String> = (0..opts.sessions).map(|i| format!("s{i:03}")).collect();
    let started = Instant::now();
    for name in &names {
        // A turn works for ten minutes: a working agent stays working for the whole bench.
        desk.ok(&["new", name, "--provider", "demo", "--", &agent, "--title", name, "--work-ms", "600000"]);
    }
    desk.track();
    println!("  started {} sessions in {:.1} s", names.len(), started.elapsed().as_secs_f64());
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let idle = desk.ls().iter().filter(|s| s["state"]["activity"]["value"] == "idle").count();
        if idle == names.len() {
            break;
        }
        assert!(Instant::now() < deadline, "only {idle} of {} sessions idle", names.len());
        thread::sleep(Duration::from_millis(200));
    }
    thread::sleep(SETTLE);

    // Startup.
    let spawned = Instant::now();
    let dash = DashPty::start(&desk);
    let count = format!("{} sessions", names.len());
    let first = dash.wait("the first frame", Duration::from_secs(30), |s| s.contains(&count));
    let table = dash.wait("every visible row live", Duration::from_secs(30), |s| {
        let rows = table_rows(s);
        s.contains(&count) && !rows.is_empty() && rows.iter().all(|r| r.contains("idle"))
    });
    let full = dash.wait("a full first frame", Duration::from_secs(30), |s| {
        let rows = table_rows(s);
        s.contains(&count) && !rows.is_empty() && rows.iter().all(|r| r.contains("idle")) && s.contains(", live")
    });
    println!("  (desk dash is pid {})", dash.pid);
    let ms = |t: Instant| (t - spawned).as_secs_f64() * 1000.0;
    println!(
        "  startup: first frame {:.0} ms, every visible row live {:.0} ms, full first frame (preview too) {:.0} ms \
         (target <= 200 ms)",
        ms(first),
        ms(table),
        ms(full)
    );
    thread::sleep(SETTLE);

    // Idle-watching.
    let (idle_pct, idle_bytes) = dash.cpu(opts.secs);
    println!(
        "  idle-watching: {idle_pct:.2} % of one core over {} s, {:.0} bytes/s drawn (target <= 3 %)",
        opts.secs,
        idle_bytes as f64 / opts.secs as f64
    );

    // A third working: their spinners redraw and retitle every 100 ms.
    let working: Vec<&String> = names.iter().step_by(3).collect();
    for name in &working {
        desk.type_into(&desk.socket(name), b"keep working\r");
    }
    dash.wait("the working third", Duration::from_secs(30), |_| {
        desk.ls().iter().filter(|s| s["state"]["activity"]["value"] == "working").count() == working.len()
    });
    thread::sleep(SETTLE);
    let (busy_pct, busy_bytes) = dash.cpu(opts.secs);
    println!(
        "  redraw ({} working): {busy_pct:.2} % of one core over {} s, {:.0} bytes/s drawn (target <= 15 %)",
        working.len(),
        opts.secs,
        busy_bytes as f64 / opts.secs as f64
    );

    // Latency, on the idle ones, one at a time.
    let idle: Vec<&String> = names.iter().filter(|n| !working.contains(n)).take(opts.samples).collect();
    let mut latencies = Vec::new();
    for name in &idle {
        let socket = desk.socket(name);
        *dash.watch.lock().unwrap() = Some((format!(" {name} "), "blocked(approval)".into(), None));
        desk.type_into(&socket, b"\x1b[200~please approve-me\x1b[201~\r");
        let deadline = Instant::now() + Duration::from_secs(20);
        let seen = loop {
            if let Some((_, _, Some(at))) = dash.watch.lock().unwrap().as_ref() {
                break *at;
            }
            assert!(Instant::now() < deadline, "{name} never showed blocked:\n{}", dash.contents());
            thread::sleep(Duration::from_millis(5));
        };
        let recorded = recorded_at(&desk, name, "blocked").expect("the blocked event in the journal");
        latencies.push(seen - recorded);
        // Esc answers No; the agent goes back to idle and leaves the top of the table.
        desk.type_into(&socket, b"\x1b");
        thread::sleep(Duration::from_millis(300));
    }
    let mut sorted = latencies.clone();
    let med = median(&mut sorted);
    println!(
        "  state change -> on screen: median {med:.0} ms, min {:.0}, max {:.0} over {} samples (target <= 200 ms)",
        sorted.first().copied().unwrap_or(f64::NAN),
        sorted.last().copied().unwrap_or(f64::NAN),
        sorted.len()
    );

    // Memory.
    let rss = proc_kib(dash.pid, "status", &["VmRSS:"]);
    let private = proc_kib(dash.pid, "smaps_rollup", &["Private_Clean:", "Private_Dirty:"]);
    println!("  dashboard memory with {} sessions: RSS {rss} KiB, private {private} KiB", names.len());

    // desk ls beside it.
    println!("  desk ls, {} sessions: {:.1} ms (median of {})", names.len(), ls_ms(&desk, opts.ls_runs), opts.ls_runs);
    if opts.more > 0 {
        for i in 0..opts.more {
            desk.ok(&["new", &format!("c{i:03}"), "--", "cat"]);
        }
        desk.track();
        thread::sleep(SETTLE);
        let total = names.len() + opts.more;
        println!("  desk ls, {total} sessions: {:.1} ms (median of {})", ls_ms(&desk, opts.ls_runs), opts.ls_runs);
        let (pct, _) = dash.cpu(opts.secs);
        let rss = proc_kib(dash.pid, "status", &["VmRSS:"]);
        println!(
            "  dashboard with {total} sessions: {pct:.2} % of one core ({} working), RSS {rss} KiB",
            working.len()
        );
    }
    drop(dash);
}
