//! Each pass on hand-built graphs: the rewrite happened, node counts, the verifier passes,
//! and the reference interpreter gives the same outputs before and after.
mod common;
use common::{count, outputs, random_feeds, RefEval, Rng};
use rlx_ir::{Activation, BinaryOp, DType, Graph, HostTensor, Op, OpKind, Shape};
use rlx_opt::{ConstEvaluator, ConstFold, Cse, Dce, OptError, Pass, Pipeline, Simplify};

fn f32s(d: &[usize]) -> Shape {
    Shape::new(d, DType::F32)
}

/// Run `pass`, verify its result, and check outputs are unchanged on random feeds.
fn apply(pass: &dyn Pass, g: &Graph, rng: &mut Rng) -> Graph {
    g.verify().expect("input graph verifies");
    let h = pass.run(g).expect("pass runs");
    h.verify().expect("pass output verifies");
    let feeds = random_feeds(g, rng);
    common::assert_same(&outputs(&h, &feeds), &outputs(g, &feeds), 0.0, pass.name());
    h
}

#[test]
fn dce_drops_unreachable_and_keeps_the_signature() {
    let mut rng = Rng::new("dce_drops_unreachable_and_keeps_the_signature");
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[3, 5])).unwrap();
    let _unused_in = g.input("y", f32s(&[2])).unwrap();
    let _unused_param = g.param("w", f32s(&[5])).unwrap();
    let a = g.activation(Activation::Relu, x).unwrap();
    g.set_name(a, "act").unwrap();
    let dead = g.activation(Activation::Neg, x).unwrap();
    let c = g.constant_f32(&[5], &[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
    let _dead2 = g.mul(dead, c).unwrap();
    g.set_outputs(vec![a, a, x]);
    let h = apply(&Dce, &g, &mut rng);
    assert_eq!(h.nodes.len(), 4, "x, y, w and relu remain");
    assert_eq!(count(&h, OpKind::Input), 2);
    assert_eq!(count(&h, OpKind::Param), 1);
    assert_eq!(count(&h, OpKind::Constant), 0);
    assert_eq!(count(&h, OpKind::Binary), 0);
    assert_eq!(h.outputs.len(), 3);
    assert_eq!(h.outputs[0], h.outputs[1]);
    assert_eq!(h.nodes[h.outputs[0].0].name.as_deref(), Some("act"));
    assert!(matches!(h.nodes[h.outputs[2].0].op, Op::Input { ref name } if name == "x"));
    assert_eq!(h.inputs().count(), g.inputs().count());
}

#[test]
fn cse_merges_identical_nodes() {
    let mut rng = Rng::new("cse_merges_identical_nodes");
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[4, 3])).unwrap();
    let b = g.input("b", f32s(&[3])).unwrap();
    let r1 = g.activation(Activation::Tanh, x).unwrap();
    let r2 = g.activation(Activation::Tanh, x).unwrap();
    let s1 = g.add(r1, b).unwrap();
    let s2 = g.add(r2, b).unwrap(); // equal to s1 once r2 merges into r1
    let s3 = g.add(b, r1).unwrap(); // addition commutes: merges with s1
    let d1 = g.sub(r1, b).unwrap();
    let d2 = g.sub(b, r2).unwrap(); // subtraction does not
    let m = g.mul(s1, s2).unwrap();
    g.set_outputs(vec![m, s2, s3, d1, d2]);
    let h = apply(&Cse, &g, &mut rng);
    assert_eq!(count(&h, OpKind::Activation), 1);
    assert_eq!(count(&h, OpKind::Binary), 4, "s1 (= s2 = s3), d1, d2, m");
    assert_eq!(h.nodes.len(), g.nodes.len() - 3);
    let m_new = &h.nodes[h.outputs[0].0];
    assert_eq!(m_new.inputs[0], m_new.inputs[1], "m = s1 * s1");
    assert_eq!(h.outputs[1], m_new.inputs[0]);
    assert_eq!(h.outputs[2], m_new.inputs[0]);
    assert_ne!(h.outputs[3], h.outputs[4]);
}

