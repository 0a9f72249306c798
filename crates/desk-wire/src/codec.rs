//! Encoding and decoding of frames.
//!
//! Owns the translation between [`Frame`] values and bytes, plus [`FrameDecoder`], which cuts a
//! byte stream into frames. Invariants: the header is validated before the payload is buffered
//! (a too-large declaration fails with only 8 bytes read); fixed-size payloads must have exactly
//! their size; JSON payloads must be one UTF-8 object; nothing here panics on any input.

use super::frame::{DecodeError, ErrorCode, ExitStatus, Frame, FrameType, Header, HistoryRequest, Role, TerminalOp};
use super::{FLAG_MORE, HEADER_LEN, HELLO_STATUS_LINE, HELLO_VIEW, MAGIC, MAX_ERROR_MESSAGE, MAX_PAYLOAD};

/// Parse and validate an 8-byte header.
pub fn decode_header(bytes: &[u8; HEADER_LEN]) -> Result<Header, DecodeError> {
    let len = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let kind = FrameType::from_u8(bytes[4]).ok_or(DecodeError::UnknownType(bytes[4]))?;
    let flags = bytes[5];
    let reserved = u16::from_le_bytes([bytes[6], bytes[7]]);
    if len as usize > MAX_PAYLOAD {
        return Err(DecodeError::TooLarge { len, limit: MAX_PAYLOAD });
    }
    let allowed = if kind == FrameType::Keyframe { FLAG_MORE } else { 0 };
    if flags & !allowed != 0 || reserved != 0 {
        return Err(DecodeError::Reserved { kind, flags, reserved });
    }
    Ok(Header { len, kind, flags })
}

fn malformed(kind: FrameType, reason: impl Into<String>) -> DecodeError {
    DecodeError::Malformed { kind, reason: reason.into() }
}

