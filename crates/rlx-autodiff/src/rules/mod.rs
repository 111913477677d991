//! One VJP rule per op, grouped like `rlx_ir::ops`. A rule receives the forward node (its
//! inputs and its own output are live in the backward graph under the same ids), the
//! cotangent `dy` of its output and which inputs need a gradient; it returns one entry
//! per input (None where not needed or not differentiable).
mod attention;
mod audio;
mod elementwise;
mod linalg;
mod norm;
mod reduce;
mod shape_ops;
mod vision;

use crate::AdError;
use rlx_ir::{Graph, Node, NodeId, Op};

/// VJP of an op through its decomposition into primitives: `build` appends the primitive
/// forward (from the node's own inputs) and returns its result; the same reverse sweep
/// then differentiates those nodes with their own rules. Used where the op's backward
/// would otherwise need a dedicated kernel (attention).
pub(crate) fn by_decomposition(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
    build: impl FnOnce(&mut Graph) -> Result<NodeId, AdError>,
) -> Grads {
    let out = build(g)?;
    if g.shape(out)? != &node.shape {
        return Err(crate::util::unsupported(
            node,
            format!(
                "decomposition gives {}, the node is {}",
                g.shape(out)?,
                node.shape
            ),
        ));
    }
    let mut wrt: Vec<NodeId> = Vec::new();
    for (k, &i) in node.inputs.iter().enumerate() {
        if needs[k] && !wrt.contains(&i) {
            wrt.push(i);
        }
    }
    let total = crate::grad::backward(g, out, dy, &wrt)?;
    // The sweep sums over every use of an input; the outer sweep adds each slot's entry, so
    // a repeated input gets its total once and zeros in its other slots.
    let mut given: Vec<NodeId> = Vec::new();
    let mut out = Vec::with_capacity(node.inputs.len());
    for (k, &i) in node.inputs.iter().enumerate() {
        if !needs[k] {
            out.push(None);
            continue;
        }
        let pos = wrt.iter().position(|&w| w == i).unwrap_or(0);
        let d = match total.get(pos).copied().flatten() {
            Some(d) if !given.contains(&i) => d,
            _ => crate::util::zeros_of(g, i, node)?,
        };
        given.push(i);
        out.push(Some(d));
    }
    Ok(out)
}

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
        | Op::Pad { .. }
        | Op::Slice { .. } => shape_ops::vjp(g, node, dy, needs),
        Op::Attention(_) | Op::Rope { .. } => attention::vjp(g, node, dy, needs),
        Op::Conv(_) | Op::Pool(_) | Op::ResizeNearest2x => vision::vjp(g, node, dy, needs),
        Op::Fft { .. } | Op::LogMel => audio::vjp(g, node, dy, needs),
        _ => Err(AdError::NoRule {
            node: node.id,
            op: node.op.kind().name(),
        }),
    }
}
