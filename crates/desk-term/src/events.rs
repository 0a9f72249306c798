//! The output events the screen model's parse finds: what desk reports about a session's output.
//!
//! Owns the vocabulary ([`OutputEvent`], [`Mode`]) and the reading of the OSC strings that are
//! not about the screen (notifications OSC 9 and 777, Codex's state report OSC 7501). The events
//! themselves are produced by the one parse of every output byte, in the screen model
//! ([`crate::screen::Screen::feed`]): titles where the model's title changes, the bell where it
//! executes BEL, mode changes where its own modes change (one mode tracker, so an event never
//! disagrees with [`crate::screen::Screen::modes`]). Invariants: any split of a byte stream into
//! `feed` calls yields the same events; titles are cut to [`TITLE_CAP`] bytes and notification
//! bodies to [`NOTIFICATION_CAP`] on a UTF-8 character boundary; a mode event is emitted only
//! when the mode actually changes. May not depend on anything outside this crate.

use serde::{Deserialize, Serialize};

use crate::screen::{Modes, MouseEncoding, MouseMode};

/// Titles are cut to 256 bytes (on a character boundary): the dashboard shows a few dozen
/// characters, and every title change is journalled.
pub const TITLE_CAP: usize = 256;

/// Notification bodies are cut to 1 KiB, enough for any message an agent shows in one.
pub const NOTIFICATION_CAP: usize = 1024;

/// A terminal mode desk reports changes of.
///
/// The three mouse tracking modes are exclusive, as in xterm (one tracking mode at a time, and
/// resetting any of them turns tracking off): `CSI ? 1002 h` while 1000 is on reports
/// `MouseButtons` off and `MouseDrag` on. X10 mouse mode (DECSET 9) is none of them.
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

    /// Whether this mode is on in the screen model's `modes`.
    pub fn is_on(self, modes: &Modes) -> bool {
        match self {
            Mode::BracketedPaste => modes.bracketed_paste,
            Mode::AlternateScreen => modes.alternate_screen,
            Mode::AppCursorKeys => modes.app_cursor_keys,
            Mode::CursorVisible => modes.cursor_visible,
            Mode::MouseButtons => modes.mouse == MouseMode::PressRelease,
            Mode::MouseDrag => modes.mouse == MouseMode::ButtonMotion,
            Mode::MouseMotion => modes.mouse == MouseMode::AnyMotion,
            Mode::MouseSgr => modes.mouse_encoding == MouseEncoding::Sgr,
            Mode::FocusEvents => modes.focus_events,
        }
    }

    /// The power-on state of the mode.
    pub fn default_on(self) -> bool {
        self == Mode::CursorVisible
    }

    /// Every mode of `modes` as one bit each (bit `i` for `Mode::ALL[i]`), so that the model
    /// can tell which changed across an operation.
    pub(crate) fn bits(modes: &Modes) -> u16 {
        Mode::ALL.iter().enumerate().fold(0, |bits, (i, mode)| bits | u16::from(mode.is_on(modes)) << i)
    }

    /// Appends one event per mode whose bit differs between `before` and `after`, in
    /// `Mode::ALL` order.
    pub(crate) fn report_changes(before: u16, after: u16, out: &mut Vec<OutputEvent>) {
        if before == after {
            return;
        }
        for (i, mode) in Mode::ALL.iter().enumerate() {
            if (before ^ after) & (1 << i) != 0 {
                out.push(OutputEvent::Mode { mode: *mode, on: after & (1 << i) != 0 });
            }
        }
    }
}

/// Something the parse of the output found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum OutputEvent {
    /// OSC 0 or OSC 2: the title the screen model now has, cut to [`TITLE_CAP`].
    Title { title: String },
    /// OSC 1 (and OSC 0, which sets both).
    IconName { name: String },
    /// BEL executed (outside string sequences; also inside a CSI, where terminals execute it).
    Bell,
    /// OSC 9 (iTerm2 style: the body) or OSC 777 (`notify;title;body`).
    Notification { title: Option<String>, body: String },
    /// A mode changed (DECSET/DECRST, DECSTR, RIS).
    Mode { mode: Mode, on: bool },
    /// The program reported its own state (Codex's OSC 7501 `state=<state>[:key=value...]`).
    StateReport { state: String, kind: Option<String> },
}

