//! Arbitrary bytes through the output scanner, cut into reads at sizes taken from the input:
//! the events must not depend on the cut, and every bound must hold. The check lives in the
//! library (`desk_term::scanner::fuzz_check`) so that `cargo test` replays the corpus.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| desk_term::scanner::fuzz_check(data));
