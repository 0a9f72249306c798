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

use super::look::Look;
use super::model::{Dash, Grouping, Link, Row, Urgency, age};
use desk_term::screen::Screen;
use desk_term::screen::{Attrs, Color as TermColor, HistoryRow, flag};
use desk_wire::state::{Activity, Health};

/// Below this width the table uses its narrow columns (sized so 80 columns still show a title).
const WIDE: u16 = 120;

/// From this width the narrow columns have room for CPU and RSS too (10 columns with their
/// gaps) and still leave the title a dozen; below it, 80-99 columns show the title instead.
const USAGE_NARROW: u16 = 100;

/// The preview keeps at least this many lines when the table grows to show every session that
/// needs a person: a title line and two of the screen, enough to see that it is there.
const PREVIEW_MIN: u16 = 3;

/// The preview pane's content: the selected session's screen model, if a viewer connection
/// feeds one, and what to say otherwise.
pub enum Preview<'a> {
    /// `older`: the session's history from before `screen` began keeping its own (the master's
    /// answer to the preview's SNAPSHOT_REQUEST, or an exit record's history), oldest first;
    /// above `screen`'s history lines. `live`: fed by a viewer connection, not an exit record.
    Screen {
        session: &'a str,
        screen: &'a Screen,
        older: &'a [HistoryRow],
        live: bool,
    },
    Note {
        session: &'a str,
        text: &'a str,
    },
    None,
}

/// The screen's five bands: header, table, preview (or items, or editor), events, footer.
fn layout(area: Rect, dash: &Dash) -> [Rect; 5] {
    let body = area.height.saturating_sub(2);
    let heads = group_headers(dash);
    let lines = dash.visible().count() + heads.len();
    let events_h = (body / 4).max(3);
    // The table takes what its rows need, up to 40% of the body — or more, to show every
    // session that needs a person (and the line saying what is left below it), as long as the
    // preview keeps PREVIEW_MIN lines; the events pane a quarter.
    let last_needing =
        dash.visible().enumerate().filter(|(_, r)| r.urgency().needs_person()).map(|(i, _)| line_of(&heads, i)).last();
    let needed = last_needing.map_or(0, |l| l + 1 + usize::from(l + 1 < lines));
    let most = body.saturating_sub(events_h + PREVIEW_MIN);
    let cap = (body * 2 / 5).max(clamp_u16(needed + 2).min(most)).max(3);
    let table_h = clamp_u16(lines + 2).clamp(3, cap);
    Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(table_h),
        Constraint::Min(1),
        Constraint::Length(events_h),
        Constraint::Length(1),
    ])
    .areas(area)
}

/// How many lines of a session's screen the preview pane shows on a terminal of `size`: the
/// loop's page for scrolling.
pub fn preview_height(size: Rect, dash: &Dash) -> usize {
    let [_, _, preview, _, _] = layout(size, dash);
    usize::from(preview.height.saturating_sub(1))
}

/// How far back the preview can scroll with `older` lines from the master, `screen`'s own
/// history and a pane `height` lines tall: until the oldest line is at the pane's top.
pub fn preview_back_max(older: usize, screen: &Screen, height: usize) -> usize {
    live_end(older, screen, height).saturating_sub(height.max(1))
}

/// Where the live preview ends in the column `older` ++ the model's history ++ the screen: after
/// the screen rows a pane `height` lines tall shows live ([`first_row`]), so scrolling back one
/// line moves the live picture by one line.
fn live_end(older: usize, screen: &Screen, height: usize) -> usize {
    let pane = u16::try_from(height).unwrap_or(u16::MAX);
    let shown = pane.min(screen.size().1);
    older + screen.history_len() + usize::from(first_row(screen, pane) + shown)
}

