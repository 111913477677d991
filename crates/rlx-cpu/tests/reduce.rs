//! Oracle tests: Reduce, Softmax, ArgMax and the softmax cross-entropy family.
mod common;
use common::*;
use rlx_ir::{DType, Graph, HostTensor, ReduceOp, Shape};

const OPS: [ReduceOp; 5] = [
    ReduceOp::Sum,
    ReduceOp::Mean,
    ReduceOp::Max,
    ReduceOp::Min,
    ReduceOp::Prod,
];

/// Row-major multi-index of flat position `k`.
fn unravel(mut k: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = k % shape[d];
        k /= shape[d];
    }
    idx
}

fn norm_axes(axes: &[i64], rank: usize) -> Vec<usize> {
    if axes.is_empty() {
        return (0..rank).collect();
    }
    axes.iter()
        .map(|&a| if a < 0 { a + rank as i64 } else { a } as usize)
        .collect()
}

/// Output shape and, for each input element, the flat output position it reduces into.
fn groups(shape: &[usize], axes: &[usize], keep: bool) -> (Vec<usize>, Vec<usize>) {
    let mut out_shape = vec![];
    for (d, &n) in shape.iter().enumerate() {
        if !axes.contains(&d) {
            out_shape.push(n);
        } else if keep {
            out_shape.push(1);
        }
    }
    let numel: usize = shape.iter().product();
    let mut dest = vec![];
    for k in 0..numel {
        let idx = unravel(k, shape);
        let mut flat = 0;
        for d in 0..shape.len() {
            if !axes.contains(&d) {
                flat = flat * shape[d] + idx[d];
            }
        }
        dest.push(flat);
    }
    (out_shape, dest)
}

fn oracle_f(op: ReduceOp, x: &[f64], shape: &[usize], axes: &[usize], keep: bool) -> Vec<f64> {
    let (out_shape, dest) = groups(shape, axes, keep);
    let m: usize = out_shape.iter().product();
    let mut vals: Vec<Vec<f64>> = vec![vec![]; m];
    for (k, &j) in dest.iter().enumerate() {
        vals[j].push(x[k]);
    }
    vals.iter()
        .map(|v| match op {
            ReduceOp::Sum => v.iter().sum(),
            ReduceOp::Mean => v.iter().sum::<f64>() / v.len() as f64,
            ReduceOp::Max => v.iter().cloned().fold(f64::MIN, f64::max),
            ReduceOp::Min => v.iter().cloned().fold(f64::MAX, f64::min),
            ReduceOp::Prod => v.iter().product(),
        })
        .collect()
}

fn run1(g: &Graph, x: HostTensor) -> Result<Vec<HostTensor>, rlx_cpu::CpuError> {
    rlx_cpu::run_graph(g, &[], &[("x", x)])
}

/// Values away from 0 with random sign, so products stay well conditioned.
fn signed(rng: &mut Rng, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let m = rng.range(0.6, 1.4);
            if rng.below(2) == 0 {
                m
            } else {
                -m
            }
        })
        .collect()
}

#[test]
fn reduce_every_op_and_axis_set_f32() {
    let mut rng = Rng::new("reduce_every_op_and_axis_set_f32");
    let cases: Vec<(Vec<usize>, Vec<i64>)> = vec![
        (vec![3, 5, 7], vec![1]),
        (vec![3, 5, 7], vec![-1]),
        (vec![3, 5, 7], vec![0, 2]),
        (vec![3, 5, 7], vec![-3, -1]),
        (vec![3, 5, 7], vec![]),
        (vec![2, 3, 4, 5], vec![1, -1]),
        (vec![2, 3, 4, 5], vec![0, 1, 2, 3]),
        (vec![9], vec![0]),
        (vec![11], vec![]),
        (vec![1, 13], vec![-1]),
    ];
    for (shape, axes) in &cases {
        let n: usize = shape.iter().product();
        for op in OPS {
            for keep in [false, true] {
                let x = signed(&mut rng, n);
                let mut g = Graph::new("r");
                let i = g.input("x", Shape::new(shape, DType::F32)).unwrap();
                let r = g.reduce(i, op, axes, keep).unwrap();
                g.set_outputs(vec![r]);
                let out = run1(&g, HostTensor::from_f64_as(shape, &x, DType::F32)).unwrap();
                let ax = norm_axes(axes, shape.len());
                let want = oracle_f(op, &through(DType::F32, &x), shape, &ax, keep);
                let (want_shape, _) = groups(shape, &ax, keep);
                assert_eq!(out[0].shape, want_shape, "{op:?} {shape:?} {axes:?} {keep}");
                let what = format!("{op:?} {shape:?} axes {axes:?} keep {keep}");
                assert_close(&what, &out[0], &want, DType::F32);
            }
        }
    }
}

