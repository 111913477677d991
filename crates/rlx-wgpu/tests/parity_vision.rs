//! wgpu parity of the vision group (rlx-testutil's case tables) against the CPU reference and
//! the f64 oracle.
mod common;
use common::*;

rlx_testutil::case_tests!(vision, wgpu);