fn exact(kind: FrameType, payload: &[u8], len: usize) -> Result<(), DecodeError> {
    if payload.len() == len {
        Ok(())
    } else {
        Err(malformed(kind, format!("payload is {} bytes, expected {len}", payload.len())))
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from(u32_at(b, at)) | u64::from(u32_at(b, at + 4)) << 32
}

fn json<T: serde::de::DeserializeOwned>(kind: FrameType, b: &[u8]) -> Result<T, DecodeError> {
    // serde would also read a struct from a JSON array of its fields; the protocol says object,
    // so a peer cannot come to depend on field order.
    let first = b.iter().find(|c| !matches!(c, b' ' | b'\t' | b'\n' | b'\r'));
    if first != Some(&b'{') {
        return Err(malformed(kind, "body is not a JSON object"));
    }
    serde_json::from_slice(b).map_err(|e| malformed(kind, format!("invalid JSON body: {e}")))
}

/// Decode a payload whose header has already been validated by [`decode_header`].
pub fn decode_frame(header: &Header, payload: &[u8]) -> Result<Frame, DecodeError> {
    let kind = header.kind;
    if payload.len() != header.len as usize {
        return Err(malformed(kind, "payload length differs from the header"));
    }
    Ok(match kind {
        FrameType::Welcome => {
            if payload.len() < 4 {
                return Err(malformed(kind, "shorter than its 4-byte prefix"));
            }
            if u16_at(payload, 2) != 0 {
                return Err(malformed(kind, "reserved field is not zero"));
            }
            Frame::Welcome { version: u16_at(payload, 0), info: Box::new(json(kind, &payload[4..])?) }
        }
        FrameType::Snapshot => Frame::Snapshot(Box::new(json(kind, payload)?)),
        _ => return decode_client_frame(header, payload),
    })
}

/// [`decode_frame`] for a master reading a client: WELCOME and SNAPSHOT, which only a master
/// sends, are refused as malformed without their JSON bodies being read (docs/protocol.md §4
/// closes a client that sends one, with the same code), so a master carries no decoder for
/// those bodies: 24 KB of code that every idle master would keep resident.
fn decode_client_frame(header: &Header, payload: &[u8]) -> Result<Frame, DecodeError> {
    let kind = header.kind;
    if payload.len() != header.len as usize {
        return Err(malformed(kind, "payload length differs from the header"));
    }
    Ok(match kind {
        FrameType::Welcome | FrameType::Snapshot => {
            return Err(malformed(kind, format!("{} frames are sent by the master, not by clients", kind.name())));
        }
        FrameType::Hello => {
            exact(kind, payload, 12)?;
            if payload[0..4] != MAGIC {
                return Err(malformed(kind, "bad magic (not a desk client)"));
            }
            let version = u16_at(payload, 4);
            let role =
                Role::from_u8(payload[6]).ok_or_else(|| malformed(kind, format!("unknown role {}", payload[6])))?;
            if payload[7] & !(HELLO_STATUS_LINE | HELLO_VIEW) != 0 {
                return Err(malformed(kind, format!("reserved option bits are set ({:#04x})", payload[7])));
            }
            let status_line = payload[7] & HELLO_STATUS_LINE != 0;
            let view = payload[7] & HELLO_VIEW != 0;
            Frame::Hello { version, role, cols: u16_at(payload, 8), rows: u16_at(payload, 10), status_line, view }
        }
        FrameType::Input => Frame::Input(payload.to_vec()),
        FrameType::Resize => {
            exact(kind, payload, 4)?;
            let (cols, rows) = (u16_at(payload, 0), u16_at(payload, 2));
            if !desk_term::screen::valid_size(cols, rows) {
                return Err(malformed(kind, format!("size {cols}x{rows} is out of range")));
            }
            Frame::Resize { cols, rows }
        }
        FrameType::Output => Frame::Output(payload.to_vec()),
        FrameType::Keyframe => Frame::Keyframe { more: header.flags & FLAG_MORE != 0, data: payload.to_vec() },
        FrameType::SnapshotRequest => match payload.len() {
            0 => Frame::SnapshotRequest { history: None },
            4 => Frame::SnapshotRequest { history: Some(HistoryRequest::Newest(u32_at(payload, 0))) },
            12 => Frame::SnapshotRequest {
                history: Some(HistoryRequest::Page { lines: u32_at(payload, 0), from: u64_at(payload, 4) }),
            },
            n => return Err(malformed(kind, format!("payload is {n} bytes, expected 0, 4 or 12"))),
        },
        FrameType::Event => Frame::Event(json(kind, payload)?),
        FrameType::Hook => Frame::Hook(json(kind, payload)?),
        FrameType::Terminal => Frame::Terminal(terminal_op(payload)?),
        FrameType::Detach => {
            exact(kind, payload, 0)?;
            Frame::Detach
        }
        FrameType::Exit => {
            exact(kind, payload, 6)?;
            let value = u32_at(payload, 1) as i32;
            let status = match payload[0] {
                0 => ExitStatus::Code(value),
                1 if (1..=64).contains(&value) => ExitStatus::Signal(value),
                1 => return Err(malformed(kind, format!("signal {value} is out of range"))),
                other => return Err(malformed(kind, format!("unknown exit kind {other}"))),
            };
            let escalated = match payload[5] {
                0 => false,
                1 => true,
                other => return Err(malformed(kind, format!("escalated flag is {other}"))),
            };
            Frame::Exit { status, escalated }
        }
        FrameType::Error => {
            if payload.len() < 2 {
                return Err(malformed(kind, "shorter than its 2-byte code"));
            }
            if payload.len() - 2 > MAX_ERROR_MESSAGE {
                return Err(malformed(kind, "message is longer than the limit"));
            }
            let raw = u16_at(payload, 0);
            let code = ErrorCode::from_u16(raw).ok_or_else(|| malformed(kind, format!("unknown error code {raw}")))?;
            let message =
                std::str::from_utf8(&payload[2..]).map_err(|_| malformed(kind, "message is not UTF-8"))?.to_string();
            Frame::Error { code, message }
        }
        FrameType::Ping | FrameType::Pong => {
            exact(kind, payload, 8)?;
            let mut nonce = [0u8; 8];
            nonce.copy_from_slice(payload);
            let nonce = u64::from_le_bytes(nonce);
            if kind == FrameType::Ping { Frame::Ping(nonce) } else { Frame::Pong(nonce) }
        }
        FrameType::Signal => {
            exact(kind, payload, 5)?;
            let signal = payload[0];
            if !(1..=64).contains(&signal) {
                return Err(malformed(kind, format!("signal {signal} is out of range")));
            }
            Frame::Signal { signal, grace_ms: u32_at(payload, 1) }
        }
    })
}

/// A TERMINAL payload: its op byte, then the op's bytes.
fn terminal_op(payload: &[u8]) -> Result<TerminalOp, DecodeError> {
    let kind = FrameType::Terminal;
    let Some((&op, rest)) = payload.split_first() else {
        return Err(malformed(kind, "empty payload (no op byte)"));
    };
    let bare = |op: TerminalOp| {
        if rest.is_empty() { Ok(op) } else { Err(malformed(kind, format!("op {} carries no bytes", op.code()))) }
    };
    match op {
        1 if rest.len() <= MAX_TERMINAL_KEYS => Ok(TerminalOp::Take { keys: rest.to_vec() }),
        1 => Err(malformed(kind, format!("more than {MAX_TERMINAL_KEYS} keys to give the terminal back on"))),
        2 => bare(TerminalOp::Taken),
        3 => bare(TerminalOp::Ready),
        4 => Ok(TerminalOp::Give(rest.to_vec())),
        5 => Ok(TerminalOp::Paint(rest.to_vec())),
        6 => bare(TerminalOp::Redrawn),
        other => Err(malformed(kind, format!("unknown op {other}"))),
    }
}

/// The most keys a TAKE names: a client keeps its detach key and its command prefix.
const MAX_TERMINAL_KEYS: usize = 8;

fn put_header(out: &mut Vec<u8>, kind: FrameType, flags: u8, len: usize) {
    out.extend_from_slice(&header_bytes(kind, flags, len));
}

fn header_bytes(kind: FrameType, flags: u8, len: usize) -> [u8; HEADER_LEN] {
    debug_assert!(len <= MAX_PAYLOAD, "{} payload of {len} bytes", kind.name());
    let [a, b, c, d] = (len as u32).to_le_bytes();
    [a, b, c, d, kind as u8, flags, 0, 0]
}

/// The header of an OUTPUT frame carrying `len` (at most [`MAX_PAYLOAD`]) bytes, for a caller
/// that puts header and payload into a buffer of its own (the master's hot path).
pub fn output_header(len: usize) -> [u8; HEADER_LEN] {
    header_bytes(FrameType::Output, 0, len)
}

fn json_bytes<T: serde::Serialize>(value: &T) -> Vec<u8> {
    // Serialising plain structs, maps and strings to a Vec cannot fail.
    serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec())
}

