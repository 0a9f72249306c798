//! desk-wire: everything that crosses a process boundary between desk's programs.
//!
//! The frame codec (`codec`, `frame`) owns the byte layout of every frame of the protocol between
//! a session master and its clients, and has no sockets and no clocks. Beside it live the other
//! shared vocabularies: session events ([`events`]), hook event names ([`hook`]), events a client asks a master to record ([`operator`]), the agent state as reported ([`state`]), a
//! prompt's signature ([`prompt`]), the names every process passes to the others ([`names`]:
//! item ids, session names, channel names), the daemon's control messages ([`control`]) and what to
//! ask a master to read a session's history in pages ([`history`]), and the envelope that carries
//! many streams over one `ssh HOST desk relay` ([`relay`]). Codec and types only: no
//! sockets, no clock (the blocking clients that speak this protocol are desk-common's). May not
//! depend on desk-core or on any shell crate, nor on nix, libc or mio. A frame is an
//! 8-byte header (payload length, type, flags, reserved) followed by its payload; the layouts are
//! specified in `docs/protocol.md` and pinned by the vectors under `tests/vectors/wire/`.
//! Invariants: a declared payload length above [`MAX_PAYLOAD`] is refused as soon as the header is
//! seen, before any allocation; a decoder never buffers more than one frame plus one read; every
//! frame a decoder can produce `encode`s to bytes that decode back into an equal frame (JSON is
//! written in canonical form, so only an EVENT received in a longer-than-canonical spelling
//! can re-encode past the limit; see "JSON bodies" in the spec).
//!
//! Its place in the map: desk runs as three kinds of process — a master per session
//! (desk-master: the PTY, the screen model, the socket terminals attach to), the daemon (`desk
//! serve`, desk-daemon: prompt delivery, channels, notifications) and the CLI (`desk`, the desk
//! package: commands, `desk attach`, `desk dash`) — over a common shell (desk-common) and three
//! pure crates. Arrows run one way, and `tests/it/architecture.rs` checks each:
//!
//! ```text
//!   desk --> desk-daemon, desk-master --> desk-common --> desk-core --> desk-wire --> desk-term
//! ```
//!
//! Every process speaks this crate's types to the others: the CLI and the daemon to a master
//! in frames, the CLI to the daemon in control messages; the blocking clients that carry them
//! are desk-common's.

mod codec;
pub mod control;
pub mod events;
mod frame;
mod fuzz;
pub mod history;
pub mod hook;
pub mod names;
pub mod operator;
pub mod prompt;
#[cfg(test)]
mod proptests;
pub mod relay;
pub mod state;
#[cfg(test)]
mod vectors;

pub use codec::{FrameDecoder, decode_frame, decode_header, output_header};
pub use frame::{
    DecodeError, ErrorCode, ExitStatus, Foreground, Frame, FrameType, Header, HistoryRequest, Role, SessionInfo,
    SnapshotReply, TerminalOp,
};
#[doc(hidden)]
pub use fuzz::fuzz_check;

/// The newest version of the protocol this build speaks (docs/protocol.md §12). Version 2 is
/// version 1 with negotiation: a HELLO names the newest version its client speaks, and a master
/// of version 2 or later answers WELCOME in the lower of that and its own, so that a new desk
/// reaches the masters an older one started, and an old client reaches a new master. Masters of
/// version 1 do not negotiate: they refuse every HELLO but 1 with `UNSUPPORTED_VERSION`, so a
/// client says HELLO 1 to them ([`hello_version`]). Version 3 adds TERMINAL frames: a local
/// client may hand its terminal to the master ([`TerminalOp`]); a connection of version 2 or
/// less never sees one.
pub const PROTOCOL_VERSION: u16 = 3;

/// The first version with TERMINAL frames.
pub const TERMINAL_VERSION: u16 = 3;

/// The oldest version this build speaks: every frame of version 1 is read and written as it was.
pub const OLDEST_PROTOCOL_VERSION: u16 = 1;

