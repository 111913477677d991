//! Case table of the shape group: Reshape, Expand, Transpose, Narrow, Concat, Gather, Pad,
//! Slice, with index-arithmetic oracles (`shape_oracle`). Data movement is exact in every
//! dtype, so every case compares exactly. Each op holds the union of what the three old
//! suites tested: the CPU suite's shapes in `DTYPES` (f64 included), the parity suite's in
//! `MOVERS` (u8 included; their parity check also compares bytes, see the CUDA test's
//! device), and the gradcheck suite's own graphs, which feed the op's result through a sine
//! (`only_grad`). Big-shape launch tests stay in the CUDA test file.
use super::elementwise::graph;
use super::numel;
pub use super::shape_oracle::*;
use crate::case::{Case, Draw, Input};
use crate::Rng;
use rlx_ir::{Activation, DType, Dim, Graph, NodeId, Op};

/// The dtypes of the CPU oracle suite.
pub const DTYPES: [DType; 6] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::F64,
    DType::I32,
    DType::I64,
];

/// Float dtypes plus the integer dtypes the pure data movers take (the parity suite's).
pub const MOVERS: [DType; 6] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::I64,
    DType::I32,
    DType::U8,
];

/// Random values every dtype holds: normals for floats, u8's range, and spread integers
/// (±1000 in the oracle suite's cases, ±100000 in the parity suite's).
pub fn values(rng: &mut Rng, n: usize, dt: DType, wide: bool) -> Vec<f64> {
    let ints = |rng: &mut Rng, lo: f64, hi: f64| -> Vec<f64> {
        rng.uniforms(n, lo, hi)
            .into_iter()
            .map(f64::round)
            .collect()
    };
    match dt {
        d if d.is_float() => rng.normals(n),
        DType::U8 => ints(rng, 0.0, 255.0),
        _ if wide => ints(rng, -100000.0, 100000.0),
        _ => (0..n).map(|_| rng.below(2001) as f64 - 1000.0).collect(),
    }
}

/// The data draw of a case from the oracle suite (`wide` false) or the parity suite.
fn data(wide: bool) -> Draw {
    Draw::custom(move |rng, n, dt| values(rng, n, dt, wide))
}

/// An input of the case dtype drawn like its suite drew it (normals in gradchecks).
fn x(name: &'static str, dims: &[usize], wide: bool) -> Input {
    Input::new(name, dims, data(wide)).grad(Draw::Normal(1.0))
}

/// Where a case came from: its dtypes and draws, and whether it gets a parity check.
#[derive(Clone, Copy, PartialEq)]
enum Suite {
    /// The CPU oracle suite: `DTYPES`. They never had parity, and f64 is a dtype the parity
    /// suite never ran a mover in: parity stays off.
    Oracle,
    /// The parity suite: `MOVERS`, wide integers.
    Parity,
}

/// A one-output exact case of a single data input `x`, gradchecked in f64.
fn mover(
    name: String,
    from: Suite,
    dims: &[usize],
    out: Vec<usize>,
    op: impl Fn(&mut Graph, NodeId) -> NodeId + Send + Sync + 'static,
    oracle: impl Fn(&[f64], DType) -> Vec<f64> + Send + Sync + 'static,
) -> Case {
    let d = dims.to_vec();
    let c = Case::new(name, vec![x("x", dims, from == Suite::Parity)], move |dt| {
        graph(&[("x", &d, dt)], |g, x| op(g, x[0]))
    });
    finish(c, from, out).oracle(move |v, dt| oracle(&v[0], dt))
}

/// Dtypes, exactness, output dims and checks by origin; gradchecks on small inputs only
/// (finite differences cost four runs per element).
fn finish(c: Case, from: Suite, out: Vec<usize>) -> Case {
    let small = c.inputs.iter().map(|i| numel(&i.dims)).sum::<usize>() <= 400;
    let c = c.exact().out(&out).wrt(&["x"]);
    let c = match from {
        Suite::Oracle => c.dtypes(&DTYPES).no_parity(),
        Suite::Parity => c.dtypes(&MOVERS),
    };
    if small {
        c
    } else {
        c.no_grad()
    }
}

