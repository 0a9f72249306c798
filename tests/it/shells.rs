//! Prompts to real shells end to end: bash, zsh and fish at their prompt, a shell running a
//! job, a draft on a shell's line, and a program reading lines the kernel edits. The ground
//! truth is what the shell ran: the files its commands wrote.
//!
//! The zsh and fish tests need them installed (`.ci/run` installs them): where one is missing
//! its test is ignored ("needs zsh"), and fails where CI is set (`crate::suite`).

use crate::suite::{Needs, require};
use crate::support::{Home, eventually};
use std::path::Path;

/// Start `argv` in session `name` with a private HOME (no rc files of the machine's user) and
/// `dir` as its working directory.
fn start_shell(home: &Home, name: &str, dir: &Path, argv: &[&str]) {
    let sh_home = home.path().join(format!("{name}-home"));
    std::fs::create_dir_all(&sh_home).unwrap();
    // zsh offers its new-user menu where it finds no startup file at all.
    std::fs::write(sh_home.join(".zshrc"), "").unwrap();
    let env_home = format!("HOME={}", sh_home.display());
    let mut args = vec!["new", name, "--cwd", dir.to_str().unwrap(), "--env", &env_home, "--"];
    args.extend(argv);
    home.ok(&args);
}

/// What `desk peek --json` says about the session's terminal.
fn terminal(home: &Home, name: &str) -> serde_json::Value {
    home.json(&["peek", name, "--json"])["data"].clone()
}

/// Wait until the shell waits at its prompt: its own line editor reads (raw mode) and it, not a
/// job, has the terminal.
fn wait_prompt(home: &Home, name: &str) {
    eventually(&format!("{name} at its prompt"), || {
        let t = terminal(home, name);
        if t["foreground"]["own"] == true && t["canonical"] == false && !t["lines"][0].as_str().unwrap_or("").is_empty()
        {
            Ok(())
        } else {
            Err(format!("{t:#}"))
        }
    });
}

