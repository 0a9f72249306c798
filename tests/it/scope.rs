//! Masters in a systemd user scope of their own (src/launch/scope.rs): what desk asks of
//! `systemd-run`, and what it does when `systemd-run` cannot make the scope.
//!
//! The machines this suite runs on have no systemd, so the user manager is stood in for at its
//! two edges desk looks at: `$XDG_RUNTIME_DIR/systemd/private` exists (the manager's socket), and
//! a `systemd-run` on `PATH` that records how it was called and then does what the real one does
//! once the scope is made — executes the command after `--` in its own process — or fails
//! the way it does without a manager. What systemd itself does with the scope (outliving the
//! login, lingering) is systemd's, and cannot be shown here.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::support::{Home, eventually};

/// A directory holding a `systemd-run` with `body` after a line that records its pid and
/// arguments in `calls` (one line per call), and a runtime directory with the manager's
/// private socket in it (a plain file: desk looks only for its presence).
fn fake_systemd(dir: &Path, body: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let bin = dir.join("bin");
    let runtime = dir.join("xdg");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(runtime.join("systemd")).unwrap();
    std::fs::write(runtime.join("systemd/private"), "").unwrap();
    let calls = dir.join("calls");
    let script = format!("#!/bin/sh\necho \"$$ $*\" >> '{}'\n{body}\n", calls.display());
    let run = bin.join("systemd-run");
    std::fs::write(&run, script).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755)).unwrap();
    (bin, runtime)
}

fn path_with(bin: &Path) -> std::ffi::OsString {
    let mut dirs = vec![bin.to_path_buf()];
    dirs.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    std::env::join_paths(dirs).unwrap()
}

#[test]
fn a_master_runs_as_the_process_systemd_run_put_in_the_scope() {
    let home = Home::new();
    // As the real one: past its options to `--`, then become the command.
    let (bin, runtime) = fake_systemd(home.path(), "while [ \"$1\" != -- ]; do shift; done\nshift\nexec \"$@\"");
    let out = home
        .cmd()
        .env("PATH", path_with(&bin))
        .env("XDG_RUNTIME_DIR", &runtime)
        .args(["new", "api.v2", "--", "sh", "-c", "echo scoped; exec sleep 1000"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    home.wait_screen("api.v2", "scoped");
    let calls = std::fs::read_to_string(home.path().join("calls")).unwrap();
    let (pid, args) = calls.trim().split_once(' ').unwrap();
    assert!(
        args.starts_with("--user --scope --quiet --collect --unit=desk-api.v2-1 --description=desk session master -- "),
        "{args}"
    );
    // systemd-run executes the master in its own process, the one it moved into the scope.
    assert_eq!(home.master_pid("api.v2"), pid.parse::<i32>().unwrap());
    // Off by the setting: no call more.
    let out = home
        .cmd()
        .env("PATH", path_with(&bin))
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("DESK_SYSTEMD_SCOPE", "0")
        .args(["new", "plain", "--", "sh", "-c", "echo unscoped; exec sleep 1000"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    home.wait_screen("plain", "unscoped");
    assert_eq!(std::fs::read_to_string(home.path().join("calls")).unwrap().lines().count(), 1);
}

#[test]
fn a_scope_that_cannot_be_made_leaves_the_master_started_without_one() {
    let home = Home::new();
    // What systemd-run says and does when the user's manager is not there after all.
    let (bin, runtime) = fake_systemd(home.path(), "echo 'Failed to connect to bus: No medium found' >&2\nexit 1");
    let out = home
        .cmd()
        .env("PATH", path_with(&bin))
        .env("XDG_RUNTIME_DIR", &runtime)
        .args(["new", "web", "--", "sh", "-c", "echo still here; exec sleep 1000"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("cannot start the master of web in a systemd scope"), "{err}");
    home.wait_screen("web", "still here");
    let master = home.master_pid("web");
    let calls = std::fs::read_to_string(home.path().join("calls")).unwrap();
    let tried: i32 = calls.split_whitespace().next().unwrap().parse().unwrap();
    assert_ne!(master, tried, "the master is a process of its own, not the failed systemd-run");
    eventually("the session listed running", || {
        let s = home.session("web").ok_or("not listed")?;
        (s["status"] == "running").then_some(()).ok_or(format!("{s}"))
    });
}
