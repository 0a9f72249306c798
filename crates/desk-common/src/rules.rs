//! Where a session's provider rules come from: the operator's override file or the built-in
//! table. The only part of the rules that touches the disk.

use anyhow::{Context, Result};
use std::path::Path;

use desk_core::provider::Provider;
use desk_core::state::RuleSet;

/// The table for `provider`: `<config>/rules/<provider>.toml` when it exists, else built in.
pub fn load(provider: Provider, config: &Path) -> Result<RuleSet> {
    let path = config.join("rules").join(format!("{provider}.toml"));
    match std::fs::read_to_string(&path) {
        Ok(text) => RuleSet::parse(&text, &path.display().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(RuleSet::builtin(provider)),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_override_file_replaces_the_builtin_table() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(Provider::Claude, dir.path()).unwrap().origin, "builtin");
        std::fs::create_dir_all(dir.path().join("rules")).unwrap();
        std::fs::write(dir.path().join("rules/claude.toml"), "provider = \"claude\"\n").unwrap();
        let set = load(Provider::Claude, dir.path()).unwrap();
        assert!(set.rules.is_empty() && set.origin.ends_with("claude.toml"));
    }
}
