//! In-memory screen model of one session's terminal.
//!
//! The master feeds every byte the child writes to its PTY through [`Screen::feed`], once: the
//! same parse keeps the model and finds the output events (`crate::events`: titles, bells,
//! notifications, state reports, mode changes, with one mode tracker, the model's). The model
//! keeps what a terminal would show (both screen buffers, the cursor, the pen, modes, title)
//! with xterm's semantics, and serves: the keyframe sent to an attaching or resyncing
//! client ([`Screen::render_keyframe`]), read-back for `peek` and delivery verification
//! ([`Screen::snapshot`], [`Screen::text_rows`]), and answers to terminal queries
//! ([`Screen::take_replies`]). Why a model of our own and not the vt100 or avt crates:
//! `docs/screen-model.md`.
//!
//! Invariants: processing never panics and never allocates beyond named bounds (grid size
//! `MAX_CELLS`, combining marks per cell, title, pending replies; vte bounds OSC strings to
//! 1024 bytes and parameters to 32); the result of processing a stream does not depend on how
//! it is split into `process` calls; rows scrolled off the top of the main screen go into a
//! bounded history (`history.rs`, none unless the screen was made with
//! [`Screen::with_history`]), so memory is bounded by the screen size plus that bound. Printable ASCII in
//! the parser's ground state takes a fast path that writes cells directly and has exactly the
//! effect vte's `print` would have. UTF-8 in ground state (valid, broken, or cut off by the end
//! of a call) is decoded here and never handed to vte: vte 0.15 gives a different result for a
//! character cut by a call boundary than for the same bytes in one call (finishing it, it can
//! swallow the ESC that follows, and it prints a C1 control it would otherwise execute), so the
//! model keeps the cut-off bytes itself (`Partial`) and decodes them with one-call semantics.
//!
//! Files: `cell.rs` (cells, colours, attributes), `grid.rs` (rows and buffer operations),
//! `history.rs` (the scrollback), `modes.rs` (modes, charsets, tab stops), `term.rs` (the emulator state and terminal
//! operations), `perform.rs` (vte callbacks, SGR, query answers), `ground.rs` (whether vte is
//! mid-sequence), `keyframe.rs` (state restore), this file (the public API and the fast path).

mod cell;
mod grid;
mod ground;
mod history;
mod keyframe;
mod modes;
mod perform;
mod saved;
mod term;

use serde::{Deserialize, Serialize};

pub use cell::{Attrs, Color, flag};
pub use grid::MAX_COMBINING;
pub use history::{DEFAULT_HISTORY_LINES, HistoryLine, HistoryRow, JsonColor, MAX_HISTORY_LINES, StyleRun};
pub use modes::{Modes, MouseEncoding, MouseMode};
pub use perform::{DA1_REPLY, DA2_REPLY};
pub use saved::SavedScreen;
pub use term::{MAX_PENDING_REPLIES, MAX_TITLE_BYTES};

use crate::events::OutputEvent;
use ground::GroundTracker;
use term::Term;

/// Smallest width: one column is still a terminal.
pub const MIN_COLS: u16 = 1;
/// Smallest height.
pub const MIN_ROWS: u16 = 1;
/// Largest width: wider than any real window (a 4K screen with a 6-pixel font is ~640
/// columns), small enough that one row stays a few KiB.
pub const MAX_COLS: u16 = 1000;
/// Largest height, for the same reason as `MAX_COLS`.
pub const MAX_ROWS: u16 = 1000;
/// Largest `cols * rows`. Each cell is 16 bytes and the model keeps two buffers, so this caps a
/// session's model at ~6.4 MB, and a keyframe at ~8 MB / ~55 ms to render even when every cell
/// has its own truecolour pair (measured, `docs/screen-model.md`), while still allowing e.g.
/// 500x400; `MAX_COLS * MAX_ROWS` (a million cells) would allow 32 MB per session.
pub const MAX_CELLS: u32 = 200_000;

