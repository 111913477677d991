//! GPU parity: Reduce (every op, row / column / strided / split paths), Softmax, ArgMax and
//! the softmax cross-entropy family against the CPU reference and the f64 oracle.
mod common;
use common::*;
use rlx_ir::{DType, Graph, ReduceOp, Shape};

const OPS: [ReduceOp; 5] = [
    ReduceOp::Sum,
    ReduceOp::Mean,
    ReduceOp::Max,
    ReduceOp::Min,
    ReduceOp::Prod,
];

fn count(dims: &[usize], axes: &[i64]) -> usize {
    if axes.is_empty() {
        return dims.iter().product();
    }
    axes.iter()
        .map(|&a| {
            dims[if a < 0 {
                (dims.len() as i64 + a) as usize
            } else {
                a as usize
            }]
        })
        .product()
}

/// Data for `op`: sums get a mean offset (no result cancels to ~0, which would make a
/// relative error meaningless), products values of magnitude 0.5..1.5 with random sign.
fn data(rng: &mut Rng, op: ReduceOp, n: usize) -> Vec<f64> {
    match op {
        ReduceOp::Prod => (0..n)
            .map(|_| {
                let v = rng.range(0.5, 1.5);
                if rng.chance(0.5) {
                    -v
                } else {
                    v
                }
            })
            .collect(),
        ReduceOp::Sum | ReduceOp::Mean => (0..n).map(|_| rng.normal() + 1.0).collect(),
        _ => rng.normals(n),
    }
}

fn reduce_graph(dt: DType, dims: &[usize], op: ReduceOp, axes: &[i64], keep: bool) -> Graph {
    let mut g = Graph::new("reduce");
    let x = g.input("x", Shape::new(dims, dt)).unwrap();
    let y = g.reduce(x, op, axes, keep).unwrap();
    g.set_outputs(vec![y]);
    g
}

fn reduce_case(rng: &mut Rng, dims: &[usize], axes: &[i64], keep: bool, ops: &[ReduceOp]) {
    let n = dims.iter().product();
    for &op in ops {
        // bf16 products drift by ~1e-3 per factor: keep them to short reductions.
        if op == ReduceOp::Prod && count(dims, axes) > 40 {
            continue;
        }
        let feeds = vec![feed("x", dims, data(rng, op, n))];
        for dt in FLOATS {
            parity(
                &format!("reduce {op:?} {dims:?} axes {axes:?} keep {keep}"),
                &|dt| reduce_graph(dt, dims, op, axes, keep),
                &feeds,
                dt,
            );
        }
    }
}

#[test]
fn reduce_rows() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("reduce_rows");
    let cases: &[(&[usize], &[i64])] = &[
        (&[7, 33], &[-1]),
        (&[129, 7], &[1]),
        (&[3, 5, 7], &[1, 2]),
        (&[33, 1000], &[-1]),
        (&[5, 5000], &[1]),
        (&[1, 20000], &[-1]),
        (&[300, 2000], &[-1]),
        (&[2, 3, 4, 5], &[]),
        (&[1, 7, 1, 33], &[0, 1, 2, 3]),
    ];
    for (i, &(dims, axes)) in cases.iter().enumerate() {
        reduce_case(&mut rng, dims, axes, i % 2 == 0, &OPS);
    }
}

#[test]
fn reduce_columns_and_strided() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("reduce_columns_and_strided");
    let cases: &[(&[usize], &[i64])] = &[
        (&[1000, 33], &[0]),
        (&[7, 129, 33], &[1]),
        (&[7, 129, 33], &[-2]),
        (&[5, 3, 7, 9], &[1, 2]),
        (&[5, 7, 9, 11], &[0, 2]),
        (&[5, 7, 9, 11], &[-3, -1]),
        (&[1, 7, 1, 33], &[0, 1, 2]),
        (&[4, 1, 6], &[1]),
        (&[3, 1, 5, 1, 2, 1, 3, 2], &[0, 2, 6]),
    ];
    for (i, &(dims, axes)) in cases.iter().enumerate() {
        reduce_case(&mut rng, dims, axes, i % 2 == 1, &OPS);
    }
}

