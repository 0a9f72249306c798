//! Agent providers: which agent a session runs and what desk does differently for it.
//!
//! Owns the list of known providers, guessing one from a command, and the default command of
//! each. Invariant: every session has exactly one provider name; `shell` is the provider of
//! anything desk does not know as an agent.

/// The providers desk has rules and hook wiring for.
/// `demo` is `desk-demo-agent`, the stand-in agent used by tests and `make demo`.
pub const KNOWN: [&str; 5] = ["claude", "codex", "opencode", "demo", "shell"];

/// The provider a command runs, guessed from its program name.
pub fn guess(program: &std::ffi::OsStr) -> &'static str {
    let name = std::path::Path::new(program).file_name().and_then(|n| n.to_str()).unwrap_or("");
    match name {
        "claude" => "claude",
        "codex" => "codex",
        "opencode" => "opencode",
        "desk-demo-agent" => "demo",
        _ => "shell",
    }
}

/// Decide the provider and the command: an explicit provider must be known; a missing command
/// defaults to the provider's own program (a shell for `shell`).
pub fn resolve(
    provider: Option<&str>,
    command: Vec<std::ffi::OsString>,
) -> Result<(String, Vec<std::ffi::OsString>), String> {
    let provider = match provider {
        Some(p) if KNOWN.contains(&p) => p.to_string(),
        Some(p) => return Err(format!("unknown provider {p:?}; known providers: {}", KNOWN.join(", "))),
        None => match command.first() {
            Some(program) => guess(program).to_string(),
            None => return Err("give a command after `--`, or a --provider whose agent to start".into()),
        },
    };
    let command = if command.is_empty() {
        let program = match provider.as_str() {
            "shell" => std::env::var_os("SHELL").unwrap_or_else(|| "/bin/sh".into()),
            "demo" => "desk-demo-agent".into(),
            other => other.into(),
        };
        vec![program]
    } else {
        command
    };
    Ok((provider, command))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_are_guessed_from_the_program_name() {
        assert_eq!(guess("claude".as_ref()), "claude");
        assert_eq!(guess("/usr/local/bin/codex".as_ref()), "codex");
        assert_eq!(guess("bash".as_ref()), "shell");
        assert_eq!(resolve(Some("claude"), vec![]).unwrap(), ("claude".into(), vec!["claude".into()]));
        assert!(resolve(Some("emacs"), vec![]).is_err());
        assert!(resolve(None, vec![]).is_err());
    }
}

/// Claude Code hook events desk listens to; each runs `desk hook`.
pub const CLAUDE_HOOK_EVENTS: [&str; 9] = [
    "SessionStart",
    "SessionEnd",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Notification",
    "Stop",
    "SubagentStop",
    "PreCompact",
];

