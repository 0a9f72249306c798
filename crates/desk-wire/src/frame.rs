//! Frame values and their error vocabulary.
//!
//! Owns the typed form of each frame, the roles a client may take, and the error codes carried
//! by ERROR frames. Invariants: every variant maps to exactly one [`FrameType`]; JSON-bodied
//! frames (WELCOME, SNAPSHOT, EVENT) carry a single UTF-8 JSON object.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Frame type byte (header offset 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameType {
    Hello = 0x01,
    Welcome = 0x02,
    Input = 0x03,
    Resize = 0x04,
    Output = 0x05,
    Keyframe = 0x06,
    SnapshotRequest = 0x07,
    Snapshot = 0x08,
    Event = 0x09,
    Detach = 0x0a,
    Exit = 0x0b,
    Error = 0x0c,
    Ping = 0x0d,
    Pong = 0x0e,
    Signal = 0x0f,
    Hook = 0x10,
    Terminal = 0x11,
}

impl FrameType {
    pub fn from_u8(value: u8) -> Option<FrameType> {
        use FrameType::*;
        Some(match value {
            0x01 => Hello,
            0x02 => Welcome,
            0x03 => Input,
            0x04 => Resize,
            0x05 => Output,
            0x06 => Keyframe,
            0x07 => SnapshotRequest,
            0x08 => Snapshot,
            0x09 => Event,
            0x0a => Detach,
            0x0b => Exit,
            0x0c => Error,
            0x0d => Ping,
            0x0e => Pong,
            0x0f => Signal,
            0x10 => Hook,
            0x11 => Terminal,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        use FrameType::*;
        match self {
            Hello => "HELLO",
            Welcome => "WELCOME",
            Input => "INPUT",
            Resize => "RESIZE",
            Output => "OUTPUT",
            Keyframe => "KEYFRAME",
            SnapshotRequest => "SNAPSHOT_REQUEST",
            Snapshot => "SNAPSHOT",
            Event => "EVENT",
            Detach => "DETACH",
            Exit => "EXIT",
            Error => "ERROR",
            Ping => "PING",
            Pong => "PONG",
            Signal => "SIGNAL",
            Hook => "HOOK",
            Terminal => "TERMINAL",
        }
    }
}

impl fmt::Display for FrameType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The role a client declares in its HELLO; it decides what the master sends it and what it may
/// send. Controllers type and resize; viewers only watch; observers receive events and may
/// inject input (the delivery daemon); queries (`peek`, `ls`, `kill`) get nothing unsolicited
/// but EXIT. Every role gets EXIT and may ask for snapshots and pings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Role {
    Controller = 1,
    Viewer = 2,
    Observer = 3,
    Query = 4,
}

impl Role {
    pub fn from_u8(value: u8) -> Option<Role> {
        match value {
            1 => Some(Role::Controller),
            2 => Some(Role::Viewer),
            3 => Some(Role::Observer),
            4 => Some(Role::Query),
            _ => None,
        }
    }

    /// Whether this role receives the terminal stream (OUTPUT and KEYFRAME frames).
    pub fn streams_output(self) -> bool {
        matches!(self, Role::Controller | Role::Viewer)
    }

    /// Whether this role may send INPUT.
    pub fn may_input(self) -> bool {
        matches!(self, Role::Controller | Role::Observer)
    }

    /// Whether this role may signal the child.
    pub fn may_signal(self) -> bool {
        !matches!(self, Role::Viewer)
    }
}

/// How a child ended: with an exit code, or killed by a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitStatus {
    Code(i32),
    Signal(i32),
}

impl ExitStatus {
    /// The shell convention: the code itself, or 128 + the signal number.
    pub fn shell_code(self) -> i32 {
        match self {
            ExitStatus::Code(code) => code,
            ExitStatus::Signal(signal) => 128 + signal,
        }
    }
}

