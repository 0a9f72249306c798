//! Drawing the dashboard: the fleet table, the selected session's live preview, the fleet events
//! pane, a header and a key-hint line, laid out for the terminal's current size.
//!
//! Owns layout and styling only: it reads a [`Dash`] and the preview's screen model and writes a
//! ratatui frame; it changes nothing and reads no clock (`now_ms` is passed in). Invariants:
//! every view fits any size from 80x24 up (narrow terminals get narrower columns, never a
//! wrapped row); with colour off (`NO_COLOR`) no colour is emitted at all, and what colour said
//! is still said by words, bold or reverse video. May not depend on sockets, files or the
//! terminal device.

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row as TableRow, Table, TableState, Widget};

use super::model::{Dash, Link, Row, Urgency, age};
use crate::screen::Screen;
use desk_term::screen::{Attrs, Color as TermColor, flag};
use desk_wire::state::{Activity, Health};

/// Below this width the table uses its narrow columns (sized so 80 columns still show a title).
const WIDE: u16 = 120;

/// What to draw with.
#[derive(Debug, Clone, Copy)]
pub struct Look {
    /// False under `NO_COLOR`: no colour at all, only bold and reverse video.
    pub color: bool,
}

impl Look {
    fn fg(self, color: Color) -> Style {
        if self.color { Style::new().fg(color) } else { Style::new() }
    }
}

/// The preview pane's content: the selected session's screen model, if a viewer connection
/// feeds one, and what to say otherwise.
pub enum Preview<'a> {
    Screen { session: &'a str, screen: &'a Screen },
    Note { session: &'a str, text: &'a str },
    None,
}

/// Draw the whole dashboard.
pub fn render(frame: &mut Frame, dash: &Dash, preview: &Preview, now_ms: u64, look: Look) {
    let area = frame.area();
    let body = area.height.saturating_sub(2);
    let sessions = dash.visible().count() as u16;
    // The table takes what its rows need, up to 40% of the body; the events pane a quarter.
    let table_h = (sessions + 2).clamp(3, (body * 2 / 5).max(3));
    let events_h = (body / 4).max(3);
    let [header, table, preview_area, events, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(table_h),
        Constraint::Min(1),
        Constraint::Length(events_h),
        Constraint::Length(1),
    ])
    .areas(area);
    render_header(frame, header, dash, look);
    render_table(frame, table, dash, now_ms, look);
    if let Some(editor) = &dash.editor {
        render_editor(frame, preview_area, editor);
    } else if dash.items_focus {
        render_items(frame, preview_area, dash, look);
    } else if let Some(answer) = &dash.answer {
        // The preview stays above the panel: the dialog is what is being answered.
        let panel_h = super::answer::PANEL_HEIGHT.min(preview_area.height);
        let [screen, panel] = Layout::vertical([Constraint::Min(0), Constraint::Length(panel_h)]).areas(preview_area);
        render_preview(frame, screen, preview, look);
        super::answer::render(frame, panel, answer, look);
    } else {
        render_preview(frame, preview_area, preview, look);
    }
    render_events(frame, events, dash, look);
    render_footer(frame, footer, dash, look);
}