#[test]
fn cse_never_merges_inputs_or_params_and_respects_op_params() {
    let mut rng = Rng::new("cse_never_merges_inputs_or_params_and_respects_op_params");
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[6])).unwrap();
    let y = g.input("y", f32s(&[6])).unwrap();
    let p = g.param("p", f32s(&[6])).unwrap();
    let q = g.param("q", f32s(&[6])).unwrap();
    let a = g.activation(Activation::Relu, x).unwrap();
    let b = g.activation(Activation::Sigmoid, x).unwrap();
    let c = g.cast(y, DType::F16).unwrap();
    let d = g.cast(y, DType::BF16).unwrap();
    let e = g.add(p, q).unwrap();
    let f = g.sub(p, q).unwrap();
    g.set_outputs(vec![a, b, c, d, e, f]);
    let h = apply(&Cse, &g, &mut rng);
    assert_eq!(h.nodes.len(), g.nodes.len(), "nothing is identical");
}

#[test]
fn cse_merges_constants_with_equal_bytes_only() {
    let mut rng = Rng::new("cse_merges_constants_with_equal_bytes_only");
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[2, 3])).unwrap();
    let c1 = g.constant_f32(&[3], &[0.5, -1.5, 2.0]).unwrap();
    let c2 = g.constant_f32(&[3], &[0.5, -1.5, 2.0]).unwrap();
    let c3 = g.constant_f32(&[3], &[0.5, -1.5, 2.5]).unwrap();
    let c4 = g.constant_f32(&[1, 3], &[0.5, -1.5, 2.0]).unwrap(); // same bytes, other shape
    let c5 = g
        .constant(HostTensor::from_f64(&[3], &[0.5, -1.5, 2.0]))
        .unwrap(); // other dtype
    let xd = g.cast(x, DType::F64).unwrap();
    let mut outs: Vec<_> = [c1, c2, c3, c4]
        .iter()
        .map(|&c| g.mul(x, c).unwrap())
        .collect();
    outs.push(g.mul(xd, c5).unwrap());
    g.set_outputs(outs);
    let h = apply(&Cse, &g, &mut rng);
    assert_eq!(count(&h, OpKind::Constant), 4, "only c1 and c2 merge");
    assert_eq!(count(&h, OpKind::Binary), 4, "x*c1 and x*c2 merge too");
    assert_eq!(h.outputs[0], h.outputs[1]);
}

/// A constant of `v` repeated over `dims`.
fn filled(g: &mut Graph, dims: &[usize], v: f64, dt: DType) -> rlx_ir::NodeId {
    let n = dims.iter().product();
    g.constant(HostTensor::from_f64_as(dims, &vec![v; n], dt))
        .unwrap()
}

#[test]
fn simplify_removes_algebraic_identities() {
    let mut rng = Rng::new("simplify_removes_algebraic_identities");
    for dt in [DType::F32, DType::F64, DType::F16, DType::I64] {
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[3, 4], dt)).unwrap();
        let one_row = filled(&mut g, &[1, 4], 1.0, dt);
        let one = filled(&mut g, &[], 1.0, dt);
        let zero = filled(&mut g, &[4], 0.0, dt);
        let neg_zero = filled(&mut g, &[1, 1], -0.0, dt);
        let a = g.mul(x, one_row).unwrap();
        let b = g.mul(one, a).unwrap();
        let c = g.add(b, zero).unwrap();
        let d = g.add(neg_zero, c).unwrap();
        let e = g.sub(d, zero).unwrap();
        let f = g.div(e, one).unwrap();
        let same = g.cast(f, dt).unwrap();
        g.set_outputs(vec![same]);
        let h = apply(&Simplify, &g, &mut rng);
        assert_eq!(h.outputs[0].0, 0, "{dt}: the output is x itself");
        let h = apply(&Dce, &h, &mut rng);
        assert_eq!(h.nodes.len(), 1, "{dt}: only x remains");
    }
}

