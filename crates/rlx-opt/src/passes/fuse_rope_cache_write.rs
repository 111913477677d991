//! `CacheWrite(cache, Rope(k, cos, sin), pos)` → `RopeCacheWrite` (inputs cache, k, pos,
//! cos, sin).
//!
//! A decode step rotates each layer's new key row and then copies it into the KV cache: two
//! launches of a few hundred elements each, and a round trip of the row through memory.
//! Fused, one kernel rotates the row as it writes it into the cache.
//!
//! Matched at the `CacheWrite`: its new rows are a `Rope` read by nothing else (not a graph
//! output either), of the cache's dtype. Anything else stays as it is.
use super::fusion::{at, fuse, Match, Uses};
use crate::{OptError, Pass, Rebuilder};
use rlx_ir::{Graph, Node, NodeId, Op, RopeStyle};

pub struct FuseRopeCacheWrite;

struct Found {
    axis: usize,
    head_dim: usize,
    n_rot: usize,
    style: RopeStyle,
    /// cache, k, pos, cos, sin (old ids)
    ins: [NodeId; 5],
}

fn find(g: &Graph, uses: &Uses, n: &Node, _claimed: &[bool]) -> Option<Match<Found>> {
    let Op::CacheWrite { axis } = n.op else {
        return None;
    };
    let [cache, new, pos] = n.inputs[..] else {
        return None;
    };
    let r = at(g, new)?;
    let Op::Rope {
        head_dim,
        n_rot,
        style,
    } = r.op
    else {
        return None;
    };
    let [k, cos, sin] = r.inputs[..] else {
        return None;
    };
    let fits = uses.confined(r.id, |c| c == n.id) && r.shape.dtype == n.shape.dtype;
    fits.then_some(Match {
        interior: vec![r.id],
        data: Found {
            axis,
            head_dim,
            n_rot,
            style,
            ins: [cache, k, pos, cos, sin],
        },
    })
}

fn emit(rb: &mut Rebuilder, n: &Node, f: &Found) -> Result<bool, OptError> {
    let ins = f
        .ins
        .iter()
        .map(|&i| rb.map(i))
        .collect::<Result<Vec<_>, _>>()?;
    let op = Op::RopeCacheWrite {
        axis: f.axis,
        head_dim: f.head_dim,
        n_rot: f.n_rot,
        style: f.style,
    };
    Ok(rb.try_emit(n.id, op, ins)?.is_some())
}

impl Pass for FuseRopeCacheWrite {
    fn name(&self) -> &'static str {
        "fuse_rope_cache_write"
    }

    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        fuse(self.name(), g, find, emit)
    }
}
