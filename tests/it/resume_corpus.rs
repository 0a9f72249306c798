//! The resume capture rules (`desk_core::fleet::resume`) replayed against what the real agents
//! did on resume, `/clear` and an unknown id (`tests/data/agents/<agent>/{resume,clear,
//! resume-unknown}.*`, recorded offline with `scripts/agent-scenarios.py`; docs/agents-observed.md
//! §10). For each recording: the conversation the rules capture from the agent's own reports
//! in its first life is the one the recording then resumed, and the resumed agent's next request
//! carried the earlier turn — so a desk restart that resumes what the rules captured continues
//! that conversation; evidence that is not the session's conversation (Codex's title thread,
//! the conversation before `/clear`) is never captured; each agent's refusal of an unknown id is
//! recognised from its own words.

use desk_core::fleet::resume::{self, Applied, Capture, Evidence};
use desk_core::provider::Provider;
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/agents")
}

fn lines(agent: &str, file: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir().join(agent).join(file)).unwrap_or_else(|e| panic!("{agent}/{file}: {e}"));
    text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

fn results(agent: &str, scenario: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(dir().join(agent).join(format!("{scenario}.results.json"))).expect("results");
    serde_json::from_str(&text).expect("JSON")
}

/// When the recording's second process (the resumed agent) was spawned, in seconds after the
/// first: the first life's hooks come before it.
fn second_spawn(agent: &str, scenario: &str) -> f64 {
    let cast = std::fs::read_to_string(dir().join(agent).join(format!("{scenario}-resumed.cast"))).expect("cast");
    let header: serde_json::Value = serde_json::from_str(cast.lines().next().expect("a header")).expect("JSON");
    header["spawned_at"].as_f64().expect("spawned_at")
}

/// The hook payloads of the first life, as `desk hook` would have received them: Claude's and
/// the demo-style hooks on stdin, Codex's notify as its last argument.
fn first_life_payloads(agent: &str, scenario: &str, labels: &[&str]) -> Vec<serde_json::Value> {
    let until = second_spawn(agent, scenario);
    lines(agent, &format!("{scenario}.hooks.jsonl"))
        .into_iter()
        .filter(|h| h["t"].as_f64().is_some_and(|t| t < until))
        .filter(|h| labels.contains(&h["label"].as_str().unwrap_or("")))
        .map(|h| if h["label"] == "codex-notify" { h["argv"][0].clone() } else { h["stdin"].clone() })
        .collect()
}

/// Fold the first life's evidence into a capture, as desk's hook handler does (Codex's notify
/// completed with the rollout the agent held open, which the recording listed while it ran).
fn capture(provider: Provider, agent: &str, scenario: &str, labels: &[&str], held_open: &[String]) -> Capture {
    let mut c = Capture::new(provider, 1, Some("/tmp/home/.config".into()), Some("/tmp/work".into()));
    for (i, payload) in first_life_payloads(agent, scenario, labels).iter().enumerate() {
        let Some(mut evidence) = resume::evidence_from_hook(provider, payload) else { continue };
        if let Evidence::Notify { thread, rollout, .. } = &mut evidence {
            *rollout = held_open.iter().find(|p| p.ends_with(&format!("-{thread}.jsonl"))).cloned();
        }
        c.apply(&evidence, i as u64);
    }
    c
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array().into_iter().flatten().filter_map(|s| s.as_str().map(String::from)).collect()
}

/// The recorded resumed turn: the request of the agent's own turn after the resume.
fn carried(results: &serde_json::Value, turn: &str) -> Vec<String> {
    strings(&results[turn]["carried"])
}

#[test]
fn claude_resume_captures_the_reported_conversation_and_the_resumed_turn_carries_the_first() {
    let r = results("claude", "resume");
    let c = capture(Provider::Claude, "claude", "resume", &["claude"], &[]);
    let resumed = r["resuming"].as_str().expect("the recording resumed a conversation");
    assert_eq!(c.conversation.as_deref(), Some(resumed));
    assert_eq!(c.source.as_deref(), Some("SessionStart(startup)"));
    assert!(c.transcript.as_deref().is_some_and(|t| t.ends_with(&format!("{resumed}.jsonl"))), "{c:?}");
    assert_eq!(carried(&r, "second_turn"), ["TOKEN-first", "TOKEN-second"]);
    // Claude's per-process file named the same conversation while it ran.
    let files = r["evidence_first_life"]["claude_sessions"].as_object().expect("the per-process files");
    let ids: Vec<&str> = files.values().filter_map(|f| f["sessionId"].as_str()).collect();
    assert_eq!(ids, [resumed]);
    let mut again = c.clone();
    let file = Evidence::ProcessFile { id: resumed.into(), version: Some("2.1.197".into()), tested: true };
    assert_eq!(again.apply(&file, 100), Applied::Confirmed);
    // The resumed agent reports SessionStart(resume) with the same id.
    let reports = r["reports_second_life"].as_array().expect("reports");
    assert_eq!(reports[0][1], "claude SessionStart(resume)");
    assert_eq!(reports[0][2], resumed);
}

#[test]
fn claude_clear_moves_the_capture_to_the_new_conversation_and_the_old_one_is_not_resumed() {
    let r = results("claude", "clear");
    let c = capture(Provider::Claude, "claude", "clear", &["claude"], &[]);
    let resumed = r["resuming"].as_str().expect("resumed");
    assert_eq!(c.conversation.as_deref(), Some(resumed));
    assert_eq!(c.source.as_deref(), Some("SessionStart(clear)"));
    let before = r["reports"][0][2].as_str().expect("the first conversation");
    assert_ne!(before, resumed, "/clear made a new conversation");
    // Resuming what was captured continues the conversation after /clear only.
    assert_eq!(carried(&r, "resumed_turn"), ["TOKEN-after", "TOKEN-third"]);
}

