//! Channels end to end: posts become prompts in members' real sessions exactly once — across
//! a daemon killed at every step of channel ingest, across a daemon that was down when the
//! message was posted — and agents converse through `desk channel post`. The demo agents'
//! prompt logs are the ground truth.

use crate::support::{Home, eventually, prompts};
use std::path::Path;

fn ready(home: &Home, name: &str) {
    eventually(&format!("{name} to be ready"), || {
        let s = home.session(name).ok_or("no session")?;
        if s["state"]["ready"] == true { Ok(()) } else { Err(s["state"].to_string()) }
    });
}

/// How many logged prompts of `log` contain `needle` (a digest counts once per message it
/// carries, as each message's text appears in it once).
fn logged(log: &Path, needle: &str) -> usize {
    prompts(log).iter().map(|p| p.matches(needle).count()).sum()
}

/// The item files of a session's queue, by extension.
fn item_states(home: &Home, session: &str) -> Vec<String> {
    let dir = home.path().join("state/delivery/queue").join(session);
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                // `.<id>.<state>.tmp.<pid>`: an item being rewritten (the daemon still adds notes
                // to a delivered item), not an item of its own.
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .filter_map(|e| e.path().extension().and_then(|x| x.to_str()).map(String::from))
                .filter(|x| x != "bad")
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// A demo agent `w` (its prompt log returned), the daemon, and channel `channel` with `w` as
/// its worker, onboarded.
fn worker_in(home: &Home, channel: &str) -> std::path::PathBuf {
    let log = home.demo("w", &[]);
    ready(home, "w");
    home.serve();
    home.ok(&["channel", "new", channel]);
    home.ok(&["channel", "add", channel, "w"]);
    eventually("the onboarding prompt", || {
        if logged(&log, "you joined as worker") == 1 { Ok(()) } else { Err(format!("{:#?}", prompts(&log))) }
    });
    log
}

/// Wait until every item of `session`'s queue is delivered.
fn all_delivered(home: &Home, session: &str) {
    eventually(&format!("every item of {session} delivered"), || {
        let states = item_states(home, session);
        if states.iter().all(|s| s == "delivered") { Ok(()) } else { Err(format!("{states:?}")) }
    });
}

/// Two demo agents in channel `crash`; a message posted while the daemon is down; the daemon
/// started with `DESK_FAILPOINT=step` dies in its first ingest; a second daemon finishes.
/// Every (message, member) pair — the two onboarding prompts and the message to both — must be
/// in the prompt logs exactly once, and every item delivered.
fn crash_at(step: &str) {
    let home = Home::new();
    let logs = [home.demo("a", &[]), home.demo("b", &[])];
    ready(&home, "a");
    ready(&home, "b");
    home.ok(&["channel", "new", "crash", "--goal", "survive the crash"]);
    home.ok(&["channel", "add", "crash", "a"]);
    home.ok(&["channel", "add", "crash", "b"]);
    let text = format!("posted before a crash at {step}");
    let id = home.ok(&["channel", "post", "crash", &text]).trim().to_string();
    // The daemon ingests at start what was posted while it was down, and dies in that pass:
    // run in the foreground, as `desk serve` would launch it, and reaped here.
    let mut doomed =
        home.cmd().args(["serve", "--foreground"]).env("DESK_FAILPOINT", step).spawn().expect("spawn serve");
    let status = eventually(&format!("the daemon to crash at {step}"), || {
        doomed.try_wait().map_err(|e| e.to_string())?.ok_or_else(|| "still running".to_string())
    });
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9), "{step}: killed by its failpoint");
    home.serve();
    for (session, log) in ["a", "b"].iter().zip(&logs) {
        eventually(&format!("{session} to get the message and its onboarding"), || {
            let (msg, onboard) = (logged(log, &format!("message {id}")), logged(log, "you joined as worker"));
            let states = item_states(&home, session);
            if msg >= 1 && onboard >= 1 && states.iter().all(|s| s == "delivered") {
                Ok(())
            } else {
                Err(format!("message {msg}, onboarding {onboard}, items {states:?}: {:#?}", prompts(log)))
            }
        });
        assert_eq!(logged(log, &format!("message {id}")), 1, "{step}: {session}: {:#?}", prompts(log));
        assert_eq!(logged(log, "you joined as worker"), 1, "{step}: {session}: {:#?}", prompts(log));
        assert_eq!(logged(log, &text), 1, "{step}: {session}");
        assert_eq!(item_states(&home, session), ["delivered", "delivered"], "{step}: {session}: one item per pair");
    }
}

