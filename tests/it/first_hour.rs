//! The first hour with desk (issue 19): typos that are refused with the names meant, a daemon
//! that starts itself when a command needs it, and notes where a newcomer would otherwise be
//! left guessing (a paused queue, prompts left behind by `desk rm`, an agent not on PATH).

use crate::support::{Home, eventually};
use std::process::Output;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `desk ARGS` with autostart as a user has it (on), rather than the tests' default (off).
fn desk_autostarting(home: &Home, args: &[&str]) -> Output {
    home.cmd().env_remove("DESK_AUTOSTART").args(args).output().expect("run desk")
}

fn daemon_listens(home: &Home) -> bool {
    std::os::unix::net::UnixStream::connect(home.path().join("run/_serve.sock")).is_ok()
}

#[test]
fn every_command_taking_a_session_name_refuses_an_unknown_one_with_the_nearest_names() {
    let home = Home::new();
    home.serve();
    home.new_sh("demo-alpha", "exec sleep 1000");
    home.new_sh("demo-beta", "exec sleep 1000");
    let commands: [&[&str]; 11] = [
        &["pause", "demo-alpah"],
        &["resume", "demo-alpah"],
        &["queue", "demo-alpah"],
        &["send", "demo-alpah", "hello"],
        &["keys", "demo-alpah", "Enter"],
        &["peek", "demo-alpah"],
        &["explain", "demo-alpah"],
        &["kill", "demo-alpah"],
        &["attach", "demo-alpah"],
        &["events", "demo-alpah"],
        &["log", "demo-alpah"],
    ];
    for args in commands {
        let out = home.desk(args);
        assert_eq!(out.status.code(), Some(2), "desk {args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("did you mean demo-alpha?"), "desk {args:?}: {}", stderr(&out));
    }
    // Nothing near: said plainly, with where to look.
    let out = home.desk(&["pause", "nosuch"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no session named nosuch (desk ls lists the sessions"), "{}", stderr(&out));
    // The JSON caller gets the documented code.
    let out = home.desk(&["resume", "nosuch", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("an error envelope");
    assert_eq!(v["error"]["code"], "no-such-session", "{v:#}");
    // Nothing was paused by the typos.
    let q = home.json(&["queue", "--json"]);
    assert!(q["data"].as_array().unwrap().iter().all(|s| s["paused"].is_null()), "{q:#}");
}

#[test]
fn pause_still_takes_a_name_that_only_has_prompts_queued_for_later() {
    let home = Home::new();
    home.serve();
    home.ok(&["send", "later", "for when it starts", "--queue-for-later"]);
    home.ok(&["pause", "later", "--reason", "not yet"]);
    home.ok(&["resume", "later"]);
}

#[test]
fn channel_add_refuses_an_unknown_session_unless_queued_for_later() {
    let home = Home::new();
    home.new_sh("builder", "exec sleep 1000");
    home.ok(&["channel", "new", "ops"]);
    let out = home.desk(&["channel", "add", "ops", "buidler"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("did you mean builder?"), "{}", stderr(&out));
    let roster = home.json(&["channel", "ls", "--json"]);
    assert_eq!(roster["data"][0]["members"], 0, "the typo joined nobody: {roster:#}");
    home.ok(&["channel", "add", "ops", "builder"]);
    home.ok(&["channel", "add", "ops", "tomorrow", "--queue-for-later"]);
    // A person is anyone: no session needed.
    home.ok(&["channel", "add", "ops", "pat", "--human"]);
    let roster = home.json(&["channel", "ls", "--json"]);
    assert_eq!(roster["data"][0]["members"], 3, "{roster:#}");
}

#[test]
fn a_key_one_slip_from_a_key_name_is_refused_and_nothing_is_typed() {
    let home = Home::new();
    home.new_sh("w1", "stty -echo; exec cat");
    let out = home.desk(&["keys", "w1", "Entr"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("did you mean Enter? (text:Entr types it)"), "{}", stderr(&out));
    home.ok(&["keys", "w1", "text:Entr", "Enter"]);
    let screen = home.wait_screen("w1", "Entr");
    assert_eq!(screen.matches("Entr").count(), 1, "typed once, by text: only:\n{screen}");
}

#[test]
fn an_agent_provider_whose_program_is_not_on_path_hints_at_giving_its_path() {
    let home = Home::new();
    let bare = home.path().join("bin");
    std::fs::create_dir(&bare).unwrap();
    let out = home.cmd().env("PATH", &bare).args(["new", "api", "--provider", "claude"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("`claude` is not on your PATH: install it, or give its path: desk new api --provider claude -- /path/to/claude"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn send_to_a_paused_session_says_the_prompt_waits_for_resume() {
    let home = Home::new();
    home.serve();
    home.new_sh("p", "exec sleep 1000");
    home.ok(&["pause", "p", "--reason", "reviewing"]);
    let out = home.desk(&["send", "p", "hello"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("queue p is held: paused by the operator: reviewing (desk resume p lets it go on)"),
        "{}",
        stderr(&out)
    );
    let sent = home.json(&["send", "p", "again", "--json"]);
    assert!(sent["data"]["hold"].as_str().unwrap().starts_with("paused by the operator"), "{sent:#}");
}

#[test]
fn rm_says_the_queued_prompts_stay_held_and_drop_queued_drops_them() {
    let home = Home::new();
    home.serve();
    home.new_sh("gone", "exit 0");
    home.wait_exit("gone");
    let a = home.send("gone", "first");
    let b = home.send("gone", "second");
    let out = home.desk(&["rm", "gone"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("2 prompt(s) queued for gone stay held until a session named gone runs again"),
        "{}",
        stderr(&out)
    );
    assert_eq!(home.item(&a)["state"], "queued");
    // Removed already: the prompts can still be dropped by name.
    let removed = home.json(&["rm", "gone", "--drop-queued", "--json"]);
    assert_eq!(removed["data"]["dropped"], serde_json::json!([a, b]), "{removed:#}");
    assert_eq!(removed["data"]["held"], serde_json::json!([]), "{removed:#}");
    assert_eq!(home.item(&a)["state"], "dropped");
    assert_eq!(home.item(&b)["state"], "dropped");
    // Nothing left by that name at all now.
    assert_eq!(home.desk(&["rm", "gone"]).status.code(), Some(2));
}

#[test]
fn the_first_command_that_needs_the_daemon_starts_it_and_says_so_once() {
    let home = Home::new();
    home.new_sh("s", "exec sleep 1000");
    assert!(!daemon_listens(&home));
    let out = desk_autostarting(&home, &["send", "s", "hello"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out).matches("started desk serve").count(), 1, "{}", stderr(&out));
    assert!(daemon_listens(&home), "the daemon runs after the send");
    let id = stdout(&out).trim().to_string();
    eventually("the item queued by the daemon", || {
        let item = home.item(&id);
        if item["state"] == "queued" || item["state"] == "sending" || item["state"] == "delivered" {
            Ok(())
        } else {
            Err(item.to_string())
        }
    });
    // The next command finds it running and says nothing of it.
    let out = desk_autostarting(&home, &["send", "s", "again"]);
    assert!(!stderr(&out).contains("started desk serve"), "{}", stderr(&out));
    let stop = home.ok(&["serve", "--stop"]);
    assert!(stop.contains("desk serve stopped"), "{stop}");

    // A channel post starts it too, its note in the JSON notes.
    home.ok(&["channel", "new", "ops"]);
    let posted = home.cmd().env_remove("DESK_AUTOSTART").args(["channel", "post", "ops", "hi", "--json"]).output();
    let posted: serde_json::Value = serde_json::from_slice(&posted.unwrap().stdout).unwrap();
    assert_eq!(posted["data"]["daemon_running"], true, "{posted:#}");
    assert!(posted["notes"].to_string().contains("started desk serve"), "{posted:#}");
    home.ok(&["serve", "--stop"]);

    // Turned off, nothing starts it.
    let out = home.cmd().env("DESK_AUTOSTART", "0").args(["send", "s", "third"]).output().unwrap();
    assert!(out.status.success());
    assert!(stderr(&out).contains("desk serve is not running; the prompt waits in the intake"), "{}", stderr(&out));
    assert!(!daemon_listens(&home));
}

#[test]
fn new_with_an_agent_provider_starts_the_daemon_and_a_plain_command_does_not() {
    let home = Home::new();
    let out = desk_autostarting(&home, &["new", "plain", "--", "sh", "-c", "exec sleep 1000"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!daemon_listens(&home), "a shell session needs no daemon yet");
    let demo = env!("CARGO_BIN_EXE_desk-demo-agent");
    let out = desk_autostarting(&home, &["new", "agent", "--provider", "demo", "--", demo]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("started desk serve"), "{}", stderr(&out));
    assert!(daemon_listens(&home));
}

#[test]
fn serve_stop_when_none_runs_says_so_and_succeeds() {
    let home = Home::new();
    let out = home.desk(&["serve", "--stop"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "desk serve is not running; nothing to stop");
}

/// The repository's top directory (where the Makefile is).
fn repo() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn make_build_without_a_new_enough_cargo_says_how_to_get_rust() {
    let home = Home::new();
    let run = |cargo: &str| {
        std::process::Command::new("make")
            .args(["--no-print-directory", "-C"])
            .arg(repo())
            .args(["check-rust", &format!("CARGO={cargo}")])
            .output()
            .expect("run make")
    };
    let out = run("/nonexistent/cargo");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("cargo (Rust's build tool) is not on PATH"), "{err}");
    assert!(err.contains("https://sh.rustup.rs") && err.contains("Debian 12's own\nrustc is 1.63"), "{err}");
    assert!(err.contains("build-essential") && err.contains("1.1 GB"), "{err}");
    // Debian 12's own cargo: too old, and said so.
    let old = home.path().join("cargo");
    std::fs::write(&old, "#!/bin/sh\necho 'cargo 1.65.0'\n").unwrap();
    std::fs::set_permissions(&old, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = run(old.to_str().unwrap());
    assert!(!out.status.success());
    assert!(stderr(&out).contains("is Rust 1.65.0"), "{}", stderr(&out));
    // The cargo that builds these tests is new enough.
    let out = run(env!("CARGO"));
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn the_demo_prints_the_line_to_paste_and_hints_in_plain_desk_and_ls_elsewhere_finds_it() {
    let home = Home::new();
    // A checkout's layout: <checkout>/target/demo-home is the demo's DESK_HOME (this Home, so
    // that everything the demo starts is killed with it).
    let checkout = tempfile::Builder::new().prefix("dkrepo").tempdir_in("/tmp").unwrap();
    std::fs::create_dir(checkout.path().join("target")).unwrap();
    let demo_home = checkout.path().join("target/demo-home");
    std::os::unix::fs::symlink(home.path(), &demo_home).unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_desk")).parent().unwrap();
    let out = std::process::Command::new("sh")
        .arg(repo().join("scripts/demo.sh"))
        .arg(bin)
        .env("DESK_HOME", &demo_home)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run the demo");
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    let paste = format!("    export PATH=\"{}:$PATH\" DESK_HOME=\"{}\"", bin.display(), demo_home.display());
    assert!(text.lines().any(|l| l == paste), "no line to paste ({paste:?}) in:\n{text}");
    assert!(text.contains("make demo-shell"), "{text}");
    assert!(text.contains("      desk dash ") && text.contains("      desk attach demo-beta"), "{text}");
    assert!(!text.contains(&format!("{}/desk ", bin.display())), "a hint names the binary by its path:\n{text}");

    // `desk ls` in the checkout, with desk's own files elsewhere, points at the demo's home.
    let elsewhere = home.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let out = home
        .cmd()
        .env_remove("DESK_HOME")
        .env("XDG_RUNTIME_DIR", &elsewhere)
        .env("XDG_STATE_HOME", &elsewhere)
        .env("XDG_CONFIG_HOME", &elsewhere)
        .current_dir(checkout.path())
        .arg("ls")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(&format!("the demo fleet (make demo) runs under DESK_HOME={}", demo_home.display())),
        "{text}"
    );
    assert!(text.contains(&format!("export DESK_HOME={}", demo_home.display())), "{text}");

    let out = std::process::Command::new("sh")
        .arg(repo().join("scripts/demo.sh"))
        .arg(bin)
        .arg("stop")
        .env("DESK_HOME", &demo_home)
        .output()
        .unwrap();
    assert!(stdout(&out).contains("demo fleet stopped"), "{}", stdout(&out));
}

/// `desk doctor --json`'s checks by name, and its exit code.
fn doctor(cmd: &mut std::process::Command) -> (std::collections::BTreeMap<String, serde_json::Value>, Option<i32>) {
    let out = cmd.args(["doctor", "--json"]).output().expect("run desk doctor");
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&out), stderr(&out)));
    let checks = v["data"]["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| (c["check"].as_str().unwrap().to_string(), c.clone()))
        .collect();
    (checks, out.status.code())
}

#[test]
fn doctor_finds_everything_in_place_and_the_hook_round_trip_works() {
    let home = Home::new();
    let (checks, code) = doctor(home.cmd().env_remove("DESK_AUTOSTART"));
    assert_eq!(code, Some(0), "{checks:#?}");
    for name in [
        "executables",
        "runtime-dir",
        "hooks",
        "serve",
        "inotify",
        "config",
        "agent:claude",
        "agent:codex",
        "agent:opencode",
    ] {
        assert_eq!(checks[name]["status"], "ok", "{name}: {:#}", checks[name]);
    }
    assert!(checks["hooks"]["detail"].as_str().unwrap().contains("reached its session's master and journal"));
    // The round trip cleaned up after itself: no session, no daemon in the user's home.
    assert!(home.ls().is_empty());
    assert!(!daemon_listens(&home));
    let pid = home.serve();
    let (checks, _) = doctor(&mut home.cmd());
    assert!(checks["serve"]["detail"].as_str().unwrap().contains(&format!("desk serve runs (pid {pid})")));
}

#[test]
fn doctor_says_what_is_wrong_and_the_fix() {
    let home = Home::new();
    // A config file desk cannot use, a runtime directory others can read, an agent of another
    // version than the rules were recorded with, and autostart off with no daemon running.
    std::fs::create_dir_all(home.path().join("config")).unwrap();
    std::fs::write(home.path().join("config/config.toml"), "[new]\nsize = \"wide\"\n").unwrap();
    std::fs::create_dir_all(home.run_dir()).unwrap();
    std::fs::set_permissions(home.run_dir(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let bin = home.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::write(bin.join("claude"), "#!/bin/sh\necho '1.0.0 (Claude Code)'\n").unwrap();
    std::fs::set_permissions(bin.join("claude"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let (checks, code) = doctor(home.cmd().env("PATH", &path));
    assert_eq!(code, Some(1), "{checks:#?}");
    assert_eq!(checks["config"]["status"], "error");
    assert!(checks["config"]["detail"].as_str().unwrap().contains("line 2: key `new.size`"), "{:#}", checks["config"]);
    assert_eq!(checks["runtime-dir"]["status"], "error");
    assert_eq!(checks["runtime-dir"]["fix"], format!("chmod 0700 {}", home.run_dir().display()));
    assert_eq!(checks["agent:claude"]["status"], "warning");
    assert!(checks["agent:claude"]["detail"].as_str().unwrap().contains("1.0.0; desk's rules were recorded with 2."));
    assert_eq!(checks["serve"]["status"], "warning", "{:#}", checks["serve"]);
    assert!(checks["serve"]["fix"].as_str().unwrap().contains("desk serve"));
}

#[test]
fn doctor_finds_a_desk_without_its_master_or_with_another_ones() {
    let home = Home::new();
    let alone = home.path().join("alone");
    std::fs::create_dir(&alone).unwrap();
    let desk = alone.join("desk");
    crate::support::copy_executable(crate::support::DESK, &desk);
    let run = || doctor(std::process::Command::new(&desk).env("DESK_HOME", home.path()).env("DESK_AUTOSTART", "0"));
    let (checks, code) = run();
    assert_eq!(code, Some(0));
    assert_eq!(checks["executables"]["status"], "warning", "{:#}", checks["executables"]);
    assert!(checks["executables"]["detail"].as_str().unwrap().contains("no desk-master beside it"));
    // A desk-master of another build.
    std::fs::write(alone.join("desk-master"), "#!/bin/sh\necho 'desk-master 0.0.9 (protocol 1)'\n").unwrap();
    std::fs::set_permissions(alone.join("desk-master"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (checks, code) = run();
    assert_eq!(code, Some(1));
    assert_eq!(checks["executables"]["status"], "error", "{:#}", checks["executables"]);
    assert!(checks["executables"]["detail"].as_str().unwrap().contains("of different builds"));
}

/// What a terminal shows of `desk attach ARGS` (its screen and scrollback), the terminal being
/// a tmux pane (the harness's emulator drops its scrollback on the keyframe's reset, as xterm
/// and tmux do not); `env` is set for the attach. The test calling it needs tmux.
fn attach_in_tmux(home: &Home, args: &str, env: &str, until: &str) -> String {
    crate::suite::require(crate::suite::Needs::Program("tmux"));
    // A server of its own each time: a new server on the socket of one just killed can find the
    // old one still going and die with it ("server exited unexpectedly").
    static SERVERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = SERVERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let socket = home.path().join(format!("tmux-{n}.sock"));
    let tmux = |args: &[&str]| {
        let out = std::process::Command::new("tmux").arg("-S").arg(&socket).args(args).output().expect("run tmux");
        assert!(out.status.success(), "tmux {args:?}: {}", stderr(&out));
        stdout(&out)
    };
    let script = format!("{env} DESK_HOME='{}' exec '{}' attach {args}", home.path().display(), crate::support::DESK);
    tmux(&["-f", "/dev/null", "new-session", "-d", "-x", "100", "-y", "12", &script]);
    let result = std::panic::catch_unwind(|| {
        eventually("the attach to draw the session", || {
            let all = tmux(&["capture-pane", "-p", "-J", "-S", "-"]);
            if all.contains(until) { Ok(all) } else { Err(all) }
        })
    });
    tmux(&["kill-server"]);
    result.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

#[test]
#[cfg_attr(desk_missing_tmux, ignore = "needs tmux")]
fn attach_prints_its_banner_above_the_screen_and_warns_on_a_nested_attach() {
    let home = Home::new();
    home.ok(&["new", "api", "--size", "100x12", "--", "sh", "-c", "echo READY; exec cat"]);
    home.wait_screen("api", "READY");
    let all = attach_in_tmux(&home, "api", "", "READY");
    let lines: Vec<&str> = all.lines().map(str::trim_end).filter(|l| !l.is_empty()).collect();
    let ready = lines.iter().position(|l| *l == "READY").expect("the session's screen");
    assert_eq!(lines[..ready], ["desk: attached to api · Ctrl-\\ detaches"], "{all}");

    // From inside another session: said before the session's screen takes the terminal.
    let all = attach_in_tmux(&home, "api --read-only", "DESK_SESSION=outer", "READY");
    assert!(all.contains("desk: watching api · Ctrl-\\ detaches"), "{all}");
    assert!(
        all.contains(
            "desk: warning: this terminal is inside session outer: an attach to outer around it sees Ctrl-\\ first"
        ),
        "{all}"
    );
    assert!(all.contains("desk attach api --detach-key ^]"), "{all}");
}

#[test]
fn a_spinning_title_is_journalled_once_and_then_only_when_its_words_change() {
    let home = Home::new();
    // Two seconds of a ten-frame spinner at 100 ms a frame (as Codex's), then other words.
    let script = r#"for i in 1 2; do for f in ⠋ ⠙ ⠹ ⠸ ⠼ ⠴ ⠦ ⠧ ⠇ ⠏; do printf '\033]0;%s build\007' "$f"; sleep 0.1; done; done
printf '\033]0;✳ done\007'; echo READY; exec sleep 1000"#;
    home.ok(&["new", "spin", "--", "sh", "-c", script]);
    home.wait_screen("spin", "READY");
    eventually("the last title", || match home.session("spin") {
        Some(s) if s["title"] == "✳ done" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let titles: Vec<String> = home
        .ok(&["events", "spin", "--json", "--type", "title"])
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|e| e["title"].as_str().unwrap_or("").to_string())
        .collect();
    // Before: one every 500 ms (five or more of "⠋ build", "⠼ build", ...).
    assert_eq!(titles, vec!["⠋ build", "✳ done"], "{titles:?}");
}

#[test]
fn the_dashboard_starts_the_daemon_says_so_and_shows_how_to_start_a_session_when_empty() {
    use crate::harness::{PATIENCE, PtyCommand};
    let home = Home::new();
    let mut pty = PtyCommand::new(crate::support::DESK)
        .arg("dash")
        .env("DESK_HOME", home.path())
        .size(100, 30)
        .spawn()
        .expect("spawn desk dash");
    let screen = pty.wait_for_text("started desk serve").expect("the footer says the daemon was started");
    assert!(screen.contains("No sessions yet") && screen.contains("desk new sh1 -- bash"), "{screen}");
    assert!(daemon_listens(&home));
    // `?` lists every key; any key closes the list.
    pty.write("?").expect("?");
    pty.wait_for_text("keys (any key closes this)").expect("the keys");
    pty.write("x").expect("a key");
    pty.wait_until(PATIENCE, "the keys closed", |s| !s.contains("any key closes this")).expect("closed");
    pty.write("q").expect("q");
    pty.wait_exit(PATIENCE).expect("desk dash quits");
}

/// With desk's systemd user unit installed for this very desk (and desk's files in their usual
/// places), a command that needs the daemon asks systemd to start the unit. systemd itself is
/// played by a `systemctl` on PATH that records its arguments and starts the unit's
/// `ExecStart` as systemd would (a test machine has no user manager); when systemd cannot start
/// it, desk starts the daemon itself.
#[test]
fn autostart_prefers_the_installed_systemd_unit() {
    let home = Home::new();
    let xdg = |dir: &str| {
        let p = home.path().join(dir);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        p
    };
    let (config, runtime, state, bin) = (xdg("xdg-config"), xdg("xdg-runtime"), xdg("xdg-state"), xdg("bin"));
    std::fs::create_dir_all(config.join("systemd/user")).unwrap();
    std::fs::write(
        config.join("systemd/user/desk.service"),
        format!("[Service]\nExecStart={} serve --foreground\nKillMode=process\n", crate::support::DESK),
    )
    .unwrap();
    let log = home.path().join("systemctl.log");
    let systemctl = bin.join("systemctl");
    let script = format!(
        "#!/bin/sh\necho \"$@\" >> '{}'\n[ \"$STARTS\" = yes ] && exec '{}' serve >/dev/null\nexit 1\n",
        log.display(),
        crate::support::DESK
    );
    std::fs::write(&systemctl, script).unwrap();
    std::fs::set_permissions(&systemctl, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let desk = |starts: &str, args: &[&str]| {
        home.cmd()
            .env_remove("DESK_HOME")
            .env_remove("DESK_AUTOSTART")
            .env("XDG_CONFIG_HOME", &config)
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("XDG_STATE_HOME", &state)
            .env("PATH", &path)
            .env("STARTS", starts)
            .args(args)
            .output()
            .unwrap()
    };
    let serve_pid =
        || -> Option<i32> { std::fs::read_to_string(state.join("desk/delivery/serve.lock")).ok()?.trim().parse().ok() };
    // Whatever happens below, no daemon outlives the test (this one's lock is not the Home's).
    let kill = |pid: Option<i32>| {
        let ours = |pid: i32| {
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|exe| exe == std::path::Path::new(crate::support::DESK))
        };
        if let Some(pid) = pid.filter(|pid| ours(*pid)) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
        }
    };
    let out = desk("yes", &["send", "later", "hello", "--queue-for-later"]);
    let pid = serve_pid();
    let stopped = desk("no", &["serve", "--stop"]);
    kill(pid);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("started desk serve, the delivery daemon (systemctl --user start desk.service"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "--user start desk.service\n");
    assert!(pid.is_some() && stdout(&stopped).contains("desk serve stopped"), "{}", stderr(&stopped));
    // systemd could not start it: desk starts the daemon itself, and says why.
    let out = desk("no", &["send", "later", "again", "--queue-for-later"]);
    let pid = serve_pid();
    let _ = desk("no", &["serve", "--stop"]);
    kill(pid);
    assert!(stderr(&out).contains("through systemd it failed"), "{}", stderr(&out));
    assert!(pid.is_some());
}
