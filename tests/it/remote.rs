//! Sessions on other hosts, through a real OpenSSH server on 127.0.0.1 (docs/remote.md).
//!
//! Each test starts its own `sshd -D` on a free port of 127.0.0.1 with a throwaway host key and
//! user key (made by ssh-keygen in the test's temp dir; password login off), and reaches it
//! through a local ssh config in that dir (known_hosts holding the throwaway host key, so host-key
//! checking stays on). A "host" is that sshd with a `desk` setting that runs the desk under test
//! with a `DESK_HOME` of its own, so one machine holds two homes that share nothing but ssh.
//! Every process is stopped by its pid at the end: sshd and each connection's processes, the
//! local ControlMaster, and (through each [`Home`]) every master and daemon. Nothing but
//! 127.0.0.1 is ever dialled.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use crate::harness::PtyCommand;
use crate::sshd::{Sshd, free_port, kill_control_masters, kill_shared_links, shared_links};
use crate::suite::{Needs, require};
use crate::support::{DESK, Home, PATIENCE, eventually, prompts};

/// A throwaway sshd, once the machine is known to have one.
fn sshd() -> Sshd {
    require(Needs::Sshd);
    Sshd::start()
}

/// The command line that runs the desk under test under `home` on the "host".
fn desk_on(home: &Home) -> String {
    format!("env DESK_HOME={} DESK_AUTOSTART=0 {DESK}", home.path().display())
}

/// The local side: a home whose config names hosts.
struct Local {
    home: Home,
}

impl Local {
    fn new(hosts: &[String]) -> Local {
        let home = Home::new();
        let config = home.path().join("config");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(config.join("config.toml"), hosts.concat()).unwrap();
        Local { home }
    }
}

impl Drop for Local {
    /// The ControlMaster ssh left running (ControlPersist), found by its control path, which
    /// lives in this home: killed by its pid.
    fn drop(&mut self) {
        kill_shared_links(&self.home.run_dir());
        kill_control_masters(&self.home.run_dir());
    }
}

/// Start `box:web` on the host: it says `greeting`, then writes what it is sent to the file
/// returned (in the host's home).
fn new_web_on_box(local: &Local, remote: &Home, greeting: &str) -> std::path::PathBuf {
    let got = remote.path().join("got.txt");
    let script = format!("echo {greeting}; exec cat > {}", got.display());
    local.home.ok(&["new", "box:web", "--", "sh", "-c", &script]);
    got
}

