//! Screen rendering for the demo agent: a frame description in, terminal bytes out.
//!
//! Owns the layout (transcript, an optional activity line, the rounded input box or the
//! approval dialog, a one-line status row) and what is currently on the terminal. Two modes:
//! - **inline** (default, like Claude Code): transcript lines are printed once and scroll into
//!   the terminal's own scrollback; only the *live region* (activity line, box, status) is
//!   redrawn, by moving the cursor back to its first row and erasing below;
//! - **alternate screen** (like Codex full-screen): every frame repaints every row.
//!
//! Invariants: no row is wider than the terminal (so the terminal never auto-wraps and the
//! live region's height is exactly the number of rows drawn); the live region is never taller
//! than the screen (so moving back to its top is always possible); the cursor rests at the end
//! of the live region's last row between frames; transcript history kept for redraws after a
//! resize is bounded by [`MAX_HISTORY_LINES`]. Pure: returns bytes, performs no I/O.

use std::collections::VecDeque;
use std::fmt::Write as _;

use super::text::{ellipsize, pad, str_width, wrap_line, wrap_text};

/// 1000 logical lines: enough to refill any realistic screen after a resize (each line is at
/// least one row); older lines already live in the user's terminal scrollback.
pub const MAX_HISTORY_LINES: usize = 1000;

/// Below this width the rounded box cannot hold its borders, padding and prompt plus at least
/// two characters of text, so the input is drawn without a box.
const MIN_BOX_COLS: usize = 10;

const SYNC_BEGIN: &str = "\x1b[?2026h";
const SYNC_END: &str = "\x1b[?2026l";
const DIM: &str = "\x1b[2m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";
const CURSOR: &str = "\x1b[7m \x1b[27m";

/// What the live region shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The line above the box while a turn works (spinner and hint), if any.
    pub activity: Option<String>,
    pub body: Body,
    /// The status/hint row under the box.
    pub status: String,
}

/// The content of the box.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// The input being composed, as displayed (placeholders, not pasted text).
    Input { text: String },
    /// The approval dialog for `command`, option `selected` (0 = Yes, 1 = No) highlighted.
    Dialog { command: String, selected: usize },
}

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct Renderer {
    cols: usize,
    rows: usize,
    alt_screen: bool,
    sync: bool,
    /// Rows of the live region currently on the terminal (inline mode); 0 before the first frame.
    live_rows: usize,
    entered: bool,
    history: VecDeque<String>,
}

impl Renderer {
    pub fn new(cols: u16, rows: u16, alt_screen: bool, sync: bool) -> Self {
        Self {
            cols: usize::from(cols.max(1)),
            rows: usize::from(rows.max(1)),
            alt_screen,
            sync,
            live_rows: 0,
            entered: false,
            history: VecDeque::new(),
        }
    }

    pub fn size(&self) -> (u16, u16) {
        (u16::try_from(self.cols).unwrap_or(u16::MAX), u16::try_from(self.rows).unwrap_or(u16::MAX))
    }

    /// Bytes that take over the terminal: the alternate screen (if used), a hidden cursor (the
    /// box draws its own).
    pub fn enter(&mut self) -> Vec<u8> {
        self.entered = true;
        let mut out = String::new();
        if self.alt_screen {
            out.push_str("\x1b[?1049h\x1b[H\x1b[2J");
        }
        out.push_str("\x1b[?25l");
        out.into_bytes()
    }

    /// Bytes that hand the terminal back: below the live region, cursor shown, alternate screen
    /// left. Safe to call whether or not [`Renderer::enter`] ran.
    pub fn leave(&mut self) -> Vec<u8> {
        let mut out = String::from(RESET);
        if self.entered {
            if self.alt_screen {
                out.push_str("\x1b[?1049l");
            } else if self.live_rows > 0 {
                out.push_str("\r\n");
            }
            out.push_str("\x1b[?25h");
        }
        self.entered = false;
        self.live_rows = 0;
        out.into_bytes()
    }

