//! Agent state in real sessions: the demo agent driven through its states, hook facts, titles
//! split across reads, lease expiry, exit; and `desk hook` when desk cannot be reached.

use crate::support::{Home, eventually};
use desk_wire::{Frame, Role};
use std::time::{Duration, Instant};

fn activity(home: &Home, name: &str) -> String {
    home.session(name).map(|s| s["state"]["activity"]["value"].as_str().unwrap_or("").to_string()).unwrap_or_default()
}

fn state_events(home: &Home, name: &str) -> Vec<(String, String, String)> {
    home.ok(&["events", name, "--json"])
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["type"] == "state")
        .map(|e| {
            (
                e["axis"].as_str().unwrap_or("").to_string(),
                e["to"].as_str().unwrap_or("").to_string(),
                e["evidence"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn the_demo_agent_goes_idle_working_idle_blocked_and_exited() {
    let home = Home::new();
    home.demo("d", &["--work-ms", "800"]);
    let s = home.wait_activity("d", "idle");
    assert_eq!(s["state"]["lifecycle"]["value"], "running");
    let mut ctl = home.connect("d", Role::Controller, 120, 40);
    ctl.send(&Frame::Input(b"\x1b[200~do some work\x1b[201~\r".to_vec()));
    let working = home.wait_activity("d", "working");
    // Its UserPromptSubmit hook and its spinner title both say so; the newer one is shown.
    let source = working["state"]["activity"]["evidence"]["source"].as_str().unwrap_or("");
    assert!(["hook", "title"].contains(&source), "{working:#}");
    eventually("the agent's hook to arrive", || {
        let s = home.session("d").ok_or("no session")?;
        if s["state"]["last_hook_ms"].is_u64() { Ok(()) } else { Err(s["state"].to_string()) }
    });
    home.wait_activity("d", "idle");
    ctl.send(&Frame::Input(b"\x1b[200~please approve-me\x1b[201~\r".to_vec()));
    let blocked = home.wait_activity("d", "blocked");
    assert_eq!(blocked["state"]["wait"], "approval");
    ctl.send(&Frame::Input(b"\r".to_vec()));
    home.wait_activity("d", "idle");
    ctl.send(&Frame::Input(b"\x1b[200~crash-now\x1b[201~\r".to_vec()));
    let exit = home.wait_exit("d");
    assert_eq!(exit["code"], 3);
    // The exit record can be on disk a moment before the journal's last state event.
    let events = eventually("the exit in the state events", || {
        let events = state_events(&home, "d");
        if events.iter().any(|(a, to, _)| a == "lifecycle" && to == "exited") {
            Ok(events)
        } else {
            Err(format!("{events:?}"))
        }
    });
    let activity: Vec<&str> = events.iter().filter(|(a, _, _)| a == "activity").map(|(_, to, _)| to.as_str()).collect();
    for want in ["idle", "working", "blocked"] {
        assert!(activity.contains(&want), "{events:?}");
    }
    assert!(events.iter().any(|(a, to, _)| a == "lifecycle" && to == "exited"), "{events:?}");
    let explain = home.ok(&["explain", "d"]);
    assert!(explain.contains("exited with code 3"), "{explain}");
}

#[test]
fn working_evidence_that_stops_decays_to_unknown_never_a_stale_working() {
    let home = Home::new();
    // A title-only "agent": a spinner title that stops animating, and no hooks.
    home.ok(&[
        "new",
        "hang",
        "--provider",
        "demo",
        "--",
        "sh",
        "-c",
        "printf '\\033]0;\\342\\240\\213 demo\\007'; exec sleep 1000",
    ]);
    let working = home.wait_activity("hang", "working");
    assert_eq!(working["state"]["activity"]["evidence"]["source"], "title");
    let s = home.wait_activity("hang", "unknown");
    assert_eq!(s["state"]["activity"]["evidence"]["source"], "lease");
    assert_eq!(s["state"]["health"]["value"], "degraded");
    assert!(s["state"]["health"]["reason"].as_str().is_some_and(|r| !r.is_empty()), "{s:#}");
    let explain = home.ok(&["explain", "hang", "--json"]);
    assert!(explain.contains("not renewed"), "{explain}");
}

#[test]
fn a_title_split_across_reads_is_recognised() {
    let home = Home::new();
    // The title arrives in three writes, split inside the escape sequence and inside a UTF-8
    // character.
    home.ok(&[
        "new",
        "split",
        "--provider",
        "demo",
        "--",
        "sh",
        "-c",
        "printf '\\033]0;\\342'; sleep 0.2; printf '\\234\\263 de'; sleep 0.2; printf 'mo\\007'; exec sleep 1000",
    ]);
    let s = home.wait_activity("split", "idle");
    assert_eq!(s["title"], "✳ demo");
    let titles: Vec<String> = home
        .ok(&["events", "split", "--json"])
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["type"] == "title")
        .map(|e| e["title"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(titles, vec!["✳ demo"]);
}

#[test]
fn a_fake_hook_invocation_becomes_a_fact_and_moves_the_state() {
    let home = Home::new();
    home.new_sh("hooked", "exec sleep 1000");
    let hook = |payload: &str| home.hook("hooked", payload);
    // A shell session has no rules, but hooks still report facts (journalled as hook events).
    hook(r#"{"hook_event_name":"UserPromptSubmit","prompt":"refactor the parser\nplease"}"#);
    eventually("the hook event", || {
        let events = home.ok(&["events", "hooked"]);
        if events.contains("hook claude UserPromptSubmit: refactor the parser") { Ok(()) } else { Err(events) }
    });
    // `desk ls` reads the master's info file, written when the turn that journalled the hook
    // is over: poll rather than assume the listing is as new as the journal.
    home.wait_activity("hooked", "working");
    hook(
        r#"{"hook_event_name":"Notification","notification_type":"permission_prompt","message":"needs permission to use Bash"}"#,
    );
    let s = home.wait_activity("hooked", "blocked");
    assert_eq!(s["state"]["wait"], "approval");
    hook(r#"{"hook_event_name":"Stop"}"#);
    home.wait_activity("hooked", "idle");
    // A hook from an older generation of the session is ignored.
    let mut stale = home
        .cmd()
        .args(["hook"])
        .env("DESK_SESSION", "hooked")
        .env("DESK_GENERATION", "999")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        stale.stdin.take().unwrap().write_all(br#"{"hook_event_name":"UserPromptSubmit"}"#).unwrap();
    }
    assert!(stale.wait().unwrap().success());
    // A later, valid hook is processed after it; by then the stale one must have left no trace.
    hook(r#"{"hook_event_name":"Notification","notification_type":"idle_prompt","message":"waiting"}"#);
    eventually("the later hook", || {
        let events = home.ok(&["events", "hooked"]);
        if events.contains("Notification: waiting") { Ok(()) } else { Err(events) }
    });
    let events = home.ok(&["events", "hooked"]);
    let submits = events.lines().filter(|l| l.contains("  hook ") && l.contains("UserPromptSubmit")).count();
    assert_eq!(submits, 1, "the stale generation's hook left no trace: {events}");
    assert_eq!(activity(&home, "hooked"), "idle");
}

#[test]
fn desk_hook_exits_zero_at_once_when_desk_is_unreachable() {
    let home = Home::new();
    for env in [vec![], vec![("DESK_SESSION", "nobody-home")], vec![("DESK_SESSION", "../bad name")]] {
        let started = Instant::now();
        let mut cmd = home.cmd();
        cmd.args(["hook", "--provider", "claude"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        {
            use std::io::Write;
            let _ = child.stdin.take().unwrap().write_all(br#"{"hook_event_name":"Stop"}"#);
        }
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{env:?}");
        assert!(out.stdout.is_empty());
        // Bounded by the hook's own deadline (1 s), with room for a loaded machine.
        assert!(started.elapsed() < Duration::from_secs(5), "{env:?} took {:?}", started.elapsed());
    }
    // Even a hook that never gets its stdin closed gives up within its deadline.
    let started = Instant::now();
    let mut child = home
        .cmd()
        .args(["hook"])
        .env("DESK_SESSION", "x")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _held_open = child.stdin.take();
    assert!(child.wait().unwrap().success());
    assert!(started.elapsed() < Duration::from_secs(5));
    // Arguments it cannot read are no reason to fail the agent either (an exit 2 from a
    // PreToolUse hook blocks Claude Code's tool).
    for args in [&["hook", "--bogus"][..], &["hook", "--provider", "codex", "{}", "extra"], &["hook", "--provider"]] {
        let out = home.cmd().args(args).env("DESK_SESSION", "x").stdin(std::process::Stdio::null()).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn events_follow_streams_until_exit_and_since_skips_what_was_seen() {
    let home = Home::new();
    home.new_sh("ev", "read x; printf '\\033]2;first-title\\007'; read y; printf '\\033]2;second-title\\007'; exit 3");
    let mut follow =
        home.cmd().args(["events", "ev", "--follow", "--json"]).stdout(std::process::Stdio::piped()).spawn().unwrap();
    let stdout = follow.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<serde_json::Value>();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str(&line) {
                let _ = tx.send(v);
            }
        }
    });
    let mut seen = Vec::new();
    let mut next_until = |what: &str, pred: &dyn Fn(&serde_json::Value) -> bool| -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(v) => {
                    seen.push(v.clone());
                    if pred(&v) {
                        return v;
                    }
                }
                Err(_) => panic!("no {what} in the followed events: {seen:#?}"),
            }
        }
    };
    let mut wire = home.connect("ev", Role::Controller, 120, 40);
    wire.send(&Frame::Input(b"\n".to_vec()));
    let first = next_until("first title", &|e| e["type"] == "title" && e["title"] == "first-title");
    wire.send(&Frame::Input(b"\n".to_vec()));
    next_until("second title", &|e| e["type"] == "title" && e["title"] == "second-title");
    next_until("exit", &|e| e["type"] == "exit");
    // --follow ends with the session.
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = follow.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = follow.kill();
            panic!("desk events --follow did not end with the session");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    reader.join().unwrap();
    drop(wire);

    // --since SEQ prints only what came after SEQ.
    let seq = first["seq"].as_u64().expect("events carry a sequence number");
    let later: Vec<serde_json::Value> = home
        .ok(&["events", "ev", "--json", "--since", &seq.to_string()])
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(later.iter().all(|e| e["seq"].as_u64().unwrap() > seq), "{later:#?}");
    assert!(later.iter().any(|e| e["title"] == "second-title"));
    assert!(!later.iter().any(|e| e["title"] == "first-title"));
}

#[test]
fn attach_next_picks_the_session_blocked_on_a_dialog_and_says_why() {
    let home = Home::new();
    home.new_sh("calm", "exec sleep 1000");
    home.demo("asks", &[]);
    home.wait_activity("asks", "idle");
    // Nobody needs a person yet: --next says so instead of attaching somewhere.
    let out = home.desk(&["attach", "--next"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no running session needs a person now"));
    let mut ctl = home.connect("asks", Role::Controller, 120, 40);
    ctl.send(&Frame::Input(b"\x1b[200~please approve-me\x1b[201~\r".to_vec()));
    home.wait_activity("asks", "blocked");
    // Without a terminal the attach itself fails, after naming its choice.
    let out = home.desk(&["attach", "--next"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("desk: attaching to asks (blocked(approval))"), "{stderr}");
    assert!(stderr.contains("needs a terminal"), "{stderr}");
    // A name and --next together are a usage error.
    assert_eq!(home.desk(&["attach", "asks", "--next"]).status.code(), Some(2));
}
