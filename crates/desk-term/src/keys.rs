//! Keys an operator names (`desk keys NAME Enter`, the dashboard's answer panel) and the bytes a
//! terminal sends for them.
//!
//! Owns the key vocabulary — named keys (`Enter`, `Esc`, `Up`, `F5`, `PgDn`, ...), control
//! characters (`C-c`, `^C`), Alt chords (`M-x`) and literal text — the rule that tells them
//! apart, and their encoding for a terminal in a given cursor-key mode. Invariants: parsing is
//! total and case-insensitive for names; a word that is no key name is literal text, and a
//! `text:` prefix forces literal text (so `text:Enter` types the five letters); the arrows and
//! Home/End encode as SS3 (`ESC O A`) exactly when the program turned on application cursor
//! keys (DECCKM), as a real terminal does. Knows nothing of sessions or sockets.

use std::fmt;

/// How an argument is forced to be literal text, even when it spells a key name.
pub const TEXT_PREFIX: &str = "text:";

/// A named key without a printable character of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    Enter,
    Escape,
    Tab,
    BackTab,
    Backspace,
    Space,
    Up,
    Down,
    Left,
    Right,
    Home,
    End,
    PageUp,
    PageDown,
    Insert,
    Delete,
    /// F1..=F12.
    F(u8),
}

/// One key (or run of text) to type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    Named(Named),
    /// A control character (`C-c` is 0x03).
    Control(u8),
    /// Alt (Meta) with a key: ESC, then the key's bytes.
    Alt(Box<Key>),
    /// Text typed as it is (UTF-8).
    Text(String),
}

/// Why an argument is not a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// An empty argument types nothing: most likely a script's empty variable.
    Empty,
    /// `C-` with something that has no control character (`C-1`, `C-é`).
    NoControl(String),
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Empty => f.write_str("an empty key types nothing (use Space for a space)"),
            KeyError::NoControl(spec) => {
                write!(f, "{spec:?} has no control character: C- takes a letter or one of @ [ \\ ] ^ _ ? (e.g. C-c)")
            }
        }
    }
}

impl std::error::Error for KeyError {}

/// Names for each named key, first the canonical one (matched without regard to case).
const NAMES: &[(&str, Named)] = &[
    ("Enter", Named::Enter),
    ("Return", Named::Enter),
    ("CR", Named::Enter),
    ("Escape", Named::Escape),
    ("Esc", Named::Escape),
    ("Tab", Named::Tab),
    ("BTab", Named::BackTab),
    ("S-Tab", Named::BackTab),
    ("Backspace", Named::Backspace),
    ("BSpace", Named::Backspace),
    ("Space", Named::Space),
    ("Up", Named::Up),
    ("Down", Named::Down),
    ("Left", Named::Left),
    ("Right", Named::Right),
    ("Home", Named::Home),
    ("End", Named::End),
    ("PgUp", Named::PageUp),
    ("PageUp", Named::PageUp),
    ("PPage", Named::PageUp),
    ("PgDn", Named::PageDown),
    ("PageDown", Named::PageDown),
    ("NPage", Named::PageDown),
    ("Insert", Named::Insert),
    ("IC", Named::Insert),
    ("Delete", Named::Delete),
    ("Del", Named::Delete),
    ("DC", Named::Delete),
];

/// Every name a named key answers to (`Enter`, `Return`, `Esc`, ..., `F1` … `F12`): what a word
/// one letter off may have meant.
pub fn names() -> impl Iterator<Item = std::borrow::Cow<'static, str>> {
    let fixed = NAMES.iter().map(|(name, _)| std::borrow::Cow::Borrowed(*name));
    fixed.chain((1..=12).map(|n| std::borrow::Cow::Owned(format!("F{n}"))))
}

/// The named key `word` spells, if any.
fn named(word: &str) -> Option<Named> {
    if let Some((_, key)) = NAMES.iter().find(|(name, _)| name.eq_ignore_ascii_case(word)) {
        return Some(*key);
    }
    let n = word.strip_prefix(['F', 'f'])?;
    if n.starts_with('0') {
        return None;
    }
    match n.parse::<u8>() {
        Ok(n @ 1..=12) => Some(Named::F(n)),
        _ => None,
    }
}

