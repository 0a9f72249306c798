//! Command-line flags and the resolved configuration of the demo agent.
//!
//! Owns every tunable behaviour: [`Args`] is the clap surface (`desk-demo-agent --help`),
//! [`Config`] the plain resolved value the state machine reads. Invariants: `Config` holds no
//! handles and does no I/O, so tests build it with struct update syntax from
//! [`Config::default`], which equals the flag defaults; everything environmental (working
//! directory, a fresh session id, the transcript directory and a resumed conversation's
//! prompts) is resolved once, here, at the process edge.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;

/// How the crash trigger ends the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// `exit(code)`.
    Exit(i32),
    /// Die by this signal number (terminal restored first).
    Signal(i32),
}

/// Thresholds above which a bracketed paste is collapsed into a placeholder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PasteCollapse {
    /// Collapse pastes of more than this many lines.
    pub lines: usize,
    /// Collapse pastes of more than this many characters.
    pub chars: usize,
}

/// The resolved configuration; see [`Args`] for what each field does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub title: String,
    pub startup_delay: Duration,
    /// `None`: do not ask for the cursor position at all.
    pub cpr_timeout: Option<Duration>,
    pub keep_early_input: bool,
    pub alt_screen: bool,
    pub bracketed_paste: bool,
    pub sync_output: bool,
    pub paste_collapse: Option<PasteCollapse>,
    /// `None`: the paste-burst Enter swallow is off.
    pub paste_burst: Option<Duration>,
    pub prompt_log: Option<PathBuf>,
    pub work: Duration,
    pub reply_lines: usize,
    pub queue_mid_turn: bool,
    pub esc_interrupts: bool,
    /// `None`: no prompt opens the approval dialog.
    pub approve_word: Option<String>,
    pub approval_delay: Duration,
    /// A turn that will ask for approval asks as soon as an Enter is taken as a newline.
    pub approval_on_newline: bool,
    /// `None`: no prompt crashes the agent.
    pub crash_word: Option<String>,
    pub crash: CrashMode,
    pub hook_cmd: Option<String>,
    pub hook_timeout: Duration,
    pub session_id: String,
    pub cwd: PathBuf,
    /// Which desk channel messages to reply to, with what text, and as whom ({me}).
    pub channel_reply: crate::channel::ReplyWhen,
    pub channel_reply_text: String,
    pub channel_me: String,
    /// The desk executable that posts the replies.
    pub desk: PathBuf,
    /// `--resume ID`: the conversation resumed (its id is then `session_id`).
    pub resume: Option<String>,
    /// Where conversations' transcripts are kept (`<dir>/<id>.jsonl`); `None`: none kept.
    pub transcript_dir: Option<PathBuf>,
    /// The resumed conversation's prompts, oldest first, from its transcript.
    pub earlier_prompts: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            title: "demo".into(),
            startup_delay: Duration::from_millis(300),
            cpr_timeout: Some(Duration::from_millis(2000)),
            keep_early_input: false,
            alt_screen: false,
            bracketed_paste: true,
            sync_output: true,
            paste_collapse: Some(PasteCollapse { lines: 3, chars: 800 }),
            paste_burst: None,
            prompt_log: None,
            work: Duration::from_millis(1000),
            reply_lines: 0,
            queue_mid_turn: true,
            esc_interrupts: true,
            approve_word: Some("approve-me".into()),
            approval_delay: Duration::from_millis(300),
            approval_on_newline: false,
            crash_word: Some("crash-now".into()),
            crash: CrashMode::Exit(3),
            hook_cmd: None,
            hook_timeout: Duration::from_millis(2000),
            session_id: "00000000-0000-4000-8000-000000000000".into(),
            cwd: PathBuf::from("/"),
            channel_reply: crate::channel::ReplyWhen::Off,
            channel_reply_text: DEFAULT_REPLY_TEXT.into(),
            channel_me: String::new(),
            desk: PathBuf::from("desk"),
            resume: None,
            transcript_dir: None,
            earlier_prompts: Vec::new(),
        }
    }
}

