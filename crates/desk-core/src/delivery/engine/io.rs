//! The delivery engine's vocabulary: what the daemon's loop tells the engine ([`Input`]:
//! sessions, screens, write results, timers, operator commands) and what the engine asks it to
//! do ([`Action`]: persist, read the screen, write, arm a timer, reply). Plain data, no
//! behaviour; every result carries the [`Token`] of the request it answers, so a late one can
//! be recognised and ignored.

use std::rc::Rc;
use std::time::Instant;

use crate::delivery::item::{Item, ItemId, State};
use crate::state::{Activity, Lifecycle, RuleSet};
use desk_wire::names::SessionName;

/// A request's identity: results carry it back, and stale ones are ignored.
pub type Token = u64;

/// What the engine is told about a session by its master.
#[derive(Debug, Clone)]
pub struct SessionView {
    pub name: String,
    pub generation: u32,
    pub lifecycle: Lifecycle,
    pub ready: bool,
    pub activity: Activity,
    pub wait: Option<String>,
    pub bracketed_paste: bool,
    /// The provider's rules (for the screen's blocked patterns) and delivery settings.
    pub rules: Rc<RuleSet>,
}

/// A read of the session's screen.
#[derive(Debug, Clone)]
pub struct ScreenView {
    pub lines: Vec<String>,
    pub bracketed_paste: bool,
    /// When a controller last typed (Unix ms), if ever.
    pub last_typed_ms: Option<u64>,
    /// Whether the child's terminal is in canonical (line-edited) mode.
    pub canonical: bool,
    /// The cursor's row (0-based index into `lines`) and column (0-based, in cells).
    pub cursor_row: usize,
    pub cursor_col: usize,
    /// Who has the terminal (its foreground process group), when the master says.
    pub foreground: Option<desk_wire::Foreground>,
}

/// What a write types. Delivery only ever types the first two, each as one write (see the
/// engine's invariants: never Esc, Ctrl-C or any other key); an operator's `desk drop` may
/// erase desk's own prompt from the input box with the third.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    /// The prompt's text (bracketed when the application enabled bracketed paste).
    Paste,
    /// One Enter, to submit what was pasted.
    Enter,
    /// Backspaces (DEL), as many as the prompt has characters: clear desk's own unsent prompt
    /// from the input box, once the box is proven to hold exactly that prompt.
    Erase,
}

impl WriteKind {
    /// The word for it in messages and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            WriteKind::Paste => "paste",
            WriteKind::Enter => "Enter",
            WriteKind::Erase => "erase",
        }
    }
}

/// Why an INPUT frame did not go through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteError {
    /// The master refused the frame whole (its input queue was full, the session is exiting):
    /// nothing was typed.
    Refused(String),
    /// The connection failed before the master answered: the bytes may or may not have been
    /// typed.
    Unknown(String),
}

/// Operator commands that change state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Deliver a stuck item again, or a queued one held by a draft (`over_draft`: paste even
    /// onto text someone typed).
    Force {
        id: ItemId,
        over_draft: bool,
    },
    Drop(ItemId),
    Pause {
        session: SessionName,
        reason: String,
    },
    Resume {
        session: SessionName,
    },
}

