//! Memory planning: arena offsets for every computed node, reusing the space of buffers that
//! are no longer live.
//!
//! - Schedule = node order. A buffer is live from the step that writes it to the last step
//!   that reads it (graph outputs: to the end), inclusive, so a node never writes over one
//!   of its own inputs.
//! - Views allocate nothing: a `Reshape` that keeps the element count, a lossless `Cast`
//!   within one pool and element size (f16 → f32 when both sit in an f32 arena, i32 → i64
//!   in an i64 arena; a same-dtype cast), a `Narrow` whose axis has only size-1 dims
//!   before it (so the slice is contiguous: an offset into the input), a `Transpose` that
//!   only moves size-1 axes, and `StopGradient` (an identity in the forward pass). A view's
//!   uses keep the buffer it aliases alive; the backend does not run view nodes.
//! - Leaves (Input / Param / Constant) live outside the arena; a view of a leaf aliases the
//!   leaf (`slots[i] = None`, `views[i] = Some(..)`) unless `PlanOptions::views_of_leaves`
//!   is off, in which case it gets its own buffer and the backend copies.
//! - In-place ops (`OpKind::is_in_place`: a KV-cache write) are views of their input 0
//!   (always a leaf) that the backend *does* run: it writes into the leaf's storage.
//! - Placement is greedy by size: largest buffers first, each into the tightest free gap
//!   (best fit) among the buffers already placed whose lifetimes overlap its own, at an
//!   aligned offset. Pools (e.g. the CPU's f32 / f64 / i64 arenas) are planned separately.
use crate::OptError;
use rlx_ir::{ComputeClass, DType, Graph, Node, NodeId, Op};

/// Pool indices must be below this.
pub const MAX_POOLS: usize = 1 << 16;

/// Where one node's bytes live: `len` bytes at `offset` in arena `pool`. Allocated buffers
/// start at multiples of `PlanOptions::alignment`, views at multiples of their element
/// size, so an element-indexed arena divides every offset exactly when the alignment is a
/// multiple of the element size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub pool: usize,
    pub offset: usize,
    pub len: usize,
}

