//! The session commands end to end: new, ls, peek, kill, rm, exit records, stale sockets,
//! security of the runtime directory.

use crate::support::{Home, alive, eventually};
use std::os::unix::fs::PermissionsExt;

#[test]
fn new_ls_peek_kill_rm_round_trip() {
    let home = Home::new();
    home.new_sh("s1", "echo hello from s1; exec sleep 1000");
    home.wait_screen("s1", "hello from s1");
    let s = home.session("s1").expect("listed");
    assert_eq!(s["status"], "running");
    assert_eq!(s["cols"], 120);
    assert_eq!(s["rows"], 40);
    assert_eq!(s["command"][0], "sh");
    assert_eq!(s["clients"]["controllers"], 0);
    assert!(s["pid"].as_u64().unwrap() > 1 && s["started_at"].as_str().unwrap().ends_with('Z'));
    assert!(s["exit"].is_null());

    let out = home.ok(&["kill", "s1"]);
    assert!(out.contains("SIGTERM"), "{out}");
    let exit = home.wait_exit("s1");
    assert_eq!(exit["signal"], 15);
    assert!(exit["code"].is_null());
    assert_eq!(exit["escalated"], false);

    home.ok(&["rm", "s1"]);
    assert!(home.session("s1").is_none());
    let again = home.desk(&["rm", "s1"]);
    assert_eq!(again.status.code(), Some(2), "no such session is exit 2 (docs/cli.md)");
}

#[test]
fn exit_code_and_signal_are_recorded() {
    let home = Home::new();
    home.new_sh("code", "exit 3");
    home.new_sh("sig", "kill -SEGV $$");
    assert_eq!(home.wait_exit("code")["code"], 3);
    let sig = home.wait_exit("sig");
    assert_eq!(sig["signal"], 11);
    assert!(sig["code"].is_null());
    let table = home.ok(&["ls"]);
    assert!(table.contains("exited(3)") && table.contains("killed(SIGSEGV)"), "{table}");
}

#[test]
fn a_running_name_cannot_be_reused_but_an_exited_one_can() {
    let home = Home::new();
    home.new_sh("dup", "exec sleep 1000");
    let out = home.desk(&["new", "dup", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already exists and is running"), "{err}");
    home.ok(&["kill", "dup", "--signal", "KILL"]);
    home.wait_exit("dup");
    home.new_sh("dup", "echo second life; exec sleep 1000");
    home.wait_screen("dup", "second life");
    assert_eq!(home.session("dup").unwrap()["status"], "running");
}

#[test]
fn bad_names_are_refused_before_anything_touches_the_disk() {
    let home = Home::new();
    for name in ["../escape", "a/b", ".hidden", "-dash", "", &"x".repeat(65), "sp ace"] {
        let out = home.desk(&["new", name, "--", "true"]);
        assert_eq!(out.status.code(), Some(2), "{name:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        // A leading '-' is already an option to the argument parser; the rest reach the name check.
        assert!(name.starts_with('-') || err.contains("session name"), "{name:?}: {err}");
    }
    assert!(!home.path().join("escape").exists());
    assert!(!home.run_dir().exists() || std::fs::read_dir(home.run_dir()).unwrap().count() == 0);
}

#[test]
fn size_env_cwd_and_term_reach_the_child() {
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().canonicalize().unwrap();
    home.ok(&[
        "new",
        "env",
        "--size",
        "100x30",
        "--env",
        "FOO=bar baz",
        "--cwd",
        cwd.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "echo size=$(stty size) foo=\"$FOO\" term=$TERM session=$DESK_SESSION; pwd; exec sleep 1000",
    ]);
    let screen = home.wait_screen("env", "size=");
    assert!(screen.contains("size=30 100 foo=bar baz term=xterm-256color session=env"), "{screen}");
    assert!(screen.contains(cwd.to_str().unwrap()), "{screen}");
}

#[test]
fn the_child_inherits_no_desk_descriptors() {
    let home = Home::new();
    home.new_sh("fds", "echo fds: $(ls /proc/self/fd | tr '\\n' ' '); exec sleep 1000");
    let screen = home.wait_screen("fds", "fds:");
    // 0-2 are the terminal; 3 is the directory `ls` itself opened.
    assert!(screen.contains("fds: 0 1 2 3 \n") || screen.contains("fds: 0 1 2 3\n"), "{screen}");
}

#[test]
fn a_stale_socket_is_detected_and_cleaned() {
    let home = Home::new();
    home.new_sh("stale", "exec sleep 1000");
    let master = home.master_pid("stale");
    let child = home.session("stale").unwrap()["pid"].as_i64().unwrap() as i32;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(master), nix::sys::signal::SIGKILL).unwrap();
    eventually("the master to die", || if alive(master) { Err("alive".into()) } else { Ok(()) });
    assert!(home.socket("stale").exists(), "a killed master leaves its socket behind");
    let info = home.run_dir().join("stale.info");
    assert!(info.exists(), "a killed master leaves its info file behind");
    let s = home.session("stale").unwrap();
    assert_eq!(s["status"], "lost", "its info file is not believed: {s}");
    assert!(!home.socket("stale").exists(), "ls removes the stale socket");
    assert!(!info.exists(), "and the dead master's info file");
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child), nix::sys::signal::SIGKILL);
    home.new_sh("stale", "echo reborn; exec sleep 1000");
    home.wait_screen("stale", "reborn");
}

