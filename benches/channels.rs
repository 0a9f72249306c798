//! `cargo bench --bench channels`: channels against issue 13's targets.
//!
//! Three measurements, with the demo agent in real sessions under `desk serve`:
//! - fan-out latency: a channel of 10 idle agents; a message posted with the real
//!   `desk channel post`; the time from starting the post until all 10 members' items are
//!   delivered (verified on their screens), polled on the item files every 2 ms;
//! - burst: 1,000 messages across 5 channels of 4 sessions each (20 sessions), appended as fast
//!   as the store takes them (the library call `desk channel post` makes, without a process per
//!   message); the time until every (message, member) pair is delivered, how many went in
//!   digests, and the check that each pair is in its agent's prompt log exactly once;
//! - read: `desk channel read` (text and `--json`) of a channel of 10,000 messages.
//!
//! Options: `--runs N` (latency samples, default 20), `--skip-burst`, `--only-burst`, `--desk DIR`
//! (measure another build's `desk`, `desk-master` and `desk-demo-agent`), and
//! `--perf DIR`: during the burst, count the daemon's fsync and fdatasync calls (`perf stat` on
//! its syscall tracepoints, reported per delivered pair) and record its profile
//! (`perf record -g`, `DIR/burst.perf.data`; `perf report -i` reads it). Needs `perf` and the
//! right to trace the daemon (root, or `kernel.perf_event_paranoid` ≤ 1). `--trace DIR` instead
//! attaches `perf trace -s` to the daemon for the burst (`DIR/burst.trace.txt`: per thread, each
//! system call's count and total time, the time it waited in fsync among them); alone, as its
//! cost per system call would skew the other two.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use desk_core::channel::{ChannelName, Kind, Message, delivery_item_id, format};
use desk_daemon::channel::store::{ChannelStore, Draft};

/// The executables measured: this build's, or those in `--desk DIR` (say main's before a
/// change: run both in one sitting to compare them side by side).
static EXES: std::sync::OnceLock<(String, String)> = std::sync::OnceLock::new();

fn desk_exe() -> &'static str {
    &EXES.get().expect("executables chosen in main").0
}

fn agent_exe() -> &'static str {
    &EXES.get().expect("executables chosen in main").1
}

fn desk(home: &Path, args: &[&str]) -> String {
    let out = Command::new(desk_exe()).env("DESK_HOME", home).args(args).output().expect("run desk");
    assert!(out.status.success(), "desk {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn paths(home: &Path) -> desk_common::paths::Paths {
    desk_common::paths::Paths { runtime: home.join("run"), state: home.join("state"), config: home.join("config") }
}

fn wait(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < end, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pick = |q: f64| v[((v.len() as f64 * q).ceil() as usize).saturating_sub(1).min(v.len() - 1)];
    (pick(0.5), pick(0.95), *v.last().unwrap())
}

fn start_agent(home: &Path, name: &str, work_ms: &str) {
    let log = home.join(format!("{name}.prompts"));
    desk(
        home,
        &[
            "new",
            name,
            "--provider",
            "demo",
            "--",
            agent_exe(),
            "--prompt-log",
            log.to_str().unwrap(),
            "--work-ms",
            work_ms,
        ],
    );
}

fn sessions(home: &Path) -> Vec<serde_json::Value> {
    let ls: serde_json::Value = serde_json::from_str(&desk(home, &["ls", "--json"])).unwrap();
    ls["data"].as_array().cloned().unwrap_or_default()
}

fn wait_all(home: &Path, names: &[String], what: &str, pred: impl Fn(&serde_json::Value) -> bool) {
    wait(what, Duration::from_secs(120), || {
        let all = sessions(home);
        names.iter().all(|n| all.iter().any(|s| s["name"] == n.as_str() && pred(s)))
    });
}

/// Whether the item of (message, member) is delivered, from its file.
fn delivered(home: &Path, msg: &Message, member: &str) -> bool {
    let id = delivery_item_id(&msg.id, msg.ts_ms, member);
    home.join("state/delivery/queue").join(member).join(format!("{id}.delivered")).exists()
}

/// The ids of every delivered item in these sessions' queues.
fn delivered_ids(home: &Path, sessions: &[String]) -> std::collections::HashSet<String> {
    let queue = home.join("state/delivery/queue");
    sessions
        .iter()
        .filter_map(|s| std::fs::read_dir(queue.join(s)).ok())
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".delivered").map(str::to_string))
        .collect()
}

