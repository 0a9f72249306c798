//! The failure vocabulary every `desk` command answers in.
//!
//! Owns [`ErrorCode`] (why a command failed, as the stable string a `--json` caller branches on,
//! and the exit code that goes with it) and [`Failure`], the error that carries both up to the
//! process edge. Invariant: every code has a documented exit code (2: you asked for something
//! that cannot be; 1: the operation failed) and appears in [`ErrorCode::ALL`]. Printing the
//! envelope is the CLI's (`desk::cli::output`); this module only names what went wrong, so any
//! crate that fails on a person's behalf (the user config, attach) can say so without reaching
//! into the CLI.

use std::fmt;

/// Why a command failed, as a stable string a script can branch on (`error.code`), and the
/// process exit code that goes with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// Bad arguments or input (exit 2).
    Usage,
    /// No session of that name (exit 2).
    NoSuchSession,
    /// No item with that id or prefix (exit 2).
    NoSuchItem,
    /// An id prefix that starts several item ids (exit 2).
    AmbiguousId,
    /// No channel of that name (exit 2).
    NoSuchChannel,
    /// The author is not a member of the channel (exit 2).
    NotAMember,
    /// A post names an author the caller is not: another session, or (from inside a session)
    /// the operator or a person (exit 2).
    WrongAuthor,
    /// The session or daemon to create already exists (exit 2).
    AlreadyExists,
    /// The configuration file cannot be read or used (exit 2).
    BadConfig,
    /// The session exists but is not running (exit 1).
    NotRunning,
    /// `desk serve` is not running or did not answer (exit 1).
    DaemonUnavailable,
    /// The daemon refused the request: nothing was done (exit 1).
    Refused,
    /// A force typed (pasted again, pressed Enter) and the item is still not delivered; the
    /// message says what it did and how it ended (exit 1).
    NotDelivered,
    /// The session shows no dialog to answer (exit 1).
    NoDialog,
    /// The session's dialog is not the one the operator was shown: nothing was typed (exit 1).
    DialogChanged,
    /// Anything else that went wrong (exit 1).
    Failed,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Usage => "usage",
            ErrorCode::NoSuchSession => "no-such-session",
            ErrorCode::NoSuchItem => "no-such-item",
            ErrorCode::AmbiguousId => "ambiguous-id",
            ErrorCode::NoSuchChannel => "no-such-channel",
            ErrorCode::NotAMember => "not-a-member",
            ErrorCode::WrongAuthor => "wrong-author",
            ErrorCode::AlreadyExists => "already-exists",
            ErrorCode::BadConfig => "bad-config",
            ErrorCode::NotRunning => "not-running",
            ErrorCode::DaemonUnavailable => "daemon-unavailable",
            ErrorCode::Refused => "refused",
            ErrorCode::NotDelivered => "not-delivered",
            ErrorCode::NoDialog => "no-dialog",
            ErrorCode::DialogChanged => "dialog-changed",
            ErrorCode::Failed => "failed",
        }
    }

    /// The documented exit code: 2 for "you asked for something that cannot be" (usage, no
    /// such thing, already exists), 1 for "the operation failed".
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorCode::Usage | ErrorCode::NoSuchSession | ErrorCode::NoSuchItem | ErrorCode::AmbiguousId => 2,
            ErrorCode::AlreadyExists | ErrorCode::BadConfig | ErrorCode::NoSuchChannel | ErrorCode::NotAMember => 2,
            ErrorCode::WrongAuthor => 2,
            ErrorCode::NotRunning | ErrorCode::DaemonUnavailable | ErrorCode::Refused | ErrorCode::Failed => 1,
            ErrorCode::NotDelivered => 1,
            ErrorCode::NoDialog | ErrorCode::DialogChanged => 1,
        }
    }

    /// The code for a bare exit code, where the caller did not say more.
    pub fn from_exit(code: i32) -> ErrorCode {
        if code == 2 { ErrorCode::Usage } else { ErrorCode::Failed }
    }

    /// Every code, for the contract test and the docs.
    pub const ALL: [ErrorCode; 16] = [
        ErrorCode::Usage,
        ErrorCode::NoSuchSession,
        ErrorCode::NoSuchItem,
        ErrorCode::AmbiguousId,
        ErrorCode::NoSuchChannel,
        ErrorCode::NotAMember,
        ErrorCode::WrongAuthor,
        ErrorCode::AlreadyExists,
        ErrorCode::BadConfig,
        ErrorCode::NotRunning,
        ErrorCode::DaemonUnavailable,
        ErrorCode::Refused,
        ErrorCode::NotDelivered,
        ErrorCode::NoDialog,
        ErrorCode::DialogChanged,
        ErrorCode::Failed,
    ];
}

/// What the daemon's kind of failure is to a person: the CLI's codes of the same names, and a
/// request the daemon could not read (a bad id or name) is a usage error.
impl From<desk_wire::control::ErrorKind> for ErrorCode {
    fn from(kind: desk_wire::control::ErrorKind) -> ErrorCode {
        use desk_wire::control::ErrorKind;
        match kind {
            ErrorKind::BadRequest => ErrorCode::Usage,
            ErrorKind::NoSuchItem => ErrorCode::NoSuchItem,
            ErrorKind::Refused => ErrorCode::Refused,
            ErrorKind::NotDelivered => ErrorCode::NotDelivered,
            ErrorKind::Failed => ErrorCode::Failed,
        }
    }
}

/// An error that carries the exit code it should end the process with, and the stable code a
/// `--json` caller sees.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub kind: ErrorCode,
    pub message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// A failure with a bare exit code (2: usage, otherwise: failed).
pub fn failure(code: i32, message: impl Into<String>) -> anyhow::Error {
    Failure { code, kind: ErrorCode::from_exit(code), message: message.into() }.into()
}

/// A failure of a documented kind, with that kind's exit code.
pub fn fail(kind: ErrorCode, message: impl Into<String>) -> anyhow::Error {
    Failure { code: kind.exit_code(), kind, message: message.into() }.into()
}

/// The daemon's failure as a failure of the same kind, with its words.
pub fn from_control(e: desk_wire::control::ControlError) -> anyhow::Error {
    fail(e.kind.into(), e.message)
}
