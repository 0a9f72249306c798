//! The scrollback: rows scrolled off the top of the main screen, oldest first, bounded.
//!
//! Owns the history lines and their bound; knows nothing of parsing, the cursor or modes.
//! A line is stored compactly: its text (each cell's character once, a wide character once,
//! combining marks after their base, an empty cell as a space, trailing blank cells dropped)
//! plus runs of attributes over that text, with no runs at all for a line drawn entirely in
//! default attributes. Invariants: at most `limit` lines are kept (the oldest are dropped
//! first); a limit of 0 keeps nothing; the runs of a line cover its text exactly, in order.
//!
//! Lines are numbered, so that a reader can ask for the history a page at a time while output
//! goes on (docs/protocol.md, SNAPSHOT_REQUEST): the oldest line kept has number `first`, the
//! others follow it without gaps, and a number is never given to another line. Dropping the
//! oldest line moves `first` on by one; forgetting every line (ED 3) or taking the newest back
//! (a resize that grows the screen) moves it past every number given so far, so a reader
//! holding an old number finds the line gone rather than finding another line in its place.

use std::collections::VecDeque;

use super::cell::{Attrs, Cell, Color, EMPTY};
use super::grid::Row;

/// History lines kept when the session does not say otherwise: what `desk new --history`
/// defaults to. xterm's `saveLines` default is 1024 and tmux's `history-limit` 2000; agents
/// print whole conversations inline on the main screen, so we keep more, and at roughly
/// 100-200 bytes per line of typical coloured output 10,000 lines cost about 2 MiB.
pub const DEFAULT_HISTORY_LINES: usize = 10_000;

/// Largest history a session may ask for: a million lines is ~200 MB of typical output, more
/// than any agent transcript needs; the bound keeps a typo from asking for unbounded memory.
pub const MAX_HISTORY_LINES: usize = 1_000_000;

/// One line of history: its text and, after it in the same allocation, its attribute runs,
/// each encoded in a few bytes (see `encode_run`): one allocation per line, and a run of an
/// indexed colour costs 3 bytes rather than a 12-byte struct. No runs for a line in default
/// attributes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(into = "SavedLine", try_from = "SavedLine")]
pub struct HistoryLine {
    data: Box<[u8]>,
    /// Bytes of `data` that are the text (UTF-8); the rest are the runs. Fits: a row is at most
    /// `MAX_COLS` cells of a 4-byte character and `MAX_COMBINING` 4-byte marks, 16,000 bytes.
    text_len: u16,
    wrapped: bool,
}

/// Bits of a run's tag byte: the kind of its foreground (bits 0-1) and background (bits 2-3)
/// colour, and whether SGR flags follow.
const KIND_INDEXED: u8 = 1;
const KIND_RGB: u8 = 2;
const HAS_FLAGS: u8 = 1 << 4;

fn color_kind(color: Color) -> u8 {
    match color {
        Color::Default => 0,
        Color::Indexed(_) => KIND_INDEXED,
        Color::Rgb(..) => KIND_RGB,
    }
}

fn push_color(out: &mut Vec<u8>, color: Color) {
    match color {
        Color::Default => {}
        Color::Indexed(n) => out.push(n),
        Color::Rgb(r, g, b) => out.extend_from_slice(&[r, g, b]),
    }
}

/// A run: its length in text bytes (LEB128, one byte below 128), a tag byte, then the
/// colours (0, 1 or 3 bytes each) and the flags (2 bytes, only when any is set).
fn encode_run(out: &mut Vec<u8>, bytes: usize, attrs: Attrs) {
    let mut n = bytes;
    loop {
        let low = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(low);
            break;
        }
        out.push(low | 0x80);
    }
    let flags = if attrs.flags != 0 { HAS_FLAGS } else { 0 };
    out.push(color_kind(attrs.fg) | color_kind(attrs.bg) << 2 | flags);
    push_color(out, attrs.fg);
    push_color(out, attrs.bg);
    if attrs.flags != 0 {
        out.extend_from_slice(&attrs.flags.to_le_bytes());
    }
}

/// A history line as a saved screen (`super::saved`) holds it: the text as text, the encoded
/// runs in hex (a few bytes a line; JSON would spell each byte as a number).
#[derive(serde::Serialize, serde::Deserialize)]
struct SavedLine {
    text: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    runs: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    wrapped: bool,
}

impl From<HistoryLine> for SavedLine {
    fn from(line: HistoryLine) -> SavedLine {
        let runs = line.data[usize::from(line.text_len)..].iter().map(|b| format!("{b:02x}")).collect();
        SavedLine { text: line.text().to_string(), runs, wrapped: line.wrapped }
    }
}

