//! Property tests of the codec: arbitrary valid frames survive encode and decode unchanged and
//! however the stream is cut; arbitrary bytes never panic the decoder or grow its buffer past
//! one frame plus one push; an oversized header fails before any of its payload arrives.

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::sample::Index;

use super::*;
use desk_term::screen::{Cursor, Modes, MouseEncoding, MouseMode, Snapshot};

fn text() -> impl Strategy<Value = String> {
    ".{0,12}"
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..48)
}

fn role() -> impl Strategy<Value = Role> {
    prop_oneof![Just(Role::Controller), Just(Role::Viewer), Just(Role::Observer), Just(Role::Query)]
}

fn error_code() -> impl Strategy<Value = ErrorCode> {
    (1u16..=16).prop_filter_map("a known code", ErrorCode::from_u16)
}

fn valid_size() -> impl Strategy<Value = (u16, u16)> {
    (1u16..=desk_term::screen::MAX_COLS).prop_flat_map(|cols| {
        let most = (desk_term::screen::MAX_CELLS / u32::from(cols)).min(u32::from(desk_term::screen::MAX_ROWS)) as u16;
        (Just(cols), 1..=most)
    })
}

fn session_info() -> impl Strategy<Value = SessionInfo> {
    (
        (text(), any::<u32>(), any::<u32>(), vec(text(), 0..4), text()),
        (any::<u16>(), any::<u16>(), any::<u32>(), any::<u32>(), any::<u32>(), text(), any::<u64>()),
    )
        .prop_map(
            |((name, pid, master_pid, command, cwd), (cols, rows, controllers, viewers, observers, title, started))| {
                SessionInfo {
                    name,
                    generation: pid.rotate_left(7),
                    provider: "shell".into(),
                    state: None,
                    pid,
                    master_pid,
                    command,
                    cwd,
                    cols,
                    rows,
                    controllers,
                    viewers,
                    observers,
                    title,
                    started_at_ms: started,
                }
            },
        )
}

fn modes() -> impl Strategy<Value = Modes> {
    let mouse = prop_oneof![
        Just(MouseMode::None),
        Just(MouseMode::Press),
        Just(MouseMode::PressRelease),
        Just(MouseMode::ButtonMotion),
        Just(MouseMode::AnyMotion),
    ];
    let encoding = prop_oneof![
        Just(MouseEncoding::Default),
        Just(MouseEncoding::Utf8),
        Just(MouseEncoding::Sgr),
        Just(MouseEncoding::Urxvt)
    ];
    (any::<[bool; 9]>(), mouse, encoding).prop_map(|(b, mouse, mouse_encoding)| Modes {
        alternate_screen: b[0],
        bracketed_paste: b[1],
        app_cursor_keys: b[2],
        app_keypad: b[3],
        cursor_visible: b[4],
        autowrap: b[5],
        origin: b[6],
        insert: b[7],
        mouse,
        mouse_encoding,
        focus_events: b[8],
    })
}

/// History rows: plain ones, and ones with runs in indexed and direct colours.
fn history() -> impl Strategy<Value = Option<Vec<desk_term::screen::HistoryRow>>> {
    use desk_term::screen::{HistoryRow, JsonColor, StyleRun};
    let run =
        (text(), any::<Option<u8>>(), any::<Option<(u8, u8, u8)>>(), any::<u16>()).prop_map(|(text, fg, bg, flags)| {
            StyleRun {
                text,
                fg: fg.map(JsonColor::Indexed),
                bg: bg.map(|(r, g, b)| JsonColor::Rgb(format!("#{r:02x}{g:02x}{b:02x}"))),
                flags,
            }
        });
    let row = (text(), any::<bool>(), proptest::collection::vec(run, 0..3))
        .prop_map(|(text, wrapped, runs)| HistoryRow { text, wrapped, runs });
    proptest::option::of(proptest::collection::vec(row, 0..4))
}

/// A SNAPSHOT's `history_start`, `history_first` and `history_end`.
fn numbers() -> impl Strategy<Value = (Option<u64>, Option<u64>, Option<u64>)> {
    (any::<Option<u64>>(), any::<Option<u64>>(), any::<Option<u64>>())
}

