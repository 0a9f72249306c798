//! `desk doctor`: is everything desk needs in place, and if not, what to do about it.
//!
//! Owns the checks and their report: both executables present and of one version; the runtime
//! directory's owner and mode; `XDG_RUNTIME_DIR` and systemd's linger (without it, logging out
//! removes the runtime directory and may end the sessions); the agent CLIs on `PATH` and their
//! versions against the ones desk's provider rules were recorded with; the hook wiring, by a
//! dry round trip (a throwaway session under a temporary `DESK_HOME`, the hook command exactly
//! as `desk new` wires it, and the hook event read back from the session's journal); `desk
//! serve`; whether an inotify instance can be started (the per-user limit); the config file.
//! Each check is `ok`, `warning` or `error`, with the fix. Invariants:
//! it changes nothing of the user's (the round trip runs in its own temporary directory, which
//! it removes, and kills the session it started); every wait is bounded.

use anyhow::{Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::output;
use desk_common::paths::{Paths, SessionName};

/// The versions desk's rules were recorded with, as the recording scripts pin them
/// (tests/data/agents/README.md): read from the one place that says it.
const AGENTS_LIB: &str = include_str!("../../scripts/agents-lib.sh");

/// 10 s: an agent CLI answers `--version` in well under a second (Claude Code's native binary,
/// Codex's Node wrapper starting its binary); one that has not answered by then is reported as
/// such rather than holding the doctor up.
const VERSION_PATIENCE: Duration = Duration::from_secs(10);

/// 5 s: the hook round trip takes milliseconds (a master starts, one hook frame, one journal
/// line); on a loaded machine it may take a second or two.
const ROUND_TRIP_PATIENCE: Duration = Duration::from_secs(5);

/// 2 s: how long `desk serve` may take to answer a ping.
const SERVE_PATIENCE: Duration = Duration::from_secs(2);

/// How often a wait looks again: fine enough for a tool a person waits on, one syscall each.
const POLL: Duration = Duration::from_millis(20);

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Status {
    Ok,
    Warning,
    Error,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warning => "warning",
            Status::Error => "error",
        }
    }
}

/// One check's outcome.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Check {
    /// What was checked (`executables`, `runtime-dir`, `agent:claude`, ...).
    pub check: String,
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do about it (none when all is well).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

fn check(name: &str, status: Status, detail: impl Into<String>, fix: Option<String>) -> Check {
    Check { check: name.to_string(), status, detail: detail.into(), fix }
}

#[derive(Serialize)]
struct Report {
    checks: Vec<Check>,
    errors: usize,
    warnings: usize,
}

/// Run every check and print the report; exit 1 when any check is an error.
pub(super) fn doctor(json: bool) -> Result<i32> {
    let exe = std::env::current_exe().context("cannot find the desk executable")?;
    let paths = Paths::from_env();
    let mut checks = vec![executables(&exe)];
    match &paths {
        Ok(paths) => {
            checks.push(runtime_dir(paths));
            checks.extend(runtime_env());
        }
        Err(e) => checks.push(check(
            "runtime-dir",
            Status::Error,
            format!("{e:#}"),
            Some("set DESK_HOME to a directory of yours".into()),
        )),
    }
    checks.extend(agents(std::env::var_os("PATH").as_deref()));
    checks.push(hook_round_trip(&exe));
    if let Ok(paths) = &paths {
        checks.push(serve(paths));
        checks.push(inotify());
        checks.push(config(paths));
        checks.push(masters(paths));
        checks.push(set_aside(paths));
    }
    let errors = checks.iter().filter(|c| c.status == Status::Error).count();
    let warnings = checks.iter().filter(|c| c.status == Status::Warning).count();
    let report = Report { checks, errors, warnings };
    if json {
        output::print_ok("doctor", &report, &[])?;
    } else {
        let width = report.checks.iter().map(|c| c.check.len()).max().unwrap_or(0);
        for c in &report.checks {
            println!("{:<7}  {:<width$}  {}", c.status.word(), c.check, c.detail);
            if let Some(fix) = &c.fix {
                println!("{:<7}  {:<width$}  fix: {fix}", "", "");
            }
        }
        println!("{} check(s): {} error(s), {} warning(s)", report.checks.len(), report.errors, report.warnings);
    }
    Ok(if report.errors > 0 { 1 } else { 0 })
}