#[test]
fn simplify_keeps_what_is_not_an_identity() {
    let mut rng = Rng::new("simplify_keeps_what_is_not_an_identity");
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[1, 4])).unwrap();
    let ones_big = filled(&mut g, &[3, 4], 1.0, DType::F32); // grows x's shape
    let zero = filled(&mut g, &[4], 0.0, DType::F32);
    let one = filled(&mut g, &[4], 1.0, DType::F32);
    let two = filled(&mut g, &[4], 2.0, DType::F32);
    let almost = g.constant_f32(&[4], &[1.0, 1.0, 1.0, 0.5]).unwrap();
    let outs = vec![
        g.mul(x, ones_big).unwrap(),
        g.sub(zero, x).unwrap(),
        g.div(one, x).unwrap(),
        g.mul(x, two).unwrap(),
        g.mul(x, almost).unwrap(),
        g.add(x, one).unwrap(),
        g.binary(BinaryOp::Max, x, zero).unwrap(),
        g.cast(x, DType::F16).unwrap(),
    ];
    g.set_outputs(outs);
    let h = apply(&Simplify, &g, &mut rng);
    assert_eq!(h.nodes.len(), g.nodes.len());
    assert_eq!(count(&h, OpKind::Binary), 7);
    assert_eq!(count(&h, OpKind::Cast), 1);
}

/// Adds two tensors elementwise and counts its calls; used where the test needs to know the
/// evaluator was consulted.
struct Counting(std::cell::Cell<usize>);

impl ConstEvaluator for Counting {
    fn eval(&self, op: &Op, inputs: &[HostTensor], out: &Shape) -> Option<HostTensor> {
        self.0.set(self.0.get() + 1);
        RefEval.eval(op, inputs, out)
    }
}

#[test]
fn const_fold_replaces_constant_subgraphs() {
    let mut rng = Rng::new("const_fold_replaces_constant_subgraphs");
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[2, 3])).unwrap();
    let av = rng.normals(3);
    let bv = rng.normals(3);
    let a = g
        .constant(HostTensor::from_f64_as(&[3], &av, DType::F32))
        .unwrap();
    let b = g
        .constant(HostTensor::from_f64_as(&[1, 3], &bv, DType::F32))
        .unwrap();
    let s = g.add(a, b).unwrap();
    let t = g.activation(Activation::Relu, s).unwrap();
    g.set_name(t, "bias").unwrap();
    let u = g.mul(x, t).unwrap();
    g.set_outputs(vec![u]);
    let h = apply(&ConstFold::new(RefEval), &g, &mut rng);
    let u_new = &h.nodes[h.outputs[0].0];
    let folded = &h.nodes[u_new.inputs[1].0];
    assert_eq!(
        folded.name.as_deref(),
        Some("bias"),
        "the name survives folding"
    );
    let Op::Constant { data } = &folded.op else {
        panic!("relu(a + b) was not folded: {:?}", folded.op)
    };
    let got = HostTensor::new(&[1, 3], DType::F32, data.clone())
        .unwrap()
        .to_f64_vec();
    for i in 0..3 {
        let want = ((av[i] as f32 + bv[i] as f32) as f64).max(0.0);
        assert!((got[i] - want).abs() <= 1e-6 * want.abs().max(1.0), "{i}");
    }
    assert_eq!(count(&h, OpKind::Activation), 0);
    assert_eq!(count(&h, OpKind::Binary), 1, "only x * t is left");
    let h = apply(&Dce, &h, &mut rng);
    assert_eq!(h.nodes.len(), 3, "x, the folded constant, u");
}

