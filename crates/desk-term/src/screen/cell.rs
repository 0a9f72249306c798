//! One character cell and the drawing attributes ("pen") it was written with.
//!
//! Owns the representation of colours, SGR attributes and cells, nothing else. Invariants: a
//! cell is either empty (`ch == EMPTY`, nothing was printed there since it was last erased), a
//! narrow character, the base of a wide character (`WIDE`, its right half is the next cell) or
//! the right half of one (`CONTINUATION`, `ch == EMPTY`). A cell is 16 bytes and `Copy`, so rows
//! are flat vectors and the printable fast path is a plain store. Combining marks do not live in
//! the cell: the row keeps them in a side list and the cell only carries the `MARKS` flag, which
//! keeps the common cell small.

/// Foreground or background colour of a cell, as the application asked for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Color {
    /// The terminal's default colour (SGR 39 / 49).
    #[default]
    Default,
    /// One of the 256 indexed colours (0-7 via SGR 30-37, 8-15 via 90-97, or 38;5;n).
    Indexed(u8),
    /// A direct colour (38;2;r;g;b).
    Rgb(u8, u8, u8),
}

/// SGR attribute bits. Bold and faint are independent, as in xterm (SGR 22 clears both).
pub mod flag {
    /// SGR 1.
    pub const BOLD: u16 = 1 << 0;
    /// SGR 2 (faint).
    pub const DIM: u16 = 1 << 1;
    /// SGR 3.
    pub const ITALIC: u16 = 1 << 2;
    /// SGR 4.
    pub const UNDERLINE: u16 = 1 << 3;
    /// SGR 21 (xterm: doubly underlined).
    pub const DOUBLE_UNDERLINE: u16 = 1 << 4;
    /// SGR 5 or 6.
    pub const BLINK: u16 = 1 << 5;
    /// SGR 7.
    pub const INVERSE: u16 = 1 << 6;
    /// SGR 8. Like xterm, text written with it is stored as spaces.
    pub const HIDDEN: u16 = 1 << 7;
    /// SGR 9.
    pub const STRIKE: u16 = 1 << 8;
}

/// The drawing attributes of a cell, and the pen that new text is drawn with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Attrs {
    /// Foreground colour.
    pub fg: Color,
    /// Background colour.
    pub bg: Color,
    /// Bit set of [`flag`] values.
    pub flags: u16,
}

impl Attrs {
    /// A complete SGR sequence setting these attributes from scratch (`CSI 0 ; ... m`): the one
    /// spelling keyframes, history text and client views share.
    pub(crate) fn sgr(&self) -> String {
        let mut s = String::new();
        self.write_sgr(&mut s);
        s
    }

    /// [`Attrs::sgr`] written into `out`.
    pub(crate) fn write_sgr(&self, out: &mut impl std::fmt::Write) {
        let _ = out.write_str("\x1b[0");
        for (bit, code) in [
            (flag::BOLD, "1"),
            (flag::DIM, "2"),
            (flag::ITALIC, "3"),
            (flag::UNDERLINE, "4"),
            (flag::BLINK, "5"),
            (flag::INVERSE, "7"),
            (flag::HIDDEN, "8"),
            (flag::STRIKE, "9"),
            (flag::DOUBLE_UNDERLINE, "21"),
        ] {
            if self.has(bit) {
                let _ = out.write_char(';');
                let _ = out.write_str(code);
            }
        }
        sgr_color(out, self.fg, 30, 90, 38);
        sgr_color(out, self.bg, 40, 100, 48);
        let _ = out.write_char('m');
    }

    /// True when `bit` (one of [`flag`]) is set.
    pub fn has(&self, bit: u16) -> bool {
        self.flags & bit != 0
    }

    /// The attributes an erase leaves behind with this pen: xterm's "background colour erase"
    /// keeps only the colours (the foreground is invisible on an empty cell, so only the
    /// background is kept), never bold, underline, inverse and the rest.
    pub fn erased(&self) -> Attrs {
        Attrs { fg: Color::Default, bg: self.bg, flags: 0 }
    }
}

/// Marker stored in `Cell::ch` for a cell with no character (erased, or never written).
pub(super) const EMPTY: char = '\0';

/// Cell layout bits (not SGR attributes).
pub(super) mod kind {
    /// The cell holds the left half of a width-2 character.
    pub(crate) const WIDE: u8 = 1 << 0;
    /// The cell is the right half of the width-2 character in the cell before it.
    pub(crate) const CONTINUATION: u8 = 1 << 1;
    /// The row's side list holds combining marks for this cell.
    pub(crate) const MARKS: u8 = 1 << 2;
}

/// One character cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Cell {
    /// The base character, or [`EMPTY`].
    #[serde(rename = "c")]
    pub ch: char,
    /// Attributes it was drawn (or erased) with.
    #[serde(rename = "a")]
    pub attrs: Attrs,
    /// Bit set of [`kind`] values.
    #[serde(rename = "k")]
    pub kind: u8,
}

impl Cell {
    /// An empty cell with default attributes: the state of a fresh screen.
    pub(super) const BLANK: Cell =
        Cell { ch: EMPTY, attrs: Attrs { fg: Color::Default, bg: Color::Default, flags: 0 }, kind: 0 };

    /// An empty cell left by an erase with `pen` (background colour erase).
    pub(super) fn erased(pen: &Attrs) -> Cell {
        Cell { ch: EMPTY, attrs: pen.erased(), kind: 0 }
    }

    /// A narrow character drawn with `attrs`.
    pub(super) fn narrow(ch: char, attrs: Attrs) -> Cell {
        Cell { ch, attrs, kind: 0 }
    }

    /// True when nothing is printed in this cell (it may still carry a background colour).
    pub(super) fn is_empty(&self) -> bool {
        self.ch == EMPTY && self.kind & kind::CONTINUATION == 0
    }

    /// True for the left half of a wide character.
    pub(super) fn is_wide(&self) -> bool {
        self.kind & kind::WIDE != 0
    }

    /// True for the right half of a wide character.
    pub(super) fn is_continuation(&self) -> bool {
        self.kind & kind::CONTINUATION != 0
    }

    /// True when the row holds combining marks for this cell.
    pub(super) fn has_marks(&self) -> bool {
        self.kind & kind::MARKS != 0
    }
}

/// One colour's SGR parameters: `base + n` for the 8 basic colours, `bright + n - 8` for the
/// bright ones, `extended;5;n` and `extended;2;r;g;b` beyond.
fn sgr_color(out: &mut impl std::fmt::Write, color: Color, base: u8, bright: u8, extended: u8) {
    let _ = match color {
        Color::Default => Ok(()),
        Color::Indexed(n) if n < 8 => write!(out, ";{}", base + n),
        Color::Indexed(n) if n < 16 => write!(out, ";{}", bright + n - 8),
        Color::Indexed(n) => write!(out, ";{extended};5;{n}"),
        Color::Rgb(r, g, b) => write!(out, ";{extended};2;{r};{g};{b}"),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_stays_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<Cell>(), 16);
    }

    #[test]
    fn erase_keeps_only_the_background() {
        let pen = Attrs { fg: Color::Indexed(1), bg: Color::Rgb(1, 2, 3), flags: flag::BOLD | flag::INVERSE };
        assert_eq!(Cell::erased(&pen).attrs, Attrs { fg: Color::Default, bg: Color::Rgb(1, 2, 3), flags: 0 });
    }
}