/// Reads an OSC string other than a title (`command` before the first `;`, `rest` after it):
/// notifications (OSC 9, OSC 777) and state reports (OSC 7501). Anything else is ignored.
pub(crate) fn osc_event(command: &[u8], rest: &[u8], out: &mut Vec<OutputEvent>) {
    match command {
        b"9" => {
            // ConEmu's `9;<digit>;...` sequences (progress, cwd, ...) share the number;
            // they are not notifications.
            let conemu = rest.first().is_some_and(u8::is_ascii_digit) && matches!(rest.get(1), None | Some(b';'));
            if !conemu {
                out.push(OutputEvent::Notification { title: None, body: cut(rest, NOTIFICATION_CAP) });
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
                out.push(OutputEvent::StateReport { state, kind });
            }
        }
        b"777" => {
            let mut parts = rest.splitn(3, |b| *b == b';');
            if parts.next() == Some(b"notify") {
                let title = parts.next().map(|t| cut(t, TITLE_CAP));
                let body = parts.next().map(|b| cut(b, NOTIFICATION_CAP)).unwrap_or_default();
                out.push(OutputEvent::Notification { title, body });
            }
        }
        _ => {}
    }
}

/// `text` cut to at most `cap` bytes on a character boundary.
pub(crate) fn cut_str(text: &str, cap: usize) -> String {
    crate::text::cut_bytes(text, cap).to_string()
}

