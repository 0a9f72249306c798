//! What an agent's hook invocation means.
//!
//! Owns the translation from the JSON an agent hands its hook command (Claude Code's hook
//! input, Codex's notify payload, the events desk's OpenCode plugin forwards) into one typed
//! [`Fact`]. Invariants: pure and total — any JSON (or none) yields a fact, unknown events
//! become [`Fact::Ignored`], and the detail kept for display is bounded.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::provider::Provider;
pub use desk_wire::hook::HookEvent;

pub use desk_wire::prompt::{PromptSig, SIG_EDGE_CHARS};

/// Detail strings (a prompt's first line, a tool name, a notification) are cut to this many
/// characters: enough to recognise, small enough for every event and `desk explain`.
pub const DETAIL_CAP: usize = 120;

/// A typed fact from a hook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fact", rename_all = "snake_case")]
pub enum Fact {
    /// The agent's session started (it is ready for input).
    SessionStart,
    /// The agent's session ended.
    SessionEnd,
    /// The agent is working on a turn (a prompt was submitted, compaction started, ...).
    Working,
    /// The agent finished its turn and waits for input.
    Idle,
    /// The agent waits for the operator: an approval or a question.
    Blocked {
        wait: String,
    },
    ToolStart {
        tool: String,
    },
    ToolEnd {
        tool: String,
    },
    /// Evidence of life that does not change activity.
    Heartbeat,
    /// An event desk does not use.
    Ignored,
}

/// A hook invocation, interpreted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookFact {
    pub provider: Provider,
    /// The hook's own name for what happened (`UserPromptSubmit`, `agent-turn-complete`, ...).
    pub event: HookEvent,
    pub fact: Fact,
    pub detail: Option<String>,
    /// For a submitted prompt: what identifies the whole of it.
    pub prompt: Option<PromptSig>,
}

