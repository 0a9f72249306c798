//! Prompt delivery end to end: `desk serve`, real sessions running the demo agent, and the
//! agent's prompt log as the ground truth of what was actually submitted.

use crate::support::{Home, Wire, eventually, prompts};
use desk_wire::{Frame, Role};

fn state(item: &serde_json::Value) -> &str {
    item["state"].as_str().unwrap_or("?")
}

#[test]
fn an_idle_agent_gets_the_prompt_exactly_once() {
    let home = Home::new();
    home.serve();
    let log = home.demo("idle", &[]);
    home.wait_ready("idle");
    let id = home.send("idle", "hello from the operator");
    let item = home.settled(&id);
    assert_eq!(state(&item), "delivered", "{item:#}");
    assert_eq!(prompts(&log), vec!["hello from the operator"]);
    let kinds: Vec<&str> = item["evidence"].as_array().unwrap().iter().map(|n| n["kind"].as_str().unwrap()).collect();
    assert!(kinds.starts_with(&["queued", "claimed", "baseline", "pasted", "written", "echoed", "enter"]), "{kinds:?}");
}

#[test]
fn a_prompt_sent_mid_turn_is_queued_by_the_agent_and_submitted_when_the_turn_ends() {
    let home = Home::new();
    home.serve();
    let log = home.demo("busy", &["--work-ms", "10000"]);
    home.wait_ready("busy");
    let first = home.send("busy", "first task");
    assert_eq!(state(&home.settled(&first)), "delivered");
    let second = home.send("busy", "second task");
    assert_eq!(state(&home.settled(&second)), "delivered");
    // The first turn (10 s) is still running: the agent holds the second in its own queue.
    assert_eq!(prompts(&log), vec!["first task"]);
    assert!(home.peek("busy").contains("queued: 1"));
    // Delivered means the agent took it; it submits it once its turn ends.
    eventually("the queued prompt to be submitted", || {
        let p = prompts(&log);
        if p == ["first task", "second task"] { Ok(()) } else { Err(format!("{p:?}")) }
    });
}

#[test]
fn a_long_multi_line_prompt_collapsed_to_a_placeholder_is_delivered_whole() {
    let home = Home::new();
    home.serve();
    let log = home.demo("long", &[]);
    home.wait_ready("long");
    let text: String = (1..=20).map(|i| format!("step {i}: do the thing number {i}\n")).collect();
    let id = home.ok(&["send", "long", &text]).trim().to_string();
    let item = home.settled(&id);
    assert_eq!(state(&item), "delivered", "{item:#}");
    assert!(item["evidence"].to_string().contains("1 placeholder"), "recognised by its placeholder: {item:#}");
    assert_eq!(prompts(&log), vec![text.trim_end().to_string()]);
}

#[test]
fn an_approval_dialog_holds_delivery_until_the_operator_answers_it() {
    let home = Home::new();
    home.serve();
    let log = home.demo("ask", &["--work-ms", "500"]);
    home.wait_ready("ask");
    // Every check says what the item's evidence and the screen were, so that a failure seen
    // once under load can be read without a rerun.
    let look = |id: &str| format!("{:#}\nscreen:\n{}", home.item(id), home.peek("ask"));
    let first = home.send("ask", "please approve-me now");
    assert_eq!(state(&home.settled(&first)), "delivered", "{}", look(&first));
    home.wait_activity("ask", "blocked");
    let second = home.send("ask", "after the approval");
    // Held, with the reason visible, and nothing typed into the dialog.
    eventually("the hold to be reported", || {
        let q = home.ok(&["queue", "ask"]);
        if q.contains("waiting for approval") { Ok(()) } else { Err(q) }
    });
    assert_eq!(state(&home.item(&second)), "queued", "{}", look(&second));
    let screen = home.peek("ask");
    assert!(screen.contains("Do you want to run this command?"), "{screen}");
    // The operator answers (an Enter from an attached terminal).
    let mut operator = home.connect("ask", Role::Controller, 120, 40);
    operator.send(&Frame::Input(b"\r".to_vec()));
    assert_eq!(state(&home.settled(&second)), "delivered", "{}", look(&second));
    eventually("both prompts submitted", || {
        let p = prompts(&log);
        if p == ["please approve-me now", "after the approval"] { Ok(()) } else { Err(format!("{p:?}")) }
    });
    drop::<Wire>(operator);
}

