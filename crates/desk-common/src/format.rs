//! On-disk format versions, and what happens to a record this desk cannot read.
//!
//! Owns the rule every durable JSON record of desk follows (item files, pauses, session and exit
//! records, channel rosters, cursors, stall and seen marks): the record is an object with a
//! `version` key naming its [`Format`]'s version; a record without the key was written before
//! desk stamped versions and is version 1. A reader takes every version from its format's
//! `oldest` to its `current` (older layouts are read by the record's serde defaults, and an owner
//! with more to do — the channel cursor seeding its ledger — migrates after decoding); it never
//! guesses at a version newer than it knows ([`FormatError::Newer`]). A record that cannot be
//! read is never deleted and never stops a process from starting: its owner moves it aside with
//! [`set_aside`] (to `<file>.bad`, durably) and names it with [`SetAside::message`], which says
//! how to acknowledge it. Pure apart from [`set_aside`]'s rename; knows no particular record.
//! docs/upgrading.md lists every format and its version.

use anyhow::{Context, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

use crate::fsutil;

/// The key that carries a record's format version.
pub const VERSION_KEY: &str = "version";

/// The suffix a record set aside gets.
pub const SET_ASIDE_SUFFIX: &str = ".bad";

/// One on-disk format: what its records are called in messages, and the versions this desk
/// reads (`oldest..=current`) and writes (`current`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format {
    pub name: &'static str,
    pub oldest: u32,
    pub current: u32,
}

impl Format {
    /// A format whose only version so far is 1.
    pub const fn first(name: &'static str) -> Format {
        Format { name, oldest: 1, current: 1 }
    }
}

/// Why a record was not read. Callers branch: either way the record is kept (set aside), but
/// [`FormatError::Newer`] says a newer desk can read it, so upgrading desk is the way back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("not a readable {format} record: {detail}")]
    Unreadable { format: &'static str, detail: String },
    #[error(
        "a {format} record of format version {found}, written by a newer desk (this desk reads versions {oldest} to {current}); upgrade desk to read it"
    )]
    Newer { format: &'static str, found: u64, oldest: u32, current: u32 },
    #[error(
        "a {format} record of format version {found}, older than any this desk reads (versions {oldest} to {current})"
    )]
    Older { format: &'static str, found: u64, oldest: u32, current: u32 },
}

#[derive(serde::Deserialize)]
struct VersionOnly {
    #[serde(default)]
    version: Option<serde_json::Value>,
}

/// The version a record's bytes claim (1 when it has no `version` key), checked against what
/// this desk reads.
pub fn version_of(format: &Format, bytes: &[u8]) -> Result<u32, FormatError> {
    let unreadable = |detail: String| FormatError::Unreadable { format: format.name, detail };
    let found = match serde_json::from_slice::<VersionOnly>(bytes).map_err(|e| unreadable(e.to_string()))?.version {
        None => 1,
        Some(v) => v.as_u64().ok_or_else(|| unreadable(format!("its {VERSION_KEY} is {v}, not a whole number")))?,
    };
    let (oldest, current) = (format.oldest, format.current);
    if found > u64::from(current) {
        return Err(FormatError::Newer { format: format.name, found, oldest, current });
    }
    if found < u64::from(oldest) {
        return Err(FormatError::Older { format: format.name, found, oldest, current });
    }
    Ok(found as u32)
}

/// Decode a record of `format`, of any version this desk reads.
pub fn decode<T: DeserializeOwned>(format: &Format, bytes: &[u8]) -> Result<T, FormatError> {
    version_of(format, bytes)?;
    serde_json::from_slice(bytes).map_err(|e| FormatError::Unreadable { format: format.name, detail: e.to_string() })
}

#[derive(Serialize)]
struct Stamped<'a, T> {
    version: u32,
    #[serde(flatten)]
    record: &'a T,
}

/// Encode a record of `format` (a struct without a version field of its own) in its current
/// version, the `version` key first, pretty-printed as every desk record is.
pub fn encode<T: Serialize>(format: &Format, record: &T) -> Result<Vec<u8>> {
    serde_json::to_vec_pretty(&Stamped { version: format.current, record })
        .with_context(|| format!("cannot encode a {} record", format.name))
}

