//! Restart policies: which ended session generation is started again, when, and what holds a
//! session down instead.
//!
//! Owns [`Supervisor`], the daemon's durable supervision state (it is serialized whole after
//! every change, so a daemon that dies and returns continues from it), and the decision for
//! each ended generation. A session's policy is `never` (the default), `on-failure` (a non-zero
//! exit, a death by signal, a master that vanished) or `always` (any end). Restarts back off
//! from [`BACKOFF_FIRST`] doubling to [`BACKOFF_MAX`] while a session keeps failing; a session
//! restarted [`CRASH_LOOP_RESTARTS`] times within [`CRASH_LOOP_WINDOW`] is held down
//! (`failed: restarted 3 times in 5 minutes`) instead; and the whole fleet restarts at most one
//! session per [`FLEET_INTERVAL`].
//!
//! Invariants: each generation's end is judged exactly once (a generation at or below
//! `judged` changes nothing: the daemon may see an end twice, live and again after its own
//! restart); a restart is recorded as begun ([`Supervisor::begin`], persisted by the caller)
//! before the caller starts anything, so a daemon that dies mid-restart never starts the same
//! generation again; nothing restarts a session the operator stopped, one whose agent rejected
//! the conversation it was given, or one whose agent printed a rate-limit or login error — those
//! are held with their reason until the operator starts the session again. Pure: times are Unix
//! milliseconds given by the caller.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// 1 s: the first restart comes quickly (an agent that crashed once is usually fine again),
/// yet a command that exits at once does not spin.
pub const BACKOFF_FIRST: Duration = Duration::from_secs(1);

/// 5 min: the longest wait between restarts of a session that keeps failing, so one that
/// recovers (a network back, a disk freed) is back within minutes.
pub const BACKOFF_MAX: Duration = Duration::from_secs(300);

/// Restarts of one session within [`CRASH_LOOP_WINDOW`] after which it is held down: three
/// quick deaths mean the cause is not passing, and each restart of an agent costs tokens and
/// may repeat side effects.
pub const CRASH_LOOP_RESTARTS: usize = 3;

/// 5 min: the window of the crash-loop limit (agent-deck's watchdog uses the same).
pub const CRASH_LOOP_WINDOW: Duration = Duration::from_secs(300);

/// 1 min: across the whole fleet at most one restart per minute (agent-deck's watchdog), so a
/// shared cause (the provider down, a bad deploy) does not restart every agent at once.
pub const FLEET_INTERVAL: Duration = Duration::from_secs(60);

/// A generation that ran this long ended a streak of failures: its end starts the backoff over
/// from [`BACKOFF_FIRST`].
pub const STABLE_AFTER: Duration = CRASH_LOOP_WINDOW;

/// The supervisor's times and counts: the constants above, unless a test compresses them
/// (desk's failpoint builds only; see `desk_daemon::supervisor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub backoff_first: Duration,
    pub backoff_max: Duration,
    pub crash_loop_restarts: usize,
    pub crash_loop_window: Duration,
    pub fleet_interval: Duration,
    pub stable_after: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            backoff_first: BACKOFF_FIRST,
            backoff_max: BACKOFF_MAX,
            crash_loop_restarts: CRASH_LOOP_RESTARTS,
            crash_loop_window: CRASH_LOOP_WINDOW,
            fleet_interval: FLEET_INTERVAL,
            stable_after: STABLE_AFTER,
        }
    }
}

impl Limits {
    /// Every time divided by `factor` (at least 1 ms each); the counts stay.
    pub fn compressed(factor: u32) -> Limits {
        let d = Limits::default();
        let f = |t: Duration| (t / factor.max(1)).max(Duration::from_millis(1));
        Limits {
            backoff_first: f(d.backoff_first),
            backoff_max: f(d.backoff_max),
            crash_loop_restarts: d.crash_loop_restarts,
            crash_loop_window: f(d.crash_loop_window),
            fleet_interval: f(d.fleet_interval),
            stable_after: f(d.stable_after),
        }
    }
}

/// When a session is started again after it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RestartPolicy {
    /// Never (the operator restarts it).
    #[default]
    Never,
    /// After a non-zero exit, a death by signal, or a master that vanished.
    OnFailure,
    /// After any end, a clean exit included.
    Always,
}

impl RestartPolicy {
    pub const ALL: [RestartPolicy; 3] = [RestartPolicy::Never, RestartPolicy::OnFailure, RestartPolicy::Always];