/// True when a terminal of `cols` x `rows` is within all bounds.
pub fn valid_size(cols: u16, rows: u16) -> bool {
    (MIN_COLS..=MAX_COLS).contains(&cols)
        && (MIN_ROWS..=MAX_ROWS).contains(&rows)
        && u32::from(cols) * u32::from(rows) <= MAX_CELLS
}

/// The nearest valid size: each side clamped to its range, then rows reduced until the cell
/// count fits.
fn clamp_size(cols: u16, rows: u16) -> (usize, usize) {
    let cols = cols.clamp(MIN_COLS, MAX_COLS);
    let rows = rows.clamp(MIN_ROWS, MAX_ROWS);
    let max_rows = (MAX_CELLS / u32::from(cols)).min(u32::from(MAX_ROWS));
    let rows = u32::from(rows).min(max_rows);
    (usize::from(cols), rows as usize)
}

/// The cursor as reported in a [`Snapshot`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// Row, 0-based.
    pub row: u16,
    /// Column, 0-based (the last column while a wrap is pending).
    pub col: u16,
    /// The application has not hidden it (DECTCEM).
    pub visible: bool,
}

/// What `desk peek --json` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Width.
    pub cols: u16,
    /// Height.
    pub rows: u16,
    /// Cursor position and visibility.
    pub cursor: Cursor,
    /// Window title (OSC 0/2).
    pub title: String,
    /// Modes.
    pub modes: Modes,
    /// Visible rows as text (see [`Screen::text_rows`]).
    pub lines: Vec<String>,
}

/// A read-only view of one cell, for tests and diagnostics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellView {
    /// The character and its combining marks; empty for an erased cell and for the right half
    /// of a wide character.
    pub text: String,
    /// The cell holds the left half of a wide character.
    pub wide: bool,
    /// The cell is the right half of a wide character.
    pub wide_continuation: bool,
    /// Attributes.
    pub attrs: Attrs,
}

/// A borrowed look at one cell ([`Screen::cell_ref`]): what [`CellView`] holds, its text
/// written out only on demand.
pub(crate) struct CellRef<'a> {
    row: &'a grid::Row,
    col: usize,
    cell: cell::Cell,
}

impl CellRef<'_> {
    /// [`CellView::text`] is empty: an erased cell, or the right half of a wide character.
    pub(crate) fn text_is_empty(&self) -> bool {
        self.cell.is_empty() || self.cell.is_continuation()
    }

    /// [`CellView::wide`].
    pub(crate) fn wide(&self) -> bool {
        self.cell.is_wide()
    }

    /// [`CellView::wide_continuation`].
    pub(crate) fn wide_continuation(&self) -> bool {
        self.cell.is_continuation()
    }

    /// [`CellView::attrs`].
    pub(crate) fn attrs(&self) -> Attrs {
        self.cell.attrs
    }

    /// Append [`CellView::text`] (the character and its combining marks) to `out` as UTF-8.
    pub(crate) fn push_text(&self, out: &mut Vec<u8>) {
        if self.text_is_empty() {
            return;
        }
        let mut utf8 = [0u8; 4];
        out.extend_from_slice(self.cell.ch.encode_utf8(&mut utf8).as_bytes());
        for mark in self.row.marks_at(self.col) {
            out.extend_from_slice(mark.encode_utf8(&mut utf8).as_bytes());
        }
    }
}

/// The screen model of one terminal. (Not `Clone`: vte's parser is not.)
pub struct Screen {
    parser: vte::Parser,
    ground: GroundTracker,
    /// A UTF-8 character cut off by the end of the last `process` call; vte is in ground.
    partial: Partial,
    term: Term,
}

/// The leading bytes of a UTF-8 character that the last `process` call ended inside of: a
/// valid, incomplete prefix (so at most three bytes), empty when no character is cut.
#[derive(Debug, Clone, Copy, Default)]
struct Partial {
    bytes: [u8; 4],
    len: usize,
}

