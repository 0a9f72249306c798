//! The demo agent's behaviour as a pure state machine.
//!
//! Owns everything the agent decides: when it is ready, what the input box holds, when a prompt
//! is submitted, queued, logged, worked on, answered, and when the process exits.
//! [`Agent::handle`] takes an [`Event`] and the current time and returns [`Output`]s for the
//! event loop to perform in order; [`Agent::next_deadline`] says when to deliver
//! [`Event::Timer`]. It never reads a clock or touches a file descriptor, so every behaviour is
//! unit-tested with a scripted clock.
//!
//! Invariants:
//! - A prompt is logged ([`Output::LogPrompt`]) exactly once, at the moment it is submitted
//!   (typed Enter while idle, or taken from the mid-turn queue when a turn ends), and before any
//!   output that shows it. Nothing else is ever logged, so the prompt log is the ground truth of
//!   what the agent accepted.
//! - Before the UI is ready (cursor report answered or timed out, and the start-up delay over)
//!   no input reaches the input box: it is swallowed, or with `keep_early_input` held and
//!   replayed once ready. Bracketed paste is enabled only after the first frame is drawn.
//! - While the approval dialog shows, only Enter, `1`/`2`, arrows and Esc act on it; pastes and
//!   typing are discarded and the input box is left as it was.
//! - After [`Output::Exit`] the agent ignores every event and emits nothing more.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::composer::{Composer, line_count};
use super::config::{Config, CrashMode};
use super::hook::HookEvent;
use super::input::{InputDecoder, Key};
use super::render::{Body, Frame, Renderer};
use super::text::first_line;

/// 50 ms: after a lone ESC byte, how long to wait for the rest of an escape sequence before
/// taking it as the Esc key. A terminal writes a sequence in one write, so its bytes arrive
/// within microseconds; a person cannot press another key within 50 ms of Esc on purpose.
pub const ESC_FLUSH: Duration = Duration::from_millis(50);

/// 100 ms per spinner frame, as the brief and real agents' title spinners use.
pub const SPINNER_INTERVAL: Duration = Duration::from_millis(100);

/// The braille spinner frames shown in the title while working.
pub const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// Codex's paste-burst rule: characters arriving less than 8 ms apart are not typed by a person.
pub const BURST_GAP: Duration = Duration::from_millis(8);

/// Codex's paste-burst rule: three such characters in a row make a burst.
pub const BURST_MIN_CHARS: u32 = 3;

/// 10 000 keys: generous for anything typed before the UI is ready (a paste is one key), small
/// enough that a stream of early input cannot grow the agent without bound.
pub const MAX_EARLY_KEYS: usize = 10_000;

/// Glyph in front of the title while idle.
pub const IDLE_GLYPH: char = '✳';
/// Glyph in front of the title while the approval dialog waits for an answer.
pub const BLOCKED_GLYPH: char = '✋';

const ENABLE_BRACKETED_PASTE: &[u8] = b"\x1b[?2004h";
const DISABLE_BRACKETED_PASTE: &[u8] = b"\x1b[?2004l";
const CURSOR_QUERY: &[u8] = b"\x1b[6n";