#[test]
fn const_fold_respects_the_size_limit_and_the_evaluator() {
    let mut rng = Rng::new("const_fold_respects_the_size_limit_and_the_evaluator");
    let mut g = Graph::new("t");
    let a = g.constant_f32(&[3], &[1.0, -2.0, 3.0]).unwrap();
    let b = g.constant_f32(&[3], &[0.5, 0.25, -4.0]).unwrap();
    let s = g.mul(a, b).unwrap();
    let t = g.activation(Activation::Gelu, s).unwrap(); // RefEval does not know Gelu
    g.set_outputs(vec![s, t]);
    let counting = std::rc::Rc::new(Counting(std::cell::Cell::new(0)));
    struct Shared(std::rc::Rc<Counting>);
    impl ConstEvaluator for Shared {
        fn eval(&self, op: &Op, i: &[HostTensor], o: &Shape) -> Option<HostTensor> {
            self.0.eval(op, i, o)
        }
    }
    let small = ConstFold::new(Shared(counting.clone())).limit(2);
    let h = small.run(&g).unwrap();
    h.verify().unwrap();
    assert_eq!(
        count(&h, OpKind::Binary),
        1,
        "3 elements > limit 2: not folded"
    );
    assert_eq!(
        counting.0.get(),
        0,
        "the evaluator is not consulted above the limit"
    );
    let h = ConstFold::new(Shared(counting.clone())).run(&g).unwrap();
    h.verify().unwrap();
    assert_eq!(count(&h, OpKind::Binary), 0);
    assert_eq!(
        count(&h, OpKind::Activation),
        1,
        "Gelu stays: the evaluator declined"
    );
    assert_eq!(counting.0.get(), 2);
    let _ = &mut rng;
}

#[test]
fn const_fold_rejects_a_wrong_evaluator_result() {
    struct Wrong;
    impl ConstEvaluator for Wrong {
        fn eval(&self, _: &Op, _: &[HostTensor], _: &Shape) -> Option<HostTensor> {
            Some(HostTensor::from_f32(&[2], &[1.0, 2.0]))
        }
    }
    let mut g = Graph::new("t");
    let a = g.constant_f32(&[3], &[1.0, 2.0, 3.0]).unwrap();
    let n = g.activation(Activation::Neg, a).unwrap();
    g.set_outputs(vec![n]);
    match ConstFold::new(Wrong).run(&g) {
        Err(OptError::Node { pass, node, .. }) => {
            assert_eq!(pass, "const_fold");
            assert_eq!(node, n);
        }
        other => panic!("expected a typed error, got {other:?}"),
    }
}

/// A broken pass: gives its first non-leaf node a wrong shape.
struct Corrupt;
impl Pass for Corrupt {
    fn name(&self) -> &'static str {
        "corrupt"
    }
    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        let mut h = g.clone();
        if let Some(n) = h.nodes.iter_mut().find(|n| !n.op.is_leaf()) {
            n.shape = Shape::new(&[7, 7, 7], n.shape.dtype);
        }
        Ok(h)
    }
}

