//! One thunk per op, grouped by file like rlx-ir's `ops/`.
use crate::{CpuError, OutView, TensorView};
use rlx_ir::{Node, Op};

pub mod attention;
pub mod audio;
mod conv;
pub mod elementwise;
pub mod linalg;
pub mod norm;
mod pool;
pub mod reduce;
pub mod region;
pub mod rope;
pub mod shape_ops;
pub mod vision;

/// Run `node`'s op on `ins`, writing `out` (fully: the arena is not zeroed between runs).
pub fn eval(node: &Node, ins: &[TensorView], out: OutView) -> Result<(), CpuError> {
    match &node.op {
        Op::Input { .. } | Op::Param { .. } | Op::Constant { .. } => {
            Err(crate::error::op_err("leaf nodes are not evaluated"))
        }
        Op::Activation(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::Where
        | Op::Cast { .. }
        | Op::StopGradient => elementwise::eval(node, ins, out),
        Op::ElementwiseRegion { .. } | Op::BatchElementwiseRegion { .. } => {
            region::eval(node, ins, out)
        }
        Op::MatMul | Op::FusedMatMulBiasAct { .. } | Op::DequantMatMul { .. } => {
            linalg::eval(node, ins, out)
        }
        Op::LayerNorm { .. }
        | Op::RmsNorm { .. }
        | Op::FusedResidualLN { .. }
        | Op::FusedResidualRmsNorm { .. }
        | Op::FusedSwiGLU { .. } => norm::eval(node, ins, out),
        Op::Reduce { .. }
        | Op::Softmax { .. }
        | Op::ArgMax { .. }
        | Op::SoftmaxCrossEntropy
        | Op::SoftmaxCrossEntropyWithLogits
        | Op::SoftmaxCrossEntropyBackward => reduce::eval(node, ins, out),
        Op::Reshape { .. }
        | Op::Expand { .. }
        | Op::Transpose { .. }
        | Op::Narrow { .. }
        | Op::Concat { .. }
        | Op::Gather { .. }
        | Op::Pad { .. }
        | Op::Slice { .. }
        | Op::TransformRegion { .. } => shape_ops::eval(node, ins, out),
        Op::Attention(_) => attention::eval(node, ins, out),
        Op::Rope { .. } => rope::eval(node, ins, out),
        Op::Conv(_)
        | Op::Pool(_)
        | Op::ResizeNearest2x
        | Op::Conv2dBackwardInput { .. }
        | Op::Conv2dBackwardWeight(_)
        | Op::MaxPool2dBackward(_) => vision::eval(node, ins, out),
        Op::Fft { .. } | Op::LogMel | Op::LogMelBackward => audio::eval(node, ins, out),
    }
}
