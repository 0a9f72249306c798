//! "Did you mean …?": the nearest known names to a word that names nothing.
//!
//! Owns the one rule every command uses to suggest a session (or key, or channel) name when it
//! is given one that does not exist: a typo one or two edits away (a transposition counts as
//! one), or the start of a name (`demo` for `demo-alpha`). Invariants: a suggestion is always
//! one of the candidates given, never the word itself; at most [`MAX_SUGGESTIONS`] are made,
//! the nearest first; the comparison ignores case. No clock, and no files but the session
//! directory's listing [`unknown_session_in`] reads. Used by every command that takes a session
//! name (the CLI's, and `desk keys` through [`crate::keys`]).

/// Three: enough to cover `demo` matching a small fleet's `demo-alpha`, `demo-beta`,
/// `demo-gamma`, few enough to read at a glance in one error line.
pub const MAX_SUGGESTIONS: usize = 3;

/// Edits allowed between a word and a name it may be a typo of: one for short words (a
/// three-letter word is two edits from most other three-letter words), two from six characters
/// on (`demo-alhpa`, `deom-alpha`), never more — past that a suggestion is a guess.
fn allowed_edits(word: &str) -> usize {
    if word.chars().count() < 6 { 1 } else { 2 }
}

/// The candidates `word` is most likely a typo or the start of, nearest first.
pub fn nearest<'a, I>(word: &str, candidates: I) -> Vec<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let lower = word.to_lowercase();
    let allowed = allowed_edits(word);
    let mut scored: Vec<(usize, &'a str)> = candidates
        .into_iter()
        .filter(|c| !c.eq_ignore_ascii_case(word))
        .filter_map(|c| {
            let other = c.to_lowercase();
            let edits = strsim::damerau_levenshtein(&lower, &other);
            if edits <= allowed {
                Some((edits, c))
            } else if !lower.is_empty() && other.starts_with(&lower) {
                // A name typed short: after every typo (they are nearer).
                Some((allowed + 1 + other.len() - lower.len(), c))
            } else {
                None
            }
        })
        .collect();
    scored.sort();
    scored.dedup();
    scored.into_iter().take(MAX_SUGGESTIONS).map(|(_, c)| c).collect()
}

/// `did you mean a, b or c?` for the suggestions, or `None` when there are none.
pub fn did_you_mean(suggestions: &[&str]) -> Option<String> {
    let (last, rest) = suggestions.split_last()?;
    Some(if rest.is_empty() {
        format!("did you mean {last}?")
    } else {
        format!("did you mean {} or {last}?", rest.join(", "))
    })
}

/// The message for a session name that names no session, with the nearest names there are.
pub fn unknown_session(name: &str, known: &[String]) -> String {
    match did_you_mean(&nearest(name, known.iter().map(String::as_str))) {
        Some(hint) => format!("no session named {name}; {hint} (desk ls lists the sessions)"),
        None if known.is_empty() => {
            format!("no session named {name}, and no session exists; start one with: desk new {name} -- CMD")
        }
        None => format!("no session named {name} (desk ls lists the sessions; desk new {name} -- CMD starts one)"),
    }
}

/// [`unknown_session`] with the session names read from `paths` (none when they cannot be read:
/// the message then says only what was wrong).
pub fn unknown_session_in(paths: &crate::paths::Paths, name: &str) -> String {
    let known: Vec<String> =
        paths.session_names().unwrap_or_default().into_iter().map(|n| n.as_str().to_string()).collect();
    unknown_session(name, &known)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLEET: [&str; 4] = ["demo-alpha", "demo-beta", "demo-gamma", "api"];

    #[test]
    fn a_typo_suggests_the_name_it_is_near() {
        assert_eq!(nearest("demo-alpah", FLEET), vec!["demo-alpha"]);
        assert_eq!(nearest("demo-alph", FLEET), vec!["demo-alpha"]);
        assert_eq!(nearest("DEMO-BETA2", FLEET), vec!["demo-beta"]);
        assert_eq!(nearest("apu", FLEET), vec!["api"]);
    }

    #[test]
    fn a_name_typed_short_suggests_what_it_starts() {
        assert_eq!(nearest("demo", FLEET), vec!["demo-beta", "demo-alpha", "demo-gamma"]);
    }

    #[test]
    fn nothing_near_suggests_nothing() {
        assert!(nearest("nosuch", FLEET).is_empty());
        assert!(nearest("", FLEET).is_empty());
        assert!(nearest("x", Vec::<&str>::new()).is_empty());
    }

    #[test]
    fn the_message_names_the_suggestions_or_says_how_to_start_one() {
        let known: Vec<String> = FLEET.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            unknown_session("demo-alpah", &known),
            "no session named demo-alpah; did you mean demo-alpha? (desk ls lists the sessions)"
        );
        assert!(unknown_session("nosuch", &known).contains("desk ls lists the sessions"));
        assert!(unknown_session("nosuch", &[]).contains("start one with: desk new nosuch -- CMD"));
        assert_eq!(did_you_mean(&["a", "b", "c"]).unwrap(), "did you mean a, b or c?");
    }
}
