//! The emulator state and the terminal operations that change it, with xterm's semantics.
//!
//! Owns both screen buffers, the cursor (with xterm's pending-wrap flag), the pen, the scroll
//! region, the two DECSC slots, modes, character sets, tab stops, the title, the pending
//! replies and the output events of the `feed` call in progress. Parsing lives in `perform.rs` (vte callbacks) and in the printable fast path of
//! `mod.rs`; both call the operations here, so a byte has the same effect whichever path it
//! takes. Invariants: `cur.row < rows` and `cur.col < cols` at all times; `cur.pending` (the
//! cursor is "past" the last column, the next printable character wraps first) implies
//! `cur.col == cols - 1`; `top < bottom < rows` unless the screen has one row, in which case
//! `top == bottom == 0`; `replies` never exceeds `MAX_PENDING_REPLIES`; `title` and
//! `icon_name` never exceed `MAX_TITLE_BYTES`.

use unicode_width::UnicodeWidthChar;

use super::cell::{Attrs, Cell, flag, kind};
use super::grid::Grid;
use super::history::History;
use super::modes::{Charset, Modes, MouseEncoding, MouseMode, TabStops};
use crate::events::{Mode, OutputEvent};

/// Bytes of query answers kept until the master collects them with `take_replies`. One answer
/// is at most ~16 bytes, so this holds dozens of them, more than any startup burst of
/// DA/DSR queries; beyond it a program that floods queries without reading the answers has
/// further answers dropped whole (never cut in the middle).
pub const MAX_PENDING_REPLIES: usize = 1024;

/// Longest title or icon name kept, in bytes (cut on a UTF-8 boundary). vte without `std` keeps
/// at most 1024 bytes of an OSC string, so nothing longer can arrive today; the bound is
/// restated here so the model's memory does not depend on a parser internal.
pub const MAX_TITLE_BYTES: usize = 1024;

/// Which DECSET code switched to the alternate screen. The three differ: 1049 saves the cursor
/// and clears the alternate screen on entry and restores the cursor on exit; 1047 clears it on
/// exit; 47 does neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) enum AltMode {
    /// DECSET 47.
    Alt47,
    /// DECSET 1047.
    Alt1047,
    /// DECSET 1049.
    Alt1049,
}

impl AltMode {
    /// The DECSET number.
    pub(super) fn code(self) -> u16 {
        match self {
            AltMode::Alt47 => 47,
            AltMode::Alt1047 => 1047,
            AltMode::Alt1049 => 1049,
        }
    }
}

/// Cursor position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct Pos {
    /// Row, 0-based.
    pub row: usize,
    /// Column, 0-based.
    pub col: usize,
    /// A character was just written in the last column and autowrap will happen before the
    /// next one (xterm's `do_wrap`).
    pub pending: bool,
}

/// One DECSC slot (xterm keeps one per screen buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct SavedCursor {
    /// False until the first save: restoring a virgin slot homes the cursor and resets the pen.
    pub saved: bool,
    /// Absolute position and pending-wrap flag.
    pub pos: Pos,
    /// The pen.
    pub pen: Attrs,
    /// Origin mode (DECOM).
    pub origin: bool,
    /// Autowrap (DECAWM).
    pub autowrap: bool,
    /// G0 and G1.
    pub charsets: [Charset; 2],
    /// Which of G0/G1 is invoked into GL.
    pub gl: usize,
}

impl Default for SavedCursor {
    fn default() -> Self {
        SavedCursor {
            saved: false,
            pos: Pos::default(),
            pen: Attrs::default(),
            origin: false,
            autowrap: true,
            charsets: [Charset::Ascii; 2],
            gl: 0,
        }
    }
}

/// Mode flags (see `Modes` for the public view).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct ModeFlags {
    pub autowrap: bool,
    pub origin: bool,
    pub insert: bool,
    /// LNM: LF, VT and FF also return the carriage.
    pub newline: bool,
    pub app_cursor: bool,
    pub app_keypad: bool,
    pub cursor_visible: bool,
    pub cursor_blink: bool,
    pub bracketed_paste: bool,
    pub focus_events: bool,
    pub mouse: MouseMode,
    pub mouse_encoding: MouseEncoding,
    /// DECSCUSR style, 0 (default) to 6.
    pub cursor_style: u16,
}

