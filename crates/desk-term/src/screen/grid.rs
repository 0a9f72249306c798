//! Rows of cells and the operations that move cells around inside one screen buffer.
//!
//! Owns the cells of one buffer (main or alternate), their combining marks and each row's
//! soft-wrap flag; knows nothing of the cursor, modes or parsing. Invariants every method keeps:
//! every row has exactly `cols` cells; a `WIDE` cell is never in the last column and is always
//! followed by its `CONTINUATION` cell, and a `CONTINUATION` cell is always preceded by its
//! `WIDE` base (an operation that would split a pair blanks both halves, as xterm does); a row
//! holds at most `MAX_COMBINING` marks per cell, only for cells flagged `MARKS`, so a row's side
//! list never exceeds `cols * MAX_COMBINING` entries.
//!
//! Rows are allocated lazily: a row that shows nothing (every cell `Cell::BLANK`, no marks)
//! may hold no cells at all, and materialises its `cols` cells on the first write that makes
//! it differ from blank. A fresh screen therefore costs no cell memory, and
//! [`Grid::release_blank_rows`] gives the cells of rows that went blank again back (the master
//! calls it when the session goes quiet; the write path never frees, so scrolling output
//! reuses its rows without allocating).

use std::collections::VecDeque;

use super::cell::{Attrs, Cell, kind};
use super::history::History;

/// Combining marks kept per cell. Three covers every real script we expect from agents (an
/// accent, a stacked Vietnamese tone, emoji ZWJ/variation selectors); more is "Zalgo" text,
/// whose extra marks are dropped so a row's memory stays bounded.
pub const MAX_COMBINING: usize = 3;

/// What every cell of an unallocated row reads as: one static row of blanks as wide as the
/// widest screen, so reading an unallocated row allocates nothing.
static BLANK_ROW: [Cell; super::MAX_COLS as usize] = [Cell::BLANK; super::MAX_COLS as usize];

/// One screen row.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct Row {
    /// The cells, or nothing while the row is unallocated (invariant: then every one of its
    /// `cols` cells is `Cell::BLANK`, `marks` is empty, `special` is false, `rest` is
    /// `Cell::BLANK` and `settled_from` is 0).
    cells: Vec<Cell>,
    /// Number of cells, allocated or not.
    cols: usize,
    /// Combining marks as `(column, mark)`, in arrival order.
    marks: Vec<(u16, char)>,
    /// The text of this row continues on the next one: it was left by autowrap.
    pub wrapped: bool,
    /// The row may hold wide characters or combining marks; when false, the printable fast
    /// path can overwrite cells without any repair work.
    #[serde(skip, default = "special_after_restore")]
    special: bool,
    /// Every cell from this column on is a copy of `rest` (invariant; it may be larger than it
    /// needs to be, never smaller). A reset then only rewrites the columns before it: output
    /// that scrolls mostly reuses rows holding one short line, and rewriting all of a 120-cell
    /// row for every line was a tenth of the master's time under a flood.
    #[serde(skip)]
    settled_from: usize,
    #[serde(skip, default = "blank_cell")]
    rest: Cell,
}

/// A restored row may hold wide characters or marks: the hint is set until a reset clears it.
fn special_after_restore() -> bool {
    true
}

fn blank_cell() -> Cell {
    Cell::BLANK
}

/// Rows are equal when they show the same thing; the reset bookkeeping does not count, nor
/// does `special` (a hint that may stay set after the wide characters are gone).
impl PartialEq for Row {
    fn eq(&self, other: &Row) -> bool {
        self.cells() == other.cells() && self.marks == other.marks && self.wrapped == other.wrapped
    }
}

impl Eq for Row {}

