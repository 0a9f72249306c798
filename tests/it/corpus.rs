//! The recorded real-agent streams (`tests/data/agents/`) replayed through desk's screen model
//! (and the output events its parse finds) and state authority with the built-in provider rules: at every step the recording
//! marks (the dialog is up, the prompt was sent, the agent is ready, the end), desk must say what
//! the agent was actually doing — with hooks, and with the terminal alone.

use desk_core::provider::Provider;
use desk_core::state::typed::Typed;
use desk_core::state::{Activity, Authority, Lifecycle, RuleSet, hooks};
use desk_term::events::OutputEvent;
use desk_term::screen::Screen;
use std::path::PathBuf;
use std::time::{Duration, Instant};

enum Item {
    Output(String),
    /// What the recorder wrote to the agent: typed prompts and keys, and its answers to
    /// terminal queries (escape sequences, which are not text).
    Input(String),
    Mark(String),
    Hook(serde_json::Value),
    /// A moment at which a test samples the state (not part of the recording).
    Sample,
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/agents")
}

/// Which of a recording's hook deliveries a replay feeds to desk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hooks {
    /// None: the terminal alone.
    Off,
    /// Every hook the recording's own wiring logged (Claude: every event; Codex: hooks.json
    /// and notify).
    Recorded,
    /// Only what desk wires up itself (`desk::providers`): Claude's
    /// [`Provider::hook_events`], Codex's `notify` alone (desk installs no
    /// hooks.json), nothing from OpenCode.
    Desk,
}

impl From<bool> for Hooks {
    fn from(with_hooks: bool) -> Hooks {
        if with_hooks { Hooks::Recorded } else { Hooks::Off }
    }
}

