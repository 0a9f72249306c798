//! Placeholder screen model with the agreed API; replaced by the real model from the `screen`
//! branch before anything lands.

use serde::{Deserialize, Serialize};

pub const MIN_COLS: u16 = 1;
pub const MIN_ROWS: u16 = 1;
pub const MAX_COLS: u16 = 1000;
pub const MAX_ROWS: u16 = 1000;
pub const MAX_CELLS: u32 = 200_000;

pub fn valid_size(cols: u16, rows: u16) -> bool {
    (MIN_COLS..=MAX_COLS).contains(&cols)
        && (MIN_ROWS..=MAX_ROWS).contains(&rows)
        && u32::from(cols) * u32::from(rows) <= MAX_CELLS
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MouseMode {
    #[default]
    None,
    Press,
    PressRelease,
    ButtonMotion,
    AnyMotion,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MouseEncoding {
    #[default]
    Default,
    Utf8,
    Sgr,
    Urxvt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Modes {
    pub alternate_screen: bool,
    pub bracketed_paste: bool,
    pub app_cursor_keys: bool,
    pub app_keypad: bool,
    pub cursor_visible: bool,
    pub autowrap: bool,
    pub origin: bool,
    pub insert: bool,
    pub mouse: MouseMode,
    pub mouse_encoding: MouseEncoding,
    pub focus_events: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub row: u16,
    pub col: u16,
    pub visible: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub cols: u16,
    pub rows: u16,
    pub cursor: Cursor,
    pub title: String,
    pub modes: Modes,
    pub lines: Vec<String>,
}

pub struct Screen {
    cols: u16,
    rows: u16,
    text: Vec<u8>,
}

impl Screen {
    pub fn new(cols: u16, rows: u16) -> Screen {
        Screen { cols, rows, text: Vec::new() }
    }
    pub fn process(&mut self, bytes: &[u8]) {
        self.text.extend_from_slice(bytes);
        if self.text.len() > 4096 {
            self.text.drain(..self.text.len() - 4096);
        }
    }
    pub fn take_replies(&mut self) -> Vec<u8> {
        Vec::new()
    }
    pub fn resize(&mut self, cols: u16, rows: u16) {
        self.cols = cols;
        self.rows = rows;
    }
    pub fn size(&self) -> (u16, u16) {
        (self.cols, self.rows)
    }
    pub fn cursor(&self) -> (u16, u16) {
        (0, 0)
    }
    pub fn title(&self) -> &str {
        ""
    }
    pub fn modes(&self) -> Modes {
        Modes::default()
    }
    pub fn at_ground_state(&self) -> bool {
        true
    }
    pub fn text_rows(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.text).lines().map(str::to_string).collect()
    }
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            cols: self.cols,
            rows: self.rows,
            cursor: Cursor { row: 0, col: 0, visible: true },
            title: String::new(),
            modes: self.modes(),
            lines: self.text_rows(),
        }
    }
    pub fn render_keyframe(&self) -> Vec<u8> {
        let mut out = b"\x1bc".to_vec();
        out.extend_from_slice(&self.text);
        out
    }
}