/// Quote a word for `sh -c`.
pub fn shell_quote(word: &str) -> String {
    if !word.is_empty() && word.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-=:,+@%".contains(&b)) {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// Wire the provider's hooks for this session only: write whatever per-session file the agent
/// reads its hooks from (under the session's state directory) and add the arguments that
/// point the agent at it. The user's own global agent configuration is never touched.
pub fn wire_hooks(
    provider: &str,
    mut command: Vec<std::ffi::OsString>,
    state_dir: &std::path::Path,
    desk: &std::path::Path,
) -> anyhow::Result<Vec<std::ffi::OsString>> {
    use anyhow::Context;
    let desk_str = desk.to_string_lossy().into_owned();
    let extra: Vec<std::ffi::OsString> = match provider {
        "claude" => {
            let hook_command = format!("{} hook --provider claude", shell_quote(&desk_str));
            let mut hooks = serde_json::Map::new();
            for event in CLAUDE_HOOK_EVENTS {
                hooks.insert(
                    event.to_string(),
                    serde_json::json!([{ "matcher": "", "hooks": [{ "type": "command", "command": hook_command, "timeout": 5 }] }]),
                );
            }
            let settings = serde_json::json!({ "hooks": hooks });
            let path = state_dir.join("claude-settings.json");
            crate::fsutil::write_atomic(&path, serde_json::to_string_pretty(&settings)?.as_bytes())
                .context("cannot write the session's Claude Code settings")?;
            vec!["--settings".into(), path.into_os_string()]
        }
        "codex" => {
            let notify = serde_json::json!([desk_str, "hook", "--provider", "codex"]);
            vec!["-c".into(), format!("notify={notify}").into()]
        }
        "demo" => vec!["--hook-cmd".into(), format!("{} hook --provider demo", shell_quote(&desk_str)).into()],
        _ => Vec::new(),
    };
    // Flags go only to the provider's own program (not to a wrapper script or a shell that
    // runs it), and a command that already names its own hook wiring keeps it: desk does not
    // override what the user chose (and two copies of the flag would be refused).
    let is_agent = command.first().is_some_and(|p| guess(p) == provider);
    let own = command.iter().skip(1).any(|a| {
        let a = a.to_string_lossy();
        match provider {
            // `-c` sets any config key; only a `notify=` of the user's own is theirs.
            "codex" => a.starts_with("notify=") || a.starts_with("--config=notify="),
            _ => extra.first().is_some_and(|flag| a == flag.to_string_lossy()),
        }
    });
    if !extra.is_empty() && is_agent && !own {
        command.splice(1..1, extra);
    }
    Ok(command)
}

#[cfg(test)]
mod wiring_tests {
    use super::*;

    #[test]
    fn claude_gets_a_private_settings_file() {
        let dir = tempfile::tempdir().unwrap();
        let cmd =
            wire_hooks("claude", vec!["claude".into(), "--model".into(), "x".into()], dir.path(), "/opt/desk".as_ref())
                .unwrap();
        let file = dir.path().join("claude-settings.json");
        assert_eq!(
            cmd,
            vec!["claude".into(), "--settings".into(), file.clone().into_os_string(), "--model".into(), "x".into()]
        );
        let settings: serde_json::Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
        let command = settings["hooks"]["Stop"][0]["hooks"][0]["command"].as_str().unwrap();
        assert_eq!(command, "/opt/desk hook --provider claude");
    }

    #[test]
    fn only_the_providers_own_program_gets_hook_flags() {
        let dir = tempfile::tempdir().unwrap();
        let cmd = vec!["sh".into(), "-c".into(), "claude".into()];
        assert_eq!(wire_hooks("claude", cmd.clone(), dir.path(), "/opt/desk".as_ref()).unwrap(), cmd);
    }

    #[test]
    fn a_command_with_its_own_hook_flag_is_not_wired_again() {
        let dir = tempfile::tempdir().unwrap();
        let cmd = vec!["desk-demo-agent".into(), "--hook-cmd".into(), "mine".into()];
        assert_eq!(wire_hooks("demo", cmd.clone(), dir.path(), "/opt/desk".as_ref()).unwrap(), cmd);
    }

    #[test]
    fn codex_gets_notify_unless_it_already_has_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let cmd = vec!["codex".into(), "-c".into(), "model=o3".into()];
        let wired = wire_hooks("codex", cmd, dir.path(), "/opt/desk".as_ref()).unwrap();
        assert_eq!(
            wired[1..3],
            [std::ffi::OsString::from("-c"), r#"notify=["/opt/desk","hook","--provider","codex"]"#.into()]
        );
        let own = vec!["codex".into(), "-c".into(), "notify=[\"mine\"]".into()];
        assert_eq!(wire_hooks("codex", own.clone(), dir.path(), "/opt/desk".as_ref()).unwrap(), own);
    }

    #[test]
    fn shell_commands_are_left_alone_and_quoting_is_safe() {
        let dir = tempfile::tempdir().unwrap();
        let cmd = wire_hooks("shell", vec!["bash".into()], dir.path(), "/opt/desk".as_ref()).unwrap();
        assert_eq!(cmd, vec![std::ffi::OsString::from("bash")]);
        assert_eq!(shell_quote("/a b/it's"), "'/a b/it'\\''s'");
        assert_eq!(shell_quote("/usr/bin/desk"), "/usr/bin/desk");
    }
}
