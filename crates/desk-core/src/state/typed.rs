//! Text someone typed into a session, kept so that its echo on the screen is not taken for what
//! the agent itself draws.
//!
//! Owns the last few things typed into a session (a prompt desk pasted, a line a person or `desk
//! keys` typed) and the test of whether a screen rule's match is only such an echo: a prompt
//! that quotes a dialog ("… Do you want to run this command? …") shows in the agent's input
//! box, and later in its transcript, and a rule looking for that dialog must not match it.
//! Invariants: bounded ([`KEPT`] texts, each at most [`KEPT_CHARS`] characters at either end);
//! a match counts as an echo only when the text left of it (on its row and the few rows above)
//! or right of it on its row continues it as a typed text does, for [`ECHO_CONTEXT`]
//! characters. A dialog draws its words on rows of their own, under its command and description,
//! so a real dialog is not taken for an echo unless a prompt quoted those rows word for word.
//! (The price: a prompt that is nothing but a dialog's words, a row each, still reads as that
//! dialog.) Pure.

use std::collections::VecDeque;

use desk_wire::prompt::normalize;

/// The last 8 texts typed are kept: a transcript shows a screenful of recent prompts at most,
/// and a person's line or a digest prompt is one text each.
const KEPT: usize = 8;

/// Of a long text, its first and last 4096 characters are kept: an input box shows the end of
/// a long prompt and a transcript its start (or a placeholder for the rest), and a text never
/// costs more than a few KiB to keep.
const KEPT_CHARS: usize = 4096;

/// What was typed into one session lately, normalised ([`normalize`]).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Typed {
    /// Finished texts, oldest first, each as its kept pieces (the whole, or head and tail).
    texts: VecDeque<Vec<String>>,
    /// The text being typed (no Enter yet), raw.
    open: String,
}

impl Typed {
    /// Bytes written to the session's terminal by someone (a paste, keys): an Enter alone ends
    /// the text being typed; anything else is part of it (a paste's own newlines included).
    /// Escape sequences (bracketed-paste markers, arrow keys) and controls are not text.
    pub fn on_input(&mut self, bytes: &[u8]) {
        if matches!(bytes, b"\r" | b"\n" | b"\r\n") {
            return self.finish();
        }
        let text = crate::delivery::text::sanitize(&String::from_utf8_lossy(bytes));
        self.open.push_str(&text);
        // Bounded while it grows: the head and tail are what is kept of it in the end.
        let chars = self.open.chars().count();
        if chars > 4 * KEPT_CHARS {
            let head: String = self.open.chars().take(KEPT_CHARS).collect();
            let tail: String = self.open.chars().skip(chars - KEPT_CHARS).collect();
            self.open = format!("{head}\n{tail}");
        }
    }

    /// A whole text typed at once (a prompt desk delivers).
    pub fn push_text(&mut self, text: &str) {
        self.finish();
        self.open = text.to_string();
        self.finish();
    }

    fn finish(&mut self) {
        let text = std::mem::take(&mut self.open);
        let norm = normalize(&text);
        if norm.is_empty() {
            return;
        }
        let chars = norm.chars().count();
        let pieces = if chars <= 2 * KEPT_CHARS {
            vec![norm]
        } else {
            vec![norm.chars().take(KEPT_CHARS).collect(), norm.chars().skip(chars - KEPT_CHARS).collect()]
        };
        if self.texts.len() == KEPT {
            self.texts.pop_front();
        }
        self.texts.push_back(pieces);
    }

    /// Every kept piece, the text being typed too.
    fn pieces(&self) -> impl Iterator<Item = String> + '_ {
        let open = Some(normalize(&self.open)).filter(|t| !t.is_empty());
        self.texts.iter().flatten().cloned().chain(open)
    }

    /// Whether the match `start..end` (byte offsets) in `rows` joined by newlines lies in an
    /// echo of typed text: on the rows it lies on, the text beside it (left of it on its first
    /// row, right of it on its last) continues it as one typed text does, for at least
    /// [`ECHO_CONTEXT`] characters. A dialog draws its words on rows of their own, so its match
    /// has nothing beside it and is never an echo, whatever was typed.
    pub fn echoes(&self, rows: &[String], start: usize, end: usize) -> bool {
        if self.texts.is_empty() && self.open.is_empty() {
            return false;
        }
        let joined = rows.join("\n");
        let (Some(before), Some(matched), Some(after)) =
            (joined.get(..start), joined.get(start..end), joined.get(end..))
        else {
            return false;
        };
        // Left of it: its own row, and the rows just above (a prompt's first line above the
        // quoted words); right of it: its own row only (the options under a dialog's question
        // are the same words in a prompt that quotes them and in the dialog itself).
        let above: Vec<&str> = before.rsplit('\n').take(1 + ROWS_ABOVE).collect();
        let left = normalize(&above.iter().rev().copied().collect::<Vec<_>>().join("\n"));
        let right = normalize(after.split('\n').next().unwrap_or(""));
        let matched = normalize(matched);
        if matched.is_empty() {
            return false;
        }
        self.pieces().any(|text| {
            text.match_indices(matched.as_str()).any(|(at, _)| {
                let typed_left = text[..at].trim_end();
                let typed_right = text[at + matched.len()..].trim_start();
                common_suffix(&left, typed_left) + common_prefix(&right, typed_right) >= ECHO_CONTEXT
            })
        })
    }
}

/// 8 characters of the prompt beside a dialog's words show that they are the prompt's: more
/// than an option's number and label (`1. Yes`), less than a word or two of any sentence.
const ECHO_CONTEXT: usize = 8;