/// Decode (lossily) and cut to at most `cap` bytes on a character boundary.
fn cut(bytes: &[u8], cap: usize) -> String {
    cut_str(&String::from_utf8_lossy(bytes), cap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::screen::{MAX_TITLE_BYTES, Screen};
    use proptest::prelude::*;

    fn scan(bytes: &[u8]) -> Vec<OutputEvent> {
        let mut screen = Screen::new(80, 24);
        let mut out = Vec::new();
        screen.feed(bytes, &mut out);
        out
    }

    fn title(t: &str) -> OutputEvent {
        OutputEvent::Title { title: t.into() }
    }

    /// The state of every mode after `events`, starting from power-on.
    fn fold_modes(events: &[OutputEvent]) -> Vec<(Mode, bool)> {
        let mut state: Vec<(Mode, bool)> = Mode::ALL.iter().map(|m| (*m, m.default_on())).collect();
        for event in events {
            if let OutputEvent::Mode { mode, on } = event {
                state.iter_mut().filter(|(m, _)| m == mode).for_each(|(_, s)| *s = *on);
            }
        }
        state
    }

    fn screen_modes(screen: &Screen) -> Vec<(Mode, bool)> {
        Mode::ALL.iter().map(|m| (*m, m.is_on(&screen.modes()))).collect()
    }

    #[test]
    fn titles_from_osc_0_1_2_with_bel_or_st() {
        assert_eq!(scan(b"\x1b]2;hello\x07"), vec![title("hello")]);
        assert_eq!(scan(b"\x1b]2;st end\x1b\\"), vec![title("st end")]);
        assert_eq!(scan(b"\x1b]0;both\x07"), vec![OutputEvent::IconName { name: "both".into() }, title("both")]);
        assert_eq!(scan(b"\x1b]1;icon\x07"), vec![OutputEvent::IconName { name: "icon".into() }]);
        assert_eq!(scan(b"\x1b]2;a;b;c\x07"), vec![title("a;b;c")]);
        assert_eq!(scan("\x1b]0;⠋ working\x07".as_bytes())[1], title("⠋ working"));
    }

    #[test]
    fn a_long_title_is_cut_on_a_character_boundary() {
        let long = "é".repeat(200); // 400 bytes
        let events = scan(format!("\x1b]2;{long}\x07").as_bytes());
        let OutputEvent::Title { title } = &events[0] else { panic!("{events:?}") };
        assert_eq!(title.len(), 256);
        assert!(title.chars().all(|c| c == 'é'));
    }

    #[test]
    fn an_overlong_osc_stays_bounded() {
        let mut screen = Screen::new(80, 24);
        let mut out = Vec::new();
        screen.feed(b"\x1b]2;", &mut out);
        for _ in 0..1000 {
            screen.feed(&[b'x'; 1000], &mut out);
        }
        screen.feed(b"\x07", &mut out);
        assert_eq!(out, vec![title(&"x".repeat(TITLE_CAP))]);
        assert!(screen.title().len() <= MAX_TITLE_BYTES);
    }

    #[test]
    fn bell_inside_and_outside_sequences() {
        assert_eq!(scan(b"ding\x07dong"), vec![OutputEvent::Bell]);
        // BEL terminates an OSC rather than ringing.
        assert_eq!(scan(b"\x1b]2;t\x07"), vec![title("t")]);
        // BEL inside a CSI is executed.
        assert_eq!(scan(b"\x1b[1\x07;2H"), vec![OutputEvent::Bell]);
    }

    #[test]
    fn notifications_osc_9_and_777() {
        assert_eq!(
            scan(b"\x1b]9;Build finished\x07"),
            vec![OutputEvent::Notification { title: None, body: "Build finished".into() }]
        );
        assert_eq!(
            scan(b"\x1b]777;notify;Claude;Needs your permission\x1b\\"),
            vec![OutputEvent::Notification { title: Some("Claude".into()), body: "Needs your permission".into() }]
        );
        // A `;` in the body is kept.
        assert_eq!(
            scan(b"\x1b]777;notify;T;a;b\x07"),
            vec![OutputEvent::Notification { title: Some("T".into()), body: "a;b".into() }]
        );
        // ConEmu progress shares OSC 9 but is not a notification.
        assert_eq!(scan(b"\x1b]9;4;1;50\x07"), vec![]);
    }

    #[test]
    fn program_state_reports_are_read() {
        assert_eq!(
            scan(b"\x1b]7501;state=blocked:app=codex:kind=permission\x1b\\"),
            vec![OutputEvent::StateReport { state: "blocked".into(), kind: Some("permission".into()) }]
        );
        assert_eq!(
            scan(b"\x1b]7501;state=working:app=codex\x07"),
            vec![OutputEvent::StateReport { state: "working".into(), kind: None }]
        );
        assert_eq!(scan(b"\x1b]7501;app=codex\x07"), vec![]);
    }

    #[test]
    fn modes_change_only_when_they_change() {
        let events = scan(b"\x1b[?2004h\x1b[?2004h\x1b[?1049;1h\x1b[?25l\x1b[?2004l");
        use Mode::*;
        let m = |mode, on| OutputEvent::Mode { mode, on };
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
                vec![OutputEvent::Mode { mode, on: true }, OutputEvent::Mode { mode, on: false }],
                "DECSET {}",
                String::from_utf8_lossy(number)
            );
        }
        // Cursor visibility starts on: only its reset is a change.
        assert_eq!(scan(b"\x1b[?25h\x1b[?25l"), vec![OutputEvent::Mode { mode: CursorVisible, on: false }]);
    }

    /// The scanner and the screen model used to track modes each on their own; for mouse
    /// tracking they disagreed: after `?1000h ?1002h ?1002l` the scanner still had 1000 on,
    /// while the model (xterm: one tracking mode, any reset turns tracking off) had it off.
    #[test]
    fn mouse_mode_events_agree_with_the_screen_model() {
        use Mode::*;
        let m = |mode, on| OutputEvent::Mode { mode, on };
        let mut screen = Screen::new(80, 24);
        let mut events = Vec::new();
        screen.feed(b"\x1b[?1000h\x1b[?1002h\x1b[?1002l", &mut events);
        assert_eq!(
            events,
            vec![m(MouseButtons, true), m(MouseButtons, false), m(MouseDrag, true), m(MouseDrag, false)]
        );
        assert_eq!(fold_modes(&events), screen_modes(&screen));
        // Resetting a mode that is not the active one still turns tracking off (xterm).
        events.clear();
        screen.feed(b"\x1b[?1003h\x1b[?1000l", &mut events);
        assert_eq!(events, vec![m(MouseMotion, true), m(MouseMotion, false)]);
        assert_eq!(screen.modes().mouse, crate::screen::MouseMode::None);
    }

    #[test]
    fn reset_returns_modes_to_their_defaults() {
        let mut screen = Screen::new(80, 24);
        let mut out = Vec::new();
        screen.feed(b"\x1b[?1000;1006h\x1b[?25l", &mut out);
        out.clear();
        screen.feed(b"\x1bc", &mut out);
        assert_eq!(out.len(), 3);
        assert!(!Mode::MouseButtons.is_on(&screen.modes()) && Mode::CursorVisible.is_on(&screen.modes()));
        // A soft reset (DECSTR) shows the cursor and resets cursor keys, and says so.
        out.clear();
        screen.feed(b"\x1b[?25l\x1b[?1h\x1b[!p", &mut out);
        let m = |mode, on| OutputEvent::Mode { mode, on };
        assert_eq!(
            out,
            vec![
                m(Mode::CursorVisible, false),
                m(Mode::AppCursorKeys, true),
                m(Mode::AppCursorKeys, false),
                m(Mode::CursorVisible, true)
            ]
        );
    }

    #[test]
    fn other_sequences_are_not_mistaken_for_modes() {
        // Not private, intermediates, other finals, huge numbers.
        assert_eq!(scan(b"\x1b[2004h\x1b[?2004$p\x1b[?2004r\x1b[?4294969300h"), vec![]);
        // CAN aborts an OSC.
        assert_eq!(scan(b"\x1b]2;aborted\x18text\x07"), vec![OutputEvent::Bell]);
        // DCS content is skipped, even if it looks like a title or holds a BEL. (An ESC inside a
        // DCS ends it, as in the DEC parser every terminal follows, so what follows an ESC is
        // not DCS content.)
        assert_eq!(scan(b"\x1bPq\x07]2;no\x07\x1b\\"), vec![]);
    }

    #[test]
    fn esc_inside_osc_that_is_not_st_abandons_it() {
        let mut screen = Screen::new(80, 24);
        let mut out = Vec::new();
        screen.feed(b"\x1b]2;lost\x1b[?2004h", &mut out);
        assert_eq!(out, vec![OutputEvent::Mode { mode: Mode::BracketedPaste, on: true }]);
        assert_eq!(screen.title(), "", "the model drops it too");
        // ST split across calls still confirms the title.
        screen.feed(b"\x1b]2;kept\x1b", &mut out);
        screen.feed(b"\\", &mut out);
        assert_eq!(out.last(), Some(&title("kept")));
        assert_eq!(screen.title(), "kept");
    }

    fn fragment() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            "[a-z ]{0,8}".prop_map(|s| s.into_bytes()),
            Just(b"\x1b]0;\xe2\xa0\x8b work\x07".to_vec()),
            Just("\x1b]2;✳ idle\x1b\\".as_bytes().to_vec()),
            Just(b"\x07".to_vec()),
            Just(b"\x1b]9;note\x07".to_vec()),
            Just(b"\x1b]777;notify;T;B\x07".to_vec()),
            Just(b"\x1b]7501;state=working:app=codex\x1b\\".to_vec()),
            Just(b"\x1b[?2004h".to_vec()),
            Just(b"\x1b[?2004l".to_vec()),
            Just(b"\x1b[?1049h".to_vec()),
            Just(b"\x1b[?1049l".to_vec()),
            Just(b"\x1b[?47h".to_vec()),
            Just(b"\x1b[?1047l".to_vec()),
            Just(b"\x1b[?1000;1006h".to_vec()),
            Just(b"\x1b[?1002h".to_vec()),
            Just(b"\x1b[?1003l".to_vec()),
            Just(b"\x1b[?1;25l".to_vec()),
            Just(b"\x1b[!p".to_vec()),
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
            let mut screen = Screen::new(80, 24);
            let mut out = Vec::new();
            let mut last = 0;
            for p in points.into_iter().chain(std::iter::once(stream.len())) {
                screen.feed(&stream[last..p], &mut out);
                last = p;
            }
            prop_assert_eq!(out, whole);
        }

        /// One mode tracker: the mode events always add up to the model's own modes, and the
        /// last title event is the model's title.
        #[test]
        fn events_agree_with_the_screen_model(parts in proptest::collection::vec(fragment(), 0..40)) {
            let mut screen = Screen::new(80, 24);
            let mut out = Vec::new();
            screen.feed(&parts.concat(), &mut out);
            prop_assert_eq!(fold_modes(&out), screen_modes(&screen));
            let last_title = out.iter().rev().find_map(|e| match e {
                OutputEvent::Title { title } => Some(title.clone()),
                _ => None,
            });
            if let Some(t) = last_title {
                prop_assert_eq!(t, cut_str(screen.title(), TITLE_CAP));
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic_and_stay_bounded(
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..512), 0..20)
        ) {
            let mut screen = Screen::new(80, 24);
            let mut out = Vec::new();
            for chunk in &chunks {
                screen.feed(chunk, &mut out);
            }
            for event in &out {
                match event {
                    OutputEvent::Title { title } => prop_assert!(title.len() <= TITLE_CAP),
                    OutputEvent::Notification { body, .. } => prop_assert!(body.len() <= NOTIFICATION_CAP),
                    _ => {}
                }
            }
        }
    }
}

