//! Arbitrary bytes as a safetensors file: parse, then hand out and convert every tensor
//! (`rlx_fuzz::safetensors::safetensors_from_bytes`). Errors are fine; a panic or an
//! out-of-bounds slice is a bug.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    rlx_fuzz::safetensors::safetensors_from_bytes(data);
});
