//! The text being composed in the input box.
//!
//! Owns the unsubmitted input: typed characters and pasted blocks, in order. A large paste is
//! kept whole but shown as a placeholder `[Pasted text #K +L lines]`, as Claude Code does, so
//! what is on screen is not what will be submitted; [`Composer::expanded`] is the submission,
//! [`Composer::display`] is the screen. Invariants: a placeholder is one unit (Backspace removes
//! it whole, never half a label), and the total text held never exceeds
//! [`MAX_COMPOSER_BYTES`]; input beyond it is refused (the caller reports it), never truncated
//! silently in the middle of a prompt.

use std::fmt::Write as _;

/// 16 MiB: two maximal pastes (the decoder caps one at 8 MiB). Far beyond any prompt desk
/// delivers; the bound only stops a runaway writer from growing the agent without limit.
pub const MAX_COMPOSER_BYTES: usize = 16 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Char(char),
    /// A collapsed paste: its number, full text and line count.
    Paste {
        id: u32,
        text: String,
        lines: usize,
    },
}

/// See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct Composer {
    segments: Vec<Segment>,
    bytes: usize,
}

impl Composer {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// True when submitting would send nothing (only whitespace).
    pub fn is_blank(&self) -> bool {
        self.segments.iter().all(|s| match s {
            Segment::Char(c) => c.is_whitespace(),
            Segment::Paste { text, .. } => text.trim().is_empty(),
        })
    }

    /// Append one character; false (and nothing changes) when the box is full.
    pub fn push_char(&mut self, c: char) -> bool {
        if self.bytes + c.len_utf8() > MAX_COMPOSER_BYTES {
            return false;
        }
        self.bytes += c.len_utf8();
        self.segments.push(Segment::Char(c));
        true
    }

    /// Append text character by character (a small paste); false when it does not fit whole.
    pub fn push_text(&mut self, text: &str) -> bool {
        if self.bytes + text.len() > MAX_COMPOSER_BYTES {
            return false;
        }
        self.bytes += text.len();
        self.segments.extend(text.chars().map(Segment::Char));
        true
    }

    /// Append a collapsed paste numbered `id`; false when it does not fit.
    pub fn push_paste(&mut self, id: u32, text: String) -> bool {
        if self.bytes + text.len() > MAX_COMPOSER_BYTES {
            return false;
        }
        self.bytes += text.len();
        let lines = line_count(&text);
        self.segments.push(Segment::Paste { id, text, lines });
        true
    }

    /// Remove the last character or the last whole paste.
    pub fn backspace(&mut self) {
        if let Some(s) = self.segments.pop() {
            self.bytes -= segment_len(&s);
        }
    }

    /// Remove everything after the last newline (the line being edited).
    pub fn kill_line(&mut self) {
        while let Some(last) = self.segments.last() {
            if *last == Segment::Char('\n') {
                break;
            }
            self.backspace();
        }
    }

    pub fn clear(&mut self) {
        self.segments.clear();
        self.bytes = 0;
    }

    /// The text that would be submitted: pastes expanded.
    pub fn expanded(&self) -> String {
        let mut out = String::with_capacity(self.bytes);
        for s in &self.segments {
            match s {
                Segment::Char(c) => out.push(*c),
                Segment::Paste { text, .. } => out.push_str(text),
            }
        }
        out
    }

    /// The text as shown in the input box: pastes as placeholders.
    pub fn display(&self) -> String {
        let mut out = String::new();
        for s in &self.segments {
            match s {
                Segment::Char(c) => out.push(*c),
                Segment::Paste { id, lines, .. } => {
                    let _ = write!(out, "{}", placeholder(*id, *lines));
                }
            }
        }
        out
    }

    /// Empty the box and return the prompt to submit (surrounding whitespace removed, as agents
    /// do), or `None` when there is nothing to submit (the box is then left as it was).
    pub fn take_prompt(&mut self) -> Option<String> {
        if self.is_blank() {
            return None;
        }
        let prompt = self.expanded().trim().to_string();
        self.clear();
        Some(prompt)
    }
}

/// The placeholder shown for collapsed paste number `id` of `lines` lines.
pub fn placeholder(id: u32, lines: usize) -> String {
    format!("[Pasted text #{id} +{lines} lines]")
}

/// Lines in `text` as a reader counts them: a final line end does not start another line.
pub fn line_count(text: &str) -> usize {
    let body = text.strip_suffix('\n').unwrap_or(text);
    body.split('\n').count()
}

fn segment_len(s: &Segment) -> usize {
    match s {
        Segment::Char(c) => c.len_utf8(),
        Segment::Paste { text, .. } => text.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paste_is_shown_as_placeholder_and_submitted_whole() {
        let mut c = Composer::new();
        c.push_text("see: ");
        c.push_paste(1, "a\nb\nc\nd".into());
        assert_eq!(c.display(), "see: [Pasted text #1 +4 lines]");
        assert_eq!(c.take_prompt().as_deref(), Some("see: a\nb\nc\nd"));
        assert!(c.is_empty());
    }

    #[test]
    fn backspace_removes_a_placeholder_whole() {
        let mut c = Composer::new();
        c.push_char('x');
        c.push_paste(2, "1\n2\n3\n4".into());
        c.backspace();
        assert_eq!(c.display(), "x");
        assert_eq!(c.bytes, 1);
    }

    #[test]
    fn kill_line_stops_at_the_previous_newline() {
        let mut c = Composer::new();
        c.push_text("one\ntwo");
        c.kill_line();
        assert_eq!(c.expanded(), "one\n");
    }

    #[test]
    fn blank_input_is_not_a_prompt() {
        let mut c = Composer::new();
        c.push_text(" \n ");
        assert_eq!(c.take_prompt(), None);
        assert!(!c.is_empty());
    }

    #[test]
    fn line_count_ignores_a_final_newline() {
        assert_eq!(line_count("a\nb\n"), 2);
        assert_eq!(line_count("a"), 1);
        assert_eq!(line_count(""), 1);
    }
}
