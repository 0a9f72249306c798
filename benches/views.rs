//! `cargo bench --bench views`: what a terminal of another size costs (issue 10, item 2).
//!
//! Two measurements on a 120x40 session, each repeated and reported as medians:
//! - repaint latency: the child prints a numbered marker every 100 ms; a 120x40 viewer (the raw
//!   fast path) and a 79x24 viewer (a view rendered from the screen model) each watch their
//!   terminal through the vt100 crate. Reported: how long after the raw viewer the 79x24 one
//!   shows each marker (target: median within 50 ms), and the raw viewer's own delay from the
//!   child's write (the marker carries its write time).
//! - CPU per MB: the child `cat`s a text file while one viewer is attached, of the session's
//!   size or 79x24. Reported: the master's CPU seconds per MB of session output, and the bytes
//!   the viewer received, side by side.
//!
//! Viewers never resize the session, so both kinds can watch one session at once. Options:
//! `--runs N` (default 5), `--mb N` (default 50), `--markers N` (default 40). CPU is read from
//! /proc in clock ticks (10 ms), so the flood should be long enough for ticks to be many.

use desk_common::pty::{Spawn, spawn};
use std::num::NonZeroU16;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const COLS: u16 = 120;
const ROWS: u16 = 40;
const VIEW: (u16, u16) = (79, 24);

struct Opts {
    runs: usize,
    mb: usize,
    markers: usize,
}

fn parse_opts() -> Opts {
    let mut opts = Opts { runs: 5, mb: 50, markers: 40 };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = || args.next().and_then(|v| v.parse().ok()).expect("a number");
        match a.as_str() {
            "--runs" => opts.runs = num(),
            "--mb" => opts.mb = num(),
            "--markers" => opts.markers = num(),
            _ => {} // cargo bench passes --bench
        }
    }
    opts
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
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

fn nz(n: u16) -> NonZeroU16 {
    NonZeroU16::new(n).expect("a terminal has at least one row and column")
}

fn now_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// `desk attach` on a pseudo-terminal of a given size, its output parsed by vt100.
struct Viewer {
    pid: u32,
    parser: Arc<Mutex<vt100::Parser>>,
    bytes: Arc<AtomicU64>,
    /// "FLOOD-END" was seen in the byte stream (for viewers that do not parse).
    ended: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
    _master: Arc<OwnedFd>,
}

impl Viewer {
    /// With `parse`, the viewer's terminal is emulated (vt100) so its screen can be read;
    /// without, bytes are only counted and searched for `FLOOD-END`, so a slow emulator does not
    /// make the raw client fall behind during a CPU measurement.
    fn start(desk: &Desk, session: &str, (cols, rows): (u16, u16), parse: bool) -> Viewer {
        let child = spawn(&Spawn {
            program: desk.exe.clone().into(),
            args: vec!["attach".into(), session.into(), "--read-only".into()],
            cwd: None,
            env: vec![("DESK_HOME".into(), desk.home.clone().into())],
            cols,
            rows,
        })
        .expect("spawn desk attach");
        let master = Arc::new(child.master);
        let parser = Arc::new(Mutex::new(vt100::Parser::new(nz(rows), nz(cols), 0)));
        let bytes = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let ended = Arc::new(AtomicBool::new(false));
        let thread = {
            let (master, parser, bytes, stop, ended) =
                (master.clone(), parser.clone(), bytes.clone(), stop.clone(), ended.clone());
            thread::spawn(move || {
                let mut buf = vec![0u8; 256 * 1024];
                let mut tail: Vec<u8> = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let mut fds = [nix::poll::PollFd::new(master.as_fd(), nix::poll::PollFlags::POLLIN)];
                    if nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(20u16)).unwrap_or(0) == 0 {
                        continue;
                    }
                    match nix::unistd::read(master.as_fd(), &mut buf) {
                        Ok(0) | Err(nix::errno::Errno::EIO) => break,
                        Ok(n) => {
                            bytes.fetch_add(n as u64, Ordering::Relaxed);
                            if parse {
                                parser.lock().unwrap().process(&buf[..n]);
                            }
                            // The marker may straddle two reads.
                            tail.extend_from_slice(&buf[..n.min(64)]);
                            if tail.windows(9).any(|w| w == b"FLOOD-END")
                                || buf[..n].windows(9).any(|w| w == b"FLOOD-END")
                            {
                                ended.store(true, Ordering::Relaxed);
                            }
                            tail.clear();
                            tail.extend_from_slice(&buf[n.saturating_sub(16)..n]);
                        }
                        Err(_) => {}
                    }
                }
            })
        };
        Viewer { pid: child.pid, parser, bytes, ended, stop, thread: Some(thread), _master: master }
    }

    fn contents(&self) -> String {
        self.parser.lock().unwrap().screen().contents()
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid as i32), nix::sys::signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(self.pid as i32), None);
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Desk {
    exe: PathBuf,
    home: PathBuf,
    n: usize,
}

