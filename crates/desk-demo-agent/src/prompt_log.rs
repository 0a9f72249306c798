//! The prompt log: the ground truth of what the demo agent submitted.
//!
//! Owns the JSON-lines file named by `--prompt-log`. One line per submitted prompt,
//! `{"ts_ms":…,"seq":…,"prompt":"…"}`, where `seq` counts submissions from 1 and `ts_ms` is the
//! wall clock in milliseconds since the Unix epoch. Invariants: the file is opened `O_APPEND`,
//! each line goes out in a single `write(2)` (so concurrent writers, and readers polling the
//! file, never see two records interleaved) and is fsynced before `append` returns; the agent
//! appends before it shows the prompt, so anything visible was already logged. desk's delivery
//! tests read it back with [`read_prompt_log`].

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

/// One line of the prompt log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptRecord {
    pub ts_ms: u64,
    pub seq: u64,
    pub prompt: String,
}

/// An open prompt log; see the module documentation.
pub struct PromptLog {
    file: File,
    path: PathBuf,
}

impl PromptLog {
    /// Open (creating if needed) `path` for appending.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let file = OpenOptions::new().append(true).create(true).open(path).with_context(|| {
            format!(
                "cannot open prompt log {} for appending; check that its directory exists \
                     and is writable",
                path.display()
            )
        })?;
        Ok(Self { file, path: path.to_path_buf() })
    }

    /// Append one record with a single write, then fsync.
    pub fn append(&mut self, record: &PromptRecord) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(record).context("cannot encode a prompt record")?;
        line.push(b'\n');
        let written =
            self.file.write(&line).with_context(|| format!("cannot append to prompt log {}", self.path.display()))?;
        if written != line.len() {
            bail!(
                "short write to prompt log {} ({written} of {} bytes; disk full?); the log now \
                 ends with a partial line",
                self.path.display(),
                line.len()
            );
        }
        self.file.sync_all().with_context(|| format!("cannot fsync prompt log {}", self.path.display()))
    }
}

/// Every record in the prompt log at `path`, in file order. A missing file is an empty log.
pub fn read_prompt_log(path: &Path) -> anyhow::Result<Vec<PromptRecord>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str(line)
                .with_context(|| format!("{} line {}: not a prompt record: {line:?}", path.display(), i + 1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appended_records_read_back_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log.jsonl");
        let mut log = PromptLog::open(&path).expect("open");
        let a = PromptRecord { ts_ms: 1, seq: 1, prompt: "one\ntwo \"quoted\"".into() };
        let b = PromptRecord { ts_ms: 2, seq: 2, prompt: "three".into() };
        log.append(&a).expect("append");
        log.append(&b).expect("append");
        assert_eq!(read_prompt_log(&path).expect("read"), vec![a, b]);
        let text = std::fs::read_to_string(&path).expect("text");
        assert!(text.starts_with("{\"ts_ms\":1,\"seq\":1,\"prompt\":"), "{text}");
    }

    #[test]
    fn missing_log_reads_as_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(read_prompt_log(&dir.path().join("none")).expect("read"), vec![]);
    }
}
