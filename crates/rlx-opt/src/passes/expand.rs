//! Expansion of fused ops a backend does not run natively back to primitive ops.
//!
//! A backend says which fused ops it executes ([`Expand::new`] with a predicate, or
//! [`Expand::keeping`] with op kind names); every other `FusedMatMulBiasAct`,
//! `FusedDequantMatMul`,
//! `FusedResidualLN`, `FusedResidualRmsNorm`, `FusedSwiGLU`, `RopeCacheWrite`, `CachedAttention`,
//! `ElementwiseRegion`,
//! `BatchElementwiseRegion` and `TransformRegion` is rewritten into the primitive ops it
//! stands for, in the order the fused kernels compute (so f32/f64 results are the same up
//! to the rounding the fused kernel skips between steps).
use crate::{OptError, Pass, Rebuilder};
use rlx_ir::{
    BinaryOp, ChainOperand, ChainStep, DType, Dim, Graph, Node, NodeId, Op, OpKindSet,
    RegionPrologue, TransformStep,
};
use std::sync::Arc;

type Supported = Arc<dyn Fn(&Op) -> bool + Send + Sync>;

#[derive(Clone)]
pub struct Expand {
    supported: Supported,
}

impl Expand {
    /// Keep the fused ops `supported` accepts, expand the others.
    pub fn new(supported: impl Fn(&Op) -> bool + Send + Sync + 'static) -> Expand {
        Expand {
            supported: Arc::new(supported),
        }
    }

    /// Keep the fused ops whose kind is in `kinds`, expand the others.
    pub fn keeping(kinds: OpKindSet) -> Expand {
        Expand::new(move |op| kinds.contains(op.kind()))
    }

    /// Expand every fused op (a backend that runs primitives only).
    pub fn all() -> Expand {
        Expand::new(|_| false)
    }
}

/// Emit `chain` over `inputs` (new ids, prologue already applied); the last step's node.
fn emit_chain(
    rb: &mut Rebuilder,
    n: &Node,
    chain: &[ChainStep],
    inputs: &[NodeId],
) -> Result<NodeId, OptError> {
    let mut steps: Vec<NodeId> = Vec::with_capacity(chain.len());
    for st in chain {
        let get = |o: &ChainOperand| -> Result<NodeId, OptError> {
            match *o {
                ChainOperand::Input(i) => inputs.get(i).copied(),
                ChainOperand::Step(j) => steps.get(j).copied(),
            }
            .ok_or_else(|| rb.error(n, format!("chain operand {o:?} does not exist")))
        };
        let (op, ins) = match st {
            ChainStep::Activation(a, x) => (Op::Activation(*a), vec![get(x)?]),
            ChainStep::Binary(b, x, y) => (Op::Binary(*b), vec![get(x)?, get(y)?]),
            ChainStep::Compare(c, x, y) => (Op::Compare(*c), vec![get(x)?, get(y)?]),
            ChainStep::Cast(t, x) => (Op::Cast { to: *t }, vec![get(x)?]),
            ChainStep::Where(c, x, y) => (Op::Where, vec![get(c)?, get(x)?, get(y)?]),
        };
        steps.push(rb.add(op, &ins)?);
    }
    steps
        .last()
        .copied()
        .ok_or_else(|| rb.error(n, "the chain is empty"))
}

/// `id` broadcast up to `dims` when a chain's last step does not read every input.
fn widen(rb: &mut Rebuilder, id: NodeId, dims: &[Dim]) -> Result<NodeId, OptError> {
    if rb.new_node(id)?.shape.dims == dims {
        return Ok(id);
    }
    rb.add(
        Op::Expand {
            shape: dims.to_vec(),
        },
        &[id],
    )
}

fn prologue(rb: &mut Rebuilder, p: RegionPrologue, x: NodeId) -> Result<NodeId, OptError> {
    match p {
        RegionPrologue::None => Ok(x),
        RegionPrologue::ResizeNearest2x => rb.add(Op::ResizeNearest2x, &[x]),
    }
}