impl TryFrom<SavedLine> for HistoryLine {
    type Error = String;

    fn try_from(saved: SavedLine) -> Result<HistoryLine, String> {
        let text_len = u16::try_from(saved.text.len()).map_err(|_| "a history line longer than a row".to_string())?;
        let hex = saved.runs.as_bytes();
        if !hex.len().is_multiple_of(2) {
            return Err("a history line's runs are not hex".into());
        }
        let mut data = saved.text.into_bytes();
        for pair in hex.chunks(2) {
            let digits = std::str::from_utf8(pair).map_err(|_| "a history line's runs are not hex".to_string())?;
            data.push(u8::from_str_radix(digits, 16).map_err(|_| "a history line's runs are not hex".to_string())?);
        }
        // The runs must decode whole and cover no more than the text, as `encode_run` leaves them.
        let runs = &data[usize::from(text_len)..];
        let mut decoder = RunDecoder { data: runs };
        let mut covered = 0usize;
        while !decoder.data.is_empty() {
            if decoder.data.iter().take(3).all(|b| b & 0x80 != 0) {
                return Err("a history line's run is longer than a row".into());
            }
            let (len, _) = decoder.next().ok_or_else(|| "a history line's runs are cut off".to_string())?;
            covered += len;
        }
        if covered > usize::from(text_len) {
            return Err("a history line's runs cover more than its text".into());
        }
        Ok(HistoryLine { data: data.into_boxed_slice(), text_len, wrapped: saved.wrapped })
    }
}

/// Decodes the runs `encode_run` wrote, in order: `(text bytes, attributes)`.
struct RunDecoder<'a> {
    data: &'a [u8],
}

impl RunDecoder<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.data.split_first()?;
        self.data = rest;
        Some(b)
    }

    fn color(&mut self, kind: u8) -> Option<Color> {
        Some(match kind {
            KIND_INDEXED => Color::Indexed(self.byte()?),
            KIND_RGB => Color::Rgb(self.byte()?, self.byte()?, self.byte()?),
            _ => Color::Default,
        })
    }
}

impl Iterator for RunDecoder<'_> {
    type Item = (usize, Attrs);

    fn next(&mut self) -> Option<(usize, Attrs)> {
        let mut len = 0usize;
        let mut shift = 0;
        loop {
            let b = self.byte()?;
            len |= usize::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        let tag = self.byte()?;
        let fg = self.color(tag & 3)?;
        let bg = self.color(tag >> 2 & 3)?;
        let flags = if tag & HAS_FLAGS != 0 { u16::from_le_bytes([self.byte()?, self.byte()?]) } else { 0 };
        Some((len, Attrs { fg, bg, flags }))
    }
}

impl HistoryLine {
    /// The line of a screen row (see the module doc for what is kept). `scratch` is reused
    /// between calls so that a line costs one allocation of its exact size.
    pub(super) fn from_row(row: &Row, scratch: &mut Scratch) -> HistoryLine {
        let cells = row.cells();
        // Trailing cells that show nothing: never written, or a space in default attributes.
        let plain_attrs = Attrs::default();
        let shows_nothing = |c: &Cell| *c == Cell::BLANK || (c.ch == ' ' && c.kind == 0 && c.attrs == plain_attrs);
        let end = cells.iter().rposition(|c| !shows_nothing(c)).map_or(0, |i| i + 1);
        // The usual row of a flood: every cell up to `end` a narrow ASCII character (or empty)
        // in the default attributes. Its line is its text alone, copied a byte a cell without
        // the per-cell encoding and run bookkeeping below, which it would come to the same.
        let ascii = |c: &Cell| c.kind == 0 && c.attrs == plain_attrs && u32::from(c.ch) < 0x80;
        if cells[..end].iter().all(ascii) {
            let bytes = &mut scratch.bytes;
            bytes.clear();
            bytes.extend(cells[..end].iter().map(|c| if c.ch == EMPTY { b' ' } else { c.ch as u8 }));
            // At most MAX_COLS bytes: fits.
            return HistoryLine { data: Box::from(&bytes[..]), text_len: bytes.len() as u16, wrapped: row.wrapped };
        }
        Self::from_cells(row, &cells[..end], scratch)
    }

