//! The recorded real-agent streams (`tests/data/agents/`) replayed through desk's screen model,
//! scanner and state authority with the built-in provider rules: at every step the recording
//! marks (the dialog is up, the prompt was sent, the agent is ready, the end), desk must say what
//! the agent was actually doing — with hooks, and with the terminal alone.

use desk::scanner::{ScanEvent, Scanner};
use desk::screen::Screen;
use desk::state::{Activity, Authority, Lifecycle, RuleSet, hooks};
use std::path::PathBuf;
use std::time::{Duration, Instant};

enum Item {
    Output(String),
    Input,
    Mark(String),
    Hook(serde_json::Value),
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/agents")
}

/// The recording's timeline: output, markers and (optionally) hook payloads, by time.
fn timeline(agent: &str, scenario: &str, with_hooks: bool) -> Vec<(f64, Item)> {
    let cast = std::fs::read_to_string(dir().join(format!("{agent}/{scenario}.cast"))).expect("a recording");
    let mut items: Vec<(f64, Item)> = cast
        .lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|e| {
            let t = e[0].as_f64()?;
            let data = e[2].as_str().unwrap_or("").to_string();
            Some(match e[1].as_str()? {
                "o" => (t, Item::Output(data)),
                "m" => (t, Item::Mark(data)),
                _ => (t, Item::Input),
            })
        })
        .collect();
    if with_hooks && let Ok(text) = std::fs::read_to_string(dir().join(format!("{agent}/{scenario}.hooks.jsonl"))) {
        for line in text.lines() {
            let Ok(h) = serde_json::from_str::<serde_json::Value>(line) else { continue };
            let Some(t) = h["t"].as_f64() else { continue };
            let payload = match h["label"].as_str() {
                Some("claude" | "codex-hook") => h["stdin"].clone(),
                // Codex's notify program gets its JSON as the last argument.
                Some("codex-notify") => h["argv"]
                    .as_array()
                    .and_then(|a| a.last())
                    .and_then(|v| v.as_str())
                    .and_then(|s| serde_json::from_str(s).ok())
                    .unwrap_or_default(),
                _ => continue,
            };
            items.push((t, Item::Hook(payload)));
        }
    }
    // The moments the recorder took a labelled screenshot ("dialog-bash", "working", ...)
    // are checkpoints too, as `screen:<label>`.
    if let Ok(text) = std::fs::read_to_string(dir().join(format!("{agent}/{scenario}.screens.txt"))) {
        for line in text.lines().filter(|l| l.starts_with("===== ")) {
            let mut words = line.trim_start_matches("===== ").split_whitespace();
            let label = words.next().unwrap_or("");
            let t = words.find_map(|w| w.strip_prefix("t=")).and_then(|t| t.parse::<f64>().ok());
            if let Some(t) = t {
                items.push((t, Item::Mark(format!("screen:{label}"))));
            }
        }
    }
    items.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
    items
}

#[derive(Debug, Clone)]
struct Seen {
    t: f64,
    mark: String,
    lifecycle: Lifecycle,
    activity: Activity,
    wait: Option<String>,
}

