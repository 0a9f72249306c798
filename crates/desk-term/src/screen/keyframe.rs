//! Renders the model into a keyframe: bytes that put a terminal in any prior state into the
//! model's state, so that the raw PTY bytes that follow mean the same to it as to the model.
//!
//! Owns the order of restoration, which is what makes a keyframe correct:
//!
//! 1. `ESC c` (RIS). One sequence that every VT100 descendant implements and that resets what
//!    we could never list exhaustively: unknown private modes, the kitty keyboard stack, tab
//!    stops, charsets, DECSC slots, the alternate screen. Then `CSI ? 7 h` so drawing does not
//!    depend on the client's configured autowrap default.
//! 2. The main screen: cells in row order, SGR changes only where the attributes change, runs
//!    of erased cells with a background colour as `ECH`. A row whose text wrapped into the next
//!    one ends by printing its last column and the next row starts without positioning, so the
//!    client's autowrap sets its own line-wrap flag (selection and reflow then work there).
//! 3. The DECSC slots and the alternate screen. A slot is restored by putting the client in the
//!    saved state (origin mode, position, pending wrap, pen, charsets, autowrap) and saving it
//!    there with `ESC 7`. With the alternate screen active, the main slot is set up first and
//!    the screen is entered with the same DECSET the application used (1049 performs the save
//!    itself; 47/1047 do not save), then the alternate grid is drawn and its own slot saved.
//!    With the main screen active only the main slot is restored: the content and DECSC slot
//!    of an inactive alternate buffer are not (they would only show if an application
//!    re-entered with 47 or 1047 without clearing, and drawing them would double the size of
//!    every keyframe taken after a full-screen program exits).
//! 4. Tab stops (only if not the default), the character the next `REP` repeats, the scroll
//!    region (DECSTBM homes the cursor, so it comes before positioning), origin mode.
//! 5. The cursor. A pending wrap ("cursor past the last column") is recreated by printing the
//!    last column's character again.
//! 6. Everything that does not move the cursor: pen, G0/G1 and SO/SI, autowrap, insert mode,
//!    LNM, cursor visibility/blink/style, keypad and cursor-key modes, bracketed paste, mouse
//!    mode and encoding, focus events, then the title (OSC 2, and OSC 1 if the icon name
//!    differs).
//!
//! Known limits, all corner cases: a wrapped row is only continued when its last column and
//! the next row's first column hold characters (a wide character at the start of the next row
//! also works); a pending wrap over an empty last column that no DECSC slot holds (reachable
//! by SU/SD, or by a `?47` screen switch, right after writing the last column) is redrawn with
//! a space in that cell; with
//! origin mode on, a cursor outside the scroll region (reachable only by DECRC) is clamped
//! into it, unless the DECSC slot still holds that position (then `ESC 8` restores both
//! cases exactly).

use std::fmt::Write as _;

use unicode_width::UnicodeWidthChar;

use super::cell::{Attrs, Cell};
use super::grid::{Grid, Row};
use super::modes::{Charset, MouseEncoding, MouseMode};
use super::term::{AltMode, SavedCursor, Term};

/// The client terminal's state as far as the keyframe has set it.
struct Client {
    out: Vec<u8>,
    pen: Attrs,
    /// Known cursor position; `col == cols` means pending wrap after the last column.
    pos: Option<(usize, usize)>,
    origin: bool,
    autowrap: bool,
    charsets: [Charset; 2],
    gl: usize,
    cols: usize,
}

impl Client {
    fn new(cols: usize) -> Client {
        Client {
            out: Vec::with_capacity(4096),
            pen: Attrs::default(),
            pos: None,
            origin: false,
            autowrap: true,
            charsets: [Charset::Ascii; 2],
            gl: 0,
            cols,
        }
    }

    fn emit(&mut self, s: &str) {
        self.out.extend_from_slice(s.as_bytes());
    }

    fn set_pen(&mut self, attrs: &Attrs) {
        if self.pen != *attrs {
            let s = attrs.sgr();
            self.emit(&s);
            self.pen = *attrs;
        }
    }

