//! The dashboard's channel pane (`c`): read a channel — its root conversation or one thread —
//! with the operator's unread mark and the mentions of `@human` picked out, and post to it as
//! the operator.
//!
//! Owns the pane's state (which channel, root or thread, which message is selected, the post
//! being written), what a key does in it, reading a channel's messages for it ([`load`]: the
//! channel store's own reader, and the operator's read marker, `seen.json`, moved to the newest
//! message when the root view is shown outside every session, as `desk channel read` does) and
//! drawing it where the preview was: the channels on the left (unread and `@human` counts), the
//! messages on the right, a `── new ──` line above the first one the operator had not read.
//! Invariants: a post goes through the channel store as the operator (`human`) — from a
//! dashboard running inside a session it is refused, as `desk channel post` would not post as
//! the operator there; the read marker only ever moves forward and only for the root view;
//! nothing but [`load`] and the loop's post touch the disk.

use std::collections::HashMap;

use anyhow::Result;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use super::key::Key;
use super::look::Look;
use desk_common::paths::Paths;
use desk_core::channel::{ChannelName, Kind, Message, OPERATOR};
use desk_core::delivery::item::ItemId;
use desk_daemon::channel::summary::Summary;

/// What the pane shows of one channel.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChannelView {
    pub channel: String,
    pub goal: String,
    pub members: Vec<String>,
    /// The thread shown (its root message's id), or the root conversation.
    pub thread: Option<ItemId>,
    pub messages: Vec<Message>,
    /// Replies per root message (the root view only).
    pub replies: HashMap<ItemId, usize>,
    /// The operator's read marker before this view was read: messages after it are new.
    pub seen_before: Option<ItemId>,
    /// Records the reader could not take (a torn tail, damage), for people.
    pub problems: Vec<String>,
}

/// Read `channel` (its root conversation, or `thread`) for the pane; the root view moves the
/// operator's read marker when the dashboard runs outside every session.
pub fn load(paths: &Paths, channel: &str, thread: Option<&ItemId>) -> Result<ChannelView> {
    let store = desk_daemon::channel::store::ChannelStore::at(paths);
    let name = ChannelName::parse(channel)?;
    let roster = store.roster(&name)?.ok_or_else(|| anyhow::anyhow!("no channel named #{channel}"))?;
    let (messages, problems) = store.read(&name, thread)?;
    let replies: HashMap<ItemId, usize> = if thread.is_none() {
        store.thread_counts(&name)?.into_iter().map(|(id, n, _)| (id, n)).collect()
    } else {
        HashMap::new()
    };
    let seen_before = desk_daemon::channel::summary::seen_by_operator(&store, &name)?;
    let outside = desk_common::session::enclosing(paths).is_ok_and(|s| s.is_empty());
    if thread.is_none()
        && outside
        && let Some(newest) = desk_daemon::channel::summary::newest(&store, &name)?
    {
        desk_daemon::channel::summary::mark_seen_by_operator(&store, &name, &newest)?;
    }
    Ok(ChannelView {
        channel: channel.to_string(),
        goal: roster.goal,
        members: roster.members.iter().map(|m| format!("{} ({})", m.name, m.role.as_str())).collect(),
        thread: thread.cloned(),
        messages,
        replies,
        seen_before,
        problems,
    })
}

/// Post `text` to `channel` (in `thread`) as the operator. Refused from inside a session (the
/// author would be that session, not the operator).
pub fn post(paths: &Paths, channel: &str, thread: Option<&ItemId>, text: &str) -> Result<String> {
    let inside = desk_common::session::enclosing(paths)?;
    if let Some(s) = inside.first() {
        anyhow::bail!(
            "this dashboard runs inside session {s}: a post from it would be {s}'s, not the operator's; post from a shell outside sessions (desk channel post)"
        );
    }
    let store = desk_daemon::channel::store::ChannelStore::at(paths);
    let name = ChannelName::parse(channel)?;
    let body = desk_core::delivery::text::sanitize(text);
    let draft = desk_daemon::channel::store::Draft { author: OPERATOR.to_string(), thread: thread.cloned(), body };
    let msg = store.post(&name, draft, desk_common::clock::now_ms()).map_err(|e| anyhow::anyhow!("{e:#}"))?;
    Ok(msg.id.to_string())
}

/// The open pane.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChannelPane {
    /// The channel shown (by name).
    pub channel: Option<String>,
    pub view: Option<ChannelView>,
    /// The selected message, an index into the view's messages.
    pub at: usize,
    /// The post being written (to the channel, or to the thread shown).
    pub draft: Option<String>,
}

/// What a key in the pane comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Stay,
    Close,
    /// Read this channel (this thread of it) into the pane.
    Load {
        channel: String,
        thread: Option<ItemId>,
    },
    /// Post this text to the channel (in the thread) as the operator.
    Post {
        channel: String,
        thread: Option<ItemId>,
        text: String,
    },
}

