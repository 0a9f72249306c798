//! Random terminal streams built from fragments an application would write, for the keyframe
//! fidelity property test.
//!
//! The oracle is the vt100 crate, and vt100 departs from xterm in places; the model follows
//! xterm. A fragment is therefore only appended to a stream when, in the state the stream has
//! reached (read from the model), vt100 and xterm agree on its effect. Each rule below names
//! the vt100 behaviour it avoids; those behaviours are covered by unit tests of the model
//! instead (`crates/desk-term/src/screen/tests.rs`). Sequences vt100 does not implement at all (autowrap off,
//! insert mode, LNM, charsets, HTS/TBC/CHT/CBT, IND/NEL, DECSTR, DECALN, 1047/1048, CSI s/u,
//! VPR/HPR, SGR 8) are not in the vocabulary.
//!
//! vt100 departures avoided here:
//! - pending wrap: vt100 keeps the cursor "past the last column" across CUU/CUD/CUF/CUB, BS,
//!   HT, LF, RI, erases and ICH/DCH, and a later character then wraps; xterm clears the
//!   pending wrap (BS and CUB even move left of the last column); VPA keeps it too. So none
//!   of these follow a character written in the last column.
//! - margins: vt100's CUD/CNL from above the region and CUU/CPL from below it ignore the
//!   margin xterm stops at; RI above the region at row 0 scrolls the region; VPA ignores
//!   origin mode; DECSTBM homes to the region top even without origin mode (so every region
//!   fragment is followed by CUP); DECRC does not clamp a saved origin-mode position below the
//!   region.
//! - IL/DL: xterm moves the cursor to column 0, vt100 does not (fragments start with CR).
//! - screens: vt100 keeps a cursor, saved cursor, region and origin flag per screen buffer
//!   and shares the saved pen between them; xterm has one of each plus a DECSC slot per
//!   buffer. Screens are switched only with a full region and origin mode off, followed by
//!   CUP, and never while already switched; DECSC/DECRC are not used on the alternate screen.
//! - background colour erase: vt100 fills scrolled-in, inserted and 1049-cleared cells with
//!   default attributes, xterm with the current background; a background colour is therefore
//!   only set inside one fragment (coloured text that does not wrap, or a coloured erase).
//! - wide characters: vt100 repairs a half-overwritten wide character differently (it keeps
//!   the old colours, or leaves a space); text and erases never cut through one.
//! - SGR: vt100 treats bold and faint as exclusive (fragments set one after clearing both),
//!   and a 38/48 colour out of range aborts the rest of its SGR.
//! - mouse: resetting a tracking mode other than the active one turns tracking off in xterm
//!   only; only the active mode is reset.

use desk_term::screen::{Color, MouseMode, Screen};
use proptest::prelude::*;
use unicode_width::UnicodeWidthChar;

