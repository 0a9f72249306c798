//! Which conversation a restarted agent resumes: captured from the agent's own evidence, per
//! session generation, and checked before it is used.
//!
//! Owns three things. [`Capture`]: what one generation's agent reported about its conversation
//! (hooks, Codex's notify with the rollout it names, Claude's per-process file, the agent's own
//! words at exit, OpenCode's session list), folded by rules that never guess: a `SessionStart`
//! report is the conversation (it changes on `/clear`); other evidence confirms it or, where
//! nothing better was reported, supplies it — and evidence that cannot be tied to the session's
//! own conversation (Codex's title-generation thread, a subagent thread) is never adopted.
//! [`plan_resume`]: whether a restart may resume the captured conversation — only under the
//! same config directory and working directory, only when its transcript exists and holds a
//! conversation, never when another session holds the same id; else a fresh start with the
//! reason. And the command: [`strip_resume`] takes the resume and session flags out of the
//! user's command (keeping every other flag), [`with_resume`] and [`with_session_id`] put desk's
//! in, per provider's grammar ([`ResumeSyntax`]); [`rejection`] recognises an agent refusing an
//! id (its "not found" message), from the recordings in tests/data/agents/*/resume-unknown.
//!
//! Never "the newest conversation in the directory" (`--continue`, `--last`): those flags are
//! stripped like the others. Pure: the desk package reads files and processes and hands the
//! results in.

use serde::{Deserialize, Serialize};

use crate::provider::Provider;

/// Notes a capture keeps (what was seen, and why it was or was not adopted), newest last.
pub const CAPTURE_NOTES: usize = 16;

/// Is `id` a conversation id of `provider`'s grammar? Claude Code, Codex and the demo agent use
/// UUIDs; OpenCode `ses_` and 20 to 80 letters or digits.
pub fn valid_id(provider: Provider, id: &str) -> bool {
    match provider {
        Provider::Claude | Provider::Codex | Provider::Demo => is_uuid(id),
        Provider::OpenCode => id
            .strip_prefix("ses_")
            .is_some_and(|rest| (20..=80).contains(&rest.len()) && rest.bytes().all(|b| b.is_ascii_alphanumeric())),
        Provider::Shell => false,
    }
}

fn is_uuid(id: &str) -> bool {
    let groups: Vec<&str> = id.split('-').collect();
    groups.len() == 5
        && groups.iter().zip([8, 4, 4, 4, 12]).all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Whether desk can resume this provider's conversations at all.
pub fn resumable(provider: Provider) -> bool {
    !matches!(provider, Provider::Shell)
}

/// One piece of evidence about a generation's conversation, as the agent gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Evidence {
    /// A hook payload (Claude Code, Codex hooks, the demo agent): its event name, `source` (of
    /// `SessionStart`: startup, resume, clear, compact), `session_id` and `transcript_path`.
    Hook { event: String, source: Option<String>, id: String, transcript: Option<String> },
    /// Codex's notify (`agent-turn-complete`): its `thread-id`, with the rollout file of that
    /// thread the Codex process holds open, if it holds one, and whether that rollout is a
    /// subagent's (its `session_meta` says so).
    Notify { thread: String, rollout: Option<String>, subagent: bool },
    /// Claude Code's per-process file (`sessions/<pid>.json` under its config directory):
    /// undocumented, used only for `tested` versions.
    ProcessFile { id: String, version: Option<String>, tested: bool },
    /// What the agent printed when it exited (Codex: `codex resume <id>`).
    ExitWords { id: String },
    /// OpenCode's `session list`: the sessions that fit this generation (its directory, created
    /// or used while it ran, no parent).
    SessionList { candidates: Vec<String> },
}

