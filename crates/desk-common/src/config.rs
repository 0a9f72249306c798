//! The user's defaults for the command line: `config.toml` in desk's configuration directory
//! (`$XDG_CONFIG_HOME/desk/`, else `~/.config/desk/`, or `$DESK_HOME/config/` — the directory
//! that also holds provider rule overrides).
//!
//! Owns reading and checking that file: the detach key, the default terminal size of `desk new`,
//! arguments for each provider's own agent command, the notify command `desk serve` runs
//! when a session needs a person, whether commands start `desk serve` when they need it, and the
//! other hosts desk reaches over ssh (`[hosts.NAME]`, docs/remote.md). Invariants: a missing file is the
//! built-in defaults; a bad one is an error naming the file, the line and the key, never half
//! applied; a flag given on the command line always wins over the file. The file's format is
//! versioned ([`CONFIG_VERSION`], the optional top-level `version` key, 1 when absent): a file
//! of this desk's version or an older one is read, and one written for a newer desk is refused
//! by its version, in words, before any key of it is judged. Reads one file; knows nothing of
//! sessions or the daemon.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::failure::{ErrorCode, fail};

/// The config format this desk reads and documents: version 1, the keys below. A file without
/// a `version` key is version 1 (every file written before the key existed).
pub const CONFIG_VERSION: u32 = 1;

/// 64 KiB: a configuration of a few lines; anything this large is not one.
const MAX_CONFIG: usize = 64 * 1024;

/// The checked configuration.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Config {
    /// `[attach] detach_key`: `Some(None)` disables detaching by key.
    pub detach_key: Option<Option<u8>>,
    /// `[attach] status_line`: `false` turns the attach status line off.
    pub status_line: Option<bool>,
    /// `[attach] prefix_key`: the key before attach's own commands; `Some(None)`: none.
    pub prefix_key: Option<Option<u8>>,
    /// `[new] size`.
    pub size: Option<(u16, u16)>,
    /// `[provider.NAME] args`: added after the agent's program when `desk new --provider NAME`
    /// starts it without a command of the user's.
    pub provider_args: BTreeMap<String, Vec<String>>,
    /// `[notify] command`: a shell command (`sh -c`) the daemon runs with a notification's
    /// JSON on stdin.
    pub notify_command: Option<String>,
    /// `[serve] autostart`: whether commands that need `desk serve` start it (default: yes).
    pub autostart: Option<bool>,
    /// `[hosts.NAME]`: the other machines whose sessions this desk reaches over ssh
    /// (docs/remote.md), by name.
    pub hosts: BTreeMap<String, Host>,
}

/// `[hosts.NAME]`: a machine with desk installed that the user can `ssh` to.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Host {
    /// `ssh`: the destination (`user@host`, or an alias of `~/.ssh/config`).
    pub ssh: String,
    /// `ssh_args`: given to ssh before the destination (`["-p", "2222", "-i", "key"]`).
    pub ssh_args: Vec<String>,
    /// `desk`: the command line that runs desk on the host (default `desk`), given to the
    /// host's shell with ` relay` after it.
    pub desk: String,
}

/// 32 bytes: a host's name is typed before every one of its sessions (`gpu:api`).
pub const MAX_HOST_NAME: usize = 32;

