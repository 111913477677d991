//! GPU parity of the audio group: Fft (any n, both directions, every norm mode, past the
//! shared twiddle table), LogMel (Whisper's log-mel, the per-item (max − 8) clamp
//! exercised) and LogMelBackward; the cases come from rlx-testutil's case table.
mod common;
use common::cuda;

rlx_testutil::case_tests!(audio, cuda);
