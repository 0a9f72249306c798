//! The daemon's restart supervisor against real sessions: the crash-loop limit with a command
//! that exits at once, what is never restarted (the operator's stop, a rate-limit exit, an
//! agent refusing the conversation it was given), a daemon killed mid-backoff that restarts
//! nothing twice, and a queued prompt following the session into its new generation. The
//! supervisor's times are compressed (`DESK_SUPERVISE_COMPRESS`, honoured by the tests'
//! failpoints build only) so that minutes of backoff play out in milliseconds.

use crate::support::{Home, eventually, prompts};
use crate::up::{DEMO, Fleet, demo_session};

/// Every supervisor time divided by this: the first restart after 10 ms, the fleet's
/// one-a-minute slot 600 ms, the crash-loop window 3 s.
const COMPRESS: &str = "100";

/// `desk up`, letting it start `desk serve` (the supervisor) as it does for a user: the daemon
/// inherits the compressed times.
fn up(fleet: &Fleet) {
    let out = fleet
        .home
        .cmd()
        .current_dir(fleet.path())
        .env_remove("DESK_AUTOSTART")
        .env("DESK_SUPERVISE_COMPRESS", COMPRESS)
        .arg("up")
        .output()
        .unwrap();
    assert!(out.status.success(), "desk up: {}", String::from_utf8_lossy(&out.stderr));
}

/// The supervisor's state of `name`, as the daemon persisted it.
fn supervised(home: &Home, name: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(home.path().join("state/fleet/supervisor.json")).unwrap_or_default();
    serde_json::from_str::<serde_json::Value>(&text).ok().map(|v| v["sessions"][name].clone()).unwrap_or_default()
}

fn health(home: &Home, name: &str) -> String {
    home.session(name).and_then(|s| s["fleet"]["health"].as_str().map(String::from)).unwrap_or_default()
}

fn generation(home: &Home, name: &str) -> u64 {
    home.session(name).and_then(|s| s["generation"].as_u64()).unwrap_or(0)
}

#[test]
fn a_command_that_exits_at_once_is_restarted_three_times_then_held_failed_and_notified() {
    let fleet = Fleet::new("[session.flaky]\ncommand = [\"sh\", \"-c\", \"exit 3\"]\nrestart = \"on-failure\"\n");
    let notified = fleet.path().join("notified.jsonl");
    std::fs::create_dir_all(fleet.home.path().join("config")).unwrap();
    std::fs::write(
        fleet.home.path().join("config/config.toml"),
        format!("[notify]\ncommand = \"cat >> {}; echo >> {}\"\n", notified.display(), notified.display()),
    )
    .unwrap();
    up(&fleet);
    eventually("the crash-loop limit", || {
        let h = health(&fleet.home, "flaky");
        if h == "failed: restarted 3 times in 3 seconds" {
            Ok(())
        } else {
            Err(format!("{h:?} {}", supervised(&fleet.home, "flaky")))
        }
    });
    assert_eq!(generation(&fleet.home, "flaky"), 4, "the first start and three restarts");
    assert_eq!(supervised(&fleet.home, "flaky")["phase"]["state"], "held");
    let table = fleet.home.ok(&["ls"]);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("flaky") && l.contains("down: exited(3)") && l.contains("failed: restarted")),
        "{table}"
    );
    eventually("the operator told", || {
        let text = std::fs::read_to_string(&notified).unwrap_or_default();
        if text.contains("\"kind\":\"failed\"") && text.contains("flaky: failed: restarted 3 times in 3 seconds") {
            Ok(())
        } else {
            Err(text)
        }
    });
    // Held: the operator's `desk restart` starts it again (and ends the hold).
    fleet.ok(&["restart", "flaky"]);
    eventually("restarted by the operator, then by policy again", || {
        let g = generation(&fleet.home, "flaky");
        if g >= 5 { Ok(()) } else { Err(g.to_string()) }
    });
}

#[test]
fn what_the_operator_stopped_is_never_restarted() {
    let fleet = Fleet::new("");
    fleet.write(&demo_session(fleet.path(), "a", "restart = \"always\""));
    up(&fleet);
    fleet.home.wait_ready("a");
    fleet.home.ok(&["kill", "a"]);
    eventually("held as the operator's stop", || {
        let s = supervised(&fleet.home, "a");
        if s["phase"]["hold"]["kind"] == "stopped" { Ok(()) } else { Err(s.to_string()) }
    });
    assert_eq!(health(&fleet.home, "a"), "stopped by desk kill");
    assert_eq!(generation(&fleet.home, "a"), 1);
    assert!(supervised(&fleet.home, "a")["restarts"].as_array().is_none_or(Vec::is_empty));
}

#[test]
fn an_exit_after_a_rate_limit_error_is_held_with_the_agents_words() {
    let script = "echo 'working...'; echo 'API Error: 429 Too Many Requests - rate limit reached'; exit 1";
    let fleet =
        Fleet::new(&format!("[session.limited]\ncommand = [\"sh\", \"-c\", \"{script}\"]\nrestart = \"on-failure\"\n"));
    up(&fleet);
    eventually("held for the rate limit", || {
        let h = health(&fleet.home, "limited");
        if h == "failed: API Error: 429 Too Many Requests - rate limit reached" { Ok(()) } else { Err(h) }
    });
    assert_eq!(generation(&fleet.home, "limited"), 1, "not restarted into the same wall");
}