#[test]
fn pipeline_reports_and_verifies_every_pass() {
    let mut rng = Rng::new("pipeline_reports_and_verifies_every_pass");
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[2, 5])).unwrap();
    let one = filled(&mut g, &[5], 1.0, DType::F32);
    let a = g.mul(x, one).unwrap();
    let r1 = g.activation(Activation::Silu, a).unwrap();
    let r2 = g.activation(Activation::Silu, x).unwrap();
    let c = g.constant_f32(&[5], &[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
    let cc = g.activation(Activation::Square, c).unwrap();
    let s = g.add(r1, r2).unwrap();
    let o = g.mul(s, cc).unwrap();
    g.set_outputs(vec![o]);
    let p = Pipeline::standard(Some(ConstFold::new(RefEval))).verify(true);
    assert_eq!(
        p.pass_names(),
        ["simplify", "const_fold", "cse", "simplify", "dce"]
    );
    let mut seen = vec![];
    let (h, reports) = p
        .run_observed(&g, |r, graph| seen.push((r.name, graph.nodes.len())))
        .unwrap();
    assert_eq!(
        seen,
        reports
            .iter()
            .map(|r| (r.name, r.nodes_after))
            .collect::<Vec<_>>()
    );
    h.verify().unwrap();
    let feeds = random_feeds(&g, &mut rng);
    common::assert_same(&outputs(&h, &feeds), &outputs(&g, &feeds), 0.0, "pipeline");
    assert_eq!(reports.len(), 5);
    assert_eq!(reports[0].nodes_before, g.nodes.len());
    assert_eq!(reports[4].nodes_after, h.nodes.len());
    for w in reports.windows(2) {
        assert_eq!(w[0].nodes_after, w[1].nodes_before);
        assert_eq!(w[0].kinds_after, w[1].kinds_before);
    }
    for r in &reports {
        assert_eq!(r.kinds_after.values().sum::<usize>(), r.nodes_after);
        println!("{r}");
    }
    // x, the folded square, silu(x), silu + silu, mul
    assert_eq!(h.nodes.len(), 5, "{h:?}");
    assert_eq!(count(&h, OpKind::Activation), 1);
    assert_eq!(reports[0].changed_kinds(), vec![(OpKind::Binary, 3, 2)]);
    assert_eq!(reports[2].changed_kinds(), vec![(OpKind::Activation, 2, 1)]);

    let bad = Pipeline::new().with(Dce).with(Corrupt).verify(true);
    match bad.run(&g) {
        Err(OptError::Verify { pass, .. }) => assert_eq!(pass, "corrupt"),
        other => panic!("expected a verification error naming the pass, got {other:?}"),
    }
    let mut broken = g.clone();
    broken.nodes[3].inputs[0] = rlx_ir::NodeId(9);
    match Pipeline::new().verify(true).with(Dce).run(&broken) {
        Err(OptError::Verify { pass, .. }) => assert_eq!(pass, "input"),
        other => panic!("expected the input to fail verification, got {other:?}"),
    }
    // Without verification the passes themselves must still fail cleanly.
    for pass in [&Dce as &dyn Pass, &Cse, &Simplify] {
        assert!(pass.run(&broken).is_err(), "{}", pass.name());
    }
}

#[test]
fn pipeline_preserves_outputs_on_random_graphs() {
    let mut rng = Rng::new("pipeline_preserves_outputs_on_random_graphs");
    let p = Pipeline::standard(Some(ConstFold::new(RefEval))).verify(true);
    let (mut before, mut after) = (0, 0);
    let mut seen = std::collections::BTreeMap::new();
    for _ in 0..300 {
        let ops = 4 + rng.below(30);
        let opts = common::gen::GenOpts {
            ops,
            views: true,
            redundancy: true,
            mixed_dtypes: true,
            heavy: true,
        };
        let g = common::gen::random_graph(&mut rng, opts);
        let (h, _) = p
            .run_to_fixpoint(&g, 4)
            .unwrap_or_else(|e| panic!("{e}\n{g:?}"));
        let feeds = random_feeds(&g, &mut rng);
        common::assert_same(
            &outputs(&h, &feeds),
            &outputs(&g, &feeds),
            1e-12,
            "pipeline",
        );
        assert!(h.nodes.len() <= g.nodes.len());
        before += g.nodes.len();
        after += h.nodes.len();
        for (k, c) in common::kinds(&g) {
            *seen.entry(k).or_insert(0) += c;
        }
    }
    println!("random graphs: {before} nodes before the pipeline, {after} after; ops {seen:?}");
    for kind in [
        OpKind::Activation,
        OpKind::Binary,
        OpKind::Compare,
        OpKind::Where,
        OpKind::Cast,
        OpKind::StopGradient,
        OpKind::MatMul,
        OpKind::Softmax,
        OpKind::LayerNorm,
        OpKind::Attention,
        OpKind::Reshape,
        OpKind::Transpose,
        OpKind::Narrow,
    ] {
        assert!(seen.contains_key(&kind), "the generator made no {kind}");
    }
    assert!(after < before, "the pipeline removed nothing at all");
}

#[test]
fn pipeline_shrinks_an_imported_transformer_without_changing_it() {
    let mut rng = Rng::new("pipeline_shrinks_an_imported_transformer_without_changing_it");
    let tf = common::gen::Tf {
        layers: 2,
        batch: 2,
        seq: 5,
        dim: 12,
        heads: 3,
        ff: 20,
        redundant: true,
    };
    let g = common::gen::transformer(tf);
    let clean = common::gen::transformer(common::gen::Tf {
        redundant: false,
        ..tf
    });
    let p = Pipeline::standard(Some(ConstFold::new(RefEval))).verify(true);
    let (h, reports) = p.run(&g).unwrap();
    for r in &reports {
        println!("{r}");
    }
    // The clean build repeats the attention scale constant per layer, which CSE merges.
    let (clean_opt, _) = p.run(&clean).unwrap();
    println!(
        "transformer ({} layers): {} nodes before the pipeline, {} after (clean build: {} -> {})",
        tf.layers,
        g.nodes.len(),
        h.nodes.len(),
        clean.nodes.len(),
        clean_opt.nodes.len()
    );
    assert!(h.nodes.len() < g.nodes.len());
    assert_eq!(clean_opt.nodes.len(), clean.nodes.len() - (tf.layers - 1));
    assert_eq!(
        common::kinds(&h),
        common::kinds(&clean_opt),
        "every redundancy is removed"
    );
    let feeds = random_feeds(&g, &mut rng);
    common::assert_same(
        &outputs(&h, &feeds),
        &outputs(&g, &feeds),
        1e-12,
        "transformer",
    );
    // The imported scale is the f32 product of two rounded factors: equal up to f32 rounding.
    let feeds = random_feeds(&clean, &mut rng);
    common::assert_same(
        &outputs(&h, &feeds),
        &outputs(&clean, &feeds),
        1e-6,
        "vs clean",
    );
}

#[test]
fn simplify_composes_reshapes_and_transposes() {
    let mut rng = Rng::new("simplify_composes_reshapes_and_transposes");
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[2, 3, 4])).unwrap();
    let r1 = g.add_node(Op::Reshape { shape: vec![6, 4] }, &[x]).unwrap();
    let r2 = g
        .add_node(Op::Reshape { shape: vec![4, -1] }, &[r1])
        .unwrap();
    let r3 = g
        .add_node(Op::Reshape { shape: vec![2, 12] }, &[r2])
        .unwrap();
    let back = g
        .add_node(
            Op::Reshape {
                shape: vec![2, 3, 4],
            },
            &[r3],
        )
        .unwrap();
    let same = g
        .add_node(
            Op::Reshape {
                shape: vec![0, 3, -1],
            },
            &[x],
        )
        .unwrap();
    let t1 = g
        .add_node(
            Op::Transpose {
                perm: vec![1, 0, 2],
            },
            &[x],
        )
        .unwrap();
    let t2 = g
        .add_node(
            Op::Transpose {
                perm: vec![2, 0, 1],
            },
            &[t1],
        )
        .unwrap();
    let t3 = g
        .add_node(
            Op::Transpose {
                perm: vec![1, 0, 2],
            },
            &[t1],
        )
        .unwrap(); // undoes t1
    let id = g
        .add_node(
            Op::Transpose {
                perm: vec![0, 1, 2],
            },
            &[t2],
        )
        .unwrap();
    let y = g.add(back, same).unwrap();
    g.set_outputs(vec![r3, y, id, t3]);
    let h = apply(&Simplify, &g, &mut rng);
    let h = apply(&Dce, &h, &mut rng);
    // r3 becomes one reshape of x; back and same are x itself.
    let r3n = &h.nodes[h.outputs[0].0];
    assert_eq!(r3n.op, Op::Reshape { shape: vec![2, 12] });
    assert_eq!(r3n.inputs, vec![x]);
    let yn = &h.nodes[h.outputs[1].0];
    assert_eq!(yn.inputs, vec![x, x]);
    // transpose [2,0,1] of transpose [1,0,2] is transpose [2,1,0] of x; t3 is x.
    let idn = &h.nodes[h.outputs[2].0];
    assert_eq!(
        idn.op,
        Op::Transpose {
            perm: vec![2, 1, 0]
        }
    );
    assert_eq!(idn.inputs, vec![x]);
    assert_eq!(h.outputs[3], x);
    assert_eq!(count(&h, OpKind::Reshape), 1);
    assert_eq!(count(&h, OpKind::Transpose), 1);
}

