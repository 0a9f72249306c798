//! The grammar of a session name, and the parse of a terminal size as people write it.
//!
//! Owns what a session name may be (`[A-Za-z0-9][A-Za-z0-9._-]{0,63}`: it becomes part of
//! paths, so nothing else is ever accepted) and `COLSxROWS`. Both are checked in several places
//! (the command line, the master's arguments, a fleet manifest), always by these functions.
//! Pure: no file, no environment.

use desk_term::screen::{MAX_CELLS, MAX_COLS, MAX_ROWS, valid_size};

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

/// Parse `COLSxROWS` into a size the screen model accepts.
pub fn parse_size(s: &str) -> Result<(u16, u16), String> {
    let (cols, rows) = s.split_once(['x', 'X']).ok_or_else(|| format!("size {s:?} is not COLSxROWS"))?;
    let cols: u16 = cols.parse().map_err(|_| format!("{cols:?} is not a column count"))?;
    let rows: u16 = rows.parse().map_err(|_| format!("{rows:?} is not a row count"))?;
    if !valid_size(cols, rows) {
        return Err(format!(
            "size {cols}x{rows} is out of range (1..={MAX_COLS} columns, 1..={MAX_ROWS} rows, at most {MAX_CELLS} cells)"
        ));
    }
    Ok((cols, rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_grammar() {
        assert_eq!(check_name("api.v2_x-1"), Ok(()));
        assert_eq!(check_name(""), Err(NameError::Empty));
        assert_eq!(check_name("-x"), Err(NameError::BadFirst('-')));
        assert_eq!(check_name("a/b"), Err(NameError::BadChar('/')));
        assert_eq!(check_name(&"a".repeat(65)), Err(NameError::TooLong(65)));
    }

    #[test]
    fn sizes_parse_and_are_bounded() {
        assert_eq!(parse_size("120x40"), Ok((120, 40)));
        assert_eq!(parse_size("80X24"), Ok((80, 24)));
        assert!(parse_size("120").unwrap_err().contains("COLSxROWS"));
        assert!(parse_size("0x40").unwrap_err().contains("out of range"));
    }
}