/// The gradcheck suite's graph: `sin(op(x))`, so the cotangent reaching the op is not
/// just the seed.
fn through_sin(name: &str, dims: &[usize], op: Op) -> Case {
    let d = dims.to_vec();
    Case::new(
        format!("grad {name} {dims:?}"),
        vec![Input::new("x", dims, Draw::Normal(1.0))],
        move |dt| {
            graph(&[("x", &d, dt)], |g, x| {
                let y = g.add_node(op.clone(), &[x[0]]).unwrap();
                g.activation(Activation::Sin, y).unwrap()
            })
        },
    )
    .wrt(&["x"])
    .only_grad()
}

fn statics(d: &[usize]) -> Vec<Dim> {
    d.iter().map(|&v| Dim::Static(v)).collect()
}

// ---- reshape ----

/// Reshapes keep the row-major order; a 1-element tensor broadcasts into a bigger target.
pub fn reshape() -> Vec<Case> {
    let mut cases = vec![];
    let targets: [(&[i64], &[usize]); 4] = [
        (&[-1, 4], &[15, 4]),
        (&[0, -1], &[3, 20]),
        (&[5, 0, -1], &[5, 4, 3]),
        (&[60], &[60]),
    ];
    for (t, out) in targets {
        cases.push(mover(
            format!("reshape [3, 4, 5] -> {t:?}"),
            Suite::Oracle,
            &[3, 4, 5],
            out.to_vec(),
            move |g, x| g.reshape(x, t).unwrap(),
            |x, _| x.to_vec(),
        ));
    }
    // The target given as usize dims (the builder takes either).
    cases.push(mover(
        "reshape [3, 4, 5] -> usize [2, 6, 5]".into(),
        Suite::Oracle,
        &[3, 4, 5],
        vec![2, 6, 5],
        |g, x| g.reshape(x, &[2usize, 6, 5]).unwrap(),
        |x, _| x.to_vec(),
    ));
    let ones: [(Suite, &[usize], &[i64]); 3] = [
        (Suite::Oracle, &[1], &[2, 3]),
        (Suite::Oracle, &[1, 1], &[3, 1, 2]),
        (Suite::Parity, &[1, 1], &[3, 4]),
    ];
    for (from, ins, t) in ones {
        let out: Vec<usize> = t.iter().map(|&d| d as usize).collect();
        let n = numel(&out);
        cases.push(mover(
            format!("reshape broadcast {ins:?} -> {t:?}"),
            from,
            ins,
            out,
            move |g, x| g.reshape(x, t).unwrap(),
            move |x, _| vec![x[0]; n],
        ));
    }
    cases.push(mover(
        "reshape [6, 35] -> [-1, 7, 5]".into(),
        Suite::Parity,
        &[6, 35],
        vec![6, 7, 5],
        |g, x| g.reshape(x, &[-1i64, 7, 5]).unwrap(),
        |x, _| x.to_vec(),
    ));
    cases.push(through_sin(
        "reshape",
        &[2, 6],
        Op::Reshape { shape: vec![3, -1] },
    ));
    cases.push(through_sin(
        "reshape 0",
        &[2, 3, 4],
        Op::Reshape { shape: vec![0, 12] },
    ));
    cases.push(through_sin(
        "reshape 1-elem broadcast",
        &[1],
        Op::Reshape { shape: vec![2, 3] },
    ));
    cases
}

// ---- expand ----

pub fn expand() -> Vec<Case> {
    let shapes: [(Suite, &[usize], &[usize]); 8] = [
        (Suite::Oracle, &[3, 1, 5], &[2, 3, 4, 5]),
        (Suite::Oracle, &[1], &[7]),
        (Suite::Oracle, &[4, 1], &[4, 9]),
        (Suite::Parity, &[5, 1, 7], &[3, 5, 4, 7]),
        (Suite::Parity, &[33, 1], &[33, 65]),
        (Suite::Parity, &[1], &[1000]),
        (Suite::Parity, &[7], &[2, 3, 7]),
        (Suite::Parity, &[1, 129, 1], &[2, 129, 9]),
    ];
    let mut cases: Vec<Case> = shapes
        .into_iter()
        .map(|(from, ins, outs)| {
            mover(
                format!("expand {ins:?} -> {outs:?}"),
                from,
                ins,
                outs.to_vec(),
                move |g, x| g.expand_to(x, outs).unwrap(),
                move |x, _| expand_ref(x, ins, outs),
            )
        })
        .collect();
    let grad = [(&[3usize, 1][..], &[2usize, 3, 4][..]), (&[4], &[3, 4])];
    for (ins, outs) in grad {
        let op = Op::Expand {
            shape: statics(outs),
        };
        cases.push(through_sin(&format!("expand -> {outs:?}"), ins, op));
    }
    cases
}