    fn set_origin(&mut self, on: bool) {
        if self.origin != on {
            self.emit(if on { "\x1b[?6h" } else { "\x1b[?6l" });
            self.origin = on;
            self.pos = None; // homes to the region's top, which the caller may not know
        }
    }

    fn set_autowrap(&mut self, on: bool) {
        if self.autowrap != on {
            self.emit(if on { "\x1b[?7h" } else { "\x1b[?7l" });
            self.autowrap = on;
        }
    }

    fn set_charsets(&mut self, charsets: [Charset; 2], gl: usize) {
        for (i, intro) in ["\x1b(", "\x1b)"].into_iter().enumerate() {
            if self.charsets[i] != charsets[i] {
                self.emit(intro);
                self.out.push(charsets[i].final_byte());
                self.charsets[i] = charsets[i];
            }
        }
        if self.gl != gl {
            self.out.push(if gl == 1 { 0x0E } else { 0x0F });
            self.gl = gl;
        }
    }

    /// Puts the client in the state used for drawing cells: absolute addressing, autowrap on,
    /// ASCII in GL (cells already hold the mapped characters).
    fn drawing_state(&mut self) {
        self.set_origin(false);
        self.set_autowrap(true);
        self.set_charsets([Charset::Ascii; 2], 0);
    }

    /// Moves to an absolute position with the region still full-screen.
    fn cup(&mut self, row: usize, col: usize) {
        if self.pos == Some((row, col)) {
            return;
        }
        match self.pos {
            Some((r, c)) if r == row && c < col && c < self.cols => {
                let _ = write!(self, "\x1b[{}C", col - c);
            }
            _ => {
                let _ = write!(self, "\x1b[{};{}H", row + 1, col + 1);
            }
        }
        self.pos = Some((row, col));
    }

    /// Writes the character (and marks) of `cell`, at column `col` of `row`.
    fn put_cell(&mut self, grid_row: &Row, row: usize, col: usize, cell: &Cell) {
        self.set_pen(&cell.attrs);
        let ch = if cell.is_empty() { ' ' } else { cell.ch };
        let mut buf = [0u8; 4];
        self.out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
        if cell.has_marks() {
            for m in grid_row.marks_at(col) {
                self.out.extend_from_slice(m.encode_utf8(&mut buf).as_bytes());
            }
        }
        let width = if cell.is_wide() { 2 } else { 1 };
        self.pos = Some((row, col + width));
    }

    /// Draws a whole grid onto a blank client screen.
    fn draw_grid(&mut self, grid: &Grid) {
        self.drawing_state();
        let rows = grid.rows();
        let mut continuing = false;
        for (r, row) in rows.iter().enumerate() {
            let cells = row.cells();
            let mut c = 0;
            while c < cells.len() {
                let cell = cells[c];
                if cell.is_continuation() {
                    c += 1;
                    continue;
                }
                if cell.is_empty() {
                    if cell.attrs == Attrs::default() {
                        c += 1;
                        continue;
                    }
                    let mut end = c + 1;
                    while end < cells.len() && cells[end].is_empty() && cells[end].attrs == cell.attrs {
                        end += 1;
                    }
                    self.cup(r, c);
                    self.set_pen(&cell.attrs);
                    let _ = write!(self, "\x1b[{}X", end - c);
                    c = end;
                    continue;
                }
                if !(continuing && c == 0) {
                    self.cup(r, c);
                }
                self.put_cell(row, r, c, &cell);
                c += if cell.is_wide() { 2 } else { 1 };
            }
            continuing = false;
            if !wrap_is_drawn(grid, r) {
                continue;
            }
            if self.pos == Some((r, self.cols)) {
                // The last column was printed last: the next print wraps.
                continuing = true;
            } else if self.cols >= 2 {
                // A wide character that did not fit in the last column wraps early.
                self.cup(r, self.cols - 1);
                continuing = true;
            }
        }
    }

