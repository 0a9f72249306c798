//! The daemon's control protocol: JSON lines over a unix socket.
//!
//! Owns the request and response vocabulary between the `desk` CLI and `desk serve` (the
//! blocking client is `desk_common::daemon_client`; this module has no sockets). Every line is
//! one JSON object carrying `"v": 1`; a request names its command in `"cmd"` and carries typed
//! ids and names ([`ItemId`], [`SessionName`]: a request with a bad one is refused as a bad
//! request before the daemon sees it); a response says `"ok"` and carries either `"error"` with
//! its [`ErrorKind`] in `"code"`, or the command's message and data. Each request's data has
//! one type (desk-core's `delivery::answer` names them), written with [`Response::answer`] and
//! read with [`Response::into_answer`], so neither side edits or guesses at JSON. Invariants:
//! one request per line, one response per request, in order; a line over [`MAX_LINE`] is
//! refused and the connection closed; an answer that cannot be encoded is a failure of kind
//! [`ErrorKind::Failed`], never an empty success.
//!
//! Compatibility: a daemon keeps running its old binary after an upgrade, so a new CLI reads old
//! daemons' answers and an old CLI reads new ones. The response's keys are those of version 1;
//! `code` existed with one value (`not-delivered`), which old readers tell apart from every other
//! code (a refusal), so the kinds added since read as refusals to them, as they did. A failure
//! without a `code` (an older daemon) reads as [`ErrorKind::Refused`].

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

pub use crate::names::{ItemId, SessionName};

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
        id: ItemId,
    },
    Queue {
        session: Option<SessionName>,
    },
    Item {
        id: ItemId,
    },
    Stuck,
    Force {
        id: ItemId,
        /// Paste even though the input box holds text someone typed (it is submitted with it).
        #[serde(default)]
        over_draft: bool,
    },
    Drop {
        id: ItemId,
    },
    Pause {
        session: SessionName,
        reason: Option<String>,
    },
    Resume {
        session: SessionName,
    },
    Stop,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Envelope<T> {
    pub v: u32,
    #[serde(flatten)]
    pub body: T,
}

/// Why a request failed: the response's `code`. The CLI's error codes have the same names
/// where they mean the same thing (`desk_common::failure::ErrorCode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request could not be read: not JSON, another version, an unknown command, a bad id
    /// or name. Nothing was done.
    BadRequest,
    /// No item has that id (in the queues, on disk or in the intake).
    NoSuchItem,
    /// The daemon did nothing, and says why.
    Refused,
    /// It typed (pasted again, pressed Enter) and the item is still not delivered: not a
    /// refusal.
    NotDelivered,
    /// The daemon could not do or answer what it was asked (a write failed, an answer could
    /// not be encoded).
    Failed,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 5] =
        [ErrorKind::BadRequest, ErrorKind::NoSuchItem, ErrorKind::Refused, ErrorKind::NotDelivered, ErrorKind::Failed];

    /// Its name in `code`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::BadRequest => "bad-request",
            ErrorKind::NoSuchItem => "no-such-item",
            ErrorKind::Refused => "refused",
            ErrorKind::NotDelivered => NOT_DELIVERED,
            ErrorKind::Failed => "failed",
        }
    }

    /// The kind a failed response's `code` names: none (a daemon from before codes other than
    /// `not-delivered`) or one this build does not know (a newer daemon) is a refusal, which
    /// is what an older reader makes of it too.
    pub fn from_code(code: Option<&str>) -> ErrorKind {
        ErrorKind::ALL.into_iter().find(|k| Some(k.as_str()) == code).unwrap_or(ErrorKind::Refused)
    }

    /// Whether nothing was done: every kind but [`ErrorKind::NotDelivered`], which typed.
    pub fn refused(self) -> bool {
        self != ErrorKind::NotDelivered
    }
}

/// The `code` of a failed `force` that did type (pasted again, pressed Enter) and still did not
/// deliver: what it did and how it ended are in `error`.
pub const NOT_DELIVERED: &str = "not-delivered";

/// A response as it is on the wire. Built only with [`Response::answer`], [`Response::done`]
/// and [`Response::fail`], and read with [`Response::into_answer`].
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Response {
    ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    data: serde_json::Value,
    /// The failure's [`ErrorKind`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    code: Option<String>,
}

/// A failed request, as the client reads it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ControlError {
    pub kind: ErrorKind,
    pub message: String,
}

impl ControlError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ControlError {
        ControlError { kind, message: message.into() }
    }
}

/// A request's answer: the daemon's words for what it did, and the request's data.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer<T> {
    pub message: String,
    pub data: T,
}

impl Response {
    /// Success with `data`, the request's typed answer. Data that cannot be encoded is a
    /// failure of kind [`ErrorKind::Failed`].
    pub fn answer<T: Serialize>(message: impl Into<String>, data: &T) -> Response {
        match serde_json::to_value(data) {
            Ok(data) => Response { ok: true, error: None, message: Some(message.into()), data, code: None },
            Err(e) => Response::fail(ErrorKind::Failed, format!("desk serve cannot encode its answer: {e}")),
        }
    }

    /// Success with nothing but words (`force`, `drop`, `pause`, `resume`).
    pub fn done(message: impl Into<String>) -> Response {
        Response { ok: true, error: None, message: Some(message.into()), data: serde_json::Value::Null, code: None }
    }

    pub fn fail(kind: ErrorKind, error: impl Into<String>) -> Response {
        Response {
            ok: false,
            error: Some(error.into()),
            message: None,
            data: serde_json::Value::Null,
            code: Some(kind.as_str().into()),
        }
    }

