//! `rms_norm(x)·gamma @ Wᵀ + residual` around a `DequantMatMul` → `FusedDequantMatMul
//! { scheme, norm_eps, residual }` (inputs x, w, [gamma], [residual]).
//!
//! A decode step of a quantized LLM is a chain of GEMVs with an RMS norm before the q/k/v and
//! gate/up products and a residual add after the output and down projections; each norm and
//! add is a launch of its own and a round trip of the hidden state through memory, about a
//! third of the step's kernels. Fused, the GEMV takes the norm of its input row and adds the
//! residual as it writes.
//!
//! Matched, at an `Add(y, r)` (either order) or at the `DequantMatMul` itself:
//! - the residual: `y` is a `DequantMatMul` whose only consumer is the add, and `r`, `y` and
//!   the sum have one shape and dtype;
//! - the norm: the product's x is an `RmsNorm` over the last dim with gamma and no beta,
//!   read only as the x of products (each fused product takes the norm of its row itself:
//!   a quantized model whose q, k and v matrices differ in type has three products after one
//!   norm, and the norm's launch goes away only when all three absorb it).
//!
//! A product with neither stays as it is.
use super::fusion::{at, fuse, Match, Uses};
use crate::{OptError, Pass, Rebuilder};
use rlx_ir::{normalize_axis, BinaryOp, Graph, Node, NodeId, Op, QuantScheme};

pub struct FuseDequantMatMul;

struct Found {
    x: NodeId,
    w: NodeId,
    scheme: QuantScheme,
    /// (gamma, eps)
    norm: Option<(NodeId, f32)>,
    residual: Option<NodeId>,
}

/// `id` is an RMS norm over its last dim (gamma only) read only as the x of products:
/// (its x, gamma, eps).
fn rms_norm_of(g: &Graph, uses: &Uses, id: NodeId) -> Option<(NodeId, NodeId, f32)> {
    let n = at(g, id)?;
    let Op::RmsNorm { axis, eps } = n.op else {
        return None;
    };
    let rank = n.shape.rank();
    let last = rank > 0 && normalize_axis(axis, rank).ok()? == rank - 1;
    let gamma = at(g, *n.inputs.get(1)?)?;
    let ok = last
        && n.inputs.len() == 2
        && gamma.shape.rank() == 1
        && uses.confined(id, |c| {
            at(g, c).is_some_and(|c| {
                matches!(c.op, Op::DequantMatMul { .. })
                    && c.inputs.first() == Some(&id)
                    && c.inputs[1..].iter().all(|&i| i != id)
            })
        });
    ok.then_some((n.inputs[0], n.inputs[1], eps))
}

/// The pattern whose product is `mm` (read by `consumer`), with `residual` added after.
fn around(g: &Graph, uses: &Uses, mm: &Node, residual: Option<NodeId>) -> Option<Match<Found>> {
    let Op::DequantMatMul { scheme } = mm.op else {
        return None;
    };
    let (&x, &w) = (mm.inputs.first()?, mm.inputs.get(1)?);
    let norm = rms_norm_of(g, uses, x);
    if norm.is_none() && residual.is_none() {
        return None;
    }
    // The norm is not claimed: every product it feeds absorbs it, and DCE drops it after.
    let mut interior = Vec::new();
    if residual.is_some() {
        interior.push(mm.id);
    }
    Some(Match {
        interior,
        data: Found {
            x: norm.map_or(x, |(x, _, _)| x),
            w,
            scheme,
            norm: norm.map(|(_, gamma, eps)| (gamma, eps)),
            residual,
        },
    })
}

fn find(g: &Graph, uses: &Uses, n: &Node, _claimed: &[bool]) -> Option<Match<Found>> {
    if matches!(n.op, Op::DequantMatMul { .. }) {
        return around(g, uses, n, None);
    }
    if n.op != Op::Binary(BinaryOp::Add) || n.inputs.len() != 2 {
        return None;
    }
    for (yi, ri) in [(0, 1), (1, 0)] {
        let (y, r) = (at(g, n.inputs[yi])?, at(g, n.inputs[ri])?);
        let fits = matches!(y.op, Op::DequantMatMul { .. })
            && r.id != y.id
            && y.shape == n.shape
            && r.shape == n.shape
            && uses.confined(y.id, |c| c == n.id);
        if fits {
            if let Some(m) = around(g, uses, y, Some(r.id)) {
                return Some(m);
            }
        }
    }
    None
}

fn emit(rb: &mut Rebuilder, n: &Node, f: &Found) -> Result<bool, OptError> {
    let mut ins = vec![rb.map(f.x)?, rb.map(f.w)?];
    if let Some((gamma, _)) = f.norm {
        ins.push(rb.map(gamma)?);
    }
    if let Some(r) = f.residual {
        ins.push(rb.map(r)?);
    }
    let op = Op::FusedDequantMatMul {
        scheme: f.scheme,
        norm_eps: f.norm.map(|(_, eps)| eps),
        residual: f.residual.is_some(),
        glu: None,
    };
    Ok(rb.try_emit(n.id, op, ins)?.is_some())
}

impl Pass for FuseDequantMatMul {
    fn name(&self) -> &'static str {
        "fuse_dequant_matmul"
    }

    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        fuse(self.name(), g, find, emit)
    }
}