/// Error codes carried by ERROR frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum ErrorCode {
    /// The handshake failed: the first frame was not a HELLO, a HELLO's payload was malformed
    /// (size, magic, role, a reserved option bit), or a second HELLO arrived.
    BadHello = 1,
    /// The HELLO named a protocol version this side does not speak.
    UnsupportedVersion = 2,
    /// A header declared a payload above the limit.
    TooLarge = 3,
    /// A header carried a type this side does not know.
    UnknownType = 4,
    /// A frame's payload does not match its type's layout.
    Malformed = 5,
    /// The client's role may not send this frame.
    NotPermitted = 6,
    /// The input queue to the child is full; the INPUT frame was refused whole.
    InputFull = 7,
    /// The client stayed behind the output stream past the deadline.
    TooSlow = 8,
    /// The session is exiting.
    Exiting = 9,
    /// Something failed inside the master. Reserved: no master sends it yet.
    Internal = 10,
    /// The connecting process belongs to another user.
    PeerRefused = 11,
    /// The session already serves as many clients as it will.
    SessionFull = 12,
}

impl ErrorCode {
    pub fn from_u16(value: u16) -> Option<ErrorCode> {
        use ErrorCode::*;
        Some(match value {
            1 => BadHello,
            2 => UnsupportedVersion,
            3 => TooLarge,
            4 => UnknownType,
            5 => Malformed,
            6 => NotPermitted,
            7 => InputFull,
            8 => TooSlow,
            9 => Exiting,
            10 => Internal,
            11 => PeerRefused,
            12 => SessionFull,
            _ => return None,
        })
    }

    /// The name `docs/protocol.md` and the test vectors use.
    pub fn name(self) -> &'static str {
        use ErrorCode::*;
        match self {
            BadHello => "BAD_HELLO",
            UnsupportedVersion => "UNSUPPORTED_VERSION",
            TooLarge => "TOO_LARGE",
            UnknownType => "UNKNOWN_TYPE",
            Malformed => "MALFORMED",
            NotPermitted => "NOT_PERMITTED",
            InputFull => "INPUT_FULL",
            TooSlow => "TOO_SLOW",
            Exiting => "EXITING",
            Internal => "INTERNAL",
            PeerRefused => "PEER_REFUSED",
            SessionFull => "SESSION_FULL",
        }
    }
}

/// What a master tells a client about its session in WELCOME (and what `desk ls` shows).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub name: String,
    /// Incarnation of this session name (grows with every `desk new`).
    pub generation: u32,
    /// Agent provider the session was started for (`claude`, `codex`, `opencode`, `shell`, ...).
    pub provider: String,
    /// Child process id (also its process group and session id).
    pub pid: u32,
    pub master_pid: u32,
    pub command: Vec<String>,
    pub cwd: String,
    pub cols: u16,
    pub rows: u16,
    pub controllers: u32,
    pub viewers: u32,
    pub observers: u32,
    pub title: String,
    /// Unix time in milliseconds when the child was started.
    pub started_at_ms: u64,
    /// The agent state authority's current view.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<crate::state::StateView>,
}

/// The reply to SNAPSHOT_REQUEST: the screen, plus what a delivery needs to know about the
/// session at that instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotReply {
    #[serde(flatten)]
    pub screen: desk_term::screen::Snapshot,
    /// Session generation the snapshot belongs to.
    #[serde(default)]
    pub generation: u32,
    /// When a controller last sent input (Unix ms), if ever.
    #[serde(default)]
    pub last_input_ms: Option<u64>,
    /// Whether the child's terminal is in canonical (line-edited) mode.
    #[serde(default)]
    pub canonical: bool,
    /// The agent state authority's view.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<crate::state::StateView>,
    /// The history lines the request asked for, oldest first; left out when it asked for
    /// none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<desk_term::screen::HistoryRow>>,
    /// With `history`: the number of its first line (lines are numbered in the order they
    /// entered the session's history, and a number never names another line; see
    /// `desk_term::screen::Screen::history_first`). Left out by masters that predate paging.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_start: Option<u64>,
    /// With `history`: the number of the oldest line the session holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_first: Option<u64>,
    /// With `history`: one past the number of the newest line the session holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_end: Option<u64>,
    /// Who has the terminal: the foreground process group, when the master could tell; left
    /// out otherwise (and by masters older than this key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreground: Option<Foreground>,
}

