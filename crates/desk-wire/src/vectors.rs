//! The test vectors under `tests/vectors/wire/` (format: `tests/vectors/wire/README.md`).
//!
//! Every vector is decoded whole and one byte at a time; a valid one must give the recorded
//! frame (compared in a readable JSON form built here from the `Frame`, not from the encoder)
//! and encode back to exactly its bytes; an invalid one must fail with the recorded code; an
//! incomplete one must leave the decoder waiting with every byte buffered.

use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::PathBuf;

use super::{DecodeError, ErrorCode, ExitStatus, Frame, FrameDecoder, FrameType, HistoryRequest, Role};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    hex: String,
    #[allow(dead_code)]
    note: Option<String>,
    frame: Option<Value>,
    error: Option<Expected>,
    #[serde(default)]
    incomplete: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expected {
    code: String,
    contains: Option<String>,
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/wire")
}

/// Every vector, with the stem of the file it came from, in file then file order.
fn load() -> Vec<(String, Case)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir())
        .expect("tests/vectors/wire exists")
        .map(|e| e.expect("readable directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("readable vector file");
        let file_cases: Vec<Case> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not a vector file: {e}", path.display()));
        let stem = path.file_stem().and_then(|s| s.to_str()).expect("UTF-8 file name").to_string();
        cases.extend(file_cases.into_iter().map(|c| (stem.clone(), c)));
    }
    cases
}

fn unhex(hex: &str) -> Vec<u8> {
    assert!(hex.len().is_multiple_of(2), "odd-length hex");
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex digits")).collect()
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Controller => "controller",
        Role::Viewer => "viewer",
        Role::Observer => "observer",
        Role::Query => "query",
    }
}

/// Bytes as text when they are UTF-8, as hex otherwise.
fn data(bytes: &[u8]) -> (&'static str, Value) {
    match std::str::from_utf8(bytes) {
        Ok(text) => ("data", json!(text)),
        Err(_) => ("data_hex", json!(bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())),
    }
}

/// The readable form the vector files record.
fn readable(frame: &Frame) -> Value {
    let mut out = json!({ "type": frame.kind().name() });
    let fields = match frame {
        Frame::Hello { version, role, cols, rows, status_line, view } => {
            let mut hello = json!({ "version": version, "role": role_name(*role), "cols": cols, "rows": rows });
            if *status_line {
                hello["status_line"] = json!(true);
            }
            if *view {
                hello["view"] = json!(true);
            }
            hello
        }
        Frame::Welcome { version, info } => json!({ "version": version, "info": info }),
        Frame::Input(bytes) | Frame::Output(bytes) => {
            let (key, value) = data(bytes);
            json!({ key: value })
        }
        Frame::Keyframe { more, data: bytes } => {
            let (key, value) = data(bytes);
            json!({ "more": more, key: value })
        }
        Frame::Resize { cols, rows } => json!({ "cols": cols, "rows": rows }),
        Frame::SnapshotRequest { history: None } | Frame::Detach => json!({}),
        Frame::SnapshotRequest { history: Some(HistoryRequest::Newest(n)) } => json!({ "history": n }),
        Frame::SnapshotRequest { history: Some(HistoryRequest::Page { lines, from }) } => {
            json!({ "history": lines, "from": from })
        }
        Frame::Snapshot(snapshot) => json!({ "snapshot": snapshot }),
        Frame::Event(event) => json!({ "event": event }),
        Frame::Hook(hook) => json!({ "hook": hook }),
        Frame::Exit { status, escalated } => {
            let status = match status {
                ExitStatus::Code(code) => json!({ "code": code }),
                ExitStatus::Signal(signal) => json!({ "signal": signal }),
            };
            json!({ "status": status, "escalated": escalated })
        }
        Frame::Error { code, message } => json!({ "code": code.name(), "message": message }),
        Frame::Ping(nonce) | Frame::Pong(nonce) => json!({ "nonce": nonce }),
        Frame::Signal { signal, grace_ms } => json!({ "signal": signal, "grace_ms": grace_ms }),
        Frame::Terminal(op) => {
            let mut fields = json!({ "op": op.code() });
            if let crate::TerminalOp::Take { keys: bytes }
            | crate::TerminalOp::Give(bytes)
            | crate::TerminalOp::Paint(bytes) = op
            {
                let (key, value) = data(bytes);
                fields[key] = value;
            }
            fields
        }
    };
    if let (Value::Object(out), Value::Object(fields)) = (&mut out, fields) {
        out.extend(fields);
    }
    out
}

/// What decoding `bytes` pushed in `reads` gives: at most one frame, then the decoder's state.
#[derive(Debug, PartialEq)]
enum Outcome {
    Frame(Frame),
    Error(DecodeError),
    Waiting,
}

fn decode<'a>(reads: impl IntoIterator<Item = &'a [u8]>) -> (Outcome, usize) {
    let mut decoder = FrameDecoder::new();
    for read in reads {
        decoder.push(read);
        match decoder.next_frame() {
            Ok(Some(frame)) => {
                let after = decoder.next_frame();
                assert!(matches!(after, Ok(None)), "a second frame or an error after the first: {after:?}");
                return (Outcome::Frame(frame), decoder.buffered());
            }
            Ok(None) => {}
            Err(e) => return (Outcome::Error(e), decoder.buffered()),
        }
    }
    (Outcome::Waiting, decoder.buffered())
}

