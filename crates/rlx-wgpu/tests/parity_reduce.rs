//! wgpu parity of the reduce group (rlx-testutil's case tables: Reduce over every axes set
//! in float and integer dtypes, Softmax, ArgMax and the softmax cross-entropy family)
//! against the CPU reference and the f64 oracle.
mod common;
use common::*;

rlx_testutil::case_tests!(reduce, wgpu);
