//! `desk attach` on real pseudo-terminals, seen through a screen emulator: keyframes on attach,
//! detach and reattach, typing, read-only viewers, exit status, resizing, floods.

use crate::harness::{PATIENCE, Pty, PtyCommand};
use crate::support::{DESK, Home, eventually};
use std::time::Duration;

/// `desk attach NAME [args]` on a new pseudo-terminal of the given size, without the status
/// line: these tests pin the raw stream (a terminal of the session's size gets its bytes).
fn attach(home: &Home, name: &str, extra: &[&str], cols: u16, rows: u16) -> Pty {
    PtyCommand::new(DESK)
        .arg("attach")
        .arg(name)
        .arg("--no-status")
        .args(extra)
        .env("DESK_HOME", home.path())
        .size(cols, rows)
        .spawn()
        .expect("spawn desk attach")
}

fn visible_rows(pty: &Pty) -> Vec<String> {
    let mut rows: Vec<String> = pty.screen().rows().iter().map(|r| r.trim_end().to_string()).collect();
    while rows.last().is_some_and(|r| r.is_empty()) {
        rows.pop();
    }
    rows
}

fn peek_rows(home: &Home, name: &str) -> Vec<String> {
    let json = home.json(&["peek", name, "--json"])["data"].clone();
    let mut rows: Vec<String> =
        json["lines"].as_array().unwrap().iter().map(|l| l.as_str().unwrap().trim_end().to_string()).collect();
    while rows.last().is_some_and(|r| r.is_empty()) {
        rows.pop();
    }
    rows
}

#[test]
fn attach_detach_reattach_shows_the_same_screen() {
    let home = Home::new();
    home.new_sh("same", "for i in $(seq 1 30); do printf '\\033[3%dmline %02d\\033[0m\\n' $((i % 7)) $i; done; printf 'READY>'; exec cat");
    home.wait_screen("same", "READY>");
    let mut first = attach(&home, "same", &[], 120, 40);
    let before = first.wait_for_text("READY>").unwrap();
    assert!(before.contains("line 30"));
    first.write(b"\x1c").unwrap();
    let status = first.wait_exit(PATIENCE).unwrap();
    assert!(status.success(), "detach exits 0: {status:?}");
    assert!(first.screen().contains("[desk: detached from same]"));

    let second = attach(&home, "same", &[], 120, 40);
    second.wait_for_text("READY>").unwrap();
    let rows = visible_rows(&second);
    assert_eq!(rows, peek_rows(&home, "same"), "a reattached client shows exactly the master's screen");
    assert!(rows.iter().any(|r| r == "line 01") && rows.last().unwrap() == "READY>", "{rows:#?}");
    assert_eq!(second.screen().cursor(), (rows.len() as u16 - 1, 6), "cursor restored after the prompt");
}

#[test]
fn typed_input_reaches_the_child_and_its_echo_comes_back() {
    let home = Home::new();
    home.new_sh("echo", "exec cat");
    let pty = attach(&home, "echo", &[], 120, 40);
    eventually("the attach to register", || match home.session("echo") {
        Some(s) if s["clients"]["controllers"] == 1 => Ok(()),
        other => Err(format!("{other:?}")),
    });
    pty.write(b"typed through attach\r").unwrap();
    pty.wait_for_text("typed through attach").unwrap();
    home.wait_screen("echo", "typed through attach");
}

#[test]
fn a_read_only_viewer_cannot_type_but_can_detach() {
    let home = Home::new();
    home.new_sh("ro", "echo VIEW-ME; exec cat");
    let mut viewer = attach(&home, "ro", &["--read-only"], 120, 40);
    viewer.wait_for_text("VIEW-ME").unwrap();
    assert_eq!(home.session("ro").unwrap()["clients"]["viewers"], 1);
    viewer.write(b"viewer typing\r").unwrap();
    // A controller proves the session is live and that the viewer's bytes never arrived.
    let controller = attach(&home, "ro", &[], 120, 40);
    controller.wait_for_text("VIEW-ME").unwrap();
    controller.write(b"controller typing\r").unwrap();
    home.wait_screen("ro", "controller typing");
    assert!(!home.peek("ro").contains("viewer typing"));
    viewer.write(b"\x1c").unwrap();
    assert!(viewer.wait_exit(PATIENCE).unwrap().success());
}

