//! The engine against a simulated agent, store and clock — including crashes between any two
//! actions.

use super::*;
use crate::delivery::item::{Item, ItemId, State, StuckClass, When};
use crate::provider::Provider;
use std::collections::BinaryHeap;

fn name(session: &str) -> desk_wire::names::SessionName {
    desk_wire::names::SessionName::parse(session).expect("a valid session name")
}

mod crash;
mod force;

/// A small agent: an input box, a transcript, bracketed paste, placeholders for big pastes,
/// an approval dialog, queueing while working, and the log of what it actually submitted.
#[derive(Debug, Clone, Default)]
struct Agent {
    input: String,
    placeholder: Option<String>,
    transcript: Vec<String>,
    submitted: Vec<String>,
    queued: Vec<String>,
    working: bool,
    dialog: bool,
    /// Enters swallowed after a paste (paste-burst behaviour).
    swallow_enters: u32,
    /// The agent ignores pastes entirely (to provoke paste-missing).
    deaf: bool,
    /// Its dialog is drawn inside the input box, hiding the text (as the demo agent does).
    dialog_covers_box: bool,
    in_paste: bool,
    /// A swallowed Enter becomes a newline in the box (a composer that took it as one).
    enter_newline: bool,
    /// The terminal is in canonical mode (the kernel edits the line, as for a shell).
    canonical: bool,
    /// When a person last typed in an attached terminal (Unix ms).
    last_typed_ms: Option<u64>,
    /// Drawn like Codex: no box, a "›" composer with a hint when empty, a model line below.
    codex_style: bool,
    /// Every text written to it (a paste's body, or plain typing), in order: what reached it.
    pastes: Vec<String>,
    /// Enters written to it.
    enters: u32,
    /// Who has the terminal, as the master reports it (none: an older master, which does not).
    foreground: Option<desk_wire::Foreground>,
    /// The program never switched bracketed paste on: what is typed arrives as keys, and each
    /// carriage return in it is an Enter.
    no_bracketed_paste: bool,
}

impl Agent {
    fn write(&mut self, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes).into_owned();
        if text == "\r" {
            self.enters += 1;
        } else {
            let body = text.strip_prefix("\x1b[200~").and_then(|t| t.strip_suffix("\x1b[201~"));
            self.pastes.push(body.unwrap_or(&text).to_string());
        }
        if let Some(body) = text.strip_prefix("\x1b[200~").and_then(|t| t.strip_suffix("\x1b[201~")) {
            if self.deaf || self.dialog {
                return;
            }
            if body.lines().count() > 3 {
                self.placeholder = Some(format!("[Pasted text #1 +{} lines]", body.lines().count()));
            }
            self.input.push_str(body);
            return;
        }
        if text == "\r" {
            if self.dialog {
                self.dialog = false;
                self.transcript.push("approved".into());
                return;
            }
            if self.swallow_enters > 0 {
                self.swallow_enters -= 1;
                if self.enter_newline {
                    self.input.push('\n');
                }
                return;
            }
            if self.input.is_empty() {
                return;
            }
            let prompt = std::mem::take(&mut self.input);
            self.placeholder = None;
            if self.working {
                self.queued.push(prompt);
            } else {
                self.transcript.push(format!("> {}", prompt.lines().next().unwrap_or("")));
                self.submitted.push(prompt);
            }
            return;
        }
        let _ = self.in_paste;
        if text.bytes().all(|b| b == 0x7f) {
            // Backspaces: a placeholder goes whole, then one character each.
            for _ in 0..text.len() {
                if self.placeholder.take().is_some() {
                    self.input.clear();
                } else {
                    self.input.pop();
                }
            }
            return;
        }
        if text.contains('\r') {
            // Keys typed in one write: every carriage return among them is an Enter.
            for (i, part) in text.split('\r').enumerate() {
                if i > 0 {
                    self.write(b"\r");
                }
                self.input.push_str(part);
            }
            return;
        }
        self.input.push_str(&text);
    }

    fn finish_turn(&mut self) {
        self.working = false;
        for p in std::mem::take(&mut self.queued) {
            self.transcript.push(format!("> {}", p.lines().next().unwrap_or("")));
            self.submitted.push(p);
        }
    }

    fn screen(&self) -> ScreenView {
        let mut lines = self.transcript.clone();
        if self.dialog {
            lines.push("Do you want to run this command?".into());
            lines.push("❯ 1. Yes".into());
        }
        if self.codex_style {
            let shown = self.placeholder.clone().unwrap_or_else(|| self.input.clone());
            let shown = if shown.is_empty() { "Ask Codex to do anything".to_string() } else { shown };
            // Codex keeps the conversation well above its composer.
            lines.extend(["".into(), "  tip: status".into(), "".into()]);
            for (i, line) in shown.split('\n').enumerate() {
                lines.push(format!("{}{line}", if i == 0 { "› " } else { "  " }));
            }
            let cursor_row = lines.len() - 1;
            lines.push(String::new());
            lines.push("  fake-model default · /tmp/work".into());
            return ScreenView {
                lines,
                bracketed_paste: !self.no_bracketed_paste,
                last_typed_ms: self.last_typed_ms,
                canonical: self.canonical,
                cursor_row,
                cursor_col: 0,
                foreground: self.foreground.clone(),
            };
        }
        lines.push("╭────────────────────────────────────────╮".into());
        let shown = if self.dialog && self.dialog_covers_box {
            "Allow this command? (Enter answers)".to_string()
        } else {
            self.placeholder.clone().unwrap_or_else(|| self.input.clone())
        };
        let mut first = true;
        for line in shown.split('\n') {
            lines.push(format!("│ {}{line}", if first { "> " } else { "  " }));
            first = false;
        }
        if first {
            lines.push("│ > ".into());
        }
        lines.push("╰────────────────────────────────────────╯".into());
        lines.push(if self.working { "  working".into() } else { "  idle".into() });
        let cursor_row = lines.iter().rposition(|l| l.starts_with("│ ")).unwrap_or(0);
        ScreenView {
            lines,
            bracketed_paste: !self.no_bracketed_paste,
            last_typed_ms: self.last_typed_ms,
            canonical: self.canonical,
            cursor_row,
            cursor_col: 0,
            foreground: self.foreground.clone(),
        }
    }
}

struct World {
    engine: Engine,
    agent: Agent,
    /// What is on disk: id → item.
    disk: HashMap<ItemId, Item>,
    timers: BinaryHeap<std::cmp::Reverse<(Instant, TimerKey)>>,
    t0: Instant,
    ms: u64,
    generation: u32,
    rules: Rc<RuleSet>,
    replies: Vec<(u64, bool, String)>,
    /// Actions carried out so far, and a crash after this many (None: never).
    done: usize,
    crash_after: Option<usize>,
    crashed: bool,
    /// How a crash inside a run of persists (one group commit in the daemon) leaves the disk:
    /// false, the records before the crash durable (a prefix); true, those before it lost and
    /// those after it durable — the part of a group a power cut may keep, which is no prefix.
    crash_keeps_the_rest_of_the_group: bool,
    /// Crashes that left a group's records other than as a prefix.
    group_crashes: usize,
    activity: Activity,
    /// Snapshot requests answered with an error, next first.
    fail_reads: u32,
}

impl World {
    fn new() -> World {
        World {
            engine: Engine::new(),
            agent: Agent::default(),
            disk: HashMap::new(),
            timers: BinaryHeap::new(),
            t0: Instant::now(),
            ms: 0,
            generation: 1,
            rules: Rc::new(RuleSet::builtin(Provider::Demo)),
            replies: Vec::new(),
            done: 0,
            crash_after: None,
            crashed: false,
            crash_keeps_the_rest_of_the_group: false,
            group_crashes: 0,
            activity: Activity::Idle,
            fail_reads: 0,
        }
    }

    fn now(&self) -> (Instant, u64) {
        (self.t0 + Duration::from_millis(self.ms), 1_000_000 + self.ms)
    }

    fn view(&self) -> SessionView {
        SessionView {
            name: "s".into(),
            generation: self.generation,
            lifecycle: Lifecycle::Running,
            ready: true,
            activity: if self.agent.dialog { Activity::Blocked } else { self.activity },
            wait: self.agent.dialog.then(|| "approval".into()),
            bracketed_paste: true,
            rules: self.rules.clone(),
        }
    }

    fn item(&mut self, text: &str) -> ItemId {
        let (_, ms) = self.now();
        let item = Item::new(
            ItemId::sequential(ms),
            "s".into(),
            Some(self.generation),
            text.into(),
            When::Now,
            "test".into(),
            ms,
        );
        let id = item.id.clone();
        self.disk.insert(id.clone(), item.clone());
        self.feed(Input::Ingested(item));
        id
    }

    /// Feed one input and carry out the resulting actions (and their results), in order.
    fn feed(&mut self, input: Input) {
        let mut inputs = VecDeque::from([input]);
        while let Some(input) = inputs.pop_front() {
            if self.crashed {
                return;
            }
            let (now, ms) = self.now();
            let actions = self.engine.handle(input, now, ms);
            // The disk before each persist of the current run of persists (the daemon's group).
            let mut group: Vec<(ItemId, Option<Item>)> = Vec::new();
            for (i, action) in actions.iter().cloned().enumerate() {
                if self.crash_after.is_some_and(|n| self.done >= n) {
                    self.crashed = true;
                    let rest: Vec<&Item> = actions[i..]
                        .iter()
                        .map_while(|a| if let Action::Persist { item, .. } = a { Some(item) } else { None })
                        .collect();
                    if self.crash_keeps_the_rest_of_the_group && !group.is_empty() && !rest.is_empty() {
                        self.group_crashes += 1;
                        for (id, before) in group.into_iter().rev() {
                            match before {
                                Some(item) => self.disk.insert(id, item),
                                None => self.disk.remove(&id),
                            };
                        }
                        for item in rest {
                            self.disk.insert(item.id.clone(), item.clone());
                        }
                    }
                    return;
                }
                self.done += 1;
                match action {
                    Action::Persist { item, .. } => {
                        group.push((item.id.clone(), self.disk.get(&item.id).cloned()));
                        self.disk.insert(item.id.clone(), item);
                        continue;
                    }
                    Action::Snapshot { token, .. } => {
                        group.clear();
                        let result = if self.fail_reads > 0 {
                            self.fail_reads -= 1;
                            Err("read failed".to_string())
                        } else {
                            Ok(self.agent.screen())
                        };
                        inputs.push_back(Input::Snapshot { token, result })
                    }
                    Action::Write { token, kind, bytes, .. } => {
                        group.clear();
                        // An Enter is exactly one carriage return; a paste never is.
                        assert_eq!(kind == WriteKind::Enter, bytes == b"\r", "{kind:?} {bytes:?}");
                        self.agent.write(&bytes);
                        inputs.push_back(Input::Written { token, result: Ok(()) });
                    }
                    Action::Arm { at, key } => {
                        group.clear();
                        self.timers.push(std::cmp::Reverse((at, key)))
                    }
                    Action::Reply { client, ok, message, .. } => {
                        group.clear();
                        self.replies.push((client, ok, message))
                    }
                }
            }
        }
    }