impl Row {
    /// Checks a row read back from a saved screen (`super::saved`) against the invariants
    /// above, and sets up the bookkeeping that is not saved.
    pub(super) fn check_restored(&mut self, cols: usize) -> Result<(), String> {
        if self.cols != cols || !(self.cells.is_empty() || self.cells.len() == cols) {
            return Err(format!("a row of {} cells ({} held) in a screen {cols} wide", self.cols, self.cells.len()));
        }
        if self.marks.iter().any(|(col, _)| usize::from(*col) >= cols) || self.marks.len() > cols * MAX_COMBINING {
            return Err("a row's combining marks lie outside it".into());
        }
        if self.cells.is_empty() {
            if !self.marks.is_empty() {
                return Err("a row without cells holds combining marks".into());
            }
            self.special = false;
            self.settled_from = 0;
        } else {
            // No cell is claimed equal to `rest`: the next reset rewrites the whole row once.
            self.settled_from = cols;
        }
        self.rest = Cell::BLANK;
        Ok(())
    }

    /// A row of `cols` copies of `fill`; a blank row allocates no cells.
    pub(super) fn new(cols: usize, fill: Cell) -> Row {
        let cells = if fill == Cell::BLANK { Vec::new() } else { vec![fill; cols] };
        Row { cells, cols, marks: Vec::new(), wrapped: false, special: false, settled_from: 0, rest: fill }
    }

    /// Whether the row holds its cells (false: it is blank and allocated nothing).
    pub(super) fn is_allocated(&self) -> bool {
        self.cells.len() == self.cols
    }

    /// The cells, writable: allocated (all blank) first if the row had none. Inlined, with
    /// the allocation out of line: it is on the path of every printed character.
    #[inline(always)]
    fn cells_mut(&mut self) -> &mut [Cell] {
        if self.cells.len() != self.cols {
            self.materialize();
        }
        &mut self.cells
    }

    #[cold]
    #[inline(never)]
    fn materialize(&mut self) {
        self.cells = vec![Cell::BLANK; self.cols];
    }

    /// True when every cell is `Cell::BLANK` and the row holds no marks: what an unallocated
    /// row shows. Exact only through the reset bookkeeping (a row written with blanks by
    /// hand may show blank and still answer false).
    fn shows_blank(&self) -> bool {
        !self.is_allocated() || (self.settled_from == 0 && self.rest == Cell::BLANK && self.marks.is_empty())
    }

    /// Give the cells back if the row shows nothing; it reads the same afterwards.
    pub(super) fn release_if_blank(&mut self) {
        if self.is_allocated() && self.shows_blank() {
            self.cells = Vec::new();
            self.marks = Vec::new();
            self.special = false;
        }
    }

    /// Cells before `end` may now differ from `rest`.
    fn touch(&mut self, end: usize) {
        self.settled_from = self.settled_from.max(end.min(self.cols));
    }

    /// Number of cells.
    pub(super) fn len(&self) -> usize {
        self.cols
    }

    /// The cells, left to right.
    pub(super) fn cells(&self) -> &[Cell] {
        if self.is_allocated() { &self.cells } else { &BLANK_ROW[..self.cols] }
    }

    /// The cell at `col`, if in range.
    pub(super) fn get(&self, col: usize) -> Option<&Cell> {
        self.cells().get(col)
    }

    /// Overwrites every cell with `fill` and forgets marks and the wrap flag.
    pub(super) fn reset(&mut self, fill: Cell) {
        self.wrapped = false;
        if !self.is_allocated() {
            if fill == Cell::BLANK {
                return;
            }
            self.cells_mut();
        }
        if fill == self.rest {
            self.cells[..self.settled_from].fill(fill);
        } else {
            self.cells.fill(fill);
        }
        self.settled_from = 0;
        self.rest = fill;
        self.marks.clear();
        self.wrapped = false;
        self.special = false;
    }