#[test]
fn attach_exits_with_the_childs_exit_code() {
    let home = Home::new();
    home.new_sh("code", "read x; exit 7");
    let mut pty = attach(&home, "code", &[], 120, 40);
    eventually("the attach to register", || match home.session("code") {
        Some(s) if s["clients"]["controllers"] == 1 => Ok(()),
        other => Err(format!("{other:?}")),
    });
    pty.write(b"\r").unwrap();
    let status = pty.wait_exit(PATIENCE).unwrap();
    assert_eq!(status.code(), Some(7));
    assert!(pty.screen().contains("[desk: code exited with code 7]"), "{}", pty.screen());
}

#[test]
fn attach_exits_with_128_plus_the_signal_that_killed_the_child() {
    let home = Home::new();
    home.new_sh("sig", "read x; kill -TERM $$");
    let mut pty = attach(&home, "sig", &[], 120, 40);
    eventually("the attach to register", || match home.session("sig") {
        Some(s) if s["clients"]["controllers"] == 1 => Ok(()),
        other => Err(format!("{other:?}")),
    });
    pty.write(b"\r").unwrap();
    let status = pty.wait_exit(PATIENCE).unwrap();
    assert_eq!(status.code(), Some(128 + 15));
    assert!(pty.screen().contains("killed by signal 15 (SIGTERM)"), "{}", pty.screen());
}

#[test]
fn the_terminal_is_restored_after_detach() {
    let home = Home::new();
    // The session switches on modes that must not stay on in the user's terminal.
    home.new_sh("modes", "printf '\\033[?1049h\\033[?2004h\\033[?1000h\\033[?25lIN-ALT'; exec cat");
    home.wait_screen("modes", "IN-ALT");
    let mut pty = attach(&home, "modes", &[], 120, 40);
    pty.wait_until(PATIENCE, "alternate screen on", |s| s.alternate_screen() && s.contains("IN-ALT")).unwrap();
    pty.write(b"\x1c").unwrap();
    pty.wait_exit(PATIENCE).unwrap();
    let screen = pty.screen();
    assert!(!screen.alternate_screen() && !screen.bracketed_paste(), "{screen}");
    assert!(pty.with_vt100(|s| !s.hide_cursor() && s.mouse_protocol_mode() == vt100::MouseProtocolMode::None));
}

#[test]
fn the_session_size_follows_the_attached_terminal() {
    let home = Home::new();
    home.new_sh("size", "exec cat");
    let pty = attach(&home, "size", &[], 100, 30);
    let size = |home: &Home| {
        let s = home.session("size").unwrap();
        (s["cols"].as_u64().unwrap(), s["rows"].as_u64().unwrap())
    };
    eventually("100x30", || if size(&home) == (100, 30) { Ok(()) } else { Err(format!("{:?}", size(&home))) });
    pty.resize(90, 25).unwrap();
    eventually("90x25 after SIGWINCH", || {
        if size(&home) == (90, 25) { Ok(()) } else { Err(format!("{:?}", size(&home))) }
    });
}

#[test]
fn a_headless_tui_gets_its_cursor_position_query_answered() {
    let home = Home::new();
    // The demo agent asks for the cursor position at start and says so if nobody answers.
    home.ok(&["new", "tui", "--", env!("CARGO_BIN_EXE_desk-demo-agent"), "--cpr-timeout-ms", "60000"]);
    let screen = home.wait_screen("tui", "idle");
    assert!(!screen.contains("no cursor report"), "{screen}");
}