    /// Print `new_lines` into the transcript and redraw the live region.
    pub fn draw(&mut self, new_lines: &[String], frame: &Frame) -> Vec<u8> {
        for line in new_lines {
            self.remember(line);
        }
        let live = self.layout(frame);
        let mut out = String::new();
        if self.sync {
            out.push_str(SYNC_BEGIN);
        }
        if self.alt_screen {
            self.paint_alt(&live, &mut out);
        } else {
            out.push('\r');
            if self.live_rows > 1 {
                let _ = write!(out, "\x1b[{}A", self.live_rows - 1);
            }
            out.push_str("\x1b[J");
            for line in new_lines {
                for row in wrap_line(line, self.cols) {
                    out.push_str(&row);
                    out.push_str("\r\n");
                }
            }
            self.paint_live(&live, &mut out);
        }
        if self.sync {
            out.push_str(SYNC_END);
        }
        out.into_bytes()
    }

    /// Adopt a new size without drawing (before the UI is up).
    pub fn set_size(&mut self, cols: u16, rows: u16) {
        self.cols = usize::from(cols.max(1));
        self.rows = usize::from(rows.max(1));
    }

    /// Adopt a new terminal size and repaint everything, `new_lines` included: the old live
    /// region's position is meaningless after the terminal reflowed or cut it.
    pub fn resize(&mut self, cols: u16, rows: u16, new_lines: &[String], frame: &Frame) -> Vec<u8> {
        self.set_size(cols, rows);
        for line in new_lines {
            self.remember(line);
        }
        let live = self.layout(frame);
        let mut out = String::new();
        if self.sync {
            out.push_str(SYNC_BEGIN);
        }
        if self.alt_screen {
            self.paint_alt(&live, &mut out);
        } else {
            out.push_str("\x1b[H\x1b[2J");
            let room = self.rows.saturating_sub(live.len());
            for row in self.history_tail(room) {
                out.push_str(&row);
                out.push_str("\r\n");
            }
            self.paint_live(&live, &mut out);
        }
        if self.sync {
            out.push_str(SYNC_END);
        }
        out.into_bytes()
    }

    fn remember(&mut self, line: &str) {
        if self.history.len() == MAX_HISTORY_LINES {
            self.history.pop_front();
        }
        self.history.push_back(line.to_string());
    }

    /// The last `room` rows of the transcript, wrapped to the current width.
    fn history_tail(&self, room: usize) -> Vec<String> {
        let mut tail: Vec<String> = Vec::new();
        for line in self.history.iter().rev() {
            if tail.len() >= room {
                break;
            }
            let mut rows = wrap_line(line, self.cols);
            rows.reverse();
            tail.extend(rows);
        }
        tail.truncate(room);
        tail.reverse();
        tail
    }

    fn paint_live(&mut self, live: &[String], out: &mut String) {
        for (i, row) in live.iter().enumerate() {
            if i > 0 {
                out.push_str("\r\n");
            }
            out.push_str(row);
        }
        out.push_str(RESET);
        self.live_rows = live.len();
    }

    fn paint_alt(&mut self, live: &[String], out: &mut String) {
        let room = self.rows.saturating_sub(live.len());
        let tail = self.history_tail(room);
        for r in 0..self.rows {
            let _ = write!(out, "\x1b[{};1H", r + 1);
            if r < tail.len() {
                out.push_str(&tail[r]);
            } else if r >= room {
                out.push_str(&live[r - room]);
                out.push_str(RESET);
            }
            out.push_str("\x1b[K");
        }
        self.live_rows = live.len();
    }

