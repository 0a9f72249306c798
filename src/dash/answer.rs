//! The dashboard's answer panel (`a`): answer the selected session's dialog without attaching.
//!
//! Owns the panel's state (which session, which key is highlighted), what a key does in it, and
//! drawing it under the live preview, which keeps showing the session's screen (and so its
//! dialog) above the panel. The panel says what the session waits for (the blocking rule's
//! evidence) and offers the keys that answer dialogs: Enter, Esc, 1/2/3, y/n and the arrows.
//! Choosing one hands it to the loop, which types it through the same library code as `desk keys`
//! (`desk_common::keys`, journalled `via` `dash`). Invariants: nothing is typed but the one key chosen,
//! and only on a deliberate choice (Enter on the highlight, or the key's own character); opening
//! and moving about the panel types nothing. No I/O and no clock.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use super::key::Key;
use super::look::Look;

/// The keys offered, as shown and as `desk keys` names them: those that answer agents' dialogs
/// (confirm, cancel, pick an option by number or y/n, move the highlight).
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

/// Rows the panel takes under the preview: its border, the waiting line and the choices.
pub const PANEL_HEIGHT: u16 = 3;

/// The open panel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub session: String,
    /// What the session waits for, as its state says (`approval`, `question`), if blocked.
    pub wait: Option<String>,
    /// The highlighted choice, an index into [`CHOICES`].
    pub choice: usize,
}

/// What a key in the panel comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Still open.
    Stay,
    /// Closed, nothing typed.
    Close,
    /// Type this key (a `desk keys` name) into the session; the panel closes.
    Type(String),
}

impl Answer {
    pub fn new(session: String, wait: Option<String>) -> Answer {
        Answer { session, wait, choice: 0 }
    }

    /// React to a key: j/k or the arrows move the highlight, Enter types it, a choice's own
    /// character (1, 2, 3, y, n) types that at once, Esc or q closes.
    pub fn on_key(&mut self, key: Key) -> Outcome {
        match key {
            Key::Down | Key::Char('j') | Key::Char('l') => {
                self.choice = (self.choice + 1) % CHOICES.len();
                Outcome::Stay
            }
            Key::Up | Key::Char('k') | Key::Char('h') => {
                self.choice = (self.choice + CHOICES.len() - 1) % CHOICES.len();
                Outcome::Stay
            }
            Key::Enter => Outcome::Type(CHOICES[self.choice].1.to_string()),
            Key::Char(c @ ('1' | '2' | '3' | 'y' | 'n')) => Outcome::Type(c.to_string()),
            Key::Esc | Key::Char('q') | Key::CtrlC => Outcome::Close,
            _ => Outcome::Stay,
        }
    }
}

/// Draw the panel in `area` (the bottom [`PANEL_HEIGHT`] rows of the preview pane).
pub fn render(frame: &mut Frame, area: Rect, answer: &Answer, look: Look) {
    let title =
        format!(" answer {} (j/k: choose, Enter: type it, 1 2 3 y n: type at once, Esc: close) ", answer.session);
    let block = Block::default().borders(Borders::TOP).title(title);
    let waits = match &answer.wait {
        Some(wait) => Line::from(vec![
            Span::raw(" waiting for: "),
            Span::styled(wait.clone(), Style::new().add_modifier(Modifier::BOLD)),
            Span::raw(" (its screen is above)"),
        ]),
        None => Line::raw(" not blocked on a dialog now (its screen is above)"),
    };
    let mut keys = vec![Span::raw(" ")];
    for (i, (shown, _)) in CHOICES.iter().enumerate() {
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
    frame.render_widget(Clear, area);
    frame.render_widget(Paragraph::new(vec![waits, Line::from(keys)]).block(block), area);
}
