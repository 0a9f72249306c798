//! The session's history (scrollback) from the command line: `desk peek --history`, the exit
//! record's history tail, `desk attach --history`, and the resize that keeps the newest rows.

use crate::harness::PtyCommand;
use crate::support::{DESK, Home, alive, eventually, wide_line, wide_session};
use desk_wire::{Frame, HistoryRequest, Role};
use std::process::Command;

fn lines(out: &str) -> Vec<&str> {
    out.lines().collect()
}

fn numbers(from: usize, to: usize) -> Vec<String> {
    (from..=to).map(|n| n.to_string()).collect()
}

#[test]
fn peek_history_prints_the_lines_that_scrolled_off_above_the_screen() {
    let home = Home::new();
    home.ok(&[
        "new",
        "h",
        "--size",
        "40x10",
        "--",
        "sh",
        "-c",
        "seq 1 300; printf '\\033[31mred\\033[0m tail\\n'; printf READY; exec cat",
    ]);
    home.wait_screen("h", "READY");
    // The screen: 293..300, the red line, READY; the history: 1..292. A line as wide as the
    // screen parts the two.
    let out = home.ok(&["peek", "h", "--history", "3"]);
    let separator = format!("── the screen (40x10) {}", "─".repeat(18));
    let want: Vec<String> = numbers(290, 292)
        .into_iter()
        .chain([separator.clone()])
        .chain(numbers(293, 300))
        .chain(["red tail".into(), "READY".into()])
        .collect();
    assert_eq!(lines(&out), want, "{out}");
    let all = home.ok(&["peek", "h", "--history"]);
    assert_eq!(lines(&all)[..3], ["1", "2", "3"], "--history without N prints all of it");
    assert_eq!(lines(&all).len(), 303);
    assert_eq!(lines(&all)[292], separator);
    assert_eq!(lines(&home.ok(&["peek", "h"])).len(), 10, "no history without --history");

    // JSON: rows with their attribute runs.
    home.ok(&[
        "new",
        "c",
        "--size",
        "40x3",
        "--",
        "sh",
        "-c",
        "printf '\\033[31mred\\033[0m plain\\nx\\ny\\nz\\nREADY'; exec cat",
    ]);
    home.wait_screen("c", "READY");
    let json = home.json(&["peek", "c", "--json", "--history", "5"]);
    let history = json["data"]["history"].as_array().expect("a history array").clone();
    assert_eq!(history.len(), 2, "{json:#}");
    assert_eq!(
        history[0],
        serde_json::json!({"text": "red plain", "runs": [{"text": "red", "fg": 1}, {"text": " plain"}]})
    );
    assert_eq!(history[1], serde_json::json!({"text": "x"}));
}

#[test]
fn a_session_started_with_no_history_keeps_none() {
    let home = Home::new();
    home.ok(&["new", "n", "--size", "40x5", "--history", "0", "--", "sh", "-c", "seq 1 50; printf READY; exec cat"]);
    home.wait_screen("n", "READY");
    assert_eq!(lines(&home.ok(&["peek", "n", "--history"])), ["47", "48", "49", "50", "READY"]);
    let err = home.desk(&["new", "m", "--history", "99999999999", "--", "true"]);
    assert_eq!(err.status.code(), Some(2), "an out-of-range --history is a usage error");
}

#[test]
fn an_exited_session_keeps_the_tail_of_its_history() {
    let home = Home::new();
    home.ok(&["new", "e", "--size", "40x10", "--", "sh", "-c", "seq 1 100; exit 3"]);
    home.wait_exit("e");
    let out = home.ok(&["peek", "e", "--history", "3"]);
    let got = lines(&out);
    assert!(got[0].starts_with("[desk: session e exited with code 3"), "{out}");
    assert_eq!(got[1..4], numbers(89, 91), "{out}");
    assert!(got[4].starts_with("── its last screen (40x10) ──"), "{out}");
    assert_eq!(got[5..], numbers(92, 100), "{out}");
    let json = home.json(&["peek", "e", "--json", "--history", "2"]);
    assert_eq!(json["data"]["history"], serde_json::json!(["90", "91"]), "{json:#}");
    let attach = home.desk(&["attach", "e", "--history", "2"]);
    assert_eq!(attach.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&attach.stdout);
    assert_eq!(lines(&stdout)[1..3], ["90", "91"], "{stdout}");
}

