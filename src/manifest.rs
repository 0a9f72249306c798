//! Finding and reading `desk.toml`, and what it means on this machine.
//!
//! Owns where a manifest is looked for (`--manifest PATH`, else `desk.toml` in the current
//! directory or the nearest parent that has one, as cargo finds `Cargo.toml`), reading it
//! (bounded), turning a declared session into what desk starts (its absolute working
//! directory, its command with the provider's program and arguments, its environment), and the
//! list of manifests `desk up` has used, which `desk ls` and the dashboard read to show the
//! declared sessions that are not running. The schema and its checks are desk-core's
//! (`desk_core::fleet::manifest`). Invariants: a manifest that does not parse is an error
//! naming the file, the line and the column, and nothing is done with it; relative paths in a
//! manifest are relative to its own directory, never to where desk was run.

use anyhow::{Context, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use desk_common::failure::failure;
use desk_common::paths::Paths;
use desk_core::fleet::manifest::{self, FILE_NAME, MAX_MANIFEST, Manifest, SessionSpec};

/// A manifest read from a file.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The file, absolute.
    pub path: PathBuf,
    /// Its directory: what relative paths in it are relative to.
    pub dir: PathBuf,
    pub manifest: Manifest,
}

/// `desk.toml` in `start` or its nearest parent that has one.
pub fn find(start: &Path) -> Option<PathBuf> {
    start.ancestors().map(|d| d.join(FILE_NAME)).find(|p| p.is_file())
}

/// The manifest: `path` when given, else the one [`find`] finds from the current directory.
/// A missing or invalid manifest is a usage error (exit 2) that says where desk looked, or the
/// file, line and column of what is wrong.
pub fn load(path: Option<&Path>) -> Result<Loaded> {
    let path = match path {
        Some(p) => p.to_path_buf(),
        None => {
            let cwd = std::env::current_dir().context("cannot read the current directory")?;
            find(&cwd).ok_or_else(|| {
                failure(
                    2,
                    format!(
                        "no {FILE_NAME} in {} or any directory above it; write one (docs/fleet.md) or name it with --manifest PATH",
                        cwd.display()
                    ),
                )
            })?
        }
    };
    read(&path)
}

/// Read and check the manifest at `path`.
pub fn read(path: &Path) -> Result<Loaded> {
    let file =
        std::fs::File::open(path).map_err(|e| failure(2, format!("cannot read manifest {}: {e}", path.display())))?;
    let bytes = desk_common::fsutil::read_bounded(file, MAX_MANIFEST, &path.display().to_string())?;
    let text = String::from_utf8(bytes).map_err(|_| failure(2, format!("{} is not UTF-8 text", path.display())))?;
    let path = std::fs::canonicalize(path).with_context(|| format!("cannot resolve {}", path.display()))?;
    let manifest = manifest::parse(&text).map_err(|e| failure(2, e.render(&path.display().to_string())))?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("/"));
    Ok(Loaded { path, dir, manifest })
}

impl Loaded {
    /// A path as the manifest writes it, made absolute: `~/x` under `HOME`, a relative path
    /// under the manifest's directory.
    pub fn resolve(&self, written: &str) -> PathBuf {
        if let Some(rest) = written.strip_prefix("~/").or_else(|| (written == "~").then_some(""))
            && let Some(home) = std::env::var_os("HOME")
        {
            return PathBuf::from(home).join(rest);
        }
        self.dir.join(written)
    }

    /// A session's working directory as declared (before any worktree), checked to exist.
    pub fn cwd(&self, spec: &SessionSpec) -> Result<PathBuf> {
        let dir = spec.cwd.as_deref().map_or_else(|| self.dir.clone(), |c| self.resolve(c));
        let dir = std::fs::canonicalize(&dir).map_err(|e| {
            failure(
                2,
                format!(
                    "{}: [session.{}]: working directory {} does not exist ({e})",
                    self.path.display(),
                    spec.name,
                    dir.display()
                ),
            )
        })?;
        if !dir.is_dir() {
            return Err(failure(
                2,
                format!("{}: [session.{}]: {} is not a directory", self.path.display(), spec.name, dir.display()),
            ));
        }
        Ok(dir)
    }

    /// Where this manifest's worktrees go: its `worktrees` directory, else desk's.
    pub fn worktrees_root(&self, paths: &Paths) -> PathBuf {
        self.manifest.worktrees.as_deref().map_or_else(|| paths.state.join("worktrees"), |d| self.resolve(d))
    }
}

