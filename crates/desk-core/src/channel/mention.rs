//! Mentions: the `@name`s of a message body that count.
//!
//! Owns what a mention is: `@` followed by a name (`[A-Za-z0-9][A-Za-z0-9._-]*`, a trailing `.`
//! or `-` left out as punctuation), not preceded by a name character (so `a@b.com` mentions no
//! one), and outside code: fenced blocks (a line opening with at least three backticks or
//! tildes, up to three spaces in, until a closing fence of the same character and at least that
//! length) and code spans (a run of backticks up to the next run of the same length). Invariant:
//! the result is in order of first appearance, without repeats. Pure.

/// The distinct names mentioned in `body`, outside code, in order of first appearance.
pub fn mentions(body: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut fence: Option<(u8, usize)> = None;
    let mut prose = String::new();
    for line in body.split('\n') {
        let trimmed = line.trim_start_matches(' ');
        let indent = line.len() - trimmed.len();
        let run = |c: u8| trimmed.bytes().take_while(|b| *b == c).count();
        match fence {
            Some((c, n)) => {
                if indent <= 3 && run(c) >= n && trimmed[run(c)..].trim().is_empty() {
                    fence = None;
                }
            }
            None => {
                let opener = [b'`', b'~'].into_iter().find(|c| indent <= 3 && run(*c) >= 3);
                match opener {
                    Some(c) => {
                        scan_prose(&prose, &mut out);
                        prose.clear();
                        fence = Some((c, run(c)));
                    }
                    None => {
                        prose.push_str(line);
                        prose.push('\n');
                    }
                }
            }
        }
    }
    scan_prose(&prose, &mut out);
    out
}

/// Mentions in text outside fences, skipping code spans.
fn scan_prose(text: &str, out: &mut Vec<String>) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'`' => {
                let n = bytes[i..].iter().take_while(|b| **b == b'`').count();
                match closing_run(bytes, i + n, n) {
                    Some(end) => i = end,
                    // An unmatched run is literal backticks.
                    None => i += n,
                }
            }
            b'@' if i == 0 || !is_name_char(bytes[i - 1]) => {
                let start = i + 1;
                let mut end = start;
                while end < bytes.len() && is_name_char(bytes[end]) {
                    end += 1;
                }
                while end > start && matches!(bytes[end - 1], b'.' | b'-') {
                    end -= 1;
                }
                if end > start && bytes[start].is_ascii_alphanumeric() {
                    let name = &text[start..end];
                    if !out.iter().any(|m| m == name) {
                        out.push(name.to_string());
                    }
                }
                i = end.max(i + 1);
            }
            _ => i += 1,
        }
    }
}

/// The offset after the next run of exactly `n` backticks at or after `from`.
fn closing_run(bytes: &[u8], from: usize, n: usize) -> Option<usize> {
    let mut j = from;
    while j < bytes.len() {
        if bytes[j] == b'`' {
            let m = bytes[j..].iter().take_while(|b| **b == b'`').count();
            if m == n {
                return Some(j + m);
            }
            j += m;
        } else {
            j += 1;
        }
    }
    None
}

fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_outside_code_count_and_inside_do_not() {
        let table: &[(&str, &[&str])] = &[
            ("@bob please look", &["bob"]),
            ("hi @bob and @carol, and @bob again", &["bob", "carol"]),
            ("thanks @bob.", &["bob"]),
            ("ask @w-1.x- now", &["w-1.x"]),
            ("mail me at a@b.com", &[]),
            ("an @ alone, @-dash, @.dot", &[]),
            ("`@bob` is code", &[]),
            ("``a ` @bob ``  @carol", &["carol"]),
            ("an unmatched ` then @bob", &["bob"]),
            ("```\n@bob in a fence\n```\n@carol after", &["carol"]),
            ("~~~~\n@bob\n~~~\nstill in it @dan\n~~~~\n@eve", &["eve"]),
            ("   ```rust\n@bob\n   ```\n", &[]),
            ("    ```\n@bob indented four is no fence", &["bob"]),
            ("```\nnever closed @bob", &[]),
            ("@channel and @human", &["channel", "human"]),
            ("(@bob)\n@carol:", &["bob", "carol"]),
        ];
        for (body, want) in table {
            assert_eq!(mentions(body), want.iter().map(|s| s.to_string()).collect::<Vec<_>>(), "{body:?}");
        }
    }
}
