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

/// On the host: the manifest on standard input, kept as `state/fleet/hosted/ORIGIN.toml`
/// (durably, replacing the one the same origin gave before); its path. A `dry_run` keeps it
/// aside instead (`ORIGIN.dry-run.toml`, which the caller removes), so that it changes nothing.
pub(super) fn receive(paths: &Paths, origin: &str, dry_run: bool) -> Result<PathBuf> {
    let text = desk_common::fsutil::read_bounded(std::io::stdin().lock(), MAX_MANIFEST, "the manifest on stdin")
        .map_err(|e| failure(2, e.to_string()))?;
    let dir = paths.state.join("fleet").join("hosted");
    desk_common::paths::ensure_private_dir(&dir)?;
    let path = dir.join(if dry_run { format!("{origin}.dry-run.toml") } else { format!("{origin}.toml") });
    desk_common::fsutil::write_atomic(&path, &text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// [`run`] on every host of `on_hosts` at once (one slow or lost host does not hold up the
/// others): each host's answer, by its name.
pub(super) fn run_all(
    on_hosts: &OnHosts<'_>,
    loaded: &Loaded,
    args: &[&str],
) -> BTreeMap<String, Result<serde_json::Value, String>> {
    std::thread::scope(|scope| {
        let asked: Vec<_> = on_hosts
            .iter()
            .map(|(name, (host, specs))| (name, scope.spawn(move || run(name, host, specs, loaded, args))))
            .collect();
        asked
            .into_iter()
            .map(|(name, answer)| {
                (name.clone(), answer.join().unwrap_or_else(|_| Err("asking it failed (a panic here)".into())))
            })
            .collect()
    })
}

/// Run `args` (`up` or `down`, `--json`) for `selected` on host `name`, with the manifest of
/// every session `loaded` declares on it on its standard input (`--manifest-stdin` naming where
/// it comes from): the `data` of its answer, or why there is none.
fn run(
    name: &str,
    host: &Host,
    selected: &[&SessionSpec],
    loaded: &Loaded,
    args: &[&str],
) -> Result<serde_json::Value, String> {
    let origin = origin(loaded);
    let declared: Vec<&SessionSpec> =
        loaded.manifest.sessions.iter().filter(|s| s.host.as_deref() == Some(name)).collect();
    let text = desk_core::fleet::manifest::hosted_text(&declared, &format!("{origin}:{}", loaded.path.display()));
    let mut command: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    command.extend(["--manifest-stdin".into(), origin, "--json".into()]);
    command.extend(selected.iter().map(|s| s.name.clone()));
    let link = super::remote::connect(name, host).map_err(|e| format!("{e:#}"))?;
    let input: Box<dyn std::io::Read + Send> = Box::new(std::io::Cursor::new(text.into_bytes()));
    let (code, out, err) = link.exec_output_with(&command, Some(input)).map_err(|e| format!("{e:#}"))?;
    let answer: serde_json::Value = serde_json::from_slice(&out).map_err(|_| {
        let said = String::from_utf8_lossy(&err);
        format!("desk {} failed there (exit {code}): {}", args[0], said.trim())
    })?;
    if answer["error"].is_object() {
        return Err(answer["error"]["message"].as_str().unwrap_or("refused").to_string());
    }
    Ok(answer["data"].clone())
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
