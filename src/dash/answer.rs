//! The dashboard's answer panel (`a`): answer the selected session's dialog without attaching.
//!
//! Owns the panel's state (which session, the dialog it answers, which key is highlighted),
//! reading the dialog's options off the session's screen ([`dialog_options`]: the numbered
//! lines Claude Code, Codex and the demo agent draw, and which of them the agent highlights),
//! what a key does in the panel, and drawing it under the live preview, which keeps showing the
//! session's screen above it. The panel lists the dialog's own options, says which one Enter
//! picks, and offers their digits with Enter, Esc and the arrows (without a dialog on the
//! screen: Enter, Esc, 1/2/3, y/n and the arrows). Choosing one hands it to the loop, which types
//! it through the same library code as `desk keys` (`desk_common::keys`, journalled `via` `dash`).
//! Invariants: nothing is typed but the one key chosen, and only on a deliberate choice (Enter
//! on the highlight, or the key's own character); opening and moving about the panel types
//! nothing; the panel stays open after a key (the highlight an arrow moved is read back from
//! the screen) until the dialog it answers changes or goes ([`Answer::seen`]). No I/O and no
//! clock.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use super::key::Key;
use super::look::Look;

/// The keys offered when the screen shows no dialog's options, as shown and as `desk keys`
/// names them: those that answer agents' dialogs (confirm, cancel, pick an option by number or
/// y/n, move the highlight).
pub const CHOICES: [(&str, &str); 11] = [
    ("Enter", "Enter"),
    ("Esc", "Esc"),
    ("1", "1"),
    ("2", "2"),
    ("3", "3"),
    ("y", "y"),
    ("n", "n"),
    ("↑", "Up"),
    ("↓", "Down"),
    ("←", "Left"),
    ("→", "Right"),
];

/// 9: the most options a dialog's list shows in the panel. Agents' approval dialogs have two
/// or three; a longer list is still read whole, and its digits all offered.
const MAX_LISTED: usize = 9;

/// One option of a dialog, as the session's screen shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DialogOption {
    /// Its number: the digit that picks it.
    pub number: u8,
    pub label: String,
    /// The agent's highlight is on it: Enter picks it.
    pub highlighted: bool,
}

/// The characters agents put before the highlighted option (`❯ 1. Yes`, `› 1. Yes, proceed`).
const HIGHLIGHT_MARKS: [char; 5] = ['❯', '›', '>', '▶', '→'];

/// One screen row as a dialog option, if it is one: `[│ ][❯ ]N. label[ │]`.
fn option_line(row: &str) -> Option<DialogOption> {
    let line = row.trim_start_matches(|c: char| c.is_whitespace() || matches!(c, '│' | '┃' | '║'));
    let (highlighted, line) = match line.strip_prefix(HIGHLIGHT_MARKS) {
        Some(rest) => (true, rest.trim_start()),
        None => (false, line),
    };
    let digits: String = line.chars().take_while(char::is_ascii_digit).collect();
    let number: u8 = digits.parse().ok().filter(|n| (1..=9).contains(n))?;
    let rest = line[digits.len()..].strip_prefix(['.', ')'])?;
    if !rest.starts_with(' ') {
        return None;
    }
    let label = rest.trim().trim_end_matches(|c: char| c.is_whitespace() || matches!(c, '│' | '┃' | '║')).trim();
    (!label.is_empty()).then(|| DialogOption { number, label: label.to_string(), highlighted })
}

/// The dialog's options on a screen: the last list on it numbered 1, 2, ... on consecutive rows
/// (a blank row between two allowed), two options at least, one of them highlighted, as agents
/// draw their dialogs (a numbered list in an agent's answer has no highlight). Empty when the
/// screen shows none.
pub fn dialog_options(rows: &[String]) -> Vec<DialogOption> {
    let is_dialog = |run: &[DialogOption]| run.len() >= 2 && run.iter().any(|o| o.highlighted);
    let mut best: Vec<DialogOption> = Vec::new();
    let mut run: Vec<DialogOption> = Vec::new();
    let mut last_row = 0;
    for (i, row) in rows.iter().enumerate() {
        let Some(option) = option_line(row) else { continue };
        let follows = run.last().is_some_and(|o| o.number + 1 == option.number) && i <= last_row + 2;
        if !follows {
            if is_dialog(&run) {
                best = std::mem::take(&mut run);
            }
            run.clear();
            if option.number != 1 {
                continue;
            }
        }
        last_row = i;
        run.push(option);
    }
    if is_dialog(&run) { run } else { best }
}

/// Rows the panel takes under the preview: its border, the waiting line, the dialog's options
/// and the keys.
pub fn panel_height(answer: &Answer) -> u16 {
    3 + answer.options.len().min(MAX_LISTED) as u16
}

/// The open panel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub session: String,
    /// What the session waits for, as its state says (`approval`, `question`), if blocked.
    pub wait: Option<String>,
    /// The dialog's options as the screen last showed them (empty: none on it).
    pub options: Vec<DialogOption>,
    /// The labels of the dialog the panel answers, once it has seen one on the screen.
    dialog: Option<Vec<String>>,
    /// The highlighted choice, an index into [`Answer::choices`].
    pub choice: usize,
}

