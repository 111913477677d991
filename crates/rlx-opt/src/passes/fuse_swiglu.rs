//! `silu(gate) · up` over the two halves of one tensor → `FusedSwiGLU { gate_first,
//! cast_to: None }`.
//!
//! Matched: `Mul(s, u)` (either order) where `s` is `Activation::Silu(gate)` or silu
//! written out as `gate · sigmoid(gate)` (either order), and `gate`, `up` are `Narrow`s of
//! one tensor `X` along its last axis, each of length n, starting at 0 and n, with X's last
//! dim exactly 2n. The silu, sigmoid and both narrows must have no consumer outside the
//! pattern and not be graph outputs.
use super::fusion::{at, fuse, Match, Uses};
use crate::{OptError, Pass, Rebuilder};
use rlx_ir::{normalize_axis, Activation, BinaryOp, Dim, Graph, Node, NodeId, Op};

pub struct FuseSwiGLU;

struct Found {
    x: NodeId,
    gate_first: bool,
}

/// `s` computes silu of some node: that node and the interior nodes of the silu besides `s`.
fn silu_of(g: &Graph, s: &Node) -> Option<(NodeId, Vec<NodeId>)> {
    match &s.op {
        Op::Activation(Activation::Silu) => Some((*s.inputs.first()?, Vec::new())),
        Op::Binary(BinaryOp::Mul) if s.inputs.len() == 2 => {
            for (p, q) in [(0, 1), (1, 0)] {
                let sig = at(g, s.inputs[q])?;
                if sig.op == Op::Activation(Activation::Sigmoid)
                    && sig.inputs.first() == Some(&s.inputs[p])
                {
                    return Some((s.inputs[p], vec![sig.id]));
                }
            }
            None
        }
        _ => None,
    }
}

/// A narrow along the last axis: (source, start, len).
fn half(g: &Graph, id: NodeId) -> Option<(NodeId, usize, usize)> {
    let n = at(g, id)?;
    let Op::Narrow { axis, start, len } = n.op else {
        return None;
    };
    let rank = n.shape.rank();
    (rank > 0 && normalize_axis(axis, rank).ok()? == rank - 1).then_some((
        *n.inputs.first()?,
        start,
        len,
    ))
}

fn find(g: &Graph, uses: &Uses, n: &Node, _claimed: &[bool]) -> Option<Match<Found>> {
    if n.op != Op::Binary(BinaryOp::Mul) || n.inputs.len() != 2 {
        return None;
    }
    for (si, ui) in [(0, 1), (1, 0)] {
        let s = at(g, n.inputs[si])?;
        let Some((gate, extra)) = silu_of(g, s) else {
            continue;
        };
        let up = n.inputs[ui];
        let (Some((xg, sg, lg)), Some((xu, su, lu))) = (half(g, gate), half(g, up)) else {
            continue;
        };
        let x = at(g, xg)?;
        let two_n = matches!(x.shape.dims.last(), Some(Dim::Static(d)) if *d == 2 * lg);
        let halves = (sg == 0 && su == lg) || (sg == lg && su == 0);
        if xg != xu || lg != lu || lg == 0 || !two_n || !halves {
            continue;
        }
        let mut inside = vec![n.id, s.id];
        inside.extend(&extra);
        let within = |id: NodeId| inside.contains(&id);
        let ok = uses.confined(s.id, |c| c == n.id)
            && extra.iter().all(|&e| uses.confined(e, within))
            && uses.confined(gate, within)
            && uses.confined(up, within);
        if !ok {
            continue;
        }
        let mut interior = vec![s.id, gate, up];
        interior.extend(extra);
        return Some(Match {
            interior,
            data: Found {
                x: xg,
                gate_first: sg == 0,
            },
        });
    }
    None
}

fn emit(rb: &mut Rebuilder, n: &Node, f: &Found) -> Result<bool, OptError> {
    let op = Op::FusedSwiGLU {
        cast_to: None,
        gate_first: f.gate_first,
    };
    let x = rb.map(f.x)?;
    Ok(rb.try_emit(n.id, op, vec![x])?.is_some())
}

impl Pass for FuseSwiGLU {
    fn name(&self) -> &'static str {
        "fuse_swiglu"
    }

    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        fuse(self.name(), g, find, emit)
    }
}
