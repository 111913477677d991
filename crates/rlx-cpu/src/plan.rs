//! The CPU's arena plan for one binding of a graph's dynamic dims: concrete shapes, and for
//! each node where its values live — leaf storage, or an offset in one of three arenas
//! (f32, f64, i64 elements). Liveness-based reuse and views come from `rlx_opt::plan_memory`.
use crate::error::CpuError;
use rlx_ir::{ops::infer_shape, Graph, Node, Shape};
use rlx_opt::{class_elem_bytes, class_pool, plan_memory, PlanOptions};
use std::collections::HashMap;

/// Where a node's values live, in elements of its compute class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loc {
    /// In leaf `node`'s storage, starting at element `off`.
    Leaf { node: usize, off: usize, len: usize },
    /// In arena `pool` (0 = f32, 1 = f64, 2 = i64), starting at element `off`.
    Arena { pool: usize, off: usize, len: usize },
}

/// How to lay out the arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanMode {
    /// Liveness-based reuse plus views (reshape, lossless cast, leading narrow): the default.
    Reuse,
    /// One buffer per node, nothing overwritten: every node's value survives the run
    /// (verify mode and debugging).
    KeepAll,
}

#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub shapes: Vec<Vec<usize>>,
    pub locs: Vec<Loc>,
    /// Elements per arena.
    pub sizes: [usize; 3],
    /// Nodes whose value is another node's bytes: not executed.
    pub is_view: Vec<bool>,
    /// Nodes whose own parameters hold bound symbols (Expand targets), rewritten.
    pub bound: Vec<Option<Node>>,
    pub planned_bytes: usize,
    pub unplanned_bytes: usize,
}

fn label(node: &Node) -> String {
    node.label()
}

fn too_big(node: &Node, dims: &[usize]) -> CpuError {
    CpuError::Op {
        node: label(node),
        op: node.op.kind().name(),
        msg: format!("shape {dims:?} has more elements than memory can address"),
    }
}

/// Bind dynamic dims, infer concrete shapes, and lay out the arena.
pub(crate) fn make_plan(
    g: &Graph,
    bindings: &HashMap<String, usize>,
    mode: PlanMode,
) -> Result<Plan, CpuError> {
    let mut shapes: Vec<Shape> = Vec::with_capacity(g.nodes.len());
    let mut bound = Vec::with_capacity(g.nodes.len());
    for n in &g.nodes {
        let b = rlx_ir::ops::shape_ops::bind_op(&n.op, bindings).map(|op| Node { op, ..n.clone() });
        let op = b.as_ref().map_or(&n.op, |b| &b.op);
        let s = if n.op.is_leaf() {
            n.shape.bind(bindings)
        } else {
            let ins: Vec<&Shape> = n.inputs.iter().map(|i| &shapes[i.0]).collect();
            infer_shape(op, &ins).map_err(|msg| CpuError::Op {
                node: label(n),
                op: n.op.kind().name(),
                msg,
            })?
        };
        if !s.is_static() {
            return Err(CpuError::Op {
                node: label(n),
                op: n.op.kind().name(),
                msg: format!("shape {s} still has an unbound dynamic dim"),
            });
        }
        bound.push(b);
        shapes.push(s);
    }
    let shapes: Vec<Vec<usize>> = shapes
        .into_iter()
        .map(|s| s.static_dims().expect("checked static"))
        .collect();
    // Checked: a shape whose element count overflows must fail here, not wrap into a
    // small arena that the thunks then overrun.
    let mut counts = Vec::with_capacity(shapes.len());
    for (s, node) in shapes.iter().zip(&g.nodes) {
        counts.push(
            s.iter()
                .try_fold(1usize, |a, &d| a.checked_mul(d))
                .ok_or_else(|| too_big(node, s))?,
        );
    }
    let numel = |i: usize| counts[i];
    let n = g.nodes.len();
    let mut locs = Vec::with_capacity(n);
    let mut is_view = vec![false; n];
    let mut sizes = [0usize; 3];
    let (planned_bytes, unplanned_bytes);
    match mode {
        PlanMode::KeepAll => {
            let mut total = 0;
            for node in &g.nodes {
                let i = node.id.0;
                if node.op.is_leaf() || node.op.kind().is_in_place() {
                    // An in-place write lives in its target leaf (input 0), even here.
                    let home = if node.op.is_leaf() {
                        i
                    } else {
                        node.inputs[0].0
                    };
                    locs.push(Loc::Leaf {
                        node: home,
                        off: 0,
                        len: numel(i),
                    });
                } else {
                    let pool = class_pool(node);
                    locs.push(Loc::Arena {
                        pool,
                        off: sizes[pool],
                        len: numel(i),
                    });
                    let bytes = numel(i).checked_mul(class_elem_bytes(node));
                    sizes[pool] = (sizes[pool].checked_add(numel(i)))
                        .ok_or_else(|| too_big(node, &shapes[i]))?;
                    total = (bytes.and_then(|b| b.checked_add(total)))
                        .ok_or_else(|| too_big(node, &shapes[i]))?;
                }
            }
            planned_bytes = total;
            unplanned_bytes = total;
        }
        PlanMode::Reuse => {
            let p = plan_memory(
                g,
                &shapes,
                class_pool,
                class_elem_bytes,
                &PlanOptions::default(),
            )
            .map_err(|e| CpuError::Op {
                node: String::new(),
                op: "plan",
                msg: e.to_string(),
            })?;
            for node in &g.nodes {
                let i = node.id.0;
                let elem = class_elem_bytes(node);
                let len = numel(i);
                let loc = if node.op.is_leaf() {
                    Loc::Leaf {
                        node: i,
                        off: 0,
                        len,
                    }
                } else if let Some(slot) = p.slots[i] {
                    Loc::Arena {
                        pool: slot.pool,
                        off: slot.offset / elem,
                        len,
                    }
                } else if let Some(v) = p.views[i] {
                    Loc::Leaf {
                        node: v.base.0,
                        off: v.offset / elem,
                        len,
                    }
                } else {
                    return Err(CpuError::Op {
                        node: label(node),
                        op: node.op.kind().name(),
                        msg: "memory plan gave no location".into(),
                    });
                };
                is_view[i] = p.views[i].is_some() && !node.op.kind().is_in_place();
                locs.push(loc);
            }
            for (pool, size) in p.pool_sizes.iter().enumerate().take(3) {
                let elem = if pool == 0 { 4 } else { 8 };
                sizes[pool] = size.div_ceil(elem);
            }
            planned_bytes = p.planned_bytes;
            unplanned_bytes = p.unplanned_bytes;
        }
    }
    Ok(Plan {
        shapes,
        locs,
        sizes,
        is_view,
        bound,
        planned_bytes,
        unplanned_bytes,
    })
}
