//! What gets typed into an agent, and how its arrival is recognised on screen.
//!
//! Owns sanitising prompt text, framing it as a (bracketed) paste, rendering several items as
//! one digest prompt, and the screen arithmetic of verification: normalising text, finding a
//! prompt's fingerprint or a provider's paste placeholder in the input area, counted as a
//! delta against a baseline. Invariants: a sanitised prompt contains no ESC and no C0/C1
//! control except newline and tab, so nothing inside it can end a bracketed paste early or
//! send a key; a fingerprint is never empty for a non-blank prompt.

use regex_lite::Regex;

use super::item::Item;

/// The canonical-mode line limit of Linux's N_TTY: a longer line without a newline is
/// silently truncated by the kernel, so such a prompt is refused instead.
pub const CANONICAL_LINE_MAX: usize = 4095;

/// Characters of a prompt's first and last line used to recognise it on screen: enough to be
/// specific, short enough to fit an input box's first row on an 80-column terminal.
pub const FINGERPRINT_CHARS: usize = 24;

/// Remove every escape sequence whole (CSI, OSC, DCS/SOS/PM/APC strings, two- and
/// three-character ESC sequences, and their C1 forms), then DEL and every remaining C0/C1
/// control except newline and tab; CR and CRLF become LF.
///
/// Removing only the ESC would leave the rest of a sequence (`[31m`, `]0;title`, `[201~`) in
/// the prompt as text. A control string (OSC, DCS, ...) ends at its terminator (BEL or ST) or,
/// when unterminated, at the next other control character, so a stray `ESC ]` cannot swallow
/// the rest of a prompt.
pub fn sanitize(text: &str) -> String {
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => match chars.peek().copied() {
                Some('[') => {
                    chars.next();
                    skip_csi(&mut chars);
                }
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    chars.next();
                    skip_control_string(&mut chars);
                }
                Some(' '..='/') => {
                    // nF: intermediates, then one final character.
                    while chars.next_if(|c| (' '..='/').contains(c)).is_some() {}
                    chars.next_if(|c| ('0'..='~').contains(c));
                }
                Some('0'..='~') => {
                    // Fp/Fe/Fs: ESC and one character (ESC 7, ESC =, ESC c, ...).
                    chars.next();
                }
                _ => {}
            },
            '\u{9b}' => skip_csi(&mut chars),
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => skip_control_string(&mut chars),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Skip the rest of a CSI sequence after its introducer: parameter and intermediate
/// characters, then the final character if one follows.
fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while chars.next_if(|c| (' '..='?').contains(c)).is_some() {}
    chars.next_if(|c| ('@'..='~').contains(c));
}

/// Skip the body of a control string (OSC, DCS, SOS, PM, APC) and its terminator: BEL, ST
/// (`ESC \` or C1 0x9c). Any other control character ends it unconsumed.
fn skip_control_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(&c) = chars.peek() {
        match c {
            '\x07' | '\u{9c}' => {
                chars.next();
                return;
            }
            '\x1b' => {
                chars.next();
                chars.next_if_eq(&'\\');
                return;
            }
            c if c.is_control() => return,
            _ => {
                chars.next();
            }
        }
    }
}

/// Bytes that deliver `text`: wrapped in bracketed-paste markers when the application
/// switched bracketed paste on; newlines as the terminal's CR otherwise would submit each
/// line, so they stay LF inside a paste and become CR only outside one.
pub fn paste_bytes(text: &str, bracketed: bool) -> Vec<u8> {
    if bracketed {
        let mut out = b"\x1b[200~".to_vec();
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(b"\x1b[201~");
        out
    } else {
        text.replace('\n', "\r").into_bytes()
    }
}

/// How many lines typing `text` without bracketed paste enters: one per newline, and the last
/// line (which the delivery's own Enter ends), not counting a final newline's empty line.
pub fn typed_lines(text: &str) -> u32 {
    let lines = text.trim_end_matches('\n').split('\n').count();
    u32::try_from(lines).unwrap_or(u32::MAX)
}

/// A line too long for a canonical-mode reader, if any: its 1-based number and length.
pub fn overlong_line(text: &str) -> Option<(usize, usize)> {
    text.split('\n').enumerate().find(|(_, l)| l.len() > CANONICAL_LINE_MAX).map(|(i, l)| (i + 1, l.len()))
}

