//! The master as seen by raw protocol clients: malformed peers, roles, backpressure, input
//! that the child does not read, peers that vanish.

use crate::support::{Home, Wire, alive, eventually, rss_kib};
use desk_wire::{ErrorCode, Frame, MAX_PAYLOAD, PROTOCOL_VERSION, Role};
use std::time::{Duration, Instant};

fn expect_error(frames: &[Frame], code: ErrorCode) {
    assert!(
        frames.iter().any(|f| matches!(f, Frame::Error { code: c, .. } if *c == code)),
        "expected an ERROR {code:?}, got {frames:?}"
    );
}

/// A controller that is attached and working: types a line and sees it echoed.
fn assert_controller_works(home: &Home, wire: &mut Wire, name: &str, marker: &str) {
    wire.send(&Frame::Input(format!("{marker}\n").into_bytes()));
    home.wait_screen(name, marker);
}

#[test]
fn an_oversized_frame_closes_only_that_client() {
    let home = Home::new();
    home.new_sh("big", "exec cat");
    let mut good = home.connect("big", Role::Controller, 120, 40);
    let mut bad = home.connect("big", Role::Controller, 120, 40);
    let mut header = ((MAX_PAYLOAD + 1) as u32).to_le_bytes().to_vec();
    header.extend_from_slice(&[0x03, 0, 0, 0]);
    bad.send_raw(&header).unwrap();
    let frames = bad.drain_to_close();
    expect_error(&frames, ErrorCode::TooLarge);
    assert_controller_works(&home, &mut good, "big", "still-alive-1");
}

#[test]
fn garbage_and_unknown_frames_close_only_that_client() {
    let home = Home::new();
    home.new_sh("junk", "exec cat");
    let mut good = home.connect("junk", Role::Controller, 120, 40);

    let mut garbage = Wire::open(&home.socket("junk"));
    garbage.send_raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let frames = garbage.drain_to_close();
    assert!(frames.iter().any(|f| matches!(f, Frame::Error { .. })), "{frames:?}");

    let mut unknown = home.connect("junk", Role::Controller, 120, 40);
    unknown.send_raw(&[0, 0, 0, 0, 0x7f, 0, 0, 0]).unwrap();
    expect_error(&unknown.drain_to_close(), ErrorCode::UnknownType);

    let mut no_hello = Wire::open(&home.socket("junk"));
    no_hello.send(&Frame::Input(b"sneaky\n".to_vec()));
    expect_error(&no_hello.drain_to_close(), ErrorCode::BadHello);

    // A version no desk ever spoke (a newer one is answered in this master's: tests/it/versions.rs).
    let mut old = Wire::open(&home.socket("junk"));
    old.send(&Frame::Hello { version: 0, role: Role::Controller, cols: 80, rows: 24, status_line: false, view: false });
    expect_error(&old.drain_to_close(), ErrorCode::UnsupportedVersion);

    let mut wrong_way = home.connect("junk", Role::Controller, 120, 40);
    wrong_way.send(&Frame::Output(b"not yours to send".to_vec()));
    expect_error(&wrong_way.drain_to_close(), ErrorCode::Malformed);

    assert_controller_works(&home, &mut good, "junk", "still-alive-2");
    assert!(!home.peek("junk").contains("sneaky"));
}