impl Frame {
    /// Append this frame's bytes to `out`. Payloads above [`MAX_PAYLOAD`] are a caller bug
    /// (output and keyframes are chunked before they become frames).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let (flags, payload) = self.flags_and_payload();
        put_header(out, self.kind(), flags, payload.len());
        out.extend_from_slice(&payload);
    }

    /// The header flags and the payload `encode` writes.
    pub(super) fn flags_and_payload(&self) -> (u8, std::borrow::Cow<'_, [u8]>) {
        let mut flags = 0;
        let payload: std::borrow::Cow<'_, [u8]> = match self {
            Frame::Hello { version, role, cols, rows, status_line, view } => {
                let mut p = Vec::with_capacity(12);
                p.extend_from_slice(&MAGIC);
                p.extend_from_slice(&version.to_le_bytes());
                p.push(*role as u8);
                p.push(if *status_line { HELLO_STATUS_LINE } else { 0 } | if *view { HELLO_VIEW } else { 0 });
                p.extend_from_slice(&cols.to_le_bytes());
                p.extend_from_slice(&rows.to_le_bytes());
                p.into()
            }
            Frame::Welcome { version, info } => {
                let mut p = Vec::new();
                p.extend_from_slice(&version.to_le_bytes());
                p.extend_from_slice(&[0, 0]);
                p.extend_from_slice(&json_bytes(info));
                p.into()
            }
            Frame::Input(data) | Frame::Output(data) => data.as_slice().into(),
            Frame::Resize { cols, rows } => {
                let mut p = Vec::with_capacity(4);
                p.extend_from_slice(&cols.to_le_bytes());
                p.extend_from_slice(&rows.to_le_bytes());
                p.into()
            }
            Frame::Keyframe { more, data } => {
                if *more {
                    flags = FLAG_MORE;
                }
                data.as_slice().into()
            }
            Frame::SnapshotRequest { history: None } | Frame::Detach => Vec::new().into(),
            Frame::SnapshotRequest { history: Some(HistoryRequest::Newest(n)) } => n.to_le_bytes().to_vec().into(),
            Frame::SnapshotRequest { history: Some(HistoryRequest::Page { lines, from }) } => {
                let mut p = Vec::with_capacity(12);
                p.extend_from_slice(&lines.to_le_bytes());
                p.extend_from_slice(&from.to_le_bytes());
                p.into()
            }
            Frame::Snapshot(snapshot) => json_bytes(snapshot).into(),
            Frame::Event(event) | Frame::Hook(event) => json_bytes(event).into(),
            Frame::Exit { status, escalated } => {
                let (kind_byte, value) = match *status {
                    ExitStatus::Code(code) => (0u8, code),
                    ExitStatus::Signal(signal) => (1u8, signal),
                };
                let mut p = vec![kind_byte];
                p.extend_from_slice(&value.to_le_bytes());
                p.push(u8::from(*escalated));
                p.into()
            }
            Frame::Error { code, message } => {
                let mut p = Vec::with_capacity(2 + message.len());
                p.extend_from_slice(&(*code as u16).to_le_bytes());
                p.extend_from_slice(message.as_bytes());
                p.into()
            }
            Frame::Ping(nonce) | Frame::Pong(nonce) => nonce.to_le_bytes().to_vec().into(),
            Frame::Signal { signal, grace_ms } => {
                let mut p = vec![*signal];
                p.extend_from_slice(&grace_ms.to_le_bytes());
                p.into()
            }
            Frame::Terminal(op) => {
                let bytes: &[u8] = match op {
                    TerminalOp::Take { keys } => keys,
                    TerminalOp::Give(bytes) | TerminalOp::Paint(bytes) => bytes,
                    TerminalOp::Taken | TerminalOp::Ready | TerminalOp::Redrawn => &[],
                };
                let mut p = Vec::with_capacity(1 + bytes.len());
                p.push(op.code());
                p.extend_from_slice(bytes);
                p.into()
            }
        };
        (flags, payload)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }
}

