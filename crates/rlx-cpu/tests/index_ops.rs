//! Oracle tests of the ops added for ONNX import (Tile, GatherElements, GatherND,
//! ScatterElements, ScatterND, TopK, CumSum, Range, OneHot, the integer / bitwise Binary
//! ops): the per-op cases come from rlx-testutil's `index` table, run against their f64 /
//! exact oracles; below them the run-time errors a bad index or length must give.
use rlx_testutil::run::cpu;

rlx_testutil::case_tests!(index, cpu);