#[test]
fn a_viewer_cannot_type_and_its_resize_leaves_the_session_alone() {
    let home = Home::new();
    home.new_sh("ro", "exec cat");
    let mut viewer = home.connect("ro", Role::Viewer, 80, 24);
    viewer.send(&Frame::Input(b"typed by a viewer\n".to_vec()));
    let refused = viewer.recv_until("refusal", |f| matches!(f, Frame::Error { .. }));
    assert!(matches!(refused, Frame::Error { code: ErrorCode::NotPermitted, .. }), "{refused:?}");
    // A viewer's RESIZE names the size of its own view (docs/protocol.md §3.4): accepted
    // without a reply, and never the session's size.
    viewer.send(&Frame::Resize { cols: 50, rows: 10 });
    // The viewer stays connected and the session is untouched.
    viewer.send(&Frame::Ping(7));
    let pong = viewer.recv_until("pong", |f| matches!(f, Frame::Pong(7) | Frame::Error { .. }));
    assert_eq!(pong, Frame::Pong(7), "the RESIZE was refused");
    let s = home.session("ro").unwrap();
    assert_eq!((s["cols"].as_u64(), s["rows"].as_u64()), (Some(120), Some(40)));
    assert_eq!(s["clients"]["viewers"], 1);
    assert!(!home.peek("ro").contains("typed by a viewer"));
}

fn size_of(home: &Home, name: &str) -> (u64, u64) {
    let s = home.session(name).unwrap();
    (s["cols"].as_u64().unwrap(), s["rows"].as_u64().unwrap())
}

fn wait_size(home: &Home, name: &str, want: (u64, u64)) {
    eventually(&format!("size {want:?}"), || {
        let got = size_of(home, name);
        if got == want { Ok(()) } else { Err(format!("{got:?}")) }
    });
}

#[test]
fn size_follows_the_most_recently_active_controller() {
    let home = Home::new();
    home.new_sh("sz", "exec cat");
    let mut a = home.connect("sz", Role::Controller, 100, 30);
    wait_size(&home, "sz", (100, 30));
    let mut b = home.connect("sz", Role::Controller, 90, 20);
    wait_size(&home, "sz", (90, 20));
    // A viewer never resizes.
    let _v = home.connect("sz", Role::Viewer, 40, 10);
    a.send(&Frame::Input(b"a types\n".to_vec()));
    wait_size(&home, "sz", (100, 30));
    // A resize from a controller that is not the latest is remembered, not applied...
    b.send(&Frame::Resize { cols: 80, rows: 25 });
    a.send(&Frame::Ping(1));
    a.recv_until("pong", |f| matches!(f, Frame::Pong(1)));
    assert_eq!(size_of(&home, "sz"), (100, 30));
    // ...until it becomes the latest.
    b.send(&Frame::Input(b"b types\n".to_vec()));
    wait_size(&home, "sz", (80, 25));
    // The latest controller's resize applies at once.
    b.send(&Frame::Resize { cols: 70, rows: 22 });
    wait_size(&home, "sz", (70, 22));
    // When the latest leaves, the next most recent controller's size takes over.
    b.send(&Frame::Detach);
    drop(b);
    wait_size(&home, "sz", (100, 30));
    // And the child sees it.
    a.send(&Frame::Input(b"\x04".to_vec()));
}