fn cut(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    desk_term::text::ellipsize(line, DETAIL_CAP)
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Interpret a hook payload from `provider`.
pub fn interpret(provider: Provider, payload: &Value) -> HookFact {
    let (event, fact, detail) = match provider {
        Provider::Codex => codex(payload),
        Provider::OpenCode => opencode(payload),
        // The demo agent sends Claude's hook input; a shell has no hooks of its own, and a
        // hook sent for it is read the same way.
        Provider::Claude | Provider::Demo | Provider::Shell => claude_style(payload),
    };
    let prompt = (event == HookEvent::UserPromptSubmit).then(|| detail.as_deref().map(PromptSig::of)).flatten();
    HookFact { provider, event, fact, detail: detail.map(|d| cut(&d)).filter(|d| !d.is_empty()), prompt }
}

/// Claude Code's hook input (also what the demo agent sends): `hook_event_name` and friends.
fn claude_style(p: &Value) -> (HookEvent, Fact, Option<String>) {
    let event = HookEvent::from_name(str_field(p, "hook_event_name").unwrap_or(""));
    let tool = || str_field(p, "tool_name").unwrap_or("tool").to_string();
    let (fact, detail) = match &event {
        HookEvent::SessionStart => match str_field(p, "source") {
            // A compaction restarts the session but the turn goes on.
            Some("compact") => (Fact::Working, Some("compact".to_string())),
            source => (Fact::SessionStart, source.map(String::from)),
        },
        HookEvent::SessionEnd => (Fact::SessionEnd, str_field(p, "reason").map(String::from)),
        HookEvent::UserPromptSubmit => (Fact::Working, str_field(p, "prompt").map(String::from)),
        HookEvent::PreToolUse => (Fact::ToolStart { tool: tool() }, None),
        HookEvent::PostToolUse | HookEvent::PostToolUseFailure => (Fact::ToolEnd { tool: tool() }, None),
        HookEvent::PreCompact => (Fact::Working, Some("compacting".to_string())),
        HookEvent::PermissionRequest => (Fact::Blocked { wait: "approval".into() }, Some(tool())),
        HookEvent::Notification => {
            let kind = str_field(p, "notification_type").unwrap_or("");
            let message = str_field(p, "message").unwrap_or("");
            let fact = match kind {
                "permission_prompt" => Fact::Blocked { wait: "approval".into() },
                "elicitation_dialog" => Fact::Blocked { wait: "question".into() },
                "idle_prompt" => Fact::Idle,
                // Older versions send no type; the message says what it is about.
                "" if message.contains("permission") => Fact::Blocked { wait: "approval".into() },
                "" if message.contains("waiting for your input") => Fact::Idle,
                _ => Fact::Heartbeat,
            };
            (fact, Some(message.to_string()))
        }
        HookEvent::Stop => (Fact::Idle, None),
        HookEvent::SubagentStop | HookEvent::SubagentStart => (Fact::Heartbeat, None),
        _ => (Fact::Ignored, None),
    };
    (event, fact, detail)
}

/// Codex's `notify` program gets `{"type": "agent-turn-complete", ...}`; Codex hooks (where the
/// installed version has them) use Claude's names, so those fall through to the Claude mapping.
fn codex(p: &Value) -> (HookEvent, Fact, Option<String>) {
    let Some(kind) = str_field(p, "type") else { return claude_style(p) };
    match HookEvent::from_name(kind) {
        HookEvent::AgentTurnComplete => {
            (HookEvent::AgentTurnComplete, Fact::Idle, str_field(p, "last-assistant-message").map(String::from))
        }
        HookEvent::ApprovalRequested => (HookEvent::ApprovalRequested, Fact::Blocked { wait: "approval".into() }, None),
        other => (other, Fact::Ignored, None),
    }
}

/// Events forwarded by desk's OpenCode plugin: `{"type": "<opencode event>", ...}`.
fn opencode(p: &Value) -> (HookEvent, Fact, Option<String>) {
    let kind = HookEvent::from_name(str_field(p, "type").unwrap_or(""));
    let fact = match &kind {
        HookEvent::SessionCreated => Fact::SessionStart,
        HookEvent::SessionIdle => Fact::Idle,
        HookEvent::SessionStatus => match p.pointer("/properties/status/type").and_then(Value::as_str) {
            Some("busy") => Fact::Working,
            Some("idle") => Fact::Idle,
            Some("retry") => Fact::Heartbeat,
            _ => Fact::Heartbeat,
        },
        HookEvent::PermissionAsked | HookEvent::PermissionUpdated => Fact::Blocked { wait: "approval".into() },
        HookEvent::PermissionReplied => Fact::Working,
        HookEvent::MessageUpdated | HookEvent::MessagePartUpdated => Fact::Heartbeat,
        HookEvent::ToolExecuteBefore => Fact::ToolStart { tool: str_field(p, "tool").unwrap_or("tool").into() },
        HookEvent::ToolExecuteAfter => Fact::ToolEnd { tool: str_field(p, "tool").unwrap_or("tool").into() },
        HookEvent::ChatMessage => Fact::Working,
        HookEvent::SessionError => Fact::Idle,
        _ => Fact::Ignored,
    };
    (kind, fact, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn claude_events_map_to_facts() {
        let f = |v: Value| interpret(Provider::Claude, &v).fact;
        assert_eq!(f(json!({"hook_event_name": "UserPromptSubmit", "prompt": "fix it"})), Fact::Working);
        assert_eq!(f(json!({"hook_event_name": "Stop"})), Fact::Idle);
        assert_eq!(f(json!({"hook_event_name": "SessionStart", "source": "startup"})), Fact::SessionStart);
        assert_eq!(f(json!({"hook_event_name": "SessionStart", "source": "compact"})), Fact::Working);
        assert_eq!(
            f(
                json!({"hook_event_name": "Notification", "notification_type": "permission_prompt", "message": "Claude needs your permission to use Bash"})
            ),
            Fact::Blocked { wait: "approval".into() }
        );
        assert_eq!(
            f(json!({"hook_event_name": "Notification", "message": "Claude needs your permission to use Bash"})),
            Fact::Blocked { wait: "approval".into() }
        );
        assert_eq!(
            f(json!({"hook_event_name": "PreToolUse", "tool_name": "Bash"})),
            Fact::ToolStart { tool: "Bash".into() }
        );
        assert_eq!(f(json!({"hook_event_name": "Whatever"})), Fact::Ignored);
        assert_eq!(f(json!("not an object")), Fact::Ignored);
    }

    #[test]
    fn details_are_one_bounded_line() {
        let long = "x".repeat(500);
        let fact = interpret(
            Provider::Claude,
            &json!({"hook_event_name": "UserPromptSubmit", "prompt": format!("\n{long}\nsecond")}),
        );
        let detail = fact.detail.unwrap();
        assert_eq!(detail.chars().count(), DETAIL_CAP);
        assert!(detail.ends_with('…'));
    }

    #[test]
    fn codex_and_opencode_payloads() {
        assert_eq!(interpret(Provider::Codex, &json!({"type": "agent-turn-complete"})).fact, Fact::Idle);
        assert_eq!(interpret(Provider::Codex, &json!({"hook_event_name": "UserPromptSubmit"})).fact, Fact::Working);
        assert_eq!(
            interpret(
                Provider::OpenCode,
                &json!({"type": "session.status", "properties": {"status": {"type": "busy"}}})
            )
            .fact,
            Fact::Working
        );
        assert_eq!(
            interpret(Provider::OpenCode, &json!({"type": "permission.asked"})).fact,
            Fact::Blocked { wait: "approval".into() }
        );
    }
}