/// A small but faithful stand-in for a coding-agent TUI (Claude Code, Codex), used by desk's
/// tests, benchmarks and `make demo`.
///
/// It draws an input box inline on the main screen, accepts typing and bracketed pastes, submits
/// on Enter, "works" for a while under a braille spinner title, replies, queues prompts typed
/// mid-turn, can show an approval dialog or crash on trigger words, and records every prompt it
/// actually submitted in a JSON-lines log: the ground truth desk's delivery tests compare with.
/// See docs/demo-agent.md.
#[derive(Debug, Clone, Parser)]
#[command(name = "desk-demo-agent", version, verbatim_doc_comment)]
pub struct Args {
    /// Text after the state glyph in the terminal title (OSC 0): `✳ TEXT` idle, `⠋ TEXT`
    /// working, `✋ TEXT` waiting for approval.
    #[arg(long, value_name = "TEXT", default_value = "demo")]
    pub title: String,

    /// Milliseconds from start until the UI is drawn and bracketed paste enabled (not before
    /// the cursor report arrived or timed out). Input before then is swallowed.
    #[arg(long, value_name = "MS", default_value_t = 300)]
    pub startup_delay_ms: u64,

    /// How long to wait at start for the reply to the cursor position query (ESC[6n). Without
    /// a reply the agent continues and its status row says "no cursor report". 0 = do not ask.
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    pub cpr_timeout_ms: u64,

    /// Keep input that arrives before the UI is ready and apply it once ready, instead of
    /// swallowing it (Claude Code swallows it).
    #[arg(long)]
    pub keep_early_input: bool,

    /// Draw on the alternate screen (like Codex's full-screen mode) instead of inline on the
    /// main screen (like Claude Code).
    #[arg(long)]
    pub alt_screen: bool,

    /// Never enable bracketed paste (ESC[?2004h); pastes then arrive as typed characters.
    #[arg(long)]
    pub no_bracketed_paste: bool,

    /// Do not wrap frames in synchronized-output marks (ESC[?2026h … ESC[?2026l).
    #[arg(long)]
    pub no_sync_output: bool,

    /// Collapse a bracketed paste of more than N lines into `[Pasted text #K +L lines]`.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub paste_collapse_lines: usize,

    /// Collapse a bracketed paste of more than M characters into a placeholder.
    #[arg(long, value_name = "M", default_value_t = 800)]
    pub paste_collapse_chars: usize,

    /// Never collapse pastes; show their text in the input box.
    #[arg(long)]
    pub no_paste_collapse: bool,

    /// Codex-style paste-burst window: an Enter within MS after the end of a bracketed paste,
    /// or within MS of a burst of 3 or more characters typed under 8 ms apart, inserts a
    /// newline instead of submitting. 0 = off.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub paste_burst_ms: u64,

    /// Append every submitted prompt to FILE as one JSON line {"ts_ms","seq","prompt"},
    /// written with one write and fsynced before anything is shown.
    #[arg(long, value_name = "FILE")]
    pub prompt_log: Option<PathBuf>,

    /// How long each turn "works" (spinner title) before replying.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub work_ms: u64,

    /// Extra filler lines printed with each reply, for output-volume benchmarks.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub reply_lines: usize,

    /// Ignore Enter while a turn runs (the text stays in the box) instead of queueing the
    /// prompt for after the turn.
    #[arg(long)]
    pub no_queue: bool,

    /// Esc (or Ctrl-C on an empty box) does not interrupt a working turn.
    #[arg(long)]
    pub no_esc_interrupt: bool,

    /// A submitted prompt containing WORD shows an approval dialog. Empty = never.
    #[arg(long, value_name = "WORD", default_value = "approve-me")]
    pub approve_word: String,

    /// Milliseconds a turn works before its approval dialog appears.
    #[arg(long, value_name = "MS", default_value_t = 300)]
    pub approval_delay_ms: u64,

    /// A turn that will ask for approval asks as soon as an Enter is taken as a newline (see
    /// --paste-burst-ms), however long its --approval-delay-ms: a dialog that opens over a
    /// prompt while it is being submitted, on cue rather than by timing.
    #[arg(long)]
    pub approval_on_newline: bool,

    /// A submitted prompt containing WORD makes the agent exit at once. Empty = never.
    #[arg(long, value_name = "WORD", default_value = "crash-now")]
    pub crash_word: String,

