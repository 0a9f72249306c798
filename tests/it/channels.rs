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
// The cursor written, the engine never told: the items are restored from the store.
crash_test!(a_crash_after_the_cursor_loses_nothing, "channel-after-cursor");

#[test]
fn the_ingest_failpoints_are_all_tested() {
    let tested = ["channel-before-items", "channel-mid-items", "channel-after-items", "channel-after-cursor"];
    assert_eq!(desk::channel::ingest::FAILPOINTS, tested);
}

#[test]
fn messages_posted_while_the_daemon_is_stopped_are_delivered_when_it_starts() {
    let home = Home::new();
    let log = home.demo("w", &[]);
    ready(&home, "w");
    home.serve();
    home.ok(&["channel", "new", "ops"]);
    home.ok(&["channel", "add", "ops", "w"]);
    eventually("the onboarding prompt", || {
        if logged(&log, "you joined as worker") == 1 { Ok(()) } else { Err(format!("{:#?}", prompts(&log))) }
    });
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

#[test]
fn a_session_that_is_not_a_member_cannot_post_and_a_member_posts_as_itself() {
    let home = Home::new();
    home.ok(&["channel", "new", "club"]);
    home.ok(&["channel", "add", "club", "insider", "--queue-for-later"]);
    let out = home
        .cmd()
        .args(["channel", "post", "club", "let me in", "--json"])
        .env("DESK_SESSION", "outsider")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["code"], "not-a-member", "{v:#}");
    let out = home
        .cmd()
        .args(["channel", "post", "club", "hi", "--as", "human"])
        .env("DESK_SESSION", "insider")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a session cannot post as someone else");
    let out =
        home.cmd().args(["channel", "post", "club", "hi", "--json"]).env("DESK_SESSION", "insider").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["data"]["author"], "insider");
    let read = home.json(&["channel", "read", "club", "--json"]);
    let last = read["data"]["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!((last["author"].as_str(), last["body"].as_str()), (Some("insider"), Some("hi")));
    let big = "x".repeat(16 * 1024 + 1);
    let out = home.desk(&["channel", "post", "club", &big]);
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
