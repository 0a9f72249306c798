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
