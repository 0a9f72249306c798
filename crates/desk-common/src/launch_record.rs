//! What a session was started with, and who stopped it.
//!
//! Owns two small durable files in a session's state directory: `launch.json`, the
//! [`LaunchRecord`] every start writes before its master runs (the command as the user means
//! it and as it ran, the directory, the environment desk set, size, provider, restart policy,
//! manifest and worktree, and which conversation it resumed or why it started afresh) — what
//! `desk restart` starts again when no manifest declares the session, what `desk up` compares
//! with, and what the daemon's supervisor reads; and `stopped.json`, the [`StopMark`] `desk
//! kill` and `desk down` write before they signal a session, so its end is known to be the
//! operator's and is never restarted. Also [`LaunchFacts`], the part of a launch record a
//! listing shows, which a running master carries in its info file. Invariants: both are
//! written atomically and mode 0600 (the environment may hold secrets) — the stop mark durably
//! before the signal; the launch record without waiting on the disk, made durable by the master
//! it starts before that master serves anyone (`desk_master`'s `durable_start`) —; each names the generation
//! it is about, so a record of an older generation never speaks for a newer one. Here, in the
//! common shell, because the CLI writes both and the daemon's restart supervisor reads them;
//! what a start does with them is the CLI's (`launch` in the desk package).

use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::paths::{Paths, SessionName};
use desk_core::fleet::plan::Launch;
use desk_core::fleet::resume::ResumePlan;
use desk_core::fleet::supervise::RestartPolicy;
use desk_core::provider::Provider;

/// Who started a generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StartedBy {
    /// A person: `desk new`, `desk up`, `desk restart`.
    Operator { command: String },
    /// The daemon's supervisor, restarting an ended generation.
    Supervisor { replacing: u32 },
}

/// A per-session git worktree the session runs in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorktreeUse {
    /// The repository's top-level directory (its main checkout).
    pub repo: String,
    pub branch: String,
    /// The worktree's directory.
    pub path: String,
}

/// What a generation was started with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchRecord {
    pub generation: u32,
    pub started_at_ms: u64,
    pub started_by: StartedBy,
    pub provider: Provider,
    /// The command as the user means it (declared, or typed to `desk new`).
    pub command: Vec<String>,
    /// The command desk ran (with its resume words; without its hook wiring).
    pub ran: Vec<String>,
    pub cwd: String,
    /// The variables desk set beyond its own environment.
    pub env: BTreeMap<String, String>,
    /// The variables of desk's own environment that decide where the agent keeps its
    /// conversations (the CLI's `launch::conversation::CONFIG_VARIABLES`), as the session's
    /// first start had them: every restart sets them again, so the agent looks in the same
    /// place whoever restarts it.
    #[serde(default)]
    pub inherited: BTreeMap<String, String>,
    pub cols: u16,
    pub rows: u16,
    pub size_policy: String,
    pub history: usize,
    pub log_cap: u64,
    #[serde(default)]
    pub restart: RestartPolicy,
    /// The manifest that declares the session, if one does.
    #[serde(default)]
    pub manifest: Option<PathBuf>,
    #[serde(default)]
    pub worktree: Option<WorktreeUse>,
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub labels: Vec<String>,
    /// The conversation this generation resumed, or why it started afresh (`None`: started as
    /// typed, `desk new`).
    #[serde(default)]
    pub conversation: Option<ResumePlan>,
}

/// What `desk ls` and the dashboard show of a launch record while its generation runs: a running
/// master carries these in its info file (`<runtime>/<name>.info`), so a listing of a fleet does not
/// read every session's launch record again. Only a start writes a launch record, and a start
/// is refused while the name's master runs, so the facts a master carries are its record's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchFacts {
    pub generation: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<PathBuf>,
    #[serde(default)]
    pub restart: RestartPolicy,
    /// The worktree's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<ResumePlan>,
}