impl Default for ModeFlags {
    fn default() -> Self {
        ModeFlags {
            autowrap: true,
            origin: false,
            insert: false,
            newline: false,
            app_cursor: false,
            app_keypad: false,
            cursor_visible: true,
            cursor_blink: false,
            bracketed_paste: false,
            focus_events: false,
            mouse: MouseMode::None,
            mouse_encoding: MouseEncoding::Default,
            cursor_style: 0,
        }
    }
}

/// The whole emulator state except the parser.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct Term {
    pub cols: usize,
    pub rows: usize,
    pub main: Grid,
    pub alt: Grid,
    /// Rows scrolled off the top of the main screen (the alternate screen keeps none).
    pub history: History,
    /// Set while the alternate screen is shown.
    pub alt_mode: Option<AltMode>,
    pub cur: Pos,
    pub pen: Attrs,
    /// DECSC slots: `[main, alternate]`.
    pub saved: [SavedCursor; 2],
    pub top: usize,
    pub bottom: usize,
    pub modes: ModeFlags,
    pub charsets: [Charset; 2],
    pub gl: usize,
    pub tabs: TabStops,
    /// Last graphic character printed, before charset mapping (for REP).
    pub last_char: Option<char>,
    pub title: String,
    pub icon_name: String,
    pub replies: Vec<u8>,
    /// Output events found by the `Screen::feed` call in progress; empty between calls (the
    /// caller's buffer is swapped in for the call), so it needs no bound of its own.
    #[serde(skip)]
    pub events: Vec<OutputEvent>,
    /// The last OSC string, its parameters joined by `;` again (bounded by vte's 1024 bytes).
    pub osc: Vec<u8>,
    /// `osc` was ended by an ESC: it counts once the ESC turns out to start ST (`ESC \`), and
    /// is dropped if anything else follows (xterm aborts the string then; vte dispatches it).
    pub osc_unconfirmed: bool,
    /// The last character `print` measured and its width (`NOT_DRAWN` for controls): runs of
    /// one character (box drawing, rules) skip the Unicode table lookup.
    #[serde(skip, default = "no_width_memo")]
    width_memo: (char, u8),
}

/// Width memo value for characters that are never drawn.
const NOT_DRAWN: u8 = u8::MAX;

fn no_width_memo() -> (char, u8) {
    ('\0', NOT_DRAWN)
}

impl Term {
    /// A power-on terminal of the given (already validated) size.
    pub(super) fn new(cols: usize, rows: usize) -> Term {
        Term {
            cols,
            rows,
            main: Grid::new(cols, rows),
            alt: Grid::new(cols, rows),
            history: History::default(),
            alt_mode: None,
            cur: Pos::default(),
            pen: Attrs::default(),
            saved: [SavedCursor::default(); 2],
            top: 0,
            bottom: rows - 1,
            modes: ModeFlags::default(),
            charsets: [Charset::Ascii; 2],
            gl: 0,
            tabs: TabStops::default(),
            last_char: None,
            title: String::new(),
            icon_name: String::new(),
            replies: Vec::new(),
            events: Vec::new(),
            osc: Vec::new(),
            osc_unconfirmed: false,
            width_memo: ('\0', NOT_DRAWN),
        }
    }

    /// Gives back the cells of rows that show nothing, in both buffers; nothing visible (nor
    /// what the alternate buffer would show when switched to) changes.
    pub(super) fn release_blank_rows(&mut self) {
        self.main.release_blank_rows();
        self.alt.release_blank_rows();
    }

    /// Rows of both buffers that hold their cells.
    pub(super) fn allocated_rows(&self) -> usize {
        self.main.allocated_rows() + self.alt.allocated_rows()
    }

    /// The buffer being shown and drawn into.
    pub(super) fn grid(&self) -> &Grid {
        if self.alt_mode.is_some() { &self.alt } else { &self.main }
    }

    fn grid_mut(&mut self) -> &mut Grid {
        if self.alt_mode.is_some() { &mut self.alt } else { &mut self.main }
    }

    /// Index of the active buffer's DECSC slot.
    fn slot(&self) -> usize {
        usize::from(self.alt_mode.is_some())
    }

    /// What erasing with the current pen leaves behind (background colour erase).
    pub(super) fn blank(&self) -> Cell {
        Cell::erased(&self.pen)
    }

    /// The character set invoked into GL.
    pub(super) fn gl_charset(&self) -> Charset {
        self.charsets[self.gl.min(1)]
    }

    // ---- printing -------------------------------------------------------------------------