/// Check one vector; the failures found, each naming the vector.
fn check(file: &str, case: &Case) -> Vec<String> {
    let mut failures = Vec::new();
    let mut fail = |what: String| failures.push(format!("{file}.json: {:?}: {what}", case.name));
    let expected = [case.frame.is_some(), case.error.is_some(), case.incomplete].iter().filter(|x| **x).count();
    if expected != 1 {
        fail("must have exactly one of frame, error, incomplete".into());
        return failures;
    }
    let bytes = unhex(&case.hex);
    let (whole, left) = decode([bytes.as_slice()]);
    let (bytewise, _) = decode(bytes.chunks(1));
    if whole != bytewise {
        fail(format!("whole gives {whole:?}, byte by byte gives {bytewise:?}"));
    }
    match (&whole, case) {
        (Outcome::Frame(frame), Case { frame: Some(want), .. }) => {
            if readable(frame) != *want {
                fail(format!("decodes to {}, not {want}", readable(frame)));
            }
            if left != 0 {
                fail(format!("{left} bytes left over"));
            }
            if frame.to_bytes() != bytes {
                fail(format!("encodes back to {:02x?}", frame.to_bytes()));
            }
        }
        (Outcome::Error(e), Case { error: Some(want), .. }) => {
            if e.code().name() != want.code {
                fail(format!("fails with {} ({e}), not {}", e.code().name(), want.code));
            }
            if let Some(needle) = &want.contains
                && !e.to_string().contains(needle.as_str())
            {
                fail(format!("error {e:?} does not contain {needle:?}"));
            }
            if e.code() == ErrorCode::TooLarge && bytes.len() != super::HEADER_LEN {
                fail("a TOO_LARGE vector must be the 8-byte header alone".into());
            }
        }
        (Outcome::Waiting, Case { incomplete: true, .. }) => {
            if left != bytes.len() {
                fail(format!("waiting with {left} of {} bytes buffered", bytes.len()));
            }
        }
        (got, _) => fail(format!("decodes to {got:?}")),
    }
    failures
}

#[test]
fn every_vector_decodes_as_recorded_and_valid_ones_encode_back_exactly() {
    let cases = load();
    assert!(cases.len() > 100, "only {} vectors found", cases.len());
    let failures: Vec<String> = cases.iter().flat_map(|(file, case)| check(file, case)).collect();
    assert!(failures.is_empty(), "{} of {} vectors fail:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[test]
fn the_vectors_cover_every_frame_type_and_every_error_code() {
    let cases = load();
    let mut types = BTreeSet::new();
    let mut carried = BTreeSet::new();
    let mut refused = BTreeSet::new();
    for (file, case) in &cases {
        if let Some(frame) = &case.frame {
            let kind = frame["type"].as_str().expect("frame type").to_string();
            assert_eq!(kind.to_lowercase(), *file, "{file}.json holds a {kind} frame ({:?})", case.name);
            if kind == "ERROR" {
                carried.insert(frame["code"].as_str().expect("error code").to_string());
            }
            types.insert(kind);
        }
        if let Some(error) = &case.error {
            refused.insert(error.code.clone());
        }
    }
    let all_types: BTreeSet<String> =
        (0..=255u8).filter_map(FrameType::from_u8).map(|t| t.name().to_string()).collect();
    assert_eq!(types, all_types, "valid vectors per frame type");
    let all_codes: BTreeSet<String> =
        (0..=255u16).filter_map(ErrorCode::from_u16).map(|c| c.name().to_string()).collect();
    assert_eq!(carried, all_codes, "ERROR frames per error code");
    let decode_codes: BTreeSet<String> =
        ["BAD_HELLO", "TOO_LARGE", "UNKNOWN_TYPE", "MALFORMED"].iter().map(|s| s.to_string()).collect();
    assert_eq!(refused, decode_codes, "codes a decoder can fail with");
}

/// The hex dumps of the worked example in `docs/protocol.md`, one per frame.
fn worked_example() -> Vec<Vec<u8>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/protocol.md");
    let text = std::fs::read_to_string(path).expect("docs/protocol.md is readable");
    let section = text.split("\n## ").find(|s| s.contains("Worked example")).expect("a worked example section");
    let mut dumps = Vec::new();
    let mut current: Option<Vec<u8>> = None;
    for line in section.lines() {
        match (line.trim(), &mut current) {
            ("```hexdump", None) => current = Some(Vec::new()),
            ("```", Some(_)) => dumps.extend(current.take()),
            (row, Some(bytes)) => {
                // "00000010  50 00 18 00    |P...|": offset, up to 16 bytes, then the text.
                let hex = row.split('|').next().unwrap_or_default();
                let mut fields = hex.split_whitespace();
                let offset = fields.next().map(|o| usize::from_str_radix(o, 16).expect("hex offset"));
                assert_eq!(offset, Some(bytes.len()), "dump row {row:?} is out of place");
                bytes.extend(fields.map(|b| u8::from_str_radix(b, 16).expect("hex byte")));
            }
            _ => {}
        }
    }
    dumps
}

#[test]
fn the_worked_example_in_the_spec_decodes_and_encodes_back() {
    let dumps = worked_example();
    let kinds: Vec<FrameType> = dumps
        .iter()
        .map(|bytes| match decode([bytes.as_slice()]) {
            (Outcome::Frame(frame), 0) => {
                assert_eq!(&frame.to_bytes(), bytes, "{} does not encode back", frame.kind());
                frame.kind()
            }
            other => panic!("a dump decodes to {other:?}"),
        })
        .collect();
    use FrameType::*;
    assert_eq!(kinds, [Hello, Welcome, Keyframe, Input, Output, Exit]);
}
