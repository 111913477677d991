//! `Attention(Rope(q), RopeCacheWrite(kc, k, pos, cos, sin), CacheWrite(vc, v, pos), past =
//! pos)` → `CachedAttention` (inputs q, k, v, kc, vc, pos, cos, sin); without the rotations,
//! `Attention(q, CacheWrite(kc, k, pos), CacheWrite(vc, v, pos), pos)` → `CachedAttention`
//! (q, k, v, kc, vc, pos).
//!
//! A decode step's attention block is otherwise four launches (q's rotation, the k and v
//! cache writes, the attention) that each wait for the one before; fused, the CUDA kernel
//! takes this step's keys straight from k/v and writes them to the caches as it goes.
//!
//! Matched at the attention: Packed or Bshd layout (the caches are written along axis 1),
//! no keep-mask, its past the writes' `pos`; every absorbed node read by nothing else, q,
//! k, v and both caches of one dtype, and q's rotation the same as k's (head size, n_rot,
//! style, tables). The absorbed cache writes are in-place ops, which DCE keeps, so this pass
//! does not copy them at all when the fused op is emitted (the fusion driver would).
use super::fusion::{at, Uses};
use crate::{OptError, Pass, Rebuilder};
use rlx_ir::{AttentionLayout, CachedRope, Graph, MaskKind, Node, NodeId, Op};
use std::collections::HashMap;

pub struct FuseCachedAttention;

struct Found {
    rope: Option<CachedRope>,
    /// q, k, v, k cache, v cache, pos[, cos, sin] (old ids)
    ins: Vec<NodeId>,
    /// The nodes the fused op stands for besides the attention, in graph order.
    interior: Vec<NodeId>,
}

/// A write of `cache_write`'s shape into a cache along axis 1 read only by `root`: (cache,
/// new, pos, rotation with its tables).
type Write = (
    NodeId,
    NodeId,
    NodeId,
    Option<(usize, CachedRope, NodeId, NodeId)>,
);

fn write_of(g: &Graph, uses: &Uses, id: NodeId, root: NodeId) -> Option<Write> {
    let n = at(g, id)?;
    if !uses.confined(n.id, |c| c == root) {
        return None;
    }
    match n.op {
        Op::CacheWrite { axis: 1 } => {
            let [c, new, pos] = n.inputs[..] else {
                return None;
            };
            Some((c, new, pos, None))
        }
        Op::RopeCacheWrite {
            axis: 1,
            head_dim,
            n_rot,
            style,
        } => {
            let [c, new, pos, cos, sin] = n.inputs[..] else {
                return None;
            };
            Some((
                c,
                new,
                pos,
                Some((head_dim, CachedRope { n_rot, style }, cos, sin)),
            ))
        }
        _ => None,
    }
}

fn find(g: &Graph, uses: &Uses, n: &Node) -> Option<Found> {
    let Op::Attention(spec) = &n.op else {
        return None;
    };
    let allowed = spec.past
        && spec.layout != AttentionLayout::Bhsd
        && spec.mask_kind != MaskKind::Custom
        && n.inputs.len() == 4;
    if !allowed {
        return None;
    }
    let [q, kw, vw, past] = n.inputs[..] else {
        return None;
    };
    let (kc, k, kpos, krot) = write_of(g, uses, kw, n.id)?;
    let (vc, v, vpos, vrot) = write_of(g, uses, vw, n.id)?;
    if kpos != past || vpos != past || vrot.is_some() || kc == vc {
        return None;
    }
    let mut interior = vec![kw, vw];
    let (q, rope, tables) = match krot {
        None => (q, None, None),
        Some((head_dim, r, cos, sin)) => {
            let qr = at(g, q)?;
            let Op::Rope {
                head_dim: qd,
                n_rot,
                style,
            } = qr.op
            else {
                return None;
            };
            let same = qd == head_dim
                && head_dim == spec.head_dim
                && n_rot == r.n_rot
                && style == r.style
                && qr.inputs[1..] == [cos, sin]
                && uses.confined(qr.id, |c| c == n.id);
            if !same {
                return None;
            }
            interior.push(qr.id);
            (qr.inputs[0], Some(r), Some([cos, sin]))
        }
    };
    let dt = g.nodes[q.0].shape.dtype;
    if [k, v, kc, vc]
        .iter()
        .any(|i| g.nodes[i.0].shape.dtype != dt)
    {
        return None;
    }
    let mut ins = vec![q, k, v, kc, vc, past];
    ins.extend(tables.into_iter().flatten());
    interior.sort();
    Some(Found {
        rope,
        ins,
        interior,
    })
}

impl Pass for FuseCachedAttention {
    fn name(&self) -> &'static str {
        "fuse_cached_attention"
    }

    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        let uses = Uses::new(g);
        let mut found: HashMap<usize, Found> = HashMap::new();
        let mut deferred = vec![false; g.nodes.len()];
        for n in &g.nodes {
            if let Some(f) = find(g, &uses, n) {
                for i in &f.interior {
                    deferred[i.0] = true;
                }
                found.insert(n.id.0, f);
            }
        }
        let mut rb = Rebuilder::new(self.name(), g);
        for n in &g.nodes {
            if deferred[n.id.0] {
                continue;
            }
            let Some(f) = found.get(&n.id.0) else {
                rb.copy(n.id)?;
                continue;
            };
            let Op::Attention(spec) = &n.op else {
                unreachable!("matched at an attention");
            };
            let ins = f
                .ins
                .iter()
                .map(|&i| rb.map(i))
                .collect::<Result<Vec<_>, _>>()?;
            let op = Op::CachedAttention {
                spec: spec.clone(),
                rope: f.rope,
            };
            if rb.try_emit(n.id, op, ins)?.is_none() {
                // The fused rule disagrees with the attention's shape: keep the graph as is.
                for &i in &f.interior {
                    rb.copy(i)?;
                }
                rb.copy(n.id)?;
            }
        }
        rb.finish()
    }
}
