//! The daemon killed at every step of the delivery pipeline (`DESK_FAILPOINT`), then
//! restarted: every prompt reaches the agent exactly once — stuck (interrupted) only where a
//! write to the agent left its outcome unknown, never twice, never lost. The demo agent's
//! prompt log is the ground truth; the engine's own crash oracle (crates/desk-core, engine
//! tests `crash`) crashes it between every two actions of many more scenarios.

use crate::support::{Home, alive, eventually, prompts};

fn crash_at(step: &str) -> (serde_json::Value, usize) {
    let home = Home::new();
    let log = home.demo("c", &[]);
    eventually("the agent to be ready", || {
        let s = home.session("c").ok_or("no session")?;
        if s["state"]["ready"] == true { Ok(()) } else { Err(s["state"].to_string()) }
    });
    let doomed = home.serve_with(&[("DESK_FAILPOINT", step)]);
    let text = format!("delivered despite a crash at {step}");
    let id = home.ok(&["send", "c", &text]).trim().to_string();
    eventually(&format!("the daemon to crash at {step}"), || if alive(doomed) { Err("alive".into()) } else { Ok(()) });
    let restarted = home.serve();
    assert_ne!(restarted, doomed);
    let item = home.settled(&id);
    // Give an agent that was handed the prompt time to log it before counting.
    if item["state"] == "delivered" {
        eventually("the submitted prompt to be logged", || {
            if prompts(&log).iter().any(|p| p == &text) { Ok(()) } else { Err(format!("{:?}", prompts(&log))) }
        });
    }
    let times = prompts(&log).iter().filter(|p| **p == text).count();
    match item["state"].as_str() {
        Some("delivered") => assert_eq!(times, 1, "{step}: delivered but logged {times} times: {item:#}"),
        Some("stuck") => assert!(times <= 1, "{step}: stuck and logged {times} times: {item:#}"),
        other => panic!("{step}: item ended {other:?}: {item:#}"),
    }
    (item, times)
}

macro_rules! crash_test {
    ($name:ident, $step:literal, $expect:literal) => {
        #[test]
        fn $name() {
            let (item, times) = crash_at($step);
            assert_eq!(item["state"], $expect, "{item:#}");
            if $expect == "stuck" {
                assert_eq!(item["stuck"], "interrupted", "{item:#}");
                assert_eq!(times, 0);
            }
        }
    };
}

// Nothing typed yet: ingest is idempotent and the item is simply delivered.
crash_test!(a_crash_after_the_queue_write_loses_and_doubles_nothing, "after-queue-write", "delivered");
crash_test!(a_crash_after_ingest_loses_and_doubles_nothing, "after-ingest", "delivered");
// Between the two renames of the claim: the record says queued (with the newer evidence).
crash_test!(a_crash_mid_rename_loses_and_doubles_nothing, "mid-rename", "delivered");
// Claimed but nothing typed: no paste is on record after the claim (so no Enter was ever
// pressed for it), the text is not in the input box and nobody typed since: it cannot have
// reached the agent, so it is queued again and delivered once.
crash_test!(a_crash_after_the_claim_is_released_and_delivered_once, "after-claim", "delivered");
crash_test!(a_crash_before_the_paste_is_released_and_delivered_once, "before-paste", "delivered");
// A group commit cut between writing its records and syncing them: none of it counts (the
// temporary files are swept), so the claim never happened and nothing was typed.
crash_test!(a_crash_between_a_groups_writes_and_its_fsync_loses_and_doubles_nothing, "batch-written", "delivered");
// The group durable, nothing it allowed carried out yet (the paste waits on it).
crash_test!(a_crash_between_a_groups_fsync_and_acting_on_it_loses_and_doubles_nothing, "batch-synced", "delivered");
// The text sits in the input box: an Enter is safe and finishes the delivery.
crash_test!(a_crash_after_the_paste_is_finished_with_an_enter, "after-paste", "delivered");
crash_test!(a_crash_before_the_submit_is_finished_with_an_enter, "before-submit", "delivered");
// Submitted: the agent's UserPromptSubmit hook, journalled by the master, proves it.
crash_test!(a_crash_after_the_submit_is_settled_by_the_hook, "after-submit", "delivered");
// Verified delivered, the record written, the rename to `.delivered` cut: the next start
// finishes the rename from the durable record (no evidence needs re-reading).
#[test]
fn a_crash_between_the_delivered_record_and_its_rename_keeps_it_delivered() {
    let (item, times) = crash_at("mid-rename-settle");
    assert_eq!((item["state"].as_str(), times), (Some("delivered"), 1), "{item:#}");
    let evidence = item["evidence"].to_string();
    assert!(!evidence.contains("restart"), "settled from the record, not recovered: {item:#}");
}

#[test]
fn a_crash_inside_a_digest_s_settle_delivers_every_item_of_it_once() {
    // Two prompts released together become one digest; the daemon dies after the first
    // item's `delivered` record, before the second's. The second must take the digest's
    // outcome, not be recovered alone (stuck, and a force would repeat it).
    let home = Home::new();
    let log = home.demo("d", &[]);
    eventually("the agent to be ready", || {
        let s = home.session("d").ok_or("no session")?;
        if s["state"]["ready"] == true { Ok(()) } else { Err(s["state"].to_string()) }
    });
    let doomed = home.serve_with(&[("DESK_FAILPOINT", "mid-rename-settle")]);
    home.ok(&["pause", "d"]);
    let a = home.ok(&["send", "d", "first of the digest"]).trim().to_string();
    let b = home.ok(&["send", "d", "second of the digest"]).trim().to_string();
    home.ok(&["resume", "d"]);
    eventually("the daemon to crash in the settle", || if alive(doomed) { Err("alive".into()) } else { Ok(()) });
    home.serve();
    for id in [&a, &b] {
        let item = home.settled(id);
        assert_eq!(item["state"], "delivered", "{item:#}");
    }
    let logged = prompts(&log);
    assert_eq!(logged.len(), 1, "one digest prompt: {logged:#?}");
    assert!(logged[0].contains("first of the digest") && logged[0].contains("second of the digest"));
}
