//! The scanner: terminal events in a child's output stream.
//!
//! Owns the incremental recognition of what desk reports about a session's output: window
//! titles (OSC 0/1/2), the bell, desktop notifications (OSC 9 and OSC 777) and the modes an
//! application switches with DECSET/DECRST (bracketed paste, alternate screen, cursor keys,
//! cursor visibility, mouse reporting and its SGR encoding, focus events). Invariants: any
//! split of a byte stream into reads yields the same events; state is bounded (an OSC payload
//! is stored up to [`OSC_CAP`] bytes, CSI parameters up to [`MAX_PARAMS`]); titles are cut on
//! a UTF-8 character boundary; mode events are emitted only when a mode actually changes; no
//! input makes it panic or allocate without bound.

use serde::{Deserialize, Serialize};

/// 2 KiB of OSC payload is kept: far above any real title or notification, and the bound on
/// what a hostile or broken stream can make the scanner hold.
pub const OSC_CAP: usize = 2048;

/// Titles are cut to 256 bytes (on a character boundary): the dashboard shows a few dozen
/// characters, and every title change is journalled.
pub const TITLE_CAP: usize = 256;

/// Notification bodies are cut to 1 KiB, enough for any message an agent shows in one.
pub const NOTIFICATION_CAP: usize = 1024;

/// CSI parameters beyond the 16th are ignored (DECSET lists are a handful long).
pub const MAX_PARAMS: usize = 16;

/// A terminal mode desk tracks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// DECSET 2004.
    BracketedPaste,
    /// DECSET 47, 1047 or 1049.
    AlternateScreen,
    /// DECSET 1 (application cursor keys).
    AppCursorKeys,
    /// DECSET 25.
    CursorVisible,
    /// DECSET 1000 (button press/release reporting).
    MouseButtons,
    /// DECSET 1002 (button-motion reporting).
    MouseDrag,
    /// DECSET 1003 (any-motion reporting).
    MouseMotion,
    /// DECSET 1006 (SGR mouse encoding).
    MouseSgr,
    /// DECSET 1004.
    FocusEvents,
}

impl Mode {
    pub const ALL: [Mode; 9] = [
        Mode::BracketedPaste,
        Mode::AlternateScreen,
        Mode::AppCursorKeys,
        Mode::CursorVisible,
        Mode::MouseButtons,
        Mode::MouseDrag,
        Mode::MouseMotion,
        Mode::MouseSgr,
        Mode::FocusEvents,
    ];

    fn from_decset(n: u32) -> Option<Mode> {
        Some(match n {
            2004 => Mode::BracketedPaste,
            47 | 1047 | 1049 => Mode::AlternateScreen,
            1 => Mode::AppCursorKeys,
            25 => Mode::CursorVisible,
            1000 => Mode::MouseButtons,
            1002 => Mode::MouseDrag,
            1003 => Mode::MouseMotion,
            1006 => Mode::MouseSgr,
            1004 => Mode::FocusEvents,
            _ => return None,
        })
    }

    fn index(self) -> usize {
        self as usize
    }

    /// The power-on state of the mode.
    pub fn default_on(self) -> bool {
        self == Mode::CursorVisible
    }
}

/// Something the scanner recognised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ScanEvent {
    /// OSC 0 or OSC 2.
    Title {
        title: String,
    },
    /// OSC 1 (and OSC 0, which sets both).
    IconName {
        name: String,
    },
    Bell,
    /// OSC 9 (iTerm2 style: the body) or OSC 777 (`notify;title;body`).
    Notification {
        title: Option<String>,
        body: String,
    },
    Mode {
        mode: Mode,
        on: bool,
    },
    /// The program reported its own state (Codex's OSC 7501 `state=<state>[:key=value...]`).
    StateReport {
        state: String,
        kind: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ground,
    Escape,
    /// ESC followed by intermediates (e.g. `ESC ( 0`): waiting for the final byte.
    EscapeIntermediate,
    Csi,
    /// A CSI that went wrong: consume until its final byte.
    CsiIgnore,
    Osc,
    /// ESC seen inside an OSC: `\` ends it, anything else aborts it.
    OscEscape,
    /// DCS, SOS, PM, APC: skipped until ST.
    String,
    StringEscape,
}