fn snapshot() -> impl Strategy<Value = Snapshot> {
    (any::<u16>(), any::<u16>(), any::<(u16, u16, bool)>(), text(), modes(), vec(text(), 0..6)).prop_map(
        |(cols, rows, (row, col, visible), title, modes, lines)| Snapshot {
            cols,
            rows,
            cursor: Cursor { row, col, visible },
            title,
            modes,
            lines,
        },
    )
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f).map(Value::Number)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Value::Array),
            btree_map(text(), inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A SNAPSHOT's `foreground`, or none.
fn foreground() -> impl Strategy<Value = Option<crate::Foreground>> {
    proptest::option::of(
        (any::<u32>(), text(), any::<bool>(), proptest::option::of(any::<bool>()))
            .prop_map(|(pgid, program, own, reading)| crate::Foreground { pgid, program, own, reading }),
    )
}

/// Every frame `decode` can produce, and nothing it refuses.
pub(super) fn frame() -> impl Strategy<Value = Frame> {
    prop_oneof![
        (any::<u16>(), role(), any::<u16>(), any::<u16>(), any::<bool>(), any::<bool>()).prop_map(
            |(version, role, cols, rows, status_line, view)| Frame::Hello {
                version,
                role,
                cols,
                rows,
                status_line,
                view
            }
        ),
        (any::<u16>(), session_info()).prop_map(|(version, info)| Frame::Welcome { version, info: Box::new(info) }),
        bytes().prop_map(Frame::Input),
        valid_size().prop_map(|(cols, rows)| Frame::Resize { cols, rows }),
        bytes().prop_map(Frame::Output),
        (any::<bool>(), bytes()).prop_map(|(more, data)| Frame::Keyframe { more, data }),
        proptest::option::of(prop_oneof![
            any::<u32>().prop_map(crate::HistoryRequest::Newest),
            (any::<u32>(), any::<u64>()).prop_map(|(lines, from)| crate::HistoryRequest::Page { lines, from }),
        ])
        .prop_map(|history| Frame::SnapshotRequest { history }),
        (
            snapshot(),
            any::<u32>(),
            proptest::option::of(any::<u64>()),
            any::<bool>(),
            history(),
            numbers(),
            foreground()
        )
            .prop_map(
                |(
                    screen,
                    generation,
                    last_input_ms,
                    canonical,
                    history,
                    (history_start, history_first, history_end),
                    foreground,
                )| {
                    Frame::Snapshot(Box::new(crate::SnapshotReply {
                        screen,
                        generation,
                        last_input_ms,
                        canonical,
                        state: None,
                        history,
                        history_start,
                        history_first,
                        history_end,
                        foreground,
                    }))
                }
            ),
        btree_map(text(), json_value(), 0..6).prop_map(|m| Frame::Hook(m.into_iter().collect())),
        btree_map(text(), json_value(), 0..6).prop_map(|m| Frame::Event(m.into_iter().collect())),
        Just(Frame::Detach),
        (prop_oneof![any::<i32>().prop_map(ExitStatus::Code), (1..=64i32).prop_map(ExitStatus::Signal)], any::<bool>())
            .prop_map(|(status, escalated)| Frame::Exit { status, escalated }),
        // Up to 4 bytes a character: long messages exercise the cut at MAX_ERROR_MESSAGE.
        (error_code(), ".{0,300}").prop_map(|(code, message)| Frame::error(code, message)),
        any::<u64>().prop_map(Frame::Ping),
        any::<u64>().prop_map(Frame::Pong),
        (1..=64u8, any::<u32>()).prop_map(|(signal, grace_ms)| Frame::Signal { signal, grace_ms }),
        prop_oneof![
            vec(any::<u8>(), 0..=8).prop_map(|keys| crate::TerminalOp::Take { keys }),
            Just(crate::TerminalOp::Taken),
            Just(crate::TerminalOp::Ready),
            vec(any::<u8>(), 0..64).prop_map(crate::TerminalOp::Give),
            vec(any::<u8>(), 0..64).prop_map(crate::TerminalOp::Paint),
            Just(crate::TerminalOp::Redrawn),
        ]
        .prop_map(Frame::Terminal),
    ]
}

/// Feed `chunks` one push at a time, draining after each; return the frames and the error that
/// ended the stream, if any. Checks the buffer bound after every push.
fn feed<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> (Vec<Frame>, Option<DecodeError>) {
    let mut decoder = FrameDecoder::new();
    let mut frames = Vec::new();
    for chunk in chunks {
        decoder.push(chunk);
        assert!(
            decoder.held() <= HEADER_LEN + MAX_PAYLOAD + chunk.len(),
            "decoder holds {} bytes after a {}-byte push",
            decoder.held(),
            chunk.len()
        );
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => break,
                Err(e) => return (frames, Some(e)),
            }
        }
        assert!(decoder.held() < HEADER_LEN + MAX_PAYLOAD, "drained decoder holds {} bytes", decoder.held());
    }
    (frames, None)
}

/// Cut `bytes` at the given positions (in any order, repeats allowed).
fn cut<'a>(bytes: &'a [u8], at: &[Index]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = at.iter().map(|i| i.index(bytes.len() + 1)).collect();
    points.push(0);
    points.push(bytes.len());
    points.sort_unstable();
    points.windows(2).map(|w| &bytes[w[0]..w[1]]).collect()
}