/// What a key in the panel comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Still open.
    Stay,
    /// Closed, nothing typed.
    Close,
    /// Type this key (a `desk keys` name) into the session; the panel stays open.
    Type(String),
}

impl Answer {
    pub fn new(session: String, wait: Option<String>) -> Answer {
        Answer { session, wait, options: Vec::new(), dialog: None, choice: 0 }
    }

    /// The keys offered, as shown and as `desk keys` names them: Enter (what the agent
    /// highlights), the dialog's digits, then Esc and the arrows; without a dialog on the
    /// screen, [`CHOICES`].
    pub fn choices(&self) -> Vec<(String, String)> {
        if self.options.is_empty() {
            return CHOICES.iter().map(|(shown, key)| (shown.to_string(), key.to_string())).collect();
        }
        let own = |s: &str, k: &str| (s.to_string(), k.to_string());
        let digits = self.options.iter().map(|o| (o.number.to_string(), o.number.to_string()));
        std::iter::once(own("Enter", "Enter"))
            .chain(digits)
            .chain([own("Esc", "Esc"), own("↑", "Up"), own("↓", "Down")])
            .collect()
    }

    /// The option Enter picks: the one the agent highlights.
    pub fn enter_picks(&self) -> Option<&DialogOption> {
        self.options.iter().find(|o| o.highlighted)
    }

    /// Take the options the session's screen shows now. Returns false when the dialog the
    /// panel answers has changed (other options) or is gone: the panel is done. A highlight
    /// that moved is the same dialog.
    pub fn seen(&mut self, options: Vec<DialogOption>) -> bool {
        let labels: Vec<String> = options.iter().map(|o| o.label.clone()).collect();
        match &self.dialog {
            Some(dialog) if *dialog != labels => return false,
            Some(_) => {}
            None if labels.is_empty() => {}
            None => self.dialog = Some(labels),
        }
        if self.options.len() != options.len() {
            self.choice = 0;
        }
        self.options = options;
        true
    }

    /// React to a key: j/k or the arrows move the highlight, Enter types it, a choice's own
    /// character (a digit, y, n) types that at once, Esc or q closes.
    pub fn on_key(&mut self, key: Key) -> Outcome {
        let n = self.choices().len();
        match key {
            Key::Down | Key::Char('j') | Key::Char('l') => {
                self.choice = (self.choice + 1) % n;
                Outcome::Stay
            }
            Key::Up | Key::Char('k') | Key::Char('h') => {
                self.choice = (self.choice + n - 1) % n;
                Outcome::Stay
            }
            Key::Enter => Outcome::Type(self.choices()[self.choice % n].1.clone()),
            Key::Char(c @ ('y' | 'n')) => Outcome::Type(c.to_string()),
            Key::Char(c) if c.is_ascii_digit() && self.choices().iter().any(|(_, k)| *k == c.to_string()) => {
                Outcome::Type(c.to_string())
            }
            Key::Esc | Key::Char('q') | Key::CtrlC => Outcome::Close,
            _ => Outcome::Stay,
        }
    }
}

/// Draw the panel in `area` (the bottom [`panel_height`] rows of the preview pane).
pub fn render(frame: &mut Frame, area: Rect, answer: &Answer, look: Look) {
    let title =
        format!(" answer {} (j/k: choose, Enter: type it, a digit y n: type at once, Esc: close) ", answer.session);
    let block = Block::default().borders(Borders::TOP).title(title);
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let mut waits = match &answer.wait {
        Some(wait) => vec![Span::raw(" waiting for: "), Span::styled(wait.clone(), bold)],
        None => vec![Span::raw(" not blocked on a dialog now")],
    };
    match answer.enter_picks() {
        Some(o) => {
            waits.push(Span::raw(" · Enter picks "));
            waits.push(Span::styled(format!("{}. {}", o.number, o.label), bold));
        }
        None if answer.options.is_empty() => waits.push(Span::raw(" (its screen is above)")),
        None => waits.push(Span::raw(" · Enter picks what the agent has highlighted")),
    }
    let mut lines = vec![Line::from(waits)];
    for o in answer.options.iter().take(MAX_LISTED) {
        let mark = if o.highlighted { "❯" } else { " " };
        lines.push(Line::from(vec![
            Span::raw(format!(" {mark} ")),
            Span::styled(format!("{}", o.number), bold),
            Span::raw(format!("  {}", o.label)),
        ]));
    }
    let mut keys = vec![Span::raw(" ")];
    for (i, (shown, _)) in answer.choices().iter().enumerate() {
        let style = if i == answer.choice {
            let base = Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD);
            if look.color { base.fg(Color::Yellow) } else { base }
        } else {
            Style::new()
        };
        // Brackets mark the highlight in words too (NO_COLOR, a screen reader, a snapshot).
        let text = if i == answer.choice { format!("[{shown}]") } else { format!(" {shown} ") };
        keys.push(Span::styled(text, style));
        keys.push(Span::raw(" "));
    }
    lines.push(Line::from(keys));
    frame.render_widget(Clear, area);
    frame.render_widget(Paragraph::new(lines).block(block), area);
}