/// The primitives for one fused node; the node that stands for it.
fn expand(rb: &mut Rebuilder, n: &Node) -> Result<NodeId, OptError> {
    let ins = rb.inputs(n)?;
    let need = |k: usize| -> Result<(), OptError> {
        if ins.len() < k {
            Err(rb.error(n, format!("expected {k} inputs, got {}", ins.len())))
        } else {
            Ok(())
        }
    };
    match &n.op {
        Op::FusedMatMulBiasAct { activation } => {
            need(3)?;
            let mm = rb.add(Op::MatMul, &ins[..2])?;
            let s = rb.add(Op::Binary(BinaryOp::Add), &[mm, ins[2]])?;
            match activation {
                Some(a) => rb.add(Op::Activation(*a), &[s]),
                None => Ok(s),
            }
        }
        Op::FusedDequantMatMul {
            scheme,
            norm_eps,
            residual,
            glu,
        } => {
            let want = 2 + usize::from(norm_eps.is_some()) + usize::from(*residual);
            need(want)?;
            let x = match (norm_eps, glu) {
                (Some(eps), _) => rb.add(
                    Op::RmsNorm {
                        axis: -1,
                        eps: *eps,
                    },
                    &[ins[0], ins[2]],
                )?,
                (None, Some(gate_first)) => rb.add(
                    Op::FusedSwiGLU {
                        cast_to: None,
                        gate_first: *gate_first,
                    },
                    &[ins[0]],
                )?,
                (None, None) => ins[0],
            };
            let y = rb.add(Op::DequantMatMul { scheme: *scheme }, &[x, ins[1]])?;
            match residual {
                true => rb.add(Op::Binary(BinaryOp::Add), &[ins[want - 1], y]),
                false => Ok(y),
            }
        }
        Op::FusedResidualLN { has_bias, eps } | Op::FusedResidualRmsNorm { has_bias, eps } => {
            let base = if *has_bias { 4 } else { 3 };
            need(base)?;
            let mut s = rb.add(Op::Binary(BinaryOp::Add), &ins[..2])?;
            if *has_bias {
                s = rb.add(Op::Binary(BinaryOp::Add), &[s, ins[2]])?;
            }
            let mut norm_ins = vec![s];
            norm_ins.extend(&ins[base - 1..]);
            let op = match n.op {
                Op::FusedResidualLN { .. } => Op::LayerNorm {
                    axis: -1,
                    eps: *eps,
                },
                _ => Op::RmsNorm {
                    axis: -1,
                    eps: *eps,
                },
            };
            rb.add(op, &norm_ins)
        }
        Op::FusedSwiGLU {
            cast_to,
            gate_first,
        } => {
            need(1)?;
            let x = rb.new_node(ins[0])?;
            let from = x.shape.dtype;
            let half = match x.shape.dims.last() {
                Some(Dim::Static(d)) if d % 2 == 0 => d / 2,
                _ => return Err(rb.error(n, "expansion needs a static, even last dim")),
            };
            // The fused kernel computes in the wider of the two types: cast first when
            // widening, last when narrowing.
            let cast = cast_to.filter(|&t| t != from);
            let widen_first = cast.is_some_and(|t: DType| t.size_bytes() >= from.size_bytes());
            let mut x = ins[0];
            if widen_first {
                x = rb.add(
                    Op::Cast {
                        to: cast.unwrap_or(from),
                    },
                    &[x],
                )?;
            }
            let (gs, us) = if *gate_first { (0, half) } else { (half, 0) };
            let narrow = |start| Op::Narrow {
                axis: -1,
                start,
                len: half,
            };
            let gate = rb.add(narrow(gs), &[x])?;
            let up = rb.add(narrow(us), &[x])?;
            let silu = rb.add(Op::Activation(rlx_ir::Activation::Silu), &[gate])?;
            let mut y = rb.add(Op::Binary(BinaryOp::Mul), &[up, silu])?;
            if let (Some(t), false) = (cast, widen_first) {
                y = rb.add(Op::Cast { to: t }, &[y])?;
            }
            Ok(y)
        }
        Op::ElementwiseRegion { chain, prologue: p } => {
            need(1)?;
            let mut ins = ins.clone();
            ins[0] = prologue(rb, *p, ins[0])?;
            let y = emit_chain(rb, n, chain, &ins)?;
            widen(rb, y, &n.shape.dims)
        }
        Op::BatchElementwiseRegion {
            chain,
            num_batch_inputs,
            prologue: p,
        } => {
            let nb = *num_batch_inputs;
            need(nb.max(1))?;
            let mut per = n.shape.dims.clone();
            if let Some(d) = per.first_mut() {
                *d = Dim::Static(1);
            }
            let mut outs = Vec::with_capacity(nb);
            for k in 0..nb {
                let mut cur = vec![prologue(rb, *p, ins[k])?];
                cur.extend(&ins[nb..]);
                let y = emit_chain(rb, n, chain, &cur)?;
                outs.push(widen(rb, y, &per)?);
            }
            if outs.len() == 1 {
                Ok(outs[0])
            } else {
                rb.add(Op::Concat { axis: 0 }, &outs)
            }
        }
        Op::RopeCacheWrite {
            axis,
            head_dim,
            n_rot,
            style,
        } => {
            need(5)?;
            let rope = Op::Rope {
                head_dim: *head_dim,
                n_rot: *n_rot,
                style: *style,
            };
            let r = rb.add(rope, &[ins[1], ins[3], ins[4]])?;
            rb.add(Op::CacheWrite { axis: *axis }, &[ins[0], r, ins[2]])
        }
        Op::CachedAttention { spec, rope } => {
            need(if rope.is_some() { 8 } else { 6 })?;
            let (mut q, mut k) = (ins[0], ins[1]);
            if let Some(r) = rope {
                let op = Op::Rope {
                    head_dim: spec.head_dim,
                    n_rot: r.n_rot,
                    style: r.style,
                };
                q = rb.add(op.clone(), &[q, ins[6], ins[7]])?;
                k = rb.add(op, &[k, ins[6], ins[7]])?;
            }
            let kc = rb.add(Op::CacheWrite { axis: 1 }, &[ins[3], k, ins[5]])?;
            let vc = rb.add(Op::CacheWrite { axis: 1 }, &[ins[4], ins[2], ins[5]])?;
            let mut spec = spec.clone();
            spec.past = true;
            rb.add(Op::Attention(spec), &[q, kc, vc, ins[5]])
        }
        Op::TransformRegion { steps } => {
            need(1)?;
            let mut x = ins[0];
            for st in steps {
                let op = match st {
                    TransformStep::Reshape(s) => Op::Reshape { shape: s.clone() },
                    TransformStep::Transpose(p) => Op::Transpose { perm: p.clone() },
                    TransformStep::Narrow { axis, start, len } => Op::Narrow {
                        axis: *axis,
                        start: *start,
                        len: *len,
                    },
                    TransformStep::Expand(d) => Op::Expand { shape: d.clone() },
                };
                x = rb.add(op, &[x])?;
            }
            Ok(x)
        }
        op => Err(rb.error(n, format!("{} is not a fused op", op.kind()))),
    }
}

impl Pass for Expand {
    fn name(&self) -> &'static str {
        "expand"
    }

    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        let mut rb = Rebuilder::new(self.name(), g);
        for n in &g.nodes {
            if n.op.kind().is_fused() && !(self.supported)(&n.op) {
                let y = expand(&mut rb, n)?;
                rb.replace(n.id, y)?;
            } else {
                rb.copy(n.id)?;
            }
        }
        rb.finish()
    }
}