/// `desk` and `desk-master` side by side, of one version.
fn executables(exe: &Path) -> Check {
    let name = "executables";
    let version = env!("CARGO_PKG_VERSION");
    let master = exe.with_file_name("desk-master");
    if !master.is_file() {
        return check(
            name,
            Status::Warning,
            format!(
                "desk {version} at {}, but no desk-master beside it: each session's master runs from the \
                 larger desk executable instead",
                exe.display()
            ),
            Some(format!("install both together (cargo install --path ., or the Debian package) into {}", dir_of(exe))),
        );
    }
    let want = desk_master::version_line();
    match run_with_patience(Command::new(&master).arg("--version"), VERSION_PATIENCE) {
        Ok(out) if out.trim() == want => check(
            name,
            Status::Ok,
            format!("desk {version} at {}, desk-master beside it of the same version", exe.display()),
            None,
        ),
        Ok(out) => check(
            name,
            Status::Error,
            format!(
                "{} says {:?}, this desk wants {want:?}: the two are of different builds",
                master.display(),
                out.trim()
            ),
            Some(format!("install desk and desk-master together, from one build, into {}", dir_of(exe))),
        ),
        Err(e) => check(
            name,
            Status::Error,
            format!("{} does not run: {e:#}", master.display()),
            Some(format!("install desk and desk-master together, from one build, into {}", dir_of(exe))),
        ),
    }
}

fn dir_of(path: &Path) -> String {
    path.parent().map_or_else(|| ".".into(), |d| d.display().to_string())
}

/// The runtime directory (sockets, session records): a real directory of ours, mode 0700.
fn runtime_dir(paths: &Paths) -> Check {
    let name = "runtime-dir";
    let dir = &paths.runtime;
    if !dir.exists() {
        return check(
            name,
            Status::Ok,
            format!("{} does not exist yet: desk creates it, mode 0700, when it first needs it", dir.display()),
            None,
        );
    }
    match desk_common::paths::verify_private_dir(dir) {
        Ok(()) => check(name, Status::Ok, format!("{}: a directory of yours, mode 0700", dir.display()), None),
        Err(e) => {
            let why = format!("{e:#}");
            let fix = why
                .split_once("Fix with: ")
                .map(|(_, f)| f.to_string())
                .or_else(|| Some("remove it (desk recreates it) or set DESK_HOME to a directory of yours".into()));
            check(name, Status::Error, why, fix)
        }
    }
}

/// `XDG_RUNTIME_DIR` and systemd's linger: where the sockets live, and whether they outlive the
/// login that started them.
fn runtime_env() -> Vec<Check> {
    if std::env::var_os("DESK_HOME").is_some_and(|h| !h.is_empty()) {
        return vec![check("xdg-runtime-dir", Status::Ok, "DESK_HOME is set: it holds every file of desk's", None)];
    }
    let mut checks = Vec::new();
    let user = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| nix::unistd::User::from_uid(nix::unistd::getuid()).ok().flatten().map(|u| u.name));
    let systemd = Path::new("/run/systemd/system").is_dir();
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => checks.push(check(
            "xdg-runtime-dir",
            Status::Ok,
            format!("{}: sockets go to {}/desk", PathBuf::from(&dir).display(), PathBuf::from(&dir).display()),
            None,
        )),
        None => checks.push(check(
            "xdg-runtime-dir",
            Status::Warning,
            match desk_common::paths::Paths::from_env().map(|p| p.runtime) {
                Ok(dir) if !dir.starts_with("/tmp") => {
                    format!("XDG_RUNTIME_DIR is not set: sockets go to {} (systemd's directory of yours)", dir.display())
                }
                _ => format!("XDG_RUNTIME_DIR is not set: sockets go to /tmp/desk-{}, shared /tmp", nix::unistd::geteuid()),
            },
            Some(if systemd {
                "log in through a systemd session (ssh or a display manager set it), or export XDG_RUNTIME_DIR=/run/user/$(id -u)".into()
            } else {
                "export XDG_RUNTIME_DIR to a private directory of yours (mode 0700)".into()
            }),
        )),
    }
    if !systemd {
        checks.push(check("linger", Status::Ok, "not a systemd host: logging out does not end your sessions", None));
        return checks;
    }
    let user = user.unwrap_or_else(|| nix::unistd::getuid().to_string());
    if Path::new("/var/lib/systemd/linger").join(&user).exists() {
        checks.push(check(
            "linger",
            Status::Ok,
            format!("linger is on for {user}: sessions outlive your logins"),
            None,
        ));
    } else {
        checks.push(check(
            "linger",
            Status::Warning,
            format!(
                "linger is off for {user}: when your last login ends, systemd removes XDG_RUNTIME_DIR (desk's \
                 sockets) and may end your processes, sessions among them"
            ),
            Some(format!("loginctl enable-linger {user}")),
        ));
    }
    checks
}

