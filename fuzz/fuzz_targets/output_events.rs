//! Arbitrary bytes through the screen model's one parse, cut into reads at sizes taken from the
//! input: the output events it finds must not depend on the cut, must add up to the model's own
//! modes, and every bound must hold. The check lives in the library
//! (`desk_term::events::fuzz_check`) so that
//! `cargo test` replays the corpus.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    desk_term::events::fuzz_check(data);
});