impl std::fmt::Debug for Screen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Screen")
            .field("size", &self.size())
            .field("cursor", &self.cursor())
            .field("ground", &self.ground)
            .field("partial", &&self.partial.bytes[..self.partial.len])
            .finish_non_exhaustive()
    }
}

/// The plain prefix of `bytes` (printable ASCII, CR and LF) and its line feeds: where a flood
/// skip may look for its skip point. Cheap to find, a word at a time.
fn plain_prefix(bytes: &[u8]) -> (usize, usize) {
    let mut end = 0;
    let mut feeds = 0;
    loop {
        end += printable_run(&bytes[end..]);
        match bytes.get(end) {
            Some(b'\n') => feeds += 1,
            Some(b'\r') => {}
            _ => return (end, feeds),
        }
        end += 1;
    }
}

/// Length of the run of printable ASCII (0x20..=0x7e) at the start of `bytes`, eight bytes
/// at a time.
fn printable_run(bytes: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut n = 0;
    for chunk in bytes.chunks_exact(8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        // A byte below 0x20 borrows into its high bit; one above 0x7e carries into it (or has
        // it set already). Exact for "any byte", which is all we ask.
        let below = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
        let above = (x.wrapping_add(ONES) | x) & HIGH;
        if below | above != 0 {
            break;
        }
        n += 8;
    }
    n + bytes[n..].iter().take_while(|b| (0x20..0x7f).contains(*b)).count()
}

/// Bytes the fast path handles itself in ground state: printable ASCII, C0 controls other
/// than ESC (vte would only `execute` them), and all non-ASCII bytes (UTF-8, broken or not).
/// vte sees ground state only in front of ESC and DEL.
fn is_fast(b: u8) -> bool {
    b != 0x7f && b != 0x1b
}

impl Screen {
    /// A power-on terminal of `cols` x `rows`, clamped to valid bounds.
    pub fn new(cols: u16, rows: u16) -> Screen {
        let (cols, rows) = clamp_size(cols, rows);
        Screen {
            parser: vte::Parser::new(),
            ground: GroundTracker::default(),
            partial: Partial::default(),
            term: Term::new(cols, rows),
        }
    }

    /// A power-on terminal that keeps up to `lines` rows scrolled off the top of its main
    /// screen (clamped to `MAX_HISTORY_LINES`; 0 keeps none, as [`Screen::new`]).
    pub fn with_history(cols: u16, rows: u16, lines: usize) -> Screen {
        let mut screen = Screen::new(cols, rows);
        screen.term.history = history::History::new(lines);
        screen
    }

    /// Also collects the text of every line scrolled off the main screen (whatever the history
    /// keeps), for a session log: [`Screen::take_log_text`] hands it over.
    pub fn enable_log(&mut self) {
        self.term.history.enable_log();
    }

    /// Hands `take` the text (UTF-8, one `\n`-terminated line each) of the lines scrolled off
    /// since the last call, and forgets it; an empty text unless [`Screen::enable_log`] was
    /// called. Call it after every `feed`: the text is held until then.
    pub fn take_log_text(&mut self, take: impl FnOnce(&[u8])) {
        self.term.history.take_log_text(take);
    }

    /// The most lines the history keeps (0: none).
    pub fn history_limit(&self) -> usize {
        self.term.history.limit()
    }

    /// Lines in the history.
    pub fn history_len(&self) -> usize {
        self.term.history.len()
    }

    /// The newest `n` history lines (all when there are fewer), oldest first.
    pub fn history_tail(&self, n: usize) -> impl DoubleEndedIterator<Item = &HistoryLine> {
        self.term.history.tail(n)
    }

    /// The number of the oldest history line. Lines are numbered in the order they entered
    /// the history, without gaps, and a number is never given to another line (lines taken
    /// back by a resize, or forgotten by ED 3, leave their numbers unused), so a reader can
    /// ask for the history in pages while output goes on and tell when lines it wanted left.
    pub fn history_first(&self) -> u64 {
        self.term.history.first()
    }