#[derive(Debug, Clone)]
pub enum Input {
    /// Start-up: the non-final items found on disk.
    Restore(Vec<Item>),
    /// A new item, durable as `queued`.
    Ingested(Item),
    /// Pauses found on disk at start-up.
    Paused {
        session: String,
        reason: String,
    },
    /// The daemon opened a connection to the session's master and waits for its first report:
    /// until that (or [`Input::SessionDown`]) comes, the queue waits without calling the
    /// session not running (desk serve just started, or the master was replaced).
    Connecting {
        session: String,
    },
    /// A session's master is reachable, or what it reports changed.
    Session(SessionView),
    /// The master of this session generation is gone (the child exited, or it is unreachable);
    /// no generation: no master of the session could be reached at all (at start-up).
    SessionDown {
        session: String,
        generation: Option<u32>,
    },
    /// A hook reported by the session (e.g. `UserPromptSubmit` with the prompt's first line).
    Hook {
        session: String,
        generation: u32,
        event: crate::state::hooks::HookEvent,
        detail: Option<String>,
        /// For a submitted prompt: what identifies the whole of it.
        prompt: Option<crate::state::hooks::PromptSig>,
        at_ms: u64,
    },
    /// What a session's events journal recorded that the engine has not been told yet (hooks
    /// that reached the master while the daemon was down, the agent's activity, exits, new
    /// generations), oldest first. The daemon gives it before the session's live view, so that
    /// no item is judged on less evidence than was recorded.
    Journal {
        session: String,
        events: Vec<Past>,
    },
    Snapshot {
        token: Token,
        result: Result<ScreenView, String>,
    },
    /// The master accepted (or refused) an INPUT frame.
    Written {
        token: Token,
        result: Result<(), WriteError>,
    },
    /// A persist failed; the rest of its batch was not carried out.
    PersistFailed {
        token: Token,
        error: String,
    },
    Timer(TimerKey),
    Command {
        client: u64,
        command: Command,
    },
    /// The sessions that receive channel `channel`'s messages now (its agent members, after an
    /// ingest pass read its roster): a queued item of that channel for any other session is
    /// withdrawn (dropped, saying why) — a member removed before its prompt went out does not
    /// get it. An item being delivered, or stuck, is left as it is.
    ChannelMembers {
        channel: String,
        receivers: Vec<String>,
    },
}

/// One durable event of a session's journal, replayed ([`Input::Journal`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Past {
    /// When the master recorded it (Unix ms).
    pub at_ms: u64,
    /// The session generation it belongs to.
    pub generation: u32,
    pub what: PastEvent,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PastEvent {
    /// The generation's program started: every earlier generation is over.
    Started,
    /// The agent's activity changed.
    Activity(Activity),
    /// A hook reached the master (`UserPromptSubmit` with the prompt's signature).
    Hook { event: crate::state::hooks::HookEvent, prompt: Option<crate::state::hooks::PromptSig> },
    /// The generation's program exited.
    Exit,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimerKey {
    pub session: String,
    /// The delivery attempt the timer belongs to; none for a session's own timers (retry,
    /// drained), which outlive attempts.
    pub attempt: Option<u64>,
    pub kind: TimerKind,
    /// Which Enter of the attempt a deadline or settle timer belongs to (0: the paste).
    pub step: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimerKind {
    /// Poll the screen during verification.
    Poll,
    /// The verification window of the current phase ended.
    Deadline,
    /// The settle delay before Enter ended.
    Settle,
    /// Try the gate again (after a backoff, or when a typing hold ends).
    Retry,
    /// The agent has been idle long enough for its own queue to be empty.
    Drained,
    /// Look whether a stuck prompt's paste sits unsent in the input box.
    Watch,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Write the item durably in its (new) state; `from` is its state on disk now.
    Persist {
        token: Token,
        item: Item,
        from: State,
    },
    Snapshot {
        token: Token,
        session: String,
        generation: u32,
    },
    /// Type into the session: the paste, or one Enter.
    Write {
        token: Token,
        session: String,
        generation: u32,
        kind: WriteKind,
        bytes: Vec<u8>,
    },
    Arm {
        at: Instant,
        key: TimerKey,
    },
    /// Answer an operator's command. `ok`: it did what was asked (a force: delivered). Not
    /// `ok`: `acted` says whether anything was typed on the way (a force that pasted again or
    /// pressed Enter and still did not deliver) or nothing was (a refusal); `message` says
    /// what was done and how it ended.
    Reply {
        client: u64,
        ok: bool,
        acted: bool,
        message: String,
        item: Option<Box<Item>>,
    },
}

/// Why a session's queue is not moving.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Hold {
    pub reason: String,
    pub since_ms: u64,
}
