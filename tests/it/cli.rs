//! The command line's honesty: a typo is refused rather than queued forever, inspection works
//! with the daemon down, no read of untrusted size is unbounded, no probe of a wedged master
//! hangs, and a failed or removed session leaves nothing behind.

use crate::support::{Home, eventually};
use std::io::Write;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

/// Wait for `child` to exit within `within`; kill it (by pid) and fail if it does not.
fn finish_within(mut child: Child, within: Duration, what: &str) -> Output {
    let deadline = Instant::now() + within;
    loop {
        if child.try_wait().expect("wait for desk").is_some() {
            return child.wait_with_output().expect("collect desk's output");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not return within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn send_to_a_name_that_never_existed_is_refused_unless_queued_for_later() {
    let home = Home::new();
    home.serve();
    let out = home.desk(&["send", "typo", "hello"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("no session named typo; start it with `desk new typo"), "{}", stderr(&out));
    assert!(home.ok(&["queue"]).contains("no pending items"), "a refused prompt must not be queued");

    let id = home.ok(&["send", "typo", "hello", "--queue-for-later"]).trim().to_string();
    let item = home.item(&id);
    assert_eq!(item["session"], "typo");
    assert_eq!(item["state"], "queued");
}

#[test]
fn send_to_an_exited_session_queues_with_a_warning_and_shows_the_hold() {
    let home = Home::new();
    home.serve();
    home.new_sh("gone", "exit 0");
    home.wait_exit("gone");
    let out = home.desk(&["send", "gone", "are you there"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(warnings[0].contains("session gone has exited with code 0") && warnings[0].contains("held"), "{err}");
    assert!(err.contains("queue gone is held: "), "{err}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(home.item(&id)["state"], "queued");
}

#[test]
fn queue_and_stuck_read_the_store_when_the_daemon_is_down() {
    let home = Home::new();
    home.new_sh("idle", "exec sleep 1000");
    let id = home.send("idle", "waits for a daemon");
    // Once ingested by a daemon, the item is in the queue proper; stop the daemon and look.
    home.serve();
    let queued = home.send("idle", "ingested then orphaned");
    home.ok(&["pause", "idle", "--reason", "lunch"]);
    home.ok(&["serve", "--stop"]);
    let out = eventually("queue to say the daemon is not running", || {
        let out = home.desk(&["queue"]);
        if out.status.success() && stderr(&out).contains("desk serve is not running") {
            Ok(out)
        } else {
            Err(stderr(&out))
        }
    });
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("idle  [paused: lunch]"), "{table}");
    assert!(table.contains(&id) && table.contains(&queued), "{table}");

    let json: serde_json::Value = serde_json::from_str(&home.ok(&["queue", "idle", "--json"])).unwrap();
    assert!(json["message"].as_str().unwrap().contains("not running"), "{json:#}");
    assert_eq!(json["data"][0]["session"], "idle", "{json:#}");

    let out = home.desk(&["stuck"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("desk serve is not running"), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing is stuck"));
}

#[test]
fn send_file_of_endless_size_is_refused_at_the_limit() {
    let home = Home::new();
    home.new_sh("big", "exec sleep 1000");
    // /dev/zero never ends: reading it whole would grow without bound.
    let child = home.cmd().args(["send", "big", "--file", "/dev/zero"]).stderr(Stdio::piped()).spawn().unwrap();
    let out = finish_within(child, Duration::from_secs(10), "desk send --file /dev/zero");
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("larger than 262144 bytes (256 KiB)"), "{}", stderr(&out));

    // A pipe that has sent more than the limit but never closes: the refusal must not wait
    // for an end that never comes.
    let mut child = home
        .cmd()
        .args(["send", "big", "--file", "/dev/stdin"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(&vec![b'x'; 256 * 1024 + 1]).unwrap();
    let out = finish_within(child, Duration::from_secs(10), "desk send --file on an open pipe");
    drop(pipe);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("/dev/stdin is larger than 262144 bytes"), "{}", stderr(&out));
    // Nothing was queued.
    assert!(home.ok(&["queue"]).contains("no pending items"));
}
