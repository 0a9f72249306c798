//! Shell completion: the scripts (`desk completions SHELL`, `--install`), and the values they
//! ask `desk` for while someone presses Tab — session names, channel names and item ids, read
//! from the live fleet.
//!
//! Owns the dynamic completion of clap_complete's `unstable-dynamic` engine: the script a shell
//! sources is a few lines that run `desk` itself with [`VAR`] set (`DESK_COMPLETE=bash desk --
//! desk attach de`), and [`main`] answers that before anything else runs. The values come from
//! what a listing reads without asking any master: the names in the runtime directory, the
//! channel directories, the item files' names. Invariants: completing never creates a file or
//! a directory and never waits on a master or the daemon; an unreadable directory completes
//! nothing rather than failing; every flag and subcommand completes from the same definitions as
//! `--help`.

use std::ffi::OsStr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap_complete::CompletionCandidate;
use clap_complete::env::{EnvCompleter, Shells};

use desk_common::paths::Paths;

/// The environment variable that makes `desk` answer a completion request instead of running:
/// desk's own name for it, so a `COMPLETE` someone set for another tool changes nothing here.
pub(super) const VAR: &str = "DESK_COMPLETE";

/// Answer a completion request and exit, if this process is one (the shell's script runs
/// `DESK_COMPLETE=SHELL desk -- WORDS...`); otherwise return at once.
pub(super) fn main() {
    clap_complete::CompleteEnv::with_factory(super::visible_command).var(VAR).completer("desk").complete();
}

/// The script that makes `shell` complete `desk` (it calls `desk` from `PATH`).
pub(super) fn script(shell: &str) -> Result<Vec<u8>> {
    let completer = shell_completer(shell)?;
    let mut out = Vec::new();
    completer.write_registration(VAR, "desk", "desk", "desk", &mut out).context("cannot write the script")?;
    if shell == "zsh" {
        // Autoloaded from fpath as `_desk` (the package's vendor-completions, `--install`), the
        // file runs on the first Tab: it then completes that Tab too, not only the next ones.
        out.extend_from_slice(b"if [[ ${funcstack[1]:-} == _desk ]]; then _clap_dynamic_completer_desk \"$@\"; fi\n");
    }
    Ok(out)
}

fn shell_completer(shell: &str) -> Result<&'static dyn EnvCompleter> {
    const SHELLS: Shells<'static> = Shells::builtins();
    SHELLS.completer(shell).ok_or_else(|| {
        super::failure(
            2,
            format!(
                "no completion for the shell {shell:?}; desk completes {}",
                SHELLS.names().collect::<Vec<_>>().join(", ")
            ),
        )
    })
}

/// Where `shell` loads a user's completions from without any setup, and what else (if
/// anything) the user must do once for it to.
fn install_path(shell: &str) -> Result<(PathBuf, Option<String>)> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    let xdg = |var: &str, fallback: &str| -> Result<PathBuf> {
        match std::env::var_os(var).filter(|v| !v.is_empty()) {
            Some(dir) => Ok(PathBuf::from(dir)),
            None => home
                .as_ref()
                .map(|h| h.join(fallback))
                .ok_or_else(|| super::failure(1, format!("neither {var} nor HOME is set: nowhere to install"))),
        }
    };
    Ok(match shell {
        // bash-completion (2.9 and later) loads these on the first Tab after `desk`.
        "bash" => (xdg("XDG_DATA_HOME", ".local/share")?.join("bash-completion/completions/desk"), None),
        "fish" => (xdg("XDG_CONFIG_HOME", ".config")?.join("fish/completions/desk.fish"), None),
        // zsh has no user directory of its own: this one, added to fpath once.
        "zsh" => {
            let dir = xdg("XDG_DATA_HOME", ".local/share")?.join("zsh/site-functions");
            let once = format!(
                "add to ~/.zshrc, before compinit, once: fpath=({} $fpath); autoload -Uz compinit && compinit",
                dir.display()
            );
            (dir.join("_desk"), Some(once))
        }
        other => {
            return Err(super::failure(
                2,
                format!(
                    "--install knows where bash, zsh and fish look; for {other}, add the output of `desk completions {other}` to its startup file"
                ),
            ));
        }
    })
}