/// The message with this id in the channel's root conversation.
fn message(store: &ChannelStore, channel: &ChannelName, id: &str) -> Message {
    let (msgs, _) = store.read(channel, None).unwrap();
    msgs.into_iter().find(|m| m.id.as_str() == id).expect("posted message")
}

struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let home = &self.0;
        let _ = Command::new(desk_exe()).env("DESK_HOME", home).args(["serve", "--stop"]).output();
        if let Ok(out) = Command::new(desk_exe()).env("DESK_HOME", home).args(["ls", "--json"]).output() {
            let ls: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            for s in ls["data"].as_array().cloned().unwrap_or_default() {
                if let Some(name) = s["name"].as_str() {
                    let _ = Command::new(desk_exe())
                        .env("DESK_HOME", home)
                        .args(["kill", name, "--signal", "KILL"])
                        .output();
                }
            }
        }
    }
}

fn home(prefix: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
    let home = tmp.path().to_path_buf();
    (tmp, home)
}

fn fan_out(runs: usize) {
    let (_tmp, home) = home("desk-bench-chan-fan");
    let _cleanup = Cleanup(home.clone());
    desk(&home, &["serve"]);
    let names: Vec<String> = (0..10).map(|i| format!("m{i:02}")).collect();
    for n in &names {
        start_agent(&home, n, "20");
    }
    wait_all(&home, &names, "members ready", |s| s["state"]["ready"] == true);
    desk(&home, &["channel", "new", "fan"]);
    for n in &names {
        desk(&home, &["channel", "add", "fan", n]);
    }
    let store = ChannelStore::open(&paths(&home)).unwrap();
    let channel = ChannelName::parse("fan").unwrap();
    let idle = |s: &serde_json::Value| s["state"]["activity"]["value"] == "idle";
    // The onboarding prompts first, so every probe meets idle agents.
    wait("onboarding delivered", Duration::from_secs(60), || {
        names.iter().all(|n| {
            std::fs::read_dir(home.join("state/delivery/queue").join(n))
                .is_ok_and(|d| d.flatten().all(|e| e.path().extension().is_some_and(|x| x == "delivered")))
        })
    });
    let mut wall = Vec::new();
    for i in 0..runs {
        wait_all(&home, &names, "members idle", idle);
        let t0 = Instant::now();
        let id = desk(&home, &["channel", "post", "fan", &format!("fan-out probe {i}")]).trim().to_string();
        let msg = message(&store, &channel, &id);
        wait("all 10 delivered", Duration::from_secs(30), || names.iter().all(|n| delivered(&home, &msg, n)));
        wall.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    let (m, p, x) = stats(wall);
    println!("## Post → delivered and verified in all 10 members' sessions\n");
    println!("10 idle demo agents in one channel; {runs} posts with `desk channel post`, one at a time.\n");
    println!("| measure | median ms | p95 ms | max ms |\n|---|---:|---:|---:|");
    println!(
        "| `desk channel post` start → all 10 items delivered (wall, polled every 2 ms) | {m:.1} | {p:.1} | {x:.1} |\n"
    );
}

/// What is attached to the daemon for the burst: `perf stat` and `perf record` (`--perf DIR`),
/// or `perf trace -s` (`--trace DIR`).
enum Watch {
    Perf(PathBuf),
    Trace(PathBuf),
}

/// The perf processes attached to the daemon for the burst.
struct Perf {
    children: Vec<std::process::Child>,
    counts: Option<PathBuf>,
}

impl Perf {
    fn attach(home: &Path, watch: &Watch) -> Perf {
        let lock = std::fs::read_to_string(home.join("state/delivery/serve.lock")).expect("the daemon's lock");
        let pid = lock.trim().to_string();
        let (Watch::Perf(dir) | Watch::Trace(dir)) = watch;
        std::fs::create_dir_all(dir).expect("perf output directory");
        let perf = |args: &[&str]| {
            Command::new("perf").args(args).stdout(std::process::Stdio::null()).spawn().expect("start perf")
        };
        let out = |name: &str| dir.join(name).to_string_lossy().into_owned();
        let (children, counts) = match watch {
            Watch::Perf(_) => {
                let events = "syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync";
                let counts = out("burst.fsyncs.txt");
                let stat = perf(&["stat", "-e", events, "-p", &pid, "-x", ",", "-o", &counts]);
                let record = perf(&["record", "-g", "-q", "-p", &pid, "-o", &out("burst.perf.data")]);
                (vec![stat, record], Some(PathBuf::from(counts)))
            }
            Watch::Trace(_) => (vec![perf(&["trace", "-s", "-p", &pid, "-o", &out("burst.trace.txt")])], None),
        };
        // Let them attach before the burst starts.
        std::thread::sleep(Duration::from_millis(500));
        Perf { children, counts }
    }

    /// Stop them; the daemon's fsync and fdatasync calls during the burst, when counted.
    fn finish(mut self) -> Option<u64> {
        for child in &mut self.children {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::SIGINT);
            let _ = child.wait();
        }
        let text = std::fs::read_to_string(self.counts.as_ref()?).unwrap_or_default();
        Some(text.lines().filter_map(|l| l.split(',').next()?.trim().parse::<u64>().ok()).sum())
    }
}

