//! Events a client asks a master to act on and record: the body of an EVENT frame sent *to* the
//! master (docs/protocol.md §5.9).
//!
//! Owns [`ClientEvent`]: `keys` (an operator types named keys or text into the session: `desk
//! keys`, the dashboard's answer panel), `answer` (an operator answers the session's dialog,
//! the one they were shown: `desk approve`/`deny`, the dashboard's approvals, attach's answer
//! key) and `notify` (the daemon ran the operator's notify
//! command about this session), with their bounds. The master journals each as a session event
//! of the same type, so the record of who typed what, and of what the operator was told, lives
//! in the session's own journal. Invariants: a body is read whole or refused with a message
//! naming the key that does not fit, never half-read; unknown keys are ignored (a newer client
//! may send more); every string is bounded ([`MAX_KEYS`], [`MAX_KEYS_BYTES`],
//! [`MAX_NOTIFY_MESSAGE`]) before the master acts on it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Frame;

/// 64 keys in one `desk keys`: an answer to a dialog is one to a few keys; a long sequence is a
/// prompt, and prompts go through `desk send`, which verifies what arrived.
pub const MAX_KEYS: usize = 64;

/// 4 KiB of bytes typed by one `desk keys`, for the same reason: far above any dialog answer,
/// far below the master's input queue.
pub const MAX_KEYS_BYTES: usize = 4096;

/// 1 KiB of a notification's message: a line for a desktop popup or a chat message (an agent's
/// own OSC 9 body is already cut to this by the screen model).
pub const MAX_NOTIFY_MESSAGE: usize = 1024;

/// 64 hex digits: a dialog fingerprint is 32 (128 bits of SHA-256); room for a longer one.
pub const MAX_FINGERPRINT: usize = 64;

/// An event a client asks the master to act on and record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientEvent {
    /// Type these keys (each one a key name, a chord or `text:...`, as `desk_term::keys`
    /// parses them) into the session, one at a time as a person types them, and record who did.
    Keys {
        keys: Vec<String>,
        /// The user who typed them.
        user: String,
        /// Their terminal, when they had one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tty: Option<String>,
        /// `cli` (`desk keys`) or `dash` (the dashboard).
        via: String,
    },
    /// Answer the dialog on the session's screen — only if it is the one the operator was
    /// shown (its fingerprint is `seen`): pick option `option`, or refuse it (`deny`). The
    /// master computes the provider's keys from its own screen, types them one at a time,
    /// checks before each that the dialog is still that one, and records the answer.
    Answer {
        /// The option to pick, by number.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        option: Option<u8>,
        /// Refuse the dialog instead (its refusing option, else its cancel key).
        #[serde(default)]
        deny: bool,
        /// The fingerprint of the dialog the operator was shown.
        seen: String,
        user: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tty: Option<String>,
        /// `cli`, `dash` or `attach`.
        via: String,
    },
    /// The daemon ran the operator's notify command about this session.
    Notify {
        /// `blocked`, `stuck`, `degraded`, `exited` or `notification`.
        kind: String,
        message: String,
        /// The stuck item, for `stuck`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<String>,
        /// Notifications of this session held back by the rate limit since the previous one.
        #[serde(default)]
        suppressed: u32,
    },
    /// Hand the master over to the `desk-master` at `binary` in place (`desk upgrade`,
    /// docs/upgrading.md). Answered, unlike the others: an `upgraded` EVENT from the new binary
    /// once it runs, or an ERROR saying why the master kept its binary.
    Upgrade {
        /// The absolute path of the binary to execute.
        binary: String,
        /// Arguments before the master's own (`["master"]` when `binary` is `desk` itself).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        args: Vec<String>,
        /// The handover formats `binary` reads (its `desk-master --handover-formats`).
        formats: Vec<u32>,
        user: String,
        /// `cli`.
        via: String,
    },
}

impl ClientEvent {
    /// The `type` values a client may send.
    pub const TYPES: [&'static str; 4] = ["keys", "answer", "notify", "upgrade"];

    /// The EVENT frame carrying this request.
    pub fn to_frame(&self) -> Frame {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => Frame::Event(map),
            // An enum of plain fields always serialises to an object.
            _ => Frame::Event(Map::new()),
        }
    }