    /// One past the number of the newest history line ([`Screen::history_first`] when the
    /// history is empty).
    pub fn history_end(&self) -> u64 {
        self.term.history.end()
    }

    /// The history lines numbered `from` on, oldest first (from the oldest when `from` is
    /// older than [`Screen::history_first`]; none when it is not below
    /// [`Screen::history_end`]).
    pub fn history_from(&self, from: u64) -> impl DoubleEndedIterator<Item = &HistoryLine> {
        self.term.history.numbered_from(from)
    }

    /// The newest `n` history lines as text, oldest first.
    pub fn history_text(&self, n: usize) -> Vec<String> {
        self.history_tail(n).map(|l| l.text().to_string()).collect()
    }

    /// The newest `n` history lines as JSON rows (text, wrap flag, attribute runs).
    pub fn history_rows(&self, n: usize) -> Vec<HistoryRow> {
        self.history_tail(n).map(HistoryLine::to_json_row).collect()
    }

    /// Heap bytes the history holds, for memory accounting.
    pub fn history_heap_bytes(&self) -> usize {
        self.term.history.heap_bytes()
    }

    /// Feeds bytes written by the child and appends the output events they hold (titles,
    /// bells, notifications, state reports, mode changes) to `events`: one parse for both. Any
    /// split of a stream into calls gives the same state and the same events as one call with
    /// the whole stream.
    pub fn feed(&mut self, bytes: &[u8], events: &mut Vec<OutputEvent>) {
        // The caller's buffer is the model's for the call: events are appended in place and
        // the model holds none between calls.
        std::mem::swap(&mut self.term.events, events);
        self.parse(bytes);
        std::mem::swap(&mut self.term.events, events);
    }

    /// [`Screen::feed`] for callers that only want the screen: the events are dropped.
    pub fn process(&mut self, bytes: &[u8]) {
        self.parse(bytes);
        self.term.events.clear();
    }

    fn parse(&mut self, bytes: &[u8]) {
        let i = if self.partial.len > 0 { self.finish_partial(bytes) } else { self.skip_scrolled_off(bytes) };
        self.parse_from(bytes, i);
    }

    /// The parse loop from `bytes[i]` on (no skip).
    fn parse_from(&mut self, bytes: &[u8], mut i: usize) {
        while i < bytes.len() {
            if self.ground.is_ground() {
                let b = bytes[i];
                if (0x20..0x7f).contains(&b) {
                    let end = i + printable_run(&bytes[i..]);
                    self.term.print_ascii(&bytes[i..end]);
                    i = end;
                    continue;
                }
                if b >= 0x80 {
                    i = self.print_utf8(bytes, i);
                    continue;
                }
                if is_fast(b) {
                    vte::Perform::execute(&mut self.term, b);
                    i += 1;
                    continue;
                }
            }
            // Hand vte everything up to the point where it is back in ground state in front
            // of a byte the fast path takes.
            let start = i;
            while i < bytes.len() {
                self.ground.advance(bytes[i]);
                i += 1;
                if self.ground.is_ground() && bytes.get(i).is_some_and(|&b| is_fast(b)) {
                    break;
                }
            }
            self.parser.advance(&mut self.term, &bytes[start..i]);
        }
    }

