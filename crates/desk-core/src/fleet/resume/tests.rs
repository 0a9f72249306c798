use super::*;

const A: &str = "5a0e2f1c-6d3b-4e8a-9f21-0c7d4b9e3a18";
const B: &str = "7eb1ad8d-112d-4410-8db6-5721aade17d9";
const TITLE: &str = "01a23278-6386-7d71-b59c-7ea6f35fec5f";

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| s.to_string()).collect()
}

fn start(source: &str, id: &str) -> Evidence {
    Evidence::Hook {
        event: "SessionStart".into(),
        source: Some(source.into()),
        id: id.into(),
        transcript: Some(format!("/t/{id}.jsonl")),
    }
}

fn capture(provider: Provider) -> Capture {
    Capture::new(provider, 3, Some("/h/.claude".into()), Some("/w".into()))
}

#[test]
fn ids_follow_each_agents_grammar() {
    assert!(valid_id(Provider::Claude, A));
    assert!(valid_id(Provider::Codex, "01a23278-5cd5-76b3-845f-222002b0c407"));
    assert!(valid_id(Provider::OpenCode, "ses_dcd80f0d0ffer1rwmTCpIYxtIw"));
    assert!(!valid_id(Provider::OpenCode, A));
    assert!(!valid_id(Provider::Claude, "ses_dcd80f0d0ffer1rwmTCpIYxtIw"));
    assert!(!valid_id(Provider::Claude, "5a0e2f1c-6d3b-4e8a-9f21-0c7d4b9e3a1"), "one digit short");
    assert!(!valid_id(Provider::Shell, A));
}

#[test]
fn session_start_names_the_conversation_and_clear_replaces_it() {
    let mut c = capture(Provider::Claude);
    assert_eq!(c.apply(&start("startup", A), 10), Applied::Adopted);
    assert_eq!(c.conversation.as_deref(), Some(A));
    let prompt = Evidence::Hook { event: "UserPromptSubmit".into(), source: None, id: A.into(), transcript: None };
    assert_eq!(c.apply(&prompt, 11), Applied::Confirmed);
    assert_eq!(c.apply(&start("clear", B), 12), Applied::Adopted);
    assert_eq!((c.conversation.as_deref(), c.source.as_deref()), (Some(B), Some("SessionStart(clear)")));
    assert_eq!(c.transcript.as_deref(), Some(format!("/t/{B}.jsonl").as_str()));
}

#[test]
fn other_hooks_supply_an_id_only_when_none_was_reported_and_never_override_one() {
    let mut c = capture(Provider::Claude);
    let stop = |id: &str| Evidence::Hook { event: "Stop".into(), source: None, id: id.into(), transcript: None };
    assert_eq!(c.apply(&stop(A), 1), Applied::Adopted, "a missed SessionStart: the next hook tells");
    assert!(matches!(c.apply(&stop(B), 2), Applied::Ignored(_)));
    assert_eq!(c.conversation.as_deref(), Some(A));
    assert!(c.notes.last().unwrap().contains("not the session's conversation"));
}

#[test]
fn codex_notify_never_adopts_the_title_thread_nor_a_subagent() {
    let mut c = capture(Provider::Codex);
    let main = "01a23278-5cd5-76b3-845f-222002b0c407";
    let rollout = |id: &str| Some(format!("/h/.codex/sessions/2026/12/01/rollout-x-{id}.jsonl"));
    // Without hooks (desk wires only notify for Codex): the thread whose rollout Codex holds.
    assert!(matches!(
        c.apply(&Evidence::Notify { thread: TITLE.into(), rollout: None, subagent: false }, 1),
        Applied::Ignored(why) if why.contains("title thread")
    ));
    assert_eq!(
        c.apply(&Evidence::Notify { thread: main.into(), rollout: rollout(main), subagent: false }, 2),
        Applied::Adopted
    );
    let sub = "01a23279-0000-7000-8000-000000000001";
    assert!(matches!(
        c.apply(&Evidence::Notify { thread: sub.into(), rollout: rollout(sub), subagent: true }, 3),
        Applied::Ignored(_)
    ));
    assert_eq!(c.conversation.as_deref(), Some(main));
    // With hooks, SessionStart rules, and a notify of another thread changes nothing.
    let mut h = capture(Provider::Codex);
    h.apply(&start("startup", main), 1);
    let other = "01a23278-acef-7cf3-a150-29d6c5274a14";
    assert!(matches!(
        h.apply(&Evidence::Notify { thread: other.into(), rollout: rollout(other), subagent: false }, 2),
        Applied::Ignored(_)
    ));
    assert_eq!(
        h.apply(&Evidence::Notify { thread: main.into(), rollout: None, subagent: false }, 3),
        Applied::Confirmed
    );
}

#[test]
fn claudes_per_process_file_confirms_or_fills_in_and_is_ignored_for_untested_versions() {
    let mut c = capture(Provider::Claude);
    let file = |id: &str, tested| Evidence::ProcessFile { id: id.into(), version: Some("2.1.197".into()), tested };
    assert!(matches!(c.apply(&file(A, false), 1), Applied::Ignored(_)));
    assert_eq!(c.conversation, None);
    assert_eq!(c.apply(&file(A, true), 2), Applied::Adopted);
    assert_eq!(c.apply(&start("startup", A), 3), Applied::Confirmed);
    assert!(matches!(c.apply(&file(B, true), 4), Applied::Ignored(_)), "it may lag a /clear; hooks win");
}

