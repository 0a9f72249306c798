//! The fleet's attention inside `desk attach`, through a terminal emulator: the status line on
//! the last row (this session's state, who else needs a person, live), the session one row
//! shorter under it, and the prefix keys: the next session in need, the last one, the session
//! list, answering the dialog, detaching — switching sessions without leaving the client.

use crate::harness::{PATIENCE, Pty, PtyCommand};
use crate::support::{DESK, Home, eventually};

/// `desk attach NAME [args]` (with its status line, by default) on a pseudo-terminal.
fn attach(home: &Home, name: &str, extra: &[&str], cols: u16, rows: u16) -> Pty {
    PtyCommand::new(DESK)
        .arg("attach")
        .arg(name)
        .args(extra)
        .env("DESK_HOME", home.path())
        .size(cols, rows)
        .spawn()
        .expect("spawn desk attach")
}

/// A demo agent session, ready for a prompt.
fn demo(home: &Home, name: &str) {
    home.demo(name, &[]);
    home.wait_activity(name, "idle");
}

/// Make demo session `name` show its approval dialog (typed, as a person would: no daemon).
fn ask_approval(home: &Home, name: &str) {
    home.ok(&["keys", name, "text:please approve-me", "Enter"]);
    home.wait_activity(name, "blocked");
}

fn size(home: &Home, name: &str) -> (u64, u64) {
    let s = home.session(name).expect("listed");
    (s["cols"].as_u64().unwrap(), s["rows"].as_u64().unwrap())
}

/// Wait until session `name` has the size `want` (cols, rows).
fn wait_size(home: &Home, name: &str, want: (u64, u64), what: &str) {
    eventually(what, || if size(home, name) == want { Ok(()) } else { Err(format!("{:?}", size(home, name))) });
}

fn controllers(home: &Home, name: &str) -> u64 {
    home.session(name).map_or(0, |s| s["clients"]["controllers"].as_u64().unwrap_or(0))
}

/// The terminal's last row.
fn status_row(pty: &Pty) -> String {
    let screen = pty.screen();
    screen.rows().last().cloned().unwrap_or_default()
}

fn wait_status(pty: &Pty, what: &str, cond: impl Fn(&str) -> bool) -> String {
    let screen = pty.wait_until(PATIENCE, what, |s| cond(s.rows().last().map_or("", String::as_str))).unwrap();
    screen.rows().last().cloned().unwrap_or_default()
}

#[test]
fn the_status_line_names_this_session_and_who_else_needs_you_live_under_a_session_one_row_shorter() {
    let home = Home::new();
    demo(&home, "calm");
    demo(&home, "api");
    let pty = attach(&home, "calm", &[], 100, 20);
    let line = wait_status(&pty, "the status line", |r| r.contains("calm idle"));
    assert!(line.contains("nobody else needs you"), "{line:?}");
    assert!(line.trim_end().ends_with("^] ? keys"), "{line:?}");
    wait_size(&home, "calm", (100, 19), "the session one row shorter than the terminal");
    // Another session asks: the line says so without a key pressed.
    ask_approval(&home, "api");
    let line = wait_status(&pty, "api's dialog on the status line", |r| r.contains("api blocked"));
    assert!(line.contains("⚠ 1 needs you: api blocked"), "{line:?}");
    // The session's own drawing stays above it: the demo agent's box is on rows 0-19.
    let screen = pty.screen();
    assert!(screen.rows()[..19].iter().any(|r| r.contains("idle")), "{screen}");
    pty.write(b"\x1c").unwrap();
}

#[test]
fn output_never_reaches_the_status_row() {
    let home = Home::new();
    home.new_sh("flood", "read go; seq 1 3000; printf 'DONE>'; exec cat");
    let pty = attach(&home, "flood", &[], 80, 12);
    wait_status(&pty, "the status line", |r| r.contains("flood"));
    pty.write(b"go\r").unwrap();
    let screen = pty.wait_until(PATIENCE, "the flood to end", |s| s.contains("DONE>")).unwrap();
    let rows = screen.rows();
    assert!(rows[11].starts_with(" flood "), "the last row is still the status line: {screen}");
    assert_eq!(rows[9].trim_end(), "3000", "{screen}");
    assert_eq!(rows[10].trim_end(), "DONE>", "the session's last row is the terminal's second last: {screen}");
}

