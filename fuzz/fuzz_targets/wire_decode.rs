//! Arbitrary bytes through the wire decoder, cut into reads at sizes taken from the input; every
//! decoded frame is re-encoded and must decode back equal. The check itself lives in the library
//! (`desk_wire::fuzz_check`) so that `cargo test` replays the corpus without the fuzzer.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| desk_wire::fuzz_check(data));
