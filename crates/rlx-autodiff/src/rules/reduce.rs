//! VJP rules of the Reduce group: Reduce, Softmax, ArgMax (no gradient), SoftmaxCrossEntropy,
//! SoftmaxCrossEntropyWithLogits.
use super::Grads;
use crate::util::{compare, expand, reduce, reshape, scale, static_dims, unsupported, zeros_of};
use crate::AdError;
use rlx_ir::{Activation, CompareOp, Graph, Node, NodeId, Op, ReduceOp};

pub(crate) fn reduce_op(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    op: ReduceOp,
    axes: &[i64],
    keep_dim: bool,
) -> Grads {
    Ok(vec![Some(reduce_grad(g, node, op, axes, keep_dim, dy)?)])
}

pub(crate) fn softmax(g: &mut Graph, node: &Node, dy: NodeId, axis: i64) -> Grads {
    // dx = y·(dy − Σ dy·y)
    let y = node.id;
    let t = g.mul(dy, y)?;
    let s = reduce(g, ReduceOp::Sum, t, vec![axis], true)?;
    let ys = g.mul(y, s)?;
    Ok(vec![Some(g.sub(t, ys)?)])
}

/// Not differentiable: the I64 output never becomes active, so this only answers "no
/// gradient" for completeness (as Compare does).
/// The adjoint of a running sum is the running sum the other way.
pub(crate) fn cumsum(
    g: &mut Graph,
    dy: NodeId,
    axis: i64,
    exclusive: bool,
    reverse: bool,
) -> Grads {
    Ok(vec![Some(g.cumsum(dy, axis, exclusive, !reverse)?)])
}

pub(crate) fn argmax() -> Grads {
    Ok(vec![None])
}

pub(crate) fn softmax_cross_entropy_with_logits(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
) -> Grads {
    let ins = &node.inputs;
    // (softmax − onehot)·dloss. Labels are class indices: piecewise constant.
    let dl = g.add_node(Op::SoftmaxCrossEntropyBackward, &[ins[0], ins[1], dy])?;
    let dlab = if needs[1] {
        Some(zeros_of(g, ins[1], node)?)
    } else {
        None
    };
    Ok(vec![Some(dl), dlab])
}

pub(crate) fn softmax_cross_entropy(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
) -> Grads {
    let ins = &node.inputs;
    // loss_n = −Σ_c t_nc·log p_nc. dlogits = dloss·(p·Σ_c t − t); dt = −dloss·log p.
    let dy_col = column(g, node, dy)?;
    let mut out = vec![None, None];
    if needs[0] {
        let p = g.add_node(Op::Softmax { axis: -1 }, &[ins[0]])?;
        let tsum = reduce(g, ReduceOp::Sum, ins[1], vec![-1], true)?;
        let pt = g.mul(p, tsum)?;
        let d = g.sub(pt, ins[1])?;
        out[0] = Some(g.mul(d, dy_col)?);
    }
    if needs[1] {
        let logp = log_softmax(g, ins[0])?;
        let d = g.mul(logp, dy_col)?;
        out[1] = Some(g.activation(Activation::Neg, d)?);
    }
    Ok(out)
}

/// `[N]` → `[N, 1]`, to scale per-row terms.
fn column(g: &mut Graph, node: &Node, v: NodeId) -> Result<NodeId, AdError> {
    let n = static_dims(g, v, node)?;
    reshape(g, v, vec![n.first().copied().unwrap_or(1) as i64, 1])
}

/// log softmax over the last axis, shifted by the row max so exp cannot overflow.
fn log_softmax(g: &mut Graph, z: NodeId) -> Result<NodeId, AdError> {
    let m = reduce(g, ReduceOp::Max, z, vec![-1], true)?;
    let zs = g.sub(z, m)?;
    let e = g.activation(Activation::Exp, zs)?;
    let s = reduce(g, ReduceOp::Sum, e, vec![-1], true)?;
    let lse = g.activation(Activation::Log, s)?;
    Ok(g.sub(zs, lse)?)
}

fn reduce_grad(
    g: &mut Graph,
    node: &Node,
    op: ReduceOp,
    axes: &[i64],
    keep_dim: bool,
    dy: NodeId,
) -> Result<NodeId, AdError> {
    let x = node.inputs[0];
    let xs = g.shape(x)?.clone();
    let r = xs.rank();
    // No axes means every axis (ONNX ReduceSum's default).
    let axes: Vec<usize> = if axes.is_empty() {
        (0..r).collect()
    } else {
        axes.iter()
            .map(|&a| xs.axis(a).map_err(|m| unsupported(node, m)))
            .collect::<Result<_, _>>()?
    };
    // Bring dy (and y) to the kept-dims shape so they broadcast against x.
    let keep = |g: &mut Graph, v: NodeId| -> Result<NodeId, AdError> {
        if keep_dim {
            return Ok(v);
        }
        let dims = static_dims(g, x, node)?;
        let kd: Vec<i64> = (0..r)
            .map(|i| if axes.contains(&i) { 1 } else { dims[i] as i64 })
            .collect();
        reshape(g, v, kd)
    };
    let dyk = keep(g, dy)?;
    let ax: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
    match op {
        ReduceOp::Sum => expand(g, dyk, xs.dims.clone()),
        ReduceOp::Mean => {
            let dims = static_dims(g, x, node)?;
            let count: usize = axes.iter().map(|&a| dims[a]).product();
            let e = expand(g, dyk, xs.dims.clone())?;
            scale(g, e, 1.0 / count.max(1) as f64)
        }
        ReduceOp::Max | ReduceOp::Min => {
            // The extremal elements share the cotangent evenly (PyTorch's amax / amin).
            let yk = keep(g, node.id)?;
            let hit = compare(g, CompareOp::Eq, x, yk)?;
            let mask = g.cast(hit, xs.dtype)?;
            let cnt = reduce(g, ReduceOp::Sum, mask, ax, true)?;
            let share = g.div(dyk, cnt)?;
            Ok(g.mul(mask, share)?)
        }
        ReduceOp::Prod => {
            // ∂/∂x_i Π x = Π x / x_i (x must be nonzero, as in the usual formula).
            let yk = keep(g, node.id)?;
            let t = g.mul(dyk, yk)?;
            Ok(g.div(t, x)?)
        }
    }
}
