//! Fresh identifiers, from the kernel's random source.
//!
//! Owns making a new delivery item id (`desk send`, a channel post): its time part is the
//! caller's clock, its random part comes from getrandom(2). The id's form and ordering are
//! desk-core's ([`ItemId`]); this is the one place that draws randomness for it.

use desk_core::delivery::item::ItemId;

/// A new item id for Unix time `now_ms`, its random part from getrandom(2).
pub fn fresh_item_id(now_ms: u64) -> ItemId {
    let mut random = [0u8; 10];
    // SAFETY: getrandom writes at most `random.len()` bytes into the buffer.
    let got = unsafe { libc::getrandom(random.as_mut_ptr().cast(), random.len(), 0) };
    // getrandom(2) never fails for small reads once the pool is initialised; if it did, the
    // time and the process id still make the id unique in practice.
    if got != random.len() as isize {
        let fallback = (std::process::id() as u128) << 64 | now_ms as u128;
        random.copy_from_slice(&fallback.to_be_bytes()[6..16]);
    }
    ItemId::new(now_ms, random)
}