// ---- transpose ----

pub fn transpose() -> Vec<Case> {
    let perms: [(Suite, &[usize], &[usize]); 13] = [
        (Suite::Oracle, &[3, 5], &[1, 0]),
        (Suite::Oracle, &[2, 3, 5, 7], &[2, 0, 3, 1]),
        (Suite::Oracle, &[4, 1, 3], &[2, 1, 0]),
        (Suite::Oracle, &[9], &[0]),
        (Suite::Parity, &[33, 65], &[1, 0]),
        (Suite::Parity, &[1, 7], &[1, 0]),
        (Suite::Parity, &[7, 33, 129], &[0, 2, 1]),
        (Suite::Parity, &[5, 9, 1000], &[2, 0, 1]),
        (Suite::Parity, &[2, 9, 5, 16], &[0, 2, 1, 3]),
        (Suite::Parity, &[3, 5, 7, 11], &[3, 1, 0, 2]),
        (Suite::Parity, &[4, 1, 6, 33], &[0, 3, 2, 1]),
        (Suite::Parity, &[2, 3, 4, 5, 6], &[4, 2, 0, 3, 1]),
        (Suite::Parity, &[3, 2, 129, 7, 2], &[0, 1, 3, 2, 4]),
    ];
    let mut cases: Vec<Case> = perms
        .into_iter()
        .map(|(from, dims, perm)| {
            mover(
                format!("transpose {dims:?} {perm:?}"),
                from,
                dims,
                permuted(dims, perm),
                move |g, x| g.transpose(x, perm).unwrap(),
                move |x, _| transpose_ref(x, dims, perm),
            )
        })
        .collect();
    let grad = [
        (&[2usize, 3, 4][..], vec![2usize, 0, 1]),
        (&[3, 5], vec![1, 0]),
    ];
    for (dims, perm) in grad {
        let name = format!("transpose {perm:?}");
        cases.push(through_sin(&name, dims, Op::Transpose { perm }));
    }
    cases
}

// ---- narrow ----

pub fn narrow() -> Vec<Case> {
    let takes: [(Suite, &[usize], i64, usize, usize); 8] = [
        (Suite::Oracle, &[3, 7, 5], 1, 2, 4),
        (Suite::Oracle, &[3, 7, 5], -1, 1, 3),
        (Suite::Oracle, &[3, 7, 5], 0, 2, 1),
        (Suite::Oracle, &[3, 7, 5], -2, 0, 7),
        (Suite::Parity, &[6, 40, 9], -2, 3, 30),
        (Suite::Parity, &[6, 40, 9], 0, 5, 1),
        (Suite::Parity, &[6, 40, 9], -1, 1, 7),
        (Suite::Parity, &[1001], 0, 17, 900),
    ];
    let mut cases: Vec<Case> = takes
        .into_iter()
        .map(|(from, dims, axis, start, len)| {
            let a = axis_of(axis, dims.len());
            mover(
                format!("narrow {dims:?} axis {axis} [{start}, +{len})"),
                from,
                dims,
                narrowed(dims, a, len),
                move |g, x| g.narrow(x, axis, start, len).unwrap(),
                move |x, _| narrow_ref(x, dims, a, start, len),
            )
        })
        .collect();
    for (dims, axis, start, len) in [(&[5usize, 4][..], 0i64, 1, 3), (&[2, 7], -1, 4, 3)] {
        let op = Op::Narrow { axis, start, len };
        cases.push(through_sin(&format!("narrow {axis}"), dims, op));
    }
    cases
}

// ---- concat ----

