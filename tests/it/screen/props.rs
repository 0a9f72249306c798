//! Property tests of the screen model that need no oracle: split invariance, no panics with
//! bounded memory on arbitrary input, and the ground-state shadow agreeing with vte.

use desk_term::screen::{MAX_COLS, MAX_COMBINING, MAX_PENDING_REPLIES, MAX_ROWS, MAX_TITLE_BYTES, Screen, valid_size};
use proptest::prelude::*;

use super::vocabulary;

/// Bytes that steer a random stream into escape sequences, strings and UTF-8.
const INTERESTING: &[u8] = &[
    0x1b, 0x1b, b'[', b']', b'P', b'X', b'^', b'_', b'(', b')', b'#', b'?', b'>', b'!', b' ', b';', b':', b'0', b'1',
    b'2', b'4', b'6', b'7', b'9', b'm', b'H', b'J', b'K', b'r', b'h', b'l', b'c', b'n', b'b', b'\\', 0x07, 0x08, 0x09,
    0x0a, 0x0d, 0x0e, 0x0f, 0x18, 0x1a, 0x7f, 0x9c, 0xc3, 0xa9, 0xe4, 0xb8, 0xad, 0xf0, 0x9f, 0x98, 0x80, 0xcc, 0x81,
    0xff,
];

fn noisy_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![2 => proptest::sample::select(INTERESTING), 1 => any::<u8>(), 1 => 0x20u8..0x7f],
        0..max,
    )
}

fn streams() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        noisy_bytes(600),
        proptest::collection::vec(vocabulary::frag(), 0..40).prop_map(|f| vocabulary::build(20, 6, &f)),
    ]
}

/// Everything observable about a model.
fn observe(s: &mut Screen) -> (Vec<u8>, desk_term::screen::Snapshot, Vec<u8>, bool) {
    (s.render_keyframe(), s.snapshot(), s.take_replies(), s.at_ground_state())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn processing_in_one_call_equals_processing_in_pieces(
        stream in streams(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let mut whole = Screen::new(20, 6);
        whole.process(&stream);
        let mut pieces = Screen::new(20, 6);
        let mut offsets: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
        offsets.push(0);
        offsets.push(stream.len());
        offsets.sort_unstable();
        for pair in offsets.windows(2) {
            pieces.process(&stream[pair[0]..pair[1]]);
        }
        prop_assert_eq!(observe(&mut whole), observe(&mut pieces));
    }

    #[test]
    fn processing_byte_by_byte_equals_processing_at_once(stream in streams()) {
        let mut whole = Screen::new(13, 5);
        whole.process(&stream);
        let mut bytes = Screen::new(13, 5);
        for b in &stream {
            bytes.process(std::slice::from_ref(b));
        }
        prop_assert_eq!(observe(&mut whole), observe(&mut bytes));
    }
}

/// One step of a random session.
#[derive(Debug, Clone)]
enum Op {
    Bytes(Vec<u8>),
    Resize(u16, u16),
    Keyframe,
    Replies,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => noisy_bytes(300).prop_map(Op::Bytes),
        1 => (0u16..=1100, 0u16..=1100).prop_map(|(c, r)| Op::Resize(c, r)),
        2 => (0u16..=12, 0u16..=6).prop_map(|(c, r)| Op::Resize(c, r)),
        1 => Just(Op::Keyframe),
        1 => Just(Op::Replies),
    ]
}

fn check_bounds(s: &Screen) -> Result<(), TestCaseError> {
    let (cols, rows) = s.size();
    prop_assert!(valid_size(cols, rows), "size {cols}x{rows}");
    prop_assert!(cols <= MAX_COLS && rows <= MAX_ROWS);
    let (r, c) = s.cursor();
    prop_assert!(r < rows && c < cols, "cursor ({r},{c}) outside {cols}x{rows}");
    let (top, bottom) = s.scroll_region();
    prop_assert!(top <= bottom && bottom < rows);
    prop_assert!(s.title().len() <= MAX_TITLE_BYTES);
    prop_assert!(s.icon_name().len() <= MAX_TITLE_BYTES);
    let lines = s.text_rows();
    prop_assert_eq!(lines.len(), usize::from(rows));
    for line in &lines {
        prop_assert!(line.chars().count() <= usize::from(cols) * (1 + MAX_COMBINING));
    }
    Ok(())
}