    /// Run timers until nothing is pending or `limit_ms` of virtual time passed.
    fn settle(&mut self, limit_ms: u64) {
        let end = self.ms + limit_ms;
        while let Some(std::cmp::Reverse((at, _))) = self.timers.peek().cloned() {
            let at_ms = at.duration_since(self.t0).as_millis() as u64;
            if at_ms > end || self.crashed {
                break;
            }
            let Some(std::cmp::Reverse((_, key))) = self.timers.pop() else { break };
            self.ms = self.ms.max(at_ms);
            self.feed(Input::Timer(key));
        }
    }

    fn state_of(&self, id: &ItemId) -> State {
        self.disk[id].state
    }

    /// Simulate a restart: a fresh engine restored from disk, then the session comes up.
    fn restart(&mut self) {
        self.crashed = false;
        self.crash_after = None;
        self.restore();
        let view = self.view();
        self.feed(Input::Session(view));
    }

    /// A fresh engine (the daemon started again) restored from disk, before anything is heard
    /// of the session.
    fn restore(&mut self) {
        self.engine = Engine::new();
        self.timers.clear();
        let items = restorable(self.disk.values().cloned().collect());
        self.feed(Input::Restore(items));
    }
}

fn started() -> World {
    let mut w = World::new();
    let view = w.view();
    w.feed(Input::Session(view));
    w
}

#[test]
fn an_idle_agent_gets_the_prompt_once_and_it_is_delivered() {
    let mut w = started();
    let id = w.item("fix the failing test in parser.rs");
    w.settle(10_000);
    assert_eq!(w.agent.submitted, vec!["fix the failing test in parser.rs"]);
    let item = &w.disk[&id];
    assert_eq!(item.state, State::Delivered);
    assert_eq!(item.attempts, 1);
    let kinds: Vec<&str> = item.evidence.iter().map(|n| n.kind.as_str()).collect();
    assert_eq!(kinds, ["queued", "claimed", "baseline", "pasted", "written", "echoed", "enter", "delivered"]);
}

#[test]
fn persist_comes_before_every_side_effect() {
    let mut w = started();
    let (now, ms) = w.now();
    let item = Item::new(ItemId::sequential(ms), "s".into(), Some(1), "hello".into(), When::Now, "t".into(), ms);
    let actions = w.engine.handle(Input::Ingested(item), now, ms);
    // The look before typing changes nothing on disk; the claim is persisted in the batch that
    // pastes, before the paste.
    assert!(!actions.iter().any(|a| matches!(a, Action::Persist { .. } | Action::Write { .. })), "{actions:?}");
    let token = actions
        .iter()
        .find_map(|a| match a {
            Action::Snapshot { token, .. } => Some(*token),
            _ => None,
        })
        .expect("a look at the screen");
    let actions = w.engine.handle(Input::Snapshot { token, result: Ok(w.agent.screen()) }, now, ms);
    let persist =
        actions.iter().position(|a| matches!(a, Action::Persist { item, .. } if item.state == State::Sending));
    let write = actions.iter().position(|a| matches!(a, Action::Write { .. }));
    assert!(persist.unwrap() < write.unwrap(), "{actions:?}");
}

#[test]
fn mid_turn_delivery_is_queued_by_the_agent_and_submitted_at_turn_end() {
    let mut w = started();
    w.agent.working = true;
    w.activity = Activity::Working;
    let view = w.view();
    w.feed(Input::Session(view));
    let id = w.item("next task");
    w.settle(10_000);
    assert_eq!(w.state_of(&id), State::Delivered, "the text left the input box: the agent took it");
    assert!(w.agent.submitted.is_empty());
    w.agent.finish_turn();
    assert_eq!(w.agent.submitted, vec!["next task"]);
}

#[test]
fn a_collapsed_paste_is_recognised_by_its_placeholder() {
    let mut w = started();
    let text: String = (1..=20).map(|i| format!("line {i} of a long prompt\n")).collect();
    let id = w.item(&text);
    w.settle(10_000);
    assert_eq!(w.state_of(&id), State::Delivered);
    assert_eq!(w.agent.submitted.len(), 1);
    assert!(w.disk[&id].evidence.iter().any(|n| n.kind == "echoed" && n.detail.contains("1 placeholder")));
}

#[test]
fn an_approval_dialog_holds_delivery_until_it_is_answered() {
    let mut w = started();
    w.agent.dialog = true;
    let view = w.view();
    w.feed(Input::Session(view));
    let id = w.item("do not paste me into the dialog");
    w.settle(10_000);
    assert_eq!(w.state_of(&id), State::Queued);
    assert!(w.agent.submitted.is_empty() && w.agent.input.is_empty());
    assert!(w.engine.queues()[0].hold.as_ref().unwrap().reason.contains("approval"));
    // The operator answers; the session reports idle again.
    w.agent.dialog = false;
    let view = w.view();
    w.feed(Input::Session(view));
    w.settle(10_000);
    assert_eq!(w.state_of(&id), State::Delivered);
    assert_eq!(w.agent.submitted, vec!["do not paste me into the dialog"]);
}

#[test]
fn a_dialog_seen_only_on_screen_also_holds() {
    let mut w = started();
    w.agent.dialog = true;
    // The session's activity has not caught up (still idle): the baseline screen shows it.
    w.activity = Activity::Idle;
    let mut view = w.view();
    view.activity = Activity::Idle;
    view.wait = None;
    w.feed(Input::Session(view));
    let id = w.item("careful");
    w.settle(500);
    assert_eq!(w.state_of(&id), State::Queued);
    assert!(w.agent.input.is_empty(), "nothing typed into the dialog");
}

#[test]
fn a_swallowed_enter_is_recovered_by_an_evidence_based_enter() {
    let mut w = started();
    w.agent.swallow_enters = 1;
    let id = w.item("paste burst victim");
    w.settle(20_000);
    assert_eq!(w.state_of(&id), State::Delivered);
    assert_eq!(w.agent.submitted, vec!["paste burst victim"]);
    assert_eq!(w.disk[&id].evidence.iter().filter(|n| n.kind == "enter").count(), 2);
}

#[test]
fn an_enter_that_never_works_ends_submit_stuck_after_bounded_retries() {
    let mut w = started();
    w.agent.swallow_enters = 100;
    let id = w.item("stubborn box");
    w.settle(60_000);
    assert_eq!(w.state_of(&id), State::Stuck);
    assert_eq!(w.disk[&id].stuck, Some(StuckClass::SubmitStuck));
    assert_eq!(w.disk[&id].evidence.iter().filter(|n| n.kind == "enter").count(), 3);
    assert!(w.agent.submitted.is_empty());
    // Force on submit-stuck presses Enter only (never re-pastes).
    w.agent.swallow_enters = 0;
    let pastes_before = w.agent.input.matches("stubborn box").count();
    w.feed(Input::Command { client: 9, command: Command::Force { id: id.clone(), over_draft: false } });
    w.settle(10_000);
    assert_eq!(w.state_of(&id), State::Delivered);
    assert_eq!(w.agent.submitted, vec!["stubborn box"]);
    assert_eq!(pastes_before, 1);
    assert!(
        w.replies.iter().any(|(c, ok, m)| *c == 9 && *ok && m.starts_with("pressed Enter; delivered")),
        "{:?}",
        w.replies
    );
}

/// Advance virtual time in 1 ms steps (running due timers) until `done` holds.
fn step_until(w: &mut World, what: &str, mut done: impl FnMut(&World) -> bool) {
    for _ in 0..60_000 {
        if done(w) {
            return;
        }
        let end = w.ms + 1;
        w.settle(1);
        w.ms = end;
    }
    panic!("never: {what}");
}

/// Enters pressed for the item so far (the engine's copy: notes reach the disk with the
/// next state change).
fn enters(w: &World, id: &ItemId) -> usize {
    let item = w.engine.item(id).unwrap_or(&w.disk[id]);
    item.evidence.iter().filter(|n| n.kind == "enter").count()
}

#[test]
fn a_dialog_that_hides_the_box_after_enter_is_not_taken_for_delivery() {
    let mut w = started();
    w.agent.swallow_enters = 1;
    w.agent.dialog_covers_box = true;
    let id = w.item("second prompt");
    step_until(&mut w, "the first Enter", |w| enters(w, &id) == 1);
    // The swallowed Enter left the text in the box; now a dialog opens over it.
    w.agent.dialog = true;
    let view = w.view();
    w.feed(Input::Session(view));
    w.settle(60_000);
    assert_eq!(w.state_of(&id), State::Stuck);
    assert_eq!(w.disk[&id].stuck, Some(StuckClass::SubmitStuck));
    assert!(w.disk[&id].evidence.iter().any(|n| n.kind == "dialog"), "{:?}", w.disk[&id].evidence);
    assert_eq!(enters(&w, &id), 1, "no Enter while the dialog shows");
    assert!(w.agent.dialog && !w.agent.transcript.contains(&"approved".to_string()));
    assert!(w.agent.submitted.is_empty());
    // The operator answers the dialog; force presses Enter on the text still in the box.
    w.agent.dialog = false;
    let view = w.view();
    w.feed(Input::Session(view));
    w.feed(Input::Command { client: 4, command: Command::Force { id: id.clone(), over_draft: false } });
    w.settle(10_000);
    assert_eq!(w.state_of(&id), State::Delivered);
    assert_eq!(w.agent.submitted, vec!["second prompt"]);
}

#[test]
fn a_late_enter_is_seen_on_a_fresh_look_before_any_retry() {
    let mut w = started();
    w.agent.swallow_enters = 1;
    let id = w.item("slow to take it");
    step_until(&mut w, "the first Enter", |w| enters(w, &id) == 1);
    // The agent takes the line just before the verification window ends, after the last poll.
    let deadline = w
        .timers
        .iter()
        .filter(|std::cmp::Reverse((_, k))| k.kind == TimerKind::Deadline && k.step == 1)
        .map(|std::cmp::Reverse((at, _))| *at)
        .max()
        .expect("a deadline is armed");
    let deadline_ms = deadline.duration_since(w.t0).as_millis() as u64;
    step_until(&mut w, "just before the deadline", |w| w.ms + 1 >= deadline_ms);
    let prompt = std::mem::take(&mut w.agent.input);
    w.agent.submitted.push(prompt);
    w.settle(30_000);
    assert_eq!(w.state_of(&id), State::Delivered);
    assert_eq!(enters(&w, &id), 1, "no second Enter once the text has gone");
    assert_eq!(w.agent.submitted, vec!["slow to take it"]);
}

#[test]
fn without_input_borders_the_line_changing_after_enter_is_the_evidence() {
    // A shell-like session: no input-area borders, and what was typed stays visible in the
    // bottom rows after it was submitted (the transcript echoes it).
    let mut w = World::new();
    w.rules = Rc::new(RuleSet::builtin(Provider::Shell));
    w.agent.canonical = true;
    let view = w.view();
    w.feed(Input::Session(view));
    let id = w.item("echo stays visible");
    w.settle(30_000);
    assert_eq!(w.state_of(&id), State::Delivered, "{:?}", w.disk[&id].evidence);
    assert_eq!(enters(&w, &id), 1, "no stray Enter");
    assert_eq!(w.agent.submitted, vec!["echo stays visible"]);
    assert!(w.disk[&id].evidence.iter().any(|n| n.detail.contains("line it was typed on changed")));
}