    /// Prints one character (vte `print`).
    pub(super) fn print(&mut self, raw: char) {
        let c = if raw.is_ascii() { self.gl_charset().map(raw) } else { raw };
        let width = if self.width_memo.0 == c {
            self.width_memo.1
        } else {
            let width = c.width().map_or(NOT_DRAWN, |w| w.min(2) as u8);
            self.width_memo = (c, width);
            width
        };
        if width == NOT_DRAWN {
            return; // C0/C1 controls and DEL are never drawn
        }
        let width = usize::from(width);
        if width == 0 {
            self.combine(c);
            return;
        }
        if width > self.cols {
            return; // a wide character cannot be shown on a one-column screen
        }
        self.last_char = Some(raw);
        if width == 1
            && !self.cur.pending
            && !self.modes.insert
            && !self.pen.has(flag::HIDDEN)
            && self.cur.col + 1 < self.cols
        {
            // Common case: a narrow character on a row with nothing to repair.
            let (row, col, pen) = (self.cur.row, self.cur.col, self.pen);
            if self.grid_mut().row_mut(row).write_plain(col, std::iter::once(c), pen) {
                self.cur.col += 1;
                return;
            }
        }
        if self.cur.pending {
            self.cur.pending = false;
            if self.modes.autowrap {
                self.wrap_line();
            }
        }
        if width == 2 && self.cur.col + 2 > self.cols {
            if self.modes.autowrap {
                self.wrap_line();
            } else {
                self.cur.col = self.cols - 2;
            }
        }
        let blank = self.blank();
        let pen = self.pen;
        let col = self.cur.col;
        let insert = self.modes.insert;
        let cur_row = self.cur.row;
        let row = self.grid_mut().row_mut(cur_row);
        if insert {
            row.insert_blanks(col, width, blank);
        }
        if pen.has(flag::HIDDEN) {
            // xterm stores concealed text as spaces.
            for c in col..col + width {
                row.put(c, Cell::narrow(' ', pen), blank);
            }
        } else {
            let kind = if width == 2 { kind::WIDE } else { 0 };
            row.put(col, Cell { ch: c, attrs: pen, kind }, blank);
        }
        self.advance(width);
    }

    /// Moves the cursor right after writing `width` cells, setting pending wrap at the edge.
    fn advance(&mut self, width: usize) {
        if self.cur.col + width >= self.cols {
            self.cur.col = self.cols - 1;
            self.cur.pending = true;
        } else {
            self.cur.col += width;
        }
    }

    /// Prints `count` copies of a narrow character, a row segment at a time where the row has
    /// no wide characters or marks to repair. Used for printable ASCII runs and REP.
    fn print_run(&mut self, chars: &[u8], repeat: Option<(char, usize)>) {
        let total = match repeat {
            Some((_, n)) => n,
            None => chars.len(),
        };
        let hidden = self.pen.has(flag::HIDDEN);
        let mut done = 0;
        while done < total {
            if self.cur.pending {
                self.cur.pending = false;
                if self.modes.autowrap {
                    self.wrap_line();
                }
            }
            let col = self.cur.col;
            let n = (total - done).min(self.cols - col);
            let pen = self.pen;
            let cur_row = self.cur.row;
            let row = self.grid_mut().row_mut(cur_row);
            let wrote = match repeat {
                Some((ch, _)) => {
                    let ch = if hidden { ' ' } else { ch };
                    row.write_plain(col, std::iter::repeat_n(ch, n), pen)
                }
                None => {
                    let run = &chars[done..done + n];
                    if hidden {
                        row.write_plain(col, run.iter().map(|_| ' '), pen)
                    } else {
                        row.write_plain(col, run.iter().map(|&b| char::from(b)), pen)
                    }
                }
            };
            if wrote {
                done += n;
                self.advance(n);
            } else {
                let ch = match repeat {
                    Some((ch, _)) => ch,
                    None => char::from(chars[done]),
                };
                self.print(ch);
                done += 1;
            }
        }
    }

    /// Prints a run of printable ASCII (0x20..=0x7e), the fast path. Equivalent to calling
    /// `print` for each byte.
    pub(super) fn print_ascii(&mut self, run: &[u8]) {
        let Some(&last) = run.last() else {
            return;
        };
        if self.modes.insert || self.gl_charset() != Charset::Ascii {
            for &b in run {
                self.print(char::from(b));
            }
            return;
        }
        self.print_run(run, None);
        self.last_char = Some(char::from(last));
    }

