//! Session events: the typed record of everything that changes in a session.
//!
//! Owns the event vocabulary: what happened, with a per-session sequence number, a timestamp
//! and the session generation (its on-disk form is desk-common's `journal` module).
//! Invariants: sequence numbers of one session name only grow, across master restarts (the
//! journal remembers the last one); an event is immutable once numbered.

use serde::{Deserialize, Serialize};

use crate::Role;
use desk_term::events::Mode;

/// One numbered event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub seq: u64,
    /// Unix time in milliseconds.
    pub ts_ms: u64,
    pub generation: u32,
    #[serde(flatten)]
    pub body: EventBody,
}

/// Which axis of the agent state changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Axis {
    Lifecycle,
    Activity,
    Health,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventBody {
    /// The child started (the first event of every generation).
    Started {
        pid: u32,
        command: Vec<String>,
        cols: u16,
        rows: u16,
        provider: String,
    },
    Title {
        title: String,
    },
    Bell,
    Notification {
        title: Option<String>,
        body: String,
    },
    Mode {
        mode: Mode,
        on: bool,
    },
    /// Output started flowing, or went quiet for the quiescence period.
    Output {
        active: bool,
    },
    Attach {
        client: u64,
        role: Role,
    },
    Detach {
        client: u64,
        role: Role,
        reason: String,
    },
    Resize {
        cols: u16,
        rows: u16,
    },
    /// The program reported its own state in its output (Codex's OSC 7501).
    Report {
        state: String,
        kind: Option<String>,
    },
    /// A hook invocation reached the master.
    Hook {
        provider: String,
        event: crate::hook::HookEvent,
        detail: Option<String>,
        /// For a submitted prompt: its digest, length and edges (the detail is only its start).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt: Option<crate::prompt::PromptSig>,
    },
    /// An axis of the agent state changed.
    State {
        axis: Axis,
        from: String,
        to: String,
        evidence: String,
        /// What a blocked agent waits for (activity changes to blocked only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wait: Option<String>,
    },
    Exit {
        code: Option<i32>,
        signal: Option<i32>,
        escalated: bool,
    },
    /// An operator typed keys into the session (`desk keys`, the dashboard's answer panel).
    Keys {
        /// The keys as named (`Enter`, `1`, `text:yes`).
        keys: Vec<String>,
        /// How many bytes that was on the terminal.
        bytes: usize,
        /// The user who typed them.
        user: String,
        /// Their terminal, when they had one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tty: Option<String>,
        /// `cli` or `dash`.
        via: String,
    },
    /// An operator answered the session's dialog (`desk approve`/`deny`, the dashboard's
    /// approvals, the attach client's answer key), or the master refused the answer because the
    /// dialog was not the one the operator was shown.
    Answer {
        /// `typed` (its keys are being typed), `refused` (nothing typed: why says why),
        /// `stopped` (the dialog changed while its keys were typed; the rest were not).
        outcome: String,
        /// What was chosen: `1. Yes`, or `deny`.
        choice: String,
        /// The keys typed (or that would have been).
        #[serde(default)]
        keys: Vec<String>,
        /// The fingerprint of the dialog the operator was shown.
        seen: String,
        /// The fingerprint of the dialog on the screen when the master acted (empty: none).
        #[serde(default)]
        now: String,
        /// What that dialog asks, in one line (`Bash(touch a.txt)`; empty: no dialog).
        #[serde(default)]
        asks: String,
        /// The dialog's text as the master read it (bounded).
        #[serde(default)]
        dialog: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        why: Option<String>,
        user: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tty: Option<String>,
        via: String,
    },
    /// `desk serve` ran the operator's notify command about this session.
    Notify {
        /// `blocked`, `stuck`, `degraded`, `exited` or `notification`.
        kind: String,
        message: String,
        /// The stuck item, for `stuck`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<String>,
        /// Notifications held back by the rate limit since the previous one.
        #[serde(default)]
        suppressed: u32,
    },
    /// Events `from_seq..=to_seq` were streamed but could not be journalled (a full disk):
    /// recorded with the first event the journal takes again, so the journal says what it
    /// misses.
    Gap {
        from_seq: u64,
        to_seq: u64,
        reason: String,
    },
    /// The master handed over to another `desk-master` binary in place (`desk upgrade`,
    /// docs/upgrading.md): same process, child, terminal, socket and clients; `from` and `to`
    /// are the two binaries' `--version` lines, `pause_ms` how long the terminal was not read.
    Upgraded {
        from: String,
        to: String,
        pause_ms: u64,
    },
}

