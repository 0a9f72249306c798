//! Agent providers: which agent a session runs and what desk does differently for it.
//!
//! Owns the parts of a provider's profile that touch the process's surroundings: the command a
//! session starts (the user's `$SHELL` for `shell`) and the per-session files that wire an
//! agent's hooks to `desk hook`. What desk knows about each provider is
//! [`desk_core::provider`]; this module only acts on it.

use desk_core::provider::Provider;

/// Decide the provider and the command: an explicit provider must be known; a missing command
/// defaults to the provider's own program (a shell for `shell`).
pub fn resolve(
    provider: Option<&str>,
    command: Vec<std::ffi::OsString>,
) -> Result<(Provider, Vec<std::ffi::OsString>), String> {
    let provider = match provider {
        Some(p) => p.parse::<Provider>().map_err(|e| e.to_string())?,
        None => match command.first() {
            Some(program) => Provider::guess(program),
            None => return Err("give a command after `--`, or a --provider whose agent to start".into()),
        },
    };
    let command = if command.is_empty() {
        let program = match provider.program() {
            Some(program) => program.into(),
            None => std::env::var_os("SHELL").unwrap_or_else(|| "/bin/sh".into()),
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
    fn an_explicit_provider_must_be_known_and_starts_its_own_program() {
        assert_eq!(resolve(Some("claude"), vec![]).unwrap(), (Provider::Claude, vec!["claude".into()]));
        assert_eq!(resolve(Some("demo"), vec![]).unwrap(), (Provider::Demo, vec!["desk-demo-agent".into()]));
        assert_eq!(resolve(None, vec!["/bin/codex".into()]).unwrap().0, Provider::Codex);
        let err = resolve(Some("emacs"), vec![]).unwrap_err();
        assert!(err.contains("unknown provider \"emacs\"") && err.contains("claude, codex"), "{err}");
        assert!(resolve(None, vec![]).is_err());
    }
}

/// Where `program` is found: itself when it names a path (it has a `/`), else the first
/// executable file of that name in the directories of `path` (a `PATH` value), as `execvp`
/// looks; `None` when there is none.
pub fn find_program(program: &std::ffi::OsStr, path: Option<&std::ffi::OsStr>) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable =
        |p: &std::path::Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    let program_path = std::path::Path::new(program);
    if program.as_encoded_bytes().contains(&b'/') {
        return executable(program_path).then(|| program_path.to_path_buf());
    }
    std::env::split_paths(path?).map(|dir| dir.join(program)).find(|p| executable(p))
}

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
    provider: Provider,
    mut command: Vec<std::ffi::OsString>,
    state_dir: &std::path::Path,
    desk: &std::path::Path,
) -> anyhow::Result<Vec<std::ffi::OsString>> {
    use anyhow::Context;
    let desk_str = desk.to_string_lossy().into_owned();
    let extra: Vec<std::ffi::OsString> = match provider {
        Provider::Claude => {
            let hook_command = format!("{} hook --provider {provider}", shell_quote(&desk_str));
            let mut hooks = serde_json::Map::new();
            for event in provider.hook_events() {
                hooks.insert(
                    event.to_string(),
                    serde_json::json!([{ "matcher": "", "hooks": [{ "type": "command", "command": hook_command, "timeout": 5 }] }]),
                );
            }
            let settings = serde_json::json!({ "hooks": hooks });
            let path = state_dir.join("claude-settings.json");
            desk_common::fsutil::write_atomic(&path, serde_json::to_string_pretty(&settings)?.as_bytes())
                .context("cannot write the session's Claude Code settings")?;
            vec!["--settings".into(), path.into_os_string()]
        }
        Provider::Codex => {
            let notify = serde_json::json!([desk_str, "hook", "--provider", provider.as_str()]);
            vec!["-c".into(), format!("notify={notify}").into()]
        }
        Provider::Demo => {
            vec!["--hook-cmd".into(), format!("{} hook --provider {provider}", shell_quote(&desk_str)).into()]
        }
        Provider::OpenCode | Provider::Shell => Vec::new(),
    };
    // Flags go only to the provider's own program (not to a wrapper script or a shell that
    // runs it), and a command that already names its own hook wiring keeps it: desk does not
    // override what the user chose (and two copies of the flag would be refused).
    let is_agent = command.first().is_some_and(|p| Provider::guess(p) == provider);
    let own = command.iter().skip(1).any(|a| {
        let a = a.to_string_lossy();
        match provider {
            // `-c` sets any config key; only a `notify=` of the user's own is theirs.
            Provider::Codex => a.starts_with("notify=") || a.starts_with("--config=notify="),
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
        let cmd = wire_hooks(
            Provider::Claude,
            vec!["claude".into(), "--model".into(), "x".into()],
            dir.path(),
            "/opt/desk".as_ref(),
        )
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
        assert_eq!(wire_hooks(Provider::Claude, cmd.clone(), dir.path(), "/opt/desk".as_ref()).unwrap(), cmd);
    }

    #[test]
    fn a_command_with_its_own_hook_flag_is_not_wired_again() {
        let dir = tempfile::tempdir().unwrap();
        let cmd = vec!["desk-demo-agent".into(), "--hook-cmd".into(), "mine".into()];
        assert_eq!(wire_hooks(Provider::Demo, cmd.clone(), dir.path(), "/opt/desk".as_ref()).unwrap(), cmd);
    }

    #[test]
    fn codex_gets_notify_unless_it_already_has_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let cmd = vec!["codex".into(), "-c".into(), "model=o3".into()];
        let wired = wire_hooks(Provider::Codex, cmd, dir.path(), "/opt/desk".as_ref()).unwrap();
        assert_eq!(
            wired[1..3],
            [std::ffi::OsString::from("-c"), r#"notify=["/opt/desk","hook","--provider","codex"]"#.into()]
        );
        let own = vec!["codex".into(), "-c".into(), "notify=[\"mine\"]".into()];
        assert_eq!(wire_hooks(Provider::Codex, own.clone(), dir.path(), "/opt/desk".as_ref()).unwrap(), own);
    }

    #[test]
    fn shell_commands_are_left_alone_and_quoting_is_safe() {
        let dir = tempfile::tempdir().unwrap();
        let cmd = wire_hooks(Provider::Shell, vec!["bash".into()], dir.path(), "/opt/desk".as_ref()).unwrap();
        assert_eq!(cmd, vec![std::ffi::OsString::from("bash")]);
        assert_eq!(shell_quote("/a b/it's"), "'/a b/it'\\''s'");
        assert_eq!(shell_quote("/usr/bin/desk"), "/usr/bin/desk");
    }
}
