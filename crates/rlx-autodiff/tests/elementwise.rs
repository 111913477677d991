//! Finite-difference checks of the elementwise VJP rules (the per-op cases come from
//! rlx-testutil's case table), and the core's behaviour: ties, fan-out accumulation,
//! StopGradient, integer inputs, missing rules, grad_with_loss.
mod common;
use common::*;
use rlx_testutil::run::grad;

rlx_testutil::case_tests!(elementwise, grad);
use rlx_autodiff::{grad, grad_with_loss, AdError, D_OUTPUT};
use rlx_ir::{
    Activation, BinaryOp, ChainOperand, ChainStep, CompareOp, DType, Graph, HostTensor, Op,
    RegionPrologue, Shape,
};

/// At exact ties max/min split the cotangent evenly — which is also what a central
/// difference measures there.
#[test]
fn max_min_ties_split_evenly() {
    let mut rng = Rng::new("max_min_ties_split_evenly");
    for op in [BinaryOp::Max, BinaryOp::Min] {
        let mut g = Graph::new("tie");
        let a = f64_input(&mut g, "a", &[9]);
        let b = f64_input(&mut g, "b", &[9]);
        let y = g.binary(op, a, b).unwrap();
        g.set_outputs(vec![y]);
        // Distinct values spaced ≥ 0.05 apart, then every other pair made a tie.
        let mut pool: Vec<f64> = (0..18).map(|i| (i as f64) * 0.1 - 1.0).collect();
        for i in (1..pool.len()).rev() {
            pool.swap(i, rng.below(i + 1));
        }
        let (av, mut bv) = (pool[..9].to_vec(), pool[9..].to_vec());
        for i in (0..9).step_by(2) {
            bv[i] = av[i];
        }
        let w = gradcheck_with(
            &format!("ties {op:?}"),
            &g,
            &[
                ("a", HostTensor::from_f64(&[9], &av)),
                ("b", HostTensor::from_f64(&[9], &bv)),
            ],
            &[a, b],
            &mut rng,
            false,
        );
        assert!(w <= FD_TOL);
    }
}

/// Fan-out: x feeds four consumers (some twice); the contributions must add up.
#[test]
fn fanout_accumulates() {
    let mut rng = Rng::new("fanout_accumulates");
    let mut g = Graph::new("fan");
    let x = f64_input(&mut g, "x", &[2, 5]);
    let z = f64_input(&mut g, "z", &[2, 5]);
    let xx = g.mul(x, x).unwrap();
    let e = g.activation(Activation::Tanh, x).unwrap();
    let ez = g.mul(e, z).unwrap();
    let s = g.add(xx, ez).unwrap();
    let q = g.div(s, x).unwrap();
    let y = g.sub(q, x).unwrap();
    g.set_outputs(vec![y]);
    gradcheck(
        "fanout",
        &g,
        &[
            (
                "x",
                HostTensor::from_f64(&[2, 5], &rng.normals_away(10, 0.5)),
            ),
            ("z", rng.tensor(&[2, 5])),
        ],
        &[x, z],
        &mut rng,
    );
}