/// A `[hosts.gone]` entry whose port refuses connections: a host that cannot be reached.
fn gone_host(sshd: &Sshd) -> String {
    let refused = free_port();
    format!(
        "[hosts.gone]\nssh = \"desk-test\"\nssh_args = [\"-F\", \"{}\", \"-p\", \"{refused}\"]\n",
        sshd.ssh_config().display()
    )
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn new_ls_peek_send_and_kill_work_through_a_host_on_its_own_desk_home() {
    let sshd = sshd();
    let remote = Home::new();
    remote.serve();
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote))]);
    let got = new_web_on_box(&local, &remote, "hello from the box");
    // The session is the host's: its files are in the host's home, none here.
    assert!(remote.socket("web").exists(), "the master runs under the host's DESK_HOME");
    assert!(!local.home.socket("web").exists());
    let peek = eventually("peek through the host to show the session's screen", || {
        let out = local.home.desk(&["peek", "box:web"]);
        let text = stdout(&out);
        if text.contains("hello from the box") { Ok(text) } else { Err(format!("{text}{}", stderr(&out))) }
    });
    assert!(peek.contains("hello from the box"));
    // ls -H HOST and ls --all: the host's session with its host, and this machine's.
    local.home.new_sh("here", "sleep 600");
    let listing = local.home.json(&["ls", "-H", "box", "--json"]);
    let rows = listing["data"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{listing:#}");
    assert_eq!((rows[0]["host"].as_str(), rows[0]["name"].as_str()), (Some("box"), Some("web")), "{listing:#}");
    let all = local.home.ok(&["ls", "--all"]);
    let line = |host: &str, name: &str| all.lines().any(|l| l.split_whitespace().take(2).eq([host, name]));
    assert!(line("-", "here") && line("box", "web"), "{all}");
    // send: queued by the host's daemon, delivered by it into the host's session.
    let id = local.home.ok(&["send", "box:web", "line over ssh"]).trim().to_string();
    assert!(!id.is_empty());
    eventually("the host's daemon to deliver the prompt", || {
        let text = std::fs::read_to_string(&got).unwrap_or_default();
        if text == "line over ssh\n" { Ok(()) } else { Err(format!("{text:?}")) }
    });
    // events --all: the host's journal beside this machine's, each line with its host.
    let events = local.home.ok(&["events", "--all", "--json"]);
    let lines: Vec<serde_json::Value> = events.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let started = |host: serde_json::Value, session: &str| {
        lines.iter().any(|e| e["host"] == host && e["session"] == session && e["type"] == "started")
    };
    assert!(started("box".into(), "web") && started(serde_json::Value::Null, "here"), "{events}");
    let text = local.home.ok(&["events", "--all", "--type", "started"]);
    assert!(text.contains("box:web") && text.contains("here"), "{text}");
    // keys: typed by the host's master; the confirmation names the session as typed here.
    let typed = local.home.ok(&["keys", "box:web", "text:x"]);
    assert_eq!(typed.trim(), "typed text:x into box:web");
    // kill: the host's master stops its child; ls through the host says so.
    let killed = local.home.ok(&["kill", "box:web"]);
    assert!(killed.starts_with("sent SIGTERM to session box:web"), "{killed}");
    eventually("the host's session to have exited", || {
        let v = local.home.json(&["ls", "-H", "box", "--json"]);
        let row = &v["data"][0];
        if row["status"] == "exited" { Ok(()) } else { Err(format!("{v:#}")) }
    });
    // A name on a host that has no such session: the host's own words, exit 2.
    let out = local.home.desk(&["peek", "box:nope"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("nope"), "{}", stderr(&out));
    // A host that is not configured is refused by name.
    let out = local.home.desk(&["peek", "elsewhere:web"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no host \"elsewhere\""), "{}", stderr(&out));
    // Asked for JSON, the refusal is the error envelope on stdout as well.
    for (args, code) in [
        (&["send", "elsewhere:web", "hi", "--json"][..], "no-such-session"),
        (&["item", "elsewhere:01M8", "--json"][..], "no-such-item"),
    ] {
        let out = local.home.desk(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        assert_eq!(v["error"]["code"], code, "{v:#}");
        assert!(v["error"]["message"].as_str().unwrap_or("").contains("no host \"elsewhere\""), "{v:#}");
    }
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn desk_hosts_reports_version_round_trip_and_the_unreachable() {
    let sshd = sshd();
    let remote = Home::new();
    let dead = gone_host(&sshd);
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote)), dead]);
    let v = local.home.json(&["hosts", "--json"]);
    let hosts = v["data"].as_array().unwrap();
    let host = |name: &str| hosts.iter().find(|h| h["name"] == name).unwrap_or_else(|| panic!("{name}: {v:#}"));
    assert_eq!(host("box")["reachable"], true, "{v:#}");
    assert_eq!(host("box")["desk_version"], env!("CARGO_PKG_VERSION"));
    assert!(host("box")["rtt_ms"].as_f64().is_some(), "{v:#}");
    assert_eq!(host("box")["facts"]["runtime"], remote.run_dir().display().to_string());
    // Linger is systemd's: on a host without it, not applicable rather than on or off.
    if std::path::Path::new("/run/systemd/system").is_dir() {
        assert!(host("box")["facts"]["linger"].is_boolean(), "{v:#}");
    } else {
        assert!(host("box")["facts"]["linger"].is_null(), "{v:#}");
        let text = local.home.ok(&["hosts"]);
        assert!(text.contains("n/a (no systemd)"), "{text}");
    }
    // The host's daemon, asked over its control socket through the link.
    assert_eq!(host("box")["serve_running"], false, "{v:#}");
    remote.serve();
    let v = local.home.json(&["hosts", "--json"]);
    assert_eq!(v["data"].as_array().unwrap().iter().find(|h| h["name"] == "box").unwrap()["serve_running"], true);
    assert_eq!(host("gone")["reachable"], false);
    assert!(host("gone")["error"].as_str().unwrap().contains("Connection refused"), "{v:#}");
    // As text (a pipe here), the row says unreachable and ssh's words follow the table whole.
    let text = local.home.ok(&["hosts"]);
    let row = text.lines().find(|l| l.starts_with("gone ")).unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains(" unreachable "), "{text}");
    assert!(text.contains("\ngone: ") && text.contains("Connection refused"), "{text}");
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn an_unreachable_host_is_one_row_in_ls_all_with_ssh_s_own_error_and_no_hang() {
    let sshd = sshd();
    // One port nobody listens on, one that accepts and never says a word.
    let refused = free_port();
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let entry = |name: &str, port: u16| {
        format!(
            "[hosts.{name}]\nssh = \"desk-test\"\nssh_args = [\"-F\", \"{}\", \"-p\", \"{port}\"]\n",
            sshd.ssh_config().display()
        )
    };
    let local = Local::new(&[entry("refused", refused), entry("silent", silent_port)]);
    let start = Instant::now();
    let out = local.home.desk(&["ls", "--all"]);
    let took = start.elapsed();
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    let row =
        |host: &str| text.lines().find(|l| l.starts_with(host)).unwrap_or_else(|| panic!("{host}: {text}")).to_string();
    assert!(row("refused").contains("unreachable") && row("refused").contains("Connection refused"), "{text}");
    assert!(row("silent").contains("unreachable"), "{text}");
    // Bounded: the listing's own deadline, not a hang (a generous bound, not a timing claim).
    assert!(took < Duration::from_secs(40), "ls --all took {took:?}");
    drop(silent);
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn a_host_with_another_desk_or_none_or_a_noisy_rc_file_gets_an_error_naming_it_and_what_to_do() {
    let sshd = sshd();
    let remote = Home::new();
    // A desk that answers the handshake as another version would: relay protocol 99, desk 9.9.9.
    let fake = sshd.dir.path().join("fake-desk");
    std::fs::write(&fake, "#!/bin/sh\nprintf '\\000desk-relay\\000\\000\\143\\000\\002\\0059.9.9'\nsleep 5\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let local = Local::new(&[
        sshd.host_entry("other", &fake.display().to_string()),
        sshd.host_entry("bare", "/nonexistent/bin/desk"),
        sshd.host_entry("noisy", &format!("echo Welcome to the build box; {}", desk_on(&remote))),
    ]);
    let out = local.home.desk(&["peek", "other:web"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("host other runs desk 9.9.9 (relay protocol 99)"), "{err}");
    assert!(err.contains(&format!("install desk {} on other", env!("CARGO_PKG_VERSION"))), "{err}");
    let out = local.home.desk(&["peek", "bare:web"]);
    let err = stderr(&out);
    assert!(err.contains("host bare has no desk") && err.contains("install desk"), "{err}");
    let out = local.home.desk(&["peek", "noisy:web"]);
    let err = stderr(&out);
    assert!(err.contains("host noisy") && err.contains("Welcome to the build box") && err.contains("rc file"), "{err}");
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn attach_through_a_host_says_the_connection_is_lost_refuses_input_and_resumes_with_a_keyframe() {
    let mut sshd = sshd();
    let remote = Home::new();
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote))]);
    local.home.ok(&["new", "box:echo", "--", "sh", "-c", "while read l; do echo \"got $l\"; done"]);
    let mut pty = PtyCommand::new(DESK)
        .args(["attach", "box:echo"])
        .env("DESK_HOME", local.home.path())
        .env("DESK_AUTOSTART", "0")
        .size(100, 30)
        .spawn()
        .expect("attach");
    pty.write("one\r").unwrap();
    pty.wait_until(PATIENCE, "the session to echo", |s| s.contains("got one")).unwrap();
    // The host goes away: its sshd and every connection, and the shared connection here.
    sshd.stop();
    kill_control_masters(&local.home.run_dir());
    pty.wait_until(PATIENCE, "the lost-connection notice", |s| s.contains("connection to box lost, reconnecting"))
        .unwrap();
    // Typed while disconnected: refused (the bell says so), never delivered later.
    let bells = pty.screen().bells();
    pty.write("typed blind\r").unwrap();
    pty.wait_until(PATIENCE, "the bell for refused input", |s| s.bells() > bells).unwrap();
    sshd.run();
    // Back: the keyframe redraws the session's screen (the notice is gone with it), and typing
    // reaches the session again.
    pty.wait_until(PATIENCE, "the session redrawn after reconnecting", |s| {
        s.contains("got one") && !s.contains("reconnecting")
    })
    .unwrap();
    pty.write("two\r").unwrap();
    pty.wait_until(PATIENCE, "typing to work again", |s| s.contains("got two")).unwrap();
    let screen = remote.peek("echo");
    assert!(!screen.contains("typed blind"), "input typed while disconnected reached the session:\n{screen}");
    pty.write([0x1c]).unwrap();
    let status = pty.wait_exit(PATIENCE).unwrap();
    assert!(status.success(), "{status:?}\n{}", pty.screen());
}

/// `desk attach HOST:NAME` under `local`'s home, on a terminal of its own.
fn attach_remote(local: &Local, target: &str) -> crate::harness::Pty {
    PtyCommand::new(DESK)
        .args(["attach", target])
        .env("DESK_HOME", local.home.path())
        .env("DESK_AUTOSTART", "0")
        .size(100, 30)
        .spawn()
        .expect("attach")
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn attach_through_a_host_detaches_by_key_and_ends_with_the_session_s_exit_code_255_included() {
    let sshd = sshd();
    let remote = Home::new();
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote))]);
    local.home.ok(&["new", "box:ends", "--", "sh", "-c", "read l; echo \"got $l\"; read code; exit $code"]);
    let mut pty = attach_remote(&local, "box:ends");
    pty.write("one\r").unwrap();
    pty.wait_until(PATIENCE, "the session to echo", |s| s.contains("got one")).unwrap();
    pty.write([0x1c]).unwrap();
    let status = pty.wait_exit(PATIENCE).unwrap();
    assert_eq!(status.code(), Some(0), "{}", pty.screen());
    pty.wait_until(PATIENCE, "the detach line", |s| s.contains("[desk: detached from box:ends]")).unwrap();
    // Attached again, the session ends: its exit code is attach's.
    let mut pty = attach_remote(&local, "box:ends");
    pty.wait_until(PATIENCE, "the session redrawn", |s| s.contains("got one")).unwrap();
    pty.write("7\r").unwrap();
    let status = pty.wait_exit(PATIENCE).unwrap();
    assert_eq!(status.code(), Some(7), "{}", pty.screen());
    pty.wait_until(PATIENCE, "the exit line", |s| s.contains("box:ends exited with code 7")).unwrap();
    // 255 is also what ssh says of a lost connection: the host, asked, says the session ended.
    local.home.ok(&["new", "box:ff", "--", "sh", "-c", "echo ready; read l; exit 255"]);
    let mut pty = attach_remote(&local, "box:ff");
    pty.wait_until(PATIENCE, "the session's screen", |s| s.contains("ready")).unwrap();
    pty.write("\r").unwrap();
    let status = pty.wait_exit(PATIENCE).unwrap();
    let screen = pty.screen();
    assert_eq!(status.code(), Some(255), "{screen}");
    assert!(screen.contains("box:ff exited with code 255"), "{screen}");
    assert!(!screen.contains("reconnecting"), "a session's own 255 read as a lost connection:\n{screen}");
    // A session the host does not have: the host's answer, exit 2, before any terminal is taken.
    let out = local.home.desk(&["attach", "box:nosuch"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("on host box"), "{}", stderr(&out));
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn attach_through_a_host_passes_on_read_only_and_the_detach_key_asked_here() {
    let sshd = sshd();
    let remote = Home::new();
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote))]);
    local.home.ok(&["new", "box:echo", "--", "sh", "-c", "echo ready; while read l; do echo \"got $l\"; done"]);
    let mut pty = PtyCommand::new(DESK)
        .args(["attach", "--read-only", "--detach-key", "^a", "box:echo"])
        .env("DESK_HOME", local.home.path())
        .env("DESK_AUTOSTART", "0")
        .size(100, 30)
        .spawn()
        .expect("attach");
    pty.wait_until(PATIENCE, "the session's screen", |s| s.contains("ready")).unwrap();
    pty.write("typed\r").unwrap();
    // Ctrl-\ is no detach key here: it goes nowhere (read-only), and Ctrl-A detaches.
    pty.write([0x1c]).unwrap();
    pty.write([0x01]).unwrap();
    let status = pty.wait_exit(PATIENCE).unwrap();
    assert_eq!(status.code(), Some(0), "{}", pty.screen());
    pty.wait_until(PATIENCE, "the detach line", |s| s.contains("[desk: detached from box:echo]")).unwrap();
    let screen = remote.peek("echo");
    assert!(!screen.contains("got typed"), "a read-only attach sent input:\n{screen}");
}

