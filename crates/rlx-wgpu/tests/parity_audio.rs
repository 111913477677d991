//! wgpu parity of the audio group (rlx-testutil's case tables) against the CPU reference and
//! the f64 oracle.
mod common;
use common::*;

rlx_testutil::case_tests!(audio, wgpu);