fn render_header(frame: &mut Frame, area: Rect, dash: &Dash, look: Look) {
    let all = dash.visible().count();
    let needing = dash.visible().filter(|r| r.urgency().needs_person()).count();
    let mut spans = vec![Span::styled(" desk dash ", Style::new().add_modifier(Modifier::BOLD))];
    spans.push(Span::raw(format!(" {all} session{} ", if all == 1 { "" } else { "s" })));
    if needing > 0 {
        spans.push(Span::styled(format!(" {needing} need you "), look.fg(Color::Red).add_modifier(Modifier::BOLD)));
    }
    if let Some(why) = &dash.daemon_down {
        spans.push(Span::styled(format!(" queues unknown: {why} "), look.fg(Color::Yellow)));
    }
    if !dash.filter.is_empty() && !dash.editing_filter {
        spans.push(Span::raw(format!(" filter: {} ", dash.filter)));
    }
    // Channels with messages the operator has not read (`desk channel read NAME` reads them),
    // and how many of those call for the operator (`@human`).
    for c in dash.channels.iter().filter(|c| c.unread > 0) {
        spans.push(Span::styled(format!(" #{} {} new", c.name, c.unread), look.fg(Color::Cyan)));
        if c.unread_human > 0 {
            spans.push(Span::styled(
                format!(" @human {}", c.unread_human),
                look.fg(Color::Red).add_modifier(Modifier::BOLD),
            ));
        }
        spans.push(Span::raw(" "));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn render_table(frame: &mut Frame, area: Rect, dash: &Dash, now_ms: u64, look: Look) {
    let wide = area.width >= WIDE;
    // CPU and memory only where there is room for them (and the title) beside the rest.
    let mut widths: Vec<Constraint> = if wide {
        [20, 9, 1, 12, 26, 20, 3, 3, 1, 3, 6, 6].map(Constraint::Length).to_vec()
    } else {
        [10, 6, 1, 12, 20, 8, 2, 2, 1, 2].map(Constraint::Length).to_vec()
    };
    widths.push(Constraint::Fill(1));
    let mut names = vec!["NAME", "PROV", "", "STATE", "ACTIVITY", "HEALTH", "Q", "ST", "P", "CL"];
    if wide {
        names.extend(["CPU", "RSS"]);
    }
    names.push("TITLE");
    let header = TableRow::new(names).style(Style::new().add_modifier(Modifier::BOLD));
    let rows: Vec<TableRow> =
        dash.visible().map(|r| table_row(r, dash.own_viewer.as_deref() == Some(&r.name), wide, now_ms, look)).collect();
    let table = Table::new(rows, widths)
        .header(header)
        .column_spacing(1)
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .highlight_symbol("> ")
        .block(Block::new().borders(Borders::TOP).title(" fleet "));
    let mut state = TableState::new().with_selected(dash.selected_index());
    frame.render_stateful_widget(table, area, &mut state);
}

/// `own_viewer`: the dashboard's own preview is one of the row's viewers (not counted).
/// `usage`: with the CPU and RSS columns.
fn table_row<'a>(row: &'a Row, own_viewer: bool, usage: bool, now_ms: u64, look: Look) -> TableRow<'a> {
    let urgency = row.urgency();
    let lamp = match &row.link {
        Link::Live if row.lifecycle == desk_wire::state::Lifecycle::Running => Span::styled("●", look.fg(Color::Green)),
        Link::Live | Link::Connecting => Span::styled("◌", look.fg(Color::Yellow)),
        Link::Unresponsive | Link::Lost => Span::styled("!", look.fg(Color::Red).add_modifier(Modifier::BOLD)),
        Link::Exited(_) if urgency == Urgency::ExitedWithError => Span::styled("✗", look.fg(Color::Red)),
        Link::Exited(_) => Span::styled("○", look.fg(Color::DarkGray)),
    };
    let exited = matches!(row.link, Link::Exited(_) | Link::Lost);
    let activity = if exited {
        Span::raw(format!("{} ago", age(now_ms, row.activity_since_ms)))
    } else {
        let mut text = row.activity.as_str().to_string();
        if let Some(wait) = &row.wait {
            text.push_str(&format!(":{wait}"));
        }
        let since = age(now_ms, row.activity_since_ms);
        if !since.is_empty() {
            text.push_str(&format!(" {since}"));
        }
        let style = match row.activity {
            Activity::Blocked => look.fg(Color::Red).add_modifier(Modifier::BOLD),
            Activity::Working => look.fg(Color::Cyan),
            Activity::Idle => Style::new(),
            Activity::Unknown => look.fg(Color::DarkGray),
        };
        Span::styled(text, style)
    };
    let health = match &row.health {
        _ if exited => Span::raw(""),
        Health::Ok => Span::raw("ok"),
        Health::Degraded(reason) => Span::styled(format!("degraded: {reason}"), look.fg(Color::Yellow)),
    };
    let (queued, stuck, paused) = match &row.queue {
        Some(q) => (
            Span::raw(if q.queued > 0 { q.queued.to_string() } else { String::new() }),
            if q.stuck > 0 {
                Span::styled(q.stuck.to_string(), look.fg(Color::Red).add_modifier(Modifier::BOLD))
            } else {
                Span::raw("")
            },
            Span::raw(if q.paused { "P" } else { "" }),
        ),
        None => (Span::raw("-"), Span::raw("-"), Span::raw("")),
    };
    let clients = row.controllers + row.viewers.saturating_sub(u32::from(own_viewer));
    let name_style = if urgency.needs_person() { Style::new().add_modifier(Modifier::BOLD) } else { Style::new() };
    let mut cells = vec![
        Cell::from(Span::styled(row.name.as_str(), name_style)),
        Cell::from(row.provider.as_str()),
        Cell::from(lamp),
        Cell::from(row.lifecycle_word()),
        Cell::from(activity),
        Cell::from(health),
        Cell::from(queued),
        Cell::from(stuck),
        Cell::from(paused),
        Cell::from(if clients > 0 { clients.to_string() } else { String::new() }),
    ];
    if usage {
        let (cpu, rss) = match row.usage {
            Some((pct, kib)) => (format!("{pct:.0}%"), mib(kib)),
            None => (String::new(), String::new()),
        };
        cells.push(Cell::from(cpu));
        cells.push(Cell::from(rss));
    }
    cells.push(Cell::from(row.title.as_str()));
    TableRow::new(cells)
}

