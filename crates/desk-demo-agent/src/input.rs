//! Terminal input decoder: raw bytes from the agent's stdin to keys.
//!
//! Owns the translation of what a terminal (or desk, writing into the PTY) sends — typed
//! characters, control keys, CSI/SS3 key sequences, bracketed pastes (`ESC[200~ … ESC[201~`) and
//! cursor position reports (`ESC[row;colR`) — into [`Key`]s. Invariants:
//! - It works one byte at a time and keeps all partial state (a half UTF-8 character, a half
//!   escape sequence, an open paste) between calls, so any split of a byte stream into reads
//!   yields exactly the same keys as the unsplit stream (pinned by a property test).
//! - It never reads a clock. A lone `ESC` is ambiguous (the Esc key, or the start of a sequence
//!   whose next byte is still in flight); it stays pending until the next byte or until the caller
//!   decides enough time has passed and calls [`InputDecoder::flush`].
//! - Everything it buffers is bounded: a paste keeps at most [`MAX_PASTE_BYTES`] (the rest is
//!   dropped, but the end marker is still found), an escape sequence at most [`MAX_CSI_BYTES`].
//! - Inside a paste nothing is interpreted except the end marker: an Enter pasted is text, never
//!   a submit. Pasted line ends (`\r`, `\r\n`, `\n`; terminals send `\r`) become `\n`.

/// 8 MiB: desk sends one prompt per paste and its prompts are a few KiB; a paste this large is
/// a runaway writer, and the agent must not grow without bound because of it.
pub const MAX_PASTE_BYTES: usize = 8 << 20;

/// 64 bytes: the longest legitimate sequence a terminal sends here (a modified key or a cursor
/// report such as `ESC[65535;65535R`) is under 20 bytes; longer is noise and is skipped.
pub const MAX_CSI_BYTES: usize = 64;

const PASTE_START: &[u8] = b"200";
const PASTE_END: &[u8] = b"\x1b[201~";

/// One decoded input event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// A printable character (including a typed tab).
    Char(char),
    /// Carriage return: the Enter key.
    Enter,
    /// Line feed (Ctrl-J) or Alt-Enter: insert a newline without submitting.
    Newline,
    Backspace,
    /// Ctrl-C.
    Interrupt,
    /// Ctrl-D.
    EndOfInput,
    /// Ctrl-U.
    KillLine,
    Esc,
    Up,
    Down,
    Left,
    Right,
    /// The full text of one bracketed paste, line ends normalised to `\n`.
    Paste(String),
    /// A reply to `ESC[6n`: 1-based row and column.
    CursorReport {
        row: u16,
        col: u16,
    },
    /// Anything recognised as one key or sequence but meaningless to the agent (function keys,
    /// focus events, other control characters, Alt+letter). Kept as an event so callers can
    /// count it; it carries no data.
    Ignored,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Ground,
    /// Inside a UTF-8 character: the bytes so far and how many the character needs.
    Utf8 {
        buf: [u8; 4],
        have: u8,
        need: u8,
    },
    /// After `ESC`.
    Escape,
    /// After `ESC [`: parameter and intermediate bytes so far.
    Csi {
        bytes: Vec<u8>,
        overflowed: bool,
    },
    /// After `ESC O`.
    Ss3,
    /// Inside a bracketed paste. `matched` counts how many bytes of the end marker were seen
    /// (held back, not yet part of the text).
    Paste {
        text: Vec<u8>,
        matched: usize,
    },
}

/// Incremental decoder; see the module documentation.
#[derive(Debug, Clone)]
pub struct InputDecoder {
    state: State,
}

impl Default for InputDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl InputDecoder {
    pub fn new() -> Self {
        Self { state: State::Ground }
    }