/// The report: a 100x30 shell ran `seq 1 300`; reattached from a 100x15 terminal, the
/// newest rows (and the prompt) must be on the screen, the older ones in the history.
#[test]
fn reattaching_from_a_shorter_terminal_keeps_the_newest_rows() {
    let home = Home::new();
    home.ok(&["new", "s", "--size", "100x30", "--", "sh", "-c", "seq 1 300; printf 'READY>'; exec cat"]);
    home.wait_screen("s", "READY>");
    let pty = PtyCommand::new(DESK)
        .arg("attach")
        .arg("s")
        .arg("--no-status")
        .env("DESK_HOME", home.path())
        .size(100, 15)
        .spawn()
        .expect("spawn desk attach");
    let screen = eventually("the session to take the terminal's size", || {
        let screen = pty.screen();
        if screen.row(14) == "READY>" { Ok(screen) } else { Err(screen.rows().join("\n")) }
    });
    let want: Vec<String> = numbers(287, 300).into_iter().chain(["READY>".into()]).collect();
    assert_eq!(screen.rows(), want);
    let out = home.ok(&["peek", "s", "--history", "2"]);
    assert_eq!(lines(&out)[..2], ["285", "286"], "the rows pushed off went into the history: {out}");
    pty.write(b"\x1c").unwrap();
}

