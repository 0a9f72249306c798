//! Hooks as they cross process boundaries: the event names agents give their hook invocations,
//! and the body of the HOOK frame `desk hook` sends.
//!
//! Owns [`HookEvent`], the names agents give their hook events (Claude Code's
//! `UserPromptSubmit`, Codex's `agent-turn-complete`, the OpenCode plugin's `session.idle`, ...),
//! and [`HookReport`], a HOOK frame's body with its keys typed, used by the sender (`desk hook`)
//! and the receiver (the master) alike. Invariants: an event's serialized form is the provider's
//! own name, byte for byte (it appears in HOOK events, the journal and `--json` output); a name
//! desk does not know is kept as [`HookEvent::Other`] so that it is still journalled and shown as
//! the agent sent it. The codec carries HOOK bodies as JSON objects (an older master must still
//! decode a newer hook's extra keys); a body that does not fit [`HookReport`] is refused as a
//! whole with a message naming the key, never half-read.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::Frame;

macro_rules! hook_events {
    ($($(#[$doc:meta])* $variant:ident => $name:literal,)*) => {
        /// A hook event, by the name its provider gives it.
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum HookEvent {
            $($(#[$doc])* $variant,)*
            /// An event desk does not interpret, under the name the agent gave it.
            Other(String),
        }

        impl HookEvent {
            /// The provider's own name for the event.
            pub fn as_str(&self) -> &str {
                match self {
                    $(HookEvent::$variant => $name,)*
                    HookEvent::Other(name) => name,
                }
            }

            /// The event a provider's name stands for (an unknown name is kept as it is).
            pub fn from_name(name: &str) -> HookEvent {
                match name {
                    $($name => HookEvent::$variant,)*
                    other => HookEvent::Other(other.to_string()),
                }
            }
        }
    };
}

hook_events! {
    // Claude Code's hook events (the demo agent sends the same, Codex hooks reuse them).
    /// The agent's session started (or restarted after a compaction).
    SessionStart => "SessionStart",
    SessionEnd => "SessionEnd",
    /// A prompt was submitted; its text comes with it.
    UserPromptSubmit => "UserPromptSubmit",
    PreToolUse => "PreToolUse",
    PostToolUse => "PostToolUse",
    PostToolUseFailure => "PostToolUseFailure",
    PreCompact => "PreCompact",
    PermissionRequest => "PermissionRequest",
    Notification => "Notification",
    /// The agent finished its turn.
    Stop => "Stop",
    SubagentStart => "SubagentStart",
    SubagentStop => "SubagentStop",
    // Codex's `notify` payload types.
    AgentTurnComplete => "agent-turn-complete",
    ApprovalRequested => "approval-requested",
    // Events desk's OpenCode plugin forwards.
    SessionCreated => "session.created",
    SessionIdle => "session.idle",
    SessionStatus => "session.status",
    SessionError => "session.error",
    PermissionAsked => "permission.asked",
    PermissionUpdated => "permission.updated",
    PermissionReplied => "permission.replied",
    MessageUpdated => "message.updated",
    MessagePartUpdated => "message.part.updated",
    ToolExecuteBefore => "tool.execute.before",
    ToolExecuteAfter => "tool.execute.after",
    ChatMessage => "chat.message",
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for HookEvent {
    fn from(name: &str) -> HookEvent {
        HookEvent::from_name(name)
    }
}

impl Serialize for HookEvent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for HookEvent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<HookEvent, D::Error> {
        let name = String::deserialize(d)?;
        Ok(HookEvent::from_name(&name))
    }
}

/// A HOOK frame's body (docs/protocol.md §5.15).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HookReport {
    /// The session generation the hook's process was started in (`DESK_GENERATION`); the master
    /// refuses a hook of another generation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    /// The format of `payload` (`claude`, `codex`, `opencode`, `demo`); absent: the session's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The hook's own input, as the agent gave it.
    pub payload: Value,
}

impl HookReport {
    /// The HOOK frame carrying this report.
    pub fn to_frame(&self) -> Frame {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => Frame::Hook(map),
            // A struct of plain fields always serialises to an object.
            _ => Frame::Hook(Map::new()),
        }
    }

    /// Read a HOOK body; the error names the key that does not fit. Unknown keys are ignored
    /// (a newer `desk hook` may send more).
    pub fn from_body(mut body: Map<String, Value>) -> Result<HookReport, String> {
        let wrong = |key: &str, want: &str, got: &Value| format!("the HOOK body's `{key}` must be {want}, not {got}");
        let generation = match body.remove("generation") {
            None | Some(Value::Null) => None,
            Some(g) => Some(g.as_u64().ok_or_else(|| wrong("generation", "a non-negative integer", &g))?),
        };
        let provider = match body.remove("provider") {
            None | Some(Value::Null) => None,
            Some(Value::String(p)) => Some(p),
            Some(p) => return Err(wrong("provider", "a string", &p)),
        };
        Ok(HookReport { generation, provider, payload: body.remove("payload").unwrap_or(Value::Null) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_serialize_as_the_providers_own_names() {
        for (event, name) in [
            (HookEvent::UserPromptSubmit, "UserPromptSubmit"),
            (HookEvent::AgentTurnComplete, "agent-turn-complete"),
            (HookEvent::MessagePartUpdated, "message.part.updated"),
            (HookEvent::Other("Whatever".into()), "Whatever"),
            (HookEvent::Other(String::new()), ""),
        ] {
            let json = serde_json::to_string(&event).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<HookEvent>(&json).unwrap(), event);
            assert_eq!(HookEvent::from_name(name), event);
        }
    }

    #[test]
    fn a_report_survives_its_frame() {
        let report = HookReport {
            generation: Some(3),
            provider: None,
            payload: json!({"hook_event_name": "UserPromptSubmit", "prompt": "fix the parser"}),
        };
        let Frame::Hook(body) = report.to_frame() else { panic!("not a HOOK frame") };
        assert!(!body.contains_key("provider"), "absent keys stay absent: {body:?}");
        assert_eq!(HookReport::from_body(body).unwrap(), report);
    }

    #[test]
    fn a_body_of_the_wrong_shape_is_refused_naming_the_key() {
        let mut body = Map::new();
        body.insert("generation".into(), json!("three"));
        let err = HookReport::from_body(body).unwrap_err();
        assert_eq!(err, "the HOOK body's `generation` must be a non-negative integer, not \"three\"");
        body = Map::new();
        body.insert("provider".into(), json!(7));
        assert!(HookReport::from_body(body).unwrap_err().contains("`provider` must be a string"));
        assert_eq!(HookReport::from_body(Map::new()).unwrap().payload, Value::Null);
    }
}
