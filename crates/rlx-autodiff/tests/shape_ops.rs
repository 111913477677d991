//! Finite-difference checks: Reshape (incl. the broadcasting reshape of one element),
//! Transpose, Expand, Narrow, Concat, Gather (int / float / negative indices), Pad.
mod common;
use common::*;
use rlx_ir::{Activation, DType, Dim, Graph, HostTensor, NodeId, Op, Shape};

/// Output = sin(op(x)) so the cotangent reaching the op is not just the seed.
fn one_input(what: &str, dims: &[usize], op: Op, rng: &mut Rng) {
    let mut g = Graph::new("shape");
    let x = f64_input(&mut g, "x", dims);
    let y = g.add_node(op, &[x]).unwrap();
    let s = g.activation(Activation::Sin, y).unwrap();
    g.set_outputs(vec![s]);
    gradcheck(what, &g, &[("x", rng.tensor(dims))], &[x], rng);
}

#[test]
fn reshape_transpose_expand_vjp() {
    let mut rng = Rng::new("reshape_transpose_expand_vjp");
    one_input(
        "reshape",
        &[2, 6],
        Op::Reshape { shape: vec![3, -1] },
        &mut rng,
    );
    one_input(
        "reshape 0",
        &[2, 3, 4],
        Op::Reshape { shape: vec![0, 12] },
        &mut rng,
    );
    one_input(
        "reshape 1-elem broadcast",
        &[1],
        Op::Reshape { shape: vec![2, 3] },
        &mut rng,
    );
    one_input(
        "transpose",
        &[2, 3, 4],
        Op::Transpose {
            perm: vec![2, 0, 1],
        },
        &mut rng,
    );
    one_input(
        "transpose 2d",
        &[3, 5],
        Op::Transpose { perm: vec![1, 0] },
        &mut rng,
    );
    let to = |d: &[usize]| d.iter().map(|&v| Dim::Static(v)).collect::<Vec<_>>();
    one_input(
        "expand",
        &[3, 1],
        Op::Expand {
            shape: to(&[2, 3, 4]),
        },
        &mut rng,
    );
    one_input(
        "expand rank",
        &[4],
        Op::Expand { shape: to(&[3, 4]) },
        &mut rng,
    );
}

#[test]
fn narrow_concat_pad_vjp() {
    let mut rng = Rng::new("narrow_concat_pad_vjp");
    one_input(
        "narrow",
        &[5, 4],
        Op::Narrow {
            axis: 0,
            start: 1,
            len: 3,
        },
        &mut rng,
    );
    one_input(
        "narrow -1",
        &[2, 7],
        Op::Narrow {
            axis: -1,
            start: 4,
            len: 3,
        },
        &mut rng,
    );
    one_input(
        "pad",
        &[2, 3],
        Op::Pad {
            pads: vec![[1, 0], [2, 1]],
            value: 0.5,
        },
        &mut rng,
    );
    for axis in [0i64, 1, -1] {
        let mut g = Graph::new("cat");
        let (da, db) = if axis == 0 {
            ([1, 3], [2, 3])
        } else {
            ([2, 1], [2, 3])
        };
        let c = f64_input(&mut g, "c", &da);
        let d = f64_input(&mut g, "d", &db);
        let y = g.add_node(Op::Concat { axis }, &[c, d, c]).unwrap();
        let s = g.activation(Activation::Tanh, y).unwrap();
        g.set_outputs(vec![s]);
        gradcheck(
            &format!("concat axis {axis}"),
            &g,
            &[("c", rng.tensor(&da)), ("d", rng.tensor(&db))],
            &[c, d],
            &mut rng,
        );
    }
}

#[test]
fn gather_vjp() {
    let mut rng = Rng::new("gather_vjp");
    // (data dims, axis, index dims, index dtype)
    let cases: [(&[usize], i64, &[usize], DType); 5] = [
        (&[6, 3], 0, &[4], DType::I64),
        (&[2, 5, 3], 1, &[2, 3], DType::I32),
        (&[4, 5], -1, &[7], DType::F64),
        (&[5, 4], 0, &[3, 2], DType::I64),
        (&[3, 4], 1, &[], DType::I64),
    ];
    for (dd, axis, id, idt) in cases {
        let mut g = Graph::new("gather");
        let x = f64_input(&mut g, "x", dd);
        let i: NodeId = g.input("i", Shape::new(id, idt)).unwrap();
        let y = g.add_node(Op::Gather { axis }, &[x, i]).unwrap();
        let s = g.activation(Activation::Sin, y).unwrap();
        g.set_outputs(vec![s]);
        let n = dd[if axis < 0 {
            dd.len() - 1
        } else {
            axis as usize
        }];
        let ni: usize = id.iter().product();
        // Repeated and negative indices: the scatter must add, and wrap negatives.
        let idx: Vec<f64> = (0..ni)
            .map(|_| {
                let k = rng.below(n) as i64;
                (if rng.uniform() < 0.3 { k - n as i64 } else { k }) as f64
            })
            .collect();
        gradcheck(
            &format!("gather {dd:?} axis {axis} idx {id:?} {idt}"),
            &g,
            &[
                ("x", rng.tensor(dd)),
                ("i", HostTensor::from_f64_as(id, &idx, idt)),
            ],
            &[x],
            &mut rng,
        );
    }
}

#[test]
fn slice_vjp() {
    let mut rng = Rng::new("slice_vjp");
    // (dims, axes, starts, ends, steps)
    type SliceCase = (&'static [usize], Vec<i64>, Vec<i64>, Vec<i64>, Vec<i64>);
    let cases: [SliceCase; 4] = [
        (&[6, 4], vec![0], vec![1], vec![5], vec![]),
        (&[7, 5], vec![0, 1], vec![0, -1], vec![7, -6], vec![2, -2]),
        (&[3, 8], vec![-1], vec![-2], vec![i64::MAX], vec![3]),
        (
            &[2, 5, 4],
            vec![1, 2],
            vec![4, 1],
            vec![-100, 3],
            vec![-1, 1],
        ),
    ];
    for (dims, axes, starts, ends, steps) in cases {
        let what = format!("slice {dims:?} axes {axes:?} {starts:?}..{ends:?} step {steps:?}");
        one_input(
            &what,
            dims,
            Op::Slice {
                axes,
                starts,
                ends,
                steps,
            },
            &mut rng,
        );
    }
}
