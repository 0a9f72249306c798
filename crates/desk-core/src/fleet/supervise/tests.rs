use super::*;

const S: u64 = 1000;
const MIN: u64 = 60 * S;

fn ended(generation: u32, how: EndedHow, started_ms: u64, ended_ms: u64) -> Ended {
    Ended { generation, started_ms, ended_ms, how, cause: Cause::Unknown }
}

fn crash(generation: u32, at: u64) -> Ended {
    ended(generation, EndedHow::Exited(3), at.saturating_sub(S), at)
}

#[test]
fn policies_decide_which_ends_restart() {
    let mut sup = Supervisor::default();
    let clean = ended(1, EndedHow::Exited(0), 0, 10 * S);
    assert_eq!(sup.on_end("a", RestartPolicy::Never, &crash(1, 10 * S), 10 * S), Decision::Nothing);
    assert_eq!(sup.on_end("b", RestartPolicy::OnFailure, &clean, 10 * S), Decision::Nothing);
    assert_eq!(sup.on_end("c", RestartPolicy::Always, &clean, 10 * S), Decision::Restart { at_ms: 11 * S });
    let killed = ended(1, EndedHow::Signalled(9), 0, 10 * S);
    assert_eq!(sup.on_end("d", RestartPolicy::OnFailure, &killed, 10 * S), Decision::Restart { at_ms: 11 * S });
    let lost = ended(1, EndedHow::Lost, 0, 10 * S);
    assert_eq!(sup.on_end("e", RestartPolicy::OnFailure, &lost, 10 * S), Decision::Restart { at_ms: 11 * S });
}

#[test]
fn each_generation_is_judged_once() {
    let mut sup = Supervisor::default();
    assert!(matches!(sup.on_end("a", RestartPolicy::Always, &crash(4, 10 * S), 10 * S), Decision::Restart { .. }));
    // The daemon restarted and sees the same end again: nothing more.
    assert_eq!(sup.on_end("a", RestartPolicy::Always, &crash(4, 10 * S), 12 * S), Decision::Nothing);
    assert_eq!(sup.on_end("a", RestartPolicy::Always, &crash(3, 10 * S), 12 * S), Decision::Nothing);
}

/// Drive one session through `n` quick crashes, performing each restart as soon as allowed;
/// returns when each restart began, and the last decision.
fn crash_loop(sup: &mut Supervisor, name: &str, mut now: u64, n: u32) -> (Vec<u64>, Decision) {
    let mut begun = Vec::new();
    let mut last = Decision::Nothing;
    for generation in 1..=n {
        last = sup.on_end(name, RestartPolicy::OnFailure, &crash(generation, now), now);
        let Decision::Restart { .. } = last else { break };
        let at = sup.wake_at().unwrap();
        assert_eq!(sup.due(at), Some((name.to_string(), generation)));
        begun.push(at);
        sup.begin(name, at);
        sup.on_up(name, generation + 1, true);
        now = at + 100;
    }
    (begun, last)
}

#[test]
fn the_crash_loop_limit_holds_a_session_after_three_restarts_in_five_minutes() {
    let mut sup = Supervisor::default();
    // Alone in the fleet, each restart still waits for the fleet's one-a-minute slot.
    let (begun, last) = crash_loop(&mut sup, "a", 0, 4);
    assert_eq!(begun, vec![S, S + MIN, S + 2 * MIN]);
    assert_eq!(last, Decision::Held { hold: Hold::CrashLoop { restarts: 3, window_secs: 300 }, notify: true });
    let s = sup.get("a").unwrap();
    assert_eq!(s.health(10 * MIN).as_deref(), Some("failed: restarted 3 times in 5 minutes"));
    assert_eq!(sup.due(100 * MIN), None, "a held session is not restarted");
    assert_eq!(sup.wake_at(), None);
}