/// The check the output events' fuzz target runs (`fuzz/fuzz_targets/output_events.rs`), kept
/// here so `cargo test` replays the committed corpus without the fuzzer. Byte 0 modulo 16 is
/// how many following bytes are read sizes; the rest is the stream, fed to a screen model.
/// Panics if the cut stream gives other events than the whole one, if the mode events do not
/// add up to the model's modes, or if a bound is broken. Returns the events found.
#[doc(hidden)]
pub fn fuzz_check(data: &[u8]) -> Vec<OutputEvent> {
    use crate::screen::Screen;
    let Some((&first, rest)) = data.split_first() else { return Vec::new() };
    let (sizes, stream) = rest.split_at(usize::from(first % 16).min(rest.len()));
    let mut whole = Vec::new();
    Screen::new(80, 24).feed(stream, &mut whole);
    let mut cut = Vec::new();
    let mut screen = Screen::new(80, 24);
    let mut offset = 0;
    for &size in sizes.iter().cycle() {
        if offset == stream.len() {
            break;
        }
        let end = if size == 0 { stream.len() } else { (offset + usize::from(size)).min(stream.len()) };
        screen.feed(&stream[offset..end], &mut cut);
        offset = end;
    }
    if sizes.is_empty() {
        screen.feed(stream, &mut cut);
    }
    assert_eq!(cut, whole, "cutting the stream changed the events");
    let modes = screen.modes();
    for mode in Mode::ALL {
        let last = whole.iter().rev().find_map(|e| match e {
            OutputEvent::Mode { mode: m, on } if *m == mode => Some(*on),
            _ => None,
        });
        assert_eq!(last.unwrap_or(mode.default_on()), mode.is_on(&modes), "{mode:?}: events and model disagree");
    }
    for event in &whole {
        match event {
            OutputEvent::Title { title } | OutputEvent::IconName { name: title } => assert!(title.len() <= TITLE_CAP),
            OutputEvent::Notification { body, title } => {
                assert!(body.len() <= NOTIFICATION_CAP);
                assert!(title.as_ref().is_none_or(|t| t.len() <= TITLE_CAP));
            }
            OutputEvent::Bell | OutputEvent::Mode { .. } => {}
            OutputEvent::StateReport { state, kind } => {
                assert!(state.len() <= TITLE_CAP && kind.as_ref().is_none_or(|k| k.len() <= TITLE_CAP));
            }
        }
    }
    whole
}

