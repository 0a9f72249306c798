//! The relay envelope: many logical streams over one byte pipe (`ssh HOST desk relay`'s stdio).
//!
//! Owns the byte layout of what `desk relay` (the remote end, on the host) and the local desk
//! say to each other over one ssh exec channel (docs/remote.md, "The relay protocol"): the
//! handshake the relay writes first, and the envelopes after it. An envelope is a 9-byte header
//! (stream id u32, kind u8, payload length u32, all big-endian) and its payload; a stream is
//! opened by the local side with [`Kind::Open`] naming a [`Target`] (a session's master socket,
//! the daemon's control socket, a desk command to run, the host's facts) and carries opaque
//! bytes both ways: the wire protocol of docs/protocol.md to a master, JSON lines to the daemon.
//!
//! Invariants: a declared payload above [`MAX_ENVELOPE`] is refused as soon as the header is
//! seen, before any allocation; a decoder buffers at most one envelope plus one push; every
//! envelope decoded re-encodes to the same bytes. The handshake is recognised from its first
//! byte: anything else in front of it (a login shell's rc file that printed a line) is
//! [`HandshakeError::Noise`], with what was printed, never taken for frames. Codec and types
//! only: no clock, no syscall, no sockets (desk-common's `remote` owns the pipes).

use thiserror::Error;

/// The relay protocol's version: the envelope layout, the kinds, the targets and the windows
/// below. The local desk and the relay must speak the same one; the handshake says which the
/// relay speaks. 2: per-stream windows ([`Kind::Window`], [`INITIAL_WINDOW`]).
pub const RELAY_VERSION: u16 = 2;

/// What the relay writes before anything else: a NUL first (no rc file's greeting starts with
/// one), then the protocol's name, then a NUL again.
pub const RELAY_MAGIC: &[u8; 12] = b"\0desk-relay\0";

/// Bytes of an envelope's header: stream id (4), kind (1), payload length (4).
pub const ENVELOPE_HEADER: usize = 9;

/// 256 KiB: one envelope carries at most one read of the attach client's socket (its
/// `SOCKET_READ_CHUNK`) or of a master's output; a sender cuts longer data into several. A
/// header declaring more is not from a desk relay and is refused before its payload is read.
pub const MAX_ENVELOPE: usize = 256 * 1024;

/// 1 MiB: what each side may send on a stream, in DATA and STDERR payload bytes, before the
/// other grants more with [`Kind::Window`] (as an SSH channel's window). A reader that stops
/// reading holds at most this much of its stream on the way, and never the link's other streams;
/// it is several times what a loopback or LAN link carries in one round trip at full speed
/// (100 MB/s × 1 ms = 100 KB), so a reader that keeps up is never held back by the window, and
/// half of OpenSSH's own channel window (2 MiB), which the whole link shares.
pub const INITIAL_WINDOW: u32 = 1 << 20;

/// 64 bytes: a desk version (`0.1.0`, `0.12.3-rc.1+build`) with room to spare.
const MAX_VERSION_TEXT: usize = 64;

/// The stream id of the link itself (pings); streams opened by the local side count from 1.
pub const LINK_STREAM: u32 = 0;

/// What an envelope says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Local → relay: open this stream to the payload's [`Target`].
    Open = 1,
    /// Relay → local: the stream is open.
    Opened = 2,
    /// Bytes of the stream (an exec stream's standard output, relay → local).
    Data = 3,
    /// An exec stream's standard error (relay → local).
    Stderr = 4,
    /// The sender sends nothing more on this stream (a half close: the socket's write side is
    /// shut, an exec's standard input closed).
    Eof = 5,
    /// The stream is gone; the payload is why (UTF-8, empty when it simply ended). Either side
    /// may send it; the id is free once both have.
    Close = 6,
    /// Relay → local: an exec stream's command exited with this code (i32; 128 + N for signal N).
    Exit = 7,
    /// Either side, on [`LINK_STREAM`]: answer with a [`Kind::Pong`] carrying the same payload.
    Ping = 8,
    /// The answer to a [`Kind::Ping`].
    Pong = 9,
    /// Either side: the sender's reader took this many more bytes of the stream (u32): the
    /// other side may send that many more DATA and STDERR payload bytes on it.
    Window = 10,
}