#[test]
fn reduce_half_and_f64_storage() {
    let mut rng = Rng::new("reduce_half_and_f64_storage");
    let shape = [5usize, 6, 3];
    for dt in [DType::F16, DType::BF16, DType::F64] {
        for op in OPS {
            for axes in [vec![-2i64], vec![0, 2]] {
                let x = signed(&mut rng, 90);
                let mut g = Graph::new("r");
                let i = g.input("x", Shape::new(&shape, dt)).unwrap();
                let r = g.reduce(i, op, &axes, false).unwrap();
                g.set_outputs(vec![r]);
                let out = run1(&g, HostTensor::from_f64_as(&shape, &x, dt)).unwrap();
                assert_eq!(out[0].dtype, dt);
                let want = oracle_f(op, &through(dt, &x), &shape, &norm_axes(&axes, 3), false);
                let want = through(dt, &want);
                assert_close(&format!("{op:?} {dt} {axes:?}"), &out[0], &want, dt);
            }
        }
    }
}

#[test]
fn reduce_integers_exact() {
    let mut rng = Rng::new("reduce_integers_exact");
    let shape = [4usize, 3, 5];
    for dt in [DType::I32, DType::I64] {
        for op in OPS {
            for (axes, keep) in [(vec![1i64], true), (vec![-1, 0], false), (vec![], false)] {
                let x: Vec<i64> = (0..60).map(|_| rng.below(9) as i64 - 4).collect();
                let mut g = Graph::new("r");
                let i = g.input("x", Shape::new(&shape, dt)).unwrap();
                let r = g.reduce(i, op, &axes, keep).unwrap();
                g.set_outputs(vec![r]);
                let xf: Vec<f64> = x.iter().map(|&v| v as f64).collect();
                let out = run1(&g, HostTensor::from_f64_as(&shape, &xf, dt)).unwrap();
                let ax = norm_axes(&axes, 3);
                let (want_shape, dest) = groups(&shape, &ax, keep);
                let m: usize = want_shape.iter().product();
                let count = dest.len() / m;
                let mut want = vec![
                    match op {
                        ReduceOp::Prod => 1i64,
                        ReduceOp::Max => i64::MIN,
                        ReduceOp::Min => i64::MAX,
                        _ => 0,
                    };
                    m
                ];
                for (k, &j) in dest.iter().enumerate() {
                    want[j] = match op {
                        ReduceOp::Sum | ReduceOp::Mean => want[j] + x[k],
                        ReduceOp::Prod => want[j].wrapping_mul(x[k]),
                        ReduceOp::Max => want[j].max(x[k]),
                        ReduceOp::Min => want[j].min(x[k]),
                    };
                }
                for w in want.iter_mut() {
                    if op == ReduceOp::Mean {
                        *w /= count as i64;
                    }
                    if dt == DType::I32 {
                        *w = *w as i32 as i64;
                    }
                }
                assert_eq!(out[0].shape, want_shape);
                assert_eq!(out[0].dtype, dt);
                assert_eq!(out[0].to_i64_vec(), want, "{op:?} {dt} {axes:?} {keep}");
            }
        }
    }
}

#[test]
fn reduce_rank0_and_keepdim_all() {
    let mut rng = Rng::new("reduce_rank0_and_keepdim_all");
    let v = rng.normal();
    let mut g = Graph::new("r0");
    let i = g.input("x", Shape::scalar(DType::F64)).unwrap();
    let s = g.reduce_all(i, ReduceOp::Sum, false).unwrap();
    let m = g.reduce_all(i, ReduceOp::Max, true).unwrap();
    g.set_outputs(vec![s, m]);
    let out = run1(&g, HostTensor::from_f64_as(&[], &[v], DType::F64)).unwrap();
    assert!(out[0].shape.is_empty() && out[1].shape.is_empty());
    assert_close("rank-0 sum", &out[0], &[v], DType::F64);
    assert_close("rank-0 max", &out[1], &[v], DType::F64);

    let x = rng.normals(24);
    let mut g = Graph::new("all");
    let i = g.input("x", Shape::new(&[2, 3, 4], DType::F32)).unwrap();
    let s = g.reduce_all(i, ReduceOp::Mean, true).unwrap();
    g.set_outputs(vec![s]);
    let out = run1(&g, HostTensor::from_f64_as(&[2, 3, 4], &x, DType::F32)).unwrap();
    assert_eq!(out[0].shape, vec![1, 1, 1]);
    let want = through(DType::F32, &x).iter().sum::<f64>() / 24.0;
    assert_close("mean all keep", &out[0], &[want], DType::F32);
}

