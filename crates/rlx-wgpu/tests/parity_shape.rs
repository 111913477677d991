//! wgpu parity of the shape group (rlx-testutil's case table: reshape, expand, transpose,
//! narrow, concat, gather, pad, slice in every moving dtype) against the CPU reference and
//! the f64 oracle. Data movement compares exactly.
mod common;
use common::*;

rlx_testutil::case_tests!(shape, wgpu);
