//! wgpu parity of the norm group (rlx-testutil's case tables: LayerNorm, RmsNorm and the
//! fused residual norms, every bias / beta form and row length) against the CPU reference
//! and the f64 oracle.
mod common;
use common::*;

rlx_testutil::case_tests!(norm, wgpu);