/// The control character of `C-x` for `x`.
fn control_of(c: char) -> Option<u8> {
    match c {
        'a'..='z' => Some(c as u8 - b'a' + 1),
        'A'..='Z' => Some(c as u8 - b'A' + 1),
        '@' | ' ' | '2' => Some(0),
        '[' => Some(0x1b),
        '\\' => Some(0x1c),
        ']' => Some(0x1d),
        '^' => Some(0x1e),
        '_' | '/' => Some(0x1f),
        '?' => Some(0x7f),
        _ => None,
    }
}

/// One argument as a key: `text:...` is literal text; a key name, `C-x`/`^X`/`ctrl-x` or
/// `M-x`/`alt-x` is that key; anything else is literal text.
pub fn parse(arg: &str) -> Result<Key, KeyError> {
    if let Some(text) = arg.strip_prefix(TEXT_PREFIX) {
        return if text.is_empty() { Err(KeyError::Empty) } else { Ok(Key::Text(text.to_string())) };
    }
    if arg.is_empty() {
        return Err(KeyError::Empty);
    }
    if let Some(key) = named(arg) {
        return Ok(Key::Named(key));
    }
    let lower = arg.to_ascii_lowercase();
    for prefix in ["c-", "ctrl-", "^"] {
        if lower.starts_with(prefix) && arg.len() > prefix.len() {
            let rest = &arg[prefix.len()..];
            let mut chars = rest.chars();
            return match (chars.next(), chars.next()) {
                (Some(c), None) => control_of(c).map(Key::Control).ok_or_else(|| KeyError::NoControl(arg.into())),
                // `C-Space`.
                _ if rest.eq_ignore_ascii_case("space") => Ok(Key::Control(0)),
                _ => Err(KeyError::NoControl(arg.into())),
            };
        }
    }
    for prefix in ["m-", "alt-"] {
        if lower.starts_with(prefix) && arg.len() > prefix.len() {
            return Ok(Key::Alt(Box::new(parse(&arg[prefix.len()..])?)));
        }
    }
    Ok(Key::Text(arg.to_string()))
}

/// Every argument as a key; the first bad one is the error, with its position (from 1).
pub fn parse_all<S: AsRef<str>>(args: &[S]) -> Result<Vec<Key>, (usize, KeyError)> {
    args.iter().enumerate().map(|(i, a)| parse(a.as_ref()).map_err(|e| (i + 1, e))).collect()
}

/// The bytes a terminal sends for `key`, with application cursor keys on or off.
pub fn encode_into(key: &Key, app_cursor: bool, out: &mut Vec<u8>) {
    let csi_or_ss3 = |out: &mut Vec<u8>, last: u8| {
        out.extend_from_slice(if app_cursor { b"\x1bO" } else { b"\x1b[" });
        out.push(last);
    };
    match key {
        Key::Text(text) => out.extend_from_slice(text.as_bytes()),
        Key::Control(c) => out.push(*c),
        Key::Alt(key) => {
            out.push(0x1b);
            encode_into(key, app_cursor, out);
        }
        Key::Named(named) => match named {
            Named::Enter => out.push(b'\r'),
            Named::Escape => out.push(0x1b),
            Named::Tab => out.push(b'\t'),
            Named::BackTab => out.extend_from_slice(b"\x1b[Z"),
            Named::Backspace => out.push(0x7f),
            Named::Space => out.push(b' '),
            Named::Up => csi_or_ss3(out, b'A'),
            Named::Down => csi_or_ss3(out, b'B'),
            Named::Right => csi_or_ss3(out, b'C'),
            Named::Left => csi_or_ss3(out, b'D'),
            Named::Home => csi_or_ss3(out, b'H'),
            Named::End => csi_or_ss3(out, b'F'),
            Named::Insert => out.extend_from_slice(b"\x1b[2~"),
            Named::Delete => out.extend_from_slice(b"\x1b[3~"),
            Named::PageUp => out.extend_from_slice(b"\x1b[5~"),
            Named::PageDown => out.extend_from_slice(b"\x1b[6~"),
            Named::F(n @ 1..=4) => {
                out.extend_from_slice(b"\x1bO");
                out.push(b'P' + (n - 1));
            }
            Named::F(n) => {
                // xterm's numbering skips 16 and 22.
                let code = match n {
                    5 => 15,
                    6 => 17,
                    7 => 18,
                    8 => 19,
                    9 => 20,
                    10 => 21,
                    11 => 23,
                    _ => 24,
                };
                out.extend_from_slice(format!("\x1b[{code}~").as_bytes());
            }
        },
    }
}

