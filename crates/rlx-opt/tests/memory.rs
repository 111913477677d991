//! Memory planning: hand-built cases for reuse and views, and a random-graph property test
//! that checks every plan independently (own view rule, own liveness, pairwise overlap, and
//! a byte-level simulation of the schedule).
mod common;
use common::gen::{random_graph, transformer, view, GenOpts, Tf};
use common::Rng;
use rlx_ir::{ops::infer_shape, Activation, DType, Dim, Graph, Node, NodeId, Op, Shape};
use rlx_opt::{
    class_elem_bytes, class_pool, plan_memory, static_shapes, MemoryPlan, OptError, PlanOptions,
    Slot, ViewOf,
};
use std::collections::HashMap;

/// How a backend stores values: which arena, and bytes per element there.
#[derive(Clone, Copy, Debug)]
enum Model {
    /// The CPU: f32 / f64 / i64 arenas by compute class (f16 held as f32, i32 as i64).
    Cpu,
    /// One arena, native storage widths.
    Native,
    /// One arena per dtype.
    PerDtype,
}

impl Model {
    fn pool(self, n: &Node) -> usize {
        let dt = n.shape.dtype;
        match self {
            Model::Cpu => match dt {
                DType::F32 | DType::F16 | DType::BF16 => 0,
                DType::F64 => 1,
                _ => 2,
            },
            Model::Native => 0,
            Model::PerDtype => DType::ALL.iter().position(|&d| d == dt).unwrap(),
        }
    }
    fn elem(self, n: &Node) -> usize {
        let dt = n.shape.dtype;
        match self {
            Model::Cpu => match dt {
                DType::F32 | DType::F16 | DType::BF16 => 4,
                _ => 8,
            },
            _ => dt.size_bytes(),
        }
    }
}

fn plan(g: &Graph, shapes: &[Vec<usize>], m: Model, o: &PlanOptions) -> MemoryPlan {
    plan_memory(g, shapes, |n| m.pool(n), |n| m.elem(n), o).expect("plan")
}

/// Every value of `from` is exactly a value of `to`.
fn representable(from: DType, to: DType) -> bool {
    let rank = |d: DType| match d {
        DType::Bool => 0,
        DType::U8 => 1,
        DType::I32 => 2,
        DType::I64 => 3,
        _ => 99,
    };
    let float_ok = match (from, to) {
        (a, b) if a == b => true,
        (DType::F16, DType::F32 | DType::F64) => true,
        (DType::BF16, DType::F32 | DType::F64) => true,
        (DType::F32, DType::F64) => true,
        _ => false,
    };
    float_ok || (rank(from) < 99 && rank(to) < 99 && rank(from) <= rank(to))
}

/// The test's own view rule: (root node, byte offset) for each node that should alias.
fn expected_views(
    g: &Graph,
    shapes: &[Vec<usize>],
    m: Model,
    o: &PlanOptions,
) -> Vec<Option<(usize, usize)>> {
    let mut v: Vec<Option<(usize, usize)>> = vec![None; g.nodes.len()];
    if !o.views {
        return v;
    }
    for n in &g.nodes {
        let Some(&j) = n.inputs.first() else { continue };
        let inp = &g.nodes[j.0];
        if m.pool(n) != m.pool(inp) || m.elem(n) != m.elem(inp) {
            continue;
        }
        let si = &shapes[j.0];
        let off = match &n.op {
            Op::Reshape { .. }
                if shapes[n.id.0].iter().product::<usize>() == si.iter().product::<usize>() =>
            {
                0
            }
            Op::Cast { to } if representable(inp.shape.dtype, *to) => 0,
            Op::StopGradient => 0,
            Op::Transpose { perm } => {
                // A view iff reading the output in order reads the input in order.
                let out = &shapes[n.id.0];
                let st: Vec<usize> = (0..si.len())
                    .map(|k| si[k + 1..].iter().product())
                    .collect();
                let total: usize = out.iter().product();
                let mut in_order = true;
                for flat in 0..total {
                    let mut rem = flat;
                    let mut src = 0;
                    for k in (0..out.len()).rev() {
                        src += (rem % out[k]) * st[perm[k]];
                        rem /= out[k];
                    }
                    in_order &= src == flat;
                }
                if !in_order {
                    continue;
                }
                0
            }
            Op::Narrow { axis, start, .. } => {
                let a = if *axis < 0 {
                    *axis + si.len() as i64
                } else {
                    *axis
                } as usize;
                if si[..a].iter().any(|&d| d != 1) {
                    continue;
                }
                start * si[a + 1..].iter().product::<usize>() * m.elem(inp)
            }
            _ => continue,
        };
        let (root, total) = match v[j.0] {
            Some((r, o2)) => (r, o2 + off),
            None => (j.0, off),
        };
        if g.nodes[root].op.is_leaf() && !o.views_of_leaves {
            continue;
        }
        v[n.id.0] = Some((root, total));
    }
    v
}

