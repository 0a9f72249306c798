//! Keyframe fidelity against the vt100 oracle: for every split of a stream at a ground-state
//! offset, `keyframe(model after the prefix) + rest` must leave a terminal exactly where the
//! whole stream does.

use desk_term::screen::Screen;
use proptest::prelude::*;

use super::oracle::{Oracle, check_splits, check_text, ground_offsets};
use super::vocabulary;

fn all_splits(cols: u16, rows: u16, stream: &[u8]) {
    if let Err(e) = check_text(cols, rows, stream) {
        panic!("{e}");
    }
    if let Err(e) = check_splits(cols, rows, stream, 1) {
        panic!("{e}");
    }
}

#[test]
fn scroll_region_survives_a_keyframe() {
    // The region must still confine scrolling after the split (vt100's own serialiser loses it).
    all_splits(10, 6, b"top\r\n\x1b[2;4r\x1b[4;1Hone\r\ntwo\r\nthree\r\nfour\x1b[6;1Hbottom");
}

#[test]
fn alternate_screen_and_the_hidden_main_screen_survive() {
    all_splits(
        12,
        4,
        b"main text\r\nline 2\x1b[2;3H\x1b[32m\x1b[?1049h\x1b[H\x1b[0malt screen\r\nvim-ish\x1b[?1049lback",
    );
    all_splits(12, 4, b"main\x1b[?47h\x1b[Halt\x1b[2;2Hx\x1b[?47l\x1b[Hm");
}

#[test]
fn saved_cursor_with_its_pen_survives() {
    all_splits(10, 5, b"\x1b[3;4H\x1b[1;31m\x1b7\x1b[0m\x1b[Hhome\x1b8saved\x1b[1;1H\x1b8again");
}

#[test]
fn origin_mode_survives() {
    all_splits(10, 8, b"\x1b[3;6r\x1b[?6h\x1b[H\x1b[1;1Hin\x1b[10;1Hbottom\x1b[?6l\x1b[1;1Hout");
}

#[test]
fn pending_wrap_survives() {
    all_splits(5, 3, b"abcde\x1b[31mf\r\nghijk\x1b7\r\n\x1b8l");
}

#[test]
fn wide_characters_and_combining_marks_survive() {
    all_splits(7, 3, "中文ab😀e\u{301}x\r\n漢字かなカナ\u{302}".as_bytes());
}

#[test]
fn wrapped_rows_are_redrawn_by_autowrap() {
    let stream = b"0123456789abcdefghijklmnopqrstuv\r\nshort";
    all_splits(10, 5, stream);
    let mut model = Screen::new(10, 5);
    model.process(stream);
    let mut client = Oracle::new(10, 5);
    client.process(&model.render_keyframe());
    let flags = |s: &dyn Fn(u16) -> bool| (0..5).map(s).collect::<Vec<_>>();
    let want = flags(&|r| model.row_wrapped(r));
    assert_eq!(want, [true, true, true, false, false]);
    let mut direct = vt100::Parser::new(
        std::num::NonZeroU16::new(5).unwrap_or(std::num::NonZeroU16::MIN),
        std::num::NonZeroU16::new(10).unwrap_or(std::num::NonZeroU16::MIN),
        0,
    );
    direct.process(&model.render_keyframe());
    assert_eq!(flags(&|r| direct.screen().row_wrapped(r)), want);
}

#[test]
fn colours_and_attributes_survive() {
    all_splits(
        12,
        3,
        b"\x1b[1;3;4;7;31;42mall\x1b[0m \x1b[38;5;200mx\x1b[38;2;1;2;3;48;5;17my\x1b[0m\x1b[44m\x1b[K\x1b[0m\r\n\x1b[2mdim\x1b[22mz",
    );
}

#[test]
fn title_with_semicolons_and_modes_survive() {
    all_splits(
        10,
        2,
        b"\x1b]0;a;b c\x07\x1b[?2004h\x1b[?1002h\x1b[?1006h\x1b[?1h\x1b=\x1b[?25lx\x1b]2;spinner \xe2\xa0\x8b\x1b\\y",
    );
}

#[test]
fn repeat_after_a_split_repeats_the_right_character() {
    all_splits(10, 3, b"ab\x1b[3bcd\x1b[2b\x1b[1;31m-\x1b[5b");
}

#[test]
fn erased_background_and_scrolling_survive() {
    all_splits(6, 4, b"\x1b[41mred\x1b[K\x1b[0m\r\n\x1b[42m\x1b[2X\x1b[0mok\r\n\r\n\r\n\r\nend\x1bM\x1bM\x1bM\x1bMtop");
}