/// The incremental scanner. Feed it every byte of output, in order, in pieces of any size.
#[derive(Debug, Clone)]
pub struct Scanner {
    state: State,
    private: u8,
    params: [u32; MAX_PARAMS],
    nparams: usize,
    /// Whether the current parameter has any digit yet (an empty parameter is 0).
    param_started: bool,
    csi_intermediate: bool,
    osc: Vec<u8>,
    modes: [bool; Mode::ALL.len()],
}

impl Default for Scanner {
    fn default() -> Self {
        Scanner::new()
    }
}

impl Scanner {
    pub fn new() -> Scanner {
        let mut modes = [false; Mode::ALL.len()];
        for mode in Mode::ALL {
            modes[mode.index()] = mode.default_on();
        }
        Scanner {
            state: State::Ground,
            private: 0,
            params: [0; MAX_PARAMS],
            nparams: 0,
            param_started: false,
            csi_intermediate: false,
            osc: Vec::new(),
            modes,
        }
    }

    /// The current state of a tracked mode.
    pub fn mode(&self, mode: Mode) -> bool {
        self.modes[mode.index()]
    }

    /// Bytes held for an unfinished sequence (bounded by [`OSC_CAP`]).
    pub fn buffered(&self) -> usize {
        self.osc.len()
    }

