//! The state machine driven by scripted events and a scripted clock; no I/O, no sleeping.

use std::num::NonZeroU16;
use std::time::{Duration, Instant};

use super::*;
use crate::config::PasteCollapse;

#[derive(Default)]
struct Titles(Vec<String>);

impl vt100::Callbacks for Titles {
    fn set_window_title(&mut self, _: &mut vt100::Screen, title: &[u8]) {
        self.0.push(String::from_utf8_lossy(title).into_owned());
    }
}

/// An agent, a clock, and the terminal its output would produce.
struct Sim {
    agent: Agent,
    t0: Instant,
    now: Instant,
    term: vt100::Parser<Titles>,
}

fn quick() -> Config {
    Config { startup_delay: Duration::ZERO, cpr_timeout: None, ..Config::default() }
}

impl Sim {
    fn new(cfg: Config) -> (Self, Vec<Output>) {
        let t0 = Instant::now();
        let nz = |n| NonZeroU16::new(n).expect("non-zero");
        let mut sim = Self {
            agent: Agent::new(cfg, 80, 24),
            t0,
            now: t0,
            term: vt100::Parser::new_with_callbacks(nz(24), nz(80), 0, Titles::default()),
        };
        let out = sim.event(0, Event::Start);
        (sim, out)
    }

    fn ready(cfg: Config) -> Self {
        let (sim, _) = Self::new(cfg);
        assert!(sim.agent.is_ready(), "expected ready at start");
        sim
    }

    fn at(&self, ms: u64) -> Instant {
        self.t0 + Duration::from_millis(ms)
    }

    /// Deliver `event` at `ms`, after firing every timer due before it (as the loop would).
    fn event(&mut self, ms: u64, event: Event<'_>) -> Vec<Output> {
        let mut out = self.run_until(ms);
        out.extend(self.handle(event));
        out
    }

    fn input(&mut self, ms: u64, bytes: &str) -> Vec<Output> {
        self.event(ms, Event::Input(bytes.as_bytes()))
    }

    /// Fire timers in deadline order up to and including `ms`.
    fn run_until(&mut self, ms: u64) -> Vec<Output> {
        let target = self.at(ms);
        assert!(target >= self.now, "the scripted clock must not go backwards");
        let mut out = Vec::new();
        while let Some(d) = self.agent.next_deadline() {
            if d > target {
                break;
            }
            self.now = d;
            out.extend(self.handle(Event::Timer));
        }
        self.now = target;
        out
    }

    fn handle(&mut self, event: Event<'_>) -> Vec<Output> {
        let out = self.agent.handle(event, self.now);
        for o in &out {
            match o {
                Output::Write(bytes) => self.term.process(bytes),
                Output::SetTitle(t) => self.term.process(format!("\x1b]0;{t}\x07").as_bytes()),
                _ => {}
            }
        }
        if let Some(d) = self.agent.next_deadline() {
            assert!(d > self.now, "a deadline at or before now would spin the loop");
        }
        out
    }

    fn screen(&self) -> String {
        self.term.screen().contents()
    }

    fn title(&self) -> &str {
        self.term.callbacks().0.last().map(String::as_str).unwrap_or("")
    }

    fn titles(&self) -> &[String] {
        &self.term.callbacks().0
    }

    fn status(&self) -> String {
        let rows: Vec<String> = self.term.screen().rows(0, 80).collect();
        let bottom = rows.iter().rposition(|r| r.starts_with('╰')).expect("an input box");
        rows[bottom + 1].trim().to_string()
    }
}

fn logged(out: &[Output]) -> Vec<(u64, String)> {
    out.iter()
        .filter_map(|o| match o {
            Output::LogPrompt { seq, prompt } => Some((*seq, prompt.clone())),
            _ => None,
        })
        .collect()
}

fn prompts(out: &[Output]) -> Vec<String> {
    logged(out).into_iter().map(|(_, p)| p).collect()
}

fn hooks(out: &[Output]) -> Vec<&'static str> {
    out.iter()
        .filter_map(|o| match o {
            Output::Hook(h) => Some(h.name()),
            _ => None,
        })
        .collect()
}

fn exit_of(out: &[Output]) -> Option<ExitRequest> {
    out.iter().find_map(|o| match o {
        Output::Exit(e) => Some(*e),
        _ => None,
    })
}

