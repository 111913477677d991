//! Shape rules and builder methods, one file per op group. `infer_shape` is the single
//! entry used by builders, the verifier and run-time re-binding of dynamic dims.
use crate::{Op, Shape};

pub mod attention;
pub mod audio;
pub mod elementwise;
pub mod linalg;
pub mod norm;
pub mod reduce;
pub mod region;
pub mod shape_ops;
pub mod vision;

/// Output shape of `op` applied to inputs of these shapes; the message says what is wrong.
pub fn infer_shape(op: &Op, inputs: &[&Shape]) -> Result<Shape, String> {
    match op {
        Op::Input { .. } | Op::Param { .. } | Op::Constant { .. } => {
            Err("leaf nodes carry their own shape".into())
        }
        Op::Activation(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::Where
        | Op::Cast { .. }
        | Op::StopGradient => elementwise::infer(op, inputs),
        Op::ElementwiseRegion { .. } | Op::BatchElementwiseRegion { .. } => {
            region::infer(op, inputs)
        }
        Op::MatMul | Op::FusedMatMulBiasAct { .. } | Op::DequantMatMul { .. } => {
            linalg::infer(op, inputs)
        }
        Op::LayerNorm { .. }
        | Op::RmsNorm { .. }
        | Op::FusedResidualLN { .. }
        | Op::FusedResidualRmsNorm { .. }
        | Op::FusedSwiGLU { .. } => norm::infer(op, inputs),
        Op::Reduce { .. }
        | Op::Softmax { .. }
        | Op::ArgMax { .. }
        | Op::SoftmaxCrossEntropy
        | Op::SoftmaxCrossEntropyWithLogits
        | Op::SoftmaxCrossEntropyBackward => reduce::infer(op, inputs),
        Op::Reshape { .. }
        | Op::Expand { .. }
        | Op::Transpose { .. }
        | Op::Narrow { .. }
        | Op::Concat { .. }
        | Op::Gather { .. }
        | Op::Pad { .. }
        | Op::Slice { .. }
        | Op::TransformRegion { .. } => shape_ops::infer(op, inputs),
        Op::Attention(_) | Op::Rope { .. } => attention::infer(op, inputs),
        Op::Conv(_)
        | Op::Pool(_)
        | Op::ResizeNearest2x
        | Op::Conv2dBackwardInput { .. }
        | Op::Conv2dBackwardWeight(_)
        | Op::MaxPool2dBackward(_) => vision::infer(op, inputs),
        Op::Fft { .. } | Op::LogMel | Op::LogMelBackward => audio::infer(op, inputs),
    }
}

/// Check the input count is within `min..=max`.
pub(crate) fn arity(op: &Op, inputs: &[&Shape], min: usize, max: usize) -> Result<(), String> {
    let n = inputs.len();
    if n < min || n > max {
        let want = if min == max {
            format!("{min}")
        } else {
            format!("{min} to {max}")
        };
        return Err(format!("{} takes {want} inputs, got {n}", op.kind()));
    }
    Ok(())
}

/// Check every listed input is a float type.
pub(crate) fn require_float(op: &Op, inputs: &[&Shape], which: &[usize]) -> Result<(), String> {
    for &i in which {
        if let Some(s) = inputs.get(i) {
            if !s.dtype.is_float() {
                return Err(format!(
                    "{} input {i} must be a float type, got {}",
                    op.kind(),
                    s.dtype
                ));
            }
        }
    }
    Ok(())
}