/// `box:echo` attached, then its host gone (its sshd and the ControlMaster here), until the
/// terminal says so; the sshd is stopped, not dropped, so a test can run it again.
fn attached_then_lost() -> (Sshd, Home, Local, crate::harness::Pty) {
    let mut sshd = sshd();
    let remote = Home::new();
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote))]);
    local.home.ok(&["new", "box:echo", "--", "sh", "-c", "echo ready; while read l; do echo \"got $l\"; done"]);
    let pty = attach_remote(&local, "box:echo");
    pty.wait_until(PATIENCE, "the session's screen", |s| s.contains("ready")).unwrap();
    sshd.stop();
    kill_control_masters(&local.home.run_dir());
    pty.wait_until(PATIENCE, "the lost-connection notice", |s| s.contains("connection to box lost, reconnecting"))
        .unwrap();
    (sshd, remote, local, pty)
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn while_a_host_is_unreachable_the_detach_key_leaves_and_says_what_was_refused() {
    let (_sshd, _remote, _local, mut pty) = attached_then_lost();
    pty.write("blind").unwrap();
    pty.wait_until(PATIENCE, "the bell for refused input", |s| s.bells() > 0).unwrap();
    pty.write([0x1c]).unwrap();
    let status = pty.wait_exit(PATIENCE).unwrap();
    assert_eq!(status.code(), Some(0), "{}", pty.screen());
    pty.wait_until(PATIENCE, "the detach line and the refusals", |s| {
        s.contains("[desk: detached from box:echo]")
            && s.contains("refused typed input 1 time(s): not connected to host box")
    })
    .unwrap();
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn a_session_gone_when_its_host_answers_again_ends_the_attach_with_the_host_s_reason() {
    let (mut sshd, remote, _local, mut pty) = attached_then_lost();
    remote.ok(&["kill", "echo"]);
    sshd.run();
    let status = pty.wait_exit(PATIENCE).unwrap();
    assert_eq!(status.code(), Some(1), "{}", pty.screen());
    pty.wait_until(PATIENCE, "the host's reason", |s| s.contains("[desk: lost box:echo: session echo")).unwrap();
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn a_wedged_control_master_is_replaced_instead_of_hanging_every_command() {
    let sshd = sshd();
    let remote = Home::new();
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote))]);
    local.home.ok(&["ls", "-H", "box"]);
    // The shared connection ssh left behind (ControlPersist): stop it, as a master wedged on a
    // dead network would be. A command through it would wait for ever.
    let control = local.home.path().join("run").join("ssh").display().to_string();
    // The ControlMaster, not the shared link's ssh (a client of it, with the same command line).
    let links: Vec<i32> = shared_links(&local.home.run_dir())
        .into_iter()
        .flat_map(desk_common::procfs::descendants)
        .map(|p| p.pid as i32)
        .collect();
    let masters: Vec<i32> =
        crate::sshd::processes_mentioning(&control).into_iter().filter(|pid| !links.contains(pid)).collect();
    assert_eq!(masters.len(), 1, "one ControlMaster: {masters:?}");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(masters[0]), nix::sys::signal::SIGSTOP).unwrap();
    let start = Instant::now();
    let out = local.home.desk(&["ls", "-H", "box", "--json"]);
    let took = start.elapsed();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["data"].as_array().map(Vec::len), Some(0), "{v:#}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    // A new master took its place; the wedged one is killed by the Local's drop (by pid).
    let now = crate::sshd::processes_mentioning(&control);
    assert!(now.iter().any(|pid| *pid != masters[0]), "a new ControlMaster: {now:?}");
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn the_dashboard_shows_a_host_s_sessions_previews_and_sends_to_them_and_an_unreachable_host_freezes_nothing() {
    let sshd = sshd();
    let remote = Home::new();
    remote.serve();
    let dead = gone_host(&sshd);
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote)), dead]);
    let got = new_web_on_box(&local, &remote, "screen of the box");
    local.home.new_sh("here", "sleep 600");
    let pty = PtyCommand::new(DESK)
        .arg("dash")
        .env("DESK_HOME", local.home.path())
        .env("DESK_AUTOSTART", "0")
        .size(160, 40)
        .spawn()
        .expect("spawn desk dash");
    // The host's session is a row named HOST:NAME beside this machine's; the lost host is in
    // the header with ssh's own words.
    pty.wait_until(PATIENCE, "box:web and here listed, gone unreachable in the header", |s| {
        let header = s.rows().first().cloned().unwrap_or_default();
        s.contains("box:web") && s.contains("here") && header.contains("gone unreachable") && header.contains("box")
    })
    .expect("the dashboard with the host's session");
    // The local rows keep moving while a host is lost.
    local.home.new_sh("later", "sleep 600");
    pty.wait_until(PATIENCE, "a new local session listed", |s| s.contains("later")).expect("local rows update");
    // Selected (by the filter), the host's session is previewed through the link: its screen.
    pty.write("/box:web\r").expect("filter");
    pty.wait_until(PATIENCE, "the host's session's screen in the preview", |s| {
        s.contains("screen of the box") && !s.contains("later")
    })
    .expect("the remote preview");
    // An action on it: a prompt written here is queued and delivered by the host's desk.
    pty.write("s").expect("open the editor");
    pty.wait_for_text("prompt for box:web").expect("the editor");
    pty.write("from the dashboard").expect("type");
    pty.wait_for_text("from the dashboard_").expect("the text in the editor");
    pty.write("\x1b\r").expect("Alt-Enter");
    pty.wait_for_text("sent to box:web: item ").expect("the item id on the footer");
    eventually("the host's daemon to deliver the prompt", || {
        let text = std::fs::read_to_string(&got).unwrap_or_default();
        if text == "from the dashboard\n" { Ok(()) } else { Err(format!("{text:?}")) }
    });
    pty.write("q").expect("quit");
}