#[test]
fn a_split_inside_an_escape_sequence_cannot_be_keyframed() {
    // The master only takes keyframes where `at_ground_state` is true. This shows why: a
    // keyframe cannot carry a half-parsed sequence, so the rest of it reaches the client as
    // plain text.
    let stream = b"\x1b[31mred";
    let k = 3; // after "\x1b[3"
    let mut model = Screen::new(10, 1);
    model.process(&stream[..k]);
    assert!(!model.at_ground_state());
    assert!(!ground_offsets(10, 1, stream).contains(&k));
    let mut replayed = Oracle::new(10, 1);
    replayed.process(&model.render_keyframe());
    replayed.process(&stream[k..]);
    assert_eq!(replayed.text_rows(), ["1mred"]);
    let mut direct = Oracle::new(10, 1);
    direct.process(stream);
    assert_eq!(direct.text_rows(), ["red"]);
}

#[test]
fn a_split_inside_a_utf8_character_is_not_ground() {
    let stream = "é".as_bytes();
    assert_eq!(ground_offsets(5, 1, stream), [0, 2]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_streams_survive_keyframes_at_every_ground_offset(
        (cols, rows) in vocabulary::size(),
        frags in proptest::collection::vec(vocabulary::frag(), 1..60),
    ) {
        let stream = vocabulary::build(cols, rows, &frags);
        prop_assert!(check_text(cols, rows, &stream).is_ok(), "{}", check_text(cols, rows, &stream).err().unwrap_or_default());
        let stride = (stream.len() / 40).max(1);
        if let Err(e) = check_splits(cols, rows, &stream, stride) {
            prop_assert!(false, "{}\nstream: {:?}", e, String::from_utf8_lossy(&stream));
        }
    }
}

/// State vt100 does not implement, so it cannot act as the client: here a fresh model plays
/// the client instead. `pre` then keyframe then `post` must equal `pre` + `post`.
#[test]
fn keyframe_restores_state_only_xterm_has_read_back_by_the_model() {
    let cases: &[(&str, &[u8], &[u8])] = &[
        ("charsets", b"\x1b)0\x1b(0lqk\x1b(B\x0eab", b"qq\x0fqq\x1b(0x"),
        ("tab stops", b"\x1b[3g\x1b[5G\x1bH\x1b[12G\x1bH\r", b"\tX\tY\tZ"),
        ("LNM, insert, autowrap off", b"abcdef\r\x1b[20h\x1b[4h\x1b[?7l", b"XY\nlong line past the edge"),
        ("1047 clears on exit", b"main\x1b[?1047halt", b"\x1b[?1047l\x1b[?47h"),
        ("1048 saves the cursor", b"\x1b[3;3H\x1b[?1048h\x1b[H", b"\x1b[?1048lX"),
        ("concealed text", b"\x1b[8msecret", b"more\x1b[28mvisible"),
        ("DECSTR saves home", b"\x1b[3;3H\x1b[31m\x1b[!p\x1b[2;2H", b"\x1b8X"),
        ("DECSC slot of the alternate screen", b"\x1b[?1049h\x1b[4;4H\x1b[1m\x1b7\x1b[H\x1b[m", b"\x1b8X\x1b[?1049l"),
        ("mouse, focus, cursor style", b"\x1b[?1003h\x1b[?1015h\x1b[?1004h\x1b[4 q\x1b[?12h", b""),
        ("origin mode cursor above the region", b"\x1b[?6h\x1b7\x1b[3;5r\x1b8", b"X\x1b[6n"),
        ("REP after DEC graphics", b"\x1b(0q", b"\x1b[5b"),
        ("pending wrap restored by DECRC", b"abcdefghij\x1b7\x1b[Hxy\x1b8", b"Z"),
    ];
    for (name, pre, post) in cases {
        let mut direct = Screen::new(10, 6);
        direct.process(pre);
        let keyframe = direct.render_keyframe();
        direct.process(post);
        let mut client = Screen::new(10, 6);
        client.process(b"\x1b[?1049h\x1b[2;4r\x1b[?6h\x1b(0\x0e\x1b[4h\x1b[?7l\x1b[3g\x1b[41mjunk");
        client.process(&keyframe);
        client.process(post);
        assert_eq!(client.snapshot(), direct.snapshot(), "{name}");
        assert_eq!(
            String::from_utf8_lossy(&client.render_keyframe()),
            String::from_utf8_lossy(&direct.render_keyframe()),
            "{name}"
        );
        assert_eq!(client.take_replies(), direct.take_replies(), "{name}");
    }
}
