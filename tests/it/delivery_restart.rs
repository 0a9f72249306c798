//! Delivery across a daemon restart: what an agent did while `desk serve` was down — took a
//! prompt from its own queue, reported it with a hook, died, was started again as a new
//! generation — decides the items the restarted daemon finds, and nothing one generation does
//! settles another's. The demo agent's fsynced prompt log is the ground truth.

use crate::support::{Home, alive, eventually, prompts};

fn state(item: &serde_json::Value) -> &str {
    item["state"].as_str().unwrap_or("?")
}

/// Send `text` and wait until it is delivered; returns its id.
fn delivered(home: &Home, session: &str, text: &str) -> String {
    let id = home.send(session, text);
    let item = home.settled(&id);
    assert_eq!(state(&item), "delivered", "{item:#}");
    id
}

fn kill9(pid: i32) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
}

fn agent_pid(home: &Home, session: &str) -> i32 {
    home.session(session).and_then(|s| s["pid"].as_i64()).expect("the agent's pid") as i32
}

/// Wait until the agent's prompt log holds exactly `want`, in order.
fn until_logged(log: &std::path::Path, what: &str, want: &[&str]) {
    eventually(what, || {
        let p = prompts(log);
        if p == want { Ok(()) } else { Err(format!("{p:?}")) }
    });
}

/// Wait until the session's journal holds the agent's report (its UserPromptSubmit hook) of
/// `text`. The agent logs a prompt just before it reports it: killed in between, it would have
/// taken the prompt with no evidence left anywhere, which no daemon can tell from one it never
/// took.
fn until_hook_journalled(home: &Home, session: &str, text: &str) {
    eventually(&format!("the hook for {text:?} to be journalled"), || {
        let hooks = home.ok(&["events", session, "--type", "hook"]);
        if hooks.contains(text) { Ok(()) } else { Err(hooks) }
    });
}

/// Restart the daemon so that it dies right after pressing Enter on `text` (the
/// `after-submit` failpoint); returns the item's id once that daemon is gone.
fn send_and_crash_after_the_enter(home: &Home, session: &str, text: &str) -> String {
    home.ok(&["serve", "--stop"]);
    let doomed = home.serve_with(&[("DESK_FAILPOINT", "after-submit")]);
    let id = home.send(session, text);
    eventually("the daemon to die after the Enter", || if alive(doomed) { Err("alive".into()) } else { Ok(()) });
    id
}

/// The kinds of an item's evidence notes, in order.
fn kinds(item: &serde_json::Value) -> Vec<String> {
    item["evidence"].as_array().into_iter().flatten().filter_map(|n| n["kind"].as_str().map(String::from)).collect()
}

/// A prompt the agent queued mid-turn, whose agent is killed while the daemon is down and whose
/// session is started again before the daemon returns: the new generation's agent sitting idle
/// says nothing about the old one, which never took it (issue 18, finding 1). It is stuck, and
/// the force `desk stuck` suggests delivers it once, to the agent that runs now.
#[test]
fn a_prompt_queued_by_an_agent_killed_while_the_daemon_was_down_is_not_recorded_delivered() {
    let home = Home::new();
    home.serve();
    let work = ["--work-ms", "15000"];
    let log = home.demo("s", &work);
    home.wait_ready("s");
    delivered(&home, "s", "first task A");
    // A's turn runs for 15 s: the agent holds B in its own queue.
    let b = delivered(&home, "s", "second task B");
    assert_eq!(home.item(&b)["queued_by_agent"], true, "{:#}", home.item(&b));
    home.ok(&["serve", "--stop"]);
    kill9(agent_pid(&home, "s"));
    home.wait_exit("s");
    home.demo("s", &work);
    home.wait_ready("s");
    home.serve();
    let item = home.settled(&b);
    assert_eq!((state(&item), item["stuck"].as_str()), ("stuck", Some("interrupted")), "{item:#}");
    assert_eq!(prompts(&log), ["first task A"], "the old agent died before it took B");
    let stuck = home.ok(&["stuck"]);
    assert!(stuck.contains(&b) && stuck.contains("may have taken it"), "{stuck}");
    // The new agent stays idle: that is no evidence about B.
    eventually("the new agent to be idle", || {
        let s = home.session("s").ok_or("no session")?;
        if s["state"]["activity"]["value"] == "idle" { Ok(()) } else { Err(s["state"].to_string()) }
    });
    home.ok(&["force", &b]);
    assert_eq!(state(&home.settled(&b)), "delivered");
    until_logged(&log, "B to be submitted once", &["first task A", "second task B"]);
}