/// What one generation's agent reported about its conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capture {
    pub provider: Provider,
    pub generation: u32,
    /// The conversation, once evidence named one.
    pub conversation: Option<String>,
    /// Its transcript (Claude's `.jsonl`, Codex's rollout), where the evidence named it.
    pub transcript: Option<String>,
    /// Which evidence named it (`SessionStart(clear)`, `notify`, …), and when (Unix ms).
    pub source: Option<String>,
    pub at_ms: u64,
    /// Whether the conversation came from a `SessionStart` report (the strongest evidence:
    /// later evidence that differs never replaces it).
    pub from_session_start: bool,
    /// The config directory and working directory the agent ran with: a resume happens only
    /// under the same ones.
    pub config_dir: Option<String>,
    pub cwd: Option<String>,
    pub notes: Vec<String>,
}

/// What [`Capture::apply`] did with a piece of evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// It named the conversation (first, or a new one after `/clear`).
    Adopted,
    /// It named the conversation already captured.
    Confirmed,
    /// It was not adopted; why.
    Ignored(String),
}

impl Capture {
    pub fn new(provider: Provider, generation: u32, config_dir: Option<String>, cwd: Option<String>) -> Capture {
        Capture {
            provider,
            generation,
            conversation: None,
            transcript: None,
            source: None,
            at_ms: 0,
            from_session_start: false,
            config_dir,
            cwd,
            notes: Vec::new(),
        }
    }

    fn note(&mut self, text: String) {
        self.notes.push(text);
        let extra = self.notes.len().saturating_sub(CAPTURE_NOTES);
        self.notes.drain(..extra);
    }

    fn adopt(&mut self, id: &str, transcript: Option<String>, source: String, now_ms: u64) -> Applied {
        self.conversation = Some(id.to_string());
        self.transcript = transcript;
        self.note(format!("adopted {id} from {source}"));
        self.source = Some(source);
        self.at_ms = now_ms;
        Applied::Adopted
    }

    fn ignore(&mut self, why: String) -> Applied {
        self.note(format!("ignored: {why}"));
        Applied::Ignored(why)
    }

    /// Fold one piece of evidence in.
    pub fn apply(&mut self, evidence: &Evidence, now_ms: u64) -> Applied {
        let provider = self.provider;
        let named = match evidence {
            Evidence::Hook { id, .. } | Evidence::ProcessFile { id, .. } | Evidence::ExitWords { id } => Some(id),
            Evidence::Notify { thread, .. } => Some(thread),
            Evidence::SessionList { .. } => None,
        };
        if let Some(id) = named
            && !valid_id(provider, id)
        {
            return self.ignore(format!("{id:?} is not a {provider} conversation id"));
        }
        let same = |c: &Capture, id: &str| c.conversation.as_deref() == Some(id);
        match evidence {
            Evidence::Hook { event, source, id, transcript } => {
                if event == "SessionStart" {
                    let source = format!("SessionStart({})", source.as_deref().unwrap_or("?"));
                    let applied = if same(self, id) {
                        self.note(format!("{source} confirmed {id}"));
                        if transcript.is_some() {
                            self.transcript.clone_from(transcript);
                        }
                        Applied::Confirmed
                    } else {
                        self.adopt(id, transcript.clone(), source, now_ms)
                    };
                    self.from_session_start = true;
                    return applied;
                }
                if same(self, id) {
                    if self.transcript.is_none() {
                        self.transcript.clone_from(transcript);
                    }
                    return Applied::Confirmed;
                }
                if self.conversation.is_none() {
                    return self.adopt(id, transcript.clone(), format!("{event} hook"), now_ms);
                }
                self.ignore(format!("{event} hook named {id}, not the session's conversation (a subagent's?)"))
            }
            Evidence::Notify { thread, rollout, subagent } => {
                if same(self, thread) {
                    return Applied::Confirmed;
                }
                if *subagent {
                    return self.ignore(format!("notify thread {thread} is a subagent's"));
                }
                let Some(rollout) = rollout else {
                    return self.ignore(format!(
                        "notify thread {thread} has no rollout the agent holds open (Codex's title thread)"
                    ));
                };
                if self.from_session_start {
                    return self.ignore(format!("notify thread {thread} differs from the SessionStart report"));
                }
                self.adopt(thread, Some(rollout.clone()), "notify".into(), now_ms)
            }
            Evidence::ProcessFile { id, version, tested } => {
                if !tested {
                    return self.ignore(format!(
                        "the per-process file of an untested version ({}) is not used",
                        version.as_deref().unwrap_or("unknown")
                    ));
                }
                if same(self, id) {
                    self.note(format!("the per-process file confirmed {id}"));
                    return Applied::Confirmed;
                }
                if self.conversation.is_none() {
                    return self.adopt(id, None, "per-process file".into(), now_ms);
                }
                self.ignore(format!("the per-process file names {id}, the hooks another; the hooks win"))
            }
            Evidence::ExitWords { id } => {
                if same(self, id) {
                    self.note(format!("its exit message confirmed {id}"));
                    return Applied::Confirmed;
                }
                if self.conversation.is_none() {
                    return self.adopt(id, None, "its exit message".into(), now_ms);
                }
                self.ignore(format!("its exit message names {id}, the hooks another; the hooks win"))
            }
            Evidence::SessionList { candidates } => match candidates.as_slice() {
                [only] if valid_id(provider, only) => {
                    if same(self, only) {
                        Applied::Confirmed
                    } else if self.conversation.is_none() {
                        self.adopt(only, None, "opencode session list".into(), now_ms)
                    } else {
                        self.ignore(format!("the session list names {only}, other evidence another"))
                    }
                }
                [] => self.ignore("no session in the session list fits this generation".into()),
                many => self.ignore(format!(
                    "{} sessions in the session list fit this generation; desk does not guess",
                    many.len()
                )),
            },
        }
    }
}

