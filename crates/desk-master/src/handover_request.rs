//! A handover (`desk upgrade`) asked for and waiting for its quiet point: what the loop holds
//! between the request and the exec (`super::handover` carries it out). A leaf: it names no
//! part of the loop, so the loop can hold one without importing the handover.

use mio::Token;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long a handover waits for a quiet point (the screen model outside an escape sequence).
/// A child writes whole sequences in well under a millisecond, even under a flood; one that
/// stays inside one for 2 s is wedged or writing a huge OSC string, and the operator is better
/// told to try again than kept waiting.
pub(super) const QUIET_POINT_WITHIN: Duration = Duration::from_secs(2);

/// A handover asked for and not yet carried out.
#[derive(Debug)]
pub(super) struct Request {
    /// The client that asked, answered when it is done or refused.
    pub client: Token,
    /// The binary to execute, and the arguments before the master's own.
    pub binary: PathBuf,
    pub args: Vec<String>,
    /// When waiting for a quiet point gives up.
    pub deadline: Instant,
}