/// Draw the whole dashboard.
pub fn render(frame: &mut Frame, dash: &Dash, preview: &Preview, now_ms: u64, look: Look) {
    let [header, table, preview_area, events, footer] = layout(frame.area(), dash);
    render_header(frame, header, dash, look);
    if dash.help {
        // Over everything between the header and the footer: every key fits at 80x24.
        render_help(frame, table.union(preview_area).union(events));
        render_footer(frame, footer, dash, look);
        return;
    }
    render_table(frame, table, dash, now_ms, look);
    if let Some(view) = &dash.approvals {
        super::approvals::render(frame, preview_area, view, now_ms, look);
    } else if let Some(pane) = &dash.channel_pane {
        super::channels::render(frame, preview_area, pane, &dash.channels, look);
    } else if let Some(editor) = &dash.editor {
        render_editor(frame, preview_area, editor);
    } else if dash.items_focus {
        render_items(frame, preview_area, dash, look);
    } else if let Some(answer) = &dash.answer {
        // The preview stays above the panel: the dialog is what is being answered.
        let panel_h = super::answer::panel_height(answer).min(preview_area.height);
        let [screen, panel] = Layout::vertical([Constraint::Min(0), Constraint::Length(panel_h)]).areas(preview_area);
        render_preview(frame, screen, preview, dash.preview_scroll, look);
        super::answer::render(frame, panel, answer, look);
    } else if matches!(preview, Preview::None) {
        render_empty(frame, preview_area, dash);
    } else {
        render_preview(frame, preview_area, preview, dash.preview_scroll, look);
    }
    render_events(frame, events, dash, look);
    render_footer(frame, footer, dash, look);
}

