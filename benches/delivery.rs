//! `make bench` (delivery part): how long a prompt takes from `desk send` to verified delivery.
//!
//! Two measurements against the demo agent in real sessions under `desk serve`:
//! - latency: one session, prompts sent one at a time; for each, the time from starting
//!   `desk send` to the item's `.delivered` record being put in place (an inotify event heard
//!   by a thread, not a poll), how long `desk send` itself ran, desk's own record (the item's
//!   `delivered` evidence minus its creation time), and where the time went (each evidence
//!   note's median time from the item's creation);
//! - fleet: 20 sessions × 20 prompts sent as fast as the CLI goes; the time until all 400 are
//!   delivered, and the per-item latency desk recorded (items released together are delivered
//!   as one digest, as intended);
//! - send rate: 1,000 `desk send`s from a shell loop (one process each, as a script sends) to
//!   a paused session, so delivery does not compete; prompts accepted (durable in the intake,
//!   and queued by the daemon: `desk send` waits for that) per second, and the check that all
//!   1,000 are queued.
//!
//! Options: `--runs N` (latency samples, default 40), `--desk DIR` (measure another build's
//! `desk`, `desk-master` and `desk-demo-agent`, say main's before a change, instead of this
//! build's: run it before or after the plain run to compare the two in one sitting),
//! `--latency-only` (the latency part alone). A prompt whose wall time is more than 4× the
//! median is printed with its evidence, each note's time from the item's creation: where an
//! outlier waited.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The executables measured: this build's, or those in `--desk DIR`.
static EXES: std::sync::OnceLock<(PathBuf, PathBuf)> = std::sync::OnceLock::new();

fn exe(name: &str) -> PathBuf {
    let (desk, agent) = EXES.get().expect("executables chosen in main");
    if name == "desk" { desk.clone() } else { agent.clone() }
}

fn desk(home: &Path, args: &[&str]) -> String {
    let out = Command::new(exe("desk")).env("DESK_HOME", home).args(args).output().expect("run desk");
    assert!(out.status.success(), "desk {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn item(home: &Path, id: &str) -> serde_json::Value {
    let socket = desk_common::daemon_client::socket_path(&paths(home));
    let Some(id) = desk_wire::names::ItemId::parse(id) else { return serde_json::Value::Null };
    let req = desk_wire::control::Request::Item { id };
    let resp = desk_common::daemon_client::request(&socket, &req, Duration::from_secs(5)).ok();
    resp.and_then(|r| r.into_answer::<serde_json::Value>().ok()).map(|a| a.data).unwrap_or_default()
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

/// desk's own record: the `delivered` note's time minus the item's creation time.
fn recorded_ms(item: &serde_json::Value) -> Option<f64> {
    let created = item["created_ms"].as_f64()?;
    let done = item["evidence"].as_array()?.iter().find(|n| n["kind"] == "delivered")?["at_ms"].as_f64()?;
    Some(done - created)
}

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pick = |q: f64| v[((v.len() as f64 * q).ceil() as usize).saturating_sub(1).min(v.len() - 1)];
    (pick(0.5), pick(0.95), *v.last().unwrap())
}

fn start_agent(home: &Path, name: &str, extra: &[&str]) {
    let log = home.join(format!("{name}.prompts"));
    let agent = exe("agent");
    let mut args =
        vec!["new", name, "--provider", "demo", "--", agent.to_str().unwrap(), "--prompt-log", log.to_str().unwrap()];
    args.extend(extra);
    desk(home, &args);
}

fn wait_ready(home: &Path, name: &str) {
    wait(&format!("{name} ready"), Duration::from_secs(30), || {
        let ls: serde_json::Value = serde_json::from_str(&desk(home, &["ls", "--json"])).unwrap();
        ls["data"].as_array().unwrap().iter().any(|s| s["name"] == name && s["state"]["ready"] == true)
    });
}

fn wait_idle(home: &Path) {
    wait("idle", Duration::from_secs(30), || {
        let ls: serde_json::Value = serde_json::from_str(&desk(home, &["ls", "--json"])).unwrap();
        ls["data"].as_array().unwrap().iter().any(|s| s["name"] == "lat" && s["state"]["activity"]["value"] == "idle")
    });
}

/// The moments items' `.delivered` records are put in place in a queue directory, heard from
/// inotify by a thread of their own (each stamped when it comes, whatever the bench is doing):
/// the end of the latency measure is an event, not a poll.
struct Delivered {
    events: std::sync::mpsc::Receiver<(String, Instant)>,
}

impl Delivered {
    fn watch(dir: &Path) -> Delivered {
        use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC).expect("inotify");
        inotify.add_watch(dir, AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_CREATE).expect("watch the queue");
        let (tx, events) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            while let Ok(batch) = inotify.read_events() {
                let at = Instant::now();
                for e in batch {
                    let Some(name) = e.name.and_then(|n| n.into_string().ok()) else { continue };
                    if let Some(id) = name.strip_suffix(".delivered")
                        && tx.send((id.to_string(), at)).is_err()
                    {
                        return;
                    }
                }
            }
        });
        Delivered { events }
    }

    /// When item `id`'s record became `.delivered`.
    fn wait(&self, id: &str, limit: Duration) -> Instant {
        let end = Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok((got, at)) if got == id => return at,
                Ok(_) => {}
                Err(_) => panic!("timed out: {id} delivered"),
            }
        }
    }
}

