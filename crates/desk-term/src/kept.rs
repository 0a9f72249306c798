//! Control keys a client keeps for itself (the detach key, a command prefix), found in typed
//! input.
//!
//! Owns locating such a key in a chunk of terminal input, both as its plain control byte and in
//! the kitty keyboard protocol's `CSI <code> ; 5 u` form (an application may have switched the
//! outer terminal to that encoding), and the first of several ([`find_first`]). `desk attach`
//! looks for them in what it reads, and so does a master that holds an attach's terminal
//! (docs/protocol.md §5.16), so both find the same key at the same place. Invariant: bytes
//! before the key are the session's; the key and everything after it in the same chunk are
//! not. Pure.

/// Whether terminal output wipes what a client drew of its own (a status row): a switch of
/// screen (`CSI ? 1049 h/l`) or a reset (`ESC c`) takes it with it, so the client draws it again.
pub fn wipes_own_drawing(output: &[u8]) -> bool {
    output.windows(7).any(|w| w == b"\x1b[?1049") || output.windows(2).any(|w| w == b"\x1bc")
}

/// Where the first of `keys` is in `input`: its offset, its length and the key.
pub fn find_first(input: &[u8], keys: &[u8]) -> Option<(usize, usize, u8)> {
    keys.iter().filter_map(|&key| find_key(input, key).map(|(at, len)| (at, len, key))).min_by_key(|found| found.0)
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

/// Position and length of the first occurrence of `key` (a control byte) in `input`.
pub fn find_key(input: &[u8], key: u8) -> Option<(usize, usize)> {
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
    fn the_first_of_several_keys_is_found() {
        assert_eq!(find_first(b"ab\x1dc\x1c", &[0x1c, 0x1d]), Some((2, 1, 0x1d)));
        assert_eq!(find_first(b"\x1b[92;5u\x1d", &[0x1d, 0x1c]), Some((0, 7, 0x1c)));
        assert_eq!(find_first(b"plain", &[0x1c]), None);
        assert_eq!(find_first(b"\x1c", &[]), None);
    }

    #[test]
    fn a_key_is_found_plain_and_in_kitty_form() {
        assert_eq!(find_key(b"abc\x1cdef", 0x1c), Some((3, 1)));
        assert_eq!(find_key(b"ab\x1b[92;5uc", 0x1c), Some((2, 7)));
        assert_eq!(find_key(b"\x1b[92;5:1u", 0x1c), Some((0, 9)));
        assert_eq!(find_key(b"\x1b[92;5:3u", 0x1c), None);
        assert_eq!(find_key(b"\x1b[97;5u", 0x01), Some((0, 7)));
        assert_eq!(find_key(b"plain text", 0x1c), None);
    }
}
