//! Terminal modes, character sets and tab stops: the settings that change how later bytes are
//! interpreted or how keys and the mouse are reported, as opposed to what is on the screen.
//!
//! Owns the public [`Modes`] view (what `desk peek --json` and the delivery engine read), the
//! mouse enums, the G0/G1 character-set state and the tab-stop set. Invariants: a [`TabStops`]
//! covers `MAX_TAB_COLUMNS` columns whatever the screen width, like xterm's fixed tab array, so
//! a resize never loses or invents stops; mouse tracking has one active mode at a time (xterm
//! semantics: resetting any tracking mode turns tracking off).

use serde::{Deserialize, Serialize};

/// Which mouse events the application asked to receive (DECSET 9, 1000, 1002, 1003).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MouseMode {
    /// No mouse reporting.
    #[default]
    None,
    /// X10 compatibility: button presses only (DECSET 9).
    Press,
    /// Presses and releases (DECSET 1000).
    PressRelease,
    /// Presses, releases and motion while a button is held (DECSET 1002).
    ButtonMotion,
    /// Presses, releases and all motion (DECSET 1003).
    AnyMotion,
}

impl MouseMode {
    /// The DECSET number that enables this mode (0 for `None`).
    pub fn code(self) -> u16 {
        match self {
            MouseMode::None => 0,
            MouseMode::Press => 9,
            MouseMode::PressRelease => 1000,
            MouseMode::ButtonMotion => 1002,
            MouseMode::AnyMotion => 1003,
        }
    }
}

/// How mouse coordinates are encoded in reports (DECSET 1005, 1006, 1015).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MouseEncoding {
    /// Single bytes (coordinates up to 223).
    #[default]
    Default,
    /// UTF-8 encoded coordinates (DECSET 1005).
    Utf8,
    /// `CSI < b ; x ; y M/m` (DECSET 1006).
    Sgr,
    /// `CSI b ; x ; y M` (DECSET 1015).
    Urxvt,
}

impl MouseEncoding {
    /// The DECSET number that enables this encoding (0 for `Default`).
    pub fn code(self) -> u16 {
        match self {
            MouseEncoding::Default => 0,
            MouseEncoding::Utf8 => 1005,
            MouseEncoding::Sgr => 1006,
            MouseEncoding::Urxvt => 1015,
        }
    }
}

/// The modes an application has set, as reported by [`super::Screen::modes`].
///
/// `Default` is all-off; a fresh screen reports `cursor_visible` and `autowrap` on, like a
/// terminal after power-on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Modes {
    /// The alternate screen buffer is shown (DECSET 47, 1047 or 1049).
    pub alternate_screen: bool,
    /// Pastes are wrapped in `CSI 200~` / `CSI 201~` (DECSET 2004).
    pub bracketed_paste: bool,
    /// Cursor keys send `SS3` sequences (DECSET 1, DECCKM).
    pub app_cursor_keys: bool,
    /// The keypad sends application sequences (`ESC =`, DECKPAM).
    pub app_keypad: bool,
    /// The text cursor is shown (DECSET 25, DECTCEM).
    pub cursor_visible: bool,
    /// Text wraps at the right margin (DECSET 7, DECAWM).
    pub autowrap: bool,
    /// Cursor addressing is relative to the scroll region (DECSET 6, DECOM).
    pub origin: bool,
    /// Printed characters shift the rest of the line right (SM 4, IRM).
    pub insert: bool,
    /// Mouse tracking mode.
    pub mouse: MouseMode,
    /// Mouse report encoding.
    pub mouse_encoding: MouseEncoding,
    /// Focus in/out is reported (DECSET 1004).
    pub focus_events: bool,
}

/// A 94-character set that can be designated into G0 or G1 (`ESC ( F` / `ESC ) F`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(super) enum Charset {
    /// US ASCII (`B`, and every final byte we do not model).
    #[default]
    Ascii,
    /// DEC special graphics (`0`): line drawing in place of `_` through `~`.
    DecSpecial,
}

impl Charset {
    /// The final byte that designates this set.
    pub(super) fn final_byte(self) -> u8 {
        match self {
            Charset::Ascii => b'B',
            Charset::DecSpecial => b'0',
        }
    }

    /// Maps a character printed while this set is invoked into GL.
    pub(super) fn map(self, c: char) -> char {
        match self {
            Charset::Ascii => c,
            Charset::DecSpecial => dec_special(c),
        }
    }
}

