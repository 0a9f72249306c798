//! Per-session git worktrees: creating, reusing, inspecting and removing them with git.
//!
//! Owns the git commands behind `worktree = "branch"` in a manifest: [`prepare`] creates the
//! session's worktree (or reuses the one already there on the same branch) under the
//! manifest's worktree directory, and [`inspect`] and [`remove`] serve `desk worktree ls` and
//! `desk down --remove-worktree`. Where a worktree lives and what may be removed are decided in
//! desk-core (`desk_core::fleet::worktree`). Invariants (peers' users lost work here): desk
//! never deletes a worktree with uncommitted, untracked or unpushed work (it runs `git worktree
//! remove` without `--force`, and only after its own check found nothing to lose); it never
//! runs a command that changes the main checkout's files or branch (`worktree add` writes only
//! the new worktree and git's own records); a branch checked out elsewhere is an error naming
//! where, not a second checkout.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

use desk_common::failure::failure;
use desk_common::launch_record::WorktreeUse;
use desk_core::fleet::worktree::{self as pure, Status, WorktreeEntry};

fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .context("cannot run git (is it installed?)")?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        anyhow::bail!("git {} failed: {err}", args.join(" "));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The main checkout of the repository that holds `dir` (the first entry of `git worktree
/// list`), and `dir`'s path relative to the checkout it is in.
fn repository(dir: &Path) -> Result<(PathBuf, PathBuf, Vec<WorktreeEntry>)> {
    let top = git(dir, &["rev-parse", "--show-toplevel"])
        .map_err(|_| failure(2, format!("{} is not in a git repository, and `worktree` needs one", dir.display())))?;
    let top = PathBuf::from(top.trim());
    let entries = pure::parse_worktree_list(&git(dir, &["worktree", "list", "--porcelain"])?);
    let main = entries.first().map(|e| PathBuf::from(&e.path)).unwrap_or_else(|| top.clone());
    let relative = dir.strip_prefix(&top).map(Path::to_path_buf).unwrap_or_default();
    Ok((main, relative, entries))
}

/// What [`prepare`] did, or would do with `dry_run`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prepared {
    Created,
    Reused,
    /// `dry_run`: it would be created.
    WouldCreate,
}

/// The session's worktree of the repository holding `cwd`, on `branch`, under `root`: created
/// (from the branch, or as a new branch from the checkout's HEAD) or reused; returns it, the
/// session's working directory inside it (`cwd`'s place in the repository), and what was done.
pub fn prepare(
    root: &Path,
    session: &str,
    cwd: &Path,
    branch: &str,
    dry_run: bool,
) -> Result<(WorktreeUse, PathBuf, Prepared)> {
    let (repo, relative, entries) = repository(cwd)?;
    let path = PathBuf::from(pure::worktree_dir(&root.to_string_lossy(), &repo.to_string_lossy(), session));
    let used = WorktreeUse {
        repo: repo.to_string_lossy().into_owned(),
        branch: branch.to_string(),
        path: path.to_string_lossy().into_owned(),
    };
    let inside = path.join(&relative);
    let here = entries.iter().find(|e| Path::new(&e.path) == path);
    if let Some(entry) = here {
        return match entry.branch.as_deref() {
            Some(b) if b == branch => Ok((used, inside, Prepared::Reused)),
            other => Err(failure(
                1,
                format!(
                    "{} is the worktree of session {session} but has {} checked out, not {branch}; switch it back, or remove it with: git worktree remove {}",
                    path.display(),
                    other.map_or("no branch (detached HEAD)".to_string(), |b| format!("branch {b}")),
                    path.display()
                ),
            )),
        };
    }
    if let Some(elsewhere) = entries.iter().find(|e| e.branch.as_deref() == Some(branch)) {
        return Err(failure(
            1,
            format!(
                "branch {branch} is already checked out at {}; a branch can be checked out in one worktree only (give session {session} another branch)",
                elsewhere.path
            ),
        ));
    }
    if path.exists() {
        return Err(failure(
            1,
            format!(
                "{} exists but is not a worktree of {}; move it away, then run desk up again",
                path.display(),
                repo.display()
            ),
        ));
    }
    if dry_run {
        return Ok((used, inside, Prepared::WouldCreate));
    }
    desk_common::paths::ensure_private_dir(path.parent().context("a worktree directory has a parent")?)?;
    let local = git(&repo, &["rev-parse", "--verify", "--quiet", &format!("refs/heads/{branch}")]).is_ok();
    let path_str = path.to_string_lossy();
    let result = if local {
        git(&repo, &["worktree", "add", &path_str, branch])
    } else {
        git(&repo, &["worktree", "add", "-b", branch, &path_str])
    };
    result.map_err(|e| failure(1, format!("cannot create the worktree of session {session}: {e:#}")))?;
    Ok((used, inside, Prepared::Created))
}

/// A worktree's state for `desk worktree ls`.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Inspection {
    pub exists: bool,
    /// The branch checked out in it now (`None`: detached, or gone).
    pub checked_out: Option<String>,
    pub changed: usize,
    pub untracked: usize,
    /// Commits not pushed to the upstream, or, without one, on no other branch or remote.
    pub unpushed: Option<u32>,
    pub upstream: Option<String>,
    /// Why it may not be removed (`None`: nothing would be lost).
    pub keep_because: Option<String>,
}

/// Look at a worktree: what it has that is not saved elsewhere.
pub fn inspect(wt: &WorktreeUse) -> Inspection {
    let dir = Path::new(&wt.path);
    if !dir.is_dir() {
        return Inspection::default();
    }
    let status = match git(dir, &["status", "--porcelain=v2", "--branch"]) {
        Ok(s) => pure::parse_status(&s),
        Err(e) => {
            return Inspection {
                exists: true,
                keep_because: Some(format!("its state cannot be read: {e:#}")),
                ..Inspection::default()
            };
        }
    };
    let unpushed = unpushed(dir, &status);
    Inspection {
        exists: true,
        checked_out: status.branch.clone(),
        changed: status.changed,
        untracked: status.untracked,
        unpushed: status.ahead.or(unpushed),
        upstream: status.upstream.clone(),
        keep_because: pure::removable(&status, unpushed).err(),
    }
}

/// Commits of the worktree's branch on no other local branch and no remote (for a branch
/// without an upstream).
fn unpushed(dir: &Path, status: &Status) -> Option<u32> {
    if status.upstream.is_some() {
        return None;
    }
    let mut args = vec!["rev-list", "--count", "HEAD", "--not"];
    let exclude;
    if let Some(branch) = &status.branch {
        // `--exclude` patterns for `--branches` name branches without `refs/heads/`.
        exclude = format!("--exclude={branch}");
        args.push(&exclude);
    }
    args.extend(["--branches", "--remotes"]);
    git(dir, &args).ok()?.trim().parse().ok()
}

/// Remove a worktree with nothing unsaved; `Err` says what it holds (and nothing is removed).
pub fn remove(wt: &WorktreeUse) -> Result<(), String> {
    let seen = inspect(wt);
    if !seen.exists {
        return Ok(());
    }
    if let Some(why) = seen.keep_because {
        return Err(format!("kept: it has {why}"));
    }
    // Without --force: git refuses too if anything changed since the check.
    git(Path::new(&wt.repo), &["worktree", "remove", &wt.path]).map(|_| ()).map_err(|e| format!("kept: {e:#}"))
}