/// The relay that answered `desk hosts` for host `name`.
fn relay_pid(local: &Local, name: &str) -> i64 {
    let v = local.home.json(&["hosts", "--json"]);
    let host = v["data"].as_array().unwrap().iter().find(|h| h["name"] == name).cloned().unwrap();
    assert_eq!(host["reachable"], true, "{v:#}");
    host["facts"]["relay_pid"].as_i64().unwrap_or_else(|| panic!("{v:#}"))
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn commands_share_one_link_per_host_and_a_dead_link_is_replaced_not_reported_lost() {
    let sshd = sshd();
    let remote = Home::new();
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote))]);
    // Two commands, one relay on the host: the shared link carried both.
    let first = relay_pid(&local, "box");
    assert_eq!(relay_pid(&local, "box"), first, "the second command had a relay of its own");
    let links = shared_links(&local.home.run_dir());
    assert_eq!(links.len(), 1, "{links:?}");
    // Its socket is the user's alone.
    let sockets: Vec<_> = std::fs::read_dir(local.home.run_dir().join("links"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "sock"))
        .collect();
    assert_eq!(sockets.len(), 1);
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(sockets[0].metadata().unwrap().permissions().mode() & 0o777, 0o600);
    // The host's end dies (as when the host drops the connection): the very next command gets a
    // new link, not `connection lost`.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(first as i32), nix::sys::signal::SIGKILL).unwrap();
    let out = local.home.desk(&["ls", "-H", "box", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["data"].as_array().map(Vec::len), Some(0), "{v:#}");
    let second = relay_pid(&local, "box");
    assert_ne!(second, first);
    // The host's end wedged (alive, silent: a network gone away): the link's ping goes
    // unanswered, and the command gets a new link within the ping's bound, not an error.
    let wedged = nix::unistd::Pid::from_raw(second as i32);
    nix::sys::signal::kill(wedged, nix::sys::signal::SIGSTOP).unwrap();
    let out = local.home.desk(&["ls", "-H", "box", "--json"]);
    let _ = nix::sys::signal::kill(wedged, nix::sys::signal::SIGKILL);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["data"].as_array().map(Vec::len), Some(0), "{v:#}");
    let second = relay_pid(&local, "box");
    // The shared link itself killed outright: its socket is left behind, refuses connections,
    // and the next command starts a new link over it.
    for pid in shared_links(&local.home.run_dir()) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::SIGKILL).unwrap();
    }
    eventually("the killed link's lock to be free", || {
        shared_links(&local.home.run_dir()).is_empty().then_some(()).ok_or("still held".to_string())
    });
    assert!(relay_pid(&local, "box") != second);
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn a_shared_link_with_no_command_on_it_ends_and_removes_its_socket() {
    let sshd = sshd();
    let remote = Home::new();
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote))]);
    let out = local.home.cmd().args(["ls", "-H", "box"]).env("DESK_LINK_IDLE_MS", "300").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let links = local.home.run_dir().join("links");
    eventually("the idle link to end", || {
        let left = shared_links(&local.home.run_dir());
        let sockets = std::fs::read_dir(&links)
            .unwrap()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "sock"))
            .count();
        (left.is_empty() && sockets == 0).then_some(()).ok_or(format!("links {left:?}, sockets {sockets}"))
    });
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn desk_hosts_says_serve_runs_only_when_desk_serve_itself_answers() {
    use std::io::{BufRead as _, Write as _};
    let sshd = sshd();
    let remote = Home::new();
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote))]);
    // Something else listens where desk serve would, and answers every line with a refusal.
    std::fs::create_dir_all(remote.run_dir()).unwrap();
    let socket = remote.run_dir().join("_serve.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            let mut line = String::new();
            let mut reader = std::io::BufReader::new(&stream);
            if reader.read_line(&mut line).is_ok() {
                let _ = (&stream).write_all(b"{\"ok\":false,\"error\":\"not desk serve\"}\n");
            }
        }
    });
    let v = local.home.json(&["hosts", "--json"]);
    let host = &v["data"][0];
    assert_eq!(host["reachable"], true, "{v:#}");
    assert_eq!(host["serve_running"], false, "{v:#}");
    assert!(host["serve_pid"].is_null(), "{v:#}");
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn a_host_s_items_are_written_host_colon_id_and_item_stuck_force_drop_pause_take_them_back() {
    let sshd = sshd();
    let remote = Home::new();
    remote.serve();
    let dead = gone_host(&sshd);
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote)), dead]);
    // Enters within 6.5 s of a paste are newlines: the delivery runs out of Enters and ends
    // submit-stuck; a forced Enter after the window submits it (as in the delivery tests).
    let log = remote.demo("f", &["--paste-burst-ms", "6500"]);
    remote.wait_ready("f");
    // pause and resume: the host's daemon holds the host's session's queue.
    assert_eq!(local.home.ok(&["pause", "box:f"]).trim(), "paused delivery to box:f");
    // send prints the id as the host's item, and queue lists it the same way; the command its
    // hold message suggests is one to type here.
    let out = local.home.desk(&["send", "box:f", "never mind this one"]);
    assert!(stderr(&out).contains("queue box:f is held: "), "{}", stderr(&out));
    assert!(stderr(&out).contains("(desk resume box:f lets it go on)"), "{}", stderr(&out));
    let sent = stdout(&out).trim().to_string();
    let id = sent.strip_prefix("box:").unwrap_or_else(|| panic!("not written box:ID: {sent:?}")).to_string();
    assert_eq!(remote.item(&id)["state"], "queued", "the host's daemon has it");
    let queue = local.home.ok(&["queue", "box:f"]);
    assert!(queue.contains(&format!("box:{id}")) && queue.contains("paused"), "{queue}");
    // Every queue of the host, its sessions and ids as they are typed here.
    let queues = local.home.ok(&["queue", "-H", "box"]);
    assert!(queues.starts_with("box:f  [paused]") && queues.contains(&format!("  box:{id}  queued")), "{queues}");
    // --all: this machine's (none) and every host's; the lost one is said, the others listed.
    let out = local.home.desk(&["queue", "--all"]);
    assert_eq!(out.status.code(), Some(1), "a host could not be asked: {}", stderr(&out));
    assert!(stdout(&out).contains(&format!("box:{id}")) && stderr(&out).contains("desk: host gone: "), "{out:?}");
    // This machine runs no daemon and has nothing queued: nothing to say of it.
    assert!(!stderr(&out).contains("desk serve is not running"), "{}", stderr(&out));
    let out = local.home.desk(&["queue", "--all", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let queues = v["data"].as_array().unwrap();
    assert_eq!(queues.len(), 1, "{v:#}");
    assert_eq!((queues[0]["host"].as_str(), queues[0]["session"].as_str()), (Some("box"), Some("f")), "{v:#}");
    assert_eq!(queues[0]["items"][0]["id"], id.as_str(), "the host's own id in JSON: {v:#}");
    assert!(v["notes"].to_string().contains("host gone"), "{v:#}");
    // item takes it back (and a unique start of it, as for this machine's ids).
    let item = local.home.ok(&["item", &sent]);
    assert!(item.contains(&format!("item box:{id}")) && item.contains("queued"), "{item}");
    let v = local.home.json(&["item", &format!("box:{}", &id[..20]), "--json"]);
    assert_eq!(v["data"]["id"], id.as_str(), "--json is the host's answer: {v:#}");
    // drop takes it back: dropped on the host.
    local.home.ok(&["drop", &sent]);
    assert_eq!(remote.item(&id)["state"], "dropped");
    local.home.ok(&["resume", "box:f"]);
    // A stuck item on the host: stuck -H lists it with the commands that reach it.
    let stuck = local.home.ok(&["send", "box:f", "force me through"]).trim().to_string();
    let stuck_id = stuck.strip_prefix("box:").expect("box:ID").to_string();
    assert_eq!(remote.settled(&stuck_id)["stuck"], "submit-stuck");
    let listed = local.home.ok(&["stuck", "-H", "box"]);
    assert!(listed.contains(&format!("box:{stuck_id}  box:f")), "{listed}");
    assert!(listed.contains(&format!("desk peek box:f); desk force box:{stuck_id} presses Enter")), "{listed}");
    // --all: this machine's (none) and every host's; the lost one is said, the others listed.
    let out = local.home.desk(&["stuck", "--all", "--json"]);
    assert_eq!(out.status.code(), Some(1), "a host could not be asked: {}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let items = v["data"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{v:#}");
    assert_eq!((items[0]["host"].as_str(), items[0]["id"].as_str()), (Some("box"), Some(stuck_id.as_str())));
    assert!(v["notes"].to_string().contains("host gone"), "{v:#}");
    // force takes it back: Enter only, delivered on the host.
    let out = local.home.ok(&["force", &stuck]);
    assert!(out.contains("delivered"), "{out}");
    assert_eq!(remote.item(&stuck_id)["state"], "delivered");
    assert_eq!(prompts(&log), vec!["force me through"], "never pasted twice");
    // An item that is not on the host, and a host that is not configured: each said by name.
    let out = local.home.desk(&["item", "box:7ZZZZZZZZZZZZZZZZZZZZZZZZZ"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("no item"), "{}", stderr(&out));
    let out = local.home.desk(&["force", &format!("elsewhere:{stuck_id}")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("no host \"elsewhere\""), "{}", stderr(&out));
    let out = local.home.desk(&["stuck", "-H", "elsewhere"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn a_word_shaped_like_an_item_id_in_a_host_s_prompt_is_printed_as_typed_and_only_ids_are_host_colon_id() {
    let sshd = sshd();
    let remote = Home::new();
    remote.serve();
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote))]);
    remote.demo("f", &[]);
    remote.wait_ready("f");
    // Held behind a pause, so that queue and item show it with its text.
    local.home.ok(&["pause", "box:f"]);
    let word = "01J8ZQ4M3X0000000000000000";
    let prompt = format!("see {word} again");
    let sent = local.home.ok(&["send", "box:f", &prompt]).trim().to_string();
    let id = sent.strip_prefix("box:").unwrap_or_else(|| panic!("not written box:ID: {sent:?}")).to_string();
    let queue = local.home.ok(&["queue", "box:f"]);
    assert!(queue.contains(&format!("  box:{id}  ")), "the id is the host's: {queue}");
    assert!(queue.contains(&prompt), "the prompt's text as it was typed: {queue}");
    assert!(!queue.contains(&format!("box:{word}")), "{queue}");
    let item = local.home.ok(&["item", &sent]);
    assert!(item.contains(&format!("item box:{id}\n")), "{item}");
    assert!(item.contains(&format!("text      {prompt}")) && !item.contains(&format!("box:{word}")), "{item}");
    // JSON is the host's, ids as it holds them.
    let v = local.home.json(&["queue", "box:f", "--json"]);
    assert_eq!(v["data"][0]["items"][0]["id"], id.as_str(), "{v:#}");
    // The daemon's sentence names the dropped item as it is typed here.
    let dropped = local.home.ok(&["drop", &sent]);
    assert!(dropped.contains(&format!("dropped box:{id}")), "{dropped}");
    assert_eq!(local.home.ok(&["resume", "box:f"]).trim(), "resumed delivery to box:f");
}

/// Lines a child writes to one of its pipes, as they come (read on a thread).
fn lines_of(pipe: impl std::io::Read + Send + 'static) -> std::sync::Arc<std::sync::Mutex<Vec<String>>> {
    use std::io::BufRead as _;
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = lines.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
            kept.lock().unwrap().push(line);
        }
    });
    lines
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn events_all_follow_reconnects_a_host_whose_link_dropped_and_prints_each_event_once() {
    let sshd = sshd();
    let remote = Home::new();
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote))]);
    remote.new_sh("one", "sleep 600");
    let mut events = Reaped(
        local
            .home
            .cmd()
            .args(["events", "--all", "--follow", "--json", "--type", "started"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("desk events --all --follow"),
    );
    let out = lines_of(events.0.stdout.take().unwrap());
    let err = lines_of(events.0.stderr.take().unwrap());
    let started = |session: &str| {
        out.lock()
            .unwrap()
            .iter()
            .filter(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap_or_default();
                v["host"] == "box" && v["session"] == session
            })
            .count()
    };
    eventually("the host's history", || (started("one") == 1).then_some(()).ok_or(format!("{:?}", out.lock())));
    // The link drops: the shared link killed outright (as when its ssh dies).
    kill_shared_links(&local.home.run_dir());
    eventually("stderr to say it reconnects", || {
        let said = err.lock().unwrap().join("\n");
        if said.contains("host box:") && said.contains("reconnecting in") && said.contains("reconnected") {
            Ok(())
        } else {
            Err(said)
        }
    });
    // Events after the drop come through the new link; the history given again is not
    // printed twice.
    remote.new_sh("two", "sleep 600");
    eventually("the new session's start", || (started("two") == 1).then_some(()).ok_or(format!("{:?}", out.lock())));
    assert_eq!(started("one"), 1, "{:?}", out.lock());
}