impl EventBody {
    /// Events whose loss in a crash would hide something an operator relies on: they are
    /// flushed to disk before the master moves on.
    pub fn is_durable(&self) -> bool {
        Self::is_durable_kind(self.kind())
    }

    /// [`EventBody::is_durable`] of an event known only by its `type` tag (a journal line
    /// classified without decoding its body).
    pub fn is_durable_kind(kind: &str) -> bool {
        matches!(kind, "started" | "state" | "exit" | "hook" | "keys" | "answer" | "gap" | "upgraded")
    }

    /// The `type` tag, as it appears in JSON.
    pub fn kind(&self) -> &'static str {
        match self {
            EventBody::Started { .. } => "started",
            EventBody::Title { .. } => "title",
            EventBody::Bell => "bell",
            EventBody::Notification { .. } => "notification",
            EventBody::Mode { .. } => "mode",
            EventBody::Output { .. } => "output",
            EventBody::Attach { .. } => "attach",
            EventBody::Detach { .. } => "detach",
            EventBody::Resize { .. } => "resize",
            EventBody::Report { .. } => "report",
            EventBody::Hook { .. } => "hook",
            EventBody::State { .. } => "state",
            EventBody::Exit { .. } => "exit",
            EventBody::Keys { .. } => "keys",
            EventBody::Answer { .. } => "answer",
            EventBody::Notify { .. } => "notify",
            EventBody::Gap { .. } => "gap",
            EventBody::Upgraded { .. } => "upgraded",
        }
    }

    /// One line for humans (`desk events` without `--json`). Text taken from the session (a
    /// command, a hook's detail, a notify message quoting a notification) is shown with every
    /// control character escaped (`\u{9b}`), so printing the line to a terminal can neither
    /// drive it nor break the line.
    pub fn describe(&self) -> String {
        escape_controls(&self.describe_raw())
    }

    fn describe_raw(&self) -> String {
        match self {
            EventBody::Started { pid, command, cols, rows, provider } => {
                format!("started pid {pid} ({provider}) {cols}x{rows}: {}", command.join(" "))
            }
            EventBody::Title { title } => format!("title {title:?}"),
            EventBody::Bell => "bell".into(),
            EventBody::Notification { title: Some(t), body } => format!("notification {t:?}: {body:?}"),
            EventBody::Notification { title: None, body } => format!("notification {body:?}"),
            EventBody::Mode { mode, on } => {
                format!(
                    "mode {} {}",
                    serde_json::to_value(mode).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default(),
                    if *on { "on" } else { "off" }
                )
            }
            EventBody::Output { active: true } => "output flowing".into(),
            EventBody::Output { active: false } => "output quiet".into(),
            EventBody::Attach { client, role } => format!("attach client {client} as {role:?}").to_lowercase(),
            EventBody::Detach { client, role, reason } => {
                format!("{} ({reason})", format!("detach client {client} ({role:?})").to_lowercase())
            }
            EventBody::Resize { cols, rows } => format!("resize {cols}x{rows}"),
            EventBody::Report { state, kind: Some(k) } => format!("the program reports {state} ({k})"),
            EventBody::Report { state, kind: None } => format!("the program reports {state}"),
            EventBody::Hook { provider, event, detail, .. } => match detail {
                Some(d) => format!("hook {provider} {event}: {d}"),
                None => format!("hook {provider} {event}"),
            },
            EventBody::State { axis, from, to, evidence, .. } => {
                format!(
                    "{} {from} -> {to} ({evidence})",
                    serde_json::to_value(axis).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
                )
            }
            EventBody::Exit { code: Some(c), escalated, .. } => {
                format!("exit code {c}{}", if *escalated { " (after SIGKILL)" } else { "" })
            }
            EventBody::Exit { signal, escalated, .. } => {
                format!("exit by signal {}{}", signal.unwrap_or(0), if *escalated { " (after SIGKILL)" } else { "" })
            }
            EventBody::Keys { keys, bytes, user, tty, via } => {
                let at = tty.as_ref().map(|t| format!(" on {t}")).unwrap_or_default();
                format!("keys {} ({bytes} bytes) typed by {user}{at} via {via}", keys.join(" "))
            }
            EventBody::Answer { outcome, choice, keys, user, tty, via, why, asks, .. } => {
                let at = tty.as_ref().map(|t| format!(" on {t}")).unwrap_or_default();
                let asked = if asks.is_empty() { String::new() } else { format!(" to {asks}") };
                let why = why.as_ref().map(|w| format!(": {w}")).unwrap_or_default();
                format!("answer {choice}{asked} by {user}{at} via {via}: {outcome} ({}){why}", keys.join(" "))
            }
            EventBody::Notify { kind, message, item, suppressed } => {
                let item = item.as_ref().map(|i| format!(" item {i}")).unwrap_or_default();
                let held = if *suppressed > 0 { format!(" ({suppressed} held back before it)") } else { String::new() };
                format!("notify {kind}{item}: {message}{held}")
            }
            EventBody::Gap { from_seq, to_seq, reason } => {
                format!("events {from_seq}..{to_seq} are missing from the journal: {reason}")
            }
            EventBody::Upgraded { from, to, pause_ms } => {
                format!("master upgraded in place from {from} to {to} (output paused {pause_ms} ms)")
            }
        }
    }
}

