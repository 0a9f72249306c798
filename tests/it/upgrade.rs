//! `desk upgrade`: a running master hands over to another `desk-master` in place
//! (docs/upgrading.md).
//!
//! The "new binary" is this build's `desk-master` itself: a handover to it is a real re-exec of
//! a real binary (the process image is replaced, every descriptor and byte of state crosses the
//! exec through the memfd), which is what an upgrade does; only the version line stays the
//! same. The refusals use `--master` to point at a binary that cannot take over.

use crate::harness::{Pty, PtyCommand};
use crate::support::{DESK, DESK_MASTER, Home, eventually, prompts};
use desk_wire::{Frame, Role};

/// A session that floods numbered lines until `stop` exists, prints its last number, waits for
/// `go`, then runs the demo agent (whose prompt log is returned). 80x24, a log big enough for
/// every line.
fn flood(home: &Home, name: &str) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let stop = home.path().join("stop");
    let go = home.path().join("go");
    let log = home.path().join(format!("{name}.prompts"));
    let agent = env!("CARGO_BIN_EXE_desk-demo-agent");
    let script = format!(
        "i=0; while [ ! -e '{stop}' ]; do j=0; while [ $j -lt 100 ]; do i=$((i+1)); j=$((j+1)); echo \"flood $i\"; \
         done; sleep 0.01; done; echo \"flood end $i\"; \
         while [ ! -e '{go}' ]; do sleep 0.05; done; exec '{agent}' --prompt-log '{log}'",
        stop = stop.display(),
        go = go.display(),
        log = log.display(),
    );
    home.ok(&[
        "new",
        name,
        "--provider",
        "demo",
        "--size",
        "80x24",
        "--log-cap",
        "268435456",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    (stop, go, log)
}

fn attach(home: &Home, name: &str, read_only: bool) -> Pty {
    let mut args = vec!["attach", "--no-status", name];
    if read_only {
        args.push("--read-only");
    }
    PtyCommand::new(DESK).args(args).env("DESK_HOME", home.path()).size(80, 24).spawn().unwrap()
}

/// Rows as text, trailing blanks and trailing blank rows trimmed.
fn trimmed<'a>(rows: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut rows: Vec<String> = rows.map(|r| r.trim_end().to_string()).collect();
    while rows.last().is_some_and(String::is_empty) {
        rows.pop();
    }
    rows
}

fn peek_rows(home: &Home, name: &str) -> Vec<String> {
    trimmed(home.peek(name).lines())
}

/// The number in "flood N" lines, in order, from a text.
fn flood_numbers(text: &str) -> Vec<u64> {
    text.lines().filter_map(|l| l.strip_prefix("flood ")).filter_map(|n| n.trim().parse().ok()).collect()
}

#[test]
fn a_handover_under_a_flood_keeps_the_child_every_line_and_the_attached_screens() {
    let home = Home::new();
    home.serve();
    let (stop, go, prompt_log) = flood(&home, "f");
    let controller = attach(&home, "f", false);
    let viewer = attach(&home, "f", true);
    let before = home.session("f").unwrap();
    let (pid, master_pid) = (before["pid"].as_i64().unwrap(), before["master_pid"].as_i64().unwrap());
    // Mid-flood: the screens are moving when the master hands over.
    for pty in [&controller, &viewer] {
        pty.wait_until(crate::harness::PATIENCE, "2000 lines flooded", |s| {
            flood_numbers(s.contents()).last().is_some_and(|n| *n >= 2000)
        })
        .unwrap();
    }
    let out = home.ok(&["upgrade", "f", "--master", DESK_MASTER, "--json"]);
    std::fs::write(&stop, "").unwrap();
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let session = &report["data"]["sessions"][0];
    assert_eq!(session["result"], "upgraded", "{report:#}");
    assert!(session["to"].as_str().unwrap().starts_with("desk-master "), "{report:#}");

    let end = home.wait_screen("f", "flood end");
    let last: u64 = end.lines().find_map(|l| l.strip_prefix("flood end ")).unwrap().trim().parse().unwrap();
    // The same process, the same child.
    let after = home.session("f").unwrap();
    assert_eq!((after["pid"].as_i64().unwrap(), after["master_pid"].as_i64().unwrap()), (pid, master_pid));
    assert_eq!(after["status"], "running");
    // Each attached terminal shows exactly the master's screen.
    let want = peek_rows(&home, "f");
    for (who, pty) in [("controller", &controller), ("viewer", &viewer)] {
        pty.wait_until(crate::harness::PATIENCE, &format!("the {who}'s screen to be the master's"), |s| {
            trimmed(s.rows().iter().map(String::as_str)) == want
        })
        .unwrap();
    }
    // No line lost or doubled: the session log and the screen hold every number once, in order.
    let text = home.ok(&["log", "f", "--since-start"]);
    let numbers = flood_numbers(&text);
    let first_wrong = numbers.iter().enumerate().position(|(i, n)| *n != i as u64 + 1);
    assert!(
        numbers.len() as u64 == last && first_wrong.is_none(),
        "{} numbered lines for {last} written; first out of place at {first_wrong:?}",
        numbers.len()
    );
    // The journal records the handover.
    let events = home.ok(&["events", "f", "--json"]);
    assert!(events.contains("\"upgraded\""), "{events}");
    // The daemon, whose connection crossed the handover, still delivers to the session.
    std::fs::write(&go, "").unwrap();
    home.wait_ready("f");
    let id = home.send("f", "a prompt after the handover");
    assert_eq!(home.settled(&id)["state"], "delivered");
    assert_eq!(prompts(&prompt_log), ["a prompt after the handover"]);
    // And a terminal attaches to it afresh.
    let late = attach(&home, "f", true);
    late.wait_for_text("a prompt after the handover").unwrap();
}

