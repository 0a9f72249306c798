//! The test suite checked against itself: what a test needs from the machine is there (or the
//! test shows as ignored, and fails in CI), every saved proptest regression is replayed, and
//! every crash failpoint in the code is one a crash test stops at.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Something a test needs from the machine, beyond what `cargo test` builds.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Needs {
    /// A program on `PATH` (tmux, vim, zsh, fish).
    Program(&'static str),
    /// Root: to mount a small tmpfs, or to connect as another user.
    Root,
    /// OpenSSH's server (`/usr/sbin/sshd`, package openssh-server) and client: the remote tests
    /// run their own sshd on 127.0.0.1.
    Sshd,
}

/// Whether the machine has it.
fn present(need: Needs) -> bool {
    match need {
        Needs::Program(name) => std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file())),
        Needs::Root => nix::unistd::geteuid().is_root(),
        Needs::Sshd => Path::new("/usr/sbin/sshd").is_file() && present(Needs::Program("ssh")),
    }
}

/// Called first by every test with a prerequisite. Where the prerequisite is missing, the build
/// script (`build.rs`) has already marked the test `#[ignore = "needs ..."]` (so `cargo test`
/// shows it as ignored, never as a silent pass), except when `CI` is set: CI must run every
/// test, so there a missing prerequisite fails the test, saying what to install. A test run
/// with `--include-ignored` on a machine without it fails the same way.
pub(crate) fn require(need: Needs) {
    if present(need) {
        return;
    }
    let what = match need {
        Needs::Program(name) => format!("{name} is not installed (apt-get install {name})"),
        Needs::Root => "this test needs root (to mount a tmpfs, or to connect as another user)".to_string(),
        Needs::Sshd => "OpenSSH is not installed (apt-get install openssh-server openssh-client)".to_string(),
    };
    let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    panic!(
        "{what}{}",
        if ci {
            "; CI runs every test (.ci/run installs tmux, vim, zsh, fish and OpenSSH; CI must run as root)"
        } else {
            ""
        }
    );
}

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

/// The string literals in every `failpoint(...)` call of the sources under `dir` (a call with a
/// variable names its steps elsewhere, see below), and every string literal of those sources.
fn failpoints_in(dir: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut calls, mut literals) = (BTreeSet::new(), BTreeSet::new());
    for file in files(dir, ".rs") {
        let text = std::fs::read_to_string(&file).expect("a readable source");
        for (at, _) in text.match_indices("failpoint(") {
            let call = &text[at + "failpoint(".len()..];
            let Some(end) = call.find(')') else { continue };
            let args = &call[..end];
            if args.contains(": &str") {
                continue; // the definition
            }
            calls.extend(args.split('"').skip(1).step_by(2).map(String::from));
        }
        // The lists themselves do not count as the code naming a step.
        let mut code = text.as_str();
        let mut outside = String::new();
        while let Some(list) = code.find("pub const FAILPOINTS") {
            outside.push_str(&code[..list]);
            code = code[list..].find("];").map_or("", |end| &code[list + end..]);
        }
        outside.push_str(code);
        literals.extend(outside.split('"').skip(1).step_by(2).map(String::from));
    }
    (calls, literals)
}

#[test]
fn every_crash_failpoint_is_listed_and_a_crash_test_stops_at_it() {
    // The shell crates (`src/`, `crates/`) both hold steps: the daemon's pipeline is in
    // crates/desk-daemon.
    let (mut calls, mut literals) = failpoints_in(&root().join("src"));
    let (more_calls, more_literals) = failpoints_in(&root().join("crates"));
    calls.extend(more_calls);
    literals.extend(more_literals);
    let listed: BTreeSet<String> = desk_daemon::store::FAILPOINTS
        .iter()
        .chain(desk_daemon::channel::ingest::FAILPOINTS.iter())
        .chain(desk_common::failpoint::FAILPOINTS.iter())
        .map(|s| s.to_string())
        .collect();
    assert!(listed.len() >= 14, "only {listed:?}");
    // A step the code stops at is in a list the soak draws from...
    let unlisted: Vec<&String> = calls.difference(&listed).collect();
    assert!(unlisted.is_empty(), "failpoints in the code but in no FAILPOINTS list: {unlisted:?}");
    // ...and a listed step is one the code names (a call may take it from a variable).
    let gone: Vec<&String> = listed.iter().filter(|step| !literals.contains(*step)).collect();
    assert!(gone.is_empty(), "listed failpoints the code never names: {gone:?}");
    // A crash test names each step it kills the daemon at (DESK_FAILPOINT).
    let this = file!().rsplit('/').next().unwrap_or_default();
    let tests: String = files(&root().join("tests"), ".rs")
        .iter()
        .filter(|p| !p.ends_with(this))
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .collect();
    let untested: Vec<&String> = listed.iter().filter(|step| !tests.contains(&format!("\"{step}\""))).collect();
    assert!(untested.is_empty(), "failpoints no crash test stops at: {untested:?}");
}