    /// Writes narrow characters from `col`, for the fast path: the row must be plain (no wide
    /// characters or marks to repair). Returns false, writing nothing, when it is not.
    pub(super) fn write_plain(&mut self, col: usize, ch: impl Iterator<Item = char>, attrs: Attrs) -> bool {
        if self.special {
            return false;
        }
        if col >= self.cols {
            return true;
        }
        let Some(cells) = self.cells_mut().get_mut(col..) else {
            return true;
        };
        let mut written = 0;
        for (cell, ch) in cells.iter_mut().zip(ch) {
            *cell = Cell::narrow(ch, attrs);
            written += 1;
        }
        self.touch(col + written);
        true
    }

    /// Combining marks of the cell at `col`, in arrival order.
    pub(super) fn marks_at(&self, col: usize) -> impl Iterator<Item = char> + '_ {
        self.marks.iter().filter(move |(c, _)| usize::from(*c) == col).map(|(_, m)| *m)
    }

    fn drop_marks_in(&mut self, start: usize, end: usize) {
        if !self.marks.is_empty() {
            self.marks.retain(|(c, _)| {
                let c = usize::from(*c);
                c < start || c >= end
            });
        }
    }

    /// Stores `cell` at `col` (narrow or wide base), repairing any wide character it splits.
    /// A wide cell also claims `col + 1`. Out-of-range columns are ignored.
    pub(super) fn put(&mut self, col: usize, cell: Cell, blank: Cell) {
        let width = if cell.is_wide() { 2 } else { 1 };
        if col + width > self.cols {
            return;
        }
        self.repair_split(col, col + width, blank);
        self.drop_marks_in(col, col + width);
        self.touch(col + width);
        let cells = self.cells_mut();
        cells[col] = cell;
        if width == 2 {
            cells[col + 1] = Cell { kind: kind::CONTINUATION, ..Cell::erased(&cell.attrs) };
            self.special = true;
        }
    }

    /// Appends combining mark `mark` to the cell at `col`. An empty cell becomes a space first
    /// (the mark needs a base). Returns false when the cell already holds `MAX_COMBINING` marks.
    pub(super) fn push_mark(&mut self, col: usize, mark: char) -> bool {
        let Some(cell) = self.get(col) else {
            return false;
        };
        if cell.is_continuation() {
            return false;
        }
        if self.marks_at(col).count() >= MAX_COMBINING {
            return false;
        }
        let Some(cell) = self.cells_mut().get_mut(col) else {
            return false;
        };
        if cell.ch == super::cell::EMPTY {
            cell.ch = ' ';
        }
        cell.kind |= kind::MARKS;
        self.special = true;
        self.touch(col + 1);
        // A row holds at most one entry per (cell, mark slot); `col` fits in u16 because
        // MAX_COLS does.
        self.marks.push((col as u16, mark));
        true
    }

    /// Blanks both halves of any wide character that the range `start..end` cuts through.
    fn repair_split(&mut self, start: usize, end: usize, blank: Cell) {
        // A row with no wide characters (every unallocated row) has nothing to repair.
        if !self.special {
            return;
        }
        if start > 0 && self.cells.get(start).is_some_and(Cell::is_continuation) {
            self.touch(start + 1);
            self.cells[start - 1] = blank;
            self.cells[start] = blank;
            self.drop_marks_in(start - 1, start);
        }
        if end > 0 && end < self.cells.len() && self.cells[end].is_continuation() {
            self.touch(end + 1);
            self.cells[end - 1] = blank;
            self.cells[end] = blank;
            self.drop_marks_in(end - 1, end);
        }
    }

    /// Erases `start..end` (clamped) to `blank`, blanking any wide character it cuts.
    pub(super) fn erase(&mut self, start: usize, end: usize, blank: Cell) {
        let end = end.min(self.cols);
        if start >= end || (!self.is_allocated() && blank == Cell::BLANK) {
            return;
        }
        self.repair_split(start, end, blank);
        self.cells_mut()[start..end].fill(blank);
        if blank == self.rest && end >= self.settled_from {
            self.settled_from = self.settled_from.min(start);
        } else {
            self.touch(end);
        }
        self.drop_marks_in(start, end);
        if start == 0 && end == self.cols {
            self.special = false;
            self.marks.clear();
        }
    }

    /// Inserts `n` blank cells at `col`, shifting the rest right; cells pushed past the end are
    /// lost (ICH, and insert mode).
    pub(super) fn insert_blanks(&mut self, col: usize, n: usize, blank: Cell) {
        let len = self.cols;
        if col >= len || n == 0 || (!self.is_allocated() && blank == Cell::BLANK) {
            return;
        }
        let n = n.min(len - col);
        // A wide character cut at the insertion point, and one straddling the new right edge.
        self.repair_split(col, col, blank);
        self.repair_split(len - n, len - n, blank);
        let cells = self.cells_mut();
        cells[col..].rotate_right(n);
        cells[col..col + n].fill(blank);
        self.touch(len);
        if !self.marks.is_empty() {
            self.marks.retain_mut(|(c, _)| {
                let cu = usize::from(*c);
                if cu < col {
                    return true;
                }
                if cu + n >= len {
                    return false;
                }
                // Fits in u16: cu + n < len <= MAX_COLS.
                *c = (cu + n) as u16;
                true
            });
        }
    }

    /// Deletes `n` cells at `col`, shifting the rest left and filling the end with `blank`
    /// (DCH).
    pub(super) fn delete(&mut self, col: usize, n: usize, blank: Cell) {
        let len = self.cols;
        if col >= len || n == 0 || (!self.is_allocated() && blank == Cell::BLANK) {
            return;
        }
        let n = n.min(len - col);
        self.repair_split(col, col + n, blank);
        self.drop_marks_in(col, col + n);
        let cells = self.cells_mut();
        cells[col..].rotate_left(n);
        cells[len - n..].fill(blank);
        // What moved left came from the settled tail or is `blank`: still settled if `blank`
        // is the rest value.
        if blank != self.rest {
            self.touch(len);
        }
        if !self.marks.is_empty() {
            for (c, _) in &mut self.marks {
                let cu = usize::from(*c);
                if cu >= col + n {
                    // Fits: it only gets smaller.
                    *c = (cu - n) as u16;
                }
            }
        }
    }

    /// Changes the width, keeping the left part. A wide character cut by the new edge is
    /// blanked; the wrap flag is dropped because the continuation no longer lines up.
    pub(super) fn resize(&mut self, cols: usize) {
        if cols == self.cols {
            return;
        }
        if !self.is_allocated() {
            self.cols = cols;
            self.wrapped = false;
            return;
        }
        self.cols = cols;
        if cols < self.cells.len() {
            if cols > 0 && self.cells[cols - 1].is_wide() {
                self.cells[cols - 1] = Cell::BLANK;
                self.touch(cols);
            }
            self.cells.truncate(cols);
            self.marks.retain(|(c, _)| usize::from(*c) < cols);
            self.settled_from = self.settled_from.min(cols);
        } else {
            self.cells.resize(cols, Cell::BLANK);
            if self.rest != Cell::BLANK {
                self.touch(cols);
            }
        }
        self.wrapped = false;
    }

    /// The row as text: one char (plus marks) per cell, wide characters once, empty cells as
    /// spaces, trailing spaces trimmed.
    pub(super) fn text(&self) -> String {
        if !self.is_allocated() {
            return String::new();
        }
        let mut out = String::with_capacity(self.cols);
        for (col, cell) in self.cells.iter().enumerate() {
            if cell.is_continuation() {
                continue;
            }
            if cell.ch == super::cell::EMPTY {
                out.push(' ');
            } else {
                out.push(cell.ch);
            }
            if cell.has_marks() {
                out.extend(self.marks_at(col));
            }
        }
        let trimmed = out.trim_end_matches(' ').len();
        out.truncate(trimmed);
        out
    }
}