/// Who has a session's terminal: its foreground process group, the one the kernel gives what
/// is typed to (`tcgetpgrp`). Keys in this order in the canonical encoding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Foreground {
    /// The foreground process group's id.
    pub pgid: u32,
    /// The program its leader runs (`/proc/PGID/comm`: `bash`, `sleep`); empty when unknown.
    pub program: String,
    /// The group is the session's program's own: the program itself has the terminal, not a
    /// job it started (a shell running `sleep` in the foreground has handed it over).
    pub own: bool,
    /// In canonical mode, whether a process of the group waits in `read(2)` on the terminal
    /// (a line typed now is read at once); null when that is not known (raw mode, or the
    /// kernel does not say).
    #[serde(default)]
    pub reading: Option<bool>,
}

impl SnapshotReply {
    /// The reply carrying `screen` and nothing else yet: generation 0, no input, not canonical,
    /// no state, no history, no foreground.
    pub fn of_screen(screen: desk_term::screen::Snapshot) -> SnapshotReply {
        SnapshotReply {
            screen,
            generation: 0,
            last_input_ms: None,
            canonical: false,
            state: None,
            history: None,
            history_start: None,
            history_first: None,
            history_end: None,
            foreground: None,
        }
    }
}

/// The history a SNAPSHOT_REQUEST asks for (docs/protocol.md §5.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryRequest {
    /// The 4-byte form: the newest `n` lines, as many of them as fit in one frame (the oldest
    /// are left out). What clients that do not page ask.
    Newest(u32),
    /// The 12-byte form: one page, at most `lines` lines numbered `from` on (from the oldest
    /// the session holds when `from` is older), as many as fit in a page.
    Page { lines: u32, from: u64 },
}

/// A decoded frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub len: u32,
    pub kind: FrameType,
    pub flags: u8,
}

/// One frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    Hello {
        version: u16,
        role: Role,
        cols: u16,
        rows: u16,
        /// The client asks for a status line when it is shown a view of another size
        /// ([`crate::HELLO_STATUS_LINE`]).
        status_line: bool,
        /// The client always takes a view, even at the session's size ([`crate::HELLO_VIEW`]).
        view: bool,
    },
    Welcome {
        version: u16,
        info: Box<SessionInfo>,
    },
    Input(Vec<u8>),
    Resize {
        cols: u16,
        rows: u16,
    },
    Output(Vec<u8>),
    Keyframe {
        more: bool,
        data: Vec<u8>,
    },
    /// `history`: which history lines the SNAPSHOT should carry; `None` is the empty payload
    /// (none).
    SnapshotRequest {
        history: Option<HistoryRequest>,
    },
    Snapshot(Box<SnapshotReply>),
    /// A session event; a JSON object whose schema belongs to the event module.
    Event(serde_json::Map<String, serde_json::Value>),
    Detach,
    Exit {
        status: ExitStatus,
        escalated: bool,
    },
    Error {
        code: ErrorCode,
        message: String,
    },
    Ping(u64),
    Pong(u64),
    /// Signal the child's process group; escalate to SIGKILL after `grace_ms` if it is still
    /// alive (0: never escalate).
    Signal {
        signal: u8,
        grace_ms: u32,
    },
    /// An agent hook fired (sent by `desk hook`): a JSON object with `payload` (the hook's
    /// own JSON) and optionally `generation` (the session generation the hook belongs to).
    Hook(serde_json::Map<String, serde_json::Value>),
    /// A local client's terminal handed to the master and back (version 3, docs/protocol.md
    /// §5.16): the master then reads the keys and writes the screen itself, one process hop
    /// less each way.
    Terminal(TerminalOp),
}

