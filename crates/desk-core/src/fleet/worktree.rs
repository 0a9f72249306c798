//! Per-session git worktrees: the pure half.
//!
//! Owns what a worktree branch may be called ([`check_branch`], git's own rules for a branch
//! name, so an error comes before git is ever run), where a session's worktree lives
//! ([`worktree_dir`]: `<root>/<repository>-<8 hex digits of its path>/<session>`, one directory
//! per repository and session, never inside the repository's own checkout), how to read git's
//! porcelain answers ([`parse_worktree_list`], [`parse_status`]) and when a worktree may be
//! removed ([`removable`]: nothing uncommitted, nothing untracked, nothing unpushed).
//! Invariants: a worktree with any unsaved work is never judged removable; a status that cannot
//! be read is unsaved work. Pure: git runs in the desk package.

/// Check a branch name the way `git check-ref-format --branch` would, with a reason.
pub fn check_branch(name: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("{name:?} is not a branch name: {why}"));
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.starts_with('-') {
        return bad("it starts with '-'");
    }
    if name == "@" || name == "HEAD" {
        return bad("it is reserved");
    }
    if name.starts_with('/') || name.ends_with('/') || name.contains("//") {
        return bad("a '/' at either end, or two in a row");
    }
    if name.ends_with('.') || name.ends_with(".lock") {
        return bad("it ends with '.' or '.lock'");
    }
    if name.contains("..") || name.contains("@{") {
        return bad("it contains '..' or '@{'");
    }
    if let Some(c) = name.chars().find(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(*c)) {
        return bad(&format!("it contains {c:?}"));
    }
    if name.split('/').any(|part| part.starts_with('.')) {
        return bad("a part of it starts with '.'");
    }
    Ok(())
}

/// 64-bit FNV-1a: a stable short tag of a repository's path (not a security measure: it only
/// keeps two repositories of the same name apart).
fn fnv1a(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Where session `session`'s worktree of the repository at `repo` (its top-level directory,
/// absolute) lives under `root`.
pub fn worktree_dir(root: &str, repo: &str, session: &str) -> String {
    let repo = repo.trim_end_matches('/');
    let base = repo.rsplit('/').next().filter(|b| !b.is_empty()).unwrap_or("repo");
    let tag = fnv1a(repo) as u32;
    format!("{}/{base}-{tag:08x}/{session}", root.trim_end_matches('/'))
}

/// One entry of `git worktree list --porcelain`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorktreeEntry {
    pub path: String,
    pub head: Option<String>,
    /// The branch checked out (without `refs/heads/`); `None` when detached or bare.
    pub branch: Option<String>,
    pub bare: bool,
    pub detached: bool,
    pub locked: bool,
    pub prunable: bool,
}

/// Parse `git worktree list --porcelain` (entries separated by blank lines).
pub fn parse_worktree_list(text: &str) -> Vec<WorktreeEntry> {
    let mut out = Vec::new();
    let mut current: Option<WorktreeEntry> = None;
    for line in text.lines() {
        if line.is_empty() {
            out.extend(current.take());
            continue;
        }
        let (key, value) = line.split_once(' ').unwrap_or((line, ""));
        if key == "worktree" {
            out.extend(current.take());
            current = Some(WorktreeEntry { path: value.to_string(), ..WorktreeEntry::default() });
            continue;
        }
        let Some(entry) = current.as_mut() else { continue };
        match key {
            "HEAD" => entry.head = Some(value.to_string()),
            "branch" => entry.branch = Some(value.strip_prefix("refs/heads/").unwrap_or(value).to_string()),
            "bare" => entry.bare = true,
            "detached" => entry.detached = true,
            "locked" => entry.locked = true,
            "prunable" => entry.prunable = true,
            _ => {}
        }
    }
    out.extend(current);
    out
}

/// A worktree's state as `git status --porcelain=v2 --branch` tells it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Status {
    pub branch: Option<String>,
    pub upstream: Option<String>,
    /// Commits ahead of the upstream (when there is one).
    pub ahead: Option<u32>,
    pub behind: Option<u32>,
    /// Changed tracked files (staged or not, conflicts included).
    pub changed: usize,
    pub untracked: usize,
}