/// The evidence in one hook invocation's payload (what `desk hook` received), if any: a hook's
/// `session_id` (Claude Code, Codex hooks, the demo agent), or Codex's notify `thread-id` (its
/// rollout, and whether it is a subagent's, are for the caller to add: they are on disk).
pub fn evidence_from_hook(provider: Provider, payload: &serde_json::Value) -> Option<Evidence> {
    let field = |k: &str| payload.get(k).and_then(|v| v.as_str()).map(String::from);
    match provider {
        Provider::Codex if payload.get("type").is_some() => {
            let thread = field("thread-id")?;
            Some(Evidence::Notify { thread, rollout: None, subagent: false })
        }
        Provider::Claude | Provider::Codex | Provider::Demo => Some(Evidence::Hook {
            event: field("hook_event_name")?,
            source: field("source"),
            id: field("session_id")?,
            transcript: field("transcript_path"),
        }),
        Provider::OpenCode | Provider::Shell => None,
    }
}

/// 5 s: an OpenCode session created this close before a generation's recorded start (or after
/// its end) still belongs to it: the clocks are one machine's, and the records are written
/// around the spawn and the exit.
pub const OPENCODE_SKEW_MS: u64 = 5_000;

/// The OpenCode sessions (`opencode session list --format json`) that fit a generation which
/// ran in `cwd` from `start_ms` to `end_ms`: in that directory, without a parent (a subagent's
/// session has one), created while it ran — or the one it resumed (`resumed`), used while it
/// ran. The caller adopts one only if it is the only one.
pub fn opencode_fits(
    list: &[serde_json::Value],
    cwd: &str,
    start_ms: u64,
    end_ms: u64,
    resumed: Option<&str>,
) -> Vec<String> {
    let start = start_ms.saturating_sub(OPENCODE_SKEW_MS);
    let end = end_ms.saturating_add(OPENCODE_SKEW_MS);
    let within = |t: Option<u64>| t.is_some_and(|t| t >= start && t <= end);
    list.iter()
        .filter(|s| s["directory"].as_str() == Some(cwd))
        .filter(|s| s.get("parentID").is_none_or(|p| p.is_null()))
        .filter(|s| {
            let id = s["id"].as_str();
            within(s["created"].as_u64()) || (id.is_some() && id == resumed && within(s["updated"].as_u64()))
        })
        .filter_map(|s| s["id"].as_str().map(String::from))
        .collect()
}

