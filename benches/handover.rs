//! `cargo bench --bench handover`: the pause an agent's output sees while its master hands over
//! to another `desk-master` in place (`desk upgrade`, issue 27). docs/benchmarks.md §16 records
//! the results.
//!
//! The agent is this benchmark's own executable run as a writer (`--writer`): it prints one
//! line per `--interval-us` (default 100 µs: 10,000 lines a second, a fast agent; 0: as fast as
//! the terminal takes them), each holding its number and the wall-clock time in nanoseconds at
//! which it was written, for `--seconds` (default 3), then `END`. Its writes block when the PTY's buffer is full, which is what happens when the master
//! stops reading: so the largest gap between two consecutive timestamps is the longest the
//! agent was held up. Each run starts a session under a fresh `DESK_HOME`, waits one second,
//! runs `desk upgrade NAME --master <this build's desk-master>` (a real re-exec of a real
//! binary), reads every line back from the session log (`desk log --since-start`, which also
//! proves none was lost) and reports: the largest gap within 200 ms of the upgrade's start and
//! end, the largest gap elsewhere in the same run (the baseline: scheduling noise), the pause
//! the master reports (from its last PTY read in the old image to the new image's first
//! moment), and how long `desk upgrade` took end to end. Median and slowest over `--runs`
//! (default 10). Options: `--attach` also keeps a `desk attach --read-only` client on a PTY
//! and the daemon (`desk serve`) observing, so their connections cross the handover too.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const DESK: &str = env!("CARGO_BIN_EXE_desk");
const DESK_MASTER: &str = env!("CARGO_BIN_EXE_desk-master");

struct Opts {
    runs: usize,
    interval_us: u64,
    seconds: u64,
    attach: bool,
}

