//! wgpu parity of the linalg group (rlx-testutil's case table: MatMul, FusedMatMulBiasAct,
//! DequantMatMul and Dequantize for every scheme) against the CPU reference and the f64
//! oracle, plus FusedDequantMatMul's fusions (norm, SwiGLU, residual), which no case table
//! holds.
mod common;
use common::*;

rlx_testutil::case_tests!(linalg, wgpu);