macro_rules! crash_test {
    ($name:ident, $step:literal) => {
        #[test]
        fn $name() {
            crash_at($step);
        }
    };
}

// Routed, nothing written: the next pass writes every item.
crash_test!(a_crash_before_the_items_loses_nothing, "channel-before-items");
// One item of a message written, the other not: the next pass writes only the missing one.
crash_test!(a_crash_between_two_items_of_a_message_loses_and_doubles_nothing, "channel-mid-items");
// Every item written, the cursor not: the next pass finds them all and writes none.
crash_test!(a_crash_before_the_cursor_doubles_nothing, "channel-after-items");
// The ledger written, the cursor not: the next pass goes from the old cursor and finds the items.
crash_test!(a_crash_between_the_ledger_and_the_cursor_doubles_nothing, "channel-after-ledger");
// The cursor written, the engine never told: the items are restored from the store.
crash_test!(a_crash_after_the_cursor_loses_nothing, "channel-after-cursor");

#[test]
fn the_ingest_failpoints_are_all_tested() {
    let tested = [
        "channel-before-items",
        "channel-mid-items",
        "channel-after-items",
        "channel-after-ledger",
        "channel-after-cursor",
    ];
    assert_eq!(desk_daemon::channel::ingest::FAILPOINTS, tested);
}