    /// The state plain text leaves when it ends in `CR LF` after at least `rows` line feeds in
    /// a whole-screen scroll region, for rows that later text scrolls off anyway (see
    /// `Screen::skip_scrolled_off`): the cursor at the start of the bottom row with no wrap
    /// pending, and `last` (the last character it printed, if any) kept for REP.
    pub(super) fn scrolled_off_at_bottom(&mut self, last: Option<char>) {
        self.cur = Pos { row: self.rows - 1, col: 0, pending: false };
        if last.is_some() {
            self.last_char = last;
        }
    }

    /// REP: prints the last graphic character `count` more times.
    pub(super) fn repeat(&mut self, count: usize) {
        let Some(raw) = self.last_char else {
            return;
        };
        let mapped = if raw.is_ascii() { self.gl_charset().map(raw) } else { raw };
        if !self.modes.insert && mapped.width() == Some(1) {
            self.print_run(&[], Some((mapped, count)));
            self.last_char = Some(raw);
        } else {
            for _ in 0..count {
                self.print(raw);
            }
        }
    }

    /// Appends a zero-width character to the character before the cursor.
    fn combine(&mut self, mark: char) {
        let mut col = if self.cur.pending {
            self.cur.col
        } else if self.cur.col == 0 {
            return; // nothing to combine with
        } else {
            self.cur.col - 1
        };
        let row = self.cur.row;
        let grid = self.grid_mut();
        let row = grid.row_mut(row);
        if col > 0 && row.get(col).is_some_and(Cell::is_continuation) {
            col -= 1;
        }
        row.push_mark(col, mark);
    }

    /// Autowrap: marks the row as continued, moves to the start of the next line.
    fn wrap_line(&mut self) {
        let row = self.cur.row;
        self.grid_mut().row_mut(row).wrapped = true;
        self.index();
        self.cur.col = 0;
    }

    // ---- cursor motion --------------------------------------------------------------------

    /// IND / LF: down one line, scrolling the region when at its bottom.
    pub(super) fn index(&mut self) {
        if self.cur.row == self.bottom {
            let (top, bottom) = (self.top, self.bottom);
            self.scroll_region_up(top, bottom, 1);
        } else if self.cur.row + 1 < self.rows {
            self.cur.row += 1;
        }
        self.cur.pending = false;
    }

    /// LF, VT, FF: index, plus carriage return under LNM.
    pub(super) fn linefeed(&mut self) {
        self.index();
        if self.modes.newline {
            self.carriage_return();
        }
    }

    /// RI: up one line, scrolling the region down when at its top.
    pub(super) fn reverse_index(&mut self) {
        if self.cur.row == self.top {
            let blank = self.blank();
            let (top, bottom) = (self.top, self.bottom);
            self.grid_mut().scroll_down(top, bottom, 1, blank);
        } else if self.cur.row > 0 {
            self.cur.row -= 1;
        }
        self.cur.pending = false;
    }

    /// CR.
    pub(super) fn carriage_return(&mut self) {
        self.cur.col = 0;
        self.cur.pending = false;
    }

    /// CUU: stops at the top margin if the cursor is below it, else at the top of the screen.
    pub(super) fn cursor_up(&mut self, n: usize) {
        let min = if self.cur.row < self.top { 0 } else { self.top };
        self.cur.row = self.cur.row.saturating_sub(n).max(min);
        self.cur.pending = false;
    }

    /// CUD: stops at the bottom margin if the cursor is above it, else at the screen bottom.
    pub(super) fn cursor_down(&mut self, n: usize) {
        let max = if self.cur.row > self.bottom { self.rows - 1 } else { self.bottom };
        self.cur.row = self.cur.row.saturating_add(n).min(max);
        self.cur.pending = false;
    }

    /// CUF.
    pub(super) fn cursor_forward(&mut self, n: usize) {
        self.cur.col = self.cur.col.saturating_add(n).min(self.cols - 1);
        self.cur.pending = false;
    }

    /// CUB and BS (no reverse wrap: a pending wrap does not count as a column).
    pub(super) fn cursor_back(&mut self, n: usize) {
        self.cur.col = self.cur.col.saturating_sub(n);
        self.cur.pending = false;
    }