/// `desk completions [SHELL] [--install]`.
pub(super) fn completions(shell: Option<String>, install: bool) -> Result<i32> {
    let shell = match shell {
        Some(shell) => shell,
        None => {
            let from_env = std::env::var("SHELL")
                .ok()
                .and_then(|s| std::path::Path::new(&s).file_name().and_then(|n| n.to_str()).map(String::from));
            from_env.ok_or_else(|| super::failure(2, "name the shell (bash, zsh or fish): SHELL is not set"))?
        }
    };
    let text = script(&shell)?;
    if !install {
        use std::io::Write;
        std::io::stdout().write_all(&text).context("cannot write the script")?;
        return Ok(0);
    }
    let (path, once) = install_path(&shell)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    desk_common::fsutil::write_atomic(&path, &text).with_context(|| format!("cannot write {}", path.display()))?;
    println!("installed {shell} completions for desk: {}", path.display());
    match once {
        Some(step) => println!("{step}"),
        None => println!("new {shell} sessions complete desk's commands, sessions, channels and item ids"),
    }
    Ok(0)
}

/// Desk's directories as the environment names them, if they can be named.
fn paths() -> Option<Paths> {
    Paths::from_env().ok()
}

/// Every session's name (running or exited): the runtime directory's entries.
pub(super) fn sessions() -> Vec<CompletionCandidate> {
    let Some(paths) = paths() else { return Vec::new() };
    paths
        .session_names_and_exits()
        .unwrap_or_default()
        .into_iter()
        .map(|(name, exited)| CompletionCandidate::new(name.as_str()).help(exited.then(|| "exited".into())))
        .collect()
}

/// The sessions the manifest here declares (`desk.toml` in the current directory or the
/// nearest one above it, as `desk up` finds it), for `desk up` and `desk down`; none where
/// there is no manifest or it does not read.
pub(super) fn declared() -> Vec<CompletionCandidate> {
    let Ok(loaded) = crate::manifest::load(None) else { return Vec::new() };
    loaded
        .manifest
        .sessions
        .into_iter()
        .map(|spec| {
            let help = match &spec.host {
                Some(host) => format!("declared, on {host}"),
                None => "declared".into(),
            };
            CompletionCandidate::new(spec.name).help(Some(help.into()))
        })
        .collect()
}

/// The sessions desk knows and those the manifest here declares (`desk restart`), a host's
/// written `HOST:NAME` as `desk restart` takes it.
pub(super) fn sessions_and_declared() -> Vec<CompletionCandidate> {
    let mut all = sessions();
    let Ok(loaded) = crate::manifest::load(None) else { return all };
    for spec in loaded.manifest.sessions {
        let spec = match &spec.host {
            Some(host) => CompletionCandidate::new(format!("{host}:{}", spec.name)).help(Some("declared".into())),
            None => CompletionCandidate::new(spec.name).help(Some("declared".into())),
        };
        if !all.iter().any(|c| c.get_value() == spec.get_value()) {
            all.push(spec);
        }
    }
    all
}

/// Every channel's name.
pub(super) fn channels() -> Vec<CompletionCandidate> {
    let Some(paths) = paths() else { return Vec::new() };
    desk_daemon::channel::store::ChannelStore::at(&paths)
        .list()
        .unwrap_or_default()
        .into_iter()
        .map(|name| CompletionCandidate::new(name.as_str()))
        .collect()
}

/// The item ids that start or end with what is typed so far (an id is named by either, as
/// `desk item` takes it): the whole id replaces the word.
pub(super) fn items(current: &OsStr) -> Vec<CompletionCandidate> {
    let Some(paths) = paths() else { return Vec::new() };
    if !paths.state.join("delivery").is_dir() {
        return Vec::new();
    }
    let Ok(store) = desk_daemon::store::Store::open(&paths.state) else { return Vec::new() };
    let typed = current.to_string_lossy();
    let mut ids = store.ids_with_prefix_or_suffix(&typed).unwrap_or_default();
    // Newest first: the id just printed by `desk send` is the one most often wanted.
    ids.reverse();
    ids.into_iter().map(|id| CompletionCandidate::new(id.as_str())).collect()
}