#[test]
fn backoff_doubles_from_one_second_to_five_minutes() {
    let mut sup = Supervisor::default();
    let mut delays = Vec::new();
    let mut now = 0;
    for generation in 1..=12u32 {
        let Decision::Restart { at_ms } = sup.on_end("a", RestartPolicy::Always, &crash(generation, now), now) else {
            panic!("generation {generation} was not restarted");
        };
        delays.push((at_ms - now) / S);
        // Restarts far apart (past the crash-loop window) but each generation short-lived:
        // the streak goes on, the window does not fill.
        sup.begin("a", at_ms);
        sup.on_up("a", generation + 1, true);
        sup.sessions.get_mut("a").unwrap().restarts.clear();
        now = at_ms + 10 * MIN;
    }
    assert_eq!(delays, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
}

#[test]
fn a_generation_that_ran_long_starts_the_backoff_over() {
    let mut sup = Supervisor::default();
    let (_, _) = crash_loop(&mut sup, "a", 0, 2);
    assert_eq!(sup.get("a").unwrap().streak, 2);
    let now = 60 * MIN;
    let long = ended(3, EndedHow::Exited(1), now - 30 * MIN, now);
    assert_eq!(sup.on_end("a", RestartPolicy::OnFailure, &long, now), Decision::Restart { at_ms: now + S });
}

#[test]
fn the_fleet_restarts_at_most_one_session_a_minute() {
    let mut sup = Supervisor::default();
    sup.on_end("a", RestartPolicy::Always, &crash(1, 0), 0);
    sup.on_end("b", RestartPolicy::Always, &crash(1, 0), 0);
    assert_eq!(sup.due(S), Some(("a".to_string(), 1)));
    sup.begin("a", S);
    assert_eq!(sup.due(2 * S), None, "b waits for the fleet's slot");
    assert_eq!(sup.wake_at(), Some(S + MIN));
    assert_eq!(sup.get("b").unwrap().health(2 * S).as_deref(), Some("restarting"));
    assert_eq!(sup.due(S + MIN), Some(("b".to_string(), 1)));
}

#[test]
fn nothing_restarts_what_the_operator_stopped_or_what_the_agent_refused() {
    let mut sup = Supervisor::default();
    let mut stopped = crash(2, 10 * S);
    stopped.cause = Cause::Operator { by: "desk down".into() };
    assert_eq!(
        sup.on_end("a", RestartPolicy::Always, &stopped, 10 * S),
        Decision::Held { hold: Hold::Stopped { by: "desk down".into() }, notify: false }
    );
    assert_eq!(sup.get("a").unwrap().health(0).as_deref(), Some("stopped by desk down"));
    let mut rejected = crash(1, 10 * S);
    rejected.cause = Cause::ResumeRejected { message: "No conversation found with session ID: x".into() };
    let d = sup.on_end("b", RestartPolicy::Always, &rejected, 10 * S);
    assert!(matches!(d, Decision::Held { notify: true, .. }), "{d:?}");
    assert_eq!(
        sup.get("b").unwrap().health(0).as_deref(),
        Some("failed: resume rejected: No conversation found with session ID: x")
    );
    let mut limited = crash(1, 10 * S);
    limited.cause = Cause::ProviderError { message: "API Error: 429 rate limit".into() };
    assert!(matches!(sup.on_end("c", RestartPolicy::OnFailure, &limited, 10 * S), Decision::Held { notify: true, .. }));
    assert_eq!(sup.due(100 * MIN), None);
}

#[test]
fn an_operator_start_ends_a_hold_and_the_failure_count() {
    let mut sup = Supervisor::default();
    crash_loop(&mut sup, "a", 0, 4);
    assert!(matches!(sup.get("a").unwrap().phase, Phase::Held { .. }));
    sup.on_up("a", 5, false);
    let s = sup.get("a").unwrap();
    assert_eq!((s.phase.clone(), s.restarts.len(), s.streak), (Phase::Idle, 0, 0));
    assert_eq!(s.judged, 4);
}

#[test]
fn a_restart_begun_before_the_daemon_died_is_not_begun_again() {
    let mut sup = Supervisor::default();
    sup.on_end("a", RestartPolicy::Always, &crash(3, 0), 0);
    sup.begin("a", S);
    // The state as persisted before the daemon died, read back.
    let text = serde_json::to_string(&sup).unwrap();
    let mut back: Supervisor = serde_json::from_str(&text).unwrap();
    assert_eq!(back, sup);
    let mut never_started = back.clone();
    // The new generation 4 exists: the restart happened.
    back.recover("a", 4, 10 * S);
    assert_eq!(back.get("a").unwrap().phase, Phase::Idle);
    assert_eq!(back.due(10 * MIN), None);
    // No generation past 3: it never started anything; due again (the fleet slot counts it).
    never_started.recover("a", 3, 10 * S);
    assert_eq!(never_started.get("a").unwrap().phase, Phase::Waiting { of: 3, at_ms: 10 * S });
    assert_eq!(never_started.due(S + MIN), Some(("a".to_string(), 3)));
}

#[test]
fn a_failed_start_backs_off_and_counts_toward_the_limit() {
    let mut sup = Supervisor::default();
    let Decision::Restart { at_ms } = sup.on_end("a", RestartPolicy::Always, &crash(1, 0), 0) else { panic!() };
    sup.begin("a", at_ms);
    assert_eq!(sup.start_failed("a", 1, at_ms), Decision::Restart { at_ms: at_ms + 2 * S });
}

#[test]
fn a_session_back_to_policy_never_is_forgotten_unless_held() {
    let mut sup = Supervisor::default();
    sup.track("a", RestartPolicy::Always);
    sup.track("a", RestartPolicy::Never);
    assert!(sup.get("a").is_none());
    let mut stopped = crash(1, 0);
    stopped.cause = Cause::Operator { by: "desk kill".into() };
    sup.on_end("b", RestartPolicy::Never, &stopped, 0);
    sup.track("b", RestartPolicy::Never);
    assert!(sup.get("b").is_some(), "its hold says why it is down");
}

#[test]
fn provider_errors_are_found_in_the_last_lines_only() {
    let screen = |lines: &[&str]| lines.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        provider_error(&screen(&["working…", "  API Error: 429 Too Many Requests · rate limit reached  ", ""]))
            .as_deref(),
        Some("API Error: 429 Too Many Requests · rate limit reached")
    );
    assert_eq!(
        provider_error(&screen(&["Invalid API key · Please run /login"])).as_deref(),
        Some("Invalid API key · Please run /login")
    );
    assert_eq!(provider_error(&screen(&["panic: index out of range", "exit status 2"])), None);
    let mut old = screen(&["rate limit reached"]);
    old.extend(std::iter::repeat_n(String::from("later output"), PROVIDER_ERROR_LINES));
    assert_eq!(provider_error(&old), None, "an error the agent got past is not why it ended");
}

#[test]
fn compressed_limits_scale_every_time_and_say_so_in_the_health() {
    let mut sup = Supervisor { limits: Limits::compressed(100), ..Supervisor::default() };
    assert_eq!(sup.limits.backoff_first, Duration::from_millis(10));
    assert_eq!(sup.limits.fleet_interval, Duration::from_millis(600));
    let (begun, last) = crash_loop(&mut sup, "a", 0, 4);
    assert_eq!(begun, vec![10, 610, 1210]);
    let Decision::Held { hold, .. } = last else { panic!("{last:?}") };
    assert_eq!(hold.health(), "failed: restarted 3 times in 3 seconds");
}