/// Cuts a byte stream into frames.
///
/// Bytes are pushed as they arrive; [`FrameDecoder::next_frame`] yields complete frames. The
/// buffer holds at most one incomplete frame plus whatever was pushed after it, and a header
/// over the limit fails before its payload is awaited. After an error the stream is unusable.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    start: usize,
}

impl FrameDecoder {
    pub fn new() -> FrameDecoder {
        FrameDecoder::default()
    }

    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The bytes received but not yet returned as frames (the start of a frame still to come),
    /// for a master that hands its clients over to another process image.
    pub fn pending(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Bytes received but not yet returned as frames.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Bytes the buffer holds, including frames already returned but not yet compacted away:
    /// what the memory bound is about.
    pub(super) fn held(&self) -> usize {
        self.buf.len()
    }

    /// The next complete frame, if one is buffered.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, DecodeError> {
        self.next_with(decode_frame)
    }

    /// [`FrameDecoder::next_frame`] for a master reading a client: see [`decode_client_frame`].
    pub fn next_client_frame(&mut self) -> Result<Option<Frame>, DecodeError> {
        self.next_with(decode_client_frame)
    }

    fn next_with(
        &mut self,
        decode: fn(&Header, &[u8]) -> Result<Frame, DecodeError>,
    ) -> Result<Option<Frame>, DecodeError> {
        let pending = &self.buf[self.start..];
        if pending.len() < HEADER_LEN {
            self.compact();
            return Ok(None);
        }
        let mut head = [0u8; HEADER_LEN];
        head.copy_from_slice(&pending[..HEADER_LEN]);
        let header = decode_header(&head)?;
        let total = HEADER_LEN + header.len as usize;
        if pending.len() < total {
            self.compact();
            return Ok(None);
        }
        let frame = decode(&header, &pending[HEADER_LEN..total])?;
        self.start += total;
        Ok(Some(frame))
    }

    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_one(bytes: &[u8]) -> Result<Option<Frame>, DecodeError> {
        let mut decoder = FrameDecoder::new();
        decoder.push(bytes);
        decoder.next_frame()
    }