/// Check a host's name (`[A-Za-z0-9][A-Za-z0-9._-]{0,31}`): it is typed as `HOST:NAME`, shown
/// in a column and becomes part of no path.
pub fn check_host_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    match chars.next() {
        None => return Err("an empty host name".into()),
        Some('-') => return Err(format!("host name {name:?} starts with `-`, which ssh would take for an option")),
        Some(c) if !c.is_ascii_alphanumeric() => {
            return Err(format!("host name {name:?} must start with a letter or digit"));
        }
        _ => {}
    }
    if name.len() > MAX_HOST_NAME {
        return Err(format!("host name {name:?} is longer than {MAX_HOST_NAME} bytes"));
    }
    if let Some(bad) = chars.find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))) {
        return Err(format!("host name {name:?} has {bad:?}; use letters, digits, `.`, `_` and `-`"));
    }
    Ok(())
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct File {
    /// The format version the file is written for (checked before this struct is parsed).
    #[serde(default, rename = "version")]
    _version: Option<toml::Value>,
    #[serde(default)]
    attach: AttachSection,
    #[serde(default)]
    new: NewSection,
    #[serde(default)]
    provider: BTreeMap<String, ProviderSection>,
    #[serde(default)]
    notify: NotifySection,
    #[serde(default)]
    serve: ServeSection,
    #[serde(default)]
    hosts: BTreeMap<String, HostSection>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HostSection {
    ssh: String,
    #[serde(default)]
    ssh_args: Vec<String>,
    desk: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ServeSection {
    autostart: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct NotifySection {
    command: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct AttachSection {
    detach_key: Option<String>,
    status_line: Option<bool>,
    prefix_key: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct NewSection {
    size: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ProviderSection {
    #[serde(default)]
    args: Vec<String>,
}

/// Where the file is.
pub fn path(paths: &crate::paths::Paths) -> PathBuf {
    paths.config.join("config.toml")
}

/// The configuration in force: the file if there is one, else the defaults.
pub fn load(paths: &crate::paths::Paths) -> anyhow::Result<Config> {
    let path = path(paths);
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
        Err(e) => return Err(fail(ErrorCode::BadConfig, format!("cannot read {}: {e}", path.display()))),
    };
    let bytes = crate::fsutil::read_bounded(file, MAX_CONFIG, &path.display().to_string())
        .map_err(|e| fail(ErrorCode::BadConfig, e.to_string()))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| fail(ErrorCode::BadConfig, format!("{} is not UTF-8 text", path.display())))?;
    parse(&text, &path).map_err(|why| fail(ErrorCode::BadConfig, why))
}

/// Parse and check `text` (read from `path`, named in errors).
fn parse(text: &str, path: &Path) -> Result<Config, String> {
    check_version(text, path)?;
    let file: File = toml::from_str(text).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start);
        let line = text[..at.min(text.len())].matches('\n').count() + 1;
        let key = key_on_line(text, line);
        format!("{}: line {line}{key}: {}", path.display(), e.message().trim())
    })?;
    // Values toml accepted but desk cannot use: named by their key's line.
    let bad = |section: &str, key: &str, why: String| {
        let line = line_of(text, section, key).map_or(String::new(), |l| format!("line {l}: "));
        format!("{}: {line}key `{section}.{key}`: {why}", path.display())
    };
    let detach_key = match file.attach.detach_key {
        Some(spec) => Some(crate::syntax::parse_detach_key(&spec).map_err(|why| bad("attach", "detach_key", why))?),
        None => None,
    };
    let prefix_key = match file.attach.prefix_key {
        Some(spec) => Some(crate::syntax::parse_detach_key(&spec).map_err(|why| bad("attach", "prefix_key", why))?),
        None => None,
    };
    let status_line = file.attach.status_line;
    let size = match file.new.size {
        Some(spec) => Some(crate::syntax::parse_size(&spec).map_err(|why| bad("new", "size", why))?),
        None => None,
    };
    let mut provider_args = BTreeMap::new();
    for (name, section) in file.provider {
        if name.parse::<desk_core::provider::Provider>().is_err() {
            return Err(bad(
                &format!("provider.{name}"),
                "args",
                format!(
                    "unknown provider {name:?}; known providers: {}",
                    desk_core::provider::Provider::names().join(", ")
                ),
            ));
        }
        provider_args.insert(name, section.args);
    }
    let notify_command = match file.notify.command {
        Some(command) if command.trim().is_empty() => {
            return Err(bad("notify", "command", "an empty command; leave the key out to run none".into()));
        }
        other => other,
    };
    let mut hosts = BTreeMap::new();
    for (name, host) in file.hosts {
        let section = format!("hosts.{name}");
        check_host_name(&name).map_err(|why| bad(&section, "ssh", why))?;
        let ssh = host.ssh.trim().to_string();
        if ssh.is_empty() {
            return Err(bad(
                &section,
                "ssh",
                "an empty destination; write user@host or an alias of ~/.ssh/config".into(),
            ));
        }
        if ssh.starts_with('-') {
            return Err(bad(
                &section,
                "ssh",
                format!("destination {ssh:?} starts with `-`, which ssh would take for an option; desk refuses it"),
            ));
        }
        if ssh.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad(&section, "ssh", format!("destination {ssh:?} has a space or control character")));
        }
        let desk = host.desk.unwrap_or_else(|| "desk".into());
        if desk.trim().is_empty() {
            return Err(bad(&section, "desk", "an empty command; leave the key out for `desk`".into()));
        }
        hosts.insert(name, Host { ssh, ssh_args: host.ssh_args, desk });
    }
    Ok(Config {
        detach_key,
        status_line,
        prefix_key,
        size,
        provider_args,
        notify_command,
        autostart: file.serve.autostart,
        hosts,
    })
}

