//! `act(a @ w + bias)` → `FusedMatMulBiasAct { activation }`.
//!
//! Matched: a `MatMul` with a 2-D weight, an `Add` (either operand order) of a bias that
//! broadcasts along the last dim only (`[N]` or `[1, .., 1, N]`, reshaped to `[N]` when it
//! has leading ones) without changing the product's shape, and optionally any `Activation`
//! of that sum. The product (and the sum, when an activation follows) must have no other
//! consumer and not be a graph output, so nothing is computed twice.
use super::fusion::{at, fuse, Match, Uses};
use crate::{OptError, Pass, Rebuilder};
use rlx_ir::{Activation, BinaryOp, Dim, Graph, Node, NodeId, Op, Shape};

pub struct FuseMatMulBiasAct;

struct Found {
    a: NodeId,
    w: NodeId,
    bias: NodeId,
    activation: Option<Activation>,
}

/// `bias` is `[.., N]` with every leading dim 1 and N the product's last dim.
fn is_row_bias(bias: &Shape, out: &Shape) -> bool {
    let (Some(n), Some(last)) = (out.dims.last(), bias.dims.last()) else {
        return false;
    };
    bias.dtype == out.dtype
        && bias.rank() <= out.rank()
        && last == n
        && bias.dims[..bias.rank() - 1].iter().all(Dim::is_one)
}

fn find(g: &Graph, uses: &Uses, n: &Node, _claimed: &[bool]) -> Option<Match<Found>> {
    let (activation, sum) = match &n.op {
        Op::Activation(a) => (Some(*a), at(g, *n.inputs.first()?)?),
        Op::Binary(BinaryOp::Add) => (None, n),
        _ => return None,
    };
    if sum.op != Op::Binary(BinaryOp::Add) || sum.inputs.len() != 2 {
        return None;
    }
    let mut interior = Vec::new();
    if activation.is_some() {
        if !uses.confined(sum.id, |c| c == n.id) {
            return None;
        }
        interior.push(sum.id);
    }
    for (m, b) in [(0, 1), (1, 0)] {
        let mm = at(g, sum.inputs[m])?;
        let bias = at(g, sum.inputs[b])?;
        let ok = mm.op == Op::MatMul
            && mm.inputs.len() == 2
            && mm.shape == sum.shape
            && at(g, mm.inputs[1]).is_some_and(|w| w.shape.rank() == 2)
            && is_row_bias(&bias.shape, &mm.shape)
            && sum.inputs[0] != sum.inputs[1]
            && uses.confined(mm.id, |c| c == sum.id);
        if ok {
            interior.push(mm.id);
            return Some(Match {
                interior,
                data: Found {
                    a: mm.inputs[0],
                    w: mm.inputs[1],
                    bias: bias.id,
                    activation,
                },
            });
        }
    }
    None
}

fn emit(rb: &mut Rebuilder, n: &Node, f: &Found) -> Result<bool, OptError> {
    let (a, w) = (rb.map(f.a)?, rb.map(f.w)?);
    let bias = rb.map(f.bias)?;
    let bias = rb.as_vector(bias)?;
    let op = Op::FusedMatMulBiasAct {
        activation: f.activation,
    };
    Ok(rb.try_emit(n.id, op, vec![a, w, bias])?.is_some())
}

impl Pass for FuseMatMulBiasAct {
    fn name(&self) -> &'static str {
        "fuse_matmul_bias_act"
    }

    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        fuse(self.name(), g, find, emit)
    }
}
