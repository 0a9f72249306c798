//! Recorded streams of real programs (`tests/data/streams/`, see the README there): the
//! keyframe fidelity check at many split offsets, and the final screen against the reviewed
//! expected text next to each recording.

use std::path::{Path, PathBuf};

use desk::screen::Screen;

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
    assert!(
        recordings().len() >= 5,
        "expected at least 5 recordings in {}",
        streams_dir().display()
    );
}

#[test]
fn recorded_streams_end_on_the_reviewed_screen() {
    for path in recordings() {
        let mut model = Screen::new(COLS, ROWS);
        model.process(&read(&path));
        let expected_path = path.with_extension("screen.txt");
        let expected = std::fs::read_to_string(&expected_path)
            .unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()));
        let got = model.text_rows().join("\n") + "\n";
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