    /// xterm's `CursorSet`: `row`/`col` are 0-based and relative to the scroll region's top
    /// when origin mode is on; the result is clamped to the region (origin) or the screen.
    pub(super) fn set_cursor(&mut self, row: i64, col: i64) {
        let (row, max_row) =
            if self.modes.origin { (row + self.top as i64, self.bottom as i64) } else { (row, self.rows as i64 - 1) };
        self.cur.row = row.clamp(0, max_row.max(0)) as usize;
        self.cur.col = col.clamp(0, self.cols as i64 - 1) as usize;
        self.cur.pending = false;
    }

    /// The cursor row as CUP would address it (relative to the region in origin mode).
    pub(super) fn cursor_row_rel(&self) -> i64 {
        if self.modes.origin { (self.cur.row as i64 - self.top as i64).max(0) } else { self.cur.row as i64 }
    }

    /// HT: to the next tab stop or the last column. A pending wrap stays pending.
    pub(super) fn tab(&mut self, count: usize) {
        for _ in 0..count {
            match self.tabs.next_after(self.cur.col, self.cols) {
                Some(col) => {
                    self.cur.col = col;
                    self.cur.pending = false;
                }
                None => {
                    if self.cur.col != self.cols - 1 {
                        self.cur.col = self.cols - 1;
                        self.cur.pending = false;
                    }
                    break;
                }
            }
        }
    }

    /// CBT: to the previous tab stop or column 0.
    pub(super) fn back_tab(&mut self, count: usize) {
        for _ in 0..count {
            if self.cur.col == 0 {
                break;
            }
            self.cur.col = self.tabs.prev_before(self.cur.col).unwrap_or(0);
            self.cur.pending = false;
        }
    }

    // ---- erasing and editing --------------------------------------------------------------

    /// EL 0/1/2. With a wrap pending (the cursor "past" the last column), EL 0 erases
    /// nothing and all three keep the pending wrap, as tmux and alacritty do (xterm erases the
    /// last column and cancels the wrap; docs/screen-model.md gives the evidence).
    pub(super) fn erase_line(&mut self, mode: u16) {
        if !self.cur.pending {
            self.erase_in_row(mode);
        } else if mode != 0 {
            self.erase_in_row(mode);
            self.cur.pending = true;
        }
    }

    /// The row part of EL and ED: mode 0 from the cursor to the end of the row, 1 from its
    /// start to the cursor, 2 all of it; cancels a pending wrap (xterm).
    fn erase_in_row(&mut self, mode: u16) {
        let blank = self.blank();
        let (row, col, cols) = (self.cur.row, self.cur.col, self.cols);
        let r = self.grid_mut().row_mut(row);
        match mode {
            0 => {
                r.erase(col, cols, blank);
                r.wrapped = false;
            }
            1 => r.erase(0, col + 1, blank),
            2 => {
                r.erase(0, cols, blank);
                r.wrapped = false;
            }
            _ => return,
        }
        self.cur.pending = false;
    }

    /// ED 0/1/2, and 3 (erase the scrollback: the history, not the screen, as in xterm).
    pub(super) fn erase_display(&mut self, mode: u16) {
        let blank = self.blank();
        let row = self.cur.row;
        match mode {
            0 => {
                self.erase_in_row(0);
                let rows = self.rows;
                let grid = self.grid_mut();
                for r in row + 1..rows {
                    grid.row_mut(r).reset(blank);
                }
            }
            1 => {
                let grid = self.grid_mut();
                for r in 0..row {
                    grid.row_mut(r).reset(blank);
                }
                self.erase_in_row(1);
            }
            2 => {
                self.grid_mut().clear(blank);
                self.cur.pending = false;
            }
            3 => self.history.clear(),
            _ => {}
        }
    }

    /// ECH.
    pub(super) fn erase_chars(&mut self, n: usize) {
        let blank = self.blank();
        let (row, col) = (self.cur.row, self.cur.col);
        let r = self.grid_mut().row_mut(row);
        r.erase(col, col.saturating_add(n), blank);
        r.wrapped = false;
        self.cur.pending = false;
    }

    /// ICH.
    pub(super) fn insert_chars(&mut self, n: usize) {
        let blank = self.blank();
        let (row, col) = (self.cur.row, self.cur.col);
        self.grid_mut().row_mut(row).insert_blanks(col, n, blank);
        self.cur.pending = false;
    }

    /// DCH.
    pub(super) fn delete_chars(&mut self, n: usize) {
        let blank = self.blank();
        let (row, col) = (self.cur.row, self.cur.col);
        self.grid_mut().row_mut(row).delete(col, n, blank);
        self.cur.pending = false;
    }