impl ChannelPane {
    /// A pane on the first of `channels` that mentions `@human` unread, else the first with
    /// unread messages, else the first.
    pub fn open(channels: &[Summary]) -> (ChannelPane, Outcome) {
        let first = channels
            .iter()
            .find(|c| c.unread_human > 0)
            .or_else(|| channels.iter().find(|c| c.unread > 0))
            .or(channels.first());
        let pane = ChannelPane { channel: first.map(|c| c.name.clone()), ..ChannelPane::default() };
        let outcome = match &pane.channel {
            Some(c) => Outcome::Load { channel: c.clone(), thread: None },
            None => Outcome::Stay,
        };
        (pane, outcome)
    }

    /// The view read for it; the selection goes to the newest message.
    pub fn loaded(&mut self, view: ChannelView) {
        if self.channel.as_deref() != Some(view.channel.as_str()) {
            return;
        }
        self.at = view.messages.len().saturating_sub(1);
        self.view = Some(view);
    }

    /// React to a key (see the pane's title for the list).
    pub fn on_key(&mut self, key: Key, channels: &[Summary]) -> Outcome {
        let Some(channel) = self.channel.clone() else {
            return if matches!(key, Key::Esc | Key::Char('c') | Key::Char('q')) {
                Outcome::Close
            } else {
                Outcome::Stay
            };
        };
        let thread = self.view.as_ref().and_then(|v| v.thread.clone());
        if let Some(draft) = self.draft.as_mut() {
            match key {
                Key::Char(c) => draft.push(c),
                Key::Enter => draft.push('\n'),
                Key::Backspace => {
                    draft.pop();
                }
                Key::Esc => self.draft = None,
                Key::SendEnter if draft.trim().is_empty() => {}
                Key::SendEnter => {
                    let text = self.draft.take().unwrap_or_default();
                    return Outcome::Post { channel, thread, text };
                }
                _ => {}
            }
            return Outcome::Stay;
        }
        let n = self.view.as_ref().map_or(0, |v| v.messages.len());
        match key {
            Key::Esc if thread.is_some() => return Outcome::Load { channel, thread: None },
            Key::Esc | Key::Char('c') | Key::Char('q') => return Outcome::Close,
            Key::Char(']') | Key::Char('l') => return self.step(channels, 1),
            Key::Char('[') | Key::Char('h') => return self.step(channels, channels.len().saturating_sub(1)),
            Key::Down | Key::Char('j') => self.at = (self.at + 1).min(n.saturating_sub(1)),
            Key::Up | Key::Char('k') => self.at = self.at.saturating_sub(1),
            Key::Char('G') | Key::End => self.at = n.saturating_sub(1),
            Key::Char('g') | Key::Home => self.at = 0,
            Key::Enter if thread.is_none() => {
                let root = self.view.as_ref().and_then(|v| v.messages.get(self.at)).map(|m| m.id.clone());
                if let Some(root) = root {
                    return Outcome::Load { channel, thread: Some(root) };
                }
            }
            Key::Char('p') => self.draft = Some(String::new()),
            Key::Char('r') if thread.is_none() => {
                // A reply goes into the selected message's thread: open it, then write.
                let root = self.view.as_ref().and_then(|v| v.messages.get(self.at)).map(|m| m.id.clone());
                if let Some(root) = root {
                    self.draft = Some(String::new());
                    return Outcome::Load { channel, thread: Some(root) };
                }
            }
            _ => {}
        }
        Outcome::Stay
    }

    /// The channel `by` places after the one shown (wrapping).
    fn step(&mut self, channels: &[Summary], by: usize) -> Outcome {
        if channels.is_empty() {
            return Outcome::Stay;
        }
        let at = channels.iter().position(|c| Some(&c.name) == self.channel.as_ref()).unwrap_or(0);
        let next = channels[(at + by) % channels.len()].name.clone();
        self.channel = Some(next.clone());
        self.view = None;
        self.at = 0;
        Outcome::Load { channel: next, thread: None }
    }
}

/// Draw the pane in `area` (where the preview was): channels left, messages right.
pub fn render(frame: &mut Frame, area: Rect, pane: &ChannelPane, channels: &[Summary], look: Look) {
    let title = if pane.draft.is_some() {
        " channel: writing as human (Enter: new line, Alt-Enter: post, Esc: drop) "
    } else if pane.view.as_ref().is_some_and(|v| v.thread.is_some()) {
        " channel thread (j/k: message, p: post in the thread, Esc: back to the channel) "
    } else {
        " channels ([ ]: channel, j/k: message, Enter: its thread, p: post, r: reply, Esc: close) "
    };
    let block = Block::default().borders(Borders::TOP).title(title);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if channels.is_empty() {
        frame.render_widget(Paragraph::new(" no channels yet: desk channel new NAME --goal '...'"), inner);
        return;
    }
    let list_w = (channels.iter().map(|c| c.name.chars().count()).max().unwrap_or(4) as u16 + 14).min(inner.width / 3);
    let [list, body] = Layout::horizontal([Constraint::Length(list_w), Constraint::Min(10)]).areas(inner);
    render_list(frame, list, pane, channels, look);
    let [messages, draft] = if let Some(d) = &pane.draft {
        let lines = (d.lines().count().max(1) + usize::from(d.ends_with('\n')) + 1) as u16;
        Layout::vertical([Constraint::Min(1), Constraint::Length(lines.min(body.height / 2).max(2))]).areas(body)
    } else {
        [body, Rect::default()]
    };
    render_messages(frame, messages, pane, look);
    if let Some(d) = &pane.draft {
        let block = Block::default().borders(Borders::TOP).title(" your post ");
        let inner = block.inner(draft);
        frame.render_widget(block, draft);
        frame.render_widget(Paragraph::new(format!("{d}_")).wrap(Wrap { trim: false }), inner);
    }
}

