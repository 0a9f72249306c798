//! The keys `desk attach` keeps for itself: the detach key, the command prefix, and the keys
//! its own prompts read (the session list, the answer to a dialog).
//!
//! Owns finding the first of the detach and prefix keys in a chunk of terminal input (each as
//! its plain control byte or in the kitty keyboard protocol's form, `super::keys`) and reading
//! one key at a time from the bytes after it ([`next_key`]: a character, an arrow, Enter, Esc).
//! Invariants: bytes before the first kept key are the session's, in order; a kept key and what
//! a prompt reads are never forwarded; an incomplete escape sequence at the end of a chunk is
//! read as Esc (terminals send a key's bytes in one write). Pure.

use super::keys::find_detach_key;

/// Ctrl-] (0x1d), the default prefix: telnet's escape key, bound by none of the agents desk
/// runs (Claude Code, Codex and OpenCode use Ctrl-G, Ctrl-B, Ctrl-T, Ctrl-P, Ctrl-X and others,
/// but not it) and rarely by shells.
pub const DEFAULT_PREFIX_KEY: u8 = 0x1d;

/// The first kept key in a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kept {
    Detach,
    Prefix,
}

/// Where the first detach or prefix key is in `input`: its offset, its length and which it is.
/// When both keys are the same byte, it is the detach key (it worked that way first).
pub(super) fn find_kept(input: &[u8], detach: Option<u8>, prefix: Option<u8>) -> Option<(usize, usize, Kept)> {
    let d = detach.and_then(|k| find_detach_key(input, k)).map(|(at, len)| (at, len, Kept::Detach));
    let p = prefix
        .filter(|p| Some(*p) != detach)
        .and_then(|k| find_detach_key(input, k))
        .map(|(at, len)| (at, len, Kept::Prefix));
    match (d, p) {
        (Some(d), Some(p)) => Some(if d.0 <= p.0 { d } else { p }),
        (d, p) => d.or(p),
    }
}

/// One key, as attach's own prompts read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Key {
    Char(char),
    Up,
    Down,
    Left,
    Right,
    Enter,
    Esc,
    Backspace,
    /// Another control byte (the prefix key again, Ctrl-C).
    Ctrl(u8),
    /// A sequence this reader does not know (a function key): nothing.
    Other,
}

/// The first key in `input` and how many bytes it took; `None` for empty input.
pub(super) fn next_key(input: &[u8]) -> Option<(Key, usize)> {
    let first = *input.first()?;
    Some(match first {
        b'\r' | b'\n' => (Key::Enter, 1),
        0x7f | 0x08 => (Key::Backspace, 1),
        0x1b => escape(input),
        0x00..=0x1f => (Key::Ctrl(first), 1),
        _ => {
            let len = utf8_len(first).min(input.len());
            match std::str::from_utf8(&input[..len]).ok().and_then(|s| s.chars().next()) {
                Some(c) => (Key::Char(c), len),
                None => (Key::Other, 1),
            }
        }
    })
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => 1,
    }
}

/// An escape sequence at the start of `input`: an arrow (`ESC [ A`, `ESC O A`), a kitty
/// key report (`ESC [ code ; mods u`), Esc alone, or a sequence read whole and ignored.
fn escape(input: &[u8]) -> (Key, usize) {
    match input.get(1) {
        None | Some(0x1b) => (Key::Esc, 1),
        Some(b'O') => match input.get(2) {
            Some(c) => (arrow(*c), 3),
            None => (Key::Esc, 1),
        },
        Some(b'[') => {
            // Parameters, then a final byte in 0x40..=0x7e.
            let Some(end) = input[2..].iter().position(|b| (0x40..=0x7e).contains(b)).map(|i| i + 2) else {
                return (Key::Esc, 1);
            };
            let params = &input[2..end];
            let key = match input[end] {
                b'u' => kitty(params),
                c if params.is_empty() || params == b"1" => arrow(c),
                _ => Key::Other,
            };
            (key, end + 1)
        }
        // Alt+key: the key alone will do for a prompt.
        Some(_) => (Key::Esc, 1),
    }
}

