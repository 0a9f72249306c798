//! What `desk attach` draws of its own and what its own keys do: the status line, the command
//! prefix, the session list and the answer prompt.
//!
//! Owns the attach client's own state — which prompt is open (none, the prefix, the session
//! list, the answer to a dialog, the help), a passing message — the text of the status line
//! (`desk_core::attention::status_line` for the fleet, or the open prompt), the session list and
//! help drawn above it, and the bytes that draw them. A key read by a prompt becomes a
//! [`Command`] the client carries out (detach, switch to a session, answer a dialog).
//! Invariants: the status row is drawn with the cursor, attributes and wrap state saved and
//! restored around it (`ESC 7` … `ESC 8`), so the session's drawing goes on where it was; an
//! overlay (the list, the help) is only ever closed by a fresh keyframe of the session
//! ([`Command::Repaint`]), never by drawing blanks over it; no key is sent to the session while
//! a prompt is open. No I/O; the clock is an argument.

use std::fmt::Write as _;

use super::prefix::{Key, key_name};
use crate::attention::FleetReader;
use desk_core::attention::{Here, Need, fit};
use desk_core::dialog::Dialog;

/// 3 s: how long a message (`answered api: 1. Yes`, `no session needs you`) stays on the status
/// line: long enough to read a dozen words, short enough not to hide the fleet's line.
pub(super) const MESSAGE_MS: u64 = 3000;

/// A terminal needs at least this many rows for the status line (one for it, the rest for the
/// session): a session of fewer than 4 rows is not worth shrinking further.
pub(super) const STATUS_MIN_ROWS: u16 = 5;

/// ... and this many columns: the session's name, its state and a count.
pub(super) const STATUS_MIN_COLS: u16 = 20;

/// What the client must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Command {
    Detach,
    /// Attach this session instead.
    Switch(String),
    /// Type the prefix key itself into the session.
    SendPrefix,
    /// Ask the session for its screen (to read its dialog).
    AskDialog,
    /// Answer the dialog with this fingerprint: an option, or a refusal.
    Answer {
        option: Option<u8>,
        seen: String,
        said: String,
    },
    /// The overlay closed: redraw the session from a fresh keyframe.
    Repaint,
    /// The status line's text changed.
    Redraw,
}

/// The open prompt.
#[derive(Debug, Clone, PartialEq)]
enum Mode {
    Normal,
    /// The prefix was typed; the next key is a command.
    Prefix,
    /// The session list, with the highlighted row.
    Picker {
        names: Vec<String>,
        lines: Vec<String>,
        at: usize,
    },
    /// Waiting for the session's screen.
    AwaitDialog,
    /// The session's dialog, to answer.
    Answer(Box<Dialog>),
    Help,
}

/// The attach client's own part of the terminal.
pub(super) struct Ui {
    prefix: Option<u8>,
    detach: Option<u8>,
    read_only: bool,
    mode: Mode,
    message: Option<(String, u64)>,
    /// The session attached before this one.
    pub(super) last: Option<String>,
}

impl Ui {
    pub(super) fn new(prefix: Option<u8>, detach: Option<u8>, read_only: bool) -> Ui {
        Ui { prefix, detach, read_only, mode: Mode::Normal, message: None, last: None }
    }

    /// The prefix key, if there is one.
    pub(super) fn prefix(&self) -> Option<u8> {
        self.prefix
    }

    /// Whether a prompt reads the keys now (else they are the session's, but for the detach
    /// and prefix keys).
    pub(super) fn reading(&self) -> bool {
        self.mode != Mode::Normal
    }

    /// Whether an overlay (the list, the help) covers part of the session's screen.
    pub(super) fn overlay_open(&self) -> bool {
        matches!(self.mode, Mode::Picker { .. } | Mode::Help)
    }

    /// The prefix key was typed.
    pub(super) fn prefix_typed(&mut self) -> Vec<Command> {
        self.mode = Mode::Prefix;
        self.message = None;
        vec![Command::Redraw]
    }

    /// Show `text` on the status line for a while.
    pub(super) fn say(&mut self, text: impl Into<String>, now_ms: u64) {
        self.message = Some((text.into(), now_ms + MESSAGE_MS));
    }

    /// When the message on show goes, if one is.
    pub(super) fn message_until(&self) -> Option<u64> {
        self.message.as_ref().map(|(_, until)| *until)
    }

    /// Let a message whose time is up go; whether the line changed.
    pub(super) fn expire(&mut self, now_ms: u64) -> bool {
        if self.message.as_ref().is_some_and(|(_, until)| *until <= now_ms) {
            self.message = None;
            return true;
        }
        false
    }

