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

    /// The health [`Health::as_str`] wrote; `None` for any other word.
    pub fn from_word(word: &str) -> Option<Health> {
        match word {
            "ok" => Some(Health::Ok),
            _ => word.strip_prefix("degraded: ").map(|reason| Health::Degraded(reason.into())),
        }
    }
}

/// What kind of evidence set an axis: its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceSource {
    /// An agent hook (`desk hook`).
    Hook,
    /// The program's own state report in its output (OSC 7501).
    Report,
    /// A provider screen rule.
    Screen,
    /// A provider title rule.
    Title,
    /// A provider notification rule (OSC 9 / 777).
    Notification,
    /// Output flow (quiet after start).
    Output,
    /// A terminal mode switch (bracketed paste).
    Mode,
    /// The process itself: started, exited.
    Process,
    /// Working evidence that was not renewed.
    Lease,
    /// The ready check: no ready signal came.
    Ready,
    /// Nothing yet.
    None,
}

impl EvidenceSource {
    /// The name in JSON and in `desk explain`.
    pub fn as_str(self) -> &'static str {
        match self {
            EvidenceSource::Hook => "hook",
            EvidenceSource::Report => "report",
            EvidenceSource::Screen => "screen",
            EvidenceSource::Title => "title",
            EvidenceSource::Notification => "notification",
            EvidenceSource::Output => "output",
            EvidenceSource::Mode => "mode",
            EvidenceSource::Process => "process",
            EvidenceSource::Lease => "lease",
            EvidenceSource::Ready => "ready",
            EvidenceSource::None => "none",
        }
    }
}

impl std::fmt::Display for EvidenceSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The evidence behind an axis value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub source: EvidenceSource,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_sources_serialize_as_their_names() {
        use EvidenceSource::*;
        let all = [Hook, Report, Screen, Title, Notification, Output, Mode, Process, Lease, Ready, None];
        let names = [
            "hook",
            "report",
            "screen",
            "title",
            "notification",
            "output",
            "mode",
            "process",
            "lease",
            "ready",
            "none",
        ];
        for (source, name) in all.into_iter().zip(names) {
            assert_eq!(source.as_str(), name);
            assert_eq!(serde_json::to_string(&source).unwrap(), format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<EvidenceSource>(&format!("\"{name}\"")).unwrap(), source);
        }
        let e = Evidence { source: Screen, detail: "idle-prompt".into(), at_ms: 7 };
        assert_eq!(serde_json::to_string(&e).unwrap(), r#"{"source":"screen","detail":"idle-prompt","at_ms":7}"#);
    }
}