fn softmax_oracle(x: &[f64], shape: &[usize], axis: usize) -> Vec<f64> {
    let len = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let outer: usize = shape[..axis].iter().product();
    let mut out = vec![0.0; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| o * len * inner + j * inner + i;
            let m = (0..len).map(|j| x[at(j)]).fold(f64::MIN, f64::max);
            let s: f64 = (0..len).map(|j| (x[at(j)] - m).exp()).sum();
            for j in 0..len {
                out[at(j)] = (x[at(j)] - m).exp() / s;
            }
        }
    }
    out
}

#[test]
fn softmax_axes_dtypes_and_large_logits() {
    let mut rng = Rng::new("softmax_axes_dtypes_and_large_logits");
    let cases: [(&[usize], i64); 5] = [
        (&[3, 7], -1),
        (&[3, 7], 0),
        (&[2, 5, 3], 1),
        (&[2, 5, 3], -3),
        (&[13], 0),
    ];
    for (shape, axis) in cases {
        for dt in [DType::F32, DType::F16, DType::BF16, DType::F64] {
            for scale in [1.0, 1000.0] {
                let n: usize = shape.iter().product();
                let x: Vec<f64> = rng.normals(n).iter().map(|v| v * scale).collect();
                let mut g = Graph::new("sm");
                let i = g.input("x", Shape::new(shape, dt)).unwrap();
                let s = g.softmax(i, axis).unwrap();
                g.set_outputs(vec![s]);
                let out = run1(&g, HostTensor::from_f64_as(shape, &x, dt)).unwrap();
                let a = if axis < 0 {
                    axis + shape.len() as i64
                } else {
                    axis
                } as usize;
                let want = softmax_oracle(&through(dt, &x), shape, a);
                let what = format!("softmax {shape:?} axis {axis} {dt} scale {scale}");
                assert_close(&what, &out[0], &want, dt);
            }
        }
    }
}

#[test]
fn argmax_first_index_on_ties() {
    let mut rng = Rng::new("argmax_first_index_on_ties");
    let shape = [4usize, 6, 5];
    for dt in [DType::F32, DType::F64, DType::BF16, DType::I32, DType::I64] {
        for (axis, keep) in [(1i64, false), (-1, true), (0, true)] {
            // Few distinct values, so ties are common.
            let x: Vec<f64> = (0..120).map(|_| rng.below(4) as f64 - 2.0).collect();
            let mut g = Graph::new("am");
            let i = g.input("x", Shape::new(&shape, dt)).unwrap();
            let a = g.argmax(i, axis, keep).unwrap();
            g.set_outputs(vec![a]);
            let out = run1(&g, HostTensor::from_f64_as(&shape, &x, dt)).unwrap();
            let ax = if axis < 0 { axis + 3 } else { axis } as usize;
            let (want_shape, dest) = groups(&shape, &[ax], keep);
            let m: usize = want_shape.iter().product();
            let mut best = vec![(f64::MIN, 0i64); m];
            for (k, &j) in dest.iter().enumerate() {
                let pos = unravel(k, &shape)[ax] as i64;
                if x[k] > best[j].0 {
                    best[j] = (x[k], pos);
                }
            }
            assert_eq!(out[0].dtype, DType::I64);
            assert_eq!(out[0].shape, want_shape);
            let want: Vec<i64> = best.iter().map(|b| b.1).collect();
            assert_eq!(out[0].to_i64_vec(), want, "{dt} axis {axis}");
        }
    }
}

/// Per-row log-softmax in f64.
fn log_softmax_rows(x: &[f64], n: usize, c: usize) -> Vec<f64> {
    let mut out = vec![0.0; n * c];
    for r in 0..n {
        let row = &x[r * c..(r + 1) * c];
        let m = row.iter().cloned().fold(f64::MIN, f64::max);
        let lse = m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
        for j in 0..c {
            out[r * c + j] = row[j] - lse;
        }
    }
    out
}