#[test]
fn a_paste_that_never_shows_is_paste_missing_and_never_pasted_again() {
    let mut w = started();
    w.agent.deaf = true;
    let id = w.item("into the void");
    w.settle(60_000);
    assert_eq!(w.state_of(&id), State::Stuck);
    assert_eq!(w.disk[&id].stuck, Some(StuckClass::PasteMissing));
    assert_eq!(w.disk[&id].attempts, 1);
    // Force re-pastes (the operator decided).
    w.agent.deaf = false;
    w.feed(Input::Command { client: 1, command: Command::Force { id: id.clone(), over_draft: false } });
    w.settle(10_000);
    assert_eq!(w.state_of(&id), State::Delivered);
    assert_eq!(w.disk[&id].attempts, 2);
}

#[test]
fn items_released_together_become_one_digest_and_are_delivered_together() {
    let mut w = World::new();
    let ids: Vec<ItemId> = (0..3).map(|i| w.item(&format!("message {i}"))).collect();
    let view = w.view();
    w.feed(Input::Session(view));
    w.settle(10_000);
    assert_eq!(w.agent.submitted.len(), 1, "{:?}", w.agent.submitted);
    assert!(w.agent.submitted[0].starts_with("You have 3 messages"));
    for id in &ids {
        assert_eq!(w.state_of(id), State::Delivered);
        assert_eq!(w.disk[id].digest_with.len(), 2);
    }
}

#[test]
fn a_newcomer_waits_for_the_delivery_in_flight_and_goes_on_its_own() {
    let mut w = started();
    let first = w.item("first");
    // The first is in flight (echo phase); a second arrives.
    let second = w.item("second");
    w.settle(20_000);
    assert_eq!(w.agent.submitted, vec!["first", "second"]);
    assert_eq!(w.state_of(&first), State::Delivered);
    assert_eq!(w.state_of(&second), State::Delivered);
    assert!(w.disk[&second].digest_with.is_empty());
}

#[test]
fn pause_holds_and_resume_releases() {
    let mut w = started();
    w.feed(Input::Command { client: 1, command: Command::Pause { session: name("s"), reason: "lunch".into() } });
    let id = w.item("after lunch");
    w.settle(5_000);
    assert_eq!(w.state_of(&id), State::Queued);
    assert!(w.engine.queues()[0].hold.as_ref().unwrap().reason.contains("lunch"));
    w.feed(Input::Command { client: 1, command: Command::Resume { session: name("s") } });
    w.settle(5_000);
    assert_eq!(w.state_of(&id), State::Delivered);
}

#[test]
fn drop_removes_a_queued_item_for_good() {
    let mut w = World::new();
    let id = w.item("never mind");
    w.feed(Input::Command { client: 1, command: Command::Drop(id.clone()) });
    assert_eq!(w.state_of(&id), State::Dropped);
    let view = w.view();
    w.feed(Input::Session(view));
    w.settle(5_000);
    assert!(w.agent.submitted.is_empty());
}

/// Issue 18's finding 7: a member removed from a channel after its message was routed to it
/// does not get it. Its queued items of that channel are withdrawn; its other items, other
/// channels' items and items for members still there are left alone.
#[test]
fn a_queued_channel_item_is_withdrawn_when_its_session_leaves_the_channel() {
    let mut w = World::new();
    let channel_item = |w: &mut World, text: &str, channel: &str| {
        let (_, ms) = w.now();
        let mut item = Item::new(ItemId::sequential(ms), "s".into(), Some(1), text.into(), When::Now, "c".into(), ms);
        item.channel = Some(channel.into());
        let id = item.id.clone();
        w.disk.insert(id.clone(), item.clone());
        w.feed(Input::Ingested(item));
        id
    };
    let ops = channel_item(&mut w, "from #ops", "ops");
    let dev = channel_item(&mut w, "from #dev", "dev");
    let plain = w.item("a prompt of its own");
    // Still a member: nothing changes.
    w.feed(Input::ChannelMembers { channel: "ops".into(), receivers: vec!["s".into(), "t".into()] });
    assert_eq!(w.state_of(&ops), State::Queued);
    // Removed from #ops.
    w.feed(Input::ChannelMembers { channel: "ops".into(), receivers: vec!["t".into()] });
    assert_eq!(w.state_of(&ops), State::Dropped);
    let note = w.disk[&ops].evidence.last().unwrap().clone();
    assert_eq!(
        (note.kind.as_str(), note.detail.as_str()),
        ("withdrawn", "withdrawn: s is no longer an agent member of #ops")
    );
    assert_eq!((w.state_of(&dev), w.state_of(&plain)), (State::Queued, State::Queued));
    let view = w.view();
    w.feed(Input::Session(view));
    w.settle(20_000);
    assert_eq!(w.agent.submitted.iter().filter(|p| p.contains("from #ops")).count(), 0);
    assert!(w.agent.submitted.iter().any(|p| p.contains("from #dev")), "{:?}", w.agent.submitted);
    assert!(w.agent.submitted.iter().any(|p| p.contains("a prompt of its own")), "{:?}", w.agent.submitted);
    // A delivered item is not touched by a later removal.
    w.feed(Input::ChannelMembers { channel: "dev".into(), receivers: vec![] });
    assert_eq!(w.state_of(&dev), State::Delivered);
}

#[test]
fn a_session_that_restarts_gets_queued_items_retargeted_and_in_flight_ones_interrupted() {
    let mut w = World::new();
    let id = w.item("for generation one");
    assert_eq!(w.disk[&id].generation, Some(1));
    w.generation = 2;
    let view = w.view();
    w.feed(Input::Session(view));
    w.settle(10_000);
    assert_eq!(w.state_of(&id), State::Delivered);
    assert_eq!(w.disk[&id].generation, Some(2));
    assert!(w.disk[&id].evidence.iter().any(|n| n.kind == "retargeted"));

    // Now one in flight when the session goes away after the paste.
    let mut w = started();
    w.agent.swallow_enters = 100;
    let id = w.item("cut off");
    w.settle(300);
    w.feed(Input::SessionDown { session: "s".into(), generation: Some(1) });
    assert_eq!(w.state_of(&id), State::Stuck);
    assert_eq!(w.disk[&id].stuck, Some(StuckClass::Interrupted));
}

#[test]
fn a_late_result_from_an_old_attempt_changes_nothing() {
    let mut w = started();
    let (now, ms) = w.now();
    let item = Item::new(ItemId::sequential(ms), "s".into(), Some(1), "x".into(), When::Now, "t".into(), ms);
    let id = item.id.clone();
    w.disk.insert(id.clone(), item.clone());
    let actions = w.engine.handle(Input::Ingested(item), now, ms);
    let Some(Action::Snapshot { token, .. }) = actions.iter().find(|a| matches!(a, Action::Snapshot { .. })).cloned()
    else {
        panic!("{actions:?}")
    };
    // The session restarts before the baseline arrives; the old snapshot then comes in late.
    w.generation = 2;
    let view = w.view();
    let _ = w.engine.handle(Input::Session(view), now, ms);
    let late = w.engine.handle(Input::Snapshot { token, result: Ok(w.agent.screen()) }, now, ms);
    assert!(!late.iter().any(|a| matches!(a, Action::Write { .. })), "{late:?}");
}

#[test]
fn a_controller_typing_holds_delivery() {
    let mut w = started();
    let (now, ms) = w.now();
    let item = Item::new(ItemId::sequential(ms), "s".into(), Some(1), "wait for me".into(), When::Now, "t".into(), ms);
    let id = item.id.clone();
    w.disk.insert(id.clone(), item.clone());
    let actions = w.engine.handle(Input::Ingested(item), now, ms);
    let token =
        actions.iter().find_map(|a| if let Action::Snapshot { token, .. } = a { Some(*token) } else { None }).unwrap();
    let mut screen = w.agent.screen();
    screen.last_typed_ms = Some(ms - 500);
    let actions = w.engine.handle(Input::Snapshot { token, result: Ok(screen) }, now, ms);
    assert!(!actions.iter().any(|a| matches!(a, Action::Write { .. })));
    assert!(w.engine.queues()[0].hold.as_ref().unwrap().reason.contains("typing"));
    let retry = actions.iter().find_map(|a| if let Action::Arm { at, .. } = a { Some(*at) } else { None }).unwrap();
    assert_eq!(retry, now + Duration::from_millis(1500));
}

#[test]
fn when_idle_waits_for_the_agent_to_be_idle() {
    let mut w = started();
    w.activity = Activity::Working;
    let view = w.view();
    w.feed(Input::Session(view));
    let (_, ms) = w.now();
    let item = Item::new(ItemId::sequential(ms), "s".into(), Some(1), "later".into(), When::Idle, "t".into(), ms);
    let id = item.id.clone();
    w.disk.insert(id.clone(), item.clone());
    w.feed(Input::Ingested(item));
    w.settle(5_000);
    assert_eq!(w.state_of(&id), State::Queued);
    w.activity = Activity::Idle;
    let view = w.view();
    w.feed(Input::Session(view));
    w.settle(5_000);
    assert_eq!(w.state_of(&id), State::Delivered);
}

#[test]
fn an_item_found_sending_whose_master_is_unreachable_at_start_up_is_stuck_interrupted() {
    let mut w = started();
    w.agent.swallow_enters = 100;
    let id = w.item("cut off by a crash");
    w.settle(300);
    assert_eq!(w.state_of(&id), State::Sending);
    // The daemon restarts and no master of the session answers: there is no generation to name.
    w.restore();
    w.feed(Input::SessionDown { session: "s".into(), generation: None });
    assert_eq!(w.state_of(&id), State::Stuck);
    assert_eq!(w.disk[&id].stuck, Some(StuckClass::Interrupted));
}

#[test]
fn a_provider_that_steers_mid_turn_gets_prompts_only_between_turns() {
    // Codex takes a prompt typed mid-turn as an interruption of the running turn.
    let mut w = started();
    w.rules = Rc::new(RuleSet::builtin(Provider::Codex));
    w.agent.codex_style = true;
    assert!(w.rules.delivery.hold_while_working);
    w.activity = Activity::Working;
    let view = w.view();
    w.feed(Input::Session(view));
    let id = w.item("next task");
    w.settle(5_000);
    assert_eq!(w.state_of(&id), State::Queued, "nothing is typed while the agent works");
    assert!(w.agent.transcript.is_empty() && w.agent.input.is_empty());
    w.activity = Activity::Idle;
    let view = w.view();
    w.feed(Input::Session(view));
    w.settle(5_000);
    assert_eq!(w.state_of(&id), State::Delivered);
}

#[test]
fn without_borders_a_cursor_that_moved_is_no_evidence_while_the_text_stays_in_a_raw_mode_box() {
    // Codex: no input borders, raw mode. Its composer takes the Enter as a newline (or a popup
    // takes it): the text stays in the box, only the cursor moved to a new row.
    let mut w = World::new();
    w.rules = Rc::new(RuleSet::builtin(Provider::Codex));
    w.agent.codex_style = true;
    let view = w.view();
    w.feed(Input::Session(view));
    w.agent.swallow_enters = 1;
    w.agent.enter_newline = true;
    let id = w.item("summarise the open issues");
    step_until(&mut w, "the first Enter", |w| enters(w, &id) == 1);
    w.settle(100);
    assert_eq!(w.state_of(&id), State::Sending, "the moved cursor is no evidence: {:?}", w.engine.item(&id));
    // The window's end finds the text still in the box: Enter again, and this one submits.
    w.settle(60_000);
    assert_eq!(w.state_of(&id), State::Delivered, "{:?}", w.disk[&id].evidence);
    assert_eq!(w.agent.submitted, vec!["summarise the open issues\n"]);
}