/// One prompt listing several items, so ten messages do not become ten turns.
pub fn digest(items: &[&Item]) -> String {
    let mut out = format!("You have {} messages (oldest first):\n", items.len());
    for (i, item) in items.iter().enumerate() {
        let time = crate::time::iso8601(item.created_ms);
        // The sender is one line of plain text: it must not forge another message's header.
        let from = sanitize(&item.from).replace(['\n', '\t'], " ");
        let from = if from.trim().is_empty() { "operator" } else { from.trim() };
        out.push_str(&format!(
            "\n--- message {} of {} · from {from} · {} UTC ---\n",
            i + 1,
            items.len(),
            &time[..19].replace('T', " ")
        ));
        out.push_str(item.text.trim_end());
        out.push('\n');
    }
    out
}

pub use desk_wire::prompt::normalize;

/// How a prompt is recognised on screen: the start of its first line and the end of its last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    pub head: String,
    pub tail: String,
}

pub fn fingerprint(text: &str) -> Fingerprint {
    let norm = |l: &str| normalize(l);
    let lines: Vec<String> = text.lines().map(norm).filter(|l| !l.is_empty()).collect();
    let first = lines.first().cloned().unwrap_or_default();
    let last = lines.last().cloned().unwrap_or_default();
    let head: String = first.chars().take(FINGERPRINT_CHARS).collect();
    let n = last.chars().count();
    let tail: String = last.chars().skip(n.saturating_sub(FINGERPRINT_CHARS)).collect();
    Fingerprint { head, tail }
}

/// Occurrences of the prompt and of paste placeholders in a screen region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Presence {
    pub text: usize,
    pub placeholders: usize,
}

impl Presence {
    /// Whether `self` shows more of the prompt than `baseline` did.
    pub fn more_than(self, baseline: Presence) -> bool {
        self.text > baseline.text || self.placeholders > baseline.placeholders
    }
}

fn count(hay: &str, needle: &str) -> usize {
    if needle.is_empty() { 0 } else { hay.matches(needle).count() }
}

/// Count the prompt's fingerprint and the provider's placeholders in `rows`.
pub fn presence(rows: &[String], fp: &Fingerprint, placeholder: Option<&Regex>) -> Presence {
    let joined = normalize(&rows.join("\n"));
    let text = count(&joined, &fp.head).max(count(&joined, &fp.tail));
    let placeholders = placeholder.map_or(0, |re| re.find_iter(&rows.join("\n")).count());
    Presence { text, placeholders }
}

/// Characters (whitespace aside) of a prompt's end that prove a box scrolled to it holds that
/// prompt: a person does not type 100 characters that end exactly as desk's prompt does; a
/// 40-row screen shows far more of a prompt than that.
pub const TAIL_PROOF: usize = 100;

/// What an agent's input box holds of a prompt desk pasted into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// The prompt and nothing else: its text (however the box wraps and indents it), or one
    /// paste placeholder whose counts agree with it.
    Exactly,
    /// The prompt together with other text (normalised), which someone else typed.
    Among(String),
    /// Not the prompt (other text, or an empty box).
    Not,
}

/// What `composer` (the box's text, normalised) holds of `prompt`. Whitespace is compared
/// away: the box wraps long lines, indents continuation rows and drops blank rows at its ends,
/// so the prompt's characters in order, and nothing else, is the proof that the box holds
/// exactly that text. A box too short for the prompt shows its end (the cursor's rows: Codex
/// scrolls a composer taller than the screen): the last [`TAIL_PROOF`] characters or more of it,
/// ending where it ends, and nothing else, is proof too. A placeholder proves it only through the counts its provider's pattern
/// names (`chars`, `lines`, or `newlines`: its line breaks) agreeing with the prompt; a
/// placeholder that names none proves nothing.
pub fn held(composer: &str, prompt: &str, placeholder: Option<&Regex>) -> Held {
    let squeeze = |t: &str| -> String { t.chars().filter(|c| !c.is_whitespace()).collect() };
    let shown = normalize(&as_screens_show(prompt));
    let (c, p) = (squeeze(composer), squeeze(&shown));
    if p.is_empty() || c.is_empty() {
        return Held::Not;
    }
    if c == p || (c.chars().count() >= TAIL_PROOF && p.ends_with(&c)) {
        return Held::Exactly;
    }
    if let Some(i) = composer.find(&shown) {
        let rest = format!("{} {}", &composer[..i], &composer[i + shown.len()..]);
        return Held::Among(normalize(&rest));
    }
    let Some(re) = placeholder else { return Held::Not };
    let ours: Vec<regex_lite::Match<'_>> = re
        .captures_iter(composer)
        .filter(|caps| placeholder_counts_agree(caps, prompt))
        .filter_map(|caps| caps.get(0))
        .collect();
    let [m] = ours.as_slice() else { return Held::Not };
    let rest = normalize(&format!("{} {}", &composer[..m.start()], &composer[m.end()..]));
    if rest.is_empty() { Held::Exactly } else { Held::Among(rest) }
}