/// f(x) = x·sg(x) + sin(x) must differentiate like g(x, c) = x·c + sin(x) with c = x held.
#[test]
fn stop_gradient_blocks() {
    let mut rng = Rng::new("stop_gradient_blocks");
    let xv = rng.tensor(&[3, 4]);
    let mut f = Graph::new("sg");
    let x = f64_input(&mut f, "x", &[3, 4]);
    let s = f.add_node(Op::StopGradient, &[x]).unwrap();
    let xs = f.mul(x, s).unwrap();
    let sn = f.activation(Activation::Sin, x).unwrap();
    let y = f.add(xs, sn).unwrap();
    f.set_outputs(vec![y]);
    let gf = grad(&f, &[x]).unwrap();
    let w = rng.tensor(&[3, 4]);
    let feed = vec![
        ("x".to_string(), xv.clone()),
        (D_OUTPUT.to_string(), w.clone()),
    ];
    let got = run(&gf, &feed)[0].to_f64_vec();
    let want: Vec<f64> = xv
        .to_f64_vec()
        .iter()
        .zip(w.to_f64_vec())
        .map(|(x, w)| w * (x + x.cos()))
        .collect();
    assert!(rel_l2(&got, &want) <= 1e-12, "{got:?} vs {want:?}");
    // And by finite differences on the held-constant form.
    let mut h = Graph::new("held");
    let x2 = f64_input(&mut h, "x", &[3, 4]);
    let c = f64_input(&mut h, "c", &[3, 4]);
    let xc = h.mul(x2, c).unwrap();
    let sn = h.activation(Activation::Sin, x2).unwrap();
    let y2 = h.add(xc, sn).unwrap();
    h.set_outputs(vec![y2]);
    gradcheck("held", &h, &[("x", xv.clone()), ("c", xv)], &[x2], &mut rng);
    // A wrt reached only through StopGradient gets a zero gradient.
    let mut k = Graph::new("only-sg");
    let a = f64_input(&mut k, "a", &[3]);
    let sa = k.add_node(Op::StopGradient, &[a]).unwrap();
    let e = k.activation(Activation::Exp, sa).unwrap();
    k.set_outputs(vec![e]);
    let gk = grad(&k, &[a]).unwrap();
    let out = run(
        &gk,
        &[
            ("a".into(), rng.tensor(&[3])),
            (D_OUTPUT.into(), rng.tensor(&[3])),
        ],
    );
    assert_eq!(out[0].to_f64_vec(), vec![0.0; 3]);
}

#[test]
fn cast_passes_gradient_in_source_dtype() {
    let mut rng = Rng::new("cast_passes_gradient_in_source_dtype");
    // f32 → f64: the gradient comes back as f32, the cotangent rounded.
    let mut g = Graph::new("cast");
    let x = g.input("x", Shape::new(&[6], DType::F32)).unwrap();
    let c = g.cast(x, DType::F64).unwrap();
    let y = g.activation(Activation::Square, c).unwrap();
    g.set_outputs(vec![y]);
    let gg = grad(&g, &[x]).unwrap();
    assert_eq!(gg.shape(gg.outputs[0]).unwrap().dtype, DType::F32);
    let xv = rng.normals(6);
    let w = rng.normals(6);
    let out = run(
        &gg,
        &[
            ("x".into(), HostTensor::from_f64_as(&[6], &xv, DType::F32)),
            (D_OUTPUT.into(), HostTensor::from_f64(&[6], &w)),
        ],
    );
    let want: Vec<f64> = xv
        .iter()
        .zip(&w)
        .map(|(x, w)| (2.0 * (*x as f32 as f64) * w) as f32 as f64)
        .collect();
    assert!(rel_l2(&out[0].to_f64_vec(), &want) <= 1e-7);
    // f64 → f64 round trip through f64 casts, by finite differences.
    let mut h = Graph::new("cast64");
    let x = f64_input(&mut h, "x", &[5]);
    let c = h.cast(x, DType::F64).unwrap();
    let y = h.activation(Activation::Tanh, c).unwrap();
    h.set_outputs(vec![y]);
    gradcheck("cast f64", &h, &[("x", rng.tensor(&[5]))], &[x], &mut rng);
}

/// Integer inputs (labels) get no gradient; asking for one is an error.
#[test]
fn integer_inputs_get_no_gradient() {
    let mut rng = Rng::new("integer_inputs_get_no_gradient");
    let mut g = Graph::new("int");
    let x = f64_input(&mut g, "x", &[5]);
    let l = g.input("labels", Shape::new(&[5], DType::I64)).unwrap();
    let lf = g.cast(l, DType::F64).unwrap();
    let y = g.mul(x, lf).unwrap();
    let y = g.activation(Activation::Sin, y).unwrap();
    g.set_outputs(vec![y]);
    match grad(&g, &[l]) {
        Err(AdError::BadWrt { node, .. }) => assert_eq!(node, l),
        other => panic!("expected BadWrt, got {other:?}"),
    }
    let labels: Vec<f64> = (0..5).map(|_| rng.below(10) as f64).collect();
    gradcheck(
        "x next to int labels",
        &g,
        &[
            ("x", rng.tensor(&[5])),
            ("labels", HostTensor::from_f64_as(&[5], &labels, DType::I64)),
        ],
        &[x],
        &mut rng,
    );
}

