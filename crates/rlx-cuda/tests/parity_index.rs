//! GPU parity of the ops added for ONNX import (the `index` case table: Tile, the gather /
//! scatter family, TopK, CumSum, Range, OneHot, integer and bitwise Binary ops). None has a
//! kernel yet: each case allows its kinds to fall back, so this checks that a graph holding
//! them compiles for CUDA, runs as a hybrid plan and matches the CPU and the oracle.
mod common;
use common::*;

rlx_testutil::case_tests!(index, cuda);