    /// Scan `bytes`, appending what was recognised to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<ScanEvent>) {
        let mut i = 0;
        while i < bytes.len() {
            if self.state == State::Ground {
                // Fast path: plain text is skipped without looking at every byte twice.
                match memchr::memchr2(0x1b, 0x07, &bytes[i..]) {
                    None => return,
                    Some(at) => i += at,
                }
            }
            self.step(bytes[i], out);
            i += 1;
        }
    }

    fn step(&mut self, b: u8, out: &mut Vec<ScanEvent>) {
        // CAN and SUB abort any sequence; ESC starts a new one (except where it may begin ST).
        match (self.state, b) {
            (State::Osc, 0x1b) => {
                self.state = State::OscEscape;
                return;
            }
            (State::String, 0x1b) => {
                self.state = State::StringEscape;
                return;
            }
            (State::OscEscape, b'\\') => {
                self.finish_osc(out);
                self.state = State::Ground;
                return;
            }
            (State::StringEscape, b'\\') => {
                self.state = State::Ground;
                return;
            }
            (_, 0x18 | 0x1a) => {
                self.reset_sequence();
                return;
            }
            (_, 0x1b) => {
                self.reset_sequence();
                self.state = State::Escape;
                return;
            }
            _ => {}
        }
        match self.state {
            State::Ground => {
                if b == 0x07 {
                    out.push(ScanEvent::Bell);
                }
            }
            State::Escape => match b {
                b'[' => {
                    self.state = State::Csi;
                    self.private = 0;
                    self.nparams = 0;
                    self.param_started = false;
                    self.csi_intermediate = false;
                }
                b']' => {
                    self.state = State::Osc;
                    self.osc.clear();
                }
                b'P' | b'X' | b'^' | b'_' => self.state = State::String,
                b'c' => {
                    self.reset_modes(out);
                    self.state = State::Ground;
                }
                0x20..=0x2f => self.state = State::EscapeIntermediate,
                0x00..=0x1f => self.execute(b, out),
                _ => self.state = State::Ground,
            },
            State::EscapeIntermediate => match b {
                0x20..=0x2f => {}
                0x00..=0x1f => self.execute(b, out),
                _ => self.state = State::Ground,
            },
            State::Csi => self.csi_byte(b, out),
            State::CsiIgnore => match b {
                0x40..=0x7e => self.state = State::Ground,
                0x00..=0x1f => self.execute(b, out),
                _ => {}
            },
            State::Osc => match b {
                0x07 => {
                    self.finish_osc(out);
                    self.state = State::Ground;
                }
                // Other C0 controls inside an OSC are ignored, as xterm does.
                0x00..=0x1f => {}
                _ => {
                    // Bytes past the cap are dropped: the payload is cut, never grown.
                    if self.osc.len() < OSC_CAP {
                        self.osc.push(b);
                    }
                }
            },
            State::OscEscape => {
                // ESC not followed by `\`: the OSC is abandoned and this ESC starts anew.
                self.osc.clear();
                self.state = State::Escape;
                self.step(b, out);
            }
            State::String => {}
            State::StringEscape => {
                self.state = State::String;
            }
        }
    }

    /// C0 controls are executed in the middle of escape sequences; only BEL matters here.
    fn execute(&mut self, b: u8, out: &mut Vec<ScanEvent>) {
        if b == 0x07 {
            out.push(ScanEvent::Bell);
        }
    }

    fn reset_sequence(&mut self) {
        self.state = State::Ground;
        self.osc.clear();
    }

    fn csi_byte(&mut self, b: u8, out: &mut Vec<ScanEvent>) {
        match b {
            b'0'..=b'9' if !self.csi_intermediate => {
                if self.nparams == 0 {
                    self.nparams = 1;
                    self.params[0] = 0;
                }
                let p = &mut self.params[self.nparams - 1];
                *p = p.saturating_mul(10).saturating_add(u32::from(b - b'0'));
                self.param_started = true;
            }
            b';' | b':' if !self.csi_intermediate => {
                if self.nparams == 0 {
                    self.nparams = 1;
                    self.params[0] = 0;
                }
                if self.nparams < MAX_PARAMS {
                    self.params[self.nparams] = 0;
                    self.nparams += 1;
                } else {
                    // Too many parameters: the sequence is ignored rather than misread.
                    self.state = State::CsiIgnore;
                }
                self.param_started = false;
            }
            b'<'..=b'?' => {
                if self.nparams == 0 && self.private == 0 && !self.param_started {
                    self.private = b;
                } else {
                    self.state = State::CsiIgnore;
                }
            }
            0x20..=0x2f => self.csi_intermediate = true,
            0x40..=0x7e => {
                if self.private == b'?' && !self.csi_intermediate && matches!(b, b'h' | b'l') {
                    for i in 0..self.nparams {
                        if let Some(mode) = Mode::from_decset(self.params[i]) {
                            self.set_mode(mode, b == b'h', out);
                        }
                    }
                }
                self.state = State::Ground;
            }
            0x00..=0x1f => self.execute(b, out),
            _ => self.state = State::CsiIgnore,
        }
    }

    fn set_mode(&mut self, mode: Mode, on: bool, out: &mut Vec<ScanEvent>) {
        if self.modes[mode.index()] != on {
            self.modes[mode.index()] = on;
            out.push(ScanEvent::Mode { mode, on });
        }
    }

    fn reset_modes(&mut self, out: &mut Vec<ScanEvent>) {
        for mode in Mode::ALL {
            self.set_mode(mode, mode.default_on(), out);
        }
    }

    fn finish_osc(&mut self, out: &mut Vec<ScanEvent>) {
        let payload = std::mem::take(&mut self.osc);
        let (command, rest) = match payload.iter().position(|b| *b == b';') {
            Some(at) => (&payload[..at], &payload[at + 1..]),
            None => (&payload[..], &[][..]),
        };
        match command {
            b"0" => {
                let title = cut(rest, TITLE_CAP);
                out.push(ScanEvent::IconName { name: title.clone() });
                out.push(ScanEvent::Title { title });
            }
            b"1" => out.push(ScanEvent::IconName { name: cut(rest, TITLE_CAP) }),
            b"2" => out.push(ScanEvent::Title { title: cut(rest, TITLE_CAP) }),
            b"9" => {
                // ConEmu's `9;<digit>;...` sequences (progress, cwd, ...) share the number;
                // they are not notifications.
                let conemu = rest.first().is_some_and(u8::is_ascii_digit) && matches!(rest.get(1), None | Some(b';'));
                if !conemu {
                    out.push(ScanEvent::Notification { title: None, body: cut(rest, NOTIFICATION_CAP) });
                }
            }
            b"7501" => {
                // `state=working:app=codex[:kind=permission]`
                let text = cut(rest, TITLE_CAP);
                let mut state = None;
                let mut kind = None;
                for part in text.split(':') {
                    if let Some(v) = part.strip_prefix("state=") {
                        state = Some(v.to_string());
                    } else if let Some(v) = part.strip_prefix("kind=") {
                        kind = Some(v.to_string());
                    }
                }
                if let Some(state) = state {
                    out.push(ScanEvent::StateReport { state, kind });
                }
            }
            b"777" => {
                let mut parts = rest.splitn(3, |b| *b == b';');
                if parts.next() == Some(b"notify") {
                    let title = parts.next().map(|t| cut(t, TITLE_CAP));
                    let body = parts.next().map(|b| cut(b, NOTIFICATION_CAP)).unwrap_or_default();
                    out.push(ScanEvent::Notification { title, body });
                }
            }
            _ => {}
        }
    }
}

