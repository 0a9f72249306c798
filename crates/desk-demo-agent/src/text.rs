//! Display-width text helpers for the demo agent's renderer.
//!
//! Owns the mapping from arbitrary text (which may hold control characters, wide characters and
//! tabs, because pastes are not sanitised by anyone before they reach the agent) to terminal
//! rows. Invariants: every string these functions return is safe to print (no C0/C1 control
//! characters, so nothing in a prompt can move the cursor or start an escape sequence), and its
//! display width, measured with `unicode-width` as terminal emulators do, never exceeds the width
//! asked for. A wide character is never split across two rows.

use unicode_width::UnicodeWidthChar;

/// Display width of one character as it will be printed by [`sanitize_char`].
pub fn char_width(c: char) -> usize {
    UnicodeWidthChar::width(sanitize_char(c)).unwrap_or(0)
}

/// Display width of a whole string as printed.
pub fn str_width(s: &str) -> usize {
    s.chars().map(char_width).sum()
}

/// Replace what a terminal would interpret rather than print: a tab becomes one space (the input
/// box has no tab stops), any other control character becomes U+FFFD.
pub fn sanitize_char(c: char) -> char {
    match c {
        '\t' => ' ',
        c if c.is_control() => '\u{FFFD}',
        c => c,
    }
}

/// Split one logical line (no `\n` inside) into rows of at most `width` columns. An empty line is
/// one empty row. `width` is clamped to at least 1 so tiny terminals cannot loop forever.
pub fn wrap_line(line: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut rows = Vec::new();
    let mut row = String::new();
    let mut used = 0;
    for c in line.chars() {
        let c = sanitize_char(c);
        let w = UnicodeWidthChar::width(c).unwrap_or(0);
        if w > width {
            // A wide character on a 1-column screen: show a placeholder instead.
            if used > 0 {
                rows.push(std::mem::take(&mut row));
                used = 0;
            }
            rows.push("?".to_string());
            continue;
        }
        if used + w > width {
            rows.push(std::mem::take(&mut row));
            used = 0;
        }
        row.push(c);
        used += w;
    }
    rows.push(row);
    rows
}

/// Split text on `\n` and wrap each line; always at least one row.
pub fn wrap_text(text: &str, width: usize) -> Vec<String> {
    text.split('\n').flat_map(|l| wrap_line(l, width)).collect()
}

/// The longest prefix of `s` (sanitised) that fits in `width` columns.
pub fn truncate(s: &str, width: usize) -> String {
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let c = sanitize_char(c);
        let w = UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w > width {
            break;
        }
        out.push(c);
        used += w;
    }
    out
}

/// `s` truncated to `width` columns, with `…` as the last column when something was cut.
pub fn ellipsize(s: &str, width: usize) -> String {
    if str_width(s) <= width {
        return truncate(s, width);
    }
    if width == 0 {
        return String::new();
    }
    let mut out = truncate(s, width - 1);
    out.push('…');
    out
}

/// `s` padded with spaces to exactly `width` columns (truncated first if longer).
pub fn pad(s: &str, width: usize) -> String {
    let mut out = truncate(s, width);
    let used = str_width(&out);
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(used)));
    out
}

/// The first line of a prompt, for transcript echoes and reply headers.
pub fn first_line(s: &str) -> &str {
    s.split('\n').next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_never_exceeds_width_and_keeps_wide_chars_whole() {
        let rows = wrap_line("ab漢字cd", 3);
        assert_eq!(rows, vec!["ab", "漢", "字c", "d"]);
        for r in &rows {
            assert!(str_width(r) <= 3);
        }
    }

    #[test]
    fn control_characters_are_never_printed() {
        let rows = wrap_text("a\x1b[2Jb\tc", 80);
        assert_eq!(rows, vec!["a\u{FFFD}[2Jb c"]);
    }

    #[test]
    fn empty_lines_survive_wrapping() {
        assert_eq!(wrap_text("a\n\nb", 10), vec!["a", "", "b"]);
    }

    #[test]
    fn ellipsize_marks_the_cut() {
        assert_eq!(ellipsize("hello world", 5), "hell…");
        assert_eq!(ellipsize("hi", 5), "hi");
        assert_eq!(pad("hi", 4), "hi  ");
    }
}
