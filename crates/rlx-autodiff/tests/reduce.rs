//! Finite-difference checks: Reduce (every op, keep_dim on/off, negative and empty axes),
//! Softmax, SoftmaxCrossEntropy (dense targets), SoftmaxCrossEntropyWithLogits; and the
//! `unbroadcast` helper against a plain loop.
mod common;
use common::*;
use rlx_autodiff::unbroadcast;
use rlx_ir::{DType, Graph, HostTensor, Op, ReduceOp, Shape};

#[test]
fn reduce_vjp() {
    let mut rng = Rng::new("reduce_vjp");
    let ops = [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Prod,
    ];
    let cases: [(&[usize], Vec<i64>); 5] = [
        (&[3, 5], vec![1]),
        (&[3, 5], vec![-2]),
        (&[2, 3, 4], vec![0, 2]),
        (&[2, 3, 4], vec![]),
        (&[7], vec![0]),
    ];
    for op in ops {
        for (dims, axes) in &cases {
            for keep_dim in [false, true] {
                let mut g = Graph::new("red");
                let x = f64_input(&mut g, "x", dims);
                let y = g
                    .add_node(
                        Op::Reduce {
                            op,
                            axes: axes.clone(),
                            keep_dim,
                        },
                        &[x],
                    )
                    .unwrap();
                g.set_outputs(vec![y]);
                let n: usize = dims.iter().product();
                // Prod: magnitudes near 1 keep the product tame; all ops: nonzero values.
                let xv: Vec<f64> = match op {
                    ReduceOp::Prod => rng
                        .uniforms(n, 0.6, 1.4)
                        .into_iter()
                        .map(|v| if rng.uniform() < 0.3 { -v } else { v })
                        .collect(),
                    _ => rng.normals(n),
                };
                gradcheck(
                    &format!("reduce {op:?} {dims:?} axes {axes:?} keep {keep_dim}"),
                    &g,
                    &[("x", HostTensor::from_f64(dims, &xv))],
                    &[x],
                    &mut rng,
                );
            }
        }
    }
}

#[test]
fn softmax_vjp() {
    let mut rng = Rng::new("softmax_vjp");
    for (dims, axis) in [(vec![3, 5], -1i64), (vec![2, 3, 4], 1), (vec![4, 3], 0)] {
        let mut g = Graph::new("sm");
        let x = f64_input(&mut g, "x", &dims);
        let y = g.add_node(Op::Softmax { axis }, &[x]).unwrap();
        g.set_outputs(vec![y]);
        gradcheck(
            &format!("softmax {dims:?} axis {axis}"),
            &g,
            &[("x", rng.tensor(&dims))],
            &[x],
            &mut rng,
        );
    }
}

#[test]
fn cross_entropy_vjps() {
    let mut rng = Rng::new("cross_entropy_vjps");
    for (n, c) in [(4, 5), (3, 7)] {
        // Dense targets (not normalised: the rule must not assume rows sum to 1).
        let mut g = Graph::new("sce");
        let z = f64_input(&mut g, "z", &[n, c]);
        let t = f64_input(&mut g, "t", &[n, c]);
        let y = g.add_node(Op::SoftmaxCrossEntropy, &[z, t]).unwrap();
        g.set_outputs(vec![y]);
        gradcheck(
            &format!("sce dense {n}x{c}"),
            &g,
            &[
                ("z", rng.tensor(&[n, c])),
                (
                    "t",
                    HostTensor::from_f64(&[n, c], &rng.uniforms(n * c, 0.0, 1.0)),
                ),
            ],
            &[z, t],
            &mut rng,
        );
        // Integer labels (i64 and i32): the logits get (softmax − onehot)·dloss.
        for ldt in [DType::I64, DType::I32] {
            let mut g = Graph::new("scel");
            let z = f64_input(&mut g, "z", &[n, c]);
            let l = g.input("labels", Shape::new(&[n], ldt)).unwrap();
            let y = g
                .add_node(Op::SoftmaxCrossEntropyWithLogits, &[z, l])
                .unwrap();
            g.set_outputs(vec![y]);
            let labels: Vec<f64> = (0..n).map(|_| rng.below(c) as f64).collect();
            gradcheck(
                &format!("sce labels {ldt} {n}x{c}"),
                &g,
                &[
                    ("z", rng.tensor(&[n, c])),
                    ("labels", HostTensor::from_f64_as(&[n], &labels, ldt)),
                ],
                &[z],
                &mut rng,
            );
        }
    }
}

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