#[test]
fn the_late_hook_of_an_earlier_identical_prompt_does_not_deliver_the_next_one() {
    // Mid-turn, the agent queues the first prompt; it leaves the box: delivered, before any
    // hook was ever seen from this agent.
    let mut w = started();
    w.agent.working = true;
    w.activity = Activity::Working;
    let view = w.view();
    w.feed(Input::Session(view));
    let a = w.item("continue with the plan");
    w.settle(1_000);
    assert_eq!(w.state_of(&a), State::Delivered);
    w.agent.swallow_enters = 100;
    let b = w.item("continue with the plan");
    step_until(&mut w, "b's Enter", |w| enters(w, &b) == 1);
    w.agent.finish_turn();
    let at_ms = w.now().1;
    w.feed(Input::Hook {
        session: "s".into(),
        generation: w.generation,
        event: "UserPromptSubmit".into(),
        detail: Some("continue with the plan".into()),
        prompt: Some(crate::state::hooks::PromptSig::of("continue with the plan")),
        at_ms,
    });
    w.settle(60_000);
    assert_eq!(w.agent.submitted.iter().filter(|p| *p == "continue with the plan").count(), 1);
    assert_eq!(w.state_of(&b), State::Stuck, "{:?}", w.disk[&b].evidence);
    assert_eq!(w.disk[&b].stuck, Some(StuckClass::SubmitStuck));
}

#[test]
fn working_again_after_a_dialog_is_answered_is_no_evidence_of_delivery() {
    let mut w = started();
    w.agent.swallow_enters = 1;
    w.agent.dialog_covers_box = true;
    let id = w.item("second prompt");
    step_until(&mut w, "the first Enter", |w| enters(w, &id) == 1);
    // The swallowed Enter left the text in the box; a dialog opens over it...
    w.agent.dialog = true;
    let view = w.view();
    w.feed(Input::Session(view));
    w.settle(300);
    // ...and the operator answers it within the window; the agent goes on working.
    w.agent.dialog = false;
    w.activity = Activity::Working;
    let view = w.view();
    w.feed(Input::Session(view));
    w.settle(60_000);
    // Not delivered on the agent going back to work: the window's end looked again, found the
    // text in the box, and pressed Enter on it.
    let evidence = &w.disk[&id].evidence;
    assert!(!evidence.iter().any(|n| n.detail.contains("turned working")), "{evidence:?}");
    assert_eq!(enters(&w, &id), 2, "{evidence:?}");
    assert_eq!(w.state_of(&id), State::Delivered);
    assert_eq!(w.agent.submitted, vec!["second prompt"]);
}

#[test]
fn no_enter_while_the_session_reports_blocked_even_without_a_dialog_on_screen() {
    // Blocked known from a hook or a title, with a dialog no screen rule matches.
    let mut w = started();
    w.agent.swallow_enters = 1;
    let id = w.item("retry me");
    step_until(&mut w, "the first Enter", |w| enters(w, &id) == 1);
    let mut view = w.view();
    view.activity = Activity::Blocked;
    view.wait = Some("approval".into());
    w.feed(Input::Session(view));
    w.settle(60_000);
    assert_eq!(enters(&w, &id), 1);
    assert_eq!(w.state_of(&id), State::Stuck);
    assert_eq!(w.disk[&id].stuck, Some(StuckClass::SubmitStuck));
}

#[test]
fn a_settle_delay_is_waited_out_after_the_echo_then_one_enter_delivers() {
    let mut w = World::new();
    // Claude Code's table waits 50 ms between the echo and the Enter.
    let table = "provider = \"settle\"\nready_on = [\"mode\"]\n[delivery]\nsubmit_delay_ms = 50\ninput_top = \"^╭\"\ninput_bottom = \"^╰\"\n";
    w.rules = Rc::new(RuleSet::parse(table, "test").expect("a valid table"));
    let view = w.view();
    w.feed(Input::Session(view));
    let id = w.item("settle me");
    w.settle(60_000);
    assert_eq!(w.state_of(&id), State::Delivered, "{:?}", w.disk[&id].evidence);
    assert_eq!(w.agent.submitted, vec!["settle me"]);
    assert_eq!(enters(&w, &id), 1);
    let at = |kind: &str| w.disk[&id].evidence.iter().find(|n| n.kind == kind).map(|n| n.at_ms);
    let (echoed, enter) = (at("echoed").expect("an echo"), at("enter").expect("an Enter"));
    assert!(enter >= echoed + 50, "the Enter came {} ms after the echo", enter - echoed);
}

#[test]
fn a_failed_look_before_the_enter_never_leaves_the_queue_hanging() {
    let mut w = World::new();
    // A settle delay between the echo and the Enter (as Claude Code's table has), with the
    // simulated agent's box.
    let table = "provider = \"settle\"\nready_on = [\"mode\"]\n[delivery]\nsubmit_delay_ms = 50\ninput_top = \"^╭\"\ninput_bottom = \"^╰\"\n";
    w.rules = Rc::new(RuleSet::parse(table, "test").expect("a valid table"));
    let view = w.view();
    w.feed(Input::Session(view));
    let id = w.item("settle me");
    step_until(&mut w, "the echo", |w| {
        w.engine.item(&id).is_some_and(|i| i.evidence.iter().any(|n| n.kind == "echoed"))
    });
    w.fail_reads = 1; // the pre-Enter look after the settle delay fails once
    w.settle(600_000);
    assert_ne!(w.state_of(&id), State::Sending, "{:?}", w.disk[&id].evidence);
    assert!(!w.engine.busy());
    // Its text may still sit in the box: the next prompt is not pasted on top of it.
    let later = w.item("later");
    w.settle(10_000);
    if !w.agent.input.is_empty() {
        assert_eq!(w.state_of(&later), State::Queued);
        w.agent.input.clear();
    }
    w.settle(600_000);
    assert_ne!(w.state_of(&later), State::Queued);
}

#[test]
fn a_paste_that_shows_just_before_the_echo_deadline_is_seen_on_a_fresh_look() {
    let mut w = started();
    w.agent.deaf = true;
    let id = w.item("slow echo");
    let deadline = w
        .timers
        .iter()
        .filter(|std::cmp::Reverse((_, k))| k.kind == TimerKind::Deadline && k.step == 0)
        .map(|std::cmp::Reverse((at, _))| *at)
        .max()
        .expect("an echo deadline");
    let deadline_ms = deadline.duration_since(w.t0).as_millis() as u64;
    step_until(&mut w, "just before the echo deadline", |w| w.ms + 1 >= deadline_ms);
    // The agent shows the paste only now, after the last poll.
    w.agent.deaf = false;
    w.agent.input = "slow echo".into();
    w.settle(30_000);
    assert_eq!(w.state_of(&id), State::Delivered, "{:?}", w.disk[&id].evidence);
    assert_eq!(w.agent.submitted, vec!["slow echo"]);
}

#[test]
fn a_forced_enter_waits_for_a_person_typing_in_an_attached_terminal() {
    let mut w = started();
    w.agent.swallow_enters = 100;
    let id = w.item("stuck in the box");
    w.settle(60_000);
    assert_eq!(w.disk[&id].stuck, Some(StuckClass::SubmitStuck));
    w.agent.swallow_enters = 0;
    w.agent.last_typed_ms = Some(w.now().1);
    w.feed(Input::Command { client: 3, command: Command::Force { id: id.clone(), over_draft: false } });
    w.settle(100);
    assert_eq!(w.state_of(&id), State::Stuck);
    assert!(w.agent.submitted.is_empty(), "no Enter while someone types");
    assert!(w.replies.iter().any(|(c, ok, m)| *c == 3 && !*ok && m.contains("typing")), "{:?}", w.replies);
    // Once they have stopped, force goes through.
    w.ms += TYPING_HOLD.as_millis() as u64;
    w.feed(Input::Command { client: 3, command: Command::Force { id: id.clone(), over_draft: false } });
    w.settle(10_000);
    assert_eq!(w.state_of(&id), State::Delivered);
    assert_eq!(w.agent.submitted, vec!["stuck in the box"]);
}

fn hold_reason(w: &World) -> String {
    w.engine
        .queues()
        .iter()
        .find(|q| q.session == "s")
        .and_then(|q| q.hold.clone())
        .map(|h| h.reason)
        .unwrap_or_default()
}

#[test]
fn a_draft_in_the_input_box_holds_the_queue_until_it_is_sent_or_cleared() {
    let mut w = started();
    w.agent.input = "half typed draftword".into();
    let id = w.item("queued prompt");
    // However long it takes: no time limit, nothing typed, nothing on disk but `queued`.
    w.settle(600_000);
    assert_eq!(w.state_of(&id), State::Queued);
    assert_eq!(w.agent.input, "half typed draftword");
    assert!(w.agent.submitted.is_empty());
    assert_eq!(
        hold_reason(&w),
        "the input box holds text typed by someone (20 characters); delivery waits until it is sent or cleared"
    );
    // The person sends their draft: the prompt follows on its own.
    w.agent.write(b"\r");
    w.settle(10_000);
    assert_eq!(w.state_of(&id), State::Delivered, "{:?}", w.disk[&id].evidence);
    assert_eq!(w.agent.submitted, vec!["half typed draftword", "queued prompt"]);
}

#[test]
fn force_on_an_item_held_by_a_draft_explains_and_pastes_only_with_over_draft() {
    let mut w = started();
    w.agent.input = "draft".into();
    let id = w.item("queued prompt");
    w.settle(5_000);
    w.feed(Input::Command { client: 7, command: Command::Force { id: id.clone(), over_draft: false } });
    w.settle(5_000);
    let (_, ok, message) = w.replies.iter().rfind(|(c, _, _)| *c == 7).expect("a reply");
    assert!(!ok && message.contains("--over-draft") && message.contains("one message"), "{message}");
    assert_eq!(w.state_of(&id), State::Queued);
    assert_eq!(w.agent.input, "draft");
    w.feed(Input::Command { client: 7, command: Command::Force { id: id.clone(), over_draft: true } });
    w.settle(10_000);
    assert_eq!(w.agent.submitted, vec!["draftqueued prompt"]);
    assert!(w.disk[&id].evidence.iter().any(|n| n.detail.contains("onto text someone typed")), "{:?}", w.disk[&id]);
}