    fn in_region(&self) -> bool {
        self.cur.row >= self.top && self.cur.row <= self.bottom
    }

    /// IL: only inside the scroll region; moves the cursor to column 0 (xterm).
    pub(super) fn insert_lines(&mut self, n: usize) {
        if !self.in_region() {
            return;
        }
        let blank = self.blank();
        let (row, bottom) = (self.cur.row, self.bottom);
        self.grid_mut().scroll_down(row, bottom, n, blank);
        self.cur.col = 0;
        self.cur.pending = false;
    }

    /// DL: only inside the scroll region; moves the cursor to column 0 (xterm).
    pub(super) fn delete_lines(&mut self, n: usize) {
        if !self.in_region() {
            return;
        }
        let blank = self.blank();
        let (row, bottom) = (self.cur.row, self.bottom);
        self.grid_mut().scroll_up(row, bottom, n, blank);
        self.cur.col = 0;
        self.cur.pending = false;
    }

    /// SU: scrolls the region up; the cursor (and a pending wrap) stay.
    pub(super) fn scroll_up(&mut self, n: usize) {
        let (top, bottom) = (self.top, self.bottom);
        self.scroll_region_up(top, bottom, n);
    }

    /// Scrolls `top..=bottom` up by `n` as output does (IND, LF, autowrap, SU): on the main
    /// screen with the region starting at the top row, the rows scrolled off go into the
    /// history (xterm saves lines whenever the top margin is the top row).
    fn scroll_region_up(&mut self, top: usize, bottom: usize, n: usize) {
        let blank = self.blank();
        if self.alt_mode.is_none() && top == 0 && self.history.keeps_rows() {
            self.main.scroll_up_into(top, bottom, n, blank, Some(&mut self.history));
        } else {
            self.grid_mut().scroll_up(top, bottom, n, blank);
        }
    }

    /// SD: scrolls the region down; the cursor stays.
    pub(super) fn scroll_down(&mut self, n: usize) {
        let blank = self.blank();
        let (top, bottom) = (self.top, self.bottom);
        self.grid_mut().scroll_down(top, bottom, n, blank);
    }

    /// DECSTBM with raw 1-based parameters (0 = default). Invalid regions are ignored, as in
    /// xterm; a valid one homes the cursor.
    pub(super) fn set_scroll_region(&mut self, top: u16, bottom: u16) {
        let top = usize::from(top.max(1));
        let bottom = match usize::from(bottom) {
            0 => self.rows,
            b if b > self.rows => self.rows,
            b => b,
        };
        if bottom > top {
            self.top = top - 1;
            self.bottom = bottom - 1;
            self.set_cursor(0, 0);
        }
    }

    // ---- save / restore, screens, resets ---------------------------------------------------

    /// DECSC: into the active buffer's slot.
    pub(super) fn save_cursor(&mut self) {
        let slot = self.slot();
        self.saved[slot] = SavedCursor {
            saved: true,
            pos: self.cur,
            pen: self.pen,
            origin: self.modes.origin,
            autowrap: self.modes.autowrap,
            charsets: self.charsets,
            gl: self.gl,
        };
    }

    /// DECRC: from the active buffer's slot (a virgin slot homes the cursor, resets the pen,
    /// origin mode and character sets).
    pub(super) fn restore_cursor(&mut self) {
        let s = self.saved[self.slot()];
        if s.saved {
            self.charsets = s.charsets;
            self.gl = s.gl;
            self.modes.autowrap = s.autowrap;
        } else {
            self.charsets = [Charset::Ascii; 2];
            self.gl = 0;
        }
        self.modes.origin = s.origin;
        self.pen = s.pen;
        let row = s.pos.row as i64 - if s.origin { self.top as i64 } else { 0 };
        self.set_cursor(row, s.pos.col as i64);
        self.cur.pending = s.pos.pending && self.cur.col == self.cols - 1;
    }

    /// Shows the alternate screen (no-op if already shown).
    fn show_alternate(&mut self, mode: AltMode) {
        if self.alt_mode.is_none() {
            self.alt_mode = Some(mode);
        }
    }

    /// Shows the main screen (no-op if already shown).
    fn show_main(&mut self) {
        self.alt_mode = None;
    }