/// The recording's timeline: output, markers and (optionally) hook payloads, by time.
fn timeline(agent: &str, scenario: &str, hooks: impl Into<Hooks>) -> Vec<(f64, Item)> {
    let hooks = hooks.into();
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
                _ => (t, Item::Input(data)),
            })
        })
        .collect();
    if hooks != Hooks::Off
        && let Ok(text) = std::fs::read_to_string(dir().join(format!("{agent}/{scenario}.hooks.jsonl")))
    {
        for line in text.lines() {
            let Ok(h) = serde_json::from_str::<serde_json::Value>(line) else { continue };
            let Some(t) = h["t"].as_f64() else { continue };
            let wired_by_desk = match h["label"].as_str() {
                Some("claude") => h["argv"][0]
                    .as_str()
                    .is_some_and(|e| Provider::Claude.hook_events().iter().any(|h| h.as_str() == e)),
                Some("codex-notify") => true,
                _ => false,
            };
            if hooks == Hooks::Desk && !wired_by_desk {
                continue;
            }
            let payload = match h["label"].as_str() {
                Some("claude" | "codex-hook") => h["stdin"].clone(),
                // Codex's notify program gets its JSON as the last argument; the hook log
                // stores it already parsed (older logs: as the string).
                Some("codex-notify") => match h["argv"].as_array().and_then(|a| a.last()) {
                    Some(serde_json::Value::String(s)) => serde_json::from_str(s).unwrap_or_default(),
                    Some(v) => v.clone(),
                    None => continue,
                },
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
    replay_probed(agent, scenario, with_hooks.into(), &[], |_, _, _, _| {})
}

/// What a probe is called for: the screen just changed, or a requested sample time came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    Output,
    Sample,
}

/// [`replay`], also calling `probe(t, why, screen rows, state)` after every output event and
/// at every time in `samples` (after the state caught up with that time).
fn replay_probed(
    agent: &str,
    scenario: &str,
    hooks: Hooks,
    samples: &[f64],
    mut probe: impl FnMut(f64, Probe, &[String], &Authority),
) -> Vec<Seen> {
    let t0 = Instant::now();
    let at = |t: f64| (t0 + Duration::from_secs_f64(t), 1_000_000 + (t * 1000.0) as u64);
    let (now, ms) = at(0.0);
    let mut auth = Authority::new(RuleSet::builtin(agent.parse().expect("a known provider")), now, ms);
    let mut screen = Screen::new(120, 40);
    let mut last_output: Option<f64> = None;
    let mut quiet_reported = true;
    let mut seen = Vec::new();
    let snapshot = |auth: &Authority, t: f64, mark: &str| {
        let v = auth.view();
        Seen { t, mark: mark.to_string(), lifecycle: v.lifecycle.value, activity: v.activity.value, wait: v.wait }
    };
    let mut items = timeline(agent, scenario, hooks);
    items.extend(samples.iter().map(|&t| (t, Item::Sample)));
    // Stable: a sample at the same time as an event comes after it.
    items.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
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
                let mut found = Vec::new();
                screen.feed(data.as_bytes(), &mut found);
                for event in found {
                    match event {
                        OutputEvent::Title { title } => {
                            auth.on_title(&title, now, ms);
                        }
                        OutputEvent::Mode { mode, on } => {
                            auth.on_mode(mode, on, now, ms);
                        }
                        OutputEvent::Notification { title, body } => {
                            auth.on_notification(&format!("{}: {body}", title.unwrap_or_default()), now, ms);
                        }
                        OutputEvent::StateReport { state, kind } => {
                            auth.on_report(&state, kind.as_deref(), now, ms);
                        }
                        _ => {}
                    }
                }
                auth.on_output(now, ms);
                let rows = screen.text_rows();
                auth.on_screen(&rows, now, ms);
                probe(t, Probe::Output, &rows, &auth);
                last_output = Some(t);
                quiet_reported = false;
            }
            Item::Hook(payload) => {
                auth.on_hook(&hooks::interpret(agent.parse().expect("a known provider"), &payload), now, ms);
            }
            Item::Mark(label) => seen.push(snapshot(&auth, t, &label)),
            Item::Sample => probe(t, Probe::Sample, &screen.text_rows(), &auth),
            // As the master does with every INPUT: its echo is not the agent's screen.
            Item::Input(data) => auth.on_typed(data.as_bytes()),
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
    let mut auth = Authority::new(RuleSet::builtin(Provider::OpenCode), t0, 0);
    let mut screen = Screen::new(120, 40);
    for (t, item) in timeline("opencode", "startup", false) {
        if t > paste_on + 0.2 {
            break;
        }
        if let Item::Output(data) = item {
            let now = t0 + Duration::from_secs_f64(t);
            let mut found = Vec::new();
            screen.feed(data.as_bytes(), &mut found);
            for e in found {
                if let OutputEvent::Mode { mode, on } = e {
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

/// Play a recording up to a screenshot in a real session (real master, PTY, screen
/// model and its events, authority, `desk ls`/`desk explain`) under the provider's rules, without hooks, and
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
    let explain = home.json(&["explain", "rec", "--json"])["data"].clone();
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

// ----- dismissed dialogs and later turns (issue 7, items 2 and 3) -----

/// The times of the recorder's step markers named `label`, in order.
fn mark_times(agent: &str, scenario: &str, label: &str) -> Vec<f64> {
    timeline(agent, scenario, false)
        .into_iter()
        .filter_map(|(t, item)| matches!(&item, Item::Mark(m) if m == label).then_some(t))
        .collect()
}

/// Sample times every `step` seconds over `[from, to]`.
fn every(step: f64, from: f64, to: f64) -> Vec<f64> {
    (0..).map(|i| from + step * f64::from(i)).take_while(|t| *t <= to).collect()
}

/// How soon after a dialog leaves the screen desk must say the agent is idle again.
const SETTLE_AFTER_DIALOG: f64 = 1.0;

/// The dialog scenarios of one agent, each replayed with the hooks desk wires and without: the
/// moment the provider's blocked screen rule stops matching after the `dismiss` marker is the
/// moment the dialog went; from then on desk must be idle within [`SETTLE_AFTER_DIALOG`] and
/// never blocked again. Returns one line per replay that broke this, with the numbers.
fn dismissals_settle(agent: &str) -> Vec<String> {
    let rules = RuleSet::builtin(agent.parse().expect("a known provider"));
    let mut failures = Vec::new();
    let mut report = Vec::new();
    for scenario in ["dismiss-escape", "dismiss-escape-early", "dismiss-ctrlc", "dismiss-no"] {
        let dismiss = *mark_times(agent, scenario, "dismiss").first().expect("a dismiss marker");
        // The last screenshot before the recorder hung up on the agent (which then resets its
        // title and exits: not part of the scenario).
        let end = *mark_times(agent, scenario, "screen:idle-after+5s").first().expect("a last idle screenshot");
        for hooks in [Hooks::Desk, Hooks::Off] {
            let mut gone: Option<f64> = None;
            let mut timeline_after: Vec<(f64, Activity)> = Vec::new();
            let mut samples_after_dismiss: Vec<(f64, Activity)> = Vec::new();
            let mut blocked_seen = false;
            replay_probed(agent, scenario, hooks, &every(0.05, dismiss, end), |t, why, rows, auth| {
                let blocked_on_screen =
                    rules.match_screen_where(rows, &Typed::default(), |r| r.activity == Blocked).is_some();
                if t < dismiss {
                    blocked_seen |= blocked_on_screen;
                    return;
                }
                if gone.is_none() && why == Probe::Output && !blocked_on_screen {
                    gone = Some(t);
                }
                if why == Probe::Sample {
                    samples_after_dismiss.push((t, auth.activity()));
                    if gone.is_some() {
                        timeline_after.push((t, auth.activity()));
                    }
                }
            });
            assert!(blocked_seen, "{agent}/{scenario}: the dialog never matched the blocked screen rule");
            let Some(gone) = gone else {
                // The key did not close the dialog (Claude Code ignores one Ctrl-C there): it
                // still waits for an answer, and desk must go on saying so.
                let not_blocked: Vec<_> = samples_after_dismiss.iter().filter(|s| s.1 != Blocked).collect();
                let line = format!(
                    "{agent}/{scenario} hooks={hooks:?}: the dialog stayed on screen; desk said blocked at {}/{} samples",
                    samples_after_dismiss.len() - not_blocked.len(),
                    samples_after_dismiss.len()
                );
                if !not_blocked.is_empty() {
                    failures.push(format!("{line}; first not blocked: {:?}", not_blocked[0]));
                }
                report.push(line);
                continue;
            };
            let at_deadline = timeline_after.iter().find(|(t, _)| *t >= gone + SETTLE_AFTER_DIALOG).map(|s| s.1);
            let first_idle = timeline_after.iter().find(|(_, a)| *a == Idle).map(|s| s.0 - gone);
            let blocked_until = timeline_after.iter().rev().find(|(_, a)| *a == Blocked).map(|s| s.0 - gone);
            let late_not_idle = timeline_after
                .iter()
                .filter(|(t, a)| *t >= gone + SETTLE_AFTER_DIALOG && *a != Idle)
                .map(|s| s.1)
                .next();
            let line = format!(
                "{agent}/{scenario} hooks={hooks:?}: dialog gone at {gone:.2} s; at +{SETTLE_AFTER_DIALOG} s \
                 activity {at_deadline:?}; first idle {}; blocked until {}; first non-idle after the deadline {:?} \
                 (recording ends {:.1} s after)",
                first_idle.map_or("never".into(), |d| format!("+{d:.2} s")),
                blocked_until.map_or("-".into(), |d| format!("+{d:.2} s")),
                late_not_idle,
                end - gone,
            );
            if at_deadline != Some(Idle) || blocked_until.is_some_and(|d| d >= SETTLE_AFTER_DIALOG) {
                failures.push(line.clone());
            }
            report.push(line);
        }
    }
    eprintln!("{}", report.join("\n"));
    failures
}

#[test]
fn claude_code_dismissed_dialogs_settle_idle() {
    let failures = dismissals_settle("claude");
    assert!(failures.is_empty(), "a dismissed dialog must end idle within 1 s:\n{}", failures.join("\n"));
}

#[test]
fn codex_dismissed_dialogs_settle_idle() {
    let failures = dismissals_settle("codex");
    assert!(failures.is_empty(), "a dismissed dialog must end idle within 1 s:\n{}", failures.join("\n"));
}

#[test]
fn opencode_dismissed_dialogs_settle_idle() {
    let failures = dismissals_settle("opencode");
    assert!(failures.is_empty(), "a dismissed dialog must end idle within 1 s:\n{}", failures.join("\n"));
}

/// What the screen alone says the agent is doing, independent of desk's rules: its working
/// indicator means working, its idle prompt without one means idle; anything else (a frame in
/// between) says nothing.
fn screen_truth(agent: &str, rows: &[String]) -> Option<Activity> {
    let text = rows.join("\n");
    match agent {
        "claude" if text.contains("esc to interrupt") => Some(Working),
        "claude" => text.contains("? for shortcuts").then_some(Idle),
        "opencode" if text.contains("esc interrupt") => Some(Working),
        "opencode" => text.contains("ctrl+p commands").then_some(Idle),
        "codex" => codex_screen_truth(rows),
        other => panic!("no screen truth for {other}"),
    }
}

/// Codex draws `• Working (Ns • esc to interrupt)` only until the reply starts streaming, then
/// erases it (docs/agents-observed.md §3.6), so its screen says "working" in two ways: that
/// line, or a submitted prompt (`› …` in the transcript, above the input row) with no
/// `Worked for Ns` under it yet. Its idle screen is the input row and footer with every
/// prompt answered.
fn codex_screen_truth(rows: &[String]) -> Option<Activity> {
    if rows.iter().any(|r| r.contains("• Working (") && r.contains("esc to interrupt)")) {
        return Some(Working);
    }
    let footer = rows.iter().rposition(|r| r.contains("? for shortcuts"))?;
    let input = rows[..footer].iter().rposition(|r| r.starts_with("› "))?;
    let prompt = rows[..input].iter().rposition(|r| r.starts_with("› "));
    let worked = rows[..input].iter().rposition(|r| r.trim_start().starts_with("Worked for "));
    Some(match (prompt, worked) {
        (Some(p), Some(w)) if p > w => Working,
        (Some(_), None) => Working,
        _ => Idle,
    })
}

/// How far desk may be from a change on screen between working and idle: behind it (desk
/// notices a redraw late) or ahead of it (a hook or report arrives before the agent redraws).
const SETTLE_AROUND_SCREEN: f64 = 1.0;

/// Replay an agent's `multi-turn` recording with desk's hooks or none, sampling every 250 ms
/// from the first prompt to the end: desk's activity must match what the screen shows at every
/// sample but those within [`SETTLE_AROUND_SCREEN`] of a change on screen. Returns the
/// agreement (samples agreeing, samples judged) and the disagreeing samples.
fn multi_turn_agreement(agent: &str, hooks: Hooks) -> (usize, usize, Vec<String>) {
    let start = *mark_times(agent, "multi-turn", "turn-1-sent").first().expect("turn-1-sent marker");
    // The last screenshot before the recorder hung up on the agent.
    let end = *mark_times(agent, "multi-turn", "screen:end-idle").first().expect("a last idle screenshot");
    // The ground truth itself is checked where the scenario says what the agent was doing.
    let mut expected_at: Vec<(f64, Activity, String)> = Vec::new();
    for n in 1..=5 {
        for (label, activity) in [(format!("turn-{n}-working"), Working), (format!("turn-{n}-done"), Idle)] {
            for t in mark_times(agent, "multi-turn", &format!("screen:{label}")) {
                expected_at.push((t, activity, label.clone()));
            }
        }
    }
    assert!(expected_at.len() >= 8, "{agent}/multi-turn lacks its turn screenshots");
    let mut sample_times = every(0.25, start, end);
    sample_times.extend(expected_at.iter().map(|e| e.0));
    let mut truth: Option<Activity> = None;
    let mut changes = Vec::new();
    let mut samples = Vec::new();
    replay_probed(agent, "multi-turn", hooks, &sample_times, |t, why, rows, auth| {
        let now = screen_truth(agent, rows);
        if now.is_some() && now != truth {
            if truth.is_some() {
                changes.push(t);
            }
            truth = now;
        }
        if why != Probe::Sample {
            return;
        }
        if let Some((_, activity, label)) = expected_at.iter().find(|e| e.0 == t) {
            assert_eq!(now, Some(*activity), "{agent}/multi-turn: the screen truth at {label} (t={t:.2})");
        } else {
            samples.push((t, truth, auth.activity()));
        }
    });
    let steps: Vec<(f64, String)> = timeline(agent, "multi-turn", false)
        .into_iter()
        .filter_map(|(t, i)| match i {
            Item::Mark(m) if m.starts_with("turn-") || m.starts_with("midturn") => Some((t, m)),
            _ => None,
        })
        .collect();
    let (mut judged, mut agree) = (0, 0);
    let mut misses = Vec::new();
    for (t, truth, desk) in samples {
        let Some(expected) = truth else { continue };
        if changes.iter().any(|c| (t - c).abs() < SETTLE_AROUND_SCREEN) {
            continue;
        }
        judged += 1;
        if desk == expected {
            agree += 1;
        } else {
            let step = steps.iter().rev().find(|(st, _)| *st <= t).map_or("-", |s| s.1.as_str());
            misses.push(format!("t={t:.2} after {step}: screen {expected:?}, desk {desk:?}"));
        }
    }
    (agree, judged, misses)
}

fn multi_turn_follows_the_screen(agent: &str) {
    let mut failures = Vec::new();
    for hooks in [Hooks::Desk, Hooks::Off] {
        let (agree, judged, misses) = multi_turn_agreement(agent, hooks);
        assert!(judged > 40, "{agent} hooks={hooks:?}: only {judged} samples could be judged");
        let line = format!(
            "{agent}/multi-turn hooks={hooks:?}: desk agreed with the screen at {agree}/{judged} samples ({:.1} %)",
            100.0 * agree as f64 / judged as f64
        );
        eprintln!("{line}");
        if agree != judged {
            let shown: Vec<&String> = misses.iter().take(12).collect();
            failures.push(format!("{line}; first misses: {shown:#?}"));
        }
    }
    assert!(failures.is_empty(), "activity must follow the screen on every turn:\n{}", failures.join("\n"));
}

#[test]
fn claude_code_multi_turn_activity_follows_the_screen() {
    multi_turn_follows_the_screen("claude");
}

#[test]
fn codex_multi_turn_activity_follows_the_screen() {
    multi_turn_follows_the_screen("codex");
}

#[test]
fn opencode_multi_turn_activity_follows_the_screen() {
    multi_turn_follows_the_screen("opencode");
}

/// Issue 18, finding 4: prompts that quote the words of every dialog desk's rules look for
/// (`quoted-dialog`: `Do you want to proceed?` over `1. Yes`, `Would you like to run the
/// following command?`, `△ Permission required`, …), pasted into each real agent: shown in its
/// input box, submitted, and shown again in its transcript. Replayed with what was typed (as
/// the master feeds every INPUT to the authority), desk never says blocked — at every screen,
/// with the hooks desk wires and without — although the rules alone match those screens: the
/// recording would catch a rule that took the echo for a dialog.
#[test]
fn prompts_that_quote_a_dialog_are_never_taken_for_one() {
    for agent in ["claude", "codex", "opencode"] {
        let rules = RuleSet::builtin(agent.parse().expect("a known provider"));
        for hooks in [Hooks::Desk, Hooks::Off] {
            let (mut screens, mut rules_alone, mut blocked) = (0, 0, Vec::new());
            let seen = replay_probed(agent, "quoted-dialog", hooks, &[], |t, why, rows, auth| {
                if why != Probe::Output {
                    return;
                }
                screens += 1;
                if rules.match_screen_where(rows, &Typed::default(), |r| r.activity == Blocked).is_some() {
                    rules_alone += 1;
                }
                if auth.activity() == Blocked {
                    blocked.push(format!("t={t:.2}\n{}", rows.join("\n")));
                }
            });
            assert!(blocked.is_empty(), "{agent} (hooks {hooks:?}) read blocked:\n{}", blocked.join("\n----\n"));
            assert!(rules_alone > 0, "{agent}: no screen of the recording shows words a blocked rule matches");
            for i in 1..=5 {
                for mark in [format!("screen:quoted-in-box-{i}"), format!("screen:quoted-in-transcript-{i}")] {
                    for s in at_mark(&seen, &mark) {
                        assert_ne!(s.activity, Blocked, "{agent} at {mark}");
                    }
                }
            }
            eprintln!("{agent} hooks={hooks:?}: {screens} screens, {rules_alone} the rules alone would call a dialog");
        }
    }
}

// ----- prompts of every shape in the real agents' input boxes (issue 24, §1) -----

/// The rows desk's screen model shows at each of `times` (ascending) in a recording.
fn screens_at(agent: &str, scenario: &str, times: &[f64]) -> Vec<Vec<String>> {
    let mut screen = Screen::new(120, 40);
    let mut out = Vec::new();
    let mut events = timeline(agent, scenario, false).into_iter().peekable();
    for &t in times {
        while let Some((_, item)) = events.next_if(|(et, _)| *et <= t) {
            if let Item::Output(data) = item {
                screen.feed(data.as_bytes(), &mut Vec::new());
            }
        }
        out.push(screen.text_rows());
    }
    out
}

/// Every shape the `shapes-alone`, `shapes-queued` and `shapes-queued-more` recordings pasted
/// into `agent` (alone while idle, and as a digest during or right after a turn), checked the way delivery checks
/// it. Returns one line per failed check.
fn shapes_hold_in_the_box(agent: &str) -> Vec<String> {
    let rules = RuleSet::builtin(agent.parse().expect("a known provider"));
    let mut failures = Vec::new();
    let mut seen = 0;
    for scenario in ["shapes-alone", "shapes-queued", "shapes-queued-more"] {
        let path = dir().join(format!("{agent}/{scenario}.results.json"));
        let results: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("shapes results")).expect("JSON");
        let shapes = results["shapes"].as_array().expect("a shapes list");
        seen += shapes.len();
        for shape in shapes {
            failures.extend(shape_in_the_box(agent, scenario, &rules.delivery, shape));
        }
    }
    assert!(seen >= 14, "{agent}: every shape, alone and in a digest ({seen} recorded)");
    failures
}

/// One shape of a `shapes-*` recording: before the paste the box holds nothing of it; with the
/// paste in it, the box holds exactly that prompt (so it is desk's own, not a draft) and the
/// input area shows more of it than before (the echo); after the Enter it has left the box; and
/// the model stand-in received it once, whole.
fn shape_in_the_box(
    agent: &str,
    scenario: &str,
    settings: &desk_core::delivery::settings::DeliverySettings,
    shape: &serde_json::Value,
) -> Vec<String> {
    use desk_core::delivery::text::{self, Held};
    let label = shape["label"].as_str().expect("label");
    let prompt = text::sanitize(shape["text"].as_str().expect("text"));
    let times: Vec<f64> = ["before", "pasted", "sent"]
        .iter()
        .map(|step| screenshot_time(agent, scenario, &format!("{step}-{label}")))
        .collect();
    let [before, pasted, sent] = <[Vec<String>; 3]>::try_from(screens_at(agent, scenario, &times)).unwrap();
    let fp = text::fingerprint(&prompt);
    let presence = |rows: &[String]| text::presence(&settings.prompt_rows(rows), &fp, settings.placeholder.as_ref());
    let held = |rows: &[String]| {
        settings.composer_text(rows).map(|c| (text::held(&c, &prompt, settings.placeholder.as_ref()), c))
    };
    let mut failures = Vec::new();
    let mut fail = |what: String, rows: &[String]| {
        failures.push(format!("{agent}/{scenario} {label}: {what}\n{}", rows.join("\n")));
    };
    if !matches!(held(&before), Some((Held::Not, _))) {
        fail(format!("before the paste the box reads {:?}", held(&before)), &before);
    }
    if !matches!(held(&pasted), Some((Held::Exactly, _))) {
        fail(format!("with the paste in it the box reads {:?}, not exactly the prompt", held(&pasted)), &pasted);
    }
    if !presence(&pasted).more_than(presence(&before)) {
        fail(format!("the echo is not seen: {:?} then {:?}", presence(&before), presence(&pasted)), &pasted);
    }
    if !matches!(held(&sent), Some((Held::Not, _))) || presence(&sent).more_than(presence(&before)) {
        fail(format!("after the Enter the box reads {:?}, {:?}", held(&sent), presence(&sent)), &sent);
    }
    if shape["submitted"] != true || shape["arrived_whole"] != true {
        failures.push(format!("{agent}/{scenario} {label}: the agent did not receive it once and whole: {shape}"));
    }
    failures
}

#[test]
fn claude_code_holds_every_prompt_shape_whole_in_its_box() {
    let failures = shapes_hold_in_the_box("claude");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn codex_holds_every_prompt_shape_whole_in_its_box() {
    let failures = shapes_hold_in_the_box("codex");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn opencode_holds_every_prompt_shape_whole_in_its_box() {
    let failures = shapes_hold_in_the_box("opencode");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