    /// Prints the character in the last column of `row` again, leaving the cursor in the
    /// pending-wrap state. `rel_row` is the row as CUP must address it. Returns the cell's
    /// position and attributes when it was empty (a space had to be printed there).
    fn redraw_last_column(&mut self, grid: &Grid, row: usize, rel_row: usize) -> Option<(usize, usize, Attrs)> {
        let grid_row = grid.row(row)?;
        let cells = grid_row.cells();
        let mut col = self.cols - 1;
        if col > 0 && cells.get(col).is_some_and(Cell::is_continuation) {
            col -= 1;
        }
        let cell = cells.get(col).copied().unwrap_or(Cell::BLANK);
        self.pos = None;
        let _ = write!(self, "\x1b[{};{}H", rel_row + 1, col + 1);
        self.put_cell(grid_row, row, col, &cell);
        self.pos = Some((row, self.cols));
        cell.is_empty().then_some((row, col, cell.attrs))
    }

    /// Puts the client in the state saved in `slot` (on the grid being shown), ready for the
    /// caller's `ESC 7` or `CSI ? 1049 h`.
    fn enter_saved_state(&mut self, grid: &Grid, slot: &SavedCursor) {
        self.drawing_state();
        // The region is full-screen here, so absolute and origin addressing agree.
        self.set_origin(slot.origin);
        let printed_over = if slot.pos.pending {
            self.redraw_last_column(grid, slot.pos.row, slot.pos.row)
        } else {
            self.pos = None;
            self.cup(slot.pos.row, slot.pos.col);
            None
        };
        self.set_pen(&slot.pen);
        self.set_charsets(slot.charsets, slot.gl);
        self.set_autowrap(slot.autowrap);
        if let Some((row, col, attrs)) = printed_over {
            // The pending wrap needed a character in an empty cell: save the state, erase the
            // cell again, and come back (DECRC restores the pending wrap too).
            self.emit("\x1b7");
            let _ = write!(self, "\x1b[{};{}H", row + 1, col + 1);
            self.set_pen(&attrs);
            self.emit("\x1b[X\x1b8");
            self.pen = slot.pen;
            self.pos = Some((slot.pos.row, self.cols));
            if wrap_is_drawn(grid, row) {
                self.rewrap(grid, row, slot);
            }
        }
    }

    /// The erase in [`Client::enter_saved_state`] (ECH) also cleared the wrap flag of a row whose
    /// wrap the keyframe had made by printing the next row's wide first character from the empty
    /// last column. Make it again the same way, between a save and a restore of the cursor, so
    /// the state the caller saves next is still `slot`'s.
    fn rewrap(&mut self, grid: &Grid, row: usize, slot: &SavedCursor) {
        let Some(next) = grid.row(row + 1) else { return };
        let first = next.cells().first().copied().unwrap_or(Cell::BLANK);
        self.emit("\x1b7");
        self.drawing_state();
        self.pos = None;
        let cols = self.cols;
        let _ = write!(self, "\x1b[{};{}H", row + 1, cols);
        self.put_cell(next, row + 1, 0, &first);
        self.emit("\x1b8");
        // DECRC put back everything DECSC saved: the client is in `slot`'s state again.
        self.origin = slot.origin;
        self.autowrap = slot.autowrap;
        self.charsets = slot.charsets;
        self.gl = slot.gl;
        self.pen = slot.pen;
        self.pos = Some((slot.pos.row, self.cols));
    }