/// Concat of inputs `x0, x1, ..` of `shapes` on `axis` (`dims` the oracle's axis).
fn concat_case(from: Suite, shapes: Vec<Vec<usize>>, axis: i64) -> Case {
    const NAMES: [&str; 3] = ["x0", "x1", "x2"];
    let a = axis_of(axis, shapes[0].len());
    let inputs = shapes
        .iter()
        .zip(NAMES)
        .map(|(s, n)| x(n, s, from == Suite::Parity))
        .collect();
    let ins = shapes.clone();
    let c = Case::new(
        format!("concat {shapes:?} axis {axis}"),
        inputs,
        move |dt| {
            let leaves: Vec<(&str, &[usize], DType)> = ins
                .iter()
                .zip(NAMES)
                .map(|(s, n)| (n, s.as_slice(), dt))
                .collect();
            graph(&leaves, |g, xs| g.concat(xs, axis).unwrap())
        },
    );
    let wrt = &NAMES[..shapes.len()];
    let out = concatenated(&shapes, a);
    finish(c, from, out)
        .wrt(wrt)
        .oracle(move |v, _| concat_ref(v, &shapes, a))
}

pub fn concat() -> Vec<Case> {
    let mut cases = vec![];
    // Three inputs of different widths, on a middle, the last and the first axis.
    for axis in [1i64, -1, -3] {
        let a = axis_of(axis, 3);
        let shapes = [2usize, 5, 1]
            .iter()
            .map(|&w| {
                let mut s = vec![3, 4, 6];
                s[a] = w;
                s
            })
            .collect();
        cases.push(concat_case(Suite::Oracle, shapes, axis));
    }
    cases.push(concat_case(Suite::Oracle, vec![vec![3, 7, 5]], 0));
    let parity: [(&[&[usize]], i64); 4] = [
        (&[&[4, 3, 7], &[4, 1, 7], &[4, 17, 7]], 1),
        (&[&[2, 5, 3], &[2, 5, 1]], -1),
        (&[&[1, 9], &[6, 9], &[2, 9]], 0),
        (&[&[3, 2, 4, 5], &[3, 2, 1, 5], &[3, 2, 2, 5]], -2),
    ];
    for (shapes, axis) in parity {
        let shapes = shapes.iter().map(|s| s.to_vec()).collect();
        cases.push(concat_case(Suite::Parity, shapes, axis));
    }
    // The gradcheck suite's: one input used twice, `tanh(concat(c, d, c))`.
    for axis in [0i64, 1, -1] {
        let (da, db): (&[usize], &[usize]) = if axis == 0 {
            (&[1, 3], &[2, 3])
        } else {
            (&[2, 1], &[2, 3])
        };
        let (da, db) = (da.to_vec(), db.to_vec());
        let inputs = vec![
            Input::new("c", &da, Draw::Normal(1.0)),
            Input::new("d", &db, Draw::Normal(1.0)),
        ];
        let c = Case::new(format!("grad concat axis {axis}"), inputs, move |dt| {
            graph(&[("c", &da, dt), ("d", &db, dt)], |g, x| {
                let y = g
                    .add_node(Op::Concat { axis }, &[x[0], x[1], x[0]])
                    .unwrap();
                g.activation(Activation::Tanh, y).unwrap()
            })
        });
        cases.push(c.wrt(&["c", "d"]).only_grad());
    }
    cases
}

// ---- gather ----

/// Indices into an axis of `n`: `neg` is the chance of a negative one; the oracle suite's
/// draw is uniform over [-n, n).
fn index_draw(n: usize, neg: f64, oracle_suite: bool) -> Draw {
    Draw::custom(move |rng, count, _| {
        (0..count)
            .map(|_| {
                if oracle_suite {
                    return rng.below(2 * n) as f64 - n as f64;
                }
                let i = rng.below(n) as f64;
                if rng.chance(neg) {
                    i - n as f64
                } else {
                    i
                }
            })
            .collect()
    })
}

/// Gather `x` by `i` (`idt`, drawn by `idx`) on `axis`.
fn gather_case(
    name: String,
    data: &'static [usize],
    idx_shape: &'static [usize],
    idt: DType,
    axis: i64,
    idx: Input,
) -> Case {
    let inputs = vec![x("x", data, false), idx];
    Case::new(name, inputs, move |dt| {
        graph(&[("x", data, dt), ("i", idx_shape, idt)], |g, x| {
            g.gather(x[0], x[1], axis).unwrap()
        })
    })
}

