//! `norm(x + residual [+ bias])` over the last dim → `FusedResidualLN` /
//! `FusedResidualRmsNorm { has_bias, eps }` (inputs x, residual, [bias], gamma, [beta]).
//!
//! Matched: a `LayerNorm` / `RmsNorm` whose axis is the last dim, fed by `Add(x, r)` with x,
//! r and the sum all of one shape, or by `Add(Add(x, r), bias)` (either operand order) with
//! a bias `[N]` / `[1, .., N]` along the last dim.
//!
//! The fused op yields only the normalised value. In a pre-norm transformer the sum is
//! also the residual stream the next block adds to, so by default ([`FuseResidualNorm::new`])
//! the pattern is fused only when the sums have no consumer besides the norm and are not
//! graph outputs: the rewrite then never adds work. [`FuseResidualNorm::keep_shared_sum`]
//! fuses in that case too and keeps the `Add` for its other consumers (the sum is then
//! computed twice, once inside the fused kernel, which saves a memory round trip on a GPU
//! but not on the CPU).
use super::fusion::{at, fuse, Match, Uses};
use crate::{OptError, Pass, Rebuilder};
use rlx_ir::{normalize_axis, BinaryOp, Dim, Graph, Node, NodeId, Op, Shape};

pub struct FuseResidualNorm {
    keep_shared: bool,
}

impl Default for FuseResidualNorm {
    fn default() -> Self {
        FuseResidualNorm::new()
    }
}

impl FuseResidualNorm {
    /// Fuse only sums the norm alone consumes.
    pub fn new() -> FuseResidualNorm {
        FuseResidualNorm { keep_shared: false }
    }

    /// Fuse shared sums as well, keeping the `Add` for their other consumers.
    pub fn keep_shared_sum() -> FuseResidualNorm {
        FuseResidualNorm { keep_shared: true }
    }
}

struct Found {
    x: NodeId,
    residual: NodeId,
    bias: Option<NodeId>,
    rest: Vec<NodeId>,
    layer: bool,
    eps: f32,
}

fn is_add(n: &Node) -> bool {
    n.op == Op::Binary(BinaryOp::Add) && n.inputs.len() == 2
}

fn is_row_bias(bias: &Shape, out: &Shape) -> bool {
    bias.dtype == out.dtype
        && bias.rank() >= 1
        && bias.rank() <= out.rank()
        && bias.dims.last() == out.dims.last()
        && bias.dims[..bias.rank() - 1].iter().all(Dim::is_one)
}

/// `x + r` with both operands of the sum's own shape.
fn plain_sum(g: &Graph, s: &Node) -> Option<(NodeId, NodeId)> {
    if !is_add(s) {
        return None;
    }
    let (x, r) = (at(g, s.inputs[0])?, at(g, s.inputs[1])?);
    (x.shape == s.shape && r.shape == s.shape).then_some((x.id, r.id))
}

impl FuseResidualNorm {
    fn find(&self, g: &Graph, uses: &Uses, n: &Node) -> Option<Match<Found>> {
        let (layer, axis, eps) = match n.op {
            Op::LayerNorm { axis, eps } => (true, axis, eps),
            Op::RmsNorm { axis, eps } => (false, axis, eps),
            _ => return None,
        };
        let rank = n.shape.rank();
        if rank == 0 || normalize_axis(axis, rank).ok()? != rank - 1 || n.inputs.len() < 2 {
            return None;
        }
        let s = at(g, n.inputs[0])?;
        if !is_add(s) {
            return None;
        }
        let mut interior = Vec::new();
        let take = |id: NodeId, by: NodeId, interior: &mut Vec<NodeId>| {
            if uses.confined(id, |c| c == by) {
                interior.push(id);
                true
            } else {
                self.keep_shared
            }
        };
        if !take(s.id, n.id, &mut interior) {
            return None;
        }
        // The bias form first: a plain reading of `(x + r) + bias` would need a bias of
        // the full shape.
        let mut parts = None;
        for (t, b) in [(0, 1), (1, 0)] {
            let (t, b) = (at(g, s.inputs[t])?, at(g, s.inputs[b])?);
            if t.shape != s.shape || !is_row_bias(&b.shape, &s.shape) || t.id == b.id {
                continue;
            }
            if let Some((x, r)) = plain_sum(g, t) {
                let mut inner = interior.clone();
                if take(t.id, s.id, &mut inner) {
                    interior = inner;
                    parts = Some((x, r, Some(b.id)));
                    break;
                }
            }
        }
        let (x, residual, bias) = match parts {
            Some(p) => p,
            None => {
                let (x, r) = plain_sum(g, s)?;
                (x, r, None)
            }
        };
        Some(Match {
            interior,
            data: Found {
                x,
                residual,
                bias,
                rest: n.inputs[1..].to_vec(),
                layer,
                eps,
            },
        })
    }
}

fn emit(rb: &mut Rebuilder, n: &Node, f: &Found) -> Result<bool, OptError> {
    let mut ins = vec![rb.map(f.x)?, rb.map(f.residual)?];
    if let Some(b) = f.bias {
        let b = rb.map(b)?;
        ins.push(rb.as_vector(b)?);
    }
    for &p in &f.rest {
        ins.push(rb.map(p)?);
    }
    let (has_bias, eps) = (f.bias.is_some(), f.eps);
    let op = if f.layer {
        Op::FusedResidualLN { has_bias, eps }
    } else {
        Op::FusedResidualRmsNorm { has_bias, eps }
    };
    Ok(rb.try_emit(n.id, op, ins)?.is_some())
}

impl Pass for FuseResidualNorm {
    fn name(&self) -> &'static str {
        "fuse_residual_norm"
    }

    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        fuse(self.name(), g, |g, uses, n, _| self.find(g, uses, n), emit)
    }
}