/// Check a plan against the graph without trusting any of the planner's own bookkeeping.
fn check(g: &Graph, shapes: &[Vec<usize>], p: &MemoryPlan, m: Model, o: &PlanOptions) {
    let n = g.nodes.len();
    let bytes: Vec<usize> = g
        .nodes
        .iter()
        .map(|x| shapes[x.id.0].iter().product::<usize>() * m.elem(x))
        .collect();
    let ev = expected_views(g, shapes, m, o);
    let root = |i: usize| ev[i].map_or(i, |(r, _)| r);
    let leaf = |i: usize| g.nodes[i].op.is_leaf();
    assert_eq!(p.slots.len(), n);
    assert_eq!(p.views.len(), n);

    // Views alias exactly what the test's rule says, at the right place.
    for i in 0..n {
        let want = ev[i].map(|(r, off)| ViewOf {
            base: NodeId(r),
            offset: off,
        });
        assert_eq!(
            p.views[i],
            want,
            "view of node {i} ({})",
            g.nodes[i].op.kind()
        );
        match (ev[i], leaf(i)) {
            (_, true) => assert_eq!(p.slots[i], None, "leaf {i} is not in the arena"),
            (Some((r, _)), false) if leaf(r) => {
                assert_eq!(p.slots[i], None, "view {i} of leaf {r}")
            }
            (Some((r, off)), false) => {
                let b = p.slots[r].expect("view base has a slot");
                let s = p.slots[i].expect("view of an arena node has a slot");
                assert_eq!(
                    s,
                    Slot {
                        pool: b.pool,
                        offset: b.offset + off,
                        len: bytes[i]
                    }
                );
                assert!(
                    s.offset + s.len <= b.offset + b.len,
                    "view {i} inside its base"
                );
            }
            (None, false) => {
                let s = p.slots[i].expect("computed node has a slot");
                assert_eq!(s.len, bytes[i]);
                assert_eq!(s.pool, m.pool(&g.nodes[i]));
                assert_eq!(s.offset % o.alignment.max(1), 0, "node {i} aligned");
                assert!(s.offset + s.len <= p.pool_sizes[s.pool]);
            }
        }
    }

    // Own liveness: a buffer lives from its node to the last reader of it or of any view of
    // it; outputs to the end.
    let mut end: Vec<usize> = (0..n).collect();
    for x in &g.nodes {
        if ev[x.id.0].is_some() {
            continue;
        }
        for &j in &x.inputs {
            let r = root(j.0);
            end[r] = end[r].max(x.id.0);
        }
    }
    for &out in &g.outputs {
        end[root(out.0)] = n;
    }
    let owners: Vec<usize> = (0..n).filter(|&i| !leaf(i) && ev[i].is_none()).collect();
    for (a_i, &a) in owners.iter().enumerate() {
        for &b in &owners[a_i + 1..] {
            let (sa, sb) = (p.slots[a].unwrap(), p.slots[b].unwrap());
            let live_together = a <= end[b] && b <= end[a];
            if sa.pool != sb.pool || !live_together || sa.len == 0 || sb.len == 0 {
                continue;
            }
            let disjoint = sa.offset + sa.len <= sb.offset || sb.offset + sb.len <= sa.offset;
            assert!(
                disjoint,
                "nodes {a} {sa:?} (live {a}..={}) and {b} {sb:?} (live {b}..={}) overlap",
                end[a], end[b]
            );
        }
    }

    // Simulate the schedule byte by byte: each computed node stamps its id over its slot;
    // every read must still find the stamp of the node that owns the bytes.
    let mut arena: Vec<Vec<u32>> = p.pool_sizes.iter().map(|&s| vec![u32::MAX; s]).collect();
    let read_ok = |arena: &Vec<Vec<u32>>, j: usize| {
        let r = root(j);
        match p.slots[j] {
            None => leaf(r),
            Some(s) => arena[s.pool][s.offset..s.offset + s.len]
                .iter()
                .all(|&t| t == r as u32),
        }
    };
    for &i in &owners {
        let s = p.slots[i].unwrap();
        for &j in &g.nodes[i].inputs {
            assert!(read_ok(&arena, j.0), "node {i} reads a clobbered input {j}");
            if let Some(sj) = p.slots[j.0] {
                let apart = sj.pool != s.pool
                    || s.len == 0
                    || sj.len == 0
                    || sj.offset + sj.len <= s.offset
                    || s.offset + s.len <= sj.offset;
                assert!(apart, "node {i} writes over its own input {j}");
            }
        }
        for t in &mut arena[s.pool][s.offset..s.offset + s.len] {
            *t = i as u32;
        }
    }
    for &out in &g.outputs {
        assert!(
            read_ok(&arena, out.0),
            "output {out} clobbered before the end"
        );
    }
    // Views count as uses of what they alias: reading them at their consumers was checked
    // above through the consumers' inputs.

    let unplanned: usize = (0..n).filter(|&i| !leaf(i)).map(|i| bytes[i]).sum();
    assert_eq!(p.unplanned_bytes, unplanned);
    assert_eq!(p.planned_bytes, p.pool_sizes.iter().sum::<usize>());
    // Alignment padding is the only thing that can push the plan past the unplanned sum:
    // bounded by one aligned buffer per computed node, and by the raw sum when no buffer
    // needs padding.
    let a = o.alignment.max(1);
    let aligned: usize = owners.iter().map(|&i| bytes[i].div_ceil(a) * a).sum();
    assert!(
        p.planned_bytes <= aligned,
        "{} > {aligned}",
        p.planned_bytes
    );
    if owners.iter().all(|&i| bytes[i].is_multiple_of(a)) {
        assert!(
            p.planned_bytes <= unplanned,
            "{} > {unplanned}",
            p.planned_bytes
        );
    }
}

