//! Views checked by drawing them on a terminal of the client's size (a second screen model) and
//! comparing what it shows with the crop of the session's screen the view promises.

use super::*;
use crate::screen::Color;
use proptest::prelude::*;

/// A session of `cols x rows` that was fed `stream`.
fn session(cols: u16, rows: u16, stream: &str) -> Screen {
    let mut s = Screen::new(cols, rows);
    s.process(stream.as_bytes());
    s
}

/// The client's terminal after it was sent `bytes` (from a fresh start).
fn client(view: &View, bytes: &[u8]) -> Screen {
    let (cols, rows) = view.size();
    let mut c = Screen::new(cols, rows);
    c.process(bytes);
    c
}

/// Text of the session's screen through the view's crop: what the client must show, row by
/// row (trailing blanks trimmed), including the status row when there is one.
fn expected(view: &View, screen: &Screen) -> Vec<String> {
    let (cols, rows) = view.size();
    let (r0, c0) = view.origin();
    let content = view.content_rows();
    let mut out = Vec::new();
    for i in 0..content {
        let mut line = String::new();
        for j in 0..cols {
            match screen.cell(r0 + i, c0 + j) {
                Some(c) if c.wide_continuation && j == 0 => line.push(' '),
                Some(c) if c.wide_continuation => {}
                Some(c) if c.wide && j + 1 >= cols => line.push(' '),
                Some(c) if c.text.is_empty() => line.push(' '),
                Some(c) => line.push_str(&c.text),
                None => line.push(' '),
            }
        }
        out.push(line.trim_end().to_string());
    }
    if content < rows {
        let (sc, sr) = screen.size();
        let text = format!("session {sc}x{sr}, this terminal {cols}x{rows}");
        out.push(text.chars().take(usize::from(cols)).collect::<String>().trim_end().to_string());
    }
    out
}

fn shown(client: &Screen) -> Vec<String> {
    client.text_rows().into_iter().map(|r| r.trim_end().to_string()).collect()
}

fn numbered_lines(n: usize, width: usize) -> String {
    (1..=n).map(|i| format!("{i:03}{}", "x".repeat(width.saturating_sub(3)))).collect::<Vec<_>>().join("\r\n")
}

#[test]
fn a_smaller_client_sees_the_rows_around_the_cursor_cropped_to_its_width() {
    let screen = session(120, 40, &numbered_lines(40, 120));
    let mut view = View::new(79, 24, false);
    let bytes = view.keyframe(&screen);
    let c = client(&view, &bytes);
    // The cursor is on the last row, past the last column (pending wrap, so on column 120):
    // the crop ends at both.
    assert_eq!(view.origin(), (40 - 24, 120 - 79));
    assert_eq!(shown(&c), expected(&view, &screen));
    assert_eq!(shown(&c)[23], "x".repeat(79), "{:?}", shown(&c));
    assert_eq!(c.cursor(), (23, 119 - 41), "the cursor is where the session's is, in view coordinates");
}

#[test]
fn the_crop_stays_put_while_the_cursor_is_inside_and_follows_it_by_the_least_when_it_leaves() {
    let mut screen = session(120, 40, "\x1b[1;1Htop");
    let mut view = View::new(80, 20, false);
    view.keyframe(&screen);
    assert_eq!(view.origin(), (0, 0));
    screen.process(b"\x1b[10;50H");
    view.render(&screen);
    assert_eq!(view.origin(), (0, 0), "the cursor is still inside");
    screen.process(b"\x1b[25;100H");
    view.render(&screen);
    assert_eq!(view.origin(), (25 - 20, 100 - 80), "moved just far enough");
    screen.process(b"\x1b[8;30H");
    view.render(&screen);
    assert_eq!(view.origin(), (5, 20), "(7, 29) is inside the crop");
    screen.process(b"\x1b[3;10H");
    view.render(&screen);
    assert_eq!(view.origin(), (2, 9));
}

#[test]
fn a_larger_client_sees_the_whole_screen_padded_with_blanks() {
    let screen = session(40, 10, &numbered_lines(10, 40));
    let mut view = View::new(100, 30, false);
    let bytes = view.keyframe(&screen);
    let c = client(&view, &bytes);
    assert_eq!(view.origin(), (0, 0));
    let rows = shown(&c);
    assert_eq!(rows, expected(&view, &screen));
    assert!(rows[10..].iter().all(String::is_empty), "{rows:?}");
    assert_eq!(rows[0].len(), 40);
}

#[test]
fn an_unchanged_screen_renders_nothing_and_a_changed_row_is_the_only_row_sent() {
    let mut screen = session(120, 40, &numbered_lines(40, 100));
    let mut view = View::new(79, 24, false);
    let mut bytes = view.keyframe(&screen);
    assert!(view.render(&screen).is_empty(), "nothing changed");
    // A change outside the crop (it shows columns 23..101) sends nothing.
    screen.process(b"\x1b7\x1b[30;1HHIDDEN\x1b8");
    assert_eq!(view.origin(), (16, 22));
    assert!(view.render(&screen).is_empty());
    // Change one visible row without moving the cursor.
    screen.process(b"\x1b7\x1b[30;31HCHANGED\x1b8");
    let delta = view.render(&screen);
    let text = String::from_utf8_lossy(&delta);
    assert_eq!(text.matches(";1H").count(), 1, "one row repositioned: {text:?}");
    assert!(text.contains("CHANGED"), "{text:?}");
    bytes.extend_from_slice(&delta);
    assert_eq!(shown(&client(&view, &bytes)), expected(&view, &screen));
}

