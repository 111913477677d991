//! The output comparison of the fusion tests (`common::compare`): cases where it flaked
//! on correct rewrites (each found by a random graph, its seed named) and proof that it
//! still fails on wrong ones.
mod common;
use common::compare::same_on_cpu;
use common::{count, RefEval, Rng};
use rlx_ir::{Activation, DType, Graph, OpKind, Shape};
use rlx_opt::{ConstFold, Expand, Pass, Pipeline};

fn sh(d: &[usize], dt: DType) -> Shape {
    Shape::new(d, dt)
}

/// Same-place infinities of the same sign are equal: `exp(1000·x)` overflows f32 in both
/// graphs at the same elements, and `inf − inf` used to make the error NaN (random graph
/// seed 9064520584009023356, case 87). A different infinity still fails.
#[test]
fn same_place_infinities_compare_equal() {
    use common::rel_err;
    let inf = f64::INFINITY;
    assert_eq!(rel_err(&[inf, 1.0, -inf], &[inf, 1.0, -inf]), 0.0);
    assert!((rel_err(&[inf, 1.1], &[inf, 1.0]) - 0.1).abs() < 1e-12);
    assert_eq!(rel_err(&[inf, 1.0], &[-inf, 1.0]), inf);
    assert_eq!(rel_err(&[inf, 1.0], &[3.0, 1.0]), inf);
    assert_eq!(rel_err(&[f64::NAN], &[f64::NAN]), inf);
    let mut rng = Rng::new("same_place_infinities_compare_equal");
    let mut g = Graph::new("overflow");
    let x = g.input("x", sh(&[4, 8], DType::F32)).unwrap();
    let c = g.constant_f32(&[1], &[1000.0]).unwrap();
    let y = g.mul(x, c).unwrap();
    let y = g.activation(Activation::Exp, y).unwrap();
    let y = g.activation(Activation::Neg, y).unwrap();
    g.set_outputs(vec![y]);
    let (h, _) = Pipeline::full(None).verify(true).run(&g).unwrap();
    assert_eq!(count(&h, OpKind::ElementwiseRegion), 1);
    for _ in 0..5 {
        same_on_cpu(&g, &h, &mut rng, "overflow to -inf");
    }
}

/// A graph of constants only (`c − tanh(c)` for small c cancels to ~c³/3) folds into one
/// constant computed op by op in f32, so its error against the f32 CPU run is the graph's
/// own f32 error, which the comparison must allow (random graph seed 9064518667845696359,
/// case 15: constants were not widened, so there was no allowance at all).
#[test]
fn folded_constant_cancellation_is_allowed_its_rounding() {
    let mut rng = Rng::new("folded_constant_cancellation_is_allowed_its_rounding");
    let mut g = Graph::new("constants");
    let vals: Vec<f32> = (0..16).map(|i| 0.004 + 0.001 * i as f32).collect();
    let c = g.constant_f32(&[16], &vals).unwrap();
    let t = g.activation(Activation::Tanh, c).unwrap();
    let d = g.sub(c, t).unwrap();
    g.set_outputs(vec![d]);
    let folding = Pipeline::full(Some(ConstFold::new(RefEval))).verify(true);
    let (h, _) = folding.run_to_fixpoint(&g, 4).unwrap();
    assert!(h.nodes.iter().all(|n| n.op.is_leaf()), "all folded: {h}");
    same_on_cpu(&g, &h, &mut rng, "folded c - tanh(c)");
    // The allowance is no blank cheque: a wrong fold still fails.
    let mut wrong = Graph::new("wrong");
    let bad: Vec<f32> = vals.iter().map(|v| v * v * v / 2.0).collect();
    let k = wrong.constant_f32(&[16], &bad).unwrap();
    wrong.set_outputs(vec![k]);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        same_on_cpu(&g, &wrong, &mut rng, "wrong fold")
    }));
    assert!(r.is_err(), "c³/2 passed for c − tanh(c) ≈ c³/3");
}

/// An exact cancellation (`x + ((s − x) − s)`) leaves rounding noise, which an RmsNorm
/// scales up to O(1) at every precision, so even the widened runs of two correct graphs
/// disagree; the leaf-sensitivity measure allows for it (random graph seed
/// 9064520579227715690, case 70, fused into a residual RmsNorm and expanded again).
#[test]
fn norm_of_cancellation_noise_is_measured() {
    let mut rng = Rng::new("norm_of_cancellation_noise_is_measured");
    let f = DType::F32;
    let mut g = Graph::new("noise");
    let x = g.input("x", sh(&[3, 4, 2], f)).unwrap();
    let w = g.param("w", sh(&[2, 4], f)).unwrap();
    let gamma = g.param("gamma", sh(&[2], f)).unwrap();
    let m = g.matmul(x, w).unwrap();
    let a = g.narrow(m, -1, 0, 2).unwrap();
    let b = g.narrow(m, -1, 2, 2).unwrap();
    // a·σ(a) as an importer writes it: SwiGLU fusion and its expansion compute silu
    // instead, so `s` differs by rounding between the graphs, in f64 too.
    let sig = g.activation(Activation::Sigmoid, a).unwrap();
    let sa = g.mul(a, sig).unwrap();
    let s = g.mul(b, sa).unwrap();
    let t = g.sub(s, x).unwrap();
    let t = g.sub(t, s).unwrap();
    let u = g.add(x, t).unwrap();
    let z = g.rms_norm(u, gamma, None, -1, 1e-6).unwrap();
    g.set_outputs(vec![z]);
    let (h, _) = Pipeline::full(None).verify(true).run(&g).unwrap();
    assert_eq!(count(&h, OpKind::FusedResidualRmsNorm), 1, "{h}");
    assert_eq!(count(&h, OpKind::FusedSwiGLU), 1, "{h}");
    let e = Expand::all().run(&h).unwrap();
    for _ in 0..20 {
        same_on_cpu(&g, &h, &mut rng, "norm of noise");
        same_on_cpu(&g, &e, &mut rng, "norm of noise, expanded");
    }
}
