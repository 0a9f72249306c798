//! Window titles: what of a title change is news.
//!
//! Owns the rule that tells a title whose text changed from one where only an animation frame
//! moved: agents animate their titles (Claude Code's `⠂`/`⠐` and idle `✳`, Codex's ten-frame
//! braille spinner and its blinking `[ ! ]`/`[ . ]` "Action Required" marker, the demo agent's
//! spinner), several times a second, for the whole of a turn (docs/agents-observed.md). A
//! change that only swaps, adds or drops such a frame at either end of the title says nothing
//! a person or a journal needs; the state rules read the frames themselves, from every title.
//! Pure: no clock, no I/O.

/// Whether `c` is a character agents animate their titles with: braille patterns, dingbats
/// (`✳ ✶ ✻ ✽ ✋`), geometric shapes (`◐ ◓ ● ○`), bullets, and the ASCII spinner's `| / - \ *`.
fn is_frame(c: char) -> bool {
    matches!(c,
        '\u{2800}'..='\u{28FF}'   // braille patterns
        | '\u{2700}'..='\u{27BF}' // dingbats
        | '\u{25A0}'..='\u{25FF}' // geometric shapes
        | '\u{2022}' | '\u{00B7}' | '\u{2219}' | '\u{22C5}' // bullets and middle dots
        | '|' | '/' | '-' | '\\' | '*'
    ) || c.is_whitespace()
}

/// A title without its animation: the frame characters at either end, and a leading blinking
/// marker of one non-alphanumeric character in brackets (`[ ! ] `, `[ . ] `).
fn without_frames(title: &str) -> &str {
    let mut text = title.trim_matches(is_frame);
    if let Some(rest) = text.strip_prefix('[')
        && let Some((inside, after)) = rest.split_once(']')
        && inside.chars().filter(|c| !c.is_whitespace()).count() <= 1
        && !inside.chars().any(char::is_alphanumeric)
    {
        text = after.trim_matches(is_frame);
    }
    text
}

/// Whether going from title `before` to `after` only moved its animation (a spinner frame, the
/// idle mark, a blinking marker), the words staying the same.
pub fn only_animation_changed(before: &str, after: &str) -> bool {
    before != after && without_frames(before) == without_frames(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinner_frames_idle_marks_and_blinking_markers_are_animation() {
        // Claude Code: the working frames and the idle mark.
        assert!(only_animation_changed("⠂ Claude Code", "⠐ Claude Code"));
        assert!(only_animation_changed("⠐ Claude Code", "✳ Claude Code"));
        // Codex: a spinner prefix comes and goes; the approval marker blinks.
        assert!(only_animation_changed("fix tests | work", "⠋ fix tests | work"));
        assert!(only_animation_changed("[ ! ] Action Required | work", "[ . ] Action Required | work"));
        // The demo agent, and an ASCII spinner at the end.
        assert!(only_animation_changed("⠙ demo-alpha", "✳ demo-alpha"));
        assert!(only_animation_changed("building |", "building /"));
    }

    #[test]
    fn a_change_of_words_is_news() {
        assert!(!only_animation_changed("✳ Claude Code", "✳ Fix the parser tests"));
        assert!(!only_animation_changed("⠋ fix tests | work", "⠋ fix docs | work"));
        assert!(!only_animation_changed("[ ! ] Action Required | work", "work"));
        assert!(!only_animation_changed("(3) Inbox", "(4) Inbox"));
        assert!(!only_animation_changed("same", "same"), "no change is no animation either");
        assert!(!only_animation_changed("", "✳ Claude Code"));
    }
}
