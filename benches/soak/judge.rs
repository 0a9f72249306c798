//! The soak's judgement of each item: its state in desk against where and how often the agents'
//! prompt logs (the ground truth: what each agent actually submitted) hold its unique token.
//! Only two outcomes pass: delivered and submitted once by its own session's agent, or stuck and
//! never submitted (then the force `desk stuck` advises must deliver it once).

use std::collections::BTreeMap;
use std::path::PathBuf;

/// Every submission that carries a token, by token: (session index, log seq, the prompt).
pub(crate) type Submitted = BTreeMap<String, Vec<(usize, u64, String)>>;

/// Read every session's prompt log (by session index) and index its submissions by token
/// (`tok` + 6 digits + `q`; a digest carries several).
pub(crate) fn submitted(logs: &[PathBuf]) -> Submitted {
    let mut submitted = Submitted::new();
    for (i, log) in logs.iter().enumerate() {
        for rec in desk_demo_agent::prompt_log::read_prompt_log(log).unwrap_or_default() {
            let mut rest = rec.prompt.as_str();
            while let Some(at) = rest.find("tok") {
                let cand = &rest[at..];
                if cand.len() >= 10 && cand.as_bytes()[3..9].iter().all(u8::is_ascii_digit) && &cand[9..10] == "q" {
                    submitted.entry(cand[..10].to_string()).or_default().push((i, rec.seq, rec.prompt.clone()));
                }
                rest = &rest[at + 3..];
            }
        }
    }
    submitted
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Outcome {
    /// Delivered, and submitted once, by its own session's agent.
    Once,
    /// Stuck, and never submitted: honest, and a force delivers it.
    Stuck,
    /// Stuck, yet its agent submitted it: a force would send it twice.
    StuckButTaken,
    /// Delivered but never submitted, vanished, or dropped (the soak never drops).
    Lost,
    /// Submitted twice or more.
    Duplicated,
    /// Submitted by another session's agent.
    WrongSession,
    /// Still queued or sending, or in the agent's own queue: a failure once everything has
    /// settled and every stuck item was forced (before that, a queue may wait for the force of a
    /// stuck item's unsent paste, and an agent for the end of its turns).
    Open,
}

impl Outcome {
    pub(crate) const ALL: [Outcome; 7] = [
        Outcome::Once,
        Outcome::Stuck,
        Outcome::StuckButTaken,
        Outcome::Lost,
        Outcome::Duplicated,
        Outcome::WrongSession,
        Outcome::Open,
    ];

    pub(crate) fn passes(self) -> bool {
        matches!(self, Outcome::Once | Outcome::Stuck)
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Outcome::Once => "delivered once",
            Outcome::Stuck => "stuck, not submitted",
            Outcome::StuckButTaken => "STUCK BUT SUBMITTED",
            Outcome::Lost => "LOST",
            Outcome::Duplicated => "DUPLICATED",
            Outcome::WrongSession => "WRONG SESSION",
            Outcome::Open => "STILL QUEUED, SENDING OR IN THE AGENT'S QUEUE",
        }
    }
}

/// One item's outcome: `session` is the index of the session it was sent to, `state` its state
/// in desk (`vanished` when desk does not know it), `in_agent_queue` whether desk says it waits
/// in the agent's own queue (delivered, `queued_by_agent`): not yet submitted, that is still
/// open (an agent with 5 s turns may take minutes to work off its queue), not lost.
pub(crate) fn judge(session: usize, token: &str, state: &str, in_agent_queue: bool, submitted: &Submitted) -> Outcome {
    let hits = submitted.get(token).map(Vec::as_slice).unwrap_or_default();
    if hits.iter().any(|(s, _, _)| *s != session) {
        return Outcome::WrongSession;
    }
    match (state, hits.len()) {
        (_, n) if n >= 2 => Outcome::Duplicated,
        ("delivered", 1) => Outcome::Once,
        ("delivered", 0) if in_agent_queue => Outcome::Open,
        ("delivered" | "vanished", _) => Outcome::Lost,
        ("stuck", 0) => Outcome::Stuck,
        ("stuck", _) => Outcome::StuckButTaken,
        // The soak never drops an item.
        ("dropped", _) => Outcome::Lost,
        _ => Outcome::Open,
    }
}
