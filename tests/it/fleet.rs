//! The fleet-wide event stream (`desk events --all`): every session's events, sessions that
//! start later included, and a stopped master blocks nobody.

use crate::support::Home;
use std::io::BufRead;
use std::process::{Child, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// A running `desk events --all --follow --json`, its lines parsed as they come.
struct Follower {
    child: Child,
    lines: Receiver<serde_json::Value>,
    seen: Vec<serde_json::Value>,
}

impl Follower {
    fn start(home: &Home) -> Follower {
        let mut child =
            home.cmd().args(["events", "--all", "--follow", "--json"]).stdout(Stdio::piped()).spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                let value: serde_json::Value = serde_json::from_str(&line).expect("every line is JSON");
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        Follower { child, lines, seen: Vec::new() }
    }

    /// The first line (seen before or arriving within 20 s) that `pred` accepts.
    fn until(&mut self, what: &str, pred: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        if let Some(v) = self.seen.iter().find(|v| pred(v)) {
            return v.clone();
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(v) => {
                    self.seen.push(v.clone());
                    if pred(&v) {
                        return v;
                    }
                }
                Err(_) => panic!("no {what} in the fleet stream: {:#?}", self.seen),
            }
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn title(session: &'static str, title: &'static str) -> impl Fn(&serde_json::Value) -> bool {
    move |e| e["session"] == session && e["type"] == "title" && e["title"] == title
}

#[test]
fn the_fleet_stream_follows_every_session_including_later_ones_and_a_stopped_master_blocks_none() {
    let home = Home::new();
    home.new_sh("early", "printf '\\033]2;early-one\\007'; read x; printf '\\033]2;early-two\\007'; read y");
    home.wait_screen("early", "");
    let mut follower = Follower::start(&home);
    // History first: the title the session set before the follower started.
    follower.until("early's history", title("early", "early-one"));

    // A session that starts after the follower is picked up without polling.
    home.new_sh("later", "printf '\\033]2;later-one\\007'; read x");
    follower.until("the later session's title", title("later", "later-one"));

    // A stopped master: the stream goes on for the others.
    home.new_sh("frozen", "read x");
    let frozen = nix::unistd::Pid::from_raw(home.master_pid("frozen"));
    nix::sys::signal::kill(frozen, nix::sys::signal::SIGSTOP).unwrap();
    let mut wire = home.connect("early", desk_wire::Role::Controller, 80, 24);
    wire.send(&desk_wire::Frame::Input(b"\n".to_vec()));
    follower.until("early's live title while another master is stopped", title("early", "early-two"));
    home.new_sh("after", "printf '\\033]2;after-one\\007'; read x");
    follower.until("a session started while another master is stopped", title("after", "after-one"));
    nix::sys::signal::kill(frozen, nix::sys::signal::SIGCONT).unwrap();

    // An exit arrives once, tagged with its session.
    wire.send(&desk_wire::Frame::Input(b"\n".to_vec()));
    follower.until("early's exit", |e| e["session"] == "early" && e["type"] == "exit");
    drop(follower);

    // Without --follow: every journal, merged by time, each line naming its session.
    let merged: Vec<serde_json::Value> =
        home.ok(&["events", "--all", "--json"]).lines().map(|l| serde_json::from_str(l).expect("JSON lines")).collect();
    for want in ["early-one", "early-two", "later-one", "after-one"] {
        assert!(merged.iter().any(|e| e["title"] == want), "{want} missing from {merged:#?}");
    }
    let times: Vec<u64> = merged.iter().map(|e| e["ts_ms"].as_u64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "merged by time: {times:?}");
    let text = home.ok(&["events", "--all"]);
    assert!(text.lines().any(|l| l.contains("later") && l.contains("later-one")), "{text}");
}

#[test]
fn events_wants_a_name_or_all_but_not_both() {
    let home = Home::new();
    for args in [&["events"][..], &["events", "x", "--all"]] {
        let out = home.desk(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn a_master_stopped_after_it_joined_is_named_on_stderr_and_again_when_it_answers() {
    let home = Home::new();
    let mut child =
        home.cmd().args(["events", "--all", "--follow"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let streams = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    // Killed by pid however the test ends.
    let _child = Follower { child, lines: std::sync::mpsc::channel().1, seen: Vec::new() };
    let (tx, lines) = std::sync::mpsc::channel::<String>();
    for stream in [Box::new(streams.0) as Box<dyn std::io::Read + Send>, Box::new(streams.1)] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stream).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
    }
    let mut seen = Vec::new();
    let mut until = |what: &str| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !seen.iter().any(|l: &String| l.contains(what)) {
            match lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => seen.push(line),
                Err(_) => panic!("no line with {what:?} from desk events --all: {seen:#?}"),
            }
        }
    };
    home.new_sh("frozen", "printf '\\033]2;frozen-up\\007'; read x");
    until("frozen-up");
    let frozen = nix::unistd::Pid::from_raw(home.master_pid("frozen"));
    nix::sys::signal::kill(frozen, nix::sys::signal::SIGSTOP).unwrap();
    until("session frozen does not answer");
    nix::sys::signal::kill(frozen, nix::sys::signal::SIGCONT).unwrap();
    until("session frozen answers again");
}