fn f32s(d: &[usize]) -> Shape {
    Shape::new(d, DType::F32)
}

#[test]
fn memory_chain_ping_pongs_two_buffers() {
    let mut g = Graph::new("chain");
    let mut x = g.input("x", f32s(&[64])).unwrap();
    for act in [
        Activation::Relu,
        Activation::Neg,
        Activation::Tanh,
        Activation::Sigmoid,
        Activation::Silu,
    ] {
        x = g.activation(act, x).unwrap();
    }
    g.set_outputs(vec![x]);
    let shapes = static_shapes(&g).unwrap();
    let o = PlanOptions::default();
    let p = plan(&g, &shapes, Model::Cpu, &o);
    check(&g, &shapes, &p, Model::Cpu, &o);
    assert_eq!(p.unplanned_bytes, 5 * 256);
    assert_eq!(p.planned_bytes, 2 * 256, "a chain needs two buffers: {p:?}");
}

#[test]
fn memory_views_alias_their_input() {
    let mut g = Graph::new("views");
    let x = g.input("x", f32s(&[4, 6])).unwrap();
    let a = g.activation(Activation::Relu, x).unwrap();
    let r = view(&mut g, Op::Reshape { shape: vec![24] }, a);
    let nw = view(
        &mut g,
        Op::Narrow {
            axis: 0,
            start: 6,
            len: 12,
        },
        r,
    );
    let r2 = view(&mut g, Op::Reshape { shape: vec![1, 12] }, nw);
    let inner = view(
        &mut g,
        Op::Narrow {
            axis: -1,
            start: 2,
            len: 5,
        },
        r2,
    ); // leading dim is 1: still contiguous
    let cols = view(
        &mut g,
        Op::Narrow {
            axis: 1,
            start: 1,
            len: 2,
        },
        a,
    ); // [4, 2] out of [4, 6]: strided, must copy
    let b = g.activation(Activation::Neg, inner).unwrap();
    let c = g.activation(Activation::Tanh, b).unwrap();
    let sg = g.add_node(Op::StopGradient, &[c]).unwrap();
    let moved = view(&mut g, Op::Transpose { perm: vec![1, 0] }, r2); // [12, 1]: same order
    let swapped = view(&mut g, Op::Transpose { perm: vec![1, 0] }, a); // [6, 4]: reordered
    g.set_outputs(vec![sg, cols, moved, swapped]);
    let shapes = static_shapes(&g).unwrap();
    let o = PlanOptions::default();
    let p = plan(&g, &shapes, Model::Cpu, &o);
    check(&g, &shapes, &p, Model::Cpu, &o);
    let base = |off| {
        Some(ViewOf {
            base: a,
            offset: off,
        })
    };
    assert_eq!(p.views[r.0], base(0));
    assert_eq!(p.views[nw.0], base(6 * 4));
    assert_eq!(p.views[r2.0], base(6 * 4));
    assert_eq!(p.views[inner.0], base(8 * 4));
    assert_eq!(p.views[cols.0], None);
    assert_eq!(p.views[moved.0], base(6 * 4));
    assert_eq!(p.views[swapped.0], None);
    assert_eq!(p.views[sg.0], Some(ViewOf { base: c, offset: 0 }));
    assert!(p.slots[cols.0].is_some());
    // b reads a (through the views), so b must not sit on a's bytes.
    let (sa, sb) = (p.slots[a.0].unwrap(), p.slots[b.0].unwrap());
    assert!(sb.offset >= sa.offset + sa.len || sb.offset + sb.len <= sa.offset);
    assert!(p.is_view(inner) && !p.is_view(b));
}

