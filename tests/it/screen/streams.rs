//! Recorded streams of real programs (`tests/data/streams/`, see the README there): the
//! keyframe fidelity check at many split offsets, and the final screen against the reviewed
//! expected text next to each recording.

use std::path::{Path, PathBuf};

use desk_term::screen::Screen;

use super::oracle::{check_splits, check_text};

/// The size every stream was recorded at.
const COLS: u16 = 80;
const ROWS: u16 = 24;

fn streams_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/streams")
}

/// Every `*.bin` recording, sorted by name.
fn recordings() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(streams_dir()) else {
        panic!("missing {}", streams_dir().display());
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    paths.sort();
    paths
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn recordings_exist() {
    assert!(recordings().len() >= 5, "expected at least 5 recordings in {}", streams_dir().display());
}

#[test]
fn recorded_streams_end_on_the_reviewed_screen() {
    for path in recordings() {
        let mut model = Screen::new(COLS, ROWS);
        model.process(&read(&path));
        let expected_path = path.with_extension("screen.txt");
        let got = model.text_rows().join("\n") + "\n";
        if std::env::var_os("DESK_UPDATE_EXPECTED").is_some() {
            // Regenerate, then review the diff by hand before committing.
            std::fs::write(&expected_path, &got).unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()));
            continue;
        }
        let expected =
            std::fs::read_to_string(&expected_path).unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()));
        assert_eq!(got, expected, "{} final screen", path.display());
    }
}

#[test]
fn recorded_streams_match_the_oracle_text() {
    for path in recordings() {
        if let Err(e) = check_text(COLS, ROWS, &read(&path)) {
            panic!("{}: {e}", path.display());
        }
    }
}

#[test]
fn recorded_streams_survive_keyframes() {
    for path in recordings() {
        let stream = read(&path);
        // Every ground offset for short streams, about 400 of them for long ones.
        let stride = (stream.len() / 400).max(1);
        match check_splits(COLS, ROWS, &stream, stride) {
            Ok(n) => assert!(n > 0),
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }
}

/// True when `prefix` ends with a DECSTBM (`CSI Pt ; Pb r`).
fn just_set_region(prefix: &[u8]) -> bool {
    let Some(body) = prefix.strip_suffix(b"r") else {
        return false;
    };
    let params = body.iter().rev().take_while(|b| b.is_ascii_digit() || **b == b';').count();
    body[..body.len() - params].ends_with(b"\x1b[")
}

/// True when `prefix` ends with an absolute cursor positioning (CUP, HVP) or DECRC.
fn just_positioned(prefix: &[u8]) -> bool {
    if prefix.ends_with(b"\x1b8") {
        return true;
    }
    let Some(body) = prefix.strip_suffix(b"H").or_else(|| prefix.strip_suffix(b"f")) else {
        return false;
    };
    let params = body.iter().rev().take_while(|b| b.is_ascii_digit() || **b == b';').count();
    body[..body.len() - params].ends_with(b"\x1b[")
}

/// True when `prefix` ends with `CSI ? 1049 h`.
fn just_entered_alternate(prefix: &[u8]) -> bool {
    prefix.ends_with(b"\x1b[?1049h")
}

/// Recordings whose intermediate screens depend on where vt100 departs from xterm, with why.
/// Their keyframe fidelity and final screens are still checked above.
const NOT_STEPWISE: &[(&str, &str)] = &[(
    "less.bin",
    "xterm keeps the cursor on ?1049h and vt100 homes it; less does not home before drawing \
     its first page, so that page sits one row lower in xterm (and in the model)",
)];

#[test]
fn recorded_streams_match_the_oracle_at_every_step() {
    use super::oracle::Oracle;
    for path in recordings() {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if NOT_STEPWISE.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let stream = read(&path);
        let mut model = Screen::new(COLS, ROWS);
        let mut oracle = Oracle::new(COLS, ROWS);
        let mut cursor_out_of_step = false;
        for (i, b) in stream.iter().enumerate() {
            model.process(std::slice::from_ref(b));
            oracle.process(std::slice::from_ref(b));
            if !model.at_ground_state() {
                continue;
            }
            assert_eq!(model.text_rows(), oracle.text_rows(), "{} after {} bytes", path.display(), i + 1);
            let prefix = &stream[..=i];
            if just_set_region(prefix) || just_entered_alternate(prefix) {
                // vt100 homes to the region's top even without origin mode (xterm: to row 0),
                // and homes on ?1049h (xterm keeps the cursor); the programs recorded here
                // position the cursor soon after (CUP or DECRC), which puts both in step.
                cursor_out_of_step = true;
            } else if just_positioned(prefix) {
                cursor_out_of_step = false;
            }
            if cursor_out_of_step {
                continue;
            }
            let (row, col, past) = oracle.cursor();
            assert_eq!(
                (model.cursor(), model.pending_wrap()),
                ((row, col), past),
                "{} cursor after {} bytes",
                path.display(),
                i + 1
            );
        }
    }
}

/// The output of an asciinema v2 recording of a real agent (`tests/data/agents/`), and the
/// terminal size it was recorded at.
fn agent_recording(agent: &str, scenario: &str) -> (u16, u16, Vec<u8>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/agents/{agent}/{scenario}.cast"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header: serde_json::Value = serde_json::from_str(lines.next().expect("a header")).expect("a JSON header");
    let size = |key: &str| header[key].as_u64().and_then(|n| u16::try_from(n).ok()).expect("the recorded size");
    let mut out = Vec::new();
    for line in lines {
        let event: serde_json::Value = serde_json::from_str(line).expect("a JSON event");
        if event[1] == "o" {
            out.extend_from_slice(event[2].as_str().expect("output text").as_bytes());
        }
    }
    (size("width"), size("height"), out)
}

#[test]
fn real_agent_recordings_survive_keyframes() {
    // Claude Code draws inline, Codex and OpenCode on the alternate screen: every recording of
    // each, about 30 offsets per recording (a debug build replays each split through vt100).
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/agents");
    let mut checked = 0;
    for agent in ["claude", "codex", "opencode"] {
        let mut casts: Vec<String> = std::fs::read_dir(dir.join(agent))
            .expect("the agent's recordings")
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".cast").map(str::to_string))
            .collect();
        casts.sort();
        for scenario in &casts {
            let (cols, rows, stream) = agent_recording(agent, scenario);
            checked += 1;
            let offsets = super::oracle::ground_offsets(cols, rows, &stream).len();
            match check_splits(cols, rows, &stream, (offsets / 30).max(1)) {
                Ok(n) => assert!(n > 0),
                Err(e) => panic!("{agent}/{scenario}: {e}"),
            }
        }
    }
    assert!(checked >= 30, "only {checked} recordings");
}