impl Desk {
    fn cmd(&self) -> Command {
        let mut c = Command::new(&self.exe);
        c.env("DESK_HOME", &self.home);
        c
    }

    /// Start a 120x40 session running `sh -c script`; returns its name and master pid.
    fn start(&mut self, script: &str) -> (String, u32) {
        self.n += 1;
        let name = format!("v{}", self.n);
        run(self.cmd().args(["new", &name, "--size", &format!("{COLS}x{ROWS}"), "--", "sh", "-c", script]));
        let v: serde_json::Value = serde_json::from_str(&run(self.cmd().args(["ls", "--json"]))).unwrap();
        let pid = v["data"].as_array().unwrap().iter().find(|s| s["name"] == name.as_str()).unwrap()["master_pid"]
            .as_u64()
            .unwrap() as u32;
        (name, pid)
    }

    fn viewers(&self, name: &str) -> u64 {
        let v: serde_json::Value = serde_json::from_str(&run(self.cmd().args(["ls", "--json"]))).unwrap();
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .map_or(0, |s| s["clients"]["viewers"].as_u64().unwrap_or(0))
    }

    fn stop(&self, name: &str) {
        let _ = self.cmd().args(["kill", name, "--signal", "KILL"]).output();
        let _ = self.cmd().args(["rm", name]).output();
    }
}

fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(2));
    }
}

/// Per run: the markers' delays (ms) of the view after the raw viewer, and of the raw viewer
/// after the child's write.
fn latency(desk: &mut Desk, opts: &Opts, work: &Path) -> (Vec<f64>, Vec<f64>) {
    let go = work.join("go-latency");
    let _ = std::fs::remove_file(&go);
    // Each marker carries the time it was written (ms since the epoch), on its own line.
    let script = format!(
        "while [ ! -e {go} ]; do sleep 0.01; done; i=0; while [ $i -lt {n} ]; do i=$((i+1)); \
         printf 'M%05d %s\\n' $i $(date +%s%3N); sleep 0.1; done; exec sleep 100000",
        go = go.display(),
        n = opts.markers
    );
    let (name, _) = desk.start(&script);
    let raw = Viewer::start(desk, &name, (COLS, ROWS), true);
    let view = Viewer::start(desk, &name, VIEW, true);
    wait_for("two viewers", Duration::from_secs(10), || desk.viewers(&name) == 2);
    std::fs::write(&go, b"").unwrap();
    let (mut behind, mut raw_delay) = (Vec::new(), Vec::new());
    for i in 1..=opts.markers {
        let marker = format!("M{i:05} ");
        let mut raw_at = None;
        let mut view_at = None;
        let deadline = Instant::now() + Duration::from_secs(10);
        while raw_at.is_none() || view_at.is_none() {
            assert!(Instant::now() < deadline, "marker {i} never arrived");
            if raw_at.is_none() {
                let text = raw.contents();
                if let Some(line) = text.lines().find(|l| l.starts_with(&marker)) {
                    raw_at = Some(Instant::now());
                    if let Some(written) = line.split_whitespace().nth(1).and_then(|t| t.parse::<f64>().ok()) {
                        raw_delay.push(now_ms() - written);
                    }
                }
            }
            if view_at.is_none() && view.contents().contains(&marker) {
                view_at = Some(Instant::now());
            }
            thread::sleep(Duration::from_micros(500));
        }
        let (r, v) = (raw_at.unwrap(), view_at.unwrap());
        behind.push(if v > r { (v - r).as_secs_f64() * 1000.0 } else { -((r - v).as_secs_f64() * 1000.0) });
    }
    drop((raw, view));
    desk.stop(&name);
    (behind, raw_delay)
}