#[test]
fn a_hook_reporting_the_prompt_glued_to_other_text_is_merged_not_delivered() {
    let mut w = started();
    // Text someone typed arrives between the look and the Enter (an attached terminal with
    // no typing hold, a program writing to the box).
    w.agent.swallow_enters = 100;
    let id = w.item("queued prompt");
    step_until(&mut w, "the Enter", |w| enters(w, &id) == 1);
    let at_ms = w.now().1;
    w.feed(Input::Hook {
        session: "s".into(),
        generation: w.generation,
        event: "UserPromptSubmit".into(),
        detail: Some("half typed draftwordqueued prompt".into()),
        prompt: Some(crate::state::hooks::PromptSig::of("half typed draftwordqueued prompt")),
        at_ms,
    });
    w.settle(1_000);
    assert_eq!(w.state_of(&id), State::Stuck);
    assert_eq!(w.disk[&id].stuck, Some(StuckClass::Merged));
    let evidence = &w.disk[&id].evidence.last().expect("evidence").detail;
    assert!(
        evidence.contains("half typed draftwordqueued prompt") && evidence.contains("\"queued prompt\""),
        "{evidence}"
    );
    // Force does not send it a second time.
    w.feed(Input::Command { client: 2, command: Command::Force { id: id.clone(), over_draft: false } });
    w.settle(1_000);
    assert!(w.replies.iter().any(|(c, ok, m)| *c == 2 && !*ok && m.contains("merged")), "{:?}", w.replies);
}

#[test]
fn a_program_not_reading_a_line_is_never_typed_into() {
    let mut w = World::new();
    w.rules = Rc::new(RuleSet::builtin(Provider::Shell));
    let view = w.view();
    w.feed(Input::Session(view));
    w.agent.canonical = false; // vim, less, a full-screen program
    let id = w.item("x");
    w.settle(600_000);
    assert_eq!(w.state_of(&id), State::Queued);
    assert!(w.agent.input.is_empty() && w.agent.submitted.is_empty());
    assert_eq!(hold_reason(&w), "the program is not reading a line (raw mode: an editor or full-screen program)");
    // Back at a prompt that reads a line.
    w.agent.canonical = true;
    w.settle(10_000);
    assert_eq!(w.state_of(&id), State::Delivered, "{:?}", w.disk[&id].evidence);
}

#[test]
fn after_a_restart_an_identical_prompt_s_hook_settles_nothing_whose_paste_is_not_on_record() {
    // `continue` was delivered mid-turn (its hook still owed); a second `continue` was claimed
    // and the daemon died before pasting it. The first one's late hook must not deliver it.
    let mut w = started();
    let (now, ms) = w.now();
    let mut item =
        Item::new(ItemId::sequential(ms), "s".into(), Some(w.generation), "continue".into(), When::Now, "t".into(), ms);
    item.state = State::Sending;
    item.note(ms, "claimed", "attempt 1");
    let id = item.id.clone();
    w.disk.insert(id.clone(), item.clone());
    let mut engine = Engine::new();
    engine.handle(Input::Restore(vec![item]), now, ms);
    w.engine = engine;
    w.feed(Input::Hook {
        session: "s".into(),
        generation: w.generation,
        event: "UserPromptSubmit".into(),
        detail: Some("continue".into()),
        prompt: Some(crate::state::hooks::PromptSig::of("continue")),
        at_ms: ms + 100,
    });
    let view = w.view();
    w.feed(Input::Session(view));
    w.settle(10_000);
    assert_eq!(w.state_of(&id), State::Stuck, "{:?}", w.disk[&id].evidence);
    assert_eq!(w.disk[&id].stuck, Some(StuckClass::Interrupted));
    assert!(w.agent.submitted.is_empty());
}

#[test]
fn text_typed_beside_the_paste_before_the_enter_is_merged_and_no_enter_is_pressed() {
    let mut w = started();
    w.agent.deaf = true; // the paste shows only once the test lets it
    let id = w.item("queued prompt");
    step_until(&mut w, "the paste", |w| {
        w.engine.item(&id).is_some_and(|i| i.evidence.iter().any(|n| n.kind == "pasted"))
    });
    // The paste arrives, and someone's keystrokes with it.
    w.agent.input = "queued prompt and my own words".into();
    w.settle(10_000);
    assert_eq!(w.state_of(&id), State::Stuck, "{:?}", w.disk[&id].evidence);
    assert_eq!(w.disk[&id].stuck, Some(StuckClass::Merged));
    assert!(w.disk[&id].evidence.last().is_some_and(|n| n.detail.contains("and my own words")));
    assert_eq!(enters(&w, &id), 0);
    assert!(w.agent.submitted.is_empty());
}

#[test]
fn a_paste_into_a_program_that_left_line_input_is_unobservable_not_missing() {
    let mut w = World::new();
    w.rules = Rc::new(RuleSet::builtin(Provider::Shell));
    w.agent.canonical = true;
    let view = w.view();
    w.feed(Input::Session(view));
    let id = w.item("x");
    step_until(&mut w, "the paste", |w| {
        w.engine.item(&id).is_some_and(|i| i.evidence.iter().any(|n| n.kind == "pasted"))
    });
    // vim took over: the keys went to it, nothing shows.
    w.agent.canonical = false;
    w.agent.input.clear();
    w.agent.deaf = true;
    w.settle(60_000);
    assert_eq!(w.state_of(&id), State::Stuck);
    assert_eq!(w.disk[&id].stuck, Some(StuckClass::Unobservable), "{:?}", w.disk[&id].evidence);
}

fn user_prompt_hook(w: &World, text: &str) -> Input {
    Input::Hook {
        session: "s".into(),
        generation: w.generation,
        event: "UserPromptSubmit".into(),
        detail: Some(text.into()),
        prompt: Some(crate::state::hooks::PromptSig::of(text)),
        at_ms: w.now().1,
    }
}

/// `continue`, taken into the agent's own queue mid-turn: delivered, its hook owed.
fn delivered_mid_turn(w: &mut World, text: &str) -> ItemId {
    w.agent.working = true;
    w.activity = Activity::Working;
    let view = w.view();
    w.feed(Input::Session(view));
    let id = w.item(text);
    w.settle(2_000);
    assert_eq!(w.state_of(&id), State::Delivered);
    id
}

#[test]
fn a_hook_owed_by_a_delivered_prompt_is_remembered_across_a_restart() {
    let mut w = started();
    let a = delivered_mid_turn(&mut w, "continue");
    assert!(w.disk[&a].hook_owed.is_some() && w.disk[&a].queued_by_agent, "{:?}", w.disk[&a]);
    w.restart();
    // A second `continue` is typed; its Enter is swallowed, so only a hook could settle it...
    w.agent.swallow_enters = 100;
    let b = w.item("continue");
    step_until(&mut w, "b's Enter", |w| enters(w, &b) == 1);
    // ...and the hook that comes is the first one's (the turn ended, the agent took it).
    let hook = user_prompt_hook(&w, "continue");
    w.feed(hook);
    w.settle(60_000);
    assert_eq!(w.state_of(&b), State::Stuck, "{:?}", w.disk[&b].evidence);
    assert!(w.disk[&a].hook_owed.is_none(), "paid, on disk too: {:?}", w.disk[&a]);
}

#[test]
fn a_prompt_the_agent_queued_and_never_took_is_not_left_delivered_when_the_session_ends() {
    let mut w = started();
    let hook = Input::Hook {
        session: "s".into(),
        generation: w.generation,
        event: "SessionStart".into(),
        detail: None,
        prompt: None,
        at_ms: w.now().1,
    };
    w.feed(hook);
    let a = delivered_mid_turn(&mut w, "queued mid-turn");
    // The agent dies before its turn ends: it never took the prompt.
    w.feed(Input::SessionDown { session: "s".into(), generation: Some(w.generation) });
    assert_eq!(w.state_of(&a), State::Stuck, "{:?}", w.disk[&a].evidence);
    assert_eq!(w.disk[&a].stuck, Some(StuckClass::Interrupted));
    assert!(w.disk[&a].evidence.last().is_some_and(|n| n.detail.contains("neither its UserPromptSubmit hook")));
}

#[test]
fn a_prompt_whose_hook_came_stays_delivered_when_the_session_ends() {
    let mut w = started();
    let a = delivered_mid_turn(&mut w, "queued mid-turn");
    let hook = user_prompt_hook(&w, "queued mid-turn");
    w.feed(hook);
    w.feed(Input::SessionDown { session: "s".into(), generation: Some(w.generation) });
    assert_eq!(w.state_of(&a), State::Delivered);
}

#[test]
fn a_digest_item_left_sending_by_a_crash_takes_its_settled_sibling_s_outcome() {
    let mut w = started();
    w.agent.deaf = true; // hold the first delivery so that two items become one digest
    w.engine = Engine::new();
    let (now, ms) = w.now();
    let mk =
        |text: &str| Item::new(ItemId::sequential(ms), "s".into(), Some(1), text.into(), When::Now, "t".into(), ms);
    let (mut a, mut b) = (mk("first of two"), mk("second of two"));
    a.state = State::Delivered;
    a.digest_with = vec![b.id.clone()];
    b.state = State::Sending;
    b.digest_with = vec![a.id.clone()];
    b.note(ms, "claimed", "attempt 1: one digest of 2 items");
    w.disk.insert(a.id.clone(), a.clone());
    w.disk.insert(b.id.clone(), b.clone());
    let _ = now;
    w.restart();
    w.settle(10_000);
    assert_eq!(w.state_of(&b.id), State::Delivered, "{:?}", w.disk[&b.id].evidence);
    assert!(w.agent.input.is_empty() && w.agent.submitted.is_empty(), "nothing typed again");
}

#[test]
fn idle_from_before_the_last_prompt_is_not_trusted_for_a_when_idle_item() {
    let mut w = started();
    let a = w.item("first task");
    step_until(&mut w, "a delivered", |w| w.disk[&a].state == State::Delivered);
    // The agent started working on it, but nothing has said so yet: "idle" is from before.
    let (_, ms) = w.now();
    let b = Item::new(
        ItemId::sequential(ms),
        "s".into(),
        Some(w.generation),
        "when idle".into(),
        When::Idle,
        "t".into(),
        ms,
    );
    let b_id = b.id.clone();
    w.disk.insert(b_id.clone(), b.clone());
    w.feed(Input::Ingested(b));
    w.settle(500);
    assert_eq!(w.state_of(&b_id), State::Queued, "not typed on a stale idle");
    assert_eq!(hold_reason(&w), "waiting to see the agent's state after the last prompt");
    // The turn shows, then ends.
    w.activity = Activity::Working;
    let view = w.view();
    w.feed(Input::Session(view));
    w.settle(1_000);
    assert_eq!(w.state_of(&b_id), State::Queued);
    w.activity = Activity::Idle;
    let view = w.view();
    w.feed(Input::Session(view));
    w.settle(10_000);
    assert_eq!(w.state_of(&b_id), State::Delivered);
    assert_eq!(w.agent.submitted, vec!["first task", "when idle"]);
}

#[test]
fn a_prompt_typed_on_a_stale_idle_counts_as_queued_by_the_agent_until_it_stays_idle() {
    let mut w = started();
    let a = w.item("first task");
    step_until(&mut w, "a delivered", |w| w.disk[&a].state == State::Delivered);
    let b = w.item("second task");
    step_until(&mut w, "b delivered", |w| w.disk[&b].state == State::Delivered);
    assert!(w.disk[&b].queued_by_agent, "typed while the agent's state after a was not known yet");
    assert!(!w.disk[&a].queued_by_agent, "a was typed into an agent known to be idle");
    // a's turn shows and ends; a moment of idle proves nothing (the agent takes its next
    // queued prompt right after it)...
    for activity in [Activity::Working, Activity::Idle, Activity::Working, Activity::Idle] {
        w.activity = activity;
        let view = w.view();
        w.feed(Input::Session(view));
        w.settle(500);
        assert!(w.disk[&b].queued_by_agent, "a moment of idle is not enough");
    }
    // ...staying idle does: its own queue is empty.
    w.settle(QUEUE_DRAINED.as_millis() as u64);
    assert!(!w.disk[&b].queued_by_agent, "{:?}", w.disk[&b].evidence);
    w.feed(Input::SessionDown { session: "s".into(), generation: Some(w.generation) });
    assert_eq!(w.state_of(&b), State::Delivered);
}