    /// [`HistoryLine::from_row`] for any row, `cells` being its cells up to the last that
    /// shows something.
    pub(super) fn from_cells(row: &Row, cells: &[Cell], scratch: &mut Scratch) -> HistoryLine {
        let Scratch { bytes: scratch, runs } = scratch;
        let end = cells.len();
        scratch.clear();
        runs.clear();
        let mut plain = true;
        for (col, cell) in cells[..end].iter().enumerate() {
            if cell.is_continuation() {
                continue;
            }
            let start = scratch.len();
            let ch = if cell.ch == EMPTY { ' ' } else { cell.ch };
            let mut buf = [0u8; 4];
            scratch.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
            if cell.has_marks() {
                for mark in row.marks_at(col) {
                    scratch.extend_from_slice(mark.encode_utf8(&mut buf).as_bytes());
                }
            }
            let len = scratch.len() - start;
            plain &= cell.attrs == Attrs::default();
            match runs.last_mut() {
                Some((bytes, attrs)) if *attrs == cell.attrs => *bytes += len,
                _ => runs.push((len, cell.attrs)),
            }
        }
        // At most MAX_COLS cells of 16 bytes: fits.
        let text_len = scratch.len() as u16;
        if !plain {
            for &(bytes, attrs) in runs.iter() {
                encode_run(scratch, bytes, attrs);
            }
        }
        HistoryLine { data: Box::from(&scratch[..]), text_len, wrapped: row.wrapped }
    }

    /// The text (trailing blanks dropped).
    pub fn text(&self) -> &str {
        // Written from `char`s, so always UTF-8.
        std::str::from_utf8(self.text_bytes()).unwrap_or_default()
    }

    /// [`HistoryLine::text`] as the UTF-8 bytes it is, without checking them again.
    fn text_bytes(&self) -> &[u8] {
        &self.data[..usize::from(self.text_len)]
    }

    /// True when the line's text continues on the next line (it was left by autowrap).
    pub fn wrapped(&self) -> bool {
        self.wrapped
    }

    /// The text in runs of equal attributes, left to right; one default run for plain text.
    pub fn runs(&self) -> impl Iterator<Item = (&str, Attrs)> + '_ {
        let text = self.text();
        let encoded = &self.data[usize::from(self.text_len)..];
        let plain = encoded.is_empty().then_some((text, Attrs::default()));
        let mut at = 0;
        let runs = RunDecoder { data: encoded }.map(move |(len, attrs)| {
            let end = at + len;
            let s = text.get(at..end).unwrap_or_default();
            at = end;
            (s, attrs)
        });
        plain.into_iter().filter(|(s, _)| !s.is_empty()).chain(runs)
    }

    /// True when the line has attribute runs (it is not all in default attributes).
    fn has_runs(&self) -> bool {
        usize::from(self.text_len) < self.data.len()
    }

    /// Heap bytes the line holds, for memory accounting.
    pub fn heap_bytes(&self) -> usize {
        self.data.len()
    }
}

/// The bounded history of one screen.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct History {
    lines: VecDeque<HistoryLine>,
    limit: usize,
    /// The number of `lines[0]` (see the module doc).
    first: u64,
    /// Reused to build each line (see `HistoryLine::from_row`).
    #[serde(skip)]
    scratch: Scratch,
    /// With a session log: the text of the lines pushed since the owner last took it, one
    /// line each, `\n`-terminated (UTF-8). Bounded by what one `feed` call scrolls off (the
    /// master takes it after every call).
    log: Option<Vec<u8>>,
}

/// Buffers reused by `HistoryLine::from_row`, so that pushing a line allocates only the
/// line. They compare equal whatever they hold: they carry no state between calls.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scratch {
    bytes: Vec<u8>,
    runs: Vec<(usize, Attrs)>,
}

impl PartialEq for Scratch {
    fn eq(&self, _: &Scratch) -> bool {
        true
    }
}

impl Eq for Scratch {}

impl History {
    /// Checks a history read back from a saved screen against its bound.
    pub(super) fn check_restored(&self) -> Result<(), String> {
        if self.limit > MAX_HISTORY_LINES || self.lines.len() > self.limit {
            return Err(format!("a history of {} lines under a bound of {}", self.lines.len(), self.limit));
        }
        Ok(())
    }

    /// An empty history keeping at most `limit` lines (clamped to `MAX_HISTORY_LINES`).
    pub(super) fn new(limit: usize) -> History {
        History {
            lines: VecDeque::new(),
            limit: limit.min(MAX_HISTORY_LINES),
            first: 0,
            scratch: Scratch::default(),
            log: None,
        }
    }

    /// The bound.
    pub(super) fn limit(&self) -> usize {
        self.limit
    }

    /// Lines kept.
    pub(super) fn len(&self) -> usize {
        self.lines.len()
    }