/// The rows of one screen buffer. A ring, so that scrolling the whole screen (the common
/// case: output running off the bottom) moves no rows.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Grid {
    rows: VecDeque<Row>,
    cols: usize,
}

impl Grid {
    /// Checks a grid read back from a saved screen: `rows` rows of `cols` cells each.
    pub(super) fn check_restored(&mut self, cols: usize, rows: usize) -> Result<(), String> {
        if self.cols != cols || self.rows.len() != rows {
            return Err(format!("a grid of {}x{} in a screen of {cols}x{rows}", self.cols, self.rows.len()));
        }
        self.rows.iter_mut().try_for_each(|row| row.check_restored(cols))
    }

    /// A blank grid.
    pub(super) fn new(cols: usize, rows: usize) -> Grid {
        Grid { rows: std::iter::repeat_n(Row::new(cols, Cell::BLANK), rows).collect(), cols }
    }

    /// Rows, top to bottom.
    pub(super) fn rows(&self) -> &VecDeque<Row> {
        &self.rows
    }

    /// The row at `row`. Callers keep `row` in range (the cursor invariant); an out-of-range
    /// index is clamped to the last row rather than panicking.
    pub(super) fn row_mut(&mut self, row: usize) -> &mut Row {
        let last = self.rows.len().saturating_sub(1);
        &mut self.rows[row.min(last)]
    }

