//! The test suite checked against itself: every saved proptest regression is replayed.

use std::path::{Path, PathBuf};

/// The workspace root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `dir` whose name ends with `ext`, recursively (none if `dir` is missing).
fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files(&path, ext));
        } else if path.to_string_lossy().ends_with(ext) {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The package roots of the workspace: the root package and every crate under `crates/`.
fn packages() -> Vec<PathBuf> {
    let mut roots = vec![root()];
    roots.extend(
        files(&root().join("crates"), "Cargo.toml").into_iter().filter_map(|p| p.parent().map(Path::to_path_buf)),
    );
    roots
}

#[test]
fn every_saved_proptest_regression_sits_where_proptest_reads_it() {
    // proptest reads the cases saved for `src/a/b.rs` from `proptest-regressions/a/b.txt` beside
    // the package's `src` (FileFailurePersistence::SourceParallel); a file anywhere else is
    // never replayed, and the regressions it holds can come back unnoticed.
    let mut saved = 0;
    for package in packages() {
        let dir = package.join("proptest-regressions");
        for file in files(&dir, ".txt") {
            let relative = file.strip_prefix(&dir).expect("under its directory").with_extension("rs");
            let source = package.join("src").join(&relative);
            let text = std::fs::read_to_string(&source).unwrap_or_default();
            assert!(
                text.contains("proptest!"),
                "{} is replayed by no test: {} has no proptest (move it beside the source whose proptests saved it)",
                file.strip_prefix(root()).unwrap_or(&file).display(),
                source.strip_prefix(root()).unwrap_or(&source).display()
            );
            saved += 1;
        }
    }
    assert!(saved >= 3, "only {saved} regression files found");
}
