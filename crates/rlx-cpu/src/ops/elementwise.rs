//! CPU thunks of the Elementwise group: Activation, Binary, Compare, Where, Cast,
//! StopGradient. Each is a one-step chain run by the region engine (`chain.rs`): one code
//! path, so the unfused ops agree bit for bit with the regions fusion makes of them. The
//! per-value math (and the integer and cast semantics) is in `scalar.rs`.
use super::chain::run_chain;
use crate::{CpuError, OutView, TensorView};
use rlx_ir::ChainOperand::Input;
use rlx_ir::{Activation, BinaryOp, ChainStep, CompareOp, DType, RegionPrologue};

fn one_step(step: ChainStep, ins: &[TensorView], out: OutView) -> Result<(), CpuError> {
    run_chain(
        &[step],
        ins,
        RegionPrologue::None,
        out.shape,
        out.dtype,
        out.data,
    )
}

pub fn activation(act: Activation, ins: &[TensorView], out: OutView) -> Result<(), CpuError> {
    one_step(ChainStep::Activation(act, Input(0)), ins, out)
}

/// Broadcasting `a op b`; integer semantics in [`super::scalar::binary_i`].
pub fn binary(op: BinaryOp, ins: &[TensorView], out: OutView) -> Result<(), CpuError> {
    one_step(ChainStep::Binary(op, Input(0), Input(1)), ins, out)
}

pub fn compare(op: CompareOp, ins: &[TensorView], out: OutView) -> Result<(), CpuError> {
    one_step(ChainStep::Compare(op, Input(0), Input(1)), ins, out)
}

/// cond, a, b: `cond != 0 ? a : b`.
pub fn where_(ins: &[TensorView], out: OutView) -> Result<(), CpuError> {
    one_step(ChainStep::Where(Input(0), Input(1), Input(2)), ins, out)
}

/// Semantics in [`super::scalar::float_to_int`] and [`super::scalar::wrap_int`].
pub fn cast(to: DType, ins: &[TensorView], out: OutView) -> Result<(), CpuError> {
    one_step(ChainStep::Cast(to, Input(0)), ins, out)
}

/// The identity (a cast to its own dtype).
pub fn stop_gradient(ins: &[TensorView], out: OutView) -> Result<(), CpuError> {
    one_step(ChainStep::Cast(out.dtype, Input(0)), ins, out)
}
