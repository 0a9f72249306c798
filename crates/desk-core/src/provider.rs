//! Provider profiles: every agent desk knows, and what desk knows about each, in one place.
//!
//! Owns the [`Provider`] enum and each provider's profile: its name (the on-disk and wire form,
//! lowercase), the program it runs and how a command is recognised as it, its built-in rule
//! table (state rules and delivery settings, `state/rules/<provider>.toml`) and the hook events
//! desk wires for it. Invariants: every session has exactly one provider; `shell` is the
//! provider of anything desk does not know as an agent, and a name no longer known (an old
//! record) reads as `shell` through [`Provider::or_shell`] rather than failing. Pure: no file,
//! no environment; writing an agent's settings files stays in the CLI (`desk::providers`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::delivery::settings::DeliverySettings;
use crate::state::RuleSet;
use crate::state::hooks::HookEvent;

/// An agent provider desk has rules and hook wiring for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// Claude Code (`claude`): hooks through a per-session settings file.
    Claude,
    /// Codex (`codex`): its `notify` program, plus Claude-style hooks where it has them.
    Codex,
    /// OpenCode (`opencode`): events forwarded by desk's plugin.
    OpenCode,
    /// `desk-demo-agent`, the stand-in agent of the tests and `make demo`.
    Demo,
    /// Any other command: a shell, a script, an agent desk does not know.
    Shell,
}

/// A provider name desk does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown provider {name:?}; known providers: {}", Provider::names().join(", "))]
pub struct UnknownProvider {
    pub name: String,
}

/// Claude Code hook events desk listens to; each runs `desk hook`.
const CLAUDE_HOOK_EVENTS: &[HookEvent] = &[
    HookEvent::SessionStart,
    HookEvent::SessionEnd,
    HookEvent::UserPromptSubmit,
    HookEvent::PreToolUse,
    HookEvent::PostToolUse,
    HookEvent::Notification,
    HookEvent::Stop,
    HookEvent::SubagentStop,
    HookEvent::PreCompact,
];

impl Provider {
    /// Every provider, in the order `desk new --help` lists them.
    pub const ALL: [Provider; 5] =
        [Provider::Claude, Provider::Codex, Provider::OpenCode, Provider::Demo, Provider::Shell];

    /// The name on disk, on the wire and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Claude => "claude",
            Provider::Codex => "codex",
            Provider::OpenCode => "opencode",
            Provider::Demo => "demo",
            Provider::Shell => "shell",
        }
    }

    /// Every provider's name.
    pub fn names() -> [&'static str; 5] {
        Provider::ALL.map(Provider::as_str)
    }

    /// The provider a name from a record on disk or a peer stands for: names desk no longer
    /// knows read as `shell` (the caller keeps the original name wherever it is shown).
    pub fn or_shell(name: &str) -> Provider {
        name.parse().unwrap_or(Provider::Shell)
    }

    /// The provider a command runs, guessed from its program's file name.
    pub fn guess(program: &std::ffi::OsStr) -> Provider {
        let name = std::path::Path::new(program).file_name().and_then(|n| n.to_str()).unwrap_or("");
        match name {
            "claude" => Provider::Claude,
            "codex" => Provider::Codex,
            "opencode" => Provider::OpenCode,
            "desk-demo-agent" => Provider::Demo,
            _ => Provider::Shell,
        }
    }

    /// The program started for this provider when no command is given; `None` for `shell`,
    /// whose program is the user's `$SHELL`.
    pub fn program(self) -> Option<&'static str> {
        match self {
            Provider::Claude => Some("claude"),
            Provider::Codex => Some("codex"),
            Provider::OpenCode => Some("opencode"),
            Provider::Demo => Some("desk-demo-agent"),
            Provider::Shell => None,
        }
    }

    /// The built-in rule table's text (`state/rules/<provider>.toml`).
    pub fn rules_text(self) -> &'static str {
        match self {
            Provider::Claude => include_str!("state/rules/claude.toml"),
            Provider::Codex => include_str!("state/rules/codex.toml"),
            Provider::OpenCode => include_str!("state/rules/opencode.toml"),
            Provider::Demo => include_str!("state/rules/demo.toml"),
            Provider::Shell => include_str!("state/rules/shell.toml"),
        }
    }

    /// The built-in rule table, compiled.
    pub fn rules(self) -> RuleSet {
        RuleSet::builtin(self)
    }

    /// How prompts are delivered to this provider, as its built-in table says.
    pub fn delivery(self) -> DeliverySettings {
        self.rules().delivery
    }

    /// The hook events desk wires into the agent's own settings, each running `desk hook`
    /// (empty for providers wired another way: Codex's `notify`, the demo agent's flag,
    /// OpenCode's plugin, or not at all).
    pub fn hook_events(self) -> &'static [HookEvent] {
        match self {
            Provider::Claude => CLAUDE_HOOK_EVENTS,
            Provider::Codex | Provider::OpenCode | Provider::Demo | Provider::Shell => &[],
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Provider {
    type Err = UnknownProvider;

    fn from_str(name: &str) -> Result<Provider, UnknownProvider> {
        Provider::ALL.into_iter().find(|p| p.as_str() == name).ok_or_else(|| UnknownProvider { name: name.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_text_and_serde() {
        for p in Provider::ALL {
            assert_eq!(p.as_str().parse::<Provider>(), Ok(p));
            assert_eq!(serde_json::to_string(&p).unwrap(), format!("\"{}\"", p.as_str()));
            assert_eq!(serde_json::from_str::<Provider>(&format!("\"{p}\"")).unwrap(), p);
        }
        let err = "emacs".parse::<Provider>().unwrap_err().to_string();
        assert_eq!(err, "unknown provider \"emacs\"; known providers: claude, codex, opencode, demo, shell");
        assert_eq!(Provider::or_shell("aider"), Provider::Shell);
    }

    #[test]
    fn providers_are_guessed_from_the_program_name() {
        assert_eq!(Provider::guess("claude".as_ref()), Provider::Claude);
        assert_eq!(Provider::guess("/usr/local/bin/codex".as_ref()), Provider::Codex);
        assert_eq!(Provider::guess("/opt/desk-demo-agent".as_ref()), Provider::Demo);
        assert_eq!(Provider::guess("bash".as_ref()), Provider::Shell);
        for p in Provider::ALL {
            if let Some(program) = p.program() {
                assert_eq!(Provider::guess(program.as_ref()), p);
            }
        }
    }

    #[test]
    fn every_hook_event_desk_wires_is_one_it_interprets() {
        for p in Provider::ALL {
            for event in p.hook_events() {
                let fact = crate::state::hooks::interpret(p, &serde_json::json!({ "hook_event_name": event }));
                assert_eq!(&fact.event, event);
                assert_ne!(fact.fact, crate::state::hooks::Fact::Ignored, "{p} {event}");
            }
        }
    }

    #[test]
    fn every_builtin_table_parses_and_names_its_provider() {
        for p in Provider::ALL {
            let set = RuleSet::parse(p.rules_text(), p.as_str()).unwrap();
            assert_eq!(set.provider, p.as_str());
        }
    }
}