#[test]
fn memory_cast_views_follow_the_storage_model() {
    let mut g = Graph::new("casts");
    let h = g.input("h", Shape::new(&[10], DType::F16)).unwrap();
    let i = g.input("i", Shape::new(&[10], DType::I32)).unwrap();
    let h2 = g.activation(Activation::Abs, h).unwrap();
    let up = g.cast(h2, DType::F32).unwrap(); // f16 → f32
    let down = g.cast(up, DType::F16).unwrap(); // rounds: never a view
    let wide = g.cast(up, DType::F64).unwrap(); // other arena on the CPU
    let i2 = g.cast(i, DType::I64).unwrap(); // view of a leaf
    let i3 = g.cast(i2, DType::F32).unwrap();
    g.set_outputs(vec![down, wide, i3]);
    let shapes = static_shapes(&g).unwrap();
    for m in [Model::Cpu, Model::Native, Model::PerDtype] {
        let o = PlanOptions::default();
        let p = plan(&g, &shapes, m, &o);
        check(&g, &shapes, &p, m, &o);
        assert!(!p.is_view(down) && !p.is_view(wide));
        let cpu = matches!(m, Model::Cpu);
        assert_eq!(
            p.is_view(up),
            cpu,
            "{m:?}: f16 → f32 is free only in an f32 arena"
        );
        assert_eq!(
            p.is_view(i2),
            cpu,
            "{m:?}: i32 → i64 is free only in an i64 arena"
        );
        if cpu {
            assert_eq!(p.views[i2.0], Some(ViewOf { base: i, offset: 0 }));
            assert_eq!(p.slots[i2.0], None, "a view of a leaf needs no arena bytes");
        }
    }
    let o = PlanOptions {
        views_of_leaves: false,
        ..PlanOptions::default()
    };
    let p = plan(&g, &shapes, Model::Cpu, &o);
    check(&g, &shapes, &p, Model::Cpu, &o);
    assert!(!p.is_view(i2) && p.slots[i2.0].is_some());
    assert!(p.is_view(up));
}

#[test]
fn memory_output_views_keep_their_base_live() {
    let mut g = Graph::new("out_view");
    let x = g.input("x", f32s(&[8, 8])).unwrap();
    let a = g.activation(Activation::Exp, x).unwrap();
    let r = view(&mut g, Op::Reshape { shape: vec![64] }, a);
    let mut y = g.activation(Activation::Neg, x).unwrap();
    for _ in 0..4 {
        y = g.activation(Activation::Tanh, y).unwrap();
    }
    g.set_outputs(vec![r, y]);
    let shapes = static_shapes(&g).unwrap();
    let o = PlanOptions::default();
    let p = plan(&g, &shapes, Model::Cpu, &o);
    check(&g, &shapes, &p, Model::Cpu, &o);
    let sa = p.slots[a.0].unwrap();
    for id in a.0 + 1..g.nodes.len() {
        if let (Some(s), false) = (p.slots[id], p.is_view(NodeId(id))) {
            assert!(s.offset >= sa.offset + sa.len || s.offset + s.len <= sa.offset);
        }
    }
    // Without views a reshape is an ordinary buffer.
    let o = PlanOptions {
        views: false,
        ..PlanOptions::default()
    };
    let p = plan(&g, &shapes, Model::Cpu, &o);
    check(&g, &shapes, &p, Model::Cpu, &o);
    assert!(!p.is_view(r));
}