fn render_list(frame: &mut Frame, area: Rect, pane: &ChannelPane, channels: &[Summary], look: Look) {
    let lines: Vec<Line> = channels
        .iter()
        .map(|c| {
            let on = pane.channel.as_ref() == Some(&c.name);
            let style = if on { Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD) } else { Style::new() };
            let mut spans = vec![Span::styled(format!("{}#{}", if on { "▶" } else { " " }, c.name), style)];
            if c.unread > 0 {
                spans.push(Span::styled(format!(" {} new", c.unread), look.fg(Color::Cyan)));
            }
            if c.unread_human > 0 {
                spans.push(Span::styled(
                    format!(" @{}", c.unread_human),
                    look.fg(Color::Red).add_modifier(Modifier::BOLD),
                ));
            }
            Line::from(spans)
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), area);
}

fn render_messages(frame: &mut Frame, area: Rect, pane: &ChannelPane, look: Look) {
    let Some(view) = &pane.view else {
        frame.render_widget(Paragraph::new(" reading…"), area);
        return;
    };
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let mut lines: Vec<Line> = Vec::new();
    let head = match &view.thread {
        Some(t) => format!(" #{} · thread {t}", view.channel),
        None if view.goal.is_empty() => format!(" #{} · {}", view.channel, view.members.join(", ")),
        None => format!(" #{} · {} · {}", view.channel, view.goal, view.members.join(", ")),
    };
    lines.push(Line::styled(head, look.fg(Color::DarkGray)));
    for p in &view.problems {
        lines.push(Line::styled(format!(" ! {p}"), look.fg(Color::Yellow)));
    }
    let mut marked = false;
    // Where the selected message starts, to keep it in view.
    let mut selected_line = 0;
    for (i, m) in view.messages.iter().enumerate() {
        let new = view.seen_before.as_ref().is_none_or(|seen| &m.id > seen) && m.author != OPERATOR;
        if new && !marked && view.thread.is_none() {
            lines.push(Line::styled("  ── new ──", look.fg(Color::Cyan).add_modifier(Modifier::BOLD)));
            marked = true;
        }
        if i == pane.at {
            selected_line = lines.len();
        }
        let mark = if i == pane.at { "▶" } else { " " };
        let time = desk_core::time::iso8601(m.ts_ms);
        let mentions = desk_core::channel::mention::mentions(&m.body);
        let to_human = mentions.iter().any(|n| n == OPERATOR);
        let what = match m.kind {
            Kind::Post => String::new(),
            Kind::Joined => " joined".to_string(),
            Kind::Checkin => " (check-in)".to_string(),
        };
        // The id (to reply with `desk channel post --thread`) where there is room for it.
        let id = if area.width >= 100 { format!(" · {}", m.id) } else { String::new() };
        let mut head = vec![
            Span::raw(format!("{mark} ")),
            Span::styled(m.author.clone(), bold),
            Span::styled(format!("{what} · {}{id}", time.get(11..16).unwrap_or("")), look.fg(Color::DarkGray)),
        ];
        if to_human {
            head.push(Span::styled(" @human", look.fg(Color::Red).add_modifier(Modifier::BOLD)));
        }
        lines.push(Line::from(head));
        for row in m.body.lines() {
            let style = if to_human && row.contains("@human") { bold } else { Style::new() };
            lines.push(Line::styled(format!("   {row}"), style));
        }
        if let Some(n) = view.replies.get(&m.id).filter(|n| **n > 0) {
            lines.push(Line::styled(
                format!("   ↳ {n} repl{}", if *n == 1 { "y" } else { "ies" }),
                look.fg(Color::DarkGray),
            ));
        }
    }
    if view.messages.is_empty() {
        lines.push(Line::raw(" no messages yet (p: write the first)"));
    }
    let height = usize::from(area.height);
    let total = lines.len();
    // Show the selected message, as far down as it goes: the newest messages stay in view.
    let scroll = if total <= height { 0 } else { (selected_line + 4).saturating_sub(height).min(total - height) };
    let para = Paragraph::new(lines).scroll((u16::try_from(scroll).unwrap_or(0), 0));
    frame.render_widget(para, area);
}