/// What a TERMINAL frame says (its payload's first byte). A client hands its terminal over
/// with `Take` (the descriptor rides along as `SCM_RIGHTS`); the master answers `Taken` after
/// every stream frame it sent the socket so far, and waits for `Ready` (the client has written
/// all of those and stopped reading the terminal) before it reads or writes the terminal. It
/// gives the terminal back with `Give`, carrying the input it read from the first key the
/// client keeps for itself on. While the master holds the terminal, the client's own drawing
/// reaches it as `Paint` (written between whole frames), and the master says `Redrawn` after a
/// repaint that wiped the client's drawing (a keyframe, a switch of screen).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TerminalOp {
    /// Client to master: here is my terminal; give it back on any of these keys (their plain
    /// control bytes, also in the kitty keyboard protocol's form).
    Take { keys: Vec<u8> },
    /// Master to client: every stream frame before this one came over the socket; none after.
    Taken,
    /// Client to master: all of that is on the terminal and the client no longer reads it.
    Ready,
    /// Master to client: the terminal is the client's again; these bytes were read from it and
    /// not used (they start with a kept key), and stream frames come over the socket again.
    Give(Vec<u8>),
    /// Client to master: bytes of the client's own (its status line, a bell) for the terminal.
    Paint(Vec<u8>),
    /// Master to client: the terminal was redrawn, the client's drawing with it.
    Redrawn,
}

impl TerminalOp {
    /// The op byte that opens a TERMINAL payload.
    pub fn code(&self) -> u8 {
        match self {
            TerminalOp::Take { .. } => 1,
            TerminalOp::Taken => 2,
            TerminalOp::Ready => 3,
            TerminalOp::Give(_) => 4,
            TerminalOp::Paint(_) => 5,
            TerminalOp::Redrawn => 6,
        }
    }
}

impl Frame {
    pub fn kind(&self) -> FrameType {
        match self {
            Frame::Hello { .. } => FrameType::Hello,
            Frame::Welcome { .. } => FrameType::Welcome,
            Frame::Input(_) => FrameType::Input,
            Frame::Resize { .. } => FrameType::Resize,
            Frame::Output(_) => FrameType::Output,
            Frame::Keyframe { .. } => FrameType::Keyframe,
            Frame::SnapshotRequest { .. } => FrameType::SnapshotRequest,
            Frame::Snapshot(_) => FrameType::Snapshot,
            Frame::Event(_) => FrameType::Event,
            Frame::Detach => FrameType::Detach,
            Frame::Exit { .. } => FrameType::Exit,
            Frame::Error { .. } => FrameType::Error,
            Frame::Ping(_) => FrameType::Ping,
            Frame::Pong(_) => FrameType::Pong,
            Frame::Signal { .. } => FrameType::Signal,
            Frame::Hook(_) => FrameType::Hook,
            Frame::Terminal(_) => FrameType::Terminal,
        }
    }

    /// An ERROR frame, with the message cut to the protocol's bound on a character boundary.
    pub fn error(code: ErrorCode, message: impl Into<String>) -> Frame {
        let mut message = message.into();
        let end = desk_term::text::cut_bytes(&message, super::MAX_ERROR_MESSAGE).len();
        message.truncate(end);
        Frame::Error { code, message }
    }
}

/// Why bytes could not be decoded into a frame. The stream cannot be resynchronised after any
/// of these: a master answers with an ERROR frame carrying [`DecodeError::code`] and closes; a
/// client closes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("frame declares a {len}-byte payload; the limit is {limit} bytes")]
    TooLarge { len: u32, limit: usize },
    #[error("unknown frame type 0x{0:02x}")]
    UnknownType(u8),
    #[error("{kind} frame has reserved bits set (flags 0x{flags:02x}, reserved 0x{reserved:04x})")]
    Reserved { kind: FrameType, flags: u8, reserved: u16 },
    #[error("malformed {kind} frame: {reason}")]
    Malformed { kind: FrameType, reason: String },
}

impl DecodeError {
    /// The code of the ERROR frame that answers this failure. A HELLO whose payload is wrong
    /// failed the handshake, so it gets `BadHello` rather than the generic `Malformed`.
    pub fn code(&self) -> ErrorCode {
        match self {
            DecodeError::TooLarge { .. } => ErrorCode::TooLarge,
            DecodeError::UnknownType(_) => ErrorCode::UnknownType,
            DecodeError::Malformed { kind: FrameType::Hello, .. } => ErrorCode::BadHello,
            DecodeError::Reserved { .. } | DecodeError::Malformed { .. } => ErrorCode::Malformed,
        }
    }
}