    /// Where plain text (printable ASCII, CR, LF) at the start of `bytes` would only draw rows
    /// that the rest of that plain text scrolls off the screen again, skips it: returns how
    /// many bytes were accounted for (0 when nothing can be skipped), having left the model
    /// exactly as drawing them would have, apart from the rows that would have scrolled off.
    ///
    /// A flood of lines (`cat` of a log, a build) otherwise costs the model two row writes per
    /// line for rows nobody sees: most of its time, and the master's, in the fan-out bench. The
    /// rule is exact, not a heuristic: with at least `rows` line feeds before the skip point
    /// (plain text, the scroll region the whole screen), the cursor is on the bottom row there;
    /// the skip point follows `CR LF`, so the cursor is in column 0 with no wrap pending; and at
    /// least `rows` more line feeds follow in plain text, each of which scrolls the whole screen
    /// from the bottom row, so every row the skipped text could have touched is gone by then.
    /// Plain text changes nothing else but the REP character (the last one printed), which is
    /// set. The split property tests compare this with byte-by-byte feeding, which never skips.
    /// It relies on rows scrolled off the top being dropped, so it is off while a history is
    /// kept (the skipped lines would belong there); the history property test compares a
    /// history-keeping screen fed in one call with one fed byte by byte.
    fn skip_scrolled_off(&mut self, bytes: &[u8]) -> usize {
        let rows = self.term.rows;
        if self.term.history.keeps_rows() {
            return self.skip_into_history(bytes);
        }
        if !self.ground.is_ground() || self.term.top != 0 || self.term.bottom + 1 != rows {
            return 0;
        }
        let (end, feeds) = plain_prefix(bytes);
        if feeds < 2 * rows {
            return 0;
        }
        // The skip point: just after the line feed that has `rows` more after it (and so at
        // least `rows`, itself included, up to it).
        let Some(feed) = memchr::memrchr_iter(b'\n', &bytes[..end]).nth(rows) else {
            return 0;
        };
        if feed == 0 || bytes[feed - 1] != b'\r' {
            return 0;
        }
        let skipped = &bytes[..=feed];
        let last = skipped.iter().rev().find(|&&b| (0x20..0x7f).contains(&b)).copied();
        self.term.scrolled_off_at_bottom(last.map(char::from));
        feed + 1
    }

    /// The flood skip for a screen that keeps its scrolled-off rows (history or log): the rows
    /// are not drawn, but the history gets exactly the lines drawing would have given it, and
    /// the screen ends exactly as drawn. Returns how many bytes were accounted for (0: none).
    ///
    /// The plain prefix is drawn normally up to just after its `rows`-th line feed, if that
    /// follows a CR: the cursor is then at the start of a fresh bottom row (that feed scrolled).
    /// From there to the skip point (as in `skip_scrolled_off`: after a CR LF with `rows` more
    /// line feeds after it) the text must be lines separated by CR LF alone, printed with a pen
    /// that draws them as they are (ASCII character set, not concealed, no insert or newline
    /// mode, autowrap on). Each such line fills one row per `cols` characters (all but the last
    /// left wrapped), and each row produced scrolls the screen once, so: the screen's top rows
    /// and then the produced rows go into the history, in order, except the last `rows - 1`
    /// rows, which are drawn on the screen above a fresh bottom row.
    fn skip_into_history(&mut self, bytes: &[u8]) -> usize {
        let t = &self.term;
        let rows = t.rows;
        if !self.ground.is_ground()
            || t.alt_mode.is_some()
            || t.top != 0
            || t.bottom + 1 != rows
            || t.pen.has(flag::HIDDEN)
            || t.gl_charset() != modes::Charset::Ascii
            || t.modes.insert
            || t.modes.newline
            || !t.modes.autowrap
        {
            return 0;
        }
        let (end, feeds) = plain_prefix(bytes);
        if feeds < 3 * rows {
            return 0;
        }
        // The start: just after the `rows`-th line feed, which follows a CR.
        let Some(first) = memchr::memchr_iter(b'\n', &bytes[..end]).nth(rows - 1) else {
            return 0;
        };
        // The skip point: just after the line feed with `rows` more after it.
        let Some(feed) = memchr::memrchr_iter(b'\n', &bytes[..end]).nth(rows) else {
            return 0;
        };
        if first == 0 || bytes[first - 1] != b'\r' || feed <= first + 1 || bytes[feed - 1] != b'\r' {
            return 0;
        }
        // Lines separated by CR LF and nothing else (the last one ends at the skip point's CR).
        let middle = &bytes[first + 1..feed - 1];
        let crs = memchr::memchr_iter(b'\r', middle).count();
        let mut lfs = 0;
        for j in memchr::memchr_iter(b'\n', middle) {
            if j == 0 || middle[j - 1] != b'\r' {
                return 0;
            }
            lfs += 1;
        }
        if crs != lfs {
            return 0;
        }
        // The lines of `middle` (CR LF taken off), found with memchr rather than a byte loop:
        // the skip walks them twice, and a flood is little else.
        let lines = || {
            let mut from = 0;
            memchr::memchr_iter(b'\n', middle).chain(std::iter::once(middle.len())).map(move |end| {
                let line = &middle[from..end];
                from = end + 1;
                line.strip_suffix(b"\r").unwrap_or(line)
            })
        };
        // Draw the start normally: it leaves the cursor at the start of a fresh bottom row.
        self.parse_from(&bytes[..=first], 0);
        let cols = self.term.cols;
        let produced: usize = lines().map(|l| l.len().div_ceil(cols).max(1)).sum();
        let kept = produced.min(rows - 1);
        let blank = self.term.blank();
        let pen = self.term.pen;
        // The screen's rows above the bottom one scroll off first, as many as rows produced
        // (the bottom one is fresh: the produced rows start in it).
        self.term.main.scroll_up_into(0, rows - 1, kept, blank, Some(&mut self.term.history));
        // Then the produced rows: all but the last `kept` into the history, those on screen.
        let mut index = 0;
        for line in lines() {
            let n = line.len().div_ceil(cols).max(1);
            for k in 0..n {
                let chunk = &line[(k * cols).min(line.len())..((k + 1) * cols).min(line.len())];
                let wrapped = k + 1 < n;
                if index + kept < produced {
                    self.term.history.push_text(chunk, pen, blank, cols, wrapped);
                } else {
                    let row = self.term.main.row_mut(rows - 1 - (produced - index));
                    row.reset(blank);
                    row.write_plain(0, chunk.iter().map(|&b| char::from(b)), pen);
                    row.wrapped = wrapped;
                }
                index += 1;
            }
        }
        let last = middle.iter().rev().find(|&&b| (0x20..0x7f).contains(&b)).copied();
        self.term.scrolled_off_at_bottom(last.map(char::from));
        feed + 1
    }