fn arrow(c: u8) -> Key {
    match c {
        b'A' => Key::Up,
        b'B' => Key::Down,
        b'C' => Key::Right,
        b'D' => Key::Left,
        _ => Key::Other,
    }
}

/// A kitty keyboard report: `code[;mods[:event]]`. Only presses and repeats of plain or
/// shifted keys count (a release is nothing).
fn kitty(params: &[u8]) -> Key {
    let text = String::from_utf8_lossy(params);
    let mut parts = text.split(';');
    let code: u32 = parts.next().and_then(|c| c.split(':').next()?.parse().ok()).unwrap_or(0);
    let mut mods_event = parts.next().unwrap_or("1").split(':');
    let mods: u32 = mods_event.next().and_then(|m| m.parse().ok()).unwrap_or(1);
    if mods_event.next() == Some("3") {
        return Key::Other;
    }
    match (code, mods) {
        (13, 1) => Key::Enter,
        (27, 1) => Key::Esc,
        (127, 1) => Key::Backspace,
        (c, 5) if (0x40..0x80).contains(&c) => Key::Ctrl((c as u8) & 0x1f),
        (c, 1 | 2) => char::from_u32(c).map_or(Key::Other, Key::Char),
        _ => Key::Other,
    }
}

/// How a key is named to people: `^]`, `^\`.
pub(super) fn key_name(key: u8) -> String {
    match key {
        0x7f => "^?".into(),
        k => format!("^{}", char::from((k & 0x1f) | 0x40)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_kept_key_splits_the_input() {
        assert_eq!(find_kept(b"ab\x1dn", Some(0x1c), Some(0x1d)), Some((2, 1, Kept::Prefix)));
        assert_eq!(find_kept(b"a\x1cb\x1dn", Some(0x1c), Some(0x1d)), Some((1, 1, Kept::Detach)));
        assert_eq!(find_kept(b"\x1b[93;5un", Some(0x1c), Some(0x1d)), Some((0, 7, Kept::Prefix)), "kitty form");
        assert_eq!(find_kept(b"x\x1dy", Some(0x1d), Some(0x1d)), Some((1, 1, Kept::Detach)), "the detach key wins");
        assert_eq!(find_kept(b"plain", Some(0x1c), Some(0x1d)), None);
        assert_eq!(find_kept(b"\x1d", None, None), None);
    }

    #[test]
    fn keys_are_read_one_at_a_time() {
        assert_eq!(next_key(b"n"), Some((Key::Char('n'), 1)));
        assert_eq!(next_key(b"\x1b[A rest"), Some((Key::Up, 3)));
        assert_eq!(next_key(b"\x1bOB"), Some((Key::Down, 3)));
        assert_eq!(next_key(b"\x1b"), Some((Key::Esc, 1)));
        assert_eq!(next_key(b"\r"), Some((Key::Enter, 1)));
        assert_eq!(next_key(b"\x1d"), Some((Key::Ctrl(0x1d), 1)));
        assert_eq!(next_key("é".as_bytes()), Some((Key::Char('é'), 2)));
        assert_eq!(next_key(b"\x1b[110u"), Some((Key::Char('n'), 6)), "kitty: n");
        assert_eq!(next_key(b"\x1b[110;1:3u"), Some((Key::Other, 10)), "kitty: a release");
        assert_eq!(next_key(b"\x1b[13u"), Some((Key::Enter, 5)));
        assert_eq!(next_key(b"\x1b[15~"), Some((Key::Other, 5)), "F5 is nothing");
        assert_eq!(next_key(b""), None);
    }

    #[test]
    fn keys_are_named_as_carets() {
        assert_eq!(key_name(0x1d), "^]");
        assert_eq!(key_name(0x1c), "^\\");
        assert_eq!(key_name(0x07), "^G");
    }
}