/// Decode (lossily) and cut to at most `cap` bytes on a character boundary.
fn cut(bytes: &[u8], cap: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    if text.len() <= cap {
        return text.into_owned();
    }
    let mut end = cap;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn scan(bytes: &[u8]) -> Vec<ScanEvent> {
        let mut s = Scanner::new();
        let mut out = Vec::new();
        s.feed(bytes, &mut out);
        out
    }

    fn title(t: &str) -> ScanEvent {
        ScanEvent::Title { title: t.into() }
    }

    #[test]
    fn titles_from_osc_0_1_2_with_bel_or_st() {
        assert_eq!(scan(b"\x1b]2;hello\x07"), vec![title("hello")]);
        assert_eq!(scan(b"\x1b]2;st end\x1b\\"), vec![title("st end")]);
        assert_eq!(scan(b"\x1b]0;both\x07"), vec![ScanEvent::IconName { name: "both".into() }, title("both")]);
        assert_eq!(scan(b"\x1b]1;icon\x07"), vec![ScanEvent::IconName { name: "icon".into() }]);
        assert_eq!(scan(b"\x1b]2;a;b;c\x07"), vec![title("a;b;c")]);
        assert_eq!(scan("\x1b]0;⠋ working\x07".as_bytes())[1], title("⠋ working"));
    }

    #[test]
    fn a_long_title_is_cut_on_a_character_boundary() {
        let long = "é".repeat(200); // 400 bytes
        let events = scan(format!("\x1b]2;{long}\x07").as_bytes());
        let ScanEvent::Title { title } = &events[0] else { panic!("{events:?}") };
        assert_eq!(title.len(), 256);
        assert!(title.chars().all(|c| c == 'é'));
    }

    #[test]
    fn an_overlong_osc_stays_bounded() {
        let mut s = Scanner::new();
        let mut out = Vec::new();
        s.feed(b"\x1b]2;", &mut out);
        for _ in 0..1000 {
            s.feed(&[b'x'; 1000], &mut out);
            assert!(s.buffered() <= OSC_CAP);
        }
        s.feed(b"\x07", &mut out);
        assert_eq!(out, vec![title(&"x".repeat(TITLE_CAP))]);
    }

    #[test]
    fn bell_inside_and_outside_sequences() {
        assert_eq!(scan(b"ding\x07dong"), vec![ScanEvent::Bell]);
        // BEL terminates an OSC rather than ringing.
        assert_eq!(scan(b"\x1b]2;t\x07"), vec![title("t")]);
        // BEL inside a CSI is executed.
        assert_eq!(scan(b"\x1b[1\x07;2H"), vec![ScanEvent::Bell]);
    }

    #[test]
    fn notifications_osc_9_and_777() {
        assert_eq!(
            scan(b"\x1b]9;Build finished\x07"),
            vec![ScanEvent::Notification { title: None, body: "Build finished".into() }]
        );
        assert_eq!(
            scan(b"\x1b]777;notify;Claude;Needs your permission\x1b\\"),
            vec![ScanEvent::Notification { title: Some("Claude".into()), body: "Needs your permission".into() }]
        );
        // ConEmu progress shares OSC 9 but is not a notification.
        assert_eq!(scan(b"\x1b]9;4;1;50\x07"), vec![]);
    }

    #[test]
    fn program_state_reports_are_read() {
        assert_eq!(
            scan(b"\x1b]7501;state=blocked:app=codex:kind=permission\x1b\\"),
            vec![ScanEvent::StateReport { state: "blocked".into(), kind: Some("permission".into()) }]
        );
        assert_eq!(
            scan(b"\x1b]7501;state=working:app=codex\x07"),
            vec![ScanEvent::StateReport { state: "working".into(), kind: None }]
        );
        assert_eq!(scan(b"\x1b]7501;app=codex\x07"), vec![]);
    }

    #[test]
    fn modes_change_only_when_they_change() {
        let events = scan(b"\x1b[?2004h\x1b[?2004h\x1b[?1049;1h\x1b[?25l\x1b[?2004l");
        use Mode::*;
        let m = |mode, on| ScanEvent::Mode { mode, on };
        assert_eq!(
            events,
            vec![
                m(BracketedPaste, true),
                m(AlternateScreen, true),
                m(AppCursorKeys, true),
                m(CursorVisible, false),
                m(BracketedPaste, false)
            ]
        );
    }

    #[test]
    fn every_listed_decset_number_maps_to_its_mode() {
        use Mode::*;
        let cases: [(&[u8], Mode); 10] = [
            (b"47", AlternateScreen),
            (b"1047", AlternateScreen),
            (b"1049", AlternateScreen),
            (b"2004", BracketedPaste),
            (b"1", AppCursorKeys),
            (b"1000", MouseButtons),
            (b"1002", MouseDrag),
            (b"1003", MouseMotion),
            (b"1006", MouseSgr),
            (b"1004", FocusEvents),
        ];
        for (number, mode) in cases {
            let on = [b"\x1b[?", number, b"h"].concat();
            let off = [b"\x1b[?", number, b"l"].concat();
            let events = scan(&[on, off].concat());
            assert_eq!(
                events,
                vec![ScanEvent::Mode { mode, on: true }, ScanEvent::Mode { mode, on: false }],
                "DECSET {}",
                String::from_utf8_lossy(number)
            );
        }
        // Cursor visibility starts on: only its reset is a change.
        assert_eq!(scan(b"\x1b[?25h\x1b[?25l"), vec![ScanEvent::Mode { mode: CursorVisible, on: false }]);
    }

    #[test]
    fn reset_returns_modes_to_their_defaults() {
        let mut s = Scanner::new();
        let mut out = Vec::new();
        s.feed(b"\x1b[?1000;1006h\x1b[?25l", &mut out);
        out.clear();
        s.feed(b"\x1bc", &mut out);
        assert_eq!(out.len(), 3);
        assert!(!s.mode(Mode::MouseButtons) && s.mode(Mode::CursorVisible));
    }

    #[test]
    fn other_sequences_are_not_mistaken_for_modes() {
        // Not private, intermediates, other finals, huge numbers.
        assert_eq!(scan(b"\x1b[2004h\x1b[?2004$p\x1b[?2004r\x1b[?4294969300h"), vec![]);
        // CAN aborts an OSC.
        assert_eq!(scan(b"\x1b]2;aborted\x18text\x07"), vec![ScanEvent::Bell]);
        // DCS content is skipped, even if it looks like a title.
        assert_eq!(scan(b"\x1bP\x1b]2;no\x07\x1b\\"), vec![]);
    }

    #[test]
    fn esc_inside_osc_that_is_not_st_abandons_it() {
        assert_eq!(scan(b"\x1b]2;lost\x1b[?2004h"), vec![ScanEvent::Mode { mode: Mode::BracketedPaste, on: true }]);
    }

    fn fragment() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            "[a-z ]{0,8}".prop_map(|s| s.into_bytes()),
            Just(b"\x1b]0;\xe2\xa0\x8b work\x07".to_vec()),
            Just("\x1b]2;✳ idle\x1b\\".as_bytes().to_vec()),
            Just(b"\x07".to_vec()),
            Just(b"\x1b]9;note\x07".to_vec()),
            Just(b"\x1b]777;notify;T;B\x07".to_vec()),
            Just(b"\x1b[?2004h".to_vec()),
            Just(b"\x1b[?2004l".to_vec()),
            Just(b"\x1b[?1049h".to_vec()),
            Just(b"\x1b[?1049l".to_vec()),
            Just(b"\x1b[?1000;1006h".to_vec()),
            Just(b"\x1b[31m".to_vec()),
            Just(b"\x1bc".to_vec()),
            Just(b"\x1bP1$r\x1b\\".to_vec()),
            Just(b"\x1b".to_vec()),
            Just(b"\x18".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..6),
        ]
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_events(
            parts in proptest::collection::vec(fragment(), 0..40),
            cuts in proptest::collection::vec(any::<usize>(), 0..10),
        ) {
            let stream: Vec<u8> = parts.concat();
            let whole = scan(&stream);
            let mut points: Vec<usize> = cuts.iter().map(|c| if stream.is_empty() { 0 } else { c % (stream.len() + 1) }).collect();
            points.sort_unstable();
            let mut s = Scanner::new();
            let mut out = Vec::new();
            let mut last = 0;
            for p in points.into_iter().chain(std::iter::once(stream.len())) {
                s.feed(&stream[last..p], &mut out);
                last = p;
            }
            prop_assert_eq!(out, whole);
        }

        #[test]
        fn arbitrary_bytes_never_panic_and_stay_bounded(
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..512), 0..20)
        ) {
            let mut s = Scanner::new();
            let mut out = Vec::new();
            for chunk in &chunks {
                s.feed(chunk, &mut out);
                prop_assert!(s.buffered() <= OSC_CAP);
            }
            for event in &out {
                match event {
                    ScanEvent::Title { title } => prop_assert!(title.len() <= TITLE_CAP),
                    ScanEvent::Notification { body, .. } => prop_assert!(body.len() <= NOTIFICATION_CAP),
                    _ => {}
                }
            }
        }
    }
}