/// Resident memory in a few characters: `850K`, `12M`, `1.5G`.
fn mib(kib: u64) -> String {
    match kib {
        0..1024 => format!("{kib}K"),
        1024..1_048_576 => format!("{}M", kib / 1024),
        _ => format!("{:.1}G", kib as f64 / 1_048_576.0),
    }
}

fn render_preview(frame: &mut Frame, area: Rect, preview: &Preview, look: Look) {
    let title = match preview {
        Preview::Screen { session, screen } => {
            let (cols, rows) = screen.size();
            match screen.title() {
                "" => format!(" {session} ({cols}x{rows}, live) "),
                title => format!(" {session}: {title} ({cols}x{rows}, live) "),
            }
        }
        Preview::Note { session, .. } => format!(" {session} "),
        Preview::None => " preview ".to_string(),
    };
    let block = Block::new().borders(Borders::TOP).title(title);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    match preview {
        Preview::Screen { screen, .. } => frame.render_widget(ScreenView { screen, look }, inner),
        Preview::Note { text, .. } => frame.render_widget(Paragraph::new(*text), inner),
        Preview::None => frame.render_widget(Paragraph::new("no session"), inner),
    }
}

/// A session's screen model drawn cell by cell from its left edge; a screen taller than the pane
/// shows the rows that end at its content ([`first_row`]).
struct ScreenView<'a> {
    screen: &'a Screen,
    look: Look,
}

impl Widget for ScreenView<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let (cols, rows) = self.screen.size();
        let first = first_row(self.screen, area.height);
        for y in 0..area.height.min(rows) {
            for x in 0..area.width.min(cols) {
                let Some(cell) = self.screen.cell(first + y, x) else { continue };
                if cell.wide_continuation {
                    continue;
                }
                let Some(target) = buf.cell_mut((area.x + x, area.y + y)) else { continue };
                target.set_symbol(if cell.text.is_empty() { " " } else { &cell.text });
                target.set_style(cell_style(&cell.attrs, self.look));
            }
        }
    }
}

/// The first screen row a pane `height` rows tall shows: the window ends at the lower of the
/// cursor's row and the last row with text. An agent that draws inline from the top of a fresh
/// screen (a dialog on rows 3-15 of 40) is seen from its top; one whose input box sits at the
/// bottom keeps it in view; the cursor is always inside.
pub(crate) fn first_row(screen: &Screen, height: u16) -> u16 {
    let (_, rows) = screen.size();
    let text = screen.text_rows();
    let last_text = text.iter().rposition(|r| !r.trim().is_empty()).unwrap_or(0);
    let end = u16::try_from(last_text).unwrap_or(u16::MAX).max(screen.cursor().0).saturating_add(1);
    end.saturating_sub(height).min(rows.saturating_sub(height))
}

fn cell_style(attrs: &Attrs, look: Look) -> Style {
    let mut style = Style::new();
    if look.color {
        style = style.fg(term_color(attrs.fg)).bg(term_color(attrs.bg));
    }
    for (bit, modifier) in [
        (flag::BOLD, Modifier::BOLD),
        (flag::DIM, Modifier::DIM),
        (flag::ITALIC, Modifier::ITALIC),
        (flag::UNDERLINE, Modifier::UNDERLINED),
        (flag::INVERSE, Modifier::REVERSED),
        (flag::STRIKE, Modifier::CROSSED_OUT),
    ] {
        if attrs.has(bit) {
            style = style.add_modifier(modifier);
        }
    }
    style
}