/// A child killed when dropped (also when its test fails), with what it started, each by its
/// pid.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let mut doomed: Vec<u32> = desk_common::procfs::descendants(self.0.id()).into_iter().map(|p| p.pid).collect();
        doomed.push(self.0.id());
        for pid in doomed {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::SIGKILL);
        }
        let _ = self.0.wait();
    }
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn events_all_follow_killed_alone_leaves_no_process_of_its_own_running() {
    let sshd = sshd();
    let remote = Home::new();
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote))]);
    local.home.new_sh("here", "sleep 600");
    remote.new_sh("there", "sleep 600");
    let mut events = local
        .home
        .cmd()
        .args(["events", "--all", "--follow", "--json", "--type", "started"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("desk events --all --follow");
    let pid = events.id();
    let mut left = Leftovers(vec![(pid, start_of(pid).expect("it runs"))]);
    let out = lines_of(events.stdout.take().unwrap());
    // Both streams followed: this machine's history and the host's are out.
    eventually("both histories", || {
        let lines = out.lock().unwrap();
        let has = |host: serde_json::Value, session: &str| {
            lines.iter().any(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap_or_default();
                v["host"] == host && v["session"] == session
            })
        };
        (has(serde_json::Value::Null, "here") && has("box".into(), "there")).then_some(()).ok_or(format!("{lines:?}"))
    });
    // Everything it started but the host's shared link (with its ssh), which every command to
    // the host shares and which ends by itself once idle (a_shared_link_with_no_command_…).
    let mut shared: Vec<u32> = shared_links(&local.home.run_dir());
    shared.extend(
        shared.clone().into_iter().flat_map(|l| desk_common::procfs::descendants(l).into_iter().map(|p| p.pid)),
    );
    let started: Vec<desk_common::procfs::ProcessInfo> =
        desk_common::procfs::descendants(pid).into_iter().filter(|p| !shared.contains(&p.pid)).collect();
    left.0.extend(started.iter().filter_map(|p| Some((p.pid, start_of(p.pid)?))));
    // Killed alone, as an OOM killer or `kill -9 PID` does: nothing of it may stay behind.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::SIGKILL).unwrap();
    let _ = events.wait();
    eventually("nothing it started to run on", || {
        let running: Vec<&desk_common::procfs::ProcessInfo> = started
            .iter()
            .filter(|p| left.0.iter().any(|(pid, start)| *pid == p.pid && start_of(p.pid) == Some(*start)))
            .collect();
        running.is_empty().then_some(()).ok_or(format!("{running:?}"))
    });
    left.0.clear();
}

/// When process `pid` started (clock ticks after boot), while it runs (not a zombie): with its
/// pid, it names one process, never a later one given the same pid.
fn start_of(pid: u32) -> Option<u64> {
    desk_common::procfs::state_and_start(pid).filter(|(state, _)| *state != 'Z').map(|(_, start)| start)
}