    /// Decode `bytes`, appending complete keys to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<Key>) {
        for &b in bytes {
            self.byte(b, out);
        }
    }

    /// Convenience for tests and callers that want a fresh vector.
    pub fn decode(&mut self, bytes: &[u8]) -> Vec<Key> {
        let mut out = Vec::new();
        self.feed(bytes, &mut out);
        out
    }

    /// True while a lone `ESC` waits for its next byte; the caller flushes it after a short quiet
    /// period so a real Esc key press is not held forever.
    pub fn escape_pending(&self) -> bool {
        self.state == State::Escape
    }

    /// True while a bracketed paste is open (its end marker not yet seen).
    pub fn in_paste(&self) -> bool {
        matches!(self.state, State::Paste { .. })
    }

    /// Resolve ambiguous partial input as if no more bytes will follow: a pending `ESC` is the
    /// Esc key, a half UTF-8 character is U+FFFD, a half escape sequence is ignored. An open
    /// paste is left open (pastes may legitimately arrive slowly).
    pub fn flush(&mut self, out: &mut Vec<Key>) {
        match std::mem::replace(&mut self.state, State::Ground) {
            State::Escape => out.push(Key::Esc),
            State::Utf8 { .. } => out.push(Key::Char(char::REPLACEMENT_CHARACTER)),
            State::Csi { .. } | State::Ss3 => out.push(Key::Ignored),
            paste @ State::Paste { .. } => self.state = paste,
            State::Ground => {}
        }
    }

    fn byte(&mut self, b: u8, out: &mut Vec<Key>) {
        match &mut self.state {
            State::Ground => self.ground(b, out),
            State::Utf8 { buf, have, need } => {
                if b & 0xC0 == 0x80 {
                    buf[usize::from(*have)] = b;
                    *have += 1;
                    if have == need {
                        let c = std::str::from_utf8(&buf[..usize::from(*need)])
                            .ok()
                            .and_then(|s| s.chars().next())
                            .unwrap_or(char::REPLACEMENT_CHARACTER);
                        self.state = State::Ground;
                        out.push(Key::Char(c));
                    }
                } else {
                    // Truncated character: report it and decode this byte afresh.
                    self.state = State::Ground;
                    out.push(Key::Char(char::REPLACEMENT_CHARACTER));
                    self.ground(b, out);
                }
            }
            State::Escape => {
                self.state = State::Ground;
                match b {
                    b'[' => self.state = State::Csi { bytes: Vec::new(), overflowed: false },
                    b'O' => self.state = State::Ss3,
                    0x1b => {
                        // ESC ESC: the first was the Esc key; the second may start a sequence.
                        out.push(Key::Esc);
                        self.state = State::Escape;
                    }
                    b'\r' | b'\n' => out.push(Key::Newline),
                    0x7f | 0x08 => out.push(Key::Ignored),
                    // Alt + a non-ASCII key: type the character, as most agents do.
                    0x80.. => self.ground(b, out),
                    // Alt + an ASCII key: no meaning here.
                    _ => out.push(Key::Ignored),
                }
            }
            State::Ss3 => {
                self.state = State::Ground;
                out.push(match b {
                    b'A' => Key::Up,
                    b'B' => Key::Down,
                    b'C' => Key::Right,
                    b'D' => Key::Left,
                    _ => Key::Ignored,
                });
            }
            State::Csi { bytes, overflowed } => match b {
                0x20..=0x3f => {
                    if bytes.len() < MAX_CSI_BYTES {
                        bytes.push(b);
                    } else {
                        *overflowed = true;
                    }
                }
                0x40..=0x7e => {
                    let (bytes, overflowed) = (std::mem::take(bytes), *overflowed);
                    self.state = State::Ground;
                    if overflowed {
                        out.push(Key::Ignored);
                    } else {
                        self.csi(&bytes, b, out);
                    }
                }
                _ => {
                    // A control byte cannot be inside a sequence: abandon it, decode the byte.
                    self.state = State::Ground;
                    out.push(Key::Ignored);
                    self.ground(b, out);
                }
            },
            State::Paste { text, matched } => {
                if b == PASTE_END[*matched] {
                    *matched += 1;
                    if *matched == PASTE_END.len() {
                        let text = std::mem::take(text);
                        self.state = State::Ground;
                        out.push(Key::Paste(normalize_paste(&text)));
                    }
                } else {
                    // The held-back bytes were text after all.
                    let held = *matched;
                    push_bounded(text, &PASTE_END[..held]);
                    *matched = 0;
                    if b == PASTE_END[0] {
                        *matched = 1;
                    } else {
                        push_bounded(text, &[b]);
                    }
                }
            }
        }
    }

    fn ground(&mut self, b: u8, out: &mut Vec<Key>) {
        match b {
            b'\r' => out.push(Key::Enter),
            b'\n' => out.push(Key::Newline),
            b'\t' => out.push(Key::Char('\t')),
            0x7f | 0x08 => out.push(Key::Backspace),
            0x03 => out.push(Key::Interrupt),
            0x04 => out.push(Key::EndOfInput),
            0x15 => out.push(Key::KillLine),
            0x1b => self.state = State::Escape,
            0x00..=0x1f => out.push(Key::Ignored),
            0x20..=0x7e => out.push(Key::Char(char::from(b))),
            0xC2..=0xDF => self.start_utf8(b, 2),
            0xE0..=0xEF => self.start_utf8(b, 3),
            0xF0..=0xF4 => self.start_utf8(b, 4),
            // Stray continuation bytes and bytes that can never start UTF-8.
            _ => out.push(Key::Char(char::REPLACEMENT_CHARACTER)),
        }
    }

    fn start_utf8(&mut self, b: u8, need: u8) {
        let mut buf = [0; 4];
        buf[0] = b;
        self.state = State::Utf8 { buf, have: 1, need };
    }

    fn csi(&mut self, params: &[u8], fin: u8, out: &mut Vec<Key>) {
        match fin {
            b'~' if params == PASTE_START => self.state = State::Paste { text: Vec::new(), matched: 0 },
            b'R' => out.push(parse_cursor_report(params).unwrap_or(Key::Ignored)),
            b'A' => out.push(Key::Up),
            b'B' => out.push(Key::Down),
            b'C' => out.push(Key::Right),
            b'D' => out.push(Key::Left),
            _ => out.push(Key::Ignored),
        }
    }
}