#[test]
fn opencode_session_list_is_used_only_when_exactly_one_candidate_fits() {
    let mut c = capture(Provider::OpenCode);
    let list = |ids: &[&str]| Evidence::SessionList { candidates: words(ids) };
    assert!(matches!(c.apply(&list(&[]), 1), Applied::Ignored(_)));
    assert!(matches!(
        c.apply(&list(&["ses_dcd80f0d0ffer1rwmTCpIYxtIw", "ses_dcd80f0d0ffer1rwmTCpIYxtIx"]), 2),
        Applied::Ignored(why) if why.contains("does not guess")
    ));
    assert_eq!(c.apply(&list(&["ses_dcd80f0d0ffer1rwmTCpIYxtIw"]), 3), Applied::Adopted);
}

#[test]
fn a_foreign_or_malformed_id_is_never_adopted() {
    let mut c = capture(Provider::Claude);
    assert!(matches!(c.apply(&start("startup", "../../etc/passwd"), 1), Applied::Ignored(_)));
    assert_eq!(c.conversation, None);
}

#[test]
fn notes_stay_bounded() {
    let mut c = capture(Provider::Claude);
    for i in 0..100 {
        c.apply(&start("startup", if i % 2 == 0 { A } else { B }), i);
    }
    assert_eq!(c.notes.len(), CAPTURE_NOTES);
}

fn ctx(transcript: Transcript) -> ResumeContext<'static> {
    ResumeContext { provider: Provider::Claude, config_dir: Some("/h/.claude"), cwd: "/w", transcript, held_by: None }
}

#[test]
fn a_restart_resumes_only_under_the_same_config_dir_and_cwd_with_a_conversation_on_disk() {
    let mut c = capture(Provider::Claude);
    c.apply(&start("startup", A), 1);
    assert_eq!(
        plan_resume(Some(&c), &ctx(Transcript::Holds)),
        ResumePlan::Resume { conversation: A.into(), from_generation: 3 }
    );
    let fresh = |plan: ResumePlan| match plan {
        ResumePlan::Fresh { why } => why,
        other => panic!("expected a fresh start, got {other:?}"),
    };
    assert!(fresh(plan_resume(Some(&c), &ctx(Transcript::Missing))).contains("is gone"));
    assert!(fresh(plan_resume(Some(&c), &ctx(Transcript::Empty))).contains("no turn yet"));
    let other_dir = ResumeContext { config_dir: Some("/other/.claude"), ..ctx(Transcript::Holds) };
    assert_eq!(
        fresh(plan_resume(Some(&c), &other_dir)),
        format!("conversation {A} lives under /h/.claude; this start uses /other/.claude")
    );
    let other_cwd = ResumeContext { cwd: "/elsewhere", ..ctx(Transcript::Holds) };
    assert!(fresh(plan_resume(Some(&c), &other_cwd)).contains("this start runs in /elsewhere"));
    let taken = ResumeContext { held_by: Some("api"), ..ctx(Transcript::Holds) };
    assert_eq!(fresh(plan_resume(Some(&c), &taken)), format!("conversation {A} is session api's"));
    assert!(fresh(plan_resume(None, &ctx(Transcript::Holds))).contains("reported no conversation"));
    let shell = ResumeContext { provider: Provider::Shell, ..ctx(Transcript::Holds) };
    assert!(fresh(plan_resume(Some(&c), &shell)).contains("shell"));
}