/// Processes a test started, each `(pid, start)`, killed when dropped (when the test fails
/// before they end), each by its pid and only while it is still that process.
struct Leftovers(Vec<(u32, u64)>);

impl Drop for Leftovers {
    fn drop(&mut self) {
        for (pid, start) in &self.0 {
            if start_of(*pid) == Some(*start) {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid as i32), nix::sys::signal::SIGKILL);
            }
        }
    }
}

/// `desk dash` under the local home, at 200x50 (wide enough for the CPU and memory columns).
fn remote_dash(local: &Local) -> crate::harness::Pty {
    PtyCommand::new(DESK)
        .arg("dash")
        .env("DESK_HOME", local.home.path())
        .env("DESK_AUTOSTART", "0")
        .size(200, 50)
        .spawn()
        .expect("spawn desk dash")
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn the_dashboard_forces_drops_and_resumes_a_host_s_items_shows_its_events_usage_and_dialogs_and_answers_them() {
    let sshd = sshd();
    let remote = Home::new();
    remote.serve();
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote))]);
    // On the host: a stuck item (submit-stuck, as in the delivery tests) and, behind a pause, a
    // queued one; and a session that shows an approval dialog.
    let log = remote.demo("f", &["--paste-burst-ms", "6500"]);
    remote.demo("api", &[]);
    remote.wait_ready("f");
    remote.wait_activity("api", "idle");
    let stuck = remote.send("f", "force me through");
    assert_eq!(remote.settled(&stuck)["stuck"], "submit-stuck");
    remote.ok(&["pause", "f"]);
    let queued = remote.send("f", "drop me");
    remote.ok(&["keys", "api", "text:please approve-me", "Enter"]);
    remote.wait_activity("api", "blocked");
    let pty = remote_dash(&local);
    pty.wait_until(PATIENCE, "box:f and box:api listed", |s| s.contains("box:f") && s.contains("box:api"))
        .expect("the host's rows");
    // The host's events in the events pane, as this machine's are: a session started there
    // after the dashboard did.
    remote.new_sh("ev", "echo hi; sleep 600");
    pty.wait_until(PATIENCE, "box:ev's start in the events pane", |s| {
        s.rows().iter().any(|r| r.contains("box:ev") && r.contains("started: sh -c"))
    })
    .expect("the host's events");
    // Its CPU and memory columns, from the host's listing (two listings make a rate).
    pty.write("/box:f\r").expect("filter");
    pty.wait_until(PATIENCE, "box:f's CPU and memory", |s| {
        s.rows()
            .iter()
            .any(|r| r.contains("box:f") && r.contains('%') && r.split_whitespace().any(|w| w.ends_with('M')))
    })
    .expect("the usage columns");
    // Its items in the items pane; force the stuck one: Enter only, on the host.
    pty.write("i").expect("items");
    pty.wait_until(PATIENCE, "the host's items", |s| {
        s.contains(&format!("{stuck} stuck (submit-stuck)")) && s.contains(&queued)
    })
    .expect("the items pane");
    pty.write("f").expect("force");
    pty.wait_for_text(&format!("force box:{stuck} (submit-stuck): press Enter on the text in its input box? y/n"))
        .expect("the confirmation names the host's item");
    pty.write("y").expect("confirm");
    eventually("the host's daemon to deliver the forced item", || {
        let state = remote.item(&stuck)["state"].clone();
        if state == "delivered" { Ok(()) } else { Err(state.to_string()) }
    });
    assert_eq!(prompts(&log), vec!["force me through"], "Enter only: never pasted twice");
    // Drop the queued one.
    pty.wait_until(PATIENCE, "the forced item gone from the pane", |s| !s.contains(&format!("{stuck} stuck")))
        .expect("the pane refreshed");
    pty.write("d").expect("drop");
    pty.wait_for_text(&format!("drop box:{queued} (\"drop me\")")).expect("the drop's confirmation");
    pty.write("y").expect("confirm");
    eventually("the host's daemon to drop it", || {
        let state = remote.item(&queued)["state"].clone();
        if state == "dropped" { Ok(()) } else { Err(state.to_string()) }
    });
    // p resumes the host's paused queue, through its own desk serve.
    // (Each Esc waits for its effect: an Esc and a key at once read as an Alt chord.)
    pty.write("i").expect("leave the items pane");
    pty.wait_until(PATIENCE, "the preview back", |s| !s.contains("box:f: items")).expect("the items pane closed");
    pty.write("p").expect("resume");
    pty.wait_until(PATIENCE, "the resume's answer", |s| s.contains("resum")).expect("resumed");
    eventually("box:f resumed on the host", || {
        let q = remote.json(&["queue", "--json"]);
        let paused = q["data"].as_array().into_iter().flatten().any(|s| s["session"] == "f" && !s["paused"].is_null());
        if paused { Err(q.to_string()) } else { Ok(()) }
    });
    // The host's dialog is a card in the approvals view, answered on the host.
    pty.write("\x1b").expect("clear the filter");
    pty.wait_until(PATIENCE, "the filter cleared", |s| !s.contains("filter: box:f")).expect("no filter");
    pty.write("A").expect("approvals");
    pty.wait_until(PATIENCE, "box:api's card", |s| s.contains("box:api") && s.contains("[2] No")).expect("the card");
    pty.write("2").expect("answer No");
    pty.wait_until(PATIENCE, "the answer said", |s| s.contains("answered box:api: 2. No")).expect("answered");
    remote.wait_screen("api", "Denied (2. No)");
    // The host journals it as this machine's dashboard answers are: `via` `dash`.
    let answers = journalled(&remote, "api", "answer");
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!((answers[0]["via"].as_str(), answers[0]["outcome"].as_str()), (Some("dash"), Some("typed")));
    pty.write("q").expect("quit");
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn keys_typed_into_a_host_s_session_for_the_dashboard_are_journalled_there_via_dash() {
    let sshd = sshd();
    let remote = Home::new();
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote))]);
    remote.new_sh("k", "exec cat > /dev/null");
    // As the dashboard's answer panel types them (`desk keys --via dash HOST:NAME -- KEY…`),
    // then as an operator does.
    local.home.ok(&["keys", "--via", "dash", "box:k", "--", "text:one"]);
    local.home.ok(&["keys", "box:k", "--", "text:two"]);
    eventually("both journalled on the host", || {
        let vias: Vec<String> = journalled(&remote, "k", "keys")
            .iter()
            .map(|e| format!("{} {}", e["keys"][0].as_str().unwrap_or("?"), e["via"].as_str().unwrap_or("?")))
            .collect();
        (vias == ["text:one dash", "text:two cli"]).then_some(()).ok_or(format!("{vias:?}"))
    });
}

/// The events of `kind` in the journal of `home`'s session `name`.
fn journalled(home: &Home, name: &str, kind: &str) -> Vec<serde_json::Value> {
    let out = home.ok(&["events", name, "--json", "--type", kind]);
    out.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn an_action_on_a_host_that_is_gone_answers_with_an_error_within_bounds_and_the_dashboard_keeps_going() {
    let mut sshd = sshd();
    let remote = Home::new();
    remote.serve();
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote))]);
    remote.new_sh("web", "sleep 600");
    remote.ok(&["pause", "web"]);
    let queued = remote.send("web", "held here");
    local.home.new_sh("here", "sleep 600");
    let pty = remote_dash(&local);
    pty.wait_until(PATIENCE, "box:web listed", |s| s.contains("box:web") && s.contains("here")).expect("the rows");
    pty.write("/box:web\r").expect("filter");
    pty.wait_until(PATIENCE, "box:web alone", |s| s.contains("box:web") && !s.contains("here")).expect("filtered");
    pty.write("i").expect("items");
    pty.wait_until(PATIENCE, "the host's queued item", |s| s.contains(&queued)).expect("the items pane");
    // The host goes away (sshd and every connection it serves): dropping its item says so
    // within the link's bounds, and the dashboard keeps taking keys.
    sshd.stop();
    pty.write("d").expect("drop");
    pty.wait_for_text(&format!("drop box:{queued}")).expect("the confirmation");
    let asked = Instant::now();
    pty.write("y").expect("confirm");
    pty.wait_until(PATIENCE, "the drop's error", |s| s.contains("not done:") && s.contains("host box"))
        .expect("an error, not a hang");
    assert!(asked.elapsed() < Duration::from_secs(20), "took {:?}", asked.elapsed());
    assert_eq!(remote.item(&queued)["state"], "queued", "nothing was done");
    pty.write("i").expect("leave the items pane");
    pty.wait_until(PATIENCE, "the preview back", |s| !s.contains("box:web: items")).expect("the items pane closed");
    pty.write("\x1b").expect("clear the filter");
    pty.wait_until(PATIENCE, "the local row back", |s| s.contains("here")).expect("the dashboard keeps going");
    pty.write("q").expect("quit");
}

