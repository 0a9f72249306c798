//! The daemon's control protocol: JSON lines over a unix socket.
//!
//! Owns the request and response vocabulary between the `desk` CLI and `desk serve` (the
//! blocking client is `desk_common::daemon_client`; this module has no sockets). Every line is one JSON object carrying `"v": 1`; a request
//! names its command in `"cmd"`; a response says `"ok"` and carries either `"error"` or the
//! command's data. Invariants: one request per line, one response per request, in order; a
//! line over [`MAX_LINE`] is refused and the connection closed.

use serde::{Deserialize, Serialize};

/// Version of the control protocol.
pub const CONTROL_VERSION: u32 = 1;

/// 1 MiB per request line: requests are small.
pub const MAX_LINE: usize = 1 << 20;

/// 64 MiB per response line, read by the CLI: listings carry previews (about 1 KiB an item),
/// so this is tens of thousands of items; one item with its whole text is under 1 MiB.
pub const MAX_RESPONSE: usize = 64 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Request {
    Ping,
    /// Ingest this intake file now and answer once it is queued.
    Ingest {
        id: String,
    },
    Queue {
        session: Option<String>,
    },
    Item {
        id: String,
    },
    Stuck,
    Force {
        id: String,
        /// Paste even though the input box holds text someone typed (it is submitted with it).
        #[serde(default)]
        over_draft: bool,
    },
    Drop {
        id: String,
    },
    Pause {
        session: String,
        reason: Option<String>,
    },
    Resume {
        session: String,
    },
    Stop,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Envelope<T> {
    pub v: u32,
    #[serde(flatten)]
    pub body: T,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub data: serde_json::Value,
    /// Why a failed request failed, when it is not a refusal: [`NOT_DELIVERED`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// The `code` of a failed `force` that did type (pasted again, pressed Enter) and still did not
/// deliver: what it did and how it ended are in `error`.
pub const NOT_DELIVERED: &str = "not-delivered";

impl Response {
    pub fn ok(message: impl Into<String>, data: serde_json::Value) -> Response {
        Response { ok: true, error: None, message: Some(message.into()), data, code: None }
    }

    pub fn err(error: impl Into<String>) -> Response {
        Response { ok: false, error: Some(error.into()), message: None, data: serde_json::Value::Null, code: None }
    }

    /// A request that did what it could (typed) without the outcome asked for.
    pub fn not_delivered(error: impl Into<String>) -> Response {
        Response { code: Some(NOT_DELIVERED.into()), ..Response::err(error) }
    }

    /// Whether a failed response is a refusal (nothing was done), as opposed to an attempt
    /// that did not succeed.
    pub fn refused(&self) -> bool {
        !self.ok && self.code.as_deref() != Some(NOT_DELIVERED)
    }

    /// One line, ready to write.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(&Envelope { v: CONTROL_VERSION, body: self })
            .unwrap_or_else(|_| br#"{"v":1,"ok":false,"error":"cannot encode the response"}"#.to_vec());
        line.push(b'\n');
        line
    }
}

/// Parse one request line.
pub fn parse_request(line: &[u8]) -> Result<Request, String> {
    let env: Envelope<serde_json::Value> =
        serde_json::from_slice(line).map_err(|e| format!("not a JSON request: {e}"))?;
    if env.v != CONTROL_VERSION {
        return Err(format!(
            "control protocol version {} is not supported (this daemon speaks {CONTROL_VERSION})",
            env.v
        ));
    }
    serde_json::from_value(env.body).map_err(|e| format!("bad request: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_with_their_version() {
        let req = Request::Pause { session: "a".into(), reason: Some("lunch".into()) };
        let line = serde_json::to_vec(&Envelope { v: 1, body: &req }).unwrap();
        assert_eq!(String::from_utf8_lossy(&line), r#"{"v":1,"cmd":"pause","session":"a","reason":"lunch"}"#);
        assert_eq!(parse_request(&line), Ok(req));
        assert!(parse_request(br#"{"v":2,"cmd":"ping"}"#).unwrap_err().contains("version 2"));
        assert!(parse_request(br#"{"v":1,"cmd":"explode"}"#).is_err());
        assert!(parse_request(b"garbage").is_err());
    }
}
