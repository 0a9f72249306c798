//! The process clock, read in one place: wall-clock Unix milliseconds for records and display,
//! and how a moment is shown to a person. Leases and deadlines use `std::time::Instant` where
//! they are taken.
//!
//! Records and JSON keep Unix milliseconds and RFC 3339 in UTC (`desk_core::time`); what a person
//! reads is in the local time zone (`TZ`, else the system's) with the offset always shown, so a
//! time is never ambiguous when pasted elsewhere.

/// Unix milliseconds now (0 if the clock is before 1970).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// `ms` (Unix milliseconds) as a local date and time with its offset: `2026-12-01 09:14:03 +05:30`.
pub fn local_datetime(ms: u64) -> String {
    format_local(ms, &jiff::tz::TimeZone::system(), "%Y-%m-%d %H:%M:%S %:z")
}

/// `ms` as a local time of day with milliseconds and the offset: `09:14:03.250+05:30`.
pub fn local_time(ms: u64) -> String {
    format_local(ms, &jiff::tz::TimeZone::system(), "%H:%M:%S%.3f%:z")
}

fn format_local(ms: u64, zone: &jiff::tz::TimeZone, format: &str) -> String {
    match jiff::Timestamp::from_millisecond(i64::try_from(ms).unwrap_or(i64::MAX)) {
        Ok(t) => t.to_zoned(zone.clone()).strftime(format).to_string(),
        // Beyond year 9999: no real record; show the number rather than nothing.
        Err(_) => format!("@{ms}ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_times_carry_their_offset() {
        let ist = jiff::tz::TimeZone::fixed(jiff::tz::offset(5));
        let half = jiff::tz::TimeZone::fixed(jiff::tz::Offset::from_seconds(-(3 * 3600 + 1800)).unwrap());
        // 2026-12-01T00:00:00.250Z
        let ms = 1_796_083_200_250;
        assert_eq!(format_local(ms, &ist, "%Y-%m-%d %H:%M:%S %:z"), "2026-12-01 05:00:00 +05:00");
        assert_eq!(format_local(ms, &half, "%H:%M:%S%.3f%:z"), "20:30:00.250-03:30");
        assert_eq!(format_local(ms, &jiff::tz::TimeZone::UTC, "%H:%M:%S%.3f%:z"), "00:00:00.250+00:00");
    }
}