#[test]
fn a_prompt_typed_at_a_turn_boundary_behind_a_queued_one_is_not_called_taken_by_that_one_s_turn() {
    let mut w = started();
    // x is typed mid-turn: the agent queues it.
    let x = delivered_mid_turn(&mut w, "queued first");
    assert!(w.disk[&x].queued_by_agent);
    // The turn ends: idle (for a moment, as the agent is about to take x).
    w.activity = Activity::Idle;
    let view = w.view();
    w.feed(Input::Session(view));
    let y = w.item("typed at the boundary");
    step_until(&mut w, "y delivered", |w| w.disk[&y].state == State::Delivered);
    assert!(w.disk[&y].queued_by_agent, "x was still queued ahead of it");
    // The agent starts x's turn: that proves nothing about either.
    w.activity = Activity::Working;
    let view = w.view();
    w.feed(Input::Session(view));
    w.settle(QUEUE_DRAINED.as_millis() as u64 * 2);
    assert!(w.disk[&x].queued_by_agent && w.disk[&y].queued_by_agent);
    // Killed before the agent ever stayed idle: neither is claimed as taken.
    w.feed(Input::SessionDown { session: "s".into(), generation: Some(w.generation) });
    assert_eq!(w.state_of(&x), State::Stuck);
    assert_eq!(w.state_of(&y), State::Stuck);
}

// ----- desk's own prompt left unsent in the input box (issue 24, §1 and §4) -----

/// A paste that never showed (the agent was stopped), then landed in the box when the agent
/// went on: stuck paste-missing first, then the paste sits there.
fn paste_lands_late(w: &mut World, text: &str) -> ItemId {
    w.agent.deaf = true;
    let id = w.item(text);
    w.settle(10_000);
    assert_eq!(w.disk[&id].stuck, Some(StuckClass::PasteMissing), "{:?}", w.disk[&id].evidence);
    w.agent.deaf = false;
    w.agent.input = text.into();
    id
}

fn last_reply(w: &World, client: u64) -> (bool, String) {
    let (_, ok, message) = w.replies.iter().rfind(|(c, _, _)| *c == client).expect("a reply").clone();
    (ok, message)
}

#[test]
fn desk_s_own_paste_landing_late_is_recognised_and_named_never_taken_for_a_draft() {
    let mut w = started();
    let id = paste_lands_late(&mut w, "stopped agent prompt SA1");
    // Watched for: within a couple of looks the item says where its prompt is.
    w.settle(3_000);
    let item = &w.disk[&id];
    assert_eq!(item.stuck, Some(StuckClass::SubmitStuck), "{:?}", item.evidence);
    let last = item.evidence.iter().rfind(|n| n.kind == "stuck").unwrap();
    assert!(last.detail.contains("the prompt sits unsent in the agent's input box"), "{last:?}");
    // The session's next item is held, and the hold names the item whose prompt holds it.
    let next = w.item("the next prompt");
    w.settle(5_000);
    assert_eq!(w.state_of(&next), State::Queued);
    let hold = hold_reason(&w);
    assert!(
        hold.contains(&format!("unsent prompt of stuck item {id}")) && !hold.contains("typed by someone"),
        "{hold}"
    );
    // A force on the waiting item is refused with the same reason: no paste onto desk's own text.
    w.feed(Input::Command { client: 5, command: Command::Force { id: next.clone(), over_draft: true } });
    let (ok, message) = last_reply(&w, 5);
    assert!(!ok && message.contains(id.as_str()), "{message}");
    assert_eq!(w.agent.input, "stopped agent prompt SA1");
    // Forcing the stuck item presses Enter only: the prompt goes once, then the next one.
    w.feed(Input::Command { client: 6, command: Command::Force { id: id.clone(), over_draft: false } });
    w.settle(10_000);
    assert_eq!(w.agent.submitted, vec!["stopped agent prompt SA1", "the next prompt"]);
    assert_eq!(w.state_of(&id), State::Delivered);
    assert_eq!(w.state_of(&next), State::Delivered);
    let (ok, message) = last_reply(&w, 6);
    assert!(ok && message.starts_with("pressed Enter; delivered"), "{message}");
}

#[test]
fn a_force_on_a_paste_missing_item_whose_paste_sits_in_the_box_presses_enter_only() {
    let mut w = started();
    let id = paste_lands_late(&mut w, "stopped agent prompt SA1");
    // Forced before any look noticed the paste: the force's own look finds it.
    w.feed(Input::Command { client: 2, command: Command::Force { id: id.clone(), over_draft: false } });
    w.settle(10_000);
    assert_eq!(w.agent.submitted, vec!["stopped agent prompt SA1"], "one prompt, once, alone");
    assert_eq!(w.state_of(&id), State::Delivered);
    // --over-draft does not paste it a second time either.
    let mut w = started();
    let id = paste_lands_late(&mut w, "stopped agent prompt SA1");
    w.feed(Input::Command { client: 2, command: Command::Force { id: id.clone(), over_draft: true } });
    w.settle(10_000);
    assert_eq!(w.agent.submitted, vec!["stopped agent prompt SA1"]);
}

#[test]
fn a_digest_left_unsent_in_the_box_goes_whole_with_one_force_on_any_of_its_items() {
    let mut w = World::new();
    w.agent.deaf = true;
    let a = w.item("queued A");
    let b = w.item("queued B");
    let view = w.view();
    w.feed(Input::Session(view));
    w.settle(10_000);
    assert_eq!(w.disk[&a].digest_with, vec![b.clone()]);
    let digest = text::digest(&[&w.disk[&a], &w.disk[&b]]);
    w.agent.deaf = false;
    w.agent.input = digest.clone();
    w.settle(3_000);
    for id in [&a, &b] {
        assert_eq!(w.disk[id].stuck, Some(StuckClass::SubmitStuck), "{:?}", w.disk[id].evidence);
    }
    w.feed(Input::Command { client: 3, command: Command::Force { id: b.clone(), over_draft: false } });
    w.settle(10_000);
    assert_eq!(w.agent.submitted, vec![digest]);
    assert_eq!((w.state_of(&a), w.state_of(&b)), (State::Delivered, State::Delivered));
}

#[test]
fn drop_erases_desk_s_own_unsent_prompt_only_when_the_box_holds_exactly_it() {
    let mut w = started();
    let id = paste_lands_late(&mut w, "stopped agent prompt SA1");
    w.settle(3_000);
    w.feed(Input::Command { client: 4, command: Command::Drop(id.clone()) });
    w.settle(5_000);
    assert_eq!(w.state_of(&id), State::Dropped);
    assert_eq!(w.agent.input, "", "the box is cleared");
    assert!(w.agent.submitted.is_empty());
    let (ok, message) = last_reply(&w, 4);
    assert!(ok && message.contains("cleared its prompt from the agent's input box"), "{message}");
    // With someone's text beside it, the box is left alone.
    let mut w = started();
    let id = paste_lands_late(&mut w, "stopped agent prompt SA1");
    w.agent.input.push_str(" and my words");
    w.feed(Input::Command { client: 4, command: Command::Drop(id.clone()) });
    w.settle(5_000);
    assert_eq!(w.state_of(&id), State::Dropped);
    assert_eq!(w.agent.input, "stopped agent prompt SA1 and my words");
    let (ok, message) = last_reply(&w, 4);
    assert!(ok && message.contains("left as it is"), "{message}");
}

#[test]
fn a_collapsed_paste_of_desk_s_is_recognised_by_a_placeholder_whose_count_agrees() {
    let mut w = started();
    let text = "line one\nline two\nline three\nline four\nline five";
    let id = paste_lands_late(&mut w, text);
    w.agent.placeholder = Some("[Pasted text #1 +5 lines]".into());
    w.settle(3_000);
    assert_eq!(w.disk[&id].stuck, Some(StuckClass::SubmitStuck), "{:?}", w.disk[&id].evidence);
    // A placeholder of another size is not desk's prompt.
    let mut w = started();
    let id = paste_lands_late(&mut w, text);
    w.agent.placeholder = Some("[Pasted text #1 +9 lines]".into());
    w.settle(3_000);
    assert_eq!(w.disk[&id].stuck, Some(StuckClass::PasteMissing));
}

#[test]
fn a_forced_paste_that_still_does_not_show_says_it_pasted_again_and_counts_one_attempt_number() {
    let mut w = started();
    w.agent.deaf = true;
    let id = w.item("into the void");
    w.settle(10_000);
    w.feed(Input::Command { client: 8, command: Command::Force { id: id.clone(), over_draft: false } });
    w.settle(10_000);
    let (ok, message) = last_reply(&w, 8);
    assert!(!ok && message.starts_with("pasted again; still not seen in the input area"), "{message}");
    // One number: the item's attempts, and every note that names an attempt, count the same.
    let item = &w.disk[&id];
    assert_eq!(item.attempts, 2);
    let named: Vec<&str> = item
        .evidence
        .iter()
        .filter(|n| n.kind == "claimed" || n.kind == "forced")
        .filter_map(|n| n.detail.strip_prefix("attempt "))
        .collect();
    assert!(named.len() == 2 && named[0].starts_with("1") && named[1].starts_with("2"), "{:?}", item.evidence);
    // A refusal typed nothing, and says so.
    w.agent.dialog = true;
    let view = w.view();
    w.feed(Input::Session(view));
    w.feed(Input::Command { client: 8, command: Command::Force { id: id.clone(), over_draft: false } });
    let (ok, message) = last_reply(&w, 8);
    assert!(!ok && !message.starts_with("pasted"), "{message}");
}

#[test]
fn a_job_with_the_terminal_holds_delivery_until_the_program_has_it_back() {
    let mut w = World::new();
    w.rules = Rc::new(RuleSet::builtin(Provider::Shell));
    w.agent.canonical = true;
    // A shell ran `sleep 8`: the kernel would keep the line until `sleep` ends, and the shell
    // would then run it as a command.
    let job = desk_wire::Foreground { pgid: 77, program: "sleep".into(), own: false, reading: Some(false) };
    w.agent.foreground = Some(job);
    let view = w.view();
    w.feed(Input::Session(view));
    let id = w.item("touch PWNED");
    w.settle(600_000);
    assert_eq!(w.state_of(&id), State::Queued);
    assert!(w.agent.input.is_empty() && w.agent.submitted.is_empty());
    assert!(hold_reason(&w).starts_with("`sleep` (process group 77) has the terminal"), "{}", hold_reason(&w));
    // Its own program again, but busy (a loop of builtins): nothing reads the terminal.
    w.agent.foreground = Some(desk_wire::Foreground { pgid: 5, program: "sh".into(), own: true, reading: Some(false) });
    w.settle(10_000);
    assert_eq!(w.state_of(&id), State::Queued);
    assert!(hold_reason(&w).starts_with("nothing reads the terminal now (sh is busy"), "{}", hold_reason(&w));
    // Reading a line: typed, and delivered.
    w.agent.foreground = Some(desk_wire::Foreground { pgid: 5, program: "sh".into(), own: true, reading: Some(true) });
    w.settle(10_000);
    assert_eq!(w.state_of(&id), State::Delivered, "{:?}", w.disk[&id].evidence);
    assert_eq!(w.agent.submitted, ["touch PWNED"]);
}

