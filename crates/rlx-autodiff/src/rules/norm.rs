//! VJP rules of the Norm group: LayerNorm, RmsNorm, FusedResidualLN, FusedResidualRmsNorm.
use super::Grads;
use crate::util::{reduce, scalar_like, unbroadcast, unsupported};
use crate::AdError;
use rlx_ir::{Activation, Graph, Node, NodeId, ReduceOp};

pub(crate) fn layer_norm(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
    axis: i64,
    eps: f32,
) -> Grads {
    axis_norm(g, node, dy, needs, true, axis, eps)
}

pub(crate) fn rms_norm(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
    axis: i64,
    eps: f32,
) -> Grads {
    axis_norm(g, node, dy, needs, false, axis, eps)
}

pub(crate) fn fused_residual_ln(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
    has_bias: bool,
    eps: f32,
) -> Grads {
    residual_norm(g, node, dy, needs, true, has_bias, eps)
}

pub(crate) fn fused_residual_rms_norm(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
    has_bias: bool,
    eps: f32,
) -> Grads {
    residual_norm(g, node, dy, needs, false, has_bias, eps)
}

fn axis_norm(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
    layer: bool,
    axis: i64,
    eps: f32,
) -> Grads {
    let ins = &node.inputs;
    let a = g
        .shape(ins[0])?
        .axis(axis)
        .map_err(|m| unsupported(node, m))?;
    let n = norm_grads(g, layer, ins[0], ins[1], a, eps, dy, needs)?;
    let mut out = vec![n.dx, n.dgamma];
    if ins.len() > 2 {
        out.push(if needs[2] { Some(n.dbeta_src) } else { None });
    }
    finish(g, out, ins)
}

fn residual_norm(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
    layer: bool,
    has_bias: bool,
    eps: f32,
) -> Grads {
    let ins = &node.inputs;
    // Inputs: x, residual, [bias], gamma, [beta]; the norm sees s = x + residual (+ bias).
    let mut s = g.add(ins[0], ins[1])?;
    let gi = if has_bias {
        s = g.add(s, ins[2])?;
        3
    } else {
        2
    };
    let last = g.shape(s)?.rank() - 1;
    let need_s = needs[..gi].iter().any(|&b| b);
    let mut nn = vec![need_s, needs[gi]];
    nn.extend(needs.get(gi + 1));
    let n = norm_grads(g, layer, s, ins[gi], last, eps, dy, &nn)?;
    let mut out: Vec<Option<NodeId>> = (0..gi).map(|k| n.dx.filter(|_| needs[k])).collect();
    out.push(n.dgamma);
    if ins.len() > gi + 1 {
        out.push(if needs[gi + 1] {
            Some(n.dbeta_src)
        } else {
            None
        });
    }
    finish(g, out, ins)
}

/// Sum the per-element parameter terms down to each input's shape.
fn finish(g: &mut Graph, out: Vec<Option<NodeId>>, ins: &[NodeId]) -> Grads {
    out.into_iter()
        .zip(ins)
        .map(|(d, &x)| match d {
            Some(d) => {
                let to = g.shape(x)?.clone();
                Ok(Some(unbroadcast(g, d, &to)?))
            }
            None => Ok(None),
        })
        .collect()
}

struct NormGrads {
    dx: Option<NodeId>,
    /// dy·x̂, still at x's shape (summed by `finish`).
    dgamma: Option<NodeId>,
    /// dy, still at x's shape.
    dbeta_src: NodeId,
}

/// Shared LayerNorm / RMSNorm backward over axes `a..rank`:
/// g = dy·γ; LayerNorm dx = rstd·(g − mean(g) − x̂·mean(g·x̂)); RMSNorm drops mean(g).
#[allow(clippy::too_many_arguments)]
fn norm_grads(
    g: &mut Graph,
    layer: bool,
    x: NodeId,
    gamma: NodeId,
    a: usize,
    eps: f32,
    dy: NodeId,
    needs: &[bool],
) -> Result<NormGrads, AdError> {
    let r = g.shape(x)?.rank();
    let axes: Vec<i64> = (a as i64..r as i64).collect();
    let mean = |g: &mut Graph, v: NodeId| reduce(g, ReduceOp::Mean, v, axes.clone(), true);
    let xc = if layer {
        let mu = mean(g, x)?;
        g.sub(x, mu)?
    } else {
        x
    };
    let sq = g.mul(xc, xc)?;
    let var = mean(g, sq)?;
    let e = scalar_like(g, eps as f64, x)?;
    let ve = g.add(var, e)?;
    let rstd = g.activation(Activation::Rsqrt, ve)?;
    let xhat = g.mul(xc, rstd)?;
    let dx = if needs[0] {
        let gd = g.mul(dy, gamma)?;
        let gx = g.mul(gd, xhat)?;
        let m2 = mean(g, gx)?;
        let t = g.mul(xhat, m2)?;
        let mut inner = g.sub(gd, t)?;
        if layer {
            let m1 = mean(g, gd)?;
            inner = g.sub(inner, m1)?;
        }
        Some(g.mul(rstd, inner)?)
    } else {
        None
    };
    let dgamma = if needs[1] {
        Some(g.mul(dy, xhat)?)
    } else {
        None
    };
    Ok(NormGrads {
        dx,
        dgamma,
        dbeta_src: dy,
    })
}
