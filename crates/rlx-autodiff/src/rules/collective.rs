//! VJPs of the collectives. The loss they differentiate is the sum of every rank's loss
//! (each rank seeds its own `dy`), so a collective's adjoint is the collective that moves the
//! cotangents back: all-reduce ↔ all-reduce, all-gather ↔ reduce-scatter. `Max` has no
//! rule (which rank holds the maximum is not this rank's to know without another exchange).
use super::Grads;
use rlx_ir::{CollectiveReduce, Graph, Node, NodeId};

fn no_max(node: &Node) -> Grads {
    Err(crate::util::unsupported(
        node,
        "a Max collective has no gradient rule; reduce with Sum or Mean",
    ))
}

pub(super) fn all_reduce(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    reduce: CollectiveReduce,
) -> Grads {
    match reduce {
        CollectiveReduce::Max => no_max(node),
        // d/dx_s Σ_r L(y_r) with y_r = Σ x (or its mean) is Σ_r dy_r (or its mean).
        r => Ok(vec![Some(g.all_reduce(dy, r)?)]),
    }
}

pub(super) fn all_gather(g: &mut Graph, dy: NodeId, axis: usize, ranks: usize) -> Grads {
    Ok(vec![Some(g.reduce_scatter(
        dy,
        CollectiveReduce::Sum,
        axis,
        ranks,
    )?)])
}

pub(super) fn reduce_scatter(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    reduce: CollectiveReduce,
    axis: usize,
    ranks: usize,
) -> Grads {
    let full = g.all_gather(dy, axis, ranks)?;
    match reduce {
        CollectiveReduce::Max => no_max(node),
        CollectiveReduce::Sum => Ok(vec![Some(full)]),
        CollectiveReduce::Mean => {
            let dt = node.shape.dtype;
            let inv = g.scalar(1.0 / ranks as f64, dt)?;
            Ok(vec![Some(g.mul(full, inv)?)])
        }
    }
}