    /// Makes the client's "last printed character" (used by REP) match the model's: print
    /// again a cell that shows it, or print it into an empty cell and erase that cell again.
    fn restore_last_char(&mut self, term: &Term) {
        let Some(raw) = term.last_char else {
            return;
        };
        let wanted = if raw.is_ascii() { term.gl_charset().map(raw) } else { raw };
        let width = if wanted.width() == Some(2) { 2 } else { 1 };
        let grid = term.grid();
        let shows = |row: &Row, col: usize| {
            row.get(col).is_some_and(|c| c.ch == wanted && !c.has_marks() && !c.is_continuation())
        };
        let empty_run = |row: &Row, col: usize| {
            let first = row.get(col).copied();
            (0..width)
                .all(|i| row.get(col + i).is_some_and(|c| c.is_empty() && Some(c.attrs) == first.map(|f| f.attrs)))
        };
        // Best: the cell the application printed last, just before the cursor.
        let cur = term.cur;
        let mut preferred = None;
        if let Some(row) = grid.row(cur.row) {
            let mut col = if cur.pending { cur.col } else { cur.col.saturating_sub(1) };
            if col > 0 && row.get(col).is_some_and(Cell::is_continuation) {
                col -= 1;
            }
            if shows(row, col) {
                preferred = Some((cur.row, col));
            }
        }
        let mut shown = None;
        let mut empty = None;
        for (r, row) in grid.rows().iter().enumerate().rev() {
            for col in (0..row.len()).rev() {
                if shown.is_none() && shows(row, col) {
                    shown = Some((r, col));
                }
                // ECH clears a row's wrap flag, so a row whose wrap the client has cannot
                // lend a cell.
                if empty.is_none() && !wrap_is_drawn(grid, r) && empty_run(row, col) {
                    empty = Some((r, col));
                }
            }
        }
        self.drawing_state();
        match (preferred, empty, shown) {
            (Some((r, col)), _, _) | (None, None, Some((r, col))) => {
                // Print a cell again with its own content and attributes.
                if let Some(row) = grid.row(r)
                    && let Some(cell) = row.get(col).copied()
                {
                    self.cup(r, col);
                    self.put_cell(row, r, col, &cell);
                }
            }
            (None, Some((r, col)), _) => {
                // Print it into an empty cell, then erase that cell back to what it was.
                let attrs = grid.row(r).and_then(|row| row.get(col)).map(|c| c.attrs).unwrap_or_default();
                self.cup(r, col);
                let mut buf = [0u8; 4];
                self.out.extend_from_slice(wanted.encode_utf8(&mut buf).as_bytes());
                self.pos = None;
                self.cup(r, col);
                self.set_pen(&attrs);
                let _ = write!(self, "\x1b[{width}X");
            }
            (None, None, None) => {}
        }
    }
}

/// True when the keyframe reproduces row `r`'s wrap flag: the row wrapped, the next row exists
/// and starts with a character, and either the row's last column holds one (printed last, so
/// the next print autowraps) or the next row starts with a wide character (which wraps early
/// from the last column by itself).
fn wrap_is_drawn(grid: &Grid, r: usize) -> bool {
    let (Some(row), Some(next)) = (grid.row(r), grid.row(r + 1)) else {
        return false;
    };
    let first = next.cells().first().copied().unwrap_or(Cell::BLANK);
    let last = row.cells().last().copied().unwrap_or(Cell::BLANK);
    row.wrapped && !first.is_empty() && !first.is_continuation() && (!last.is_empty() || first.is_wide())
}

