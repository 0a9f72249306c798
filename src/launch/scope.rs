//! Masters outside the login's scope: a systemd user scope of their own.
//!
//! Owns the decision to start a master through `systemd-run --user --scope` and the command
//! that does it. On a machine where systemd manages the user's session, everything started from
//! a login (a terminal, an SSH connection) lives in that login's scope, and logind may end the
//! scope — every process in it — when the login ends (`KillUserProcesses=yes`, the default on
//! some distributions). A master moved into a transient scope of its own under the user's
//! manager (`desk-<name>-<generation>.scope`) outlives the login; with lingering enabled
//! (`loginctl enable-linger`) the user's manager, and so the masters, outlive the last login
//! too (docs/fleet.md). Invariants: used only when a user manager answers on its private socket
//! and `systemd-run` exists; `DESK_SYSTEMD_SCOPE=0` turns it off; the scope is transient and
//! collected when the master ends (`--collect`), so nothing accumulates.

use std::path::PathBuf;
use std::process::Command;

/// Whether masters are started in a scope of their own: a systemd user manager is reachable
/// and `systemd-run` exists, and `DESK_SYSTEMD_SCOPE` is not `0`.
pub(super) fn available() -> bool {
    if std::env::var_os("DESK_SYSTEMD_SCOPE").is_some_and(|v| v == "0") {
        return false;
    }
    let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) else { return false };
    // The user manager's private socket: present exactly while it runs.
    if !PathBuf::from(runtime).join("systemd/private").exists() {
        return false;
    }
    systemd_run().is_some()
}

fn systemd_run() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join("systemd-run")).find(|p| p.is_file())
}

/// `master` (its program and arguments so far) run through `systemd-run --user --scope` in a
/// transient scope named after the session and generation. systemd-run places itself in the
/// scope and then executes the master, so the master keeps the pid, the file descriptors and
/// the session (`setsid`) it was given.
pub(super) fn command(name: &desk_common::paths::SessionName, generation: u32, master: Command) -> Command {
    let mut cmd = Command::new(systemd_run().unwrap_or_else(|| PathBuf::from("systemd-run")));
    cmd.args(["--user", "--scope", "--quiet", "--collect"])
        .arg(format!("--unit=desk-{}-{generation}", unit_part(name.as_str())))
        .arg("--description=desk session master")
        .arg("--")
        .arg(master.get_program())
        .args(master.get_args());
    cmd
}

/// A session name as a unit name part: unit names allow letters, digits and `:_.-`, which is
/// every character a session name may have; nothing to change but to be sure of it.
fn unit_part(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || "_.-".contains(c) { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scope_wraps_the_master_command_whole() {
        let mut master = Command::new("/opt/desk-master");
        master.arg("--name").arg("api");
        let name = desk_common::paths::SessionName::parse("api.v2").unwrap();
        let cmd = command(&name, 7, master);
        let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(
            args,
            [
                "--user",
                "--scope",
                "--quiet",
                "--collect",
                "--unit=desk-api.v2-7",
                "--description=desk session master",
                "--",
                "/opt/desk-master",
                "--name",
                "api"
            ]
        );
    }
}