/// A daemon, and session `name` running `bash --norc -i` in a fresh directory, at its prompt.
fn bash_at_its_prompt(name: &str) -> (Home, tempfile::TempDir) {
    let home = Home::new();
    home.serve();
    let dir = tempfile::tempdir().unwrap();
    start_shell(&home, name, dir.path(), &["bash", "--norc", "-i"]);
    wait_prompt(&home, name);
    (home, dir)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Wait until the file the shell's commands write holds exactly `want`.
fn wait_file(path: &Path, want: &str) {
    eventually(&format!("{} to hold {want:?}", path.display()), || {
        let got = read(path);
        if got == want { Ok(()) } else { Err(format!("{got:?}")) }
    });
}

/// Issue 18, finding 3: bash runs a job (`sleep`, in a loop of its own) when a prompt arrives.
/// Typed now, the line would wait in the kernel and bash would run it as a command once the job
/// ends. It is held, with the reason, for as long as the job or the loop runs; once bash is back
/// at its prompt it is typed, delivered, and run exactly once.
#[test]
fn a_prompt_waits_while_bash_runs_a_job_and_runs_once_at_its_prompt() {
    let (home, dir) = bash_at_its_prompt("b");
    home.ok(&["keys", "b", "while [ ! -e go ]; do sleep 0.05; done", "Enter"]);
    let id = home.send("b", "echo ran >> count.txt");
    let hold = eventually("the queue held for the job", || {
        let q = home.json(&["queue", "b", "--json"]);
        let reason = q["data"][0]["hold"]["reason"].as_str().unwrap_or("").to_string();
        if reason.contains("has the terminal") || reason.contains("nothing reads the terminal") {
            Ok(reason)
        } else {
            Err(format!("{q:#}"))
        }
    });
    assert_eq!(home.item(&id)["state"], "queued", "{hold}");
    assert!(!dir.path().join("count.txt").exists(), "nothing was typed: {hold}");
    std::fs::write(dir.path().join("go"), "").unwrap();
    let go_ms = desk_common::clock::now_ms();
    let item = home.settled(&id);
    assert_eq!(item["state"], "delivered", "{item:#}");
    let claimed = item["evidence"].as_array().unwrap().iter().find(|n| n["kind"] == "claimed").unwrap();
    assert!(claimed["at_ms"].as_u64().unwrap() >= go_ms, "typed only after the job ended: {item:#}");
    wait_file(&dir.path().join("count.txt"), "ran\n");
}

/// Issue 19: a plain shell is the first thing people try. bash, zsh and fish, each at its
/// prompt, get a prompt typed, echoed, entered and run — once — and the delivery says what
/// showed that the shell took the line.
fn a_shell_gets_a_prompt_at_its_prompt(name: &'static str) {
    require(Needs::Program(name));
    let home = Home::new();
    home.serve();
    let dir = tempfile::tempdir().unwrap();
    start_shell(&home, name, dir.path(), &[name]);
    wait_prompt(&home, name);
    let out = dir.path().join(format!("{name}.txt"));
    for round in 1..=2 {
        let id = home.send(name, &format!("echo {name} round {round} >> {name}.txt"));
        let item = home.settled(&id);
        assert_eq!(item["state"], "delivered", "{name}: {item:#}\n{}", home.peek(name));
        let last = item["evidence"].as_array().unwrap().last().unwrap()["detail"].as_str().unwrap().to_string();
        assert!(last.contains("the shell"), "{name}: {item:#}");
        let want: String = (1..=round).map(|r| format!("{name} round {r}\n")).collect();
        wait_file(&out, &want);
    }
}

#[test]
fn bash_gets_a_prompt_at_its_prompt() {
    a_shell_gets_a_prompt_at_its_prompt("bash");
}

#[test]
#[cfg_attr(desk_missing_zsh, ignore = "needs zsh")]
fn zsh_gets_a_prompt_at_its_prompt() {
    a_shell_gets_a_prompt_at_its_prompt("zsh");
}

#[test]
#[cfg_attr(desk_missing_fish, ignore = "needs fish")]
fn fish_gets_a_prompt_at_its_prompt() {
    a_shell_gets_a_prompt_at_its_prompt("fish");
}

/// A draft on a shell's line holds delivery, and `desk send` says so at once, with the
/// `desk keys` command that would type the prompt anyway; once the line is cleared, the prompt
/// goes.
#[test]
fn a_draft_at_a_shell_prompt_holds_and_send_says_so_at_once() {
    let (home, dir) = bash_at_its_prompt("d");
    home.ok(&["keys", "d", "half typed"]);
    home.wait_screen("d", "half typed");
    // Past the hold for someone typing (2 s after the keys), so the draft is what holds.
    eventually("the keys to be 2 s old", || {
        let t = terminal(&home, "d");
        let last = t["last_input_ms"].as_u64().unwrap_or(0);
        if desk_common::clock::now_ms() > last + 2100 { Ok(()) } else { Err(format!("{last}")) }
    });
    let out = home.desk(&["send", "d", r#"echo "it's here" > sent.txt"#]);
    assert!(out.status.success());
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("desk: queue d is held: bash is not at an empty prompt"), "{err}");
    assert!(err.contains(r#"desk keys d 'echo "it'\''s here" > sent.txt' Enter"#), "{err}");
    assert_eq!(home.item(&id)["state"], "queued");
    home.ok(&["keys", "d", "C-u"]);
    assert_eq!(home.settled(&id)["state"], "delivered");
    wait_file(&dir.path().join("sent.txt"), "it's here\n");
}

/// A line with an unclosed quote leaves bash waiting for the rest at its continuation prompt: it
/// read the line but ran nothing, so the prompt is stuck (not delivered), and the next one is
/// held — typed there it would become part of the quoted text — until the operator cancels it.
#[test]
fn an_unclosed_quote_is_stuck_not_delivered_and_holds_the_next_prompt() {
    let (home, dir) = bash_at_its_prompt("q");
    let first = home.send("q", "echo it's > first.txt");
    let item = home.settled(&first);
    assert_eq!((&item["state"], &item["stuck"]), (&"stuck".into(), &"submit-stuck".into()), "{item:#}");
    assert!(item.to_string().contains("waits for the rest of the command"), "{item:#}");
    let out = home.desk(&["send", "q", "echo second > second.txt"]);
    let second = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bash waits for the rest of a command") && err.contains("desk keys q C-c"), "{err}");
    home.ok(&["keys", "q", "C-c"]);
    assert_eq!(home.settled(&second)["state"], "delivered");
    wait_file(&dir.path().join("second.txt"), "second\n");
    assert!(!dir.path().join("first.txt").exists());
}

/// Issue 18, finding 10: a line longer than the kernel's canonical-mode limit (4095 bytes) to a
/// program reading lines the kernel edits is refused by `desk send` at once, and nothing is
/// queued (before, it was queued and refused at delivery).
#[test]
fn send_refuses_at_once_a_line_too_long_for_a_program_reading_lines() {
    let home = Home::new();
    home.serve();
    let got = home.path().join("got.txt");
    home.new_sh("lines", &format!("exec cat > {}", got.display()));
    eventually("cat to read its terminal", || {
        let t = terminal(&home, "lines");
        if t["foreground"]["reading"] == true { Ok(()) } else { Err(format!("{t:#}")) }
    });
    let long = home.path().join("long.txt");
    std::fs::write(&long, "x".repeat(5000)).unwrap();
    let out = home.desk(&["send", "lines", "--file", long.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("line 1 of the prompt is 5000 bytes") && err.contains("canonical mode"), "{err}");
    assert!(home.ok(&["queue"]).contains("no pending items"), "{}", home.ok(&["queue"]));
    // A line it takes still goes.
    let id = home.send("lines", "short line");
    assert_eq!(home.settled(&id)["state"], "delivered");
}
