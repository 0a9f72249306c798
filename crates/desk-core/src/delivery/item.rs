//! Delivery items: one prompt for one session, and the record of what happened to it.
//!
//! Owns the item's data (id, target, text, when, state, attempts, evidence timeline) and the
//! vocabulary of its states. Invariants: ids are unique and never reused (time-ordered, with 80
//! random bits); an item's state only moves along `queued → sending → delivered | stuck |
//! dropped`, with `stuck → sending` (an operator's force), `queued | stuck → dropped`,
//! `delivered → stuck` (a prompt the agent had queued mid-turn when its session ended before it
//! took it) and `stuck → delivered` (a prompt cut off after its paste whose UserPromptSubmit
//! hook came after all) as the only other moves; the evidence timeline is append-only and
//! bounded.

use serde::{Deserialize, Serialize};

/// Evidence entries kept per item: the newest are kept when more arrive.
pub const MAX_EVIDENCE: usize = 64;

pub use desk_wire::names::ItemId;

/// When an item may be delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum When {
    /// As soon as the session is ready (agents buffer input typed mid-turn).
    #[default]
    Now,
    /// Only while the agent is idle.
    Idle,
}

/// Why an item is stuck.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StuckClass {
    /// The paste never showed up in the input area.
    PasteMissing,
    /// The text sits in the input area but was not submitted.
    SubmitStuck,
    /// The screen could not be read to tell.
    Unobservable,
    /// Delivery was cut off (daemon crash, session exit) at a point the evidence cannot settle.
    Interrupted,
    /// The prompt went (or sits) in one message with text someone else typed: not delivered as
    /// its own message. Never re-pasted: the agent may already have it.
    Merged,
}

impl StuckClass {
    pub fn as_str(self) -> &'static str {
        match self {
            StuckClass::PasteMissing => "paste-missing",
            StuckClass::SubmitStuck => "submit-stuck",
            StuckClass::Unobservable => "unobservable",
            StuckClass::Interrupted => "interrupted",
            StuckClass::Merged => "merged",
        }
    }
}

/// An item's durable state (also its file extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Queued,
    Sending,
    Delivered,
    Stuck,
    Dropped,
}

impl State {
    pub const ALL: [State; 5] = [State::Queued, State::Sending, State::Delivered, State::Stuck, State::Dropped];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Queued => "queued",
            State::Sending => "sending",
            State::Delivered => "delivered",
            State::Stuck => "stuck",
            State::Dropped => "dropped",
        }
    }

    pub fn from_ext(ext: &str) -> Option<State> {
        State::ALL.into_iter().find(|s| s.as_str() == ext)
    }

    /// Whether moving from `self` to `to` is a transition the state machine allows.
    pub fn can_become(self, to: State) -> bool {
        use State::*;
        matches!(
            (self, to),
            (Queued, Sending)
                | (Queued, Dropped)
                | (Sending, Delivered)
                | (Sending, Stuck)
                | (Sending, Queued)
                | (Stuck, Sending)
                | (Stuck, Dropped)
                // Only an item the agent queued mid-turn, when the agent ended before taking it.
                | (Delivered, Stuck)
                // Only on the agent's own report (its hook) of a prompt cut off after its paste.
                | (Stuck, Delivered)
        )
    }

    pub fn is_final(self) -> bool {
        matches!(self, State::Delivered | State::Dropped)
    }
}

/// One entry of an item's evidence timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Note {
    pub at_ms: u64,
    /// Short machine-readable kind: `queued`, `claimed`, `baseline`, `pasted`, `echoed`,
    /// `enter`, `submitted`, `stuck`, `hold`, `forced`, `dropped`, `retargeted`, ...
    pub kind: String,
    /// What was seen, for a human.
    pub detail: String,
}

