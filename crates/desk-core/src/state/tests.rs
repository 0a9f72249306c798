//! The authority driven by a scripted clock.

use super::*;
use crate::provider::Provider;
use desk_term::events::Mode;

struct Clock {
    t0: Instant,
    ms: u64,
}

impl Clock {
    fn new() -> Clock {
        Clock { t0: Instant::now(), ms: 0 }
    }
    fn at(&self) -> (Instant, u64) {
        (self.t0 + Duration::from_millis(self.ms), 1_000_000 + self.ms)
    }
    fn advance(&mut self, ms: u64) -> (Instant, u64) {
        self.ms += ms;
        self.at()
    }
}

fn demo(clock: &Clock) -> Authority {
    let (now, ms) = clock.at();
    Authority::new(RuleSet::builtin(Provider::Demo), now, ms)
}

fn hook(event: &str, extra: serde_json::Value) -> HookFact {
    let mut payload = serde_json::json!({ "hook_event_name": event });
    if let (Some(p), Some(e)) = (payload.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    hooks::interpret(Provider::Claude, &payload)
}

fn rows(lines: &[&str]) -> Vec<String> {
    lines.iter().map(|s| s.to_string()).collect()
}

#[test]
fn bracketed_paste_makes_a_starting_session_running() {
    let mut clock = Clock::new();
    let mut a = demo(&clock);
    assert_eq!(a.lifecycle(), Lifecycle::Starting);
    let (now, ms) = clock.advance(300);
    let changes = a.on_mode(Mode::BracketedPaste, true, now, ms);
    assert_eq!(a.lifecycle(), Lifecycle::Running);
    assert!(a.view().ready);
    assert_eq!(changes[0].change, AxisChange::Lifecycle { from: Lifecycle::Starting, to: Lifecycle::Running });
}

#[test]
fn quiet_output_makes_it_ready_only_after_the_start_period() {
    let mut clock = Clock::new();
    let (now, ms) = clock.at();
    let mut a = Authority::new(RuleSet::builtin(Provider::Shell), now, ms);
    let (now, ms) = clock.advance(200);
    a.on_quiet(now, ms);
    assert_eq!(a.lifecycle(), Lifecycle::Starting);
    let (now, ms) = clock.advance(1000);
    a.on_quiet(now, ms);
    assert_eq!(a.lifecycle(), Lifecycle::Running);
}

#[test]
fn quiet_output_does_not_make_an_agent_ready_that_signals_readiness_itself() {
    let mut clock = Clock::new();
    let mut a = demo(&clock);
    let (now, ms) = clock.advance(5000);
    a.on_quiet(now, ms);
    assert_eq!(a.lifecycle(), Lifecycle::Starting);
}

#[test]
fn a_spinner_title_means_working_until_its_lease_runs_out() {
    let mut clock = Clock::new();
    let mut a = demo(&clock);
    let (now, ms) = clock.advance(10);
    a.on_title("✳ demo", now, ms);
    assert_eq!(a.activity(), Activity::Idle);
    let (now, ms) = clock.advance(10);
    a.on_title("⠋ demo", now, ms);
    assert_eq!(a.activity(), Activity::Working);
    assert_eq!(a.view().activity.evidence.source, EvidenceSource::Title);
    // The spinner animates: each frame renews the lease.
    for frame in ["⠙ demo", "⠹ demo", "⠸ demo"] {
        let (now, ms) = clock.advance(2000);
        a.on_title(frame, now, ms);
        assert_eq!(a.activity(), Activity::Working);
    }
    // It stops animating (the agent hung): after the lease, unknown — never a stale working.
    let deadline = a.next_deadline(clock.at().0).unwrap();
    assert_eq!(deadline, clock.at().0 + Duration::from_millis(3000));
    let (now, ms) = clock.advance(3000);
    let changes = a.tick(now, ms);
    assert_eq!(a.activity(), Activity::Unknown);
    assert!(changes.iter().any(|c| matches!(c.change, AxisChange::Activity { to: Activity::Unknown, .. })));
    assert!(matches!(a.view().health.value, Health::Degraded(ref r) if r.contains("expired")), "{:?}", a.view().health);
    // Fresh evidence restores both.
    let (now, ms) = clock.advance(100);
    a.on_title("✳ demo", now, ms);
    assert_eq!(a.activity(), Activity::Idle);
    assert_eq!(a.view().health.value, Health::Ok);
}

#[test]
fn hooks_outrank_titles() {
    let mut clock = Clock::new();
    let mut a = demo(&clock);
    let (now, ms) = clock.advance(10);
    a.on_title("✳ demo", now, ms);
    let (now, ms) = clock.advance(10);
    a.on_hook(&hook("UserPromptSubmit", serde_json::json!({"prompt": "do it"})), now, ms);
    assert_eq!(a.activity(), Activity::Working);
    assert_eq!(a.view().activity.evidence.source, EvidenceSource::Hook);
    assert!(a.view().activity.evidence.detail.contains("do it"));
    let (now, ms) = clock.advance(10);
    a.on_hook(&hook("Stop", serde_json::json!({})), now, ms);
    assert_eq!(a.activity(), Activity::Idle);
}

#[test]
fn an_open_tool_call_keeps_working_past_the_hook_lease() {
    let mut clock = Clock::new();
    let mut a = demo(&clock);
    let (now, ms) = clock.advance(10);
    a.on_hook(&hook("PreToolUse", serde_json::json!({"tool_name": "Bash"})), now, ms);
    let (now, ms) = clock.advance(60_000);
    a.tick(now, ms);
    assert_eq!(a.activity(), Activity::Working);
    let (now, ms) = clock.advance(10);
    a.on_hook(&hook("PostToolUse", serde_json::json!({"tool_name": "Bash"})), now, ms);
    let (now, ms) = clock.advance(15_001);
    a.tick(now, ms);
    assert_eq!(a.activity(), Activity::Unknown);
}

#[test]
fn a_visible_approval_dialog_is_blocked_even_if_hooks_say_working() {
    let mut clock = Clock::new();
    let mut a = demo(&clock);
    let (now, ms) = clock.advance(10);
    a.on_hook(&hook("UserPromptSubmit", serde_json::json!({})), now, ms);
    let (now, ms) = clock.advance(10);
    a.on_screen(&rows(&["> approve-me", "", "Do you want to run this command?", "❯ 1. Yes", "  2. No"]), now, ms);
    assert_eq!(a.activity(), Activity::Blocked);
    assert_eq!(a.view().wait.as_deref(), Some("approval"));
    assert_eq!(a.view().activity.evidence.source, EvidenceSource::Screen);
    // Answered: the dialog is gone; the hook's working claim (still leased) is what remains.
    let (now, ms) = clock.advance(10);
    a.on_screen(&rows(&["> approve-me", "● running"]), now, ms);
    assert_eq!(a.activity(), Activity::Working);
}

#[test]
fn a_permission_hook_blocks_until_the_next_hook() {
    let mut clock = Clock::new();
    let mut a = demo(&clock);
    let (now, ms) = clock.advance(10);
    a.on_hook(
        &hook(
            "Notification",
            serde_json::json!({"notification_type": "permission_prompt", "message": "needs permission"}),
        ),
        now,
        ms,
    );
    assert_eq!(a.activity(), Activity::Blocked);
    let (now, ms) = clock.advance(600_000);
    a.tick(now, ms);
    assert_eq!(a.activity(), Activity::Blocked, "a block does not lapse: the operator has not answered");
    let (now, ms) = clock.advance(10);
    a.on_hook(&hook("PostToolUse", serde_json::json!({"tool_name": "Bash"})), now, ms);
    assert_eq!(a.activity(), Activity::Working);
}

#[test]
fn exit_dominates_everything() {
    let mut clock = Clock::new();
    let mut a = demo(&clock);
    let (now, ms) = clock.advance(10);
    a.on_hook(&hook("UserPromptSubmit", serde_json::json!({})), now, ms);
    let (now, ms) = clock.advance(10);
    let changes = a.on_exit("exited with code 0", now, ms);
    assert_eq!(a.lifecycle(), Lifecycle::Exited);
    assert_eq!(a.activity(), Activity::Unknown);
    assert!(changes.iter().any(|c| matches!(c.change, AxisChange::Lifecycle { to: Lifecycle::Exited, .. })));
    let (now, ms) = clock.advance(10);
    a.on_title("⠋ demo", now, ms);
    assert_eq!(a.activity(), Activity::Unknown, "nothing after exit revives activity");
    let (now, ms) = clock.advance(10);
    a.on_mode(Mode::BracketedPaste, true, now, ms);
    assert_eq!(a.lifecycle(), Lifecycle::Exited, "lifecycle only moves forward");
}

#[test]
fn silent_hooks_degrade_health_when_the_provider_expects_them() {
    let text = "provider = \"x\"\nhooks = true\nexpect_hook_within_ms = 5000\n";
    let mut clock = Clock::new();
    let (now, ms) = clock.at();
    let mut a = Authority::new(RuleSet::parse(text, "x").unwrap(), now, ms);
    assert_eq!(a.next_deadline(now), Some(now + Duration::from_millis(5000)));
    let (now, ms) = clock.advance(5000);
    a.tick(now, ms);
    assert!(matches!(a.view().health.value, Health::Degraded(ref r) if r.contains("no hook event")));
    assert_eq!(
        a.next_deadline(now),
        Some(clock.t0 + READY_WITHIN),
        "a deadline that has passed is not reported again; only the readiness check is left"
    );
    let (now, ms) = clock.advance(10);
    a.on_hook(&hook("SessionStart", serde_json::json!({"source": "startup"})), now, ms);
    assert_eq!(a.view().health.value, Health::Ok);
    assert_eq!(a.lifecycle(), Lifecycle::Running);
    assert_eq!(a.activity(), Activity::Idle);
}

#[test]
fn a_shell_has_no_activity_rules_and_stays_unknown() {
    let mut clock = Clock::new();
    let (now, ms) = clock.at();
    let mut a = Authority::new(RuleSet::builtin(Provider::Shell), now, ms);
    let (now, ms) = clock.advance(10);
    a.on_title("⠋ anything", now, ms);
    a.on_screen(&rows(&["$ make", "building..."]), now, ms);
    assert_eq!(a.activity(), Activity::Unknown);
    assert_eq!(a.view().activity.evidence.source, EvidenceSource::None);
}

#[test]
fn a_session_never_ready_turns_degraded_and_recovers_when_the_signal_comes() {
    let mut clock = Clock::new();
    let (now, ms) = clock.at();
    let mut a = Authority::new(RuleSet::builtin(Provider::Codex), now, ms);
    assert_eq!(a.next_deadline(now), Some(now + READY_WITHIN));
    let (now, ms) = clock.advance(READY_WITHIN.as_millis() as u64 - 1);
    a.tick(now, ms);
    assert_eq!(a.view().health.value, Health::Ok);
    let (now, ms) = clock.advance(1);
    let changes = a.tick(now, ms);
    assert!(
        changes.iter().any(|c| matches!(c.change, AxisChange::Health { to: Health::Degraded(_), .. })),
        "{changes:?}"
    );
    let Health::Degraded(reason) = a.view().health.value else { panic!("not degraded") };
    assert!(reason.contains("not ready 60 s after start") && reason.contains("state report"), "{reason}");
    assert_eq!(a.lifecycle(), Lifecycle::Starting);
    assert_eq!(a.next_deadline(now), None);

    // The report comes at last: running, and health is no longer held degraded.
    let (now, ms) = clock.advance(500);
    a.on_report("idle", None, now, ms);
    assert_eq!(a.lifecycle(), Lifecycle::Running);
    assert_eq!(a.view().health.value, Health::Ok);
}

fn provider(provider: Provider, clock: &Clock) -> Authority {
    let (now, ms) = clock.at();
    Authority::new(RuleSet::builtin(provider), now, ms)
}

/// Claude Code's screen with its approval dialog up, and after an Escape dismissed it.
fn claude_dialog() -> Vec<String> {
    rows(&[
        "❯ Please run the command",
        "● Bash(touch desk-approved.txt)",
        "─────────────────────────────",
        " Bash command",
        " Do you want to proceed?",
        " ❯ 1. Yes",
        "   3. No",
        " Esc to cancel · Tab to amend · ctrl+e to explain",
    ])
}

fn claude_interrupted(footer: &str) -> Vec<String> {
    rows(&[
        "❯ Please run the command",
        "  ⎿  Interrupted · What should Claude do instead?",
        "─────────────────────────────",
        "❯ ",
        "─────────────────────────────",
        footer,
    ])
}

#[test]
fn a_claude_dialog_stays_blocked_while_the_operator_moves_its_highlight() {
    // `desk keys NAME Down Down` on Claude's dialog: `❯` leaves "1. Yes" for "3. No"; the dialog
    // is still up and an Enter still answers it, while the title stays the idle `✳`.
    let mut clock = Clock::new();
    let mut a = provider(Provider::Claude, &clock);
    let (now, ms) = clock.advance(10);
    a.on_title("✳ Claude Code", now, ms);
    let (now, ms) = clock.advance(500);
    a.on_screen(&claude_dialog(), now, ms);
    assert_eq!(a.activity(), Activity::Blocked);
    for highlighted in [2, 3] {
        let (now, ms) = clock.advance(100);
        let mark = |n: u32| if n == highlighted { " ❯ " } else { "   " };
        a.on_screen(
            &rows(&[
                "● Bash(touch desk-approved.txt)",
                "─────────────────────────────",
                " Bash command",
                " Do you want to proceed?",
                &format!("{}1. Yes", mark(1)),
                &format!("{}2. Yes, and always allow access to work/ from this project", mark(2)),
                &format!("{}3. No", mark(3)),
                " Esc to cancel · Tab to amend · ctrl+e to explain",
            ]),
            now,
            ms,
        );
        assert_eq!(a.activity(), Activity::Blocked, "highlight on {highlighted}: {:?}", a.view().activity);
    }
}

#[test]
fn a_dialog_dismissed_after_the_notification_hook_ends_blocked_when_the_idle_prompt_shows() {
    let mut clock = Clock::new();
    let mut a = provider(Provider::Claude, &clock);
    let (now, ms) = clock.advance(10);
    a.on_title("✳ Claude Code", now, ms);
    let (now, ms) = clock.advance(10);
    a.on_hook(&hook("UserPromptSubmit", serde_json::json!({"prompt": "run it"})), now, ms);
    let (now, ms) = clock.advance(500);
    a.on_hook(&hook("PermissionRequest", serde_json::json!({"tool_name": "Bash"})), now, ms);
    a.on_screen(&claude_dialog(), now, ms);
    assert_eq!(a.activity(), Activity::Blocked);
    // Claude's Notification hook comes about 6 s after the dialog: still blocked, rightly.
    let (now, ms) = clock.advance(6000);
    a.on_hook(
        &hook("Notification", serde_json::json!({"notification_type": "permission_prompt", "message": "Claude needs your permission to use Bash"})),
        now,
        ms,
    );
    assert_eq!(a.activity(), Activity::Blocked);
    // Escape: no hook, the title never changed; the idle prompt is back.
    let (now, ms) = clock.advance(4000);
    a.on_screen(&claude_interrupted("  ? for shortcuts · ← for agents"), now, ms);
    assert_eq!(a.activity(), Activity::Idle, "{:?}", a.view().activity);
    let (now, ms) = clock.advance(600_000);
    a.tick(now, ms);
    assert_eq!(a.activity(), Activity::Idle);
}

#[test]
fn a_blocked_hook_about_a_dialog_that_left_the_screen_ends_on_the_idle_title() {
    // The same, with Escape before the Notification hook, on a screen no idle rule describes:
    // the dialog leaving the screen plus the idle title is enough.
    let mut clock = Clock::new();
    let mut a = provider(Provider::Claude, &clock);
    let (now, ms) = clock.advance(10);
    a.on_title("✳ Claude Code", now, ms);
    let (now, ms) = clock.advance(10);
    a.on_hook(&hook("PermissionRequest", serde_json::json!({"tool_name": "Bash"})), now, ms);
    let (now, ms) = clock.advance(30);
    a.on_screen(&claude_dialog(), now, ms);
    assert_eq!(a.activity(), Activity::Blocked);
    let (now, ms) = clock.advance(1500);
    a.on_screen(&claude_interrupted(""), now, ms);
    assert_eq!(a.activity(), Activity::Idle, "{:?}", a.view().activity);
    assert!(a.view().activity.evidence.detail.contains("gone"), "{:?}", a.view().activity.evidence);
}

#[test]
fn a_late_notification_cannot_block_an_agent_whose_idle_prompt_shows() {
    let mut clock = Clock::new();
    let mut a = provider(Provider::Claude, &clock);
    let (now, ms) = clock.advance(10);
    a.on_screen(&claude_interrupted("  ? for shortcuts · ← for agents"), now, ms);
    let (now, ms) = clock.advance(10);
    a.on_hook(
        &hook(
            "Notification",
            serde_json::json!({"notification_type": "permission_prompt", "message": "needs permission"}),
        ),
        now,
        ms,
    );
    assert_eq!(a.activity(), Activity::Idle);
    // A dialog that does show is blocked, whatever came before.
    let (now, ms) = clock.advance(10);
    a.on_screen(&claude_dialog(), now, ms);
    assert_eq!(a.activity(), Activity::Blocked);
}

#[test]
fn an_interrupted_turn_ends_the_hook_s_working_claim_when_the_idle_title_returns() {
    let mut clock = Clock::new();
    let mut a = provider(Provider::Claude, &clock);
    let (now, ms) = clock.advance(10);
    a.on_title("✳ Claude Code", now, ms);
    let (now, ms) = clock.advance(10);
    a.on_hook(&hook("UserPromptSubmit", serde_json::json!({"prompt": "long task"})), now, ms);
    a.on_title("⠂ Claude Code", now, ms);
    assert_eq!(a.activity(), Activity::Working);
    // Escape mid-turn: no Stop hook, the idle title comes back.
    let (now, ms) = clock.advance(1000);
    a.on_title("✳ Claude Code", now, ms);
    assert_eq!(a.activity(), Activity::Idle);
}

fn codex_working_screen(secs: u32) -> Vec<String> {
    rows(&["› earlier prompt", "", &format!("• Working ({secs}s • esc to interrupt)"), "", "› ", "  gpt-5 default · ~"])
}

#[test]
fn codex_state_reports_after_a_turn_complete_hook_move_activity_on_every_turn() {
    let mut clock = Clock::new();
    let mut a = provider(Provider::Codex, &clock);
    let (now, ms) = clock.advance(10);
    a.on_report("idle", None, now, ms);
    for turn in 1..=3 {
        let (now, ms) = clock.advance(2000);
        a.on_report("working", None, now, ms);
        assert_eq!(a.activity(), Activity::Working, "turn {turn} started");
        let (now, ms) = clock.advance(300);
        a.on_screen(&codex_working_screen(0), now, ms);
        assert_eq!(a.activity(), Activity::Working, "turn {turn} draws its working line");
        let (now, ms) = clock.advance(3000);
        a.on_output(now, ms);
        a.on_report("done", None, now, ms);
        let (now, ms) = clock.advance(5);
        a.on_hook(&hooks::interpret(Provider::Codex, &serde_json::json!({"type": "agent-turn-complete"})), now, ms);
        a.on_screen(&rows(&["› earlier prompt", "", "• Done.", "", "› ", "  gpt-5 default · ~"]), now, ms);
        assert_eq!(a.activity(), Activity::Idle, "turn {turn} ended");
    }
}

#[test]
fn a_late_turn_complete_hook_does_not_end_the_turn_the_screen_shows() {
    let mut clock = Clock::new();
    let mut a = provider(Provider::Codex, &clock);
    let (now, ms) = clock.advance(10);
    a.on_report("working", None, now, ms);
    a.on_screen(&codex_working_screen(1), now, ms);
    // A side request of the previous turn finishes late.
    let (now, ms) = clock.advance(1000);
    a.on_output(now, ms);
    a.on_hook(&hooks::interpret(Provider::Codex, &serde_json::json!({"type": "agent-turn-complete"})), now, ms);
    assert_eq!(a.activity(), Activity::Working, "{:?}", a.view().activity);
    assert_eq!(a.view().activity.evidence.source, EvidenceSource::Screen);
    // The turn really ends: the working line goes, the program says so.
    let (now, ms) = clock.advance(1000);
    a.on_report("done", None, now, ms);
    a.on_screen(&rows(&["› ", "  gpt-5 default · ~"]), now, ms);
    assert_eq!(a.activity(), Activity::Idle);
}

#[test]
fn lapsed_newer_evidence_does_not_bring_back_an_older_idle_claim() {
    let mut clock = Clock::new();
    let mut a = demo(&clock);
    let (now, ms) = clock.advance(10);
    a.on_title("✳ demo", now, ms);
    let (now, ms) = clock.advance(10);
    a.on_hook(&hook("UserPromptSubmit", serde_json::json!({})), now, ms);
    let (now, ms) = clock.advance(15_001);
    a.tick(now, ms);
    assert_eq!(a.activity(), Activity::Unknown, "the turn's evidence stopped; the idle title is older than it");
}
