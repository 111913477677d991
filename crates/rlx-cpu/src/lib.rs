//! rlx-cpu: the CPU reference executor — one thunk per op over a planned arena.
//! Float types compute in f32 (f16/bf16 are rounded to their storage after each op), f64
//! in f64, integer and bool types in i64 — except U8 leaves (params, constants, inputs),
//! held as their bytes so a packed quantised weight costs its size (thunks that do not read
//! bytes get them widened to i64).
mod buffer;
pub mod comm;
mod const_eval;
mod error;
mod exec;
pub mod ops;
mod plan;
pub mod quant;
pub mod util;

pub use buffer::{Buf, BufMut, Elem, Float, LeafBytes, OutView, Storage, TensorView};
pub use comm::{CommError, Communicator, LocalGroup};
pub use const_eval::CpuConstEvaluator;
pub use error::{op_err, CpuError};
pub use exec::{from_buf, run_graph, to_storage, CpuExecutable};
pub use plan::PlanMode;
pub use quant::QuantAct;

/// Fused ops this backend runs natively (so the compiler keeps them): all of them — regions
/// are interpreted per block, the others have dedicated thunks.
pub fn native_fused_ops() -> rlx_ir::OpKindSet {
    rlx_ir::OpKindSet::filter(rlx_ir::OpKind::is_fused)
}
