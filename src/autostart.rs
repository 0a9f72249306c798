//! Starting `desk serve` for the commands that need it, the way tmux starts its server.
//!
//! Owns the decision and the act: a command that needs the delivery daemon (`send`, `channel
//! post`, `channel add`, `new` with an agent provider, `up` of a fleet that needs it, `dash`,
//! and the operator commands that only the daemon can carry out) calls [`ensure_daemon`] first; if no daemon listens, it is
//! started — through the systemd user unit `desk.service` when that unit is installed for this
//! very executable and desk's files are in their usual places (no `DESK_HOME`), otherwise as
//! `desk serve` does it — and the command says so once, on stderr. Invariants: never a second
//! daemon (a daemon that is there but slow counts as running, and the daemon's own lock refuses
//! a second); `DESK_AUTOSTART=0` or `[serve] autostart = false` in the config file turns it off,
//! and then nothing is started and nothing is said; a start that fails is reported as a note,
//! never as the command's failure (the command's own durable work does not depend on it).
//! Also owns the two acts autostart and the `desk serve` command both need: telling whether a
//! daemon listens ([`daemon_down`]) and starting one detached from this executable
//! ([`start_detached`]). Used by the commands ([`crate::cli`]) and the dashboard
//! ([`crate::dash`]); depends on neither.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use desk_common::failure::{ErrorCode, fail, failure};
use desk_common::paths::Paths;

/// The systemd user unit desk's package installs (`packaging/desk.service`).
pub(crate) const UNIT: &str = "desk.service";

/// 10 s: how long a start through systemd may take to listen. The daemon listens within
/// milliseconds of starting; systemd adds a D-Bus round trip. Past this, desk starts one itself.
const SYSTEMD_PATIENCE: Duration = Duration::from_secs(10);

/// How often the control socket is tried while systemd starts the unit: a tenth of a typical
/// start, and one `connect` each.
const SOCKET_POLL: Duration = Duration::from_millis(20);

/// What [`ensure_daemon`] found or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Daemon {
    /// One listens already.
    Running,
    /// This command started it; the words say how (`pid 1234`, `systemctl --user start desk.service`).
    Started(String),
    /// Autostart is off (`DESK_AUTOSTART=0`, or `[serve] autostart = false`).
    Off,
    /// It could not be started: why.
    Failed(String),
}

impl Daemon {
    /// The line a command prints (or adds to its JSON notes) about it, if any.
    pub(crate) fn note(&self) -> Option<String> {
        match self {
            Daemon::Started(how) => Some(format!(
                "started desk serve, the delivery daemon ({how}); it keeps running (desk serve --stop ends it)"
            )),
            Daemon::Failed(why) => Some(format!("could not start desk serve: {why}")),
            Daemon::Running | Daemon::Off => None,
        }
    }

    /// Print [`Daemon::note`] on stderr, unless JSON was asked for (the note goes in its
    /// `notes` then); returns the note.
    pub(crate) fn say(&self, json: bool) -> Option<String> {
        let note = self.note()?;
        if !json {
            eprintln!("desk: {note}");
        }
        Some(note)
    }
}

/// Whether autostart is on: `DESK_AUTOSTART` when set (`0`, `no`, `false` or `off` turn it
/// off), else `[serve] autostart` in the config file, else on.
pub(crate) fn enabled(paths: &Paths) -> bool {
    if let Some(value) = std::env::var_os("DESK_AUTOSTART").filter(|v| !v.is_empty()) {
        let value = value.to_string_lossy().to_ascii_lowercase();
        return !matches!(value.as_str(), "0" | "no" | "false" | "off");
    }
    // A config file desk cannot read turns nothing off here: the commands that read it for
    // their own settings report it.
    desk_common::config::load(paths).ok().and_then(|c| c.autostart).unwrap_or(true)
}

/// Make sure `desk serve` runs, starting it if it does not and autostart is on.
pub(crate) fn ensure_daemon(paths: &Paths) -> Daemon {
    if !daemon_down(paths) {
        return Daemon::Running;
    }
    if !enabled(paths) {
        return Daemon::Off;
    }
    let mut systemd_failed = None;
    if std::env::var_os("DESK_HOME").is_none_or(|h| h.is_empty())
        && let Some(unit) = installed_unit_for_this_exe()
    {
        match start_with_systemd(paths) {
            Ok(()) => return Daemon::Started(format!("systemctl --user start {UNIT}, {}", unit.display())),
            Err(why) => systemd_failed = Some(why),
        }
    }
    match start_detached() {
        Ok(pid) => Daemon::Started(match systemd_failed {
            Some(why) => format!("pid {pid}; through systemd it failed: {why}"),
            None => format!("pid {pid}"),
        }),
        // Another command started one meanwhile.
        Err(_) if !daemon_down(paths) => Daemon::Running,
        Err(e) => Daemon::Failed(format!("{e:#}")),
    }
}

