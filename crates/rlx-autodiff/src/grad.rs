//! The reverse sweep: activity analysis, rule dispatch in reverse node order, and
//! accumulation of fan-out cotangents.
use crate::{rules, AdError};
use rlx_ir::{Graph, HostTensor, NodeId, Op};

/// Name of the cotangent input that [`grad`] adds.
pub const D_OUTPUT: &str = "d_output";

/// The VJP graph of output 0 with respect to `wrt`: the forward graph plus an input
/// `d_output` (output 0's cotangent, same shape and dtype); outputs `[d_wrt…]`.
pub fn grad(graph: &Graph, wrt: &[NodeId]) -> Result<Graph, AdError> {
    let out = first_output(graph)?;
    if graph.inputs().any(|(n, _)| n == D_OUTPUT) {
        return Err(AdError::NameClash(D_OUTPUT.into()));
    }
    let mut g = graph.clone();
    let shape = g.shape(out)?.clone();
    let seed = g.input(D_OUTPUT, shape)?;
    let grads = backward(&mut g, out, seed, wrt)?;
    g.outputs = with_zeros(&mut g, wrt, grads)?;
    Ok(g)
}

/// For a 1-element loss at output 0: outputs `[loss, d_wrt…]`, seeded with a constant 1
/// (no `d_output` input is added).
pub fn grad_with_loss(graph: &Graph, wrt: &[NodeId]) -> Result<Graph, AdError> {
    let out = first_output(graph)?;
    let shape = graph.shape(out)?.clone();
    let dims = shape
        .static_dims()
        .filter(|d| d.iter().product::<usize>() == 1)
        .ok_or_else(|| AdError::NotScalarLoss {
            shape: shape.to_string(),
        })?;
    let mut g = graph.clone();
    let seed = g.constant(HostTensor::from_f64_as(&dims, &[1.0], shape.dtype))?;
    let grads = backward(&mut g, out, seed, wrt)?;
    let grads = with_zeros(&mut g, wrt, grads)?;
    g.outputs = std::iter::once(out).chain(grads).collect();
    Ok(g)
}

fn first_output(graph: &Graph) -> Result<NodeId, AdError> {
    let out = *graph.outputs.first().ok_or(AdError::NoOutput)?;
    let node = graph.node(out)?;
    if !node.shape.dtype.is_float() {
        return Err(AdError::Unsupported {
            node: out,
            op: node.op.kind().name(),
            msg: format!(
                "output 0 is {}; only float outputs can be differentiated",
                node.shape
            ),
        });
    }
    Ok(out)
}

/// Reverse sweep over `g`'s nodes `out` down to 0, appending backward nodes to `g`.
/// Returns each wrt's cotangent, None where output `out` does not depend on it. Rules that
/// decompose an op into primitives call this again on the nodes they appended.
pub(crate) fn backward(
    g: &mut Graph,
    out: NodeId,
    seed: NodeId,
    wrt: &[NodeId],
) -> Result<Vec<Option<NodeId>>, AdError> {
    g.node(out)?;
    // Only nodes up to `out` can matter; nodes appended while sweeping are never visited.
    let n = out.0 + 1;
    let mut from_wrt = vec![false; n];
    for &w in wrt {
        let node = g.nodes.get(w.0).ok_or_else(|| AdError::BadWrt {
            node: w,
            msg: "no such node".into(),
        })?;
        if !node.shape.dtype.is_float() {
            return Err(AdError::BadWrt {
                node: w,
                msg: format!("{} has no gradient (not a float type)", node.shape),
            });
        }
        // A node after `out` cannot influence it: its gradient stays None (zero).
        if w.0 < n {
            from_wrt[w.0] = true;
        }
    }
    // Forward: which nodes depend on a wrt node through float, non-stopped edges.
    for node in &g.nodes[..n] {
        if from_wrt[node.id.0]
            || matches!(node.op, Op::StopGradient)
            || !node.shape.dtype.is_float()
        {
            continue;
        }
        from_wrt[node.id.0] = node.inputs.iter().any(|i| from_wrt[i.0]);
    }
    // Backward: which nodes output 0 depends on.
    let mut reaches = vec![false; n];
    reaches[out.0] = true;
    for id in (0..=out.0).rev() {
        if reaches[id] {
            for i in &g.nodes[id].inputs {
                reaches[i.0] = true;
            }
        }
    }
    let active: Vec<bool> = (0..n).map(|i| from_wrt[i] && reaches[i]).collect();

    let mut acc: Vec<Option<NodeId>> = vec![None; n];
    if active[out.0] {
        acc[out.0] = Some(seed);
    }
    for id in (0..=out.0).rev() {
        let Some(dy) = acc[id] else { continue };
        let node = &g.nodes[id].clone();
        if node.op.is_leaf() {
            continue;
        }
        let needs: Vec<bool> = node.inputs.iter().map(|i| active[i.0]).collect();
        if !needs.iter().any(|&b| b) {
            continue;
        }
        let grads = rules::vjp(g, node, dy, &needs)?;
        for (k, &inp) in node.inputs.iter().enumerate() {
            if !needs[k] {
                continue;
            }
            let d = grads
                .get(k)
                .copied()
                .flatten()
                .ok_or_else(|| AdError::Unsupported {
                    node: node.id,
                    op: node.op.kind().name(),
                    msg: format!("the rule gave no gradient for input {k} ({inp})"),
                })?;
            let (want, got) = (&g.nodes[inp.0].shape, g.shape(d)?);
            if want != got {
                return Err(AdError::Unsupported {
                    node: node.id,
                    op: node.op.kind().name(),
                    msg: format!("the rule's gradient for input {k} is {got}, the input is {want}"),
                });
            }
            acc[inp.0] = Some(match acc[inp.0] {
                None => d,
                Some(prev) => g.add(prev, d)?,
            });
        }
    }
    Ok(wrt
        .iter()
        .map(|&w| acc.get(w.0).copied().flatten())
        .collect())
}

/// Fill the gradients of wrt nodes output 0 does not depend on with zeros.
fn with_zeros(
    g: &mut Graph,
    wrt: &[NodeId],
    grads: Vec<Option<NodeId>>,
) -> Result<Vec<NodeId>, AdError> {
    wrt.iter()
        .zip(grads)
        .map(|(&w, d)| match d {
            Some(d) => Ok(d),
            None => zeros_like(g, w),
        })
        .collect()
}

/// The gradient of a wrt node output 0 does not depend on: genuinely zero.
fn zeros_like(g: &mut Graph, x: NodeId) -> Result<NodeId, AdError> {
    let shape = g.shape(x)?.clone();
    match shape.static_dims() {
        Some(dims) => {
            let n = dims.iter().product();
            Ok(g.constant(HostTensor::from_f64_as(&dims, &vec![0.0; n], shape.dtype))?)
        }
        None => {
            // Symbolic dims: broadcast a 0-d zero to the run-time shape.
            let z = g.scalar(0.0, shape.dtype)?;
            Ok(g.add_node(Op::Expand { shape: shape.dims }, &[z])?)
        }
    }
}