    /// DECSET/DECRST 47, 1047, 1048, 1049.
    pub(super) fn alternate_screen(&mut self, code: u16, on: bool) {
        match (code, on) {
            (47, true) => self.show_alternate(AltMode::Alt47),
            (1047, true) => self.show_alternate(AltMode::Alt1047),
            (47, false) => self.show_main(),
            (1047, false) => {
                if self.alt_mode.is_some() {
                    self.erase_display(2);
                }
                self.show_main();
            }
            (1048, true) => self.save_cursor(),
            (1048, false) => self.restore_cursor(),
            (1049, true) => {
                self.save_cursor();
                self.show_alternate(AltMode::Alt1049);
                self.erase_display(2);
            }
            (1049, false) => {
                self.show_main();
                self.restore_cursor();
            }
            _ => {}
        }
    }

    /// RIS: power-on state. The title and the history survive, as in xterm (they belong to
    /// the window).
    pub(super) fn full_reset(&mut self) {
        let history = std::mem::take(&mut self.history);
        let title = std::mem::take(&mut self.title);
        let icon_name = std::mem::take(&mut self.icon_name);
        let replies = std::mem::take(&mut self.replies);
        let events = std::mem::take(&mut self.events);
        *self = Term::new(self.cols, self.rows);
        self.history = history;
        self.title = title;
        self.icon_name = icon_name;
        self.replies = replies;
        self.events = events;
    }

    /// DECSTR: soft reset. Screen contents, cursor position, tab stops, mouse and paste modes
    /// are kept; the active buffer's DECSC slot is set to home with the reset pen (xterm).
    pub(super) fn soft_reset(&mut self) {
        self.modes.cursor_visible = true;
        self.modes.cursor_blink = false;
        self.modes.cursor_style = 0;
        self.modes.insert = false;
        self.modes.origin = false;
        self.modes.autowrap = true;
        self.modes.app_cursor = false;
        self.modes.app_keypad = false;
        self.top = 0;
        self.bottom = self.rows - 1;
        self.charsets = [Charset::Ascii; 2];
        self.gl = 0;
        self.pen = Attrs::default();
        self.cur.pending = false;
        let slot = self.slot();
        self.saved[slot] = SavedCursor { saved: true, ..SavedCursor::default() };
    }

    /// DECALN: fills the screen with `E`, resets margins, origin mode and the pen, homes.
    /// With nothing printed before, `E` becomes the character REP repeats: a keyframe can only
    /// paint the screen by printing, so the model that reads it back has printed (the
    /// proptest `the_model_reads_its_own_keyframe_back_to_the_same_state` found this); a REP
    /// right after a DECALN on a fresh terminal is the only sequence that tells the difference.
    pub(super) fn alignment_test(&mut self) {
        self.last_char.get_or_insert('E');
        self.modes.origin = false;
        self.pen = Attrs::default();
        self.top = 0;
        self.bottom = self.rows - 1;
        self.set_cursor(0, 0);
        let cols = self.cols;
        let grid = self.grid_mut();
        grid.clear(Cell::BLANK);
        for r in 0..grid.rows().len() {
            let row = grid.row_mut(r);
            row.write_plain(0, std::iter::repeat_n('E', cols), Attrs::default());
        }
    }

    /// DECCOLM (`CSI ? 3 h` and `l`) without the width change: the size belongs to the
    /// session, not to the program, so only the side effects that tmux and alacritty both
    /// perform are kept: the shown screen is cleared (with the pen's background, nothing goes
    /// into the history) and the cursor goes home. The scroll region is reset too, as the DEC
    /// manuals and alacritty do (tmux keeps it).
    fn column_mode(&mut self) {
        self.top = 0;
        self.bottom = self.rows - 1;
        let blank = self.blank();
        self.grid_mut().clear(blank);
        self.set_cursor(0, 0);
    }

    /// SM/RM (ANSI modes): 4 IRM, 20 LNM.
    pub(super) fn ansi_mode(&mut self, code: u16, on: bool) {
        match code {
            4 => self.modes.insert = on,
            20 => self.modes.newline = on,
            _ => {}
        }
    }