    /// Appends a row that scrolled off the top, dropping the oldest line past the bound.
    pub(crate) fn push_row(&mut self, row: &Row) {
        if !self.keeps_rows() {
            return;
        }
        let line = HistoryLine::from_row(row, &mut self.scratch);
        self.push_line(line);
    }

    /// Appends the line that a row reset to `blank` and then written with `chunk` (printable
    /// ASCII, at most `cols` bytes) in `pen` from column 0 would give: exactly what `push_row`
    /// of that row gives, without building the row when the pen is the default one.
    pub(crate) fn push_text(&mut self, chunk: &[u8], pen: Attrs, blank: Cell, cols: usize, wrapped: bool) {
        if !self.keeps_rows() {
            return;
        }
        if pen == Attrs::default() {
            // Default pen: blank is `Cell::BLANK`, nothing but the text shows, and trailing
            // spaces count as blank.
            let end = chunk.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
            // At most `cols` <= MAX_COLS bytes: fits.
            let line = HistoryLine { data: Box::from(&chunk[..end]), text_len: end as u16, wrapped };
            self.push_line(line);
        } else {
            let mut row = Row::new(cols, blank);
            row.write_plain(0, chunk.iter().map(|&b| char::from(b)), pen);
            row.wrapped = wrapped;
            self.push_row(&row);
        }
    }

    fn push_line(&mut self, line: HistoryLine) {
        if let Some(log) = &mut self.log {
            log.extend_from_slice(line.text_bytes());
            log.push(b'\n');
        }
        if self.limit == 0 {
            return;
        }
        if self.lines.len() >= self.limit {
            self.lines.pop_front();
            self.first += 1;
        }
        self.lines.push_back(line);
    }

    /// True when rows scrolled off go anywhere (the history, or the log text).
    pub(super) fn keeps_rows(&self) -> bool {
        self.limit > 0 || self.log.is_some()
    }

    /// Starts collecting the text of scrolled-off lines for a session log.
    pub(super) fn enable_log(&mut self) {
        self.log.get_or_insert_with(Vec::new);
    }

    /// Hands `take` the text collected since the last call, and forgets it (an empty text
    /// without a log).
    pub(super) fn take_log_text(&mut self, take: impl FnOnce(&[u8])) {
        match &mut self.log {
            Some(log) => {
                take(log);
                log.clear();
            }
            None => take(&[]),
        }
    }

    /// Takes the newest line back (a resize that grows the screen pulls it down). The lines
    /// left are numbered anew, past every number given so far: the popped line's number could
    /// otherwise go to a different line.
    pub(crate) fn pop_newest(&mut self) -> Option<HistoryLine> {
        let line = self.lines.pop_back()?;
        self.first = self.end() + 1;
        Some(line)
    }

    /// Forgets every line (ED 3).
    pub(super) fn clear(&mut self) {
        self.first = self.end();
        self.lines = VecDeque::new();
    }

    /// The number of the oldest line kept (see the module doc).
    pub(super) fn first(&self) -> u64 {
        self.first
    }

    /// One past the number of the newest line kept: the number the next line will get.
    pub(super) fn end(&self) -> u64 {
        self.first + self.lines.len() as u64
    }

    /// The lines numbered `from` on, oldest first, from the oldest kept when `from` is older.
    pub(super) fn numbered_from(&self, from: u64) -> impl DoubleEndedIterator<Item = &HistoryLine> {
        let skip = usize::try_from(from.saturating_sub(self.first)).unwrap_or(usize::MAX).min(self.lines.len());
        self.lines.range(skip..)
    }

    /// The newest `n` lines (or all), oldest first.
    pub(super) fn tail(&self, n: usize) -> impl DoubleEndedIterator<Item = &HistoryLine> {
        self.lines.iter().skip(self.lines.len().saturating_sub(n))
    }

    /// Heap bytes held, for memory accounting.
    pub(super) fn heap_bytes(&self) -> usize {
        self.lines.capacity() * std::mem::size_of::<HistoryLine>()
            + self.lines.iter().map(HistoryLine::heap_bytes).sum::<usize>()
    }
}