/// The bytes for `keys` in order, as one write.
pub fn encode(keys: &[Key], app_cursor: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for key in keys {
        encode_into(key, app_cursor, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(args: &[&str], app_cursor: bool) -> Vec<u8> {
        encode(&parse_all(args).unwrap(), app_cursor)
    }

    #[test]
    fn names_are_keys_in_any_case_and_other_words_are_text() {
        assert_eq!(parse("Enter"), Ok(Key::Named(Named::Enter)));
        assert_eq!(parse("enter"), Ok(Key::Named(Named::Enter)));
        assert_eq!(parse("ESC"), Ok(Key::Named(Named::Escape)));
        assert_eq!(parse("pgdn"), Ok(Key::Named(Named::PageDown)));
        assert_eq!(parse("F12"), Ok(Key::Named(Named::F(12))));
        assert_eq!(parse("F13"), Ok(Key::Text("F13".into())));
        assert_eq!(parse("F01"), Ok(Key::Text("F01".into())));
        assert_eq!(parse("1"), Ok(Key::Text("1".into())));
        assert_eq!(parse("yes please"), Ok(Key::Text("yes please".into())));
        assert_eq!(parse("Entre"), Ok(Key::Text("Entre".into())));
    }

    #[test]
    fn the_text_prefix_forces_literal_text() {
        assert_eq!(parse("text:Enter"), Ok(Key::Text("Enter".into())));
        assert_eq!(parse("text:text:"), Ok(Key::Text("text:".into())));
        assert_eq!(parse("text:"), Err(KeyError::Empty));
        assert_eq!(parse(""), Err(KeyError::Empty));
    }

    #[test]
    fn control_and_alt_chords() {
        assert_eq!(parse("C-c"), Ok(Key::Control(3)));
        assert_eq!(parse("^C"), Ok(Key::Control(3)));
        assert_eq!(parse("ctrl-d"), Ok(Key::Control(4)));
        assert_eq!(parse("C-\\"), Ok(Key::Control(0x1c)));
        assert_eq!(parse("C-space"), Ok(Key::Control(0)));
        assert!(matches!(parse("C-1"), Err(KeyError::NoControl(_))));
        assert!(matches!(parse("C-ab"), Err(KeyError::NoControl(_))));
        // A lone caret or `C-` is text.
        assert_eq!(parse("^"), Ok(Key::Text("^".into())));
        assert_eq!(parse("C-"), Ok(Key::Text("C-".into())));
        assert_eq!(bytes(&["M-x"], false), b"\x1bx");
        assert_eq!(bytes(&["M-Enter"], false), b"\x1b\r");
        assert_eq!(parse_all(&["Enter", "C-9"]).unwrap_err().0, 2);
    }

    #[test]
    fn arrows_follow_the_application_cursor_mode() {
        assert_eq!(
            bytes(&["Up", "Down", "Right", "Left", "Home", "End"], false),
            b"\x1b[A\x1b[B\x1b[C\x1b[D\x1b[H\x1b[F"
        );
        assert_eq!(
            bytes(&["Up", "Down", "Right", "Left", "Home", "End"], true),
            b"\x1bOA\x1bOB\x1bOC\x1bOD\x1bOH\x1bOF"
        );
        // Keys outside DECCKM's reach do not change.
        assert_eq!(bytes(&["PgUp", "Delete", "F1", "F5", "F12"], true), b"\x1b[5~\x1b[3~\x1bOP\x1b[15~\x1b[24~");
    }

    #[test]
    fn a_dialog_answer_is_the_bytes_a_terminal_sends() {
        assert_eq!(bytes(&["1", "Enter"], false), b"1\r");
        assert_eq!(bytes(&["Esc"], false), b"\x1b");
        assert_eq!(bytes(&["y", "Tab", "Space", "Backspace", "BTab"], false), b"y\t \x7f\x1b[Z");
        assert_eq!(bytes(&["text:é"], false), "é".as_bytes());
    }
}