    /// The live region's rows, each at most `cols` wide, at most `rows` of them.
    fn layout(&self, frame: &Frame) -> Vec<String> {
        let cols = self.cols;
        let mut top = Vec::new();
        if let Some(activity) = &frame.activity {
            top.push(format!("{BOLD}{}{RESET}", ellipsize(activity, cols)));
        }
        let status = format!("{DIM}{}{RESET}", ellipsize(&format!("  {}", frame.status), cols));
        let fixed = top.len() + 1 + if cols >= MIN_BOX_COLS { 2 } else { 0 };
        let body_room = self.rows.saturating_sub(fixed).max(1);

        let mut live = top;
        if cols >= MIN_BOX_COLS {
            let inner = cols - 4;
            let body = match &frame.body {
                Body::Input { text } => input_rows(text, inner, body_room),
                Body::Dialog { command, selected } => {
                    let mut rows = dialog_rows(command, *selected, inner);
                    rows.truncate(body_room);
                    rows
                }
            };
            live.push(format!("╭{}╮", "─".repeat(cols - 2)));
            for row in body {
                live.push(format!("│ {row} │"));
            }
            live.push(format!("╰{}╯", "─".repeat(cols - 2)));
        } else {
            let body = match &frame.body {
                Body::Input { text } => input_rows(text, cols, body_room),
                Body::Dialog { command, selected } => {
                    let mut rows = dialog_rows(command, *selected, cols);
                    rows.truncate(body_room);
                    rows
                }
            };
            live.extend(body);
        }
        live.push(status);
        let excess = live.len().saturating_sub(self.rows);
        live.drain(..excess);
        live
    }
}

/// Rows of the input box body, each exactly `width` columns (escape codes aside): `> ` then the
/// text, wrapped, with a drawn cursor after the last character; only the last `room` rows.
fn input_rows(text: &str, width: usize, room: usize) -> Vec<String> {
    let text_width = width.saturating_sub(2).max(1);
    let mut rows = wrap_text(text, text_width);
    let cursor_on_new_row = rows.last().is_some_and(|r| str_width(r) >= text_width);
    if cursor_on_new_row {
        rows.push(String::new());
    }
    let last = rows.len() - 1;
    let mut out: Vec<String> = rows
        .into_iter()
        .enumerate()
        .map(|(i, row)| {
            let prefix = if i == 0 { "> " } else { "  " };
            let used = str_width(&row);
            if i == last {
                let fill = text_width.saturating_sub(used + 1);
                format!("{prefix}{row}{CURSOR}{}", " ".repeat(fill))
            } else {
                format!("{prefix}{}", pad(&row, text_width))
            }
        })
        .collect();
    let excess = out.len().saturating_sub(room);
    out.drain(..excess);
    out
}

