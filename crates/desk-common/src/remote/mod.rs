//! Sessions on other hosts, over OpenSSH (docs/remote.md).
//!
//! Owns both ends of a remote link: how ssh is run ([`ssh`]), the local side of one `ssh HOST
//! desk relay` ([`link`]: a process that opens streams to the host's sessions, daemon and
//! commands and gets ordinary sockets and output back), the host's side ([`relay`]), and what a
//! host says of itself ([`HostFacts`]). The envelope both ends speak is desk_wire::relay.
//! Invariants: the host that runs a session is the only authority for it: nothing of a remote
//! session is kept, cached or replicated here; desk opens no port and stores no credential
//! (ssh's keys, agent and config do all of that); a host that cannot be reached, answers with
//! another desk or prints before the handshake is an error naming the host and what to do,
//! within a bounded time. May not depend on the CLI's, the master's or the daemon's crate.

mod flow;
pub mod link;
pub mod linkd;
pub mod relay;
pub mod ssh;

use serde::{Deserialize, Serialize};

use crate::paths::Paths;

/// What a host's relay says of the host (`desk hosts`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HostFacts {
    /// The host's desk version.
    pub desk_version: String,
    /// Its runtime directory (where its sockets are).
    pub runtime: String,
    /// Whether systemd keeps the user's manager (and the scopes masters run in) after the last
    /// login ends: `Some(false)` means a logout can stop the host's sessions; `None`: not a
    /// systemd host (masters run detached under setsid, which no logout stops).
    pub linger: Option<bool>,
    /// Whether the relay runs in a systemd user scope (so what it starts outlives the login).
    pub user_scope: bool,
    /// Sessions with a socket in its runtime directory.
    pub sessions: usize,
    /// The pid of the relay that answered (one per link: commands on the shared link of a host
    /// see the same one).
    #[serde(default)]
    pub relay_pid: u32,
}

impl HostFacts {
    /// This host's facts, as its relay reports them.
    pub fn of_this_host(paths: &Paths) -> HostFacts {
        HostFacts {
            desk_version: env!("CARGO_PKG_VERSION").to_string(),
            runtime: paths.runtime.display().to_string(),
            linger: linger(),
            user_scope: std::env::var_os("DESK_RELAY_SCOPED").is_some(),
            sessions: paths.session_names().map(|n| n.len()).unwrap_or(0),
            relay_pid: std::process::id(),
        }
    }
}

/// Whether logind lingers for this user: the file `loginctl enable-linger` creates
/// (`/var/lib/systemd/linger/USER`), read directly so that no bus is needed; `None` on a host
/// without systemd.
fn linger() -> Option<bool> {
    if !std::path::Path::new("/run/systemd/system").is_dir() {
        return None;
    }
    let uid = nix::unistd::geteuid();
    let user = nix::unistd::User::from_uid(uid).ok().flatten()?;
    Some(std::path::Path::new("/var/lib/systemd/linger").join(user.name).exists())
}