/// What the desk package found of a captured conversation's transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transcript {
    /// It exists and holds a conversation.
    Holds,
    /// It exists but holds no conversation (no prompt was ever sent).
    Empty,
    /// It is not where the agent said, nor anywhere the agent keeps them.
    Missing,
}

/// What a restart does about the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "resume", rename_all = "kebab-case")]
pub enum ResumePlan {
    /// Resume this conversation, captured in generation `from_generation`.
    Resume { conversation: String, from_generation: u32 },
    /// Start afresh, and why.
    Fresh { why: String },
}

/// What [`plan_resume`] needs to know besides the capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeContext<'a> {
    pub provider: Provider,
    /// The config directory and working directory the new start will have.
    pub config_dir: Option<&'a str>,
    pub cwd: &'a str,
    /// What became of the capture's transcript.
    pub transcript: Transcript,
    /// Another session whose latest capture is the same conversation, if any.
    pub held_by: Option<&'a str>,
}

/// Decide whether a restart resumes `capture`'s conversation.
pub fn plan_resume(capture: Option<&Capture>, ctx: &ResumeContext<'_>) -> ResumePlan {
    let fresh = |why: String| ResumePlan::Fresh { why };
    if !resumable(ctx.provider) {
        return fresh(format!("a {} session has no conversation to resume", ctx.provider));
    }
    let Some(capture) = capture else {
        return fresh("the agent reported no conversation for this session".into());
    };
    let Some(conversation) = &capture.conversation else {
        return fresh(format!("the agent reported no conversation in generation {}", capture.generation));
    };
    if capture.provider != ctx.provider {
        return fresh(format!(
            "conversation {conversation} is {}'s; the session now runs {}",
            capture.provider, ctx.provider
        ));
    }
    if capture.config_dir.as_deref() != ctx.config_dir {
        return fresh(format!(
            "conversation {conversation} lives under {}; this start uses {}",
            capture.config_dir.as_deref().unwrap_or("an unknown config directory"),
            ctx.config_dir.unwrap_or("an unknown config directory")
        ));
    }
    if capture.cwd.as_deref() != Some(ctx.cwd) {
        return fresh(format!(
            "conversation {conversation} was held in {}; this start runs in {}",
            capture.cwd.as_deref().unwrap_or("an unknown directory"),
            ctx.cwd
        ));
    }
    match ctx.transcript {
        Transcript::Holds => {}
        Transcript::Empty => return fresh(format!("conversation {conversation} has no turn yet")),
        Transcript::Missing => return fresh(format!("the transcript of conversation {conversation} is gone")),
    }
    if let Some(other) = ctx.held_by {
        return fresh(format!("conversation {conversation} is session {other}'s"));
    }
    ResumePlan::Resume { conversation: conversation.clone(), from_generation: capture.generation }
}

/// Does a transcript's text (its first part is enough) hold a conversation? Claude Code: a
/// `user` or `assistant` line; Codex: a `session_meta` line and a `response_item`; the demo
/// agent: a `prompt` line. (OpenCode keeps no transcript file: its session list says.)
pub fn transcript_holds(provider: Provider, text: &str) -> bool {
    let lines = || text.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok());
    let kind = |v: &serde_json::Value| v.get("type").and_then(|t| t.as_str()).map(String::from);
    match provider {
        Provider::Claude => lines().any(|v| matches!(kind(&v).as_deref(), Some("user" | "assistant"))),
        Provider::Codex => {
            lines().any(|v| kind(&v).as_deref() == Some("session_meta"))
                && lines().any(|v| kind(&v).as_deref() == Some("response_item"))
        }
        Provider::Demo => lines().any(|v| kind(&v).as_deref() == Some("prompt")),
        Provider::OpenCode | Provider::Shell => false,
    }
}

