//! Finite-difference checks of the transformer group's VJP rules: Attention (each layout,
//! every mask kind, GQA, v_head_dim, custom scale, soft cap, queries that see no key, one
//! input in all three slots), Rope (both styles, partial rotation) and FusedSwiGLU come
//! from rlx-testutil's transformer case table.
mod common;
use rlx_testutil::run::grad;

rlx_testutil::case_tests!(transformer, grad);
