//! Tests of the history (scrollback) and of the resize policy that feeds it.

use super::*;

fn hist(cols: u16, rows: u16, limit: usize, bytes: &[u8]) -> Screen {
    let mut s = Screen::with_history(cols, rows, limit);
    s.process(bytes);
    s
}

fn numbered(from: usize, to: usize) -> Vec<u8> {
    (from..=to).map(|n| format!("{n}\r\n")).collect::<String>().into_bytes()
}

#[test]
fn rows_scrolled_off_the_main_screen_go_into_the_history_in_order() {
    let s = hist(10, 3, 100, &numbered(1, 10));
    assert_eq!(s.history_text(100), (1..=8).map(|n| n.to_string()).collect::<Vec<_>>());
    assert_eq!(s.text_rows(), ["9", "10", ""]);
    assert_eq!(s.history_text(2), ["7", "8"]);
}

#[test]
fn no_history_without_a_limit_and_the_bound_drops_the_oldest() {
    assert_eq!(hist(10, 3, 0, &numbered(1, 10)).history_len(), 0);
    let s = hist(10, 3, 4, &numbered(1, 10));
    assert_eq!(s.history_text(100), ["5", "6", "7", "8"]);
}

#[test]
fn the_alternate_screen_and_a_region_below_the_top_keep_none() {
    let s = hist(10, 3, 100, &[b"\x1b[?1049h".to_vec(), numbered(1, 10), b"\x1b[?1049l".to_vec()].concat());
    assert_eq!(s.history_len(), 0);
    let s = hist(10, 4, 100, &[b"\x1b[2;4r\x1b[4;1H".to_vec(), numbered(1, 10)].concat());
    assert_eq!(s.history_len(), 0);
    // A region from the top row saves lines, as in xterm (a status line below it).
    let s = hist(10, 4, 100, &[b"\x1b[1;3r\x1b[3;1H".to_vec(), numbered(1, 5)].concat());
    assert_eq!(s.history_text(100), ["", "", "1", "2", "3"]);
}

#[test]
fn scroll_up_saves_lines_and_ed3_clears_them() {
    let mut s = hist(10, 3, 100, b"a\r\nb\r\nc\x1b[2S");
    assert_eq!(s.history_text(100), ["a", "b"]);
    assert_eq!(s.text_rows(), ["c", "", ""]);
    s.process(b"\x1b[3J");
    assert_eq!(s.history_len(), 0);
    assert_eq!(s.text_rows(), ["c", "", ""], "ED 3 erased the screen");
    // RIS keeps the history, as xterm keeps its saved lines.
    s.process(b"\x1b[3S\x1bc");
    assert_eq!(s.history_text(100), ["c", "", ""]);
}

#[test]
fn attributes_wide_characters_and_marks_are_kept() {
    let s = hist(10, 2, 100, "\x1b[31mred\x1b[0m 中e\u{301}\x1b[44m  \x1b[0m\r\n\r\n".as_bytes());
    let line = s.history_tail(1).next().expect("a line");
    assert_eq!(line.text(), "red 中é  ".replace('é', "e\u{301}"));
    let runs: Vec<(String, Attrs)> = line.runs().map(|(t, a)| (t.to_string(), a)).collect();
    let red = Attrs { fg: Color::Indexed(1), ..Attrs::default() };
    let blue = Attrs { bg: Color::Indexed(4), ..Attrs::default() };
    assert_eq!(runs, [("red".into(), red), (" 中e\u{301}".into(), Attrs::default()), ("  ".into(), blue)],);
}