    /// Read a client's EVENT body, checking its bounds.
    pub fn from_body(body: Map<String, Value>) -> Result<ClientEvent, String> {
        let kind = body.get("type").and_then(Value::as_str).unwrap_or("").to_string();
        let event: ClientEvent =
            serde_json::from_value(Value::Object(body)).map_err(|e| format!("the {kind:?} EVENT body: {e}"))?;
        match &event {
            ClientEvent::Keys { keys, .. } => {
                if keys.is_empty() {
                    return Err("a keys event names no key".into());
                }
                if keys.len() > MAX_KEYS {
                    return Err(format!(
                        "{} keys at once; at most {MAX_KEYS} (send prompts with desk send)",
                        keys.len()
                    ));
                }
                let total: usize = keys.iter().map(String::len).sum();
                if total > MAX_KEYS_BYTES {
                    return Err(format!(
                        "{total} bytes of keys; at most {MAX_KEYS_BYTES} (send prompts with desk send)"
                    ));
                }
            }
            ClientEvent::Answer { option, deny, seen, .. } => {
                if option.is_some() == *deny {
                    return Err("an answer names an option or denies, one of the two".into());
                }
                if option.is_some_and(|n| !(1..=9).contains(&n)) {
                    return Err(format!("option {} is out of range (1 to 9)", option.unwrap_or(0)));
                }
                if seen.is_empty() || seen.len() > MAX_FINGERPRINT || !seen.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(format!("{seen:?} is not a dialog fingerprint (up to {MAX_FINGERPRINT} hex digits)"));
                }
            }
            ClientEvent::Notify { message, .. } => {
                if message.len() > MAX_NOTIFY_MESSAGE {
                    return Err(format!("a notify message of {} bytes; at most {MAX_NOTIFY_MESSAGE}", message.len()));
                }
            }
            ClientEvent::Upgrade { binary, formats, .. } => {
                if !binary.starts_with('/') || binary.len() > 4096 {
                    return Err(format!("{binary:?} is not an absolute path to a desk-master binary"));
                }
                if formats.len() > 64 {
                    return Err(format!("{} handover formats; at most 64", formats.len()));
                }
            }
        }
        Ok(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keys_request_round_trips_through_its_frame() {
        let event = ClientEvent::Keys {
            keys: vec!["1".into(), "Enter".into()],
            user: "ana".into(),
            tty: Some("/dev/pts/3".into()),
            via: "cli".into(),
        };
        let Frame::Event(map) = event.to_frame() else { panic!("not an EVENT") };
        assert_eq!(map["type"], "keys");
        assert_eq!(ClientEvent::from_body(map).unwrap(), event);
    }

    #[test]
    fn bodies_out_of_bounds_or_of_the_wrong_shape_are_refused_whole() {
        let body = |v: Value| v.as_object().unwrap().clone();
        let e =
            ClientEvent::from_body(body(serde_json::json!({"type": "keys", "keys": [], "user": "a", "via": "cli"})));
        assert!(e.unwrap_err().contains("no key"));
        let many: Vec<String> = (0..=MAX_KEYS).map(|_| "a".to_string()).collect();
        let e =
            ClientEvent::from_body(body(serde_json::json!({"type": "keys", "keys": many, "user": "a", "via": "cli"})));
        assert!(e.unwrap_err().contains("at most 64"));
        let e = ClientEvent::from_body(body(
            serde_json::json!({"type": "keys", "keys": "Enter", "user": "a", "via": "cli"}),
        ));
        assert!(e.unwrap_err().starts_with("the \"keys\" EVENT body"));
        let e = ClientEvent::from_body(body(serde_json::json!({"type": "title", "title": "x"})));
        assert!(e.is_err());
        // Unknown keys are a newer client's: ignored.
        let ok = ClientEvent::from_body(body(
            serde_json::json!({"type": "notify", "kind": "blocked", "message": "m", "later": 1}),
        ));
        assert_eq!(
            ok.unwrap(),
            ClientEvent::Notify { kind: "blocked".into(), message: "m".into(), item: None, suppressed: 0 }
        );
    }

    #[test]
    fn an_answer_names_an_option_or_denies_and_carries_a_fingerprint() {
        let body = |v: Value| v.as_object().unwrap().clone();
        let ok = ClientEvent::Answer {
            option: Some(2),
            deny: false,
            seen: "0a1b".into(),
            user: "ana".into(),
            tty: None,
            via: "cli".into(),
        };
        let Frame::Event(map) = ok.to_frame() else { panic!("not an EVENT") };
        assert_eq!(ClientEvent::from_body(map).unwrap(), ok);
        let both =
            serde_json::json!({"type": "answer", "option": 1, "deny": true, "seen": "ab", "user": "a", "via": "cli"});
        assert!(ClientEvent::from_body(body(both)).unwrap_err().contains("one of the two"));
        let neither = serde_json::json!({"type": "answer", "seen": "ab", "user": "a", "via": "cli"});
        assert!(ClientEvent::from_body(body(neither)).is_err());
        let bad = serde_json::json!({"type": "answer", "deny": true, "seen": "not hex", "user": "a", "via": "cli"});
        assert!(ClientEvent::from_body(body(bad)).unwrap_err().contains("fingerprint"));
        let ten = serde_json::json!({"type": "answer", "option": 10, "seen": "ab", "user": "a", "via": "cli"});
        assert!(ClientEvent::from_body(body(ten)).unwrap_err().contains("out of range"));
    }
}