/// The version a recording script pins for an agent (`claude_v=${CLAUDE_CODE_VERSION:-2.1.197}`).
fn recorded_version(variable: &str) -> Option<&'static str> {
    let line = AGENTS_LIB.lines().find(|l| l.starts_with(&format!("{variable}=")))?;
    let version = line.rsplit(":-").next()?.trim_end_matches('}');
    Some(version)
}

/// The first `N.N.N` in a program's `--version` output.
fn version_in(text: &str) -> Option<String> {
    let re = regex_lite::Regex::new(r"\d+\.\d+\.\d+").ok()?;
    re.find(text).map(|m| m.as_str().to_string())
}

/// Each agent CLI desk has rules for: on `PATH`, and of the version the rules were recorded with.
fn agents(path: Option<&std::ffi::OsStr>) -> Vec<Check> {
    use desk_core::provider::Provider;
    let agents = [(Provider::Claude, "claude_v"), (Provider::Codex, "codex_v"), (Provider::OpenCode, "opencode_v")];
    agents
        .into_iter()
        .map(|(provider, variable)| {
            let program = provider.program().unwrap_or_default();
            let name = format!("agent:{provider}");
            let recorded = recorded_version(variable).unwrap_or("?");
            let Some(found) = crate::providers::find_program(program.as_ref(), path) else {
                return check(
                    &name,
                    Status::Ok,
                    format!("{program} is not on PATH (needed only for --provider {provider}; rules recorded with {recorded})"),
                    None,
                );
            };
            match run_with_patience(Command::new(&found).arg("--version"), VERSION_PATIENCE) {
                Ok(out) => match version_in(&out) {
                    Some(v) if v == recorded => check(
                        &name,
                        Status::Ok,
                        format!("{} {v}, the version desk's rules were recorded with", found.display()),
                        None,
                    ),
                    Some(v) => check(
                        &name,
                        Status::Warning,
                        format!(
                            "{} {v}; desk's rules were recorded with {recorded}: a newer or older {program} may draw its \
                             dialogs differently, and desk may misread its state",
                            found.display()
                        ),
                        Some(format!(
                            "use {program} {recorded} where state matters, and check `desk explain` on its sessions; \
                             docs/agents-observed.md says what the rules read"
                        )),
                    ),
                    None => check(
                        &name,
                        Status::Warning,
                        format!("{} --version printed no version: {:?}", found.display(), out.trim()),
                        None,
                    ),
                },
                Err(e) => check(&name, Status::Warning, format!("{} --version failed: {e:#}", found.display()), None),
            }
        })
        .collect()
}

/// The hook wiring, end to end: a throwaway session (its own master) under a temporary
/// `DESK_HOME`, the hook command as `desk new` writes it into an agent's settings, run by `sh`
/// as agents run it, and the hook event read back from the session's journal.
fn hook_round_trip(exe: &Path) -> Check {
    let name = "hooks";
    let fix = Some(format!(
        "check that {} runs and that /tmp is writable; DESK_HOOK_DEBUG=1 makes `desk hook` say why it gives up",
        exe.display()
    ));
    match round_trip(exe) {
        Ok(took) => check(
            name,
            Status::Ok,
            format!("a hook run as agents run it reached its session's master and journal in {} ms", took.as_millis()),
            None,
        ),
        Err(e) => check(name, Status::Error, format!("the hook round trip failed: {e:#}"), fix),
    }
}

fn round_trip(exe: &Path) -> Result<Duration> {
    let template = std::env::temp_dir().join("desk-doctor-XXXXXX");
    let home = nix::unistd::mkdtemp(&template).context("cannot create a temporary DESK_HOME")?;
    let result = round_trip_in(exe, &home);
    let _ = std::fs::remove_dir_all(&home);
    result
}