#[test]
fn a_line_comes_back_from_the_history_as_it_left() {
    let bytes = "\x1b[31mred\x1b[0m 中e\u{301}\x1b[44m  \x1b[0mend\r\n".as_bytes();
    let s = hist(12, 2, 100, bytes);
    let before: Vec<CellView> = (0..12).filter_map(|c| s.cell(0, c)).collect();
    let mut s = hist(12, 2, 100, &[bytes, b"x\r\ny"].concat());
    assert_eq!(s.history_len(), 1);
    s.resize(12, 3);
    let after: Vec<CellView> = (0..12).filter_map(|c| s.cell(0, c)).collect();
    // A space printed in default attributes comes back as an empty cell: both show a blank.
    let blank_is_space = |mut v: CellView| {
        if v.text.is_empty() && !v.wide_continuation {
            v.text = " ".into();
        }
        v
    };
    assert_eq!(
        after.into_iter().map(blank_is_space).collect::<Vec<_>>(),
        before.into_iter().map(blank_is_space).collect::<Vec<_>>()
    );
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn piece() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            6 => "[a-z ]{0,20}".prop_map(String::into_bytes),
            16 => Just(b"\r\n".to_vec()),
            1 => Just(b"\x1b[44m".to_vec()),
            1 => Just(b"\x1b[1;31m".to_vec()),
            1 => Just(b"\n".to_vec()),
            1 => Just(b"\r".to_vec()),
            1 => Just(b"\x1b[31;44m".to_vec()),
            1 => Just(b"\x1b[0m".to_vec()),
            1 => Just(b"\x1b[2;3r".to_vec()),
            1 => Just(b"\x1b[r".to_vec()),
            1 => Just(b"\x1b[1;1H".to_vec()),
            1 => Just(b"\x1b[2S".to_vec()),
            1 => Just(b"\x1b[3J".to_vec()),
            1 => Just(b"\x1b[?1049h".to_vec()),
            1 => Just(b"\x1b[?1049l".to_vec()),
            1 => Just("é中\u{301}".as_bytes().to_vec()),
        ]
    }

    fn lines(s: &Screen) -> Vec<HistoryLine> {
        s.history_tail(usize::MAX).cloned().collect()
    }

    proptest! {
        /// Any split of the stream gives the same history (and screen) as byte-by-byte
        /// feeding, which never takes the flood skip: the skip loses no history line.
        #[test]
        fn any_split_gives_the_same_history(
            cols in 1u16..12,
            rows in 1u16..5,
            limit in 0usize..30,
            parts in proptest::collection::vec(piece(), 0..300),
            cuts in proptest::collection::vec(any::<usize>(), 0..4),
        ) {
            let stream = parts.concat();
            let mut bytewise = Screen::with_history(cols, rows, limit);
            bytewise.enable_log();
            for b in &stream {
                bytewise.process(std::slice::from_ref(b));
            }
            let mut whole = Screen::with_history(cols, rows, limit);
            whole.enable_log();
            whole.process(&stream);
            prop_assert_eq!(lines(&whole), lines(&bytewise));
            prop_assert_eq!(whole.text_rows(), bytewise.text_rows());
            prop_assert_eq!(whole.render_keyframe(), bytewise.render_keyframe());
            let (mut a, mut b) = (Vec::new(), Vec::new());
            whole.take_log_text(|t| a.extend_from_slice(t));
            bytewise.take_log_text(|t| b.extend_from_slice(t));
            prop_assert_eq!(a, b);
            prop_assert!(whole.history_len() <= limit);
            let mut points: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
            points.sort_unstable();
            let mut chunked = Screen::with_history(cols, rows, limit);
            let mut last = 0;
            for p in points.into_iter().chain(std::iter::once(stream.len())) {
                chunked.process(&stream[last..p]);
                last = p;
            }
            prop_assert_eq!(lines(&chunked), lines(&bytewise));
        }

        /// Numbered lines through any screen size, any bound, fed in any chunks: the history
        /// followed by the screen is the stream's last lines, in order, none lost or repeated.
        #[test]
        fn the_history_keeps_order_and_its_bound(
            rows in 1u16..6,
            limit in 0usize..40,
            count in 0usize..120,
            chunk in 1usize..64,
        ) {
            let mut s = Screen::with_history(20, rows, limit);
            let stream = numbered(1, count);
            for part in stream.chunks(chunk) {
                s.process(part);
            }
            prop_assert!(s.history_len() <= limit);
            let mut seen = s.history_text(usize::MAX);
            seen.extend(s.text_rows().into_iter().filter(|r| !r.is_empty()));
            // Blank rows of the initial screen scroll off first when the stream is short.
            let seen: Vec<String> = seen.into_iter().filter(|r| !r.is_empty()).collect();
            let kept = (limit + usize::from(rows) - 1).min(count);
            let want: Vec<String> = (count + 1 - kept..=count).map(|n| n.to_string()).collect();
            prop_assert_eq!(seen, want);
        }
    }
}

#[test]
fn every_kind_of_run_survives_the_compact_encoding() {
    let long = "x".repeat(150);
    let bytes = format!("\x1b[1;4;38;2;1;2;3;48;5;200m{long}\x1b[0m\x1b[7;44mi\x1b[0mplain\r\n\r\n");
    let s = hist(200, 2, 10, bytes.as_bytes());
    let line = s.history_tail(1).next().expect("a line");
    let runs: Vec<(String, Attrs)> = line.runs().map(|(t, a)| (t.to_string(), a)).collect();
    let first = Attrs { fg: Color::Rgb(1, 2, 3), bg: Color::Indexed(200), flags: flag::BOLD | flag::UNDERLINE };
    let second = Attrs { fg: Color::Default, bg: Color::Indexed(4), flags: flag::INVERSE };
    assert_eq!(runs, [(long, first), ("i".into(), second), ("plain".into(), Attrs::default())]);
    // A plain line holds its text and nothing else.
    let s = hist(20, 1, 10, b"plain text\r\n");
    let line = s.history_tail(1).next().expect("a line");
    assert_eq!(line.heap_bytes(), "plain text".len());
    assert_eq!(line.runs().collect::<Vec<_>>(), [("plain text", Attrs::default())]);
}

