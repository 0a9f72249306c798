//! The process clock, read in one place: wall-clock Unix milliseconds for records and display.
//! Leases and deadlines use `std::time::Instant` where they are taken.

/// Unix milliseconds now (0 if the clock is before 1970).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}
