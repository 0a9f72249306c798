//! No cliff on the wire: this desk against a master of the previous protocol version, and an
//! old client against this master (docs/protocol.md §12).
//!
//! The previous version's peer is desk-master's built-in compatibility mode
//! (`DESK_MASTER_PROTOCOL=1`): version 2 changed only the handshake, so a master that keeps
//! version 1's handshake rule and writes version 1's session record is a version-1 master, frame
//! for frame — and, unlike a frozen binary, it is rebuilt with every change of the rest of the
//! master, so it cannot drift from what running version-1 masters do with every other frame.
//! The old client is `deskc` (tests/it/native.rs), which speaks version 1, and the raw HELLOs
//! below.

use crate::harness::{Pty, PtyCommand};
use crate::support::{DESK, DESK_MASTER, Home, Wire, prompts};
use desk_wire::{ErrorCode, Frame, PROTOCOL_VERSION, Role};

/// A demo agent under a master that speaks protocol version 1 only; returns its prompt log.
fn old_master_demo(home: &Home, name: &str) -> std::path::PathBuf {
    let log = home.path().join(format!("{name}.prompts"));
    let agent = env!("CARGO_BIN_EXE_desk-demo-agent");
    let out = home
        .cmd()
        .env("DESK_MASTER_PROTOCOL", "1")
        .args(["new", name, "--provider", "demo", "--", agent, "--prompt-log", log.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    log
}

fn hello(version: u16) -> Frame {
    Frame::Hello { version, role: Role::Query, cols: 0, rows: 0, status_line: false, view: false }
}

#[test]
fn this_desk_reaches_a_master_of_protocol_1_with_ls_peek_attach_and_delivery() {
    let home = Home::new();
    let log = old_master_demo(&home, "old");
    let record = std::fs::read_to_string(home.run_dir().join("old.json")).unwrap();
    assert!(!record.contains("\"protocol\""), "a version-1 master's record names no version: {record}");
    // ls (asking the master, and from its info file), peek, events: every query client.
    home.wait_ready("old");
    let row = home.session("old").unwrap();
    assert_eq!(row["status"], "running", "{row:#}");
    assert!(!home.peek("old").trim().is_empty(), "peek reads its screen");
    // The daemon observes it and delivers into it.
    home.serve();
    let id = home.send("old", "a prompt for an old master");
    assert_eq!(home.settled(&id)["state"], "delivered");
    assert_eq!(prompts(&log), ["a prompt for an old master"]);
    // A terminal attaches, sees the screen, detaches.
    let mut pty: Pty =
        PtyCommand::new(DESK).args(["attach", "old"]).env("DESK_HOME", home.path()).size(100, 30).spawn().unwrap();
    pty.wait_for_text("a prompt for an old master").unwrap();
    pty.write(b"\x1c").unwrap();
    assert!(pty.wait_exit(crate::harness::PATIENCE).unwrap().success());
}

#[test]
fn a_master_of_protocol_1_refuses_a_hello_of_2_in_words_and_answers_1() {
    let home = Home::new();
    old_master_demo(&home, "old");
    home.wait_ready("old");
    let mut wire = Wire::open(&home.socket("old"));
    wire.send(&hello(2));
    match wire.recv() {
        Some(Frame::Error { code: ErrorCode::UnsupportedVersion, message }) => {
            assert!(message.contains("protocol version 2 is not supported (this master speaks 1)"), "{message}")
        }
        other => panic!("expected UNSUPPORTED_VERSION, got {other:?}"),
    }
    let mut wire = Wire::open(&home.socket("old"));
    wire.send(&hello(1));
    assert!(matches!(wire.recv(), Some(Frame::Welcome { version: 1, .. })));
}

#[test]
fn this_master_answers_each_client_in_the_lower_of_their_versions() {
    let home = Home::new();
    home.new_sh("new", "exec cat");
    let record = std::fs::read_to_string(home.run_dir().join("new.json")).unwrap();
    assert!(record.contains(&format!("\"protocol\": {PROTOCOL_VERSION}")), "{record}");
    for (said, answered) in [(1, 1), (PROTOCOL_VERSION, PROTOCOL_VERSION), (PROTOCOL_VERSION + 1, PROTOCOL_VERSION)] {
        let mut wire = Wire::open(&home.socket("new"));
        wire.send(&hello(said));
        match wire.recv() {
            Some(Frame::Welcome { version, .. }) => assert_eq!(version, answered, "HELLO {said}"),
            other => panic!("HELLO {said}: expected WELCOME, got {other:?}"),
        }
    }
    let mut wire = Wire::open(&home.socket("new"));
    wire.send(&hello(0));
    assert!(matches!(wire.recv(), Some(Frame::Error { code: ErrorCode::UnsupportedVersion, .. })));
}

/// `desk ls` after an upgrade: the binaries are replaced the way `cargo install` and a package
/// manager replace them (a new file renamed over the old), under a running session. Its master
/// runs the replaced file: `older`, with what moving it takes. A session started after the
/// upgrade is `current`; one whose master speaks protocol 1 says so.
#[test]
fn ls_names_the_sessions_whose_master_is_older_than_this_desk() {
    let home = Home::new();
    let bin = home.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let install = || {
        for (from, name) in [(DESK, "desk"), (DESK_MASTER, "desk-master")] {
            let tmp = bin.join(format!(".{name}.new"));
            crate::support::copy_executable(from, &tmp);
            std::fs::rename(&tmp, bin.join(name)).unwrap();
        }
    };
    let desk = |args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = std::process::Command::new(bin.join("desk"));
        cmd.env("DESK_HOME", home.path()).env_remove("DESK_SESSION").args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "desk {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    install();
    desk(&["new", "before", "--", "sh", "-c", "exec cat"], &[]);
    install();
    desk(&["new", "after", "--", "sh", "-c", "exec cat"], &[]);
    desk(&["new", "old", "--", "sh", "-c", "exec cat"], &[("DESK_MASTER_PROTOCOL", "1")]);
    let listing: serde_json::Value = serde_json::from_str(&desk(&["ls", "--json"], &[])).unwrap();
    let master = |name: &str| {
        let row = listing["data"].as_array().unwrap().iter().find(|r| r["name"] == name).unwrap().clone();
        row["master"].clone()
    };
    let before = master("before");
    assert_eq!(
        (before["binary"].as_str(), before["protocol"].as_u64()),
        (Some("older"), Some(PROTOCOL_VERSION as u64)),
        "{before:#}"
    );
    assert!(before["upgrade"].as_str().unwrap().contains("desk upgrade hands it over"), "{before:#}");
    let after = master("after");
    assert_eq!(after["binary"], "current", "{after:#}");
    assert!(after.get("upgrade").is_none(), "{after:#}");
    let old = master("old");
    assert_eq!((old["binary"].as_str(), old["protocol"].as_u64()), (Some("current"), Some(1)), "{old:#}");
    let text = desk(&["ls"], &[]);
    let named = "before (an older desk-master), old (protocol 1)";
    assert!(text.contains(&format!("2 sessions run an older master than this desk's: {named}")), "{text}");
    // desk doctor says the same, as a warning with the fix.
    let doctor: serde_json::Value = serde_json::from_str(&desk(&["doctor", "--json"], &[])).unwrap();
    let masters =
        doctor["data"]["checks"].as_array().unwrap().iter().find(|c| c["check"] == "masters").unwrap().clone();
    assert_eq!(masters["status"], "warning", "{masters:#}");
    assert!(masters["detail"].as_str().unwrap().contains(named), "{masters:#}");
    assert!(masters["fix"].as_str().unwrap().contains("`desk upgrade` hands each over"), "{masters:#}");
}