fn burst(watch: Option<&Watch>) {
    let (_tmp, home) = home("desk-bench-chan-burst");
    let _cleanup = Cleanup(home.clone());
    desk(&home, &["serve"]);
    let names: Vec<String> = (0..20).map(|i| format!("s{i:02}")).collect();
    for n in &names {
        start_agent(&home, n, "200");
    }
    wait_all(&home, &names, "sessions ready", |s| s["state"]["ready"] == true);
    let store = ChannelStore::open(&paths(&home)).unwrap();
    let channels: Vec<ChannelName> = (0..5).map(|k| ChannelName::parse(&format!("burst-{k}")).unwrap()).collect();
    let mut members: HashMap<ChannelName, Vec<String>> = HashMap::new();
    for (k, ch) in channels.iter().enumerate() {
        desk(&home, &["channel", "new", ch.as_str()]);
        for n in names.iter().skip(k * 4).take(4) {
            desk(&home, &["channel", "add", ch.as_str(), n]);
            members.entry(ch.clone()).or_default().push(n.clone());
        }
    }
    let perf = watch.map(|w| Perf::attach(&home, w));
    // 1,000 messages, round robin over the channels, as fast as the store appends them.
    let t0 = Instant::now();
    let t0_ms = desk_common::clock::now_ms();
    let mut posted: Vec<(ChannelName, Message)> = Vec::new();
    for i in 0..1000 {
        let ch = &channels[i % 5];
        let draft = Draft { author: "human".into(), thread: None, body: format!("burst message {i}") };
        let msg = store.post(ch, draft, desk_common::clock::now_ms()).expect("post");
        posted.push((ch.clone(), msg));
    }
    let appended = t0.elapsed().as_secs_f64();
    let pairs: Vec<(&Message, &String)> =
        posted.iter().flat_map(|(ch, m)| members[ch].iter().map(move |n| (m, n))).collect();
    let mut pending: Vec<(&Message, &String)> = pairs.clone();
    let deadline = Instant::now() + Duration::from_secs(900);
    // Polled by listing the 20 queue directories (not by a stat of every pending pair: 4,000
    // of those every 20 ms took a good part of a core from the daemon on a 2-core machine).
    while !pending.is_empty() {
        assert!(Instant::now() < deadline, "burst did not drain: {} pairs left", pending.len());
        let done = delivered_ids(&home, &names);
        pending.retain(|(m, n)| !done.contains(&delivery_item_id(&m.id, m.ts_ms, n).to_string()));
        std::thread::sleep(Duration::from_millis(20));
    }
    let drained = t0.elapsed().as_secs_f64();
    let fsyncs = perf.and_then(Perf::finish);
    // Ground truth: each pair in its agent's prompt log exactly once (prompts taken mid-turn
    // are logged when the agent's turn ends, so let the logs settle).
    let count = || {
        let logs: HashMap<&String, Vec<String>> = names
            .iter()
            .map(|n| {
                let log = desk_demo_agent::prompt_log::read_prompt_log(&home.join(format!("{n}.prompts")))
                    .unwrap_or_default();
                (n, log.into_iter().map(|r| r.prompt).collect())
            })
            .collect();
        let once = pairs
            .iter()
            .filter(|(m, n)| {
                logs[n].iter().map(|p| p.matches(&format!("message {}", m.id)).count()).sum::<usize>() == 1
            })
            .count();
        let digests: usize = logs.values().flatten().filter(|p| p.starts_with("You have ")).count();
        let prompts: usize = logs.values().map(Vec::len).sum();
        (once, digests, prompts)
    };
    let settle = Instant::now() + Duration::from_secs(120);
    let mut seen = count();
    while seen.0 < pairs.len() && Instant::now() < settle {
        std::thread::sleep(Duration::from_millis(100));
        seen = count();
    }
    let (once, digests, prompts) = seen;
    // What the agents themselves impose: each takes its prompts one turn (200 ms) at a time, so
    // a session's prompts need at least that many turns; and how long after one prompt the next
    // one was taken (a turn, plus the daemon's paste, verification and Enter when the agent was
    // waiting for it).
    let mut turns_bound = 0f64;
    let mut gaps: Vec<f64> = Vec::new();
    let mut last_taken = 0u64;
    for n in &names {
        let log = desk_demo_agent::prompt_log::read_prompt_log(&home.join(format!("{n}.prompts"))).unwrap_or_default();
        turns_bound = turns_bound.max(log.len() as f64 * 0.2);
        gaps.extend(log.windows(2).map(|w| w[1].ts_ms.saturating_sub(w[0].ts_ms) as f64));
        last_taken = last_taken.max(log.last().map_or(0, |r| r.ts_ms));
    }
    let (gap_median, gap_p95, _) = if gaps.is_empty() { (0.0, 0.0, 0.0) } else { stats(gaps) };
    println!("## Burst: 1,000 messages across 5 channels and 20 sessions\n");
    println!(
        "5 channels of 4 demo agents (200 ms turns); 1,000 root messages appended round robin in {appended:.2} s \
         ({} (message, member) pairs, plus 20 onboarding prompts).\n",
        pairs.len()
    );
    println!("| measure | value |\n|---|---:|");
    println!("| first append → every pair delivered and verified (time to drain) | {drained:.1} s |");
    println!("| prompts the agents received (digests among them) | {prompts} ({digests}) |");
    println!("| pairs in their agent's prompt log exactly once | {once} / {} |", pairs.len());
    println!("| the agents' own bound: the most prompts one session took × its 200 ms turn | {turns_bound:.1} s |");
    println!("| one prompt taken → the session's next taken (median / p95) | {gap_median:.0} / {gap_p95:.0} ms |");
    println!(
        "| first append → the last prompt taken by an agent | {:.1} s |",
        last_taken.saturating_sub(t0_ms) as f64 / 1000.0
    );
    if let Some(n) = fsyncs {
        println!(
            "| the daemon's fsync + fdatasync calls during the drain (per pair) | {n} ({:.2}) |",
            n as f64 / pairs.len() as f64
        );
    }
    println!();
}