#[test]
fn an_enter_swallowed_by_a_paste_burst_window_is_recovered_by_evidence() {
    let home = Home::new();
    home.serve();
    // Enters within 300 ms of a paste are taken as newlines (Codex's paste-burst behaviour).
    let log = home.demo("burst", &["--paste-burst-ms", "300"]);
    home.wait_ready("burst");
    let id = home.send("burst", "survive the burst");
    let item = home.settled(&id);
    assert_eq!(state(&item), "delivered", "{item:#}");
    let enters = item["evidence"].as_array().unwrap().iter().filter(|n| n["kind"] == "enter").count();
    assert!(enters >= 2, "the first Enter was swallowed, so another was needed: {item:#}");
    assert_eq!(prompts(&log), vec!["survive the burst"], "submitted once, never re-pasted");
}

#[test]
fn a_dialog_that_opens_over_an_unsubmitted_prompt_is_not_taken_for_its_delivery() {
    let home = Home::new();
    home.serve();
    // Enters within 1.5 s of a paste are swallowed as newlines; the first prompt's turn opens
    // its approval dialog, drawn inside the input box, at the next swallowed Enter — the one
    // desk presses for the second prompt, pasted meanwhile (on cue, not by timing).
    let log = home.demo(
        "cover",
        &["--paste-burst-ms", "1500", "--approval-delay-ms", "600000", "--approval-on-newline", "--work-ms", "4000"],
    );
    home.wait_ready("cover");
    let first = home.send("cover", "please approve-me now");
    assert_eq!(state(&home.settled(&first)), "delivered");
    let second = home.send("cover", "typed before the dialog");
    home.wait_activity("cover", "blocked");
    // The box is hidden, not emptied: the second prompt must not count as delivered.
    let held = home.settled(&second);
    assert_eq!((state(&held), held["stuck"].as_str()), ("stuck", Some("submit-stuck")), "{held:#}");
    assert!(prompts(&log) == ["please approve-me now"], "{:?}", prompts(&log));
    // The operator answers the dialog, then forces the stuck item: an Enter on the text that is
    // still in the box.
    let mut operator = home.connect("cover", Role::Controller, 120, 40);
    operator.send(&Frame::Input(b"\r".to_vec()));
    home.wait_activity("cover", "working");
    // The daemon hears of the answered dialog a moment after `desk ls` does, and a forced
    // Enter waits 2 s after the operator's own keystroke.
    let out = eventually("force to be accepted", || {
        let out = home.desk(&["force", &second]);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).to_string())
        } else if stderr.contains("waiting for the operator") || stderr.contains("someone is typing") {
            Err(stderr)
        } else {
            panic!("force failed: {stderr}")
        }
    });
    assert!(out.contains("delivered"), "{out}");
    assert_eq!(state(&home.settled(&second)), "delivered");
    eventually("both prompts submitted, once each", || {
        let p = prompts(&log);
        if p == ["please approve-me now", "typed before the dialog"] { Ok(()) } else { Err(format!("{p:?}")) }
    });
    drop::<Wire>(operator);
}

#[test]
fn a_session_that_is_not_ready_yet_holds_delivery_until_it_is() {
    let home = Home::new();
    home.serve();
    // The demo agent starts only once the test says so: until then the session runs a shell
    // waiting for a file, with no TUI (no bracketed paste, no SessionStart hook): not ready.
    let go = home.path().join("go");
    let log = home.path().join("slow.prompts");
    let script = format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done; exec '{}' --prompt-log '{}'",
        go.display(),
        env!("CARGO_BIN_EXE_desk-demo-agent"),
        log.display()
    );
    home.ok(&["new", "slow", "--provider", "demo", "--", "sh", "-c", &script]);
    let id = home.send("slow", "wait until you are ready");
    // Held, and saying why, for as long as the TUI is not up: nothing is typed.
    eventually("the readiness hold to be reported", || {
        let q = home.ok(&["queue", "slow"]);
        if q.contains("the session is starting (its TUI is not ready yet)") { Ok(()) } else { Err(q) }
    });
    let item = home.item(&id);
    assert_eq!(state(&item), "queued", "{item:#}");
    assert!(!item["evidence"].to_string().contains("pasted"), "nothing typed: {item:#}");
    std::fs::write(&go, b"").expect("start the agent");
    let item = home.settled(&id);
    assert_eq!(state(&item), "delivered", "{item:#}");
    assert_eq!(prompts(&log), vec!["wait until you are ready"]);
}

