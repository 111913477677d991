//! The ONNX-import ops that have no CUDA kernel yet: Tile, CumSum, TopK and the index group
//! (GatherElements, GatherND, ScatterElements, ScatterND, OneHot, Range), and FloatRound
//! (float8 / float4 rounding: rare, and cheap on the host). Each answers
//! `Unsupported`, so the node runs on the CPU thunks with explicit copies at its boundary
//! and the dispatch report lists it as a fallback; `lowers` in `mod.rs` lists them as not
//! native. A kernel replaces one arm here (and its entry in [`FALLBACK`]).
use super::Lowered;
use rlx_ir::OpKind;

/// The kinds this file answers for: every one falls back to the CPU.
pub const FALLBACK: [OpKind; 10] = [
    OpKind::Tile,
    OpKind::CumSum,
    OpKind::TopK,
    OpKind::GatherElements,
    OpKind::GatherND,
    OpKind::ScatterElements,
    OpKind::ScatterND,
    OpKind::OneHot,
    OpKind::Range,
    OpKind::FloatRound,
];

/// The answer for a kind without a kernel.
pub(crate) fn no_kernel(kind: OpKind) -> Lowered {
    crate::unsupported!("no CUDA kernel for {kind} yet (runs on the CPU)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::{native_kinds, LowerError};

    /// Host-side dispatch decision: each kind answers `Unsupported` (a fallback the report
    /// names, never an internal error) and is not listed as native.
    #[test]
    fn every_onnx_op_without_a_kernel_falls_back_by_name() {
        for k in FALLBACK {
            match no_kernel(k) {
                Err(LowerError::Unsupported(m)) => assert!(m.contains(k.name()), "{m}"),
                other => panic!("{k}: expected Unsupported, got {other:?}"),
            }
            assert!(!native_kinds().contains(k), "{k}");
        }
    }
}
