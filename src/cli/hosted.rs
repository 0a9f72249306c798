//! The sessions a manifest of this machine declares on a host (`host = "gpu"`): `desk up` and
//! `desk down` hand them to the host's desk, which runs them as its own (docs/fleet.md,
//! docs/remote.md).
//!
//! Owns both ends of that hand-over. Here: which of the selected sessions are a host's (each
//! host checked to be configured before anything is done), the manifest text each host is given
//! (`desk_core::fleet::manifest::hosted_text`), and the host's answer read back into this
//! command's report, its sessions written `HOST:NAME`. On the host: the hidden
//! `--manifest-stdin ORIGIN` of `up` and `down`, which keeps what it is given as
//! `state/fleet/hosted/ORIGIN.toml` (so that the host's `desk restart`, its supervisor and its
//! `desk ls` read the same declarations) and runs the command on it. Invariants: a host that
//! cannot be reached, or refuses, fails its own sessions only, each saying why; nothing of a
//! host's sessions is kept or started on this machine.

use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::output::ErrorCode;
use super::{fail, failure};
use crate::manifest::Loaded;
use desk_common::config::{Config, Host};
use desk_common::paths::Paths;
use desk_core::fleet::manifest::{MAX_MANIFEST, SessionSpec};

/// The selected sessions each host runs, by the host's name: its config entry and its sessions.
pub(super) type OnHosts<'a> = BTreeMap<String, (Host, Vec<&'a SessionSpec>)>;

/// The sessions of `specs` this machine runs, and those each host runs (by host, in name
/// order). A `host` that config.toml does not name is a usage error naming the session.
pub(super) fn split<'a>(
    loaded: &Loaded,
    specs: Vec<&'a SessionSpec>,
    config: &Config,
    paths: &Paths,
) -> Result<(Vec<&'a SessionSpec>, OnHosts<'a>)> {
    let mut here = Vec::new();
    let mut hosts = OnHosts::new();
    for spec in specs {
        let Some(name) = &spec.host else {
            here.push(spec);
            continue;
        };
        let Some(host) = config.hosts.get(name) else {
            let known: Vec<&str> = config.hosts.keys().map(String::as_str).collect();
            let known = if known.is_empty() { "none".to_string() } else { known.join(", ") };
            return Err(failure(
                2,
                format!(
                    "{}: [session.{}]: host {name:?} is not in {} (configured: {known})",
                    loaded.path.display(),
                    spec.name,
                    desk_common::config::path(paths).display()
                ),
            ));
        };
        hosts.entry(name.clone()).or_insert_with(|| (host.clone(), Vec::new())).1.push(spec);
    }
    Ok((here, hosts))
}

/// Which manifest of which machine a host's copy comes from: this machine's name and a hash of
/// the manifest's path, so that two manifests (or two machines) never overwrite each other's.
pub(super) fn origin(loaded: &Loaded) -> String {
    let machine: String = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_default()
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "._-".contains(*c))
        .take(40)
        .collect();
    let machine = if machine.is_empty() { "desk".to_string() } else { machine };
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in loaded.path.as_os_str().as_encoded_bytes() {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{machine}-{hash:016x}")
}

/// An origin as `--manifest-stdin` takes it (what [`origin`] makes): it names a file.
pub(super) fn parse_origin(s: &str) -> Result<String, String> {
    let good = !s.is_empty()
        && s.len() <= 64
        && !s.starts_with('.')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if good { Ok(s.to_string()) } else { Err(format!("{s:?} is not an origin ([A-Za-z0-9._-], at most 64)")) }
}