#[test]
fn a_prompt_sent_as_desk_serve_starts_meets_a_connecting_daemon_never_a_session_not_running() {
    let home = Home::new();
    let log = home.demo("fresh", &[]);
    home.wait_ready("fresh");
    // Each send starts desk serve itself (autostart), which then connects to the session's
    // master while the prompt arrives; the daemon is stopped again at once, with the prompt
    // anywhere from queued to delivered, so the next start also restores it.
    let mut sent = Vec::new();
    for i in 0..4 {
        let text = format!("prompt {i} at a fresh start");
        let out = home.cmd().env_remove("DESK_AUTOSTART").args(["send", "fresh", &text]).output().expect("desk send");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(!err.contains("not running"), "a running session called not running: {err}");
        sent.push((String::from_utf8_lossy(&out.stdout).trim().to_string(), text));
        home.ok(&["serve", "--stop"]);
    }
    home.serve();
    // A prompt whose Enter went just before a stop may be stuck "interrupted" a moment, until
    // the agent's UserPromptSubmit hook for it is read: delivered in the end, every one.
    for (id, _) in &sent {
        eventually(&format!("item {id} delivered"), || {
            let item = home.item(id);
            if state(&item) == "delivered" { Ok(()) } else { Err(format!("{item:#}")) }
        });
    }
    // Each reached the agent exactly once across the four restarts (alone, or in a digest with
    // the ones queued beside it), in the order sent.
    eventually("every prompt in the agent's log once", || {
        let all = prompts(&log).join("\n");
        let at: Vec<Option<usize>> = sent.iter().map(|(_, t)| all.find(t.as_str())).collect();
        let once = sent.iter().all(|(_, t)| all.matches(t.as_str()).count() == 1);
        let ordered = at.windows(2).all(|w| w[0].is_some() && w[0] < w[1]);
        if once && ordered { Ok(()) } else { Err(all) }
    });
}

#[test]
fn pause_holds_a_queue_and_resume_releases_it() {
    let home = Home::new();
    home.serve();
    let log = home.demo("p", &[]);
    home.wait_ready("p");
    home.ok(&["pause", "p", "--reason", "reviewing"]);
    let id = home.send("p", "after the review");
    eventually("the pause to be reported", || {
        let q = home.ok(&["queue", "p"]);
        if q.contains("paused by the operator: reviewing") { Ok(()) } else { Err(q) }
    });
    assert_eq!(state(&home.item(&id)), "queued");
    assert!(prompts(&log).is_empty());
    home.ok(&["resume", "p"]);
    assert_eq!(state(&home.settled(&id)), "delivered");
    assert_eq!(prompts(&log), vec!["after the review"]);
}

#[test]
fn drop_removes_a_queued_item_and_force_delivers_a_stuck_one() {
    let home = Home::new();
    home.serve();
    // Enters within 6.5 s of a paste are newlines: the delivery runs out of Enters (at ~0,
    // 2.5 and 5 s) and ends submit-stuck; a forced Enter after the window submits it.
    let log = home.demo("f", &["--paste-burst-ms", "6500"]);
    home.wait_ready("f");
    home.ok(&["pause", "f"]);
    let dropped = home.send("f", "never mind this one");
    home.ok(&["drop", &dropped]);
    assert_eq!(state(&home.item(&dropped)), "dropped");
    home.ok(&["resume", "f"]);
    let id = home.send("f", "force me through");
    let item = home.settled(&id);
    assert_eq!(state(&item), "stuck", "{item:#}");
    assert_eq!(item["stuck"], "submit-stuck");
    let listed = home.ok(&["stuck"]);
    assert!(listed.contains(&id));
    assert!(
        listed.contains(&format!("next: check the agent (desk peek f); desk force {id} presses Enter")),
        "{listed}"
    );
    assert!(prompts(&log).is_empty());
    let out = home.ok(&["force", &id]);
    assert!(out.contains("delivered"), "force reports the outcome: {out}");
    assert_eq!(state(&home.item(&id)), "delivered");
    assert_eq!(prompts(&log), vec!["force me through"], "Enter only: never pasted twice");
}