#[test]
fn without_an_input_box_each_prompt_goes_alone_never_as_a_digest() {
    let mut w = World::new();
    w.rules = Rc::new(RuleSet::builtin(Provider::Shell));
    w.agent.canonical = true;
    let ids = [w.item("echo one"), w.item("echo two"), w.item("echo three")];
    let view = w.view();
    w.feed(Input::Session(view));
    w.settle(60_000);
    for id in &ids {
        assert_eq!(w.state_of(id), State::Delivered, "{:?}", w.disk[id].evidence);
        assert!(w.disk[id].digest_with.is_empty());
    }
    assert_eq!(w.agent.submitted, ["echo one", "echo two", "echo three"]);
}

#[test]
fn a_prompt_quoting_a_dialog_is_not_taken_for_the_dialog_in_the_box_or_the_transcript() {
    let mut w = started();
    let quoted = "Please answer: Do you want to run this command? yes or no";
    let first = w.item(quoted);
    w.settle(10_000);
    assert_eq!(w.state_of(&first), State::Delivered, "{:?}", w.disk[&first].evidence);
    // Its echo stays in the transcript; the next prompt is not held by it.
    assert!(w.agent.screen().lines.iter().any(|l| l.contains("Do you want to run this command?")));
    let second = w.item("and the next one");
    w.settle(10_000);
    assert_eq!(w.state_of(&second), State::Delivered, "{:?}", w.disk[&second].evidence);
    assert_eq!(w.agent.submitted, [quoted, "and the next one"]);
}

#[test]
fn a_multi_line_prompt_typed_without_bracketed_paste_is_recorded_as_its_submissions() {
    let mut w = started();
    w.agent.no_bracketed_paste = true;
    let id = w.item("first line\nsecond line\nthird line");
    w.settle(10_000);
    assert_eq!(w.agent.submitted, ["first line", "second line", "third line"]);
    let item = &w.disk[&id];
    assert_eq!(item.state, State::Delivered, "{:?}", item.evidence);
    assert_eq!(item.submissions, Some(3));
    let last = item.evidence.last().unwrap();
    assert!(
        last.detail.ends_with(
            "delivered as 3 separate submissions, one per line (typed without bracketed paste), not as one prompt"
        ),
        "{last:?}"
    );
    // One line, or a bracketed paste, is one prompt.
    let one = w.item("just one line");
    w.settle(10_000);
    assert_eq!(w.disk[&one].submissions, None);
}

// ----- across a restart: evidence from one generation never settles another's -----

/// A journal event of the session `s`.
fn past(at_ms: u64, generation: u32, what: PastEvent) -> Past {
    Past { at_ms, generation, what }
}

fn hook_past(at_ms: u64, generation: u32, text: &str) -> Past {
    let prompt = Some(crate::state::hooks::PromptSig::of(text));
    past(at_ms, generation, PastEvent::Hook { event: "UserPromptSubmit".into(), prompt })
}

/// The daemon restarts: a fresh engine restored from disk, given what the session journalled
/// while it was down; the session's master is not (yet) reached.
fn restart_with_journal(w: &mut World, events: Vec<Past>) {
    w.restore();
    w.feed(Input::Journal { session: "s".into(), events });
}

/// An item the daemon had claimed and pasted (and pressed Enter for) when it died.
fn found_sending(w: &mut World, text: &str) -> ItemId {
    let (_, ms) = w.now();
    let mut item =
        Item::new(ItemId::sequential(ms), "s".into(), Some(w.generation), text.into(), When::Now, "t".into(), ms);
    item.state = State::Sending;
    item.note(ms, "claimed", "attempt 1");
    item.note(ms + 4, "pasted", "12 bytes written to the session");
    item.note(ms + 5, "written", "the master wrote the paste to the terminal");
    let id = item.id.clone();
    w.disk.insert(id.clone(), item);
    w.ms += 100;
    id
}

#[test]
fn an_idle_agent_of_a_new_generation_does_not_settle_a_prompt_the_old_one_had_queued() {
    let mut w = started();
    let b = delivered_mid_turn(&mut w, "queued by the old agent");
    assert!(w.disk[&b].queued_by_agent);
    // While the daemon is down the agent dies and the session is started again; the new agent
    // sits idle for as long as you like.
    w.generation = 2;
    w.agent = Agent::default();
    w.activity = Activity::Idle;
    w.restart();
    w.settle(QUEUE_DRAINED.as_millis() as u64 * 3);
    assert_eq!(w.state_of(&b), State::Stuck, "{:?}", w.disk[&b].evidence);
    assert_eq!(w.disk[&b].stuck, Some(StuckClass::Interrupted));
    assert!(w.agent.submitted.is_empty() && w.agent.input.is_empty(), "never re-pasted on its own");
}

#[test]
fn a_replayed_journal_pays_the_prompts_the_agent_reported_and_sticks_those_it_never_took() {
    let mut w = started();
    let x = delivered_mid_turn(&mut w, "taken while nobody listened");
    let y = delivered_mid_turn(&mut w, "never taken");
    // The daemon stops; the agent takes x (its hook is journalled), then dies with y queued.
    let at = w.now().1 + 1_000;
    let journal = vec![
        hook_past(at, 1, "taken while nobody listened"),
        past(at + 10, 1, PastEvent::Activity(Activity::Working)),
        past(at + 500, 1, PastEvent::Exit),
    ];
    restart_with_journal(&mut w, journal);
    assert_eq!(w.state_of(&x), State::Delivered);
    assert!(w.disk[&x].hook_owed.is_none() && !w.disk[&x].queued_by_agent, "{:?}", w.disk[&x]);
    assert_eq!(w.state_of(&y), State::Stuck, "{:?}", w.disk[&y].evidence);
    assert_eq!(w.disk[&y].stuck, Some(StuckClass::Interrupted));
    // The session is reported down afterwards: nothing changes any more.
    w.feed(Input::SessionDown { session: "s".into(), generation: None });
    assert_eq!((w.state_of(&x), w.state_of(&y)), (State::Delivered, State::Stuck));
}

#[test]
fn a_replayed_idle_that_lasted_means_the_queue_was_taken_and_a_short_one_does_not() {
    for (idle_ms, taken) in [(QUEUE_DRAINED.as_millis() as u64 + 100, true), (1_500, false)] {
        let mut w = started();
        let x = delivered_mid_turn(&mut w, "queued mid-turn");
        let at = w.now().1 + 1_000;
        let journal = vec![
            // An idle from before the prompt was typed proves nothing about it.
            past(at - 60_000, 1, PastEvent::Activity(Activity::Idle)),
            past(at - 1_000 - QUEUE_DRAINED.as_millis() as u64, 1, PastEvent::Activity(Activity::Working)),
            past(at, 1, PastEvent::Activity(Activity::Idle)),
            past(at + idle_ms, 1, PastEvent::Exit),
        ];
        restart_with_journal(&mut w, journal);
        let want = if taken { State::Delivered } else { State::Stuck };
        assert_eq!(w.state_of(&x), want, "idle for {idle_ms} ms: {:?}", w.disk[&x].evidence);
    }
}

#[test]
fn a_hook_from_before_a_prompt_was_typed_does_not_pay_it() {
    let mut w = started();
    let x = delivered_mid_turn(&mut w, "continue");
    // An earlier `continue`'s report, replayed after a restart: it predates x's paste.
    let mut hook = user_prompt_hook(&w, "continue");
    if let Input::Hook { at_ms, .. } = &mut hook {
        *at_ms -= 5_000;
    }
    w.restart();
    w.feed(hook);
    w.feed(Input::SessionDown { session: "s".into(), generation: Some(w.generation) });
    assert_eq!(w.state_of(&x), State::Stuck, "{:?}", w.disk[&x].evidence);
}

#[test]
fn a_prompt_cut_off_after_its_enter_and_taken_later_is_delivered_when_its_hook_comes() {
    let mut w = started();
    w.agent.working = true;
    w.activity = Activity::Working;
    // The daemon died right after the Enter: the working agent queued the prompt.
    let id = found_sending(&mut w, "taken after the restart");
    w.agent.queued.push("taken after the restart".into());
    w.restart();
    w.settle(10_000);
    // Not in the input box, no hook yet: nothing settles it now.
    assert_eq!(w.state_of(&id), State::Stuck, "{:?}", w.disk[&id].evidence);
    assert_eq!(w.disk[&id].stuck, Some(StuckClass::Interrupted));
    // Another generation's report of the same text is not its report.
    let mut other = user_prompt_hook(&w, "taken after the restart");
    if let Input::Hook { generation, .. } = &mut other {
        *generation += 1;
    }
    w.feed(other);
    assert_eq!(w.state_of(&id), State::Stuck);
    // The turn ends; the agent takes it from its queue and says so.
    w.agent.finish_turn();
    let hook = user_prompt_hook(&w, "taken after the restart");
    w.feed(hook);
    assert_eq!(w.state_of(&id), State::Delivered, "{:?}", w.disk[&id].evidence);
    assert!(w.disk[&id].hook_owed.is_none() && w.disk[&id].stuck.is_none(), "{:?}", w.disk[&id]);
    assert_eq!(w.agent.submitted, vec!["taken after the restart"]);
}

#[test]
fn an_item_found_sending_for_a_generation_that_ended_is_settled_by_that_generation_s_journal_only() {
    let mut w = started();
    let x = found_sending(&mut w, "reported by the old agent");
    let y = found_sending(&mut w, "never reported");
    let at = w.now().1 + 1_000;
    let journal = vec![
        hook_past(at, 1, "reported by the old agent"),
        past(at + 100, 1, PastEvent::Exit),
        past(at + 2_000, 2, PastEvent::Started),
    ];
    restart_with_journal(&mut w, journal);
    w.generation = 2;
    w.agent = Agent::default();
    let view = w.view();
    w.feed(Input::Session(view));
    w.settle(10_000);
    assert_eq!(w.state_of(&x), State::Delivered, "{:?}", w.disk[&x].evidence);
    assert_eq!(w.state_of(&y), State::Stuck, "{:?}", w.disk[&y].evidence);
    assert!(w.disk[&y].evidence.last().is_some_and(|n| n.detail.contains("may or may not have taken it")));
    // The new generation reporting the same text settles nothing of the old one.
    let hook = user_prompt_hook(&w, "never reported");
    w.feed(hook);
    assert_eq!(w.state_of(&y), State::Stuck);
    assert!(w.agent.submitted.is_empty() && w.agent.input.is_empty(), "nothing typed again");
}

