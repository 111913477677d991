//! VJP rules of the Linalg group: MatMul, FusedMatMulBiasAct (DequantMatMul has none: its
//! packed weights are frozen, see `rules::vjp`).
use super::{elementwise, Grads};
use crate::util::{reshape, static_dims, transpose, unbroadcast};
use crate::AdError;
use rlx_ir::{Activation, Graph, Node, NodeId, Op};

pub(crate) fn matmul(g: &mut Graph, node: &Node, dy: NodeId, needs: &[bool]) -> Grads {
    let ins = &node.inputs;
    let (da, db) = matmul_grads(g, node, ins[0], ins[1], dy, needs[0], needs[1])?;
    Ok(vec![da, db])
}

pub(crate) fn fused_matmul_bias_act(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
    activation: Option<Activation>,
) -> Grads {
    let ins = &node.inputs;
    // Recompute the pre-activation only when the activation's slope needs it.
    let dz = match activation {
        Some(act) => {
            let z = g.matmul(ins[0], ins[1])?;
            let z = g.add(z, ins[2])?;
            elementwise::act_grad(g, act, z, node.id, dy)?
        }
        None => dy,
    };
    let (da, dw) = matmul_grads(g, node, ins[0], ins[1], dz, needs[0], needs[1])?;
    let dbias = if needs[2] {
        let to = g.shape(ins[2])?.clone();
        Some(unbroadcast(g, dz, &to)?)
    } else {
        None
    };
    Ok(vec![da, dw, dbias])
}

/// Swap the last two axes.
fn t_last(g: &mut Graph, x: NodeId) -> Result<NodeId, AdError> {
    let r = g.shape(x)?.rank();
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(r - 2, r - 1);
    transpose(g, x, perm)
}

/// Gradients of `y = a @ b` (NumPy matmul: broadcast batch dims, rank-1 operands
/// promoted). Rank-1 operands are promoted explicitly so both products are plain batched
/// matmuls; the broadcast batch dims are summed back by `unbroadcast`.
fn matmul_grads(
    g: &mut Graph,
    node: &Node,
    a: NodeId,
    b: NodeId,
    dy: NodeId,
    need_a: bool,
    need_b: bool,
) -> Result<(Option<NodeId>, Option<NodeId>), AdError> {
    let (ra, rb) = (g.shape(a)?.rank(), g.shape(b)?.rank());
    let a2 = if ra == 1 {
        let k = static_dims(g, a, node)?[0] as i64;
        reshape(g, a, vec![1, k])?
    } else {
        a
    };
    let b2 = if rb == 1 {
        let k = static_dims(g, b, node)?[0] as i64;
        reshape(g, b, vec![k, 1])?
    } else {
        b
    };
    let dy2 = if ra == 1 || rb == 1 {
        // The promoted product's shape, inferred without adding a node.
        let (sa, sb) = (g.shape(a2)?.clone(), g.shape(b2)?.clone());
        let y2 = rlx_ir::ops::infer_shape(&Op::MatMul, &[&sa, &sb]).map_err(|msg| {
            AdError::Unsupported {
                node: node.id,
                op: node.op.kind().name(),
                msg,
            }
        })?;
        let dims = y2.static_dims().ok_or_else(|| AdError::Unsupported {
            node: node.id,
            op: node.op.kind().name(),
            msg: format!("rank-1 operand with symbolic dims {y2}"),
        })?;
        reshape(g, dy, dims.iter().map(|&d| d as i64).collect())?
    } else {
        dy
    };
    let da = if need_a {
        let bt = t_last(g, b2)?;
        let d = g.matmul(dy2, bt)?;
        let to = g.shape(a2)?.clone();
        let d = unbroadcast(g, d, &to)?;
        Some(if ra == 1 {
            let k = static_dims(g, a, node)?[0] as i64;
            reshape(g, d, vec![k])?
        } else {
            d
        })
    } else {
        None
    };
    let db = if need_b {
        let at = t_last(g, a2)?;
        let d = g.matmul(at, dy2)?;
        let to = g.shape(b2)?.clone();
        let d = unbroadcast(g, d, &to)?;
        Some(if rb == 1 {
            let k = static_dims(g, b, node)?[0] as i64;
            reshape(g, d, vec![k])?
        } else {
            d
        })
    } else {
        None
    };
    Ok((da, db))
}