    pub fn name(self) -> &'static str {
        match self {
            RestartPolicy::Never => "never",
            RestartPolicy::OnFailure => "on-failure",
            RestartPolicy::Always => "always",
        }
    }
}

impl std::fmt::Display for RestartPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for RestartPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<RestartPolicy, String> {
        RestartPolicy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("restart policy {s:?}; expected \"never\", \"on-failure\" or \"always\""))
    }
}

/// How a generation ended, as the desk package read it from the session's records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    pub generation: u32,
    /// When the generation started and ended (Unix ms; `ended_ms` is when the end was noticed
    /// for a master that vanished without a record).
    pub started_ms: u64,
    pub ended_ms: u64,
    pub how: EndedHow,
    pub cause: Cause,
}

/// The exit itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndedHow {
    Exited(i32),
    Signalled(i32),
    /// The master went away without recording an exit.
    Lost,
}

impl EndedHow {
    /// A clean exit (code 0): `on-failure` leaves it down.
    pub fn clean(self) -> bool {
        self == EndedHow::Exited(0)
    }
}

/// Why it ended, where that is known from evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// `desk kill`, `desk down` or `desk restart` stopped it (`by` names the command).
    Operator { by: String },
    /// It was started to resume a conversation and the agent refused the id (its own message).
    ResumeRejected { message: String },
    /// The agent printed a rate-limit or login error before it exited (its words).
    ProviderError { message: String },
    /// Nothing known: a crash, a clean exit, a signal from elsewhere.
    Unknown,
}

/// Why a session is held down rather than restarted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Hold {
    /// The operator stopped it.
    Stopped {
        by: String,
    },
    /// The crash-loop limit: `restarts` within `window_secs`.
    CrashLoop {
        restarts: usize,
        window_secs: u64,
    },
    ResumeRejected {
        message: String,
    },
    ProviderError {
        message: String,
    },
}

impl Hold {
    /// The health shown for a session held down: `failed: …`, or `stopped by …`.
    pub fn health(&self) -> String {
        match self {
            Hold::Stopped { by } => format!("stopped by {by}"),
            Hold::CrashLoop { restarts, window_secs } if window_secs % 60 == 0 => {
                format!("failed: restarted {restarts} times in {} minutes", window_secs / 60)
            }
            Hold::CrashLoop { restarts, window_secs } => {
                format!("failed: restarted {restarts} times in {window_secs} seconds")
            }
            Hold::ResumeRejected { message } => format!("failed: resume rejected: {message}"),
            Hold::ProviderError { message } => format!("failed: {message}"),
        }
    }

    /// Whether it is a failure the operator is told about (not their own stop).
    pub fn is_failure(&self) -> bool {
        !matches!(self, Hold::Stopped { .. })
    }
}

/// Where one supervised session stands.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Phase {
    /// Running, or ended with nothing to do.
    #[default]
    Idle,
    /// A restart of the ended generation `of` is due at `at_ms`.
    Waiting { of: u32, at_ms: u64 },
    /// A restart of generation `of` began at `since_ms` and has not been reported done.
    Starting { of: u32, since_ms: u64 },
    /// Held down; `since_ms` is when.
    Held { hold: Hold, since_ms: u64 },
}

/// One supervised session's durable state.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Supervised {
    pub policy: RestartPolicy,
    /// The highest generation whose end was judged.
    pub judged: u32,
    /// When restarts began, within the crash-loop window (older ones are dropped).
    pub restarts: Vec<u64>,
    /// Restarts in a row without a generation that ran [`STABLE_AFTER`].
    pub streak: u32,
    pub phase: Phase,
}

impl Supervised {
    /// The health to show while the session is not running, if supervision has something to
    /// say: `failed: …`, `stopped by …`, `restarting in 4 s`, `restarting`.
    pub fn health(&self, now_ms: u64) -> Option<String> {
        match &self.phase {
            Phase::Idle => None,
            Phase::Waiting { at_ms, .. } => {
                let secs = at_ms.saturating_sub(now_ms).div_ceil(1000);
                Some(if secs == 0 { "restarting".to_string() } else { format!("restarting in {secs} s") })
            }
            Phase::Starting { .. } => Some("restarting".to_string()),
            Phase::Held { hold, .. } => Some(hold.health()),
        }
    }
}

