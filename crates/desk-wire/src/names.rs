//! The names that cross every boundary: an item's id, a session's name, a channel's name.
//!
//! Owns the three validated name types every process speaks ([`ItemId`], [`SessionName`],
//! [`ChannelName`]) and their grammars. They are defined once, here, so that the CLI, the
//! daemon, the masters and the pure cores pass the same type over the control socket, in
//! records and in events, and nobody parses a `String` back on the other side. Invariants: a
//! value of each type has passed its grammar (deserialising one checks it too, so a bad name on
//! the wire or on disk is an error, never a silently odd value); a session name or a channel
//! name is safe to put in a path. Pure: no I/O, no clock (an id's time and randomness are the
//! caller's).

use serde::{Deserialize, Serialize};
use std::fmt;

// ----- item ids -----

/// A unique, time-ordered item id: 48 bits of Unix milliseconds and 80 random bits, in
/// Crockford base32 (26 characters), so ids sort by creation time and never collide.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ItemId(String);

const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// Length of an item id, in characters.
pub const ITEM_ID_LEN: usize = 26;

impl ItemId {
    /// The id for Unix time `now_ms` and ten random bytes (the caller draws them: this crate
    /// makes no syscalls). Ids sort by time; the random part keeps ids drawn in the same
    /// millisecond apart.
    pub fn new(now_ms: u64, random: [u8; 10]) -> ItemId {
        let mut value: u128 = (now_ms as u128 & 0xffff_ffff_ffff) << 80;
        for (i, b) in random.iter().enumerate() {
            value |= (*b as u128) << (8 * (9 - i));
        }
        let mut text = [0u8; ITEM_ID_LEN];
        for (i, c) in text.iter_mut().enumerate() {
            let shift = 5 * (25 - i);
            *c = CROCKFORD[((value >> shift) & 31) as usize];
        }
        ItemId(String::from_utf8_lossy(&text).into_owned())
    }

    /// An id for `now_ms` whose "random" part is a process-wide counter: unique within this
    /// process, predictable across processes. For tests and tools, never for stored items.
    pub fn sequential(now_ms: u64) -> ItemId {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut random = [0u8; 10];
        random[2..].copy_from_slice(&n.to_be_bytes());
        ItemId::new(now_ms, random)
    }

    /// Parse an id given by an operator (case-insensitive).
    pub fn parse(text: &str) -> Option<ItemId> {
        let upper = text.trim().to_ascii_uppercase();
        (upper.len() == ITEM_ID_LEN && upper.bytes().all(|b| CROCKFORD.contains(&b)) && upper.as_bytes()[0] <= b'7')
            .then_some(ItemId(upper))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ItemId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A string that is not an item id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an item id")]
pub struct NotAnItemId(pub String);

impl TryFrom<String> for ItemId {
    type Error = NotAnItemId;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        ItemId::parse(&s).ok_or(NotAnItemId(s))
    }
}

impl From<ItemId> for String {
    fn from(id: ItemId) -> String {
        id.0
    }
}

// ----- session names -----

/// Longest session name: long enough for descriptive names, short enough that the socket path
/// stays well inside the 108-byte `sun_path` under usual runtime directories.
pub const MAX_NAME_LEN: usize = 64;

/// Why a string is not a session name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("a session name cannot be empty")]
    Empty,
    #[error("a session name has at most {MAX_NAME_LEN} characters (this one has {0})")]
    TooLong(usize),
    #[error("a session name must start with a letter or digit, not {0:?}")]
    BadFirst(char),
    #[error("a session name may contain only letters, digits, '.', '_' and '-', not {0:?}")]
    BadChar(char),
}

/// Check a session name against the grammar.
pub fn check_name(name: &str) -> Result<(), NameError> {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return Err(NameError::Empty);
    };
    if name.len() > MAX_NAME_LEN {
        return Err(NameError::TooLong(name.len()));
    }
    if !first.is_ascii_alphanumeric() {
        return Err(NameError::BadFirst(first));
    }
    if let Some(bad) = chars.find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))) {
        return Err(NameError::BadChar(bad));
    }
    Ok(())
}

