//! Finite-difference checks of the norm group (the per-op cases of LayerNorm, RmsNorm,
//! FusedResidualLN and FusedResidualRmsNorm come from rlx-testutil's case table; FusedSwiGLU's
//! are in the transformer table).
use rlx_testutil::run::grad;

rlx_testutil::case_tests!(norm, grad);