fn term_color(color: TermColor) -> Color {
    match color {
        TermColor::Default => Color::Reset,
        TermColor::Indexed(n) => Color::Indexed(n),
        TermColor::Rgb(r, g, b) => Color::Rgb(r, g, b),
    }
}

fn render_editor(frame: &mut Frame, area: Rect, editor: &super::model::Editor) {
    let block = Block::new()
        .borders(Borders::TOP)
        .title(format!(" prompt for {} (Enter: new line, Alt-Enter: send, Esc: discard) ", editor.session));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let mut lines: Vec<Line> = editor.text.split('\n').map(|l| Line::raw(l.to_string())).collect();
    if let Some(last) = lines.last_mut() {
        last.push_span(Span::styled("_", Style::new().add_modifier(Modifier::REVERSED)));
    }
    // The newest lines stay in view.
    let skip = lines.len().saturating_sub(inner.height as usize);
    frame.render_widget(Paragraph::new(lines.split_off(skip)), inner);
}

fn render_items(frame: &mut Frame, area: Rect, dash: &Dash, look: Look) {
    let session = dash.selected().unwrap_or("");
    let block =
        Block::new().borders(Borders::TOP).title(format!(" {session}: items (J/K select, f force, d drop, i back) "));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let items = dash.selected_items();
    if items.is_empty() {
        let text =
            if dash.daemon_down.is_some() { "desk serve is not running: no items known" } else { "no items waiting" };
        frame.render_widget(Paragraph::new(text), inner);
        return;
    }
    let mut lines = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let mark = if i == dash.item_index { "> " } else { "  " };
        let state = match &item.class {
            Some(class) => format!("{} ({class})", item.state),
            None => item.state.clone(),
        };
        let state_style =
            if item.state == "stuck" { look.fg(Color::Red).add_modifier(Modifier::BOLD) } else { Style::new() };
        let mut line = Line::from(vec![
            Span::raw(mark),
            Span::styled(format!("{} ", item.id), Style::new().add_modifier(Modifier::BOLD)),
            Span::styled(format!("{state:<24} "), state_style),
            Span::raw(item.preview.as_str()),
        ]);
        if i == dash.item_index {
            line = line.style(Style::new().add_modifier(Modifier::REVERSED));
        }
        lines.push(line);
        if !item.why.is_empty() {
            lines.push(Line::from(Span::styled(format!("      {}", item.why), look.fg(Color::DarkGray))));
        }
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

fn render_events(frame: &mut Frame, area: Rect, dash: &Dash, look: Look) {
    let block = Block::new().borders(Borders::TOP).title(" events (newest first) ");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let lines: Vec<Line> = dash
        .log_lines()
        .take(inner.height as usize)
        .map(|l| {
            let time = desk_core::time::iso8601(l.at_ms);
            let style = if l.alert { look.fg(Color::Red).add_modifier(Modifier::BOLD) } else { Style::new() };
            Line::from(vec![
                Span::styled(format!("{} ", time.get(11..19).unwrap_or("")), look.fg(Color::DarkGray)),
                Span::styled(format!("{:<10} ", l.session), Style::new().add_modifier(Modifier::BOLD)),
                Span::styled(l.text.as_str(), style),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}

fn render_footer(frame: &mut Frame, area: Rect, dash: &Dash, look: Look) {
    let line = if let Some(confirm) = &dash.confirm {
        Line::from(Span::styled(format!(" {}", confirm.question), look.fg(Color::Yellow).add_modifier(Modifier::BOLD)))
    } else if let Some(status) = &dash.status {
        Line::from(Span::styled(format!(" {status}"), Style::new().add_modifier(Modifier::BOLD)))
    } else if dash.editing_filter {
        Line::from(vec![
            Span::styled(" filter: ", Style::new().add_modifier(Modifier::BOLD)),
            Span::raw(format!("{}_", dash.filter)),
            Span::styled("  Enter keeps it, Esc clears it", look.fg(Color::DarkGray)),
        ])
    } else {
        let long =
            " j/k select  n next needing you  Enter attach  i items  f force  d drop  p pause/resume  / filter  q quit";
        let hint = if usize::from(area.width) > long.len() {
            long
        } else {
            " j/k n:next Enter:attach s:send i:items f:force d:drop p:pause /:filter q:quit"
        };
        Line::from(Span::styled(hint, look.fg(Color::DarkGray)))
    };
    frame.render_widget(Paragraph::new(line), area);
}
