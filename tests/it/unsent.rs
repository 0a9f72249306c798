//! Desk's own prompt left unsent in an agent's input box (issue 24, §1 and §4), on a real PTY:
//! the demo agent is stopped (SIGSTOP) while desk pastes, so the paste does not show within the
//! echo window and the item ends `paste-missing`; then it goes on (SIGCONT) and the paste lands
//! in its box, unsent. The agent's fsynced prompt log is the ground truth of what it submitted.

use crate::support::{Home, eventually, prompts};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The agent a session's master runs (its only child).
fn agent_pid(home: &Home, name: &str) -> Pid {
    let master = home.master_pid(name);
    let children = std::fs::read_to_string(format!("/proc/{master}/task/{master}/children")).expect("children");
    let pid = children.split_whitespace().next().expect("the agent").parse().expect("a pid");
    Pid::from_raw(pid)
}

/// A session whose agent was stopped while desk pasted `text`: the item is stuck
/// `paste-missing`; the agent goes on, and the paste lands in its box.
fn paste_left_in_the_box(home: &Home, name: &str, text: &str) -> (String, std::path::PathBuf) {
    home.serve();
    let log = home.demo(name, &[]);
    home.wait_ready(name);
    let agent = agent_pid(home, name);
    kill(agent, Signal::SIGSTOP).expect("stop the agent");
    let id = home.send(name, text);
    let item = home.settled(&id);
    assert_eq!((item["state"].as_str(), item["stuck"].as_str()), (Some("stuck"), Some("paste-missing")), "{item:#}");
    kill(agent, Signal::SIGCONT).expect("let the agent go on");
    home.wait_screen(name, text);
    (id, log)
}

#[test]
fn a_paste_that_lands_late_is_desk_s_own_prompt_named_in_the_hold_and_force_submits_it_once() {
    let home = Home::new();
    let (id, log) = paste_left_in_the_box(&home, "s", "stopped agent prompt SA1");
    // The item says where its prompt is.
    eventually("the item to say its prompt sits unsent", || {
        let item = home.item(&id);
        let said = item["evidence"].to_string().contains("the prompt sits unsent in the agent's input box");
        if item["stuck"] == "submit-stuck" && said { Ok(()) } else { Err(format!("{item:#}")) }
    });
    // The session's next prompt waits, and `desk queue` says which item holds it.
    let next = home.send("s", "second prompt SA2");
    eventually("the hold to name the item", || {
        let q = home.ok(&["queue", "s"]);
        let named = q.contains(&format!("unsent prompt of stuck item {id}")) && !q.contains("typed by someone");
        if named { Ok(()) } else { Err(q) }
    });
    // Force presses Enter only: the prompt once, whole, alone; then the next one goes.
    let out = home.desk(&["force", &id]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.starts_with("pressed Enter; delivered"), "{out:?}");
    assert_eq!(home.settled(&next)["state"], "delivered");
    eventually("both prompts submitted, each once", || {
        let p = prompts(&log);
        if p == ["stopped agent prompt SA1", "second prompt SA2"] { Ok(()) } else { Err(format!("{p:?}")) }
    });
}

#[test]
fn drop_erases_desk_s_own_unsent_prompt_from_the_box() {
    let home = Home::new();
    let (id, log) = paste_left_in_the_box(&home, "d", "stopped agent prompt SA1");
    let out = home.desk(&["drop", &id]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("cleared its prompt from the agent's input box"), "{out:?}");
    assert_eq!(home.item(&id)["state"], "dropped");
    let screen = home.peek("d");
    assert!(!screen.contains("SA1"), "{screen}");
    // The box is clear: the next prompt goes on its own, and the dropped one never went.
    let next = home.send("d", "after the drop SA3");
    assert_eq!(home.settled(&next)["state"], "delivered");
    assert_eq!(prompts(&log), vec!["after the drop SA3"]);
}

#[test]
fn force_on_a_paste_missing_item_says_it_pasted_again_and_counts_attempts_one_way() {
    let home = Home::new();
    home.serve();
    let log = home.demo("f", &[]);
    home.wait_ready("f");
    let agent = agent_pid(&home, "f");
    kill(agent, Signal::SIGSTOP).expect("stop the agent");
    let id = home.send("f", "never seen SA4");
    assert_eq!(home.settled(&id)["stuck"], "paste-missing");
    let out = home.desk(&["force", &id]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // It did paste again, and says so; it is not called a refusal, and exits 1.
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stderr.contains("pasted again; still not seen in the input area"), "{stderr}");
    let json = home.desk(&["force", &id, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(v["error"]["code"], "not-delivered", "{v:#}");
    // One attempt count: the item's, in its field and in every note that names one.
    let item = home.item(&id);
    assert_eq!(item["attempts"], 3, "{item:#}");
    let named: Vec<String> = item["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] == "claimed")
        .map(|n| n["detail"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(
        named.len() == 3 && named.iter().zip(1..).all(|(d, n)| d.starts_with(&format!("attempt {n}"))),
        "{named:?}"
    );
    let text = home.ok(&["item", &id]);
    assert!(text.contains("attempts  3") && !text.contains("attempt 4"), "{text}");
    kill(agent, Signal::SIGCONT).expect("let the agent go on");
    assert!(prompts(&log).is_empty(), "nothing was submitted");
}