proptest! {
    // Grids up to the cell bound are slow to render in unoptimised builds; release runs more.
    #![proptest_config(ProptestConfig {
        cases: if cfg!(debug_assertions) { 64 } else { 512 },
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_input_and_resizes_never_panic_and_stay_bounded(
        (cols, rows) in (0u16..=120, 0u16..=50),
        ops in proptest::collection::vec(op(), 0..30),
    ) {
        let mut s = Screen::new(cols, rows);
        check_bounds(&s)?;
        for op in ops {
            match op {
                Op::Bytes(b) => s.process(&b),
                Op::Resize(c, r) => s.resize(c, r),
                Op::Keyframe => {
                    let keyframe = s.render_keyframe();
                    // A keyframe replayed into a fresh model of the same size reproduces the
                    // visible text.
                    let (c, r) = s.size();
                    let mut copy = Screen::new(c, r);
                    copy.process(&keyframe);
                    prop_assert_eq!(copy.text_rows(), s.text_rows());
                }
                Op::Replies => prop_assert!(s.take_replies().len() <= MAX_PENDING_REPLIES),
            }
            check_bounds(&s)?;
        }
    }
}

/// Records what vte does with the byte after a prefix: if vte is in ground state, that byte is
/// printed.
#[derive(Default)]
struct FirstAction {
    printed: Option<char>,
    other: bool,
}

impl vte::Perform for FirstAction {
    fn print(&mut self, c: char) {
        if !self.other && self.printed.is_none() {
            self.printed = Some(c);
        }
    }
    fn execute(&mut self, _: u8) {
        self.other |= self.printed.is_none();
    }
    fn csi_dispatch(&mut self, _: &vte::Params, _: &[u8], _: bool, _: char) {
        self.other |= self.printed.is_none();
    }
    fn esc_dispatch(&mut self, _: &[u8], _: bool, _: u8) {
        self.other |= self.printed.is_none();
    }
    fn osc_dispatch(&mut self, _: &[&[u8]], _: bool) {
        self.other |= self.printed.is_none();
    }
    fn hook(&mut self, _: &vte::Params, _: &[u8], _: bool, _: char) {
        self.other |= self.printed.is_none();
    }
    fn put(&mut self, _: u8) {
        self.other |= self.printed.is_none();
    }
    fn unhook(&mut self) {
        self.other |= self.printed.is_none();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn ground_state_shadow_agrees_with_vte(prefix in noisy_bytes(80)) {
        // vte is in ground state (no partial UTF-8) exactly when the next 'Z' is printed as
        // the very next action.
        let mut parser = vte::Parser::new();
        parser.advance(&mut FirstAction::default(), &prefix);
        let mut probe = FirstAction::default();
        parser.advance(&mut probe, b"Z");
        let vte_ground = probe.printed == Some('Z') && !probe.other;
        let mut model = Screen::new(10, 3);
        model.process(&prefix);
        prop_assert_eq!(model.at_ground_state(), vte_ground, "prefix {:?}", prefix);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn the_model_reads_its_own_keyframe_back_to_the_same_state(stream in streams()) {
        // A keyframe carries hidden state too (DECSC slots, region, tab stops, charsets,
        // modes, wrap flags, the REP character): read back by a fresh model, it must render
        // the very same keyframe.
        let mut original = Screen::new(20, 6);
        original.process(&stream);
        let keyframe = original.render_keyframe();
        let mut copy = Screen::new(20, 6);
        copy.process(&keyframe);
        prop_assert_eq!(copy.snapshot(), original.snapshot());
        let again = copy.render_keyframe();
        prop_assert_eq!(
            String::from_utf8_lossy(&again),
            String::from_utf8_lossy(&keyframe),
            "stream {:?}",
            String::from_utf8_lossy(&stream)
        );
    }
}
