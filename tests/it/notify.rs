//! The daemon's notifications end to end: `[notify] command` in the config file receives a
//! JSON description on stdin when a real demo agent session turns blocked and when it exits
//! with an error, and the session's journal records the `notify` event.

use std::path::{Path, PathBuf};

use crate::support::{Home, eventually};

/// Configure a notify command that appends each notification's JSON to a file; returns it.
fn notify_to_file(home: &Home) -> PathBuf {
    let out = home.path().join("notified.jsonl");
    let config = home.path().join("config");
    std::fs::create_dir_all(&config).expect("config dir");
    let text = format!("[notify]\ncommand = \"cat >> '{}'\"\n", out.display());
    std::fs::write(config.join("config.toml"), text).expect("config file");
    out
}

fn notifications(file: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn wait_notification(file: &Path, kind: &str) -> serde_json::Value {
    eventually(&format!("a {kind} notification"), || {
        let all = notifications(file);
        all.iter().find(|n| n["kind"] == kind).cloned().ok_or_else(|| format!("{all:?}"))
    })
}

fn wait_observed(home: &Home, name: &str) {
    eventually(&format!("the daemon to observe {name}"), || {
        let s = home.session(name).ok_or("no session")?;
        if s["clients"]["observers"].as_u64() >= Some(1) && s["state"]["ready"] == true {
            Ok(())
        } else {
            Err(s.to_string())
        }
    });
}

#[test]
fn the_notify_command_gets_json_when_an_agent_turns_blocked_and_when_it_exits_with_an_error() {
    let home = Home::new();
    let file = notify_to_file(&home);
    home.serve();
    home.demo("ask", &["--work-ms", "300"]);
    wait_observed(&home, "ask");
    home.ok(&["keys", "ask", "please approve-me", "Enter"]);
    let blocked = wait_notification(&file, "blocked");
    assert_eq!(blocked["session"], "ask");
    assert!(blocked["message"].as_str().is_some_and(|m| m.starts_with("ask is waiting for you")), "{blocked:#}");
    assert_eq!(blocked["state"]["activity"], "blocked");
    assert!(blocked["ts_ms"].as_u64().is_some() && blocked["ts"].is_string(), "{blocked:#}");
    // The session's journal has it, for the dashboard's events pane.
    eventually("a notify event in the journal", || {
        let events = home.ok(&["events", "ask", "--type", "notify"]);
        if events.contains("notify blocked") { Ok(()) } else { Err(events) }
    });
    // Answer the dialog, then make the agent crash (exit code 3).
    home.ok(&["keys", "ask", "Enter"]);
    home.wait_screen("ask", "Approved (1. Yes)");
    home.ok(&["keys", "ask", "crash-now", "Enter"]);
    let exited = wait_notification(&file, "exited");
    assert_eq!(exited["session"], "ask");
    assert_eq!(exited["message"], "ask exited with code 3");
    assert_eq!(exited["state"]["lifecycle"], "exited");
}

#[test]
fn a_clean_exit_is_not_notified() {
    let home = Home::new();
    let file = notify_to_file(&home);
    home.serve();
    home.demo("calm", &[]);
    wait_observed(&home, "calm");
    // Ctrl-D on the empty box: exit 0.
    home.ok(&["keys", "calm", "C-d"]);
    home.wait_exit("calm");
    // A failing session afterwards is notified: the clean one before it was not.
    home.demo("bad", &[]);
    wait_observed(&home, "bad");
    home.ok(&["keys", "bad", "crash-now", "Enter"]);
    wait_notification(&file, "exited");
    let all = notifications(&file);
    assert!(all.iter().all(|n| n["session"] == "bad"), "{all:?}");
}

#[test]
fn an_agents_own_desktop_notification_and_a_stuck_prompt_are_forwarded() {
    let home = Home::new();
    let file = notify_to_file(&home);
    home.serve();
    // A program that shows an OSC 9 notification once told to (by a key).
    home.new_sh("osc", "read x; printf '\\033]9;Build finished\\007'; read y");
    eventually("the daemon to observe osc", || {
        let s = home.session("osc").ok_or("no session")?;
        if s["clients"]["observers"].as_u64() >= Some(1) { Ok(()) } else { Err(s.to_string()) }
    });
    home.ok(&["keys", "osc", "Enter"]);
    let forwarded = wait_notification(&file, "notification");
    assert_eq!(forwarded["session"], "osc");
    assert_eq!(forwarded["message"], "osc: Build finished");

    // Enters within 6.5 s of a paste are newlines to this agent: the prompt ends submit-stuck.
    let demo = env!("CARGO_BIN_EXE_desk-demo-agent");
    home.ok(&["new", "agent", "--provider", "demo", "--", demo, "--paste-burst-ms", "6500"]);
    wait_observed(&home, "agent");
    let id = home.send("agent", "force me through");
    assert_eq!(home.settled(&id)["state"], "stuck");
    let stuck = wait_notification(&file, "stuck");
    assert_eq!(stuck["session"], "agent");
    assert_eq!(stuck["item"], id.as_str());
    assert!(stuck["message"].as_str().is_some_and(|m| m.contains("force me through")), "{stuck:#}");
}

/// A notification body with a C1 control in it (CSI as U+009B) reaches the `notify` event as
/// the session sent it, and `desk events` prints it escaped: the operator's terminal is never
/// driven by what a session chose to put in a notification.
#[test]
fn controls_in_a_forwarded_notification_are_printed_escaped() {
    let home = Home::new();
    home.serve();
    home.new_sh("c1", "read x; printf '\\033]9;Build \\302\\23331m finished\\007'; read y");
    wait_observed(&home, "c1");
    home.ok(&["keys", "c1", "Enter"]);
    let line = eventually("a notify event in the journal", || {
        let events = home.ok(&["events", "c1", "--type", "notify"]);
        if events.contains("notify notification") { Ok(events) } else { Err(events) }
    });
    assert!(!line.trim_end().chars().any(char::is_control), "{line:?}");
    assert!(line.contains("c1: Build \\u{9b}31m finished"), "{line:?}");
}