fn wrote(out: &[Output], needle: &[u8]) -> bool {
    out.iter().any(|o| match o {
        Output::Write(b) => b.windows(needle.len()).any(|w| w == needle),
        _ => false,
    })
}

#[test]
fn asks_for_the_cursor_and_is_ready_only_after_the_report_and_the_startup_delay() {
    let (mut sim, out) = Sim::new(Config::default());
    assert_eq!(out, vec![Output::Write(b"\x1b[6n".to_vec())]);
    assert_eq!(sim.agent.next_deadline(), Some(sim.at(2000)));
    sim.input(10, "\x1b[1;1R");
    assert!(!sim.agent.is_ready());
    assert_eq!(sim.agent.cursor_report(), Some((1, 1)));
    assert_eq!(sim.agent.next_deadline(), Some(sim.at(300)));
    let out = sim.run_until(300);
    assert!(sim.agent.is_ready());
    assert_eq!(sim.title(), "✳ demo");
    assert!(sim.screen().contains("│ > "));
    assert!(!sim.screen().contains("no cursor report"));
    assert_eq!(hooks(&out), ["SessionStart"]);
}

#[test]
fn bracketed_paste_is_enabled_only_after_the_first_frame() {
    let (_, out) = Sim::new(quick());
    let frame = out
        .iter()
        .position(|o| matches!(o, Output::Write(b) if b.windows(3).any(|w| w == "╭".as_bytes())))
        .expect("a frame");
    let paste_on =
        out.iter().position(|o| *o == Output::Write(b"\x1b[?2004h".to_vec())).expect("bracketed paste enabled");
    assert!(frame < paste_on, "{out:?}");
}

#[test]
fn a_missing_cursor_report_times_out_and_is_shown() {
    let (mut sim, _) = Sim::new(Config::default());
    sim.run_until(1999);
    assert!(!sim.agent.is_ready(), "must wait for the report until the timeout");
    sim.run_until(2000);
    assert!(sim.agent.is_ready());
    assert_eq!(sim.status(), "idle · no cursor report");
}

#[test]
fn input_before_ready_is_swallowed() {
    let (mut sim, _) = Sim::new(Config { cpr_timeout: None, ..Config::default() });
    let out = sim.input(10, "early\r\x1b[200~pasted\x1b[201~");
    assert!(out.is_empty(), "{out:?}");
    sim.run_until(300);
    let out = sim.input(400, "late\r");
    assert_eq!(prompts(&out), ["late"]);
    assert!(!sim.screen().contains("early"));
}

#[test]
fn input_before_ready_is_kept_with_keep_early_input() {
    let (mut sim, _) = Sim::new(Config { cpr_timeout: None, keep_early_input: true, ..Config::default() });
    sim.input(10, "early");
    sim.run_until(300);
    assert!(sim.screen().contains("│ > early"), "{}", sim.screen());
}

#[test]
fn enter_logs_the_prompt_before_anything_else_then_works_and_replies() {
    let mut sim = Sim::ready(quick());
    let out = sim.input(0, "hi there\r");
    assert_eq!(out.first(), Some(&Output::LogPrompt { seq: 1, prompt: "hi there".into() }));
    assert_eq!(hooks(&out), ["UserPromptSubmit"]);
    assert_eq!(sim.title(), "⠋ demo");
    assert!(sim.screen().contains("> hi there"));
    assert!(sim.screen().contains("Working…"));
    assert_eq!(sim.status(), "working");
    let out = sim.run_until(999);
    assert!(hooks(&out).is_empty());
    let out = sim.run_until(1000);
    assert_eq!(hooks(&out), ["Stop"]);
    assert_eq!(sim.title(), "✳ demo");
    assert!(sim.screen().contains("● Done: hi there"));
    assert_eq!(sim.status(), "idle");
}

#[test]
fn the_title_spinner_advances_every_100_ms() {
    let mut sim = Sim::ready(quick());
    sim.input(0, "x\r");
    sim.run_until(550);
    let spins: Vec<&str> = sim.titles().iter().skip_while(|t| t.starts_with('✳')).map(String::as_str).collect();
    assert_eq!(spins, ["⠋ demo", "⠙ demo", "⠹ demo", "⠸ demo", "⠼ demo", "⠴ demo"]);
}