/// The file's `version`, judged on its own: a file for a newer desk would otherwise be refused
/// for the first key this desk does not know, which says nothing of why.
fn check_version(text: &str, path: &Path) -> Result<(), String> {
    #[derive(Deserialize)]
    struct Version {
        version: Option<toml::Value>,
    }
    let Ok(Version { version: Some(version) }) = toml::from_str::<Version>(text) else { return Ok(()) };
    let line = text
        .lines()
        .position(|l| l.split('=').next().is_some_and(|k| k.trim() == "version"))
        .map_or(String::new(), |l| format!("line {}: ", l + 1));
    match version.as_integer() {
        Some(v) if (1..=i64::from(CONFIG_VERSION)).contains(&v) => Ok(()),
        Some(v) if v > i64::from(CONFIG_VERSION) => Err(format!(
            "{}: {line}key `version`: the file is written for config version {v}, a newer desk's; this desk reads version {CONFIG_VERSION}. Upgrade desk, or remove what this desk does not know and set version = {CONFIG_VERSION}",
            path.display()
        )),
        _ => {
            let shown = match (version.as_integer(), version.as_str()) {
                (Some(n), _) => n.to_string(),
                (None, Some(text)) => format!("{text:?}"),
                (None, None) => format!("a {}", version.type_str()),
            };
            Err(format!(
                "{}: {line}key `version`: {shown} is not a config version; this desk reads version {CONFIG_VERSION}",
                path.display()
            ))
        }
    }
}

/// `: key `table.name`` for the key line `line` (from 1) of `text` sets, with the table it is
/// in (or the table the line opens), for an error message.
fn key_on_line(text: &str, line: usize) -> String {
    let here = text.lines().nth(line.saturating_sub(1)).unwrap_or("");
    let key = match table_header(here) {
        Some(table) => table,
        None => {
            let key = here.split('=').next().unwrap_or("").trim().to_string();
            let table = text.lines().take(line.saturating_sub(1)).filter_map(table_header).last().unwrap_or_default();
            match (table.is_empty(), key.is_empty()) {
                (false, false) => format!("{table}.{key}"),
                _ => key,
            }
        }
    };
    if key.is_empty() { String::new() } else { format!(": key `{key}`") }
}

/// The table a header line opens (`[hosts."gpu"]  # a comment` opens `hosts.gpu`); `None` for
/// any other line.
fn table_header(line: &str) -> Option<String> {
    let inside = line.trim().strip_prefix('[')?;
    let mut quoted = false;
    let mut table = String::new();
    for c in inside.chars() {
        match c {
            '"' => quoted = !quoted,
            ']' if !quoted => return Some(table),
            ' ' | '\t' if !quoted => {}
            c => table.push(c),
        }
    }
    Some(table)
}