    /// Exit code of the crash trigger.
    #[arg(long, value_name = "CODE", default_value_t = 3)]
    pub crash_code: i32,

    /// Make the crash trigger kill the agent with this signal instead (name or number: KILL,
    /// SIGSEGV, 9).
    #[arg(long, value_name = "SIG")]
    pub crash_signal: Option<String>,

    /// Run `sh -c CMD` for each Claude-Code-style hook event, with the event's JSON (one
    /// document, newline-terminated) on stdin: SessionStart, UserPromptSubmit, PreToolUse,
    /// PermissionRequest, Notification, PostToolUse, Stop, SessionEnd.
    #[arg(long, value_name = "CMD")]
    pub hook_cmd: Option<String>,

    /// Longest wait for one hook before it is killed and the agent carries on.
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    pub hook_timeout_ms: u64,

    /// session_id reported to hooks (default: a fresh random UUID).
    #[arg(long, value_name = "ID")]
    pub session_id: Option<String>,

    /// Instead of being the demo agent, play back the output of a recorded agent (an
    /// asciicast v2 file, e.g. tests/data/agents/claude/approval.cast) with its timing, then
    /// stay silent until killed. Every other flag is ignored.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<std::path::PathBuf>,

    /// With --replay: play this many times faster than recorded.
    #[arg(long, value_name = "FACTOR", default_value_t = 1.0)]
    pub replay_speed: f64,

    /// With --replay: stop at this many seconds of recording time.
    #[arg(long, value_name = "SECS")]
    pub replay_until: Option<f64>,

    /// Reply to desk channel messages in submitted prompts when the turn ends, with
    /// `desk channel post` in the message's thread: off, root (root messages only), mentioned
    /// (messages that mention this agent) or all.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "off")]
    pub channel_reply: crate::channel::ReplyWhen,

    /// The reply's text; {me}, {author}, {message} and {channel} are filled in. A mention in
    /// it (@name) reaches that member.
    #[arg(long, value_name = "TEXT", default_value = DEFAULT_REPLY_TEXT)]
    pub channel_reply_text: String,

    /// The desk executable to post with (default: `desk` beside this program, else on PATH).
    #[arg(long, value_name = "PATH")]
    pub desk: Option<PathBuf>,

    /// Resume the conversation ID from its transcript: its earlier prompts are shown and
    /// remembered, and new ones are added to it. Without a transcript holding a prompt, the
    /// agent says "No conversation found with session ID: ID" and exits 1 (as Claude Code does).
    #[arg(long, value_name = "ID", conflicts_with = "session_id")]
    pub resume: Option<String>,

    /// Keep each conversation's transcript (its prompts, one JSON line each) as DIR/ID.jsonl
    /// (default: $DESK_DEMO_AGENT_HOME/transcripts, else $DESK_HOME/demo-agent/transcripts,
    /// else ~/.desk-demo-agent/transcripts).
    #[arg(long, value_name = "DIR")]
    pub transcript_dir: Option<PathBuf>,

    /// Refuse every --resume ID as if its conversation were unknown (say "No conversation found
    /// with session ID: ID" and exit 1), to test how a refused resume is handled.
    #[arg(long)]
    pub reject_resume: bool,
}

/// The default channel reply.
pub const DEFAULT_REPLY_TEXT: &str = "ack {message} from {me}";

