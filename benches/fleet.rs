//! `cargo bench --bench fleet`: `desk up` of a manifest of N sessions beside a shell loop of N
//! `desk new`, and a second, idempotent `up` (issue 26's targets: no slower than the loop, and
//! the idempotent `up` within 100 ms for 50 sessions). docs/benchmarks.md §14 records the results.
//!
//! Each session runs `sleep 600` (provider shell), so what is measured is desk's own work:
//! reading and checking the manifest, observing every session, starting masters, writing launch
//! records. Every run starts from no sessions under a fresh `DESK_HOME`; sessions are killed by
//! pid between runs. Reported: median and slowest wall time over `--runs` runs (default 5) of the
//! cold `up` and of the loop, and over `--idle-runs` runs (default 20) of the idempotent `up`.
//! Options: `--sessions N` (default 50).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const DESK: &str = env!("CARGO_BIN_EXE_desk");

struct Opts {
    runs: usize,
    idle_runs: usize,
    sessions: usize,
}

fn parse_opts() -> Opts {
    let mut opts = Opts { runs: 5, idle_runs: 20, sessions: 50 };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = || args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--runs" => opts.runs = value().parse().expect("--runs N"),
            "--idle-runs" => opts.idle_runs = value().parse().expect("--idle-runs N"),
            "--sessions" => opts.sessions = value().parse().expect("--sessions N"),
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

fn desk(home: &Path, dir: &Path, args: &[&str]) {
    let out = Command::new(DESK).env("DESK_HOME", home).current_dir(dir).args(args).output().expect("run desk");
    assert!(out.status.success(), "desk {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Kill every session under `home` by its pids (as the test harness does) and wait for them.
fn kill_all(home: &Path) {
    let Ok(entries) = std::fs::read_dir(home.join("run")) else { return };
    let mut pids = Vec::new();
    for entry in entries.flatten() {
        if entry.path().extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            if let Ok(meta) = serde_json::from_str::<serde_json::Value>(&text) {
                for key in ["pid", "master_pid"] {
                    if let Some(pid) = meta[key].as_i64() {
                        pids.push(pid as i32);
                    }
                }
            }
        }
    }
    for pid in &pids {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), nix::sys::signal::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while pids.iter().any(|p| nix::sys::signal::kill(nix::unistd::Pid::from_raw(*p), None).is_ok())
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn stats(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    (samples[samples.len() / 2], *samples.last().expect("samples"))
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let opts = parse_opts();
    let n = opts.sessions;
    let mut manifest = String::new();
    for i in 0..n {
        manifest.push_str(&format!("[session.s{i:03}]\ncommand = [\"sleep\", \"600\"]\n\n"));
    }
    let mut up = Vec::new();
    let mut again = Vec::new();
    let mut looped = Vec::new();
    for _ in 0..opts.runs {
        // desk up, cold.
        let home = tempfile::Builder::new().prefix("dkb").tempdir_in("/tmp").expect("temp dir");
        let dir = tempfile::Builder::new().prefix("dkbm").tempdir_in("/tmp").expect("temp dir");
        std::fs::write(dir.path().join("desk.toml"), &manifest).expect("write the manifest");
        let t = Instant::now();
        desk(home.path(), dir.path(), &["up"]);
        up.push(t.elapsed());
        // The idempotent up, several times (fewer runs' worth of sessions to start).
        if again.len() < opts.idle_runs {
            for _ in 0..opts.idle_runs.div_ceil(opts.runs) {
                let t = Instant::now();
                desk(home.path(), dir.path(), &["up"]);
                again.push(t.elapsed());
            }
        }
        kill_all(home.path());
        // The shell loop of `desk new`, as a user would write it.
        let home = tempfile::Builder::new().prefix("dkb").tempdir_in("/tmp").expect("temp dir");
        let script = format!("for i in $(seq -f %03g 0 {}); do \"$DESK\" new s$i -- sleep 600 || exit 1; done", n - 1);
        let t = Instant::now();
        let status = Command::new("sh")
            .arg("-c")
            .arg(&script)
            .env("DESK", DESK)
            .env("DESK_HOME", home.path())
            .current_dir(dir.path())
            .status()
            .expect("run the loop");
        looped.push(t.elapsed());
        assert!(status.success(), "the loop of desk new failed");
        kill_all(home.path());
    }
    let (up_med, up_max) = stats(up);
    let (loop_med, loop_max) = stats(looped);
    let (again_med, again_max) = stats(again);
    println!("fleet of {n} sessions (sleep 600), {} runs:", opts.runs);
    println!("  desk up (cold)            median {}  slowest {}", ms(up_med), ms(up_max));
    println!("  loop of {n} desk new       median {}  slowest {}", ms(loop_med), ms(loop_max));
    println!("  ratio up/loop (medians)   {:.2}", up_med.as_secs_f64() / loop_med.as_secs_f64());
    println!(
        "  desk up (nothing to do)   median {}  slowest {}  ({} runs)",
        ms(again_med),
        ms(again_max),
        opts.idle_runs
    );
}