fn read_big() {
    let (_tmp, home) = home("desk-bench-chan-read");
    // `desk channel post` starts the daemon: stopped when this part ends.
    let _cleanup = Cleanup(home.clone());
    desk(&home, &["channel", "new", "big"]);
    let store = ChannelStore::open(&paths(&home)).unwrap();
    let channel = ChannelName::parse("big").unwrap();
    // 10,000 records written in the channel's own format in one go (10,000 posts would each
    // re-read the growing file).
    let mut bytes = format::title("big", None).into_bytes();
    for i in 0..10_000u64 {
        let msg = Message {
            id: desk_common::ids::fresh_item_id(1_700_000_000_000 + i),
            author: format!("agent-{}", i % 7),
            ts_ms: 1_700_000_000_000 + i,
            thread: None,
            kind: Kind::Post,
            body: format!("message {i}: a line of ordinary length, about what a status update says.\nsecond line"),
        };
        bytes.extend(format::serialize(&msg));
    }
    std::fs::write(store.dir(&channel).join("root.md"), &bytes).unwrap();
    let size = bytes.len() as f64 / 1e6;
    let mut text = Vec::new();
    let mut json = Vec::new();
    let mut post = Vec::new();
    for _ in 0..20 {
        let t0 = Instant::now();
        let out = Command::new(desk_exe()).env("DESK_HOME", &home).args(["channel", "read", "big"]).output().unwrap();
        text.push(t0.elapsed().as_secs_f64() * 1000.0);
        assert!(out.status.success());
        let t0 = Instant::now();
        let out = Command::new(desk_exe())
            .env("DESK_HOME", &home)
            .args(["channel", "read", "big", "--json"])
            .output()
            .unwrap();
        json.push(t0.elapsed().as_secs_f64() * 1000.0);
        assert!(out.status.success());
    }
    for i in 0..20 {
        let t0 = Instant::now();
        desk(&home, &["channel", "post", "big", &format!("one more {i}")]);
        post.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    let (tm, tp, tx) = stats(text);
    let (jm, jp, jx) = stats(json);
    let (pm, pp, px) = stats(post);
    println!("## `desk channel read` of a 10,000-message channel ({size:.1} MB)\n");
    println!("| command (whole process, output to a pipe) | median ms | p95 ms | max ms |\n|---|---:|---:|---:|");
    println!("| `desk channel read big` | {tm:.1} | {tp:.1} | {tx:.1} |");
    println!("| `desk channel read big --json` | {jm:.1} | {jp:.1} | {jx:.1} |");
    println!("| `desk channel post big TEXT` (into that channel) | {pm:.1} | {pp:.1} | {px:.1} |\n");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs = args.iter().position(|a| a == "--runs").map_or(20, |i| args[i + 1].parse().expect("--runs N"));
    let exes = match args.iter().position(|a| a == "--desk") {
        Some(i) => {
            let dir = PathBuf::from(&args[i + 1]);
            println!("Executables: {}\n", dir.display());
            let path = |n: &str| dir.join(n).to_string_lossy().into_owned();
            (path("desk"), path("desk-demo-agent"))
        }
        None => (env!("CARGO_BIN_EXE_desk").to_string(), env!("CARGO_BIN_EXE_desk-demo-agent").to_string()),
    };
    EXES.set(exes).expect("set once");
    let dir = |flag: &str| args.iter().position(|a| a == flag).map(|i| PathBuf::from(&args[i + 1]));
    let watch = dir("--perf").map(Watch::Perf).or_else(|| dir("--trace").map(Watch::Trace));
    if !args.iter().any(|a| a == "--only-burst") {
        read_big();
        fan_out(runs);
    }
    if !args.iter().any(|a| a == "--skip-burst") {
        burst(watch.as_ref());
    }
}
