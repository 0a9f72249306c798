//! Channels: durable conversations among agents and people, as pure data and decisions.
//!
//! Owns the channel's vocabulary — names ([`ChannelName`]), members and roles ([`Member`],
//! [`Role`], [`Roster`]), messages ([`Message`]) — and, in submodules, the markdown file format
//! ([`format`](mod@format): whole records with a length and an end mark, so a torn tail is detected and never
//! parsed), mentions ([`mention`]: `@name` outside code spans and fences), routing ([`route`]:
//! who gets a message), the text an agent receives ([`prompt`]), supervisor check-ins
//! ([`checkin`]: when one is due) and where ingest resumes in a file ([`cursor`]: a file
//! edited under its cursor is re-read from its start). Invariants: a channel name
//! is `[a-z][a-z0-9-]{0,63}`; a message body is valid UTF-8 of at most [`MAX_BODY`] bytes; the
//! delivery item of one (message, member) pair has one id, always the same
//! ([`delivery_item_id`]), which is what makes a pass cut by a crash idempotent (a file
//! re-read after a hand edit is checked against the ingest ledger instead: the delivery store
//! sweeps delivered items). No I/O and no
//! clock: the daemon's channel store (`desk_daemon::channel`) and its loop read files and time and
//! pass them in. May not depend on the shell crates or on anything that makes a syscall.

pub mod checkin;
pub mod cursor;
pub mod format;
pub mod mention;
pub mod prompt;
pub mod route;

use serde::{Deserialize, Serialize};

use crate::delivery::item::ItemId;

/// 16 KiB: a message is a turn of conversation, not a file transfer; longer text belongs in a
/// file the message names. Bodies above [`prompt::INLINE_BODY`] are not pasted whole: the
/// prompt says where to read them, so a 20-message digest stays a readable size.
pub const MAX_BODY: usize = 16 * 1024;

pub use desk_wire::names::{ChannelName, ChannelNameError, MAX_CHANNEL_NAME_LEN as MAX_NAME_LEN};

/// The operator: the person at the desk. Always a member of every channel (implicitly), the
/// author of a post made outside a session without `--as`, and what `@human` reaches.
pub const OPERATOR: &str = "human";

/// The author of check-in records.
pub const CHECKIN_AUTHOR: &str = "desk";

/// `@channel`: every agent member, explicitly.
pub const EVERYONE: &str = "channel";

/// Names no member may take: they are mention keywords.
pub const RESERVED_NAMES: [&str; 3] = [OPERATOR, EVERYONE, CHECKIN_AUTHOR];

/// Whether `name` can be a member's name: a session name (`[A-Za-z0-9][A-Za-z0-9._-]{0,63}`),
/// the same rule desk applies to session names, so a session is always addressable.
pub fn valid_member_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= MAX_NAME_LEN
        && chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// What a member is in a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// An agent session that does the work.
    Worker,
    /// An agent session that receives every message of the channel (and, when configured,
    /// check-ins about idle workers).
    Supervisor,
    /// A person: never prompted; mentions of them notify the operator.
    Human,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Worker => "worker",
            Role::Supervisor => "supervisor",
            Role::Human => "human",
        }
    }

    /// Whether members with this role are agent sessions (the ones that receive prompts).
    pub fn is_agent(self) -> bool {
        !matches!(self, Role::Human)
    }

    pub fn parse(text: &str) -> Option<Role> {
        [Role::Worker, Role::Supervisor, Role::Human].into_iter().find(|r| r.as_str() == text)
    }
}

/// One member of a channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub name: String,
    pub role: Role,
    /// When it joined (Unix ms): it is routed only messages posted after this.
    pub added_ms: u64,
}

/// A channel's description and members: the members file (`members.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Roster {
    pub version: u32,
    pub name: ChannelName,
    #[serde(default)]
    pub goal: String,
    pub created_ms: u64,
    #[serde(default)]
    pub members: Vec<Member>,
    /// Supervisor check-ins: when every worker has been idle this many seconds with messages
    /// no worker has answered, the supervisors get a check-in prompt. Absent: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkin_after_s: Option<u64>,
}

impl Roster {
    pub fn new(name: ChannelName, goal: String, created_ms: u64) -> Roster {
        Roster { version: 1, name, goal, created_ms, members: Vec::new(), checkin_after_s: None }
    }

    pub fn member(&self, name: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.name == name)
    }

    /// The members that receive the channel's messages: its agent members (workers and
    /// supervisors), in roster order. A message not yet delivered to anyone else — a member
    /// removed, or made a person, since it was routed — is withdrawn.
    pub fn receivers(&self) -> Vec<String> {
        self.members.iter().filter(|m| m.role.is_agent()).map(|m| m.name.clone()).collect()
    }

    /// Whether `name` may post: a member, or the operator.
    pub fn may_post(&self, name: &str) -> bool {
        name == OPERATOR || self.member(name).is_some()
    }
}

/// What a record in a conversation file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A message someone posted.
    #[default]
    Post,
    /// The author joined the channel (body: the role): routed to the author alone, as the
    /// onboarding prompt.
    Joined,
    /// desk's check-in (author [`CHECKIN_AUTHOR`]): every worker idle with unanswered
    /// messages; routed to the supervisors.
    Checkin,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Post => "post",
            Kind::Joined => "joined",
            Kind::Checkin => "checkin",
        }
    }
}