#[test]
fn control_characters_in_a_prompt_cannot_escape_the_paste() {
    let home = Home::new();
    home.serve();
    let log = home.demo("ctl", &[]);
    home.wait_ready("ctl");
    let id = home.send("ctl", "before\x1b[201~after\x07\x1b[31m red\x03 end");
    assert_eq!(state(&home.settled(&id)), "delivered");
    assert_eq!(prompts(&log), vec!["beforeafter red end"], "whole sequences removed, not just the ESC");
    let item = home.item(&id);
    assert!(item["evidence"].to_string().contains("control character"), "{item:#}");
}

#[test]
fn a_session_that_exits_and_restarts_gets_its_queued_prompts_in_the_new_generation() {
    let home = Home::new();
    home.serve();
    let old_log = home.demo("re", &[]);
    home.wait_ready("re");
    home.ok(&["pause", "re"]);
    let a = home.send("re", "for whoever runs re");
    let b = home.send("re", "and this one too");
    assert_eq!(home.item(&a)["generation"], 1);
    home.ok(&["kill", "re"]);
    home.wait_exit("re");
    let new_log = home.path().join("re2.prompts");
    home.ok(&[
        "new",
        "re",
        "--provider",
        "demo",
        "--",
        env!("CARGO_BIN_EXE_desk-demo-agent"),
        "--prompt-log",
        new_log.to_str().unwrap(),
    ]);
    home.wait_ready("re");
    home.ok(&["resume", "re"]);
    for id in [&a, &b] {
        let item = home.settled(id);
        assert_eq!(state(&item), "delivered", "{item:#}");
        assert_eq!(item["generation"], 2);
        assert!(item["evidence"].to_string().contains("retargeted"), "{item:#}");
    }
    assert!(prompts(&old_log).is_empty());
    // Released together: one digest prompt that carries both.
    let p = prompts(&new_log);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].contains("for whoever runs re") && p[0].contains("and this one too"), "{p:?}");
}

