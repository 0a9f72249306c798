//! Hook event names: what an agent's hook invocation said happened, as a type.
//!
//! Owns [`HookEvent`], the names agents give their hook events (Claude Code's
//! `UserPromptSubmit`, Codex's `agent-turn-complete`, the OpenCode plugin's `session.idle`, ...).
//! Invariants: the serialized form is the provider's own name, byte for byte (it appears in
//! HOOK events, the journal and `--json` output); a name desk does not know is kept as
//! [`HookEvent::Other`] so that it is still journalled and shown as the agent sent it.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
