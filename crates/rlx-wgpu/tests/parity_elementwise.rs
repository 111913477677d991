//! wgpu parity of the elementwise and region groups (rlx-testutil's case tables: every
//! activation, binary, compare, where, cast and stop-gradient case, fused chains, batch
//! regions and the resize prologue) against the CPU reference and the f64 oracle.
mod common;
use common::*;

rlx_testutil::case_tests!(elementwise, wgpu);
rlx_testutil::case_tests!(region, wgpu);
