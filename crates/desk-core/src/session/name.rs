//! The grammar of a session name (defined in `desk_wire::names`, re-exported here for the
//! session's code), and the parse of a terminal size as people write it.
//!
//! Owns what a session name may be (`[A-Za-z0-9][A-Za-z0-9._-]{0,63}`: it becomes part of
//! paths, so nothing else is ever accepted) and `COLSxROWS`. Both are checked in several places
//! (the command line, the master's arguments, a fleet manifest), always by these functions.
//! Pure: no file, no environment.

use desk_term::screen::{MAX_CELLS, MAX_COLS, MAX_ROWS, valid_size};

pub use desk_wire::names::{MAX_NAME_LEN, NameError, check_name};

/// Parse `COLSxROWS` into a size the screen model accepts.
pub fn parse_size(s: &str) -> Result<(u16, u16), String> {
    let (cols, rows) = s.split_once(['x', 'X']).ok_or_else(|| format!("size {s:?} is not COLSxROWS"))?;
    let cols: u16 = cols.parse().map_err(|_| format!("size {s:?}: {cols:?} is not a column count (COLSxROWS)"))?;
    let rows: u16 = rows.parse().map_err(|_| format!("size {s:?}: {rows:?} is not a row count (COLSxROWS)"))?;
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
    fn sizes_parse_and_are_bounded() {
        assert_eq!(parse_size("120x40"), Ok((120, 40)));
        assert_eq!(parse_size("80X24"), Ok((80, 24)));
        assert!(parse_size("120").unwrap_err().contains("COLSxROWS"));
        assert!(parse_size("0x40").unwrap_err().contains("out of range"));
        assert_eq!(parse_size("80x").unwrap_err(), r#"size "80x": "" is not a row count (COLSxROWS)"#);
    }
}