impl Args {
    /// Resolve the flags into a [`Config`], reading the working directory and generating a
    /// session id when none was given.
    pub fn into_config(self) -> anyhow::Result<Config> {
        let crash = match &self.crash_signal {
            Some(name) => CrashMode::Signal(parse_signal(name)?),
            None => CrashMode::Exit(self.crash_code),
        };
        let nonempty = |s: String| (!s.is_empty()).then_some(s);
        let ms = Duration::from_millis;
        let transcript_dir = self.transcript_dir.or_else(crate::transcript::default_dir);
        let earlier_prompts = match (&self.resume, &transcript_dir) {
            (Some(id), _) if self.reject_resume => anyhow::bail!("No conversation found with session ID: {id}"),
            (Some(id), dir) => crate::transcript::load(dir.as_deref(), id)?,
            (None, _) => Vec::new(),
        };
        Ok(Config {
            title: self.title,
            startup_delay: ms(self.startup_delay_ms),
            cpr_timeout: (self.cpr_timeout_ms > 0).then(|| ms(self.cpr_timeout_ms)),
            keep_early_input: self.keep_early_input,
            alt_screen: self.alt_screen,
            bracketed_paste: !self.no_bracketed_paste,
            sync_output: !self.no_sync_output,
            paste_collapse: (!self.no_paste_collapse)
                .then_some(PasteCollapse { lines: self.paste_collapse_lines, chars: self.paste_collapse_chars }),
            paste_burst: (self.paste_burst_ms > 0).then(|| ms(self.paste_burst_ms)),
            prompt_log: self.prompt_log,
            work: ms(self.work_ms),
            reply_lines: self.reply_lines,
            queue_mid_turn: !self.no_queue,
            esc_interrupts: !self.no_esc_interrupt,
            approve_word: nonempty(self.approve_word),
            approval_delay: ms(self.approval_delay_ms),
            approval_on_newline: self.approval_on_newline,
            crash_word: nonempty(self.crash_word),
            crash,
            hook_cmd: self.hook_cmd,
            hook_timeout: ms(self.hook_timeout_ms),
            session_id: match (self.session_id, &self.resume) {
                (_, Some(id)) => id.clone(),
                (Some(id), None) => id,
                (None, None) => random_session_id(),
            },
            cwd: std::env::current_dir()
                .context("cannot read the current directory (it is reported to hooks as cwd)")?,
            channel_reply: self.channel_reply,
            channel_reply_text: self.channel_reply_text,
            // desk sets DESK_SESSION for a session's child; it is who the agent posts as.
            channel_me: std::env::var("DESK_SESSION").unwrap_or_default(),
            desk: self.desk.unwrap_or_else(|| {
                let beside = std::env::current_exe().ok().and_then(|e| e.parent().map(|d| d.join("desk")));
                beside.filter(|p| p.is_file()).unwrap_or_else(|| PathBuf::from("desk"))
            }),
            resume: self.resume,
            transcript_dir,
            earlier_prompts,
        })
    }
}

/// Parse `KILL`, `SIGKILL`, `kill` or `9` into a signal number.
pub fn parse_signal(name: &str) -> anyhow::Result<i32> {
    if let Ok(n) = name.parse::<i32>() {
        return nix::sys::signal::Signal::try_from(n)
            .map(|s| s as i32)
            .map_err(|_| anyhow::anyhow!("--crash-signal {name}: not a signal number"));
    }
    let upper = name.to_ascii_uppercase();
    let full = if upper.starts_with("SIG") { upper } else { format!("SIG{upper}") };
    full.parse::<nix::sys::signal::Signal>()
        .map(|s| s as i32)
        .map_err(|_| anyhow::anyhow!("--crash-signal {name}: not a signal name"))
}

/// A random version-4 UUID from the kernel's generator, or, if that cannot be read, one derived
/// from the pid and the clock (unique enough for a test fixture's session id).
fn random_session_id() -> String {
    use std::io::Read;
    let mut b = [0u8; 16];
    let from_kernel = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b)).is_ok();
    if !from_kernel {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let mixed = nanos ^ (u128::from(std::process::id()) << 64);
        b = mixed.to_le_bytes();
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_defaults_match_config_defaults() {
        let cfg = Args::parse_from(["desk-demo-agent", "--session-id", "x"]).into_config().expect("defaults resolve");
        let expected = Config {
            session_id: "x".into(),
            cwd: cfg.cwd.clone(),
            channel_me: cfg.channel_me.clone(),
            desk: cfg.desk.clone(),
            transcript_dir: cfg.transcript_dir.clone(),
            ..Config::default()
        };
        assert_eq!(cfg, expected);
    }

    #[test]
    fn signals_parse_by_name_and_number() {
        assert_eq!(parse_signal("KILL").ok(), Some(libc::SIGKILL));
        assert_eq!(parse_signal("sigsegv").ok(), Some(libc::SIGSEGV));
        assert_eq!(parse_signal("9").ok(), Some(9));
        assert!(parse_signal("NOPE").is_err());
    }

    #[test]
    fn generated_session_ids_look_like_uuids() {
        let id = random_session_id();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
    }
}
