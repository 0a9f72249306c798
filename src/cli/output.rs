//! The one shape of every `--json` answer (docs/cli.md, "JSON envelope"), and the error codes.
//!
//! Owns the envelope `{"v":1,"kind":K,"data":…}` (success) and `{"v":1,"error":{"code":C,
//! "message":M}}` (failure), both a single pretty-printed JSON document on stdout, and the
//! CLI-side view of types that are shaped for the wire (the agent state's `health` axis).
//! Invariants: a `--json` command prints exactly one envelope on stdout, whatever happens;
//! [`VERSION`] changes only when a documented field changes meaning or goes away (adding a field
//! does not change it). Streams (`desk events --json`) are JSON lines, not enveloped. May not
//! depend on any command module: they depend on it.

use serde::Serialize;

/// The envelope's schema version, `v`. Scripts check it; bump it only for incompatible changes.
pub const VERSION: u32 = 1;

pub use desk_common::failure::ErrorCode;

/// The success envelope, written field by field: `notes` is asked for after `data` has been
/// written, so that data produced while it is written (a history read a page at a time) can
/// add notes on the way.
struct Envelope<'a, T, N> {
    kind: &'a str,
    data: T,
    notes: N,
}

impl<T: Serialize, N: Fn() -> Vec<String>> Serialize for Envelope<'_, T, N> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("v", &VERSION)?;
        map.serialize_entry("kind", self.kind)?;
        map.serialize_entry("data", &self.data)?;
        let notes = (self.notes)();
        if !notes.is_empty() {
            map.serialize_entry("notes", &notes)?;
        }
        map.end()
    }
}

/// Print a success envelope of `kind` around `data`, with `notes` (things a human would have
/// been told on stderr, such as "desk serve is not running; showing the store").
pub fn print_ok<T: Serialize>(kind: &str, data: T, notes: &[String]) -> anyhow::Result<()> {
    print_ok_streamed(kind, data, || notes.to_vec())
}

/// [`print_ok`] for data that is produced while it is written (a `Serialize` that reads as it
/// goes), so that stdout gets it a piece at a time instead of one document built in memory;
/// `notes` is called once `data` is written.
pub fn print_ok_streamed<T: Serialize>(kind: &str, data: T, notes: impl Fn() -> Vec<String>) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    write_ok(std::io::BufWriter::new(stdout.lock()), kind, data, notes)
}

/// [`print_ok_streamed`] to `out` instead of stdout: the same bytes.
pub fn write_ok<T: Serialize>(
    out: impl std::io::Write,
    kind: &str,
    data: T,
    notes: impl Fn() -> Vec<String>,
) -> anyhow::Result<()> {
    write_ok_as(Layout::Pretty, out, kind, data, notes)
}

/// How an envelope is laid out: the same document either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Indented, for a person reading `--json` (what a command prints).
    Pretty,
    /// On one line, for another desk that reads it (a host's relay answering `desk ls --json` in
    /// its own process): the indentation was a third of a listing's bytes, carried over ssh and
    /// skipped again by the reader (docs/benchmarks.md §27).
    Compact,
}

/// How a command writes the item ids it prints as text: as they are, or `HOST:ITEMID` when it
/// runs on host HOST for another machine's `desk … HOST:NAME` (the hidden `--ids-of-host HOST`
/// that desk adds: docs/remote.md), so that what it prints there is what `item`, `force` and
/// `drop` take back there. Only the places that print an id ask it: a word of an id's shape in
/// a prompt's text, a session's name or an evidence note is printed as it is. JSON never is:
/// `id` fields are the host's as it holds them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ids {
    /// `HOST:`, or empty on this machine's own command.
    prefix: String,
}

impl Ids {
    /// Ids written as they are: a command for this machine.
    pub fn here() -> Ids {
        Ids::default()
    }

    /// Ids written `HOST:ITEMID` (`host` `None`: as they are).
    pub fn of_host(host: Option<&str>) -> Ids {
        Ids { prefix: host.map_or_else(String::new, |h| format!("{h}:")) }
    }

    /// `id` as the operator names it where the command was typed.
    pub fn show(&self, id: &desk_core::delivery::item::ItemId) -> String {
        format!("{}{id}", self.prefix)
    }

