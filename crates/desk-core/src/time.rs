//! Time as desk writes and spends it: RFC 3339 in UTC from Unix milliseconds, spans of time as
//! people read them, doubling waits between retries, and instants carried across a process
//! image as milliseconds before "now" (a master's handover).
//!
//! Pure arithmetic; the caller reads the clock.

use std::time::{Duration, Instant};

/// Milliseconds from `then` to `now` (0 when `then` is later): an instant as another process
/// image can take it back with [`instant_before`].
pub fn ms_before(now: Instant, then: Instant) -> u64 {
    u64::try_from(now.saturating_duration_since(then).as_millis()).unwrap_or(u64::MAX)
}

/// The instant `ms` milliseconds before `now` (`now` itself when the clock does not reach back
/// that far).
pub fn instant_before(now: Instant, ms: u64) -> Instant {
    now.checked_sub(Duration::from_millis(ms)).unwrap_or(now)
}

/// A doubling wait between retries: `first` after the first failure, then twice the previous
/// wait, never more than `max`, until [`Backoff::reset`]. Every retry loop in desk backs off
/// through this one (the delivery engine's per-session retries, the daemon's intake, channel
/// and refused-master retries, the restart supervisor's restarts). Pure: the caller adds the
/// wait to its clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    failures: u32,
}

impl Backoff {
    pub const fn new(first: Duration, max: Duration) -> Backoff {
        Backoff { first, max, failures: 0 }
    }

    /// A backoff that has already counted `failures` (one whose count is kept elsewhere: the
    /// restart supervisor's durable streak).
    pub const fn after(first: Duration, max: Duration, failures: u32) -> Backoff {
        Backoff { first, max, failures }
    }

    /// Count one more failure; returns how long to wait before the next try.
    pub fn fail(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        self.wait()
    }

    /// The wait for the failures counted so far (`first` when there were none).
    pub fn wait(&self) -> Duration {
        let doublings = self.failures.saturating_sub(1).min(31);
        self.first.saturating_mul(1 << doublings).min(self.max)
    }

    /// A success: the next failure waits `first` again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

/// `ms` milliseconds as the largest whole unit: `16s`, `5m`, `3h`, `2d` — the one way desk
/// writes a span of time for people (`ls`, `queue`, `stuck`, `explain`, the dashboard, the attach
/// status line).
pub fn span(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86399 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

/// How long before `now` (Unix ms) the moment `then` was: `16s ago`.
pub fn ago(now: u64, then: u64) -> String {
    format!("{} ago", span(now.saturating_sub(then)))
}

/// UTC timestamp in RFC 3339 form with milliseconds, from Unix milliseconds (jiff's calendar;
/// a time past jiff's range, year 9999, reads as its last representable instant).
pub fn iso8601(ms: u64) -> String {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    let at = jiff::Timestamp::from_millisecond(ms).unwrap_or(jiff::Timestamp::MAX);
    at.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backoff_doubles_to_its_bound_and_starts_over_after_a_success() {
        let mut b = Backoff::new(Duration::from_millis(250), Duration::from_secs(30));
        let waits: Vec<u128> = (0..9).map(|_| b.fail().as_millis()).collect();
        assert_eq!(waits, [250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000]);
        assert_eq!(b.wait(), Duration::from_secs(30));
        for _ in 0..100 {
            b.fail();
        }
        assert_eq!(b.wait(), Duration::from_secs(30), "no overflow however long it fails");
        b.reset();
        assert_eq!(b.fail(), Duration::from_millis(250));
    }

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

    #[test]
    fn timestamps_format_as_rfc3339() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_795_984_790_984), "2026-11-29T20:39:50.984Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
