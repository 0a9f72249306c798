//! What `desk up` and `desk down` do to each declared session.
//!
//! Owns the comparison of a declared session ([`Launch`]: its provider, command, working
//! directory and environment, as desk would start it) with what runs under its name, and the
//! step that follows: start what is not running, leave alone what runs as declared, report what
//! runs differently (and recreate it only when asked), never touch a master that does not
//! answer. Invariants: a running session is never stopped or restarted by `up` without
//! `--recreate`; the comparison ignores what desk adds itself (hook wiring, the resume and
//! session-id flags of a restart); environment differences are reported by name only, never by
//! value (they may be secrets). Pure.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::fleet::resume::strip_resume;
use crate::provider::Provider;

/// A session as desk starts it: what `desk up` compares, and what a launch record keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launch {
    pub provider: Provider,
    /// The command as the user means it: without desk's hook wiring and resume flags.
    pub command: Vec<String>,
    /// The absolute working directory.
    pub cwd: String,
    /// The variables set for it beyond desk's own environment.
    pub env: BTreeMap<String, String>,
}

/// What runs under a declared session's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// A master answered. `launch`: what its own launch record says it was started with (for
    /// this generation), else what the master reports (`env` unknown).
    Running { generation: u32, launch: Launch, env_known: bool },
    /// A master is there but does not answer (stopped, wedged).
    Unresponsive,
    /// Nothing runs: never started, exited, or lost.
    Down,
}

/// One way a running session differs from its declaration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "what", rename_all = "kebab-case")]
pub enum Difference {
    Provider {
        running: Provider,
        declared: Provider,
    },
    Command {
        running: Vec<String>,
        declared: Vec<String>,
    },
    Cwd {
        running: String,
        declared: String,
    },
    /// Environment variables set, unset or changed (names only).
    Env {
        names: Vec<String>,
    },
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Difference::Provider { running, declared } => write!(f, "provider: runs {running}, declared {declared}"),
            Difference::Command { running, declared } => {
                write!(f, "command: runs `{}`, declared `{}`", running.join(" "), declared.join(" "))
            }
            Difference::Cwd { running, declared } => write!(f, "cwd: runs in {running}, declared {declared}"),
            Difference::Env { names } => write!(f, "env: {} differ", names.join(", ")),
        }
    }
}

/// What `desk up` does to one declared session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "step", rename_all = "kebab-case")]
pub enum UpStep {
    /// Not running: start it.
    Start,
    /// Runs as declared: nothing to do.
    Keep { generation: u32 },
    /// Runs, but not as declared: left alone and reported (`--recreate` restarts it).
    Differs { generation: u32, differences: Vec<Difference> },
    /// Runs, not as declared, and `--recreate` was given: stop it, start it as declared.
    Recreate { generation: u32, differences: Vec<Difference> },
    /// Its master does not answer: left alone.
    Unresponsive,
}

impl UpStep {
    /// Whether the step changes anything.
    pub fn acts(&self) -> bool {
        matches!(self, UpStep::Start | UpStep::Recreate { .. })
    }
}

/// What differs between a running session and its declaration.
pub fn differences(running: &Launch, env_known: bool, declared: &Launch) -> Vec<Difference> {
    let mut out = Vec::new();
    if running.provider != declared.provider {
        out.push(Difference::Provider { running: running.provider, declared: declared.provider });
    }
    let (r, d) = (strip_resume(running.provider, &running.command), strip_resume(declared.provider, &declared.command));
    if r != d {
        out.push(Difference::Command { running: r, declared: d });
    }
    if running.cwd != declared.cwd {
        out.push(Difference::Cwd { running: running.cwd.clone(), declared: declared.cwd.clone() });
    }
    if env_known {
        let mut names: Vec<String> = running
            .env
            .iter()
            .filter(|(k, v)| declared.env.get(*k) != Some(*v))
            .map(|(k, _)| k.clone())
            .chain(declared.env.keys().filter(|k| !running.env.contains_key(*k)).cloned())
            .collect();
        names.sort();
        names.dedup();
        if !names.is_empty() {
            out.push(Difference::Env { names });
        }
    }
    out
}

