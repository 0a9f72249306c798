//! The state of a session's agent as it crosses process boundaries: the three axes, each with its
//! value, since when and the evidence behind it.
//!
//! Owns the vocabulary only; the authority that decides these values lives in desk-core. These
//! types appear in WELCOME and SNAPSHOT frames, in the daemon's answers and in `--json` output,
//! so a change here is a protocol change.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lifecycle {
    Starting,
    Running,
    Exited,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activity {
    Working,
    Idle,
    Blocked,
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", content = "reason", rename_all = "snake_case")]
pub enum Health {
    Ok,
    Degraded(String),
}

impl Lifecycle {
    pub fn as_str(self) -> &'static str {
        match self {
            Lifecycle::Starting => "starting",
            Lifecycle::Running => "running",
            Lifecycle::Exited => "exited",
        }
    }
}

impl Activity {
    pub fn as_str(self) -> &'static str {
        match self {
            Activity::Working => "working",
            Activity::Idle => "idle",
            Activity::Blocked => "blocked",
            Activity::Unknown => "unknown",
        }
    }
}

impl Health {
    pub fn as_str(&self) -> String {
        match self {
            Health::Ok => "ok".into(),
            Health::Degraded(reason) => format!("degraded: {reason}"),
        }
    }
}

/// The evidence behind an axis value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// `hook`, `screen`, `title`, `notification`, `output`, `mode`, `process`, `lease`, `none`.
    pub source: String,
    /// The rule, hook event or condition, in a few words.
    pub detail: String,
    /// Unix ms when this evidence was observed.
    pub at_ms: u64,
}

/// One axis: its value, since when, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AxisView<T> {
    pub value: T,
    pub since_ms: u64,
    pub evidence: Evidence,
}

/// The whole state, as `desk ls`, `desk explain` and the daemon see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateView {
    pub provider: String,
    pub lifecycle: AxisView<Lifecycle>,
    pub activity: AxisView<Activity>,
    /// What a blocked agent waits for (`approval`, `question`).
    pub wait: Option<String>,
    pub health: AxisView<Health>,
    /// Whether the TUI is up and accepting input (bracketed paste on, a session-start hook,
    /// or output quiet after start).
    pub ready: bool,
    /// Unix ms of the last output, if any.
    pub last_output_ms: Option<u64>,
    /// Unix ms of the last hook fact, if any.
    pub last_hook_ms: Option<u64>,
    /// Where the provider rules came from.
    pub rules: String,
}