    /// The row at `row`, if in range.
    pub(super) fn row(&self, row: usize) -> Option<&Row> {
        self.rows.get(row)
    }

    /// Blanks every row with `blank`.
    pub(super) fn clear(&mut self, blank: Cell) {
        for row in &mut self.rows {
            row.reset(blank);
        }
    }

    fn is_whole(&self, top: usize, bottom: usize) -> bool {
        top == 0 && bottom + 1 == self.rows.len()
    }

    /// Scrolls rows `top..=bottom` up by `n`: the top rows are dropped and blank rows appear
    /// at the bottom.
    pub(super) fn scroll_up(&mut self, top: usize, bottom: usize, n: usize, blank: Cell) {
        self.scroll_up_into(top, bottom, n, blank, None);
    }

    /// [`Grid::scroll_up`], with the rows scrolled off the top of the screen (only when the
    /// region starts at the top row, as in xterm) appended to `history` first, oldest first.
    pub(super) fn scroll_up_into(
        &mut self,
        top: usize,
        bottom: usize,
        n: usize,
        blank: Cell,
        history: Option<&mut History>,
    ) {
        if top > bottom || bottom >= self.rows.len() || n == 0 {
            return;
        }
        let n = n.min(bottom - top + 1);
        if top == 0
            && let Some(history) = history
        {
            for row in self.rows.iter().take(n) {
                history.push_row(row);
            }
        }
        if self.is_whole(top, bottom) {
            for _ in 0..n {
                if let Some(mut row) = self.rows.pop_front() {
                    row.reset(blank);
                    self.rows.push_back(row);
                }
            }
            return;
        }
        let region = &mut self.rows.make_contiguous()[top..=bottom];
        region.rotate_left(n);
        let len = region.len();
        for row in &mut region[len - n..] {
            row.reset(blank);
        }
    }

    /// Scrolls rows `top..=bottom` down by `n`: bottom rows are dropped, blank rows appear at
    /// the top.
    pub(super) fn scroll_down(&mut self, top: usize, bottom: usize, n: usize, blank: Cell) {
        if top > bottom || bottom >= self.rows.len() || n == 0 {
            return;
        }
        let n = n.min(bottom - top + 1);
        if self.is_whole(top, bottom) {
            for _ in 0..n {
                if let Some(mut row) = self.rows.pop_back() {
                    row.reset(blank);
                    self.rows.push_front(row);
                }
            }
            return;
        }
        let region = &mut self.rows.make_contiguous()[top..=bottom];
        region.rotate_right(n);
        for row in &mut region[..n] {
            row.reset(blank);
        }
    }