/// One piece of a stream.
#[derive(Debug, Clone)]
pub(super) enum Frag {
    Text(String),
    BgText(u8, String),
    BgErase(u8, &'static str),
    Sgr(&'static str),
    Ctl(&'static str),
    Cup(u16, u16),
    Column(char, u16),
    Vpa(u16),
    Move(char, u16),
    Erase(&'static str),
    Edit(&'static str),
    Lines(&'static str),
    Scroll(&'static str),
    Region(u16, u16),
    RegionReset,
    Origin(bool),
    ReverseIndex,
    SaveCursor,
    RestoreCursor,
    AltEnter(u16),
    AltLeave(u16),
    Rep(char, u16),
    Title(String, bool),
    Mode(&'static str),
    MouseOn(u16),
    MouseOff(u16),
    Encoding(u16, bool),
    Reset,
}

const WORDS: &[&str] = &[
    "hello",
    "world",
    "$ ls -l",
    "Thinking…",
    "✓ done",
    "diff --git a/x b/x",
    "  indented",
    "x",
    "────────",
    "│ box │",
    "~",
    "> ",
];
const WIDE: &[&str] = &["中文", "日本語テキスト", "한국어", "😀", "🚀 go", "漢字かな", "a中b"];
const MARKED: &[&str] = &["e\u{301}", "cafe\u{301}", "a\u{308}b", "n\u{303}o", "中\u{302}"];
const SGR: &[&str] = &[
    "\x1b[0m",
    "\x1b[m",
    "\x1b[22;1m",
    "\x1b[22;2m",
    "\x1b[22m",
    "\x1b[3m",
    "\x1b[23m",
    "\x1b[4m",
    "\x1b[24m",
    "\x1b[7m",
    "\x1b[27m",
    "\x1b[31m",
    "\x1b[92m",
    "\x1b[39m",
    "\x1b[38;5;123m",
    "\x1b[38;2;10;20;30m",
    "\x1b[38:2:1:2:3m",
    "\x1b[38:5:77m",
    "\x1b[22;1;4;35m",
    "\x1b[5m",
    "\x1b[25m",
    "\x1b[9m",
    "\x1b[29m",
];
const ERASE: &[&str] =
    &["\x1b[K", "\x1b[0K", "\x1b[1K", "\x1b[2K", "\x1b[J", "\x1b[1J", "\x1b[2J", "\x1b[3X", "\x1b[X"];
const EDIT: &[&str] = &["\x1b[@", "\x1b[3@", "\x1b[P", "\x1b[2P"];
const LINES: &[&str] = &["\r\x1b[L", "\r\x1b[2L", "\r\x1b[M", "\r\x1b[3M"];
const SCROLL: &[&str] = &["\x1b[S", "\x1b[2S", "\x1b[T", "\x1b[3T"];
const CTL: &[&str] = &["\r", "\n", "\r\n", "\r\n", "\x08", "\t", "\x07"];
const MODES: &[&str] =
    &["\x1b[?2004h", "\x1b[?2004l", "\x1b[?1h", "\x1b[?1l", "\x1b=", "\x1b>", "\x1b[?25l", "\x1b[?25h"];

fn pick(list: &'static [&'static str]) -> impl Strategy<Value = &'static str> {
    proptest::sample::select(list)
}

/// A random fragment.
pub(super) fn frag() -> impl Strategy<Value = Frag> {
    prop_oneof![
        6 => pick(WORDS).prop_map(|s| Frag::Text(s.to_string())),
        6 => "[a-zA-Z0-9 .,:;!?()-]{1,30}".prop_map(Frag::Text),
        3 => pick(WIDE).prop_map(|s| Frag::Text(s.to_string())),
        2 => pick(MARKED).prop_map(|s| Frag::Text(s.to_string())),
        2 => (0u8..8, "[a-z ]{1,8}").prop_map(|(c, s)| Frag::BgText(c, s)),
        2 => (0u8..8, pick(ERASE)).prop_map(|(c, e)| Frag::BgErase(c, e)),
        5 => pick(SGR).prop_map(Frag::Sgr),
        8 => pick(CTL).prop_map(Frag::Ctl),
        3 => (0u16..14, 0u16..44).prop_map(|(r, c)| Frag::Cup(r, c)),
        2 => (proptest::sample::select(&['G', '`'][..]), 0u16..44).prop_map(|(f, c)| Frag::Column(f, c)),
        1 => (0u16..14).prop_map(Frag::Vpa),
        4 => (proptest::sample::select(&['A', 'B', 'C', 'D', 'E', 'F'][..]), 0u16..6)
            .prop_map(|(f, n)| Frag::Move(f, n)),
        3 => pick(ERASE).prop_map(Frag::Erase),
        2 => pick(EDIT).prop_map(Frag::Edit),
        2 => pick(LINES).prop_map(Frag::Lines),
        2 => pick(SCROLL).prop_map(Frag::Scroll),
        2 => (1u16..8, 2u16..14).prop_map(|(t, b)| Frag::Region(t, b)),
        1 => Just(Frag::RegionReset),
        1 => any::<bool>().prop_map(Frag::Origin),
        2 => Just(Frag::ReverseIndex),
        2 => Just(Frag::SaveCursor),
        2 => Just(Frag::RestoreCursor),
        2 => proptest::sample::select(&[47u16, 1049][..]).prop_map(Frag::AltEnter),
        2 => proptest::sample::select(&[47u16, 1049][..]).prop_map(Frag::AltLeave),
        1 => (proptest::sample::select(&['x', '=', '中', '─'][..]), 1u16..30).prop_map(|(c, n)| Frag::Rep(c, n)),
        1 => ("[a-z ;:⠋✳]{0,12}", any::<bool>()).prop_map(|(t, bel)| Frag::Title(t, bel)),
        2 => pick(MODES).prop_map(Frag::Mode),
        1 => proptest::sample::select(&[9u16, 1000, 1002, 1003][..]).prop_map(Frag::MouseOn),
        1 => proptest::sample::select(&[9u16, 1000, 1002, 1003][..]).prop_map(Frag::MouseOff),
        1 => (proptest::sample::select(&[1005u16, 1006][..]), any::<bool>()).prop_map(|(c, on)| Frag::Encoding(c, on)),
        1 => Just(Frag::Reset),
    ]
}

/// What the builder remembers about the stream so far (beyond what the model reports).
#[derive(Default)]
struct Context {
    /// Row and origin flag saved by the last DECSC on the main screen (or `?1049h`).
    saved: Option<(u16, bool)>,
    /// The DECSET code that entered the alternate screen.
    alt_code: Option<u16>,
}

fn row_has_wide(model: &Screen, row: u16) -> bool {
    let (cols, _) = model.size();
    (0..cols).any(|c| model.cell(row, c).is_some_and(|c| c.wide))
}

/// True when writing `text` from the current cursor never cuts through a wide character and
/// never wraps in place (at the bottom row below the region).
fn text_is_safe(model: &Screen, text: &str) -> bool {
    let (cols, rows) = model.size();
    let (mut row, mut col) = model.cursor();
    let mut pending = model.pending_wrap();
    let (_, bottom) = model.scroll_region();
    let mut fresh = false;
    for ch in text.chars() {
        let w = ch.width().unwrap_or(0) as u16;
        if w == 0 || w > cols {
            continue;
        }
        if pending || (w == 2 && col + 2 > cols) {
            if row == bottom {
                fresh = true;
            } else if row + 1 < rows {
                row += 1;
            } else {
                return false;
            }
            col = 0;
            pending = false;
        }
        if !fresh {
            let cell = |c: u16| model.cell(row, c).unwrap_or_else(|| panic!("cell ({row},{c})"));
            let here = cell(col);
            if here.wide_continuation {
                return false;
            }
            if w == 1 && here.wide {
                return false;
            }
            if w == 2 && !here.wide && col + 1 < cols {
                let next = cell(col + 1);
                if next.wide || next.wide_continuation {
                    return false;
                }
            }
        }
        col += w;
        if col >= cols {
            col = cols - 1;
            pending = true;
        }
    }
    true
}

fn is_partial_erase(seq: &str) -> bool {
    !matches!(seq, "\x1b[2K" | "\x1b[2J")
}

/// The bytes for `frag` if vt100 and xterm agree on them in the model's current state.
fn accept(model: &Screen, ctx: &Context, frag: &Frag) -> Option<String> {
    let (cols, rows) = model.size();
    let (row, col) = model.cursor();
    let pending = model.pending_wrap();
    let (top, bottom) = model.scroll_region();
    let modes = model.modes();
    let full_region = top == 0 && bottom == rows - 1;
    let bytes = match frag {
        Frag::Text(s) => text_is_safe(model, s).then(|| s.clone())?,
        Frag::BgText(c, s) => {
            let width = s.chars().count() as u16;
            let ok = !pending && col + width <= cols && text_is_safe(model, s);
            ok.then(|| format!("\x1b[4{c}m{s}\x1b[49m"))?
        }
        Frag::BgErase(c, seq) => {
            let ok = !pending && (!is_partial_erase(seq) || !row_has_wide(model, row));
            ok.then(|| format!("\x1b[4{c}m{seq}\x1b[49m"))?
        }
        Frag::Sgr(s) => s.to_string(),
        Frag::Ctl(s) => (*s == "\r" || *s == "\r\n" || *s == "\x07" || !pending).then(|| s.to_string())?,
        Frag::Cup(r, c) => format!("\x1b[{r};{c}H"),
        Frag::Column(f, c) => format!("\x1b[{c}{f}"),
        Frag::Vpa(r) => (!modes.origin && !pending).then(|| format!("\x1b[{r}d"))?,
        Frag::Move(f, n) => {
            let ok = match f {
                'A' => !pending && row <= bottom,
                'F' => row <= bottom,
                'B' => !pending && row >= top,
                'E' => row >= top,
                _ => !pending,
            };
            ok.then(|| format!("\x1b[{n}{f}"))?
        }
        Frag::Erase(seq) => {
            (!pending && (!is_partial_erase(seq) || !row_has_wide(model, row))).then(|| seq.to_string())?
        }
        Frag::Edit(seq) => (!pending && !row_has_wide(model, row)).then(|| seq.to_string())?,
        Frag::Lines(seq) => seq.to_string(),
        // Not a vt100 departure but a keyframe limit (keyframe.rs): SU/SD right after writing
        // the last column can leave a pending wrap over an empty cell, redrawn as a space.
        Frag::Scroll(seq) => (!pending).then(|| seq.to_string())?,
        Frag::Region(t, b) => (t < b && *b <= rows).then(|| format!("\x1b[{t};{b}r\x1b[H"))?,
        Frag::RegionReset => "\x1b[r\x1b[H".to_string(),
        Frag::Origin(on) => if *on { "\x1b[?6h" } else { "\x1b[?6l" }.to_string(),
        Frag::ReverseIndex => (!pending && row >= top).then(|| "\x1bM".to_string())?,
        Frag::SaveCursor => (!modes.alternate_screen).then(|| "\x1b7".to_string())?,
        Frag::RestoreCursor => {
            // Below the region: vt100 does not clamp. Above it: keyframe limit (origin mode
            // cannot address it once the cursor moves on from the restored position).
            let outside = ctx.saved.is_some_and(|(r, origin)| origin && (r > bottom || r < top));
            (!modes.alternate_screen && !outside).then(|| "\x1b8".to_string())?
        }
        Frag::AltEnter(code) => {
            // `!pending`: keyframe limit again (a 47 switch keeps the pending wrap).
            let ok =
                !modes.alternate_screen && full_region && !modes.origin && !pending && model.pen().bg == Color::Default;
            // Keyframe limit: the content of an inactive alternate buffer is not restored, so
            // re-entering with 47 (which shows it again) is followed by a clear.
            let clear = if *code == 47 { "\x1b[2J" } else { "" };
            ok.then(|| format!("\x1b[?{code}h{clear}\x1b[H"))?
        }
        Frag::AltLeave(code) => {
            let ok = modes.alternate_screen
                && ctx.alt_code == Some(*code)
                && full_region
                && !modes.origin
                && !(pending && *code == 47);
            let tail = if *code == 47 { "\x1b[H" } else { "" };
            ok.then(|| format!("\x1b[?{code}l{tail}"))?
        }
        Frag::Rep(c, n) => {
            let text: String = std::iter::repeat_n(*c, usize::from(*n) + 1).collect();
            text_is_safe(model, &text).then(|| format!("{c}\x1b[{n}b"))?
        }
        Frag::Title(t, bel) => format!("\x1b]2;{t}{}", if *bel { "\x07" } else { "\x1b\\" }),
        Frag::Mode(s) => s.to_string(),
        Frag::MouseOn(code) => format!("\x1b[?{code}h"),
        Frag::MouseOff(code) => {
            (modes.mouse != MouseMode::None && modes.mouse.code() == *code).then(|| format!("\x1b[?{code}l"))?
        }
        Frag::Encoding(code, on) => format!("\x1b[?{code}{}", if *on { 'h' } else { 'l' }),
        Frag::Reset => "\x1bc".to_string(),
    };
    Some(bytes)
}

/// Builds a stream from `frags`, skipping those the oracle would get wrong (see the module
/// documentation), for a terminal of `cols` x `rows`.
pub(super) fn build(cols: u16, rows: u16, frags: &[Frag]) -> Vec<u8> {
    let mut model = Screen::new(cols, rows);
    let mut ctx = Context::default();
    let mut out = Vec::new();
    for frag in frags {
        let Some(bytes) = accept(&model, &ctx, frag) else {
            continue;
        };
        let before = (model.cursor().0, model.modes().origin);
        model.process(bytes.as_bytes());
        match frag {
            Frag::SaveCursor | Frag::AltEnter(1049) => ctx.saved = Some(before),
            Frag::Reset => ctx = Context::default(),
            _ => {}
        }
        match frag {
            Frag::AltEnter(code) => ctx.alt_code = Some(*code),
            Frag::AltLeave(_) => ctx.alt_code = None,
            _ => {}
        }
        out.extend_from_slice(bytes.as_bytes());
    }
    out
}

/// A random terminal size, biased towards small screens where edges are hit often.
pub(super) fn size() -> impl Strategy<Value = (u16, u16)> {
    prop_oneof![
        4 => (2u16..=40, 1u16..=12),
        1 => Just((80u16, 24u16)),
        1 => Just((1u16, 1u16)),
    ]
}
