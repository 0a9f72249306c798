//! A session's fleet facts as `desk ls` and the dashboard show them.
//!
//! Owns [`FleetView`]: the manifest that declares a session, its restart policy, what the
//! supervisor says of it while it is down (`failed: …`, `restarting in 4 s`, `stopped by …`),
//! the conversation its agent reported last and how its generation started (which conversation
//! it resumed, from which generation, or why it started afresh), and its worktree; and
//! [`declared_down`], the sessions a registered manifest declares that have never run here.
//! Read-only: from the launch record (or what a running master's info file carries of it), the
//! captures, the exit record and the daemon's supervision state, never from a master.

use serde::Serialize;

use desk_common::launch_record::{self, LaunchFacts, LaunchRecord};
use desk_common::paths::{Paths, SessionName};
use desk_core::fleet::resume::{self, ResumePlan};
use desk_core::fleet::supervise::{RestartPolicy, Supervisor};

/// The conversation an agent reported.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Reported {
    pub id: String,
    /// The generation whose agent reported it.
    pub generation: u32,
    /// Which evidence (`SessionStart(clear)`, `notify`, …).
    pub source: Option<String>,
}

/// See the module documentation.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FleetView {
    pub manifest: Option<String>,
    pub restart: RestartPolicy,
    /// While it is not running: why, or what the supervisor will do.
    pub health: Option<String>,
    /// The generation its launch record is of.
    pub generation: u32,
    /// How that generation started: the conversation it resumed, or why it started afresh
    /// (`None`: started as typed, `desk new`).
    pub start: Option<ResumePlan>,
    /// The conversation its agent reported last.
    pub conversation: Option<Reported>,
    pub worktree: Option<String>,
    pub group: Option<String>,
    pub labels: Vec<String>,
}

impl FleetView {
    /// A few words for a listing: the health while down, else how its generation started.
    pub fn note(&self) -> Option<String> {
        if let Some(health) = &self.health {
            return Some(health.clone());
        }
        match &self.start {
            Some(ResumePlan::Resume { conversation, from_generation }) => Some(format!(
                "generation {} resumed {} of generation {from_generation}",
                self.generation,
                short(conversation)
            )),
            _ => None,
        }
    }
}

/// The first 8 characters of a conversation id (after OpenCode's `ses_`): enough to tell them
/// apart in a listing; `--json` has the whole.
pub fn short(id: &str) -> String {
    let body = id.strip_prefix("ses_").unwrap_or(id);
    format!("{}{}…", if id.starts_with("ses_") { "ses_" } else { "" }, &body[..body.len().min(8)])
}

/// A session's fleet facts, when it has a launch record. `running`: its master answers;
/// `carried`: what its master's info file carries of the record (a running session only), so
/// the record is not read again.
pub fn of(
    paths: &Paths,
    name: &SessionName,
    running: bool,
    carried: Option<LaunchFacts>,
    supervision: &Supervisor,
    now_ms: u64,
) -> Option<FleetView> {
    let captures = || super::conversation::read(paths, name);
    of_with_captures(paths, name, running, carried, captures, supervision, now_ms)
}

/// [`of`], reading the session's captures with `captures` (`desk ls` reads them through its
/// open directories, [`super::conversation::read_in`]) once it has a launch record; captures
/// that cannot be read show no conversation.
pub fn of_with_captures(
    paths: &Paths,
    name: &SessionName,
    running: bool,
    carried: Option<LaunchFacts>,
    captures: impl FnOnce() -> anyhow::Result<super::conversation::Conversations>,
    supervision: &Supervisor,
    now_ms: u64,
) -> Option<FleetView> {
    let (facts, launch) = match carried.filter(|_| running) {
        Some(facts) => (facts, None),
        None => {
            let launch = launch_record::read(paths, name).ok().flatten()?;
            (launch.facts(), Some(launch))
        }
    };
    let conversation = captures().ok().and_then(|c| {
        c.latest().map(|capture| Reported {
            id: capture.conversation.clone().unwrap_or_default(),
            generation: capture.generation,
            source: capture.source.clone(),
        })
    });
    let health = match &launch {
        Some(launch) if !running => health_while_down(paths, name, launch, supervision, now_ms),
        _ => None,
    };
    Some(FleetView {
        manifest: facts.manifest.as_ref().map(|p| p.display().to_string()),
        restart: facts.restart,
        health,
        generation: facts.generation,
        start: facts.conversation,
        conversation,
        worktree: facts.worktree,
        group: facts.group,
        labels: facts.labels,
    })
}

/// What the supervisor says; or, when it says nothing (no daemon, policy `never`), a refusal of
/// the conversation the generation was started with, read from its exit.
fn health_while_down(
    paths: &Paths,
    name: &SessionName,
    launch: &LaunchRecord,
    supervision: &Supervisor,
    now_ms: u64,
) -> Option<String> {
    if let Some(health) = supervision.get(name.as_str()).and_then(|s| s.health(now_ms)) {
        return Some(health);
    }
    if let Some(by) = launch_record::stopped_by(paths, name, launch.generation) {
        return Some(format!("stopped by {by}"));
    }
    launch.resumed()?;
    let exit = desk_common::session::read_exit(&paths.session(name))
        .ok()
        .flatten()
        .filter(|e| e.generation == launch.generation)?;
    let code = match exit.status {
        desk_wire::ExitStatus::Code(c) => Some(c),
        desk_wire::ExitStatus::Signal(_) => None,
    };
    resume::rejection(launch.provider, code, exit.last_screen.as_deref().unwrap_or(&[]))
        .map(|m| format!("failed: resume rejected: {m}"))
}

/// The sessions a registered manifest declares that have no files here (never started, or
/// removed with `desk rm`), with the manifest: shown `down`.
pub fn declared_down(paths: &Paths, known: &[String]) -> Vec<(String, desk_core::fleet::manifest::SessionSpec)> {
    crate::manifest::declared(paths)
        .into_iter()
        .filter(|(_, spec)| !known.contains(&spec.name))
        .map(|(path, spec)| (path.display().to_string(), spec))
        .collect()
}
