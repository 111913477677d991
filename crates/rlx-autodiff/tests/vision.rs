//! Finite-difference checks of the vision VJP rules: Conv (stride, padding, dilation,
//! groups, bias, the 1-D form), Pool (max, average with padding) and ResizeNearest2x, all
//! from rlx-testutil's case table.
mod common;
use rlx_testutil::run::grad;

rlx_testutil::case_tests!(vision, grad);