fn render_header(frame: &mut Frame, area: Rect, dash: &Dash, look: Look) {
    let all = dash.visible().count();
    // Sessions that need a person, and channels whose unread messages call for one (@human).
    let needing = dash.visible().filter(|r| r.urgency().needs_person()).count()
        + dash.channels.iter().filter(|c| c.unread_human > 0).count();
    let mut spans = vec![Span::styled(" desk dash ", Style::new().add_modifier(Modifier::BOLD))];
    spans.push(Span::raw(format!(" {all} session{} ", if all == 1 { "" } else { "s" })));
    if needing > 0 {
        spans.push(Span::styled(format!(" {needing} need you "), look.fg(Color::Red).add_modifier(Modifier::BOLD)));
    }
    if let Some(why) = &dash.daemon_down {
        spans.push(Span::styled(format!(" {why} "), look.fg(Color::Yellow)));
    }
    // Each host's reachability: its name when its last listing came back, else why not.
    for (host, down) in &dash.hosts {
        match down {
            None => spans.push(Span::styled(format!(" {host} "), look.fg(Color::Green))),
            Some(why) => spans.push(Span::styled(
                format!(" {host} unreachable: {} ", why.replace('\n', " ")),
                look.fg(Color::Red).add_modifier(Modifier::BOLD),
            )),
        }
    }
    if !dash.filter.is_empty() && !dash.editing_filter {
        spans.push(Span::raw(format!(" filter: {} ", dash.filter)));
    }
    // Channels whose messages stopped reaching their members (`desk channel ls` says why).
    for c in dash.channels.iter().filter(|c| c.stalled.is_some()) {
        spans.push(Span::styled(format!(" #{} stalled ", c.name), look.fg(Color::Red).add_modifier(Modifier::BOLD)));
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
    let usage = area.width >= USAGE_NARROW;
    let mut widths: Vec<Constraint> = if wide {
        [20, 9, 1, 15, 22, 18, 3, 3, 1, 7, 6, 6].map(Constraint::Length).to_vec()
    } else if usage {
        [10, 6, 1, 12, 21, 8, 2, 2, 1, 2, 4, 5].map(Constraint::Length).to_vec()
    } else {
        [10, 6, 1, 12, 21, 8, 2, 2, 1, 2].map(Constraint::Length).to_vec()
    };
    widths.push(Constraint::Fill(1));
    let mut names = vec!["NAME", "PROV", "", "STATE", "ACTIVITY", "HEALTH", "Q", "ST", "P", "CL"];
    if usage {
        names.extend(["CPU", "RSS"]);
    }
    names.push("TITLE");
    let header = TableRow::new(names).style(Style::new().add_modifier(Modifier::BOLD));
    let heads = group_headers(dash);
    // The table's lines: each visible row, and a group's header line before its first row.
    let selected_index = dash.selected_index();
    let selected_line = selected_index.map(|i| line_of(&heads, i));
    let lines = dash.visible().count() + heads.len();
    // When not every line fits, the last one says what is left out (and who of it needs you).
    let overflow = lines > usize::from(area.height.saturating_sub(2));
    let (area, marker_y) = if overflow && area.height > 3 {
        (Rect { height: area.height - 1, ..area }, Some(area.y + area.height - 1))
    } else {
        (area, None)
    };
    // Only the lines that can be on screen are built (a fleet of hundreds would otherwise cost
    // a formatted row each per frame): the table shows the selection at its bottom at most, so
    // a screenful above it and one below cover every offset it can pick.
    let shown = usize::from(area.height.saturating_sub(2)).max(1);
    let lo = selected_line.map_or(0, |l| l.saturating_sub(shown));
    let hi = lo + 2 * shown;
    let mut rows: Vec<TableRow> = Vec::new();
    // Group headers span the columns: an empty row holds each one's place, and its text is
    // drawn over the table once the table has scrolled to the selection.
    let mut head_lines: Vec<(usize, String)> = Vec::new();
    let mut line = 0;
    for (i, r) in dash.visible().enumerate() {
        if line >= hi {
            break;
        }
        if let Some((_, label, count, needing)) = heads.iter().find(|h| h.0 == i) {
            if line >= lo {
                let mut text = format!("── {label} ({count}");
                if *needing > 0 {
                    text.push_str(&format!(", {needing} need you"));
                }
                text.push_str(") ──");
                head_lines.push((rows.len(), text));
                rows.push(TableRow::new([Cell::from("")]));
            }
            line += 1;
        }
        if line >= lo && line < hi {
            rows.push(table_row(r, usage, now_ms, look));
        }
        line += 1;
    }
    let selected = selected_line.map(|l| l - lo);
    let table = Table::new(rows, widths)
        .header(header)
        .column_spacing(1)
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .highlight_symbol("> ")
        .block(Block::new().borders(Borders::TOP).title(" fleet "));
    let mut state = TableState::new().with_selected(selected);
    frame.render_stateful_widget(table, area, &mut state);
    // Below the block's top line and the column names; past the highlight symbol's column.
    let (first_y, x) = (area.y + 2, area.x + 2);
    let shown = usize::from(area.height.saturating_sub(2));
    let style = look.fg(Color::Blue).add_modifier(Modifier::BOLD);
    for (index, text) in head_lines {
        if let Some(line) = index.checked_sub(state.offset()).filter(|l| *l < shown) {
            frame.buffer_mut().set_stringn(
                x,
                first_y + line as u16,
                text,
                usize::from(area.width.saturating_sub(2)),
                style,
            );
        }
    }
    if let Some(y) = marker_y {
        let first = lo + state.offset();
        let text = left_out(dash, &heads, first..first + shown);
        let needing = text.contains("need");
        let style = if needing { look.fg(Color::Red).add_modifier(Modifier::BOLD) } else { Style::new() };
        frame.buffer_mut().set_stringn(x, y, text, usize::from(area.width.saturating_sub(2)), style);
    }
}

/// The table line of the visible row at `index`: the rows before it and the group headers up to
/// its own.
fn line_of(heads: &[(usize, String, usize, usize)], index: usize) -> usize {
    index + heads.iter().take_while(|h| h.0 <= index).count()
}

/// What the table leaves out when only the lines in `shown` fit: `── 2 more below, 1 needs you ──`.
fn left_out(dash: &Dash, heads: &[(usize, String, usize, usize)], shown: std::ops::Range<usize>) -> String {
    let (mut above, mut below, mut needing) = (0, 0, 0);
    for (i, row) in dash.visible().enumerate() {
        let line = line_of(heads, i);
        if shown.contains(&line) {
            continue;
        }
        if line < shown.start {
            above += 1;
        } else {
            below += 1;
        }
        needing += usize::from(row.urgency().needs_person());
    }
    let mut text = match (above, below) {
        (0, n) => format!("── {n} more below"),
        (n, 0) => format!("── {n} more above"),
        (a, b) => format!("── {a} more above, {b} below"),
    };
    if needing > 0 {
        text.push_str(&format!(", {needing} need{} you", if needing == 1 { "s" } else { "" }));
    }
    text.push_str(" ──");
    text
}

/// A line count as a terminal height (a fleet never has 65,535 lines to show).
fn clamp_u16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

/// Where the table's group header lines go: before the visible row at this index, the group's
/// label, its number of rows and how many of them need a person. Empty when ungrouped.
fn group_headers(dash: &Dash) -> Vec<(usize, String, usize, usize)> {
    if dash.grouping == Grouping::None {
        return Vec::new();
    }
    let mut heads: Vec<(usize, String, usize, usize)> = Vec::new();
    for (i, row) in dash.visible().enumerate() {
        let label = dash.group_of(row);
        if heads.last().is_none_or(|h| h.1 != label) {
            heads.push((i, label.to_string(), 0, 0));
        }
        if let Some(h) = heads.last_mut() {
            h.2 += 1;
            h.3 += usize::from(row.urgency().needs_person());
        }
    }
    heads
}

/// `usage`: with the CPU and RSS columns.
fn table_row<'a>(row: &'a Row, usage: bool, now_ms: u64, look: Look) -> TableRow<'a> {
    let urgency = row.urgency();
    let lamp = match &row.link {
        Link::Live if row.lifecycle == desk_wire::state::Lifecycle::Running => Span::styled("●", look.fg(Color::Green)),
        Link::Live | Link::Connecting => Span::styled("◌", look.fg(Color::Yellow)),
        Link::Unresponsive | Link::Lost => Span::styled("!", look.fg(Color::Red).add_modifier(Modifier::BOLD)),
        Link::Exited(_) if urgency == Urgency::ExitedWithError => Span::styled("✗", look.fg(Color::Red)),
        Link::Exited(_) | Link::Down => Span::styled("○", look.fg(Color::DarkGray)),
    };
    let exited = matches!(row.link, Link::Exited(_) | Link::Lost);
    let activity = if exited {
        Span::raw(format!("{} ago", age(now_ms, row.activity_since_ms)))
    } else {
        let mut text = crate::words::activity(row.activity, row.wait.as_deref());
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
        // As `desk ls` counts them: this dashboard's own preview is one of the viewers.
        Cell::from(if row.controllers + row.viewers > 0 {
            crate::words::clients(row.controllers, row.viewers)
        } else {
            String::new()
        }),
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

fn render_preview(frame: &mut Frame, area: Rect, preview: &Preview, scroll: usize, look: Look) {
    let mut marked = false;
    let title = match preview {
        Preview::Screen { session, screen, older, live } => {
            let (cols, rows) = screen.size();
            let name = match screen.title() {
                "" => session.to_string(),
                title => format!("{session}: {title}"),
            };
            let back = preview_back_max(older.len(), screen, usize::from(area.height.saturating_sub(1)));
            let now = if *live { "live" } else { "exited: its last screen" };
            if scroll > 0 {
                marked = true;
                let to = if *live { "live" } else { "last screen" };
                format!(" {name} ({cols}x{rows}) SCROLLED BACK {} of {back} lines · End/Esc: {to} ", scroll.min(back))
            } else if back > 0 {
                format!(" {name} ({cols}x{rows}, {now}; PgUp: history) ")
            } else {
                format!(" {name} ({cols}x{rows}, {now}) ")
            }
        }
        Preview::Note { session, .. } => format!(" {session} "),
        Preview::None => " preview ".to_string(),
    };
    let title = if marked {
        Span::styled(title, look.fg(Color::Yellow).add_modifier(Modifier::REVERSED | Modifier::BOLD))
    } else {
        Span::raw(title)
    };
    let block = Block::new().borders(Borders::TOP).title(Line::from(title));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    match preview {
        Preview::Screen { screen, older, .. } => frame.render_widget(ScreenView { screen, older, scroll, look }, inner),
        Preview::Note { text, .. } => frame.render_widget(Paragraph::new(*text), inner),
        Preview::None => frame.render_widget(Paragraph::new("no session"), inner),
    }
}

/// A session's screen model drawn cell by cell. Live (`scroll` 0): the screen from its left
/// edge; one taller than the pane shows the rows that end at its content ([`first_row`]). Scrolled back: the lines `older` ++ the model's history ++ the screen, as one
/// column, drawn so that the pane's last line is `scroll` lines above the live preview's last one.
struct ScreenView<'a> {
    screen: &'a Screen,
    older: &'a [HistoryRow],
    scroll: usize,
    look: Look,
}

