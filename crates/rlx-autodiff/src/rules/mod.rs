//! One VJP rule per op, grouped like `rlx_ir::ops`. A rule receives the forward node (its
//! inputs and its own output are live in the backward graph under the same ids), the
//! cotangent `dy` of its output and which inputs need a gradient; it returns one entry
//! per input (None where not needed or not differentiable).
mod elementwise;
mod linalg;
mod norm;
mod reduce;
mod shape_ops;

use crate::AdError;
use rlx_ir::{Graph, Node, NodeId, Op};

pub(crate) type Grads = Result<Vec<Option<NodeId>>, AdError>;

/// Cotangents of `node`'s inputs given the cotangent `dy` of its output.
pub fn vjp(g: &mut Graph, node: &Node, dy: NodeId, needs: &[bool]) -> Grads {
    match &node.op {
        Op::Activation(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::Where
        | Op::Cast { .. }
        | Op::StopGradient => elementwise::vjp(g, node, dy, needs),
        Op::MatMul | Op::FusedMatMulBiasAct { .. } => linalg::vjp(g, node, dy, needs),
        Op::LayerNorm { .. }
        | Op::RmsNorm { .. }
        | Op::FusedResidualLN { .. }
        | Op::FusedResidualRmsNorm { .. }
        | Op::FusedSwiGLU { .. } => norm::vjp(g, node, dy, needs),
        Op::Reduce { .. }
        | Op::Softmax { .. }
        | Op::SoftmaxCrossEntropy
        | Op::SoftmaxCrossEntropyWithLogits => reduce::vjp(g, node, dy, needs),
        Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Expand { .. }
        | Op::Narrow { .. }
        | Op::Concat { .. }
        | Op::Gather { .. }
        | Op::Pad { .. } => shape_ops::vjp(g, node, dy, needs),
        _ => Err(AdError::NoRule {
            node: node.id,
            op: node.op.kind(),
        }),
    }
}