#[test]
fn a_client_that_never_reads_does_not_slow_the_child_and_memory_stays_bounded() {
    let home = Home::new();
    home.new_sh("flood", "read go; head -c 60000000 /dev/zero | tr '\\0' 'x'; echo; echo FLOOD-DONE; exec sleep 1000");
    let master = home.master_pid("flood");
    let baseline = rss_kib(master);
    // A viewer that never reads a byte, and a terminal that reads everything.
    let stalled = home.connect("flood", Role::Viewer, 120, 40);
    let reader = crate::harness::PtyCommand::new(crate::support::DESK)
        .args(["attach", "flood", "--read-only", "--no-status"])
        .env("DESK_HOME", home.path())
        .size(120, 40)
        .spawn()
        .expect("spawn desk attach");
    eventually("the reading viewer to attach", || match home.session("flood") {
        Some(s) if s["clients"]["viewers"] == 2 => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let mut driver = home.connect("flood", Role::Controller, 120, 40);
    driver.send(&Frame::Input(b"go\n".to_vec()));
    let mut peak = baseline;
    eventually("the flood to finish despite the stalled client", || {
        peak = peak.max(rss_kib(master));
        let screen = String::from_utf8_lossy(&home.desk(&["peek", "flood"]).stdout).into_owned();
        if screen.contains("FLOOD-DONE") { Ok(()) } else { Err(format!("rss {} KiB", rss_kib(master))) }
    });
    assert!(alive(master));
    // 60 MB went through; the stalled client may hold at most its queue bound.
    assert!(peak < baseline + 32 * 1024, "master grew from {baseline} KiB to {peak} KiB");
    // The stalled viewer changed nothing for the one that reads: it ends on the master's screen.
    let trimmed = |rows: Vec<String>| {
        let mut rows: Vec<String> = rows.into_iter().map(|r| r.trim_end().to_string()).collect();
        while rows.last().is_some_and(|r| r.is_empty()) {
            rows.pop();
        }
        rows
    };
    let peek = home.json(&["peek", "flood", "--json"])["data"].clone();
    let master_rows =
        trimmed(peek["lines"].as_array().unwrap().iter().map(|l| l.as_str().unwrap().to_string()).collect());
    reader
        .wait_until(crate::harness::PATIENCE, "the reader on the master's screen", |screen| {
            trimmed(screen.rows().to_vec()) == master_rows
        })
        .unwrap();
    drop(stalled);
}

#[test]
fn a_child_that_never_reads_input_does_not_block_the_master() {
    let home = Home::new();
    home.new_sh("deaf", "stty raw -echo; i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.05; done");
    let mut sender = home.connect("deaf", Role::Controller, 120, 40);
    let chunk = vec![b'y'; 256 * 1024];
    for _ in 0..16 {
        sender.send(&Frame::Input(chunk.clone()));
    }
    // Everything past the bounded queue is refused, loudly, never dropped silently.
    let refusal = sender.recv_until("input refusal", |f| matches!(f, Frame::Error { .. }));
    assert!(matches!(refusal, Frame::Error { code: ErrorCode::InputFull, .. }), "{refusal:?}");
    // The master keeps serving: output keeps flowing and queries are answered.
    let before = home.peek("deaf");
    eventually("the child's output to keep flowing", || {
        let now = home.peek("deaf");
        if now != before { Ok(()) } else { Err(now) }
    });
    let s = home.session("deaf").unwrap();
    assert_eq!(s["status"], "running");
}

#[test]
fn the_master_survives_a_client_vanishing_mid_write() {
    let home = Home::new();
    home.new_sh("vanish", "read go; yes vanish | head -c 20000000; echo; echo VANISH-DONE; exec sleep 1000");
    let master = home.master_pid("vanish");
    let mut driver = home.connect("vanish", Role::Controller, 120, 40);
    let mut victims: Vec<Wire> = (0..3).map(|_| home.connect("vanish", Role::Viewer, 120, 40)).collect();
    driver.send(&Frame::Input(b"go\n".to_vec()));
    // Read a little so output is flowing to them, then drop them without a word.
    for v in &mut victims {
        v.recv_until("output", |f| matches!(f, Frame::Output(_)));
        v.stream.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
    }
    victims.clear();
    home.wait_screen("vanish", "VANISH-DONE");
    assert!(alive(master));
}

/// The other uid's half of [`peer_credentials_of_another_user_are_refused`] (which re-executes
/// itself with `DESK_PEER_SOCKET` as that uid): connects, says HELLO and prints what the master
/// answered.
fn peer_probe(socket: &std::ffi::OsStr) {
    let outcome = match std::os::unix::net::UnixStream::connect(socket) {
        Err(e) => format!("PEER-RESULT connect-failed {e}"),
        Ok(stream) => {
            stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut wire = Wire { stream, decoder: desk_wire::FrameDecoder::new() };
            // The master may refuse (and close) before HELLO is even written, so a broken pipe
            // here is an answer too; what it sent before closing is still readable.
            let hello = Frame::Hello {
                version: PROTOCOL_VERSION,
                role: Role::Controller,
                cols: 80,
                rows: 24,
                status_line: false,
                view: false,
            };
            let _ = wire.send_raw(&hello.to_bytes());
            let frames = wire.drain_to_close();
            if frames.iter().any(|f| matches!(f, Frame::Error { code: ErrorCode::PeerRefused, .. })) {
                "PEER-RESULT refused".to_string()
            } else if frames.iter().any(|f| matches!(f, Frame::Welcome { .. })) {
                "PEER-RESULT welcomed".to_string()
            } else {
                format!("PEER-RESULT other {frames:?}")
            }
        }
    };
    println!("{outcome}");
}

#[test]
#[cfg_attr(desk_missing_root, ignore = "needs root")]
fn peer_credentials_of_another_user_are_refused() {
    if let Some(socket) = std::env::var_os("DESK_PEER_SOCKET") {
        return peer_probe(&socket);
    }
    crate::suite::require(crate::suite::Needs::Root);
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let home = Home::new();
    home.new_sh("uid", "exec cat");
    // Let uid 65534 reach the socket at all; the master's SO_PEERCRED check must still refuse it.
    let dirs = [home.path().to_path_buf(), home.run_dir()];
    for d in &dirs {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o711)).unwrap();
    }
    std::fs::set_permissions(home.socket("uid"), std::fs::Permissions::from_mode(0o777)).unwrap();
    // The other uid's half runs in a fresh process (this test binary, re-executed), never a
    // fork of this multi-threaded one.
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "wire_clients::peer_credentials_of_another_user_are_refused",
            "--include-ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("DESK_PEER_SOCKET", home.socket("uid"))
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    for d in &dirs {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result = stdout.find("PEER-RESULT").map_or("no result", |at| stdout[at..].lines().next().unwrap_or(""));
    assert_eq!(result, "PEER-RESULT refused", "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    // And the session's own user is still served.
    home.peek("uid");
}

#[test]
fn a_master_whose_last_client_stops_reading_still_exits_at_the_flush_deadline() {
    // The slow-client rule itself (evicted exactly at SLOW_CLIENT_DEADLINE, not before, unless
    // it drained) is unit-tested in desk-core's session policy and its wiring in the master's
    // own tests, with a hand-shifted clock instead of 15 s of waiting.
    let home = Home::new();
    home.new_sh("unread", "read go; head -c 400000 /dev/zero | tr '\\0' x; exit 3");
    let master = home.master_pid("unread");
    // A viewer that never reads: the output and the EXIT stay queued for it, more than its
    // socket takes and less than the bound that would make it fall behind.
    let stalled = home.connect("unread", Role::Viewer, 120, 40);
    let mut driver = home.connect("unread", Role::Controller, 120, 40);
    driver.send(&Frame::Input(b"go\n".to_vec()));
    drop(driver);
    let exited = home.wait_exit("unread");
    assert_eq!(exited["code"], 3, "{exited}");
    let started = Instant::now();
    eventually("the master to exit although a client does not read", || {
        if alive(master) { Err(format!("master {master} alive after {:?}", started.elapsed())) } else { Ok(()) }
    });
    drop(stalled);
}

#[test]
fn a_hook_body_of_the_wrong_shape_is_refused_and_the_connection_stays() {
    let home = Home::new();
    home.new_sh("hooks", "exec cat");
    let mut query = home.connect("hooks", Role::Query, 0, 0);
    let mut body = serde_json::Map::new();
    body.insert("generation".into(), serde_json::json!("three"));
    query.send(&Frame::Hook(body));
    let refusal = query.recv_until("an ERROR for the malformed hook", |f| matches!(f, Frame::Error { .. }));
    let Frame::Error { code, message } = refusal else { unreachable!() };
    assert_eq!(code, ErrorCode::Malformed);
    assert!(message.contains("generation"), "the refusal names the key: {message}");
    // The connection stays: a ping is still answered.
    query.send(&Frame::Ping(7));
    query.recv_until("PONG", |f| matches!(f, Frame::Pong(7)));
    let events = home.ok(&["events", "hooks", "--json"]);
    assert!(!events.contains("\"type\":\"hook\""), "a refused hook leaves no event: {events}");
}

/// The OUTPUT bytes of `frames`, in order.
fn output_bytes(frames: impl IntoIterator<Item = Frame>) -> Vec<u8> {
    let mut out = Vec::new();
    for frame in frames {
        if let Frame::Output(data) = frame {
            out.extend_from_slice(&data);
        }
    }
    out
}

/// A client that stops reading while the session writes far more than its socket holds, then
/// reads again, gets every byte it is owed with nothing more from the child: the master
/// watches a client's socket for writability only while a write to it is blocked (issue 22),
/// and a lost wake-up would leave the rest queued until the child's next output, which never
/// comes.
#[test]
fn a_client_that_stops_reading_then_resumes_gets_all_it_is_owed_with_no_further_output() {
    let home = Home::new();
    // 600 kB: more than twice what a socket buffer takes, less than a client's queue bound
    // (past which a keyframe would replace the backlog).
    home.new_sh("pause", "read go; head -c 600000 /dev/zero | tr '\\0' x; echo PAUSE-DONE; exec sleep 100000");
    let mut stalled = home.connect("pause", Role::Viewer, 120, 40);
    stalled.recv_until("the keyframe a viewer starts with", |f| matches!(f, Frame::Keyframe { more: false, .. }));
    let mut driver = home.connect("pause", Role::Controller, 120, 40);
    driver.send(&Frame::Input(b"go\n".to_vec()));
    drop(driver);
    // The master has read all of it (the screen shows the end): what the viewer is owed is in
    // its socket and its queue, and the child writes nothing more.
    home.wait_screen("pause", "PAUSE-DONE");
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("PAUSE-DONE") {
        // Blocks at most PATIENCE: a master that lost the wake-up never sends the rest.
        let frame = stalled.recv().expect("the master closed the viewer's connection");
        assert!(!matches!(frame, Frame::Keyframe { .. }), "the viewer fell behind: its backlog was replaced");
        seen.extend(output_bytes([frame]));
    }
    assert_eq!(seen.iter().filter(|&&b| b == b'x').count(), 600_000);
}

/// A child that stops reading its terminal while more input waits than the terminal holds,
/// then reads again, gets all of it: the master watches the PTY for writability only while a
/// write to it is blocked (issue 22), and a lost wake-up would leave the rest in the master's
/// input queue for good.
#[test]
fn a_child_that_stops_reading_then_resumes_gets_all_the_input_queued_for_it() {
    let home = Home::new();
    let fifo = home.path().join("go.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let got = home.path().join("got");
    // Raw, so the line discipline passes every byte and echoes none; the child reads nothing
    // until the test opens the FIFO.
    home.new_sh(
        "deaf",
        &format!(
            "stty raw -echo; echo DEAF-READY; read _ < '{}'; head -c 320000 > '{}'; echo GOT-ALL; exec sleep 100000",
            fifo.display(),
            got.display()
        ),
    );
    home.wait_screen("deaf", "DEAF-READY");
    let mut sender = home.connect("deaf", Role::Controller, 120, 40);
    let sent: Vec<u8> = (0..320_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    // Ten frames: far more than the terminal takes (a few dozen KiB), less than the master's
    // input queue bound (which would refuse the rest).
    for chunk in sent.chunks(32_000) {
        sender.send(&Frame::Input(chunk.to_vec()));
    }
    // Every frame was taken (a refusal would come before a reply to this).
    sender.send(&Frame::Ping(7));
    let reply = sender.recv_until("the reply to PING", |f| matches!(f, Frame::Pong(_) | Frame::Error { .. }));
    assert_eq!(reply, Frame::Pong(7));
    std::fs::write(&fifo, "go\n").unwrap();
    home.wait_screen("deaf", "GOT-ALL");
    assert!(std::fs::read(&got).unwrap() == sent, "the child did not read back exactly what was sent");
}
