//! A view of a session's screen for a terminal of another size.
//!
//! Owns what one such client was last sent and the bytes that bring it up to date with the
//! screen model: the session's screen cropped to the client's size, panned so that the cursor
//! stays visible (tmux's behaviour for a smaller client: the crop moves only when the cursor
//! would leave it, and then by as little as it takes), padded with blank cells where the client
//! is larger, with an optional last row naming both sizes. [`View::render`] diffs against a
//! shadow of the rows the client was sent and writes only the rows that changed, each one
//! whole (positioned, drawn, erased to the end of the line), so the result never depends on
//! what the client's terminal did with earlier output; [`View::keyframe`] forgets the shadow and
//! draws everything after a reset. Modes that change how the client's terminal encodes input
//! (bracketed paste, cursor keys, keypad, mouse, focus), the alternate screen, the title and
//! the cursor follow the model's.
//!
//! Invariants: the bytes never address a cell outside `cols x rows`; a row is sent only when
//! its bytes differ from the shadow's; a wide character cut by the crop's edge is drawn as a
//! blank, never half. Pure: no I/O and no clock (the caller decides when to render: the
//! master coalesces repaints). May depend only on the screen model's public API.

use std::fmt::Write as _;

use crate::screen::{Attrs, Modes, MouseEncoding, MouseMode, Screen};

/// One client's view: its size, where the crop sits, and what it was last sent.
#[derive(Debug)]
pub struct View {
    cols: u16,
    rows: u16,
    status: bool,
    /// Top-left of the crop, in session coordinates (`row`, `col`).
    origin: (u16, u16),
    /// Per client row: the bytes it was last drawn with (after its positioning), `None` when
    /// unknown (the next render draws it).
    shadow: Vec<Option<Vec<u8>>>,
    /// The modes, title and cursor the client was last sent; `None`: unknown.
    modes: Option<Modes>,
    title: Option<String>,
    cursor: Option<Option<(u16, u16)>>,
}

impl View {
    /// A view for a `cols x rows` terminal; with `status`, its last row shows the two sizes
    /// (when the terminal has at least two rows).
    pub fn new(cols: u16, rows: u16, status: bool) -> View {
        let cols = cols.max(1);
        let rows = rows.max(1);
        View {
            cols,
            rows,
            status: status && rows >= 2,
            origin: (0, 0),
            shadow: vec![None; usize::from(rows)],
            modes: None,
            title: None,
            cursor: None,
        }
    }

    /// The client's size, `(cols, rows)`.
    pub fn size(&self) -> (u16, u16) {
        (self.cols, self.rows)
    }

    /// Top-left of the crop in session coordinates, `(row, col)`.
    pub fn origin(&self) -> (u16, u16) {
        self.origin
    }

    /// Rows showing the session's screen (all but the status row).
    fn content_rows(&self) -> u16 {
        self.rows - u16::from(self.status)
    }

    /// Bytes that take a terminal in any state to this view of `screen`: a reset (`ESC c`),
    /// then every row, the modes, the title and the cursor.
    pub fn keyframe(&mut self, screen: &Screen) -> Vec<u8> {
        self.shadow.iter_mut().for_each(|row| *row = None);
        // After RIS the terminal's modes are a fresh model's, its title is unknown.
        self.modes = Some(Screen::new(1, 1).modes());
        self.title = None;
        self.cursor = None;
        let mut out = b"\x1bc\x1b[?7h".to_vec();
        self.render_into(screen, &mut out);
        out
    }

    /// Bytes that bring the client from what it was last sent to this view of `screen`: only
    /// the rows that changed, then modes, title and cursor where they changed. Empty when
    /// nothing did.
    pub fn render(&mut self, screen: &Screen) -> Vec<u8> {
        let mut out = Vec::new();
        self.render_into(screen, &mut out);
        out
    }

    fn render_into(&mut self, screen: &Screen, out: &mut Vec<u8>) {
        let (scols, srows) = screen.size();
        let modes = screen.modes();
        let start = out.len();
        if let Some(sent) = self.modes
            && sent.alternate_screen != modes.alternate_screen
        {
            // Entering clears the client's alternate screen, leaving restores its main one as
            // it was: either way what it shows is no longer the shadow.
            out.extend_from_slice(if modes.alternate_screen { b"\x1b[?1049h" } else { b"\x1b[?1049l" });
            self.shadow.iter_mut().for_each(|row| *row = None);
        } else if self.modes.is_none() && modes.alternate_screen {
            out.extend_from_slice(b"\x1b[?1049h");
        }
        let (crow, ccol) = screen.cursor();
        let content = self.content_rows();
        self.origin = (pan(self.origin.0, crow, content, srows), pan(self.origin.1, ccol, self.cols, scols));
        let mut line = Vec::with_capacity(usize::from(self.cols) * 2);
        for i in 0..content {
            line.clear();
            self.draw_row(screen, self.origin.0 + i, &mut line);
            self.send_row(i, &line, out);
        }
        if self.status {
            line.clear();
            let text = format!("session {scols}x{srows}, this terminal {}x{}", self.cols, self.rows);
            line.extend_from_slice(b"\x1b[0;7m");
            let shown: String = text.chars().take(usize::from(self.cols)).collect();
            let _ = write!(Sink(&mut line), "{shown:<width$}", width = usize::from(self.cols));
            line.extend_from_slice(b"\x1b[0m");
            self.send_row(content, &line, out);
        }
        self.send_modes(&modes, out);
        if self.title.as_deref() != Some(screen.title()) {
            if !screen.title().is_empty() || self.title.is_some() {
                let _ = write!(Sink(out), "\x1b]2;{}\x07", screen.title());
            }
            self.title = Some(screen.title().to_string());
        }
        let cursor = (modes.cursor_visible
            && crow >= self.origin.0
            && crow < self.origin.0 + content
            && ccol >= self.origin.1
            && ccol < self.origin.1 + self.cols)
            .then(|| (crow - self.origin.0, ccol - self.origin.1));
        if out.len() > start || self.cursor != Some(cursor) {
            match cursor {
                Some((r, c)) => {
                    let _ = write!(Sink(out), "\x1b[{};{}H\x1b[?25h", r + 1, c + 1);
                }
                None => out.extend_from_slice(b"\x1b[?25l"),
            }
            self.cursor = Some(cursor);
        }
    }