#[test]
fn memory_broadcasting_reshape_is_not_a_view() {
    let mut g = Graph::new("bcast");
    let x = g.input("x", f32s(&[1])).unwrap();
    let a = g.activation(Activation::Neg, x).unwrap();
    // An expanding reshape of a 1-element tensor broadcasts: new bytes.
    let r = view(&mut g, Op::Reshape { shape: vec![3, 5] }, a);
    g.set_outputs(vec![r]);
    let shapes = static_shapes(&g).unwrap();
    let o = PlanOptions::default();
    let p = plan(&g, &shapes, Model::Cpu, &o);
    check(&g, &shapes, &p, Model::Cpu, &o);
    assert!(!p.is_view(r));
    assert_eq!(p.slots[r.0].unwrap().len, 60);
}

/// Concrete shapes for one binding of a dynamic graph's symbols.
fn bind(g: &Graph, b: &HashMap<String, usize>) -> Vec<Vec<usize>> {
    let mut out: Vec<Shape> = Vec::new();
    for n in &g.nodes {
        let s = if n.op.is_leaf() {
            n.shape.bind(b)
        } else {
            let ins: Vec<&Shape> = n.inputs.iter().map(|i| &out[i.0]).collect();
            infer_shape(&n.op, &ins).unwrap()
        };
        out.push(s);
    }
    out.iter().map(|s| s.static_dims().unwrap()).collect()
}

#[test]
fn memory_plans_dynamic_graphs_per_binding() {
    let mut g = Graph::new("dyn");
    let x = g
        .input(
            "x",
            Shape::with_dims(vec![Dim::dynamic("B"), 5.into()], DType::F32),
        )
        .unwrap();
    let w = g.param("w", f32s(&[5])).unwrap();
    let a = g.mul(x, w).unwrap();
    let b = g.activation(Activation::Relu, a).unwrap();
    let c = g.add(b, a).unwrap();
    g.set_outputs(vec![c]);
    assert!(matches!(static_shapes(&g), Err(OptError::Plan { .. })));
    let o = PlanOptions {
        alignment: 4,
        ..PlanOptions::default()
    };
    let mut sizes = vec![];
    for batch in [1, 3, 17] {
        let shapes = bind(&g, &HashMap::from([("B".to_string(), batch)]));
        let p = plan(&g, &shapes, Model::Cpu, &o);
        check(&g, &shapes, &p, Model::Cpu, &o);
        assert_eq!(p.unplanned_bytes, 3 * batch * 5 * 4);
        sizes.push(p.planned_bytes);
    }
    assert!(sizes[0] < sizes[1] && sizes[1] < sizes[2], "{sizes:?}");
}

#[test]
fn memory_rejects_inconsistent_inputs() {
    let mut g = Graph::new("bad");
    let x = g.input("x", f32s(&[4])).unwrap();
    let a = g.activation(Activation::Relu, x).unwrap();
    let nw = g.push_node(
        Op::Narrow {
            axis: 0,
            start: 3,
            len: 2,
        },
        vec![a],
        f32s(&[2]),
    );
    g.set_outputs(vec![nw]);
    let m = Model::Cpu;
    let o = PlanOptions::default();
    let r = plan_memory(&g, &[vec![4]], |n| m.pool(n), |n| m.elem(n), &o);
    assert!(matches!(r, Err(OptError::Plan { .. })), "{r:?}");
    let shapes = static_shapes(&g).unwrap();
    let r = plan_memory(&g, &shapes, |n| m.pool(n), |n| m.elem(n), &o);
    assert!(
        matches!(r, Err(OptError::Plan { node, .. }) if node == nw),
        "{r:?}"
    );
    g.nodes[1].inputs[0] = NodeId(2);
    let r = plan_memory(&g, &shapes, |n| m.pool(n), |n| m.elem(n), &o);
    assert!(matches!(r, Err(OptError::Plan { .. })), "{r:?}");
    let r = plan_memory(&g, &shapes, |_| usize::MAX, |n| m.elem(n), &o);
    assert!(
        matches!(r, Err(OptError::Plan { .. })),
        "absurd pool index: {r:?}"
    );
    // Sizes no address space holds are an error, not an overflow.
    let mut g = Graph::new("huge");
    let x = g.input("x", f32s(&[4])).unwrap();
    let a = g.activation(Activation::Relu, x).unwrap();
    let b = g.activation(Activation::Relu, a).unwrap();
    g.set_outputs(vec![b]);
    for big in [usize::MAX / 6, usize::MAX / 2] {
        let shapes = vec![vec![4], vec![big], vec![big]];
        let r = plan_memory(&g, &shapes, |n| m.pool(n), |n| m.elem(n), &o);
        assert!(matches!(r, Err(OptError::Plan { .. })), "{r:?}");
    }
}