/// A record moved aside because it could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAside {
    pub path: PathBuf,
    pub aside: PathBuf,
    pub why: String,
}

impl SetAside {
    /// What to tell the operator: which file, why, where it is now, and how to acknowledge it.
    pub fn message(&self) -> String {
        format!(
            "{} could not be read ({}); it was kept as {} and is not used. Look at it, then acknowledge it by removing that file, or rename it back to {} once a desk that reads it is installed",
            self.path.display(),
            self.why,
            self.aside.display(),
            self.path.display()
        )
    }
}

/// Where a record set aside from `path` goes: `<path>.bad`.
pub fn aside_path(path: &Path) -> PathBuf {
    let mut bad = path.as_os_str().to_owned();
    bad.push(SET_ASIDE_SUFFIX);
    PathBuf::from(bad)
}

/// Move a record that cannot be read to `<path>.bad`, durably (the directory is synced), so
/// that it is never read again, never deleted, and never stops anything from starting. A
/// record already set aside under that name is replaced only after being kept as
/// `<path>.bad.<n>`; nothing set aside is ever overwritten.
pub fn set_aside(path: &Path, why: impl Into<String>) -> Result<SetAside> {
    let mut aside = aside_path(path);
    let mut n = 1;
    while aside.exists() {
        aside = PathBuf::from(format!("{}{SET_ASIDE_SUFFIX}.{n}", path.display()));
        n += 1;
    }
    std::fs::rename(path, &aside).with_context(|| format!("cannot set {} aside", path.display()))?;
    if let Some(dir) = path.parent() {
        fsutil::sync_dir(dir)?;
    }
    Ok(SetAside { path: path.to_path_buf(), aside, why: why.into() })
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: Format = Format { name: "test", oldest: 1, current: 2 };

    #[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
    struct R {
        a: u32,
    }

    #[test]
    fn a_record_without_a_version_is_version_1_and_is_read() {
        assert_eq!(version_of(&F, br#"{"a":1}"#), Ok(1));
        assert_eq!(decode::<R>(&F, br#"{"a":1}"#), Ok(R { a: 1 }));
    }

    #[test]
    fn encode_stamps_the_current_version_first_and_decodes_back() {
        let bytes = encode(&F, &R { a: 7 }).unwrap();
        assert!(
            String::from_utf8_lossy(&bytes).starts_with("{\n  \"version\": 2,\n  \"a\": 7"),
            "{}",
            String::from_utf8_lossy(&bytes)
        );
        assert_eq!(decode::<R>(&F, &bytes), Ok(R { a: 7 }));
    }

    #[test]
    fn a_newer_or_older_version_is_refused_in_words_not_guessed_at() {
        let newer = decode::<R>(&F, br#"{"version":3,"a":1}"#).unwrap_err();
        assert!(matches!(newer, FormatError::Newer { found: 3, .. }), "{newer}");
        assert!(newer.to_string().contains("written by a newer desk"), "{newer}");
        assert!(matches!(decode::<R>(&F, br#"{"version":0,"a":1}"#), Err(FormatError::Older { found: 0, .. })));
        assert!(matches!(decode::<R>(&F, br#"{"version":"2","a":1}"#), Err(FormatError::Unreadable { .. })));
        assert!(matches!(decode::<R>(&F, b"{\"a\":"), Err(FormatError::Unreadable { .. })));
    }

    #[test]
    fn a_record_set_aside_is_renamed_never_overwritten_and_named_with_the_way_to_acknowledge_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::fs::write(&path, b"first").unwrap();
        let one = set_aside(&path, "bad").unwrap();
        assert_eq!(one.aside, dir.path().join("r.json.bad"));
        std::fs::write(&path, b"second").unwrap();
        let two = set_aside(&path, "bad").unwrap();
        assert_eq!(two.aside, dir.path().join("r.json.bad.1"));
        assert_eq!(std::fs::read(&one.aside).unwrap(), b"first");
        assert_eq!(std::fs::read(&two.aside).unwrap(), b"second");
        assert!(!path.exists());
        let message = one.message();
        assert!(message.contains("r.json.bad") && message.contains("acknowledge it by removing"), "{message}");
    }
}
