//! The command line: argument definitions and dispatch.
//!
//! Owns the `desk` command surface (names, flags, help text, exit codes) and nothing of the
//! work itself, which lives in the modules each command calls. Exit codes (docs/cli.md): 0
//! success, 1 the operation failed, 2 usage errors, no such thing and "already exists"; `attach`
//! exits with the child's code (128 + N for a signal) when the session ends. With `--json`, a
//! failure is also printed on stdout as an error envelope ([`output`]).

mod channel;
mod complete;
mod delivery;
mod doctor;
mod events;
mod explain;
mod hook;
mod hosted;
mod inbox;
mod keys;
mod manual;
pub mod output;
mod probe;
mod remote;
mod sessions;
mod table;
mod up;
mod upgrade;

use anyhow::Result;
use clap::{Parser, Subcommand};
use clap_complete::{ArgValueCandidates, ArgValueCompleter};
use std::ffi::OsString;
use std::path::PathBuf;

use desk_common::config;
pub use desk_common::failure::{Failure, fail, failure};
use desk_common::paths::SessionName;
use desk_common::syntax::{parse_env, parse_size};
use output::ErrorCode;

/// Whether `name` names a session desk knows of: one running, or one whose files remain (its
/// exit record, or the metadata of a master that went away).
pub(crate) fn session_known(paths: &desk_common::paths::Paths, name: &SessionName) -> bool {
    let files = paths.session(name);
    files.socket.exists() || files.meta.exists() || files.exit.exists()
}

/// Refuse a name that names no session (most often a typo) the way `desk send` does: exit 2,
/// `no-such-session`, with the nearest names there are.
pub(crate) fn require_session(paths: &desk_common::paths::Paths, name: &SessionName) -> Result<()> {
    if session_known(paths, name) {
        return Ok(());
    }
    Err(fail(ErrorCode::NoSuchSession, desk_common::suggest::unknown_session_in(paths, name.as_str())))
}

/// Keep a fleet of coding agents alive on pseudo-terminals.
#[derive(Debug, Parser)]
#[command(name = "desk", version, about, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Host HOST's desk runs this command for another machine's `desk … HOST:NAME`: the item
    /// ids it prints in text are written `HOST:ITEMID` there (added by that desk; docs/remote.md).
    #[arg(long, global = true, hide = true, value_name = "HOST", value_parser = parse_host_name)]
    ids_of_host: Option<String>,
    /// Who the keys and answers of this command are journalled as coming through (`via`): the
    /// dashboard gives `dash` to the commands it runs for a host's session (docs/remote.md).
    #[arg(long, global = true, hide = true, value_enum, default_value_t = Via::Cli)]
    via: Via,
}

/// What an operator's keys or answer came through, as the session's journal says (`via`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Via {
    /// The command line.
    Cli,
    /// The dashboard, running the command line for a host's session.
    Dash,
}

impl Via {
    /// The journal's word for it.
    fn as_str(self) -> &'static str {
        match self {
            Via::Cli => "cli",
            Via::Dash => "dash",
        }
    }
}

