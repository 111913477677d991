//! The layout a GPU backend gives one plan: every computed node's byte offset in one device
//! arena (or a view of another node at an offset), from the memory plan — or, in verify
//! mode, a slot of its own per node (no reuse, no views) so each value can be compared.
use crate::{plan_memory, OptError, PlanOptions};
use rlx_ir::Graph;

/// Where each node of a plan lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArenaLayout {
    /// Per node: its own slot's byte offset in the arena.
    pub slots: Vec<Option<usize>>,
    /// Per node: `(base node, byte offset)` when it is a view of another node's storage (an
    /// in-place write is a view of the cache it writes).
    pub views: Vec<Option<(usize, usize)>>,
    pub arena_bytes: usize,
}

/// The layout of `g` with concrete `dims` per node, slots aligned to 256 bytes.
pub fn arena_layout(
    g: &Graph,
    dims: &[Vec<usize>],
    keep_all: bool,
) -> Result<ArenaLayout, OptError> {
    if keep_all {
        let mut off = 0usize;
        let mut slots = vec![None; g.nodes.len()];
        let mut views = vec![None; g.nodes.len()];
        for n in &g.nodes {
            if n.op.kind().is_in_place() {
                // An in-place write has no buffer of its own, even here.
                views[n.id.0] = Some((n.inputs[0].0, 0));
            } else if !n.op.is_leaf() {
                slots[n.id.0] = Some(off);
                let bytes = dims[n.id.0].iter().product::<usize>() * n.shape.dtype.size_bytes();
                off += bytes.div_ceil(256) * 256;
            }
        }
        return Ok(ArenaLayout {
            slots,
            views,
            arena_bytes: off,
        });
    }
    let mp = plan_memory(
        g,
        dims,
        |_| 0,
        |n| n.shape.dtype.size_bytes(),
        &PlanOptions {
            alignment: 256,
            views: true,
            views_of_leaves: true,
        },
    )?;
    Ok(ArenaLayout {
        slots: mp.slots.iter().map(|s| s.map(|s| s.offset)).collect(),
        views: (mp.views.iter())
            .map(|v| v.map(|v| (v.base.0, v.offset)))
            .collect(),
        arena_bytes: mp.pool_sizes.first().copied().unwrap_or(0),
    })
}