impl Kind {
    pub fn from_u8(value: u8) -> Option<Kind> {
        Some(match value {
            1 => Kind::Open,
            2 => Kind::Opened,
            3 => Kind::Data,
            4 => Kind::Stderr,
            5 => Kind::Eof,
            6 => Kind::Close,
            7 => Kind::Exit,
            8 => Kind::Ping,
            9 => Kind::Pong,
            10 => Kind::Window,
            _ => return None,
        })
    }
}

/// One envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub stream: u32,
    pub kind: Kind,
    pub payload: Vec<u8>,
}

impl Envelope {
    pub fn new(stream: u32, kind: Kind, payload: impl Into<Vec<u8>>) -> Envelope {
        Envelope { stream, kind, payload: payload.into() }
    }

    /// Append the envelope's bytes to `out`. The payload must fit [`MAX_ENVELOPE`] (the senders
    /// cut their reads to it); a longer one is a bug of the caller's, refused here.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), RelayError> {
        encode_parts(self.stream, self.kind, &self.payload, out)
    }

    pub fn to_bytes(&self) -> Result<Vec<u8>, RelayError> {
        let mut out = Vec::with_capacity(ENVELOPE_HEADER + self.payload.len());
        self.encode(&mut out)?;
        Ok(out)
    }
}

/// [`Envelope::encode`] without building an envelope (the pumps' hot path: a read buffer).
pub fn encode_parts(stream: u32, kind: Kind, payload: &[u8], out: &mut Vec<u8>) -> Result<(), RelayError> {
    if payload.len() > MAX_ENVELOPE {
        return Err(RelayError::TooLarge { len: payload.len(), limit: MAX_ENVELOPE });
    }
    out.extend_from_slice(&stream.to_be_bytes());
    out.push(kind as u8);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    Ok(())
}

/// What a stream is opened to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The master socket of the session of this name on the host.
    Session(String),
    /// The host's `desk serve` control socket.
    Control,
    /// Run the host's desk with these arguments (`["ls", "--json"]`): standard output in
    /// [`Kind::Data`], standard error in [`Kind::Stderr`], then [`Kind::Exit`].
    Exec(Vec<String>),
    /// The host's facts as one JSON object (`HostFacts` in desk-common), then the stream ends.
    Facts,
}

impl Target {
    /// The OPEN payload: a tag byte, then the target's text (exec: arguments separated by NUL).
    pub fn encode(&self) -> Vec<u8> {
        let (tag, text): (u8, Vec<u8>) = match self {
            Target::Session(name) => (1, name.as_bytes().to_vec()),
            Target::Control => (2, Vec::new()),
            Target::Exec(args) => (3, args.join("\0").into_bytes()),
            Target::Facts => (4, Vec::new()),
        };
        let mut out = vec![tag];
        out.extend_from_slice(&text);
        out
    }

    pub fn decode(payload: &[u8]) -> Result<Target, RelayError> {
        let (&tag, rest) = payload.split_first().ok_or(RelayError::BadTarget("an empty OPEN"))?;
        let text = std::str::from_utf8(rest).map_err(|_| RelayError::BadTarget("a target that is not UTF-8"))?;
        Ok(match tag {
            1 => Target::Session(text.to_string()),
            2 if text.is_empty() => Target::Control,
            3 if text.is_empty() => Target::Exec(Vec::new()),
            3 => Target::Exec(text.split('\0').map(str::to_string).collect()),
            4 if text.is_empty() => Target::Facts,
            _ => return Err(RelayError::BadTarget("an unknown target")),
        })
    }
}

/// What the relay says first: who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handshake {
    /// The relay protocol it speaks ([`RELAY_VERSION`] for this build).
    pub relay_version: u16,
    /// The newest wire protocol (docs/protocol.md) the host's desk speaks.
    pub wire_version: u16,
    /// The host's desk version (`CARGO_PKG_VERSION`).
    pub desk_version: String,
}

impl Handshake {
    pub fn encode(&self) -> Vec<u8> {
        let version = &self.desk_version.as_bytes()[..self.desk_version.len().min(MAX_VERSION_TEXT)];
        let mut out = RELAY_MAGIC.to_vec();
        out.extend_from_slice(&self.relay_version.to_be_bytes());
        out.extend_from_slice(&self.wire_version.to_be_bytes());
        out.push(version.len() as u8);
        out.extend_from_slice(version);
        out
    }