    /// The answer as the request's type `T`, or the failure with its kind. An answer whose
    /// data is not a `T` is a failure of kind [`ErrorKind::Failed`] naming what was wrong.
    pub fn into_answer<T: DeserializeOwned>(self) -> Result<Answer<T>, ControlError> {
        if !self.ok {
            let kind = ErrorKind::from_code(self.code.as_deref());
            return Err(ControlError::new(kind, self.error.unwrap_or_else(|| "failed".into())));
        }
        let data = serde_json::from_value(self.data).map_err(|e| {
            ControlError::new(ErrorKind::Failed, format!("desk serve sent an answer this desk cannot read: {e}"))
        })?;
        Ok(Answer { message: self.message.unwrap_or_default(), data })
    }

    /// One line, ready to write.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(&Envelope { v: CONTROL_VERSION, body: self })
            .unwrap_or_else(|_| br#"{"v":1,"ok":false,"error":"cannot encode the response","code":"failed"}"#.to_vec());
        line.push(b'\n');
        line
    }
}

/// Parse one request line. A line that is not a request is a [`ErrorKind::BadRequest`].
pub fn parse_request(line: &[u8]) -> Result<Request, ControlError> {
    let bad = |message: String| ControlError::new(ErrorKind::BadRequest, message);
    let env: Envelope<serde_json::Value> =
        serde_json::from_slice(line).map_err(|e| bad(format!("not a JSON request: {e}")))?;
    if env.v != CONTROL_VERSION {
        return Err(bad(format!(
            "control protocol version {} is not supported (this daemon speaks {CONTROL_VERSION})",
            env.v
        )));
    }
    serde_json::from_value(env.body).map_err(|e| bad(format!("bad request: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_with_their_version() {
        let req = Request::Pause { session: SessionName::parse("a").unwrap(), reason: Some("lunch".into()) };
        let line = serde_json::to_vec(&Envelope { v: 1, body: &req }).unwrap();
        assert_eq!(String::from_utf8_lossy(&line), r#"{"v":1,"cmd":"pause","session":"a","reason":"lunch"}"#);
        assert_eq!(parse_request(&line), Ok(req));
        assert!(parse_request(br#"{"v":2,"cmd":"ping"}"#).unwrap_err().message.contains("version 2"));
        assert!(parse_request(br#"{"v":1,"cmd":"explode"}"#).is_err());
        assert!(parse_request(b"garbage").is_err());
    }

    #[test]
    fn a_bad_id_or_name_is_a_bad_request_that_says_which() {
        let err = parse_request(br#"{"v":1,"cmd":"item","id":"xyz"}"#).unwrap_err();
        assert_eq!(err.kind, ErrorKind::BadRequest);
        assert!(err.message.contains("\"xyz\" is not an item id"), "{}", err.message);
        let err = parse_request(br#"{"v":1,"cmd":"resume","session":"../x"}"#).unwrap_err();
        assert_eq!(err.kind, ErrorKind::BadRequest);
        assert!(err.message.contains("session name"), "{}", err.message);
    }

    #[test]
    fn failures_carry_their_kind_and_old_readers_still_tell_a_refusal() {
        for kind in ErrorKind::ALL {
            let line = Response::fail(kind, "why").to_line();
            let env: Envelope<Response> = serde_json::from_slice(&line).unwrap();
            let err = env.body.into_answer::<()>().unwrap_err();
            assert_eq!((err.kind, err.message.as_str()), (kind, "why"));
            // A reader of version 1 tells a refusal by `code` not being `not-delivered`.
            let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
            assert_eq!(v["ok"], false);
            assert_eq!(v["code"] != NOT_DELIVERED, kind.refused());
        }
        // An older daemon's failure has no code: a refusal.
        let old: Envelope<Response> = serde_json::from_str(r#"{"v":1,"ok":false,"error":"no item X"}"#).unwrap();
        assert_eq!(old.body.into_answer::<()>().unwrap_err().kind, ErrorKind::Refused);
        // A newer daemon's kind this build does not know: a refusal too.
        assert_eq!(ErrorKind::from_code(Some("on-fire")), ErrorKind::Refused);
    }

    #[test]
    fn an_answer_is_read_as_its_type_and_a_wrong_one_is_a_failure_not_null() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Pid {
            pid: u32,
        }
        let line = Response::answer("running", &Pid { pid: 7 }).to_line();
        assert_eq!(
            String::from_utf8_lossy(&line),
            "{\"v\":1,\"ok\":true,\"message\":\"running\",\"data\":{\"pid\":7}}\n"
        );
        let env: Envelope<Response> = serde_json::from_slice(&line).unwrap();
        assert_eq!(
            env.body.clone().into_answer::<Pid>().unwrap(),
            Answer { message: "running".into(), data: Pid { pid: 7 } }
        );
        let err = env.body.into_answer::<Vec<String>>().unwrap_err();
        assert_eq!(err.kind, ErrorKind::Failed);
        // Words only.
        let env: Envelope<Response> = serde_json::from_slice(&Response::done("dropped").to_line()).unwrap();
        assert_eq!(env.body.into_answer::<()>().unwrap().message, "dropped");
        // Data that cannot be encoded is a failure, not null data marked ok.
        let mut bad = std::collections::HashMap::new();
        bad.insert((1, 2), 3);
        let err = Response::answer("x", &bad).into_answer::<serde_json::Value>().unwrap_err();
        assert_eq!(err.kind, ErrorKind::Failed);
    }
}