/// How a provider's command names a conversation to resume, and which flags choose one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumeSyntax {
    /// Flags that take a value and choose a conversation (stripped with their value).
    pub with_value: &'static [&'static str],
    /// Flags that choose one by themselves (stripped): `--continue`, `--last`, `--fork`.
    pub bare: &'static [&'static str],
    /// Flags of the provider that take a value (so their value is not taken for a subcommand).
    pub other_with_value: &'static [&'static str],
    /// A subcommand that resumes (`codex resume [ID]`), stripped with what follows it.
    pub subcommand: Option<&'static str>,
    /// Words that make the command something other than the interactive agent (`exec`,
    /// `--print`, `run`): such a command is never rewritten and never resumed.
    pub not_interactive: &'static [&'static str],
}

/// Claude Code 2.1: `--resume/-r [ID]`, `--session-id ID`, `--continue/-c`, `--fork-session`.
const CLAUDE: ResumeSyntax = ResumeSyntax {
    with_value: &["--resume", "-r", "--session-id"],
    bare: &["--continue", "-c", "--fork-session"],
    other_with_value: &[],
    subcommand: None,
    not_interactive: &["-p", "--print", "mcp", "config", "update", "doctor", "install", "setup-token", "plugin"],
};

/// Codex 0.171: the `resume [OPTIONS] [ID]` (and `fork`) subcommand; `--last`, `--all` are its
/// flags. The TUI's flags that take a value are listed so that their value is not read as the
/// subcommand.
const CODEX: ResumeSyntax = ResumeSyntax {
    with_value: &[],
    bare: &["--last", "--all"],
    other_with_value: &[
        "-c",
        "--config",
        "--enable",
        "--disable",
        "-m",
        "--model",
        "-p",
        "--profile",
        "-s",
        "--sandbox",
        "-a",
        "--ask-for-approval",
        "-C",
        "--cd",
        "-i",
        "--image",
        "--add-dir",
        "--remote",
        "--remote-auth-token-env",
        "--local-provider",
    ],
    subcommand: Some("resume"),
    not_interactive: &[
        "exec",
        "e",
        "review",
        "login",
        "logout",
        "mcp",
        "plugin",
        "app-server",
        "remote-control",
        "completion",
        "update",
        "doctor",
        "sandbox",
        "debug",
        "apply",
        "a",
        "queue",
        "archive",
        "delete",
        "migrate-rollouts",
        "unarchive",
        "cloud",
        "exec-server",
        "features",
        "help",
        "agents",
    ],
};

/// OpenCode 1.18: `--session/-s ID`, `--continue/-c`, `--fork`.
const OPENCODE: ResumeSyntax = ResumeSyntax {
    with_value: &["--session", "-s"],
    bare: &["--continue", "-c", "--fork"],
    other_with_value: &["-m", "--model", "--prompt", "--agent", "--port", "--hostname", "--log-level"],
    subcommand: None,
    not_interactive: &[
        "completion",
        "acp",
        "mcp",
        "attach",
        "run",
        "debug",
        "providers",
        "auth",
        "agent",
        "upgrade",
        "uninstall",
        "serve",
        "web",
        "models",
        "stats",
        "export",
        "import",
        "github",
        "pr",
        "session",
        "plugin",
        "db",
    ],
};

/// The demo agent: `--resume ID`, `--session-id ID`.
const DEMO: ResumeSyntax = ResumeSyntax {
    with_value: &["--resume", "--session-id"],
    bare: &[],
    other_with_value: &[],
    subcommand: None,
    not_interactive: &["--replay"],
};

