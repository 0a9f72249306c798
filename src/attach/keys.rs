//! The detach key: how it is named on the command line and found in typed input.
//!
//! Owns parsing `--detach-key` (`^\`, `^a`, `C-a`, `ctrl-a`, `none`) and locating the key in a
//! chunk of terminal input, both as its plain control byte and in the kitty keyboard protocol's
//! `CSI <code> ; 5 u` form (an application may have switched the outer terminal to that
//! encoding). Invariant: bytes before the key are forwarded, the key and everything after it in
//! the same chunk are not.

/// Ctrl-\ (0x1c), as in dtach and atch: rarely bound by shells or agents.
pub const DEFAULT_DETACH_KEY: u8 = 0x1c;

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

/// The character code the kitty protocol reports for a control byte (Ctrl-a → 'a').
fn kitty_code(key: u8) -> Option<u32> {
    match key {
        0x01..=0x1a => Some(u32::from(key - 1 + b'a')),
        0x00 => Some(u32::from(b'@')),
        0x1b..=0x1f => Some(u32::from(key | 0x40)),
        _ => None,
    }
}

/// Position and length of the first occurrence of the detach key in `input`.
pub fn find_detach_key(input: &[u8], key: u8) -> Option<(usize, usize)> {
    let plain = input.iter().position(|b| *b == key).map(|at| (at, 1));
    let kitty = kitty_code(key).and_then(|code| find_kitty_key(input, code));
    match (plain, kitty) {
        (Some(p), Some(k)) => Some(if p.0 <= k.0 { p } else { k }),
        (p, k) => p.or(k),
    }
}

/// Find `ESC [ code ; 5 [: event] u`, the kitty encoding of Ctrl+key (press or repeat).
fn find_kitty_key(input: &[u8], code: u32) -> Option<(usize, usize)> {
    let prefix = format!("\x1b[{code};5");
    let prefix = prefix.as_bytes();
    let mut from = 0;
    while let Some(rel) = input[from..].windows(prefix.len()).position(|w| w == prefix) {
        let at = from + rel;
        let mut end = at + prefix.len();
        if input.get(end) == Some(&b':') {
            end += 1;
            let digits = input[end..].iter().take_while(|b| b.is_ascii_digit()).count();
            // Event type 3 is a key release: not a keypress.
            if &input[end..end + digits] == b"3" {
                from = at + 1;
                continue;
            }
            end += digits;
        }
        if input.get(end) == Some(&b'u') {
            return Some((at, end + 1 - at));
        }
        from = at + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn detach_key_is_found_plain_and_in_kitty_form() {
        assert_eq!(find_detach_key(b"abc\x1cdef", 0x1c), Some((3, 1)));
        assert_eq!(find_detach_key(b"ab\x1b[92;5uc", 0x1c), Some((2, 7)));
        assert_eq!(find_detach_key(b"\x1b[92;5:1u", 0x1c), Some((0, 9)));
        assert_eq!(find_detach_key(b"\x1b[92;5:3u", 0x1c), None);
        assert_eq!(find_detach_key(b"\x1b[97;5u", 0x01), Some((0, 7)));
        assert_eq!(find_detach_key(b"plain text", 0x1c), None);
    }
}