#[test]
fn simplify_reshapes_with_symbolic_dims() {
    let mut rng = Rng::new("simplify_reshapes_with_symbolic_dims");
    let mut g = Graph::new("t");
    let x = g
        .input(
            "x",
            Shape::with_dims(vec![rlx_ir::Dim::dynamic("B"), 6.into()], DType::F32),
        )
        .unwrap();
    let a = g.activation(Activation::Tanh, x).unwrap();
    let r1 = g
        .add_node(
            Op::Reshape {
                shape: vec![0, 2, 3],
            },
            &[a],
        )
        .unwrap();
    let r2 = g
        .add_node(Op::Reshape { shape: vec![0, 6] }, &[r1])
        .unwrap(); // a's own shape
    let r3 = g
        .add_node(
            Op::Reshape {
                shape: vec![0, 3, 2],
            },
            &[r1],
        )
        .unwrap(); // 0: not composable
    g.set_outputs(vec![r2, r3]);
    g.verify().unwrap();
    let h = Simplify.run(&g).unwrap();
    h.verify().unwrap();
    assert_eq!(h.outputs[0], a, "reshape back to a's shape is a");
    let r3n = &h.nodes[h.outputs[1].0];
    assert_eq!(r3n.shape, g.nodes[r3.0].shape, "symbolic shape kept");
    let h = Dce.run(&h).unwrap();
    assert_eq!(
        count(&h, OpKind::Reshape),
        2,
        "the chain through a 0-spec stays"
    );
    // Bound to a concrete batch, both graphs compute the same.
    let bind = |g: &Graph, b: usize| {
        let mut g = g.clone();
        for n in &mut g.nodes {
            let m = std::collections::HashMap::from([("B".to_string(), b)]);
            n.shape = n.shape.bind(&m);
        }
        g
    };
    for b in [1, 4] {
        let (gb, hb) = (bind(&g, b), bind(&h, b));
        let feeds = random_feeds(&gb, &mut rng);
        common::assert_same(&outputs(&hb, &feeds), &outputs(&gb, &feeds), 0.0, "bound");
    }
}

#[test]
fn simplify_never_composes_a_broadcasting_reshape() {
    let mut rng = Rng::new("simplify_never_composes_a_broadcasting_reshape");
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[1])).unwrap();
    let r1 = g.add_node(Op::Reshape { shape: vec![6] }, &[x]).unwrap(); // broadcasts
                                                                        // -1 here infers 3 from r1's 6 elements; against x's single element it would not.
    let r2 = g
        .add_node(Op::Reshape { shape: vec![2, -1] }, &[r1])
        .unwrap();
    g.set_outputs(vec![r2]);
    let h = apply(&Simplify, &g, &mut rng);
    assert_eq!(h.nodes[h.outputs[0].0].shape, f32s(&[2, 3]));
    assert_eq!(h.nodes[h.outputs[0].0].inputs, vec![r1]);
    assert_eq!(count(&h, OpKind::Reshape), 2);
}