#[test]
fn reduce_big() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("reduce_big");
    // Bias-gradient shape: few columns, many rows (split across blocks, then combined). Sums
    // of values around 1 stay below f16's 65504.
    reduce_case(
        &mut rng,
        &[40000, 10],
        &[0],
        false,
        &[ReduceOp::Sum, ReduceOp::Max],
    );
    reduce_case(
        &mut rng,
        &[4096, 4096],
        &[0],
        false,
        &[ReduceOp::Sum, ReduceOp::Min],
    );
    reduce_case(&mut rng, &[4096, 4096], &[1], true, &[ReduceOp::Mean]);
    // One output from 16M values: a sum would overflow f16, so mean and max.
    reduce_case(
        &mut rng,
        &[4096, 4096],
        &[],
        false,
        &[ReduceOp::Mean, ReduceOp::Max],
    );
    reduce_case(&mut rng, &[64, 3, 100000], &[-1], false, &[ReduceOp::Mean]);
}

#[test]
fn reduce_int() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("reduce_int");
    let cases: &[(&[usize], &[i64])] = &[
        (&[7, 33], &[-1]),
        (&[33, 5000], &[1]),
        (&[1000, 7], &[0]),
        (&[5, 7, 9], &[0, 2]),
        (&[2, 3, 4], &[]),
    ];
    for dt in [DType::I32, DType::I64] {
        for (i, &(dims, axes)) in cases.iter().enumerate() {
            let n = dims.iter().product();
            for op in OPS {
                let vals: Vec<f64> = if op == ReduceOp::Prod {
                    (0..n).map(|_| rng.below(7) as f64 - 3.0).collect()
                } else {
                    (0..n).map(|_| rng.below(2001) as f64 - 1000.0).collect()
                };
                parity(
                    &format!("reduce {op:?} {dims:?} axes {axes:?}"),
                    &|dt| reduce_graph(dt, dims, op, axes, i % 2 == 0),
                    &[feed("x", dims, vals)],
                    dt,
                );
            }
        }
    }
}

#[test]
fn softmax() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("softmax");
    let cases: &[(&[usize], i64)] = &[
        (&[7, 33], -1),
        (&[13, 1], 1),
        (&[4096, 384], -1),
        (&[9, 513], -1),
        (&[33, 1000], 1),
        (&[129, 2000], -1),
        (&[5, 5000], -1),
        (&[7, 9000], -1),
        (&[2, 12000], -1),
        (&[3, 30522], -1),
        (&[33, 129, 7], 1),
        (&[1000, 5], 0),
        (&[5, 7, 9, 11], -3),
        (&[3, 4000, 2], -2),
        (&[1, 1], 0),
    ];
    for &(dims, axis) in cases {
        let feeds = vec![normal(&mut rng, "x", dims)];
        let build = |dt: DType| {
            let mut g = Graph::new("softmax");
            let x = g.input("x", Shape::new(dims, dt)).unwrap();
            let y = g.softmax(x, axis).unwrap();
            g.set_outputs(vec![y]);
            g
        };
        for dt in FLOATS {
            parity(&format!("softmax {dims:?} axis {axis}"), &build, &feeds, dt);
        }
    }
}

#[test]
fn argmax() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("argmax");
    let cases: &[(&[usize], i64)] = &[
        (&[7, 33], -1),
        (&[129, 1], 1),
        (&[4096, 10], 1),
        (&[33, 1000], -1),
        (&[5, 5000], 1),
        (&[3, 30522], -1),
        (&[33, 129, 7], 1),
        (&[1000, 5], 0),
        (&[5, 7, 9, 11], -3),
        (&[7], 0),
    ];
    for (i, &(dims, axis)) in cases.iter().enumerate() {
        let n = dims.iter().product();
        let keep = i % 2 == 0;
        let build = |dt: DType| {
            let mut g = Graph::new("argmax");
            let x = g.input("x", Shape::new(dims, dt)).unwrap();
            let y = g.argmax(x, axis, keep).unwrap();
            g.set_outputs(vec![y]);
            g
        };
        // Distinct values, then few levels (many ties: the first index must win).
        let spread = feed("x", dims, rng.normals(n));
        let ties = feed("x", dims, (0..n).map(|_| rng.below(4) as f64).collect());
        for dt in FLOATS.into_iter().chain([DType::I32, DType::I64]) {
            if dt.is_float() {
                parity(
                    &format!("argmax {dims:?} axis {axis}"),
                    &build,
                    std::slice::from_ref(&spread),
                    dt,
                );
            }
            parity(
                &format!("argmax ties {dims:?} axis {axis}"),
                &build,
                std::slice::from_ref(&ties),
                dt,
            );
        }
    }
}