/// One message of a channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Globally unique and time-ordered: the delivery item-id scheme.
    pub id: ItemId,
    pub author: String,
    pub ts_ms: u64,
    /// The root message this one replies to (threads are one level deep).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<ItemId>,
    #[serde(default)]
    pub kind: Kind,
    pub body: String,
}

/// Why a message cannot be posted as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    #[error("the message is empty")]
    Empty,
    #[error(
        "the message is {0} bytes; a channel message holds at most {MAX_BODY} bytes (16 KiB). Put long text in a file and post its path"
    )]
    TooLong(usize),
}

/// Check a body before it is posted: not blank, at most [`MAX_BODY`] bytes. Trailing
/// whitespace (a file's last newline) is dropped.
pub fn check_body(body: &str) -> Result<String, BodyError> {
    let body = body.trim_end();
    if body.trim().is_empty() {
        return Err(BodyError::Empty);
    }
    if body.len() > MAX_BODY {
        return Err(BodyError::TooLong(body.len()));
    }
    Ok(body.to_string())
}

/// The one delivery item id of a (message, member) pair: the message's time and 80 bits of a
/// hash of the message id and the member name. Ingest that is cut by a crash and run again
/// makes the same ids and finds the items already there, so no pair becomes two items.
pub fn delivery_item_id(message: &ItemId, ts_ms: u64, member: &str) -> ItemId {
    let key = format!("{message}\u{0}{member}");
    let a = fmix64(fnv1a(0xcbf2_9ce4_8422_2325, key.as_bytes()));
    let b = fmix64(fnv1a(0x8422_2325_cbf2_9ce4, key.as_bytes()));
    let mut random = [0u8; 10];
    random[..8].copy_from_slice(&a.to_be_bytes());
    random[8..].copy_from_slice(&b.to_be_bytes()[..2]);
    ItemId::new(ts_ms, random)
}

/// MurmurHash3's 64-bit finaliser: FNV-1a changes mostly low bits for a change in the last
/// bytes (member names that differ in their last character), and the finaliser spreads it over
/// all 64, so the 80 bits taken are as good as random.
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// FNV-1a 64 with a chosen offset basis: stable across builds and machines (unlike std's
/// hasher), which the item ids above need.
fn fnv1a(basis: u64, bytes: &[u8]) -> u64 {
    let mut hash = basis;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_names_follow_the_rule() {
        for ok in ["a", "build", "api-v2", "x0-", &format!("a{}", "b".repeat(63))] {
            assert!(ChannelName::parse(ok).is_ok(), "{ok}");
        }
        assert_eq!(ChannelName::parse(""), Err(ChannelNameError::Empty));
        assert_eq!(ChannelName::parse("Build"), Err(ChannelNameError::BadFirst('B')));
        assert_eq!(ChannelName::parse("1st"), Err(ChannelNameError::BadFirst('1')));
        assert_eq!(ChannelName::parse("-x"), Err(ChannelNameError::BadFirst('-')));
        assert_eq!(ChannelName::parse("a_b"), Err(ChannelNameError::BadChar('_')));
        assert_eq!(ChannelName::parse("a/b"), Err(ChannelNameError::BadChar('/')));
        assert_eq!(ChannelName::parse("a.b"), Err(ChannelNameError::BadChar('.')));
        assert_eq!(ChannelName::parse(&"a".repeat(65)), Err(ChannelNameError::TooLong(65)));
    }

    #[test]
    fn member_names_are_session_names() {
        assert!(valid_member_name("alice") && valid_member_name("w.1_a-b") && valid_member_name("9"));
        assert!(!valid_member_name("") && !valid_member_name("-a") && !valid_member_name("a b"));
        assert!(!valid_member_name("a/b") && !valid_member_name(&"a".repeat(65)));
    }

    #[test]
    fn a_body_over_16_kib_is_refused_with_its_size() {
        assert_eq!(check_body("hi\n\n"), Ok("hi".into()));
        assert_eq!(check_body(" \n\t"), Err(BodyError::Empty));
        assert!(check_body(&"x".repeat(MAX_BODY)).is_ok());
        let err = check_body(&"x".repeat(MAX_BODY + 1)).unwrap_err();
        assert_eq!(err, BodyError::TooLong(MAX_BODY + 1));
        assert!(err.to_string().contains("at most 16384 bytes"), "{err}");
    }

    #[test]
    fn a_pair_always_has_the_same_item_id_and_pairs_differ() {
        let m = ItemId::sequential(1_000);
        let n = ItemId::sequential(1_000);
        assert_eq!(delivery_item_id(&m, 1_000, "a"), delivery_item_id(&m, 1_000, "a"));
        assert_ne!(delivery_item_id(&m, 1_000, "a"), delivery_item_id(&m, 1_000, "b"));
        assert_ne!(delivery_item_id(&m, 1_000, "a"), delivery_item_id(&n, 1_000, "a"));
        // The id sorts with the message's time and parses as an item id.
        let id = delivery_item_id(&m, 1_000, "a");
        assert_eq!(ItemId::parse(id.as_str()), Some(id.clone()));
        assert!(id < delivery_item_id(&m, 2_000, "a"));
        // Names that differ in their last character give ids that differ throughout.
        let (x, y) = (delivery_item_id(&m, 1_000, "s17"), delivery_item_id(&m, 1_000, "s18"));
        let same = x.as_str().bytes().zip(y.as_str().bytes()).skip(10).filter(|(p, q)| p == q).count();
        assert!(same < 8, "{x} {y}");
    }
}