#[test]
fn the_log_text_gets_every_scrolled_off_line_whatever_the_history_keeps() {
    let mut s = Screen::with_history(10, 3, 2);
    s.enable_log();
    s.process(&numbered(1, 10));
    let mut text = Vec::new();
    s.take_log_text(|t| text.extend_from_slice(t));
    assert_eq!(text, b"1\n2\n3\n4\n5\n6\n7\n8\n");
    assert_eq!(s.history_text(10), ["7", "8"]);
    s.take_log_text(|t| assert!(t.is_empty(), "taken once"));
    let mut plain = Screen::new(10, 3);
    plain.process(&numbered(1, 10));
    plain.take_log_text(|t| assert!(t.is_empty(), "no log unless enabled"));
}

#[test]
fn a_flood_skips_drawing_and_still_fills_the_history_exactly() {
    let flood: Vec<u8> = (0..40).flat_map(|i| format!("line {i} {}\r\n", "x".repeat(i % 13)).into_bytes()).collect();
    let mut skipped = Screen::with_history(10, 3, 100);
    skipped.process(b"\x1b[44mold top\r\nold 2\r\n\x1b[0m");
    let taken = skipped.skip_scrolled_off(&flood);
    assert!(taken > flood.len() / 2, "the skip was not taken: {taken}");
    skipped.process(&flood[taken..]);
    let mut drawn = Screen::with_history(10, 3, 100);
    drawn.process(b"\x1b[44mold top\r\nold 2\r\n\x1b[0m");
    for b in &flood {
        drawn.process(std::slice::from_ref(b));
    }
    assert_eq!(
        skipped.history_tail(100).cloned().collect::<Vec<_>>(),
        drawn.history_tail(100).cloned().collect::<Vec<_>>()
    );
    assert_eq!(skipped.render_keyframe(), drawn.render_keyframe());
}

/// The plain-row shortcut of `HistoryLine::from_row` gives what the general encoding gives,
/// for plain rows of any text and length (trailing spaces, empty cells in between, wrapped or
/// not); rows it does not take (colours, non-ASCII) still go the general way.
#[test]
fn a_plain_row_gives_the_line_the_general_encoding_gives() {
    use super::cell::Cell;
    use super::grid::Row;
    use super::history::{HistoryLine, Scratch};
    let general = |row: &Row| {
        let cells = row.cells();
        let shows = |c: &Cell| !(*c == Cell::BLANK || (c.ch == ' ' && c.kind == 0 && c.attrs == Attrs::default()));
        let end = cells.iter().rposition(shows).map_or(0, |i| i + 1);
        HistoryLine::from_cells(row, &cells[..end], &mut Scratch::default())
    };
    let texts =
        ["", "a", "hello world", "trailing   ", "   leading", "x".repeat(20).as_str(), "é中 mixed"].map(String::from);
    for (i, text) in texts.iter().enumerate() {
        for (col, attrs) in
            [(0, Attrs::default()), (3, Attrs::default()), (0, Attrs { flags: flag::BOLD, ..Attrs::default() })]
        {
            let mut row = Row::new(20, Cell::BLANK);
            row.write_plain(col, text.chars(), attrs);
            row.wrapped = i % 2 == 0;
            let fast = HistoryLine::from_row(&row, &mut Scratch::default());
            assert_eq!(fast, general(&row), "{text:?} at column {col} in {attrs:?}");
        }
    }
}

#[test]
fn lines_keep_their_numbers_and_a_number_never_goes_to_another_line() {
    let texts = |s: &Screen, from: u64| s.history_from(from).map(|l| l.text().to_string()).collect::<Vec<_>>();
    // 1..=8 went in as numbers 0..=7; the bound of 5 dropped the three oldest.
    let mut s = hist(10, 3, 5, &numbered(1, 10));
    assert_eq!((s.history_first(), s.history_end()), (3, 8));
    assert_eq!(texts(&s, 6), ["7", "8"]);
    assert_eq!(texts(&s, 0), ["4", "5", "6", "7", "8"], "numbers already dropped start at the oldest");
    assert!(texts(&s, 8).is_empty());
    // A resize that takes lines back renumbers the rest past every number given: a reader at
    // number 6 finds its lines gone, not lines that came in after the resize.
    s.resize(10, 5);
    assert_eq!(s.history_text(10), ["4", "5", "6"]);
    assert!(s.history_first() >= 8, "{}", s.history_first());
    assert_eq!(s.history_end() - s.history_first(), 3);
    s.process(b"\r\n\r\n\r\n\r\nnew");
    assert_eq!(texts(&s, 6), s.history_text(10), "6 and 7 now name nothing: from the oldest kept on");
    assert!(s.history_first() > 7);
    // ED 3 forgets every line and their numbers.
    let end = s.history_end();
    s.process(b"\x1b[3J");
    assert_eq!((s.history_first(), s.history_end()), (end, end));
}