fn round_trip_in(exe: &Path, home: &Path) -> Result<Duration> {
    let session = SessionName::parse("doctor").map_err(|e| anyhow::anyhow!("{e}"))?;
    let desk = |args: &[&str]| {
        let mut cmd = Command::new(exe);
        cmd.args(args)
            .env("DESK_HOME", home)
            .env("DESK_AUTOSTART", "0")
            .env_remove("DESK_SESSION")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd
    };
    let started = Instant::now();
    let out = desk(&["new", session.as_str(), "--", "sleep", "60"]).output().context("cannot run desk new")?;
    if !out.status.success() {
        anyhow::bail!("desk new: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let outcome = (|| -> Result<Duration> {
        // The command `desk new --provider claude` writes into Claude Code's hook settings.
        let hook = format!("{} hook --provider claude", crate::providers::shell_quote(&exe.to_string_lossy()));
        let mut child = Command::new("sh")
            .args(["-c", &hook])
            .env("DESK_HOME", home)
            .env("DESK_SESSION", session.as_str())
            .env("DESK_GENERATION", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot run the hook command")?;
        if let Some(mut stdin) = child.stdin.take() {
            use std::io::Write;
            stdin
                .write_all(br#"{"hook_event_name":"Notification","message":"desk doctor: a dry run"}"#)
                .context("cannot hand the hook its payload")?;
        }
        child.wait().context("the hook command did not finish")?;
        let paths = Paths::in_home(home);
        let deadline = Instant::now() + ROUND_TRIP_PATIENCE;
        loop {
            let events = desk_common::journal::read_all(&paths.session_state(&session)).unwrap_or_default();
            if events.iter().any(|e| matches!(e.body, desk_wire::events::EventBody::Hook { .. })) {
                return Ok(started.elapsed());
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "no hook event in the session's journal {} s after the hook ran",
                    ROUND_TRIP_PATIENCE.as_secs()
                );
            }
            std::thread::sleep(POLL);
        }
    })();
    let _ = desk(&["kill", session.as_str(), "--grace", "2"]).output();
    outcome
}

/// `desk serve`: reachable on its control socket, or not running (which the commands that need
/// it mend themselves, unless autostart is off).
fn serve(paths: &Paths) -> Check {
    let name = "serve";
    let socket = desk_common::daemon_client::socket_path(paths);
    let ping = desk_common::daemon_client::request(&socket, &desk_wire::control::Request::Ping, SERVE_PATIENCE)
        .map(desk_wire::control::Response::into_answer::<desk_core::delivery::answer::Pid>);
    match ping {
        Ok(Ok(answer)) => {
            let pid = format!(" (pid {})", answer.data.pid);
            check(name, Status::Ok, format!("desk serve runs{pid} and answers on {}", socket.display()), None)
        }
        _ if crate::autostart::daemon_down(paths) => {
            if crate::autostart::enabled(paths) {
                check(name, Status::Ok, "desk serve is not running; the first command that needs it starts it", None)
            } else {
                check(
                    name,
                    Status::Warning,
                    "desk serve is not running, and autostart is off: prompts wait until it runs",
                    Some("desk serve (or: systemctl --user enable --now desk.service)".into()),
                )
            }
        }
        Ok(Err(e)) => check(
            name,
            Status::Error,
            format!("desk serve answers with an error: {}", e.message),
            Some("desk serve --stop, then desk serve; its log is serve.log in desk's state directory".into()),
        ),
        Err(e) => check(
            name,
            Status::Error,
            format!("desk serve listens on {} but does not answer: {e:#}", socket.display()),
            Some("its log (serve.log in desk's state directory) says why; desk serve --stop, then desk serve".into()),
        ),
    }
}

/// Whether this user may start another inotify instance, which `desk serve`, `desk dash` and
/// `desk events --all` each need (masters need none).
fn inotify() -> Check {
    let name = "inotify";
    match desk_common::inotify::start(nix::sys::inotify::InitFlags::empty()) {
        Ok(_) => {
            check(name, Status::Ok, "an inotify instance can be started (desk serve and desk dash need one)", None)
        }
        Err(e) => match e.downcast_ref::<desk_common::inotify::LimitReached>() {
            Some(full) => check(
                name,
                Status::Error,
                format!("{}: desk serve, desk dash and desk events --all cannot start", full.finding()),
                Some(full.fix()),
            ),
            None => check(name, Status::Error, format!("{e:#}"), None),
        },
    }
}

/// The config file: absent (the defaults), or one desk can use.
fn config(paths: &Paths) -> Check {
    let name = "config";
    let path = super::config::path(paths);
    match super::config::load(paths) {
        Ok(_) if !path.exists() => {
            check(name, Status::Ok, format!("no {} (the built-in defaults)", path.display()), None)
        }
        Ok(_) => check(name, Status::Ok, format!("{} is valid", path.display()), None),
        Err(e) => check(
            name,
            Status::Error,
            format!("{e:#}"),
            Some(format!("fix that line of {} (docs/cli.md, \"Config file\")", path.display())),
        ),
    }
}

/// Version skew: the running sessions whose master is older than this desk's (docs/upgrading.md).
fn masters(paths: &Paths) -> Check {
    let name = "masters";
    match super::sessions::older_masters(paths) {
        Ok(older) if older.is_empty() => {
            check(name, Status::Ok, "every running session's master is this desk's (or none runs)", None)
        }
        Ok(older) => check(
            name,
            Status::Warning,
            format!("{} run(s) an older master than this desk's: {}", older.len(), older.join(", ")),
            Some(
                "`desk upgrade` hands each over to this desk's master in place, its agent running on; a master that predates in-place upgrades (or speaks protocol 1) refuses, and then restarting the session is the only way to move it (docs/upgrading.md)"
                    .into(),
            ),
        ),
        Err(e) => check(name, Status::Warning, format!("cannot list the sessions: {e:#}"), None),
    }
}

/// Records desk could not read and kept aside (`<file>.bad`, docs/upgrading.md): each waits for
/// a person to look at it.
fn set_aside(paths: &Paths) -> Check {
    let name = "set-aside";
    let mut found = Vec::new();
    let mut dirs = vec![(paths.state.clone(), 0)];
    // 3 levels: state/delivery/queue/<session>/ holds the deepest records.
    while let Some((dir, depth)) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let file = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() && depth < 3 {
                dirs.push((path, depth + 1));
            } else if file.ends_with(desk_common::format::SET_ASIDE_SUFFIX) || file.contains(".bad.") {
                found.push(path.display().to_string());
            }
        }
    }
    found.sort();
    if found.is_empty() {
        return check(name, Status::Ok, "no record was set aside as unreadable", None);
    }
    check(
        name,
        Status::Warning,
        format!("{} record(s) desk could not read were kept aside: {}", found.len(), found.join(", ")),
        Some(
            "look at each; remove it to acknowledge it, or rename it back without .bad once a desk that reads it is installed (desk queue says why for prompts)"
                .into(),
        ),
    )
}