/// `text` with every control character (C0, DEL, C1) written as a Rust escape (`\u{1b}`), the
/// way `{:?}` shows it, and everything else as it is.
pub fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
}

impl Event {
    pub fn to_json_map(&self) -> serde_json::Map<String, serde_json::Value> {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        }
    }

    pub fn from_json_map(map: serde_json::Map<String, serde_json::Value>) -> Result<Event, serde_json::Error> {
        serde_json::from_value(serde_json::Value::Object(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_description_escapes_every_control_the_session_put_in_it() {
        let notify = EventBody::Notify {
            kind: "notification".into(),
            message: "s: note \u{9b}31m red\x1b]0;x\x07\nnext".into(),
            item: None,
            suppressed: 0,
        };
        let line = notify.describe();
        assert_eq!(line, "notify notification: s: note \\u{9b}31m red\\u{1b}]0;x\\u{7}\\u{a}next");
        assert!(!line.chars().any(char::is_control), "{line:?}");
        let title = EventBody::Title { title: "a\u{85}b".into() };
        assert_eq!(title.describe(), "title \"a\\u{85}b\"");
    }

    #[test]
    fn events_serialise_flat_with_a_type_tag() {
        let e = Event { seq: 7, ts_ms: 1000, generation: 2, body: EventBody::Title { title: "⠋ work".into() } };
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(json, r#"{"seq":7,"ts_ms":1000,"generation":2,"type":"title","title":"⠋ work"}"#);
        let back: Event = serde_json::from_str(&json).unwrap();
        assert_eq!(back, e);
        let mode =
            Event { seq: 8, ts_ms: 1, generation: 2, body: EventBody::Mode { mode: Mode::BracketedPaste, on: true } };
        assert!(serde_json::to_string(&mode).unwrap().contains(r#""type":"mode","mode":"bracketed_paste","on":true"#));
        assert_eq!(Event::from_json_map(mode.to_json_map()).unwrap(), mode);
    }
}
