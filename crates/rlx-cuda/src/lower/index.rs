//! The ONNX-import ops that have no CUDA kernel yet: Tile, CumSum, TopK and the index group
//! (GatherElements, GatherND, ScatterElements, ScatterND, OneHot, Range). Each answers
//! `Unsupported`, so the node runs on the CPU thunks with explicit copies at its boundary
//! and the dispatch report lists it as a fallback; `lowers` in `mod.rs` lists them as not
//! native. A kernel replaces one arm here (and its entry in [`FALLBACK`]).
use super::Lowered;
use rlx_ir::OpKind;

/// The kinds this file answers for: every one falls back to the CPU.
pub const FALLBACK: [OpKind; 9] = [
    OpKind::Tile,
    OpKind::CumSum,
    OpKind::TopK,
    OpKind::GatherElements,
    OpKind::GatherND,
    OpKind::ScatterElements,
    OpKind::ScatterND,
    OpKind::OneHot,
    OpKind::Range,
];

/// The answer for a kind without a kernel.
pub(crate) fn no_kernel(kind: OpKind) -> Lowered {
    crate::unsupported!("no CUDA kernel for {kind} yet (runs on the CPU)")
}