/// A prompt the agent queued mid-turn and took while the daemon was down, then the session
/// ended: its hook is in the session's journal, and the restarted daemon reads it (issue 18,
/// finding 2) — delivered, not stuck, so no force can send it twice.
#[test]
fn a_hook_journalled_while_the_daemon_was_down_settles_the_prompt_it_reports() {
    let home = Home::new();
    home.serve();
    let log = home.demo("h", &["--work-ms", "3000"]);
    home.wait_ready("h");
    delivered(&home, "h", "first task");
    let b = delivered(&home, "h", "second task");
    assert_eq!(home.item(&b)["queued_by_agent"], true, "{:#}", home.item(&b));
    home.ok(&["serve", "--stop"]);
    // Nobody serves: the turn ends, the agent takes B from its queue and reports it.
    until_logged(&log, "the agent to take B", &["first task", "second task"]);
    until_hook_journalled(&home, "h", "second task");
    home.ok(&["kill", "h"]);
    home.wait_exit("h");
    home.serve();
    let item = home.settled(&b);
    assert_eq!(state(&item), "delivered", "{item:#}");
    assert!(item["evidence"].to_string().contains("UserPromptSubmit hook for it came"), "{item:#}");
    assert!(home.ok(&["stuck"]).contains("nothing is stuck"));
}

/// The daemon dies right after pressing Enter on B while the agent works on A, so B waits in
/// the agent's own queue; restarted before the agent takes it, the daemon cannot tell (B is
/// not in the input box, no hook yet) and B is stuck. When the agent takes B its hook comes:
/// B is delivered then, and a force can no longer send it a second time.
#[test]
fn a_prompt_cut_off_by_a_crash_and_taken_later_from_the_agents_queue_ends_delivered() {
    let home = Home::new();
    let log = home.demo("q", &["--work-ms", "8000"]);
    home.wait_ready("q");
    home.serve();
    delivered(&home, "q", "first task");
    let b = send_and_crash_after_the_enter(&home, "q", "second task");
    home.serve();
    let item = eventually("B to be delivered once the agent takes it", || {
        let item = home.item(&b);
        if state(&item) == "delivered" { Ok(item) } else { Err(format!("{item:#}")) }
    });
    let kinds = kinds(&item);
    let stuck = kinds.iter().position(|k| k == "stuck");
    assert!(
        stuck.is_some_and(|s| kinds[s + 1..].contains(&"hook".to_string())),
        "stuck first, then its hook: {item:#}"
    );
    assert_eq!(prompts(&log), ["first task", "second task"]);
    assert!(home.ok(&["stuck"]).contains("nothing is stuck"));
}

/// B was being delivered when the daemon died; while it was down the agent took B (its hook is
/// journalled), then died, and the session was started again. The new generation does not
/// settle B — the old generation's hook, replayed from the journal, does.
#[test]
fn a_hook_of_a_generation_that_ended_while_the_daemon_was_down_still_settles_its_prompt() {
    let home = Home::new();
    let work = ["--work-ms", "4000"];
    let log = home.demo("g", &work);
    home.wait_ready("g");
    home.serve();
    delivered(&home, "g", "first task");
    let b = send_and_crash_after_the_enter(&home, "g", "second task");
    until_logged(&log, "the agent to take B", &["first task", "second task"]);
    until_hook_journalled(&home, "g", "second task");
    kill9(agent_pid(&home, "g"));
    home.wait_exit("g");
    home.demo("g", &work);
    home.wait_ready("g");
    home.serve();
    let item = home.settled(&b);
    assert_eq!(state(&item), "delivered", "{item:#}");
    assert_eq!(item["generation"], 1, "{item:#}");
    assert!(home.ok(&["stuck"]).contains("nothing is stuck"));
    assert_eq!(prompts(&log), ["first task", "second task"]);
}
