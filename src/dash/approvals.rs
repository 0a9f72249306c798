//! The dashboard's approvals view (`A`): one card per open dialog in the fleet, answered from
//! the keyboard — only the dialog on the card.
//!
//! Owns the view's state (the cards as last read by `crate::inbox::list`, which one is
//! selected, the answer on its way), what a key does in it, and drawing the cards where the
//! preview was. A card shows who asks, what (the command or tool), its question, its options on
//! their digit keys and how long it has waited. Choosing an option hands the loop the session,
//! the option and the fingerprint of the dialog drawn on that card; the loop answers through
//! `crate::inbox::answer` (journalled `via` `dash`), and the master types nothing unless its
//! screen still shows that dialog. Invariants: nothing is sent but on a digit, `y` (the
//! provider's approve option) or `x` (deny) with a card selected; the card a key answers is
//! the one drawn when it was pressed (a refresh that changes the cards keeps the selection on
//! the same session); no I/O and no clock.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use super::key::Key;
use super::look::Look;
use crate::inbox::Open;

/// The open view.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Approvals {
    /// The open dialogs, the one waiting longest first (`None`: not read yet).
    pub cards: Option<Vec<Open>>,
    /// Blocked sessions whose screen shows no dialog desk can read.
    pub unread: Vec<String>,
    /// The selected card's session.
    pub selected: Option<String>,
    /// An answer on its way: the session.
    pub sending: Option<String>,
}

/// What a key in the view comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Stay,
    Close,
    /// Answer `session`'s dialog — the one with fingerprint `seen` — with `option` (`None`:
    /// refuse it).
    Answer {
        session: String,
        option: Option<u8>,
        seen: String,
        said: String,
    },
}

impl Approvals {
    /// The cards as read now; the selection stays on its session while it has a card.
    pub fn refresh(&mut self, cards: Vec<Open>, unread: Vec<String>) {
        let keep = self.selected.as_ref().is_some_and(|s| cards.iter().any(|c| &c.session == s));
        if !keep {
            self.selected = cards.first().map(|c| c.session.clone());
        }
        self.cards = Some(cards);
        self.unread = unread;
    }

    fn index(&self) -> Option<usize> {
        let cards = self.cards.as_ref()?;
        cards.iter().position(|c| Some(&c.session) == self.selected.as_ref())
    }

    fn card(&self) -> Option<&Open> {
        self.cards.as_ref()?.get(self.index()?)
    }

    /// React to a key: j/k or the arrows move between cards, a digit answers with that option,
    /// `y` with the approve option (`approve`, the provider's), `x` refuses, Esc or `A` closes.
    pub fn on_key(&mut self, key: Key, approve: impl Fn(&str) -> u8) -> Outcome {
        let n = self.cards.as_ref().map_or(0, Vec::len);
        let at = self.index();
        match key {
            Key::Esc | Key::Char('q') | Key::Char('A') => return Outcome::Close,
            Key::Down | Key::Char('j') if n > 0 => {
                let i = at.map_or(0, |i| (i + 1) % n);
                self.selected = self.cards.as_ref().and_then(|c| c.get(i)).map(|c| c.session.clone());
            }
            Key::Up | Key::Char('k') if n > 0 => {
                let i = at.map_or(0, |i| (i + n - 1) % n);
                self.selected = self.cards.as_ref().and_then(|c| c.get(i)).map(|c| c.session.clone());
            }
            Key::Char(c @ '1'..='9') => return self.answer(Some(c as u8 - b'0')),
            Key::Char('y') => {
                let option = self.card().map(|c| approve(&c.provider));
                return self.answer(option);
            }
            Key::Char('x') => return self.answer(None),
            _ => {}
        }
        Outcome::Stay
    }

    fn answer(&mut self, option: Option<u8>) -> Outcome {
        let Some(card) = self.card() else { return Outcome::Stay };
        let said = match option {
            None => "deny".to_string(),
            Some(n) => match card.dialog.options.iter().find(|o| o.number == n) {
                Some(o) => format!("{n}. {}", o.label),
                None => return Outcome::Stay,
            },
        };
        let outcome =
            Outcome::Answer { session: card.session.clone(), option, seen: card.dialog.fingerprint.clone(), said };
        self.sending = Some(card.session.clone());
        outcome
    }
}