impl Widget for ScreenView<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let (cols, rows) = self.screen.size();
        if self.scroll == 0 {
            let first = first_row(self.screen, area.height);
            for y in 0..area.height.min(rows) {
                self.screen_row(first + y, area, area.y + y, buf);
            }
            return;
        }
        let height = usize::from(area.height);
        let older = self.older.len();
        let own = self.screen.history_len();
        let scroll = self.scroll.min(preview_back_max(older, self.screen, height));
        let end = live_end(older, self.screen, height) - scroll;
        let start = end.saturating_sub(height);
        // The model's own history lines in the window, fetched in one pass.
        let own_from = start.clamp(older, older + own) - older;
        let own_to = end.clamp(older, older + own) - older;
        let mut own_lines = self.screen.history_tail(own - own_from).take(own_to - own_from);
        for (k, line) in (start..end).enumerate() {
            let y = area.y + k as u16;
            if line < older {
                let row = &self.older[line];
                if row.runs.is_empty() {
                    buf.set_stringn(area.x, y, &row.text, usize::from(area.width.min(cols)), Style::new());
                } else {
                    let runs = row.runs.iter().map(|r| (r.text.as_str(), r.attrs()));
                    draw_runs(runs, area, y, self.look, buf);
                }
            } else if line < older + own {
                if let Some(l) = own_lines.next() {
                    draw_runs(l.runs(), area, y, self.look, buf);
                }
            } else {
                self.screen_row((line - older - own) as u16, area, y, buf);
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

impl ScreenView<'_> {
    /// The screen's row `row` on the pane's line `y`.
    fn screen_row(&self, row: u16, area: Rect, y: u16, buf: &mut Buffer) {
        let (cols, _) = self.screen.size();
        for x in 0..area.width.min(cols) {
            let Some(cell) = self.screen.cell(row, x) else { continue };
            if cell.wide_continuation {
                continue;
            }
            let Some(target) = buf.cell_mut((area.x + x, y)) else { continue };
            target.set_symbol(if cell.text.is_empty() { " " } else { &cell.text });
            target.set_style(cell_style(&cell.attrs, self.look));
        }
    }
}

/// A history line's runs on the pane's line `y`, cut at the pane's width.
fn draw_runs<'r>(runs: impl Iterator<Item = (&'r str, Attrs)>, area: Rect, y: u16, look: Look, buf: &mut Buffer) {
    let mut x = area.x;
    let right = area.x + area.width;
    for (text, attrs) in runs {
        if x >= right {
            break;
        }
        let (next, _) = buf.set_stringn(x, y, text, usize::from(right - x), cell_style(&attrs, look));
        x = next;
    }
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

/// The preview pane with no session to show: how to start one, or why none is shown.
fn render_empty(frame: &mut Frame, area: Rect, dash: &Dash) {
    let block = Block::new().borders(Borders::TOP).title(" preview ");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let text = if !dash.filter.is_empty() {
        vec![Line::raw(format!(" no session matches the filter {:?} (Esc clears it)", dash.filter))]
    } else if let Some(name) = dash.selected() {
        // Selected but nothing to show (its name cannot name a socket): not "no sessions yet".
        vec![Line::raw(format!(" {name}: no preview to show"))]
    } else if dash.visible().next().is_some() {
        vec![Line::raw(" no session selected: j / k (or ↓ ↑) picks one to preview")]
    } else {
        [
            " No sessions yet. Start one from another terminal; it shows here at once:",
            "",
            "   desk new sh1 -- bash               a shell",
            "   desk new api --provider claude     Claude Code (or codex, opencode)",
            "   desk new build -- make -j watch    any command",
            "   make demo, then make demo-shell    demo agents, in their own DESK_HOME",
            "",
            " ? lists the keys; q quits.",
        ]
        .map(Line::raw)
        .to_vec()
    };
    frame.render_widget(Paragraph::new(text), inner);
}

/// Every key of the dashboard, as `?` shows them.
pub const HELP: [(&str, &str); 21] = [
    ("j k ↓ ↑", "select the next / previous session"),
    ("g G", "the first / last session"),
    ("n", "the next one that needs you (blocked, stuck, degraded, failed)"),
    ("Enter", "attach this terminal to it; its detach key (Ctrl-\\) comes back"),
    ("a", "answer its dialog: its options, their keys, what Enter picks"),
    ("A", "approvals: every open dialog in the fleet, a digit answers (y yes, x no)"),
    ("c", "channels: read one and its threads, p posts as you ([ ] channel)"),
    ("s", "a prompt for it (Enter: new line, Alt-Enter: send, Esc: drop)"),
    ("i", "its items: J/K or ] [ select, f force, d drop, i or Esc back"),
    ("f", "force its stuck item (after y)"),
    ("d", "drop the item (after y)"),
    ("p", "pause / resume delivery to it"),
    ("PgUp PgDn", "scroll the preview back into its history, and forward"),
    ("Shift-↑ ↓", "scroll the preview by a line"),
    ("Home End", "the preview's oldest line / back to live (Esc too)"),
    ("/", "filter by name, provider or title (Enter keeps, Esc clears)"),
    ("v", "group the table by provider, by channel, by host, or not"),
    ("?", "this help (any key closes it)"),
    ("q", "quit (the sessions keep running); Ctrl-C too"),
    ("", ""),
    ("", "From a shell: desk attach, keys, send, item, force, drop, pause"),
];

/// The help: every key, over the preview.
fn render_help(frame: &mut Frame, area: Rect) {
    let block = Block::new().borders(Borders::TOP).title(" keys (any key closes this) ");
    let inner = block.inner(area);
    frame.render_widget(ratatui::widgets::Clear, area);
    frame.render_widget(block, area);
    let lines: Vec<Line> = HELP
        .iter()
        .map(|(key, what)| {
            Line::from(vec![
                Span::styled(format!(" {key:<11} "), Style::new().add_modifier(Modifier::BOLD)),
                Span::raw(*what),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
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
        let row = dash.row(session);
        let text = if row.is_some_and(|r| r.queue.is_none()) { "its queue is unknown now" } else { "no items waiting" };
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
        // The widest that fits: every key in words, then without `/ filter` and `v group` (`?`
        // lists them), then the keys alone.
        let hints = [
            " j/k select  n next  Enter attach  a answer  A approvals  c channels  s send  i items  f force  d drop  p pause  / filter  v group  ? keys  q quit",
            " j/k select  n next  Enter attach  a answer  A approvals  c channels  s send  i items  f force  d drop  p pause  ? keys  q quit",
        ];
        let short = " j/k n:next Enter a:answer A:approvals c:channels s:send i f d p / ?:keys q:quit";
        let hint = hints.into_iter().find(|h| usize::from(area.width) > h.chars().count()).unwrap_or(short);
        Line::from(Span::styled(hint, look.fg(Color::DarkGray)))
    };
    frame.render_widget(Paragraph::new(line), area);
}