    /// Decodes the text from `bytes[start]` (a non-ASCII byte, in ground state) up to the next
    /// control as vte 0.15's ground state does given the whole stream in one call: valid UTF-8
    /// printed, a lone byte 0x80..=0x9F executed as a C1 control, every other maximal invalid
    /// sequence (and one cut off by a control) replaced by U+FFFD. A character cut off by the
    /// end of `bytes` is kept in `self.partial`. Returns where the next byte is.
    fn print_utf8(&mut self, bytes: &[u8], start: usize) -> usize {
        let end = bytes[start..].iter().position(|&b| b < 0x20 || b == 0x7f).map_or(bytes.len(), |n| start + n);
        let mut i = start;
        while i < end {
            let e = match std::str::from_utf8(&bytes[i..end]) {
                Ok(text) => {
                    self.print_text(text);
                    return end;
                }
                Err(e) => e,
            };
            let valid = e.valid_up_to();
            self.print_text(std::str::from_utf8(&bytes[i..i + valid]).unwrap_or_default());
            i += valid;
            match e.error_len() {
                Some(1) if bytes[i] <= 0x9f => {
                    vte::Perform::execute(&mut self.term, bytes[i]);
                    i += 1;
                }
                Some(len) => {
                    self.term.print(char::REPLACEMENT_CHARACTER);
                    i += len;
                }
                None if end < bytes.len() => {
                    // Cut off by a control, which vte would see inside the same text.
                    self.term.print(char::REPLACEMENT_CHARACTER);
                    i = end;
                }
                None => {
                    // Cut off by the end of this call: at most three bytes, a valid prefix.
                    let cut = &bytes[i..end];
                    self.partial.bytes[..cut.len()].copy_from_slice(cut);
                    self.partial.len = cut.len();
                    i = end;
                }
            }
        }
        end
    }