fn dialog_rows(command: &str, selected: usize, width: usize) -> Vec<String> {
    let option = |i: usize, label: &str| {
        let marker = if i == selected { "❯" } else { " " };
        let text = pad(&ellipsize(&format!("{marker} {}. {label}", i + 1), width), width);
        if i == selected { format!("{BOLD}{text}{RESET}") } else { text }
    };
    let line = |s: &str| pad(&ellipsize(s, width), width);
    vec![
        line("Bash command"),
        line(&format!("  {command}")),
        line("Do you want to run this command?"),
        option(0, "Yes"),
        option(1, "No"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen(cols: u16, rows: u16, bytes: &[u8]) -> vt100::Parser {
        let mut p = vt100::Parser::new(
            std::num::NonZeroU16::new(rows).expect("rows"),
            std::num::NonZeroU16::new(cols).expect("cols"),
            0,
        );
        p.process(bytes);
        p
    }

    fn input(text: &str) -> Frame {
        Frame { activity: None, body: Body::Input { text: text.into() }, status: "idle".into() }
    }

    #[test]
    fn inline_frame_draws_a_rounded_box_with_prompt_and_status() {
        let mut r = Renderer::new(30, 10, false, true);
        let mut bytes = r.enter();
        bytes.extend(r.draw(&["hello".into()], &input("typed")));
        let p = screen(30, 10, &bytes);
        let rows: Vec<String> = p.screen().rows(0, 30).collect();
        assert_eq!(rows[0], "hello");
        assert_eq!(rows[1], format!("╭{}╮", "─".repeat(28)));
        assert!(rows[2].starts_with("│ > typed"), "{rows:?}");
        assert!(rows[2].ends_with('│'));
        assert_eq!(rows[3], format!("╰{}╯", "─".repeat(28)));
        assert_eq!(rows[4], "  idle");
    }

    #[test]
    fn redrawing_replaces_the_live_region_in_place() {
        let mut r = Renderer::new(30, 10, false, false);
        let mut bytes = r.draw(&[], &input("first"));
        bytes.extend(r.draw(&["line".into()], &input("second")));
        bytes.extend(r.draw(&[], &input("third")));
        let p = screen(30, 10, &bytes);
        let contents = p.screen().contents();
        assert!(!contents.contains("first"), "{contents}");
        assert!(!contents.contains("second"), "{contents}");
        assert_eq!(contents.matches('╭').count(), 1, "{contents}");
        assert!(contents.starts_with("line\n╭"), "{contents}");
    }

    #[test]
    fn long_input_wraps_inside_the_box_and_no_row_overflows() {
        let mut r = Renderer::new(20, 12, false, false);
        let text = "abcdefghijklmnopqrstuvwxyz0123456789";
        let p = screen(20, 12, &r.draw(&[], &input(text)));
        for row in 0..12 {
            assert!(!p.screen().row_wrapped(row), "row {row} wrapped");
        }
        let contents = p.screen().contents();
        assert!(contents.contains("│ > abcdefghijklmn │"), "{contents}");
        assert!(contents.contains("│   opqrstuvwxyz01 │"), "{contents}");
    }

    #[test]
    fn live_region_never_exceeds_a_tiny_screen() {
        for (cols, rows) in [(1, 1), (3, 2), (9, 3), (12, 4), (80, 2)] {
            let mut r = Renderer::new(cols, rows, false, false);
            let text = "x".repeat(500);
            let frame = Frame { activity: Some("working".into()), body: Body::Input { text }, status: "status".into() };
            r.draw(&[], &frame);
            assert!(r.live_rows <= usize::from(rows), "{cols}x{rows}");
            let d = Frame {
                activity: None,
                body: Body::Dialog { command: "c".into(), selected: 1 },
                status: String::new(),
            };
            r.draw(&[], &d);
            assert!(r.live_rows <= usize::from(rows), "{cols}x{rows}");
        }
    }

    #[test]
    fn resize_repaints_transcript_tail_and_box_at_the_new_width() {
        let mut r = Renderer::new(40, 10, false, false);
        let mut bytes = r.draw(&["one".into(), "two".into()], &input(""));
        let p = screen(40, 10, &bytes);
        drop(p);
        bytes.extend(r.resize(24, 10, &[], &input("")));
        let p = screen(24, 10, &bytes);
        let rows: Vec<String> = p.screen().rows(0, 24).collect();
        assert_eq!(rows[0], "one");
        assert_eq!(rows[1], "two");
        assert_eq!(rows[2], format!("╭{}╮", "─".repeat(22)));
    }

    #[test]
    fn alt_screen_pins_the_box_to_the_bottom() {
        let mut r = Renderer::new(30, 8, true, false);
        let mut bytes = r.enter();
        bytes.extend(r.draw(&["hi".into()], &input("")));
        let p = screen(30, 8, &bytes);
        assert!(p.screen().alternate_screen());
        let rows: Vec<String> = p.screen().rows(0, 30).collect();
        assert_eq!(rows[0], "hi");
        assert!(rows[4].starts_with('╭'), "{rows:?}");
        assert_eq!(rows[7], "  idle");
        bytes.extend(r.leave());
        let p = screen(30, 8, &bytes);
        assert!(!p.screen().alternate_screen());
    }

    #[test]
    fn dialog_highlights_the_selected_option() {
        let mut r = Renderer::new(40, 12, false, false);
        let frame = Frame {
            activity: None,
            body: Body::Dialog { command: "demo-tool".into(), selected: 0 },
            status: "Esc to cancel".into(),
        };
        let p = screen(40, 12, &r.draw(&[], &frame));
        let contents = p.screen().contents();
        assert!(contents.contains("Do you want to run this command?"));
        assert!(contents.contains("│ ❯ 1. Yes"), "{contents}");
        assert!(contents.contains("│   2. No"), "{contents}");
    }
}