#[test]
fn a_conversation_the_agent_refuses_is_held_failed_not_restarted_in_a_loop() {
    let fleet = Fleet::new("");
    fleet.write(
        &demo_session(fleet.path(), "a", "restart = \"always\"").replace("\"100\",", "\"100\", \"--reject-resume\","),
    );
    up(&fleet);
    fleet.home.wait_ready("a");
    let id = fleet.home.send("a", "something to resume");
    assert_eq!(fleet.home.settled(&id)["state"], "delivered");
    let conversation = eventually("captured", || {
        let a = fleet.home.session("a").ok_or("no session")?;
        a["fleet"]["conversation"]["id"].as_str().map(String::from).ok_or(a.to_string())
    });
    // The agent crashes; its policy restarts it resuming the conversation, which it refuses.
    let _ = fleet.home.send("a", "crash-now");
    let want = format!(
        "failed: resume rejected: desk-demo-agent: error: No conversation found with session ID: {conversation}"
    );
    eventually("held for the refusal", || {
        let h = health(&fleet.home, "a");
        if h == want { Ok(()) } else { Err(format!("{h:?} / {}", supervised(&fleet.home, "a"))) }
    });
    assert_eq!(generation(&fleet.home, "a"), 2, "one restart, then held: no loop");
    // The operator's restart does not offer it the refused conversation again.
    let out = fleet.ok(&["restart", "a"]);
    assert!(
        out.contains(&format!("a fresh conversation: demo refused conversation {conversation} at the last start")),
        "{out}"
    );
    fleet.home.wait_ready("a");
    assert_eq!(generation(&fleet.home, "a"), 3);
}

#[test]
fn a_daemon_killed_while_a_restart_waits_restarts_it_once_after_it_returns() {
    // Compressed by 10 only: the fleet's slot is 6 s, wide enough to kill the daemon within.
    let fleet = Fleet::new("");
    fleet.write(&format!(
        "[session.b]\ncommand = [\"{DEMO}\", \"--work-ms\", \"100\"]\nprovider = \"demo\"\nrestart = \"on-failure\"\n"
    ));
    let run = |args: &[&str]| {
        let out = fleet
            .home
            .cmd()
            .current_dir(fleet.path())
            .env_remove("DESK_AUTOSTART")
            .env("DESK_SUPERVISE_COMPRESS", "10")
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "desk {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    run(&["up"]);
    fleet.home.wait_ready("b");
    let _ = fleet.home.send("b", "crash-now");
    eventually("the first restart", || {
        if generation(&fleet.home, "b") == 2 { Ok(()) } else { Err(generation(&fleet.home, "b").to_string()) }
    });
    fleet.home.wait_ready("b");
    let _ = fleet.home.send("b", "crash-now");
    eventually("the second restart waiting for the fleet's slot", || {
        let s = supervised(&fleet.home, "b");
        if s["phase"]["state"] == "waiting" && s["judged"] == 2 { Ok(()) } else { Err(s.to_string()) }
    });
    let pid = fleet.home.serve_pid().expect("the daemon's pid");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL).unwrap();
    eventually("the daemon gone", || if crate::support::alive(pid) { Err("alive".into()) } else { Ok(()) });
    run(&["serve"]);
    eventually("restarted once by the returned daemon", || {
        if generation(&fleet.home, "b") == 3 { Ok(()) } else { Err(supervised(&fleet.home, "b").to_string()) }
    });
    fleet.home.wait_ready("b");
    let s = supervised(&fleet.home, "b");
    assert_eq!(s["restarts"].as_array().map(Vec::len), Some(2), "the count survived the daemon: {s}");
    assert_eq!(s["phase"]["state"], "idle");
    assert_eq!(generation(&fleet.home, "b"), 3, "nothing restarted twice");
}

#[test]
fn a_prompt_queued_for_a_session_follows_it_into_its_restarted_generation() {
    let fleet = Fleet::new("");
    fleet.write(&demo_session(fleet.path(), "a", "restart = \"on-failure\""));
    up(&fleet);
    fleet.home.wait_ready("a");
    fleet.home.ok(&["pause", "a", "--reason", "hold it"]);
    let id = fleet.home.send("a", "delivered after the restart");
    assert_eq!(fleet.home.item(&id)["generation"], 1);
    // The agent dies from outside (not the operator's `desk kill`): a failure, restarted.
    let pid = fleet.home.session("a").and_then(|s| s["pid"].as_i64()).unwrap() as i32;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL).unwrap();
    eventually("restarted", || {
        if generation(&fleet.home, "a") == 2 { Ok(()) } else { Err(generation(&fleet.home, "a").to_string()) }
    });
    fleet.home.wait_ready("a");
    fleet.home.ok(&["resume", "a"]);
    assert_eq!(fleet.home.settled(&id)["state"], "delivered");
    let item = fleet.home.item(&id);
    assert_eq!(item["generation"], 2, "{item}");
    assert!(prompts(&fleet.path().join("a.prompts")).contains(&"delivered after the restart".to_string()));
}