/// The line (from 1) where `key` is set inside table `[section]`.
fn line_of(text: &str, section: &str, key: &str) -> Option<usize> {
    let mut current = String::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(table) = table_header(line) {
            current = table;
        } else if current == section && line.split('=').next().is_some_and(|k| k.trim() == key) {
            return Some(i + 1);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<Config, String> {
        parse(text, Path::new("/c/config.toml"))
    }

    #[test]
    fn a_good_file_sets_each_default() {
        let config = parsed(
            "[attach]\ndetach_key = \"^]\"\n\n[new]\nsize = \"100x30\"\n\n[provider.claude]\nargs = [\"--model\", \"opus\"]\n",
        )
        .unwrap();
        assert_eq!(config.detach_key, Some(Some(0x1d)));
        assert_eq!(config.size, Some((100, 30)));
        assert_eq!(config.provider_args["claude"], vec!["--model", "opus"]);
        assert_eq!(parsed("").unwrap(), Config::default());
        assert_eq!(parsed("[serve]\nautostart = false\n").unwrap().autostart, Some(false));
        assert_eq!(parsed("[attach]\ndetach_key = \"none\"\n").unwrap().detach_key, Some(None));
        let attach = parsed("[attach]\nstatus_line = false\nprefix_key = \"C-g\"\n").unwrap();
        assert_eq!((attach.status_line, attach.prefix_key), (Some(false), Some(Some(0x07))));
        let e = parsed("[attach]\nprefix_key = \"g\"\n").unwrap_err();
        assert!(e.starts_with("/c/config.toml: line 2: key `attach.prefix_key`: "), "{e}");
        let notify = parsed("[notify]\ncommand = \"notify-send desk \\\"$DESK_NOTIFY_MESSAGE\\\"\"\n").unwrap();
        assert_eq!(notify.notify_command.as_deref(), Some("notify-send desk \"$DESK_NOTIFY_MESSAGE\""));
        let e = parsed("[notify]\ncommand = \" \"\n").unwrap_err();
        assert!(e.starts_with("/c/config.toml: line 2: key `notify.command`: an empty command"), "{e}");
    }

    #[test]
    fn a_bad_file_is_named_with_its_line_and_key() {
        let e = parsed("[new]\nsize = 5\n").unwrap_err();
        assert!(e.starts_with("/c/config.toml: line 2: key `new.size`: "), "{e}");
        let e = parsed("[attach]\n\ndetachkey = \"^]\"\n").unwrap_err();
        assert!(
            e.starts_with("/c/config.toml: line 3: key `attach.detachkey`: ") && e.contains("unknown field"),
            "{e}"
        );
        let e = parsed("size = \"80x24\"\n").unwrap_err();
        assert!(e.starts_with("/c/config.toml: line 1: key `size`: ") && e.contains("unknown field"), "{e}");
        // A host's key is named with its table, whatever toml or desk found wrong in it.
        let e = parsed("[hosts.gpu]\nssh = \"me@gpu\"\nssh_args = [\"-p\", 2222]\n").unwrap_err();
        assert!(e.starts_with("/c/config.toml: line 3: key `hosts.gpu.ssh_args`: "), "{e}");
        let e = parsed("[hosts.\"gpu\"]\n\nssh = 5\n").unwrap_err();
        assert!(e.starts_with("/c/config.toml: line 3: key `hosts.gpu.ssh`: "), "{e}");
        // A comment after a table's header is not part of its name.
        let e = parsed("[hosts.gpu]   # another machine [see docs]\nssh = 5\n").unwrap_err();
        assert!(e.starts_with("/c/config.toml: line 2: key `hosts.gpu.ssh`: "), "{e}");
        let e = parsed("[hosts.gpu]  # it\nssh = \"-x\"\n").unwrap_err();
        assert!(e.starts_with("/c/config.toml: line 2: key `hosts.gpu.ssh`: destination"), "{e}");
        let e = parsed("[new]\n# the usual\nsize = \"wide\"\n").unwrap_err();
        assert_eq!(e, "/c/config.toml: line 3: key `new.size`: size \"wide\" is not COLSxROWS");
        let e = parsed("[attach]\ndetach_key = \"^]]\"\n").unwrap_err();
        assert!(e.starts_with("/c/config.toml: line 2: key `attach.detach_key`: "), "{e}");
        let e = parsed("[provider.cladue]\nargs = []\n").unwrap_err();
        assert!(e.contains("line 2: key `provider.cladue.args`: unknown provider \"cladue\""), "{e}");
        let e = parsed("[new\nsize = \"1x1\"\n").unwrap_err();
        assert!(e.starts_with("/c/config.toml: line 1"), "{e}");
    }

    #[test]
    fn hosts_are_read_and_a_destination_or_name_that_ssh_would_take_for_an_option_is_refused() {
        let config = parsed(
            "[hosts.gpu]\nssh = \"me@gpu.lan\"\nssh_args = [\"-p\", \"2222\"]\n\n[hosts.ci]\nssh = \"ci\"\ndesk = \"/opt/desk/bin/desk\"\n",
        )
        .unwrap();
        assert_eq!(
            config.hosts["gpu"],
            Host { ssh: "me@gpu.lan".into(), ssh_args: vec!["-p".into(), "2222".into()], desk: "desk".into() }
        );
        assert_eq!(config.hosts["ci"].desk, "/opt/desk/bin/desk");
        let e = parsed("[hosts.evil]\nssh = \"-oProxyCommand=touch /tmp/x\"\n").unwrap_err();
        assert!(e.contains("line 2: key `hosts.evil.ssh`: destination") && e.contains("starts with `-`"), "{e}");
        let e = parsed("[hosts.\"-x\"]\nssh = \"x\"\n").unwrap_err();
        assert!(e.contains("host name \"-x\" starts with `-`"), "{e}");
        let e = parsed("[hosts.a]\nssh = \"\"\n").unwrap_err();
        assert!(e.contains("an empty destination"), "{e}");
        let e = parsed("[hosts.a]\nssh = \"x\"\nport = 22\n").unwrap_err();
        assert!(e.contains("unknown field"), "{e}");
    }

    #[test]
    fn a_file_for_a_newer_desk_is_refused_by_its_version_not_by_a_key_it_does_not_know() {
        assert_eq!(parsed("version = 1\n[new]\nsize = \"100x30\"\n").unwrap().size, Some((100, 30)));
        let e = parsed("# mine\nversion = 2\n[new]\nsize = \"100x30\"\nwidth = 3\n").unwrap_err();
        assert!(
            e.starts_with("/c/config.toml: line 2: key `version`: the file is written for config version 2"),
            "{e}"
        );
        let e = parsed("version = \"one\"\n").unwrap_err();
        assert!(e.contains("\"one\" is not a config version"), "{e}");
    }
}