/// Stops the daemon and kills every session of the bench's home when dropped, so that a panic
/// mid-bench (or a closed stdout) does not leave a fleet running.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        cleanup(&self.0);
    }
}

fn cleanup(home: &PathBuf) {
    let _ = Command::new(exe("desk")).env("DESK_HOME", home).args(["serve", "--stop"]).output();
    if let Ok(out) = Command::new(exe("desk")).env("DESK_HOME", home).args(["ls", "--json"]).output() {
        let ls: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        for s in ls["data"].as_array().cloned().unwrap_or_default() {
            if let Some(name) = s["name"].as_str() {
                let _ =
                    Command::new(exe("desk")).env("DESK_HOME", home).args(["kill", name, "--signal", "KILL"]).output();
            }
        }
    }
}

type Stat = (f64, f64, f64);

fn print_latency(
    runs: usize,
    wall: Stat,
    send: Stat,
    recorded: Stat,
    steps: std::collections::BTreeMap<String, Vec<f64>>,
) {
    let ((wm, wp, wx), (sm, sp, sx), (rm, rp, rx)) = (wall, send, recorded);
    println!("## Delivery latency\n");
    println!(
        "Demo agent in a real session under `desk serve`; {runs} prompts, one at a time, each to an idle agent.\n"
    );
    println!("| measure | median ms | p95 ms | max ms |\n|---|---|---|---|");
    println!(
        "| `desk send` start → the item's `.delivered` record in place (wall, an inotify event) | {wm:.1} | {wp:.1} | {wx:.1} |"
    );
    println!("| `desk send` start → its process exits (the item queued) | {sm:.1} | {sp:.1} | {sx:.1} |");
    println!("| item created → delivered (desk's own record) | {rm:.1} | {rp:.1} | {rx:.1} |");
    println!("\nWhere the time goes (median ms from the start named, over the {runs} prompts):\n");
    println!("| step | median ms |\n|---|---:|");
    let mut order: Vec<(f64, String)> = steps
        .into_iter()
        .map(|(step, v)| (stats(v).0 + if step.starts_with('0') { -1e9 } else { 0.0 }, step))
        .collect();
    order.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
    for (median, step) in order {
        let median = if median < -1e8 { median + 1e9 } else { median };
        println!("| {} | {median:.1} |", &step[2..]);
    }
}

/// Every probe whose wall time is more than 4× the median, with its evidence notes (time from
/// the item's creation, kind, detail): where it waited.
fn print_outliers(median: f64, probes: &[(f64, serde_json::Value)]) {
    let slow: Vec<_> = probes.iter().filter(|(wall, _)| *wall > 4.0 * median).collect();
    if slow.is_empty() {
        return;
    }
    println!("\n{} of {} prompts took more than 4× the median (wall):\n", slow.len(), probes.len());
    for (wall, item) in slow {
        let created = item["created_ms"].as_f64().unwrap_or(f64::NAN);
        println!("- {} ({wall:.1} ms wall):", item["id"].as_str().unwrap_or("?"));
        for note in item["evidence"].as_array().into_iter().flatten() {
            let at = note["at_ms"].as_f64().unwrap_or(f64::NAN) - created;
            let detail = note["detail"].as_str().unwrap_or("");
            println!("  - +{at:.0} ms {}: {detail}", note["kind"].as_str().unwrap_or("?"));
        }
    }
}