    /// Continues the character in `self.partial` with the first bytes of a new call, as if
    /// both calls had been one: the character printed once complete, U+FFFD when a byte
    /// breaks it (that byte is then read afresh). Returns how many bytes of `bytes` it took.
    fn finish_partial(&mut self, bytes: &[u8]) -> usize {
        let old = self.partial.len;
        let take = bytes.len().min(self.partial.bytes.len() - old);
        let mut joined = self.partial.bytes;
        joined[old..old + take].copy_from_slice(&bytes[..take]);
        let joined = &joined[..old + take];
        let (valid, broken) = match std::str::from_utf8(joined) {
            Ok(_) => (joined.len(), None),
            Err(e) => (e.valid_up_to(), e.error_len()),
        };
        if valid > 0 {
            // The kept bytes alone were incomplete, so the first character ends past them;
            // what follows it is read afresh.
            let text = std::str::from_utf8(&joined[..valid]).unwrap_or_default();
            let len = text.chars().next().map_or(valid, char::len_utf8);
            self.print_text(&text[..len]);
            self.partial.len = 0;
            len.saturating_sub(old)
        } else if let Some(len) = broken {
            // The kept bytes are a valid prefix, so the maximal invalid sequence holds them
            // all, and perhaps a byte of this call.
            self.term.print(char::REPLACEMENT_CHARACTER);
            self.partial.len = 0;
            len.saturating_sub(old)
        } else {
            // Still incomplete: all of this call's bytes belong to the character.
            self.partial.bytes[old..old + take].copy_from_slice(&bytes[..take]);
            self.partial.len = old + take;
            take
        }
    }

