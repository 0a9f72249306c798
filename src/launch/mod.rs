//! Starting sessions, and what is kept about each start for the next one.
//!
//! Owns the one way a session is started ([`start`](mod@start): `desk new`, `desk up`, `desk restart` and,
//! through `desk restart`, the daemon's supervisor), the conversation each generation's agent
//! reported and the resume a restart makes of it ([`conversation`]), the systemd user scope a
//! master is started in where there is one ([`scope`]), and a session's fleet facts as `desk
//! ls` and the dashboard show them ([`view`]). The record each start leaves (the launch, and
//! the operator's stop) is `desk_common::launch_record`, because the daemon's supervisor reads
//! it too; the decisions (which conversation, which flags) are desk-core's
//! (`desk_core::fleet::resume`); this module reads and writes the files they are made from.
//! CLI-only: the daemon never starts a master itself (its supervisor runs `desk restart`).

pub mod conversation;
mod scope;
mod start;
pub(crate) use start::master_command;
pub mod view;

pub use start::{FleetFacts, StartRequest, Started, agent_not_found, needs_daemon, start};

/// The config variables of desk's own environment a first start passes on
/// ([`desk_common::launch_record::LaunchRecord::inherited`]), minus those the start sets itself.
pub fn inherited_config(
    set: &[(std::ffi::OsString, std::ffi::OsString)],
) -> std::collections::BTreeMap<String, String> {
    conversation::CONFIG_VARIABLES
        .iter()
        .filter(|k| !set.iter().any(|(s, _)| s == std::ffi::OsStr::new(k)))
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect()
}