fn main() {
    let mut runs = 40;
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--runs") {
        runs = args[i + 1].parse().expect("--runs N");
    }
    let exes = match args.iter().position(|a| a == "--desk") {
        Some(i) => {
            let dir = PathBuf::from(&args[i + 1]);
            println!("Executables: {}", dir.display());
            (dir.join("desk"), dir.join("desk-demo-agent"))
        }
        None => (PathBuf::from(env!("CARGO_BIN_EXE_desk")), PathBuf::from(env!("CARGO_BIN_EXE_desk-demo-agent"))),
    };
    EXES.set(exes).expect("set once");
    let latency_only = args.iter().any(|a| a == "--latency-only");
    let tmp = tempfile::Builder::new().prefix("desk-bench-delivery").tempdir().unwrap();
    let home = tmp.path().to_path_buf();
    let _cleanup = Cleanup(home.clone());
    desk(&home, &["serve"]);

    // Latency: one idle agent, one prompt at a time (the agent's turn is short).
    start_agent(&home, "lat", &["--work-ms", "20"]);
    wait_ready(&home, "lat");
    // One prompt first, unmeasured: its queue directory exists from then on, and is watched.
    let warm = desk(&home, &["send", "lat", "latency warm-up"]).trim().to_string();
    wait("warm-up delivery", Duration::from_secs(30), || item(&home, &warm)["state"] == "delivered");
    wait_idle(&home);
    let delivered = Delivered::watch(&home.join("state/delivery/queue/lat"));
    let mut wall = Vec::new();
    let mut recorded = Vec::new();
    let mut send_ms = Vec::new();
    let mut steps: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    let mut probes: Vec<(f64, serde_json::Value)> = Vec::new();
    for i in 0..runs {
        let started_ms = desk_common::clock::now_ms() as f64;
        let t0 = Instant::now();
        let id = desk(&home, &["send", "lat", &format!("latency probe number {i}")]).trim().to_string();
        send_ms.push(t0.elapsed().as_secs_f64() * 1000.0);
        let at = delivered.wait(&id, Duration::from_secs(30));
        wall.push(at.duration_since(t0).as_secs_f64() * 1000.0);
        let done = item(&home, &id);
        assert_eq!(done["state"], "delivered", "{id}: its .delivered file came, its record says otherwise");
        recorded.push(recorded_ms(&done).unwrap_or(f64::NAN));
        probes.push((*wall.last().expect("just pushed"), done.clone()));
        // Where the time went: `desk send`'s start until it stamped the item, then each note
        // of the item's evidence, from the item's creation.
        if let Some(created) = done["created_ms"].as_f64() {
            steps.entry("0 `desk send` started → item created".into()).or_default().push(created - started_ms);
            let mut seen = std::collections::HashSet::new();
            for note in done["evidence"].as_array().into_iter().flatten() {
                let (Some(kind), Some(at)) = (note["kind"].as_str(), note["at_ms"].as_f64()) else { continue };
                if seen.insert(kind.to_string()) {
                    steps.entry(format!("1 item created → {kind}")).or_default().push(at - created);
                }
            }
        }
        // Let the turn end so every probe meets an idle agent.
        wait_idle(&home);
    }
    let (sm, sp, sx) = stats(send_ms);
    let (wm, wp, wx) = stats(wall);
    let (rm, rp, rx) = stats(recorded);
    print_latency(runs, (wm, wp, wx), (sm, sp, sx), (rm, rp, rx), steps);
    print_outliers(wm, &probes);
    if latency_only {
        return;
    }

    // Fleet: 20 sessions × 20 prompts.
    let names: Vec<String> = (0..20).map(|i| format!("f{i:02}")).collect();
    for n in &names {
        start_agent(&home, n, &["--work-ms", "200"]);
    }
    for n in &names {
        wait_ready(&home, n);
    }
    let t0 = Instant::now();
    let mut ids = Vec::new();
    for round in 0..20 {
        for n in &names {
            ids.push(desk(&home, &["send", n, &format!("fleet prompt {round} for {n}")]).trim().to_string());
        }
    }
    let sent = t0.elapsed().as_secs_f64();
    let mut fleet_recorded = Vec::new();
    for id in &ids {
        let mut done = serde_json::Value::Null;
        wait("fleet delivery", Duration::from_secs(300), || {
            done = item(&home, id);
            done["state"] == "delivered"
        });
        fleet_recorded.push(recorded_ms(&done).unwrap_or(f64::NAN));
    }
    let all = t0.elapsed().as_secs_f64();
    let digests =
        ids.iter().filter(|id| item(&home, id)["digest_with"].as_array().is_some_and(|d| !d.is_empty())).count();
    let (fm, fp, fx) = stats(fleet_recorded);
    // Ground truth: every prompt is in its agent's prompt log exactly once. Prompts delivered
    // mid-turn sit in the agent's own queue until its turns end, so give the logs time to settle.
    let count_exact = || {
        let mut exact = 0;
        for n in &names {
            let log =
                desk_demo_agent::prompt_log::read_prompt_log(&home.join(format!("{n}.prompts"))).unwrap_or_default();
            let lines: Vec<&str> = log.iter().flat_map(|r| r.prompt.lines()).map(str::trim_end).collect();
            // A digest carries several prompts, each on its own line.
            exact += (0..20)
                .filter(|round| {
                    let text = format!("fleet prompt {round} for {n}");
                    lines.iter().filter(|l| l.ends_with(&text)).count() == 1
                })
                .count();
        }
        exact
    };
    let settle = Instant::now() + Duration::from_secs(60);
    let mut exact = count_exact();
    while exact < ids.len() && Instant::now() < settle {
        std::thread::sleep(Duration::from_millis(50));
        exact = count_exact();
    }
    cleanup(&home);

    // Send rate: a script's loop of `desk send`, to a paused session (each send says the queue
    // is held, on stderr: not measured).
    let tmp2 = tempfile::Builder::new().prefix("desk-bench-send").tempdir().unwrap();
    let home2 = tmp2.path().to_path_buf();
    let _cleanup2 = Cleanup(home2.clone());
    desk(&home2, &["serve"]);
    start_agent(&home2, "rate", &["--work-ms", "20"]);
    wait_ready(&home2, "rate");
    desk(&home2, &["pause", "rate", "--reason", "bench: queue only"]);
    let script = "i=0; while [ $i -lt 1000 ]; do \"$DESK\" send rate \"scripted prompt $i\" >/dev/null 2>&1 || exit 1; i=$((i+1)); done";
    let t0 = Instant::now();
    let status = Command::new("sh")
        .args(["-c", script])
        .env("DESK", exe("desk"))
        .env("DESK_HOME", &home2)
        .status()
        .expect("run the send loop");
    let send_s = t0.elapsed().as_secs_f64();
    assert!(status.success(), "the send loop failed");
    let queue: serde_json::Value = serde_json::from_str(&desk(&home2, &["queue", "rate", "--json"])).unwrap();
    let queued: usize = queue["data"]
        .as_array()
        .map(|qs| qs.iter().map(|q| q["items"].as_array().map_or(0, Vec::len)).sum())
        .unwrap_or(0);
    cleanup(&home2);

    println!("\n## Fleet: 20 sessions × 20 prompts\n");
    println!(
        "400 prompts sent with `desk send` in {sent:.1} s; all delivered (verified) {all:.1} s after the first send."
    );
    println!("{digests} of the 400 were delivered inside digests (items released together become one prompt).");
    println!("{exact} of the 400 are in their agent's prompt log exactly once.\n");
    println!("| measure | median ms | p95 ms | max ms |\n|---|---|---|---|");
    println!("| item created → delivered (desk's own record) | {fm:.1} | {fp:.1} | {fx:.1} |");
    println!("\n## `desk send` from a script: 1,000 prompts\n");
    println!(
        "1,000 `desk send` processes one after another (a shell loop) to a paused session: {send_s:.1} s, \
         **{:.0} prompts/s** accepted; {queued} of 1,000 queued.",
        1000.0 / send_s
    );
}