/// A running master's info file names the protocol it speaks and the executable it runs — what
/// `desk ls`'s skew check reads instead of the session record and `/proc/PID/exe` — and the
/// listing takes the file's word only when it says the master is this desk's: a file that names
/// another executable is checked against `/proc`, which has the last word.
#[test]
fn the_info_file_names_the_masters_executable_and_a_claim_of_skew_is_checked() {
    use std::os::unix::fs::MetadataExt;
    let home = Home::new();
    home.new_sh("who", "exec sleep 1000");
    let master = home.master_pid("who");
    let info = home.run_dir().join("who.info");
    let mut record: serde_json::Value = eventually("the info file", || {
        let bytes = std::fs::read(&info).map_err(|e| e.to_string())?;
        serde_json::from_slice(&bytes).map_err(|e| e.to_string())
    });
    let exe = std::fs::metadata(format!("/proc/{master}/exe")).unwrap();
    assert_eq!(record["master"]["exe"], serde_json::json!([exe.dev(), exe.ino()]), "{record:#}");
    assert_eq!(record["master"]["protocol"], desk_wire::PROTOCOL_VERSION, "{record:#}");
    assert_eq!(home.session("who").unwrap()["master"]["binary"], "current");
    // An idle master does not rewrite its file: the claim below stays until the listing.
    record["master"]["exe"] = serde_json::json!([0, 0]);
    std::fs::write(&info, serde_json::to_vec(&record).unwrap()).unwrap();
    let row = home.session("who").unwrap();
    assert_eq!(
        (row["status"].as_str(), row["master"]["binary"].as_str()),
        (Some("running"), Some("current")),
        "{row:#}"
    );
    home.ok(&["kill", "who"]);
}

#[test]
fn new_replaces_a_stale_socket_itself() {
    let home = Home::new();
    home.new_sh("crash", "exec sleep 1000");
    let master = home.master_pid("crash");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(master), nix::sys::signal::SIGKILL).unwrap();
    eventually("the master to die", || if alive(master) { Err("alive".into()) } else { Ok(()) });
    home.new_sh("crash", "echo replaced; exec sleep 1000");
    home.wait_screen("crash", "replaced");
}

#[test]
fn an_insecure_runtime_directory_is_refused_with_a_fix() {
    let home = Home::new();
    std::fs::create_dir_all(home.run_dir()).unwrap();
    std::fs::set_permissions(home.run_dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = home.desk(&["new", "x", "--", "true"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("mode 0755") && err.contains("chmod 0700"), "{err}");
    let out = home.desk(&["ls"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn sockets_and_records_are_private() {
    let home = Home::new();
    home.new_sh("priv", "exec sleep 1000");
    let mode = |p: std::path::PathBuf| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(home.run_dir()), 0o700);
    assert_eq!(mode(home.socket("priv")), 0o600);
    assert_eq!(mode(home.run_dir().join("priv.json")), 0o600);
}

#[test]
fn kill_escalates_to_sigkill_after_the_grace_period() {
    let home = Home::new();
    // Ignored signals stay ignored across exec, so the sleeps ignore TERM too.
    home.new_sh("stubborn", "trap '' TERM; echo ready; while :; do sleep 1; done");
    home.wait_screen("stubborn", "ready");
    let out = home.ok(&["kill", "stubborn", "--grace", "0.5"]);
    assert!(out.contains("sent SIGKILL"), "{out}");
    let exit = home.wait_exit("stubborn");
    assert_eq!(exit["signal"], 9);
    assert_eq!(exit["escalated"], true);
}

#[test]
fn kill_ends_and_names_a_helper_in_its_own_process_group() {
    let home = Home::new();
    // With job control on, the background sleep gets its own process group inside the session.
    home.new_sh("leaky", "set -m; sleep 1001 & echo ready; exec sleep 1000");
    home.wait_screen("leaky", "ready");
    // "ready" is printed once the shell forked the helper, not once the helper exec'd sleep:
    // until then it is a copy of the shell, and `desk kill` names it by what it runs then.
    let pid = home.session("leaky").and_then(|s| s["pid"].as_u64()).expect("the session's pid") as u32;
    eventually("the helper to run sleep 1001", || {
        let members = desk_common::procfs::session_members(pid);
        if members.iter().any(|p| p.command == "sleep 1001") { Ok(()) } else { Err(format!("{members:?}")) }
    });
    let out = home.ok(&["kill", "leaky"]);
    assert!(out.contains("sleep 1001: ended"), "{out}");
}

/// Kills the pids on drop, so a failing test leaks nothing the product failed to kill.
struct KillOnDrop(Vec<i32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), nix::sys::signal::SIGKILL);
        }
    }
}

fn pid_from(file: &std::path::Path) -> i32 {
    eventually(&format!("a pid in {}", file.display()), || {
        std::fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .ok_or_else(|| "not written yet".to_string())
    })
}