pub fn gather() -> Vec<Case> {
    let mut cases = vec![];
    let data: &[usize] = &[4, 7, 3];
    let oracle_cases: [(i64, &[usize]); 3] = [(1, &[2, 3]), (-1, &[5]), (0, &[])];
    for (axis, ish) in oracle_cases {
        let a = axis_of(axis, 3);
        for idt in [DType::I64, DType::I32, DType::F32] {
            let idx = Input::new("i", ish, index_draw(data[a], 0.0, true)).of(idt);
            let c = gather_case(
                format!("gather {data:?} by {ish:?} {idt} axis {axis}"),
                data,
                ish,
                idt,
                axis,
                idx,
            );
            let c = finish(c, Suite::Oracle, gathered(data, ish, a));
            cases.push(c.oracle(move |v, _| gather_ref(&v[0], data, &v[1], ish, a)));
        }
    }
    type P = (&'static [usize], &'static [usize], i64, DType, bool);
    let parity: [P; 7] = [
        (&[9, 6, 5], &[2, 7], -2, DType::I64, true),
        (&[9, 6, 5], &[13], 0, DType::I32, true),
        (&[9, 6, 5], &[3, 1, 2], 2, DType::I64, false),
        (&[9, 6, 5], &[4], -1, DType::F32, true),
        (&[1000, 33], &[3, 17], 0, DType::I64, false),
        (&[7, 129], &[], 1, DType::I32, false),
        (&[8, 3], &[11], 0, DType::U8, false),
    ];
    for (data, ish, axis, idt, neg) in parity {
        let a = axis_of(axis, data.len());
        let p = if neg { 0.4 } else { 0.0 };
        let idx = Input::new("i", ish, index_draw(data[a], p, false)).of(idt);
        let mut c = gather_case(
            format!("gather {data:?} by {ish:?} {idt} axis {axis}"),
            data,
            ish,
            idt,
            axis,
            idx,
        );
        c.inputs[0] = x("x", data, true);
        let c = finish(c, Suite::Parity, gathered(data, ish, a));
        cases.push(c.oracle(move |v, _| gather_ref(&v[0], data, &v[1], ish, a)));
    }
    // The gradcheck suite's: repeated and negative indices (the scatter must add and
    // wrap), the result through a sine.
    type G = (&'static [usize], i64, &'static [usize], DType);
    let grad: [G; 5] = [
        (&[6, 3], 0, &[4], DType::I64),
        (&[2, 5, 3], 1, &[2, 3], DType::I32),
        (&[4, 5], -1, &[7], DType::F64),
        (&[5, 4], 0, &[3, 2], DType::I64),
        (&[3, 4], 1, &[], DType::I64),
    ];
    for (dd, axis, ish, idt) in grad {
        let n = dd[axis_of(axis, dd.len())];
        let idx = Input::new("i", ish, index_draw(n, 0.3, false)).of(idt);
        let inputs = vec![Input::new("x", dd, Draw::Normal(1.0)), idx];
        let c = Case::new(
            format!("grad gather {dd:?} axis {axis} idx {ish:?} {idt}"),
            inputs,
            move |dt| {
                graph(&[("x", dd, dt), ("i", ish, idt)], |g, x| {
                    let y = g.add_node(Op::Gather { axis }, &[x[0], x[1]]).unwrap();
                    g.activation(Activation::Sin, y).unwrap()
                })
            },
        );
        cases.push(c.wrt(&["x"]).only_grad());
    }
    cases
}

// ---- pad ----

/// Pad fill values: the oracle suite drew one of these per run (exact in every float
/// dtype; integer dtypes truncate and saturate them, as a Cast does), the table runs each.
const FILLS: [f64; 11] = [-4.5, -3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 4.5, 5.5];

