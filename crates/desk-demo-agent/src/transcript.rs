//! Conversations' transcripts: what lets the demo agent resume one.
//!
//! Owns the files `DIR/<conversation id>.jsonl`: one JSON line per submitted prompt,
//! `{"type":"prompt","ts_ms":…,"text":"…"}`, appended with one write and fsynced (like the
//! prompt log), so a conversation can be resumed after the process ends however it ends. A
//! transcript exists only once its conversation has a prompt (as Claude Code's), so resuming a
//! conversation that never had a turn fails like resuming an unknown one. Invariants: an id
//! becomes a file name only if it is a plain word (letters, digits, `-`, `_`), so no id can
//! name a file outside DIR.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// `transcripts` in the agent's home: `$DESK_DEMO_AGENT_HOME`, else `$DESK_HOME/demo-agent`
/// (run under a desk with its own home — desk's tests, benchmarks and `make demo` — it keeps its
/// files there), else `~/.desk-demo-agent`. (desk finds it the same way:
/// `desk_core::fleet::resume::config_dir`.)
pub fn default_dir() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let home = var("DESK_DEMO_AGENT_HOME")
        .or_else(|| var("DESK_HOME").map(|h| h.join("demo-agent")))
        .or_else(|| var("HOME").map(|h| h.join(".desk-demo-agent")))?;
    Some(home.join("transcripts"))
}

fn plain(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The transcript file of conversation `id`, if `id` can name one.
pub fn path(dir: &Path, id: &str) -> Option<PathBuf> {
    plain(id).then(|| dir.join(format!("{id}.jsonl")))
}

/// The prompts of conversation `id`, oldest first; an error saying the conversation is not
/// found (Claude Code's words) when it has no transcript or no prompt in it.
pub fn load(dir: Option<&Path>, id: &str) -> anyhow::Result<Vec<String>> {
    let not_found = || anyhow::anyhow!("No conversation found with session ID: {id}");
    let file = dir.and_then(|d| path(d, id)).ok_or_else(not_found)?;
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(not_found()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
    };
    let prompts: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "prompt")
        .filter_map(|v| v["text"].as_str().map(String::from))
        .collect();
    if prompts.is_empty() {
        return Err(not_found());
    }
    Ok(prompts)
}

/// Append a prompt to conversation `id`'s transcript (creating DIR and the file as needed).
pub fn append(dir: &Path, id: &str, ts_ms: u64, prompt: &str) -> anyhow::Result<PathBuf> {
    let Some(file) = path(dir, id) else { bail!("conversation id {id:?} cannot name a transcript file") };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut line = serde_json::to_vec(&serde_json::json!({ "type": "prompt", "ts_ms": ts_ms, "text": prompt }))?;
    line.push(b'\n');
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .open(&file)
        .with_context(|| format!("cannot open transcript {}", file.display()))?;
    f.write_all(&line).with_context(|| format!("cannot append to {}", file.display()))?;
    f.sync_all().with_context(|| format!("cannot fsync {}", file.display()))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_is_found_only_once_it_has_a_prompt() {
        let dir = tempfile::tempdir().unwrap();
        let id = "5a0e2f1c-6d3b-4e8a-9f21-0c7d4b9e3a18";
        let err = load(Some(dir.path()), id).unwrap_err().to_string();
        assert_eq!(err, format!("No conversation found with session ID: {id}"));
        append(dir.path(), id, 1, "first").unwrap();
        append(dir.path(), id, 2, "second\nline").unwrap();
        assert_eq!(load(Some(dir.path()), id).unwrap(), ["first", "second\nline"]);
        std::fs::write(dir.path().join("empty.jsonl"), "").unwrap();
        assert!(load(Some(dir.path()), "empty").is_err());
        assert!(load(None, id).is_err());
    }

    #[test]
    fn an_id_never_names_a_file_outside_the_directory() {
        assert_eq!(path(Path::new("/t"), "../../etc/passwd"), None);
        assert_eq!(path(Path::new("/t"), "a/b"), None);
        assert!(load(Some(Path::new("/t")), "../x").is_err());
    }
}
