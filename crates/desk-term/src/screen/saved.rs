//! A screen saved whole, to be restored by another process: what a master hands over to the
//! binary it re-executes (`desk upgrade`, docs/upgrading.md).
//!
//! Owns the saved form of the emulator state ([`SavedScreen`], serde) and its check on restore.
//! Unlike a keyframe, which makes a *terminal* show the model's state and leaves out what no
//! terminal needs (the inactive alternate buffer, the history, the numbering of history lines),
//! a saved screen is the model itself: both buffers, the history with its line numbers, the
//! cursor, pen, DECSC slots, modes, charsets, tab stops, title, the REP character and the
//! pending query answers. Invariants: a screen is saved only at ground state (no escape
//! sequence half-parsed: the vte parser's state is not saved, a fresh one is in ground state);
//! a UTF-8 character cut by the last read is saved with it; a restored screen is checked
//! against the emulator's invariants (sizes, cursor and region bounds, history bound) before it
//! is used, so a damaged or foreign record is refused in words, never a panic later. The layout
//! is the serde form of the model's own types, so a change of any of them changes the layout:
//! the master's handover record carries a format version for that (`desk-master`'s
//! `handover.rs`).

use serde::{Deserialize, Serialize};

use super::term::Term;
use super::{MAX_TITLE_BYTES, Partial, Screen, valid_size};
use crate::screen::term::MAX_PENDING_REPLIES;

/// The whole state of a [`Screen`] at ground state; see the module documentation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedScreen {
    term: Term,
    /// The leading bytes of a UTF-8 character cut off by the last read (at most three).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    partial: Vec<u8>,
}

impl Screen {
    /// Whether [`Screen::save`] would save now (no escape sequence is half-parsed); costs
    /// nothing, unlike saving.
    pub fn can_save(&self) -> bool {
        self.ground.is_ground()
    }

    /// The whole model, or `None` while an escape sequence is half-parsed (the parser's state
    /// cannot be saved; read a little more and try again).
    pub fn save(&self) -> Option<SavedScreen> {
        if !self.ground.is_ground() {
            return None;
        }
        let mut term = self.term.clone();
        term.events.clear();
        Some(SavedScreen { term, partial: self.partial.bytes[..self.partial.len].to_vec() })
    }

    /// The screen `saved` describes, checked: an `Err` names what is wrong with it.
    pub fn restore(saved: SavedScreen) -> Result<Screen, String> {
        let SavedScreen { mut term, partial } = saved;
        check(&mut term)?;
        if partial.len() >= 4 || std::str::from_utf8(&partial).is_ok_and(|s| !s.is_empty()) {
            return Err("the saved cut-off character is not the start of one".into());
        }
        let mut bytes = [0u8; 4];
        bytes[..partial.len()].copy_from_slice(&partial);
        Ok(Screen {
            parser: vte::Parser::new(),
            ground: Default::default(),
            partial: Partial { bytes, len: partial.len() },
            term,
        })
    }
}

fn check(term: &mut Term) -> Result<(), String> {
    let (cols, rows) = (term.cols, term.rows);
    let size = u16::try_from(cols).ok().zip(u16::try_from(rows).ok());
    if !size.is_some_and(|(c, r)| valid_size(c, r)) {
        return Err(format!("a saved screen of {cols}x{rows}"));
    }
    term.main.check_restored(cols, rows)?;
    term.alt.check_restored(cols, rows)?;
    term.history.check_restored()?;
    let inside = |pos: &super::term::Pos| pos.row < rows && pos.col < cols && (!pos.pending || pos.col == cols - 1);
    if !inside(&term.cur) || !term.saved.iter().all(|s| inside(&s.pos)) {
        return Err("a saved cursor outside the screen".into());
    }
    if !(term.top <= term.bottom && term.bottom < rows && (term.top < term.bottom || rows == 1)) {
        return Err(format!("a scroll region of rows {}..={} in {rows} rows", term.top, term.bottom));
    }
    if term.gl > 1 || term.saved.iter().any(|s| s.gl > 1) {
        return Err("a character set other than G0 or G1 invoked".into());
    }
    if term.title.len() > MAX_TITLE_BYTES || term.icon_name.len() > MAX_TITLE_BYTES {
        return Err("a saved title over its bound".into());
    }
    if term.replies.len() > MAX_PENDING_REPLIES || term.osc.len() > 1024 {
        return Err("saved pending replies over their bound".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream that leaves much of the model off its defaults: history, colours, wide and
    /// combining characters, the alternate screen, a region, DECSC, charsets, tabs, a title.
    const STREAM: &[u8] = b"\x1b]2;the title\x07\x1b[31;1mred\x1b[0m plain\r\n\xe4\xb8\xad wide e\xcc\x81\r\n\
        line 3\r\nline 4\r\nline 5\r\nline 6\r\nline 7\r\nline 8\r\n\x1b[3g\x1b[1;20H\x1bH\x1b7\x1b(0qqq\x1b(B\
        \x1b[?2004h\x1b[?1049h\x1b[2;4r\x1b[44mon the alternate screen\x1b[5;3H\xe2\x82";

    fn round_trip(screen: &Screen) -> Screen {
        let json = serde_json::to_string(&screen.save().expect("at ground state")).unwrap();
        Screen::restore(serde_json::from_str(&json).unwrap()).unwrap()
    }

    fn same(a: &Screen, b: &Screen) {
        assert_eq!(a.render_keyframe(), b.render_keyframe());
        assert_eq!(a.text_rows(), b.text_rows());
        assert_eq!((a.history_first(), a.history_end()), (b.history_first(), b.history_end()));
        assert_eq!(a.history_text(100), b.history_text(100));
        assert_eq!(a.history_rows(100), b.history_rows(100));
        assert_eq!(a.snapshot(), b.snapshot());
    }

    #[test]
    fn a_restored_screen_is_the_saved_one_and_goes_on_as_it_would_have() {
        let mut screen = Screen::with_history(30, 6, 50);
        screen.process(STREAM);
        let mut restored = round_trip(&screen);
        same(&screen, &restored);
        // The cut-off character, the alternate screen's region and slot, the main screen's
        // saved content: all come back to life with the next bytes.
        let more = b"\xac euro\x1b[?1049l after\r\nmore\r\n\x1b8qq\x0etext\x0f\x1b[3Smore\r\n";
        screen.process(more);
        restored.process(more);
        same(&screen, &restored);
    }

    #[test]
    fn a_screen_inside_an_escape_sequence_is_not_saved() {
        let mut screen = Screen::new(20, 4);
        screen.process(b"abc\x1b[3");
        assert!(screen.save().is_none());
        screen.process(b"1m");
        assert!(screen.save().is_some());
    }

    #[test]
    fn a_damaged_saved_screen_is_refused_in_words() {
        let mut screen = Screen::new(20, 4);
        screen.process(b"hello");
        let json = serde_json::to_value(screen.save().unwrap()).unwrap();
        let mut wide = json.clone();
        wide["term"]["cols"] = 5000.into();
        assert!(Screen::restore(serde_json::from_value(wide).unwrap()).unwrap_err().contains("5000x4"));
        let mut cursor = json.clone();
        cursor["term"]["cur"]["row"] = 9.into();
        assert!(Screen::restore(serde_json::from_value(cursor).unwrap()).unwrap_err().contains("cursor"));
        let mut runs = json;
        runs["term"]["history"]["limit"] = 0.into();
        assert!(Screen::restore(serde_json::from_value(runs).unwrap()).is_ok());
    }
}