#[test]
fn a_wide_character_cut_by_the_edge_is_a_blank_and_attributes_are_kept() {
    // Columns 78-79 hold a wide character: a 79-column view cuts it.
    let screen = session(100, 5, &format!("{}中\x1b[31mred\x1b[0m\x1b[H", "a".repeat(78)));
    let mut view = View::new(79, 5, false);
    let bytes = view.keyframe(&screen);
    let c = client(&view, &bytes);
    assert_eq!(shown(&c), expected(&view, &screen));
    assert!(shown(&c)[0].ends_with('a'), "{:?}", shown(&c));
    // A view starting inside it shows its right half as a blank.
    let screen = session(100, 5, &format!("\x1b[31m{}\x1b[0m\x1b[1;3H", "中".repeat(50)));
    let mut view = View::new(3, 5, false);
    view.origin = (0, 1);
    let bytes = view.keyframe(&screen);
    let c = client(&view, &bytes);
    assert_eq!(shown(&c), expected(&view, &screen));
    assert_eq!(c.cell(0, 1).unwrap().attrs.fg, Color::Indexed(1));
}

#[test]
fn the_status_row_names_both_sizes_and_the_content_gets_the_rest() {
    let screen = session(120, 40, &numbered_lines(40, 120));
    let mut view = View::new(79, 40, true);
    let bytes = view.keyframe(&screen);
    let c = client(&view, &bytes);
    let rows = shown(&c);
    assert_eq!(rows[39], "session 120x40, this terminal 79x40");
    assert_eq!(rows, expected(&view, &screen));
    assert_eq!(view.origin().0, 1, "39 content rows keep the cursor's row 40 visible");
}

#[test]
fn modes_title_and_the_alternate_screen_follow_the_model() {
    let mut screen = session(120, 40, "\x1b]2;agent\x07\x1b[?2004h\x1b[?1h");
    let mut view = View::new(80, 24, false);
    let mut bytes = view.keyframe(&screen);
    let c = client(&view, &bytes);
    assert!(c.modes().bracketed_paste && c.modes().app_cursor_keys);
    assert_eq!(c.title(), "agent");
    screen.process(b"\x1b[?1049h\x1b[Hfull screen\x1b[?2004l");
    bytes.extend_from_slice(&view.render(&screen));
    let c = client(&view, &bytes);
    assert!(c.modes().alternate_screen && !c.modes().bracketed_paste);
    assert_eq!(shown(&c), expected(&view, &screen));
    screen.process(b"\x1b[?1049l");
    bytes.extend_from_slice(&view.render(&screen));
    let c = client(&view, &bytes);
    assert!(!c.modes().alternate_screen);
    assert_eq!(shown(&c), expected(&view, &screen));
}

fn stream_piece() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z ]{0,30}".prop_map(|s| s),
        Just("\r\n".to_string()),
        (1u16..50, 1u16..150).prop_map(|(r, c)| format!("\x1b[{r};{c}H")),
        Just("\x1b[2J".to_string()),
        Just("\x1b[K".to_string()),
        Just("\x1b[1;33;44m".to_string()),
        Just("\x1b[0m".to_string()),
        Just("中文".to_string()),
        Just("\x1b[?1049h".to_string()),
        Just("\x1b[?1049l".to_string()),
        Just("\x1b[?25l".to_string()),
        Just("\x1b[?25h".to_string()),
    ]
}

proptest! {
    /// Whatever the session draws and however the repaints fall, a client that got a keyframe
    /// and then every repaint shows exactly the crop: diffing against the shadow never leaves a
    /// stale row behind.
    #[test]
    fn repaints_after_a_keyframe_always_show_the_crop(
        (scols, srows) in (20u16..130, 5u16..45),
        (vcols, vrows) in (10u16..130, 2u16..45),
        status in any::<bool>(),
        batches in proptest::collection::vec(proptest::collection::vec(stream_piece(), 0..8), 1..8),
    ) {
        let mut screen = Screen::new(scols, srows);
        let mut view = View::new(vcols, vrows, status);
        let mut sent = view.keyframe(&screen);
        for batch in batches {
            for piece in batch {
                screen.process(piece.as_bytes());
            }
            sent.extend_from_slice(&view.render(&screen));
            let c = client(&view, &sent);
            prop_assert_eq!(shown(&c), expected(&view, &screen));
            let (cr, cc) = screen.cursor();
            let (r0, c0) = view.origin();
            let content = view.content_rows();
            // The cursor is always inside the crop (when the session has room for the crop).
            prop_assert!(srows <= content || (cr >= r0 && cr < r0 + content));
            prop_assert!(scols <= vcols || (cc >= c0 && cc < c0 + vcols));
            if screen.modes().cursor_visible && cr < content.min(srows) + r0 && cc < vcols.min(scols) + c0 {
                prop_assert_eq!(c.cursor(), (cr - r0, cc - c0));
            }
        }
    }
}