    /// Read a handshake from the start of what the relay's end printed: the handshake and how
    /// many bytes it took, `Ok(None)` while it may still be arriving, or why what arrived is not
    /// one.
    pub fn decode(bytes: &[u8]) -> Result<Option<(Handshake, usize)>, HandshakeError> {
        let seen = bytes.len().min(RELAY_MAGIC.len());
        if bytes[..seen] != RELAY_MAGIC[..seen] {
            return Err(HandshakeError::Noise(bytes.to_vec()));
        }
        let fixed = RELAY_MAGIC.len() + 5;
        if bytes.len() < fixed {
            return Ok(None);
        }
        let at = RELAY_MAGIC.len();
        let relay_version = u16::from_be_bytes([bytes[at], bytes[at + 1]]);
        let wire_version = u16::from_be_bytes([bytes[at + 2], bytes[at + 3]]);
        let len = usize::from(bytes[at + 4]);
        if len > MAX_VERSION_TEXT {
            return Err(HandshakeError::Malformed("a desk version longer than 64 bytes"));
        }
        if bytes.len() < fixed + len {
            return Ok(None);
        }
        let desk_version = std::str::from_utf8(&bytes[fixed..fixed + len])
            .map_err(|_| HandshakeError::Malformed("a desk version that is not UTF-8"))?
            .to_string();
        Ok(Some((Handshake { relay_version, wire_version, desk_version }, fixed + len)))
    }
}

/// Why the start of the relay's output is not a handshake.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HandshakeError {
    /// Something else was printed first (these bytes): a login shell's rc file, most often.
    #[error("the host printed {} byte(s) before desk relay's handshake", .0.len())]
    Noise(Vec<u8>),
    #[error("a malformed relay handshake: {0}")]
    Malformed(&'static str),
}

/// Why bytes are not envelopes.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RelayError {
    #[error("an envelope of {len} bytes, over the {limit}-byte limit")]
    TooLarge { len: usize, limit: usize },
    #[error("an envelope of unknown kind {0}")]
    UnknownKind(u8),
    #[error("a malformed OPEN: {0}")]
    BadTarget(&'static str),
}

/// Envelopes out of a byte stream cut anywhere.
#[derive(Debug, Default)]
pub struct EnvelopeDecoder {
    buf: Vec<u8>,
}

