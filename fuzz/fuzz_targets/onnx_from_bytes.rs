//! Arbitrary bytes as an ONNX model: decode, import, fold constants on the CPU
//! (`rlx_fuzz::onnx::onnx_from_bytes`). A typed error is fine; a panic, a hang or an
//! allocation beyond `-malloc_limit_mb` is a bug.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    rlx_fuzz::onnx::onnx_from_bytes(data);
});