/// Where systemd looks for user units, most specific first (systemd.unit(5), "User Unit
/// Search Path").
fn user_unit_dirs() -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let env_dir = |var: &str, fallback: &str| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(fallback)))
    };
    let mut dirs = Vec::new();
    dirs.extend(env_dir("XDG_CONFIG_HOME", ".config").map(|d| d.join("systemd/user")));
    dirs.push(PathBuf::from("/etc/systemd/user"));
    dirs.extend(env_dir("XDG_DATA_HOME", ".local/share").map(|d| d.join("systemd/user")));
    dirs.push(PathBuf::from("/usr/local/lib/systemd/user"));
    dirs.push(PathBuf::from("/usr/lib/systemd/user"));
    dirs
}

/// The installed `desk.service` whose `ExecStart` runs this very executable (a unit for another
/// desk would start a daemon of another version), if any.
fn installed_unit_for_this_exe() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?.canonicalize().ok()?;
    let unit = user_unit_dirs().into_iter().map(|d| d.join(UNIT)).find(|p| p.is_file())?;
    let text = std::fs::read_to_string(&unit).ok()?;
    let program = exec_start_program(&text)?;
    (Path::new(&program).canonicalize().ok()? == exe).then_some(unit)
}

/// The program of a unit file's `ExecStart=` (its first word, without systemd's `-@:+!`
/// prefixes).
fn exec_start_program(unit: &str) -> Option<String> {
    let line = unit.lines().map(str::trim).find_map(|l| l.strip_prefix("ExecStart="))?;
    let program = line.trim_start_matches(['-', '@', ':', '+', '!']).split_whitespace().next()?;
    Some(program.to_string())
}

/// `systemctl --user start desk.service`, then wait until the daemon listens on this desk's
/// control socket (the unit's daemon could use other directories than this command if the
/// user manager's environment differs: then it never does, and desk starts one itself).
fn start_with_systemd(paths: &Paths) -> Result<(), String> {
    let status = std::process::Command::new("systemctl")
        .args(["--user", "start", UNIT])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("cannot run systemctl: {e}"))?;
    if !status.success() {
        return Err(format!("systemctl --user start {UNIT}: {status}"));
    }
    let deadline = Instant::now() + SYSTEMD_PATIENCE;
    while daemon_down(paths) {
        if Instant::now() > deadline {
            return Err(format!("{UNIT} started but does not listen on this desk's socket"));
        }
        std::thread::sleep(SOCKET_POLL);
    }
    Ok(())
}

/// Whether no daemon listens on the control socket (as opposed to one that is slow): then the
/// store on disk is the whole truth, and the inspection commands read it themselves.
pub(crate) fn daemon_down(paths: &Paths) -> bool {
    match std::os::unix::net::UnixStream::connect(desk_common::daemon_client::socket_path(paths)) {
        Ok(_) => false,
        Err(e) => matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused),
    }
}

/// Start `desk serve` detached (its own session, no terminal) from this executable, and return
/// its pid once it listens; its own report of why not otherwise (`already-exists` when one
/// runs already). The starting is the daemon's crate's ([`desk_daemon::spawn`]).
pub(crate) fn start_detached() -> Result<u32> {
    use desk_daemon::spawn::StartError;
    let exe = std::env::current_exe().context("cannot find the desk executable")?;
    desk_daemon::spawn::start_detached(&exe).map_err(|e| match e {
        StartError::AlreadyRunning(why) => fail(ErrorCode::AlreadyExists, why),
        StartError::Failed(why) => fail(ErrorCode::Failed, why),
        died @ StartError::Died(_) => failure(1, died.to_string()),
        StartError::Spawn(e) => e,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_program_is_the_first_word_of_exec_start() {
        let unit = "[Unit]\nDescription=x\n[Service]\nExecStart=/usr/bin/desk serve --foreground\n";
        assert_eq!(exec_start_program(unit).as_deref(), Some("/usr/bin/desk"));
        assert_eq!(exec_start_program("ExecStart=-/opt/desk serve").as_deref(), Some("/opt/desk"));
        assert_eq!(exec_start_program("[Service]\n"), None);
    }

    #[test]
    fn the_shipped_unit_runs_desk_serve_in_the_foreground() {
        let unit = include_str!("../packaging/desk.service");
        assert_eq!(exec_start_program(unit).as_deref(), Some("/usr/bin/desk"));
        assert!(unit.contains("ExecStart=/usr/bin/desk serve --foreground"), "{unit}");
        // Stopping the daemon must never take the agents with it (its cgroup holds none, but
        // sessions a future daemon restarts would be its children).
        assert!(unit.contains("KillMode=process"), "{unit}");
    }
}