    /// Session `name` as the operator names it where the command was typed (`HOST:NAME`), where
    /// a listing of items heads them with their session (`desk queue`).
    pub fn session(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// `text` (the daemon's sentence about session `name`: `paused delivery to api`, `api was
    /// not paused`) with the name written as [`Ids::session`] writes it: where those sentences
    /// put it (a session may be named `delivery` or `paused`), else at its first mention as a
    /// whole word.
    pub fn session_in(&self, text: &str, name: &str) -> String {
        if self.prefix.is_empty() || name.is_empty() {
            return text.to_string();
        }
        if text.strip_prefix(name) == Some(" was not paused") {
            return format!("{} was not paused", self.session(name));
        }
        if let Some(head) = text.strip_suffix(name).filter(|h| h.ends_with(" to ")) {
            return format!("{head}{}", self.session(name));
        }
        let part_of_name = |c: char| c.is_ascii_alphanumeric() || "._-:".contains(c);
        // A full stop ends the sentence, unless a name goes on after it.
        let goes_on = |rest: &str| match rest.strip_prefix('.') {
            Some(after) => after.starts_with(part_of_name),
            None => rest.starts_with(part_of_name),
        };
        let mut from = 0;
        while let Some(at) = text[from..].find(name).map(|i| i + from) {
            let end = at + name.len();
            let alone = !text[..at].ends_with(part_of_name) && !goes_on(&text[end..]);
            if alone {
                return format!("{}{}{}", &text[..at], self.session(name), &text[end..]);
            }
            from = end;
        }
        text.to_string()
    }

    /// `text` (the daemon's sentence about item `id`, such as `dropped ID; NOTE`) with its first
    /// mention of that exact id, the item the command acted on, written as [`Ids::show`] writes
    /// it; what follows (a note, evidence from the screen) is left as it is.
    pub fn show_in(&self, text: &str, id: &desk_core::delivery::item::ItemId) -> String {
        if self.prefix.is_empty() {
            return text.to_string();
        }
        text.replacen(id.as_str(), &self.show(id), 1)
    }
}

/// [`write_ok`], laid out as `layout` says.
pub fn write_ok_as<T: Serialize>(
    layout: Layout,
    mut out: impl std::io::Write,
    kind: &str,
    data: T,
    notes: impl Fn() -> Vec<String>,
) -> anyhow::Result<()> {
    let envelope = Envelope { kind, data, notes };
    match layout {
        Layout::Pretty => serde_json::to_writer_pretty(&mut out, &envelope)?,
        Layout::Compact => serde_json::to_writer(&mut out, &envelope)?,
    }
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// The error envelope, as printed.
pub fn error_text(code: ErrorCode, message: &str) -> String {
    let value = serde_json::json!({ "v": VERSION, "error": { "code": code.as_str(), "message": message } });
    serde_json::to_string_pretty(&value).unwrap_or_default()
}

/// The agent state as the command line shows it in JSON: like the wire's `StateView`, but with
/// `health.value` a string (`ok`, `degraded`) like the other axes, and the reason of a degraded
/// health in `health.reason` (`null` when healthy). The wire form stays as it is. A state that
/// cannot be encoded is an error, never a `null` state.
pub fn state_json(state: &desk_core::state::StateView) -> serde_json::Result<serde_json::Value> {
    let mut value = serde_json::to_value(state)?;
    let (status, reason) = match &state.health.value {
        desk_core::state::Health::Ok => ("ok", None),
        desk_core::state::Health::Degraded(reason) => ("degraded", Some(reason.clone())),
    };
    if let Some(health) = value.get_mut("health").and_then(|h| h.as_object_mut()) {
        health.insert("value".into(), status.into());
        health.insert("reason".into(), reason.into());
    }
    Ok(value)
}

/// `serialize_with` for an optional state.
pub fn serialize_state<S: serde::Serializer>(
    state: &Option<desk_core::state::StateView>,
    s: S,
) -> Result<S::Ok, S::Error> {
    state.as_ref().map(state_json).transpose().map_err(serde::ser::Error::custom)?.serialize(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use desk_core::state::{AxisView, Evidence, Health, StateView};

    #[test]
    fn a_host_s_sentence_names_its_session_host_colon_name_once_and_only_as_a_whole_word() {
        let box_ = Ids::of_host(Some("box"));
        assert_eq!(box_.session_in("paused delivery to api", "api"), "paused delivery to box:api");
        assert_eq!(box_.session_in("api was not paused", "api"), "box:api was not paused");
        // A session named like a word of the sentence.
        assert_eq!(box_.session_in("paused delivery to delivery", "delivery"), "paused delivery to box:delivery");
        assert_eq!(box_.session_in("paused was not paused", "paused"), "box:paused was not paused");
        assert_eq!(box_.session_in("api-2 then api.", "api"), "api-2 then box:api.");
        assert_eq!(box_.session_in("rapid api api", "api"), "rapid box:api api");
        assert_eq!(box_.session_in("api.v2 and x:api", "api"), "api.v2 and x:api");
        assert_eq!(Ids::here().session_in("paused delivery to api", "api"), "paused delivery to api");
    }

    fn axis<T>(value: T) -> AxisView<T> {
        AxisView {
            value,
            since_ms: 1,
            evidence: Evidence { source: desk_wire::state::EvidenceSource::None, detail: "x".into(), at_ms: 1 },
        }
    }

    #[test]
    fn health_is_a_string_with_a_separate_reason() {
        let mut state = StateView {
            provider: "demo".into(),
            lifecycle: axis(desk_core::state::Lifecycle::Running),
            activity: axis(desk_core::state::Activity::Idle),
            wait: None,
            health: axis(Health::Degraded("no output for 5m".into())),
            ready: true,
            last_output_ms: None,
            last_hook_ms: None,
            rules: "built-in".into(),
        };
        let json = state_json(&state).unwrap();
        assert_eq!(json["health"]["value"], "degraded");
        assert_eq!(json["health"]["reason"], "no output for 5m");
        assert_eq!(json["activity"]["value"], "idle");
        state.health = axis(Health::Ok);
        let json = state_json(&state).unwrap();
        assert_eq!(json["health"]["value"], "ok");
        assert!(json["health"]["reason"].is_null());
        // The wire form is untouched.
        assert!(serde_json::to_value(&state).unwrap()["health"]["value"].is_object());
    }

    #[test]
    fn every_code_has_a_documented_exit() {
        for code in ErrorCode::ALL {
            assert!(matches!(code.exit_code(), 1 | 2), "{}", code.as_str());
        }
        let text = error_text(ErrorCode::NoSuchSession, "no session named x");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["v"], 1);
        assert_eq!(v["error"]["code"], "no-such-session");
    }
}
