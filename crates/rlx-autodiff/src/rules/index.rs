//! VJP rules of the index group: GatherElements, GatherND (any batch_dims), ScatterElements,
//! ScatterND, OneHot, Range. A gather's VJP is the matching scatter-add of dy into zeros, and a
//! scatter's the matching gather; indices are piecewise constant, so their derivative is a
//! true zero.
use super::Grads;
use crate::util::{reduce, reshape, static_dims, unsupported, zeros_of};
use rlx_ir::{Graph, HostTensor, Node, NodeId, ReduceOp, ScatterReduction};

pub(crate) fn gather_elements(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
    axis: i64,
) -> Grads {
    let (data, idx) = (node.inputs[0], node.inputs[1]);
    let mut out = vec![None, None];
    if needs[0] {
        let z = zeros_of(g, data, node)?;
        out[0] = Some(g.scatter_elements(z, idx, dy, axis, ScatterReduction::Add)?);
    }
    if needs[1] {
        out[1] = Some(zeros_of(g, idx, node)?);
    }
    Ok(out)
}

pub(crate) fn gather_nd(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
    batch_dims: usize,
) -> Grads {
    let (data, idx) = (node.inputs[0], node.inputs[1]);
    let mut out = vec![None, None];
    if needs[0] {
        let full = with_batch_coords(g, node, idx, batch_dims)?;
        let z = zeros_of(g, data, node)?;
        out[0] = Some(g.scatter_nd(z, full, dy, ScatterReduction::Add)?);
    }
    if needs[1] {
        out[1] = Some(zeros_of(g, idx, node)?);
    }
    Ok(out)
}

/// Index rows `[b.., q.., k]` with their batch coordinates put in front (`[b.., q.., b + k]`),
/// so a batch-free ScatterND can send dy back: GatherND with `batch_dims` shares the first
/// dims between data and indices, ScatterND has no such dims.
fn with_batch_coords(
    g: &mut Graph,
    node: &Node,
    idx: NodeId,
    batch_dims: usize,
) -> Result<NodeId, crate::AdError> {
    if batch_dims == 0 {
        return Ok(idx);
    }
    let dims = static_dims(g, idx, node)?;
    let rows = &dims[..dims.len() - 1];
    let n: usize = rows.iter().product();
    let mut coords = Vec::with_capacity(n * batch_dims);
    for r in 0..n {
        // The row's multi-index; its first `batch_dims` entries are the batch coordinates.
        let mut rem = r;
        let mut at = vec![0usize; rows.len()];
        for d in (0..rows.len()).rev() {
            at[d] = rem % rows[d];
            rem /= rows[d];
        }
        coords.extend(at[..batch_dims].iter().map(|&c| c as f64));
    }
    let mut cdims = rows.to_vec();
    cdims.push(batch_dims);
    let dt = g.shape(idx)?.dtype;
    let c = g.constant(HostTensor::from_f64_as(&cdims, &coords, dt))?;
    Ok(g.concat(&[c, idx], -1)?)
}

/// The reductions whose VJP is a gather: none (the data under an update is replaced, so
/// its cotangent is cut there) and add (it passes through). With duplicate indices under
/// `None` ONNX leaves the result undefined; every duplicate then receives dy.
fn scatter_grads(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
    reduction: ScatterReduction,
    cut: impl FnOnce(&mut Graph, NodeId, NodeId, NodeId) -> Result<NodeId, rlx_ir::IrError>,
    pick: impl FnOnce(&mut Graph, NodeId, NodeId) -> Result<NodeId, rlx_ir::IrError>,
) -> Grads {
    let (idx, upd) = (node.inputs[1], node.inputs[2]);
    let mut out = vec![None, None, None];
    match reduction {
        ScatterReduction::None | ScatterReduction::Add => {}
        r => {
            return Err(unsupported(
                node,
                format!("no VJP for reduction {r:?} (none and add have one)"),
            ))
        }
    }
    if needs[0] {
        out[0] = Some(if reduction == ScatterReduction::None {
            let z = zeros_of(g, upd, node)?;
            cut(g, dy, idx, z)?
        } else {
            dy
        });
    }
    if needs[1] {
        out[1] = Some(zeros_of(g, idx, node)?);
    }
    if needs[2] {
        out[2] = Some(pick(g, dy, idx)?);
    }
    Ok(out)
}

pub(crate) fn scatter_elements(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
    axis: i64,
    reduction: ScatterReduction,
) -> Grads {
    let none = ScatterReduction::None;
    scatter_grads(
        g,
        node,
        dy,
        needs,
        reduction,
        |g, d, i, z| g.scatter_elements(d, i, z, axis, none),
        |g, d, i| g.gather_elements(d, i, axis),
    )
}

pub(crate) fn scatter_nd(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
    reduction: ScatterReduction,
) -> Grads {
    let none = ScatterReduction::None;
    scatter_grads(
        g,
        node,
        dy,
        needs,
        reduction,
        |g, d, i, z| g.scatter_nd(d, i, z, none),
        |g, d, i| g.gather_nd(d, i, 0),
    )
}

/// out = off + (on − off)·hot, so d on = Σ dy·hot and d off = Σ dy − d on.
pub(crate) fn one_hot(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
    axis: i64,
    depth: usize,
) -> Grads {
    let (idx, values) = (node.inputs[0], node.inputs[1]);
    let mut out = vec![None, None];
    if needs[0] {
        out[0] = Some(zeros_of(g, idx, node)?);
    }
    if needs[1] {
        let dt = g.shape(values)?.dtype;
        let unit = g.constant(HostTensor::from_f64_as(&[2], &[0.0, 1.0], dt))?;
        let hot = g.one_hot(idx, unit, depth, axis)?;
        let r = g.shape(dy)?.rank() as i64;
        let on = g.mul(dy, hot)?;
        let on = reduce(g, ReduceOp::Sum, on, (0..r).collect(), false)?;
        let all = reduce(g, ReduceOp::Sum, dy, (0..r).collect(), false)?;
        let off = g.sub(all, on)?;
        let (off, on) = (reshape(g, off, vec![1])?, reshape(g, on, vec![1])?);
        let both = g.concat(&[off, on], 0)?;
        let dims = static_dims(g, values, node)?;
        out[1] = Some(reshape(g, both, dims.iter().map(|&d| d as i64).collect())?);
    }
    Ok(out)
}

/// out[i] = start + i·delta: d start = Σ dy, d delta = Σ i·dy, and the limit only fixes
/// the (static) length, so its derivative is zero.
pub(crate) fn range(g: &mut Graph, node: &Node, dy: NodeId, needs: &[bool], len: usize) -> Grads {
    let mut out = vec![None, None, None];
    let shaped = |g: &mut Graph, v: NodeId, like: NodeId| -> Result<NodeId, crate::AdError> {
        let dims = static_dims(g, like, node)?;
        let s = reduce(g, ReduceOp::Sum, v, vec![0], false)?;
        reshape(g, s, dims.iter().map(|&d| d as i64).collect())
    };
    if needs[0] {
        out[0] = Some(shaped(g, dy, node.inputs[0])?);
    }
    if needs[1] {
        out[1] = Some(zeros_of(g, node.inputs[1], node)?);
    }
    if needs[2] {
        let dt = g.shape(dy)?.dtype;
        let iv: Vec<f64> = (0..len).map(|i| i as f64).collect();
        let iota = g.constant(HostTensor::from_f64_as(&[len], &iv, dt))?;
        let w = g.mul(dy, iota)?;
        out[2] = Some(shaped(g, w, node.inputs[2])?);
    }
    Ok(out)
}
