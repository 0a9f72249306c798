//! Fresh identifiers, from the kernel's random source.
//!
//! Owns making a new delivery item id (`desk send`, a channel post): its time part is the
//! caller's clock, its random part comes from getrandom(2). The id's form and ordering are
//! desk-core's ([`ItemId`]); this is the one place that draws randomness for it.

use desk_core::delivery::item::ItemId;

/// A new item id for Unix time `now_ms`, its random part from getrandom(2).
pub fn fresh_item_id(now_ms: u64) -> ItemId {
    let mut random = [0u8; 10];
    // getrandom(2) never fails for small reads once the pool is initialised; if it did, the
    // time and the process id still make the id unique in practice.
    if getrandom::fill(&mut random).is_err() {
        let fallback = (std::process::id() as u128) << 64 | now_ms as u128;
        random.copy_from_slice(&fallback.to_be_bytes()[6..16]);
    }
    ItemId::new(now_ms, random)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_ids_of_one_millisecond_differ_and_keep_its_time_order() {
        let (a, b) = (fresh_item_id(1_000), fresh_item_id(1_000));
        assert_ne!(a, b, "80 random bits apart");
        assert!(fresh_item_id(999) < a && a.as_str()[..10] == b.as_str()[..10]);
    }
}