    /// Gives back the cells of every row that shows nothing; what the grid shows is unchanged.
    pub(super) fn release_blank_rows(&mut self) {
        for row in &mut self.rows {
            row.release_if_blank();
        }
        self.rows.shrink_to_fit();
    }

    /// Rows that hold their cells (the rest are blank and cost no cell memory).
    pub(super) fn allocated_rows(&self) -> usize {
        self.rows.iter().filter(|r| r.is_allocated()).count()
    }

    /// Changes the size like tmux (`screen_resize_y`), keeping row `keep` (the cursor's)
    /// visible, and returns how far the rows moved down (negative: up). Fewer rows: rows below
    /// `keep` go first, then rows from the top, into `history` when given (else dropped). More
    /// rows: the newest lines of `history` come back down on top, then blank rows at the
    /// bottom. The width changes afterwards, keeping the left part (no reflow).
    pub(super) fn resize(&mut self, cols: usize, rows: usize, keep: usize, mut history: Option<&mut History>) -> isize {
        let old = self.rows.len();
        let mut shift = 0isize;
        if rows < old {
            let needed = old - rows;
            let below = old - 1 - keep.min(old - 1);
            let cut = below.min(needed);
            self.rows.truncate(old - cut);
            for _ in 0..needed - cut {
                if let Some(row) = self.rows.pop_front()
                    && let Some(history) = history.as_deref_mut()
                {
                    history.push_row(&row);
                }
                shift -= 1;
            }
        } else if rows > old {
            if let Some(history) = history {
                while self.rows.len() < rows {
                    let Some(line) = history.pop_newest() else {
                        break;
                    };
                    self.rows.push_front(line.to_row(self.cols));
                    shift += 1;
                }
            }
            while self.rows.len() < rows {
                self.rows.push_back(Row::new(self.cols, Cell::BLANK));
            }
        }
        for row in &mut self.rows {
            row.resize(cols);
        }
        if let Some(last) = self.rows.back_mut() {
            last.wrapped = false;
        }
        self.cols = cols;
        shift
    }
}

#[cfg(test)]
mod tests {
    use super::super::cell::{Color, EMPTY};
    use super::*;

    fn wide(ch: char) -> Cell {
        Cell { ch, attrs: Attrs::default(), kind: kind::WIDE }
    }

    /// One of a few cells, so that fills do and do not match the row's rest value.
    fn cell_strategy() -> impl proptest::strategy::Strategy<Value = Cell> {
        use proptest::prelude::*;
        let red = Attrs { bg: Color::Indexed(1), ..Attrs::default() };
        prop_oneof![
            Just(Cell::BLANK),
            Just(Cell::erased(&red)),
            Just(Cell::narrow('x', Attrs::default())),
            Just(wide('中')),
        ]
    }

    #[derive(Debug, Clone)]
    enum Op {
        Reset(Cell),
        Plain(usize, usize),
        Put(usize, Cell, Cell),
        Mark(usize),
        Erase(usize, usize, Cell),
        Insert(usize, usize, Cell),
        Delete(usize, usize, Cell),
        Resize(usize),
        Release,
    }

