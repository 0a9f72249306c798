//! The vt100 crate as an independent emulator: it plays the attaching client's terminal.
//!
//! A keyframe is correct when a terminal that receives `keyframe(model after stream[..k])`
//! followed by `stream[k..]` ends in the same state as a terminal that received `stream`
//! directly. Both terminals here are vt100 parsers, so the comparison does not trust our model
//! at all; the model only produces the keyframe. Compared: every visible cell (text, wide
//! flags, colours, bold/dim/italic/underline/inverse), the cursor (including vt100's
//! "past the last column" state), cursor visibility, the alternate-screen flag, bracketed
//! paste, cursor-key and keypad modes, mouse mode and encoding, and the title.
//!
//! The title is compared when the application set a non-empty one: the keyframe leaves the
//! client's own title alone otherwise.
//!
//! Erased cells are compared by background only: vt100 copies the whole pen into an erased
//! cell while xterm (and our model) keeps only the colours (background colour erase), and only
//! the background of an empty cell is visible.

use desk_term::screen::Screen;

/// Records the title the way a conforming terminal does: vt100 hands titles that contain ';'
/// to `unhandled_osc` in pieces, so they are joined back here.
#[derive(Default)]
pub(super) struct Titles {
    pub title: String,
}

impl vt100::Callbacks for Titles {
    fn set_window_title(&mut self, _: &mut vt100::Screen, title: &[u8]) {
        self.title = String::from_utf8_lossy(title).into_owned();
    }

    fn unhandled_osc(&mut self, _: &mut vt100::Screen, params: &[&[u8]]) {
        if let [command, rest @ ..] = params
            && (*command == b"0" || *command == b"2")
            && !rest.is_empty()
        {
            self.title = String::from_utf8_lossy(&rest.join(&b';')).into_owned();
        }
    }
}

/// A vt100 terminal of a given size.
pub(super) struct Oracle {
    parser: vt100::Parser<Titles>,
    cols: u16,
}

/// One cell as vt100 shows it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct CellState {
    pub text: String,
    pub wide: bool,
    pub continuation: bool,
    pub fg: Option<vt100::Color>,
    pub bg: vt100::Color,
    pub bold: bool,
    pub dim: bool,
    pub italic: bool,
    pub underline: bool,
    pub inverse: bool,
}

/// Everything the fidelity check compares.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct State {
    pub cells: Vec<Vec<CellState>>,
    /// Row, column (clamped to the last column) and whether vt100 has the cursor past the last
    /// column (pending wrap).
    pub cursor: (u16, u16, bool),
    pub cursor_hidden: bool,
    pub alternate_screen: bool,
    pub bracketed_paste: bool,
    pub app_cursor: bool,
    pub app_keypad: bool,
    pub mouse: String,
    pub mouse_encoding: String,
    pub title: String,
}

impl Oracle {
    pub(super) fn new(cols: u16, rows: u16) -> Oracle {
        let (Some(r), Some(c)) = (std::num::NonZeroU16::new(rows), std::num::NonZeroU16::new(cols)) else {
            panic!("oracle size must be non-zero");
        };
        Oracle { parser: vt100::Parser::new_with_callbacks(r, c, 0, Titles::default()), cols }
    }

    /// Feed bytes. vt100 does not implement SCOSC/SCORC (`CSI s`, `CSI u` without parameters),
    /// which xterm performs exactly as DECSC/DECRC and real agents use (OpenCode saves the
    /// cursor with them before entering the alternate screen), so they are fed as `ESC 7` and
    /// `ESC 8`. Callers feed whole sequences (split only at ground state), so a sequence is
    /// never cut between two calls.
    pub(super) fn process(&mut self, bytes: &[u8]) {
        let mut fed = Vec::with_capacity(bytes.len());
        let mut rest = bytes;
        while !rest.is_empty() {
            if rest.starts_with(b"\x1b[s") {
                fed.extend_from_slice(b"\x1b7");
                rest = &rest[3..];
            } else if rest.starts_with(b"\x1b[u") {
                fed.extend_from_slice(b"\x1b8");
                rest = &rest[3..];
            } else {
                fed.push(rest[0]);
                rest = &rest[1..];
            }
        }
        self.parser.process(&fed);
    }