/// A session name: `[A-Za-z0-9][A-Za-z0-9._-]{0,63}`. Only such names become paths. A plain
/// local name: whatever addresses a session elsewhere (a host) is not part of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionName(String);

impl SessionName {
    pub fn parse(name: &str) -> Result<SessionName, NameError> {
        check_name(name)?;
        Ok(SessionName(name.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for SessionName {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SessionName::parse(s)
    }
}

impl TryFrom<String> for SessionName {
    type Error = NameError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        check_name(&s)?;
        Ok(SessionName(s))
    }
}

impl From<SessionName> for String {
    fn from(n: SessionName) -> String {
        n.0
    }
}

// ----- channel names -----

/// Longest channel name: the same bound as a session name, so a channel directory name stays
/// short beside the state directory's path.
pub const MAX_CHANNEL_NAME_LEN: usize = 64;

/// A channel name: `[a-z][a-z0-9-]{0,63}`. Only such names become paths.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ChannelName(String);

/// Why a channel name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelNameError {
    #[error("a channel name cannot be empty")]
    Empty,
    #[error("a channel name has at most {MAX_CHANNEL_NAME_LEN} characters (this one has {0})")]
    TooLong(usize),
    #[error("a channel name must start with a lowercase letter (a-z), not {0:?}")]
    BadFirst(char),
    #[error("a channel name may contain only lowercase letters, digits and '-', not {0:?}")]
    BadChar(char),
}

impl ChannelName {
    pub fn parse(name: &str) -> Result<ChannelName, ChannelNameError> {
        let mut chars = name.chars();
        let Some(first) = chars.next() else { return Err(ChannelNameError::Empty) };
        if name.len() > MAX_CHANNEL_NAME_LEN {
            return Err(ChannelNameError::TooLong(name.chars().count()));
        }
        if !first.is_ascii_lowercase() {
            return Err(ChannelNameError::BadFirst(first));
        }
        if let Some(bad) = chars.find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')) {
            return Err(ChannelNameError::BadChar(bad));
        }
        Ok(ChannelName(name.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ChannelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for ChannelName {
    type Error = ChannelNameError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        ChannelName::parse(&s)
    }
}

impl From<ChannelName> for String {
    fn from(n: ChannelName) -> String {
        n.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_sorted_by_time_and_parse_back() {
        let a = ItemId::sequential(1_000);
        let b = ItemId::sequential(1_000);
        let c = ItemId::sequential(2_000);
        assert_ne!(a, b);
        assert!(a < c && b < c);
        assert_eq!(a.as_str().len(), ITEM_ID_LEN);
        assert_eq!(ItemId::parse(&a.as_str().to_lowercase()), Some(a.clone()));
        assert_eq!(ItemId::parse("not-an-id"), None);
        assert_eq!(ItemId::parse("I0000000000000000000000000"), None);
    }

    #[test]
    fn names_follow_the_grammar() {
        assert_eq!(check_name("api.v2_x-1"), Ok(()));
        assert_eq!(check_name(""), Err(NameError::Empty));
        assert_eq!(check_name("-x"), Err(NameError::BadFirst('-')));
        assert_eq!(check_name("a/b"), Err(NameError::BadChar('/')));
        assert_eq!(check_name(&"a".repeat(65)), Err(NameError::TooLong(65)));
    }

    #[test]
    fn every_name_is_checked_when_it_is_read_from_the_wire() {
        let id = ItemId::sequential(5);
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{id}\""));
        assert_eq!(serde_json::from_str::<ItemId>(&json).unwrap(), id);
        let bad = serde_json::from_str::<ItemId>("\"xyz\"").unwrap_err().to_string();
        assert!(bad.contains("\"xyz\" is not an item id"), "{bad}");
        assert_eq!(serde_json::from_str::<SessionName>("\"api\"").unwrap().as_str(), "api");
        let bad = serde_json::from_str::<SessionName>("\"../etc\"").unwrap_err().to_string();
        assert!(bad.contains("must start with a letter or digit"), "{bad}");
        assert_eq!(serde_json::from_str::<ChannelName>("\"build\"").unwrap().as_str(), "build");
        assert!(serde_json::from_str::<ChannelName>("\"Build\"").is_err());
    }
}