#[test]
fn op_without_rule_is_an_error() {
    let mut g = Graph::new("norule");
    let x = f64_input(&mut g, "x", &[4, 2]);
    let e = g.activation(Activation::Exp, x).unwrap();
    // Built with an explicit shape: the graph is never run, only differentiated.
    // Fusion regions come after autodiff in the pipeline: one reaching it has no rule.
    let f = g.push_node(
        Op::ElementwiseRegion {
            chain: vec![ChainStep::Activation(
                Activation::Tanh,
                ChainOperand::Input(0),
            )],
            prologue: RegionPrologue::None,
        },
        vec![e],
        Shape::new(&[4, 2], DType::F64),
    );
    let y = g.activation(Activation::Sin, f).unwrap();
    g.set_outputs(vec![y]);
    match grad(&g, &[x]) {
        Err(AdError::NoRule { node, op }) => assert_eq!((node, op), (f, "ElementwiseRegion")),
        other => panic!("expected NoRule, got {other:?}"),
    }
    let msg = grad(&g, &[x]).unwrap_err().to_string();
    assert!(
        msg.contains("ElementwiseRegion") && msg.contains("%2"),
        "{msg}"
    );
    // Off the differentiated path the same op is fine: only y's dependence on `s` matters.
    let s = g.input("s", Shape::new(&[4, 2], DType::F64)).unwrap();
    let t = g.mul(y, s).unwrap();
    g.set_outputs(vec![t]);
    assert!(grad(&g, &[s]).is_ok());
    assert!(matches!(grad(&g, &[x]), Err(AdError::NoRule { .. })));
}

#[test]
fn grad_with_loss_seeds_ones() {
    let mut rng = Rng::new("grad_with_loss_seeds_ones");
    let mut g = Graph::new("loss");
    let x = f64_input(&mut g, "x", &[1, 1]);
    let w = f64_input(&mut g, "w", &[1, 1]);
    let xw = g.mul(x, w).unwrap();
    let loss = g.activation(Activation::Tanh, xw).unwrap();
    g.set_outputs(vec![loss]);
    let gl = grad_with_loss(&g, &[w, x]).unwrap();
    assert!(gl.inputs().all(|(n, _)| n != D_OUTPUT), "no d_output input");
    let (xv, wv) = (rng.normal(), rng.normal());
    let out = run(
        &gl,
        &[
            ("x".into(), HostTensor::from_f64(&[1, 1], &[xv])),
            ("w".into(), HostTensor::from_f64(&[1, 1], &[wv])),
        ],
    );
    assert_eq!(out.len(), 3);
    let t = (xv * wv).tanh();
    assert!((out[0].to_f64_vec()[0] - t).abs() < 1e-15);
    let s = 1.0 - t * t;
    assert!(rel_l2(&out[1].to_f64_vec(), &[s * xv]) < 1e-12);
    assert!(rel_l2(&out[2].to_f64_vec(), &[s * wv]) < 1e-12);
    // A non-scalar output 0 is refused.
    let mut h = Graph::new("vec");
    let v = f64_input(&mut h, "v", &[3]);
    let e = h.activation(Activation::Exp, v).unwrap();
    h.set_outputs(vec![e]);
    assert!(matches!(
        grad_with_loss(&h, &[v]),
        Err(AdError::NotScalarLoss { .. })
    ));
}