/// The check the scanner's fuzz target runs (`fuzz/fuzz_targets/scanner.rs`), kept here so
/// `cargo test` replays the committed corpus without the fuzzer. Byte 0 modulo 16 is how many
/// following bytes are read sizes; the rest is the stream. Panics if the cut stream gives other
/// events than the whole one, or if a bound is broken.
#[doc(hidden)]
pub fn fuzz_check(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else { return };
    let (sizes, stream) = rest.split_at(usize::from(first % 16).min(rest.len()));
    let mut whole = Vec::new();
    Scanner::new().feed(stream, &mut whole);
    let mut cut = Vec::new();
    let mut scanner = Scanner::new();
    let mut offset = 0;
    for &size in sizes.iter().cycle() {
        if offset == stream.len() {
            break;
        }
        let end = if size == 0 { stream.len() } else { (offset + usize::from(size)).min(stream.len()) };
        scanner.feed(&stream[offset..end], &mut cut);
        assert!(scanner.buffered() <= OSC_CAP, "scanner holds {} bytes", scanner.buffered());
        offset = end;
    }
    if sizes.is_empty() {
        scanner.feed(stream, &mut cut);
    }
    assert_eq!(cut, whole, "cutting the stream changed the events");
    for event in &whole {
        match event {
            ScanEvent::Title { title } | ScanEvent::IconName { name: title } => assert!(title.len() <= TITLE_CAP),
            ScanEvent::Notification { body, title } => {
                assert!(body.len() <= NOTIFICATION_CAP);
                assert!(title.as_ref().is_none_or(|t| t.len() <= TITLE_CAP));
            }
            ScanEvent::Bell | ScanEvent::Mode { .. } => {}
            ScanEvent::StateReport { state, kind } => {
                assert!(state.len() <= TITLE_CAP && kind.as_ref().is_none_or(|k| k.len() <= TITLE_CAP));
            }
        }
    }
}

#[cfg(test)]
mod corpus {
    /// Every file of the fuzz corpus passes the fuzz check (regressions stay fixed without the
    /// fuzzer).
    #[test]
    fn the_fuzz_corpus_replays_clean() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/scanner");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).expect("fuzz/corpus/scanner exists") {
            let path = entry.unwrap().path();
            super::fuzz_check(&std::fs::read(&path).unwrap());
            n += 1;
        }
        assert!(n > 0, "the corpus is empty");
    }
}