impl HistoryLine {
    /// The line as a screen row of `cols` cells again (a resize that grows the screen pulls
    /// it back down): each character in its run's attributes, wide characters over two cells,
    /// marks on their base; what does not fit in `cols` is cut, as a narrowing resize cuts.
    pub(super) fn to_row(&self, cols: usize) -> Row {
        use unicode_width::UnicodeWidthChar;
        let mut row = Row::new(cols, Cell::BLANK);
        let mut col = 0;
        let mut last: Option<usize> = None;
        for (text, attrs) in self.runs() {
            for c in text.chars() {
                match c.width() {
                    Some(0) => {
                        if let Some(base) = last {
                            row.push_mark(base, c);
                        }
                    }
                    Some(2) if col + 2 <= cols => {
                        row.put(col, Cell { ch: c, attrs, kind: super::cell::kind::WIDE }, Cell::BLANK);
                        last = Some(col);
                        col += 2;
                    }
                    Some(1) if col < cols => {
                        let ch = if c == ' ' && attrs == Attrs::default() { EMPTY } else { c };
                        if ch != EMPTY || attrs != Attrs::default() {
                            row.put(col, Cell { ch, attrs, kind: 0 }, Cell::BLANK);
                        }
                        last = Some(col);
                        col += 1;
                    }
                    _ => col = cols,
                }
            }
        }
        row.wrapped = self.wrapped;
        row
    }
}

/// A history line as `desk peek --json --history` prints it and SNAPSHOT carries it: the text,
/// whether it continues on the next line, and (unless the whole line is in default
/// attributes) its attribute runs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HistoryRow {
    /// The line's text, trailing blanks dropped.
    pub text: String,
    /// The text continues on the next line (autowrap).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wrapped: bool,
    /// The text in runs of equal attributes; absent for a line in default attributes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<StyleRun>,
}

/// One run of a [`HistoryRow`]: text drawn with one set of attributes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StyleRun {
    /// The run's text.
    pub text: String,
    /// Foreground: absent for the default, an index 0-255, or `"#rrggbb"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fg: Option<JsonColor>,
    /// Background, as `fg`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bg: Option<JsonColor>,
    /// SGR attribute bits (`flag`), absent when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub flags: u16,
}

fn is_zero(n: &u16) -> bool {
    *n == 0
}

/// A colour in JSON: an indexed colour as its number, a direct one as `"#rrggbb"`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum JsonColor {
    /// One of the 256 indexed colours.
    Indexed(u8),
    /// A direct colour, `"#rrggbb"`.
    Rgb(String),
}

impl JsonColor {
    fn of(color: super::cell::Color) -> Option<JsonColor> {
        match color {
            super::cell::Color::Default => None,
            super::cell::Color::Indexed(n) => Some(JsonColor::Indexed(n)),
            super::cell::Color::Rgb(r, g, b) => Some(JsonColor::Rgb(format!("#{r:02x}{g:02x}{b:02x}"))),
        }
    }

    /// The colour back (a malformed `"#rrggbb"` reads as the default).
    pub fn color(&self) -> super::cell::Color {
        match self {
            JsonColor::Indexed(n) => super::cell::Color::Indexed(*n),
            JsonColor::Rgb(s) => {
                let hex = s.strip_prefix('#').filter(|h| h.len() == 6 && h.is_ascii());
                let byte = |i: usize| hex.and_then(|h| u8::from_str_radix(&h[i..i + 2], 16).ok());
                match (byte(0), byte(2), byte(4)) {
                    (Some(r), Some(g), Some(b)) => super::cell::Color::Rgb(r, g, b),
                    _ => super::cell::Color::Default,
                }
            }
        }
    }
}

impl StyleRun {
    /// The run's attributes.
    pub fn attrs(&self) -> Attrs {
        Attrs {
            fg: self.fg.as_ref().map_or(super::cell::Color::Default, JsonColor::color),
            bg: self.bg.as_ref().map_or(super::cell::Color::Default, JsonColor::color),
            flags: self.flags,
        }
    }
}

impl HistoryLine {
    /// The line as a [`HistoryRow`].
    pub fn to_json_row(&self) -> HistoryRow {
        let runs = if !self.has_runs() {
            Vec::new()
        } else {
            self.runs()
                .map(|(text, a)| StyleRun {
                    text: text.to_string(),
                    fg: JsonColor::of(a.fg),
                    bg: JsonColor::of(a.bg),
                    flags: a.flags,
                })
                .collect()
        };
        HistoryRow { text: self.text().to_string(), wrapped: self.wrapped, runs }
    }
}

impl HistoryRow {
    /// The row as bytes for a terminal: each run in its attributes (one complete SGR per
    /// run), then the attributes reset; no line ending. What `desk attach --history` writes.
    pub fn to_ansi(&self) -> String {
        if self.runs.is_empty() {
            return self.text.clone();
        }
        let mut out = String::new();
        for run in &self.runs {
            run.attrs().write_sgr(&mut out);
            out.push_str(&run.text);
        }
        out.push_str("\x1b[0m");
        out
    }
}