/// The DEC special graphics set (VT100 line drawing) as Unicode.
fn dec_special(c: char) -> char {
    match c {
        '_' => ' ',
        '`' => '◆',
        'a' => '▒',
        'b' => '␉',
        'c' => '␌',
        'd' => '␍',
        'e' => '␊',
        'f' => '°',
        'g' => '±',
        'h' => '␤',
        'i' => '␋',
        'j' => '┘',
        'k' => '┐',
        'l' => '┌',
        'm' => '└',
        'n' => '┼',
        'o' => '⎺',
        'p' => '⎻',
        'q' => '─',
        'r' => '⎼',
        's' => '⎽',
        't' => '├',
        'u' => '┤',
        'v' => '┴',
        'w' => '┬',
        'x' => '│',
        'y' => '≤',
        'z' => '≥',
        '{' => 'π',
        '|' => '≠',
        '}' => '£',
        '~' => '·',
        other => other,
    }
}

/// Columns covered by the tab-stop set: xterm keeps a fixed 1024-column array; ours is the
/// same size, which is at least `MAX_COLS`, so every column of every allowed width has a slot.
pub(super) const MAX_TAB_COLUMNS: usize = 1024;

const TAB_WORDS: usize = MAX_TAB_COLUMNS / 64;

/// Horizontal tab stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct TabStops([u64; TAB_WORDS]);

impl Default for TabStops {
    /// A stop every 8 columns, starting at column 0 (xterm's `TabReset`).
    fn default() -> Self {
        TabStops([0x0101_0101_0101_0101; TAB_WORDS])
    }
}

impl TabStops {
    /// Sets a stop at `col` (HTS).
    pub(super) fn set(&mut self, col: usize) {
        if col < MAX_TAB_COLUMNS {
            self.0[col / 64] |= 1 << (col % 64);
        }
    }

    /// Clears the stop at `col` (TBC 0).
    pub(super) fn clear(&mut self, col: usize) {
        if col < MAX_TAB_COLUMNS {
            self.0[col / 64] &= !(1 << (col % 64));
        }
    }

    /// Clears every stop (TBC 3).
    pub(super) fn clear_all(&mut self) {
        self.0 = [0; TAB_WORDS];
    }

    /// True when `col` has a stop.
    pub(super) fn is_set(&self, col: usize) -> bool {
        col < MAX_TAB_COLUMNS && self.0[col / 64] & (1 << (col % 64)) != 0
    }

    /// The first stop after `col`, if any before `limit`.
    pub(super) fn next_after(&self, col: usize, limit: usize) -> Option<usize> {
        (col + 1..limit.min(MAX_TAB_COLUMNS)).find(|&c| self.is_set(c))
    }

    /// The last stop before `col`, if any.
    pub(super) fn prev_before(&self, col: usize) -> Option<usize> {
        (0..col.min(MAX_TAB_COLUMNS)).rev().find(|&c| self.is_set(c))
    }

    /// True when the stops in the first `cols` columns are the default every-8 ones.
    pub(super) fn is_default_within(&self, cols: usize) -> bool {
        let default = TabStops::default();
        (0..cols.min(MAX_TAB_COLUMNS)).all(|c| self.is_set(c) == default.is_set(c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_tab_stops_are_every_eight_columns() {
        let tabs = TabStops::default();
        assert_eq!(tabs.next_after(0, 80), Some(8));
        assert_eq!(tabs.next_after(8, 80), Some(16));
        assert_eq!(tabs.next_after(79, 80), None);
        assert_eq!(tabs.prev_before(17), Some(16));
        assert!(tabs.is_default_within(1000));
    }

    #[test]
    fn dec_special_graphics_maps_line_drawing() {
        let drawn: String = "lqkxmj".chars().map(|c| Charset::DecSpecial.map(c)).collect();
        assert_eq!(drawn, "┌─┐│└┘");
        assert_eq!(Charset::DecSpecial.map('A'), 'A');
    }

    #[test]
    fn modes_serialize_in_snake_case() {
        let json = serde_json::to_string(&MouseMode::ButtonMotion).unwrap_or_default();
        assert_eq!(json, "\"button_motion\"");
        let json = serde_json::to_string(&MouseEncoding::Sgr).unwrap_or_default();
        assert_eq!(json, "\"sgr\"");
    }
}