    /// The session's screen arrived after [`Command::AskDialog`]: its dialog, as the provider's
    /// rules read it (`None`: no dialog on it).
    pub(super) fn dialog_read(&mut self, session: &str, dialog: Option<Dialog>, now_ms: u64) -> Vec<Command> {
        if self.mode != Mode::AwaitDialog {
            return Vec::new();
        }
        match dialog {
            Some(d) => self.mode = Mode::Answer(Box::new(d)),
            None => {
                self.mode = Mode::Normal;
                self.say(format!("{session} shows no dialog to answer"), now_ms);
            }
        }
        vec![Command::Redraw]
    }

    /// A key while a prompt is open.
    pub(super) fn on_key(&mut self, key: Key, here: &str, fleet: &FleetReader, now_ms: u64) -> Vec<Command> {
        let mode = std::mem::replace(&mut self.mode, Mode::Normal);
        match mode {
            Mode::Normal => Vec::new(),
            Mode::Prefix => self.command(key, here, fleet, now_ms),
            Mode::Help => vec![Command::Repaint, Command::Redraw],
            Mode::AwaitDialog => {
                // Still waiting: Esc gives up, anything else waits on.
                if key != Key::Esc {
                    self.mode = Mode::AwaitDialog;
                }
                vec![Command::Redraw]
            }
            Mode::Picker { names, lines, at } => match key {
                Key::Down | Key::Char('j') => {
                    self.mode = Mode::Picker { at: (at + 1) % names.len().max(1), names, lines };
                    vec![Command::Redraw]
                }
                Key::Up | Key::Char('k') => {
                    self.mode = Mode::Picker { at: (at + names.len().max(1) - 1) % names.len().max(1), names, lines };
                    vec![Command::Redraw]
                }
                Key::Enter => self.go(names.get(at).cloned(), here),
                Key::Char(c @ '1'..='9') => {
                    let i = c as usize - '1' as usize;
                    match names.get(i) {
                        Some(name) => self.go(Some(name.clone()), here),
                        None => {
                            self.mode = Mode::Picker { names, lines, at };
                            vec![]
                        }
                    }
                }
                Key::Esc | Key::Char('q') | Key::Ctrl(0x03) => vec![Command::Repaint, Command::Redraw],
                _ => {
                    self.mode = Mode::Picker { names, lines, at };
                    vec![]
                }
            },
            Mode::Answer(dialog) => {
                let pick = |n: u8, dialog: &Dialog| {
                    let said = dialog.options.iter().find(|o| o.number == n).map(|o| format!("{n}. {}", o.label));
                    said.map(|said| Command::Answer { option: Some(n), seen: dialog.fingerprint.clone(), said })
                };
                let command = match key {
                    Key::Char(c @ '1'..='9') => pick(c as u8 - b'0', &dialog),
                    Key::Char('y') => pick(1, &dialog),
                    Key::Char('n') | Key::Char('d') => {
                        Some(Command::Answer { option: None, seen: dialog.fingerprint.clone(), said: "deny".into() })
                    }
                    Key::Esc | Key::Char('q') | Key::Ctrl(0x03) => return vec![Command::Redraw],
                    _ => None,
                };
                match command {
                    Some(c) => vec![c, Command::Redraw],
                    None => {
                        self.mode = Mode::Answer(dialog);
                        vec![]
                    }
                }
            }
        }
    }

    fn go(&mut self, name: Option<String>, here: &str) -> Vec<Command> {
        match name {
            Some(name) if name != here => vec![Command::Repaint, Command::Switch(name)],
            _ => vec![Command::Repaint, Command::Redraw],
        }
    }

    /// The key after the prefix.
    fn command(&mut self, key: Key, here: &str, fleet: &FleetReader, now_ms: u64) -> Vec<Command> {
        match key {
            Key::Char('d') => vec![Command::Detach],
            Key::Char('n') => {
                let needs = fleet.needs();
                match desk_core::attention::next_after(&needs, Some(here)) {
                    Some(next) => vec![Command::Switch(next.to_string())],
                    None => {
                        self.say("no other session needs you", now_ms);
                        vec![Command::Redraw]
                    }
                }
            }
            Key::Char('l') => match self.last.clone() {
                Some(last) => vec![Command::Switch(last)],
                None => {
                    self.say("no session was attached before this one", now_ms);
                    vec![Command::Redraw]
                }
            },
            Key::Char('s') => {
                let (names, lines) = picker_lines(fleet, here, now_ms);
                if names.is_empty() {
                    self.say("no sessions", now_ms);
                    return vec![Command::Redraw];
                }
                let at = names.iter().position(|n| n == here).unwrap_or(0);
                self.mode = Mode::Picker { names, lines, at };
                vec![Command::Redraw]
            }
            Key::Char('a') if self.read_only => {
                self.say("a read-only attach answers no dialog", now_ms);
                vec![Command::Redraw]
            }
            Key::Char('a') => {
                self.mode = Mode::AwaitDialog;
                vec![Command::AskDialog, Command::Redraw]
            }
            Key::Char('?') => {
                self.mode = Mode::Help;
                vec![Command::Redraw]
            }
            Key::Ctrl(k) if Some(k) == self.prefix && !self.read_only => vec![Command::SendPrefix, Command::Redraw],
            _ => vec![Command::Redraw],
        }
    }