#[test]
fn an_upgrade_the_new_binary_cannot_take_keeps_the_old_master_and_says_why() {
    let home = Home::new();
    home.new_sh("k", "i=0; while true; do i=$((i+1)); echo \"tick $i\"; sleep 0.02; done");
    let master_pid = home.master_pid("k");
    let mut viewer = home.connect("k", Role::Viewer, 80, 24);
    // Not executable.
    let plain = home.path().join("desk-master-plain");
    crate::support::copy_executable(DESK_MASTER, &plain);
    std::fs::set_permissions(&plain, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    // Executable, but it reads another handover format.
    let other = home.path().join("desk-master-other");
    std::fs::write(&other, "#!/bin/sh\ncase \"$1\" in --version) echo 'desk-master 9';; *) echo 99;; esac\n").unwrap();
    std::fs::set_permissions(&other, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    for (binary, why) in [(&plain, "cannot run"), (&other, "reads handover formats [99]")] {
        let out = home.desk(&["upgrade", "k", "--master", binary.to_str().unwrap()]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{text}");
        assert!(text.starts_with("k: failed: ") && text.contains(why), "{text}");
    }
    // The master itself refuses what the CLI would not catch: a binary it cannot execute.
    let mut query = home.connect("k", Role::Query, 0, 0);
    let request = desk_wire::operator::ClientEvent::Upgrade {
        binary: plain.display().to_string(),
        args: Vec::new(),
        formats: vec![1],
        user: "test".into(),
        via: "cli".into(),
    };
    query.send(&request.to_frame());
    match query.recv_until("the refusal", |f| matches!(f, Frame::Error { .. })) {
        Frame::Error { message, .. } => {
            assert!(message.contains("the master keeps its binary") && message.contains("not executable"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    // An exec that fails (an executable file the kernel cannot run) returns to the old code,
    // which says why and goes on.
    let garbage = home.path().join("desk-master-garbage");
    std::fs::write(&garbage, [0u8; 64]).unwrap();
    std::fs::set_permissions(&garbage, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let request = desk_wire::operator::ClientEvent::Upgrade {
        binary: garbage.display().to_string(),
        args: Vec::new(),
        formats: vec![1],
        user: "test".into(),
        via: "cli".into(),
    };
    query.send(&request.to_frame());
    match query.recv_until("the failed exec", |f| matches!(f, Frame::Error { .. })) {
        Frame::Error { message, .. } => assert!(message.contains("cannot execute"), "{message}"),
        other => panic!("{other:?}"),
    }
    // The old master still runs and serves its clients, and can still hand over.
    assert_eq!(home.master_pid("k"), master_pid);
    let seen = viewer.recv_until("output after the refusals", |f| matches!(f, Frame::Output(_)));
    assert!(matches!(seen, Frame::Output(_)));
    assert!(home.peek("k").contains("tick"));
    let out = home.ok(&["upgrade", "k", "--master", DESK_MASTER]);
    assert!(out.starts_with("k: upgraded from "), "{out}");
    assert_eq!(home.master_pid("k"), master_pid);
    viewer.recv_until("output after the handover", |f| matches!(f, Frame::Output(_)));
}

#[test]
fn a_new_binary_that_cannot_read_the_record_hands_the_session_back_to_the_old_one() {
    let home = Home::new();
    // The failpoint makes the new image fail where it reads the record; the old binary, executed
    // again from the descriptor kept of it, takes the session back.
    home.cmd()
        .env("DESK_FAILPOINT", "handover-resume")
        .args(["new", "b", "--", "sh", "-c", "echo before; exec cat"])
        .output()
        .unwrap();
    home.wait_screen("b", "before");
    let pid = home.session("b").unwrap()["pid"].as_i64().unwrap();
    let out = home.desk(&["upgrade", "b", "--master", DESK_MASTER]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("the new binary could not take over (failpoint handover-resume")
            && text.contains("went back to its old binary"),
        "{text}"
    );
    let row = home.session("b").unwrap();
    assert_eq!((row["status"].as_str(), row["pid"].as_i64()), (Some("running"), Some(pid)), "{row:#}");
    // Its screen and terminal came back with it.
    home.ok(&["keys", "b", "text:after", "Enter"]);
    let screen = home.wait_screen("b", "after\nafter");
    assert!(screen.starts_with("before\n"), "{screen}");
}

#[test]
fn a_master_of_protocol_1_is_refused_in_words_as_too_old_to_upgrade_in_place() {
    let home = Home::new();
    home.cmd().env("DESK_MASTER_PROTOCOL", "1").args(["new", "old", "--", "sh", "-c", "exec cat"]).output().unwrap();
    home.wait_ready("old");
    let out = home.desk(&["upgrade", "old"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("old: failed: this master is too old to upgrade in place"), "{text}");
    assert!(text.contains("restart the session"), "{text}");
    assert_eq!(home.session("old").unwrap()["status"], "running");
}

#[test]
fn upgrade_without_names_skips_current_masters_and_all_forces_them() {
    let home = Home::new();
    home.new_sh("a", "exec cat");
    home.wait_ready("a");
    let out = home.ok(&["upgrade"]);
    assert_eq!(out.trim(), "a: skipped: already current");
    let out = home.ok(&["upgrade", "--all"]);
    assert!(out.starts_with("a: upgraded from desk-master "), "{out}");
    let eventually_running = eventually("a to run after the handover", || {
        let row = home.session("a").ok_or("no row")?;
        if row["status"] == "running" { Ok(row) } else { Err(format!("{row:#}")) }
    });
    assert_eq!(eventually_running["name"], "a");
}
