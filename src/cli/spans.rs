//! How the command line writes a span of time: one style everywhere (`16s`, `5m`, `3h`, `2d`,
//! and `… ago` for a moment in the past), so `ls`, `queue`, `stuck` and `explain` read alike.
//! Pure: the caller passes both instants.

/// `ms` milliseconds as the largest whole unit: `16s`, `5m`, `3h`, `2d`.
pub(super) fn span(ms: u64) -> String {
    desk_core::time::span(ms)
}

/// How long before `now` (Unix ms) the moment `then` was: `16s ago`.
pub(super) fn ago(now: u64, then: u64) -> String {
    format!("{} ago", span(now.saturating_sub(then)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_span_is_its_largest_whole_unit() {
        assert_eq!(span(999), "0s");
        assert_eq!(span(16_400), "16s");
        assert_eq!(span(5 * 60_000 + 59_000), "5m");
        assert_eq!(span(3 * 3_600_000), "3h");
        assert_eq!(span(180 * 60_000), "3h", "not 180m");
        assert_eq!(span(2 * 86_400_000 + 1), "2d");
        assert_eq!(ago(10_000, 4_000), "6s ago");
        assert_eq!(ago(0, 4_000), "0s ago", "a clock that went back is no negative span");
    }
}
