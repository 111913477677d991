//! GPU parity of the reduce group against the CPU reference and the f64 oracle: the per-op
//! cases of Reduce (every op, row / column / strided / split paths), Softmax, ArgMax and
//! the softmax cross-entropy family come from rlx-testutil's case table.
mod common;
use common::*;

rlx_testutil::case_tests!(reduce, cuda);
