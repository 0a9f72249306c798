//! Replaying a recorded agent: `desk-demo-agent --replay FILE.cast` writes the output events of
//! an asciicast v2 recording (`tests/data/agents/`) to the terminal with their recorded timing,
//! then stays, silent, until it is killed. Tests run it under a real master to see what desk's
//! master, screen model (and the output events its parse finds) and state authority make of what Claude Code, Codex and OpenCode really drew.
//!
//! Invariants: only `"o"` events are written, each in one write and in order; input is read and
//! discarded (the terminal is raw, so nothing typed or answered is echoed onto the screen); the
//! timing is the recording's divided by `speed`, measured from start, never sped up by a slow
//! write; `until` (seconds of recording time) cuts the replay off there.

use anyhow::{Context, bail};
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// One recorded output event: recording time in seconds and the bytes written.
pub type OutputEvent = (f64, String);

/// The output events of an asciicast v2 file, in order; other events are skipped.
pub fn read_cast(path: &Path) -> anyhow::Result<Vec<OutputEvent>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut lines = text.lines();
    let header: serde_json::Value = serde_json::from_str(lines.next().unwrap_or(""))
        .with_context(|| format!("{}: the first line is not an asciicast header", path.display()))?;
    if header["version"] != 2 {
        bail!("{}: not an asciicast v2 recording (version {})", path.display(), header["version"]);
    }
    let mut events = Vec::new();
    for (i, line) in lines.enumerate() {
        let event: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("{}: line {} is not JSON", path.display(), i + 2))?;
        if let (Some(t), Some("o"), Some(data)) = (event[0].as_f64(), event[1].as_str(), event[2].as_str()) {
            events.push((t, data.to_string()));
        }
    }
    Ok(events)
}

/// Replay `path` (see the module documentation); returns only on error.
pub fn run(path: &Path, speed: f64, until: Option<f64>) -> anyhow::Result<std::convert::Infallible> {
    if !(speed > 0.0 && speed.is_finite()) {
        bail!("--replay-speed must be a positive number, not {speed}");
    }
    let events = read_cast(path)?;
    let _raw = super::terminal::RawMode::enter().ok();
    // Discard input on a thread of its own so that queries' answers never fill the terminal's
    // input buffer.
    std::thread::spawn(|| {
        let mut sink = [0u8; 4096];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
    });
    let start = Instant::now();
    let mut out = std::io::stdout().lock();
    for (t, data) in events.iter().filter(|(t, _)| until.is_none_or(|u| *t <= u)) {
        let due = start + Duration::from_secs_f64(t / speed);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        out.write_all(data.as_bytes()).and_then(|()| out.flush()).context("cannot write to the terminal")?;
    }
    loop {
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_output_events_are_read_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.cast");
        std::fs::write(&file, "{\"version\": 2, \"width\": 80, \"height\": 24}\n[0.1, \"o\", \"a\"]\n[0.2, \"i\", \"x\"]\n[0.3, \"m\", \"ready\"]\n[0.4, \"o\", \"\\u001b[?2004h\"]\n").unwrap();
        assert_eq!(read_cast(&file).unwrap(), vec![(0.1, "a".to_string()), (0.4, "\x1b[?2004h".to_string())]);
        std::fs::write(&file, "{\"version\": 1}\n").unwrap();
        assert!(read_cast(&file).unwrap_err().to_string().contains("not an asciicast v2"));
    }
}
