//! `desk keys`: an operator answers an agent's dialog without attaching, through the real
//! master, with the session's screen (peek) and its journal as the evidence.

use crate::support::Home;

/// The session's `keys` events, as `desk events --json` prints them.
fn keys_events(home: &Home, name: &str) -> Vec<serde_json::Value> {
    home.ok(&["events", name, "--type", "keys", "--json"])
        .lines()
        .map(|l| serde_json::from_str(l).expect("an event per line"))
        .collect()
}

#[test]
fn an_approval_dialog_is_answered_with_desk_keys_and_the_journal_says_who() {
    let home = Home::new();
    let log = home.demo("ask", &["--work-ms", "300"]);
    home.wait_ready("ask");
    // Text and a named key in one call: the prompt is typed and submitted.
    home.ok(&["keys", "ask", "please approve-me", "Enter"]);
    home.wait_activity("ask", "blocked");
    home.wait_screen("ask", "Do you want to run this command?");
    // Down selects "2. No", Enter answers it.
    let out = home.json(&["keys", "ask", "Down", "Enter", "--json"]);
    assert_eq!(out["kind"], "keys");
    assert_eq!(out["data"]["session"], "ask");
    assert_eq!(out["data"]["keys"], serde_json::json!(["Down", "Enter"]));
    home.wait_screen("ask", "Denied (2. No)");
    home.wait_activity("ask", "idle");
    assert_eq!(crate::support::prompts(&log), ["please approve-me"]);
    let events = keys_events(&home, "ask");
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[1]["keys"], serde_json::json!(["Down", "Enter"]));
    assert_eq!(events[1]["bytes"], 4);
    assert_eq!(events[1]["via"], "cli");
    assert!(events[1]["user"].as_str().is_some_and(|u| !u.is_empty()), "{events:?}");
}

#[test]
fn arrows_are_sent_in_the_cursor_key_mode_the_program_set() {
    let home = Home::new();
    // The program turns on application cursor keys, then prints the bytes it reads in hex.
    home.new_sh("cur", "stty -icanon -echo; printf '\\033[?1hready\\n'; head -c 5 | od -An -tx1");
    home.wait_screen("cur", "ready");
    home.ok(&["keys", "cur", "Up", "text:Up"]);
    home.wait_screen("cur", "1b 4f 41 55 70");
}

#[test]
fn keys_reach_the_program_in_order_and_a_later_call_follows_the_earlier() {
    // That each key is typed in a write of its own, KEY_GAP apart, is pinned by the master's
    // own test on a virtual clock (crates/desk-master/src/event_loop.rs); here, through the real CLI and
    // master, the program reads every key, in order, a later call's after an earlier one's.
    let home = Home::new();
    home.new_sh("reads", "stty -icanon -echo -icrnl; printf 'ready\\n'; head -c 7 | od -An -v -tx1");
    home.wait_screen("reads", "ready");
    home.ok(&["keys", "reads", "Down", "Down"]);
    // A second call while the first is still typing: its key comes after them.
    home.ok(&["keys", "reads", "Enter"]);
    home.wait_screen("reads", "1b 5b 42 1b 5b 42 0d");
    let events = keys_events(&home, "reads");
    assert_eq!(events.iter().map(|e| e["bytes"].clone()).collect::<Vec<_>>(), [6, 1]);
}

#[test]
fn keys_are_refused_for_exited_and_unknown_sessions_and_bad_keys() {
    let home = Home::new();
    home.new_sh("done", "exit 0");
    home.wait_exit("done");
    let code = |args: &[&str]| {
        let out = home.desk(args);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON envelope");
        (out.status.code(), v["error"]["code"].as_str().unwrap_or("").to_string())
    };
    assert_eq!(code(&["keys", "done", "Enter", "--json"]), (Some(1), "not-running".into()));
    assert_eq!(code(&["keys", "nobody", "Enter", "--json"]), (Some(2), "no-such-session".into()));
    assert_eq!(code(&["keys", "done", "C-1", "--json"]), (Some(2), "usage".into()));
    assert_eq!(code(&["keys", "done", "text:", "--json"]), (Some(2), "usage".into()));
}

#[test]
fn the_dashboard_answer_panel_types_the_chosen_key_into_the_blocked_session() {
    use crate::harness::{PATIENCE, PtyCommand};
    let home = Home::new();
    // A session that fits the dashboard's preview pane (120x40 leaves it about 116x25).
    let demo = env!("CARGO_BIN_EXE_desk-demo-agent");
    home.ok(&["new", "ask", "--size", "100x20", "--provider", "demo", "--", demo, "--work-ms", "300"]);
    home.wait_ready("ask");
    let mut pty = PtyCommand::new(crate::support::DESK)
        .arg("dash")
        .env("DESK_HOME", home.path())
        .size(120, 40)
        .spawn()
        .expect("spawn desk dash");
    pty.wait_for_text("live)").expect("the preview of ask");
    home.ok(&["keys", "ask", "please approve-me", "Enter"]);
    home.wait_activity("ask", "blocked");
    pty.wait_for_text("waiting for approval").expect("the preview shows the dialog");
    pty.write("a").expect("write a");
    // The panel lists the dialog's own options and says what Enter picks.
    let screen = pty.wait_for_text("waiting for: approval · Enter picks 1. Yes").expect("the answer panel");
    assert!(screen.contains("2  No"), "{screen}");
    // The highlight starts on Enter: the dialog's highlighted option (Yes) is taken.
    pty.write("\r").expect("write Enter");
    home.wait_screen("ask", "Approved (1. Yes)");
    // The dialog is gone: so is the panel, and the footer says why.
    pty.wait_for_text("ask's dialog changed or went away (answered?)").expect("the panel closed");
    let events = keys_events(&home, "ask");
    assert_eq!(
        events.last().map(|e| (e["keys"].clone(), e["via"].clone())),
        Some((serde_json::json!(["Enter"]), "dash".into()))
    );
    pty.write("q").expect("write q");
    pty.wait_exit(PATIENCE).expect("desk dash exits on q");
}
