//! The syntax of the values people type for desk, parsed in one place: a terminal size
//! (`COLSxROWS`), an environment assignment (`KEY=VALUE`) and a detach key (`^\`, `C-a`,
//! `none`; and its name as desk says it, `Ctrl-\`).
//!
//! Owns these parsers for every place that reads them: `desk new` and `desk attach` flags, the
//! user config ([`crate::config`]) and the master's internal arguments (a size's grammar is
//! `desk_core::session`'s, so that a fleet manifest, checked in desk-core, reads it the same).
//! Invariants: a size is accepted only if the screen model can hold it; an error names the
//! value and what it should have been. Pure: no I/O.

use std::ffi::OsString;

/// Parse `COLSxROWS`, refusing sizes the screen model cannot hold (the grammar is desk-core's,
/// where a fleet manifest's sizes are checked too).
pub use desk_core::session::parse_size;

/// Parse one `KEY=VALUE` environment assignment.
pub fn parse_env(s: &str) -> Result<(OsString, OsString), String> {
    let (key, value) = s.split_once('=').ok_or_else(|| format!("{s:?} is not KEY=VALUE"))?;
    if key.is_empty() || key.contains('\0') || value.contains('\0') {
        return Err(format!("{s:?} is not a valid environment assignment"));
    }
    Ok((key.into(), value.into()))
}

/// Parse a detach key name. `Ok(None)` means detaching by key is disabled.
pub fn parse_detach_key(spec: &str) -> Result<Option<u8>, String> {
    let lower = spec.to_ascii_lowercase();
    if lower == "none" || lower == "off" {
        return Ok(None);
    }
    let rest = lower
        .strip_prefix('^')
        .or_else(|| lower.strip_prefix("c-"))
        .or_else(|| lower.strip_prefix("ctrl-"))
        .or_else(|| lower.strip_prefix("ctrl+"))
        .ok_or_else(|| format!("detach key {spec:?} is not of the form ^X, C-x, ctrl-x or none"))?;
    let mut chars = rest.chars();
    let (Some(c), None) = (chars.next(), chars.next()) else {
        return Err(format!("detach key {spec:?} must name exactly one key after the control prefix"));
    };
    match c {
        '?' => Ok(Some(0x7f)),
        '@' | 'a'..='z' | '[' | '\\' | ']' | '^' | '_' => Ok(Some((c.to_ascii_uppercase() as u8) & 0x1f)),
        _ => Err(format!("detach key {spec:?}: ^{c} is not a control key")),
    }
}

/// How people name a detach key: `Ctrl-\`, `Ctrl-A`, `Ctrl-?` (the inverse of
/// [`parse_detach_key`]).
pub fn detach_key_name(key: u8) -> String {
    match key {
        0x7f => "Ctrl-?".into(),
        k => format!("Ctrl-{}", char::from((k & 0x1f) | 0x40)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_env_assignments_parse_or_say_what_is_wrong() {
        assert_eq!(parse_size("120x40"), Ok((120, 40)));
        assert!(parse_size("0x40").is_err());
        assert!(parse_size("120").is_err());
        assert_eq!(parse_env("A=b=c"), Ok(("A".into(), "b=c".into())));
        assert!(parse_env("novalue").is_err());
        assert!(parse_env("=x").is_err());
    }

    #[test]
    fn detach_key_names_are_said_as_typed() {
        assert_eq!(detach_key_name(0x1c), "Ctrl-\\");
        assert_eq!(detach_key_name(0x1d), "Ctrl-]");
        assert_eq!(detach_key_name(0x01), "Ctrl-A");
        for spec in ["^\\", "C-a", "ctrl-]"] {
            let key = parse_detach_key(spec).unwrap().unwrap();
            assert_eq!(parse_detach_key(&detach_key_name(key)).unwrap(), Some(key));
        }
    }

    #[test]
    fn detach_key_names_parse() {
        assert_eq!(parse_detach_key("^\\"), Ok(Some(0x1c)));
        assert_eq!(parse_detach_key("^a"), Ok(Some(0x01)));
        assert_eq!(parse_detach_key("C-b"), Ok(Some(0x02)));
        assert_eq!(parse_detach_key("ctrl-]"), Ok(Some(0x1d)));
        assert_eq!(parse_detach_key("^?"), Ok(Some(0x7f)));
        assert_eq!(parse_detach_key("none"), Ok(None));
        assert!(parse_detach_key("x").is_err());
        assert!(parse_detach_key("^ab").is_err());
        assert!(parse_detach_key("^1").is_err());
    }
}