/// On the host: the manifest on standard input, checked (a text this desk cannot read is
/// refused, exit 2, and the copy the same origin gave before is kept), then kept as
/// `state/fleet/hosted/ORIGIN.toml` (durably, replacing that copy); its path. A `dry_run` keeps
/// it aside instead (`ORIGIN.dry-run.PID.toml`, which the caller removes), so that it changes
/// nothing.
pub(super) fn receive(paths: &Paths, origin: &str, dry_run: bool) -> Result<PathBuf> {
    let text = desk_common::fsutil::read_bounded(std::io::stdin().lock(), MAX_MANIFEST, "the manifest on stdin")
        .map_err(|e| failure(2, e.to_string()))?;
    let dir = paths.state.join("fleet").join("hosted");
    let name = if dry_run { format!("{origin}.dry-run.{}.toml", std::process::id()) } else { format!("{origin}.toml") };
    let path = dir.join(name);
    let readable = std::str::from_utf8(&text).map_err(|_| "it is not UTF-8 text".to_string()).and_then(|t| {
        desk_core::fleet::manifest::parse(t).map(|_| ()).map_err(|e| e.render(&path.display().to_string()))
    });
    if let Err(why) = readable {
        return Err(failure(2, format!("the sessions another machine's desk sent cannot be read here: {why}")));
    }
    desk_common::paths::ensure_private_dir(&dir)?;
    desk_common::fsutil::write_atomic(&path, &text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// 60 s, and 15 s more for each session: how long a host's `desk up` or `desk down` is waited
/// for. It starts its sessions one at a time, each within seconds (an OpenCode resume looks
/// for its conversation for up to 45 s); a host past this is said to be still acting, and
/// this command does not wait on it.
fn patience(sessions: usize) -> Duration {
    Duration::from_secs(60) + Duration::from_secs(15) * u32::try_from(sessions).unwrap_or(u32::MAX / 16)
}

/// What became of a request to a host.
#[derive(Debug)]
pub(super) enum HostAnswer {
    /// Its answer's `data`.
    Data(serde_json::Value),
    /// It did nothing: it could not be reached, or refused before acting (exit 2).
    Refused(String),
    /// It may have done part of it: it stopped with another error, the connection ended, or
    /// it did not answer in time.
    Unknown(String),
}

/// [`run`] on every host of `on_hosts` at once (one slow or lost host does not hold up the
/// others), each within [`patience`]: each host's answer, by its name.
pub(super) fn run_all(on_hosts: &OnHosts<'_>, loaded: &Loaded, args: &[&str]) -> BTreeMap<String, HostAnswer> {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut longest = Duration::ZERO;
    for (name, (host, specs)) in on_hosts {
        longest = longest.max(patience(specs.len()));
        let (name, host, loaded, tx) = (name.clone(), host.clone(), loaded.clone(), tx.clone());
        let selected: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        std::thread::spawn(move || {
            let answer = run(&name, &host, &selected, &loaded, &args);
            let _ = tx.send((name, answer));
        });
    }
    drop(tx);
    let deadline = Instant::now() + longest;
    let mut answers = BTreeMap::new();
    while answers.len() < on_hosts.len() {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok((name, answer)) => {
                answers.insert(name, answer);
            }
            Err(_) => break,
        }
    }
    for (name, (_, specs)) in on_hosts {
        answers.entry(name.clone()).or_insert_with(|| {
            HostAnswer::Unknown(format!(
                "no answer within {} s; it may still be acting (desk ls -H {name} shows what runs)",
                patience(specs.len()).as_secs()
            ))
        });
    }
    answers
}

/// Run `args` (`up` or `down`, `--json`) for the sessions named `selected` on host `name`,
/// with the manifest of every session `loaded` declares on it on its standard input
/// (`--manifest-stdin` naming where it comes from).
fn run(name: &str, host: &Host, selected: &[String], loaded: &Loaded, args: &[String]) -> HostAnswer {
    let origin = origin(loaded);
    let declared: Vec<&SessionSpec> =
        loaded.manifest.sessions.iter().filter(|s| s.host.as_deref() == Some(name)).collect();
    let text = desk_core::fleet::manifest::hosted_text(&declared, &format!("{origin}:{}", loaded.path.display()));
    let mut command = args.to_vec();
    command.extend(["--manifest-stdin".into(), origin, "--json".into()]);
    command.extend(selected.iter().cloned());
    let link = match super::remote::connect(name, host) {
        Ok(link) => link,
        Err(e) => return HostAnswer::Refused(format!("{e:#}")),
    };
    let input: Box<dyn std::io::Read + Send> = Box::new(std::io::Cursor::new(text.into_bytes()));
    let (code, out, err) = match link.exec_output_with(&command, Some(input)) {
        Ok(ran) => ran,
        Err(e) => return HostAnswer::Unknown(format!("{e:#}")),
    };
    let Ok(answer) = serde_json::from_slice::<serde_json::Value>(&out) else {
        let said = String::from_utf8_lossy(&err);
        return HostAnswer::Unknown(format!("desk {} failed there (exit {code}): {}", args[0], said.trim()));
    };
    if !answer["error"].is_object() {
        return HostAnswer::Data(answer["data"].clone());
    }
    let message = answer["error"]["message"].as_str().unwrap_or("refused").to_string();
    if message.contains("--manifest-stdin") {
        return HostAnswer::Refused(format!(
            "its desk does not take a manifest from another machine (an older desk?): install this desk's version there \
             (docs/upgrading.md); it said: {}",
            message.lines().next().unwrap_or_default()
        ));
    }
    // Exit 2 is a refusal before anything was done (a usage error, a manifest it cannot use).
    if code == 2 { HostAnswer::Refused(message) } else { HostAnswer::Unknown(message) }
}

/// The usage error of a plain name that a manifest declares on a host, for `desk restart`.
pub(super) fn restart_on_host(name: &str, host: &str, loaded: &Loaded) -> anyhow::Error {
    fail(
        ErrorCode::Usage,
        format!("{name} runs on host {host} (declared in {}): desk restart {host}:{name}", loaded.path.display()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_names_a_file_and_nothing_else() {
        assert!(parse_origin("laptop-00ff00ff00ff00ff").is_ok());
        for bad in ["", "../x", ".hidden", "a/b", "a b", &"x".repeat(65)] {
            assert!(parse_origin(bad).is_err(), "{bad:?}");
        }
    }
}
