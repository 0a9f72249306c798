//! A prompt's identity as it crosses process boundaries: its normalised form and its signature.
//!
//! Owns [`normalize`] (the canonical text two renderings of one prompt share) and [`PromptSig`]
//! (digest, length and edges of that text), which hook events carry in journals and frames so
//! the delivery engine can tell its own prompt from a longer message without the whole text.
//! Invariant: the digest is FNV-1a 64 over the normalised UTF-8, the same in every build; a
//! second implementation must normalise exactly as [`normalize`] does.

use serde::{Deserialize, Serialize};

/// Collapse whitespace runs to one space and drop box-drawing and block characters, and every
/// character of zero width (combining marks, joiners, variation selectors — a terminal stacks,
/// splits or drops them, and agents redraw them differently), so a prompt and its on-screen
/// rendering (wrapped, framed, indented) compare equal.
pub fn normalize(text: &str) -> String {
    use unicode_width::UnicodeWidthChar;
    let mut out = String::with_capacity(text.len());
    let mut space = true;
    for c in text.chars() {
        if !c.is_whitespace() && c.width() == Some(0) {
            continue;
        }
        let frame = ('\u{2500}'..='\u{259f}').contains(&c) || matches!(c, '❯' | '›' | '>' | '│');
        if c.is_whitespace() || frame {
            if !space {
                out.push(' ');
                space = true;
            }
        } else {
            out.push(c);
            space = false;
        }
    }
    if out.ends_with(' ') {
        out.pop();
    }
    out
}

/// Characters of a submitted prompt's normalised start and end kept in a [`PromptSig`]: enough
/// to see a prompt inside a longer message (a draft glued before or after it), small enough for
/// every hook event in the journal.
pub const SIG_EDGE_CHARS: usize = 64;

/// What identifies a whole submitted prompt without carrying it (prompts may be 256 KiB): a
/// digest and the length of its normalised text ([`normalize`]), and its first and
/// last [`SIG_EDGE_CHARS`] normalised characters. Two prompts are the same exactly when their
/// digests are; a prompt was submitted inside a longer message when the message is longer and
/// starts with its start or ends with its end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptSig {
    pub digest: String,
    pub chars: usize,
    pub head: String,
    pub tail: String,
}

impl PromptSig {
    pub fn of(text: &str) -> PromptSig {
        let norm = normalize(text);
        let chars = norm.chars().count();
        PromptSig {
            digest: format!("{:016x}", fnv1a(norm.as_bytes())),
            chars,
            head: norm.chars().take(SIG_EDGE_CHARS).collect(),
            tail: norm.chars().skip(chars.saturating_sub(SIG_EDGE_CHARS)).collect(),
        }
    }

    /// Whether `self` (a submitted message) carries `prompt` and more besides.
    pub fn carries_more_than(&self, prompt: &PromptSig) -> bool {
        let edge = |s: &str| s.chars().take(24).collect::<String>();
        let tail_edge = |s: &str| {
            let n = s.chars().count();
            s.chars().skip(n.saturating_sub(24)).collect::<String>()
        };
        self.chars > prompt.chars
            && !prompt.head.is_empty()
            && (self.head.contains(&edge(&prompt.head)) || self.tail.contains(&tail_edge(&prompt.tail)))
    }
}

/// 64-bit FNV-1a: a stable digest (the same in every build and on every machine, unlike std's
/// hasher), written here because it is six lines.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}