/// A master's answer to a HELLO of `hello`, when the master speaks versions up to `speaks`: the
/// version of the connection (its WELCOME's), or `None` for `UNSUPPORTED_VERSION`. Version 1's
/// rule is kept for a master that speaks only 1 (exactly one version, no negotiation).
pub fn negotiate(speaks: u16, hello: u16) -> Option<u16> {
    if speaks <= 1 {
        return (hello == speaks).then_some(speaks);
    }
    (hello >= OLDEST_PROTOCOL_VERSION).then(|| hello.min(speaks))
}

/// The version a client says HELLO in to a master whose session record names the newest
/// version it speaks (`Some`), or was written by a master of version 1, which names none
/// (`None`): the lower of that and this build's.
pub fn hello_version(master_speaks: Option<u16>) -> u16 {
    master_speaks.unwrap_or(1).clamp(OLDEST_PROTOCOL_VERSION, PROTOCOL_VERSION)
}

/// Whether a client that said HELLO `sent` accepts a WELCOME of `welcome`: any version this
/// build speaks, up to the one it asked for.
pub fn welcome_accepted(sent: u16, welcome: u16) -> bool {
    (OLDEST_PROTOCOL_VERSION..=sent.min(PROTOCOL_VERSION)).contains(&welcome)
}

/// First bytes of every HELLO payload, so a stray connection (or another program's protocol)
/// is told apart from a desk client before anything else is interpreted.
pub const MAGIC: [u8; 4] = *b"DESK";

/// Header size: u32 payload length, u8 type, u8 flags, u16 reserved.
pub const HEADER_LEN: usize = 8;

/// 1 MiB: the largest frame either side accepts. Output frames carry at most one PTY read
/// (64 KiB) and keyframes are split into chunks of this size, so only a broken or hostile peer
/// declares more; refusing at the header keeps each connection's buffer bounded.
pub const MAX_PAYLOAD: usize = 1 << 20;

/// Bound on the text of an ERROR frame: enough for a sentence naming what was wrong.
pub const MAX_ERROR_MESSAGE: usize = 1024;

/// Flag bit on KEYFRAME frames: more keyframe chunks follow.
pub const FLAG_MORE: u8 = 0x01;

/// HELLO option bit (payload byte 7): when this client's size differs from the session's, its
/// view gives the last row to a status line naming both sizes (`desk attach --status`). Every
/// other option bit is reserved and must be 0.
pub const HELLO_STATUS_LINE: u8 = 0x01;

/// HELLO option bit: this client always gets a view (never the raw output), even while its
/// size is the session's. `desk attach` sets it when it keeps a row of the terminal below the
/// size it reports for its own status line: a view only ever draws inside the size the client
/// reported, where the raw output may scroll the terminal or erase below the program's
/// screen.
pub const HELLO_VIEW: u8 = 0x02;

#[cfg(test)]
mod negotiation_tests {
    use super::*;

    #[test]
    fn a_master_of_this_version_answers_in_the_lower_version_and_refuses_only_what_it_never_spoke() {
        assert_eq!(negotiate(2, 1), Some(1), "an old client");
        assert_eq!(negotiate(2, 2), Some(2));
        assert_eq!(negotiate(2, 9), Some(2), "a newer client is answered in this version");
        assert_eq!(negotiate(2, 0), None);
    }

    #[test]
    fn a_master_of_version_1_keeps_its_rule_one_version_and_no_other() {
        assert_eq!(negotiate(1, 1), Some(1));
        assert_eq!(negotiate(1, 2), None);
        assert_eq!(negotiate(1, 0), None);
    }

    #[test]
    fn a_client_says_hello_in_what_the_master_speaks_and_accepts_a_welcome_no_newer_than_its_hello() {
        assert_eq!(hello_version(None), 1, "a version 1 master's record names no version");
        assert_eq!(hello_version(Some(2)), 2);
        assert_eq!(hello_version(Some(7)), PROTOCOL_VERSION);
        assert!(welcome_accepted(2, 1) && welcome_accepted(2, 2) && welcome_accepted(1, 1));
        assert!(!welcome_accepted(1, 2) && !welcome_accepted(2, 3) && !welcome_accepted(2, 0));
    }
}