    /// The status line's text, `width` cells: the open prompt's, a message, else the fleet's.
    pub(super) fn status_text(&self, here: &Here, needs: &[Need], now_ms: u64, width: usize) -> String {
        let prefix = self.prefix.map(key_name).unwrap_or_default();
        let text = match &self.mode {
            Mode::Prefix => format!(
                " {prefix}: n next in need · l last · s sessions · a answer · d detach · ? help · {prefix} sends {prefix} · Esc"
            ),
            Mode::AwaitDialog => format!(" reading {}'s dialog… (Esc: never mind)", here.name),
            Mode::Answer(d) => {
                let mut t = format!(" answer {} │ {} │", here.name, d.asks());
                for o in &d.options {
                    let _ = write!(t, " {} {} ·", o.number, o.label);
                }
                t.push_str(" n deny · Esc");
                t
            }
            Mode::Picker { .. } => " sessions: ↑↓ or j k, Enter or a digit attaches, Esc closes".to_string(),
            Mode::Help => " any key closes this help".to_string(),
            Mode::Normal => match &self.message {
                Some((m, _)) => format!(" {m}"),
                None => {
                    let hint = if prefix.is_empty() { String::new() } else { format!("{prefix} ? keys") };
                    return desk_core::attention::status_line(here, needs, &hint, now_ms, width);
                }
            },
        };
        fit(&text, width)
    }

    /// The overlay's rows, drawn bottom-aligned above the status row, at most `max_rows`.
    pub(super) fn overlay(&self, width: usize, max_rows: usize) -> Vec<String> {
        match &self.mode {
            Mode::Help => {
                let p = self.prefix.map(key_name).unwrap_or_else(|| "(no prefix key)".into());
                let detach = self.detach.map(key_name).unwrap_or_else(|| "none".into());
                let rows = [
                    format!(" desk attach: keys after the prefix {p}"),
                    String::new(),
                    "   n   the next session that needs you (blocked, stuck, unwell)".into(),
                    "   l   back to the last session".into(),
                    "   s   choose a session from a list".into(),
                    "   a   answer this session's dialog (its options on this line)".into(),
                    "   d   detach".into(),
                    format!("   {p}  type {p} into the session"),
                    "   ?   this help".into(),
                    String::new(),
                    format!(" {detach} alone detaches at any time · desk attach --no-status hides this line"),
                ];
                boxed(&rows, width, max_rows, None)
            }
            Mode::Picker { lines, at, .. } => boxed(lines, width, max_rows, Some(*at)),
            _ => Vec::new(),
        }
    }
}

/// The session list: sessions that need a person first (most urgent first), then the rest by
/// name; each line its number, name, state and title.
fn picker_lines(fleet: &FleetReader, here: &str, now_ms: u64) -> (Vec<String>, Vec<String>) {
    let needs = fleet.needs();
    let mut names: Vec<String> = needs.iter().filter_map(Need::session).map(String::from).collect();
    for seen in fleet.sessions() {
        if !names.contains(&seen.look.name) {
            names.push(seen.look.name.clone());
        }
    }
    let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let lines = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let seen = fleet.session(name);
            let state = seen.map(|s| s.look.state_words()).unwrap_or_default();
            let since = seen.map_or(0, |s| s.look.since_ms);
            let age = if since == 0 { String::new() } else { desk_core::time::span(now_ms.saturating_sub(since)) };
            let mark = if name == here { '*' } else { ' ' };
            let number = if i < 9 { format!("{}", i + 1) } else { " ".into() };
            let title = seen.map(|s| s.title.clone()).unwrap_or_default();
            format!("{mark}{number} {name:<width$}  {state:<18} {age:>4}  {title}")
        })
        .collect();
    (names, lines)
}

/// `rows` in a box `width` wide, the last `max_rows` at most (keeping the highlighted one in
/// view), the highlighted row in reverse video.
fn boxed(rows: &[String], width: usize, max_rows: usize, at: Option<usize>) -> Vec<String> {
    if width < 4 || max_rows < 3 {
        return Vec::new();
    }
    let inner = width - 2;
    let room = max_rows - 2;
    let start = match at {
        Some(at) if at >= room => at + 1 - room,
        _ => 0,
    };
    let mut out = vec![format!("┌{}┐", "─".repeat(inner))];
    for (i, row) in rows.iter().enumerate().skip(start).take(room) {
        let text = fit(row, inner);
        if Some(i) == at {
            out.push(format!("│\x1b[7m{text}\x1b[27m│"));
        } else {
            out.push(format!("│{text}│"));
        }
    }
    out.push(format!("└{}┘", "─".repeat(inner)));
    out
}

