//! The command line's honesty: a typo is refused rather than queued forever, inspection works
//! with the daemon down, no read of untrusted size is unbounded, no probe of a wedged master
//! hangs, and a failed or removed session leaves nothing behind.

use crate::harness::PtyCommand;
use crate::support::{DESK, Home, eventually, prompts};
use desk_wire::{Frame, PROTOCOL_VERSION};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::process::{Child, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
    assert!(
        stderr(&out).contains("no session named typo, and no session exists; start one with: desk new typo"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("--queue-for-later queues the prompt"), "{}", stderr(&out));
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
    assert!(warnings[0].contains("session gone exited with code 0") && warnings[0].contains("held"), "{err}");
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

    let json = home.json(&["queue", "idle", "--json"]);
    assert!(json["notes"][0].as_str().unwrap().contains("not running"), "{json:#}");
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

/// Resumes a stopped process when dropped, so a failing test never leaves it stopped.
struct Stopped(i32);

impl Stopped {
    fn stop(pid: i32) -> Stopped {
        nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGSTOP).expect("SIGSTOP the master");
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(Pid::from_raw(self.0), Signal::SIGCONT);
    }
}

#[test]
fn ls_shows_a_stopped_master_as_unresponsive_without_waiting_for_it() {
    let home = Home::new();
    home.new_sh("frozen", "exec sleep 1000");
    home.new_sh("fine", "echo fine; exec sleep 1000");
    home.wait_screen("fine", "fine");
    let master = home.master_pid("frozen");
    let stopped = Stopped::stop(master);
    eventually("the master to be stopped", || {
        let stat = std::fs::read_to_string(format!("/proc/{master}/stat")).unwrap_or_default();
        if stat.contains(") T ") { Ok(()) } else { Err(stat) }
    });

    let out = finish_within(
        home.cmd().args(["ls", "--json"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap(),
        Duration::from_secs(10),
        "desk ls --json with a stopped master",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let rows = serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["data"].clone();
    let row = |name: &str| rows.as_array().unwrap().iter().find(|r| r["name"] == name).cloned().unwrap();
    assert_eq!(row("frozen")["status"], "unresponsive", "{rows:#}");
    assert_eq!(row("frozen")["master_pid"], master, "{rows:#}");
    assert_eq!(row("fine")["status"], "running", "{rows:#}");
    // Told from the master's info file and its /proc state, without asking it at all (so
    // without waiting for it): how long that takes is for benches, that it did is this note.
    let note = row("frozen")["note"].as_str().unwrap_or_default().to_string();
    assert!(note.contains("its master is stopped"), "{rows:#}");

    let table = home.ok(&["ls"]);
    let line = table.lines().find(|l| l.starts_with("frozen")).expect("frozen listed");
    assert!(line.contains("unresponsive"), "{table}");

    home.ok(&["send", "frozen", "are you there", "--json"]);

    drop(stopped);
    home.ok(&["kill", "frozen", "--signal", "KILL"]);
    home.wait_exit("frozen");
}

/// A fake master at session `name`'s socket that accepts every connection and then answers
/// a byte at a time, forever (until the client goes away or the guard is dropped): the answer
/// is a valid WELCOME frame whose bytes never all arrive in time.
struct Dripper {
    stop: Arc<AtomicBool>,
}

impl Dripper {
    fn start(home: &Home, name: &str) -> Dripper {
        let info = crate::support::fake_session_info(name, &"x".repeat(4096));
        let welcome = Frame::Welcome { version: PROTOCOL_VERSION, info: Box::new(info) }.to_bytes();
        Dripper::at(home, &home.socket(name), welcome)
    }

    /// The same for `desk serve`'s control socket: a valid answer line, dripped.
    fn daemon(home: &Home) -> Dripper {
        let line = format!("{{\"v\":1,\"ok\":true,\"message\":\"{}\"}}\n", "x".repeat(4096));
        Dripper::at(home, &home.run_dir().join("_serve.sock"), line.into_bytes())
    }

    fn at(home: &Home, socket: &std::path::Path, answer: Vec<u8>) -> Dripper {
        let run = home.run_dir();
        std::fs::create_dir_all(&run).unwrap();
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
        let listener = UnixListener::bind(socket).unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let welcome = answer;
        let flag = Arc::clone(&stop);
        std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut conn, _)) => {
                        let (flag, welcome) = (Arc::clone(&flag), welcome.clone());
                        std::thread::spawn(move || {
                            for byte in welcome {
                                // The drip rate, not a synchronisation: one byte per 100 ms.
                                std::thread::sleep(Duration::from_millis(100));
                                if flag.load(Ordering::Relaxed) || conn.write_all(&[byte]).is_err() {
                                    return;
                                }
                            }
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Dripper { stop }
    }
}

impl Drop for Dripper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[test]
fn a_master_that_drips_bytes_cannot_stretch_peek_ls_or_attach() {
    let home = Home::new();
    let _drip = Dripper::start(&home, "drip");

    let child = home.cmd().args(["peek", "drip"]).stderr(Stdio::piped()).spawn().unwrap();
    let out = finish_within(child, Duration::from_secs(15), "desk peek on a dripping master");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("did not answer within 5 s"), "{}", stderr(&out));

    let child = home.cmd().args(["ls", "--json"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let out = finish_within(child, Duration::from_secs(10), "desk ls with a dripping master");
    let rows = serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["data"].clone();
    assert_eq!(rows[0]["name"], "drip", "{rows:#}");
    assert_eq!(rows[0]["status"], "unresponsive", "{rows:#}");
    // ls gave up at its own probe deadline, not at the pace of the master's bytes (timing is
    // for benches; the deadline it kept is in its answer).
    let deadline = desk_common::session::PROBE_DEADLINE.as_millis();
    assert_eq!(rows[0]["note"], format!("its master did not answer within {deadline} ms"), "{rows:#}");

    let mut attach = PtyCommand::new(DESK).args(["attach", "drip"]).env("DESK_HOME", home.path()).spawn().unwrap();
    let status = attach.wait_exit(Duration::from_secs(15)).unwrap();
    assert_eq!(status.code(), Some(1));
    attach.wait_for_text("did not answer within 5 s").unwrap();
}

#[test]
fn serve_starts_right_after_the_previous_daemon_was_killed() {
    let home = Home::new();
    let mut pid = home.serve();
    for round in 0..20 {
        nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
        let out = home.desk(&["serve"]);
        assert!(out.status.success(), "round {round}: {}", stderr(&out));
        pid = home.serve_pid().unwrap();
    }
    // A live daemon is still refused at once, named by the lock's real holder.
    let started = Instant::now();
    let out = home.desk(&["serve"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains(&format!("already running (pid {pid})")), "{}", stderr(&out));
    eprintln!("a second desk serve was refused in {:?}", started.elapsed());
}

#[test]
fn attach_from_inside_the_same_session_is_refused() {
    let home = Home::new();
    // The session's own command runs `desk attach` on it, once as it is (DESK_SESSION set by
    // the master) and once without DESK_SESSION (the master being an ancestor still tells).
    let script = r#"echo "DESK_SESSION=$DESK_SESSION"; "$DESK" attach loop; echo "first exited $?"; env -u DESK_SESSION "$DESK" attach loop; echo "second exited $?"; exec sleep 1000"#;
    home.ok(&["new", "loop", "--env", &format!("DESK={DESK}"), "--", "sh", "-c", script]);
    let screen = home.wait_screen("loop", "second exited");
    assert!(screen.contains("DESK_SESSION=loop"), "the master gives its child DESK_SESSION:\n{screen}");
    assert!(screen.contains("first exited 2") && screen.contains("second exited 2"), "{screen}");
    assert_eq!(screen.matches("this terminal is session loop itself").count(), 2, "{screen}");

    // From outside, attaching the same session still works.
    let mut outside = PtyCommand::new(DESK).args(["attach", "loop"]).env("DESK_HOME", home.path()).spawn().unwrap();
    outside.wait_for_text("second exited 2").unwrap();
    outside.write(b"\x1c").unwrap();
    assert_eq!(outside.wait_exit(Duration::from_secs(10)).unwrap().code(), Some(0));
}

#[test]
fn the_session_record_exists_before_the_child_runs() {
    let home = Home::new();
    // The child's very first command reads the record that names it (what its own `desk
    // attach` needs to refuse): the master writes it before the program starts, not after.
    let script = r#"if grep -q "\"pid\": $$," "$DESK_HOME/run/first.json"; then echo "record: yes"; else echo "record: no"; fi; exec sleep 1000"#;
    home.new_sh("first", script);
    let screen = home.wait_screen("first", "record:");
    assert!(screen.contains("record: yes"), "{screen}");
}

/// Files under `dir` (relative), sorted; none if it does not exist.
fn files_under(dir: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path.clone());
            }
            found.push(path.strip_prefix(dir).unwrap().display().to_string());
        }
    }
    found.sort();
    found
}

#[test]
fn rm_forgets_the_journal_but_keeps_the_generation_counter() {
    let home = Home::new();
    home.new_sh("old", "echo bye; exit 0");
    home.wait_exit("old");
    let state = home.path().join("state/sessions/old");
    assert!(files_under(&state).contains(&"events.jsonl".to_string()), "{:?}", files_under(&state));
    home.ok(&["rm", "old"]);
    // The master's lock file stays too: a master finishing its exit may still hold it.
    assert_eq!(files_under(&state), vec!["generation", "master.lock"]);
    let left: Vec<String> = files_under(&home.run_dir()).into_iter().filter(|f| f.starts_with("old.")).collect();
    assert!(left.is_empty(), "{left:?}");
    let events = home.desk(&["events", "old"]);
    assert_eq!(events.status.code(), Some(2), "the journal is gone: {}", String::from_utf8_lossy(&events.stdout));

    home.new_sh("old", "exec sleep 1000");
    assert_eq!(home.session("old").unwrap()["generation"], 2);
}

#[test]
fn a_failed_new_leaves_nothing_behind() {
    let home = Home::new();
    let out = home.desk(&["new", "nope", "--", "/no/such/command"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("/no/such/command"), "{}", stderr(&out));
    let out = home.desk(&["new", "nope", "--provider", "bogus", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let left: Vec<String> = files_under(home.path()).into_iter().filter(|f| f.contains("nope")).collect();
    assert!(left.is_empty(), "a failed new left {left:?}");
    assert!(home.ok(&["ls"]).contains("no sessions"));

    // A name that had a session keeps that session's records when a new start fails.
    home.new_sh("had", "exit 4");
    home.wait_exit("had");
    let out = home.desk(&["new", "had", "--", "/no/such/command"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(home.session("had").unwrap()["exit"]["code"], 4);
    assert!(files_under(&home.path().join("state/sessions/had")).contains(&"events.jsonl".to_string()));
}

#[test]
fn a_daemon_that_drips_its_answer_cannot_stretch_a_request() {
    let home = Home::new();
    let _drip = Dripper::daemon(&home);
    let started = Instant::now();
    let child = home.cmd().args(["queue"]).stderr(Stdio::piped()).spawn().unwrap();
    let out = finish_within(child, Duration::from_secs(20), "desk queue on a dripping daemon");
    eprintln!("desk queue on a dripping daemon took {:?}", started.elapsed());
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("did not answer within 10 s"), "{}", stderr(&out));
}

#[test]
fn a_session_killed_by_a_signal_is_named_in_plain_words() {
    // Not "session X has was killed by signal 9".
    let home = Home::new();
    home.new_sh("shot", "kill -9 $$");
    home.wait_exit("shot");
    let out = home.desk(&["attach", "shot"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("session shot was killed by signal 9 (SIGKILL); nothing to attach to"),
        "{}",
        stderr(&out)
    );
    let out = home.desk(&["send", "shot", "hello"]);
    assert!(
        stderr(&out).contains("warning: session shot was killed by signal 9 (SIGKILL); the prompt is queued"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn help_lists_every_provider_and_hides_the_hook_plumbing() {
    let home = Home::new();
    let out = home.desk(&["new", "x", "--provider", "nope", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("[possible values: claude, codex, opencode, demo, shell]"), "{}", stderr(&out));
    let help = String::from_utf8_lossy(&home.desk(&["--help"]).stdout).to_string();
    assert!(help.contains("attach") && !help.lines().any(|l| l.trim_start().starts_with("hook ")), "{help}");
    // Hidden, not gone: agents' hooks still run it.
    assert!(home.desk(&["hook", "--help"]).status.success());
}

#[test]
fn an_item_is_found_by_any_unique_start_or_end_of_its_id() {
    let home = Home::new();
    home.serve();
    home.new_sh("p", "exec sleep 1000");
    home.ok(&["pause", "p"]); // both stay queued, so either can be dropped
    let a = home.ok(&["send", "p", "first"]).trim().to_string();
    let b = home.ok(&["send", "p", "second"]).trim().to_string();
    // Both start alike (the time comes first): a long enough start names one of them.
    let common = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let short_a = &a[..common + 1];
    assert!(home.ok(&["item", &short_a.to_lowercase()]).contains(&format!("item {a}")));
    let out = home.desk(&["item", &a[..common]]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("is the start or end of 2 item ids")
            && stderr(&out).contains(&a)
            && stderr(&out).contains(&b),
        "{}",
        stderr(&out)
    );
    let out = home.desk(&["item", "ZZZZ"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no item has an id starting or ending with \"ZZZZ\""), "{}", stderr(&out));
    // People copy the end of an id too: its random tail names it.
    let tail_b = &b[b.len() - 6..];
    assert!(home.ok(&["item", &tail_b.to_lowercase()]).contains(&format!("item {b}")));
    let out = home.desk(&["drop", short_a]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(home.item(&a)["state"], "dropped");
}

#[test]
fn force_on_a_delivered_item_says_it_was_delivered_and_when() {
    let home = Home::new();
    home.serve();
    let log = home.demo("f", &[]);
    eventually("the agent to be ready", || {
        let s = home.session("f").ok_or("no session")?;
        if s["state"]["ready"] == true { Ok(()) } else { Err(s["state"].to_string()) }
    });
    let id = home.send("f", "once is enough");
    assert_eq!(home.settled(&id)["state"], "delivered");
    let out = home.desk(&["force", &id]);
    assert!(!out.status.success());
    let said = stderr(&out);
    assert!(said.contains(&format!("item {id} was delivered at ")) && said.contains("nothing to force"), "{said}");
    eventually("the prompt logged", || {
        if prompts(&log).len() == 1 { Ok(()) } else { Err(format!("{:?}", prompts(&log))) }
    });
}

/// Every `--json` answer is one envelope (docs/cli.md): `{"v":1,"kind":…,"data":…}` on success,
/// `{"v":1,"error":{"code":…,"message":…}}` on stdout with the documented exit code on failure.
#[test]
fn every_json_answer_is_one_envelope_and_failures_are_enveloped_too() {
    let home = Home::new();
    let new = home.json(&["new", "env", "--json", "--", "sh", "-c", "exec sleep 1000"]);
    assert_eq!(new["kind"], "session", "{new:#}");
    assert_eq!(new["data"]["name"], "env", "{new:#}");
    assert_eq!(new["data"]["status"], "running", "{new:#}");
    let ls = home.json(&["ls", "--json"]);
    assert_eq!(ls["kind"], "sessions", "{ls:#}");
    assert_eq!(ls["data"][0]["name"], "env", "{ls:#}");
    assert!(ls["data"][0]["state"]["health"]["value"].is_string(), "health is a string like the other axes: {ls:#}");
    let peek = home.json(&["peek", "env", "--json"]);
    assert_eq!((peek["kind"].as_str(), peek["data"]["name"].as_str()), (Some("screen"), Some("env")), "{peek:#}");
    assert!(peek["data"]["lines"].is_array(), "{peek:#}");

    // Failures: the envelope on stdout, the documented exit code, the message on stderr too.
    let error = |args: &[&str], exit: i32, code: &str| {
        let out = home.desk(args);
        assert_eq!(out.status.code(), Some(exit), "desk {args:?}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("desk {args:?}: no JSON on stdout ({e}): {}", stderr(&out)));
        assert_eq!((v["v"].as_u64(), v["error"]["code"].as_str()), (Some(1), Some(code)), "desk {args:?}: {v:#}");
        assert!(!v["error"]["message"].as_str().unwrap_or_default().is_empty(), "{v:#}");
        assert!(!stderr(&out).is_empty(), "the message is on stderr too");
    };
    error(&["peek", "nosuch", "--json"], 2, "no-such-session");
    error(&["explain", "nosuch", "--json"], 2, "no-such-session");
    error(&["rm", "nosuch", "--json"], 2, "no-such-session");
    error(&["item", "0123", "--json"], 2, "no-such-item");
    error(&["item", "not-an-id!", "--json"], 2, "usage");
    error(&["new", "env", "--json", "--", "true"], 2, "already-exists");
    error(&["pause", "env", "--json"], 1, "daemon-unavailable");
    error(&["ls", "--json", "--no-such-flag"], 2, "usage");
    // attach has no JSON, but the same exit code for a session that does not exist.
    let out = home.desk(&["attach", "nosuch"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("no session named nosuch"), "{}", stderr(&out));

    let kill = home.json(&["kill", "env", "--json"]);
    assert_eq!(kill["kind"], "kill", "{kill:#}");
    assert_eq!(kill["data"]["exit"]["signal"], 15, "{kill:#}");
    // An exited session's screen is still there to read.
    let last = home.json(&["peek", "env", "--json"]);
    assert_eq!(
        (last["kind"].as_str(), last["data"]["exit"]["status"]["signal"].as_i64()),
        (Some("last-screen"), Some(15))
    );
    let rm = home.json(&["rm", "env", "--json"]);
    assert_eq!((rm["kind"].as_str(), rm["data"]["name"].as_str()), (Some("removed"), Some("env")), "{rm:#}");
}

/// `desk ls` on an 80-column terminal: columns measured in cells (a ✋ in a title takes two),
/// the table cut to the width rather than wrapped, the command shown as typed and quoted like a
/// shell would, QUEUE and STUCK from the daemon, a paused session marked, an exited row saying
/// when it exited. Piped, nothing is cut.
#[test]
fn ls_fits_an_80_column_terminal_and_aligns_wide_characters() {
    let home = Home::new();
    home.new_sh("wide", r"printf '\033]0;✋ hands ✋\007'; exec sleep 1000");
    home.new_sh("plain", "stty -echo; exec sleep 1000  # a comment long enough to run past any terminal width");
    home.new_sh("gone", "exit 3");
    home.wait_exit("gone");
    eventually("wide's title", || match home.session("wide") {
        Some(s) if s["title"] == "✋ hands ✋" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    home.serve();
    home.ok(&["pause", "plain", "--reason", "review"]);
    home.send("plain", "held");
    home.send("plain", "held too");

    let mut ls = PtyCommand::new(DESK).args(["ls"]).env("DESK_HOME", home.path()).size(80, 24).spawn().unwrap();
    assert!(ls.wait_exit(Duration::from_secs(10)).unwrap().success());
    let screen = ls.screen();
    // Each row as cells: a wide character's second cell is empty, so an index is a column.
    let cells: Vec<Vec<String>> = ls.with_vt100(|s| {
        (0..5u16)
            .map(|r| (0..80u16).map(|c| s.cell(r, c).map(|c| c.contents().to_string()).unwrap_or_default()).collect())
            .collect()
    });
    let wrapped = ls.with_vt100(|s| (0..5u16).any(|r| s.row_wrapped(r)));
    assert!(!wrapped, "no row wraps:\n{screen}");
    let header = &screen.rows()[0];
    assert!(header.starts_with("NAME") && header.contains("QUEUE") && header.contains("STUCK"), "{screen}");
    let column = |row: &[String], text: &str| -> Option<usize> {
        (0..row.len())
            .find(|&i| text.chars().enumerate().all(|(k, ch)| row.get(i + k).is_some_and(|c| c == &ch.to_string())))
    };
    let pid_col = column(&cells[0], "PID").expect("PID shown at 80 columns");
    let row_of = |name: &str| cells.iter().find(|r| r[0] == name[..1] && column(r, name) == Some(0)).unwrap();
    for name in ["wide", "plain"] {
        let row = row_of(name);
        let pid = home.session(name).unwrap()["pid"].to_string();
        assert_eq!(column(row, &pid), Some(pid_col), "{name}'s pid under PID:\n{screen}");
    }
    let row = |name: &str| screen.rows().iter().find(|r| r.starts_with(name)).unwrap().clone();
    assert!(row("wide").contains("✋ hands ✋"), "{screen}");
    assert!(row("plain").contains("2 paused"), "QUEUE counts the held items and marks the pause:\n{screen}");
    assert!(row("gone").contains("exited(3) ") && row("gone").contains(" ago"), "{screen}");

    // Piped: whole lines, the command as typed, quoted like a shell would.
    let piped = home.ok(&["ls"]);
    let plain = piped.lines().find(|l| l.starts_with("plain")).unwrap();
    assert!(
        plain.ends_with("sh -c 'stty -echo; exec sleep 1000  # a comment long enough to run past any terminal width'"),
        "{piped}"
    );
    let json = home.session("plain").unwrap();
    assert_eq!((json["queue"].as_u64(), json["stuck"].as_u64()), (Some(2), Some(0)), "{json:#}");
    assert_eq!(json["paused"], "review", "{json:#}");
    // With the daemon down, the same counts come from the store.
    home.ok(&["serve", "--stop"]);
    let json = home.session("plain").unwrap();
    assert_eq!((json["queue"].as_u64(), json["paused"].as_str()), (Some(2), Some("review")), "{json:#}");
    assert!(home.ok(&["ls"]).lines().any(|l| l.starts_with("plain") && l.contains("2 paused")));
}

/// `desk ls --json` gives the command as the user typed it, like the table: the hook wiring
/// `desk new` added for an agent is desk's business (docs/cli.md, `.command`), also once the
/// session has exited and the row comes from its files.
#[test]
fn ls_json_gives_the_command_without_the_hook_wiring() {
    let home = Home::new();
    let log = home.demo("agent", &[]);
    let want =
        vec![env!("CARGO_BIN_EXE_desk-demo-agent").to_string(), "--prompt-log".into(), log.display().to_string()];
    let command = |home: &Home| -> Vec<String> {
        let row = home.session("agent").expect("agent listed");
        serde_json::from_value(row["command"].clone()).expect("command is a list of strings")
    };
    assert_eq!(command(&home), want);
    home.ok(&["kill", "agent"]);
    home.wait_exit("agent");
    assert_eq!(command(&home), want, "an exited row's command too");
}

/// Times a person reads are local, with the offset shown (`TZ` honoured, POSIX form included);
/// JSON keeps Unix ms and UTC.
#[test]
fn human_times_are_local_with_their_offset() {
    let home = Home::new();
    home.new_sh("tz", "exec sleep 1000");
    home.serve();
    home.ok(&["pause", "tz"]);
    let id = home.ok(&["send", "tz", "what time is it"]).trim().to_string();
    let run = |args: &[&str]| {
        let out = home.cmd().args(args).env("TZ", "XST-5:30").output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let item = run(&["item", &id]);
    let since = item.lines().find(|l| l.trim_start().starts_with("state")).unwrap();
    assert!(since.ends_with(" +05:30"), "a date and time with its offset: {item}");
    let note = item.split("evidence:").nth(1).and_then(|e| e.lines().find(|l| !l.trim().is_empty())).unwrap();
    assert!(note.split_whitespace().next().unwrap().ends_with("+05:30"), "each note's time of day too: {item}");
    let events = run(&["events", "tz"]);
    assert!(events.lines().next().unwrap().contains("+05:30  g1  "), "{events}");
    // JSON is not local.
    let json = home.json(&["ls", "--json"]);
    assert!(json["data"][0]["started_at"].as_str().unwrap().ends_with('Z'), "{json:#}");
}

/// `desk send NAME` on a terminal says it reads the prompt from stdin, rather than sitting there
/// silently; the prompt ends with Ctrl-D.
#[test]
fn send_on_a_terminal_says_it_reads_stdin() {
    let home = Home::new();
    home.new_sh("tty", "exec sleep 1000");
    let mut send = PtyCommand::new(DESK).args(["send", "tty"]).env("DESK_HOME", home.path()).spawn().unwrap();
    send.wait_for_text("reading the prompt from stdin; end it with Ctrl-D").unwrap();
    send.write(b"typed at a terminal\n\x04").unwrap();
    assert!(send.wait_exit(Duration::from_secs(10)).unwrap().success(), "{}", send.screen());
    let screen = send.screen();
    let id = screen.rows().iter().rev().find(|r| r.len() == 26).expect("the item id").clone();
    assert_eq!(home.item(&id)["text"].as_str().map(str::trim_end), Some("typed at a terminal"), "{screen}");
    // Piped, there is no such note.
    let out = home.cmd().args(["send", "tty"]).stdin(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut out = out;
    out.stdin.take().unwrap().write_all(b"piped").unwrap();
    let out = finish_within(out, Duration::from_secs(10), "desk send from a pipe");
    assert!(!stderr(&out).contains("reading the prompt"), "{}", stderr(&out));
}

/// `desk events --type` keeps only the named types; an unknown type is a usage error naming
/// the ones there are.
#[test]
fn events_type_filters_and_refuses_unknown_types() {
    let home = Home::new();
    home.new_sh("ev", r"printf '\033]0;a title\007'; exit 0");
    home.wait_exit("ev");
    let types = |args: &[&str]| -> Vec<String> {
        home.ok(args)
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["type"].as_str().unwrap().to_string())
            .collect()
    };
    // The exit event is journalled as the master goes; wait for it.
    let all = eventually("the exit event", || {
        let all = types(&["events", "ev", "--json"]);
        if all.contains(&"exit".to_string()) { Ok(all) } else { Err(format!("{all:?}")) }
    });
    assert!(all.contains(&"title".to_string()), "{all:?}");
    let some = types(&["events", "ev", "--json", "--type", "state,exit"]);
    assert!(some.contains(&"exit".to_string()), "{some:?}");
    assert!(some.iter().all(|t| t == "state" || t == "exit"), "{some:?}");
    assert_eq!(types(&["events", "ev", "--json", "--type", "started", "--type", "exit"]), vec!["started", "exit"]);
    let out = home.desk(&["events", "ev", "--type", "state,spinner"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("invalid value 'spinner'") && stderr(&out).contains("state, exit"),
        "{}",
        stderr(&out)
    );
}

/// The config file (`$DESK_HOME/config/config.toml` here) sets the default size, the detach key
/// and a provider's arguments; flags win; a bad file is named with its line and key.
#[test]
fn the_config_file_sets_defaults_and_a_bad_one_is_named_precisely() {
    let home = Home::new();
    let config = home.path().join("config/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(
        &config,
        "[attach]\ndetach_key = \"^]\"\n\n[new]\nsize = \"100x30\"\n\n[provider.shell]\nargs = [\"-c\", \"echo configured; exec sleep 1000\"]\n",
    )
    .unwrap();
    let new = |name: &str, extra: &[&str]| {
        let out =
            home.cmd().args(["new", name, "--provider", "shell"]).args(extra).env("SHELL", "/bin/sh").output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    };
    new("cfg", &[]);
    new("flagged", &["--size", "90x20"]);
    new("typed", &["--", "sh", "-c", "echo as typed; exec sleep 1000"]);
    home.wait_screen("cfg", "configured");
    home.wait_screen("typed", "as typed");
    let size = |name: &str| {
        let s = home.session(name).unwrap();
        (s["cols"].as_u64().unwrap(), s["rows"].as_u64().unwrap())
    };
    assert_eq!(size("cfg"), (100, 30));
    assert_eq!(size("flagged"), (90, 20), "a flag wins over the file");
    assert_eq!(
        home.session("typed").unwrap()["command"],
        serde_json::json!(["sh", "-c", "echo as typed; exec sleep 1000"])
    );

    // The configured key, ^], detaches.
    let mut attach = PtyCommand::new(DESK).args(["attach", "cfg"]).env("DESK_HOME", home.path()).spawn().unwrap();
    attach.wait_for_text("configured").unwrap();
    attach.write(b"\x1d").unwrap();
    assert_eq!(attach.wait_exit(Duration::from_secs(10)).unwrap().code(), Some(0), "{}", attach.screen());

    std::fs::write(&config, "[new]\n# as wide as my screen\nsize = \"wide\"\n").unwrap();
    let out = home.desk(&["new", "bad", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    let said = stderr(&out);
    assert!(
        said.contains(&format!("{}: line 3: key `new.size`: size \"wide\" is not COLSxROWS", config.display())),
        "{said}"
    );
    std::fs::write(&config, "[attach]\ndetach-key = \"^]\"\n").unwrap();
    let out = home.desk(&["attach", "cfg"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("line 2: key `attach.detach-key`: unknown field `detach-key`"), "{}", stderr(&out));
}