/// Replay a recording; return the state at each marker (taken just before the marked step is
/// carried out), and at the end.
fn replay(agent: &str, scenario: &str, with_hooks: bool) -> Vec<Seen> {
    let t0 = Instant::now();
    let at = |t: f64| (t0 + Duration::from_secs_f64(t), 1_000_000 + (t * 1000.0) as u64);
    let (now, ms) = at(0.0);
    let mut auth = Authority::new(RuleSet::builtin(agent), now, ms);
    let mut screen = Screen::new(120, 40);
    let mut scanner = Scanner::new();
    let mut last_output: Option<f64> = None;
    let mut quiet_reported = true;
    let mut seen = Vec::new();
    let snapshot = |auth: &Authority, t: f64, mark: &str| {
        let v = auth.view();
        Seen { t, mark: mark.to_string(), lifecycle: v.lifecycle.value, activity: v.activity.value, wait: v.wait }
    };
    let items = timeline(agent, scenario, with_hooks);
    let end = items.last().map_or(0.0, |i| i.0) + 0.5;
    let catch_up = |auth: &mut Authority, last_output: Option<f64>, quiet_reported: &mut bool, t: f64| {
        // Quiescence and lease expiry happen between recorded events.
        if let Some(lo) = last_output
            && !*quiet_reported
            && t >= lo + 1.0
        {
            let (now, ms) = at(lo + 1.0);
            auth.on_quiet(now, ms);
            *quiet_reported = true;
        }
        let (now, ms) = at(t);
        // Deadlines strictly increase, so this visits each one once.
        let mut cursor = now - Duration::from_secs(3600);
        while let Some(deadline) = auth.next_deadline(cursor) {
            if deadline > now {
                break;
            }
            let (d, dms) = at(deadline.duration_since(t0).as_secs_f64());
            auth.tick(d, dms);
            cursor = deadline;
        }
        auth.tick(now, ms);
    };
    for (t, item) in items.into_iter().chain(std::iter::once((end, Item::Mark("end".into())))) {
        catch_up(&mut auth, last_output, &mut quiet_reported, t);
        let (now, ms) = at(t);
        match item {
            Item::Output(data) => {
                screen.process(data.as_bytes());
                let mut found = Vec::new();
                scanner.feed(data.as_bytes(), &mut found);
                for event in found {
                    match event {
                        ScanEvent::Title { title } => {
                            auth.on_title(&title, now, ms);
                        }
                        ScanEvent::Mode { mode, on } => {
                            auth.on_mode(mode, on, now, ms);
                        }
                        ScanEvent::Notification { title, body } => {
                            auth.on_notification(&format!("{}: {body}", title.unwrap_or_default()), now, ms);
                        }
                        ScanEvent::StateReport { state, kind } => {
                            auth.on_report(&state, kind.as_deref(), now, ms);
                        }
                        _ => {}
                    }
                }
                auth.on_output(now, ms);
                auth.on_screen(&screen.text_rows(), now, ms);
                last_output = Some(t);
                quiet_reported = false;
            }
            Item::Hook(payload) => {
                auth.on_hook(&hooks::interpret(agent, &payload), now, ms);
            }
            Item::Mark(label) => seen.push(snapshot(&auth, t, &label)),
            Item::Input => {}
        }
    }
    seen
}

fn at_mark<'a>(seen: &'a [Seen], mark: &str) -> Vec<&'a Seen> {
    let found: Vec<&Seen> = seen.iter().filter(|s| s.mark == mark).collect();
    assert!(!found.is_empty(), "no marker {mark:?} in {seen:#?}");
    found
}

fn check(agent: &str, scenario: &str, with_hooks: bool, expect: &[(&str, Activity, Option<&str>)]) {
    let seen = replay(agent, scenario, with_hooks);
    for (mark, activity, wait) in expect {
        for s in at_mark(&seen, mark) {
            assert_eq!(
                (s.activity, s.wait.as_deref()),
                (*activity, *wait),
                "{agent}/{scenario} (hooks: {with_hooks}) at {mark:?} t={:.2}: {seen:#?}",
                s.t
            );
        }
    }
}

fn ready_at_mark(agent: &str, scenario: &str, with_hooks: bool, mark: &str) {
    let seen = replay(agent, scenario, with_hooks);
    for s in at_mark(&seen, mark) {
        assert_eq!(s.lifecycle, Lifecycle::Running, "{agent}/{scenario} not running at ready: {seen:#?}");
    }
    let end = at_mark(&seen, "end");
    assert_eq!(end[0].lifecycle, Lifecycle::Running);
}

use Activity::*;

const APPROVAL: Option<&str> = Some("approval");
const QUESTION: Option<&str> = Some("question");

#[test]
fn claude_code_streams_are_classified() {
    for hooks in [true, false] {
        ready_at_mark("claude", "startup", hooks, "ready");
        check("claude", "startup", hooks, &[("screen:idle", Idle, None), ("screen:idle+3s", Idle, None)]);
        check(
            "claude",
            "turn",
            hooks,
            &[("screen:idle-before", Idle, None), ("screen:working", Working, None), ("screen:idle-after", Idle, None)],
        );
        check(
            "claude",
            "approval",
            hooks,
            &[
                ("screen:dialog-bash", Blocked, APPROVAL),
                ("screen:idle-after-bash", Idle, None),
                ("screen:dialog-write", Blocked, APPROVAL),
                ("screen:idle-after-write", Idle, None),
            ],
        );
        check(
            "claude",
            "question",
            hooks,
            &[("screen:question", Blocked, QUESTION), ("screen:idle-after", Idle, None)],
        );
        check(
            "claude",
            "queue",
            hooks,
            &[("screen:working-before-B-type", Working, None), ("screen:idle-after-type", Idle, None)],
        );
    }
}