impl std::fmt::Write for Client {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.out.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// Renders `term` as a keyframe (see the module documentation for the order).
pub(super) fn render(term: &Term) -> Vec<u8> {
    let mut client = Client::new(term.cols);
    client.emit("\x1bc\x1b[?7h");

    client.draw_grid(&term.main);
    let [main_slot, alt_slot] = term.saved;
    match term.alt_mode {
        Some(mode) => {
            if main_slot.saved || mode == AltMode::Alt1049 {
                client.enter_saved_state(&term.main, &main_slot);
            }
            if mode == AltMode::Alt1049 {
                client.emit("\x1b[?1049h");
            } else {
                if main_slot.saved {
                    client.emit("\x1b7");
                }
                let _ = write!(client, "\x1b[?{}h", mode.code());
            }
            client.pos = None;
            client.set_pen(&Attrs::default());
            client.emit("\x1b[2J");
            client.draw_grid(&term.alt);
            if alt_slot.saved {
                client.enter_saved_state(&term.alt, &alt_slot);
                client.emit("\x1b7");
            }
        }
        None => {
            if main_slot.saved {
                client.enter_saved_state(&term.main, &main_slot);
                client.emit("\x1b7");
            }
        }
    }

    // Things that move the cursor, before the final positioning.
    client.drawing_state();
    if !term.tabs.is_default_within(term.cols) {
        client.emit("\x1b[3g");
        for col in 0..term.cols {
            if term.tabs.is_set(col) {
                client.cup(0, col);
                client.emit("\x1bH");
            }
        }
    }
    client.restore_last_char(term);
    if term.top != 0 || term.bottom != term.rows - 1 {
        let _ = write!(client, "\x1b[{};{}r", term.top + 1, term.bottom + 1);
        client.pos = Some((0, 0));
    }
    client.set_origin(term.modes.origin);

    // The cursor, addressed relative to the region in origin mode.
    let cur = term.cur;
    let rel_row = if term.modes.origin { cur.row.clamp(term.top, term.bottom) - term.top } else { cur.row };
    let active_slot = term.saved[usize::from(term.alt_mode.is_some())];
    let outside_region = term.modes.origin && (cur.row < term.top || cur.row > term.bottom);
    let slot_holds_cursor = active_slot.saved && active_slot.pos == cur && active_slot.origin == term.modes.origin;
    if (cur.pending || outside_region) && slot_holds_cursor {
        // Typically a DECRC put the cursor here: a pending wrap (which would otherwise need
        // the last column printed again, over a cell that may have changed and replacing the
        // character REP repeats) or a position outside the region in origin mode, which CUP
        // cannot address. The slot still holds it, so restoring the slot is exact.
        client.emit("\x1b8");
        client.pen = active_slot.pen;
        client.charsets = active_slot.charsets;
        client.gl = active_slot.gl;
        client.autowrap = active_slot.autowrap;
    } else if cur.pending {
        client.redraw_last_column(term.grid(), cur.row, rel_row);
    } else {
        client.pos = None;
        let _ = write!(client, "\x1b[{};{}H", rel_row + 1, cur.col + 1);
    }

    // State that does not move the cursor.
    client.set_pen(&term.pen);
    client.set_charsets(term.charsets, term.gl);
    client.set_autowrap(term.modes.autowrap);
    let m = &term.modes;
    if m.insert {
        client.emit("\x1b[4h");
    }
    if m.newline {
        client.emit("\x1b[20h");
    }
    if !m.cursor_visible {
        client.emit("\x1b[?25l");
    }
    if m.cursor_blink {
        client.emit("\x1b[?12h");
    }
    if m.cursor_style != 0 {
        let _ = write!(client, "\x1b[{} q", m.cursor_style);
    }
    if m.app_cursor {
        client.emit("\x1b[?1h");
    }
    if m.app_keypad {
        client.emit("\x1b=");
    }
    if m.bracketed_paste {
        client.emit("\x1b[?2004h");
    }
    if m.mouse != MouseMode::None {
        let _ = write!(client, "\x1b[?{}h", m.mouse.code());
    }
    if m.mouse_encoding != MouseEncoding::Default {
        let _ = write!(client, "\x1b[?{}h", m.mouse_encoding.code());
    }
    if m.focus_events {
        client.emit("\x1b[?1004h");
    }
    if !term.icon_name.is_empty() && term.icon_name != term.title {
        let _ = write!(client, "\x1b]1;{}\x07", term.icon_name);
    }
    if !term.title.is_empty() {
        let _ = write!(client, "\x1b]2;{}\x07", term.title);
    }
    client.out
}

#[cfg(test)]
mod tests {
    use super::super::Screen;

    /// A wide character that wrapped early from an empty last column marks its row wrapped; a
    /// DECSC slot holding a pending wrap on that same row made the keyframe erase that column
    /// with ECH, which cleared the flag again, so a copy rendered the row unwrapped (found by
    /// `screen::props::the_model_reads_its_own_keyframe_back_to_the_same_state`).
    #[test]
    fn a_saved_pending_wrap_on_a_row_wrapped_by_a_wide_character_keeps_the_wrap() {
        let stream = "\x1b[40maaaa  a\x1b[49m\x1b[4Ca a,aA?(a\x1b7\x1b[6;20H中文\x1b8中文";
        let mut original = Screen::new(20, 6);
        original.process(stream.as_bytes());
        assert!(original.row_wrapped(0), "the wide character wrapped row 0");
        let keyframe = original.render_keyframe();
        let mut copy = Screen::new(20, 6);
        copy.process(&keyframe);
        assert!(copy.row_wrapped(0), "the keyframe kept row 0 wrapped");
        assert_eq!(copy.snapshot(), original.snapshot());
        assert_eq!(String::from_utf8_lossy(&copy.render_keyframe()), String::from_utf8_lossy(&keyframe));
    }
}
