//! How the command line lays out a table (`desk ls`): columns measured in terminal cells, fitted
//! to the terminal, and commands quoted the way a shell would take them back.
//!
//! Owns display width (a wide character such as ✋ takes two cells, a combining mark none),
//! cutting and padding by it, and shell quoting. Invariants: no rendered line is wider than the
//! width it is given, so a table never wraps; columns are cut from the right (the last ones are
//! cut first, a column that would get almost nothing is left out); without a width (stdout is
//! not a terminal) nothing is cut. Pure: the caller measures the terminal.

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Two spaces between columns: wide enough to tell columns apart, narrow enough for 80 columns.
const GAP: usize = 2;

/// A column narrower than this is left out rather than shown as a stub of a word or two.
const MIN_COLUMN: usize = 4;

/// The cells `text` takes on a terminal. Control characters (which a table never prints: see
/// [`printable`]) count as none.
pub(super) fn width(text: &str) -> usize {
    UnicodeWidthStr::width(text)
}

/// `text` with control characters (a title could hold any) shown as `?`, so that what is
/// printed is what was measured.
pub(super) fn printable(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}

/// `text` cut to at most `max` cells, with `…` where it was cut.
pub(super) fn cut(text: &str, max: usize) -> String {
    if width(text) <= max {
        return text.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w > max - 1 {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
}

/// Render `rows` (the first is the header) as lines: columns padded to their widest cell (at most
/// `cap` cells, except the last column), and, with `fit` set, the whole line at most `fit` cells:
/// the last columns are cut to fit, or left out when almost nothing of them would show.
pub(super) fn render(rows: &[Vec<String>], cap: usize, fit: Option<usize>) -> Vec<String> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths: Vec<usize> =
        (0..columns).map(|i| rows.iter().filter_map(|r| r.get(i)).map(|c| width(c)).max().unwrap_or(0)).collect();
    for (i, w) in widths.iter_mut().enumerate() {
        if i + 1 < columns {
            *w = (*w).min(cap);
        }
    }
    if let Some(fit) = fit {
        let mut left = fit;
        let mut shown = 0;
        for (i, w) in widths.iter_mut().enumerate() {
            let gap = if i == 0 { 0 } else { GAP };
            if left < gap + MIN_COLUMN.min(*w) || left <= gap {
                break;
            }
            left -= gap;
            *w = (*w).min(left);
            left -= *w;
            shown += 1;
        }
        widths.truncate(shown);
    }
    // Each line is made in one string: a cell that fits (most) is measured once and copied,
    // not cut into a string of its own (`desk ls` renders a row per session).
    let line_room: usize = widths.iter().sum::<usize>() + GAP * widths.len();
    rows.iter()
        .map(|row| {
            let mut line = String::with_capacity(line_room);
            for (i, w) in widths.iter().enumerate() {
                if i > 0 {
                    push_spaces(&mut line, GAP);
                }
                let text = row.get(i).map(String::as_str).unwrap_or("");
                let cells = width(text);
                if cells <= *w {
                    line.push_str(text);
                    push_spaces(&mut line, w - cells);
                } else {
                    let cell = cut(text, *w);
                    let pad = w.saturating_sub(width(&cell));
                    line.push_str(&cell);
                    push_spaces(&mut line, pad);
                }
            }
            line.truncate(line.trim_end().len());
            line
        })
        .collect()
}

fn push_spaces(line: &mut String, n: usize) {
    line.extend(std::iter::repeat_n(' ', n));
}

/// The width of the terminal on stdout, or `None` when stdout is not a terminal (a pipe or a
/// file gets whole lines).
pub(super) fn terminal_width() -> Option<usize> {
    let mut size = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the struct we pass, and nothing else.
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

/// `args` as one line a shell would split back into them: words that need it in single
/// quotes (`bash -c 'stty -echo; cat'`).
pub(super) fn shell_words(args: &[String]) -> String {
    args.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" ")
}

fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word.chars().all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c) || !c.is_ascii());
    if plain && !word.chars().any(char::is_whitespace) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(cells: &[&str]) -> Vec<String> {
        cells.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn wide_characters_are_measured_in_cells() {
        assert_eq!(width("✋ hi"), 5);
        assert_eq!(cut("✋✋✋", 4), "✋…");
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abc", 4), "abc");
        let lines = render(&[s(&["A", "B"]), s(&["✋", "x"]), s(&["ab", "y"])], 40, None);
        assert_eq!(lines, vec!["A   B", "✋  x", "ab  y"]);
    }

    #[test]
    fn a_fitted_table_cuts_the_last_columns_and_never_exceeds_the_width() {
        let rows = vec![s(&["NAME", "STATUS", "COMMAND"]), s(&["alpha", "running", "sleep 1000 && echo a long tail"])];
        for fit in [10, 15, 20, 25, 30, 80] {
            for line in render(&rows, 40, Some(fit)) {
                assert!(width(&line) <= fit, "{fit}: {line:?}");
            }
        }
        assert_eq!(render(&rows, 40, Some(24)), vec!["NAME   STATUS   COMMAND", "alpha  running  sleep 1…"]);
        // Too little room for COMMAND: it is left out, not shown as a stub.
        assert_eq!(render(&rows, 40, Some(17)), vec!["NAME   STATUS", "alpha  running"]);
        // Not a terminal: nothing is cut.
        assert!(render(&rows, 40, None)[1].ends_with("a long tail"));
    }

    #[test]
    fn commands_are_quoted_like_a_shell_would() {
        let args = s(&["bash", "-c", "stty -echo; cat", "it's", "", "a=b", "ünï"]);
        assert_eq!(shell_words(&args), r#"bash -c 'stty -echo; cat' 'it'\''s' '' a=b ünï"#);
    }
}