/// A listener where session `name`'s master socket would be on the host (a stream through the
/// relay is carried byte for byte, whoever answers): it takes one connection and runs `serve`.
fn fake_master_on(
    remote: &Home,
    name: &str,
    serve: impl FnOnce(std::os::unix::net::UnixStream) + Send + 'static,
) -> std::thread::JoinHandle<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::create_dir_all(remote.run_dir()).unwrap();
    std::fs::set_permissions(remote.run_dir(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let listener = std::os::unix::net::UnixListener::bind(remote.run_dir().join(format!("{name}.sock"))).unwrap();
    std::thread::spawn(move || {
        if let Ok((stream, _)) = listener.accept() {
            serve(stream);
        }
    })
}

/// Byte `i` of the flood: a pattern whose every byte says where it is, so a lost, doubled or
/// reordered piece shows.
fn flood_byte(i: usize) -> u8 {
    (i % 251) as u8 ^ (i / 251) as u8
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn a_stream_whose_reader_stops_holds_back_no_other_stream_of_its_link_and_loses_nothing() {
    use std::io::{Read as _, Write as _};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    const FLOOD: usize = 8 << 20;
    let sshd = sshd();
    let remote = Home::new();
    let local = Local::new(&[]);
    // One stream floods 8 MiB (far more than the window and every buffer on the way) once told
    // to, the other echoes.
    let written = Arc::new(AtomicUsize::new(0));
    let (go, gone) = std::sync::mpsc::channel::<()>();
    let flood = {
        let written = written.clone();
        fake_master_on(&remote, "flood", move |mut stream| {
            if gone.recv().is_err() {
                return;
            }
            let bytes: Vec<u8> = (0..FLOOD).map(flood_byte).collect();
            for piece in bytes.chunks(16 * 1024) {
                if stream.write_all(piece).is_err() {
                    return;
                }
                written.fetch_add(piece.len(), Ordering::Relaxed);
            }
        })
    };
    let echo = fake_master_on(&remote, "echo", |stream| {
        let _ = std::io::copy(&mut &stream, &mut &stream);
    });
    let host = desk_common::config::Host {
        ssh: "desk-test".into(),
        ssh_args: vec!["-F".into(), sshd.ssh_config().display().to_string()],
        desk: desk_on(&remote),
    };
    let paths = desk_common::paths::Paths::in_home(local.home.path());
    let link = desk_common::remote::link::Link::connect("box", &host, &paths, PATIENCE).unwrap();
    let target = |name: &str| desk_wire::relay::Target::Session(name.into());
    let mut stopped = link.open(target("flood")).unwrap();
    let mut other = link.open(target("echo")).unwrap();
    other.set_read_timeout(Some(PATIENCE)).unwrap();
    // Nobody reads the flood here: its master writes until a window's worth is on the way.
    go.send(()).unwrap();
    eventually("the flood to fill the window", || {
        let n = written.load(Ordering::Relaxed);
        (n >= 1 << 20).then_some(()).ok_or(format!("{n} bytes written"))
    });
    for round in 0..5 {
        let line = format!("ping {round}\n");
        other.write_all(line.as_bytes()).unwrap();
        let mut back = vec![0u8; line.len()];
        other.read_exact(&mut back).unwrap_or_else(|e| {
            panic!(
                "the echo stream is held back by the stopped one ({e}); {} flood bytes written",
                written.load(Ordering::Relaxed)
            )
        });
        assert_eq!(back, line.as_bytes());
    }
    assert!(written.load(Ordering::Relaxed) < FLOOD, "the flood was never held back by its reader");
    // The reader resumes: every byte, in order.
    stopped.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut got = Vec::with_capacity(FLOOD);
    stopped.read_to_end(&mut got).unwrap();
    assert_eq!(got.len(), FLOOD);
    if let Some(at) = (0..FLOOD).find(|&i| got[i] != flood_byte(i)) {
        panic!("the flood differs from byte {at} on");
    }
    drop(other);
    drop(link);
    flood.join().unwrap();
    echo.join().unwrap();
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn a_host_s_blocked_session_with_no_dialog_desk_can_read_is_named_in_the_approvals_view() {
    let sshd = sshd();
    let remote = Home::new();
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote))]);
    // Blocked by its agent's word (a permission_prompt notification), with nothing on its
    // screen that reads as a dialog.
    remote.new_sh("hooked", "exec sleep 1000");
    remote.hook("hooked", r#"{"hook_event_name":"UserPromptSubmit","prompt":"go"}"#);
    remote.hook(
        "hooked",
        r#"{"hook_event_name":"Notification","notification_type":"permission_prompt","message":"needs permission to use Bash"}"#,
    );
    remote.wait_activity("hooked", "blocked");
    let mut pty = remote_dash(&local);
    pty.wait_for_text("box:hooked").expect("the host's session listed");
    pty.write("A").expect("approvals");
    pty.wait_for_text("box:hooked is blocked, but its screen shows no dialog desk can read").expect("named there");
    pty.write("q").expect("close the view");
    pty.write("q").expect("quit");
    let _ = pty.wait_exit(PATIENCE);
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn up_down_and_upgrade_run_on_the_host_h_names_and_restart_takes_host_colon_name() {
    let sshd = sshd();
    let remote = Home::new();
    remote.serve();
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote))]);
    // The manifest is the host's (here a directory the "host" reads), named by its path there.
    let fleet = tempfile::Builder::new().prefix("dkf").tempdir_in("/tmp").unwrap();
    let manifest = fleet.path().join("desk.toml");
    std::fs::write(&manifest, crate::up::demo_session(fleet.path(), "a", "")).unwrap();
    let manifest = manifest.to_str().unwrap();
    let up = local.home.ok(&["up", "-H", "box", "--manifest", manifest]);
    assert!(up.contains("a: started (generation 1)"), "{up}");
    assert!(remote.socket("a").exists() && !local.home.socket("a").exists(), "the host's session");
    remote.wait_ready("a");
    // restart HOST:NAME: the host restarts it from its launch record and manifest.
    let out = local.home.ok(&["restart", "box:a"]);
    assert!(out.contains("a: restarted (generation 2)"), "{out}");
    // upgrade -H: the host's masters, by the host's names.
    let up = local.home.desk(&["upgrade", "--host=box", "a", "--json"]);
    assert!(up.status.success(), "{}", stderr(&up));
    let down = local.home.ok(&["down", "-Hbox", "--manifest", manifest]);
    assert!(down.contains("a: "), "{down}");
    eventually("the host's session to be down", || match remote.session("a") {
        Some(a) if a["status"] == "down" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    // A host that is not configured, and two of them, are usage errors before anything runs.
    let out = local.home.desk(&["up", "-H", "nowhere", "--manifest", manifest]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("-H nowhere: no host \"nowhere\" in config.toml (configured: box)"),
        "{}",
        stderr(&out)
    );
    let out = local.home.desk(&["down", "-H", "box", "--host", "box"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // What the host's desk says is said as the host's: its paths are the host's.
    let out = local.home.desk(&["down", "-H", "box", "--manifest", "/nonexistent/desk.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("desk: host box: cannot read manifest /nonexistent/desk.toml"),
        "{}",
        stderr(&out)
    );
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn inbox_all_lists_this_machine_s_dialogs_and_every_host_s_and_approve_answers_a_host_s() {
    let sshd = sshd();
    let remote = Home::new();
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote)), gone_host(&sshd)]);
    for (home, name) in [(&remote, "api"), (&local.home, "here")] {
        home.demo(name, &[]);
        home.wait_activity(name, "idle");
        home.ok(&["keys", name, "text:please approve-me", "Enter"]);
        home.wait_activity(name, "blocked");
    }
    // Both dialogs; the host's written box:api, with the command that answers it from here.
    let out = local.home.desk(&["inbox", "--all"]);
    assert_eq!(out.status.code(), Some(1), "host gone could not be asked: {}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("box:api · demo · approval") && text.contains("here · demo · approval"), "{text}");
    assert!(stderr(&out).contains("desk: host gone: "), "{}", stderr(&out));
    let v = local.home.json(&["inbox", "-H", "box", "--json"]);
    let rows = v["data"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "only the host's: {v:#}");
    assert_eq!((rows[0]["host"].as_str(), rows[0]["session"].as_str()), (Some("box"), Some("api")), "{v:#}");
    let seen = rows[0]["fingerprint"].as_str().unwrap().to_string();
    assert!(text.contains(&format!("desk approve box:api [OPTION] --seen {seen}")), "{text}");
    // Typed as shown: the host's master answers its own dialog.
    local.home.ok(&["approve", "box:api", "--seen", &seen]);
    remote.wait_screen("api", "Approved (1. Yes)");
    let out = local.home.desk(&["inbox", "-H", "box"]);
    assert!(stdout(&out).contains("no open dialogs"), "{}", stdout(&out));
    // This machine's is untouched.
    assert!(local.home.peek("here").contains("Do you want to run this command?"));
    let out = local.home.desk(&["inbox", "-H", "nowhere"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no host \"nowhere\" in config.toml (configured: box, gone)"), "{}", stderr(&out));
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn a_manifest_s_sessions_on_a_host_are_started_and_stopped_there_by_up_and_down_here() {
    let sshd = sshd();
    let remote = Home::new();
    remote.serve();
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote)), gone_host(&sshd)]);
    let fleet = tempfile::Builder::new().prefix("dkf").tempdir_in("/tmp").unwrap();
    let demo = crate::up::DEMO;
    let there_dir = remote.path().join("work");
    std::fs::create_dir_all(&there_dir).unwrap();
    let manifest = fleet.path().join("desk.toml");
    let text = format!(
        "[session.here]\ncommand = [\"sh\", \"-c\", \"exec sleep 600\"]\n\n\
         [session.there]\nhost = \"box\"\nprovider = \"demo\"\ncommand = [\"{demo}\", \"--work-ms\", \"100\"]\n\
         cwd = \"{}\"\nprompts = [{{ text = \"hello from the manifest\" }}]\n",
        there_dir.display()
    );
    std::fs::write(&manifest, &text).unwrap();
    let manifest = manifest.to_str().unwrap();
    let up = local.home.ok(&["up", "--manifest", manifest]);
    assert!(up.contains("here: started (generation 1)"), "{up}");
    assert!(up.contains("box:there: started (generation 1)") && up.contains("1 prompt(s) queued"), "{up}");
    // The host runs it, in the directory declared there, with its prompt delivered by its daemon.
    assert!(remote.socket("there").exists() && !local.home.socket("there").exists());
    assert_eq!(remote.session("there").unwrap()["cwd"], there_dir.to_str().unwrap());
    remote.wait_screen("there", "hello from the manifest");
    // This machine lists only its own; a second up finds both as declared.
    assert!(local.home.session("there").is_none(), "not declared down here: {:?}", local.home.ls());
    let again = local.home.ok(&["up", "--manifest", manifest]);
    assert!(again.starts_with("nothing to do: 2 session(s)"), "{again}");
    let v = local.home.json(&["up", "--manifest", manifest, "--json"]);
    let there = v["data"]["sessions"].as_array().unwrap().iter().find(|s| s["name"] == "there").unwrap().clone();
    assert_eq!((there["host"].as_str(), there["outcome"].as_str()), (Some("box"), Some("running")), "{v:#}");
    // A plain name declared on a host is not restarted here.
    let out = local.home.desk(&["restart", "there", "--manifest", manifest]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("there runs on host box") && stderr(&out).contains("desk restart box:there"),
        "{}",
        stderr(&out)
    );
    let down = local.home.ok(&["down", "--manifest", manifest]);
    assert!(down.contains("box:there: stopped") && down.contains("here: stopped"), "{down}");
    eventually("the host's session to be down", || match remote.session("there") {
        Some(s) if s["status"] == "down" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    // A host that cannot be reached fails its own sessions only, saying why; one not configured
    // is refused before anything starts.
    std::fs::write(fleet.path().join("desk.toml"), text.replace("host = \"box\"", "host = \"gone\"")).unwrap();
    let out = local.home.desk(&["up", "--manifest", manifest]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("here: started (generation 2)"), "{}", stdout(&out));
    assert!(stdout(&out).contains("gone:there: failed: host gone: "), "{}", stdout(&out));
    local.home.ok(&["kill", "here"]);
    std::fs::write(fleet.path().join("desk.toml"), text.replace("host = \"box\"", "host = \"nowhere\"")).unwrap();
    let out = local.home.desk(&["up", "--manifest", manifest]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("[session.there]: host \"nowhere\" is not in"), "{}", stderr(&out));
    let here = local.home.session("here").unwrap();
    assert!(here["status"] != "running" && here["generation"] == 2, "nothing started: {here}");
}

#[test]
#[cfg_attr(desk_missing_sshd, ignore = "needs sshd")]
fn attach_next_all_attaches_the_session_that_most_needs_a_person_here_or_on_a_host() {
    let sshd = sshd();
    let remote = Home::new();
    let local = Local::new(&[sshd.host_entry("box", &desk_on(&remote)), gone_host(&sshd)]);
    // This machine's session is idle; the host's waits on a dialog.
    local.home.demo("here", &[]);
    local.home.wait_activity("here", "idle");
    remote.demo("api", &[]);
    remote.wait_activity("api", "idle");
    remote.ok(&["keys", "api", "text:please approve-me", "Enter"]);
    remote.wait_activity("api", "blocked");
    // Without --all, this machine only: nothing here needs a person.
    let out = local.home.desk(&["attach", "--next"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let mut pty = PtyCommand::new(DESK)
        .args(["attach", "--next", "--all"])
        .env("DESK_HOME", local.home.path())
        .env("DESK_AUTOSTART", "0")
        .size(100, 30)
        .spawn()
        .expect("attach");
    pty.wait_until(PATIENCE, "the host's dialog", |s| s.contains("Do you want to run this command?")).unwrap();
    pty.write([0x1c]).unwrap();
    let status = pty.wait_exit(PATIENCE).unwrap();
    assert_eq!(status.code(), Some(0), "{}", pty.screen());
    pty.wait_until(PATIENCE, "the detach line", |s| s.contains("[desk: detached from box:api]")).unwrap();
    // What it says of its choice (the attach's screen covers it on a terminal).
    let out = local.home.desk(&["attach", "--next", "--all"]);
    assert!(stderr(&out).contains("desk: attaching to box:api (blocked(approval))"), "{}", stderr(&out));
    assert!(stderr(&out).contains("desk: host gone: "), "the lost host is said: {}", stderr(&out));
}
