//! Prompt delivery as the desk package runs it: the pure pieces from desk-core (`item`, `text`,
//! `settings`, `engine`) and, here, what touches the disk and the kernel: [`store`] (item files,
//! moved by atomic rename with fsync) and fresh item ids from the kernel's random source. The
//! daemon (`crate::daemon`) runs the engine in its event loop. See `docs/delivery.md`.

pub mod store;

pub use desk_core::delivery::{engine, item, settings, text};

use item::ItemId;

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