/// A host's name as config.toml takes it (`--ids-of-host`).
fn parse_host_name(text: &str) -> Result<String, String> {
    config::check_host_name(text).map(|()| text.to_string())
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start a detached session running CMD.
    New(NewArgs),
    /// Connect this terminal to a session (detach with Ctrl-\).
    Attach(AttachArgs),
    /// List sessions, running and exited.
    Ls {
        /// Print the sessions as JSON (docs/cli.md) instead of a table.
        #[arg(long)]
        json: bool,
        /// This machine's sessions and every configured host's, with a HOST column
        /// (docs/remote.md).
        #[arg(long)]
        all: bool,
        /// Only this host's sessions (repeat for several).
        #[arg(short = 'H', long = "host", value_name = "HOST")]
        host: Vec<String>,
    },
    /// The configured hosts (docs/remote.md): reachable or why not, round-trip time, desk
    /// version, and whether their sessions outlive a logout.
    Hosts {
        /// Print JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// The host's end of a link to another machine: run by `ssh HOST desk relay`, not by hand.
    #[command(hide = true)]
    Relay,
    /// The shared link of a host (docs/remote.md): started by desk itself, not by hand.
    #[command(hide = true)]
    Link {
        /// The host's name in config.toml.
        name: String,
        /// Its `[hosts.NAME]` entry, as JSON.
        entry: String,
    },
    /// Print the text that scrolled off a session's screen (its log), then its screen.
    Log {
        /// The session whose log to print (running or exited).
        #[arg(add = ArgValueCandidates::new(complete::sessions))]
        name: SessionName,
        /// Keep printing lines as they scroll off, until the session ends (then print its
        /// last screen).
        #[arg(long)]
        follow: bool,
        /// Print all the log keeps since the session started, not only its newest 1,000 lines.
        #[arg(long)]
        since_start: bool,
    },
    /// Print a session's current screen.
    Peek {
        /// The session to print.
        #[arg(add = ArgValueCandidates::new(complete::sessions))]
        name: SessionName,
        /// Print name, rows, cursor, size, title, modes and state as JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
        /// Print the newest N lines of history (all without N) above the screen; with
        /// --json, a `history` array of rows with their attributes.
        #[arg(long, value_name = "N")]
        history: Option<Option<u32>>,
    },
    /// The fleet dashboard: every session, what needs you first, a live preview, fleet events.
    Dash,
    /// Show a session's events (titles, modes, clients, state changes, exit), or every
    /// session's with --all.
    Events {
        /// The session (omit with --all).
        #[arg(add = ArgValueCandidates::new(complete::sessions), required_unless_present = "all", conflicts_with = "all")]
        name: Option<SessionName>,
        /// Every session's events, merged by time; with --follow, sessions that start later too.
        /// With hosts in the config file, theirs too (docs/remote.md).
        #[arg(long)]
        all: bool,
        /// With --all: only this machine's sessions, not the configured hosts'.
        #[arg(long, requires = "all")]
        local: bool,
        /// Keep printing new events until the session exits (with --all: until interrupted).
        #[arg(long, short)]
        follow: bool,
        /// One JSON object per line (a stream: not enveloped).
        #[arg(long)]
        json: bool,
        /// Only events after this sequence number.
        #[arg(long, default_value_t = 0)]
        since: u64,
        /// Only events of these types (comma-separated or repeated), e.g. `state,hook,exit`.
        #[arg(
            long = "type",
            value_name = "TYPE",
            value_delimiter = ',',
            value_parser = clap::builder::PossibleValuesParser::new(events::TYPES)
        )]
        types: Vec<String>,
    },
    /// Explain a session's agent state: each axis, its evidence, and what changed it.
    Explain {
        /// The session to explain.
        #[arg(add = ArgValueCandidates::new(complete::sessions))]
        name: SessionName,
        /// Print JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// Channels: conversations among agents and people, delivered to members' sessions.
    #[command(subcommand)]
    Channel(ChannelCommand),
    /// Stop a session: signal its process group, then SIGKILL after a grace period.
    Kill(KillArgs),
    /// Forget an exited session: its records, log and events journal (not its generation counter).
    Rm {
        /// The exited session to forget.
        #[arg(add = ArgValueCandidates::new(complete::sessions))]
        name: SessionName,
        /// Drop the prompts still queued for it too (without it they stay held until a session
        /// of the name runs again).
        #[arg(long)]
        drop_queued: bool,
        /// Print the result as JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// Run the delivery daemon (one per user).
    Serve {
        /// Stay in the foreground instead of detaching.
        #[arg(long)]
        foreground: bool,
        /// Ask the running daemon to stop.
        #[arg(long, conflicts_with = "foreground")]
        stop: bool,
    },
    /// Queue a prompt for a session's agent; prints the item id.
    Send {
        /// The session whose agent gets the prompt.
        #[arg(add = ArgValueCandidates::new(complete::sessions))]
        name: SessionName,
        /// The prompt (`-` or none: read stdin).
        text: Option<String>,
        /// Read the prompt from a file (`-`: stdin).
        #[arg(long)]
        file: Option<PathBuf>,
        /// Deliver as soon as the agent is ready (`now`), or only while it is idle.
        #[arg(long, value_enum, default_value = "now")]
        when: WhenArg,
        /// Who the prompt is from (shown in digests; default: $USER).
        #[arg(long)]
        from: Option<String>,
        /// Queue even if no session of this name exists yet (without it, an unknown name is
        /// refused, as it is most often a typo).
        #[arg(long)]
        queue_for_later: bool,
        /// Print JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// Every open dialog in the fleet: who asks, what (the command or tool), the options, how
    /// long it has waited, and the fingerprint that answers it.
    Inbox {
        /// Print JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
        /// This machine's dialogs and every configured host's, a host's sessions written
        /// `HOST:NAME` (docs/remote.md).
        #[arg(long)]
        all: bool,
        /// Only this host's dialogs (repeat for several).
        #[arg(short = 'H', long = "host", value_name = "HOST")]
        host: Vec<String>,
    },
    /// Answer a session's dialog with one of its options (default: the provider's approve
    /// option, "Yes"), with the agent's own keys — only if it is the dialog you saw.
    Approve {
        /// The session whose dialog to answer (running, showing a dialog).
        name: SessionName,
        /// The option: its number, or the start of its label (`always`, `no`).
        option: Option<String>,
        /// The fingerprint of the dialog you saw (desk inbox prints it). Without it, on a
        /// terminal, the dialog is shown and you confirm; elsewhere it is required.
        #[arg(long, value_name = "FINGERPRINT")]
        seen: Option<String>,
        /// Print JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// Refuse a session's dialog: its own refusing option ("No", "Reject"), else its cancel key
    /// (Esc) — only if it is the dialog you saw.
    Deny {
        /// The session whose dialog to refuse.
        name: SessionName,
        /// The fingerprint of the dialog you saw (desk inbox prints it). Without it, on a
        /// terminal, the dialog is shown and you confirm; elsewhere it is required.
        #[arg(long, value_name = "FINGERPRINT")]
        seen: Option<String>,
        /// Print JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// Type keys into a session: named keys (Enter, Esc, Up, C-c, F1, ...) and text, e.g. to
    /// answer an agent's dialog without attaching. A word that is no key name is typed as text;
    /// `text:WORD` always types WORD.
    Keys {
        /// The session to type into (running).
        #[arg(add = ArgValueCandidates::new(complete::sessions))]
        name: SessionName,
        /// The keys, in order: a key name (Enter, Escape/Esc, Tab, BTab, Backspace, Space,
        /// Up, Down, Left, Right, Home, End, PgUp, PgDn, Insert, Delete, F1..F12), C-x or ^X
        /// (a control character), M-x (Alt), `text:WORD`, or any other word as text (one that
        /// starts with `-` after `--`, or as `text:-WORD`).
        #[arg(required = true, value_name = "KEY")]
        keys: Vec<String>,
        /// Print JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// Show pending items (queued, sending, stuck) and why a queue is held.
    Queue {
        /// Only this session's queue.
        #[arg(add = ArgValueCandidates::new(complete::sessions))]
        name: Option<SessionName>,
        /// This machine's queues and every configured host's, a host's sessions and ids written
        /// `HOST:…` (docs/remote.md).
        #[arg(long, conflicts_with = "name")]
        all: bool,
        /// Only this host's queues (repeat for several).
        #[arg(short = 'H', long = "host", value_name = "HOST", conflicts_with_all = ["all", "name"])]
        host: Vec<String>,
        /// Print JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// Show one item: its state and evidence timeline.
    Item {
        /// The item id, or any unique start of it (like a git hash).
        #[arg(add = ArgValueCompleter::new(complete::items))]
        id: String,
        /// Print JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// List stuck items with the reason.
    Stuck {
        /// This machine's stuck items and every configured host's, each host's written
        /// `HOST:ITEMID` (docs/remote.md).
        #[arg(long)]
        all: bool,
        /// Only this host's stuck items (repeat for several).
        #[arg(short = 'H', long = "host", value_name = "HOST", conflicts_with = "all")]
        host: Vec<String>,
        /// Print JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// Deliver a stuck item again (Enter only for submit-stuck, a new paste otherwise), or a
    /// queued item held by a draft in the input box (with --over-draft).
    Force {
        /// The item id, or any unique start of it (like a git hash).
        #[arg(add = ArgValueCompleter::new(complete::items))]
        id: String,
        /// Paste even though the input box holds text someone typed: both are submitted as one
        /// message.
        #[arg(long)]
        over_draft: bool,
        /// Print JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// Drop a queued or stuck item.
    Drop {
        /// The item id, or any unique start of it (like a git hash).
        #[arg(add = ArgValueCompleter::new(complete::items))]
        id: String,
        /// Print JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// Hold delivery to a session.
    Pause {
        /// The session whose deliveries to hold.
        #[arg(add = ArgValueCandidates::new(complete::sessions))]
        name: SessionName,
        /// Why (shown in `desk queue`).
        #[arg(long)]
        reason: Option<String>,
        /// Print JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// Let delivery to a session go on.
    Resume {
        /// The session whose deliveries go on.
        #[arg(add = ArgValueCandidates::new(complete::sessions))]
        name: SessionName,
        /// Print JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// Set the terminal size of a session started with --size-policy fixed.
    Resize {
        /// The session.
        #[arg(add = ArgValueCandidates::new(complete::sessions))]
        name: SessionName,
        /// The new size, COLSxROWS.
        #[arg(value_parser = parse_size, value_name = "COLSxROWS")]
        size: (u16, u16),
    },
    /// Hand running masters over to the installed desk-master in place: each keeps its agent,
    /// terminal, socket, attached clients, screen and history (docs/upgrading.md). Without
    /// names, the masters `desk ls` reports as older.
    Upgrade {
        /// The sessions to upgrade (running); without names, those whose master is older.
        #[arg(add = ArgValueCandidates::new(complete::sessions), value_name = "NAME")]
        names: Vec<SessionName>,
        /// Every running session, current or not.
        #[arg(long)]
        all: bool,
        /// The desk-master to hand over to (default: the one `desk new` starts).
        #[arg(long, value_name = "PATH")]
        master: Option<std::path::PathBuf>,
        /// Print JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
        /// Run it on this configured host (docs/remote.md): the names are the host's sessions.
        #[arg(short = 'H', long = "host", value_name = "HOST")]
        host: Option<String>,
    },
    /// Check that everything desk needs is in place, and say how to fix what is not.
    Doctor {
        /// Print the checks as JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// Print a shell completion script (commands, flags, and the live fleet's session names,
    /// channel names and item ids), or install it where the shell looks.
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell (default: $SHELL's).
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(["bash", "zsh", "fish", "elvish", "powershell"]))]
        shell: Option<String>,
        /// Write it where the shell loads completions from (creating the directories), not to stdout.
        #[arg(long)]
        install: bool,
    },
    /// Write the manual pages (desk.1, desk-new.1, ...) into a directory.
    Man {
        /// The directory to write them to (created if missing).
        #[arg(long, value_name = "DIR", default_value = "target/man")]
        out_dir: PathBuf,
    },
    /// Start the sessions a manifest (desk.toml) declares that are not running, and report the
    /// ones that run differently; a second `up` does nothing.
    Up {
        /// Only these declared sessions (default: all).
        #[arg(add = ArgValueCandidates::new(complete::declared))]
        names: Vec<SessionName>,
        /// The manifest (default: desk.toml in this directory or the nearest one above it).
        #[arg(long, value_name = "PATH")]
        manifest: Option<PathBuf>,
        /// Say what would be done, and do nothing.
        #[arg(long)]
        dry_run: bool,
        /// Restart the sessions that run differently from their declaration (their command,
        /// directory, environment or provider changed).
        #[arg(long)]
        recreate: bool,
        /// Print what was done as JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
        /// Run it on this configured host (docs/remote.md): the manifest is the host's.
        #[arg(short = 'H', long = "host", value_name = "HOST")]
        host: Option<String>,
        /// Another machine's `desk up`/`down` hands this host its sessions: the manifest is on
        /// standard input, kept as state/fleet/hosted/ORIGIN.toml (docs/remote.md).
        #[arg(long = "manifest-stdin", hide = true, value_name = "ORIGIN", conflicts_with = "manifest", value_parser = hosted::parse_origin)]
        manifest_stdin: Option<String>,
    },
    /// Stop the sessions a manifest declares (TERM, then KILL after 5 s, as `desk kill`).
    Down {
        /// Only these declared sessions (default: all).
        #[arg(add = ArgValueCandidates::new(complete::declared))]
        names: Vec<SessionName>,
        /// The manifest (default: desk.toml in this directory or the nearest one above it).
        #[arg(long, value_name = "PATH")]
        manifest: Option<PathBuf>,
        /// Also remove the sessions' git worktrees that hold nothing unsaved (no changed or
        /// untracked file, no unpushed commit); others are kept and said why.
        #[arg(long)]
        remove_worktree: bool,
        /// Print what was done as JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
        /// Run it on this configured host (docs/remote.md): the manifest is the host's.
        #[arg(short = 'H', long = "host", value_name = "HOST")]
        host: Option<String>,
        /// Another machine's `desk up`/`down` hands this host its sessions: the manifest is on
        /// standard input, kept as state/fleet/hosted/ORIGIN.toml (docs/remote.md).
        #[arg(long = "manifest-stdin", hide = true, value_name = "ORIGIN", conflicts_with = "manifest", value_parser = hosted::parse_origin)]
        manifest_stdin: Option<String>,
    },
    /// Start a session again with what it was declared or last started with, resuming its
    /// agent's conversation.
    Restart {
        /// The session.
        #[arg(add = ArgValueCandidates::new(complete::sessions_and_declared))]
        name: SessionName,
        /// Start a new conversation instead of resuming the last one.
        #[arg(long)]
        fresh: bool,
        /// The manifest that declares it (default: the one it was started from, else desk.toml
        /// here or above; a session no manifest declares restarts as it last started).
        #[arg(long, value_name = "PATH")]
        manifest: Option<PathBuf>,
        /// The daemon's supervisor restarting the session after generation GEN ended.
        #[arg(long, value_name = "GEN", hide = true)]
        supervised: Option<u32>,
        /// Print the restart as JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// The git worktrees of a manifest's sessions.
    #[command(subcommand)]
    Worktree(WorktreeCommand),
    /// Report an agent hook to its session (run by agents' hooks; always exits 0 at once).
    #[command(hide = true)]
    Hook {
        /// The provider whose hook format the payload uses (default: the session's provider).
        #[arg(long)]
        provider: Option<String>,
        /// The payload, when the agent passes it as an argument (Codex's notify: the last
        /// argument) rather than on stdin. Arguments before it are ignored.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        payload: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
enum WorktreeCommand {
    /// Each session's worktree: its branch, path, and what it holds that is not saved elsewhere.
    Ls {
        /// The manifest (default: desk.toml in this directory or the nearest one above it).
        #[arg(long, value_name = "PATH")]
        manifest: Option<PathBuf>,
        /// Print JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum ChannelCommand {
    /// Create a channel.
    New {
        /// The channel's name: `[a-z][a-z0-9-]{0,63}`.
        name: String,
        /// What the channel is for; every member's onboarding prompt states it.
        #[arg(long)]
        goal: Option<String>,
        /// Supervisor check-ins: when every worker has been idle SECS seconds with messages no
        /// worker answered, the supervisors get a check-in prompt (off without this flag).
        #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
        checkin_after: Option<u64>,
        /// Print the channel as JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// List channels with their members, messages, threads and @human mentions.
    Ls {
        /// Print the channels as JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// Add a session (or, with --human, a person) to a channel; an agent gets an onboarding prompt.
    Add {
        /// The channel.
        #[arg(add = ArgValueCandidates::new(complete::channels))]
        name: String,
        /// The member: a session name (or a person's name with --human).
        #[arg(add = ArgValueCandidates::new(complete::sessions))]
        member: String,
        /// The member is a supervisor: it receives every message of the channel.
        #[arg(long, conflicts_with = "human")]
        supervisor: bool,
        /// The member is a person: never prompted; mentions of it notify the operator.
        #[arg(long)]
        human: bool,
        /// Add a session that does not exist yet (without it, an unknown name is refused, as it
        /// is most often a typo); its onboarding prompt waits for it.
        #[arg(long, conflicts_with = "human")]
        queue_for_later: bool,
        /// Print the channel as JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// Remove a member from a channel.
    Remove {
        /// The channel.
        #[arg(add = ArgValueCandidates::new(complete::channels))]
        name: String,
        /// The member to remove.
        #[arg(add = ArgValueCandidates::new(complete::sessions))]
        member: String,
        /// Print the channel as JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// Print a channel's messages (the root conversation, or one thread).
    Read {
        /// The channel.
        #[arg(add = ArgValueCandidates::new(complete::channels))]
        name: String,
        /// Print this thread: its root message and the replies.
        #[arg(long, value_name = "ID")]
        thread: Option<String>,
        /// Only messages after this message id.
        #[arg(long, value_name = "ID")]
        since: Option<String>,
        /// Keep printing new messages until interrupted (with --json: one JSON object per line).
        #[arg(long, short)]
        follow: bool,
        /// Print JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
    /// Post a message (prints its id). Works while `desk serve` is down; it is delivered when it starts.
    Post {
        /// The channel.
        #[arg(add = ArgValueCandidates::new(complete::channels))]
        name: String,
        /// The message (`-`, or omitted: read stdin). At most 16 KiB.
        text: Option<String>,
        /// Reply in the thread of this root message.
        #[arg(long, value_name = "ID")]
        thread: Option<String>,
        /// Post as this person member (`human`: yourself), outside every session only; inside a
        /// session you post as the session, and no one posts as an agent member but itself.
        #[arg(long = "as", value_name = "MEMBER")]
        as_member: Option<String>,
        /// Read the message from this file (`-`: stdin).
        #[arg(long, conflicts_with = "text")]
        file: Option<PathBuf>,
        /// Print the message id and its routing as JSON (docs/cli.md).
        #[arg(long)]
        json: bool,
    },
}

impl ChannelCommand {
    fn json(&self) -> bool {
        match self {
            ChannelCommand::New { json, .. }
            | ChannelCommand::Ls { json }
            | ChannelCommand::Add { json, .. }
            | ChannelCommand::Remove { json, .. }
            | ChannelCommand::Read { json, .. }
            | ChannelCommand::Post { json, .. } => *json,
        }
    }
}

#[derive(Debug, clap::Args)]
struct NewArgs {
    /// A name for the session: a letter or digit, then letters, digits, '.', '_' or '-' (64 at most).
    name: SessionName,
    /// Working directory of the command (default: the current directory).
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// Terminal size as COLSxROWS (default: `size` in the config file, else 120x40).
    #[arg(long, value_parser = parse_size)]
    size: Option<(u16, u16)>,
    /// How the size follows the attached controllers: latest (the one that typed last),
    /// smallest, largest, or fixed (only `desk resize` changes it).
    #[arg(long, default_value = "latest", value_parser = clap::builder::PossibleValuesParser::new(["latest", "smallest", "largest", "fixed"]))]
    size_policy: String,
    /// Set an environment variable for the command (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_env)]
    env: Vec<(OsString, OsString)>,
    /// The agent the command runs. Selects the state rules and wires the agent's hooks for
    /// this session only. Default: guessed from CMD's name.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(desk_core::provider::Provider::names()))]
    provider: Option<String>,
    /// The command and its arguments (default for an agent provider: the agent's own command).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
    /// Print the started session as JSON (the same fields as `desk ls --json`).
    #[arg(long)]
    json: bool,
    /// Lines of history (scrollback) the session keeps of what scrolls off its screen; 0
    /// keeps none.
    #[arg(long, value_name = "LINES", default_value_t = desk_term::screen::DEFAULT_HISTORY_LINES,
          value_parser = parse_history)]
    history: usize,
    /// Cap of the session log (`desk log`) in bytes, with an optional K, M or G suffix (default
    /// 8M; 0 keeps no log).
    #[arg(long, value_name = "BYTES", value_parser = parse_log_cap)]
    log_cap: Option<u64>,
}

/// Parse `--log-cap BYTES[K|M|G]`.
fn parse_log_cap(s: &str) -> Result<u64, String> {
    let (digits, unit) = match s.trim_end_matches(['B', 'b']).char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&s[..i], c.to_ascii_uppercase()),
        _ => (s.trim_end_matches(['B', 'b']), ' '),
    };
    let n: u64 = digits.parse().map_err(|_| format!("{s:?} is not a size in bytes (e.g. 8M)"))?;
    let scale = match unit {
        ' ' => 1,
        'K' => 1 << 10,
        'M' => 1 << 20,
        'G' => 1 << 30,
        _ => return Err(format!("{s:?}: the unit must be K, M or G")),
    };
    let bytes = n.checked_mul(scale).ok_or_else(|| format!("{s:?} is too large"))?;
    if bytes != 0 && bytes < desk_common::screen_log::MIN_LOG_CAP {
        return Err(format!(
            "{s:?} is below the smallest log cap ({} bytes); 0 keeps no log",
            desk_common::screen_log::MIN_LOG_CAP
        ));
    }
    Ok(bytes)
}

/// Parse `--history LINES`, refusing more than the screen model keeps.
fn parse_history(s: &str) -> Result<usize, String> {
    let n: usize = s.parse().map_err(|_| format!("{s:?} is not a line count"))?;
    if n > desk_term::screen::MAX_HISTORY_LINES {
        return Err(format!(
            "{n} lines is more than the most a session keeps ({})",
            desk_term::screen::MAX_HISTORY_LINES
        ));
    }
    Ok(n)
}

#[derive(Debug, clap::Args)]
struct AttachArgs {
    /// The session to attach to (omit with --next).
    #[arg(add = ArgValueCandidates::new(complete::sessions), required_unless_present = "next", conflicts_with = "next")]
    name: Option<SessionName>,
    /// Attach to the running session that most needs a person: blocked on a dialog, then a
    /// stuck prompt, then degraded (the one waiting longest first).
    #[arg(long)]
    next: bool,
    /// With --next: among this machine's sessions and every configured host's (docs/remote.md).
    #[arg(long, requires = "next")]
    all: bool,
    /// Watch only: input is not sent and the session keeps its size (this terminal sees a view).
    #[arg(long)]
    read_only: bool,
    /// Key that detaches: ^X, C-x, ctrl-x, or none (default: `detach_key` in the config file,
    /// else ^\\).
    #[arg(long, value_parser = parse_detach_key)]
    detach_key: Option<DetachKey>,
    /// First write the session's newest N history lines into this terminal, so that its own
    /// scrollback reaches them.
    #[arg(long, value_name = "N", default_value_t = 0)]
    history: u32,
    /// While this terminal's size differs from the session's, give its last row to a status
    /// line naming both sizes (`session 120x40, this terminal 79x40`).
    #[arg(long)]
    status: bool,
    /// No status line: the session gets the whole terminal and its output byte for byte (the
    /// default is a status line on the last row, when the terminal has 5 rows and 20 columns or
    /// more: this session's state and what else needs a person; `[attach] status_line` in the
    /// config file).
    #[arg(long)]
    no_status: bool,
    /// The key before attach's own commands (then n: next session that needs you, l: last
    /// session, s: choose a session, a: answer this session's dialog, d: detach, ?: help): ^X,
    /// C-x, ctrl-x, or none (default: `prefix_key` in the config file, else ^]).
    #[arg(long, value_parser = parse_detach_key)]
    prefix_key: Option<DetachKey>,
}

#[derive(Debug, clap::Args)]
struct KillArgs {
    /// The session to stop.
    #[arg(add = ArgValueCandidates::new(complete::sessions))]
    name: SessionName,
    /// Signal to send first (name or number).
    #[arg(long, default_value = "TERM", value_parser = desk_common::signals::parse)]
    signal: i32,
    /// Seconds to wait before SIGKILL; 0 sends the signal and returns without waiting.
    #[arg(long, default_value_t = 5.0)]
    grace: f64,
    /// Print how the session ended as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum WhenArg {
    Now,
    Idle,
}

/// A parsed `--detach-key`; `None` disables detaching by key.
#[derive(Debug, Clone, Copy)]
struct DetachKey(Option<u8>);

/// The terminal size of a new session unless the flag or the config file says otherwise: wide
/// enough for agents' TUIs, which lay out for 100+ columns, and tall enough for their dialogs.
const DEFAULT_SIZE: (u16, u16) = (120, 40);

/// Ctrl-\ detaches unless the flag or the config file says otherwise: it is SIGQUIT in a shell,
/// which no agent needs typed, and it is dtach's default, so hands already know it.
const DEFAULT_DETACH_KEY: Option<u8> = Some(0x1c);

fn parse_detach_key(s: &str) -> Result<DetachKey, String> {
    desk_common::syntax::parse_detach_key(s).map(DetachKey)
}

/// Parse arguments and run; returns the process exit code.
pub fn main() -> i32 {
    // A shell asking for completions (`DESK_COMPLETE=bash desk -- desk attach de`) is answered
    // and the process ends here.
    complete::main();
    // `desk master` is internal and not in the help: it is `desk-master` run from this binary,
    // with the same hand-parsed arguments (see `master::args`).
    if std::env::args_os().nth(1).is_some_and(|a| a == "master") {
        return desk_master::main(std::env::args_os().skip(2));
    }
    // `HOST:NAME`: the command runs on that host (docs/remote.md).
    let (args, host) = match remote::take_host(std::env::args_os().collect()) {
        Ok(found) => found,
        Err(e) => {
            let (code, kind) = e.downcast_ref::<Failure>().map_or((1, ErrorCode::Failed), |f| (f.code, f.kind));
            // Before the arguments are parsed: `--json` before any `--` asks for the envelope, as
            // a usage error's does.
            if std::env::args_os().skip(1).take_while(|a| a != "--").any(|a| a == "--json") {
                println!("{}", output::error_text(kind, &format!("{e:#}")));
            }
            eprintln!("desk: {e:#}");
            return code;
        }
    };
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) if std::env::args_os().nth(1).is_some_and(|a| a == "hook") => {
            // A hook must never fail its agent (Claude Code reads exit 2 as "block the tool"):
            // whatever the arguments, `desk hook` exits 0.
            if matches!(e.kind(), clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion) {
                let _ = e.print();
            } else {
                hook::debug(&format!("ignoring arguments it cannot read: {e}"));
            }
            return 0;
        }
        Err(e) => {
            // A script that asked for JSON gets its usage error as an envelope too.
            let wants_json = std::env::args_os().skip(1).any(|a| a == "--json");
            let quiet =
                matches!(e.kind(), clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion);
            if wants_json && !quiet {
                let message = e.render().to_string();
                let message = message.trim().strip_prefix("error: ").unwrap_or(message.trim());
                println!("{}", output::error_text(ErrorCode::Usage, message));
            }
            e.exit()
        }
    };
    let keeps_sigpipe = match &cli.command {
        // A link writes to ssh, which may be gone: an EPIPE is an error to report, not a death.
        Command::Ls { all, host, .. }
        | Command::Stuck { all, host, .. }
        | Command::Queue { all, host, .. }
        | Command::Inbox { all, host, .. } => *all || !host.is_empty(),
        Command::Hosts { .. } | Command::Relay | Command::Link { .. } | Command::Attach(_) | Command::Serve { .. } => {
            true
        }
        _ => host.is_some(),
    };
    if !keeps_sigpipe {
        // Short commands die quietly when their reader goes away (`desk events | head`), like
        // any Unix filter; the master and attach handle EPIPE themselves.
        // SAFETY: resetting a signal disposition before any other thread exists.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    let json = cli.command.json();
    let ran = match host {
        Some((name, host)) if !matches!(cli.command, Command::Attach(_)) => {
            remote::run_on_host(&name, &host, &args[1..])
        }
        host => run(cli, host),
    };
    match ran {
        Ok(code) => code,
        Err(e) => {
            let (code, kind) = e.downcast_ref::<Failure>().map_or((1, ErrorCode::Failed), |f| (f.code, f.kind));
            if json {
                println!("{}", output::error_text(kind, &format!("{e:#}")));
            }
            eprintln!("desk: {e:#}");
            code
        }
    }
}

/// The command line as a user sees it, without the hidden subcommands (completions would offer
/// them, and the manual would document them: `desk hook` is for agents' hooks).
fn visible_command() -> clap::Command {
    use clap::CommandFactory;
    let full = Cli::command();
    let visible: Vec<clap::Command> = full.get_subcommands().filter(|s| !s.is_hide_set()).cloned().collect();
    clap::Command::new("desk")
        .version(env!("CARGO_PKG_VERSION"))
        .about(full.get_about().cloned().unwrap_or_default())
        .subcommand_required(true)
        .subcommands(visible)
}

impl Command {
    /// Whether the command was asked for JSON (its errors are then enveloped on stdout too).
    fn json(&self) -> bool {
        match self {
            Command::New(a) => a.json,
            Command::Kill(a) => a.json,
            Command::Channel(c) => c.json(),
            Command::Ls { json, .. }
            | Command::Hosts { json }
            | Command::Peek { json, .. }
            | Command::Events { json, .. }
            | Command::Explain { json, .. }
            | Command::Rm { json, .. }
            | Command::Send { json, .. }
            | Command::Keys { json, .. }
            | Command::Inbox { json, .. }
            | Command::Approve { json, .. }
            | Command::Deny { json, .. }
            | Command::Queue { json, .. }
            | Command::Item { json, .. }
            | Command::Stuck { json, .. }
            | Command::Force { json, .. }
            | Command::Drop { json, .. }
            | Command::Pause { json, .. }
            | Command::Resume { json, .. }
            | Command::Up { json, .. }
            | Command::Down { json, .. }
            | Command::Restart { json, .. }
            | Command::Worktree(WorktreeCommand::Ls { json, .. })
            | Command::Upgrade { json, .. }
            | Command::Doctor { json } => *json,
            Command::Attach(_)
            | Command::Resize { .. }
            | Command::Log { .. }
            | Command::Serve { .. }
            | Command::Hook { .. }
            | Command::Completions { .. }
            | Command::Man { .. }
            | Command::Relay
            | Command::Link { .. }
            | Command::Dash => false,
        }
    }
}

/// Run the command; `host`: the session named is on that host (`HOST:NAME`; only `attach`
/// comes here with one, the others run on the host).
fn run(cli: Cli, host: Option<(String, desk_common::config::Host)>) -> Result<i32> {
    let ids = output::Ids::of_host(cli.ids_of_host.as_deref());
    match cli.command {
        Command::New(a) => {
            let config = config::load(&desk_common::paths::Paths::from_env()?)?;
            sessions::new(sessions::NewSession {
                name: a.name,
                cwd: a.cwd,
                size: a.size.or(config.size).unwrap_or(DEFAULT_SIZE),
                size_policy: a
                    .size_policy
                    .parse()
                    .map_err(|e: desk_core::session::UnknownSizePolicy| failure(2, e.to_string()))?,
                env: a.env,
                provider: a.provider,
                command: a.command,
                provider_args: config.provider_args,
                json: a.json,
                history: a.history,
                log_cap: a.log_cap.unwrap_or(desk_common::screen_log::DEFAULT_LOG_CAP),
            })
        }
        Command::Attach(a) => {
            let config = config::load(&desk_common::paths::Paths::from_env()?)?;
            let detach_key = match a.detach_key {
                Some(key) => key.0,
                None => config.detach_key.unwrap_or(DEFAULT_DETACH_KEY),
            };
            let prefix_key = match a.prefix_key {
                Some(key) => key.0,
                None => config.prefix_key.unwrap_or(Some(crate::attach::DEFAULT_PREFIX_KEY)),
            };
            let status = !a.no_status && config.status_line.unwrap_or(true);
            let (name, host) = match a.name {
                Some(name) => (name, host),
                None if a.all => match remote::most_needing_person_everywhere()? {
                    Some((place, name, why)) => {
                        let shown = place.as_ref().map_or_else(|| name.to_string(), |(h, _)| format!("{h}:{name}"));
                        eprintln!("desk: attaching to {shown} ({why})");
                        (name, place)
                    }
                    None => {
                        return Err(fail(ErrorCode::Failed, "no running session here or on a host needs a person now"));
                    }
                },
                None => match sessions::most_needing_person(&desk_common::paths::Paths::from_env()?)? {
                    Some((name, why)) => {
                        eprintln!("desk: attaching to {name} ({why})");
                        (name, host)
                    }
                    None => return Err(fail(ErrorCode::Failed, "no running session needs a person now")),
                },
            };
            crate::attach::run(&crate::attach::AttachOptions {
                name,
                read_only: a.read_only,
                detach_key,
                history: a.history,
                status_line: a.status,
                status,
                prefix_key,
                stuck: delivery::stuck_counts,
                host,
            })
        }
        Command::Ls { json, all, host } if all || !host.is_empty() => remote::ls(json, all, &host),
        Command::Ls { json, .. } => sessions::ls(json),
        Command::Hosts { json } => remote::hosts(json),
        Command::Relay => remote::relay(),
        Command::Link { name, entry } => remote::link(&name, &entry),
        Command::Dash => crate::dash::run(),
        Command::Log { name, follow, since_start } => sessions::log(&name, follow, since_start),
        Command::Peek { name, json, history } => sessions::peek(&name, json, history.map(|n| n.unwrap_or(u32::MAX))),
        Command::Resize { name, size } => sessions::resize(&name, size, &ids),
        Command::Events { name: Some(name), follow, json, since, types, .. } => {
            events::events(&name, follow, json, since, &types)
        }
        Command::Events { name: None, follow, json, types, local, .. } if !local && remote::any_hosts()? => {
            remote::events_all(follow, json, &types)
        }
        Command::Events { name: None, follow, json, types, .. } => events::all(follow, json, &types),
        Command::Explain { name, json } => explain::explain(&name, json),
        Command::Hook { provider, mut payload } => Ok(hook::hook(provider, payload.pop())),
        Command::Serve { foreground, stop } => delivery::serve(foreground, stop),
        Command::Channel(c) => match c {
            ChannelCommand::New { name, goal, checkin_after, json } => channel::new(&name, goal, checkin_after, json),
            ChannelCommand::Ls { json } => channel::ls(json),
            ChannelCommand::Add { name, member, supervisor, human, queue_for_later, json } => {
                let role = if human {
                    desk_core::channel::Role::Human
                } else if supervisor {
                    desk_core::channel::Role::Supervisor
                } else {
                    desk_core::channel::Role::Worker
                };
                channel::add(&name, &member, role, queue_for_later, json)
            }
            ChannelCommand::Remove { name, member, json } => channel::remove(&name, &member, json),
            ChannelCommand::Read { name, thread, since, follow, json } => {
                channel::read(channel::ReadArgs { name, thread, since, follow, json })
            }
            ChannelCommand::Post { name, text, thread, as_member, file, json } => {
                channel::post(channel::PostArgs { name, thread, as_member, text, file, json })
            }
        },
        Command::Send { name, text, file, when, from, queue_for_later, json } => delivery::send(delivery::SendArgs {
            name,
            text,
            file,
            when: match when {
                WhenArg::Now => desk_core::delivery::item::When::Now,
                WhenArg::Idle => desk_core::delivery::item::When::Idle,
            },
            from,
            queue_for_later,
            json,
            ids,
        }),
        Command::Keys { name, keys, json } => keys::keys(&name, &keys, json, cli.via, &ids),
        Command::Inbox { json, all, host } if all || !host.is_empty() => remote::inbox(json, all, &host),
        Command::Inbox { json, .. } => inbox::inbox(json),
        Command::Approve { name, option, seen, json } => {
            inbox::answer(&name, option.as_deref(), false, seen.as_deref(), json, cli.via)
        }
        Command::Deny { name, seen, json } => inbox::answer(&name, None, true, seen.as_deref(), json, cli.via),
        Command::Queue { json, all, host, .. } if all || !host.is_empty() => remote::queue(json, all, &host),
        Command::Queue { name, json, .. } => delivery::queue(name, json, ids),
        Command::Item { id, json } => delivery::item(&id, json, ids),
        Command::Stuck { json, all, host } if all || !host.is_empty() => remote::stuck(json, all, &host),
        Command::Stuck { json, .. } => delivery::stuck(json),
        Command::Force { id, over_draft, json } => {
            let id = delivery::resolve_id(&id, &ids)?;
            delivery::command("force", desk_wire::control::Request::Force { id, over_draft }, json, &ids)
        }
        Command::Drop { id, json } => {
            let id = delivery::resolve_id(&id, &ids)?;
            delivery::command("drop", desk_wire::control::Request::Drop { id }, json, &ids)
        }
        Command::Pause { name, reason, json } => {
            delivery::command("pause", desk_wire::control::Request::Pause { session: name, reason }, json, &ids)
        }
        Command::Resume { name, json } => {
            delivery::command("resume", desk_wire::control::Request::Resume { session: name }, json, &ids)
        }
        Command::Kill(a) => sessions::kill(&a.name, a.signal, a.grace, a.json, "desk kill", &ids),
        // `-H HOST` is taken out before the arguments are parsed, and the command runs on that
        // host (remote::take_host); one still here was not found there (an option before the
        // subcommand): never run on this machine instead.
        Command::Up { host: Some(h), .. }
        | Command::Down { host: Some(h), .. }
        | Command::Upgrade { host: Some(h), .. } => {
            Err(fail(ErrorCode::Usage, format!("-H {h}: give desk's options after the subcommand (desk up -H {h} …)")))
        }
        Command::Upgrade { names, all, master, json, host: _ } => {
            upgrade::upgrade(upgrade::UpgradeArgs { names, all, master, json })
        }
        Command::Doctor { json } => doctor::doctor(json),
        Command::Rm { name, drop_queued, json } => sessions::rm(&name, drop_queued, json),
        Command::Up { names, manifest, dry_run, recreate, json, host: _, manifest_stdin } => match manifest_stdin {
            Some(origin) => {
                let given = hosted::receive(&desk_common::paths::Paths::from_env()?, &origin, dry_run)?;
                let ran = up::up(Some(&given), &names, dry_run, recreate, json);
                if dry_run {
                    let _ = std::fs::remove_file(&given);
                }
                ran
            }
            None => up::up(manifest.as_deref(), &names, dry_run, recreate, json),
        },
        Command::Down { names, manifest, remove_worktree, json, host: _, manifest_stdin } => {
            let manifest = match manifest_stdin {
                Some(origin) => Some(hosted::receive(&desk_common::paths::Paths::from_env()?, &origin, false)?),
                None => manifest,
            };
            up::down(manifest.as_deref(), &names, remove_worktree, json)
        }
        Command::Restart { name, fresh, manifest, supervised, json } => {
            up::restart(manifest.as_deref(), &name, fresh, supervised, json)
        }
        Command::Worktree(WorktreeCommand::Ls { manifest, json }) => up::worktree_ls(manifest.as_deref(), json),
        Command::Completions { shell, install } => complete::completions(shell, install),
        Command::Man { out_dir } => {
            let pages = manual::write_pages(visible_command(), &out_dir)?;
            println!("{}", pages.first().map_or_else(|| out_dir.display().to_string(), |p| p.display().to_string()));
            Ok(0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The signal `desk kill --signal` parses, or the error it prints.
    fn kill_signal(args: &[&str]) -> Result<i32, String> {
        use clap::Parser;
        let argv = ["desk", "kill", "s"].iter().chain(args);
        match Cli::try_parse_from(argv) {
            Ok(Cli { command: Command::Kill(kill), .. }) => Ok(kill.signal),
            Ok(other) => panic!("parsed as another command: {other:?}"),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn kill_takes_signals_by_name_or_number_and_refuses_others_by_name() {
        assert_eq!(kill_signal(&[]), Ok(libc::SIGTERM), "TERM by default");
        assert_eq!(kill_signal(&["--signal", "sigusr1"]), Ok(libc::SIGUSR1));
        assert_eq!(kill_signal(&["--signal", "KILL"]), Ok(libc::SIGKILL));
        assert_eq!(kill_signal(&["--signal", "2"]), Ok(libc::SIGINT));
        assert_eq!(kill_signal(&["--signal", "RTMIN+2"]), Ok(libc::SIGRTMIN() + 2));
        for (bad, says) in [("NOPE", "\"NOPE\" is not a signal name"), ("0", "0 is not a signal number")] {
            let error = kill_signal(&["--signal", bad]).expect_err(bad);
            assert!(error.contains(says) && error.contains("--signal"), "{error}");
        }
    }

    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