#[test]
fn codex_streams_are_classified() {
    for hooks in [true, false] {
        ready_at_mark("codex", "startup", hooks, "screen:idle");
        check("codex", "startup", hooks, &[("screen:idle", Idle, None), ("screen:idle+3s", Idle, None)]);
        check(
            "codex",
            "turn",
            hooks,
            &[("screen:idle-before", Idle, None), ("screen:working", Working, None), ("screen:idle-after", Idle, None)],
        );
        check(
            "codex",
            "approval",
            hooks,
            &[("screen:dialog-bash", Blocked, APPROVAL), ("screen:idle-after-bash", Idle, None)],
        );
        check(
            "codex",
            "queue",
            hooks,
            &[("screen:working-before-B-type", Working, None), ("screen:idle-after-type", Idle, None)],
        );
    }
}

#[test]
fn codex_in_daemon_mode_is_not_ready_until_it_reports_idle() {
    // In its default mode Codex draws its idle footer (and bracketed paste) at once but connects
    // to its app-server seconds later; the recording's Enter at 1.5 s was lost. desk must not
    // call the session ready (and so deliver into it) before Codex's own `state=idle`.
    let seen = replay("codex", "daemon", false);
    let early = at_mark(&seen, "ready")[0];
    assert_eq!(early.lifecycle, Lifecycle::Starting, "ready too early: {seen:#?}");
    let idle = at_mark(&seen, "screen:idle")[0];
    assert_eq!((idle.lifecycle, idle.activity), (Lifecycle::Running, Idle), "{seen:#?}");
}

#[test]
fn opencode_streams_are_classified() {
    ready_at_mark("opencode", "startup", false, "ready");
    check("opencode", "startup", false, &[("screen:idle", Idle, None), ("screen:idle+3s", Idle, None)]);
    check(
        "opencode",
        "turn",
        false,
        &[("screen:idle-before", Idle, None), ("screen:working", Working, None), ("screen:idle-after", Idle, None)],
    );
    check(
        "opencode",
        "approval",
        false,
        &[
            ("screen:dialog-bash", Blocked, APPROVAL),
            ("screen:idle-after-bash", Idle, None),
            ("screen:dialog-write", Blocked, APPROVAL),
            ("screen:idle-after-write", Idle, None),
        ],
    );
    check("opencode", "question", false, &[("screen:question", Blocked, QUESTION), ("screen:idle-after", Idle, None)]);
    check(
        "opencode",
        "queue",
        false,
        &[("screen:working-before-B-type", Working, None), ("screen:idle-after-type", Idle, None)],
    );
}

#[test]
fn opencode_is_not_ready_when_bracketed_paste_comes_on_but_only_at_its_prompt() {
    // Everything typed before OpenCode draws its prompt is lost: bracketed paste alone must not
    // make the session ready.
    let cast = std::fs::read_to_string(dir().join("opencode/startup.cast")).unwrap();
    let paste_on = cast
        .lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e[1] == "o" && e[2].as_str().is_some_and(|d| d.contains("\u{1b}[?2004h")))
        .and_then(|e| e[0].as_f64())
        .expect("OpenCode switches bracketed paste on");
    let seen = replay("opencode", "startup", false);
    let ready = at_mark(&seen, "ready")[0].t;
    assert!(ready - paste_on > 1.0, "the recording shows the gap: 2004 at {paste_on:.1} s, prompt at {ready:.1} s");
    // Replaying only up to just after 2004: still starting.
    let t0 = Instant::now();
    let mut auth = Authority::new(RuleSet::builtin("opencode"), t0, 0);
    let mut screen = Screen::new(120, 40);
    let mut scanner = Scanner::new();
    for (t, item) in timeline("opencode", "startup", false) {
        if t > paste_on + 0.2 {
            break;
        }
        if let Item::Output(data) = item {
            let now = t0 + Duration::from_secs_f64(t);
            screen.process(data.as_bytes());
            let mut found = Vec::new();
            scanner.feed(data.as_bytes(), &mut found);
            for e in found {
                if let ScanEvent::Mode { mode, on } = e {
                    auth.on_mode(mode, on, now, 0);
                }
            }
            auth.on_screen(&screen.text_rows(), now, 0);
        }
    }
    assert_eq!(auth.lifecycle(), Lifecycle::Starting);
}

