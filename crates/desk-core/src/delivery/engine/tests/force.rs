//! The operator's force, case by case: what it types (an Enter only, a new paste, or nothing)
//! and what it refuses, against the simulated agent; and the bounds of what a delivery types
//! (the digest cap, the canonical-mode line limit).

use super::*;

/// An item left submit-stuck: its text sits in the box, every Enter taken as a newline.
fn submit_stuck(w: &mut World, text: &str) -> ItemId {
    w.agent.swallow_enters = 100;
    let id = w.item(text);
    w.settle(60_000);
    assert_eq!(w.disk[&id].stuck, Some(StuckClass::SubmitStuck), "{:?}", w.disk[&id].evidence);
    w.agent.swallow_enters = 0;
    id
}

/// An item left paste-missing: the agent ignored its paste.
fn paste_missing(w: &mut World, text: &str) -> ItemId {
    w.agent.deaf = true;
    let id = w.item(text);
    w.settle(60_000);
    assert_eq!(w.disk[&id].stuck, Some(StuckClass::PasteMissing), "{:?}", w.disk[&id].evidence);
    w.agent.deaf = false;
    id
}

fn force(w: &mut World, client: u64, id: &ItemId) -> (bool, String) {
    w.feed(Input::Command { client, command: Command::Force { id: id.clone(), over_draft: false } });
    w.settle(30_000);
    let (_, ok, message) = w.replies.iter().rfind(|(c, _, _)| *c == client).cloned().expect("a reply");
    (ok, message)
}

#[test]
fn force_on_a_submit_stuck_item_whose_text_was_cleared_presses_nothing_and_a_second_force_pastes_it() {
    let mut w = started();
    let id = submit_stuck(&mut w, "cleared by hand");
    let enters = w.agent.enters;
    // Someone cleared the box.
    w.agent.input.clear();
    let (ok, message) = force(&mut w, 5, &id);
    assert!(!ok && message.contains("no longer in the input area"), "{message}");
    assert_eq!(w.agent.enters, enters, "no Enter pressed onto an empty box");
    assert_eq!(w.disk[&id].stuck, Some(StuckClass::PasteMissing), "{:?}", w.disk[&id].evidence);
    assert!(w.agent.submitted.is_empty());
    // The operator checked the agent: the second force pastes it again, and it goes once.
    let (ok, message) = force(&mut w, 5, &id);
    assert!(ok, "{message}");
    assert_eq!(w.state_of(&id), State::Delivered);
    assert_eq!(w.agent.submitted, vec!["cleared by hand"]);
}

#[test]
fn force_while_a_dialog_is_up_is_refused_and_presses_no_enter_into_it() {
    let mut w = started();
    let id = submit_stuck(&mut w, "behind a dialog");
    let enters = w.agent.enters;
    // The agent reports it waits for approval: refused before anything is looked at.
    w.agent.dialog = true;
    let view = w.view();
    w.feed(Input::Session(view));
    let (ok, message) = force(&mut w, 6, &id);
    assert!(!ok && message.contains("answer it first"), "{message}");
    // A dialog on screen the session does not report yet: the look before the Enter sees it.
    let mut view = w.view();
    view.activity = Activity::Idle;
    view.wait = None;
    w.feed(Input::Session(view));
    let (ok, message) = force(&mut w, 6, &id);
    assert!(!ok && message.contains("dialog"), "{message}");
    assert_eq!(w.agent.enters, enters, "no Enter into the dialog");
    assert!(w.agent.dialog && !w.agent.transcript.contains(&"approved".to_string()));
    assert_eq!(w.disk[&id].stuck, Some(StuckClass::SubmitStuck));
    // Answered: the force presses Enter on the text still in the box.
    w.agent.dialog = false;
    let view = w.view();
    w.feed(Input::Session(view));
    let (ok, message) = force(&mut w, 6, &id);
    assert!(ok, "{message}");
    assert_eq!(w.agent.submitted, vec!["behind a dialog"]);
}

#[test]
fn a_re_paste_force_is_refused_over_a_draft_and_over_a_dialog_and_types_nothing() {
    let mut w = started();
    let id = paste_missing(&mut w, "try me again");
    let pastes = w.agent.pastes.len();
    // A draft in the box: the new paste would be glued to it.
    w.agent.input = "someone's half-written".into();
    let (ok, message) = force(&mut w, 7, &id);
    assert!(!ok && message.contains("holds text typed by someone") && message.contains("--over-draft"), "{message}");
    w.agent.input.clear();
    // A dialog on screen: the paste would go into it.
    w.agent.dialog = true;
    let mut view = w.view();
    view.activity = Activity::Idle;
    view.wait = None;
    w.feed(Input::Session(view));
    let (ok, message) = force(&mut w, 7, &id);
    assert!(!ok && message.contains("dialog"), "{message}");
    assert_eq!(w.agent.pastes.len(), pastes, "nothing typed: {:?}", w.agent.pastes);
    assert_eq!(w.disk[&id].stuck, Some(StuckClass::PasteMissing), "still stuck as it was");
    // Both gone: the force pastes it.
    w.agent.dialog = false;
    let view = w.view();
    w.feed(Input::Session(view));
    let (ok, message) = force(&mut w, 7, &id);
    assert!(ok, "{message}");
    assert_eq!(w.agent.submitted, vec!["try me again"]);
}

#[test]
fn at_most_twenty_items_go_in_one_digest_and_the_rest_follow_in_the_next() {
    let mut w = World::new();
    let ids: Vec<ItemId> = (0..25).map(|i| w.item(&format!("message number {i:02}"))).collect();
    let view = w.view();
    w.feed(Input::Session(view));
    w.settle(60_000);
    assert_eq!(w.agent.submitted.len(), 2, "{:#?}", w.agent.submitted);
    assert!(w.agent.submitted[0].starts_with(&format!("You have {MAX_DIGEST} messages")), "{}", w.agent.submitted[0]);
    assert!(w.agent.submitted[1].starts_with("You have 5 messages"), "{}", w.agent.submitted[1]);
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(w.state_of(id), State::Delivered);
        let digest = if i < MAX_DIGEST { 0 } else { 1 };
        assert!(w.agent.submitted[digest].contains(&format!("message number {i:02}")), "item {i}");
        assert_eq!(w.disk[id].digest_with.len(), if i < MAX_DIGEST { MAX_DIGEST - 1 } else { 4 });
    }
}

#[test]
fn a_line_over_4095_bytes_is_refused_in_canonical_mode_and_nothing_is_typed() {
    let mut w = World::new();
    w.rules = Rc::new(RuleSet::builtin(Provider::Shell));
    w.agent.canonical = true;
    let view = w.view();
    w.feed(Input::Session(view));
    let long = "x".repeat(text::CANONICAL_LINE_MAX + 1);
    let id = w.item(&format!("short first line\n{long}"));
    w.settle(30_000);
    assert_eq!(w.disk[&id].stuck, Some(StuckClass::PasteMissing), "{:?}", w.disk[&id].evidence);
    let why = &w.disk[&id].evidence.last().expect("a note").detail;
    assert!(why.contains("line 2 is 4096 bytes") && why.contains("cuts lines at 4095"), "{why}");
    assert!(w.agent.pastes.is_empty(), "nothing typed: {:?}", w.agent.pastes);
    // A line of exactly the limit goes.
    let fits = w.item(&"y".repeat(text::CANONICAL_LINE_MAX));
    w.settle(30_000);
    assert_eq!(w.state_of(&fits), State::Delivered, "{:?}", w.disk[&fits].evidence);
}
