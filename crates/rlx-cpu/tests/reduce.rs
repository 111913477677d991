//! Oracle tests of the reduce group: the per-op cases (Reduce, Softmax, ArgMax and the
//! softmax cross-entropy family) come from rlx-testutil's case table, run here against
//! their f64 oracles; below them the tests that are not per-op cases (bad labels at run
//! time, bad builds).
mod common;
use common::*;
use rlx_ir::{DType, Graph, HostTensor, Shape};
use rlx_testutil::run::cpu;

rlx_testutil::case_tests!(reduce, cpu);

#[test]
fn label_out_of_range_is_a_run_error() {
    let mut rng = Rng::new("label_out_of_range_is_a_run_error");
    let (n, c) = (3usize, 4usize);
    let x = rng.normals(n * c);
    for bad in [4.0, -1.0, 1.5] {
        let mut labels: Vec<f64> = (0..n).map(|_| rng.below(c) as f64).collect();
        labels[1] = bad;
        let ldt = if bad.fract() == 0.0 {
            DType::I64
        } else {
            DType::F32
        };
        let mut g = Graph::new("bad");
        let l = g.input("x", Shape::new(&[n, c], DType::F32)).unwrap();
        let y = g.input("y", Shape::new(&[n], ldt)).unwrap();
        let d = g.input("d", Shape::new(&[n], DType::F32)).unwrap();
        let f = g.softmax_cross_entropy_with_logits(l, y).unwrap();
        let b = g.softmax_cross_entropy_backward(l, y, d).unwrap();
        for out in [f, b] {
            g.set_outputs(vec![out]);
            let ins = [
                ("x", HostTensor::from_f64_as(&[n, c], &x, DType::F32)),
                ("y", HostTensor::from_f64_as(&[n], &labels, ldt)),
                ("d", HostTensor::from_f64_as(&[n], &x[..n], DType::F32)),
            ];
            let err = rlx_cpu::run_graph(&g, &[], &ins).expect_err("bad label must fail");
            assert!(
                err.to_string().contains(&format!("label {bad}")),
                "message should name the label: {err}"
            );
        }
    }
}

#[test]
fn reduction_builders_reject_bad_params() {
    let mut g = Graph::new("bad");
    let x = g.input("x", Shape::new(&[3, 4], DType::F32)).unwrap();
    let xi = g.input("xi", Shape::new(&[3, 4], DType::I64)).unwrap();
    let y = g.input("y", Shape::new(&[5], DType::I64)).unwrap();
    let t = g.input("t", Shape::new(&[3, 5], DType::F32)).unwrap();
    let d = g.input("d", Shape::new(&[3], DType::F32)).unwrap();
    assert!(g.sum(x, &[2], false).is_err());
    assert!(g.sum(x, &[-3], false).is_err());
    assert!(g.mean(x, &[1, -1], false).is_err(), "duplicate axis");
    assert!(g.softmax(x, 2).is_err());
    assert!(g.softmax(xi, 1).is_err(), "softmax of integers");
    assert!(g.argmax(x, -3, false).is_err());
    assert!(g.softmax_cross_entropy(x, t).is_err());
    assert!(g.softmax_cross_entropy_with_logits(x, y).is_err());
    assert!(
        g.softmax_cross_entropy_with_logits(d, y).is_err(),
        "rank-1 logits"
    );
    assert!(g.softmax_cross_entropy_backward(x, t, d).is_err());
    assert!(
        g.softmax_cross_entropy_backward(x, d, y).is_err(),
        "integer d_loss"
    );
    // The valid forms still build.
    assert!(g.reduce_max(x, &[-1], true).is_ok());
    assert!(g.reduce_min(xi, &[0usize], false).is_ok());
    assert!(g.reduce_prod(x, &[0i32, 1], false).is_ok());
}