// ----- the same recordings in real sessions -----

/// The recording time of a labelled screenshot in `<agent>/<scenario>.screens.txt`.
fn screenshot_time(agent: &str, scenario: &str, label: &str) -> f64 {
    let text = std::fs::read_to_string(dir().join(format!("{agent}/{scenario}.screens.txt"))).expect("screenshots");
    text.lines()
        .filter_map(|l| l.strip_prefix("===== "))
        .find_map(|l| {
            let mut words = l.split_whitespace();
            (words.next() == Some(label)).then(|| words.find_map(|w| w.strip_prefix("t=")?.parse().ok()))?
        })
        .unwrap_or_else(|| panic!("no screenshot {label:?} in {agent}/{scenario}"))
}

/// Play a recording up to a screenshot in a real session (real master, PTY, scanner, screen
/// model, authority, `desk ls`/`desk explain`) under the provider's rules, without hooks, and
/// wait for desk to show `activity` (with `wait`). Returns `desk explain --json`.
fn live_replay(agent: &str, scenario: &str, label: &str, activity: &str, wait: Option<&str>) -> serde_json::Value {
    let home = crate::support::Home::new();
    let until = screenshot_time(agent, scenario, label);
    // About two seconds of wall time whatever the recording's length.
    let speed = (until / 2.0).max(1.0);
    let cast = dir().join(format!("{agent}/{scenario}.cast"));
    home.ok(&[
        "new",
        "rec",
        "--provider",
        agent,
        "--size",
        "120x40",
        "--",
        env!("CARGO_BIN_EXE_desk-demo-agent"),
        "--replay",
        cast.to_str().expect("utf-8 path"),
        "--replay-speed",
        &speed.to_string(),
        "--replay-until",
        &until.to_string(),
    ]);
    let session = crate::support::eventually(&format!("{agent}/{scenario} at {label} to show {activity}"), || {
        let s = home.session("rec").ok_or("no session")?;
        let state = &s["state"];
        if state["activity"]["value"] == activity && state["wait"].as_str() == wait {
            Ok(s)
        } else {
            Err(state.to_string())
        }
    });
    let explain: serde_json::Value =
        serde_json::from_str(&home.ok(&["explain", "rec", "--json"])).expect("explain --json is JSON");
    assert_eq!(session["state"]["lifecycle"]["value"], "running", "{session}");
    explain
}

#[test]
fn claude_code_approval_dialog_in_a_real_session_is_blocked_on_approval() {
    let explain = live_replay("claude", "approval", "dialog-bash", "blocked", Some("approval"));
    assert_eq!(explain["state"]["activity"]["evidence"]["source"], "screen", "{explain:#}");
}

#[test]
fn claude_code_question_in_a_real_session_is_blocked_on_a_question() {
    live_replay("claude", "question", "question", "blocked", Some("question"));
}

#[test]
fn codex_approval_in_a_real_session_is_blocked_on_approval() {
    live_replay("codex", "approval", "dialog-bash", "blocked", Some("approval"));
}

#[test]
fn codex_idle_after_a_turn_in_a_real_session_is_idle_by_its_own_report() {
    let explain = live_replay("codex", "turn", "idle-after", "idle", None);
    assert_eq!(explain["state"]["activity"]["evidence"]["source"], "report", "{explain:#}");
}

#[test]
fn opencode_working_and_approval_in_real_sessions() {
    live_replay("opencode", "turn", "working", "working", None);
    live_replay("opencode", "approval", "dialog-bash", "blocked", Some("approval"));
}