#[test]
fn bad_requests_are_errors() {
    let mut g = Graph::new("bad");
    let x = f64_input(&mut g, "x", &[2]);
    let y = g.activation(Activation::Exp, x).unwrap();
    assert!(matches!(grad(&g, &[x]), Err(AdError::NoOutput)));
    g.set_outputs(vec![y]);
    assert!(matches!(
        grad(&g, &[rlx_ir::NodeId(99)]),
        Err(AdError::BadWrt { .. })
    ));
    let d = g.input(D_OUTPUT, Shape::new(&[2], DType::F64)).unwrap();
    let z = g.add(y, d).unwrap();
    g.set_outputs(vec![z]);
    assert!(matches!(grad(&g, &[x]), Err(AdError::NameClash(_))));
    let mut h = Graph::new("boolout");
    let a = f64_input(&mut h, "a", &[2]);
    let c = h.add_node(Op::Compare(CompareOp::Lt), &[a, a]).unwrap();
    h.set_outputs(vec![c]);
    assert!(matches!(grad(&h, &[a]), Err(AdError::Unsupported { .. })));
}

/// A wrt that output 0 does not depend on gets zeros of its shape.
#[test]
fn unrelated_wrt_gets_zeros() {
    let mut rng = Rng::new("unrelated_wrt_gets_zeros");
    let mut g = Graph::new("unrel");
    let x = f64_input(&mut g, "x", &[3]);
    let u = f64_input(&mut g, "u", &[2, 2]);
    let y = g.activation(Activation::Sin, x).unwrap();
    let _other = g.activation(Activation::Exp, u).unwrap();
    g.set_outputs(vec![y]);
    let gg = grad(&g, &[u, x]).unwrap();
    let xv = rng.tensor(&[3]);
    let w = rng.tensor(&[3]);
    let out = run(
        &gg,
        &[
            ("x".into(), xv.clone()),
            ("u".into(), rng.tensor(&[2, 2])),
            (D_OUTPUT.into(), w.clone()),
        ],
    );
    assert_eq!(out[0].shape, vec![2, 2]);
    assert_eq!(out[0].to_f64_vec(), vec![0.0; 4]);
    let want: Vec<f64> = xv
        .to_f64_vec()
        .iter()
        .zip(w.to_f64_vec())
        .map(|(x, w)| x.cos() * w)
        .collect();
    assert!(rel_l2(&out[1].to_f64_vec(), &want) < 1e-14);
}

/// A symbolic batch dim: one gradient graph serves every batch size, and the broadcast
/// operand's gradient sums over the symbolic axis.
#[test]
fn dynamic_batch_dim() {
    let mut rng = Rng::new("dynamic_batch_dim");
    let mut g = Graph::new("dyn");
    let x = g
        .input(
            "x",
            Shape::with_dims(vec![rlx_ir::Dim::dynamic("B"), 3.into()], DType::F64),
        )
        .unwrap();
    let b = f64_input(&mut g, "b", &[3]);
    let xb = g.mul(x, b).unwrap();
    let y = g.activation(Activation::Tanh, xb).unwrap();
    g.set_outputs(vec![y]);
    let gg = grad(&g, &[x, b]).unwrap();
    for n in [4usize, 7] {
        let (xv, bv, w) = (rng.normals(n * 3), rng.normals(3), rng.normals(n * 3));
        let out = run(
            &gg,
            &[
                ("x".into(), HostTensor::from_f64(&[n, 3], &xv)),
                ("b".into(), HostTensor::from_f64(&[3], &bv)),
                (D_OUTPUT.into(), HostTensor::from_f64(&[n, 3], &w)),
            ],
        );
        let mut dx = vec![0.0; n * 3];
        let mut db = vec![0.0; 3];
        for i in 0..n {
            for j in 0..3 {
                let k = i * 3 + j;
                let s = 1.0 - (xv[k] * bv[j]).tanh().powi(2);
                dx[k] = w[k] * s * bv[j];
                db[j] += w[k] * s * xv[k];
            }
        }
        assert_eq!(out[0].shape, vec![n, 3]);
        assert!(rel_l2(&out[0].to_f64_vec(), &dx) < 1e-13, "dx, B = {n}");
        assert!(rel_l2(&out[1].to_f64_vec(), &db) < 1e-13, "db, B = {n}");
    }
}