#[test]
fn prefix_n_switches_to_the_session_that_needs_you_and_l_comes_back_without_leaving() {
    let home = Home::new();
    demo(&home, "calm");
    demo(&home, "api");
    ask_approval(&home, "api");
    let pty = attach(&home, "calm", &[], 100, 24);
    wait_status(&pty, "api on the status line", |r| r.contains("api blocked"));
    pty.write(b"\x1dn").unwrap();
    let screen = pty.wait_until(PATIENCE, "api's dialog", |s| s.contains("Do you want to run this command?")).unwrap();
    assert!(!screen.contains("[desk:"), "no detach message: the client never left\n{screen}");
    wait_status(&pty, "the status line names api", |r| r.starts_with(" api blocked(approval)"));
    eventually("the controller moved to api", || match (controllers(&home, "api"), controllers(&home, "calm")) {
        (1, 0) => Ok(()),
        other => Err(format!("{other:?}")),
    });
    // The client's size reaches the master after its attach, which the controller count shows.
    wait_size(&home, "api", (100, 23), "the new session takes the terminal's size less the status row");
    pty.write(b"\x1dl").unwrap();
    wait_status(&pty, "back on calm", |r| r.starts_with(" calm idle"));
    eventually("the controller back on calm", || match (controllers(&home, "api"), controllers(&home, "calm")) {
        (0, 1) => Ok(()),
        other => Err(format!("{other:?}")),
    });
    // Typing goes to calm now.
    pty.write(b"hello calm").unwrap();
    home.wait_screen("calm", "hello calm");
    // The plain detach key still detaches.
    let mut pty = pty;
    pty.write(b"\x1c").unwrap();
    assert!(pty.wait_exit(PATIENCE).unwrap().success());
    assert!(pty.screen().contains("[desk: detached from calm]"), "{}", pty.screen());
}

#[test]
fn prefix_s_lists_the_sessions_and_a_digit_attaches_one() {
    let home = Home::new();
    demo(&home, "one");
    demo(&home, "two");
    let mut pty = attach(&home, "one", &[], 100, 24);
    wait_status(&pty, "the status line", |r| r.contains("one idle"));
    pty.write(b"\x1ds").unwrap();
    let screen = pty.wait_until(PATIENCE, "the list", |s| s.contains("2 two")).unwrap();
    assert!(screen.contains("*1 one"), "the attached session is marked: {screen}");
    assert!(status_row(&pty).contains("Enter or a digit attaches"));
    pty.write(b"2").unwrap();
    wait_status(&pty, "two's status line", |r| r.starts_with(" two idle"));
    let screen = pty.wait_until(PATIENCE, "the list gone", |s| !s.contains("*1 one")).unwrap();
    assert!(screen.contains("Type a prompt"), "two's screen: {screen}");
    // Esc closes the list and keeps the session; its screen comes back whole.
    pty.write(b"\x1ds").unwrap();
    pty.wait_until(PATIENCE, "the list", |s| s.contains("*2 two")).unwrap();
    pty.write(b"\x1b").unwrap();
    let screen = pty.wait_until(PATIENCE, "the list closed", |s| !s.contains("*2 two")).unwrap();
    assert!(screen.contains("Type a prompt"), "{screen}");
    pty.write(b"\x1dd").unwrap();
    assert!(pty.wait_exit(PATIENCE).unwrap().success());
    assert!(pty.screen().contains("[desk: detached from two]"), "{}", pty.screen());
}

#[test]
fn prefix_a_answers_this_sessions_dialog_with_the_agents_keys_and_journals_it() {
    let home = Home::new();
    demo(&home, "api");
    ask_approval(&home, "api");
    let pty = attach(&home, "api", &[], 100, 24);
    wait_status(&pty, "the status line", |r| r.contains("api blocked"));
    pty.write(b"\x1da").unwrap();
    let line = wait_status(&pty, "the dialog's options", |r| r.contains("1 Yes"));
    assert!(line.contains("answer api │ Bash(demo-tool --prompt 1) │ 1 Yes · 2 No · n deny"), "{line:?}");
    pty.write(b"2").unwrap();
    pty.wait_until(PATIENCE, "the agent's refusal", |s| s.contains("Denied (2. No)")).unwrap();
    wait_status(&pty, "the answer said", |r| r.contains("answered api: 2. No"));
    let events = home.ok(&["events", "api", "--type", "answer", "--json"]);
    let event: serde_json::Value = serde_json::from_str(events.lines().last().expect("an answer event")).unwrap();
    assert_eq!(event["outcome"], "typed", "{event}");
    assert_eq!(event["via"], "attach");
    assert_eq!(event["choice"], "2. No");
    assert_eq!(event["keys"], serde_json::json!(["Down", "Enter"]));
    assert_eq!(event["asks"], "Bash(demo-tool --prompt 1)");
    pty.write(b"\x1c").unwrap();
}