    /// Prints valid UTF-8 without controls, as vte's ground state would: ASCII runs through
    /// the cell fast path, C1 characters (U+0080..U+009F) executed, everything else printed.
    fn print_text(&mut self, text: &str) {
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] < 0x80 {
                let end = bytes[i..].iter().position(|&b| b >= 0x80).map_or(bytes.len(), |n| i + n);
                self.term.print_ascii(&bytes[i..end]);
                i = end;
            } else {
                let Some(c) = text.get(i..).and_then(|t| t.chars().next()) else {
                    break;
                };
                if ('\u{80}'..='\u{9f}').contains(&c) {
                    vte::Perform::execute(&mut self.term, c as u8);
                } else {
                    self.term.print(c);
                }
                i += c.len_utf8();
            }
        }
    }

    /// True when no escape sequence or UTF-8 character is partially parsed: a keyframe taken
    /// now, followed by the bytes that come next, reproduces the stream exactly. Inside a
    /// sequence it cannot: the keyframe does not (and cannot portably) restore a half-parsed
    /// sequence, so the client would see the rest of it as plain text.
    pub fn at_ground_state(&self) -> bool {
        self.ground.is_ground() && self.partial.len == 0
    }

    /// Answers to terminal queries seen since the last call (DA1, DA2, DSR 5, DSR 6). The
    /// master writes them to the PTY only while no controller is attached.
    pub fn take_replies(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.term.replies)
    }

    /// Changes the size like tmux: fewer rows drop rows below the cursor first, then push rows
    /// from the top into the history; more rows pull history lines back down on top, then add
    /// blank rows; content stays left (no reflow); the scroll region is reset. The size is
    /// clamped to valid bounds. Policy and evidence: `docs/screen-model.md`.
    pub fn resize(&mut self, cols: u16, rows: u16) {
        let (cols, rows) = clamp_size(cols, rows);
        self.term.resize(cols, rows);
    }

    /// `(cols, rows)`.
    pub fn size(&self) -> (u16, u16) {
        // Both fit: they are bounded by MAX_COLS and MAX_ROWS.
        (self.term.cols as u16, self.term.rows as u16)
    }

    /// `(row, col)`, 0-based. While a wrap is pending the column is the last one.
    pub fn cursor(&self) -> (u16, u16) {
        (self.term.cur.row as u16, self.term.cur.col as u16)
    }

    /// True when the last character was written in the last column and the next one will wrap
    /// first (xterm's "pending wrap"; the vt100 crate shows it as `col == cols`).
    pub fn pending_wrap(&self) -> bool {
        self.term.cur.pending
    }

    /// The scroll region as `(top, bottom)` rows, 0-based and inclusive.
    pub fn scroll_region(&self) -> (u16, u16) {
        (self.term.top as u16, self.term.bottom as u16)
    }

    /// The window title (OSC 0 or 2). OSC 1 sets only the icon name.
    pub fn title(&self) -> &str {
        &self.term.title
    }

    /// The icon name (OSC 0 or 1).
    pub fn icon_name(&self) -> &str {
        &self.term.icon_name
    }

    /// Modes set by the application.
    pub fn modes(&self) -> Modes {
        self.term.public_modes()
    }

    /// The current pen (attributes new text is drawn with).
    pub fn pen(&self) -> Attrs {
        self.term.pen
    }

    /// The visible rows as text: one string per row, trailing blanks trimmed, a wide character
    /// once, combining marks kept after their base character.
    pub fn text_rows(&self) -> Vec<String> {
        self.term.grid().rows().iter().map(grid::Row::text).collect()
    }

    /// True when the row's text continues on the next row (it was left by autowrap).
    pub fn row_wrapped(&self, row: u16) -> bool {
        self.term.grid().row(usize::from(row)).is_some_and(|r| r.wrapped)
    }

    /// One visible cell as [`Screen::cell`] sees it, without building its text: the view
    /// reads every cell of a changed row at each repaint, and a `String` per cell made the
    /// allocator most of a typed key's repaint (issue 22).
    pub(crate) fn cell_ref(&self, row: u16, col: u16) -> Option<CellRef<'_>> {
        let r = self.term.grid().row(usize::from(row))?;
        let c = *r.get(usize::from(col))?;
        Some(CellRef { row: r, col: usize::from(col), cell: c })
    }

    /// One visible cell, `None` outside the screen.
    pub fn cell(&self, row: u16, col: u16) -> Option<CellView> {
        let r = self.term.grid().row(usize::from(row))?;
        let c = r.get(usize::from(col))?;
        let mut text = String::new();
        if !c.is_empty() && !c.is_continuation() {
            text.push(c.ch);
            text.extend(r.marks_at(usize::from(col)));
        }
        Some(CellView { text, wide: c.is_wide(), wide_continuation: c.is_continuation(), attrs: c.attrs })
    }

    /// Gives back the memory of rows that show nothing (a blank row costs no cells until it is
    /// written). For an idle session: the write path never frees, so output that scrolls keeps
    /// reusing its rows. What the model shows and renders is unchanged.
    pub fn release_idle_memory(&mut self) {
        self.term.release_blank_rows();
    }

    /// Rows of both buffers that hold cells (at most twice the height), for tests and
    /// diagnostics of the model's memory.
    pub fn allocated_rows(&self) -> usize {
        self.term.allocated_rows()
    }

    /// What `desk peek --json` prints.
    pub fn snapshot(&self) -> Snapshot {
        let (cols, rows) = self.size();
        let (row, col) = self.cursor();
        Snapshot {
            cols,
            rows,
            cursor: Cursor { row, col, visible: self.term.modes.cursor_visible },
            title: self.term.title.clone(),
            modes: self.modes(),
            lines: self.text_rows(),
        }
    }

    /// Bytes that, written to a terminal in any state, make it show exactly this model's state,
    /// so that the PTY bytes that follow are interpreted as the model interprets them. Take it
    /// only where [`Screen::at_ground_state`] is true.
    pub fn render_keyframe(&self) -> Vec<u8> {
        keyframe::render(&self.term)
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod history_tests;