/// A declared session's command: its `command`, or the provider's own program followed by its
/// `args` (else the config file's arguments for that provider, as `desk new` adds them).
pub fn command(
    spec: &SessionSpec,
    config_args: &std::collections::BTreeMap<String, Vec<String>>,
) -> Result<Vec<OsString>> {
    let given: Vec<OsString> = spec.command.iter().flatten().map(OsString::from).collect();
    let default_command = given.is_empty();
    let (_, mut command) = crate::providers::resolve(Some(spec.provider.as_str()), given).map_err(|e| failure(2, e))?;
    if default_command {
        let args = if spec.args.is_empty() {
            config_args.get(spec.provider.as_str()).cloned().unwrap_or_default()
        } else {
            spec.args.clone()
        };
        command.extend(args.into_iter().map(OsString::from));
    }
    Ok(command)
}

fn registry(paths: &Paths) -> PathBuf {
    paths.state.join("fleet").join("manifests.json")
}

/// `state/fleet/manifests.json`. Version 1 was a bare JSON array of paths, which cannot carry
/// a `version` key; version 2 is `{"version": 2, "manifests": [...]}`. Both are read; version 2
/// is written.
pub const REGISTRY_FORMAT: desk_common::format::Format =
    desk_common::format::Format { name: "manifest registry", oldest: 1, current: 2 };

/// The registry's layout since version 2.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Registry {
    manifests: Vec<PathBuf>,
}

/// A registry's paths, from either version; `Err` says why it cannot be read.
fn decode_registry(bytes: &[u8]) -> Result<Vec<PathBuf>> {
    if let Ok(v1) = serde_json::from_slice::<Vec<PathBuf>>(bytes) {
        return Ok(v1);
    }
    let registry: Registry = desk_common::format::decode(&REGISTRY_FORMAT, bytes)?;
    Ok(registry.manifests)
}

/// The registry's paths; `None` when there is none, `Err` when it cannot be read.
fn read_registry(paths: &Paths) -> Result<Option<Vec<PathBuf>>> {
    let file = registry(paths);
    match std::fs::read(&file) {
        Ok(bytes) => decode_registry(&bytes).map(Some).with_context(|| format!("{} cannot be read", file.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", file.display())),
    }
}

/// The manifests `desk up` has used, most recent last (none when the registry cannot be read:
/// `desk up`, which writes it, sets such a file aside first).
pub fn registered(paths: &Paths) -> Vec<PathBuf> {
    read_registry(paths).ok().flatten().unwrap_or_default()
}

/// 64 manifests: more fleets than one person keeps; the oldest is forgotten first.
const MAX_REGISTERED: usize = 64;

/// Remember that `desk up` used `manifest` (so `desk ls` shows its sessions when they are down).
pub fn register(paths: &Paths, manifest: &Path) -> Result<()> {
    let file = registry(paths);
    let mut list = match read_registry(paths) {
        Ok(list) => list.unwrap_or_default(),
        Err(e) => {
            // Not overwritten unread: set aside and named.
            let aside = desk_common::format::set_aside(&file, format!("{e:#}"))?;
            eprintln!("desk: {}", aside.message());
            Vec::new()
        }
    };
    if list.last().is_some_and(|p| p == manifest) {
        return Ok(());
    }
    list.retain(|p| p != manifest);
    list.push(manifest.to_path_buf());
    let extra = list.len().saturating_sub(MAX_REGISTERED);
    list.drain(..extra);
    desk_common::paths::ensure_private_dir(file.parent().context("no parent")?)?;
    desk_common::session::write_record(&REGISTRY_FORMAT, &file, &Registry { manifests: list })
}

/// Every registered manifest that still reads, with the sessions it declares on this machine:
/// what `desk ls` adds as `down` when nothing of theirs runs (a host's are its own `desk ls`'s).
/// Unreadable ones are skipped (and said on stderr by the caller when it wants).
pub fn declared(paths: &Paths) -> Vec<(PathBuf, SessionSpec)> {
    let mut out = Vec::new();
    for path in registered(paths) {
        let Ok(loaded) = read(&path) else { continue };
        for spec in loaded.manifest.sessions.into_iter().filter(|s| s.host.is_none()) {
            if !out.iter().any(|(_, s): &(PathBuf, SessionSpec)| s.name == spec.name) {
                out.push((loaded.path.clone(), spec));
            }
        }
    }
    out
}
