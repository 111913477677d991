//! VJP rules of the Shape group: Reshape, Transpose, Expand, Narrow, Concat, Gather, Tile, Pad,
//! Slice.
use super::{by_decomposition, Grads};
use crate::util::{
    compare, iota_row, reduce, reshape, scalar_like, select, static_dims, transpose, unbroadcast,
    unsupported, zeros_of,
};
use rlx_ir::{CompareOp, Graph, HostTensor, Node, NodeId, Op, ReduceOp};

pub(crate) fn reshape_op(g: &mut Graph, node: &Node, dy: NodeId) -> Grads {
    let x = node.inputs[0];
    let dims = static_dims(g, x, node)?;
    let ydims = static_dims(g, node.id, node)?;
    let (nx, ny) = (
        dims.iter().product::<usize>(),
        ydims.iter().product::<usize>(),
    );
    // An expanding reshape of a 1-element tensor broadcasts it: sum the copies.
    let src = if nx == 1 && ny != 1 {
        let r = ydims.len() as i64;
        reduce(g, ReduceOp::Sum, dy, (0..r).collect(), false)?
    } else {
        dy
    };
    Ok(vec![Some(reshape(
        g,
        src,
        dims.iter().map(|&d| d as i64).collect(),
    )?)])
}

pub(crate) fn transpose_op(g: &mut Graph, dy: NodeId, perm: &[usize]) -> Grads {
    let mut inv = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    Ok(vec![Some(transpose(g, dy, inv)?)])
}

pub(crate) fn expand(g: &mut Graph, node: &Node, dy: NodeId) -> Grads {
    let to = g.shape(node.inputs[0])?.clone();
    Ok(vec![Some(unbroadcast(g, dy, &to)?)])
}

pub(crate) fn narrow(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    axis: i64,
    start: usize,
    len: usize,
) -> Grads {
    // Zero-pad the slice's cotangent back to the full extent.
    let x = node.inputs[0];
    let dims = static_dims(g, x, node)?;
    let a = g.shape(x)?.axis(axis).map_err(|m| unsupported(node, m))?;
    let mut pads = vec![[0, 0]; dims.len()];
    pads[a] = [start, dims[a] - start - len];
    Ok(vec![Some(g.add_node(Op::Pad { pads, value: 0.0 }, &[dy])?)])
}

pub(crate) fn concat(g: &mut Graph, node: &Node, dy: NodeId, needs: &[bool], axis: i64) -> Grads {
    let ins = &node.inputs;
    let a = g
        .shape(node.id)?
        .axis(axis)
        .map_err(|m| unsupported(node, m))?;
    let mut off = 0;
    let mut out = Vec::with_capacity(ins.len());
    for (k, &x) in ins.iter().enumerate() {
        let len = static_dims(g, x, node)?[a];
        out.push(if needs[k] {
            Some(g.add_node(
                Op::Narrow {
                    axis: a as i64,
                    start: off,
                    len,
                },
                &[dy],
            )?)
        } else {
            None
        });
        off += len;
    }
    Ok(out)
}

/// A slice is one index selection per sliced axis: differentiate it as Gathers with
/// constant indices (any step, negative included).
pub(crate) fn slice(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
    (axes, starts, ends, steps): (&[i64], &[i64], &[i64], &[i64]),
) -> Grads {
    let x = node.inputs[0];
    let dims = static_dims(g, x, node)?;
    let mut picks = Vec::new();
    for i in 0..starts.len() {
        let a = axes.get(i).copied().unwrap_or(i as i64);
        let a = g.shape(x)?.axis(a).map_err(|m| unsupported(node, m))?;
        let step = steps.get(i).copied().unwrap_or(1);
        let end = *ends
            .get(i)
            .ok_or_else(|| unsupported(node, "ends too short"))?;
        picks.push((a, slice_indices(dims[a], starts[i], end, step)));
    }
    if picks.iter().any(|(_, p)| p.is_empty()) {
        return Ok(vec![Some(zeros_of(g, x, node)?)]);
    }
    by_decomposition(g, node, dy, needs, |g| {
        let mut cur = x;
        for (a, p) in &picks {
            let idx = g.constant(HostTensor::from_i64(&[p.len()], p))?;
            cur = g.add_node(Op::Gather { axis: *a as i64 }, &[cur, idx])?;
        }
        Ok(cur)
    })
}

