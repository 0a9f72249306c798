//! The fleet as a file: `desk up`, `desk down` and `desk restart` on a `desk.toml`, against
//! real sessions of the demo agent (restart with resume proven by the agent's own memory of its
//! earlier prompts), a manifest that is wrong (it changes nothing), `desk ls` showing the
//! declared sessions that are not running, and the manifest's first prompts and channels
//! (each prompt delivered once, a second `up` adding nothing).

use crate::support::{Home, eventually, prompts};
use std::path::Path;
use std::process::Output;

pub(crate) const DEMO: &str = env!("CARGO_BIN_EXE_desk-demo-agent");

/// A directory holding a `desk.toml`, and the home the tests run desk under.
pub(crate) struct Fleet {
    pub home: Home,
    pub dir: tempfile::TempDir,
}

impl Fleet {
    pub(crate) fn new(manifest: &str) -> Fleet {
        let fleet = Fleet {
            home: Home::new(),
            dir: tempfile::Builder::new().prefix("dkf").tempdir_in("/tmp").expect("temp dir"),
        };
        fleet.write(manifest);
        fleet
    }

    pub(crate) fn write(&self, manifest: &str) {
        std::fs::write(self.dir.path().join("desk.toml"), manifest).expect("write desk.toml");
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `desk ARGS` run in the manifest's directory.
    pub(crate) fn desk(&self, args: &[&str]) -> Output {
        self.home.cmd().current_dir(self.dir.path()).args(args).output().expect("run desk")
    }

    pub(crate) fn ok(&self, args: &[&str]) -> String {
        crate::support::succeeded(args, self.desk(args))
    }

    pub(crate) fn json(&self, args: &[&str]) -> serde_json::Value {
        serde_json::from_str(&self.ok(args)).expect("JSON")
    }
}

/// A demo agent session's manifest entry: quick turns, its prompts logged beside the manifest,
/// its transcripts in its own home.
pub(crate) fn demo_session(fleet_dir: &Path, name: &str, extra: &str) -> String {
    let log = fleet_dir.join(format!("{name}.prompts"));
    let home = fleet_dir.join("agent-home");
    format!(
        "[session.{name}]\nprovider = \"demo\"\ncommand = [\"{DEMO}\", \"--work-ms\", \"100\", \"--prompt-log\", \"{}\"]\nenv = {{ DESK_DEMO_AGENT_HOME = \"{}\" }}\n{extra}\n",
        log.display(),
        home.display()
    )
}

fn generation(home: &Home, name: &str) -> u64 {
    home.session(name).and_then(|s| s["generation"].as_u64()).unwrap_or(0)
}

#[test]
fn an_invalid_manifest_names_file_line_and_column_and_changes_nothing() {
    let fleet = Fleet::new("");
    let good = demo_session(fleet.path(), "a", "");
    fleet.write(&format!("{good}\n[session.b]\nprovider = \"demo\"\ncomand = [\"x\"]\n"));
    let out = fleet.desk(&["up"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let file = fleet.path().join("desk.toml").canonicalize().unwrap();
    let line = good.lines().count() + 4;
    assert!(err.contains(&format!("{}:{line}:1: unknown field `comand`, expected one of", file.display())), "{err}");
    assert!(fleet.home.ls().is_empty(), "a manifest with an error starts nothing");
    // Valid TOML, but the second session's directory does not exist: the first does not start
    // either.
    fleet.write(&format!("{good}\n[session.b]\nprovider = \"demo\"\ncwd = \"no/such/dir\"\n"));
    let out = fleet.desk(&["up"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("working directory"), "{out:?}");
    assert!(fleet.home.ls().is_empty());
    // No manifest at all: where desk looked.
    std::fs::remove_file(fleet.path().join("desk.toml")).unwrap();
    let out = fleet.desk(&["up"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no desk.toml in"), "{out:?}");
}

#[test]
fn up_starts_what_is_missing_a_second_up_does_nothing_and_a_change_is_reported_not_applied() {
    let fleet = Fleet::new("");
    let manifest = format!("{}{}", demo_session(fleet.path(), "a", ""), demo_session(fleet.path(), "b", ""));
    fleet.write(&manifest);
    let plan = fleet.ok(&["up", "--dry-run"]);
    assert!(plan.contains("a: would start") && plan.contains("b: would start"), "{plan}");
    assert!(fleet.home.ls().is_empty(), "--dry-run starts nothing");
    let out = fleet.ok(&["up"]);
    assert!(out.contains("a: started (generation 1), a fresh conversation: its first start"), "{out}");
    assert_eq!(fleet.home.ls().len(), 2);
    let again = fleet.ok(&["up"]);
    assert_eq!(
        again.trim(),
        format!(
            "nothing to do: 2 session(s) of {} run as declared",
            fleet.path().join("desk.toml").canonicalize().unwrap().display()
        )
    );
    // Only what is missing starts: b stopped, up starts b alone.
    fleet.home.ok(&["kill", "b"]);
    let out = fleet.ok(&["up"]);
    assert!(out.contains("a: runs as declared (generation 1)") && out.contains("b: started (generation 2"), "{out}");
    // A changed declaration is reported and left alone; --recreate applies it.
    fleet.write(&manifest.replacen("\"100\"", "\"150\"", 1));
    let out = fleet.ok(&["up"]);
    assert!(out.contains("a: runs, but not as declared (command: runs `"), "{out}");
    assert!(out.contains("left alone (desk up --recreate a restarts it)"), "{out}");
    assert_eq!(generation(&fleet.home, "a"), 1);
    let out = fleet.ok(&["up", "--recreate"]);
    assert!(out.contains("a: recreated (generation 2"), "{out}");
    let a = fleet.home.session("a").unwrap();
    assert!(a["command"].as_array().unwrap().iter().any(|w| w == "150"), "{a}");
    assert_eq!(fleet.ok(&["up"]).lines().count(), 1, "converged again");
}

#[test]
fn down_stops_the_declared_sessions_and_ls_shows_them_down_with_the_undeclared_untouched() {
    let fleet = Fleet::new("");
    fleet.write(&format!("{}{}", demo_session(fleet.path(), "a", ""), demo_session(fleet.path(), "b", "")));
    // Only a starts; b is declared and shown down.
    fleet.ok(&["up", "a"]);
    fleet.home.new_sh("other", "sleep 600");
    let b = fleet.home.session("b").expect("b is listed though it never ran");
    assert_eq!(b["status"], "down");
    assert!(b["note"].as_str().unwrap().contains("not started yet (desk up)"), "{b}");
    let out = fleet.ok(&["down"]);
    assert!(out.contains("b: not running"), "{out}");
    let a = fleet.home.session("a").unwrap();
    assert_eq!(a["status"], "down");
    assert_eq!(a["fleet"]["health"], "stopped by desk down");
    assert_eq!(fleet.home.session("other").unwrap()["status"], "running", "down stops only declared sessions");
    let table = fleet.home.ok(&["ls"]);
    let row = table.lines().find(|l| l.starts_with("a ")).unwrap();
    assert!(row.contains("down: killed(TERM)") || row.contains("down: exited(143)"), "{table}");
    assert!(row.contains("stopped by desk down"), "{table}");
    assert_eq!(fleet.ok(&["down"]).matches("not running").count(), 2, "a second down does nothing");
}

/// Wait until the session's screen shows `text`.
pub(crate) fn screen_has(home: &Home, name: &str, text: &str) -> String {
    home.wait_screen(name, text)
}

#[test]
fn restart_resumes_the_agents_conversation_and_fresh_does_not() {
    let fleet = Fleet::new("");
    fleet.write(&demo_session(fleet.path(), "a", ""));
    fleet.ok(&["up"]);
    fleet.home.serve();
    fleet.home.wait_ready("a");
    let log = fleet.path().join("a.prompts");
    let id = fleet.home.send("a", "remember the word pineapple");
    assert_eq!(fleet.home.settled(&id)["state"], "delivered");
    eventually("the prompt logged", || {
        if prompts(&log).len() == 1 { Ok(()) } else { Err(format!("{:?}", prompts(&log))) }
    });
    let captured = eventually("the conversation captured from the agent's SessionStart hook", || {
        let a = fleet.home.session("a").ok_or("no session")?;
        a["fleet"]["conversation"]["id"].as_str().map(String::from).ok_or(a.to_string())
    });
    let out = fleet.ok(&["restart", "a"]);
    assert!(
        out.contains(&format!("a: restarted (generation 2), resumed conversation {captured} of generation 1")),
        "{out}"
    );
    screen_has(&fleet.home, "a", "↺ Resumed the conversation: 1 earlier prompt(s)");
    screen_has(&fleet.home, "a", "  > remember the word pineapple");
    fleet.home.wait_ready("a");
    let id = fleet.home.send("a", "please recall");
    assert_eq!(fleet.home.settled(&id)["state"], "delivered");
    screen_has(&fleet.home, "a", "● Earlier in this conversation: remember the word pineapple");
    let a = fleet.home.session("a").unwrap();
    assert_eq!(a["fleet"]["start"]["resume"], "resume");
    assert_eq!(a["fleet"]["start"]["conversation"], captured.as_str());
    assert_eq!(a["fleet"]["start"]["from_generation"], 1);
    assert!(fleet.home.ok(&["ls"]).contains(&format!("running ↺ {}", &captured[..8])));
    // --fresh: a new conversation, the old one not shown.
    let out = fleet.ok(&["restart", "a", "--fresh"]);
    assert!(out.contains("a: restarted (generation 3), a fresh conversation: --fresh"), "{out}");
    let screen = screen_has(&fleet.home, "a", "Type a prompt");
    assert!(!screen.contains("Resumed"), "{screen}");
    let fresh = eventually("the new conversation captured", || {
        let a = fleet.home.session("a").ok_or("no session")?;
        let c = &a["fleet"]["conversation"];
        if c["generation"] == 3 { c["id"].as_str().map(String::from).ok_or(a.to_string()) } else { Err(a.to_string()) }
    });
    assert_ne!(fresh, captured);
}

#[test]
fn a_restart_after_clear_resumes_the_conversation_clear_began() {
    let fleet = Fleet::new("");
    fleet.write(&demo_session(fleet.path(), "a", ""));
    fleet.ok(&["up"]);
    fleet.home.serve();
    fleet.home.wait_ready("a");
    for text in ["before the clear", "/clear", "after the clear"] {
        let id = fleet.home.send("a", text);
        assert_eq!(fleet.home.settled(&id)["state"], "delivered", "{text}");
        fleet.home.wait_activity("a", "idle");
    }
    eventually("the capture follows /clear", || {
        let a = fleet.home.session("a").ok_or("no session")?;
        if a["fleet"]["conversation"]["source"] == "SessionStart(clear)" { Ok(()) } else { Err(a.to_string()) }
    });
    fleet.ok(&["restart", "a"]);
    let screen = screen_has(&fleet.home, "a", "↺ Resumed the conversation: 1 earlier prompt(s)");
    assert!(screen.contains("  > after the clear") && !screen.contains("  > before the clear"), "{screen}");
}

#[test]
fn restart_of_a_session_no_manifest_declares_uses_its_own_launch_record() {
    // The demo agent keeps its conversations under DESK_HOME (as under `make demo`): a restart
    // looks for them there too.
    let home = Home::new();
    home.ok(&["new", "solo", "--provider", "demo", "--size", "100x30", "--", DEMO, "--work-ms", "100"]);
    home.serve();
    home.wait_ready("solo");
    let id = home.send("solo", "a thing to remember");
    assert_eq!(home.settled(&id)["state"], "delivered");
    eventually("captured", || {
        let s = home.session("solo").ok_or("no session")?;
        if s["fleet"]["conversation"]["id"].is_string() { Ok(()) } else { Err(s.to_string()) }
    });
    let out = home.ok(&["restart", "solo"]);
    assert!(out.contains("resumed conversation"), "{out}");
    home.wait_screen("solo", "  > a thing to remember");
    let solo = home.session("solo").unwrap();
    assert_eq!((solo["cols"].as_u64(), solo["rows"].as_u64()), (Some(100), Some(30)), "its size kept");
    assert_eq!(solo["generation"], 2);
}

/// What the delivery store holds: per session of `names`, its items whatever their state (one
/// file each under `delivery/queue/NAME/`), and the intake's files, pending or ingested (an
/// ingested one is kept as a tombstone): every prompt `desk up` or `desk send` ever wrote.
fn stored(home: &Home, names: &[&str]) -> (Vec<usize>, usize) {
    let count = |dir: std::path::PathBuf| std::fs::read_dir(dir).map(|d| d.flatten().count()).unwrap_or(0);
    let delivery = home.path().join("state/delivery");
    (names.iter().map(|n| count(delivery.join("queue").join(n))).collect(), count(delivery.join("intake")))
}

/// How many times `text` is in the prompt log: in the prompts the agent received, alone or in
/// a digest of several pending items (the engine delivers those as one prompt).
fn received(log: &Path, text: &str) -> usize {
    prompts(log).iter().map(|p| p.matches(text).count()).sum()
}

#[test]
fn up_delivers_each_declared_prompt_once_creates_the_channel_and_a_second_up_queues_nothing() {
    let fleet = Fleet::new("");
    let a = demo_session(
        fleet.path(),
        "a",
        "prompts = [{ text = \"a first: read the notes\" }, { text = \"a then: when idle\", when = \"idle\" }]",
    );
    let b = demo_session(fleet.path(), "b", "prompts = [{ text = \"b only: check the build\" }]");
    let channel =
        "[channel.crew]\ngoal = \"ship the fix\"\nmembers = [\"a\"]\nsupervisors = [\"b\"]\nhumans = [\"alice\"]\n";
    fleet.write(&format!("{a}{b}{channel}"));
    // As a user runs it: `desk up` starts the daemon that delivers the prompts itself.
    let up = || {
        let out = fleet
            .home
            .cmd()
            .current_dir(fleet.path())
            .env_remove("DESK_AUTOSTART")
            .args(["up", "--json"])
            .output()
            .expect("run desk up");
        serde_json::from_str::<serde_json::Value>(&crate::support::succeeded(&["up", "--json"], out)).expect("JSON")
    };
    let first = up();
    let outcome = |v: &serde_json::Value, name: &str| {
        v["data"]["sessions"].as_array().unwrap().iter().find(|s| s["name"] == name).cloned().unwrap()
    };
    assert_eq!(outcome(&first, "a")["outcome"], "started", "{first:#}");
    assert_eq!(outcome(&first, "a")["prompts_queued"], 2, "{first:#}");
    assert_eq!(outcome(&first, "b")["prompts_queued"], 1, "{first:#}");
    assert_eq!(first["data"]["channels"][0]["name"], "crew");
    assert_eq!(first["data"]["channels"][0]["created"], true);
    assert_eq!(first["data"]["channels"][0]["added"], serde_json::json!(["a", "b", "alice"]), "{first:#}");
    assert_eq!(first["data"]["daemon_started"], true);
    assert_eq!(first["notes"].to_string().matches("started desk serve").count(), 1, "{first:#}");

    // Each declared prompt arrives, and the members' onboarding (a worker and a supervisor).
    let (log_a, log_b) = (fleet.path().join("a.prompts"), fleet.path().join("b.prompts"));
    let settled = || {
        eventually("every prompt delivered and nothing left queued", || {
            let pending = fleet.home.json(&["queue", "--json"])["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|q| q["items"].as_array().map_or(0, Vec::len) + q["intake"].as_array().map_or(0, Vec::len))
                .sum::<usize>();
            let logged = (prompts(&log_a), prompts(&log_b));
            let all_in = received(&log_a, "a first: read the notes") > 0
                && received(&log_a, "a then: when idle") > 0
                && received(&log_b, "b only: check the build") > 0
                && received(&log_a, "you joined as worker") > 0
                && received(&log_b, "you joined as supervisor") > 0;
            if pending == 0 && all_in { Ok(()) } else { Err(format!("{pending} pending; logged {logged:#?}")) }
        })
    };
    settled();
    let before = stored(&fleet.home, &["a", "b"]);
    assert_eq!(before, (vec![3, 2], 3), "a: two prompts and its onboarding, b: one and its onboarding; 3 from up");
    let members = fleet.home.ok(&["channel", "read", "crew"]);
    for join in ["a joined #crew as worker", "b joined #crew as supervisor", "alice joined #crew as human"] {
        assert_eq!(members.matches(join).count(), 1, "{join}:\n{members}");
    }

    // A second up: nothing to do, nothing queued, nobody joins again.
    let second = up();
    assert!(["a", "b"].iter().all(|n| outcome(&second, n)["outcome"] == "running"), "{second:#}");
    assert!(["a", "b"].iter().all(|n| outcome(&second, n)["prompts_queued"] == 0), "{second:#}");
    assert_eq!(second["data"]["channels"][0]["created"], false);
    assert_eq!(second["data"]["channels"][0]["added"], serde_json::json!([]), "{second:#}");
    assert_eq!(second["data"]["daemon_started"], false);
    assert!(second["notes"].as_array().is_none_or(Vec::is_empty), "{second:#}");
    settled();
    assert_eq!(stored(&fleet.home, &["a", "b"]), before, "the second up stored nothing");
    for (log, text) in
        [(&log_a, "a first: read the notes"), (&log_a, "a then: when idle"), (&log_b, "b only: check the build")]
    {
        assert_eq!(received(log, text), 1, "{text:?} in {:#?}", prompts(log));
    }
    assert_eq!(received(&log_a, "#crew · you joined as worker"), 1, "{:#?}", prompts(&log_a));
    assert_eq!(received(&log_b, "#crew · you joined as supervisor"), 1, "{:#?}", prompts(&log_b));
    assert_eq!(fleet.home.ok(&["channel", "read", "crew"]), members, "no second join");
}

/// `desk ARGS` under `home` with `input` on its standard input.
fn with_stdin(home: &Home, args: &[&str], input: &str) -> Output {
    use std::io::Write as _;
    let mut child = home
        .cmd()
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run desk");
    // A desk that refuses its arguments exits without reading: the write then meets a closed
    // pipe, which is not the test's failure (what desk said is).
    let _ = child.stdin.take().expect("stdin").write_all(input.as_bytes());
    child.wait_with_output().expect("wait for desk")
}

#[test]
fn a_host_keeps_the_sessions_another_machine_sent_and_refuses_a_text_it_cannot_read_keeping_the_last() {
    // What another machine's `desk up` sends this desk as a host (docs/fleet.md).
    let home = Home::new();
    let good = "[session.\"sent\"]\ncommand = [\"sh\", \"-c\", \"exec sleep 600\"]\ncwd = \"~\"\n".to_string();
    let out = with_stdin(&home, &["up", "--manifest-stdin", "laptop-0011", "--json"], &good);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let kept = home.path().join("state/fleet/hosted/laptop-0011.toml");
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), good);
    assert_eq!(home.session("sent").unwrap()["fleet"]["manifest"], kept.to_str().unwrap());
    // A text it cannot read: refused before anything, and the copy it had is kept.
    let out = with_stdin(&home, &["down", "--manifest-stdin", "laptop-0011"], "[session.x]\nhost = 5\n");
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("the sessions another machine's desk sent cannot be read here"), "{said}");
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), good);
    assert_eq!(home.session("sent").unwrap()["status"], "running");
    // A dry run changes nothing, and leaves no file behind.
    let out =
        with_stdin(&home, &["up", "--manifest-stdin", "laptop-0011", "--dry-run"], &good.replace("sent", "other"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("other: would start"), "{out:?}");
    let files: Vec<_> = std::fs::read_dir(kept.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(files, [std::ffi::OsString::from("laptop-0011.toml")]);
    // An origin that is no file name is a usage error.
    let out = with_stdin(&home, &["up", "--manifest-stdin", "../x"], &good);
    assert_eq!(out.status.code(), Some(2));
    home.ok(&["kill", "sent"]);
}
