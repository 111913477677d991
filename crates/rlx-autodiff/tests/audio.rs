//! Finite-difference checks of the audio VJP rules: Fft (both directions, every norm mode,
//! odd n) and LogMel; the cases come from rlx-testutil's case table.
use rlx_testutil::run::grad;

rlx_testutil::case_tests!(audio, grad);