/// Tile is `[1, d0, 1, d1, ..]` expanded to `[r0, d0, r1, d1, ..]` and flattened back;
/// the sweep differentiates that decomposition (the expand's rule sums the copies).
pub(crate) fn tile(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
    repeats: &[usize],
) -> Grads {
    let x = node.inputs[0];
    let dims = static_dims(g, x, node)?;
    let ydims = static_dims(g, node.id, node)?;
    by_decomposition(g, node, dy, needs, |g| {
        let split: Vec<i64> = dims.iter().flat_map(|&d| [1, d as i64]).collect();
        let wide: Vec<rlx_ir::Dim> = repeats
            .iter()
            .zip(&dims)
            .flat_map(|(&r, &d)| [r.into(), d.into()])
            .collect();
        let v = reshape(g, x, split)?;
        let v = crate::util::expand(g, v, wide)?;
        reshape(g, v, ydims.iter().map(|&d| d as i64).collect())
    })
}

/// The padding is constant: keep the interior of dy, axis by axis.
pub(crate) fn pad(g: &mut Graph, node: &Node, dy: NodeId, pads: &[[usize; 2]]) -> Grads {
    let dims = static_dims(g, node.inputs[0], node)?;
    let mut d = dy;
    for (a, p) in pads.iter().enumerate() {
        if p[0] != 0 || p[1] != 0 {
            d = g.add_node(
                Op::Narrow {
                    axis: a as i64,
                    start: p[0],
                    len: dims[a],
                },
                &[d],
            )?;
        }
    }
    Ok(vec![Some(d)])
}

/// The indices ONNX Slice picks on an axis of size `n` (negative start / end count from
/// the end and are clamped; step ≠ 0).
fn slice_indices(n: usize, start: i64, end: i64, step: i64) -> Vec<i64> {
    let n = n as i64;
    if n == 0 || step == 0 {
        return vec![];
    }
    let norm = |v: i64| if v < 0 { v.saturating_add(n) } else { v };
    let (s, e) = (norm(start), norm(end));
    let mut out = Vec::new();
    if step > 0 {
        let (mut i, e) = (s.clamp(0, n), e.clamp(0, n));
        while i < e {
            out.push(i);
            i += step;
        }
    } else {
        let (mut i, e) = (s.clamp(0, n - 1), e.clamp(-1, n - 1));
        while i > e {
            out.push(i);
            i += step;
        }
    }
    out
}

/// Gather's VJP is a scatter-add; the IR has no scatter, so it is a matmul with the
/// one-hot matrix of the indices: dy viewed as `[pre, P, post]`, summed into
/// `[pre, D, post]` by `onehot[P, D]`. Indices are piecewise constant: their derivative
/// is zero (a true zero, not a missing rule).
pub(crate) fn gather(g: &mut Graph, node: &Node, dy: NodeId, needs: &[bool], axis: i64) -> Grads {
    let (data, idx) = (node.inputs[0], node.inputs[1]);
    let mut out = vec![None, None];
    if needs[0] {
        let dshape = g.shape(data)?.clone();
        let dims = static_dims(g, data, node)?;
        let a = dshape.axis(axis).map_err(|m| unsupported(node, m))?;
        let p: usize = static_dims(g, idx, node)?.iter().product();
        let d = dims[a];
        let pre: usize = dims[..a].iter().product();
        let post: usize = dims[a + 1..].iter().product();
        let idt = g.shape(idx)?.dtype;
        let flat = reshape(g, idx, vec![p as i64, 1])?;
        // Negative indices count from the end.
        let zero = scalar_like(g, 0.0, flat)?;
        let neg = compare(g, CompareOp::Lt, flat, zero)?;
        let dd = scalar_like(g, d as f64, flat)?;
        let wrapped = g.add(flat, dd)?;
        let flat = select(g, neg, wrapped, flat)?;
        let iota = iota_row(g, d, idt)?;
        let hit = compare(g, CompareOp::Eq, flat, iota)?;
        let onehot = g.cast(hit, dshape.dtype)?;
        let dy3 = reshape(g, dy, vec![pre as i64, p as i64, post as i64])?;
        let dyt = transpose(g, dy3, vec![0, 2, 1])?;
        let m = g.matmul(dyt, onehot)?;
        let back = transpose(g, m, vec![0, 2, 1])?;
        out[0] = Some(reshape(g, back, dims.iter().map(|&v| v as i64).collect())?);
    }
    if needs[1] {
        out[1] = Some(zeros_of(g, idx, node)?);
    }
    Ok(out)
}