/// Run a command, giving up after `patience`; its stdout and stderr together.
fn run_with_patience(cmd: &mut Command, patience: Duration) -> Result<String> {
    let mut child =
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().context("cannot run it")?;
    let deadline = Instant::now() + patience;
    loop {
        if child.try_wait()?.is_some() {
            let out = child.wait_with_output()?;
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            return Ok(text);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("it did not answer within {} s", patience.as_secs());
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_versions_are_read_from_the_recording_scripts() {
        for variable in ["claude_v", "codex_v", "opencode_v"] {
            let v = recorded_version(variable).unwrap_or_else(|| panic!("{variable} in scripts/agents-lib.sh"));
            assert!(version_in(v).as_deref() == Some(v), "{variable} = {v:?}");
        }
        // The same versions the corpus's README names.
        let readme = include_str!("../../tests/data/agents/README.md");
        for variable in ["claude_v", "codex_v", "opencode_v"] {
            assert!(readme.contains(recorded_version(variable).unwrap()), "{variable}");
        }
    }

    #[test]
    fn a_version_is_found_in_what_agents_print() {
        assert_eq!(version_in("2.1.197 (Claude Code)").as_deref(), Some("2.1.197"));
        assert_eq!(version_in("codex-cli 0.171.0").as_deref(), Some("0.171.0"));
        assert_eq!(version_in("no version here"), None);
    }
}
