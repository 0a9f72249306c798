//! How desk runs OpenSSH: the options every connection to a host gets, and the shared
//! connection (ControlMaster) they go through.
//!
//! Owns the ssh command line for a host ([`command`]) and the care of its ControlMaster socket
//! ([`replace_dead_master`]). Invariants: the destination is passed after `--`, so nothing in it
//! is read as an option (and config refuses one starting with `-` anyway); desk's options come
//! after the user's `ssh_args` (ssh keeps the first value of an option, so the user's `-o` wins)
//! and before `~/.ssh/config` (which applies to everything desk does not set); desk never turns
//! host-key checking off, never asks for a password (`BatchMode`), and keeps the ControlMaster
//! socket in its own 0700 runtime directory. A ControlMaster socket whose master does not answer
//! `ssh -O check` within [`CHECK_TIMEOUT`] is removed before the next connection, so a dead or
//! wedged master cannot make every later call hang.

use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::config::Host;
use crate::paths::Paths;

/// 5 s: how long ssh waits for the host's TCP connection and banner: a host down or unrouted
/// is a row saying so in `desk ls --all` within this, not a hang.
pub const CONNECT_TIMEOUT_S: u32 = 5;

/// ServerAliveInterval 15, ServerAliveCountMax 3: a connection whose host stopped answering is
/// found dead within 45 s even when nothing is typed (what agent-deck and herdr use too).
const SERVER_ALIVE: [&str; 2] = ["ServerAliveInterval=15", "ServerAliveCountMax=3"];

/// 10 minutes: a host's shared connection outlives the command that opened it by this much, so a
/// burst of commands (`ls --all`, then `attach`) pays ssh's key exchange once.
const CONTROL_PERSIST: &str = "ControlPersist=600";

/// 2 s: `ssh -O check` against a live master answers in milliseconds; one that takes longer is
/// wedged and is replaced.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// The directory of the ControlMaster sockets: desk's runtime directory (0700, verified).
pub fn control_dir(paths: &Paths) -> PathBuf {
    paths.runtime.join("ssh")
}

/// The ControlPath: `%C` is ssh's hash of the destination (user, host, port), so two host
/// entries that reach the same account share one connection and a changed entry gets its own.
fn control_path(paths: &Paths) -> PathBuf {
    control_dir(paths).join("%C")
}

/// `ssh [ssh_args] [desk's options] -- DESTINATION REMOTE…` for `host`.
pub fn command(host: &Host, paths: &Paths, remote: &[&str]) -> Command {
    let mut cmd = ssh_with_options(host, paths);
    cmd.arg("--").arg(&host.ssh);
    cmd.args(remote);
    cmd
}

/// `ssh [ssh_args] [desk's options] -t -e none -o LogLevel=ERROR -- DESTINATION REMOTE` for
/// `host`: a terminal session on the host running `remote` (a shell command line) on a pty of its
/// own, with no escape character (every byte typed reaches the host: the remote command's own
/// keys, such as attach's detach key, are the way out), and without ssh's `Connection to … closed`
/// notice (its errors still print; a user's `-o LogLevel` in `ssh_args` wins).
pub fn terminal_command(host: &Host, paths: &Paths, remote: &str) -> Command {
    let mut cmd = ssh_with_options(host, paths);
    cmd.args(["-t", "-e", "none", "-o", "LogLevel=ERROR", "--"]).arg(&host.ssh).arg(remote);
    cmd
}

/// `ssh [ssh_args] [desk's options]`, to which the caller adds what it runs.
fn ssh_with_options(host: &Host, paths: &Paths) -> Command {
    let mut cmd = Command::new("ssh");
    cmd.args(&host.ssh_args);
    for option in options(paths) {
        cmd.arg("-o").arg(option);
    }
    cmd
}

/// desk's `-o` options, in order.
fn options(paths: &Paths) -> Vec<String> {
    let mut options = vec![
        "ControlMaster=auto".to_string(),
        format!("ControlPath={}", control_path(paths).display()),
        CONTROL_PERSIST.to_string(),
        "BatchMode=yes".to_string(),
        format!("ConnectTimeout={CONNECT_TIMEOUT_S}"),
    ];
    options.extend(SERVER_ALIVE.iter().map(|o| o.to_string()));
    options
}