/// A dialog's rows above its options: what it says and asks.
fn body(d: &desk_core::dialog::Dialog) -> &[String] {
    let first = d.options.first().map(|o| o.label.as_str()).unwrap_or("");
    let end = d.text.iter().position(|row| !first.is_empty() && row.contains(first)).unwrap_or(d.text.len());
    &d.text[..end]
}

/// Draw the view in `area` (where the preview was).
pub fn render(frame: &mut Frame, area: Rect, view: &Approvals, now_ms: u64, look: Look) {
    let title = " approvals (j/k: card, 1-9: pick that option, y: approve, x: deny, Esc: close) ";
    let block = Block::default().borders(Borders::TOP).title(title);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let Some(cards) = &view.cards else {
        frame.render_widget(Paragraph::new(" reading the fleet's dialogs…"), inner);
        return;
    };
    let mut lines: Vec<Line> = Vec::new();
    if cards.is_empty() {
        lines.push(Line::raw(" no open dialogs: nobody waits for an answer"));
    }
    // Each dialog's own text (what is being approved) when every card fits with it; else each
    // card in three lines: who asks what, its question, its options.
    let full: usize = cards.iter().map(|c| body(&c.dialog).len() + 4).sum();
    let compact = full > usize::from(inner.height);
    let mut starts = Vec::new();
    for card in cards {
        starts.push(lines.len());
        let selected = view.selected.as_ref() == Some(&card.session);
        let d = &card.dialog;
        let age = if card.since_ms == 0 {
            String::new()
        } else {
            format!(" · {}", desk_core::time::span(now_ms.saturating_sub(card.since_ms)))
        };
        let mark = if selected { "▶" } else { " " };
        let head =
            Style::new().add_modifier(if selected { Modifier::BOLD | Modifier::REVERSED } else { Modifier::BOLD });
        let mut head_spans = vec![
            Span::styled(format!("{mark} {} ", card.session), head),
            Span::raw(format!(" {} · {}{age} · ", card.provider, d.kind.as_str())),
            Span::styled(d.asks(), look.fg(Color::Yellow).add_modifier(Modifier::BOLD)),
        ];
        if view.sending.as_ref() == Some(&card.session) {
            head_spans.push(Span::raw("  (answering…)"));
        }
        lines.push(Line::from(head_spans));
        if compact {
            if d.question != d.asks() {
                lines.push(Line::raw(format!("   {}", d.question)));
            }
        } else {
            for row in body(d) {
                lines.push(Line::styled(format!("   │ {row}"), look.fg(Color::DarkGray)));
            }
        }
        let mut keys = vec![Span::raw("   ")];
        for o in &d.options {
            let on = o.highlighted == Some(true);
            keys.push(Span::styled(format!("[{}]", o.number), bold));
            keys.push(Span::raw(format!(" {}{}   ", o.label, if on { " ◂" } else { "" })));
        }
        keys.push(Span::styled("[x]", bold));
        keys.push(Span::raw(" deny"));
        lines.push(Line::from(keys));
        if !compact {
            lines.push(Line::styled(format!("   fingerprint {}", d.fingerprint), look.fg(Color::DarkGray)));
            lines.push(Line::raw(""));
        }
    }
    for s in &view.unread {
        lines.push(Line::raw(format!(
            " {s} is blocked, but its screen shows no dialog desk can read (Enter on its row attaches)"
        )));
    }
    // Keep the selected card in view.
    let at = cards.iter().position(|c| view.selected.as_ref() == Some(&c.session)).unwrap_or(0);
    let start = starts.get(at).copied().unwrap_or(0);
    let scroll = if start + 4 > usize::from(inner.height) { start } else { 0 };
    let para = Paragraph::new(lines).wrap(Wrap { trim: false }).scroll((u16::try_from(scroll).unwrap_or(0), 0));
    frame.render_widget(para, inner);
}
