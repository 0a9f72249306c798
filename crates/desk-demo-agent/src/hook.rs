//! Hook events and their JSON, in Claude Code's shape.
//!
//! Owns what the demo agent tells a hook command and when each event exists. The state machine
//! emits a [`HookEvent`]; [`payload`] turns it into the JSON document the hook reads on stdin.
//! Field names follow Claude Code's hooks (`session_id`, `cwd`, `permission_mode`,
//! `hook_event_name`, then per event `source`, `prompt`, `tool_name`, `tool_input`,
//! `tool_use_id`, `tool_response`, `message`, `notification_type`, `stop_hook_active`,
//! `reason`, `transcript_path` when a transcript is kept), so desk's hook handling can be exercised without a real agent. Order within a
//! turn is Claude Code's: UserPromptSubmit; for a tool needing approval PreToolUse,
//! PermissionRequest and Notification(permission_prompt) when the dialog shows, PostToolUse
//! only if it was approved; Stop at the end of the turn. Pure: no I/O (running the command is
//! the event loop's job).

use serde_json::{Value, json};

use super::config::Config;

/// The demo "tool" a prompt with the approval word asks to run.
pub const DEMO_TOOL_NAME: &str = "Bash";

/// One hook invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookEvent {
    /// The UI became ready (`source` "startup", or "resume" with `--resume`), or `/clear`
    /// started a new conversation ("clear").
    SessionStart {
        source: &'static str,
    },
    UserPromptSubmit {
        prompt: String,
    },
    PreToolUse {
        tool_use_id: String,
        command: String,
    },
    PermissionRequest {
        command: String,
    },
    /// The approval dialog is showing.
    Notification {
        message: String,
    },
    PostToolUse {
        tool_use_id: String,
        command: String,
    },
    /// A turn finished (not sent for an interrupted turn, as in Claude Code).
    Stop,
    SessionEnd {
        reason: &'static str,
    },
}

impl HookEvent {
    /// Claude Code's `hook_event_name`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::SessionStart { .. } => "SessionStart",
            Self::UserPromptSubmit { .. } => "UserPromptSubmit",
            Self::PreToolUse { .. } => "PreToolUse",
            Self::PermissionRequest { .. } => "PermissionRequest",
            Self::Notification { .. } => "Notification",
            Self::PostToolUse { .. } => "PostToolUse",
            Self::Stop => "Stop",
            Self::SessionEnd { .. } => "SessionEnd",
        }
    }
}

fn tool_input(command: &str) -> Value {
    json!({ "command": command, "description": "Demo command that needs approval" })
}

/// The JSON document for `event`, in conversation `conversation` (its id, and its transcript
/// when the agent keeps one).
pub fn payload(cfg: &Config, conversation: &str, transcript: Option<&std::path::Path>, event: &HookEvent) -> Value {
    let mut doc = json!({
        "session_id": conversation,
        "cwd": cfg.cwd.to_string_lossy(),
        "permission_mode": "default",
        "hook_event_name": event.name(),
    });
    if let (Some(path), Some(map)) = (transcript, doc.as_object_mut()) {
        map.insert("transcript_path".into(), Value::String(path.to_string_lossy().into_owned()));
    }
    let extra = match event {
        HookEvent::SessionStart { source } => json!({ "source": source }),
        HookEvent::UserPromptSubmit { prompt } => json!({ "prompt": prompt }),
        HookEvent::PreToolUse { tool_use_id, command } => json!({
            "tool_name": DEMO_TOOL_NAME,
            "tool_input": tool_input(command),
            "tool_use_id": tool_use_id,
        }),
        HookEvent::PermissionRequest { command } => json!({
            "tool_name": DEMO_TOOL_NAME,
            "tool_input": tool_input(command),
        }),
        HookEvent::Notification { message } => json!({
            "message": message,
            "notification_type": "permission_prompt",
        }),
        HookEvent::PostToolUse { tool_use_id, command } => json!({
            "tool_name": DEMO_TOOL_NAME,
            "tool_input": tool_input(command),
            "tool_response": { "stdout": "ok", "stderr": "", "interrupted": false },
            "tool_use_id": tool_use_id,
        }),
        HookEvent::Stop => json!({ "stop_hook_active": false }),
        HookEvent::SessionEnd { reason } => json!({ "reason": reason }),
    };
    if let (Some(doc), Value::Object(extra)) = (doc.as_object_mut(), extra) {
        doc.extend(extra);
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_uses_claude_code_field_names() {
        let cfg = Config { session_id: "s1".into(), cwd: "/tmp/x".into(), ..Config::default() };
        let doc = payload(&cfg, "s1", None, &HookEvent::UserPromptSubmit { prompt: "hi".into() });
        assert_eq!(doc["hook_event_name"], "UserPromptSubmit");
        assert_eq!(doc["session_id"], "s1");
        assert_eq!(doc["cwd"], "/tmp/x");
        assert_eq!(doc["prompt"], "hi");
        assert!(doc.get("transcript_path").is_none());
        let doc = payload(&cfg, "s1", None, &HookEvent::Notification { message: "m".into() });
        assert_eq!(doc["notification_type"], "permission_prompt");
        let doc = payload(&cfg, "s2", Some("/t/s2.jsonl".as_ref()), &HookEvent::SessionStart { source: "clear" });
        assert_eq!((doc["session_id"].as_str(), doc["source"].as_str()), (Some("s2"), Some("clear")));
        assert_eq!(doc["transcript_path"], "/t/s2.jsonl");
    }
}