/// Make sure the ControlMaster socket for `host`, if one is there, has a master that answers;
/// remove it otherwise (ssh then starts a fresh master). Returns whether one was replaced.
pub fn replace_dead_master(host: &Host, paths: &Paths) -> Result<bool> {
    crate::paths::ensure_private_dir(&control_dir(paths))?;
    let Some(socket) = master_socket(host, paths) else { return Ok(false) };
    if !socket.exists() {
        return Ok(false);
    }
    if master_answers(host, paths)? {
        return Ok(false);
    }
    match std::fs::remove_file(&socket) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("cannot remove the dead ssh control socket {}", socket.display())),
    }
}

/// `ssh -O OP` for `host`, with desk's options (so it finds the same socket).
fn control_command(host: &Host, paths: &Paths, op: &str) -> Command {
    let mut cmd = ssh_with_options(host, paths);
    cmd.arg("-O").arg(op).arg("--").arg(&host.ssh);
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    cmd
}

/// The socket's path as ssh expands `%C` for this host: `ssh -G` prints the resolved
/// `controlpath`.
fn master_socket(host: &Host, paths: &Paths) -> Option<PathBuf> {
    let mut cmd = ssh_with_options(host, paths);
    cmd.arg("-G").arg("--").arg(&host.ssh).stdin(Stdio::null()).stderr(Stdio::null());
    let out = cmd.output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().find_map(|l| l.strip_prefix("controlpath ")).map(|p| PathBuf::from(p.trim()))
}

/// Whether the master behind the socket answers `ssh -O check` within [`CHECK_TIMEOUT`]; a
/// check that takes longer is killed (by its pid) and counts as no.
fn master_answers(host: &Host, paths: &Paths) -> Result<bool> {
    let mut child = control_command(host, paths, "check").spawn().context("cannot run ssh -O check")?;
    let deadline = Instant::now() + CHECK_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().context("cannot wait for ssh -O check")? {
            return Ok(status.success());
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_command_puts_the_users_args_first_then_desks_options_then_the_destination_after_a_double_dash() {
        let paths = Paths::in_home(Path::new("/h"));
        let host = Host { ssh: "me@box".into(), ssh_args: vec!["-p".into(), "2222".into()], desk: "desk".into() };
        let cmd = command(&host, &paths, &["desk relay"]);
        let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args[..2], ["-p", "2222"]);
        let dash = args.iter().position(|a| a == "--").unwrap();
        assert_eq!(args[dash + 1..], ["me@box", "desk relay"]);
        let options: Vec<&str> = args[2..dash].iter().filter(|a| *a != "-o").map(String::as_str).collect();
        for want in [
            "ControlMaster=auto",
            "ControlPath=/h/run/ssh/%C",
            "BatchMode=yes",
            "ConnectTimeout=5",
            "ServerAliveInterval=15",
            "ServerAliveCountMax=3",
        ] {
            assert!(options.contains(&want), "{want} in {options:?}");
        }
        assert!(options.iter().any(|o| o.starts_with("ControlPersist=")));
        assert!(!args.iter().any(|a| a.to_ascii_lowercase().contains("stricthostkeychecking")));
    }

    #[test]
    fn a_terminal_command_asks_for_a_pty_and_no_escape_character_before_the_double_dash() {
        let paths = Paths::in_home(Path::new("/h"));
        let host = Host { ssh: "me@box".into(), ssh_args: vec!["-p".into(), "2222".into()], desk: "desk".into() };
        let cmd = terminal_command(&host, &paths, "desk attach web");
        let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args[..2], ["-p", "2222"]);
        let dash = args.iter().position(|a| a == "--").unwrap();
        assert_eq!(args[dash + 1..], ["me@box", "desk attach web"]);
        assert!(args[..dash].contains(&"-t".to_string()));
        let escape = args.iter().position(|a| a == "-e").unwrap();
        assert_eq!(args[escape + 1], "none");
        assert!(args[..dash].iter().any(|a| a == "ControlMaster=auto"));
    }
}
