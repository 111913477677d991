//! Arbitrary bytes as a GGUF file: parse, then read every metadata value and every tensor's
//! data (`rlx_fuzz::gguf::gguf_from_bytes`). Errors are fine; a panic, an out-of-bounds
//! slice or an allocation beyond `-malloc_limit_mb` is a bug.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    rlx_fuzz::gguf::gguf_from_bytes(data);
});
