//! GPU parity of the norm group against the CPU reference and the f64 oracle: the per-op
//! cases of LayerNorm, RmsNorm, FusedResidualLN and FusedResidualRmsNorm
//! over short rows (warp per row), long rows (block per row, cached and streaming) and
//! several normalised-axis choices come from rlx-testutil's case table.
mod common;
use common::*;

rlx_testutil::case_tests!(norm, cuda);