    fn op_strategy() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            cell_strategy().prop_map(Op::Reset),
            (0..14usize, 0..14usize).prop_map(|(c, n)| Op::Plain(c, n)),
            (0..14usize, cell_strategy(), cell_strategy()).prop_map(|(c, x, b)| Op::Put(c, x, b)),
            (0..14usize).prop_map(Op::Mark),
            (0..14usize, 0..14usize, cell_strategy()).prop_map(|(a, b, c)| Op::Erase(a, b, c)),
            (0..14usize, 0..5usize, cell_strategy()).prop_map(|(a, n, c)| Op::Insert(a, n, c)),
            (0..14usize, 0..5usize, cell_strategy()).prop_map(|(a, n, c)| Op::Delete(a, n, c)),
            (1..14usize).prop_map(Op::Resize),
            Just(Op::Release),
        ]
    }

    proptest::proptest! {
        /// The lazy reset is sound: after any sequence of edits, every cell from
        /// `settled_from` on equals `rest`, so a reset that skips them leaves the same row as
        /// one that rewrites every cell.
        #[test]
        fn a_reset_equals_a_full_rewrite_after_any_edits(
            ops in proptest::collection::vec(op_strategy(), 0..40),
            fill in cell_strategy(),
        ) {
            let mut row = Row::new(10, Cell::BLANK);
            for op in ops {
                match op {
                    Op::Reset(c) => row.reset(c),
                    Op::Plain(c, n) => {
                        row.write_plain(c, std::iter::repeat_n('p', n), Attrs::default());
                    }
                    Op::Put(c, x, b) => row.put(c, x, b),
                    Op::Mark(c) => {
                        row.push_mark(c, '\u{301}');
                    }
                    Op::Erase(a, b, c) => row.erase(a, b, c),
                    Op::Insert(a, n, c) => row.insert_blanks(a, n, c),
                    Op::Delete(a, n, c) => row.delete(a, n, c),
                    Op::Resize(n) => row.resize(n),
                    Op::Release => {
                        let before = row.clone();
                        row.release_if_blank();
                        proptest::prop_assert_eq!(&row, &before, "releasing changed what the row shows");
                    }
                }
                let rest = row.rest;
                proptest::prop_assert!(row.cells()[row.settled_from..].iter().all(|c| *c == rest), "{row:?}");
                proptest::prop_assert_eq!(row.cells().len(), row.len());
                if !row.is_allocated() {
                    proptest::prop_assert!(row.cells().iter().all(|c| *c == Cell::BLANK), "{row:?}");
                    proptest::prop_assert!(row.marks.is_empty() && !row.special && row.rest == Cell::BLANK);
                }
            }
            let width = row.len();
            row.reset(fill);
            proptest::prop_assert_eq!(row.cells(), &vec![fill; width][..]);
        }

        /// An unallocated row behaves exactly like one that holds its blank cells: the same
        /// edits leave both showing the same thing.
        #[test]
        fn an_unallocated_row_edits_like_an_allocated_blank_one(
            ops in proptest::collection::vec(op_strategy(), 0..40),
        ) {
            let mut lazy = Row::new(10, Cell::BLANK);
            let mut full = Row::new(10, Cell::BLANK);
            full.cells_mut();
            proptest::prop_assert!(!lazy.is_allocated() && full.is_allocated());
            for op in ops {
                for row in [&mut lazy, &mut full] {
                    match op {
                        Op::Reset(c) => row.reset(c),
                        Op::Plain(c, n) => {
                            row.write_plain(c, std::iter::repeat_n('p', n), Attrs::default());
                        }
                        Op::Put(c, x, b) => row.put(c, x, b),
                        Op::Mark(c) => {
                            row.push_mark(c, '\u{301}');
                        }
                        Op::Erase(a, b, c) => row.erase(a, b, c),
                        Op::Insert(a, n, c) => row.insert_blanks(a, n, c),
                        Op::Delete(a, n, c) => row.delete(a, n, c),
                        Op::Resize(n) => row.resize(n),
                        Op::Release => {}
                    }
                }
                proptest::prop_assert_eq!(&lazy, &full);
                proptest::prop_assert_eq!(lazy.text(), full.text());
            }
        }
    }

    #[test]
    fn a_blank_grid_holds_no_cells_until_written_and_gives_them_back_when_blank_again() {
        let mut grid = Grid::new(120, 40);
        assert!(grid.rows().iter().all(|r| !r.is_allocated()), "a fresh grid allocated cells");
        assert_eq!(grid.allocated_rows(), 0);
        grid.row_mut(3).write_plain(0, "hi".chars(), Attrs::default());
        assert_eq!(grid.allocated_rows(), 1, "only the written row materialises");
        assert_eq!(grid.rows()[3].text(), "hi");
        // Scrolling reuses rows and keeps their cells (no allocation on the write path).
        grid.scroll_up(0, 39, 5, Cell::BLANK);
        assert_eq!(grid.allocated_rows(), 1);
        grid.release_blank_rows();
        assert_eq!(grid.allocated_rows(), 0, "a row scrolled blank was kept");
        grid.row_mut(0).write_plain(0, "x".chars(), Attrs::default());
        grid.row_mut(1).erase(0, 3, Cell::erased(&Attrs { bg: Color::Indexed(4), ..Attrs::default() }));
        grid.release_blank_rows();
        assert_eq!(grid.allocated_rows(), 2, "a row showing text or colour was given back");
        grid.clear(Cell::BLANK);
        grid.release_blank_rows();
        assert_eq!(grid.allocated_rows(), 0);
        assert!(grid.rows().iter().all(|r| r.text().is_empty()));
    }

    fn row_text(cols: usize, f: impl FnOnce(&mut Row)) -> String {
        let mut row = Row::new(cols, Cell::BLANK);
        f(&mut row);
        row.text()
    }

    #[test]
    fn overwriting_right_half_of_wide_char_blanks_both_halves() {
        let text = row_text(6, |r| {
            r.put(1, wide('中'), Cell::BLANK);
            r.put(2, Cell::narrow('x', Attrs::default()), Cell::BLANK);
        });
        assert_eq!(text, "  x");
    }

    #[test]
    fn overwriting_left_half_of_wide_char_blanks_both_halves() {
        let mut row = Row::new(6, Cell::BLANK);
        row.put(1, wide('中'), Cell::BLANK);
        row.put(1, Cell::narrow('x', Attrs::default()), Cell::BLANK);
        assert_eq!(row.text(), " x");
        assert!(!row.cells()[2].is_continuation());
    }

    #[test]
    fn insert_pushes_wide_char_off_the_edge_cleanly() {
        let mut row = Row::new(4, Cell::BLANK);
        row.put(2, wide('中'), Cell::BLANK);
        row.insert_blanks(0, 1, Cell::BLANK);
        assert!(row.cells().iter().all(|c| !c.is_wide() && !c.is_continuation()));
    }

    #[test]
    fn delete_moves_marks_with_their_cells() {
        let mut row = Row::new(6, Cell::BLANK);
        for (i, ch) in "abcde".chars().enumerate() {
            row.put(i, Cell::narrow(ch, Attrs::default()), Cell::BLANK);
        }
        assert!(row.push_mark(3, '\u{301}'));
        row.delete(1, 2, Cell::BLANK);
        assert_eq!(row.text(), "ad\u{301}e");
    }

    #[test]
    fn marks_per_cell_are_bounded() {
        let mut row = Row::new(2, Cell::BLANK);
        row.put(0, Cell::narrow('e', Attrs::default()), Cell::BLANK);
        for _ in 0..MAX_COMBINING {
            assert!(row.push_mark(0, '\u{301}'));
        }
        assert!(!row.push_mark(0, '\u{301}'));
    }

    #[test]
    fn erase_fills_with_given_background() {
        let mut row = Row::new(3, Cell::BLANK);
        let pen = Attrs { bg: Color::Indexed(4), ..Attrs::default() };
        row.erase(0, 3, Cell::erased(&pen));
        assert!(row.cells().iter().all(|c| c.ch == EMPTY && c.attrs.bg == Color::Indexed(4)));
    }

    #[test]
    fn scroll_up_drops_top_and_blanks_bottom() {
        let mut grid = Grid::new(2, 3);
        for r in 0..3 {
            grid.row_mut(r).put(0, Cell::narrow(char::from(b'a' + r as u8), Attrs::default()), Cell::BLANK);
        }
        grid.scroll_up(0, 2, 1, Cell::BLANK);
        let text: Vec<String> = grid.rows().iter().map(Row::text).collect();
        assert_eq!(text, ["b", "c", ""]);
    }
}