#[test]
fn four_clients_during_a_50_mb_flood_end_on_the_masters_exact_screen() {
    let home = Home::new();
    home.new_sh(
        "flood",
        "read go; head -c 37500000 /dev/urandom | base64 -w 100; printf 'FLOOD-END\\n'; exec sleep 100000",
    );
    let clients: Vec<Pty> = (0..4).map(|_| attach(&home, "flood", &[], 120, 40)).collect();
    eventually("four controllers", || match home.session("flood") {
        Some(s) if s["clients"]["controllers"] == 4 => Ok(()),
        other => Err(format!("{other:?}")),
    });
    clients[0].write(b"\r").unwrap();
    home.wait_screen("flood", "FLOOD-END");
    let master = peek_rows(&home, "flood");
    for (i, client) in clients.iter().enumerate() {
        client
            .wait_until(Duration::from_secs(60), "the flood's end", |s| s.contains("FLOOD-END"))
            .unwrap_or_else(|e| panic!("client {i}: {e}"));
        assert_eq!(visible_rows(client), master, "client {i} differs from the master's screen");
    }
}

#[test]
fn typed_input_the_session_refuses_rings_the_bell_and_is_reported_at_the_end() {
    let home = Home::new();
    // The child never reads its input: past the master's 1 MiB input queue, input is refused.
    home.new_sh("deaf", "stty raw -echo; echo DEAF-READY; exec sleep 100000");
    home.wait_screen("deaf", "DEAF-READY");
    let mut pty = attach(&home, "deaf", &[], 120, 40);
    pty.wait_for_text("DEAF-READY").unwrap();
    let chunk = vec![b'x'; 64 * 1024];
    for _ in 0..24 {
        pty.write(&chunk).unwrap();
    }
    pty.wait_until(PATIENCE, "the refusal's bell", |s| s.bells() > 0).unwrap();
    pty.write(b"\x1c").unwrap();
    pty.wait_exit(PATIENCE).unwrap();
    let screen = pty.screen();
    assert!(screen.contains("[desk: deaf refused typed input"), "{screen}");
    assert!(screen.contains("waiting for the child to read"), "{screen}");
}

#[test]
fn the_terminal_is_restored_when_the_child_exits_and_when_attach_is_signalled() {
    let home = Home::new();
    let modes = "printf '\\033[?1049h\\033[?2004h\\033[?1000h\\033[?25lIN-ALT'";
    // The child exits while attached.
    home.new_sh("gone", &format!("{modes}; read x; exit 5"));
    home.wait_screen("gone", "IN-ALT");
    let mut pty = attach(&home, "gone", &[], 120, 40);
    pty.wait_until(PATIENCE, "alternate screen on", |s| s.alternate_screen() && s.contains("IN-ALT")).unwrap();
    pty.write(b"\r").unwrap();
    assert_eq!(pty.wait_exit(PATIENCE).unwrap().code(), Some(5));
    let screen = pty.screen();
    assert!(!screen.alternate_screen() && !screen.bracketed_paste(), "{screen}");
    assert!(pty.with_vt100(|s| !s.hide_cursor() && s.mouse_protocol_mode() == vt100::MouseProtocolMode::None));
    // The attach itself is told to stop.
    home.new_sh("stays", &format!("{modes}; exec cat"));
    home.wait_screen("stays", "IN-ALT");
    let mut pty = attach(&home, "stays", &[], 120, 40);
    pty.wait_until(PATIENCE, "alternate screen on", |s| s.alternate_screen() && s.contains("IN-ALT")).unwrap();
    pty.signal(nix::sys::signal::Signal::SIGTERM).unwrap();
    assert_eq!(pty.wait_exit(PATIENCE).unwrap().code(), Some(128 + 15));
    let screen = pty.screen();
    assert!(!screen.alternate_screen() && !screen.bracketed_paste(), "{screen}");
    assert!(screen.contains("on signal 15"), "{screen}");
}