/// Random probability rows (softmax of normals) for dense targets.
fn prob_rows(rng: &mut Rng, n: usize, c: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(n * c);
    for _ in 0..n {
        let e: Vec<f64> = (0..c).map(|_| (2.0 * rng.normal()).exp()).collect();
        let s: f64 = e.iter().sum();
        out.extend(e.iter().map(|v| v / s));
    }
    out
}

const CE_SHAPES: &[(usize, usize)] = &[
    (7, 10),
    (1, 1),
    (4096, 10),
    (33, 1000),
    (129, 2000),
    (5, 30522),
    (3, 7),
];

fn logits(rng: &mut Rng, n: usize, c: usize) -> Feed {
    normal(rng, "x", &[n, c])
}

#[test]
fn softmax_cross_entropy_dense() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("softmax_cross_entropy_dense");
    for &(n, c) in CE_SHAPES {
        let feeds = vec![
            logits(&mut rng, n, c),
            feed("t", &[n, c], prob_rows(&mut rng, n, c)),
        ];
        let build = |dt: DType| {
            let mut g = Graph::new("sce");
            let x = g.input("x", Shape::new(&[n, c], dt)).unwrap();
            let t = g.input("t", Shape::new(&[n, c], dt)).unwrap();
            let y = g.softmax_cross_entropy(x, t).unwrap();
            g.set_outputs(vec![y]);
            g
        };
        for dt in FLOATS {
            parity(
                &format!("softmax_cross_entropy [{n}, {c}]"),
                &build,
                &feeds,
                dt,
            );
        }
    }
}

#[test]
fn softmax_cross_entropy_with_logits() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("softmax_cross_entropy_with_logits");
    let label_types = [DType::I64, DType::I32, DType::F32];
    for (i, &(n, c)) in CE_SHAPES.iter().enumerate() {
        let lt = label_types[i % label_types.len()];
        let labels: Vec<f64> = (0..n).map(|_| rng.below(c) as f64).collect();
        let feeds = vec![logits(&mut rng, n, c), feed("y", &[n], labels)];
        let build = |dt: DType| {
            let mut g = Graph::new("sce_logits");
            let x = g.input("x", Shape::new(&[n, c], dt)).unwrap();
            let y = g.input("y", Shape::new(&[n], lt)).unwrap();
            let l = g.softmax_cross_entropy_with_logits(x, y).unwrap();
            g.set_outputs(vec![l]);
            g
        };
        for dt in FLOATS {
            parity(
                &format!("sce_with_logits [{n}, {c}] labels {lt}"),
                &build,
                &feeds,
                dt,
            );
        }
    }
}

#[test]
fn softmax_cross_entropy_backward() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("softmax_cross_entropy_backward");
    let label_types = [DType::I64, DType::F32, DType::I32];
    for (i, &(n, c)) in CE_SHAPES.iter().enumerate() {
        for dense in [false, true] {
            let lt = label_types[i % label_types.len()];
            let (ldims, lvals) = if dense {
                (vec![n, c], prob_rows(&mut rng, n, c))
            } else {
                (vec![n], (0..n).map(|_| rng.below(c) as f64).collect())
            };
            let feeds = vec![
                logits(&mut rng, n, c),
                feed("y", &ldims, lvals),
                normal(&mut rng, "d", &[n]),
            ];
            let build = |dt: DType| {
                let mut g = Graph::new("sce_back");
                let x = g.input("x", Shape::new(&[n, c], dt)).unwrap();
                let y = g
                    .input("y", Shape::new(&ldims, if dense { dt } else { lt }))
                    .unwrap();
                let d = g.input("d", Shape::new(&[n], dt)).unwrap();
                let dx = g.softmax_cross_entropy_backward(x, y, d).unwrap();
                g.set_outputs(vec![dx]);
                g
            };
            for dt in FLOATS {
                parity(
                    &format!("sce_backward [{n}, {c}] dense {dense} labels {lt}"),
                    &build,
                    &feeds,
                    dt,
                );
            }
        }
    }
}
