//! Finite-difference checks of the shape group: Reshape (incl. the broadcasting reshape of
//! one element), Transpose, Expand, Narrow, Concat, Gather (int / float / negative
//! indices), Pad, Slice, from rlx-testutil's case table.
use rlx_testutil::run::grad;

rlx_testutil::case_tests!(shape, grad);