impl LaunchRecord {
    /// What a listing shows of it ([`LaunchFacts`]).
    pub fn facts(&self) -> LaunchFacts {
        LaunchFacts {
            generation: self.generation,
            manifest: self.manifest.clone(),
            restart: self.restart,
            worktree: self.worktree.as_ref().map(|w| w.path.clone()),
            group: self.group.clone(),
            labels: self.labels.clone(),
            conversation: self.conversation.clone(),
        }
    }

    /// The launch as `desk up` compares it.
    pub fn launch(&self) -> Launch {
        Launch { provider: self.provider, command: self.command.clone(), cwd: self.cwd.clone(), env: self.env.clone() }
    }

    /// The conversation it resumed, if it resumed one.
    pub fn resumed(&self) -> Option<(&str, u32)> {
        match &self.conversation {
            Some(ResumePlan::Resume { conversation, from_generation }) => Some((conversation, *from_generation)),
            _ => None,
        }
    }
}

/// Where a session's launch record is (`<state>/sessions/<name>/launch.json`).
pub fn launch_file(paths: &Paths, name: &SessionName) -> PathBuf {
    paths.session_state(name).join("launch.json")
}

fn stop_file(paths: &Paths, name: &SessionName) -> PathBuf {
    paths.session_state(name).join("stopped.json")
}

/// `launch.json`: version 1 (a record without a `version` key is version 1: the records written
/// before versions were stamped are read as they are).
pub const LAUNCH_FORMAT: crate::format::Format = crate::format::Format::first("launch record");

/// `stopped.json`: version 1, like [`LAUNCH_FORMAT`].
pub const STOP_FORMAT: crate::format::Format = crate::format::Format::first("stop mark");

/// The session's last launch record, if it has one. A record this desk cannot read (damaged,
/// or a newer desk's) is an error naming it; the next launch replaces it.
pub fn read(paths: &Paths, name: &SessionName) -> Result<Option<LaunchRecord>> {
    crate::session::read_record(&LAUNCH_FORMAT, &launch_file(paths, name))
}

pub fn write(paths: &Paths, name: &SessionName, record: &LaunchRecord) -> Result<()> {
    paths.ensure_session_state(name)?;
    crate::session::write_record(&LAUNCH_FORMAT, &launch_file(paths, name), record)
}

/// The next generation of `name` (`crate::session::allocate_generation`), above the one its
/// launch record names too: what a start allocates. Call with the name's lock held.
pub fn allocate_generation(paths: &Paths, name: &SessionName, lock: &crate::session::NameLock) -> Result<u32> {
    let launched = read(paths, name).ok().flatten().map_or(0, |l| l.generation);
    crate::session::allocate_generation_above(paths, name, lock, launched)
}

/// [`write()`] without waiting on the disk: a start writes its record so, and the master it
/// starts makes it durable (with the generation counter) before it serves anyone
/// (`desk_master`'s `durable_start`).
pub fn write_volatile(paths: &Paths, name: &SessionName, record: &LaunchRecord) -> Result<()> {
    paths.ensure_session_state(name)?;
    crate::fsutil::replace_volatile(&launch_file(paths, name), &crate::format::encode(&LAUNCH_FORMAT, record)?)
}

/// The operator stopped a generation (`desk kill`, `desk down`, `desk restart`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopMark {
    pub generation: u32,
    pub at_ms: u64,
    pub by: String,
}

/// Record, before signalling it, that the operator stops `generation`.
pub fn mark_stopped(paths: &Paths, name: &SessionName, generation: u32, by: &str) -> Result<()> {
    paths.ensure_session_state(name)?;
    let mark = StopMark { generation, at_ms: crate::clock::now_ms(), by: by.to_string() };
    crate::session::write_record(&STOP_FORMAT, &stop_file(paths, name), &mark)
}

/// Who stopped `generation`, if the operator did. A mark this desk cannot read is set aside and
/// named in a warning (the stop is then not known: the supervisor judges the end by the exit).
pub fn stopped_by(paths: &Paths, name: &SessionName, generation: u32) -> Option<String> {
    let mark: StopMark = crate::session::read_record_or_set_aside(&STOP_FORMAT, &stop_file(paths, name))?;
    (mark.generation == generation).then_some(mark.by)
}