/// A text as desk's screen model shows it: of an emoji sequence joined with ZWJ (U+200D), the
/// first emoji only (Codex draws `👨‍👩‍👧` whole; the screen keeps `👨`).
fn as_screens_show(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{200d}' {
            chars.next();
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether a placeholder's counts agree with a prompt: the text as pasted, or without its
/// leading and trailing blank lines (which some agents drop).
fn placeholder_counts_agree(caps: &regex_lite::Captures<'_>, prompt: &str) -> bool {
    let number = |name: &str| caps.name(name).and_then(|m| m.as_str().parse::<usize>().ok());
    let trimmed = prompt.trim_matches('\n');
    let lines = |t: &str| t.trim_end_matches('\n').split('\n').count();
    let agrees = |n: usize, of: &dyn Fn(&str) -> usize| n == of(prompt) || n == of(trimmed);
    match (number("chars"), number("lines"), number("newlines")) {
        (Some(n), _, _) => agrees(n, &|t: &str| t.chars().count()),
        (None, Some(n), _) => agrees(n, &lines),
        (None, None, Some(n)) => agrees(n, &|t: &str| t.matches('\n').count()),
        // A placeholder without a line count (Claude's "[Pasted text #N]") stands for one line.
        (None, None, None) if caps.len() > 1 => lines(trimmed) == 1,
        (None, None, None) => false,
    }
}

/// The rows of a screen that form the agent's input area: between the last row matching
/// `bottom` and the nearest row above it matching `top`; with only `bottom`, the `fallback`
/// rows above the last row matching it; with only `top`, from the last row matching it to the
/// end (an input box drawn at the bottom, however tall it grows); without either, or when the
/// borders are not on screen, the last `fallback` rows.
pub fn input_area<'a>(
    lines: &'a [String],
    top: Option<&Regex>,
    bottom: Option<&Regex>,
    fallback: usize,
) -> &'a [String] {
    let end = lines.iter().rposition(|l| !l.trim().is_empty()).map_or(0, |i| i + 1);
    let lines = &lines[..end];
    if let Some(bottom) = bottom
        && let Some(b) = lines.iter().rposition(|l| bottom.is_match(l))
    {
        match top {
            Some(top) => {
                if let Some(t) = lines[..b].iter().rposition(|l| top.is_match(l)) {
                    return &lines[t + 1..b];
                }
            }
            None => return &lines[b.saturating_sub(fallback)..b],
        }
    } else if bottom.is_none()
        && let Some(top) = top
        && let Some(t) = lines.iter().rposition(|l| top.is_match(l))
    {
        return &lines[t..];
    }
    &lines[lines.len().saturating_sub(fallback)..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::item::{ItemId, When};

    #[test]
    fn sanitising_removes_every_control_that_could_escape_a_paste() {
        let evil = "hi\x1b[201~\x1b[31mred\x07\x00\u{9b}2J\u{7f}\tok\r\nnext\rlast";
        assert_eq!(sanitize(evil), "hired\tok\nnext\nlast");
        assert!(!sanitize(evil).contains('\x1b'));
        // The sender named in a digest cannot escape the paste or forge a header either.
        let a = Item::new(
            ItemId::sequential(1),
            "s".into(),
            None,
            "one".into(),
            When::Now,
            "\x1b[201~x\n--- message 9".into(),
            1,
        );
        let b = Item::new(ItemId::sequential(2), "s".into(), None, "two".into(), When::Now, String::new(), 2);
        let d = digest(&[&a, &b]);
        assert!(!d.contains('\x1b') && d.contains("from x --- message 9 ·") && d.contains("from operator"), "{d}");
        assert_eq!(sanitize("✓ unicode stays — é"), "✓ unicode stays — é");
    }

    #[test]
    fn sanitising_removes_whole_escape_sequences_not_just_their_esc() {
        // CSI (colour, paste end, private mode), with parameters and intermediates.
        assert_eq!(sanitize("a\x1b[31mred\x1b[0m b\x1b[201~c\x1b[?2004h d\x1b[1 qe"), "ared bc de");
        // OSC ended by BEL and by ST; DCS, APC; C1 forms of CSI and OSC.
        assert_eq!(sanitize("x\x1b]0;title\x07y\x1b]8;;http://e\x1b\\z"), "xyz");
        assert_eq!(sanitize("p\x1bPq#0;1\x1b\\q\x1b_apc\x1b\\r"), "pqr");
        assert_eq!(sanitize("s\u{9b}1;2Ht\u{9d}2;t\u{9c}u"), "stu");
        // Two- and three-character ESC sequences (save cursor, charset, keypad).
        assert_eq!(sanitize("a\x1b7b\x1b(Bc\x1b=d"), "abcd");
        // An unterminated OSC ends at the next control: the next line survives.
        assert_eq!(sanitize("\x1b]0;never ended\nsecond line"), "\nsecond line");
        // A lone ESC at the end, and ESC before a newline.
        assert_eq!(sanitize("end\x1b"), "end");
        assert_eq!(sanitize("a\x1b\nb"), "a\nb");
        // A prompt made only of controls is empty, so `desk send` refuses it.
        assert_eq!(sanitize("\x1b[31m\x1b]0;t\x07\x1b[201~\x07\x00"), "");
    }

    #[test]
    fn pastes_are_bracketed_only_when_the_application_asked() {
        assert_eq!(paste_bytes("a\nb", true), b"\x1b[200~a\nb\x1b[201~");
        assert_eq!(paste_bytes("a\nb", false), b"a\rb");
    }

    #[test]
    fn overlong_lines_are_found() {
        assert_eq!(overlong_line("short\nlines"), None);
        let long = format!("ok\n{}\n", "x".repeat(5000));
        assert_eq!(overlong_line(&long), Some((2, 5000)));
    }

    #[test]
    fn a_digest_lists_every_item_with_its_sender() {
        let a = Item::new(ItemId::sequential(0), "s".into(), None, "first prompt".into(), When::Now, "alice".into(), 0);
        let b =
            Item::new(ItemId::sequential(1), "s".into(), None, "second\nprompt".into(), When::Now, "".into(), 60_000);
        let text = digest(&[&a, &b]);
        assert!(text.starts_with("You have 2 messages"));
        assert!(text.contains("message 1 of 2 · from alice · 1970-01-01 00:00:00 UTC ---\nfirst prompt\n"));
        assert!(text.contains("from operator · 1970-01-01 00:01:00 UTC ---\nsecond\nprompt\n"));
    }

    #[test]
    fn a_wrapped_framed_prompt_is_found_and_counted_against_a_baseline() {
        let prompt = "please refactor the parser module and keep the tests green";
        let fp = fingerprint(prompt);
        assert_eq!(fp.head, "please refactor the pars");
        let before = vec![
            "╭────────────────────╮".to_string(),
            "│ >                  │".to_string(),
            "╰────────────────────╯".to_string(),
        ];
        let after = vec![
            "╭────────────────────╮".to_string(),
            "│ > please refactor th │".to_string(),
            "│ e parser module and  │".to_string(),
            "│ keep the tests green │".to_string(),
            "╰────────────────────╯".to_string(),
        ];
        let base = presence(&before, &fp, None);
        let now = presence(&after, &fp, None);
        assert_eq!(base, Presence::default());
        // The head is cut by the wrap ("th" | "e"), the tail is whole.
        assert!(now.more_than(base), "{now:?}");
    }

    #[test]
    fn placeholders_count_as_presence() {
        let re = Regex::new(r"\[Pasted text #\d+ \+\d+ lines\]").unwrap();
        let fp = fingerprint("line 1\nline 2\nline 3\nline 4");
        let rows = vec!["> [Pasted text #1 +4 lines]".to_string()];
        let p = presence(&rows, &fp, Some(&re));
        assert_eq!(p.placeholders, 1);
        assert!(p.more_than(Presence { text: 0, placeholders: 0 }));
        assert!(!p.more_than(Presence { text: 0, placeholders: 1 }));
    }

    #[test]
    fn the_input_area_is_found_between_its_borders() {
        let lines: Vec<String> = ["> earlier prompt", "● reply", "╭──╮", "│ > typed │", "╰──╯", "  idle", ""]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let top = Regex::new("^╭").unwrap();
        let bottom = Regex::new("^╰").unwrap();
        assert_eq!(input_area(&lines, Some(&top), Some(&bottom), 3), &lines[3..4]);
        assert_eq!(input_area(&lines, None, None, 2), &lines[4..6]);
        assert_eq!(input_area(&lines, None, Some(&bottom), 1), &lines[3..4]);
        // Only a top: from the last row that matches it to the end, however tall.
        let prompt = Regex::new("^› ").unwrap();
        let lines: Vec<String> = ["› submitted", "• reply", "› first", "", "  second", "", "  footer"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(input_area(&lines, Some(&prompt), None, 2), &lines[2..]);
    }

    #[test]
    fn a_box_holds_a_prompt_exactly_however_it_wraps_or_among_other_text() {
        let prompt = "First paragraph.\n\nSecond paragraph that is long\n\n  indented code";
        // Wrapped and indented as a box draws it, blank rows gone.
        let composer = normalize("First paragraph.\n  Second paragraph that\n  is long\n    indented code");
        assert_eq!(held(&composer, prompt, None), Held::Exactly);
        let composer = normalize("draft first First paragraph. Second paragraph that is long indented code");
        assert_eq!(held(&composer, prompt, None), Held::Among("draft first".into()));
        assert_eq!(held("First paragraph.", prompt, None), Held::Not);
        // A box scrolled to the end of a tall prompt shows its last rows only.
        let tall: String = (1..=60).map(|i| format!("- item {i:02}\n")).collect();
        let end: String = (37..=60).map(|i| format!("- item {i:02} ")).collect();
        assert_eq!(held(&normalize(&end), &tall, None), Held::Exactly);
        assert_eq!(held("- item 59 - item 60", &tall, None), Held::Not, "too little of it to tell");
        assert_eq!(held("", prompt, None), Held::Not);
    }

    #[test]
    fn a_placeholder_proves_the_prompt_only_through_counts_that_agree() {
        let claude = Regex::new(r"\[Pasted text #\d+(?: \+(?P<newlines>\d+) lines)?\]").unwrap();
        let codex = Regex::new(r"\[Pasted Content (?P<chars>\d+) chars\]").unwrap();
        let opencode = Regex::new(r"\[Pasted ~(?P<lines>\d+) lines\]").unwrap();
        let unnamed = Regex::new(r"\[Pasted text #\d+ \+\d+ lines\]").unwrap();
        let prompt = "one\ntwo\nthree\nfour\n";
        assert_eq!(held("[Pasted text #3 +3 lines]", prompt, Some(&claude)), Held::Exactly);
        assert_eq!(held("[Pasted text #3 +7 lines]", prompt, Some(&claude)), Held::Not);
        assert_eq!(held("[Pasted ~4 lines]", prompt, Some(&opencode)), Held::Exactly);
        assert_eq!(held("[Pasted Content 19 chars]", prompt, Some(&codex)), Held::Exactly);
        assert_eq!(held("[Pasted Content 20 chars]", prompt, Some(&codex)), Held::Not);
        assert_eq!(held("hi [Pasted ~4 lines]", prompt, Some(&opencode)), Held::Among("hi".into()));
        // Leading and trailing blank lines may be dropped by the agent.
        assert_eq!(held("[Pasted ~4 lines]", &format!("\n\n{prompt}\n\n"), Some(&opencode)), Held::Exactly);
        // Without named counts a placeholder proves nothing.
        assert_eq!(held("[Pasted text #1 +4 lines]", prompt, Some(&unnamed)), Held::Not);
        let long = "x".repeat(900);
        assert_eq!(held("[Pasted text #1]", &long, Some(&claude)), Held::Exactly);
    }

    #[test]
    fn a_prompt_with_combining_marks_and_joined_emoji_is_found_on_a_real_screen() {
        let prompt = "tok000107q Z\u{324}\u{354}\u{367}\u{311} family \u{1f468}\u{200d}\u{1f469}\u{200d}\u{1f467} done";
        let mut screen = desk_term::screen::Screen::new(60, 5);
        screen.process(format!("> {prompt}").as_bytes());
        let rows = screen.text_rows();
        let fp = fingerprint(prompt);
        assert_eq!(presence(&rows, &fp, None).text, 1, "{fp:?} in {rows:?}");
    }
}