/// The bytes that draw `text` on row `row` (1-based) in reverse video, the cursor and
/// attributes saved and restored around it.
pub(super) fn draw_status(row: u16, text: &str) -> Vec<u8> {
    format!("\x1b7\x1b[{row};1H\x1b[0;7m{text}\x1b[0m\x1b8").into_bytes()
}

/// The bytes that draw `rows` so that the last one ends right above row `above` (1-based).
pub(super) fn draw_overlay(above: u16, rows: &[String]) -> Vec<u8> {
    let mut out = String::from("\x1b7");
    let top = usize::from(above).saturating_sub(rows.len()).max(1);
    for (i, row) in rows.iter().enumerate() {
        let _ = write!(out, "\x1b[{};1H\x1b[0m{row}", top + i);
    }
    out.push_str("\x1b[0m\x1b8");
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use desk_common::paths::Paths;

    fn fleet() -> FleetReader {
        let tmp = std::env::temp_dir().join("desk-ui-test-none");
        FleetReader::new(Paths { runtime: tmp.join("r"), state: tmp.join("s"), config: tmp.join("c") })
    }

    fn here() -> Here {
        Here { name: "api".into(), state: "working".into(), since_ms: 0 }
    }

    #[test]
    fn prefix_keys_become_commands() {
        let mut ui = Ui::new(Some(0x1d), Some(0x1c), false);
        let f = fleet();
        ui.prefix_typed();
        assert!(ui.reading());
        assert_eq!(ui.on_key(Key::Char('d'), "api", &f, 0), [Command::Detach]);
        assert!(!ui.reading(), "one key after the prefix, then the keys are the session's again");
        ui.prefix_typed();
        assert_eq!(ui.on_key(Key::Ctrl(0x1d), "api", &f, 0), [Command::SendPrefix, Command::Redraw]);
        ui.prefix_typed();
        assert_eq!(ui.on_key(Key::Char('l'), "api", &f, 0), [Command::Redraw], "no last session yet");
        ui.last = Some("web".into());
        ui.prefix_typed();
        assert_eq!(ui.on_key(Key::Char('l'), "api", &f, 0), [Command::Switch("web".into())]);
        ui.prefix_typed();
        assert_eq!(ui.on_key(Key::Char('a'), "api", &f, 0), [Command::AskDialog, Command::Redraw]);
        assert_eq!(ui.dialog_read("api", None, 10), [Command::Redraw]);
        assert_eq!(ui.status_text(&here(), &[], 10, 40).trim_end(), " api shows no dialog to answer");
        ui.prefix_typed();
        assert_eq!(ui.on_key(Key::Char('x'), "api", &f, 0), [Command::Redraw], "an unknown key cancels");
        assert!(!ui.reading());
    }

    #[test]
    fn the_answer_prompt_lists_the_options_and_answers_with_the_fingerprint() {
        let mut ui = Ui::new(Some(0x1d), Some(0x1c), false);
        let f = fleet();
        ui.prefix_typed();
        ui.on_key(Key::Char('a'), "api", &f, 0);
        let rules = desk_core::state::RuleSet::builtin(desk_core::provider::Provider::Demo);
        let rows: Vec<String> =
            ["╭──╮", "│ Bash command │", "│ rm x │", "│ ❯ 1. Yes │", "│   2. No │", "╰──╯"].map(String::from).to_vec();
        let dialog = rules.dialog.unwrap().read(&rows, None, "api/1").unwrap();
        let seen = dialog.fingerprint.clone();
        ui.dialog_read("api", Some(dialog), 0);
        let line = ui.status_text(&here(), &[], 0, 80);
        assert_eq!(line.trim_end(), " answer api │ Bash(rm x) │ 1 Yes · 2 No · n deny · Esc");
        assert_eq!(ui.on_key(Key::Char('7'), "api", &f, 0), [], "no option 7: still open");
        assert_eq!(
            ui.on_key(Key::Char('2'), "api", &f, 0),
            [Command::Answer { option: Some(2), seen, said: "2. No".into() }, Command::Redraw]
        );
    }

    #[test]
    fn an_overlay_is_boxed_and_keeps_the_highlight_in_view() {
        let rows: Vec<String> = (1..=6).map(|i| format!("row {i}")).collect();
        let b = boxed(&rows, 12, 5, Some(4));
        assert_eq!(b.len(), 5);
        assert_eq!(b[0], "┌──────────┐");
        assert_eq!(b[1], "│row 3     │");
        assert_eq!(b[3], "│\x1b[7mrow 5     \x1b[27m│");
        assert!(boxed(&rows, 12, 2, None).is_empty(), "no room");
    }
}