#[test]
fn a_long_idle_of_another_generation_in_the_journal_does_not_settle_a_queued_prompt() {
    let mut w = started();
    let x = delivered_mid_turn(&mut w, "queued by generation one");
    // The journal's start of generation 2 was rotated away; its agent's long idle remains.
    let at = w.now().1 + 1_000;
    let journal = vec![
        past(at, 2, PastEvent::Activity(Activity::Idle)),
        past(at + QUEUE_DRAINED.as_millis() as u64 * 4, 2, PastEvent::Activity(Activity::Working)),
    ];
    restart_with_journal(&mut w, journal);
    assert_eq!(w.state_of(&x), State::Delivered);
    assert!(w.disk[&x].queued_by_agent, "not taken: {:?}", w.disk[&x].evidence);
    w.feed(Input::SessionDown { session: "s".into(), generation: None });
    assert_eq!(w.state_of(&x), State::Stuck);
}

#[test]
fn every_prompt_an_agent_queued_is_judged_when_it_goes_however_many_it_queued() {
    let mut w = started();
    w.agent.working = true;
    w.activity = Activity::Working;
    let view = w.view();
    w.feed(Input::Session(view));
    // More prompts than hooks are remembered, each typed mid-turn into the agent's own queue.
    let ids: Vec<ItemId> = (0..RECENT_HOOKS + 8)
        .map(|n| {
            let id = w.item(&format!("queued prompt number {n}"));
            w.settle(2_000);
            id
        })
        .collect();
    assert!(ids.iter().all(|id| w.state_of(id) == State::Delivered && w.disk[id].queued_by_agent));
    assert_eq!(w.agent.queued.len(), ids.len());
    // A restart in between forgets none of them either.
    w.restart();
    // The agent dies before its turn ends: it took none.
    w.feed(Input::SessionDown { session: "s".into(), generation: Some(w.generation) });
    let left: Vec<&ItemId> = ids.iter().filter(|id| w.state_of(id) != State::Stuck).collect();
    assert!(left.is_empty(), "{} left delivered, never taken", left.len());
}

#[test]
fn a_stuck_item_forced_into_a_new_generation_is_settled_by_that_generation() {
    let mut w = started();
    let x = delivered_mid_turn(&mut w, "forced into the next generation");
    w.feed(Input::SessionDown { session: "s".into(), generation: Some(1) });
    assert_eq!(w.state_of(&x), State::Stuck);
    // Generation 2 runs, working: the forced prompt goes into its agent's own queue.
    w.generation = 2;
    w.agent = Agent { working: true, ..Agent::default() };
    let view = w.view();
    w.feed(Input::Session(view));
    w.feed(Input::Command { client: 1, command: Command::Force { id: x.clone(), over_draft: false } });
    w.settle(2_000);
    assert_eq!(w.state_of(&x), State::Delivered, "{:?}", w.disk[&x].evidence);
    assert_eq!(w.disk[&x].generation, Some(2));
    // Generation 2's agent finishes its turn, takes the prompt and says so.
    w.agent.finish_turn();
    w.activity = Activity::Idle;
    let view = w.view();
    w.feed(Input::Session(view));
    let hook = user_prompt_hook(&w, "forced into the next generation");
    w.feed(hook);
    w.feed(Input::SessionDown { session: "s".into(), generation: Some(2) });
    assert_eq!(w.state_of(&x), State::Delivered, "{:?}", w.disk[&x].evidence);
    assert_eq!(w.agent.submitted, vec!["forced into the next generation"]);
}

#[test]
fn a_hook_heard_for_an_item_found_sending_settles_it_at_once_not_at_a_later_look() {
    let mut w = started();
    w.agent.working = true;
    w.activity = Activity::Working;
    let id = found_sending(&mut w, "taken while the daemon restarted");
    // A restarted daemon hears the hook in the journal; it dies before the session is reached.
    let at = w.now().1 + 500;
    restart_with_journal(&mut w, vec![hook_past(at, 1, "taken while the daemon restarted")]);
    assert_eq!(w.state_of(&id), State::Delivered, "settled on the hook, durably: {:?}", w.disk[&id].evidence);
    // The next daemon's replay starts after that hook: nothing unsettles it.
    restart_with_journal(&mut w, Vec::new());
    let view = w.view();
    w.feed(Input::Session(view));
    w.settle(10_000);
    assert_eq!(w.state_of(&id), State::Delivered);
    assert!(w.agent.input.is_empty() && w.agent.submitted.is_empty(), "nothing typed again");
}

#[test]
fn a_digest_found_claimed_is_settled_by_its_hook_even_without_its_paste_on_record() {
    let mut w = started();
    let (_, ms) = w.now();
    let mk =
        |text: &str| Item::new(ItemId::sequential(ms), "s".into(), Some(1), text.into(), When::Now, "t".into(), ms);
    let (mut a, mut b) = (mk("first of a digest"), mk("second of a digest"));
    let text = prompt_text(&[&a, &b]);
    let (a_id, b_id) = (a.id.clone(), b.id.clone());
    for (item, other) in [(&mut a, b_id), (&mut b, a_id)] {
        item.state = State::Sending;
        item.digest_with = vec![other];
        item.note(ms, "claimed", "attempt 1: one digest of 2 items");
    }
    w.disk.insert(a.id.clone(), a.clone());
    w.disk.insert(b.id.clone(), b.clone());
    // The daemon died between the paste and its acknowledgement; the agent took the digest.
    let at = ms + 2_000;
    let prompt = Some(crate::state::hooks::PromptSig::of(&text));
    restart_with_journal(&mut w, vec![past(at, 1, PastEvent::Hook { event: "UserPromptSubmit".into(), prompt })]);
    assert_eq!((w.state_of(&a.id), w.state_of(&b.id)), (State::Delivered, State::Delivered));
}

#[test]
fn a_paste_is_on_record_before_it_is_written_so_a_crash_before_its_acknowledgement_loses_no_evidence() {
    let mut w = started();
    let (now, ms) = w.now();
    let item =
        Item::new(ItemId::sequential(ms), "s".into(), Some(1), "written, then cut".into(), When::Now, "t".into(), ms);
    let id = item.id.clone();
    w.disk.insert(id.clone(), item.clone());
    let actions = w.engine.handle(Input::Ingested(item), now, ms);
    let token = actions
        .iter()
        .find_map(|a| match a {
            Action::Snapshot { token, .. } => Some(*token),
            _ => None,
        })
        .expect("a look at the screen");
    let actions = w.engine.handle(Input::Snapshot { token, result: Ok(w.agent.screen()) }, now, ms);
    // The daemon carries out the batch: the records, then the paste; it dies before it reads the
    // master's acknowledgement.
    for action in actions {
        match action {
            Action::Persist { item, .. } => {
                w.disk.insert(item.id.clone(), item);
            }
            Action::Write { bytes, .. } => w.agent.write(&bytes),
            _ => {}
        }
    }
    assert!(typed_at(&w.disk[&id]).is_some(), "{:?}", w.disk[&id].evidence);
    // The agent took it (someone pressed Enter in an attached terminal, which the master
    // records) and redraws slowly: the look after the restart sees nothing, so nothing settles
    // it yet (and nothing is pasted again: someone typed since its claim).
    w.agent.write(b"\r");
    w.agent.last_typed_ms = Some(w.now().1);
    w.agent.deaf = true;
    w.agent.transcript.clear();
    w.restart();
    w.settle(10_000);
    assert_eq!(w.state_of(&id), State::Stuck, "{:?}", w.disk[&id].evidence);
    // Its hook settles it: the paste was on record.
    let hook = user_prompt_hook(&w, "written, then cut");
    w.feed(hook);
    assert_eq!(w.state_of(&id), State::Delivered, "{:?}", w.disk[&id].evidence);
    assert_eq!(w.agent.submitted, vec!["written, then cut"]);
}

#[test]
fn a_digest_item_that_takes_its_sibling_s_outcome_is_paid_by_the_digest_s_hook_too() {
    let mut w = started();
    let (_, ms) = w.now();
    let mk =
        |text: &str| Item::new(ItemId::sequential(ms), "s".into(), Some(1), text.into(), When::Now, "t".into(), ms);
    let (mut a, mut b) = (mk("first of a queued digest"), mk("second of a queued digest"));
    let text = prompt_text(&[&a, &b]);
    let digest = crate::state::hooks::PromptSig::of(&text).digest;
    // Delivered into the agent's own queue; a crash between the two records left b sending.
    a.state = State::Delivered;
    a.digest_with = vec![b.id.clone()];
    a.hook_owed = Some(digest);
    a.queued_by_agent = true;
    a.note(ms, "pasted", "written");
    b.state = State::Sending;
    b.digest_with = vec![a.id.clone()];
    b.note(ms, "pasted", "written");
    w.disk.insert(a.id.clone(), a.clone());
    w.disk.insert(b.id.clone(), b.clone());
    w.restart();
    assert_eq!(w.state_of(&b.id), State::Delivered);
    // The agent takes the digest and reports it: both are paid.
    w.feed(user_prompt_hook(&w, &text));
    assert!(!w.disk[&a.id].queued_by_agent && !w.disk[&b.id].queued_by_agent, "{:?}", w.disk[&b.id]);
    // The agent ends later, after another restart: neither is taken back.
    w.restart();
    w.feed(Input::SessionDown { session: "s".into(), generation: Some(1) });
    assert_eq!((w.state_of(&a.id), w.state_of(&b.id)), (State::Delivered, State::Delivered));
}

#[test]
fn a_queue_waiting_for_the_master_s_first_report_says_connecting_not_not_running() {
    let mut w = World::new();
    // Nothing heard of the session at all: it is not running.
    let first = w.item("before anything is known");
    assert_eq!(hold_reason(&w), "the session is not running");
    // desk serve opened a connection and waits for its WELCOME.
    w.feed(Input::Connecting { session: "s".into() });
    let second = w.item("while connecting");
    assert_eq!(hold_reason(&w), super::CONNECTING);
    w.feed(Input::Command { client: 3, command: Command::Force { id: second.clone(), over_draft: false } });
    // A refusal to force it names the same reason.
    assert!(w.replies.iter().any(|(c, ok, m)| *c == 3 && !*ok && m.contains(super::CONNECTING)), "{:?}", w.replies);
    // The first report: both go, as one digest.
    let view = w.view();
    w.feed(Input::Session(view));
    w.settle(10_000);
    assert_eq!((w.state_of(&first), w.state_of(&second)), (State::Delivered, State::Delivered));
    // A connection that finds no master after all: not running again.
    w.feed(Input::SessionDown { session: "s".into(), generation: Some(w.generation) });
    w.feed(Input::Connecting { session: "s".into() });
    w.feed(Input::SessionDown { session: "s".into(), generation: None });
    w.item("after it went");
    assert_eq!(hold_reason(&w), "the session is not running");
}

#[test]
fn a_hold_from_before_the_first_report_is_gone_once_a_recovery_flight_starts() {
    let mut w = started();
    w.agent.swallow_enters = 100;
    let id = w.item("cut off by a restart");
    w.settle(300);
    assert_eq!(w.state_of(&id), State::Sending);
    // The daemon restarts: its connection to the master is open, the first report not in.
    w.restore();
    w.feed(Input::Connecting { session: "s".into() });
    w.item("queued behind it");
    assert_eq!(hold_reason(&w), super::CONNECTING);
    // The first report: the item found sending is recovered, and nothing says "connecting".
    let view = w.view();
    w.feed(Input::Session(view));
    assert!(w.engine.queues().iter().any(|q| q.session == "s" && q.in_flight.contains(&id)), "recovering");
    assert_eq!(hold_reason(&w), "", "no stale hold while the recovery is in flight");
}
