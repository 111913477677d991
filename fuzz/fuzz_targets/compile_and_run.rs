//! Arbitrary bytes decoded into a graph (whole file, framed body, JSON); a graph that
//! verifies and fits the memory cap is compiled and run on the CPU, plain and optimised.
//! Any panic is a bug. The body is `rlx_fuzz::compile_and_run_bytes`, which
//! `tests/compile_and_run.rs` also runs on fixed seeds.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    rlx_fuzz::compile_and_run_bytes(data);
});
