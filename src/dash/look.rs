//! What the dashboard draws with: colour, or (under `NO_COLOR`) only bold and reverse video.
//! Shared by the view ([`super::view`]) and the answer panel
//! ([`super::answer`](mod@super::answer)).

use ratatui::style::{Color, Style};

/// What to draw with.
#[derive(Debug, Clone, Copy)]
pub struct Look {
    /// False under `NO_COLOR`: no colour at all, only bold and reverse video.
    pub color: bool,
}

impl Look {
    pub fn fg(self, color: Color) -> Style {
        if self.color { Style::new().fg(color) } else { Style::new() }
    }
}