/// A byte stream that is mostly frames: valid frames with some bytes overwritten, cut short,
/// or plain noise.
fn stream() -> impl Strategy<Value = Vec<u8>> {
    let mutated = (vec(frame(), 0..6), vec((any::<Index>(), any::<u8>()), 0..4), any::<Option<Index>>()).prop_map(
        |(frames, edits, truncate)| {
            let mut bytes = Vec::new();
            for frame in &frames {
                frame.encode(&mut bytes);
            }
            if !bytes.is_empty() {
                for (at, value) in edits {
                    let i = at.index(bytes.len());
                    bytes[i] = value;
                }
            }
            if let Some(at) = truncate {
                bytes.truncate(at.index(bytes.len() + 1));
            }
            bytes
        },
    );
    prop_oneof![vec(any::<u8>(), 0..512), mutated]
}

proptest! {
    #[test]
    fn every_frame_survives_encode_then_decode(frame in frame()) {
        let bytes = frame.to_bytes();
        let (frames, error) = feed([bytes.as_slice()]);
        prop_assert_eq!(error, None);
        prop_assert_eq!(&frames, &vec![frame]);
        prop_assert_eq!(frames[0].to_bytes(), bytes);
    }

    #[test]
    fn frames_survive_any_cutting_of_the_stream(
        frames in vec(frame(), 1..8),
        at in vec(any::<Index>(), 0..12),
    ) {
        let mut bytes = Vec::new();
        for frame in &frames {
            frame.encode(&mut bytes);
        }
        let (decoded, error) = feed(cut(&bytes, &at));
        prop_assert_eq!(error, None);
        prop_assert_eq!(decoded, frames);
    }

    #[test]
    fn arbitrary_bytes_give_the_same_result_however_they_are_cut(
        bytes in stream(),
        at in vec(any::<Index>(), 0..12),
    ) {
        let whole = feed([bytes.as_slice()]);
        let pieces = feed(cut(&bytes, &at));
        prop_assert_eq!(&pieces, &whole);
        if let Some(error) = whole.1 {
            // Every failure is answered with an ERROR frame that carries its code and message.
            crate::fuzz::check_error_frame(&error);
        }
    }

    #[test]
    fn an_oversized_header_fails_before_its_payload(
        prefix in vec(frame(), 0..4),
        kind in 1u8..=0x0f,
        len in (MAX_PAYLOAD as u32 + 1)..=u32::MAX,
        flags in any::<u8>(),
        reserved in any::<u16>(),
    ) {
        let mut bytes = Vec::new();
        for frame in &prefix {
            frame.encode(&mut bytes);
        }
        let header_at = bytes.len();
        bytes.extend_from_slice(&len.to_le_bytes());
        bytes.push(kind);
        bytes.push(flags);
        bytes.extend_from_slice(&reserved.to_le_bytes());
        // One byte at a time: the error must come with the header's last byte, not later.
        let mut decoder = FrameDecoder::new();
        let mut decoded = Vec::new();
        for (i, byte) in bytes.iter().enumerate() {
            decoder.push(std::slice::from_ref(byte));
            loop {
                match decoder.next_frame() {
                    Ok(Some(frame)) => decoded.push(frame),
                    Ok(None) => {
                        prop_assert!(i + 1 < bytes.len(), "the full header was accepted");
                        break;
                    }
                    Err(e) => {
                        prop_assert_eq!(i + 1, bytes.len(), "failed before the header was complete");
                        prop_assert_eq!(e.code(), ErrorCode::TooLarge);
                        prop_assert_eq!(decoder.buffered(), bytes.len() - header_at);
                        prop_assert_eq!(&decoded, &prefix);
                        return Ok(());
                    }
                }
            }
        }
        prop_assert!(false, "the oversized header was never refused");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Large declared lengths, fed in reads of up to 64 KiB: the buffer never holds more than the
    /// largest frame plus the read that completed it.
    #[test]
    fn a_large_frame_is_buffered_within_the_bound(
        len in (MAX_PAYLOAD - 4096)..=MAX_PAYLOAD,
        extra in 0usize..70_000,
        reads in vec(1usize..=65_536, 1..64),
    ) {
        let mut bytes = Frame::Output(vec![0x41; len]).to_bytes();
        bytes.extend(std::iter::repeat_n(0u8, extra));
        let mut chunks = Vec::new();
        let mut offset = 0;
        for read in reads.iter().cycle() {
            if offset == bytes.len() {
                break;
            }
            let end = (offset + read).min(bytes.len());
            chunks.push(&bytes[offset..end]);
            offset = end;
        }
        let (frames, _) = feed(chunks);
        prop_assert_eq!(frames.len(), 1);
    }
}