impl EnvelopeDecoder {
    pub fn new() -> EnvelopeDecoder {
        EnvelopeDecoder::default()
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held, for the bound (at most one envelope plus one push).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next whole envelope, `Ok(None)` until one has arrived. After an error the stream is
    /// not envelopes any more: the caller closes the link.
    pub fn next_envelope(&mut self) -> Result<Option<Envelope>, RelayError> {
        if self.buf.len() < ENVELOPE_HEADER {
            return Ok(None);
        }
        let stream = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        let kind = Kind::from_u8(self.buf[4]).ok_or(RelayError::UnknownKind(self.buf[4]))?;
        let len = u32::from_be_bytes([self.buf[5], self.buf[6], self.buf[7], self.buf[8]]) as usize;
        if len > MAX_ENVELOPE {
            return Err(RelayError::TooLarge { len, limit: MAX_ENVELOPE });
        }
        if self.buf.len() < ENVELOPE_HEADER + len {
            return Ok(None);
        }
        let payload = self.buf[ENVELOPE_HEADER..ENVELOPE_HEADER + len].to_vec();
        self.buf.drain(..ENVELOPE_HEADER + len);
        Ok(Some(Envelope { stream, kind, payload }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn kind() -> impl Strategy<Value = Kind> {
        (1u8..=10).prop_map(|k| Kind::from_u8(k).unwrap())
    }

    fn envelope() -> impl Strategy<Value = Envelope> {
        (any::<u32>(), kind(), proptest::collection::vec(any::<u8>(), 0..300))
            .prop_map(|(stream, kind, payload)| Envelope { stream, kind, payload })
    }

    proptest! {
        #[test]
        fn envelopes_survive_encoding_however_the_stream_is_cut(
            envelopes in proptest::collection::vec(envelope(), 0..12),
            cuts in proptest::collection::vec(1usize..64, 1..32),
        ) {
            let mut bytes = Vec::new();
            for e in &envelopes {
                e.encode(&mut bytes).unwrap();
            }
            let mut decoder = EnvelopeDecoder::new();
            let mut got = Vec::new();
            let (mut at, mut cut) = (0, cuts.iter().cycle());
            while at < bytes.len() {
                let end = (at + cut.next().unwrap()).min(bytes.len());
                decoder.push(&bytes[at..end]);
                at = end;
                while let Some(e) = decoder.next_envelope().unwrap() {
                    got.push(e);
                }
                prop_assert!(decoder.buffered() < ENVELOPE_HEADER + 300 + 64);
            }
            prop_assert_eq!(got, envelopes);
        }

        #[test]
        fn targets_survive_encoding(name in "[A-Za-z0-9._-]{1,20}", args in proptest::collection::vec("[^\0]{1,8}", 1..5)) {
            for target in [Target::Session(name.clone()), Target::Control, Target::Exec(args.clone()), Target::Facts] {
                prop_assert_eq!(Target::decode(&target.encode()).unwrap(), target);
            }
        }

        #[test]
        fn a_handshake_survives_encoding_and_is_found_only_at_the_start(version in "[0-9a-z.+-]{0,64}", relay in any::<u16>(), wire in any::<u16>()) {
            let hs = Handshake { relay_version: relay, wire_version: wire, desk_version: version };
            let mut bytes = hs.encode();
            bytes.extend_from_slice(b"\0\0\0\x01");
            for cut in 0..bytes.len() - 4 {
                prop_assert_eq!(Handshake::decode(&bytes[..cut]), Ok(None));
            }
            let (got, used) = Handshake::decode(&bytes).unwrap().unwrap();
            prop_assert_eq!(used, bytes.len() - 4);
            prop_assert_eq!(got, hs);
        }
    }

    #[test]
    fn an_oversized_header_is_refused_before_its_payload() {
        let mut decoder = EnvelopeDecoder::new();
        let mut header = 7u32.to_be_bytes().to_vec();
        header.push(Kind::Data as u8);
        header.extend_from_slice(&((MAX_ENVELOPE + 1) as u32).to_be_bytes());
        decoder.push(&header);
        assert_eq!(decoder.next_envelope(), Err(RelayError::TooLarge { len: MAX_ENVELOPE + 1, limit: MAX_ENVELOPE }));
        let big = Envelope::new(1, Kind::Data, vec![0; MAX_ENVELOPE + 1]);
        assert!(big.to_bytes().is_err());
    }

    #[test]
    fn an_unknown_kind_is_an_error_not_a_guess() {
        let mut decoder = EnvelopeDecoder::new();
        decoder.push(&[0, 0, 0, 1, 42, 0, 0, 0, 0]);
        assert_eq!(decoder.next_envelope(), Err(RelayError::UnknownKind(42)));
    }

    #[test]
    fn an_rc_file_greeting_before_the_handshake_is_noise_with_its_text() {
        let mut bytes = b"Welcome to the build box\n".to_vec();
        bytes
            .extend_from_slice(&Handshake { relay_version: 1, wire_version: 2, desk_version: "0.1.0".into() }.encode());
        match Handshake::decode(&bytes) {
            Err(HandshakeError::Noise(seen)) => assert!(seen.starts_with(b"Welcome")),
            other => panic!("{other:?}"),
        }
        // The first byte alone tells: no need to wait for twelve.
        assert!(matches!(Handshake::decode(b"W"), Err(HandshakeError::Noise(_))));
    }

    #[test]
    fn the_layout_is_pinned() {
        let bytes = Envelope::new(0x0102_0304, Kind::Close, b"gone".to_vec()).to_bytes().unwrap();
        assert_eq!(bytes, [1, 2, 3, 4, 6, 0, 0, 0, 4, b'g', b'o', b'n', b'e']);
        assert_eq!(Target::Exec(vec!["ls".into(), "--json".into()]).encode(), b"\x03ls\0--json");
        let hs = Handshake { relay_version: 1, wire_version: 2, desk_version: "0.1.0".into() }.encode();
        assert_eq!(hs, b"\0desk-relay\0\x00\x01\x00\x02\x050.1.0");
    }
}