    fn with_header(kind: FrameType, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        put_header(&mut out, kind, 0, payload.len());
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn an_output_header_and_its_payload_are_the_output_frame() {
        let data = b"\x1b[1mbold\x1b[m\r\n";
        let mut built = output_header(data.len()).to_vec();
        built.extend_from_slice(data);
        assert_eq!(built, Frame::Output(data.to_vec()).to_bytes());
        assert_eq!(decode_one(&built), Ok(Some(Frame::Output(data.to_vec()))));
    }

    #[test]
    fn a_hello_with_a_wrong_payload_fails_the_handshake() {
        let mut good =
            Frame::Hello { version: 1, role: Role::Viewer, cols: 80, rows: 24, status_line: false, view: false }
                .to_bytes();
        good[HEADER_LEN] = b'X';
        let err = decode_one(&good).unwrap_err();
        assert_eq!(err.code(), ErrorCode::BadHello);
        assert!(err.to_string().contains("bad magic"), "{err}");
        let short = with_header(FrameType::Hello, b"DESK\x01\x00\x01\x00");
        assert_eq!(decode_one(&short).unwrap_err().code(), ErrorCode::BadHello);
    }

    #[test]
    fn header_errors_keep_their_own_codes_even_on_hello() {
        let mut bytes =
            Frame::Hello { version: 1, role: Role::Viewer, cols: 80, rows: 24, status_line: false, view: false }
                .to_bytes();
        bytes[5] = FLAG_MORE;
        assert_eq!(decode_one(&bytes).unwrap_err().code(), ErrorCode::Malformed);
    }

    /// A blank 80x24 screen, and the SNAPSHOT reply that carries it.
    fn blank_reply() -> crate::SnapshotReply {
        crate::SnapshotReply::of_screen(desk_term::screen::Screen::new(80, 24).snapshot())
    }

    #[test]
    fn json_bodies_must_be_objects_not_arrays_of_fields() {
        let reply = blank_reply();
        let snapshot = &reply.screen;
        let as_object = serde_json::to_value(snapshot).unwrap();
        let fields = ["cols", "rows", "cursor", "title", "modes", "lines"];
        let as_array = serde_json::Value::Array(fields.iter().map(|f| as_object[f].clone()).collect());
        let bytes = with_header(FrameType::Snapshot, &serde_json::to_vec(&as_array).unwrap());
        let err = decode_one(&bytes).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Malformed);
        assert!(err.to_string().contains("not a JSON object"), "{err}");
        let spaced = with_header(FrameType::Snapshot, format!(" \n{as_object}\r\n").as_bytes());
        assert_eq!(decode_one(&spaced).unwrap(), Some(Frame::Snapshot(Box::new(reply))));
    }

    #[test]
    fn a_master_reading_a_client_refuses_the_frames_only_a_master_sends_unread() {
        let reply = blank_reply();
        let bytes = Frame::Snapshot(Box::new(reply.clone())).to_bytes();
        let mut any = FrameDecoder::new();
        any.push(&bytes);
        assert_eq!(any.next_frame(), Ok(Some(Frame::Snapshot(Box::new(reply)))));
        // Also with a body no SNAPSHOT could have: it is not read at all.
        for bytes in [bytes, with_header(FrameType::Welcome, b"\x02\0\0\0[]")] {
            let mut master = FrameDecoder::new();
            master.push(&bytes);
            let err = master.next_client_frame().unwrap_err();
            assert_eq!(err.code(), ErrorCode::Malformed);
            assert!(err.to_string().contains("frames are sent by the master, not by clients"), "{err}");
        }
        let mut master = FrameDecoder::new();
        master.push(&Frame::Ping(7).to_bytes());
        assert_eq!(master.next_client_frame(), Ok(Some(Frame::Ping(7))), "every other frame decodes as before");
    }

    #[test]
    fn json_numbers_decode_to_exactly_the_value_sent() {
        // serde_json's default float parser can be off by one unit in the last place.
        let value = 5.946782406804386e-300_f64;
        let mut event = serde_json::Map::new();
        event.insert("x".into(), serde_json::Value::from(value));
        let bytes = Frame::Event(event.clone()).to_bytes();
        assert_eq!(decode_one(&bytes).unwrap(), Some(Frame::Event(event)));
    }

    #[test]
    fn json_bodies_nest_at_most_127_levels() {
        let event = |levels: usize| {
            let arrays = levels - 1;
            let body = format!("{{\"a\":{}{}}}", "[".repeat(arrays), "]".repeat(arrays));
            with_header(FrameType::Event, body.as_bytes())
        };
        assert!(matches!(decode_one(&event(127)), Ok(Some(Frame::Event(_)))));
        let err = decode_one(&event(128)).unwrap_err();
        assert!(err.to_string().contains("recursion limit"), "{err}");
    }
}
