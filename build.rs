//! Marks the integration tests whose prerequisites this machine lacks, so that `cargo test`
//! shows them as ignored ("needs tmux") instead of passing without running.
//!
//! A few tests need more than `cargo test` builds: tmux and vim (oracles and programs to drive),
//! zsh and fish (shells to deliver to), root (to mount a small tmpfs, to connect as another
//! user), OpenSSH's server and client (the remote tests run an sshd on 127.0.0.1). For each one
//! missing, this sets a cfg (`desk_missing_tmux`, `desk_missing_vim`, `desk_missing_zsh`,
//! `desk_missing_fish`, `desk_missing_root`, `desk_missing_sshd`) that those tests turn into
//! `#[ignore = "needs ..."]`. Where `CI` is set it sets none: CI runs every test, and a test
//! whose prerequisite is missing there fails (tests/it/suite.rs, `require`). The look is taken
//! when the package is built: after installing one, a `cargo clean -p desk` (or any change to
//! `PATH`) looks again.

use std::path::Path;

fn main() {
    println!(
        "cargo::rustc-check-cfg=cfg(desk_missing_tmux, desk_missing_vim, desk_missing_zsh, desk_missing_fish, desk_missing_root, desk_missing_sshd)"
    );
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=CI");
    println!("cargo::rerun-if-env-changed=PATH");
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        return;
    }
    for program in ["tmux", "vim", "zsh", "fish"] {
        if !on_path(program) {
            println!("cargo::rustc-cfg=desk_missing_{program}");
        }
    }
    if !root() {
        println!("cargo::rustc-cfg=desk_missing_root");
    }
    if !Path::new("/usr/sbin/sshd").is_file() || !on_path("ssh") {
        println!("cargo::rustc-cfg=desk_missing_sshd");
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Whether this build runs as root (the tests run as the same user): the effective uid in
/// `/proc/self/status` (a build script has no libc of its own).
fn root() -> bool {
    let status = std::fs::read_to_string(Path::new("/proc/self/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1).map(|euid| euid == "0"))
        .unwrap_or(false)
}
