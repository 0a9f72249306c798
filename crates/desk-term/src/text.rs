//! Cutting text to a bound without splitting a character: the one way desk shortens a string,
//! for a field with a byte limit (an event's title, a frame's error message, a notification)
//! with [`cut_bytes`], or for a person (a preview, a reason) with [`ellipsize`]. Pure.

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
pub fn cut_bytes(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `text` in at most `max` characters: whole when it fits, else its first `max - 1` and `…`.
pub fn ellipsize(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_keep_whole_characters() {
        assert_eq!(cut_bytes("héllo", 2), "h");
        assert_eq!(cut_bytes("héllo", 3), "hé");
        assert_eq!(cut_bytes("hello", 10), "hello");
        assert_eq!(cut_bytes("", 0), "");
        assert_eq!(ellipsize("héllo", 5), "héllo");
        assert_eq!(ellipsize("héllo wörld", 5), "héll…");
        assert_eq!(ellipsize("abc", 0), "…");
    }
}