#[test]
fn kill_finds_reports_and_escalates_on_helpers_that_left_the_group_or_the_session() {
    let home = Home::new();
    let dir = home.path().display().to_string();
    // Both helpers ignore TERM (ignored signals stay ignored across exec). The first calls
    // setsid, which forks because a job-control job leads its group, so the sleep is orphaned
    // at once in a session of its own; the second only has its own process group.
    let script = format!(
        "set -m; setsid sh -c 'echo $$ > {dir}/setsid.pid; trap \"\" TERM; exec sleep 1002' & \
         sh -c 'echo $$ > {dir}/group.pid; trap \"\" TERM; exec sleep 1003' & \
         echo ready; exec sleep 1000"
    );
    home.new_sh("helpers", &script);
    home.wait_screen("helpers", "ready");
    let setsid = pid_from(&home.path().join("setsid.pid"));
    let group = pid_from(&home.path().join("group.pid"));
    let _guard = KillOnDrop(vec![setsid, group]);
    eventually("both helpers to run their sleeps", || {
        let cmd = |pid: i32| std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if cmd(setsid).starts_with("sleep") && cmd(group).starts_with("sleep") {
            Ok(())
        } else {
            Err(format!("{:?} {:?}", cmd(setsid), cmd(group)))
        }
    });
    let out = home.ok(&["kill", "helpers", "--grace", "0.5"]);
    for (pid, cmd) in [(setsid, "sleep 1002"), (group, "sleep 1003")] {
        assert!(out.contains(&format!("pid {pid}: {cmd}: killed with SIGKILL")), "{out}");
        assert!(!alive(pid), "helper {pid} ({cmd}) is still running after desk kill:\n{out}");
    }
    assert_eq!(home.wait_exit("helpers")["signal"], 15);
}

#[test]
fn an_orphaned_helper_is_reaped_and_does_not_end_the_session() {
    let home = Home::new();
    let dir = home.path().display().to_string();
    // The helper's parent exits at once, so the helper is re-parented (to the master, a
    // subreaper) and exits a moment later, long before the session's child.
    let script = format!(
        "sh -c 'sh -c \"echo \\$\\$ > {dir}/orphan.pid; sleep 0.2; exit 7\" & exit 0'; \
         echo ready; exec sleep 1000"
    );
    home.new_sh("adopter", &script);
    home.wait_screen("adopter", "ready");
    let orphan = pid_from(&home.path().join("orphan.pid"));
    let _guard = KillOnDrop(vec![orphan]);
    // Gone from /proc entirely: not even a zombie waiting for its new parent to reap it.
    eventually("the orphan to be reaped", || match std::fs::read_to_string(format!("/proc/{orphan}/stat")) {
        Ok(stat) => Err(stat),
        Err(_) => Ok(()),
    });
    let s = home.session("adopter").unwrap();
    assert_eq!(s["status"], "running", "the orphan's exit is not the session's: {s}");
}

#[test]
fn kill_with_zero_grace_only_sends_the_signal() {
    let home = Home::new();
    home.new_sh("usr", "trap 'echo got usr1' USR1; echo ready; while :; do sleep 0.1; done");
    home.wait_screen("usr", "ready");
    let out = home.ok(&["kill", "usr", "--signal", "USR1", "--grace", "0"]);
    assert!(out.contains("sent SIGUSR1"), "{out}");
    home.wait_screen("usr", "got usr1");
    assert_eq!(home.session("usr").unwrap()["status"], "running");
}

#[test]
fn a_command_that_cannot_start_is_reported_by_new() {
    let home = Home::new();
    let out = home.desk(&["new", "nope", "--", "/nonexistent/program"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("could not execute /nonexistent/program"), "{err}");
    assert!(!home.socket("nope").exists());
}

#[test]
fn the_master_survives_sighup() {
    let home = Home::new();
    home.new_sh("hup", "exec sleep 1000");
    let master = home.master_pid("hup");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(master), nix::sys::signal::SIGHUP).unwrap();
    // The master handles signals in its loop; a query after the signal proves it survived it.
    home.peek("hup");
    assert!(alive(master));
    assert_eq!(home.session("hup").unwrap()["status"], "running");
}