#[test]
fn transcripts_hold_a_conversation_only_with_a_turn_in_them() {
    let claude_empty = r#"{"type":"mode"}
{"type":"permission-mode"}"#;
    assert!(!transcript_holds(Provider::Claude, claude_empty));
    assert!(transcript_holds(Provider::Claude, &format!("{claude_empty}\n{{\"type\":\"user\",\"message\":{{}}}}")));
    let codex_meta = r#"{"type":"session_meta","payload":{"id":"x"}}"#;
    assert!(!transcript_holds(Provider::Codex, codex_meta), "Codex died before its first turn was flushed");
    assert!(transcript_holds(Provider::Codex, &format!("{codex_meta}\n{{\"type\":\"response_item\"}}")));
    assert!(transcript_holds(Provider::Demo, r#"{"type":"prompt","text":"hi"}"#));
    assert!(!transcript_holds(Provider::Claude, "not json"));
}

#[test]
fn resume_flags_are_replaced_and_every_other_flag_kept() {
    let claude =
        words(&["claude", "--model", "opus", "--continue", "--resume", A, "--session-id=x", "-r", "--verbose"]);
    assert_eq!(strip_resume(Provider::Claude, &claude), words(&["claude", "--model", "opus", "--verbose"]));
    assert_eq!(
        with_resume(Provider::Claude, &claude, B),
        words(&["claude", "--model", "opus", "--verbose", "--resume", B])
    );
    assert_eq!(
        with_session_id(Provider::Claude, &claude, B),
        words(&["claude", "--model", "opus", "--verbose", "--session-id", B])
    );

    let codex = words(&["codex", "--no-daemon", "-c", "model=\"o3\"", "resume", "--last", "-m", "o3", "old-id"]);
    assert_eq!(
        strip_resume(Provider::Codex, &codex),
        words(&["codex", "--no-daemon", "-c", "model=\"o3\"", "-m", "o3"])
    );
    let id = "01a23278-5cd5-76b3-845f-222002b0c407";
    assert_eq!(
        with_resume(Provider::Codex, &words(&["codex", "--no-daemon"]), id),
        words(&["codex", "--no-daemon", "resume", id])
    );
    // A first prompt is not replayed into a resumed conversation.
    assert_eq!(
        strip_resume(Provider::Codex, &words(&["codex", "-c", "x=1", "fix the tests"])),
        words(&["codex", "-c", "x=1"])
    );

    let opencode =
        words(&["opencode", "/proj", "--session", "ses_dcd80f0d0ffer1rwmTCpIYxtIw", "-c", "--fork", "-m", "a/b"]);
    assert_eq!(strip_resume(Provider::OpenCode, &opencode), words(&["opencode", "/proj", "-m", "a/b"]));
    assert_eq!(
        with_resume(Provider::OpenCode, &words(&["opencode"]), "ses_dcd80f0d0ffer1rwmTCpIYxtIw"),
        words(&["opencode", "--session", "ses_dcd80f0d0ffer1rwmTCpIYxtIw"])
    );
}

#[test]
fn wrappers_and_non_interactive_commands_are_never_rewritten() {
    let wrapper = words(&["sh", "-c", "claude --resume x"]);
    assert!(!rewritable(Provider::Claude, &wrapper));
    assert_eq!(with_resume(Provider::Claude, &wrapper, A), wrapper);
    let exec = words(&["codex", "exec", "do it"]);
    assert!(!rewritable(Provider::Codex, &exec));
    assert_eq!(with_resume(Provider::Codex, &exec, A), exec);
    assert!(!rewritable(Provider::Claude, &words(&["claude", "-p", "hi"])));
    assert!(!rewritable(Provider::OpenCode, &words(&["opencode", "run", "hi"])));
    assert!(
        rewritable(Provider::Codex, &words(&["codex", "-c", "exec=1", "resume", A])),
        "a flag's value is not a subcommand"
    );
}

#[test]
fn each_agents_refusal_is_recognised_from_its_own_words() {
    let screen = |line: &str| vec![String::new(), line.to_string(), String::new()];
    assert_eq!(
        rejection(Provider::Claude, Some(1), &screen(&format!("No conversation found with session ID: {A}"))),
        Some(format!("No conversation found with session ID: {A}"))
    );
    assert!(
        rejection(Provider::Codex, Some(1), &screen("ERROR: No saved session found with ID x. Run `codex resume`"))
            .is_some()
    );
    assert!(rejection(Provider::OpenCode, Some(1), &screen("Error: Session not found: ses_x")).is_some());
    assert_eq!(rejection(Provider::Claude, Some(0), &screen("No conversation found with session ID: x")), None);
    assert_eq!(rejection(Provider::Claude, Some(1), &screen("Segmentation fault")), None);
}

#[test]
fn codex_says_its_conversation_on_the_way_out() {
    let id = "01a23278-5cd5-76b3-845f-222002b0c407";
    let screen = words(&["Token usage: total=240", "To continue this session, run:", &format!("  codex resume {id}")]);
    assert_eq!(exit_words(Provider::Codex, &screen), Some(id.to_string()));
    assert_eq!(exit_words(Provider::Claude, &screen), None);
    assert_eq!(exit_words(Provider::Codex, &words(&["codex resume --last"])), None);
}

#[test]
fn config_dirs_come_from_each_agents_variable_or_home() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    };
    assert_eq!(config_dir(Provider::Claude, env(&[("HOME", "/h")])).as_deref(), Some("/h/.claude"));
    assert_eq!(
        config_dir(Provider::Claude, env(&[("HOME", "/h"), ("CLAUDE_CONFIG_DIR", "/c")])).as_deref(),
        Some("/c")
    );
    assert_eq!(config_dir(Provider::Codex, env(&[("HOME", "/h/"), ("CODEX_HOME", "")])).as_deref(), Some("/h/.codex"));
    assert_eq!(
        config_dir(Provider::OpenCode, env(&[("HOME", "/h"), ("XDG_DATA_HOME", "/d")])).as_deref(),
        Some("/d/opencode")
    );
    assert_eq!(config_dir(Provider::Shell, env(&[("HOME", "/h")])), None);
    assert_eq!(
        config_dir(Provider::Demo, env(&[("HOME", "/h"), ("DESK_HOME", "/d/")])).as_deref(),
        Some("/d/demo-agent")
    );
    assert_eq!(config_dir(Provider::Demo, env(&[("HOME", "/h")])).as_deref(), Some("/h/.desk-demo-agent"));
}