#[test]
fn memory_plan_property_on_random_graphs() {
    let mut rng = Rng::new("memory_plan_property_on_random_graphs");
    let (mut planned, mut unplanned, mut views) = (0usize, 0usize, 0usize);
    let graphs = 500;
    for k in 0..graphs {
        let opts = GenOpts {
            ops: 3 + rng.below(40),
            views: true,
            redundancy: rng.chance(0.5),
            mixed_dtypes: true,
            heavy: true,
        };
        let g = random_graph(&mut rng, opts);
        let shapes = static_shapes(&g).unwrap();
        let m = rng.pick(&[Model::Cpu, Model::Native, Model::PerDtype]);
        let o = PlanOptions {
            alignment: rng.pick(&[1, 4, 16, 64]),
            views: rng.chance(0.85),
            views_of_leaves: rng.chance(0.7),
        };
        let p = plan(&g, &shapes, m, &o);
        if std::panic::catch_unwind(|| check(&g, &shapes, &p, m, &o)).is_err() {
            panic!("graph {k} ({m:?}, {o:?}) failed; graph: {g:?}\nplan: {p:?}");
        }
        planned += p.planned_bytes;
        unplanned += p.unplanned_bytes;
        views += p.views.iter().filter(|v| v.is_some()).count();
    }
    println!(
        "{graphs} random graphs: planned {planned} bytes vs unplanned {unplanned} ({:.1}%), {views} views",
        100.0 * planned as f64 / unplanned as f64
    );
    assert!(views > 0, "the generator made no views");
    assert!(planned < unplanned);
}

#[test]
fn memory_plan_of_a_transformer() {
    let tf = Tf {
        layers: 2,
        batch: 1,
        seq: 128,
        dim: 256,
        heads: 4,
        ff: 1024,
        redundant: false,
    };
    let g = transformer(tf);
    g.verify().unwrap();
    let shapes = static_shapes(&g).unwrap();
    let o = PlanOptions::default();
    let p = plan(&g, &shapes, Model::Cpu, &o);
    check(&g, &shapes, &p, Model::Cpu, &o);
    let q = plan_memory(&g, &shapes, class_pool, class_elem_bytes, &o).unwrap();
    assert_eq!(p, q, "the crate's compute-class model is the CPU model");
    let views = p.views.iter().filter(|v| v.is_some()).count();
    println!(
        "transformer {tf:?}: {} nodes, planned {} bytes vs unplanned {} bytes ({:.1}%), {views} views",
        g.nodes.len(),
        p.planned_bytes,
        p.unplanned_bytes,
        100.0 * p.planned_bytes as f64 / p.unplanned_bytes as f64
    );
    assert!(views >= 2 * 4, "the head reshapes alias");
    // Two layers need no more than one layer's working set plus the residual stream.
    let one = transformer(Tf { layers: 1, ..tf });
    let p1 = plan(&one, &static_shapes(&one).unwrap(), Model::Cpu, &o);
    assert_eq!(
        p.planned_bytes, p1.planned_bytes,
        "layers reuse the same arena"
    );
    assert!(p.planned_bytes * 3 < p.unplanned_bytes);
}

#[test]
fn memory_plan_handles_large_graphs() {
    // A deep residual stack: 20k nodes, every buffer short-lived except the residual stream.
    let mut g = Graph::new("deep");
    let mut x = g.input("x", f32s(&[32, 64])).unwrap();
    let w = g.param("w", f32s(&[64])).unwrap();
    for _ in 0..5000 {
        let a = g.mul(x, w).unwrap();
        let b = g.activation(Activation::Tanh, a).unwrap();
        let c = view(&mut g, Op::Reshape { shape: vec![2048] }, b);
        let d = view(
            &mut g,
            Op::Reshape {
                shape: vec![32, 64],
            },
            c,
        );
        x = g.add(x, d).unwrap();
    }
    g.set_outputs(vec![x]);
    let shapes = static_shapes(&g).unwrap();
    let o = PlanOptions::default();
    let t = std::time::Instant::now();
    let p = plan(&g, &shapes, Model::Cpu, &o);
    let dt = t.elapsed();
    println!(
        "{} nodes planned in {dt:?}: {} bytes vs {} unplanned",
        g.nodes.len(),
        p.planned_bytes,
        p.unplanned_bytes
    );
    assert_eq!(p.planned_bytes, 3 * 32 * 64 * 4, "residual, a, b");
    assert!(dt.as_secs() < 20, "planning took {dt:?}");
}