/// The step `desk up` takes for a declared session.
pub fn plan_up(declared: &Launch, observed: &Observed, recreate: bool) -> UpStep {
    match observed {
        Observed::Down => UpStep::Start,
        Observed::Unresponsive => UpStep::Unresponsive,
        Observed::Running { generation, launch, env_known } => {
            let differences = differences(launch, *env_known, declared);
            match (differences.is_empty(), recreate) {
                (true, _) => UpStep::Keep { generation: *generation },
                (false, false) => UpStep::Differs { generation: *generation, differences },
                (false, true) => UpStep::Recreate { generation: *generation, differences },
            }
        }
    }
}

/// What `desk down` does to one declared session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DownStep {
    /// It runs: stop it (TERM, then KILL after the grace period, as `desk kill`).
    Stop,
    /// Nothing runs.
    AlreadyDown,
    /// Its master does not answer: it is signalled like any other (the master handles the
    /// escalation once it runs again), and reported.
    Unresponsive,
}

pub fn plan_down(observed: &Observed) -> DownStep {
    match observed {
        Observed::Running { .. } => DownStep::Stop,
        Observed::Unresponsive => DownStep::Unresponsive,
        Observed::Down => DownStep::AlreadyDown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(command: &[&str]) -> Launch {
        Launch {
            provider: Provider::Claude,
            command: command.iter().map(|s| s.to_string()).collect(),
            cwd: "/w".into(),
            env: BTreeMap::from([("A".into(), "1".into())]),
        }
    }

    #[test]
    fn a_session_that_is_down_is_started_and_one_running_as_declared_is_kept() {
        let declared = launch(&["claude", "--model", "x"]);
        assert_eq!(plan_up(&declared, &Observed::Down, false), UpStep::Start);
        let running = Observed::Running { generation: 3, launch: declared.clone(), env_known: true };
        assert_eq!(plan_up(&declared, &running, false), UpStep::Keep { generation: 3 });
        assert!(!plan_up(&declared, &running, true).acts(), "--recreate leaves a session as declared alone");
    }

    #[test]
    fn desks_own_resume_words_are_not_a_difference() {
        let declared = launch(&["claude", "--model", "x"]);
        let resumed = launch(&["claude", "--model", "x", "--resume", "5a0e2f1c-6d3b-4e8a-9f21-0c7d4b9e3a18"]);
        let running = Observed::Running { generation: 4, launch: resumed, env_known: true };
        assert_eq!(plan_up(&declared, &running, false), UpStep::Keep { generation: 4 });
    }

    #[test]
    fn a_different_command_is_reported_and_recreated_only_when_asked() {
        let declared = launch(&["claude", "--model", "y"]);
        let running = Observed::Running { generation: 2, launch: launch(&["claude", "--model", "x"]), env_known: true };
        let step = plan_up(&declared, &running, false);
        let UpStep::Differs { differences, .. } = &step else { panic!("{step:?}") };
        assert_eq!(differences[0].to_string(), "command: runs `claude --model x`, declared `claude --model y`");
        assert!(!step.acts());
        assert!(matches!(plan_up(&declared, &running, true), UpStep::Recreate { generation: 2, .. }));
    }

    #[test]
    fn environment_differences_name_the_variables_not_their_values() {
        let mut declared = launch(&["claude"]);
        declared.env.insert("TOKEN".into(), "secret-2".into());
        let mut running = launch(&["claude"]);
        running.env.insert("TOKEN".into(), "secret-1".into());
        running.env.insert("OLD".into(), "x".into());
        let diffs = differences(&running, true, &declared);
        assert_eq!(diffs, vec![Difference::Env { names: vec!["OLD".into(), "TOKEN".into()] }]);
        assert!(!diffs[0].to_string().contains("secret"));
        // A master's own report carries no environment: nothing is claimed about it.
        assert!(differences(&running, false, &declared).is_empty());
    }

    #[test]
    fn an_unresponsive_master_is_left_alone_by_up_and_signalled_by_down() {
        let declared = launch(&["claude"]);
        assert_eq!(plan_up(&declared, &Observed::Unresponsive, true), UpStep::Unresponsive);
        assert_eq!(plan_down(&Observed::Unresponsive), DownStep::Unresponsive);
        assert_eq!(plan_down(&Observed::Down), DownStep::AlreadyDown);
    }
}