/// A node whose value is `base`'s bytes starting at byte `offset`. `base` is never itself a
/// view (chains are resolved); it is either an arena node or a leaf.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ViewOf {
    pub base: NodeId,
    pub offset: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanOptions {
    /// Byte alignment of every allocated buffer (views may start anywhere inside one).
    pub alignment: usize,
    /// Alias reshape / lossless cast / contiguous narrow instead of allocating.
    pub views: bool,
    /// Let views alias leaves (the backend must then read leaf storage at an offset).
    pub views_of_leaves: bool,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            alignment: 64,
            views: true,
            views_of_leaves: true,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryPlan {
    /// Per node: its bytes in an arena; `None` for leaves and views of leaves.
    pub slots: Vec<Option<Slot>>,
    /// Per node: `Some` when it aliases another node's bytes (its slot, if any, lies inside
    /// the base's slot); the backend skips running it.
    pub views: Vec<Option<ViewOf>>,
    /// Bytes each pool needs.
    pub pool_sizes: Vec<usize>,
    /// Sum of `pool_sizes`.
    pub planned_bytes: usize,
    /// Sum of every non-leaf node's bytes: what one buffer per node would take.
    pub unplanned_bytes: usize,
}

impl MemoryPlan {
    pub fn is_view(&self, id: NodeId) -> bool {
        self.views.get(id.0).is_some_and(|v| v.is_some())
    }
}

/// The pool of a backend that keeps one arena per compute class (the CPU): f32 = 0,
/// f64 = 1, i64 = 2.
pub fn class_pool(n: &Node) -> usize {
    match n.shape.dtype.compute_class() {
        ComputeClass::F32 => 0,
        ComputeClass::F64 => 1,
        ComputeClass::I64 => 2,
    }
}

/// Bytes per element in a compute-class arena (f16 is held as f32, i32 as i64, ...).
pub fn class_elem_bytes(n: &Node) -> usize {
    match n.shape.dtype.compute_class() {
        ComputeClass::F32 => 4,
        ComputeClass::F64 | ComputeClass::I64 => 8,
    }
}

/// Concrete shapes of a graph whose dims are all static (dynamic graphs bind theirs first).
pub fn static_shapes(g: &Graph) -> Result<Vec<Vec<usize>>, OptError> {
    g.nodes
        .iter()
        .map(|n| {
            n.shape.static_dims().ok_or_else(|| OptError::Plan {
                node: n.id,
                msg: format!("shape {} has a dynamic dim: bind it first", n.shape),
            })
        })
        .collect()
}

/// A cast whose output values equal its input values whenever both sit in the same pool
/// with the same element size.
fn lossless(from: DType, to: DType) -> bool {
    use DType::*;
    from == to
        || matches!(
            (from, to),
            (F16 | BF16, F32 | F64)
                | (F32, F64)
                | (Bool, U8 | I32 | I64)
                | (U8, I32 | I64)
                | (I32, I64)
        )
}

/// Whether the axes of size > 1 keep their relative order under `perm`.
fn keeps_order(perm: &[usize], dims: &[usize]) -> bool {
    let big: Vec<usize> = perm
        .iter()
        .copied()
        .filter(|&p| dims.get(p).is_some_and(|&d| d != 1))
        .collect();
    perm.len() == dims.len() && big.windows(2).all(|w| w[0] < w[1])
}

fn align_up(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

/// Byte offset into input 0 when `n` can be a view of it; `None` when it must allocate.
fn view_offset(
    n: &Node,
    input: &Node,
    shapes: &[Vec<usize>],
    bytes: &[usize],
    elem: &dyn Fn(&Node) -> usize,
) -> Result<Option<usize>, OptError> {
    let (s, si) = (&shapes[n.id.0], &shapes[input.id.0]);
    let numel = |d: &[usize]| d.iter().product::<usize>();
    let off = match &n.op {
        Op::Reshape { .. } if numel(s) == numel(si) => 0,
        Op::Cast { to } if lossless(input.shape.dtype, *to) => 0,
        Op::StopGradient => 0,
        // Moving only size-1 axes keeps the row-major order of the elements.
        Op::Transpose { perm } if keeps_order(perm, si) => 0,
        Op::Narrow { axis, start, len } => {
            let a = rlx_ir::normalize_axis(*axis, si.len())
                .map_err(|msg| OptError::Plan { node: n.id, msg })?;
            if start.checked_add(*len).is_none_or(|end| end > si[a]) {
                return Err(OptError::Plan {
                    node: n.id,
                    msg: format!("narrow {start}+{len} exceeds dim {a} of {si:?}"),
                });
            }
            if numel(&si[..a]) != 1 {
                return Ok(None);
            }
            start * numel(&si[a + 1..]) * elem(input)
        }
        _ => return Ok(None),
    };
    let fits = off + bytes[n.id.0] <= bytes[input.id.0];
    Ok((fits && elem(n) == elem(input)).then_some(off))
}

/// Plan arena offsets for `g` with concrete `shapes` (one per node). `pool_of` says which
/// arena a node's value lives in and `elem_bytes` how many bytes one element takes there.
pub fn plan_memory(
    g: &Graph,
    shapes: &[Vec<usize>],
    pool_of: impl Fn(&Node) -> usize,
    elem_bytes: impl Fn(&Node) -> usize,
    opts: &PlanOptions,
) -> Result<MemoryPlan, OptError> {
    let n = g.nodes.len();
    if shapes.len() != n {
        return Err(OptError::Plan {
            node: NodeId(shapes.len().min(n)),
            msg: format!("{} shapes given for {n} nodes", shapes.len()),
        });
    }
    let align = opts.alignment.max(1);
    let mut bytes = vec![0usize; n];
    for node in &g.nodes {
        let i = node.id.0;
        if i >= n || g.nodes[i].id != node.id {
            return Err(OptError::Plan {
                node: node.id,
                msg: "node id does not match its index".into(),
            });
        }
        if let Some(&bad) = node.inputs.iter().find(|j| j.0 >= i) {
            return Err(OptError::Plan {
                node: node.id,
                msg: format!("input {bad} is not an earlier node"),
            });
        }
        bytes[i] = shapes[i]
            .iter()
            .try_fold(elem_bytes(node), |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| OptError::Plan {
                node: node.id,
                msg: format!("{:?} overflows the address space", shapes[i]),
            })?;
    }

    // Pools index `pool_sizes`: a huge index is a classifier bug that would otherwise ask for
    // an absurd allocation.
    for node in &g.nodes {
        let p = pool_of(node);
        if p >= MAX_POOLS {
            return Err(OptError::Plan {
                node: node.id,
                msg: format!("pool index {p} is not below MAX_POOLS ({MAX_POOLS})"),
            });
        }
    }

    // Every offset is at most the sum of the aligned sizes, so checking that sum once keeps
    // all later arithmetic in range.
    let mut total = 0usize;
    for node in g.nodes.iter().filter(|x| !x.op.is_leaf()) {
        total = bytes[node.id.0]
            .checked_next_multiple_of(align)
            .and_then(|b| total.checked_add(b))
            .ok_or_else(|| OptError::Plan {
                node: node.id,
                msg: "the graph's buffers overflow the address space".into(),
            })?;
    }

    // Views: resolve each to the buffer that owns the bytes. An in-place op always aliases
    // its input 0 (the verifier made sure that is a leaf nobody else reads).
    let mut views: Vec<Option<ViewOf>> = vec![None; n];
    for node in &g.nodes {
        if node.op.kind().is_in_place() {
            let base = node.inputs[0];
            if !g.nodes[base.0].op.is_leaf() || bytes[node.id.0] != bytes[base.0] {
                return Err(OptError::Plan {
                    node: node.id,
                    msg: "an in-place op must write a leaf of its own size".into(),
                });
            }
            views[node.id.0] = Some(ViewOf { base, offset: 0 });
            continue;
        }
        if !opts.views || node.op.is_leaf() || node.inputs.is_empty() {
            continue;
        }
        let input = &g.nodes[node.inputs[0].0];
        if pool_of(node) != pool_of(input) {
            continue;
        }
        let Some(off) = view_offset(node, input, shapes, &bytes, &elem_bytes)? else {
            continue;
        };
        let (base, base_off) = match views[input.id.0] {
            Some(v) => (v.base, v.offset + off),
            None => (input.id, off),
        };
        if g.nodes[base.0].op.is_leaf() && !opts.views_of_leaves {
            continue;
        }
        views[node.id.0] = Some(ViewOf {
            base,
            offset: base_off,
        });
    }
    let owner = |i: usize| views[i].map_or(i, |v| v.base.0);

    // Liveness of each owning buffer: [write step, last read step].
    let mut last = vec![0usize; n];
    for (i, l) in last.iter_mut().enumerate() {
        *l = i;
    }
    for node in &g.nodes {
        // A view reads nothing when it runs (its uses keep the base alive); an in-place op
        // does run, so its inputs must live until its step.
        if views[node.id.0].is_some() && !node.op.kind().is_in_place() {
            continue;
        }
        for &j in &node.inputs {
            let o = owner(j.0);
            last[o] = last[o].max(node.id.0);
        }
    }
    for &o in &g.outputs {
        if o.0 >= n {
            return Err(OptError::Plan {
                node: o,
                msg: "graph output does not exist".into(),
            });
        }
        last[owner(o.0)] = n;
    }

    // Placement, per pool, largest first.
    let mut slots: Vec<Option<Slot>> = vec![None; n];
    let owners: Vec<usize> = (0..n)
        .filter(|&i| !g.nodes[i].op.is_leaf() && views[i].is_none())
        .collect();
    let pools = owners
        .iter()
        .map(|&i| pool_of(&g.nodes[i]) + 1)
        .max()
        .unwrap_or(0);
    let mut pool_sizes = vec![0usize; pools];
    for (p, size) in pool_sizes.iter_mut().enumerate() {
        let mut items: Vec<usize> = owners
            .iter()
            .copied()
            .filter(|&i| pool_of(&g.nodes[i]) == p)
            .collect();
        items.sort_by(|&a, &b| bytes[b].cmp(&bytes[a]).then(a.cmp(&b)));
        // (offset, end, first, last), kept sorted by offset.
        let mut placed: Vec<(usize, usize, usize, usize)> = Vec::with_capacity(items.len());
        for i in items {
            let len = bytes[i];
            let (first, lst) = (i, last[i]);
            let mut best: Option<(usize, usize)> = None; // (gap size, offset)
            let mut cursor = 0usize;
            if len > 0 {
                for &(off, end, f, l) in &placed {
                    if l < first || f > lst {
                        continue;
                    }
                    let at = align_up(cursor, align);
                    if off >= at + len {
                        let gap = off - at;
                        if best.is_none_or(|(g, _)| gap < g) {
                            best = Some((gap, at));
                        }
                    }
                    cursor = cursor.max(end);
                }
            }
            let offset = best.map_or_else(|| align_up(cursor, align), |(_, at)| at);
            let pos = placed.partition_point(|e| e.0 <= offset);
            placed.insert(pos, (offset, offset + len, first, lst));
            *size = (*size).max(offset + len);
            slots[i] = Some(Slot {
                pool: p,
                offset,
                len,
            });
        }
    }
    for i in 0..n {
        if let Some(v) = views[i] {
            slots[i] = slots[v.base.0].map(|s| Slot {
                pool: s.pool,
                offset: s.offset + v.offset,
                len: bytes[i],
            });
        }
    }
    let unplanned_bytes = g
        .nodes
        .iter()
        .filter(|x| !x.op.is_leaf())
        .map(|x| bytes[x.id.0])
        .sum();
    Ok(MemoryPlan {
        slots,
        views,
        planned_bytes: pool_sizes.iter().sum(),
        pool_sizes,
        unplanned_bytes,
    })
}