#[test]
fn a_prompt_sent_while_the_daemon_is_down_waits_in_the_intake() {
    let home = Home::new();
    let log = home.demo("later", &[]);
    let out = home.desk(&["send", "later", "queued while nobody serves"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not running"));
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(state(&home.item(&id)), "queued");
    home.serve();
    assert_eq!(state(&home.settled(&id)), "delivered");
    assert_eq!(prompts(&log), vec!["queued while nobody serves"]);
}

#[test]
fn a_second_daemon_refuses_and_names_the_first() {
    let home = Home::new();
    let pid = home.serve();
    let out = home.desk(&["serve"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already running") && err.contains(&pid.to_string()), "{err}");
}

#[test]
fn two_hundred_items_across_twenty_sessions_each_arrive_exactly_once() {
    let home = Home::new();
    home.serve();
    let sessions: Vec<(String, std::path::PathBuf)> = (0..20)
        .map(|i| {
            let name = format!("s{i:02}");
            let log = home.demo(&name, &["--work-ms", "50"]);
            (name, log)
        })
        .collect();
    let mut sent = Vec::new();
    for round in 0..10 {
        for (name, _) in &sessions {
            let text = format!("item {round} for {name}");
            sent.push((name.clone(), text.clone(), home.send(name, &text)));
        }
    }
    for (_, _, id) in &sent {
        let item = home.settled(id);
        assert_eq!(state(&item), "delivered", "{item:#}");
    }
    for (name, log) in &sessions {
        let submitted = prompts(log).join("\n");
        for (_, text, _) in sent.iter().filter(|(n, _, _)| n == name) {
            assert_eq!(submitted.matches(text.as_str()).count(), 1, "{text:?} in {name}: {submitted}");
        }
    }
}

#[test]
fn a_plain_command_gets_one_enter_and_its_line_changing_proves_the_delivery() {
    let home = Home::new();
    home.serve();
    // `cat` in canonical mode: what it was typed stays on screen after the Enter, so only the
    // line the cursor was on changing shows that the Enter was taken.
    let got = home.path().join("got.txt");
    home.new_sh("plain", &format!("exec cat > {}", got.display()));
    let id = home.send("plain", "short line ok");
    let item = home.settled(&id);
    assert_eq!(state(&item), "delivered", "{item:#}");
    let enters = item["evidence"].as_array().unwrap().iter().filter(|n| n["kind"] == "enter").count();
    assert_eq!(enters, 1, "{item:#}");
    eventually("cat to have the line, once and without stray Enters", || {
        let text = std::fs::read_to_string(&got).unwrap_or_default();
        if text == "short line ok\n" { Ok(()) } else { Err(format!("{text:?}")) }
    });
}

#[test]
fn a_draft_in_the_input_box_holds_delivery_until_it_is_sent_and_is_never_merged() {
    let home = Home::new();
    home.serve();
    let log = home.demo("draft", &[]);
    home.wait_ready("draft");
    // A person types into the agent's box from an attached terminal, and stops.
    let mut person = home.connect("draft", Role::Controller, 120, 40);
    person.send(&Frame::Input(b"half typed draftword".to_vec()));
    home.wait_screen("draft", "half typed draftword");
    let id = home.send("draft", "queued prompt");
    // Past the 2 s typing hold, and well beyond: held, with the reason, and nothing typed.
    let reason =
        "the input box holds text typed by someone (20 characters); delivery waits until it is sent or cleared";
    eventually("the draft hold to show in desk queue", || {
        let q = home.ok(&["queue", "draft"]);
        if q.contains(reason) { Ok(()) } else { Err(q) }
    });
    // The draft hold shows only once the typing hold is over: the look that used to paste
    // after the draft has happened, and held instead.
    assert_eq!(state(&home.item(&id)), "queued");
    assert!(home.ok(&["item", &id]).contains(reason));
    assert!(prompts(&log).is_empty());
    // desk force explains, and types nothing without --over-draft.
    let forced = home.desk(&["force", &id]);
    let said = String::from_utf8_lossy(&forced.stderr).to_string() + &String::from_utf8_lossy(&forced.stdout);
    assert!(!forced.status.success() && said.contains("--over-draft"), "{said}");
    assert_eq!(state(&home.item(&id)), "queued");
    // The person sends their draft: the prompt follows as a message of its own.
    person.send(&Frame::Input(b"\r".to_vec()));
    assert_eq!(state(&home.settled(&id)), "delivered");
    eventually("both messages, each on its own", || {
        let p = prompts(&log);
        if p == ["half typed draftword", "queued prompt"] { Ok(()) } else { Err(format!("{p:?}")) }
    });
    drop::<Wire>(person);
}

#[test]
fn back_to_back_multi_line_prompts_settled_by_hooks_are_each_submitted_once_and_alone() {
    // A hook may settle an item before the agent has redrawn its box: the next item's look
    // then still shows the previous collapsed paste. It must not be taken as a baseline to
    // paste over (the two were glued together and submitted as one, and the second went
    // stuck paste-missing — a force then delivered it twice).
    let home = Home::new();
    home.serve();
    // The agent redraws only once its hook has returned, and this hook takes 0.3 s after it
    // reached desk (hooks do work): every settle-by-hook races the redraw.
    let hook_cmd = format!("{} hook; sleep 0.3", env!("CARGO_BIN_EXE_desk"));
    let log = home.demo("pairs", &["--work-ms", "300", "--hook-cmd", &hook_cmd]);
    home.wait_ready("pairs");
    let mut sent = Vec::new();
    for pair in 0..8 {
        for half in ["a", "b"] {
            let text = (1..=5).map(|l| format!("pair {pair}{half} line {l}")).collect::<Vec<_>>().join("\n");
            sent.push((home.send("pairs", &text), text));
        }
        let (last, _) = sent.last().expect("sent");
        home.settled(last);
    }
    for (id, text) in &sent {
        let item = home.settled(id);
        assert_eq!(state(&item), "delivered", "{item:#}");
        eventually("the prompt to be logged", || {
            let logged = prompts(&log);
            if logged.iter().any(|p| p.contains(text.as_str())) { Ok(()) } else { Err(format!("{logged:?}")) }
        });
    }
    let logged = prompts(&log);
    for (_, text) in &sent {
        assert_eq!(logged.iter().filter(|p| p.contains(text.as_str())).count(), 1, "{text:?} in {logged:#?}");
    }
    // Two prompts in one message only as desk's own digest, never glued.
    for p in &logged {
        let carried = sent.iter().filter(|(_, t)| p.contains(t.as_str())).count();
        assert!(carried == 1 || p.starts_with("You have "), "glued: {p:?}");
    }
}

#[test]
fn a_prompt_made_only_of_escape_sequences_is_refused_and_nothing_is_queued() {
    let home = Home::new();
    let out = home.desk(&["send", "nobody", "--queue-for-later", "\x1b[31m\x1b]0;title\x07\x1b[201~"]);
    assert_eq!(out.status.code(), Some(2), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("escape sequences are removed"));
    let intake = home.path().join("state/delivery/intake");
    let left: Vec<_> = std::fs::read_dir(&intake).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    assert!(left.is_empty(), "nothing written to the intake: {left:?}");
}

/// Issue 18, finding 4: a prompt that quotes a dialog ("Do you want to run this command?") is
/// echoed in the agent's input box and then in its transcript; neither is taken for the dialog.
/// It is delivered, the agent never reads blocked, and the prompts after it go as well.
#[test]
fn a_prompt_that_quotes_a_dialog_is_delivered_and_never_taken_for_one() {
    let home = Home::new();
    home.serve();
    let log = home.demo("quote", &[]);
    home.wait_ready("quote");
    let quoted = "Please answer: Do you want to run this command? yes or no";
    let id = home.send("quote", quoted);
    let item = home.settled(&id);
    assert_eq!(state(&item), "delivered", "{item:#}\n{}", home.peek("quote"));
    let next = home.send("quote", "and then this one");
    assert_eq!(state(&home.settled(&next)), "delivered", "{}", home.peek("quote"));
    // The second may wait in the agent's own queue while the first turn runs.
    eventually("both prompts submitted, each once", || {
        let p = prompts(&log);
        if p == [quoted, "and then this one"] { Ok(()) } else { Err(format!("{p:?}")) }
    });
    // The quoted words are still on screen, in the transcript; no blocked state was ever seen.
    assert!(home.peek("quote").contains("Do you want to run this command?"));
    let states = home.ok(&["events", "quote", "--type", "state"]);
    assert!(!states.contains("-> blocked"), "{states}");
}

/// Issue 18, finding 10: an agent that never switched bracketed paste on gets a multi-line
/// prompt typed line by line, each newline an Enter: it takes the lines as separate
/// submissions. The item says so — delivered as 3 submissions — rather than as one prompt.
#[test]
fn a_multi_line_prompt_typed_without_bracketed_paste_is_recorded_as_its_submissions() {
    let home = Home::new();
    home.serve();
    let log = home.demo("plain", &["--no-bracketed-paste"]);
    home.wait_ready("plain");
    let id = home.send("plain", "line one\nline two\nline three");
    let item = home.settled(&id);
    assert_eq!(state(&item), "delivered", "{item:#}");
    assert_eq!(item["submissions"], 3, "{item:#}");
    assert!(item.to_string().contains("delivered as 3 separate submissions"), "{item:#}");
    eventually("each line submitted on its own", || {
        let p = prompts(&log);
        if p == ["line one", "line two", "line three"] { Ok(()) } else { Err(format!("{p:?}")) }
    });
}