/// Runs `desk attach NAME --history N` in a `cols`x`rows` pane of a private tmux server that
/// keeps `limit` lines of history (tmux plays the outer terminal: the harness's emulator drops
/// its scrollback on the keyframe's RIS, as xterm and tmux do not), and returns every line tmux
/// then holds, trailing blanks trimmed and blank lines left out, once one of them is `until`.
/// Its tests need tmux (ignored where it is missing, failing where CI is set: `crate::suite`).
fn attach_in_tmux(
    home: &Home,
    name: &str,
    history: u32,
    (cols, rows): (u16, u16),
    limit: usize,
    until: &str,
) -> Vec<String> {
    crate::suite::require(crate::suite::Needs::Program("tmux"));
    let socket = home.path().join("tmux.sock");
    let tmux = |args: &[&str]| {
        let out = Command::new("tmux").arg("-S").arg(&socket).args(args).output().expect("run tmux");
        assert!(out.status.success(), "tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let conf = home.path().join("tmux.conf");
    std::fs::write(&conf, format!("set -g history-limit {limit}\nset -g status off\n")).unwrap();
    let script =
        format!("DESK_HOME='{}' exec '{DESK}' attach {name} --no-status --history {history}", home.path().display());
    let (c, r) = (cols.to_string(), rows.to_string());
    tmux(&["-f", &conf.to_string_lossy(), "new-session", "-d", "-x", &c, "-y", &r, &script]);
    let result = std::panic::catch_unwind(|| {
        eventually("the attach to draw the session", || {
            let all = tmux(&["capture-pane", "-p", "-S", "-"]);
            let got: Vec<String> =
                all.lines().map(str::trim_end).filter(|l| !l.is_empty()).map(str::to_string).collect();
            if got.iter().any(|l| l == until) {
                Ok(got)
            } else {
                Err(got.iter().rev().take(3).cloned().collect::<Vec<_>>().join("\n"))
            }
        })
    });
    tmux(&["kill-server"]);
    result.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// `desk attach --history N` writes the lines into the outer terminal's own scrollback.
#[test]
#[cfg_attr(desk_missing_tmux, ignore = "needs tmux")]
fn attach_history_reaches_the_outer_terminals_scrollback() {
    let home = Home::new();
    home.ok(&["new", "a", "--size", "60x10", "--", "sh", "-c", "seq 1 100; printf 'READY>'; exec cat"]);
    home.wait_screen("a", "READY>");
    let got = attach_in_tmux(&home, "a", 5, (60, 10), 2000, "READY>");
    let ready = got.iter().position(|l| *l == "READY>").expect("the prompt");
    // Above the session's screen (92..100, READY>): the five history lines, 87..91, and the
    // attach's banner.
    let mut want = numbers(87, 91);
    want.push("desk: attached to a · Ctrl-\\ detaches".into());
    want.extend(numbers(92, 100));
    assert_eq!(got[..ready], want, "{got:?}");
}

#[test]
fn peek_history_brings_back_ten_thousand_wide_coloured_lines_whole_and_in_order() {
    let home = Home::new();
    wide_session(&home, "full", 10_000);
    let out = home.desk(&["peek", "full", "--history", "10000"]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let got = lines(&stdout);
    // The history (0..9980), the line that parts it from the screen, the screen (9981.., READY).
    let separator = format!("── the screen (120x20) {}", "─".repeat(120 - 23));
    let want: Vec<String> = (0..10_000)
        .map(|i| wide_line(i).0)
        .take(10_000 - 19)
        .chain([separator])
        .chain((10_000 - 19..10_000).map(|i| wide_line(i).0))
        .chain(["READY".to_string()])
        .collect();
    let first_wrong = got.iter().zip(&want).position(|(g, w)| g != w);
    assert!(got == want, "{} lines, {} wanted; first difference at {first_wrong:?}", got.len(), want.len());
    assert!(out.stderr.is_empty(), "nothing was cut: {}", String::from_utf8_lossy(&out.stderr));

    // JSON: every history line with its colours, and no note.
    let json = home.json(&["peek", "full", "--json", "--history", "10000"]);
    let history = json["data"]["history"].as_array().expect("a history array");
    assert_eq!(history.len(), 10_000 - 19, "all the history the session holds");
    for (i, row) in history.iter().enumerate() {
        let (text, colours) = wide_line(i);
        assert_eq!(row["text"], text.as_str(), "line {i}");
        let runs = row["runs"].as_array().expect("runs");
        assert_eq!(runs.len(), colours.len() + 1, "line {i}: {row}");
        assert_eq!(runs[0], serde_json::json!({ "text": format!("{i:05}") }));
        for (run, (fg, bg)) in runs[1..].iter().zip(&colours) {
            assert_eq!((run["fg"].as_u64(), run["bg"].as_str()), (Some(*fg as u64), Some(bg.as_str())), "line {i}");
        }
    }
    assert!(json.get("notes").is_none(), "{:?}", json.get("notes"));
    assert_eq!(json["data"]["lines"][19], "READY", "the screen the history ends above");
}

/// A client that does not page (the 4-byte SNAPSHOT_REQUEST, as desk before paging sent it)
/// still gets the newest lines that fit in one frame, now numbered.
#[test]
fn a_client_that_does_not_page_still_gets_the_newest_lines_that_fit_in_a_frame() {
    let home = Home::new();
    wide_session(&home, "old", 3_000);
    let mut wire = home.connect("old", Role::Query, 0, 0);
    wire.send(&Frame::SnapshotRequest { history: Some(HistoryRequest::Newest(5_000)) });
    let Frame::Snapshot(reply) = wire.recv_until("the snapshot", |f| matches!(f, Frame::Snapshot(_))) else {
        unreachable!()
    };
    let size = Frame::Snapshot(reply.clone()).to_bytes().len();
    assert!(size <= desk_wire::HEADER_LEN + desk_wire::MAX_PAYLOAD && size > desk_wire::MAX_PAYLOAD / 2);
    let history = reply.history.as_ref().expect("history");
    assert!(history.len() < 3_000 - 19, "a frame cannot hold them all: {}", history.len());
    assert_eq!(history.last().map(|r| r.text.clone()), Some(wide_line(3_000 - 20).0), "the newest come last");
    let (start, end) = (reply.history_start.expect("start"), reply.history_end.expect("end"));
    assert_eq!(end - start, history.len() as u64);
    assert_eq!(reply.history_first, Some(end - (3_000 - 19)));
}

/// `desk attach --history N` with the same 10,000 lines: all of them reach the outer
/// terminal's scrollback (tmux keeping 20,000), in order.
#[test]
#[cfg_attr(desk_missing_tmux, ignore = "needs tmux")]
fn attach_history_writes_ten_thousand_wide_coloured_lines_whole() {
    let home = Home::new();
    wide_session(&home, "full", 10_000);
    let got = attach_in_tmux(&home, "full", 10_000, (120, 20), 20_000, "READY");
    // The history, the attach's banner, then the screen.
    let want: Vec<String> = (0..10_000 - 19)
        .map(|i| wide_line(i).0)
        .chain(["desk: attached to full · Ctrl-\\ detaches".to_string()])
        .chain((10_000 - 19..10_000).map(|i| wide_line(i).0))
        .chain(["READY".to_string()])
        .collect();
    let first_wrong = got.iter().zip(&want).position(|(g, w)| g != w);
    assert!(got == want, "{} lines, {} wanted; first difference at {first_wrong:?}", got.len(), want.len());
}

#[test]
fn the_session_log_holds_what_scrolled_off_and_outlives_the_session_until_rm() {
    let home = Home::new();
    // No history in memory: the log is kept on its own.
    home.ok(&["new", "l", "--size", "40x5", "--history", "0", "--", "sh", "-c", "seq 1 2000; printf READY; exec cat"]);
    home.wait_screen("l", "READY");
    let out = home.ok(&["log", "l", "--since-start"]);
    let want: Vec<String> = numbers(1, 2000).into_iter().chain(["READY".into()]).collect();
    assert_eq!(lines(&out), want, "all that scrolled off, then the screen");
    let tail = home.ok(&["log", "l"]);
    assert_eq!(lines(&tail).len(), 1000 + 5, "the newest 1,000 lines, then the screen");
    assert_eq!(lines(&tail)[0], "997");

    // After the exit the log stays, with the last screen after it; `desk rm` removes it.
    home.ok(&["kill", "l", "--signal", "KILL"]);
    home.wait_exit("l");
    let after = home.ok(&["log", "l", "--since-start"]);
    assert_eq!(lines(&after)[..2000], numbers(1, 2000)[..], "kept after the exit");
    home.ok(&["rm", "l"]);
    assert_eq!(home.desk(&["log", "l"]).status.code(), Some(2), "gone with the session");
}

#[test]
fn log_follow_prints_new_lines_and_ends_with_the_last_screen() {
    let home = Home::new();
    let go = home.path().join("go");
    let script = format!("while [ ! -e '{}' ]; do sleep 0.05; done; seq 1 20; echo bye; exit 0", go.display());
    home.ok(&["new", "f", "--size", "40x3", "--", "sh", "-c", &script]);
    let mut follow = home.cmd().args(["log", "f", "--follow"]).stdout(std::process::Stdio::piped()).spawn().unwrap();
    std::fs::write(&go, "").unwrap();
    let status = follow.wait().unwrap();
    assert!(status.success());
    let mut out = String::new();
    std::io::Read::read_to_string(follow.stdout.as_mut().unwrap(), &mut out).unwrap();
    let got = lines(&out);
    // The numbers scrolled off while it followed; the last screen comes at the end.
    assert_eq!(got[..got.len() - 2], numbers(1, 19)[..], "{out}");
    assert_eq!(got[got.len() - 2..], ["20", "bye"], "{out}");
}

#[test]
fn a_bad_log_cap_is_refused_by_name() {
    let home = Home::new();
    let out = home.desk(&["new", "x", "--log-cap", "12Q", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--log-cap"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A session that ends while `desk peek` or `desk log` asks for its screen: the master has
/// written its exit record and still answers the connect, then closes the connection. Both show
/// the screen it ended on, as a moment later, instead of failing ("session exited with code 0").
/// The moment is held open here by a listener on the session's socket that accepts and drops.
#[test]
fn a_session_ending_during_peek_or_log_shows_its_last_screen() {
    let home = Home::new();
    home.new_sh("f", "echo last words; exit 0");
    home.wait_exit("f");
    // The exit record is written before the master has gone and removed its socket: wait for
    // both, so that the listener below is the only thing at the socket's path.
    if let Some(pid) = home.session("f").and_then(|s| s["master_pid"].as_i64()) {
        eventually("f's master to be gone", || if alive(pid as i32) { Err("alive".into()) } else { Ok(()) });
    }
    eventually(
        "f's socket to be removed",
        || if home.socket("f").exists() { Err("still there".into()) } else { Ok(()) },
    );
    let listener = std::os::unix::net::UnixListener::bind(home.socket("f")).unwrap();
    listener.set_nonblocking(true).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let dropper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => drop(conn),
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
                }
            }
        })
    };
    let peek = home.desk(&["peek", "f"]);
    let log = home.desk(&["log", "f"]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    dropper.join().unwrap();
    for (what, out) in [("peek", &peek), ("log", &log)] {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{what}: {stdout}{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.lines().any(|l| l == "last words"), "{what}: {stdout}");
    }
}