/// Parse `git status --porcelain=v2 --branch`.
pub fn parse_status(text: &str) -> Status {
    let mut status = Status::default();
    for line in text.lines() {
        if let Some(header) = line.strip_prefix("# ") {
            let (key, value) = header.split_once(' ').unwrap_or((header, ""));
            match key {
                "branch.head" if value != "(detached)" => status.branch = Some(value.to_string()),
                "branch.upstream" => status.upstream = Some(value.to_string()),
                "branch.ab" => {
                    for part in value.split_whitespace() {
                        if let Some(n) = part.strip_prefix('+') {
                            status.ahead = n.parse().ok();
                        } else if let Some(n) = part.strip_prefix('-') {
                            status.behind = n.parse().ok();
                        }
                    }
                }
                _ => {}
            }
        } else if line.starts_with("1 ") || line.starts_with("2 ") || line.starts_with("u ") {
            status.changed += 1;
        } else if line.starts_with("? ") {
            status.untracked += 1;
        }
    }
    status
}

/// Whether a worktree may be removed: `status` as read, and `unpushed` the commits of its
/// branch found on no other branch and no remote (counted when it has no upstream; `None`
/// when that could not be counted). `Err` says what would be lost.
pub fn removable(status: &Status, unpushed: Option<u32>) -> Result<(), String> {
    let mut lost = Vec::new();
    if status.changed > 0 {
        lost.push(format!("{} changed file(s)", status.changed));
    }
    if status.untracked > 0 {
        lost.push(format!("{} untracked file(s)", status.untracked));
    }
    match (status.upstream.as_ref(), status.ahead, unpushed) {
        (Some(up), Some(n), _) if n > 0 => lost.push(format!("{n} commit(s) not pushed to {up}")),
        (Some(_), None, _) => lost.push("an upstream whose distance is unknown".into()),
        (None, _, Some(n)) if n > 0 => lost.push(format!("{n} commit(s) on no other branch or remote")),
        (None, _, None) => lost.push("commits that could not be counted".into()),
        _ => {}
    }
    if lost.is_empty() { Ok(()) } else { Err(lost.join(", ")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_names_follow_gits_rules() {
        for ok in ["feature", "fix/parser-2", "v1.2", "a_b"] {
            assert_eq!(check_branch(ok), Ok(()), "{ok}");
        }
        for bad in
            ["", "-x", "a..b", "a b", "a~1", "x.lock", "/a", "a/", "a//b", ".hidden", "a/.b", "@", "x@{1}", "a:b"]
        {
            assert!(check_branch(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn a_worktree_lives_outside_the_checkout_one_directory_per_repository_and_session() {
        let a = worktree_dir("/s/worktrees", "/home/u/src/desk", "api");
        assert!(a.starts_with("/s/worktrees/desk-") && a.ends_with("/api"), "{a}");
        assert!(!a.starts_with("/home/u/src/desk/"));
        let b = worktree_dir("/s/worktrees/", "/home/u/other/desk/", "api");
        assert_ne!(a, b, "two repositories of one name get two directories");
        assert_eq!(a, worktree_dir("/s/worktrees", "/home/u/src/desk", "api"), "stable");
    }

    #[test]
    fn worktree_lists_and_statuses_parse() {
        let list = "worktree /r\nHEAD abc\nbranch refs/heads/main\n\nworktree /w/api\nHEAD def\nbranch refs/heads/feat/x\nlocked\n\nworktree /w/d\nHEAD 123\ndetached\n";
        let entries = parse_worktree_list(list);
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[1].branch.as_deref(), Some("feat/x"));
        assert!(entries[1].locked && entries[2].detached && entries[2].branch.is_none());
        let status = parse_status(
            "# branch.oid abc\n# branch.head feat\n# branch.upstream origin/feat\n# branch.ab +2 -1\n1 .M N... 100644 100644 100644 a b f.rs\n? new.txt\n",
        );
        assert_eq!(status.branch.as_deref(), Some("feat"));
        assert_eq!((status.ahead, status.behind, status.changed, status.untracked), (Some(2), Some(1), 1, 1));
    }

    #[test]
    fn only_a_worktree_with_nothing_unsaved_is_removable() {
        let clean = Status { upstream: Some("origin/x".into()), ahead: Some(0), ..Status::default() };
        assert_eq!(removable(&clean, None), Ok(()));
        let no_upstream = Status::default();
        assert_eq!(removable(&no_upstream, Some(0)), Ok(()));
        assert!(removable(&no_upstream, Some(3)).unwrap_err().contains("3 commit(s) on no other branch"));
        assert!(removable(&no_upstream, None).is_err(), "what cannot be counted is kept");
        let dirty = Status { changed: 1, untracked: 2, ..clean.clone() };
        assert_eq!(removable(&dirty, None).unwrap_err(), "1 changed file(s), 2 untracked file(s)");
        let ahead = Status { ahead: Some(1), ..clean };
        assert!(removable(&ahead, None).unwrap_err().contains("not pushed to origin/x"));
    }
}
