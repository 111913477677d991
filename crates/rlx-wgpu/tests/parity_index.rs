//! wgpu parity of the index group (rlx-testutil's case table: tile, gather/scatter
//! elements and ND with every reduction, one-hot, range, and the composites that expand
//! into core ops) against the CPU reference and the f64 oracle.
mod common;
use common::*;

rlx_testutil::case_tests!(index, wgpu);