/// One flood with one viewer of `size`: the master's CPU seconds per MB of output, and the
/// bytes the viewer received.
fn cpu_per_mb(desk: &mut Desk, file: &Path, mb: f64, size: (u16, u16), work: &Path) -> (f64, u64, f64) {
    let go = work.join("go-cpu");
    let _ = std::fs::remove_file(&go);
    let script = format!(
        "while [ ! -e {go} ]; do sleep 0.01; done; cat {file}; echo FLOOD-END; exec sleep 100000",
        go = go.display(),
        file = file.display()
    );
    let (name, master) = desk.start(&script);
    let viewer = Viewer::start(desk, &name, size, false);
    wait_for("a viewer", Duration::from_secs(10), || desk.viewers(&name) == 1);
    wait_for("the first keyframe", Duration::from_secs(10), || viewer.bytes.load(Ordering::Relaxed) > 0);
    // The master's CPU while idle before the flood is not the flood's.
    thread::sleep(Duration::from_millis(100));
    let before = cpu_ticks(master);
    let started = Instant::now();
    std::fs::write(&go, b"").unwrap();
    wait_for("FLOOD-END", Duration::from_secs(300), || viewer.ended.load(Ordering::Relaxed));
    let ticks = cpu_ticks(master) - before;
    let wall = started.elapsed().as_secs_f64();
    // SAFETY: sysconf takes an integer and touches no memory of ours.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let bytes = viewer.bytes.load(Ordering::Relaxed);
    drop(viewer);
    desk.stop(&name);
    (ticks as f64 / hz / mb, bytes, wall)
}

fn main() {
    let opts = parse_opts();
    let work = tempfile::Builder::new().prefix("desk-bench-views").tempdir().unwrap();
    let mut desk = Desk { exe: PathBuf::from(env!("CARGO_BIN_EXE_desk")), home: work.path().join("home"), n: 0 };
    println!("# views: a {}x{} viewer on a {COLS}x{ROWS} session\n", VIEW.0, VIEW.1);

    let (mut behind, mut raw_delay) = (Vec::new(), Vec::new());
    for _ in 0..opts.runs {
        let (b, r) = latency(&mut desk, &opts, work.path());
        behind.extend(b);
        raw_delay.extend(r);
    }
    let n = behind.len();
    let mut sorted = behind.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let p95 = sorted[(n * 95 / 100).min(n - 1)];
    println!("## Repaint latency ({n} markers)\n");
    println!("| measure | median ms | p95 ms | max ms |\n|---|---:|---:|---:|");
    println!(
        "| {}x{} view after the raw viewer | {:.1} | {:.1} | {:.1} |",
        VIEW.0,
        VIEW.1,
        median(&mut behind),
        p95,
        sorted[n - 1]
    );
    let mut rd = raw_delay.clone();
    rd.sort_by(|a, b| a.total_cmp(b));
    println!(
        "| raw viewer after the child's write | {:.1} | {:.1} | {:.1} |\n",
        median(&mut raw_delay),
        rd[(rd.len() * 95 / 100).min(rd.len() - 1)],
        rd[rd.len() - 1]
    );

    // A text file of `mb` MB: numbered 100-column lines, as a build or an agent prints. Every
    // line differs, so a view's repaint cannot find its rows unchanged.
    let file = work.path().join("flood.txt");
    {
        let pattern: String = (0..91).map(|i| (b'a' + (i % 26) as u8) as char).collect();
        let count = opts.mb * 1_000_000 / 101;
        let text: String = (0..count).map(|i| format!("{i:08} {pattern}\n")).collect();
        std::fs::write(&file, text).unwrap();
    }
    let mb = std::fs::metadata(&file).unwrap().len() as f64 / 1e6;
    println!("## CPU per MB of session output ({:.0} MB, {} runs)\n", mb, opts.runs);
    println!("| viewer | master CPU s per MB | bytes the viewer received | flood wall s |\n|---|---:|---:|---:|");
    for size in [(COLS, ROWS), VIEW] {
        let (mut cpu, mut bytes, mut walls) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..opts.runs {
            let (c, b, w) = cpu_per_mb(&mut desk, &file, mb, size, work.path());
            cpu.push(c);
            bytes.push(b as f64);
            walls.push(w);
        }
        let kind = if size == (COLS, ROWS) { "(raw fast path)" } else { "(view)" };
        println!(
            "| {}x{} {kind} | {:.4} | {:.0} | {:.2} |",
            size.0,
            size.1,
            median(&mut cpu),
            median(&mut bytes),
            median(&mut walls)
        );
    }
}