/// 3 rows above a match are read as its context: a prompt's opening line, wrapped, above the
/// quoted words. A dialog's rows above its question (its command, its description) agree with
/// a typed text only where it quoted them word for word.
const ROWS_ABOVE: usize = 3;

/// How many characters `a` and `b` share at their ends.
fn common_suffix(a: &str, b: &str) -> usize {
    a.chars().rev().zip(b.chars().rev()).take_while(|(x, y)| x == y).count()
}

/// How many characters `a` and `b` share at their starts.
fn common_prefix(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn echo_of(typed: &Typed, screen: &[String], needle: &str) -> bool {
        let joined = screen.join("\n");
        let start = joined.find(needle).expect("on screen");
        typed.echoes(screen, start, start + needle.len())
    }

    #[test]
    fn a_prompt_quoting_a_dialog_is_an_echo_where_it_shows_and_the_dialog_is_not() {
        let mut typed = Typed::default();
        typed.push_text("Please answer: Do you want to run this command? yes or no");
        let question = "Do you want to run this command?";
        // In the input box, and in the transcript.
        let boxed = rows(&["╭──────╮", "│ > Please answer: Do you want to run this command? yes or no │", "╰──────╯"]);
        assert!(echo_of(&typed, &boxed, question));
        let wrapped = rows(&["> Please answer: Do you want to run", "  this command? yes or no", "● ok"]);
        assert!(echo_of(&typed, &wrapped, "run\n  this command?"));
        // The dialog itself: its row holds its words only.
        let dialog = rows(&["│ Bash command", "│   touch x", "│ Do you want to run this command?", "│ ❯ 1. Yes"]);
        assert!(!echo_of(&typed, &dialog, question));
        // Nothing typed: nothing is an echo.
        assert!(!echo_of(&Typed::default(), &boxed, question));
    }

    #[test]
    fn an_agent_quoting_the_prompt_is_an_echo_and_a_quote_of_a_whole_dialog_is_not() {
        let mut typed = Typed::default();
        typed.push_text("Please answer: Do you want to run this command? yes or no");
        // The agent's reply quotes the prompt.
        let reply = rows(&["● Done: Please answer: Do you want to run this command? yes or no"]);
        assert!(echo_of(&typed, &reply, "Do you want to run this command?"));
        // A prompt whose lines are a dialog's own lines, and nothing beside them, draws rows a
        // real dialog draws too: those read as the dialog (the safe way to be wrong).
        let mut bare = Typed::default();
        bare.push_text("Do you want to proceed?\n1. Yes\n2. No");
        let transcript = rows(&["> Do you want to proceed?", "  1. Yes", "  2. No"]);
        assert!(!echo_of(&bare, &transcript, "Do you want to proceed?\n  1. Yes"));
        // With a line of the prompt above them, they are its echo.
        let mut headed = Typed::default();
        headed.push_text("Quote TOKEN-quote5:\nDo you want to proceed?\n1. Yes\n2. No");
        let transcript = rows(&["❯ Quote TOKEN-quote5:", "  Do you want to proceed?", "  1. Yes", "  2. No"]);
        assert!(echo_of(&headed, &transcript, "Do you want to proceed?\n  1. Yes"));
        // With words of the prompt beside them, too.
        let mut quoted = Typed::default();
        quoted.push_text("I saw this dialog: Do you want to proceed?\n1. Yes\n2. No");
        let transcript = rows(&["> I saw this dialog: Do you want to proceed?", "  1. Yes", "  2. No"]);
        assert!(echo_of(&quoted, &transcript, "Do you want to proceed?\n  1. Yes"));
        // The real dialog, under those prompts: nothing of them beside or above its words.
        let real = rows(&[
            " Bash command",
            "   touch x",
            "   Create a marker file",
            " Do you want to proceed?",
            " ❯ 1. Yes",
            "   2. No",
        ]);
        for typed in [&quoted, &headed] {
            assert!(!echo_of(typed, &real, "Do you want to proceed?\n ❯ 1. Yes"));
        }
    }

    #[test]
    fn keys_typed_one_by_one_become_one_text_at_the_enter_and_only_the_last_few_are_kept() {
        let mut typed = Typed::default();
        for b in "Tell me: Do you want to run this command? no".bytes() {
            typed.on_input(&[b]);
        }
        let screen = rows(&["│ > Tell me: Do you want to run this command? no │"]);
        assert!(echo_of(&typed, &screen, "Do you want to run this command?"), "while typed");
        typed.on_input(b"\r");
        assert!(echo_of(&typed, &screen, "Do you want to run this command?"), "once entered");
        // Bracketed paste markers are not text.
        typed.on_input(b"\x1b[200~pasted text\x1b[201~");
        typed.on_input(b"\r");
        assert!(typed.pieces().any(|p| p == "pasted text"));
        for i in 0..KEPT {
            typed.push_text(&format!("filler {i}"));
        }
        assert!(!echo_of(&typed, &screen, "Do you want to run this command?"), "forgotten");
        assert_eq!(typed.texts.len(), KEPT);
    }

    #[test]
    fn a_long_text_keeps_its_head_and_tail() {
        let mut typed = Typed::default();
        let long = format!("start {} Do you want to run this command? end", "x ".repeat(20_000));
        typed.push_text(&long);
        let kept: usize = typed.pieces().map(|p| p.chars().count()).sum();
        assert_eq!(kept, 2 * KEPT_CHARS);
        let screen = rows(&["│ > x x x Do you want to run this command? end │"]);
        assert!(echo_of(&typed, &screen, "Do you want to run this command?"));
    }
}
