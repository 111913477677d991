//! One VJP rule per op, grouped like `rlx_ir::ops`. A rule receives the forward node (its
//! inputs and its own output are live in the backward graph under the same ids), the
//! cotangent `dy` of its output and which inputs need a gradient; it returns one entry
//! per input (None where not needed or not differentiable).
mod attention;
mod audio;
mod collective;
mod elementwise;
mod index;
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

/// The answer for an op that has no VJP rule.
fn no_rule(node: &Node) -> Grads {
    Err(AdError::NoRule {
        node: node.id,
        op: node.op.kind().name(),
    })
}

/// Cotangents of `node`'s inputs given the cotangent `dy` of its output.
///
/// The only router: every variant is destructured (every parameter named) and calls its
/// typed rule, or is listed under "no rule" below, so a new op does not build until it has
/// one or is listed.
pub fn vjp(g: &mut Graph, node: &Node, dy: NodeId, needs: &[bool]) -> Grads {
    match &node.op {
        // ---- leaves end the sweep (`grad` never asks for their rule)
        Op::Input { name: _ } | Op::Param { name: _ } | Op::Constant { data: _ } => no_rule(node),

        // ---- elementwise
        Op::Activation(act) => elementwise::activation(g, node, dy, *act),
        Op::Binary(op) => elementwise::binary(g, node, dy, needs, *op),
        Op::Compare(_) => elementwise::compare_op(),
        Op::Where => elementwise::where_(g, node, dy, needs),
        Op::Cast { to: _ } => elementwise::cast(g, node, dy),
        Op::FloatRound {
            format,
            saturate: _,
        } => elementwise::float_round(g, node, dy, *format),
        Op::StopGradient => elementwise::stop_gradient(),

        // ---- linalg
        Op::MatMul => linalg::matmul(g, node, dy, needs),
        Op::FusedMatMulBiasAct { activation } => {
            linalg::fused_matmul_bias_act(g, node, dy, needs, *activation)
        }

        // ---- norm
        Op::LayerNorm { axis, eps } => norm::layer_norm(g, node, dy, needs, *axis, *eps),
        Op::RmsNorm { axis, eps } => norm::rms_norm(g, node, dy, needs, *axis, *eps),
        Op::FusedResidualLN { has_bias, eps } => {
            norm::fused_residual_ln(g, node, dy, needs, *has_bias, *eps)
        }
        Op::FusedResidualRmsNorm { has_bias, eps } => {
            norm::fused_residual_rms_norm(g, node, dy, needs, *has_bias, *eps)
        }

        // ---- reduce
        Op::Reduce { op, axes, keep_dim } => reduce::reduce_op(g, node, dy, *op, axes, *keep_dim),
        Op::Softmax { axis } => reduce::softmax(g, node, dy, *axis),
        Op::ArgMax {
            axis: _,
            keep_dim: _,
        } => reduce::argmax(),
        Op::CumSum {
            axis,
            exclusive,
            reverse,
        } => reduce::cumsum(g, dy, *axis, *exclusive, *reverse),
        // Indices: the values' gradient flows through the GatherElements that reads them.
        Op::TopK {
            k: _,
            axis: _,
            largest: _,
            sorted: _,
        } => reduce::argmax(),
        Op::SoftmaxCrossEntropy => reduce::softmax_cross_entropy(g, node, dy, needs),
        Op::SoftmaxCrossEntropyWithLogits => {
            reduce::softmax_cross_entropy_with_logits(g, node, dy, needs)
        }

        // ---- shape
        Op::Reshape { shape: _ } => shape_ops::reshape_op(g, node, dy),
        Op::Expand { shape: _ } => shape_ops::expand(g, node, dy),
        Op::Transpose { perm } => shape_ops::transpose_op(g, dy, perm),
        Op::Narrow { axis, start, len } => shape_ops::narrow(g, node, dy, *axis, *start, *len),
        Op::Concat { axis } => shape_ops::concat(g, node, dy, needs, *axis),
        Op::Gather { axis } => shape_ops::gather(g, node, dy, needs, *axis),
        Op::Tile { repeats } => shape_ops::tile(g, node, dy, needs, repeats),
        Op::Pad { pads, value: _ } => shape_ops::pad(g, node, dy, pads),
        Op::Slice {
            axes,
            starts,
            ends,
            steps,
        } => shape_ops::slice(g, node, dy, needs, (axes, starts, ends, steps)),

        // ---- index
        Op::GatherElements { axis } => index::gather_elements(g, node, dy, needs, *axis),
        Op::GatherND { batch_dims } => index::gather_nd(g, node, dy, needs, *batch_dims),
        Op::ScatterElements { axis, reduction } => {
            index::scatter_elements(g, node, dy, needs, *axis, *reduction)
        }
        Op::ScatterND { reduction } => index::scatter_nd(g, node, dy, needs, *reduction),
        Op::OneHot { axis, depth } => index::one_hot(g, node, dy, needs, *axis, *depth),
        Op::Range { len } => index::range(g, node, dy, needs, *len),

        // ---- transformer
        // A KV cache is inference state: attention over one, and its write, have no rule.
        Op::Attention(spec) if spec.past => no_rule(node),
        Op::Attention(spec) => attention::attention(g, node, dy, needs, spec),
        Op::Rope {
            head_dim,
            n_rot,
            style,
        } => attention::rope(g, node, dy, needs, *head_dim, *n_rot, *style),
        Op::FusedSwiGLU {
            cast_to: _,
            gate_first,
        } => attention::fused_swiglu(g, node, dy, *gate_first),

        // ---- vision
        Op::Conv(spec) => vision::conv(g, node, dy, needs, spec),
        Op::Pool(spec) => vision::pool(g, node, dy, spec),
        Op::ResizeNearest2x => vision::resize_nearest2x(g, node, dy),

        // ---- audio
        Op::Fft { inverse, norm } => audio::fft(g, dy, *inverse, *norm),
        Op::LogMel => audio::log_mel(g, node, dy, needs),

        // ---- collective
        Op::AllReduce { reduce } => collective::all_reduce(g, node, dy, *reduce),
        Op::AllGather { axis, ranks } => collective::all_gather(g, dy, *axis, *ranks),
        Op::ReduceScatter {
            reduce,
            axis,
            ranks,
        } => collective::reduce_scatter(g, node, dy, *reduce, *axis, *ranks),

        // ---- no rule (an error naming the node if one is reached):
        // fusion regions: autodiff runs before fusion, so a region here is a user's.
        Op::ElementwiseRegion { .. }
        | Op::BatchElementwiseRegion { .. }
        | Op::TransformRegion { .. } => no_rule(node),
        // backward ops: no second order.
        Op::SoftmaxCrossEntropyBackward
        | Op::Conv2dBackwardInput { .. }
        | Op::Conv2dBackwardWeight(_)
        | Op::MaxPool2dBackward(_)
        | Op::LogMelBackward => no_rule(node),
        // packed quantised weights are frozen (inference only).
        Op::DequantMatMul { .. } | Op::FusedDequantMatMul { .. } | Op::Dequantize { .. } => {
            no_rule(node)
        }
        Op::CacheWrite { .. } | Op::RopeCacheWrite { .. } | Op::CachedAttention { .. } => {
            no_rule(node)
        }
    }
}