#[test]
fn messages_posted_while_the_daemon_is_stopped_are_delivered_when_it_starts() {
    let home = Home::new();
    let log = worker_in(&home, "ops");
    home.ok(&["serve", "--stop"]);
    let out = home.desk(&["channel", "post", "ops", "while you were out"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("desk serve is not running"), "post says the daemon is down: {stderr}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    home.serve();
    eventually("the message posted while the daemon was down", || {
        if logged(&log, &format!("message {id}")) == 1 { Ok(()) } else { Err(format!("{:#?}", prompts(&log))) }
    });
    let prompt = prompts(&log).into_iter().find(|p| p.contains(&id)).unwrap();
    assert!(prompt.contains("#ops · from human"), "{prompt}");
    assert!(prompt.contains("You are w (worker) in #ops"), "{prompt}");
    assert!(prompt.contains(&format!("Reply with: desk channel post ops --thread {id} 'your reply'")), "{prompt}");
    assert_eq!(logged(&log, "you joined as worker"), 1, "the onboarding is not repeated");
}

/// Run `script` (sh) in a new session `name` of `home`, with `$DESK` the desk binary and
/// `$OUT` a file it appends results to; wait until the file has a line starting with each of
/// `marks`, and return its lines.
fn run_inside(home: &Home, name: &str, script: &str, marks: &[&str]) -> Vec<String> {
    let out = home.path().join(format!("{name}.out"));
    let env_desk = format!("DESK={}", crate::support::DESK);
    let env_out = format!("OUT={}", out.display());
    let script = format!("{script}\nexec sleep 1000");
    home.ok(&["new", name, "--env", &env_desk, "--env", &env_out, "--", "sh", "-c", &script]);
    eventually(&format!("{name} to run its posts"), || {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(String::from).collect();
        if marks.iter().all(|m| lines.iter().any(|l| l.starts_with(m))) { Ok(lines) } else { Err(text) }
    })
}

fn root_messages(home: &Home, channel: &str) -> Vec<(String, String)> {
    let read = home.json(&["channel", "read", channel, "--json"]);
    read["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["kind"] == "post")
        .map(|m| (m["author"].as_str().unwrap().to_string(), m["body"].as_str().unwrap().to_string()))
        .collect()
}

/// The author of a post is who the process tree says is asking: from inside session sp, a
/// `DESK_SESSION` naming another member, `--as` another member, or `--as human` is refused;
/// without `DESK_SESSION` (unset, or in a helper that left sp's process group and was adopted
/// by its master) sp still posts as sp, never as the operator. Outside every session the
/// operator posts as `human`, may speak for a person member with `--as`, and may not post as
/// an agent member or with a `DESK_SESSION`.
#[test]
fn authorship_comes_from_the_process_tree_not_from_the_environment() {
    let home = Home::new();
    home.ok(&["channel", "new", "ch"]);
    for member in ["sp", "c"] {
        // Members before their sessions start.
        home.ok(&["channel", "add", "ch", member, "--queue-for-later"]);
    }
    home.ok(&["channel", "add", "ch", "pat", "--human"]);
    let script = r#"
post() { what=$1; shift; "$@" 2>>"$OUT.err" >/dev/null; echo "$what=$?" >>"$OUT"; }
post env env DESK_SESSION=c "$DESK" channel post ch "forged through DESK_SESSION"
post as env -u DESK_SESSION "$DESK" channel post ch --as c "forged through --as"
post human "$DESK" channel post ch --as human "forged as the operator"
post person "$DESK" channel post ch --as pat "forged as a person"
post bare env -u DESK_SESSION "$DESK" channel post ch "posted without DESK_SESSION"
post own "$DESK" channel post ch --as sp "posted as itself"
( env -u DESK_SESSION sh -c 'post() { what=$1; shift; "$@" 2>>"$OUT.err" >/dev/null; echo "$what=$?" >>"$OUT"; }; post orphan "$DESK" channel post ch "posted by an orphan"' & )"#;
    let codes = run_inside(&home, "sp", script, &["env=", "as=", "human=", "person=", "bare=", "own=", "orphan="]);
    let code = |what: &str| codes.iter().find_map(|l| l.strip_prefix(&format!("{what}="))).unwrap_or("?").to_string();
    for refused in ["env", "as", "human", "person"] {
        assert_eq!(code(refused), "2", "{refused}: {codes:?}");
    }
    for posted in ["bare", "own", "orphan"] {
        assert_eq!(code(posted), "0", "{posted}: {codes:?}");
    }
    let errors = std::fs::read_to_string(home.path().join("sp.out.err")).unwrap();
    assert!(
        errors.contains("DESK_SESSION=c, but this command runs inside session sp"),
        "the refusal says what and why: {errors}"
    );
    assert!(errors.contains("--as c refused: this command runs inside session sp"), "{errors}");
    let mut posts = root_messages(&home, "ch");
    posts.sort();
    assert_eq!(
        posts,
        [
            ("sp".to_string(), "posted as itself".to_string()),
            ("sp".to_string(), "posted by an orphan".to_string()),
            ("sp".to_string(), "posted without DESK_SESSION".to_string()),
        ],
        "only sp's own posts, all as sp"
    );

    // A session that is not a member is refused as such, from inside it.
    let codes = run_inside(
        &home,
        "outsider",
        r#""$DESK" channel post ch --json "let me in" >"$OUT.json"; echo "rc=$?" >>"$OUT""#,
        &["rc="],
    );
    assert_eq!(codes, ["rc=2"]);
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(home.path().join("outsider.out.json")).unwrap()).unwrap();
    assert_eq!(v["error"]["code"], "not-a-member", "{v:#}");

    // Outside every session: the operator, or a person member it speaks for; never an agent
    // member, never a DESK_SESSION claim.
    let refused = |out: std::process::Output, why: &str| {
        assert_eq!(out.status.code(), Some(2), "{why}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["error"]["code"], "wrong-author", "{why}: {v:#}");
        v["error"]["message"].as_str().unwrap().to_string()
    };
    let message = refused(home.desk(&["channel", "post", "ch", "--json", "--as", "c", "x"]), "--as an agent");
    assert!(message.contains("c is an agent session of #ch, and only c itself posts as c"), "{message}");
    let out = home.cmd().args(["channel", "post", "ch", "--json", "x"]).env("DESK_SESSION", "c").output().unwrap();
    let message = refused(out, "a DESK_SESSION outside sessions");
    assert!(message.contains("does not run inside session c"), "{message}");
    let v = home.json(&["channel", "post", "ch", "--json", "--as", "pat", "for pat"]);
    assert_eq!(v["data"]["author"], "pat");
    let v = home.json(&["channel", "post", "ch", "--json", "from the operator"]);
    assert_eq!(v["data"]["author"], "human");
    let big = "x".repeat(16 * 1024 + 1);
    let out = home.desk(&["channel", "post", "ch", &big]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at most 16384 bytes"));
}

#[test]
fn three_demo_agents_and_a_person_converse_in_a_channel() {
    let home = Home::new();
    // The operator's notify command, to see c's @human reach it.
    let notified = home.path().join("notified.jsonl");
    std::fs::create_dir_all(home.path().join("config")).unwrap();
    let config = format!("[notify]\ncommand = \"cat >> '{}'\"\n", notified.display());
    std::fs::write(home.path().join("config/config.toml"), config).unwrap();
    home.serve();
    // Each agent answers root messages in their thread; a's answer asks b, c's tells the person.
    let a = home.demo("a", &["--channel-reply", "root", "--channel-reply-text", "@b please check {message}"]);
    let b = home.demo("b", &["--channel-reply", "root"]);
    let c = home.demo("c", &["--channel-reply", "root", "--channel-reply-text", "@human {me} is done with {message}"]);
    for s in ["a", "b", "c"] {
        ready(&home, s);
    }
    home.ok(&["channel", "new", "release", "--goal", "ship 1.0"]);
    for s in ["a", "b", "c"] {
        home.ok(&["channel", "add", "release", s]);
    }
    home.ok(&["channel", "add", "release", "pat", "--human"]);
    let root = home.ok(&["channel", "post", "release", "kickoff: plan the release"]).trim().to_string();
    let thread = || -> Vec<serde_json::Value> {
        let v = home.json(&["channel", "read", "release", "--thread", &root, "--json"]);
        v["data"]["messages"].as_array().unwrap().iter().skip(1).cloned().collect()
    };
    let replies = eventually("a reply from each agent in the kickoff's thread", || {
        let replies = thread();
        let mut authors: Vec<String> = replies.iter().map(|m| m["author"].as_str().unwrap().to_string()).collect();
        authors.sort();
        if authors == ["a", "b", "c"] { Ok(replies) } else { Err(format!("{replies:#?}")) }
    });
    let by = |who: &str| replies.iter().find(|m| m["author"] == who).unwrap().clone();
    assert_eq!(by("a")["body"], format!("@b please check {root}"));
    assert_eq!(by("b")["body"], format!("ack {root} from b"));
    // Every agent got the kickoff exactly once, and its onboarding once.
    for log in [&a, &b, &c] {
        assert_eq!(logged(log, &format!("message {root}")), 1, "{:#?}", prompts(log));
        assert_eq!(logged(log, "you joined as worker"), 1, "{:#?}", prompts(log));
    }
    // a mentioned b in the thread: b is prompted with it (and, being in root mode, does not answer).
    let a_reply = by("a")["id"].as_str().unwrap().to_string();
    eventually("b to get a's mention", || {
        if logged(&b, &format!("message {a_reply}")) == 1 { Ok(()) } else { Err(format!("{:#?}", prompts(&b))) }
    });
    assert!(
        prompts(&b)
            .iter()
            .any(|p| p.contains(&format!("message {a_reply} · in thread {root}")) && p.contains("you were mentioned")),
        "{:#?}",
        prompts(&b)
    );
    // The person answers in the thread, mentioning a: a gets it; nobody answers a thread reply.
    let thanks = home.ok(&["channel", "post", "release", "--thread", &root, "@a thanks"]).trim().to_string();
    eventually("a to get the person's thanks", || {
        if logged(&a, &format!("message {thanks}")) == 1 { Ok(()) } else { Err(format!("{:#?}", prompts(&a))) }
    });
    assert_eq!(thread().len(), 4, "three replies and the thanks; no agent answered a reply: {:#?}", thread());
    // c's @human reached the operator: the channel list counts it, and the notify command ran.
    let ls = home.json(&["channel", "ls", "--json"]);
    assert_eq!(ls["data"][0]["human_mentions"], 1, "{ls:#}");
    let c_reply = by("c")["id"].as_str().unwrap().to_string();
    let mention = eventually("a mention notification", || {
        let text = std::fs::read_to_string(&notified).unwrap_or_default();
        let all: Vec<serde_json::Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        all.into_iter().find(|n| n["kind"] == "mention").ok_or(text)
    });
    assert_eq!(mention["session"], "c", "{mention:#}");
    let message = mention["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("c mentioned you in #release (message {c_reply}): @human c is done")),
        "{message}"
    );
}

#[test]
fn read_follow_prints_each_new_message_once_as_a_json_line() {
    use std::io::BufRead;
    let home = Home::new();
    home.ok(&["channel", "new", "live"]);
    let first = home.ok(&["channel", "post", "live", "before following"]).trim().to_string();
    let mut child = home
        .cmd()
        .args(["channel", "read", "live", "--follow", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn read --follow");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let next = || -> serde_json::Value {
        let line = rx.recv_timeout(crate::support::PATIENCE).expect("a line from read --follow");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    };
    assert_eq!(next()["id"], first.as_str());
    // The follower is watching once it printed the history; posts after that are streamed.
    let mut posted = Vec::new();
    for i in 0..3 {
        posted.push(home.ok(&["channel", "post", "live", &format!("live {i}")]).trim().to_string());
    }
    let got: Vec<String> = (0..3).map(|_| next()["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(got, posted);
    assert!(rx.recv_timeout(std::time::Duration::from_millis(300)).is_err(), "nothing printed twice");
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::SIGKILL);
    let _ = child.wait();
}

#[test]
fn a_supervisor_is_checked_in_with_once_per_stall_when_every_worker_idles_unanswered() {
    let home = Home::new();
    home.serve();
    let sup = home.demo("sup", &["--work-ms", "100"]);
    let w = home.demo("w", &["--work-ms", "100"]);
    ready(&home, "sup");
    ready(&home, "w");
    home.ok(&["channel", "new", "watch", "--checkin-after", "1"]);
    home.ok(&["channel", "add", "watch", "sup", "--supervisor"]);
    home.ok(&["channel", "add", "watch", "w"]);
    home.ok(&["channel", "post", "watch", "@w status?"]);
    let checkins = || logged(&sup, "check-in from desk");
    eventually("a check-in for the supervisor", || {
        if checkins() == 1 { Ok(()) } else { Err(format!("{:#?}", prompts(&sup))) }
    });
    let prompt = prompts(&sup).into_iter().find(|p| p.contains("check-in from desk")).unwrap();
    assert!(
        prompt.contains("Every worker (w) has been idle for at least 1 s, and 1 message has no answer"),
        "{prompt}"
    );
    // A new stall: another message nobody answers gives a second check-in, not before.
    home.ok(&["channel", "post", "watch", "@w still there?"]);
    eventually("a second check-in", || if checkins() == 2 { Ok(()) } else { Err(format!("{:#?}", prompts(&sup))) });
    assert_eq!(logged(&w, "check-in"), 0, "workers are not checked in with");
    let read = home.ok(&["channel", "read", "watch"]);
    assert_eq!(read.matches("desk checked in with the supervisors").count(), 2, "{read}");
}

/// The same crash, in a running daemon: its pass is started by inotify when the message is
/// posted, not by its start.
fn crash_live_at(step: &str) {
    let home = Home::new();
    let logs = [home.demo("a", &[]), home.demo("b", &[])];
    ready(&home, "a");
    ready(&home, "b");
    home.ok(&["channel", "new", "live"]);
    home.ok(&["channel", "add", "live", "a"]);
    home.ok(&["channel", "add", "live", "b"]);
    // The onboarding prompts go out first, with no failpoint.
    home.serve();
    for log in &logs {
        eventually("the onboarding", || {
            if logged(log, "you joined") == 1 { Ok(()) } else { Err(format!("{:#?}", prompts(log))) }
        });
    }
    home.ok(&["serve", "--stop"]);
    let mut doomed =
        home.cmd().args(["serve", "--foreground"]).env("DESK_FAILPOINT", step).spawn().expect("spawn serve");
    // Started and watching: it answers on its control socket (nothing is due at its start).
    eventually("the doomed daemon to listen", || {
        let out = home.desk(&["queue", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
        if v["notes"].as_array().is_none_or(|n| n.is_empty()) { Ok(()) } else { Err(v.to_string()) }
    });
    let id = home.ok(&["channel", "post", "live", "posted into a running daemon"]).trim().to_string();
    let status = eventually(&format!("the daemon to crash at {step}"), || {
        doomed.try_wait().map_err(|e| e.to_string())?.ok_or_else(|| "still running".to_string())
    });
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9), "{step}: killed by its failpoint");
    home.serve();
    for (session, log) in ["a", "b"].iter().zip(&logs) {
        eventually(&format!("{session} to get the message"), || {
            let states = item_states(&home, session);
            if logged(log, &format!("message {id}")) >= 1 && states.iter().all(|s| s == "delivered") {
                Ok(())
            } else {
                Err(format!("{states:?}: {:#?}", prompts(log)))
            }
        });
        assert_eq!(logged(log, &format!("message {id}")), 1, "{step}: {session}: {:#?}", prompts(log));
        assert_eq!(item_states(&home, session), ["delivered", "delivered"], "{step}: {session}");
    }
}

#[test]
fn a_running_daemon_crashing_between_two_items_loses_and_doubles_nothing() {
    crash_live_at("channel-mid-items");
}

#[test]
fn a_running_daemon_crashing_before_its_cursor_doubles_nothing() {
    crash_live_at("channel-after-items");
}

/// Remove message `id`'s record from the channel's root conversation, as a person with an
/// editor would: the file stays well-formed, everything after the record moves up.
fn delete_by_hand(home: &Home, channel: &str, id: &str) {
    let path = home.path().join("state/channels").join(channel).join("root.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text.find(&format!("<!-- desk:msg id={id} ")).expect("the record");
    let end_mark = format!("<!-- desk:end {id} -->\n\n");
    let end = text.find(&end_mark).expect("its end") + end_mark.len();
    std::fs::write(&path, format!("{}{}", &text[..start], &text[end..])).unwrap();
}

/// Issue 18's finding: M1–M3 posted and delivered, M1's record deleted from root.md by hand,
/// M4–M10 posted. The channel goes on: the daemon re-reads the file, checks each record
/// against what it ingested, and M4–M10 each reach the member once, M1–M3 not again.
#[test]
fn a_record_deleted_by_hand_does_not_stop_the_channel_and_nothing_is_delivered_twice() {
    let home = Home::new();
    let log = worker_in(&home, "ch");
    let mark = |i: u32| format!("<<M{i}>>");
    let mut ids = Vec::new();
    for i in 1..=3 {
        ids.push(home.ok(&["channel", "post", "ch", &format!("message {}", mark(i))]).trim().to_string());
        let m = mark(i);
        eventually(&format!("{m} delivered"), || {
            if logged(&log, &m) == 1 { Ok(()) } else { Err(format!("{:#?}", prompts(&log))) }
        });
    }
    delete_by_hand(&home, "ch", &ids[0]);
    for i in 4..=10 {
        let out = home.desk(&["channel", "post", "ch", "--json", &format!("message {}", mark(i))]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["data"]["to"], serde_json::json!(["w"]));
        assert!(v["notes"].is_null(), "no stall to note: {v:#}");
    }
    eventually("M4-M10 delivered", || {
        let missing: Vec<u32> = (4..=10).filter(|i| logged(&log, &mark(*i)) == 0).collect();
        if missing.is_empty() { Ok(()) } else { Err(format!("missing {missing:?}: {:#?}", prompts(&log))) }
    });
    all_delivered(&home, "w");
    for i in 1..=10 {
        assert_eq!(logged(&log, &mark(i)), 1, "M{i} exactly once: {:#?}", prompts(&log));
    }
    let ls = home.json(&["channel", "ls", "--json"]);
    assert!(ls["data"][0]["stalled"].is_null(), "{ls:#}");
    let serve_log = std::fs::read_to_string(home.path().join("state/delivery/serve.log")).unwrap_or_default();
    assert!(serve_log.contains("re-synchronised"), "the log says what happened: {serve_log}");
}

/// A channel whose messages cannot be turned into prompts says so where people look: a post
/// still succeeds (the message is stored) and notes the stall, `desk channel ls`, `desk queue`
/// (and the dashboard's header, from the same summary) show it; doing what the stall says
/// clears it, and the held message goes out once, with nothing delivered again. The stall here:
/// a channel last ingested by an older desk (a cursor and no ledger) edited by hand.
#[test]
fn a_stalled_channel_says_so_in_post_ls_and_queue_until_it_is_fixed() {
    let home = Home::new();
    let log = worker_in(&home, "ch");
    let first = home.ok(&["channel", "post", "ch", "first <<A>>"]).trim().to_string();
    home.ok(&["channel", "post", "ch", "second <<B>>"]);
    eventually("both delivered", || {
        if logged(&log, "<<A>>") == 1 && logged(&log, "<<B>>") == 1 {
            Ok(())
        } else {
            Err(format!("{:#?}", prompts(&log)))
        }
    });
    home.ok(&["serve", "--stop"]);
    let dir = home.path().join("state/channels/ch");
    std::fs::remove_file(dir.join("ingested.log")).unwrap();
    delete_by_hand(&home, "ch", &first);
    home.serve();
    let stalled = || {
        let ls = home.json(&["channel", "ls", "--json"]);
        let stall = ls["data"][0]["stalled"].clone();
        if stall.is_null() { Err(ls.to_string()) } else { Ok(stall) }
    };
    let stall = eventually("the stall in channel ls", stalled);
    let reason = stall["reasons"][0].as_str().unwrap().to_string();
    assert!(reason.contains("out of step") && reason.contains("Restore the file"), "{reason}");
    let out = home.desk(&["channel", "post", "ch", "--json", "third <<C>>"]);
    assert!(out.status.success(), "the message is stored: {}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let notes = v["notes"].to_string();
    assert!(
        notes.contains("#ch's messages have not been reaching its members") && notes.contains("out of step"),
        "{v:#}"
    );
    let text = home.ok(&["channel", "ls"]);
    assert!(text.contains("! #ch's messages have not been reaching its members"), "{text}");
    let queue = home.ok(&["queue"]);
    assert!(queue.contains("channels  [stalled") && queue.contains("out of step"), "{queue}");
    let queue = home.json(&["queue", "--json"]);
    assert!(queue["notes"].to_string().contains("out of step"), "{queue:#}");
    assert_eq!(logged(&log, "<<C>>"), 0, "held while stalled");
    // What the stall says to do: remove the cursor (the channel is ingested from its start;
    // what is still in the delivery store is found and not sent again).
    std::fs::remove_file(dir.join("ingest.json")).unwrap();
    eventually("the stall to clear", || match stalled() {
        Ok(s) => Err(s.to_string()),
        Err(_) => Ok(()),
    });
    eventually("the held message", || {
        if logged(&log, "<<C>>") == 1 { Ok(()) } else { Err(format!("{:#?}", prompts(&log))) }
    });
    all_delivered(&home, "w");
    for m in ["<<A>>", "<<B>>", "<<C>>"] {
        assert_eq!(logged(&log, m), 1, "{m}: {:#?}", prompts(&log));
    }
    assert_eq!(logged(&log, "you joined as worker"), 1);
}

/// Issue 18's finding 7: a member removed after a message was routed to it, while its prompt
/// still waits (delivery to it is paused), does not get it: the item is withdrawn, and only
/// what is still meant for it arrives once delivery resumes.
#[test]
fn a_member_removed_before_its_prompt_went_out_does_not_get_it() {
    let home = Home::new();
    let log = worker_in(&home, "ch");
    home.ok(&["pause", "w", "--reason", "busy"]);
    home.ok(&["channel", "post", "ch", "not for a former member <<X>>"]);
    let queued = || -> Result<String, String> {
        let q = home.json(&["queue", "w", "--json"]);
        let items = q["data"][0]["items"].as_array().cloned().unwrap_or_default();
        let item = items.iter().find(|i| i["text"].as_str().is_some_and(|t| t.contains("<<X>>")));
        item.and_then(|i| i["id"].as_str().map(String::from)).ok_or(q.to_string())
    };
    let id = eventually("the message queued for w", queued);
    home.ok(&["channel", "remove", "ch", "w"]);
    let item = eventually("the item withdrawn", || {
        let item = home.item(&id);
        if item["state"] == "dropped" { Ok(item) } else { Err(item.to_string()) }
    });
    let notes = item["evidence"].to_string();
    assert!(notes.contains("withdrawn: w is no longer an agent member of #ch"), "{item:#}");
    home.ok(&["resume", "w"]);
    let after = home.send("w", "still meant for w <<Y>>");
    assert_eq!(home.settled(&after)["state"], "delivered");
    eventually("the later prompt in the log", || {
        if logged(&log, "<<Y>>") == 1 { Ok(()) } else { Err(format!("{:#?}", prompts(&log))) }
    });
    assert_eq!(logged(&log, "<<X>>"), 0, "{:#?}", prompts(&log));
}
