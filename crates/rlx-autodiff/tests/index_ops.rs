//! Finite-difference checks of the ops added for ONNX import: Tile, GatherElements,
//! GatherND, ScatterElements / ScatterND (reduction none with one writer per position, add
//! with duplicates; w.r.t. data and updates), TopK's values, CumSum (every flag), Range
//! (w.r.t. start and delta), OneHot (w.r.t. its values) and Mod, from rlx-testutil's table.
use rlx_testutil::run::grad;

rlx_testutil::case_tests!(index, grad);