#[test]
fn masters_run_from_desk_master_and_fall_back_to_desk_master_subcommand() {
    let home = Home::new();
    home.new_sh("own", "echo from desk-master; exec sleep 1000");
    home.wait_screen("own", "from desk-master");
    let exe = std::fs::read_link(format!("/proc/{}/exe", home.master_pid("own"))).unwrap();
    assert_eq!(exe.file_name().unwrap(), "desk-master", "{}", exe.display());

    // A `desk` copied somewhere alone starts its masters as `desk master`.
    let bin = home.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    crate::support::copy_executable(crate::support::DESK, bin.join("desk"));
    let out = std::process::Command::new(bin.join("desk"))
        .env("DESK_HOME", home.path())
        .env_remove("DESK_SESSION")
        .args(["new", "alone", "--", "sh", "-c", "echo from desk master; exec sleep 1000"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    home.wait_screen("alone", "from desk master");
    let master = home.master_pid("alone");
    assert_eq!(std::fs::read_link(format!("/proc/{master}/exe")).unwrap(), bin.join("desk"));
    let cmdline = std::fs::read(format!("/proc/{master}/cmdline")).unwrap();
    assert!(cmdline.split(|b| *b == 0).nth(1) == Some(b"master".as_slice()), "{cmdline:?}");

    // Both entries refuse arguments that `desk new` would never build, naming them.
    for mut cmd in [home.cmd(), std::process::Command::new(crate::support::DESK_MASTER)] {
        if cmd.get_program() == std::ffi::OsStr::new(crate::support::DESK) {
            cmd.arg("master");
        }
        let out = cmd.args(["--name", "x", "--bogus"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("unknown argument \"--bogus\""));
    }
}

#[test]
fn real_time_signals_can_be_sent_and_are_reported_by_name() {
    let home = Home::new();
    home.new_sh("rt", "exec sleep 100000");
    let rtmin = libc::SIGRTMIN();
    let out = home.ok(&["kill", "rt", "--signal", "RTMIN+2", "--grace", "0"]);
    assert!(out.contains("SIGRTMIN+2"), "{out}");
    let exit = home.wait_exit("rt");
    assert_eq!(exit["signal"], rtmin + 2);
    let table = home.ok(&["ls"]);
    assert!(table.contains("killed(SIGRTMIN+2)"), "{table}");
    let bad = home.desk(&["kill", "rt", "--signal", "RTMIN+99"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn a_headless_session_gets_its_terminal_queries_answered_by_the_master() {
    let home = Home::new();
    // DA1, DA2 and DSR status, read back raw: `dd` would wait for ever if nobody answered.
    let want = [desk_term::screen::DA1_REPLY, desk_term::screen::DA2_REPLY, b"\x1b[0n"].concat();
    let script = format!(
        "stty raw -echo; printf '\\033[c\\033[>c\\033[5n'; dd bs=1 count={} 2>/dev/null | od -An -tx1 | tr -d ' \\n'; echo ' ANSWERED'; exec sleep 100000",
        want.len()
    );
    home.new_sh("queries", &script);
    let screen = home.wait_screen("queries", "ANSWERED");
    let hex: String = want.iter().map(|b| format!("{b:02x}")).collect();
    assert!(screen.contains(&format!("{hex} ANSWERED")), "{screen}");
}

#[test]
fn an_exited_session_is_listed_with_its_last_size_and_title() {
    let home = Home::new();
    home.new_sh("last", "printf '\\033]2;final words\\007'; read x; exit 4");
    home.wait_screen("last", "");
    let mut wire = home.connect("last", desk_wire::Role::Controller, 90, 30);
    eventually("the resize", || match home.session("last") {
        Some(s) if s["cols"] == 90 && s["title"] == "final words" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    wire.send(&desk_wire::Frame::Input(b"\n".to_vec()));
    home.wait_exit("last");
    drop(wire);
    let s = home.session("last").unwrap();
    assert_eq!((s["status"].as_str(), s["cols"].as_u64(), s["rows"].as_u64()), (Some("exited"), Some(90), Some(30)));
    assert_eq!(s["title"], "final words");
}

#[test]
fn an_exited_session_keeps_its_last_screen_for_peek_and_attach() {
    let home = Home::new();
    home.new_sh("s", "printf 'starting\\n'; echo 'error: disk full'; exit 3");
    home.wait_exit("s");
    let out = home.ok(&["peek", "s"]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("[desk: session s exited with code 3 at "), "{out}");
    assert_eq!(&lines[1..], ["starting", "error: disk full"], "{out}");
    let json: serde_json::Value = serde_json::from_str(&home.ok(&["peek", "s", "--json"])).unwrap();
    assert_eq!(json["kind"], "last-screen", "{json}");
    assert_eq!(json["data"]["name"], "s");
    assert_eq!(json["data"]["lines"], serde_json::json!(["starting", "error: disk full"]));
    assert_eq!(json["data"]["exit"]["status"]["code"], 3, "{json}");

    // attach prints the same, says how it ended and exits with the session's code.
    let out = home.desk(&["attach", "s"]);
    assert_eq!(out.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.lines().any(|l| l == "error: disk full"), "{stdout}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("session s exited with code 3; nothing to attach to"));
}

/// Context switches of a single-threaded process so far.
fn switches(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .filter(|l| l.starts_with("voluntary_ctxt_switches:") || l.starts_with("nonvoluntary_ctxt_switches:"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

/// `desk ls` reads what an idle master would answer from the info file it keeps, without
/// waking it: some listing (once the master's start-up timers are over) leaves its context
/// switch count where it was. Asking the master, as `ls` did before, wakes it every time.
#[test]
fn a_listing_does_not_wake_an_idle_master_and_still_sees_its_changes() {
    let home = Home::new();
    home.new_sh("calm", "printf '\\033]2;first\\007'; read line; printf '\\033]2;%s\\007' \"$line\"; exec sleep 1000");
    let master = home.master_pid("calm");
    eventually("the master's title", || match home.session("calm") {
        Some(s) if s["title"] == "first" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    eventually("a listing that leaves the idle master asleep", || {
        let before = switches(master);
        let s = home.session("calm").ok_or("not listed")?;
        let after = switches(master);
        if s["status"] != "running" {
            return Err(format!("{s}"));
        }
        if before == after { Ok(()) } else { Err(format!("{before} -> {after} context switches")) }
    });
    // What changes in the master reaches the listing.
    let mut typist = home.connect("calm", desk_wire::Role::Controller, 120, 40);
    typist.send(&desk_wire::Frame::Input(b"second\r".to_vec()));
    eventually("the new title in the listing", || match home.session("calm") {
        Some(s) if s["title"] == "second" => Ok(()),
        other => Err(format!("{other:?}")),
    });
}

/// `(session id, controlling tty's device number)` of a process, from /proc/PID/stat.
fn session_and_tty(pid: i32) -> (i32, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("a live process");
    // After the command's closing parenthesis: state, ppid, pgrp, session, tty_nr, ...
    let fields: Vec<&str> = stat.rsplit_once(')').expect("stat has a command").1.split_whitespace().collect();
    (fields[3].parse().expect("session"), fields[4].parse().expect("tty_nr"))
}

/// The open files of a process that are the terminal device `tty_dev` (compared by device: a
/// hung-up terminal's name is gone from /dev/pts while the files open on it stay).
fn fds_on(pid: i32, tty_dev: u64) -> Vec<String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    std::fs::metadata(e.path()).is_ok_and(|m| m.file_type().is_char_device() && m.rdev() == tty_dev)
                })
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_session_outlives_the_terminal_that_started_it() {
    use std::os::unix::process::CommandExt;
    let home = Home::new();
    // A login shell's terminal: `desk new` runs in it, then the terminal goes away.
    // As a terminal emulator keeps it: nothing started in the terminal inherits its master.
    // Both ends are close-on-exec from the moment they open: a child forked by another test in
    // between would otherwise keep the terminal open and no hang-up would come.
    let pty = cloexec_pty();
    let tty = nix::unistd::ttyname(&pty.slave).expect("the terminal's name");
    let tty_dev = std::os::unix::fs::MetadataExt::rdev(&std::fs::metadata(&tty).expect("stat the terminal"));
    let script = format!(
        "'{}' new kept -- sh -c 'echo still here; exec sleep 600' && echo launched; exec sleep 600",
        crate::support::DESK
    );
    let mut shell = std::process::Command::new("sh");
    shell
        .args(["-c", &script])
        .env("DESK_HOME", home.path())
        .env_remove("DESK_SESSION")
        .stdin(std::process::Stdio::from(pty.slave.try_clone().expect("dup")))
        .stdout(std::process::Stdio::from(pty.slave.try_clone().expect("dup")))
        .stderr(std::process::Stdio::from(pty.slave));
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        shell.pre_exec(|| {
            if libc::setsid() == -1 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut shell = shell.spawn().expect("start the login shell");
    let shell_pid = shell.id() as i32;
    let mut terminal = std::fs::File::from(pty.master);
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("launched") {
        let mut buf = [0u8; 256];
        let n = std::io::Read::read(&mut terminal, &mut buf).expect("read the terminal");
        assert!(n > 0, "the terminal closed: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    home.wait_screen("kept", "still here");
    let master = home.master_pid("kept");
    let child = home.session("kept").and_then(|s| s["pid"].as_i64()).expect("the child's pid") as i32;
    // Hang up: the terminal's last master fd closes; its session leader gets SIGHUP.
    drop(terminal);
    let status = eventually("the terminal's session to end", || {
        shell.try_wait().expect("waitpid").ok_or_else(|| "running".to_string())
    });
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGHUP), "{status:?}");
    let launching_session = shell_pid;
    for (what, pid) in [("master", master), ("child", child)] {
        assert!(alive(pid), "the session's {what} died with the terminal that started it");
        let (session, tty_nr) = session_and_tty(pid);
        assert_ne!(session, launching_session, "the {what} is in the terminal's session");
        assert_ne!(tty_nr, tty_dev, "the terminal is the {what}'s controlling tty");
        let held = fds_on(pid, tty_dev);
        assert!(held.is_empty(), "the {what} holds the terminal {tty:?} open: fds {held:?}");
    }
    // Not merely alive: the session still answers and runs.
    assert!(home.peek("kept").contains("still here"));
    assert_eq!(home.session("kept").expect("listed")["status"], "running");
}

/// A pseudo-terminal whose two ends are close-on-exec from the moment they open.
fn cloexec_pty() -> nix::pty::OpenptyResult {
    use nix::fcntl::OFlag;
    let master = nix::pty::posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC).expect("posix_openpt");
    nix::pty::grantpt(&master).expect("grantpt");
    nix::pty::unlockpt(&master).expect("unlockpt");
    let name = nix::pty::ptsname_r(&master).expect("ptsname");
    let slave = nix::fcntl::open(
        name.as_str(),
        OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .expect("open the terminal");
    // SAFETY: `master` is a valid descriptor this function owns and hands over.
    let master = unsafe { std::os::fd::FromRawFd::from_raw_fd(std::os::fd::IntoRawFd::into_raw_fd(master)) };
    nix::pty::OpenptyResult { master, slave }
}

/// Processes whose environment names this home (`DESK_HOME=<home>`): every master, child and
/// forked helper of its sessions.
fn processes_of(home: &Home) -> Vec<u32> {
    let want = format!("DESK_HOME={}", home.path().display());
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else { continue };
        if environ.split(|b| *b == 0).any(|v| v == want.as_bytes()) && alive(pid as i32) {
            found.push(pid);
        }
    }
    found
}

/// A `desk new` whose master cannot write the session record before the program starts (a
/// full disk: `DESK_FAILPOINT=master-before-exec` fails that write with ENOSPC) fails, says
/// why, and leaves nothing: no process (the child forked for the program used to wait for
/// ever on the start gate, whose write end it had inherited), no session, and the name free.
#[test]
fn a_new_that_fails_before_the_program_starts_leaves_no_process_and_frees_the_name() {
    let home = Home::new();
    let out =
        home.cmd().args(["new", "full", "--", "sleep", "1000"]).env("DESK_FAILPOINT", "master-before-exec").output();
    let out = out.expect("run desk new");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    eventually("every process of the failed start to be gone", || {
        let left = processes_of(&home);
        if left.is_empty() { Ok(()) } else { Err(format!("still running: {left:?}")) }
    });
    assert!(home.session("full").is_none(), "{:?}", home.ls());
    home.new_sh("full", "echo second try; exec sleep 1000");
    home.wait_screen("full", "second try");
}

/// A master killed right after it told `desk new` the session is ready, before it made the
/// start's records durable and before it served anyone (`DESK_FAILPOINT=master-after-ready`):
/// `desk new` returns success at once (it does not wait on those syncs), the session is listed
/// `lost`, never running, nothing of it is left running, and the name starts again with the
/// next generation (docs: `crates/desk-master/src/durable_start.rs`).
#[test]
fn a_master_killed_after_ready_is_listed_lost_and_its_name_starts_again() {
    let home = Home::new();
    let out =
        home.cmd().args(["new", "early", "--", "sleep", "1000"]).env("DESK_FAILPOINT", "master-after-ready").output();
    let out = out.expect("run desk new");
    assert!(out.status.success(), "desk new: {}", String::from_utf8_lossy(&out.stderr));
    eventually("every process of the killed session to be gone", || {
        let left = processes_of(&home);
        if left.is_empty() { Ok(()) } else { Err(format!("still running: {left:?}")) }
    });
    let row = home.session("early").expect("the session is listed");
    assert_eq!(row["status"], "lost", "{row:#}");
    assert_eq!(row["generation"], 1, "{row:#}");
    home.ok(&["new", "early", "--", "sleep", "1000"]);
    let row = home.session("early").expect("the session is listed");
    assert_eq!((row["status"].as_str(), row["generation"].as_u64()), (Some("running"), Some(2)), "{row:#}");
    home.ok(&["kill", "early"]);
}

/// A `desk new` killed after it wrote the generation counter and the launch record, before it
/// started the master (`DESK_FAILPOINT=new-before-master`): no session is listed (none runs),
/// and the next start of the name takes the next generation.
#[test]
fn a_new_killed_before_its_master_starts_lists_nothing_and_the_name_goes_on() {
    let home = Home::new();
    let out =
        home.cmd().args(["new", "cut", "--", "sleep", "1000"]).env("DESK_FAILPOINT", "new-before-master").output();
    let out = out.expect("run desk new");
    assert_eq!(out.status.code(), None, "killed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(home.session("cut").is_none(), "{:?}", home.ls());
    assert!(processes_of(&home).is_empty(), "{:?}", processes_of(&home));
    home.ok(&["new", "cut", "--", "sleep", "1000"]);
    let row = home.session("cut").expect("the session is listed");
    assert_eq!((row["status"].as_str(), row["generation"].as_u64()), (Some("running"), Some(2)), "{row:#}");
    home.ok(&["kill", "cut"]);
}

/// Under `umask 000`, every file a session writes is still private to its owner: the runtime
/// records, the journal and the session log — the log both when created and when rotated —
/// are 0600, every directory 0700.
#[test]
fn every_file_a_session_writes_is_private_whatever_the_umask() {
    use std::os::unix::process::CommandExt;
    let home = Home::new();
    let mut cmd = home.cmd();
    cmd.args(["new", "open", "--log-cap", "4096", "--", "sh", "-c", "seq 1 2000; exec sleep 1000"]);
    // SAFETY: umask is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0);
            Ok(())
        });
    }
    let out = cmd.output().expect("run desk new");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    home.wait_screen("open", "2000");
    let state = home.path().join("state/sessions/open");
    // `desk log` has the master write out the history it holds, rotating the log past 4 KiB.
    eventually("the session log to be rotated", || {
        home.ok(&["log", "open"]);
        if state.join("screen.log.1").exists() { Ok(()) } else { Err("no screen.log.1".to_string()) }
    });
    let mut seen = Vec::new();
    let mut dirs = vec![home.path().to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            let mode = meta.permissions().mode() & 0o777;
            let name = entry.path().strip_prefix(home.path()).unwrap().display().to_string();
            if meta.is_dir() {
                assert_eq!(mode, 0o700, "{name}");
                dirs.push(entry.path());
            } else {
                assert_eq!(mode & 0o077, 0, "{name} is {mode:o}");
            }
            seen.push(name);
        }
    }
    for file in ["state/sessions/open/screen.log", "state/sessions/open/screen.log.1", "run/open.json"] {
        assert!(seen.iter().any(|s| s == file), "{file} not among {seen:?}");
    }
}

/// The masters of this home running session `name` (by their command line).
fn masters_of(home: &Home, name: &str) -> Vec<u32> {
    let name_arg = format!("--name\0{name}\0");
    processes_of(home)
        .into_iter()
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).into_owned();
            cmdline.contains("desk-master\0") && cmdline.contains(&name_arg)
        })
        .collect()
}

/// A master holds its name's lock for its whole life. With its socket deleted (a cleaner of
/// temporary files) while the master cannot bind it again (stopped), `desk new` of the name
/// refuses, naming the master and how to reach or end it, `desk rm` refuses, and `desk ls`
/// lists the session as unresponsive — no second master starts to share its journal. Once the
/// master runs again it binds its socket anew, and the session is reachable as before; a
/// socket deleted under a running master comes back by itself.
#[test]
fn a_deleted_socket_never_lets_a_second_master_take_the_name() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let home = Home::new();
    home.new_sh("solo", "echo up; exec sleep 1000");
    home.wait_screen("solo", "up");
    let master = home.master_pid("solo");
    kill(Pid::from_raw(master), Signal::SIGSTOP).unwrap();
    std::fs::remove_file(home.socket("solo")).unwrap();

    let out = home.desk(&["new", "solo", "--", "sh", "-c", "echo second; exec sleep 1000"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("still running under its master (pid {master})")), "{err}");
    assert!(err.contains(&format!("kill {master}")) && err.contains("desk attach solo"), "{err}");
    assert_eq!(masters_of(&home, "solo"), vec![master as u32], "one master, the first");
    let rm = home.desk(&["rm", "solo"]);
    assert_eq!(rm.status.code(), Some(1), "{}", String::from_utf8_lossy(&rm.stderr));
    assert_eq!(home.session("solo").expect("listed")["status"], "unresponsive");

    // Running again, the master binds its socket anew: the same session, reachable.
    kill(Pid::from_raw(master), Signal::SIGCONT).unwrap();
    eventually("the socket to be bound again", || {
        let out = home.desk(&["peek", "solo"]);
        let screen = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() && screen.contains("up") { Ok(()) } else { Err(screen) }
    });
    assert_eq!(home.session("solo").expect("listed")["master_pid"], master);

    // Deleted under a running master, it comes back by itself.
    std::fs::remove_file(home.socket("solo")).unwrap();
    eventually("the socket to come back", || {
        if home.socket("solo").exists() { Ok(()) } else { Err("no socket".to_string()) }
    });
    let again = home.desk(&["new", "solo", "--", "true"]);
    assert_eq!(again.status.code(), Some(2), "{}", String::from_utf8_lossy(&again.stderr));
    assert_eq!(masters_of(&home, "solo"), vec![master as u32]);
    home.ok(&["kill", "solo"]);
    home.wait_exit("solo");
}

/// The lines of a session's master log that say it bound its socket again.
fn rebinds(home: &Home, name: &str) -> Vec<String> {
    let log = std::fs::read_to_string(home.run_dir().join(format!("{name}.log"))).unwrap_or_default();
    log.lines().filter(|l| l.contains("bound it again")).map(String::from).collect()
}

/// Do `change` to a session's socket file (remove it, say); wait until its master has bound it
/// again and answers there, and return the log line that says how it found out.
fn rebind_after(home: &Home, name: &str, change: impl FnOnce(&std::path::Path)) -> String {
    let before = rebinds(home, name).len();
    change(&home.socket(name));
    let line = eventually("the master to bind its socket again", || {
        rebinds(home, name).get(before).cloned().ok_or_else(|| format!("{:?}", rebinds(home, name)))
    });
    eventually("the socket to answer", || {
        let out = home.desk(&["peek", name]);
        if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
    });
    line
}

/// A master holds no inotify instance (Linux allows a user 128 by default, and a fleet of
/// masters holding one each kept `desk serve` from starting): none of its descriptors is one.
#[test]
fn a_running_master_holds_no_inotify_instance() {
    let home = Home::new();
    home.new_sh("quiet", "echo up; exec sleep 1000");
    home.wait_screen("quiet", "up");
    let master = home.master_pid("quiet");
    let links: Vec<String> = std::fs::read_dir(format!("/proc/{master}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .map(|target| target.to_string_lossy().into_owned())
        .collect();
    assert!(links.iter().any(|l| l.starts_with("socket:")), "the master's descriptors were read: {links:?}");
    assert!(!links.iter().any(|l| l == "anon_inode:inotify"), "the master holds an inotify instance: {links:?}");
    home.ok(&["kill", "quiet"]);
    home.wait_exit("quiet");
}

/// With `desk serve` running, a socket removed under a master comes back at once: the daemon
/// sees it go (its watch on the runtime directory) and sends the master SIGUSR1, rather than
/// the session waiting for the master's periodic check.
#[test]
fn a_socket_removed_under_a_master_is_bound_again_when_the_daemon_signals_it() {
    let home = Home::new();
    home.serve();
    home.new_sh("solo", "echo up; exec sleep 1000");
    home.wait_screen("solo", "up");
    let master = home.master_pid("solo");
    let serve_log = home.path().join("state/delivery/serve.log");
    eventually("the daemon to observe the session", || {
        let log = std::fs::read_to_string(&serve_log).unwrap_or_default();
        if log.lines().any(|l| l.contains("observing") && l.contains("solo")) { Ok(()) } else { Err(log) }
    });

    let moved = home.path().join("moved.sock");
    let other = home.path().join("other");
    for how in ["removed", "moved away", "replaced"] {
        let change = |socket: &std::path::Path| match how {
            "removed" => std::fs::remove_file(socket).unwrap(),
            "moved away" => std::fs::rename(socket, &moved).unwrap(),
            _ => {
                std::fs::write(&other, "not a socket").unwrap();
                std::fs::rename(&other, socket).unwrap();
            }
        };
        let line = rebind_after(&home, "solo", change);
        assert!(line.contains("on SIGUSR1"), "{how}: found by the daemon's signal, not the periodic check: {line}");
    }
    let log = std::fs::read_to_string(&serve_log).unwrap_or_default();
    let asked =
        log.lines().filter(|l| l.contains("asked its master to check it") && l.contains(&format!("pid={master}")));
    // At least once per change (a replaced file's removal by the master is seen as well).
    assert!(asked.count() >= 3, "the daemon says it signalled the master each time: {log}");
    assert_eq!(home.master_pid("solo"), master);
    home.ok(&["kill", "solo"]);
    home.wait_exit("solo");
}

/// `kill -USR1 PID` by hand makes a master check its socket now and bind it again if it went.
#[test]
fn sigusr1_by_hand_makes_a_master_bind_its_removed_socket_again() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let home = Home::new();
    home.new_sh("solo", "echo up; exec sleep 1000");
    home.wait_screen("solo", "up");
    let master = home.master_pid("solo");
    // With the socket in place, the signal changes nothing and the master goes on.
    kill(Pid::from_raw(master), Signal::SIGUSR1).unwrap();
    let line = rebind_after(&home, "solo", |socket| {
        std::fs::remove_file(socket).unwrap();
        kill(Pid::from_raw(master), Signal::SIGUSR1).unwrap();
    });
    assert!(line.contains("on SIGUSR1"), "{line}");
    assert_eq!(rebinds(&home, "solo").len(), 1, "bound once: {:?}", rebinds(&home, "solo"));
    assert_eq!(home.master_pid("solo"), master);
    home.ok(&["kill", "solo"]);
    home.wait_exit("solo");
}

/// Run `script` (sh) as this home's user inside a user namespace of its own whose limit of
/// inotify instances is `limit` (`/proc/sys/user/max_inotify_instances`, which a namespace's
/// owner may set), with `$DESK` and `$DEMO` naming the executables: a user at the limit,
/// without touching the machine's limit or taking instances the other tests need.
fn in_namespace_with_inotify_limit(home: &Home, limit: u32, script: &str) -> std::process::Output {
    let script = format!("echo {limit} > /proc/sys/user/max_inotify_instances || exit 90\n{script}");
    let cmd = home.cmd();
    let out = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "--", "sh", "-c", &script])
        .envs(cmd.get_envs().filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))))
        .env("DESK", crate::support::DESK)
        .env("DEMO", env!("CARGO_BIN_EXE_desk-demo-agent"))
        .output()
        .expect("run unshare (util-linux)");
    assert_ne!(
        out.status.code(),
        Some(90),
        "this test needs user namespaces (unshare --user --map-root-user): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A user with a fleet of sessions and a single inotify instance left can still start
/// `desk serve`, and it delivers: masters hold none (they once held one each, and at Linux's
/// default of 128 per user a fleet of 128 sessions kept the daemon from starting).
#[test]
fn desk_serve_starts_and_delivers_beside_a_fleet_when_one_inotify_instance_is_left() {
    let home = Home::new();
    let log = home.path().join("agent.prompts");
    let out = in_namespace_with_inotify_limit(
        &home,
        1,
        &format!(
            "set -e
             for i in 1 2 3 4; do \"$DESK\" new s$i -- sleep 1000; done
             \"$DESK\" new agent --provider demo -- \"$DEMO\" --prompt-log '{}'
             \"$DESK\" serve
             \"$DESK\" send agent 'hello from the fleet'",
            log.display()
        ),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    eventually("the prompt to reach the agent", || {
        let seen = crate::support::prompts(&log);
        if seen.iter().any(|p| p == "hello from the fleet") { Ok(()) } else { Err(format!("{seen:?}")) }
    });
}

/// At the limit, `desk serve` says so: which limit, its value, and the `sysctl` that raises it.
#[test]
fn desk_serve_names_the_inotify_limit_and_the_fix_when_none_is_left() {
    let home = Home::new();
    let out = in_namespace_with_inotify_limit(&home, 0, "exec \"$DESK\" serve");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("as many inotify instances as Linux allows (fs.inotify.max_user_instances = "), "{err}");
    assert!(err.contains("sudo sysctl fs.inotify.max_user_instances="), "{err}");
    assert!(err.contains("anon_inode:inotify"), "how to find who holds them: {err}");
}

/// A master is started without glibc's cache of ended threads' stacks (`GLIBC_TUNABLES`, so
/// that an idle master gives its short-lived threads' stacks back), and takes the setting out
/// of its environment: the child sees none; a `GLIBC_TUNABLES` of the user's own reaches the
/// child unchanged.
#[test]
fn the_masters_own_glibc_tunables_do_not_reach_the_child_and_a_users_own_do() {
    let home = Home::new();
    let show = "echo \"tunables=[${GLIBC_TUNABLES-unset}]\"; sleep 100";
    let started = home.cmd().env_remove("GLIBC_TUNABLES").args(["new", "plain", "--", "sh", "-c", show]).output();
    assert!(started.as_ref().is_ok_and(|o| o.status.success()), "{started:?}");
    home.wait_screen("plain", "tunables=[unset]");
    let own = "glibc.malloc.check=0";
    let started = home.cmd().env("GLIBC_TUNABLES", own).args(["new", "own", "--", "sh", "-c", show]).output();
    assert!(started.as_ref().is_ok_and(|o| o.status.success()), "{started:?}");
    home.wait_screen("own", &format!("tunables=[{own}]"));
}