    /// Cursor as `(row, col, past_last_column)`.
    pub(super) fn cursor(&self) -> (u16, u16, bool) {
        let (row, col) = self.parser.screen().cursor_position();
        (row, col.min(self.cols - 1), col >= self.cols)
    }

    /// Visible rows as text, trailing blanks trimmed (comparable with `Screen::text_rows`).
    pub(super) fn text_rows(&self) -> Vec<String> {
        self.parser.screen().rows(0, self.cols).map(|r| r.trim_end_matches(' ').to_string()).collect()
    }

    pub(super) fn state(&self) -> State {
        let screen = self.parser.screen();
        let (rows, cols) = screen.size();
        let mut cells = Vec::new();
        for r in 0..rows.get() {
            let mut row = Vec::new();
            for c in 0..cols.get() {
                let Some(cell) = screen.cell(r, c) else {
                    continue;
                };
                let text = cell.contents().to_string();
                let continuation = cell.is_wide_continuation();
                let state = if continuation {
                    CellState {
                        text: String::new(),
                        wide: false,
                        continuation: true,
                        fg: None,
                        bg: vt100::Color::Default,
                        bold: false,
                        dim: false,
                        italic: false,
                        underline: false,
                        inverse: false,
                    }
                } else if text.is_empty() {
                    CellState {
                        text,
                        wide: false,
                        continuation: false,
                        fg: None,
                        bg: cell.bgcolor(),
                        bold: false,
                        dim: false,
                        italic: false,
                        underline: false,
                        inverse: false,
                    }
                } else {
                    CellState {
                        text,
                        wide: cell.is_wide(),
                        continuation: false,
                        fg: Some(cell.fgcolor()),
                        bg: cell.bgcolor(),
                        bold: cell.bold(),
                        dim: cell.dim(),
                        italic: cell.italic(),
                        underline: cell.underline(),
                        inverse: cell.inverse(),
                    }
                };
                row.push(state);
            }
            cells.push(row);
        }
        State {
            cells,
            cursor: self.cursor(),
            cursor_hidden: screen.hide_cursor(),
            alternate_screen: screen.alternate_screen(),
            bracketed_paste: screen.bracketed_paste(),
            app_cursor: screen.application_cursor(),
            app_keypad: screen.application_keypad(),
            mouse: format!("{:?}", screen.mouse_protocol_mode()),
            mouse_encoding: format!("{:?}", screen.mouse_protocol_encoding()),
            title: self.parser.callbacks().title.clone(),
        }
    }
}

/// A readable description of the first differences between two states.
pub(super) fn describe_difference(direct: &State, replayed: &State) -> String {
    let mut out = Vec::new();
    for (r, (a, b)) in direct.cells.iter().zip(&replayed.cells).enumerate() {
        for (c, (x, y)) in a.iter().zip(b).enumerate() {
            if x != y && out.len() < 6 {
                out.push(format!("cell ({r},{c}): direct {x:?}\n             replayed {y:?}"));
            }
        }
    }
    macro_rules! field {
        ($name:ident) => {
            if direct.$name != replayed.$name {
                out.push(format!("{}: direct {:?}, replayed {:?}", stringify!($name), direct.$name, replayed.$name));
            }
        };
    }
    field!(cursor);
    field!(cursor_hidden);
    field!(alternate_screen);
    field!(bracketed_paste);
    field!(app_cursor);
    field!(app_keypad);
    field!(mouse);
    field!(mouse_encoding);
    field!(title);
    out.join("\n")
}