/// Wait until the session's master holds `pty`'s terminal (the attach lent it,
/// docs/protocol.md §5.13): the master has the attach's own description of `/dev/tty` (a master
/// runs in a session of its own, without a controlling terminal: it never opens one itself).
fn wait_lent(home: &Home, name: &str, pty: &Pty) {
    let tty = std::path::Path::new("/dev/tty");
    let attach_has = std::fs::read_dir(format!("/proc/{}/fd", pty.pid()))
        .expect("the attach's descriptors")
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .any(|target| target == tty);
    assert!(attach_has, "the attach reads its terminal as /dev/tty");
    let master = home.master_pid(name);
    eventually("the master to hold the attach's terminal", || {
        let held = std::fs::read_dir(format!("/proc/{master}/fd"))
            .map_err(|e| e.to_string())?
            .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
            .any(|target| target == tty);
        if held { Ok(()) } else { Err(format!("master {master} has no descriptor of /dev/tty")) }
    });
}

/// The attach with its status line (the default).
fn attach_with_status(home: &Home, name: &str, cols: u16, rows: u16) -> Pty {
    PtyCommand::new(DESK)
        .arg("attach")
        .arg(name)
        .env("DESK_HOME", home.path())
        .size(cols, rows)
        .spawn()
        .expect("spawn desk attach")
}

#[test]
fn keys_and_echo_go_around_a_stopped_attach_while_the_master_holds_its_terminal() {
    let home = Home::new();
    home.new_sh("lend", "stty raw -echo; exec cat");
    let mut pty = attach_with_status(&home, "lend", 100, 20);
    pty.wait_until(PATIENCE, "the status line", |s| s.rows()[19].contains("lend")).unwrap();
    wait_lent(&home, "lend", &pty);
    // Stopped, the attach process cannot carry a byte: the echo comes back through the master.
    pty.signal(nix::sys::signal::Signal::SIGSTOP).unwrap();
    pty.write(b"typed while attach sleeps").unwrap();
    let screen = pty.wait_for_text("typed while attach sleeps");
    pty.signal(nix::sys::signal::Signal::SIGCONT).unwrap();
    let screen = screen.unwrap();
    assert!(screen.rows()[19].contains("lend"), "the status line is still on the last row: {screen}");
    // The prefix gives the terminal back: attach's own prompt reads the next key (? opens the
    // help), and once it closes the terminal is lent again.
    pty.write(b"\x1d?").unwrap();
    pty.wait_for_text("keys after the prefix").unwrap();
    pty.write(b"\x1b").unwrap();
    pty.wait_until(PATIENCE, "the help closed", |s| !s.contains("keys after the prefix")).unwrap();
    wait_lent(&home, "lend", &pty);
    pty.write(b" and again").unwrap();
    pty.wait_for_text("typed while attach sleeps and again").unwrap();
    // The detach key, read by the master, detaches.
    pty.write(b"\x1c").unwrap();
    assert!(pty.wait_exit(PATIENCE).unwrap().success());
    let screen = pty.screen();
    assert!(screen.contains("[desk: detached from lend]"), "{screen}");
    assert_eq!(home.session("lend").unwrap()["clients"]["controllers"], 0);
}

#[test]
fn the_status_line_comes_back_after_the_session_wipes_it_from_a_held_terminal() {
    let home = Home::new();
    // A reset (ESC c) clears the whole terminal, the status row with it.
    home.new_sh("wipe", "stty raw -echo; head -c 2 >/dev/null; printf '\\033cWIPED'; exec cat");
    let pty = attach_with_status(&home, "wipe", 100, 20);
    pty.wait_until(PATIENCE, "the status line", |s| s.rows()[19].contains("wipe")).unwrap();
    wait_lent(&home, "wipe", &pty);
    pty.write(b"go").unwrap();
    let screen = pty
        .wait_until(PATIENCE, "the session's reset and the status line again", |s| {
            s.contains("WIPED") && s.rows()[19].contains("wipe")
        })
        .unwrap();
    assert!(screen.rows()[0].starts_with("WIPED"), "{screen}");
    pty.write(b"\x1c").unwrap();
}