#[test]
fn cross_entropy_forward_dense_and_labels() {
    let mut rng = Rng::new("cross_entropy_forward_dense_and_labels");
    for (n, c) in [(7usize, 5usize), (1, 3), (4, 11)] {
        for dt in [DType::F32, DType::F64, DType::BF16] {
            let x: Vec<f64> = rng.normals(n * c).iter().map(|v| v * 3.0).collect();
            let t = rng.uniforms(n * c, 0.0, 1.0);
            let labels: Vec<f64> = (0..n).map(|_| rng.below(c) as f64).collect();
            for label_dt in [DType::I64, DType::I32, DType::F32] {
                let mut g = Graph::new("ce");
                let l = g.input("x", Shape::new(&[n, c], dt)).unwrap();
                let tt = g.input("t", Shape::new(&[n, c], dt)).unwrap();
                let y = g.input("y", Shape::new(&[n], label_dt)).unwrap();
                let dense = g.softmax_cross_entropy(l, tt).unwrap();
                let sparse = g.softmax_cross_entropy_with_logits(l, y).unwrap();
                g.set_outputs(vec![dense, sparse]);
                let ins = [
                    ("x", HostTensor::from_f64_as(&[n, c], &x, dt)),
                    ("t", HostTensor::from_f64_as(&[n, c], &t, dt)),
                    ("y", HostTensor::from_f64_as(&[n], &labels, label_dt)),
                ];
                let out = rlx_cpu::run_graph(&g, &[], &ins).unwrap();
                let ls = log_softmax_rows(&through(dt, &x), n, c);
                let tr = through(dt, &t);
                let want_dense: Vec<f64> = (0..n)
                    .map(|r| -(0..c).map(|j| tr[r * c + j] * ls[r * c + j]).sum::<f64>())
                    .collect();
                let want_sparse: Vec<f64> =
                    (0..n).map(|r| -ls[r * c + labels[r] as usize]).collect();
                assert_eq!(out[0].shape, vec![n]);
                assert_close(&format!("CE dense {dt}"), &out[0], &want_dense, dt);
                let what = format!("CE labels {dt} {label_dt}");
                assert_close(&what, &out[1], &want_sparse, dt);
            }
        }
    }
}

#[test]
fn cross_entropy_backward_matches_analytic_formula() {
    let mut rng = Rng::new("cross_entropy_backward_matches_analytic_formula");
    for (n, c) in [(6usize, 7usize), (3, 2)] {
        for dt in [DType::F32, DType::F64] {
            let x: Vec<f64> = rng.normals(n * c).iter().map(|v| v * 2.0).collect();
            let t = rng.uniforms(n * c, 0.0, 1.0);
            let labels: Vec<f64> = (0..n).map(|_| rng.below(c) as f64).collect();
            let dl = rng.normals(n);
            let mut g = Graph::new("ceb");
            let l = g.input("x", Shape::new(&[n, c], dt)).unwrap();
            let tt = g.input("t", Shape::new(&[n, c], dt)).unwrap();
            let y = g.input("y", Shape::new(&[n], DType::I64)).unwrap();
            let d = g.input("d", Shape::new(&[n], dt)).unwrap();
            let by_label = g.softmax_cross_entropy_backward(l, y, d).unwrap();
            let by_dense = g.softmax_cross_entropy_backward(l, tt, d).unwrap();
            g.set_outputs(vec![by_label, by_dense]);
            let ins = [
                ("x", HostTensor::from_f64_as(&[n, c], &x, dt)),
                ("t", HostTensor::from_f64_as(&[n, c], &t, dt)),
                ("y", HostTensor::from_f64_as(&[n], &labels, DType::I64)),
                ("d", HostTensor::from_f64_as(&[n], &dl, dt)),
            ];
            let out = rlx_cpu::run_graph(&g, &[], &ins).unwrap();
            let ls = log_softmax_rows(&through(dt, &x), n, c);
            let (tr, dr) = (through(dt, &t), through(dt, &dl));
            let mut want_l = vec![0.0; n * c];
            let mut want_d = vec![0.0; n * c];
            for r in 0..n {
                for j in 0..c {
                    let p = ls[r * c + j].exp();
                    let onehot = if labels[r] as usize == j { 1.0 } else { 0.0 };
                    want_l[r * c + j] = (p - onehot) * dr[r];
                    want_d[r * c + j] = (p - tr[r * c + j]) * dr[r];
                }
            }
            assert_eq!(out[0].shape, vec![n, c]);
            assert_close(&format!("dCE labels {dt}"), &out[0], &want_l, dt);
            assert_close(&format!("dCE dense {dt}"), &out[1], &want_d, dt);
        }
    }
}

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