#[test]
fn blank_input_is_never_submitted() {
    let mut sim = Sim::ready(quick());
    let out = sim.input(0, "\r   \r");
    assert!(prompts(&out).is_empty());
    assert!(sim.agent.turn.is_none());
}

#[test]
fn enter_mid_turn_queues_and_each_prompt_is_logged_when_it_is_submitted() {
    let mut sim = Sim::ready(quick());
    sim.input(0, "one\r");
    let out = sim.input(100, "two\r");
    assert!(prompts(&out).is_empty(), "queued, not yet submitted");
    sim.input(200, "three\r");
    assert_eq!(sim.agent.queued(), 2);
    assert_eq!(sim.status(), "working · queued: 2");
    let out = sim.run_until(1000);
    assert_eq!(logged(&out), [(2, "two".to_string())]);
    assert_eq!(hooks(&out), ["Stop", "UserPromptSubmit"]);
    let out = sim.run_until(3000);
    assert_eq!(logged(&out), [(3, "three".to_string())]);
    assert!(sim.screen().contains("● Done: three"));
    assert_eq!(sim.status(), "idle");
}

#[test]
fn with_no_queue_enter_mid_turn_leaves_the_text_in_the_box() {
    let mut sim = Sim::ready(Config { queue_mid_turn: false, ..quick() });
    sim.input(0, "one\r");
    sim.input(100, "two\r");
    assert_eq!(sim.agent.queued(), 0);
    let out = sim.run_until(1500);
    assert!(prompts(&out).is_empty());
    assert!(sim.screen().contains("│ > two"));
}

#[test]
fn large_pastes_collapse_into_numbered_placeholders() {
    let mut sim = Sim::ready(Config { paste_collapse: Some(PasteCollapse { lines: 3, chars: 20 }), ..quick() });
    sim.input(0, "\x1b[200~a\rb\rc\x1b[201~");
    assert!(sim.screen().contains("│ > a"), "three lines stay inline");
    sim.input(10, "\x1b[200~1\r2\r3\r4\x1b[201~");
    sim.input(20, &format!("\x1b[200~{}\x1b[201~", "x".repeat(21)));
    assert!(sim.screen().contains("c[Pasted text #1 +4 lines][Pasted text #2 +1 lines]"), "{}", sim.screen());
    let out = sim.input(30, "\r");
    assert_eq!(prompts(&out), [format!("a\nb\nc1\n2\n3\n4{}", "x".repeat(21))]);
}

#[test]
fn enter_within_the_paste_burst_window_is_a_newline() {
    let mut sim = Sim::ready(Config { paste_burst: Some(Duration::from_millis(200)), ..quick() });
    let out = sim.input(0, "\x1b[200~pasted\x1b[201~\r");
    assert!(prompts(&out).is_empty());
    assert_eq!(sim.status(), "idle · paste burst");
    let out = sim.input(199, "\r");
    assert!(prompts(&out).is_empty());
    sim.run_until(200);
    assert_eq!(sim.status(), "idle", "the window closing is drawn");
    let out = sim.input(250, "\r");
    assert_eq!(prompts(&out), ["pasted"]);
}

#[test]
fn enter_right_after_fast_typing_is_a_newline_but_not_after_slow_typing() {
    let mut sim = Sim::ready(Config { paste_burst: Some(Duration::from_millis(100)), ..quick() });
    let out = sim.input(0, "abc\r");
    assert!(prompts(&out).is_empty(), "three characters in one read are a burst");
    sim.input(150, "\x7f\x15");
    sim.input(200, "x");
    sim.input(220, "y");
    sim.input(240, "z");
    let out = sim.input(245, "\r");
    assert_eq!(prompts(&out), ["xyz"]);
}

#[test]
fn without_burst_detection_a_paste_and_enter_in_one_read_submit() {
    let mut sim = Sim::ready(quick());
    let out = sim.input(0, "\x1b[200~pasted\x1b[201~\r");
    assert_eq!(prompts(&out), ["pasted"]);
}

fn at_dialog() -> Sim {
    let mut sim = Sim::ready(quick());
    sim.input(0, "please approve-me\r");
    let out = sim.run_until(300);
    assert_eq!(hooks(&out), ["PreToolUse", "PermissionRequest", "Notification"]);
    assert_eq!(sim.title(), "✋ demo");
    assert!(sim.screen().contains("Do you want to run this command?"));
    assert!(sim.screen().contains("❯ 1. Yes"));
    sim
}