fn parse_opts(args: &[String]) -> Opts {
    let mut opts = Opts { runs: 10, interval_us: 100, seconds: 3, attach: false };
    let mut i = 0;
    while i < args.len() {
        let value = || args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--runs" => opts.runs = value().parse().expect("--runs N"),
            "--interval-us" => opts.interval_us = value().parse().expect("--interval-us N"),
            "--seconds" => opts.seconds = value().parse().expect("--seconds N"),
            "--attach" => {
                opts.attach = true;
                i += 1;
                continue;
            }
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

fn now_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_nanos()
}

/// The agent: timestamped lines at a steady interval (catching up without sleeping when held
/// up, as an agent with output queued would), then END.
fn writer(interval_us: u64, seconds: u64) {
    let out = std::io::stdout();
    let mut out = out.lock();
    let start = Instant::now();
    let interval = Duration::from_micros(interval_us);
    let mut next = start;
    let mut seq = 0u64;
    while start.elapsed() < Duration::from_secs(seconds) {
        seq += 1;
        writeln!(out, "t {seq} {}", now_ns()).expect("write a line");
        out.flush().expect("flush a line");
        next += interval;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    writeln!(out, "END").expect("write END");
    out.flush().expect("flush END");
    std::thread::sleep(Duration::from_secs(600));
}

fn desk(home: &Path, args: &[&str]) -> String {
    let out =
        Command::new(DESK).env("DESK_HOME", home).env("DESK_AUTOSTART", "0").args(args).output().expect("run desk");
    assert!(out.status.success(), "desk {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Kill every process of the sessions and the daemon under `home`, by pid.
fn kill_all(home: &Path) {
    let mut pids = Vec::new();
    if let Ok(entries) = std::fs::read_dir(home.join("run")) {
        for entry in entries.flatten() {
            if entry.path().extension().is_some_and(|e| e == "json") {
                let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
                if let Ok(meta) = serde_json::from_str::<serde_json::Value>(&text) {
                    pids.extend(["pid", "master_pid"].iter().filter_map(|k| meta[*k].as_i64()));
                }
            }
        }
    }
    for pid in pids {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::SIGKILL);
    }
}

struct Run {
    near_ms: f64,
    elsewhere_ms: f64,
    pause_ms: f64,
    took_ms: f64,
    lines: usize,
}

fn one_run(opts: &Opts) -> Run {
    let home = tempfile::Builder::new().prefix("desk-bench-handover-").tempdir().expect("temp dir");
    let me = std::env::current_exe().expect("this benchmark's path");
    let (interval, seconds) = (opts.interval_us.to_string(), opts.seconds.to_string());
    let me = me.to_str().expect("a UTF-8 path");
    desk(
        home.path(),
        &["new", "h", "--size", "120x40", "--log-cap", "268435456", "--", me, "--writer", &interval, &seconds],
    );
    let mut helpers: Vec<Child> = Vec::new();
    if opts.attach {
        helpers.push(
            Command::new(DESK)
                .env("DESK_HOME", home.path())
                .args(["serve"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start desk serve"),
        );
        helpers.push(
            Command::new("script")
                .env("DESK_HOME", home.path())
                .args(["-qfec", &format!("{DESK} attach --read-only --no-status h"), "/dev/null"])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn()
                .expect("attach through script(1)"),
        );
    }
    std::thread::sleep(Duration::from_secs(1));
    let before = now_ns();
    let started = Instant::now();
    let report = desk(home.path(), &["upgrade", "h", "--master", DESK_MASTER, "--json"]);
    let took = started.elapsed();
    let after = now_ns();
    let report: serde_json::Value = serde_json::from_str(&report).expect("upgrade --json");
    let session = &report["data"]["sessions"][0];
    assert_eq!(session["result"], "upgraded", "{report:#}");
    let deadline = Instant::now() + Duration::from_secs(opts.seconds + 30);
    let text = loop {
        let text = desk(home.path(), &["log", "h", "--since-start"]);
        if text.lines().any(|l| l == "END") {
            break text;
        }
        assert!(Instant::now() < deadline, "no END from the writer");
        std::thread::sleep(Duration::from_millis(100));
    };
    if opts.attach {
        // `desk serve` runs the daemon as a child of its own: stop it through its socket.
        let _ = Command::new(DESK).env("DESK_HOME", home.path()).args(["serve", "--stop"]).output();
    }
    for mut helper in helpers {
        let _ = helper.kill();
        let _ = helper.wait();
    }
    kill_all(home.path());
    let lines: Vec<(u64, u128)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("t "))
        .filter_map(|t| t.split_once(' '))
        .filter_map(|(seq, ns)| Some((seq.parse().ok()?, ns.parse().ok()?)))
        .collect();
    // Every line the writer wrote, once, in order: nothing lost or doubled by the handover.
    assert!(lines.iter().enumerate().all(|(i, (seq, _))| *seq == i as u64 + 1), "a line lost or doubled");
    let stamps: Vec<u128> = lines.into_iter().map(|(_, ns)| ns).collect();
    let window = 200_000_000u128;
    let (mut near, mut elsewhere) = (0u128, 0u128);
    for pair in stamps.windows(2) {
        assert!(pair[1] >= pair[0], "lines out of order");
        let gap = pair[1] - pair[0];
        let at = pair[1];
        if at + window >= before && at <= after + window {
            near = near.max(gap);
        } else {
            elsewhere = elsewhere.max(gap);
        }
    }
    Run {
        near_ms: near as f64 / 1e6,
        elsewhere_ms: elsewhere as f64 / 1e6,
        pause_ms: session["pause_ms"].as_f64().unwrap_or(f64::NAN),
        took_ms: took.as_secs_f64() * 1e3,
        lines: stamps.len(),
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "--writer") {
        writer(args[1].parse().expect("interval"), args[2].parse().expect("seconds"));
        return;
    }
    let opts = parse_opts(&args);
    let runs: Vec<Run> = (0..opts.runs).map(|_| one_run(&opts)).collect();
    let column = |f: fn(&Run) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(f).collect();
        let max = v.iter().copied().fold(f64::MIN, f64::max);
        (median(&mut v), max)
    };
    println!(
        "handover under a writer of one line per {} µs, {} runs{}",
        opts.interval_us,
        opts.runs,
        if opts.attach { ", a viewer attached and the daemon observing" } else { "" }
    );
    println!("| what | median | slowest |\n|---|---:|---:|");
    for (what, f) in [
        ("largest gap in the agent's output around the handover (ms)", (|r: &Run| r.near_ms) as fn(&Run) -> f64),
        ("largest gap elsewhere in the same run (ms)", |r: &Run| r.elsewhere_ms),
        ("pause the master reports (ms)", |r: &Run| r.pause_ms),
        ("`desk upgrade` end to end (ms)", |r: &Run| r.took_ms),
    ] {
        let (median, max) = column(f);
        println!("| {what} | {median:.1} | {max:.1} |");
    }
    let lines: Vec<usize> = runs.iter().map(|r| r.lines).collect();
    println!("lines per run (every one read back from the session log, numbered without a gap): {lines:?}");
}