fn push_bounded(text: &mut Vec<u8>, bytes: &[u8]) {
    let room = MAX_PASTE_BYTES.saturating_sub(text.len());
    text.extend_from_slice(&bytes[..bytes.len().min(room)]);
}

fn parse_cursor_report(params: &[u8]) -> Option<Key> {
    let s = std::str::from_utf8(params).ok()?;
    let (row, col) = s.split_once(';')?;
    Some(Key::CursorReport { row: row.parse().ok()?, col: col.parse().ok()? })
}

fn normalize_paste(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    text.replace("\r\n", "\n").replace('\r', "\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_all(bytes: &[u8]) -> Vec<Key> {
        let mut d = InputDecoder::new();
        let mut out = d.decode(bytes);
        d.flush(&mut out);
        out
    }

    #[test]
    fn typed_text_and_control_keys() {
        assert_eq!(
            decode_all(b"hi\x7f\r\x15\x04\x03\n"),
            vec![
                Key::Char('h'),
                Key::Char('i'),
                Key::Backspace,
                Key::Enter,
                Key::KillLine,
                Key::EndOfInput,
                Key::Interrupt,
                Key::Newline
            ]
        );
    }

    #[test]
    fn bracketed_paste_is_one_key_and_its_enters_are_text() {
        assert_eq!(decode_all(b"\x1b[200~a\rb\r\nc\x1b[201~\r"), vec![Key::Paste("a\nb\nc".into()), Key::Enter]);
    }

    #[test]
    fn escape_inside_a_paste_that_is_not_the_end_marker_is_text() {
        assert_eq!(decode_all(b"\x1b[200~x\x1b[201y\x1b\x1b[201~"), vec![Key::Paste("x\x1b[201y\x1b".into())]);
    }

    #[test]
    fn cursor_report_and_arrows() {
        assert_eq!(
            decode_all(b"\x1b[12;40R\x1b[A\x1bOB\x1b[1;5C"),
            vec![Key::CursorReport { row: 12, col: 40 }, Key::Up, Key::Down, Key::Right]
        );
    }

    #[test]
    fn lone_escape_waits_for_flush() {
        let mut d = InputDecoder::new();
        assert_eq!(d.decode(b"\x1b"), vec![]);
        assert!(d.escape_pending());
        let mut out = Vec::new();
        d.flush(&mut out);
        assert_eq!(out, vec![Key::Esc]);
    }

    #[test]
    fn utf8_across_reads() {
        let mut d = InputDecoder::new();
        let bytes = "é✳".as_bytes();
        let mut out = d.decode(&bytes[..1]);
        out.extend(d.decode(&bytes[1..3]));
        out.extend(d.decode(&bytes[3..]));
        assert_eq!(out, vec![Key::Char('é'), Key::Char('✳')]);
    }

    #[test]
    fn invalid_utf8_becomes_replacement_characters() {
        assert_eq!(
            decode_all(b"\xe2\x9c a\xff"),
            vec![
                Key::Char(char::REPLACEMENT_CHARACTER),
                Key::Char(' '),
                Key::Char('a'),
                Key::Char(char::REPLACEMENT_CHARACTER)
            ]
        );
    }

    #[test]
    fn overlong_sequences_are_skipped_whole() {
        let mut bytes = b"\x1b[".to_vec();
        bytes.extend(std::iter::repeat_n(b'1', 500));
        bytes.extend(b"Zx");
        assert_eq!(decode_all(&bytes), vec![Key::Ignored, Key::Char('x')]);
    }

    #[test]
    fn oversized_paste_is_truncated_but_closed() {
        let mut bytes = b"\x1b[200~".to_vec();
        bytes.extend(std::iter::repeat_n(b'a', MAX_PASTE_BYTES + 10));
        bytes.extend(b"\x1b[201~z");
        let keys = decode_all(&bytes);
        assert_eq!(keys.len(), 2);
        match &keys[0] {
            Key::Paste(t) => assert_eq!(t.len(), MAX_PASTE_BYTES),
            other => panic!("expected a paste, got {other:?}"),
        }
        assert_eq!(keys[1], Key::Char('z'));
    }

    /// Bytes biased toward the interesting ones: escape sequence pieces, markers, UTF-8.
    fn interesting_bytes() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            Just(b"\x1b[200~".to_vec()),
            Just(b"\x1b[201~".to_vec()),
            Just(b"\x1b[3;7R".to_vec()),
            Just(b"\x1b".to_vec()),
            Just(b"\x1b[".to_vec()),
            Just(b"\x1bO".to_vec()),
            Just(b"\r".to_vec()),
            Just(b"\r\n".to_vec()),
            Just("✳é漢".as_bytes().to_vec()),
            proptest::collection::vec(any::<u8>(), 0..4),
            "[a-z0-9 ;~\\[]{0,6}".prop_map(|s| s.into_bytes()),
        ];
        proptest::collection::vec(piece, 0..24).prop_map(|v| v.concat())
    }

    proptest! {
        #[test]
        fn any_split_of_a_stream_decodes_to_the_same_keys(
            bytes in interesting_bytes(),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let whole = decode_all(&bytes);
            let mut points: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut d = InputDecoder::new();
            let mut split = Vec::new();
            let mut start = 0;
            for p in points.into_iter().chain(std::iter::once(bytes.len())) {
                d.feed(&bytes[start..p], &mut split);
                start = p;
            }
            d.flush(&mut split);
            prop_assert_eq!(whole, split);
        }
    }
}