    /// DECSET/DECRST.
    pub(super) fn private_mode(&mut self, code: u16, on: bool) {
        let mouse = |mode| if on { mode } else { MouseMode::None };
        match code {
            1 => self.modes.app_cursor = on,
            6 => {
                self.modes.origin = on;
                self.set_cursor(0, 0);
            }
            3 => self.column_mode(),
            7 => self.modes.autowrap = on,
            9 => self.modes.mouse = mouse(MouseMode::Press),
            12 => self.modes.cursor_blink = on,
            25 => self.modes.cursor_visible = on,
            47 | 1047 | 1048 | 1049 => self.alternate_screen(code, on),
            1000 => self.modes.mouse = mouse(MouseMode::PressRelease),
            1002 => self.modes.mouse = mouse(MouseMode::ButtonMotion),
            1003 => self.modes.mouse = mouse(MouseMode::AnyMotion),
            1004 => self.modes.focus_events = on,
            1005 | 1006 | 1015 => {
                let encoding = match code {
                    1005 => MouseEncoding::Utf8,
                    1006 => MouseEncoding::Sgr,
                    _ => MouseEncoding::Urxvt,
                };
                if on {
                    self.modes.mouse_encoding = encoding;
                } else if self.modes.mouse_encoding == encoding {
                    self.modes.mouse_encoding = MouseEncoding::Default;
                }
            }
            2004 => self.modes.bracketed_paste = on,
            _ => {}
        }
    }

    /// The modes as [`Modes`] (what `Screen::modes` reports).
    pub(super) fn public_modes(&self) -> Modes {
        let m = &self.modes;
        Modes {
            alternate_screen: self.alt_mode.is_some(),
            bracketed_paste: m.bracketed_paste,
            app_cursor_keys: m.app_cursor,
            app_keypad: m.app_keypad,
            cursor_visible: m.cursor_visible,
            autowrap: m.autowrap,
            origin: m.origin,
            insert: m.insert,
            mouse: m.mouse,
            mouse_encoding: m.mouse_encoding,
            focus_events: m.focus_events,
        }
    }

    /// The reported modes (see [`Mode`]) as bits, to compare before and after an operation.
    pub(super) fn mode_bits(&self) -> u16 {
        Mode::bits(&self.public_modes())
    }

    /// Reports every reported mode that differs from `before` (taken with `mode_bits`).
    pub(super) fn report_modes(&mut self, before: u16) {
        let after = self.mode_bits();
        Mode::report_changes(before, after, &mut self.events);
    }

    /// Queues an answer to a terminal query, dropping it whole if the buffer is full.
    pub(super) fn reply(&mut self, bytes: &[u8]) {
        if self.replies.len() + bytes.len() <= MAX_PENDING_REPLIES {
            self.replies.extend_from_slice(bytes);
        }
    }

    /// OSC 0/1/2 text: control characters are dropped and the length is bounded.
    pub(super) fn clean_title(raw: &[u8]) -> String {
        let text = String::from_utf8_lossy(raw);
        let mut out = String::with_capacity(text.len().min(MAX_TITLE_BYTES));
        for c in text.chars().filter(|c| !c.is_control()) {
            if out.len() + c.len_utf8() > MAX_TITLE_BYTES {
                break;
            }
            out.push(c);
        }
        out
    }

    /// Changes the size (already validated) like tmux: each buffer keeps its cursor row
    /// visible (see `Grid::resize`); the main screen's rows go to and come back from the
    /// history, the alternate screen's are dropped and come back blank. Content stays left
    /// (no reflow); the region is reset.
    pub(super) fn resize(&mut self, cols: usize, rows: usize) {
        if cols == self.cols && rows == self.rows {
            return;
        }
        let cols_changed = cols != self.cols;
        let alt = self.alt_mode.is_some();
        // The main screen's cursor is the live one, or while the alternate screen is shown
        // the one saved on entering it (1049) or the shared one (47, 1047).
        let main_row = if alt && self.saved[0].saved { self.saved[0].pos.row } else { self.cur.row };
        let alt_row = if alt { self.cur.row } else { self.saved[1].pos.row };
        let history = self.history.keeps_rows().then_some(&mut self.history);
        let main_shift = self.main.resize(cols, rows, main_row, history);
        let alt_shift = self.alt.resize(cols, rows, alt_row, None);
        self.cols = cols;
        self.rows = rows;
        self.top = 0;
        self.bottom = rows - 1;
        let fit = |p: &mut Pos, shift: isize| {
            p.row = p.row.saturating_add_signed(shift).min(rows - 1);
            p.col = p.col.min(cols - 1);
            if cols_changed || p.col != cols - 1 {
                p.pending = false;
            }
        };
        fit(&mut self.cur, if alt { alt_shift } else { main_shift });
        fit(&mut self.saved[0].pos, main_shift);
        fit(&mut self.saved[1].pos, alt_shift);
    }
}
