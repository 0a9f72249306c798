//! The body of a HOOK frame, typed: what `desk hook` tells its session's master when an agent's
//! hook fires.
//!
//! The codec carries HOOK bodies as JSON objects (an older master must still decode a newer
//! hook's extra keys); this is the one place that gives their keys types, used by the sender
//! (`desk hook`) and the receiver (the master) alike. Invariant: a body that does not fit this
//! shape is refused as a whole with a message naming the key, never half-read.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::Frame;

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