/// Something the event loop observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<'a> {
    /// The process started (terminal already in raw mode). Sent once, first.
    Start,
    /// Bytes read from stdin. Keys, pastes and cursor reports are decoded from them.
    Input(&'a [u8]),
    /// The deadline from [`Agent::next_deadline`] has passed.
    Timer,
    /// The terminal's size changed (SIGWINCH).
    Resize { cols: u16, rows: u16 },
    /// stdin reached end of file (or the terminal hung up).
    Eof,
    /// A terminating signal (SIGTERM, SIGHUP, SIGINT) arrived.
    Terminate { signal: i32 },
    /// A hook command failed or timed out; shown in the status row, never fatal.
    HookFailed { event: &'static str },
}

/// Something the event loop must do, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Write these bytes to the terminal.
    Write(Vec<u8>),
    /// Set the terminal title (OSC 0) to this text.
    SetTitle(String),
    /// Append this submitted prompt to the prompt log (one JSON line, fsynced). Performed before
    /// anything later in the list.
    LogPrompt { seq: u64, prompt: String },
    /// The conversation is now `id` (at start; `source` "startup" or "resume"; after `/clear`,
    /// "clear"): later hooks carry it and later prompts go to its transcript.
    Conversation { id: String, source: &'static str },
    /// Append this submitted prompt to the conversation's transcript (after its
    /// [`Output::LogPrompt`]).
    Transcript { prompt: String },
    /// Run the hook command with this event's JSON.
    Hook(HookEvent),
    /// Post this reply with `desk channel post` (the turn that read the message ended).
    ChannelPost(crate::channel::Reply),
    /// Restore the terminal and end the process this way.
    Exit(ExitRequest),
}

/// How the process should end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitRequest {
    Code(i32),
    Signal(i32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cpr {
    NotAsked,
    Waiting { deadline: Instant },
    Received { row: u16, col: u16 },
    Missing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    AskApproval,
    Reply,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Working { until: Instant, then: Then },
    Dialog { selected: usize },
}

#[derive(Debug, Clone)]
struct Turn {
    head: String,
    /// Channel replies to post when the turn ends.
    replies: Vec<crate::channel::Reply>,
    started: Instant,
    stage: Stage,
    tool_use_id: String,
    command: String,
}

/// Recent typing, for the paste-burst rule.
#[derive(Debug, Clone, Copy, Default)]
struct Typing {
    last_char: Option<Instant>,
    run: u32,
    burst_at: Option<Instant>,
}

/// See the module documentation.
#[derive(Debug)]
pub struct Agent {
    cfg: Config,
    decoder: InputDecoder,
    composer: Composer,
    renderer: Renderer,
    cpr: Cpr,
    ready_at: Option<Instant>,
    ready: bool,
    exited: bool,
    early: Vec<Key>,
    turn: Option<Turn>,
    queue: VecDeque<String>,
    seq: u64,
    pastes: u32,
    paste_ended: Option<Instant>,
    typing: Typing,
    burst_redraw_at: Option<Instant>,
    esc_deadline: Option<Instant>,
    spinner_due: Option<Instant>,
    title: Option<String>,
    last_frame: Option<Frame>,
    pending_lines: Vec<String>,
    hook_failures: u32,
    input_full: bool,
    /// The conversation's id (`--session-id`, `--resume`, or made by `/clear`).
    conversation: String,
    /// How many times `/clear` started a new conversation.
    clears: u32,
    /// First lines of the conversation's prompts, the resumed ones first (newest
    /// [`RECALL_LINES`]): what `recall` repeats.
    said: VecDeque<String>,
    out: Vec<Output>,
}

/// Prompts a `recall` lists: enough to see a conversation continue, few enough for one line.
pub const RECALL_LINES: usize = 20;

/// The word in a prompt that makes the reply list the conversation's earlier prompts.
pub const RECALL_WORD: &str = "recall";

impl Agent {
    /// An agent for a terminal of `cols` x `rows`.
    pub fn new(cfg: Config, cols: u16, rows: u16) -> Self {
        let renderer = Renderer::new(cols, rows, cfg.alt_screen, cfg.sync_output);
        Self {
            decoder: InputDecoder::new(),
            composer: Composer::new(),
            renderer,
            cpr: Cpr::NotAsked,
            ready_at: None,
            ready: false,
            exited: false,
            early: Vec::new(),
            turn: None,
            queue: VecDeque::new(),
            seq: 0,
            pastes: 0,
            paste_ended: None,
            typing: Typing::default(),
            burst_redraw_at: None,
            esc_deadline: None,
            spinner_due: None,
            title: None,
            last_frame: None,
            pending_lines: Vec::new(),
            hook_failures: 0,
            input_full: false,
            conversation: cfg.session_id.clone(),
            clears: 0,
            said: cfg
                .earlier_prompts
                .iter()
                .rev()
                .take(RECALL_LINES)
                .rev()
                .map(|p| first_line(p).to_string())
                .collect(),
            cfg,
            out: Vec::new(),
        }
    }

    /// The conversation's id now.
    pub fn conversation(&self) -> &str {
        &self.conversation
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// True once the UI is drawn and input is accepted.
    pub fn is_ready(&self) -> bool {
        self.ready
    }

    pub fn is_exited(&self) -> bool {
        self.exited
    }

    /// Prompts waiting for the current turn to end.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// The cursor position reported by the terminal at start, if one came.
    pub fn cursor_report(&self) -> Option<(u16, u16)> {
        match self.cpr {
            Cpr::Received { row, col } => Some((row, col)),
            _ => None,
        }
    }

    /// Apply one event at time `now`; returns what the loop must do, in order.
    pub fn handle(&mut self, event: Event<'_>, now: Instant) -> Vec<Output> {
        if self.exited {
            return Vec::new();
        }
        match event {
            Event::Start => self.start(now),
            Event::Input(bytes) => {
                let keys = self.decoder.decode(bytes);
                self.esc_deadline = self.decoder.escape_pending().then(|| now + ESC_FLUSH);
                for key in keys {
                    if self.exited {
                        break;
                    }
                    self.key(key, now);
                }
            }
            Event::Timer => self.timer(now),
            Event::Resize { cols, rows } => {
                if self.ready {
                    let frame = self.frame(now);
                    let lines = std::mem::take(&mut self.pending_lines);
                    let bytes = self.renderer.resize(cols, rows, &lines, &frame);
                    self.out.push(Output::Write(bytes));
                    self.last_frame = Some(frame);
                } else {
                    self.renderer.set_size(cols, rows);
                }
            }
            Event::Eof => self.exit(ExitRequest::Code(0), "other"),
            Event::Terminate { signal } => self.exit(ExitRequest::Code(128 + signal), "other"),
            Event::HookFailed { .. } => self.hook_failures += 1,
        }
        if !self.exited {
            // A stage that is already due (a zero work time) runs now, so no deadline is ever
            // left at or before `now`.
            self.advance_turn(now);
            self.check_ready(now);
            self.present(now);
        }
        std::mem::take(&mut self.out)
    }

    /// When the loop must deliver [`Event::Timer`] next, if ever. After `handle(_, now)` this
    /// is always later than `now`, so the loop never spins.
    pub fn next_deadline(&self) -> Option<Instant> {
        if self.exited {
            return None;
        }
        let mut deadlines: Vec<Instant> = Vec::new();
        if !self.ready {
            match self.cpr {
                Cpr::Waiting { deadline } => deadlines.push(deadline),
                _ => deadlines.extend(self.ready_at),
            }
        }
        deadlines.extend(self.esc_deadline);
        deadlines.extend(self.burst_redraw_at);
        if let Some(Turn { stage: Stage::Working { until, .. }, .. }) = &self.turn {
            deadlines.push(*until);
            deadlines.extend(self.spinner_due);
        }
        deadlines.into_iter().min()
    }

    fn start(&mut self, now: Instant) {
        self.ready_at = Some(now + self.cfg.startup_delay);
        if let Some(timeout) = self.cfg.cpr_timeout {
            self.cpr = Cpr::Waiting { deadline: now + timeout };
            self.out.push(Output::Write(CURSOR_QUERY.to_vec()));
        }
    }

    fn timer(&mut self, now: Instant) {
        if self.esc_deadline.is_some_and(|d| now >= d) {
            self.esc_deadline = None;
            let mut keys = Vec::new();
            self.decoder.flush(&mut keys);
            for key in keys {
                self.key(key, now);
            }
        }
        if let Cpr::Waiting { deadline } = self.cpr
            && now >= deadline
        {
            self.cpr = Cpr::Missing;
        }
        if self.burst_redraw_at.is_some_and(|d| now >= d) {
            self.burst_redraw_at = None;
        }
        self.advance_turn(now);
    }

    fn check_ready(&mut self, now: Instant) {
        if self.ready || matches!(self.cpr, Cpr::Waiting { .. }) {
            return;
        }
        if self.ready_at.is_none_or(|at| now < at) {
            return;
        }
        self.ready = true;
        self.out.push(Output::Write(self.renderer.enter()));
        self.pending_lines.push(format!("✻ desk demo agent · session {}", self.cfg.session_id));
        self.pending_lines.push("  Type a prompt and press Enter. Ctrl-D on an empty line quits.".into());
        let earlier = self.cfg.earlier_prompts.len();
        if self.cfg.resume.is_some() {
            self.pending_lines.push(format!("↺ Resumed the conversation: {earlier} earlier prompt(s)"));
            for line in &self.said {
                self.pending_lines.push(format!("  > {line}"));
            }
        }
        self.present(now);
        if self.cfg.bracketed_paste {
            self.out.push(Output::Write(ENABLE_BRACKETED_PASTE.to_vec()));
        }
        let source = if self.cfg.resume.is_some() { "resume" } else { "startup" };
        self.out.push(Output::Conversation { id: self.conversation.clone(), source });
        self.out.push(Output::Hook(HookEvent::SessionStart { source }));
        for key in std::mem::take(&mut self.early) {
            if self.exited {
                break;
            }
            self.key(key, now);
        }
    }

    fn key(&mut self, key: Key, now: Instant) {
        if let Key::CursorReport { row, col } = key {
            self.cpr = Cpr::Received { row, col };
            return;
        }
        if !self.ready {
            if self.cfg.keep_early_input && self.early.len() < MAX_EARLY_KEYS {
                self.early.push(key);
            }
            return;
        }
        if let Some(Turn { stage: Stage::Dialog { selected }, .. }) = self.turn {
            self.dialog_key(key, selected, now);
            return;
        }
        match key {
            Key::Char(c) => {
                self.note_typed(now);
                self.insert(|c2| c2.push_char(c));
            }
            Key::Newline => self.insert(|c| c.push_char('\n')),
            Key::Backspace => {
                self.composer.backspace();
                self.input_full = false;
            }
            Key::KillLine => {
                self.composer.kill_line();
                self.input_full = false;
            }
            Key::Paste(text) => self.paste(text, now),
            Key::Enter => self.enter(now),
            Key::Esc => {
                if self.cfg.esc_interrupts && self.turn.is_some() {
                    self.interrupt(now);
                }
            }
            Key::Interrupt => {
                if !self.composer.is_empty() {
                    self.composer.clear();
                    self.input_full = false;
                } else if self.turn.is_some() {
                    if self.cfg.esc_interrupts {
                        self.interrupt(now);
                    }
                } else {
                    self.exit(ExitRequest::Code(0), "prompt_input_exit");
                }
            }
            Key::EndOfInput => {
                if self.composer.is_empty() {
                    self.exit(ExitRequest::Code(0), "prompt_input_exit");
                }
            }
            Key::Up | Key::Down | Key::Left | Key::Right | Key::Ignored | Key::CursorReport { .. } => {}
        }
    }

    fn insert(&mut self, f: impl FnOnce(&mut Composer) -> bool) {
        if !f(&mut self.composer) {
            self.input_full = true;
        }
    }

    fn note_typed(&mut self, now: Instant) {
        let t = &mut self.typing;
        t.run = match t.last_char {
            Some(last) if now.saturating_duration_since(last) < BURST_GAP => t.run + 1,
            _ => 1,
        };
        t.last_char = Some(now);
        if t.run >= BURST_MIN_CHARS {
            t.burst_at = Some(now);
            if let Some(window) = self.cfg.paste_burst {
                self.burst_redraw_at = Some(now + window);
            }
        }
    }

    fn in_burst_window(&self, now: Instant) -> bool {
        let Some(window) = self.cfg.paste_burst else {
            return false;
        };
        // Strictly inside: at exactly `t + window` the window has closed, which is also when the
        // redraw timer fires.
        let within = |t: Option<Instant>| t.is_some_and(|t| now.saturating_duration_since(t) < window);
        within(self.paste_ended) || within(self.typing.burst_at)
    }

    fn paste(&mut self, text: String, now: Instant) {
        self.paste_ended = Some(now);
        if let Some(window) = self.cfg.paste_burst {
            self.burst_redraw_at = Some(now + window);
        }
        if text.is_empty() {
            return;
        }
        let collapse =
            self.cfg.paste_collapse.is_some_and(|c| line_count(&text) > c.lines || text.chars().count() > c.chars);
        if collapse {
            self.pastes += 1;
            let id = self.pastes;
            self.insert(|c| c.push_paste(id, text));
        } else {
            self.insert(|c| c.push_text(&text));
        }
    }

    fn enter(&mut self, now: Instant) {
        if self.in_burst_window(now) {
            // Codex treats this Enter as part of the paste: a newline, no submit.
            self.insert(|c| c.push_char('\n'));
            if self.cfg.approval_on_newline
                && let Some(Turn { stage: Stage::Working { until, then: Then::AskApproval }, .. }) = &mut self.turn
            {
                *until = now;
            }
            return;
        }
        if self.turn.is_some() {
            if self.cfg.queue_mid_turn
                && let Some(prompt) = self.composer.take_prompt()
            {
                self.queue.push_back(prompt);
                self.input_full = false;
            }
            return;
        }
        if let Some(prompt) = self.composer.take_prompt() {
            self.input_full = false;
            self.submit(prompt, now);
        }
    }

    fn submit(&mut self, prompt: String, now: Instant) {
        if prompt.trim() == "/clear" {
            self.clear(now);
            return;
        }
        self.seq += 1;
        let seq = self.seq;
        self.out.push(Output::LogPrompt { seq, prompt: prompt.clone() });
        self.out.push(Output::Transcript { prompt: prompt.clone() });
        if self.said.len() == RECALL_LINES {
            self.said.pop_front();
        }
        self.said.push_back(first_line(&prompt).to_string());
        let contains = |word: &Option<String>| word.as_ref().is_some_and(|w| prompt.contains(w.as_str()));
        if contains(&self.cfg.crash_word) {
            let request = match self.cfg.crash {
                CrashMode::Exit(code) => ExitRequest::Code(code),
                CrashMode::Signal(sig) => ExitRequest::Signal(sig),
            };
            let bytes = self.leave_bytes();
            self.out.push(Output::Write(bytes));
            self.out.push(Output::Exit(request));
            self.exited = true;
            return;
        }
        let approval = contains(&self.cfg.approve_word);
        self.out.push(Output::Hook(HookEvent::UserPromptSubmit { prompt: prompt.clone() }));
        let head = first_line(&prompt).to_string();
        self.pending_lines.push(format!("> {head}"));
        let lines = line_count(&prompt);
        if lines > 1 {
            self.pending_lines.push(format!("  … +{} more lines", lines - 1));
        }
        let (delay, then) =
            if approval { (self.cfg.approval_delay, Then::AskApproval) } else { (self.cfg.work, Then::Reply) };
        let replies = crate::channel::replies(
            &prompt,
            self.cfg.channel_reply,
            &self.cfg.channel_reply_text,
            &self.cfg.channel_me,
        );
        self.turn = Some(Turn {
            head,
            replies,
            started: now,
            stage: Stage::Working { until: now + delay, then },
            tool_use_id: format!("toolu_demo_{seq:06}"),
            command: format!("demo-tool --prompt {seq}"),
        });
    }

    fn advance_turn(&mut self, now: Instant) {
        while !self.exited {
            let Some(turn) = &mut self.turn else { return };
            let Stage::Working { until, then } = turn.stage else {
                return;
            };
            if now < until {
                return;
            }
            match then {
                Then::AskApproval => {
                    turn.stage = Stage::Dialog { selected: 0 };
                    let (id, command) = (turn.tool_use_id.clone(), turn.command.clone());
                    self.pending_lines.push(format!("● Bash({command})"));
                    self.out.push(Output::Hook(HookEvent::PreToolUse { tool_use_id: id, command: command.clone() }));
                    self.out.push(Output::Hook(HookEvent::PermissionRequest { command }));
                    self.present(now);
                    self.out.push(Output::Hook(HookEvent::Notification {
                        message: format!("{} needs your permission to use Bash", self.cfg.title),
                    }));
                }
                Then::Reply => self.finish_turn(now),
            }
        }
    }

    /// `/clear`: the conversation ends and a new one starts (Claude Code's SessionEnd "clear",
    /// then SessionStart "clear" with a new id). Not a prompt: not logged.
    fn clear(&mut self, now: Instant) {
        self.out.push(Output::Hook(HookEvent::SessionEnd { reason: "clear" }));
        self.clears += 1;
        self.conversation = derived_uuid(&self.conversation, self.clears);
        self.said.clear();
        self.pending_lines.push(format!("  ⎿ Cleared: new conversation {}", self.conversation));
        self.present(now);
        self.out.push(Output::Conversation { id: self.conversation.clone(), source: "clear" });
        self.out.push(Output::Hook(HookEvent::SessionStart { source: "clear" }));
    }

    fn finish_turn(&mut self, now: Instant) {
        let Some(turn) = self.turn.take() else { return };
        self.pending_lines.push(format!("● Done: {}", turn.head));
        if turn.head.contains(RECALL_WORD) {
            let earlier: Vec<&str> = self.said.iter().rev().skip(1).rev().map(String::as_str).collect();
            self.pending_lines.push(format!("● Earlier in this conversation: {}", earlier.join(" · ")));
        }
        for i in 1..=self.cfg.reply_lines {
            self.pending_lines.push(filler_line(i));
        }
        for reply in turn.replies {
            self.pending_lines.push(format!("● Replying in #{} (thread {})", reply.channel, reply.thread));
            self.out.push(Output::ChannelPost(reply));
        }
        self.present(now);
        self.out.push(Output::Hook(HookEvent::Stop));
        self.next_from_queue(now);
    }

    fn interrupt(&mut self, now: Instant) {
        if self.turn.take().is_none() {
            return;
        }
        self.pending_lines.push("  ⎿ Interrupted by user".into());
        self.present(now);
        self.next_from_queue(now);
    }

    fn next_from_queue(&mut self, now: Instant) {
        if let Some(next) = self.queue.pop_front() {
            self.submit(next, now);
        }
    }

    fn dialog_key(&mut self, key: Key, selected: usize, now: Instant) {
        let select = |agent: &mut Self, s: usize| {
            if let Some(turn) = &mut agent.turn {
                turn.stage = Stage::Dialog { selected: s };
            }
        };
        match key {
            Key::Enter => self.answer(selected == 0, now),
            Key::Esc => self.answer(false, now),
            Key::Char('1') | Key::Up => select(self, 0),
            Key::Char('2') | Key::Down => select(self, 1),
            // Pastes and any other typing never reach the dialog or the input box.
            _ => {}
        }
    }

    fn answer(&mut self, yes: bool, now: Instant) {
        let Some(turn) = &mut self.turn else { return };
        turn.stage = Stage::Working { until: now + self.cfg.work, then: Then::Reply };
        let (id, command) = (turn.tool_use_id.clone(), turn.command.clone());
        if yes {
            self.pending_lines.push("  ⎿ Approved (1. Yes) · ran demo-tool: ok".into());
            self.present(now);
            self.out.push(Output::Hook(HookEvent::PostToolUse { tool_use_id: id, command }));
        } else {
            self.pending_lines.push("  ⎿ Denied (2. No) · demo-tool not run".into());
        }
    }

    fn exit(&mut self, request: ExitRequest, reason: &'static str) {
        if self.ready {
            self.out.push(Output::Hook(HookEvent::SessionEnd { reason }));
        }
        let bytes = self.leave_bytes();
        self.out.push(Output::Write(bytes));
        self.out.push(Output::Exit(request));
        self.exited = true;
    }

    /// Bytes that hand the terminal back after a fatal error in the loop; the agent is then
    /// exited and ignores further events.
    pub fn shutdown_bytes(&mut self) -> Vec<u8> {
        let bytes = self.leave_bytes();
        self.exited = true;
        bytes
    }

    fn leave_bytes(&mut self) -> Vec<u8> {
        let mut bytes = Vec::new();
        if self.ready && self.cfg.bracketed_paste {
            bytes.extend_from_slice(DISABLE_BRACKETED_PASTE);
        }
        bytes.extend(self.renderer.leave());
        bytes
    }

    fn spinner_index(&self, turn: &Turn, now: Instant) -> usize {
        let elapsed = now.saturating_duration_since(turn.started);
        usize::try_from(elapsed.as_millis() / SPINNER_INTERVAL.as_millis()).unwrap_or(0)
    }

    fn title_for(&self, now: Instant) -> String {
        let glyph = match &self.turn {
            None => IDLE_GLYPH,
            Some(turn) => match turn.stage {
                Stage::Dialog { .. } => BLOCKED_GLYPH,
                Stage::Working { .. } => SPINNER[self.spinner_index(turn, now) % SPINNER.len()],
            },
        };
        format!("{glyph} {}", self.cfg.title)
    }

    fn frame(&self, now: Instant) -> Frame {
        let mut status: Vec<String> = Vec::new();
        let (activity, body) = match &self.turn {
            Some(turn) => match turn.stage {
                Stage::Working { .. } => {
                    let glyph = SPINNER[self.spinner_index(turn, now) % SPINNER.len()];
                    let hint = if self.cfg.esc_interrupts { " (esc to interrupt)" } else { "" };
                    status.push("working".into());
                    (Some(format!("{glyph} Working…{hint}")), Body::Input { text: self.composer.display() })
                }
                Stage::Dialog { selected } => {
                    status.push("waiting for approval · Enter to confirm · Esc to cancel".into());
                    (None, Body::Dialog { command: turn.command.clone(), selected })
                }
            },
            None => {
                status.push("idle".into());
                (None, Body::Input { text: self.composer.display() })
            }
        };
        if !self.queue.is_empty() {
            status.push(format!("queued: {}", self.queue.len()));
        }
        if self.in_burst_window(now) {
            status.push("paste burst".into());
        }
        if self.cpr == Cpr::Missing {
            status.push("no cursor report".into());
        }
        if self.input_full {
            status.push("input box full".into());
        }
        if self.hook_failures > 0 {
            status.push(format!("hook failures: {}", self.hook_failures));
        }
        Frame { activity, body, status: status.join(" · ") }
    }

    /// Emit the title and a frame if either changed (or transcript lines are waiting).
    fn present(&mut self, now: Instant) {
        if !self.ready || self.exited {
            return;
        }
        let title = self.title_for(now);
        if self.title.as_ref() != Some(&title) {
            self.out.push(Output::SetTitle(title.clone()));
            self.title = Some(title);
        }
        let frame = self.frame(now);
        if !self.pending_lines.is_empty() || self.last_frame.as_ref() != Some(&frame) {
            let lines = std::mem::take(&mut self.pending_lines);
            self.out.push(Output::Write(self.renderer.draw(&lines, &frame)));
            self.last_frame = Some(frame);
        }
        self.spinner_due = match &self.turn {
            Some(turn) if matches!(turn.stage, Stage::Working { .. }) => {
                let next = u32::try_from(self.spinner_index(turn, now) + 1).unwrap_or(u32::MAX);
                Some(turn.started + SPINNER_INTERVAL * next)
            }
            _ => None,
        };
    }
}

/// One line of filler output for `--reply-lines`.
fn filler_line(i: usize) -> String {
    format!("  {i:>5} │ the quick brown fox jumps over the lazy dog, for output volume")
}

/// A version-4-shaped UUID derived from `from` and `n` (FNV-1a over both, twice): the id of a
/// conversation `/clear` starts, without randomness in this pure state machine. Distinct for
/// every `(from, n)` in practice, and a well-formed id for desk's capture.
fn derived_uuid(from: &str, n: u32) -> String {
    let hash = |seed: u64| {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
        for b in from.bytes().chain(n.to_le_bytes()) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    };
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&hash(1).to_le_bytes());
    b[8..].copy_from_slice(&hash(2).to_le_bytes());
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

#[cfg(test)]
mod tests;