    /// Send client row `i` as `line` unless the shadow says it already shows that.
    fn send_row(&mut self, i: u16, line: &[u8], out: &mut Vec<u8>) {
        let slot = &mut self.shadow[usize::from(i)];
        if slot.as_deref() == Some(line) {
            return;
        }
        let _ = write!(Sink(out), "\x1b[{};1H", i + 1);
        out.extend_from_slice(line);
        match slot {
            Some(kept) => {
                kept.clear();
                kept.extend_from_slice(line);
            }
            None => *slot = Some(line.to_vec()),
        }
    }

    /// Session row `row` seen through the crop, as bytes drawn from column 1 of a client row:
    /// cells with SGR changes where attributes change, then an erase of the rest of the line
    /// (trailing blanks, and the padding where the session is narrower).
    fn draw_row(&self, screen: &Screen, row: u16, line: &mut Vec<u8>) {
        line.extend_from_slice(b"\x1b[0m");
        let (scols, srows) = screen.size();
        if row >= srows {
            line.extend_from_slice(b"\x1b[K");
            return;
        }
        let width = self.cols.min(scols.saturating_sub(self.origin.1));
        // The last cell that shows anything: blanks after it are left to the erase.
        let mut end = width;
        while end > 0 {
            match screen.cell_ref(row, self.origin.1 + end - 1) {
                Some(c) if c.text_is_empty() && !c.wide_continuation() && c.attrs() == Attrs::default() => end -= 1,
                _ => break,
            }
        }
        let mut pen = Attrs::default();
        for j in 0..end {
            let Some(cell) = screen.cell_ref(row, self.origin.1 + j) else { break };
            if cell.wide_continuation() && j > 0 {
                continue; // drawn with its left half
            }
            // A blank for an erased cell, and for a wide character whose other half is outside
            // the crop (a continuation at the left edge, a wide cell at the right edge).
            let cut = cell.wide_continuation() || (cell.wide() && j + 1 >= width);
            if cell.attrs() != pen {
                cell.attrs().write_sgr(&mut Sink(line));
                pen = cell.attrs();
            }
            if cut || cell.text_is_empty() {
                line.push(b' ');
            } else {
                cell.push_text(line);
            }
        }
        if end < self.cols {
            if pen != Attrs::default() {
                line.extend_from_slice(b"\x1b[0m");
            }
            line.extend_from_slice(b"\x1b[K");
        }
    }

    /// The modes that change what the client's terminal sends, where they differ from what it
    /// was last sent.
    fn send_modes(&mut self, modes: &Modes, out: &mut Vec<u8>) {
        let sent = self.modes.unwrap_or_else(|| Screen::new(1, 1).modes());
        let mut flag_mode = |was: bool, now: bool, code: &str| {
            if was != now || self.modes.is_none() {
                let _ = write!(Sink(out), "\x1b[?{code}{}", if now { 'h' } else { 'l' });
            }
        };
        flag_mode(sent.bracketed_paste, modes.bracketed_paste, "2004");
        flag_mode(sent.app_cursor_keys, modes.app_cursor_keys, "1");
        flag_mode(sent.focus_events, modes.focus_events, "1004");
        if sent.app_keypad != modes.app_keypad || self.modes.is_none() {
            out.extend_from_slice(if modes.app_keypad { b"\x1b=" } else { b"\x1b>" });
        }
        if sent.mouse != modes.mouse || self.modes.is_none() {
            if sent.mouse != MouseMode::None {
                let _ = write!(Sink(out), "\x1b[?{}l", sent.mouse.code());
            }
            if modes.mouse != MouseMode::None {
                let _ = write!(Sink(out), "\x1b[?{}h", modes.mouse.code());
            }
        }
        if sent.mouse_encoding != modes.mouse_encoding || self.modes.is_none() {
            if sent.mouse_encoding != MouseEncoding::Default {
                let _ = write!(Sink(out), "\x1b[?{}l", sent.mouse_encoding.code());
            }
            if modes.mouse_encoding != MouseEncoding::Default {
                let _ = write!(Sink(out), "\x1b[?{}h", modes.mouse_encoding.code());
            }
        }
        self.modes = Some(*modes);
    }
}

/// The new start of a crop of `len` cells over `total`, which held `start`, so that `pos` (the
/// cursor) is inside it: unchanged while the cursor is inside, else moved by as little as it
/// takes; never past the end of `total`, and 0 when the crop is larger than `total`.
fn pan(start: u16, pos: u16, len: u16, total: u16) -> u16 {
    if total <= len {
        return 0;
    }
    let start = if pos < start {
        pos
    } else if pos >= start + len {
        pos + 1 - len
    } else {
        start
    };
    start.min(total - len)
}

/// `fmt::Write` into a byte vector.
struct Sink<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Sink<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests;
