//! Per-session git worktrees in a temporary repository: created by `desk up` outside the
//! checkout, reused by the next `up`, shown by `desk worktree ls` with what they hold, removed by
//! `desk down --remove-worktree` only when nothing would be lost, and a branch checked out
//! elsewhere refused with where — the main checkout never touched.

use crate::up::{DEMO, Fleet};
use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A repository with one commit on `main` and a subdirectory, in the fleet's directory.
fn repository(fleet: &Fleet) -> std::path::PathBuf {
    let repo = fleet.path().join("repo");
    std::fs::create_dir_all(repo.join("service")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("service/README"), "hello\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    repo
}

fn manifest(branch: &str) -> String {
    format!(
        "[session.w]\nprovider = \"demo\"\ncommand = [\"{DEMO}\"]\ncwd = \"repo/service\"\nworktree = \"{branch}\"\n"
    )
}

#[test]
fn a_worktree_is_created_outside_the_checkout_reused_and_removed_only_when_clean() {
    let fleet = Fleet::new("");
    let repo = repository(&fleet);
    fleet.write(&manifest("feature-x"));
    let out = fleet.ok(&["up"]);
    assert!(out.contains("(created)"), "{out}");
    let w = fleet.home.session("w").unwrap();
    let cwd = w["cwd"].as_str().unwrap().to_string();
    let worktree = w["fleet"]["worktree"].as_str().unwrap().to_string();
    assert!(cwd.starts_with(&worktree) && cwd.ends_with("/service"), "the session runs in its worktree: {cwd}");
    assert!(worktree.starts_with(&fleet.home.path().join("state/worktrees").display().to_string()), "{worktree}");
    assert!(!worktree.starts_with(&repo.display().to_string()), "never inside the checkout");
    assert!(git(&repo, &["worktree", "list"]).contains(&worktree));
    // The main checkout: same branch, nothing changed in it.
    assert_eq!(git(&repo, &["branch", "--show-current"]).trim(), "main");
    assert_eq!(git(&repo, &["status", "--porcelain"]).trim(), "");
    let ls = fleet.ok(&["worktree", "ls"]);
    assert!(ls.contains("feature-x") && ls.contains("clean"), "{ls}");
    // A second up reuses it.
    assert!(fleet.ok(&["up"]).starts_with("nothing to do"));
    fleet.ok(&["down"]);
    fleet.ok(&["up"]);
    assert_eq!(git(&repo, &["worktree", "list"]).lines().count(), 2, "reused, not created again");
    // Unsaved work keeps it.
    std::fs::write(Path::new(&worktree).join("service/notes.txt"), "mine\n").unwrap();
    let json = fleet.json(&["worktree", "ls", "--json"]);
    assert_eq!(json["data"][0]["untracked"], 1, "{json}");
    let out = fleet.ok(&["down", "--remove-worktree"]);
    assert!(out.contains("kept: it has 1 untracked file(s)"), "{out}");
    assert!(Path::new(&worktree).join("service/notes.txt").exists());
    // Committed but on no other branch: still kept.
    git(Path::new(&worktree), &["add", "."]);
    git(Path::new(&worktree), &["commit", "-q", "-m", "work"]);
    let out = fleet.ok(&["down", "--remove-worktree"]);
    assert!(out.contains("kept: it has 1 commit(s) on no other branch or remote"), "{out}");
    // Merged into main: nothing would be lost.
    git(&repo, &["merge", "-q", "--ff-only", "feature-x"]);
    let out = fleet.ok(&["down", "--remove-worktree"]);
    assert!(out.contains("worktree") && out.contains("removed"), "{out}");
    assert!(!Path::new(&worktree).exists());
    assert!(git(&repo, &["branch", "--list", "feature-x"]).contains("feature-x"), "the branch stays");
}

#[test]
fn a_branch_checked_out_elsewhere_is_refused_with_where_and_nothing_starts() {
    let fleet = Fleet::new("");
    let repo = repository(&fleet);
    fleet.write(&manifest("main"));
    let out = fleet.desk(&["up"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("branch main is already checked out at {}", repo.canonicalize().unwrap().display())),
        "{err}"
    );
    assert!(fleet.home.ls().is_empty());
    assert_eq!(git(&repo, &["worktree", "list"]).lines().count(), 1);
}
