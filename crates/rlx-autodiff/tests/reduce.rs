//! Finite-difference checks of the reduce group (the per-op cases of Reduce, Softmax,
//! SoftmaxCrossEntropy and SoftmaxCrossEntropyWithLogits come from rlx-testutil's case
//! table), and the `unbroadcast` helper against a plain loop.
mod common;
use common::*;
use rlx_autodiff::unbroadcast;
use rlx_ir::{DType, Graph, Shape};
use rlx_testutil::run::grad;

rlx_testutil::case_tests!(reduce, grad);

#[test]
fn unbroadcast_sums_broadcast_axes() {
    let mut rng = Rng::new("unbroadcast_sums_broadcast_axes");
    let (gd, td) = ([2usize, 3, 4], [3usize, 1]);
    let mut g = Graph::new("ub");
    let x = f64_input(&mut g, "x", &gd);
    let y = unbroadcast(&mut g, x, &Shape::new(&td, DType::F64)).unwrap();
    g.set_outputs(vec![y]);
    let xv = rng.tensor(&gd);
    let out = run(&g, &[("x".into(), xv.clone())]);
    assert_eq!(out[0].shape, td.to_vec());
    let v = xv.to_f64_vec();
    let mut want = vec![0.0; 3];
    for a in 0..2 {
        for b in 0..3 {
            for c in 0..4 {
                want[b] += v[a * 12 + b * 4 + c];
            }
        }
    }
    assert!(rel_l2(&out[0].to_f64_vec(), &want) < 1e-14);
}