/// One prompt for one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    pub id: ItemId,
    pub session: String,
    /// The session generation this item targets (`None`: whichever runs when it is sent).
    pub generation: Option<u32>,
    pub text: String,
    #[serde(default)]
    pub when: When,
    /// Who sent it (free text; `desk send --from`).
    #[serde(default)]
    pub from: String,
    pub created_ms: u64,
    pub state: State,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stuck: Option<StuckClass>,
    /// Delivery attempts started (each paste or forced Enter).
    #[serde(default)]
    pub attempts: u32,
    /// Items delivered together with this one in one digest prompt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub digest_with: Vec<ItemId>,
    #[serde(default)]
    pub evidence: Vec<Note>,
    /// When the item reached its current state.
    pub state_since_ms: u64,
    /// Delivered on other evidence, its UserPromptSubmit hook still to come: the digest of the
    /// submitted prompt (kept on disk, so that after a restart that hook is still recognised
    /// as this item's, not as evidence for an identical prompt in flight). On a stuck
    /// (interrupted) item whose paste is on record: the digest of the prompt typed, whose hook,
    /// if it comes, settles it delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_owed: Option<String>,
    /// It may sit in the agent's own queue (the text left the input box while the agent worked,
    /// or had earlier prompts queued): cleared when the agent is seen taking it (its hook, or a
    /// turn it started after going idle); if the session ends first, it is stuck/interrupted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub queued_by_agent: bool,
    /// Delivered as this many submissions, not as one prompt: its lines were typed into a
    /// program that had not switched bracketed paste on, so each newline was an Enter and each
    /// line went in on its own. Absent for a prompt that went in whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submissions: Option<u32>,
    /// The channel whose message (or onboarding) this item carries: channel ingest's items
    /// only. While queued, it is withdrawn if its session stops being an agent member of the
    /// channel ([`Input::ChannelMembers`](crate::delivery::engine::Input::ChannelMembers)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
}

impl Item {
    pub fn new(
        id: ItemId,
        session: String,
        generation: Option<u32>,
        text: String,
        when: When,
        from: String,
        now_ms: u64,
    ) -> Item {
        let mut item = Item {
            id,
            session,
            generation,
            text,
            when,
            from,
            created_ms: now_ms,
            state: State::Queued,
            stuck: None,
            attempts: 0,
            digest_with: Vec::new(),
            evidence: Vec::new(),
            hook_owed: None,
            queued_by_agent: false,
            submissions: None,
            channel: None,
            state_since_ms: now_ms,
        };
        item.note(now_ms, "queued", "accepted");
        item
    }

    /// Append to the evidence timeline, keeping it bounded.
    pub fn note(&mut self, at_ms: u64, kind: &str, detail: impl Into<String>) {
        if self.evidence.len() >= MAX_EVIDENCE {
            self.evidence.remove(1);
        }
        self.evidence.push(Note { at_ms, kind: kind.to_string(), detail: detail.into() });
    }

    /// The first non-empty line, cut for listings.
    pub fn preview(&self, max: usize) -> String {
        let line = self.text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        desk_term::text::ellipsize(line, max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_documented_transitions_are_allowed() {
        use State::*;
        assert!(Queued.can_become(Sending) && Sending.can_become(Delivered) && Sending.can_become(Stuck));
        assert!(Stuck.can_become(Sending) && Stuck.can_become(Dropped) && Queued.can_become(Dropped));
        assert!(!Delivered.can_become(Sending) && !Dropped.can_become(Queued) && !Stuck.can_become(Queued));
        assert!(!Queued.can_become(Delivered) && !Delivered.can_become(Queued) && !Dropped.can_become(Stuck));
        // The one move out of delivered: a prompt the agent queued and never took.
        assert!(Delivered.can_become(Stuck));
        // And back: the agent's hook for a prompt cut off after its paste.
        assert!(Stuck.can_become(Delivered));
    }

    #[test]
    fn evidence_stays_bounded_and_keeps_the_first_entry() {
        let mut item = Item::new(ItemId::sequential(0), "s".into(), Some(1), "hi".into(), When::Now, "op".into(), 0);
        for i in 0..200 {
            item.note(i, "hold", "x");
        }
        assert_eq!(item.evidence.len(), MAX_EVIDENCE);
        assert_eq!(item.evidence[0].kind, "queued");
        assert_eq!(item.evidence.last().unwrap().at_ms, 199);
    }
}
