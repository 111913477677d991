//! `FusedSwiGLU(x) → (Fused)DequantMatMul` → `FusedDequantMatMul { glu: Some(gate_first) }`
//! reading x directly.
//!
//! In a quantized SwiGLU MLP the down projection's input is `silu(gate)·up` of the gate/up
//! product: one more launch and round trip per layer of a decode step. Fused, the GEMV stages
//! `silu(gate)·up` itself while it prepares its input row.
//!
//! Matched at a `DequantMatMul`, or a `FusedDequantMatMul` without a norm or SwiGLU of its
//! own, whose x is a `FusedSwiGLU` that keeps its input's dtype (no `cast_to` to another one)
//! and is read by nothing else. Runs after `FuseSwiGLU` and `FuseDequantMatMul`.
use super::fusion::{at, fuse, Match, Uses};
use crate::{OptError, Pass, Rebuilder};
use rlx_ir::{Graph, Node, NodeId, Op};

pub struct FuseSwiGLUDequantMatMul;

struct Found {
    /// The SwiGLU's input, the fused op's new x.
    x: NodeId,
    gate_first: bool,
}

fn find(g: &Graph, uses: &Uses, n: &Node, _claimed: &[bool]) -> Option<Match<Found>> {
    let fits = matches!(
        n.op,
        Op::DequantMatMul { .. }
            | Op::FusedDequantMatMul {
                norm_eps: None,
                glu: None,
                ..
            }
    );
    if !fits {
        return None;
    }
    let s = at(g, *n.inputs.first()?)?;
    let Op::FusedSwiGLU {
        cast_to,
        gate_first,
    } = s.op
    else {
        return None;
    };
    let src = at(g, *s.inputs.first()?)?;
    let keeps_dtype = cast_to.is_none_or(|d| d == src.shape.dtype);
    let ok = keeps_dtype && s.inputs.len() == 1 && uses.confined(s.id, |c| c == n.id);
    ok.then(|| Match {
        interior: vec![s.id],
        data: Found {
            x: src.id,
            gate_first,
        },
    })
}

fn emit(rb: &mut Rebuilder, n: &Node, f: &Found) -> Result<bool, OptError> {
    let mut ins = vec![rb.map(f.x)?];
    for &i in &n.inputs[1..] {
        ins.push(rb.map(i)?);
    }
    let op = match n.op {
        Op::DequantMatMul { scheme } => Op::FusedDequantMatMul {
            scheme,
            norm_eps: None,
            residual: false,
            glu: Some(f.gate_first),
        },
        Op::FusedDequantMatMul {
            scheme, residual, ..
        } => Op::FusedDequantMatMul {
            scheme,
            norm_eps: None,
            residual,
            glu: Some(f.gate_first),
        },
        _ => return Ok(false),
    };
    Ok(rb.try_emit(n.id, op, ins)?.is_some())
}

impl Pass for FuseSwiGLUDequantMatMul {
    fn name(&self) -> &'static str {
        "fuse_swiglu_dequant_matmul"
    }

    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        fuse(self.name(), g, find, emit)
    }
}