impl ResumeSyntax {
    pub fn of(provider: Provider) -> Option<ResumeSyntax> {
        match provider {
            Provider::Claude => Some(CLAUDE),
            Provider::Codex => Some(CODEX),
            Provider::OpenCode => Some(OPENCODE),
            Provider::Demo => Some(DEMO),
            Provider::Shell => None,
        }
    }
}

/// The command without the flags (and Codex's subcommand) that choose a conversation; every
/// other word stays, in order. A command that is not the provider's own program (a wrapper
/// script) is returned as it is: desk adds nothing to it either.
pub fn strip_resume(provider: Provider, command: &[String]) -> Vec<String> {
    let Some(syntax) = ResumeSyntax::of(provider).filter(|_| rewritable(provider, command)) else {
        return command.to_vec();
    };
    let Some((program, args)) = command.split_first() else { return Vec::new() };
    let mut out = vec![program.clone()];
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        if let Some((flag, _)) = arg.split_once('=')
            && (syntax.with_value.contains(&flag) || syntax.bare.contains(&flag))
        {
            i += 1;
            continue;
        }
        if syntax.with_value.contains(&arg.as_str()) {
            // `--resume` may come without a value (Claude's picker): take the next word only
            // when it is not itself a flag.
            let takes = args.get(i + 1).is_some_and(|v| !v.starts_with('-'));
            i += if takes { 2 } else { 1 };
            continue;
        }
        if syntax.bare.contains(&arg.as_str()) {
            i += 1;
            continue;
        }
        if let Some(sub) = syntax.subcommand {
            if syntax.other_with_value.contains(&arg.as_str()) {
                out.extend(args[i..(i + 2).min(args.len())].iter().cloned());
                i += 2;
                continue;
            }
            if !arg.starts_with('-') {
                // The first positional word: the subcommand, or the TUI's prompt. `resume` and
                // everything after it go; so does a first prompt (resuming replays none).
                if arg == sub || arg == "fork" {
                    // The subcommand's own flags stay (`--no-daemon`, `-m MODEL`); its id, its
                    // prompt and its `--last`/`--all` go.
                    let rest = &args[i + 1..];
                    let mut j = 0;
                    while j < rest.len() {
                        let word = &rest[j];
                        if syntax.other_with_value.contains(&word.as_str()) {
                            out.extend(rest[j..(j + 2).min(rest.len())].iter().cloned());
                            j += 2;
                            continue;
                        }
                        if word.starts_with('-') && !syntax.bare.contains(&word.as_str()) {
                            out.push(word.clone());
                        }
                        j += 1;
                    }
                }
                break;
            }
        }
        out.push(arg.clone());
        i += 1;
    }
    out
}

/// The command resuming `conversation`: [`strip_resume`], then the provider's resume words (a
/// command desk may not rewrite, [`rewritable`], is returned as it is).
pub fn with_resume(provider: Provider, command: &[String], conversation: &str) -> Vec<String> {
    if !rewritable(provider, command) {
        return command.to_vec();
    }
    let mut out = strip_resume(provider, command);
    match provider {
        Provider::Claude | Provider::Demo => out.extend(["--resume".to_string(), conversation.to_string()]),
        Provider::Codex => out.extend(["resume".to_string(), conversation.to_string()]),
        Provider::OpenCode => out.extend(["--session".to_string(), conversation.to_string()]),
        Provider::Shell => {}
    }
    out
}

/// A fresh start of an agent that lets desk choose the id of its new conversation (Claude Code's
/// and the demo agent's `--session-id`): [`strip_resume`], then that flag. Other agents get the
/// stripped command.
pub fn with_session_id(provider: Provider, command: &[String], id: &str) -> Vec<String> {
    if !rewritable(provider, command) {
        return command.to_vec();
    }
    let mut out = strip_resume(provider, command);
    if matches!(provider, Provider::Claude | Provider::Demo) {
        out.extend(["--session-id".to_string(), id.to_string()]);
    }
    out
}

