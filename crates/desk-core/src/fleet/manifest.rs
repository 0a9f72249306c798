//! `desk.toml`: the fleet declared in a file.
//!
//! Owns the schema (docs/fleet.md) and its checks: [`parse`] turns the text into a
//! [`Manifest`] whose every value is already valid (session and channel names, providers,
//! sizes, restart policies, environment names, worktree branches, channel members), or into one
//! [`ManifestError`] naming the line, the column and what was expected there. Invariants: a
//! key the schema does not know is an error at every level (a typo is never silently ignored);
//! a manifest with an error yields no [`Manifest`] at all, so nothing is half applied; sessions
//! come out in name order. What the file says relative to the filesystem (a `cwd` relative to
//! the manifest's directory, `~`) stays as written: the desk package resolves it. A session with
//! `host` is that host's to run: its `cwd` is a path there (absolute, or under its home), and no
//! channel of the manifest takes it; [`hosted_text`] writes the manifest the host is given.
//! Pure: the text is given; no file is read here.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

use crate::channel::{ChannelName, Role, valid_member_name};
use crate::delivery::item::When;
use crate::fleet::supervise::RestartPolicy;
use crate::fleet::worktree::check_branch;
use crate::provider::Provider;
use crate::session::{SizePolicy, check_name, parse_size};

/// 1 MiB: a fleet of hundreds of sessions with their prompts is a few tens of KiB; a file this
/// large is not a manifest.
pub const MAX_MANIFEST: usize = 1 << 20;

/// The manifest's file name, looked for in the current directory and its parents.
pub const FILE_NAME: &str = "desk.toml";

/// A checked manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The declared sessions, in name order.
    pub sessions: Vec<SessionSpec>,
    /// The declared channels, in name order.
    pub channels: Vec<ChannelSpec>,
    /// `worktrees`: the directory per-session worktrees go under, as written (relative to the
    /// manifest's directory); `None`: desk's default (docs/fleet.md).
    pub worktrees: Option<String>,
}

impl Manifest {
    pub fn session(&self, name: &str) -> Option<&SessionSpec> {
        self.sessions.iter().find(|s| s.name == name)
    }
}

/// One declared session, defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSpec {
    pub name: String,
    /// `host`: the configured host (docs/remote.md) that runs it; `None`: this machine.
    pub host: Option<String>,
    pub provider: Provider,
    /// `command`: the whole command, instead of the provider's own program. `None`: the
    /// provider's program followed by [`SessionSpec::args`].
    pub command: Option<Vec<String>>,
    /// `args`: added after the provider's own program (only without `command`).
    pub args: Vec<String>,
    /// `cwd` as written (relative paths are relative to the manifest's directory); `None`: the
    /// manifest's directory.
    pub cwd: Option<String>,
    pub env: BTreeMap<String, String>,
    pub size: Option<(u16, u16)>,
    pub size_policy: SizePolicy,
    pub history: Option<usize>,
    pub restart: RestartPolicy,
    /// `worktree`: the branch of this session's own git worktree.
    pub worktree: Option<String>,
    pub group: Option<String>,
    pub labels: Vec<String>,
    /// Prompts queued for the session when `desk up` starts it afresh (not when it resumes a
    /// conversation, which had them already).
    pub prompts: Vec<InitialPrompt>,
}

/// A prompt queued when the session is started afresh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitialPrompt {
    pub text: String,
    pub when: When,
}

/// One declared channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelSpec {
    pub name: ChannelName,
    pub goal: String,
    /// Supervisor check-ins after this many idle seconds (`desk channel new --checkin-after`).
    pub checkin_after: Option<u64>,
    /// Members in declaration order: workers, then supervisors, then people.
    pub members: Vec<(String, Role)>,
}

/// What is wrong with a manifest, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError {
    /// 1-based line of the offending text (0 when the error has no place, e.g. an empty file).
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    pub message: String,
    /// The offending line as written, for showing under the message.
    pub source_line: String,
}

impl ManifestError {
    fn at(text: &str, span: Option<Range<usize>>, message: impl Into<String>) -> ManifestError {
        let message = message.into();
        let Some(span) = span else {
            return ManifestError { line: 0, column: 0, message, source_line: String::new() };
        };
        let start = span.start.min(text.len());
        let before = desk_term::text::cut_bytes(text, start);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        let source_line = text[line_start..].lines().next().unwrap_or("").to_string();
        ManifestError { line, column, message, source_line }
    }