/// What the daemon must do after an end was judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing: the policy does not restart this end (or it was judged before).
    Nothing,
    /// A restart is due at `at_ms` (the fleet-wide interval may delay it further).
    Restart { at_ms: u64 },
    /// Held down; `notify` when the operator must be told (a failure, not their own stop).
    Held { hold: Hold, notify: bool },
}

/// The daemon's supervision state for the whole fleet.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Supervisor {
    pub sessions: BTreeMap<String, Supervised>,
    /// When the last restart anywhere in the fleet began.
    pub last_restart_ms: Option<u64>,
    /// The times and counts in force (not persisted: they are the build's).
    #[serde(skip)]
    pub limits: Limits,
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

impl Supervisor {
    /// Note a session's policy (from its launch record); a session with policy `never` and
    /// nothing held is forgotten.
    pub fn track(&mut self, session: &str, policy: RestartPolicy) {
        let entry = self.sessions.entry(session.to_string()).or_default();
        entry.policy = policy;
        if policy == RestartPolicy::Never && !matches!(entry.phase, Phase::Held { .. }) {
            self.sessions.remove(session);
        }
    }

    pub fn get(&self, session: &str) -> Option<&Supervised> {
        self.sessions.get(session)
    }

    /// A generation of the session is up. `by_supervisor`: the restart this supervisor began
    /// (its launch says so); otherwise the operator started it (`desk up`, `restart`, `new`),
    /// which ends any hold and the failure count: they chose to run it again.
    pub fn on_up(&mut self, session: &str, generation: u32, by_supervisor: bool) {
        let Some(s) = self.sessions.get_mut(session) else { return };
        let ours = matches!(s.phase, Phase::Starting { of, .. } if generation > of) && by_supervisor;
        if !ours {
            s.restarts.clear();
            s.streak = 0;
        }
        // Whatever ended before this generation was judged, or will never be.
        s.judged = s.judged.max(generation.saturating_sub(1));
        s.phase = Phase::Idle;
    }

    /// Judge a generation's end.
    pub fn on_end(&mut self, session: &str, policy: RestartPolicy, ended: &Ended, now_ms: u64) -> Decision {
        let s = self.sessions.entry(session.to_string()).or_default();
        s.policy = policy;
        if ended.generation <= s.judged {
            return Decision::Nothing;
        }
        s.judged = ended.generation;
        let hold = match &ended.cause {
            Cause::Operator { by } => Some(Hold::Stopped { by: by.clone() }),
            Cause::ResumeRejected { message } => Some(Hold::ResumeRejected { message: message.clone() }),
            Cause::ProviderError { message } => Some(Hold::ProviderError { message: message.clone() }),
            Cause::Unknown => None,
        };
        if let Some(hold) = hold {
            // Shown even for sessions whose policy never restarts: the reason it is down.
            let notify = hold.is_failure();
            s.phase = Phase::Held { hold: hold.clone(), since_ms: now_ms };
            return Decision::Held { hold, notify };
        }
        let restart = match policy {
            RestartPolicy::Never => false,
            RestartPolicy::OnFailure => !ended.how.clean(),
            RestartPolicy::Always => true,
        };
        if !restart {
            s.phase = Phase::Idle;
            return Decision::Nothing;
        }
        if ended.ended_ms.saturating_sub(ended.started_ms) >= ms(self.limits.stable_after) {
            s.streak = 0;
        }
        Self::schedule(s, &self.limits, ended.generation, now_ms)
    }

    /// The restart of generation `of` failed to start anything: it counts as an attempt, and
    /// the next one backs off further (or the crash-loop limit holds the session).
    pub fn start_failed(&mut self, session: &str, of: u32, now_ms: u64) -> Decision {
        let limits = self.limits;
        let Some(s) = self.sessions.get_mut(session) else { return Decision::Nothing };
        Self::schedule(s, &limits, of, now_ms)
    }