pub fn pad() -> Vec<Case> {
    let mut cases = vec![];
    let mut one = |from: Suite, dims: &'static [usize], pads: &'static [[usize; 2]], value: f64| {
        let c = mover(
            format!("pad {dims:?} {pads:?} with {value}"),
            from,
            dims,
            padded(dims, pads),
            move |g, x| g.pad(x, pads.to_vec(), value).unwrap(),
            move |x, dt| pad_ref(x, dims, pads, fill_in(value, dt)),
        );
        cases.push(c);
    };
    for value in FILLS {
        one(Suite::Oracle, &[3, 4, 2], &[[1, 2], [0, 3], [2, 0]], value);
    }
    one(Suite::Parity, &[3, 5, 7], &[[1, 0], [0, 2], [3, 4]], 0.0);
    one(Suite::Parity, &[3, 5, 7], &[[0, 0], [2, 2], [0, 0]], -1.5);
    one(Suite::Parity, &[1000], &[[17, 3]], 2.25);
    one(
        Suite::Parity,
        &[2, 3, 9, 9],
        &[[0, 0], [0, 0], [1, 1], [1, 1]],
        7.0,
    );
    one(Suite::Parity, &[4, 1, 3], &[[1, 0], [1, 1], [0, 2]], 3.0);
    let op = Op::Pad {
        pads: vec![[1, 0], [2, 1]],
        value: 0.5,
    };
    cases.push(through_sin("pad", &[2, 3], op));
    cases
}

// ---- slice ----

type SliceArgs = (
    &'static [usize],
    &'static [i64],
    &'static [i64],
    &'static [i64],
    &'static [i64],
);

pub fn slice() -> Vec<Case> {
    let oracle: [SliceArgs; 7] = [
        (&[7, 9, 4], &[1], &[-1], &[i64::MIN], &[i64::MIN]),
        (&[7, 9, 4], &[0], &[0], &[7], &[i64::MAX]),
        (&[7, 9, 4], &[0, 1], &[-1, 1], &[-8, 100], &[-2, 3]),
        (&[7, 9, 4], &[-1], &[10], &[-100], &[-1]),
        (&[7, 9, 4], &[1], &[2], &[-2], &[]),
        (&[7, 9, 4], &[2, 0], &[0, 5], &[i64::MAX, 2], &[1, 1]),
        (&[7, 9, 4], &[], &[1, -3], &[6, 0], &[2, -2]),
    ];
    let parity: [SliceArgs; 5] = [
        (
            &[6, 40, 9],
            &[-1, 0, 1],
            &[100, 1, -3],
            &[-100, 6, 2],
            &[-2, 2, -5],
        ),
        (&[6, 40, 9], &[], &[-1, 3], &[-7, 1000], &[-1, 7]),
        (&[33, 65], &[1], &[-1], &[i64::MIN], &[-1]),
        (&[33, 65], &[0, 1], &[2, 5], &[3, 6], &[]),
        (&[4, 5, 6, 7], &[-1, -3], &[0, 4], &[7, 0], &[3, -2]),
    ];
    let origin = oracle
        .into_iter()
        .map(|s| (Suite::Oracle, s))
        .chain(parity.into_iter().map(|s| (Suite::Parity, s)));
    let mut cases: Vec<Case> = origin
        .map(|(from, (dims, axes, starts, ends, steps))| {
            let picks = slice_picks(dims, axes, starts, ends, steps);
            let out = picks.iter().map(|p| p.len()).collect();
            mover(
                format!("slice {dims:?} axes {axes:?} {starts:?}..{ends:?} by {steps:?}"),
                from,
                dims,
                out,
                move |g, x| g.slice(x, axes, starts, ends, steps).unwrap(),
                move |x, _| slice_ref(x, dims, &picks),
            )
        })
        .collect();
    let grad: [SliceArgs; 4] = [
        (&[6, 4], &[0], &[1], &[5], &[]),
        (&[7, 5], &[0, 1], &[0, -1], &[7, -6], &[2, -2]),
        (&[3, 8], &[-1], &[-2], &[i64::MAX], &[3]),
        (&[2, 5, 4], &[1, 2], &[4, 1], &[-100, 3], &[-1, 1]),
    ];
    for (dims, axes, starts, ends, steps) in grad {
        let op = Op::Slice {
            axes: axes.to_vec(),
            starts: starts.to_vec(),
            ends: ends.to_vec(),
            steps: steps.to_vec(),
        };
        let name = format!("slice axes {axes:?} {starts:?}..{ends:?} step {steps:?}");
        cases.push(through_sin(&name, dims, op));
    }
    cases
}