/// Demo sessions `a` and `b`, `b` showing its approval dialog.
fn a_and_b_waiting() -> Home {
    let home = Home::new();
    demo(&home, "a");
    demo(&home, "b");
    ask_approval(&home, "b");
    home
}

#[test]
fn without_the_status_line_the_session_gets_the_whole_terminal_and_prefix_keys_still_work() {
    let home = a_and_b_waiting();
    let pty = attach(&home, "a", &["--no-status"], 90, 20);
    pty.wait_until(PATIENCE, "a's screen", |s| s.contains("Type a prompt")).unwrap();
    wait_size(&home, "a", (90, 20), "the whole terminal");
    assert!(!pty.screen().contains("^] ? keys"));
    // The prefix's prompt is drawn over the session's last row while it is open, and the
    // session's own row comes back when it closes.
    pty.write(b"\x1d").unwrap();
    pty.wait_until(PATIENCE, "the prompt", |s| s.rows()[19].contains("n next in need")).unwrap();
    pty.write(b"\x1b").unwrap();
    pty.wait_until(PATIENCE, "the session's row back", |s| s.rows()[19].trim().is_empty()).unwrap();
    pty.write(b"\x1dn").unwrap();
    pty.wait_until(PATIENCE, "b's dialog", |s| s.contains("Do you want to run this command?")).unwrap();
    wait_size(&home, "b", (90, 20), "b attached, at the whole terminal's size");
    pty.write(b"\x1c").unwrap();
}

/// The config file's `[attach]` table: `status_line = false` gives the session the whole
/// terminal, and `prefix_key` is the prefix (the default `^]` then types into the session).
#[test]
fn the_config_file_turns_the_status_line_off_and_sets_the_prefix_key() {
    let home = a_and_b_waiting();
    std::fs::create_dir_all(home.path().join("config")).unwrap();
    std::fs::write(home.path().join("config/config.toml"), "[attach]\nstatus_line = false\nprefix_key = \"C-g\"\n")
        .unwrap();
    let pty = attach(&home, "a", &[], 90, 20);
    pty.wait_until(PATIENCE, "a's screen", |s| s.contains("Type a prompt")).unwrap();
    wait_size(&home, "a", (90, 20), "the whole terminal");
    assert!(!pty.screen().contains("? keys"), "{}", pty.screen());
    pty.write(b"\x07n").unwrap();
    pty.wait_until(PATIENCE, "b's dialog", |s| s.contains("Do you want to run this command?")).unwrap();
    wait_size(&home, "b", (90, 20), "b attached, at the whole terminal's size");
    pty.write(b"\x1c").unwrap();
}

/// A terminal too small for a status line (fewer than 5 rows) attaches without one: the
/// session gets every row, and the line comes when the terminal grows.
#[test]
fn a_terminal_without_room_gets_no_status_line_until_it_grows() {
    let home = Home::new();
    home.new_sh("s", "printf 'READY>'; exec cat");
    let pty = attach(&home, "s", &[], 40, 4);
    pty.wait_until(PATIENCE, "the session's screen", |s| s.contains("READY>")).unwrap();
    wait_size(&home, "s", (40, 4), "the whole terminal");
    assert!(!pty.screen().contains("s idle") && !pty.screen().contains("? keys"), "{}", pty.screen());
    pty.resize(60, 10).unwrap();
    wait_status(&pty, "the status line", |r| r.trim_end().ends_with("^] ? keys"));
    wait_size(&home, "s", (60, 9), "the session one row shorter");
    pty.write(b"\x1c").unwrap();
}
