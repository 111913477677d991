//! Finite-difference checks of the linalg group: MatMul (plain, batched, broadcast batch,
//! rank-1 operands) and FusedMatMulBiasAct (with and without an activation), from
//! rlx-testutil's case table (DequantMatMul has no VJP).
use rlx_testutil::run::grad;

rlx_testutil::case_tests!(linalg, grad);