    fn schedule(s: &mut Supervised, limits: &Limits, of: u32, now_ms: u64) -> Decision {
        let window_start = now_ms.saturating_sub(ms(limits.crash_loop_window));
        s.restarts.retain(|t| *t >= window_start);
        if s.restarts.len() >= limits.crash_loop_restarts {
            let hold = Hold::CrashLoop { restarts: s.restarts.len(), window_secs: limits.crash_loop_window.as_secs() };
            s.phase = Phase::Held { hold: hold.clone(), since_ms: now_ms };
            return Decision::Held { hold, notify: true };
        }
        // The streak counts the restarts begun since the last stable run: the first waits
        // `backoff_first`.
        let backoff = crate::time::Backoff::after(limits.backoff_first, limits.backoff_max, s.streak.saturating_add(1));
        let delay = ms(backoff.wait());
        let at_ms = now_ms + delay;
        s.phase = Phase::Waiting { of, at_ms };
        Decision::Restart { at_ms }
    }

    /// The restart due first, if any is due at `now_ms` and the fleet-wide interval allows one:
    /// `(session, generation it replaces)`.
    pub fn due(&self, now_ms: u64) -> Option<(String, u32)> {
        if self.last_restart_ms.is_some_and(|last| now_ms < last + ms(self.limits.fleet_interval)) {
            return None;
        }
        self.sessions
            .iter()
            .filter_map(|(name, s)| match s.phase {
                Phase::Waiting { of, at_ms } if at_ms <= now_ms => Some((at_ms, name, of)),
                _ => None,
            })
            .min()
            .map(|(_, name, of)| (name.clone(), of))
    }

    /// When [`Supervisor::due`] may next return something (`None`: nothing is waiting).
    pub fn wake_at(&self) -> Option<u64> {
        let first = self
            .sessions
            .values()
            .filter_map(|s| match s.phase {
                Phase::Waiting { at_ms, .. } => Some(at_ms),
                _ => None,
            })
            .min()?;
        let slot = self.last_restart_ms.map_or(0, |last| last + ms(self.limits.fleet_interval));
        Some(first.max(slot))
    }

    /// A due restart begins now (the caller persists this state before starting anything).
    pub fn begin(&mut self, session: &str, now_ms: u64) {
        let Some(s) = self.sessions.get_mut(session) else { return };
        let Phase::Waiting { of, .. } = s.phase else { return };
        s.phase = Phase::Starting { of, since_ms: now_ms };
        s.restarts.push(now_ms);
        s.streak = s.streak.saturating_add(1);
        self.last_restart_ms = Some(now_ms);
    }

    /// After a daemon restart: a restart found begun (`Starting`) is done if the session's
    /// generation moved past the one it replaced (whether the new one runs or ended since is
    /// judged like any generation); otherwise it never got to start anything and is due again.
    pub fn recover(&mut self, session: &str, latest_generation: u32, now_ms: u64) {
        let Some(s) = self.sessions.get_mut(session) else { return };
        if let Phase::Starting { of, .. } = s.phase {
            s.phase = if latest_generation > of { Phase::Idle } else { Phase::Waiting { of, at_ms: now_ms } };
        }
    }

    /// The operator removed the session (`desk rm`): forget it.
    pub fn forget(&mut self, session: &str) {
        self.sessions.remove(session);
    }
}

/// Patterns of a rate-limit or login failure in what an agent printed last, lowercase. Kept
/// broad but specific to the cause: a crash never contains them by chance.
const PROVIDER_ERROR_PATTERNS: &[&str] = &[
    "rate limit",
    "rate_limit",
    "ratelimit",
    "too many requests",
    "usage limit",
    "quota exceeded",
    "exceeded your current quota",
    "insufficient_quota",
    "401 unauthorized",
    "403 forbidden",
    "invalid api key",
    "invalid x-api-key",
    "authentication_error",
    "authentication failed",
    "not logged in",
    "please run /login",
    "please log in",
    "oauth token has expired",
    "credit balance is too low",
];

/// Lines from the bottom of the last screen that are looked at: an agent's dying words sit at
/// the bottom; an old error higher up was already handled by the agent.
pub const PROVIDER_ERROR_LINES: usize = 12;

/// If the agent's last screen ends with a rate-limit or login error, that line (trimmed; at
/// most 200 characters), which holds the session down rather than restarting it into the same
/// wall.
pub fn provider_error(last_screen: &[String]) -> Option<String> {
    let start = last_screen.len().saturating_sub(PROVIDER_ERROR_LINES);
    last_screen[start..].iter().rev().find_map(|line| {
        let lower = line.to_lowercase();
        PROVIDER_ERROR_PATTERNS.iter().any(|p| lower.contains(p)).then(|| {
            let t = line.trim();
            t.chars().take(200).collect()
        })
    })
}

#[cfg(test)]
mod tests;