#[test]
fn approval_dialog_discards_pastes_and_typing_and_enter_approves() {
    let mut sim = at_dialog();
    let out = sim.input(400, "\x1b[200~pasted\x1b[201~typed");
    assert!(prompts(&out).is_empty() && hooks(&out).is_empty());
    assert_eq!(sim.agent.composer.expanded(), "");
    let out = sim.input(500, "\r");
    assert_eq!(hooks(&out), ["PostToolUse"]);
    assert!(sim.screen().contains("Approved (1. Yes)"));
    let out = sim.run_until(1500);
    assert_eq!(hooks(&out), ["Stop"]);
    assert!(sim.screen().contains("● Done: please approve-me"));
    assert!(!sim.screen().contains("pasted") && !sim.screen().contains("typed"));
}

#[test]
fn approval_dialog_digits_select_and_enter_answers_the_selection() {
    let mut sim = at_dialog();
    sim.input(400, "2");
    assert!(sim.screen().contains("❯ 2. No"));
    sim.input(410, "1");
    assert!(sim.screen().contains("❯ 1. Yes"));
    sim.input(420, "\x1b[B");
    let out = sim.input(430, "\r");
    assert!(hooks(&out).is_empty(), "no PostToolUse for a denied tool");
    assert!(sim.screen().contains("Denied (2. No)"));
    assert!(
        sim.title().starts_with(|c| ('\u{2800}'..='\u{28FF}').contains(&c)),
        "working again after the answer: {}",
        sim.title()
    );
}

#[test]
fn esc_answers_the_dialog_no_once_it_is_known_to_be_a_lone_esc() {
    let mut sim = at_dialog();
    let out = sim.input(400, "\x1b");
    assert!(out.is_empty(), "ESC alone may start a sequence");
    assert_eq!(sim.agent.next_deadline(), Some(sim.at(450)));
    sim.run_until(450);
    assert!(sim.screen().contains("Denied (2. No)"));
}

#[test]
fn esc_interrupts_a_working_turn_without_a_stop_hook_and_the_queue_continues() {
    let mut sim = Sim::ready(quick());
    sim.input(0, "one\r");
    sim.input(10, "two\r");
    sim.input(100, "\x1b");
    let out = sim.run_until(150);
    assert!(!hooks(&out).contains(&"Stop"));
    assert_eq!(prompts(&out), ["two"]);
    assert!(sim.screen().contains("Interrupted by user"));
}

#[test]
fn crash_word_logs_the_prompt_then_exits_with_the_code() {
    let mut sim = Sim::ready(quick());
    let out = sim.input(0, "now crash-now\r");
    assert_eq!(prompts(&out), ["now crash-now"]);
    assert_eq!(exit_of(&out), Some(ExitRequest::Code(3)));
    assert!(wrote(&out, b"\x1b[?2004l"), "terminal modes restored");
    assert!(sim.agent.is_exited());
    assert!(sim.agent.handle(Event::Input(b"more\r"), sim.at(1)).is_empty());
    assert_eq!(sim.agent.next_deadline(), None);
}

#[test]
fn crash_word_can_ask_for_a_signal() {
    let mut sim = Sim::ready(Config { crash: CrashMode::Signal(9), ..quick() });
    let out = sim.input(0, "crash-now\r");
    assert_eq!(exit_of(&out), Some(ExitRequest::Signal(9)));
}

#[test]
fn trigger_words_can_be_disabled() {
    let mut sim = Sim::ready(Config { crash_word: None, approve_word: None, ..quick() });
    let out = sim.input(0, "crash-now approve-me\r");
    assert_eq!(exit_of(&out), None);
    let out = sim.run_until(1000);
    assert_eq!(hooks(&out), ["Stop"]);
}

#[test]
fn ctrl_d_exits_only_on_an_empty_box() {
    let mut sim = Sim::ready(quick());
    let out = sim.input(0, "x\x04");
    assert_eq!(exit_of(&out), None);
    let out = sim.input(10, "\x7f\x04");
    assert_eq!(exit_of(&out), Some(ExitRequest::Code(0)));
    assert_eq!(hooks(&out), ["SessionEnd"]);
}