/// Modes, region, charset, colours and screen content left over from "some earlier session":
/// the keyframe must work whatever state the client's terminal is in.
pub(super) const DIRTY_CLIENT: &[u8] = b"old session\x1b[?1049h\x1b[41;1mjunk\x1b[3;5r\x1b[?6h\x1b7\
\x1b[?2004h\x1b[?1003h\x1b[?1006h\x1b[?1h\x1b=\x1b[?25l\x1b]2;old title\x07\x1b[4;4Hxyz";

/// Offsets `k` (including 0 and the end) where the model is between escape sequences and
/// characters, so a keyframe can be taken there.
pub(super) fn ground_offsets(cols: u16, rows: u16, stream: &[u8]) -> Vec<usize> {
    let mut model = Screen::new(cols, rows);
    let mut offsets = vec![0];
    for (i, &b) in stream.iter().enumerate() {
        model.process(&[b]);
        if model.at_ground_state() {
            offsets.push(i + 1);
        }
    }
    offsets
}

/// Checks the keyframe taken after `stream[..k]`: a dirty client that receives it and then
/// `stream[k..]` must end in the same state as a fresh client that received `stream`.
pub(super) fn check_split(cols: u16, rows: u16, stream: &[u8], k: usize, direct: &State) -> Result<(), String> {
    let mut model = Screen::new(cols, rows);
    model.process(&stream[..k]);
    if !model.at_ground_state() {
        return Err(format!("offset {k} is not at ground state"));
    }
    let keyframe = model.render_keyframe();
    let mut replayed = Oracle::new(cols, rows);
    replayed.process(DIRTY_CLIENT);
    replayed.process(&keyframe);
    replayed.process(&stream[k..]);
    let mut replayed = replayed.state();
    if direct.title.is_empty() {
        // The keyframe only sends a title the application set (an empty one would blank the
        // user's window title), so the client keeps whatever it showed before.
        replayed.title.clear();
    }
    if *direct == replayed {
        Ok(())
    } else {
        Err(format!(
            "split at {k} of {} bytes ({cols}x{rows}) diverges:\n{}\nbefore: {:?}\nafter: {:?}\nkeyframe: {:?}",
            stream.len(),
            describe_difference(direct, &replayed),
            String::from_utf8_lossy(&stream[k.saturating_sub(60)..k]),
            String::from_utf8_lossy(&stream[k..(k + 60).min(stream.len())]),
            String::from_utf8_lossy(&keyframe),
        ))
    }
}

/// Checks every ground-state offset (or every `stride`-th one, always including both ends).
pub(super) fn check_splits(cols: u16, rows: u16, stream: &[u8], stride: usize) -> Result<usize, String> {
    let mut direct = Oracle::new(cols, rows);
    direct.process(stream);
    let direct = direct.state();
    let offsets = ground_offsets(cols, rows, stream);
    let last = offsets.len() - 1;
    let mut checked = 0;
    for (i, &k) in offsets.iter().enumerate() {
        if i % stride.max(1) == 0 || i == last {
            check_split(cols, rows, stream, k, &direct)?;
            checked += 1;
        }
    }
    Ok(checked)
}

/// The model's text after the whole stream must match the oracle's.
pub(super) fn check_text(cols: u16, rows: u16, stream: &[u8]) -> Result<(), String> {
    let mut model = Screen::new(cols, rows);
    model.process(stream);
    let mut oracle = Oracle::new(cols, rows);
    oracle.process(stream);
    let (want, got) = (oracle.text_rows(), model.text_rows());
    if want != got {
        return Err(format!("text differs:\noracle {want:#?}\nmodel  {got:#?}"));
    }
    let (row, col, past) = oracle.cursor();
    if (row, col) != model.cursor() || past != model.pending_wrap() {
        return Err(format!(
            "cursor differs: oracle {:?}, model {:?} pending {}",
            (row, col, past),
            model.cursor(),
            model.pending_wrap()
        ));
    }
    Ok(())
}