#[test]
fn codex_with_its_hooks_captures_the_session_start_and_never_the_title_thread() {
    for scenario in ["resume", "clear"] {
        let r = results("codex", scenario);
        let c = capture(Provider::Codex, "codex", scenario, &["codex-hook", "codex-notify"], &[]);
        assert_eq!(c.conversation.as_deref(), r["resuming"].as_str(), "{scenario}: {:#?}", c.notes);
        assert!(
            c.notes.iter().any(|n| n.contains("title thread") || n.contains("differs")),
            "{scenario}: {:#?}",
            c.notes
        );
    }
}

#[test]
fn codex_with_notify_alone_captures_the_thread_whose_rollout_it_holds() {
    // desk wires only Codex's notify: its thread-ids, and the rollouts the agent holds open.
    for (scenario, held) in [("resume", "evidence_first_life"), ("clear", "evidence_after_clear")] {
        let r = results("codex", scenario);
        let held_open = strings(&r[held]["held_open"]);
        assert!(!held_open.is_empty(), "the recording lists the rollouts Codex held");
        let c = capture(Provider::Codex, "codex", scenario, &["codex-notify"], &held_open);
        assert_eq!(c.conversation.as_deref(), r["resuming"].as_str(), "{scenario}: {:#?}", c.notes);
        assert_eq!(c.source.as_deref(), Some("notify"));
        // Every notify of another thread than a captured one was the title thread's, whose
        // rollout does not exist.
        let titles = c.notes.iter().filter(|n| n.contains("title thread")).count();
        assert!(titles >= 1, "{scenario}: {:#?}", c.notes);
        let carried = carried(&r, if scenario == "resume" { "second_turn" } else { "resumed_turn" });
        assert!(carried.contains(&"TOKEN-third".to_string()) || carried.contains(&"TOKEN-second".to_string()));
    }
    // Codex names its conversation on the way out, too.
    let screens = std::fs::read_to_string(dir().join("codex/resume.screens.txt")).expect("screens");
    let ids: Vec<String> = screens
        .split("===== ")
        .filter_map(|snap| resume::exit_words(Provider::Codex, &snap.lines().map(String::from).collect::<Vec<_>>()))
        .collect();
    assert_eq!(ids.last().map(String::as_str), results("codex", "resume")["resuming"].as_str());
}

/// The first life's window in Unix ms, from the recording: OpenCode's own `session.created`
/// (its epoch time and the hook's relative time) pins the spawn; the second process's spawn
/// ends it.
fn opencode_window(scenario: &str) -> (u64, u64) {
    let hooks = lines("opencode", &format!("{scenario}.hooks.jsonl"));
    let created = hooks.iter().find(|h| h["name"] == "session.created").expect("a session.created event");
    let epoch = created["data"]["info"]["time"]["created"].as_f64().expect("its time");
    let rel = created["t"].as_f64().expect("t");
    let spawn = epoch - rel * 1000.0;
    (spawn as u64, (spawn + second_spawn("opencode", scenario) * 1000.0) as u64)
}

#[test]
fn opencode_session_list_names_the_conversation_only_when_one_fits() {
    let r = results("opencode", "resume");
    let list = r["opencode_sessions"]["sessions"].as_array().expect("the session list").clone();
    let (start, end) = opencode_window("resume");
    let fits = resume::opencode_fits(&list, "/tmp/work", start, end, None);
    assert_eq!(fits, [r["resuming"].as_str().expect("resumed").to_string()]);
    let mut c = Capture::new(Provider::OpenCode, 1, None, Some("/tmp/work".into()));
    assert_eq!(c.apply(&Evidence::SessionList { candidates: fits }, 1), Applied::Adopted);
    assert_eq!(carried(&r, "second_turn"), ["TOKEN-first", "TOKEN-second"]);
    // After /new, two sessions fit the generation: desk does not guess between them.
    let r = results("opencode", "clear");
    let list = r["opencode_sessions"]["sessions"].as_array().expect("the session list").clone();
    let (start, end) = opencode_window("clear");
    let fits = resume::opencode_fits(&list, "/tmp/work", start, end, None);
    assert_eq!(fits.len(), 2, "{fits:?}");
    let mut c = Capture::new(Provider::OpenCode, 1, None, Some("/tmp/work".into()));
    assert!(matches!(c.apply(&Evidence::SessionList { candidates: fits }, 1), Applied::Ignored(_)));
    // Another directory, or a window before the session, fits nothing.
    assert!(resume::opencode_fits(&list, "/tmp/other", start, end, None).is_empty());
    assert!(resume::opencode_fits(&list, "/tmp/work", 0, 1_000, None).is_empty());
}

#[test]
fn every_agent_refusing_an_unknown_id_is_recognised_and_exits_non_zero() {
    for (agent, provider) in
        [("claude", Provider::Claude), ("codex", Provider::Codex), ("opencode", Provider::OpenCode)]
    {
        let r = results(agent, "resume-unknown");
        assert_eq!(r["exited"], true, "{agent} exits rather than starting blank");
        let code = r["exit"]["code"].as_i64().map(|c| c as i32);
        assert_eq!(code, Some(1), "{agent}");
        let screens = std::fs::read_to_string(dir().join(agent).join("resume-unknown.screens.txt")).expect("screens");
        let last: Vec<String> = screens.rsplit("===== ").next().unwrap_or("").lines().map(String::from).collect();
        let message = resume::rejection(provider, code, &last);
        assert!(message.is_some(), "{agent}: {last:?}");
        // A clean exit with the same words is not a refusal.
        assert_eq!(resume::rejection(provider, Some(0), &last), None);
    }
}