#[test]
fn terminate_and_eof_exit_and_restore_the_terminal() {
    let mut sim = Sim::ready(quick());
    let out = sim.event(0, Event::Terminate { signal: 15 });
    assert_eq!(exit_of(&out), Some(ExitRequest::Code(143)));
    assert!(wrote(&out, b"\x1b[?2004l") && wrote(&out, b"\x1b[?25h"));
    let mut sim = Sim::ready(quick());
    let out = sim.event(0, Event::Eof);
    assert_eq!(exit_of(&out), Some(ExitRequest::Code(0)));
}

#[test]
fn resize_redraws_the_box_at_the_new_width() {
    let mut sim = Sim::ready(quick());
    sim.input(0, "abc");
    sim.term.set_size(NonZeroU16::new(24).expect("rows"), NonZeroU16::new(40).expect("cols"));
    sim.event(10, Event::Resize { cols: 40, rows: 24 });
    let top = format!("╭{}╮", "─".repeat(38));
    assert!(sim.screen().contains(&top), "{}", sim.screen());
    assert!(sim.screen().contains("│ > abc"));
}

#[test]
fn hook_failures_are_counted_in_the_status_row() {
    let mut sim = Sim::ready(quick());
    sim.event(0, Event::HookFailed { event: "Stop" });
    assert_eq!(sim.status(), "idle · hook failures: 1");
}

#[test]
fn a_zero_work_time_finishes_the_turn_at_once_without_spinning() {
    let mut sim = Sim::ready(Config { work: Duration::ZERO, ..quick() });
    let out = sim.input(0, "a\r");
    assert_eq!(hooks(&out), ["UserPromptSubmit", "Stop"]);
    assert!(sim.screen().contains("● Done: a"));
    assert_eq!(sim.agent.next_deadline(), None);
}

fn conversations(out: &[Output]) -> Vec<(String, &'static str)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Conversation { id, source } => Some((id.clone(), *source)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_resumed_conversation_shows_and_remembers_its_earlier_prompts() {
    let cfg = Config {
        session_id: "c1".into(),
        resume: Some("c1".into()),
        earlier_prompts: vec!["fix the parser".into(), "then the tests\nin detail".into()],
        ..quick()
    };
    let (mut sim, out) = Sim::new(cfg);
    assert_eq!(conversations(&out), [("c1".to_string(), "resume")]);
    let start = out.iter().position(|o| *o == Output::Hook(HookEvent::SessionStart { source: "resume" }));
    let told = out.iter().position(|o| matches!(o, Output::Conversation { .. }));
    assert!(told < start && start.is_some(), "the loop learns the conversation before the hook runs: {out:?}");
    let screen = sim.screen();
    assert!(screen.contains("↺ Resumed the conversation: 2 earlier prompt(s)"), "{screen}");
    assert!(screen.contains("  > fix the parser") && screen.contains("  > then the tests"), "{screen}");
    let out = sim.input(0, "please recall\r");
    assert!(out.contains(&Output::Transcript { prompt: "please recall".into() }), "{out:?}");
    sim.run_until(1000);
    assert!(
        sim.screen().contains("● Earlier in this conversation: fix the parser · then the tests"),
        "{}",
        sim.screen()
    );
}

#[test]
fn clear_starts_a_new_conversation_that_remembers_nothing() {
    let mut sim = Sim::ready(Config { session_id: "5a0e2f1c-6d3b-4e8a-9f21-0c7d4b9e3a18".into(), ..quick() });
    sim.input(0, "one\r");
    sim.run_until(1000);
    let out = sim.input(1100, "/clear\r");
    assert!(prompts(&out).is_empty(), "/clear is not a prompt");
    assert_eq!(hooks(&out), ["SessionEnd", "SessionStart"]);
    let new = conversations(&out);
    assert_eq!(new.len(), 1);
    assert_eq!(new[0].1, "clear");
    assert_ne!(new[0].0, "5a0e2f1c-6d3b-4e8a-9f21-0c7d4b9e3a18");
    assert_eq!(sim.agent.conversation(), new[0].0);
    assert_eq!(new[0].0.len(), 36, "a UUID");
    sim.input(1200, "recall\r");
    sim.run_until(2300);
    assert!(sim.screen().contains("● Earlier in this conversation:"), "{}", sim.screen());
    assert!(!sim.screen().contains("conversation: one"), "{}", sim.screen());
    // A second /clear makes yet another id.
    let out = sim.input(2400, "/clear\r");
    assert_ne!(conversations(&out)[0].0, new[0].0);
}