    /// The error as `desk` prints it: `FILE:LINE:COLUMN: message`, then the line with a caret
    /// under the column.
    pub fn render(&self, file: &str) -> String {
        if self.line == 0 {
            return format!("{file}: {}", self.message);
        }
        let pad: String =
            self.source_line.chars().take(self.column - 1).map(|c| if c == '\t' { '\t' } else { ' ' }).collect();
        format!("{file}:{}:{}: {}\n  | {}\n  | {pad}^", self.line, self.column, self.message, self.source_line)
    }
}

impl std::fmt::Display for ManifestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}, column {}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for ManifestError {}

// ----- the file as written -----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    worktrees: Option<Spanned<String>>,
    #[serde(default)]
    defaults: RawDefaults,
    #[serde(default)]
    session: BTreeMap<Spanned<String>, Spanned<RawSession>>,
    #[serde(default)]
    channel: BTreeMap<Spanned<String>, Spanned<RawChannel>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    provider: Option<Spanned<String>>,
    args: Option<Vec<String>>,
    #[serde(default)]
    env: BTreeMap<Spanned<String>, String>,
    size: Option<Spanned<String>>,
    size_policy: Option<Spanned<String>>,
    history: Option<Spanned<i64>>,
    restart: Option<Spanned<String>>,
    group: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSession {
    host: Option<Spanned<String>>,
    provider: Option<Spanned<String>>,
    command: Option<Spanned<Vec<String>>>,
    args: Option<Spanned<Vec<String>>>,
    cwd: Option<Spanned<String>>,
    #[serde(default)]
    env: BTreeMap<Spanned<String>, String>,
    size: Option<Spanned<String>>,
    size_policy: Option<Spanned<String>>,
    history: Option<Spanned<i64>>,
    restart: Option<Spanned<String>>,
    worktree: Option<Spanned<String>>,
    group: Option<Spanned<String>>,
    #[serde(default)]
    labels: Vec<Spanned<String>>,
    #[serde(default)]
    prompts: Vec<Spanned<RawPrompt>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrompt {
    text: Spanned<String>,
    when: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChannel {
    #[serde(default)]
    goal: String,
    checkin_after: Option<Spanned<i64>>,
    #[serde(default)]
    members: Vec<Spanned<String>>,
    #[serde(default)]
    supervisors: Vec<Spanned<String>>,
    #[serde(default)]
    humans: Vec<Spanned<String>>,
}

/// Parse and check a manifest.
pub fn parse(text: &str) -> Result<Manifest, ManifestError> {
    if text.len() > MAX_MANIFEST {
        return Err(ManifestError::at(text, None, format!("is larger than {MAX_MANIFEST} bytes; not a manifest")));
    }
    let raw: RawManifest = toml::from_str(text).map_err(|e| {
        let message = e.message().trim().to_string();
        ManifestError::at(text, e.span(), message)
    })?;
    let err = |span: Range<usize>, message: String| ManifestError::at(text, Some(span), message);
    let defaults = check_defaults(&raw.defaults, &err)?;
    let mut sessions = Vec::new();
    for (name, session) in &raw.session {
        sessions.push(check_session(name, session, &defaults, &err)?);
    }
    if sessions.is_empty() {
        return Err(ManifestError::at(
            text,
            None,
            "declares no sessions; add one, e.g.\n  [session.api]\n  provider = \"claude\"",
        ));
    }
    let mut channels = Vec::new();
    for (name, channel) in &raw.channel {
        channels.push(check_channel(name, channel, &sessions, &err)?);
    }
    let worktrees = match &raw.worktrees {
        Some(dir) if dir.get_ref().trim().is_empty() => {
            return Err(err(dir.span(), "`worktrees` is empty; name a directory or leave it out".into()));
        }
        Some(dir) => Some(dir.get_ref().clone()),
        None => None,
    };
    Ok(Manifest { sessions, channels, worktrees })
}

type Err<'a> = dyn Fn(Range<usize>, String) -> ManifestError + 'a;

/// The checked `[defaults]`.
struct Defaults {
    provider: Option<Provider>,
    args: Option<Vec<String>>,
    env: BTreeMap<String, String>,
    size: Option<(u16, u16)>,
    size_policy: Option<SizePolicy>,
    history: Option<usize>,
    restart: Option<RestartPolicy>,
    group: Option<String>,
}

fn check_defaults(raw: &RawDefaults, err: &Err<'_>) -> Result<Defaults, ManifestError> {
    Ok(Defaults {
        provider: raw.provider.as_ref().map(|p| check_provider(p, err)).transpose()?,
        args: raw.args.clone(),
        env: check_env(&raw.env, err)?,
        size: raw.size.as_ref().map(|s| check_size(s, err)).transpose()?,
        size_policy: raw.size_policy.as_ref().map(|p| check_size_policy(p, err)).transpose()?,
        history: raw.history.as_ref().map(|h| check_history(h, err)).transpose()?,
        restart: raw.restart.as_ref().map(|r| check_restart(r, err)).transpose()?,
        group: raw.group.as_ref().map(|g| check_label(g, "group", err)).transpose()?,
    })
}

fn check_session(
    name: &Spanned<String>,
    raw: &Spanned<RawSession>,
    defaults: &Defaults,
    err: &Err<'_>,
) -> Result<SessionSpec, ManifestError> {
    check_name(name.get_ref()).map_err(|e| err(name.span(), format!("[session.{}]: {e}", name.get_ref())))?;
    let session = raw.get_ref();
    let command = match &session.command {
        Some(c) if c.get_ref().is_empty() || c.get_ref()[0].is_empty() => {
            return Err(err(
                c.span(),
                "`command` is empty; give the program and its arguments, e.g. [\"codex\", \"--no-daemon\"]".into(),
            ));
        }
        Some(c) => Some(c.get_ref().clone()),
        None => None,
    };
    let provider = match &session.provider {
        Some(p) => check_provider(p, err)?,
        None => match (&command, defaults.provider) {
            (Some(c), _) => Provider::guess(std::ffi::OsStr::new(&c[0])),
            (None, Some(p)) => p,
            (None, None) => {
                return Err(err(
                    name.span(),
                    format!(
                        "[session.{}] needs `provider` (one of: {}) or `command`",
                        name.get_ref(),
                        Provider::names().join(", ")
                    ),
                ));
            }
        },
    };
    if let (Some(args), Some(_)) = (&session.args, &command) {
        return Err(err(
            args.span(),
            "`args` go after the provider's own program; with `command`, put them in the command".into(),
        ));
    }
    if command.is_none() && provider == Provider::Shell {
        return Err(err(
            name.span(),
            format!("[session.{}] runs provider `shell`, which needs a `command`", name.get_ref()),
        ));
    }
    let args = match (&session.args, &command) {
        (Some(args), _) => args.get_ref().clone(),
        (None, None) => defaults.args.clone().unwrap_or_default(),
        (None, Some(_)) => Vec::new(),
    };
    let mut env = defaults.env.clone();
    env.extend(check_env(&session.env, err)?);
    let mut prompts = Vec::new();
    for prompt in &session.prompts {
        let p = prompt.get_ref();
        if p.text.get_ref().trim().is_empty() {
            return Err(err(p.text.span(), "a prompt's `text` is empty".into()));
        }
        let when = match &p.when {
            None => When::Now,
            Some(w) => match w.get_ref().as_str() {
                "now" => When::Now,
                "idle" => When::Idle,
                other => return Err(err(w.span(), format!("`when` is {other:?}; expected \"now\" or \"idle\""))),
            },
        };
        prompts.push(InitialPrompt { text: p.text.get_ref().clone(), when });
    }
    let mut labels = Vec::new();
    for label in &session.labels {
        labels.push(check_label(label, "label", err)?);
    }
    let host = session.host.as_ref().map(|h| check_host(h, err)).transpose()?;
    if let (Some(host), Some(cwd)) = (&host, &session.cwd) {
        let c = cwd.get_ref();
        if !(c.starts_with('/') || c == "~" || c.starts_with("~/")) {
            return Err(err(
                cwd.span(),
                format!(
                    "`cwd` of a session on host {host} is a path on that host: absolute (/srv/app) or under its home (~/app), not {c:?}"
                ),
            ));
        }
    }
    Ok(SessionSpec {
        name: name.get_ref().clone(),
        host,
        provider,
        command,
        args,
        cwd: match &session.cwd {
            Some(c) if c.get_ref().is_empty() => {
                return Err(err(c.span(), "`cwd` is empty; leave it out for the manifest's directory".into()));
            }
            c => c.as_ref().map(|c| c.get_ref().clone()),
        },
        env,
        size: session.size.as_ref().map(|s| check_size(s, err)).transpose()?.or(defaults.size),
        size_policy: session
            .size_policy
            .as_ref()
            .map(|p| check_size_policy(p, err))
            .transpose()?
            .or(defaults.size_policy)
            .unwrap_or_default(),
        history: session.history.as_ref().map(|h| check_history(h, err)).transpose()?.or(defaults.history),
        restart: session
            .restart
            .as_ref()
            .map(|r| check_restart(r, err))
            .transpose()?
            .or(defaults.restart)
            .unwrap_or_default(),
        worktree: session
            .worktree
            .as_ref()
            .map(|w| {
                check_branch(w.get_ref())
                    .map(|()| w.get_ref().clone())
                    .map_err(|e| err(w.span(), format!("`worktree`: {e}")))
            })
            .transpose()?,
        group: session.group.as_ref().map(|g| check_label(g, "group", err)).transpose()?.or(defaults.group.clone()),
        labels,
        prompts,
    })
}

fn check_channel(
    name: &Spanned<String>,
    raw: &Spanned<RawChannel>,
    sessions: &[SessionSpec],
    err: &Err<'_>,
) -> Result<ChannelSpec, ManifestError> {
    let channel = ChannelName::parse(name.get_ref())
        .map_err(|e| err(name.span(), format!("[channel.{}]: {e}", name.get_ref())))?;
    let c = raw.get_ref();
    let mut members: Vec<(String, Role)> = Vec::new();
    for (list, role) in [(&c.members, Role::Worker), (&c.supervisors, Role::Supervisor)] {
        for member in list {
            let m = member.get_ref();
            match sessions.iter().find(|s| &s.name == m) {
                None => {
                    return Err(err(
                        member.span(),
                        format!("#{channel}: `{m}` is not a session of this manifest (people go in `humans`)"),
                    ));
                }
                Some(SessionSpec { host: Some(host), .. }) => {
                    return Err(err(
                        member.span(),
                        format!(
                            "#{channel}: `{m}` runs on host {host}; channels whose members sit on hosts are not supported yet"
                        ),
                    ));
                }
                Some(_) => {}
            }
            if members.iter().any(|(n, _)| n == m) {
                return Err(err(member.span(), format!("#{channel}: `{m}` is listed twice")));
            }
            members.push((m.clone(), role));
        }
    }
    for human in &c.humans {
        let h = human.get_ref();
        if !valid_member_name(h) {
            return Err(err(human.span(), format!("#{channel}: {h:?} is not a member name")));
        }
        if members.iter().any(|(n, _)| n == h) {
            return Err(err(human.span(), format!("#{channel}: `{h}` is listed twice")));
        }
        members.push((h.clone(), Role::Human));
    }
    let checkin_after = match &c.checkin_after {
        Some(s) if *s.get_ref() < 1 => {
            return Err(err(s.span(), "`checkin_after` is in seconds and at least 1".into()));
        }
        Some(s) => Some(*s.get_ref() as u64),
        None => None,
    };
    Ok(ChannelSpec { name: channel, goal: c.goal.clone(), checkin_after, members })
}

/// A host's name as config.toml's `[hosts.NAME]` takes it: a letter or digit, then letters,
/// digits, `.`, `_` or `-` (whether it is configured is the desk package's to check).
fn check_host(h: &Spanned<String>, err: &Err<'_>) -> Result<String, ManifestError> {
    let name = h.get_ref();
    let good = name.len() <= 64
        && name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if !good {
        return Err(err(h.span(), format!("`host` {name:?} is not a host's name (a [hosts.NAME] of config.toml)")));
    }
    Ok(name.clone())
}

/// The manifest host `specs`' host is given by `desk up` and `desk down` (they must all be on
/// it): each session as declared here, defaults applied, less `host`; `cwd` as written (a path
/// on the host), or `~` (its home) when none is. No channels, no `worktrees` (the host's own
/// place for them). [`parse`] reads it back to the same sessions, but for `host`.
pub fn hosted_text(specs: &[&SessionSpec], origin: &str) -> String {
    let mut out =
        format!("# What desk up on another machine declared for this host, from {}.\n", origin.escape_debug());
    out.push_str("# It is written again by each desk up and desk down there: edit that manifest, not this.\n");
    for spec in specs {
        out.push_str(&format!("\n[session.{}]\n", toml_string(&spec.name)));
        let mut key = |k: &str, v: String| out.push_str(&format!("{k} = {v}\n"));
        key("provider", toml_string(spec.provider.as_str()));
        if let Some(command) = &spec.command {
            key("command", toml_strings(command));
        } else if !spec.args.is_empty() {
            key("args", toml_strings(&spec.args));
        }
        key("cwd", toml_string(spec.cwd.as_deref().unwrap_or("~")));
        if !spec.env.is_empty() {
            let pairs: Vec<String> =
                spec.env.iter().map(|(k, v)| format!("{} = {}", toml_string(k), toml_string(v))).collect();
            key("env", format!("{{ {} }}", pairs.join(", ")));
        }
        if let Some((cols, rows)) = spec.size {
            key("size", toml_string(&format!("{cols}x{rows}")));
        }
        key("size_policy", toml_string(spec.size_policy.name()));
        if let Some(history) = spec.history {
            key("history", history.to_string());
        }
        key("restart", toml_string(spec.restart.name()));
        if let Some(branch) = &spec.worktree {
            key("worktree", toml_string(branch));
        }
        if let Some(group) = &spec.group {
            key("group", toml_string(group));
        }
        if !spec.labels.is_empty() {
            key("labels", toml_strings(&spec.labels));
        }
        if !spec.prompts.is_empty() {
            let prompts: Vec<String> = spec
                .prompts
                .iter()
                .map(|p| {
                    let when = match p.when {
                        When::Now => "now",
                        When::Idle => "idle",
                    };
                    format!("{{ text = {}, when = {} }}", toml_string(&p.text), toml_string(when))
                })
                .collect();
            key("prompts", format!("[{}]", prompts.join(", ")));
        }
    }
    out
}

/// `s` as a TOML basic string: quoted, with `"`, `\\` and control characters escaped.
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn toml_strings(items: &[String]) -> String {
    format!("[{}]", items.iter().map(|s| toml_string(s)).collect::<Vec<_>>().join(", "))
}

fn check_provider(p: &Spanned<String>, err: &Err<'_>) -> Result<Provider, ManifestError> {
    p.get_ref().parse::<Provider>().map_err(|e| err(p.span(), e.to_string()))
}

fn check_size(s: &Spanned<String>, err: &Err<'_>) -> Result<(u16, u16), ManifestError> {
    parse_size(s.get_ref()).map_err(|e| err(s.span(), format!("`size`: {e}")))
}

fn check_size_policy(p: &Spanned<String>, err: &Err<'_>) -> Result<SizePolicy, ManifestError> {
    p.get_ref().parse::<SizePolicy>().map_err(|e| err(p.span(), e.to_string()))
}

fn check_history(h: &Spanned<i64>, err: &Err<'_>) -> Result<usize, ManifestError> {
    let n = *h.get_ref();
    let max = desk_term::screen::MAX_HISTORY_LINES;
    if n < 0 || n as u64 > max as u64 {
        return Err(err(h.span(), format!("`history` is a line count from 0 to {max}")));
    }
    Ok(n as usize)
}

fn check_restart(r: &Spanned<String>, err: &Err<'_>) -> Result<RestartPolicy, ManifestError> {
    r.get_ref().parse::<RestartPolicy>().map_err(|e| err(r.span(), e))
}

fn check_env(
    env: &BTreeMap<Spanned<String>, String>,
    err: &Err<'_>,
) -> Result<BTreeMap<String, String>, ManifestError> {
    let mut out = BTreeMap::new();
    for (key, value) in env {
        let k = key.get_ref();
        if k.is_empty() || k.contains(['=', '\0']) || value.contains('\0') {
            return Err(err(key.span(), format!("{k:?} is not an environment variable name")));
        }
        out.insert(k.clone(), value.clone());
    }
    Ok(out)
}

/// 64 characters: a group or label is a word or two, shown in listings.
const MAX_LABEL: usize = 64;

fn check_label(l: &Spanned<String>, what: &str, err: &Err<'_>) -> Result<String, ManifestError> {
    let text = l.get_ref();
    if text.trim().is_empty() || text.chars().count() > MAX_LABEL || text.chars().any(char::is_control) {
        return Err(err(l.span(), format!("a {what} is 1 to {MAX_LABEL} printable characters")));
    }
    Ok(text.clone())
}

#[cfg(test)]
mod tests;