#[cfg(test)]
mod corpus {
    use super::{Mode, OutputEvent};
    use std::collections::BTreeSet;

    /// Files in the committed corpus (`fuzz/corpus/output_events`): a replay of fewer has lost
    /// some. Raise it when `make fuzz` finds new inputs worth committing.
    const CORPUS_FILES: usize = 209;

    /// Every file of the fuzz corpus passes the fuzz check (regressions stay fixed without the
    /// fuzzer), none is missing, and together they reach every kind of event, with every mode
    /// both set and reset, read whole and cut into pieces: a replay that checks nothing (a
    /// corpus of trivial inputs, a check that returns early) fails.
    #[test]
    fn the_fuzz_corpus_replays_clean_and_reaches_every_event() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/output_events");
        let (mut files, mut cut) = (0, 0);
        let mut kinds = std::collections::HashSet::new();
        let mut modes = BTreeSet::new();
        for entry in std::fs::read_dir(&dir).expect("fuzz/corpus/output_events exists") {
            let path = entry.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            let events = std::panic::catch_unwind(|| super::fuzz_check(&data))
                .unwrap_or_else(|_| panic!("{} fails the fuzz check", path.display()));
            files += 1;
            if data.first().is_some_and(|b| b % 16 > 0) && !events.is_empty() {
                cut += 1;
            }
            for event in events {
                kinds.insert(std::mem::discriminant(&event));
                if let OutputEvent::Mode { mode, on } = event {
                    modes.insert((mode as u8, on));
                }
            }
        }
        assert!(files >= CORPUS_FILES, "{files} corpus files; {CORPUS_FILES} are committed");
        assert!(cut > 0, "no input with events was cut into reads");
        let every = [
            OutputEvent::Title { title: String::new() },
            OutputEvent::IconName { name: String::new() },
            OutputEvent::Bell,
            OutputEvent::Notification { title: None, body: String::new() },
            OutputEvent::Mode { mode: Mode::BracketedPaste, on: true },
            OutputEvent::StateReport { state: String::new(), kind: None },
        ];
        let mut missing: Vec<String> =
            every.iter().filter(|e| !kinds.contains(&std::mem::discriminant(*e))).map(|e| format!("{e:?}")).collect();
        for mode in Mode::ALL {
            for on in [true, false] {
                if !modes.contains(&(mode as u8, on)) {
                    missing.push(format!("{mode:?} turned {}", if on { "on" } else { "off" }));
                }
            }
        }
        assert!(missing.is_empty(), "no input of the corpus gives: {missing:?}");
    }
}