/// Whether desk may rewrite this command's conversation flags: it is the provider's own
/// program (never a wrapper script or a shell running it) and its interactive agent (not
/// `codex exec`, `claude --print`, `opencode run`, …).
pub fn rewritable(provider: Provider, command: &[String]) -> bool {
    let Some(syntax) = ResumeSyntax::of(provider) else { return false };
    let Some((program, args)) = command.split_first() else { return false };
    if Provider::guess(std::ffi::OsStr::new(program)) != provider {
        return false;
    }
    // The first word that is not a flag or a flag's value: a subcommand, if any.
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        if syntax.not_interactive.contains(&arg) {
            return false;
        }
        if syntax.other_with_value.contains(&arg) || syntax.with_value.contains(&arg) {
            i += 2;
            continue;
        }
        if !arg.starts_with('-') && syntax.subcommand.is_some() {
            break;
        }
        i += 1;
    }
    true
}

/// What each agent prints when it refuses a conversation id and exits (recorded:
/// `tests/data/agents/<agent>/resume-unknown.screens.txt`).
const REJECTIONS: &[(Provider, &str)] = &[
    (Provider::Claude, "No conversation found with session ID"),
    (Provider::Codex, "No saved session found with ID"),
    (Provider::OpenCode, "Session not found"),
    (Provider::Demo, "No conversation found with session ID"),
];

/// If the agent, started to resume a conversation, exited refusing it: its message (the line
/// that says so, trimmed, at most 200 characters).
pub fn rejection(provider: Provider, exit_code: Option<i32>, last_screen: &[String]) -> Option<String> {
    if exit_code == Some(0) {
        return None;
    }
    let pattern = REJECTIONS.iter().find(|(p, _)| *p == provider)?.1;
    last_screen.iter().rev().find(|l| l.contains(pattern)).map(|l| l.trim().chars().take(200).collect())
}

/// The conversation id an agent printed on its way out, where it does (Codex: `To continue
/// this session, run: codex resume <id>`).
pub fn exit_words(provider: Provider, last_screen: &[String]) -> Option<String> {
    if provider != Provider::Codex {
        return None;
    }
    last_screen.iter().rev().find_map(|line| {
        let rest = line.trim().strip_prefix("codex resume ")?;
        let id = rest.split_whitespace().next()?;
        valid_id(provider, id).then(|| id.to_string())
    })
}

/// The environment variable (and, when it is unset, the directory under `HOME`) where a
/// provider keeps its conversations: a resume happens only under the same one.
pub fn config_dir(provider: Provider, var: impl Fn(&str) -> Option<String>) -> Option<String> {
    let (name, under_home) = match provider {
        Provider::Claude => ("CLAUDE_CONFIG_DIR", ".claude"),
        Provider::Codex => ("CODEX_HOME", ".codex"),
        Provider::OpenCode => {
            return var("XDG_DATA_HOME")
                .filter(|v| !v.is_empty())
                .map(|d| format!("{}/opencode", d.trim_end_matches('/')))
                .or_else(|| var("HOME").map(|h| format!("{}/.local/share/opencode", h.trim_end_matches('/'))));
        }
        Provider::Demo => {
            // As the demo agent looks (desk-demo-agent's transcript::default_dir).
            return var("DESK_DEMO_AGENT_HOME")
                .filter(|v| !v.is_empty())
                .or_else(|| {
                    var("DESK_HOME")
                        .filter(|v| !v.is_empty())
                        .map(|h| format!("{}/demo-agent", h.trim_end_matches('/')))
                })
                .or_else(|| var("HOME").map(|h| format!("{}/.desk-demo-agent", h.trim_end_matches('/'))));
        }
        Provider::Shell => return None,
    };
    var(name)
        .filter(|v| !v.is_empty())
        .or_else(|| var("HOME").map(|h| format!("{}/{under_home}", h.trim_end_matches('/'))))
}

#[cfg(test)]
mod tests;
