//! Case table of the ops added for ONNX import: Tile, GatherElements, GatherND,
//! ScatterElements, ScatterND (every reduction, duplicate indices), TopK (ties), CumSum
//! (every flag), Range and OneHot, against the oracles of `index_oracle`. Movement and
//! integer results compare exactly; sums and products within the dtype's tolerance.
//! Gradchecks feed the op's result through a sine. The integer / bitwise ops have their set
//! in `index_int`, the builders that expand ONNX ops into core ops (DepthToSpace, the norms,
//! Einsum) theirs in `index_composite`. On a GPU the new ops run on the CPU for now: each
//! case lists their kinds as allowed fallbacks.
use super::elementwise::graph;
pub use super::index_composite::{depth_to_space, einsum, group_norms};
pub use super::index_int::int_binary;
pub use super::index_oracle::*;
use super::shape_oracle::axis_of;
use crate::case::{Case, Draw, Input};
use crate::Rng;
use rlx_ir::{Activation, DType, Graph, NodeId, OpKind, OpKindSet, ScatterReduction};

/// Data dtypes of the movers (every compute class and the half widths).
const DATA: [DType; 6] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::F64,
    DType::I32,
    DType::I64,
];

const REDUCTIONS: [ScatterReduction; 5] = [
    ScatterReduction::None,
    ScatterReduction::Add,
    ScatterReduction::Mul,
    ScatterReduction::Max,
    ScatterReduction::Min,
];

/// The kinds a GPU leaves to the CPU in these cases (no kernels yet), plus what the
/// integer Binary ops fuse into.
pub(crate) fn fallbacks() -> OpKindSet {
    OpKindSet::of(&[
        OpKind::Tile,
        OpKind::CumSum,
        OpKind::TopK,
        OpKind::GatherElements,
        OpKind::GatherND,
        OpKind::ScatterElements,
        OpKind::ScatterND,
        OpKind::OneHot,
        OpKind::Range,
        OpKind::Binary,
        OpKind::Activation,
        OpKind::ElementwiseRegion,
    ])
}

/// Normals for floats, spread integers otherwise (small enough that products of a few
/// stay exact in every integer width).
fn values(rng: &mut Rng, n: usize, dt: DType) -> Vec<f64> {
    if dt.is_float() {
        rng.normals(n)
    } else {
        (0..n).map(|_| rng.below(61) as f64 - 30.0).collect()
    }
}

fn data(name: &'static str, dims: &[usize]) -> Input {
    Input::new(name, dims, Draw::custom(values)).grad(Draw::Normal(1.0))
}

/// Indices into an axis of `n`, a third of them negative (counted from the end).
fn indices(n: usize) -> Draw {
    Draw::custom(move |rng, count, _| {
        (0..count)
            .map(|_| {
                let i = rng.below(n) as f64;
                if rng.chance(0.33) {
                    i - n as f64
                } else {
                    i
                }
            })
            .collect()
    })
}

/// Indices of dims `ishape` along `axis` of size `n`, distinct within every line along the
/// axis (so a scatter without reduction has one writer per position).
fn distinct_on_axis(ishape: &'static [usize], axis: usize, n: usize) -> Draw {
    Draw::custom(move |rng, count, _| {
        let mut out = vec![0.0; count];
        let m = ishape[axis];
        let lines = count / m.max(1);
        let inner: usize = ishape[axis + 1..].iter().product();
        for l in 0..lines {
            let (o, i) = (l / inner, l % inner);
            let mut pool: Vec<usize> = (0..n).collect();
            for j in 0..m {
                let pick = pool.swap_remove(rng.below(pool.len()));
                out[(o * m + j) * inner + i] = pick as f64;
            }
        }
        out
    })
}

/// `rows` index rows of depth `k` into `dims`, distinct when `distinct`.
fn nd_rows(dims: &'static [usize], k: usize, distinct: bool) -> Draw {
    Draw::custom(move |rng, count, _| {
        let space: usize = dims[..k].iter().product();
        let mut pool: Vec<usize> = (0..space).collect();
        let mut out = Vec::with_capacity(count);
        for _ in 0..count / k {
            let flat = if distinct {
                pool.swap_remove(rng.below(pool.len()))
            } else {
                rng.below(space)
            };
            let mut rem = flat;
            let mut row = vec![0.0; k];
            for t in (0..k).rev() {
                let i = rem % dims[t];
                rem /= dims[t];
                row[t] = if rng.chance(0.3) {
                    i as f64 - dims[t] as f64
                } else {
                    i as f64
                };
            }
            out.extend(row);
        }
        out
    })
}

/// `sin(y)`: the cotangent reaching the op is not just the seed.
pub(crate) fn sin(g: &mut Graph, y: NodeId) -> NodeId {
    g.activation(Activation::Sin, y).unwrap()
}

// ---- tile ----

pub fn tile() -> Vec<Case> {
    type T = (&'static [usize], &'static [usize]);
    let table: [T; 4] = [
        (&[2, 3], &[2, 1]),
        (&[3, 1, 2], &[1, 4, 3]),
        (&[5], &[3]),
        (&[2, 2], &[0, 2]),
    ];
    let mut cases = vec![];
    for (dims, reps) in table {
        let c = Case::new(
            format!("tile {dims:?} by {reps:?}"),
            vec![data("x", dims)],
            move |dt| graph(&[("x", dims, dt)], |g, x| g.tile(x[0], reps).unwrap()),
        );
        cases.push(
            c.dtypes(&DATA)
                .parity_dtypes(&[DType::F32, DType::I64])
                .exact()
                .out(&tiled(dims, reps))
                .fallback(fallbacks())
                .oracle(move |v, _| tile_ref(&v[0], dims, reps)),
        );
        let g = Case::new(
            format!("grad tile {dims:?} by {reps:?}"),
            vec![Input::new("x", dims, Draw::Normal(1.0))],
            move |dt| {
                graph(&[("x", dims, dt)], |g, x| {
                    let y = g.tile(x[0], reps).unwrap();
                    sin(g, y)
                })
            },
        );
        cases.push(g.wrt(&["x"]).only_grad());
    }
    cases
}

// ---- gather_elements ----

pub fn gather_elements() -> Vec<Case> {
    type G = (&'static [usize], &'static [usize], i64, DType);
    let table: [G; 4] = [
        (&[3, 4], &[5, 4], 0, DType::I64),
        (&[3, 4], &[2, 6], -1, DType::I32),
        (&[2, 3, 4], &[2, 2, 4], 1, DType::I64),
        (&[2, 5, 3], &[1, 5, 2], -1, DType::I64),
    ];
    let mut cases = vec![];
    for (dims, ish, axis, idt) in table {
        let a = axis_of(axis, dims.len());
        let build = move |dt| {
            graph(&[("x", dims, dt), ("i", ish, idt)], |g, x| {
                g.gather_elements(x[0], x[1], axis).unwrap()
            })
        };
        let ins = vec![
            data("x", dims),
            Input::new("i", ish, indices(dims[a])).of(idt),
        ];
        let c = Case::new(
            format!("gather_elements {dims:?} by {ish:?} {idt} axis {axis}"),
            ins,
            build,
        );
        cases.push(
            c.dtypes(&DATA)
                .parity_dtypes(&[DType::F32, DType::I64])
                .exact()
                .out(ish)
                .fallback(fallbacks())
                .oracle(move |v, _| gather_elements_ref(&v[0], dims, &v[1], ish, a)),
        );
        let gb = move |dt| {
            graph(&[("x", dims, dt), ("i", ish, idt)], |g, x| {
                let y = g.gather_elements(x[0], x[1], axis).unwrap();
                sin(g, y)
            })
        };
        let ins = vec![
            Input::new("x", dims, Draw::Normal(1.0)),
            Input::new("i", ish, indices(dims[a])).of(idt),
        ];
        let g = Case::new(
            format!("grad gather_elements {dims:?} axis {axis}"),
            ins,
            gb,
        );
        cases.push(g.wrt(&["x"]).only_grad());
    }
    cases
}

// ---- gather_nd ----

pub fn gather_nd() -> Vec<Case> {
    type G = (&'static [usize], &'static [usize], usize);
    let table: [G; 5] = [
        (&[4, 3], &[5, 2], 0),
        (&[4, 3, 2], &[2, 3, 1], 0),
        (&[3, 4, 2], &[6, 3], 0),
        (&[2, 4, 3], &[2, 3, 1], 1),
        (&[2, 3, 4, 2], &[2, 2, 2], 1),
    ];
    let mut cases = vec![];
    for (dims, ish, b) in table {
        let k = ish[ish.len() - 1];
        let room: &'static [usize] = &dims[b..];
        let idx = move |distinct| Input::new("i", ish, nd_rows(room, k, distinct)).of(DType::I64);
        let build = move |dt| {
            graph(&[("x", dims, dt), ("i", ish, DType::I64)], |g, x| {
                g.gather_nd(x[0], x[1], b).unwrap()
            })
        };
        let c = Case::new(
            format!("gather_nd {dims:?} by {ish:?} batch_dims {b}"),
            vec![data("x", dims), idx(false)],
            build,
        );
        cases.push(
            c.dtypes(&DATA)
                .parity_dtypes(&[DType::F32, DType::I64])
                .exact()
                .out(&gathered_nd(dims, ish, b))
                .fallback(fallbacks())
                .no_grad()
                .oracle(move |v, _| gather_nd_ref(&v[0], dims, &v[1], ish, b)),
        );
        let gb = move |dt| {
            graph(&[("x", dims, dt), ("i", ish, DType::I64)], |g, x| {
                let y = g.gather_nd(x[0], x[1], b).unwrap();
                sin(g, y)
            })
        };
        let ins = vec![Input::new("x", dims, Draw::Normal(1.0)), idx(false)];
        let g = Case::new(
            format!("grad gather_nd {dims:?} by {ish:?} batch_dims {b}"),
            ins,
            gb,
        );
        cases.push(g.wrt(&["x"]).only_grad());
    }
    cases
}

// ---- scatter_elements ----

pub fn scatter_elements() -> Vec<Case> {
    type S = (&'static [usize], &'static [usize], i64);
    let table: [S; 3] = [
        (&[4, 3], &[6, 3], 0),
        (&[3, 5], &[2, 4], -1),
        (&[2, 4, 3], &[2, 3, 3], 1),
    ];
    let mut cases = vec![];
    for (dims, ish, axis) in table {
        let a = axis_of(axis, dims.len());
        for red in REDUCTIONS {
            let build = move |dt| {
                graph(
                    &[("x", dims, dt), ("i", ish, DType::I64), ("u", ish, dt)],
                    |g, x| g.scatter_elements(x[0], x[1], x[2], axis, red).unwrap(),
                )
            };
            // Random indices: duplicates land on one position and combine in order.
            let ins = vec![
                data("x", dims),
                Input::new("i", ish, indices(dims[a])).of(DType::I64),
                data("u", ish),
            ];
            let c = Case::new(
                format!("scatter_elements {dims:?} by {ish:?} axis {axis} {red:?}"),
                ins,
                build,
            );
            let c = c
                .dtypes(&DATA)
                .parity_dtypes(&[DType::F32, DType::I64])
                .out(dims)
                .fallback(fallbacks())
                .no_grad()
                .oracle(move |v, _| scatter_elements_ref(&v[0], dims, &v[1], ish, &v[2], a, red));
            cases.push(
                if matches!(
                    red,
                    ScatterReduction::None | ScatterReduction::Max | ScatterReduction::Min
                ) {
                    c.exact()
                } else {
                    c
                },
            );
        }
        // Gradchecks: none with one writer per position, add with duplicates.
        for (red, distinct) in [
            (ScatterReduction::None, true),
            (ScatterReduction::Add, false),
        ] {
            if distinct && ish[a] > dims[a] {
                // More updates on a line than positions: some must share one.
                continue;
            }
            let gb = move |dt| {
                graph(
                    &[("x", dims, dt), ("i", ish, DType::I64), ("u", ish, dt)],
                    |g, x| {
                        let y = g.scatter_elements(x[0], x[1], x[2], axis, red).unwrap();
                        sin(g, y)
                    },
                )
            };
            let idx = if distinct {
                distinct_on_axis(ish, a, dims[a])
            } else {
                indices(dims[a])
            };
            let ins = vec![
                Input::new("x", dims, Draw::Normal(1.0)),
                Input::new("i", ish, idx).of(DType::I64),
                Input::new("u", ish, Draw::Normal(1.0)),
            ];
            let g = Case::new(
                format!("grad scatter_elements {dims:?} axis {axis} {red:?}"),
                ins,
                gb,
            );
            cases.push(g.wrt(&["x", "u"]).only_grad());
        }
    }
    cases
}

// ---- scatter_nd ----

pub fn scatter_nd() -> Vec<Case> {
    type S = (&'static [usize], &'static [usize]);
    let table: [S; 3] = [
        (&[5, 3], &[4, 1]),
        (&[3, 4, 2], &[2, 3, 2]),
        (&[4, 4], &[3, 2]),
    ];
    let mut cases = vec![];
    for (dims, ish) in table {
        let k = ish[ish.len() - 1];
        let us = scatter_nd_updates(dims, ish);
        for red in REDUCTIONS {
            let u = us.clone();
            let build = move |dt| {
                graph(
                    &[("x", dims, dt), ("i", ish, DType::I64), ("u", &u, dt)],
                    |g, x| g.scatter_nd(x[0], x[1], x[2], red).unwrap(),
                )
            };
            let ins = vec![
                data("x", dims),
                Input::new("i", ish, nd_rows(dims, k, false)).of(DType::I64),
                data("u", &us),
            ];
            let c = Case::new(
                format!("scatter_nd {dims:?} by {ish:?} {red:?}"),
                ins,
                build,
            );
            let c = c
                .dtypes(&DATA)
                .parity_dtypes(&[DType::F32, DType::I64])
                .out(dims)
                .fallback(fallbacks())
                .no_grad()
                .oracle(move |v, _| scatter_nd_ref(&v[0], dims, &v[1], ish, &v[2], red));
            cases.push(
                if matches!(
                    red,
                    ScatterReduction::None | ScatterReduction::Max | ScatterReduction::Min
                ) {
                    c.exact()
                } else {
                    c
                },
            );
        }
        for (red, distinct) in [
            (ScatterReduction::None, true),
            (ScatterReduction::Add, false),
        ] {
            let u = us.clone();
            let gb = move |dt| {
                graph(
                    &[("x", dims, dt), ("i", ish, DType::I64), ("u", &u, dt)],
                    |g, x| {
                        let y = g.scatter_nd(x[0], x[1], x[2], red).unwrap();
                        sin(g, y)
                    },
                )
            };
            let ins = vec![
                Input::new("x", dims, Draw::Normal(1.0)),
                Input::new("i", ish, nd_rows(dims, k, distinct)).of(DType::I64),
                Input::new("u", &us, Draw::Normal(1.0)),
            ];
            let g = Case::new(
                format!("grad scatter_nd {dims:?} by {ish:?} {red:?}"),
                ins,
                gb,
            );
            cases.push(g.wrt(&["x", "u"]).only_grad());
        }
    }
    cases
}

// ---- top_k ----

/// Values on a coarse grid, so ties are common (ONNX wants the lower index first).
fn tied(rng: &mut Rng, n: usize, dt: DType) -> Vec<f64> {
    let step = if dt.is_float() { 0.5 } else { 1.0 };
    (0..n).map(|_| (rng.below(7) as f64 - 3.0) * step).collect()
}

pub fn top_k() -> Vec<Case> {
    type K = (&'static [usize], usize, i64, bool);
    let table: [K; 5] = [
        (&[3, 8], 3, -1, true),
        (&[3, 8], 8, 1, false),
        (&[6, 2, 3], 4, 0, true),
        (&[2, 5, 4], 2, -2, false),
        (&[7], 1, 0, true),
    ];
    let mut cases = vec![];
    for (dims, k, axis, largest) in table {
        let a = axis_of(axis, dims.len());
        let mut od = dims.to_vec();
        od[a] = k;
        let what = format!("{dims:?} k {k} axis {axis} largest {largest}");
        let idx = Case::new(
            format!("top_k indices {what}"),
            vec![Input::new("x", dims, Draw::custom(tied))],
            move |dt| {
                graph(&[("x", dims, dt)], |g, x| {
                    g.top_k(x[0], k, axis, largest, true).unwrap().1
                })
            },
        );
        cases.push(
            idx.dtypes(&DATA)
                .parity_dtypes(&[DType::F32, DType::I64])
                .exact()
                .out(&od)
                .out_dtype(|_| DType::I64)
                .fallback(fallbacks())
                .oracle(move |v, _| top_k_ref(&v[0], dims, k, a, largest)),
        );
        let vals = Case::new(
            format!("top_k values {what}"),
            vec![Input::new("x", dims, Draw::custom(tied)).grad(Draw::Normal(1.0))],
            move |dt| {
                graph(&[("x", dims, dt)], |g, x| {
                    g.top_k(x[0], k, axis, largest, true).unwrap().0
                })
            },
        );
        let oracle = move |v: &[Vec<f64>], _| {
            let picks = top_k_ref(&v[0], dims, k, a, largest);
            let ish: Vec<usize> = {
                let mut s = dims.to_vec();
                s[a] = k;
                s
            };
            gather_elements_ref(&v[0], dims, &picks, &ish, a)
        };
        cases.push(
            vals.dtypes(&DATA)
                .parity_dtypes(&[DType::F32, DType::I64])
                .exact()
                .out(&od)
                .fallback(fallbacks())
                .wrt(&["x"])
                .oracle(oracle),
        );
    }
    cases
}

// ---- cumsum ----

pub fn cumsum() -> Vec<Case> {
    type C = (&'static [usize], i64);
    let table: [C; 3] = [(&[7], 0), (&[3, 5], -1), (&[4, 3, 2], 1)];
    let mut cases = vec![];
    for (dims, axis) in table {
        let a = axis_of(axis, dims.len());
        for (exclusive, reverse) in [(false, false), (true, false), (false, true), (true, true)] {
            let c = Case::new(
                format!("cumsum {dims:?} axis {axis} exclusive {exclusive} reverse {reverse}"),
                vec![data("x", dims)],
                move |dt| {
                    graph(&[("x", dims, dt)], |g, x| {
                        let y = g.cumsum(x[0], axis, exclusive, reverse).unwrap();
                        sin_if_float(g, y, dt)
                    })
                },
            );
            cases.push(
                c.dtypes(&DATA)
                    .parity_dtypes(&[DType::F32, DType::I64])
                    .out(dims)
                    .fallback(fallbacks())
                    .wrt(&["x"])
                    .oracle(move |v, dt| {
                        let s = cumsum_ref(&v[0], dims, a, exclusive, reverse);
                        if dt.is_float() {
                            // The sums are stored in the dtype before the sine reads them.
                            crate::case::through(dt, &s)
                                .iter()
                                .map(|v| v.sin())
                                .collect()
                        } else {
                            s
                        }
                    }),
            );
        }
    }
    cases
}

/// Float results go through a sine (so the gradcheck sees a non-trivial cotangent); integer
/// ones are left as they are.
fn sin_if_float(g: &mut Graph, y: NodeId, dt: DType) -> NodeId {
    if dt.is_float() {
        sin(g, y)
    } else {
        y
    }
}

// ---- range ----

pub fn range() -> Vec<Case> {
    // Draws keep ceil((limit − start) / delta) at the graph's length for every value.
    type R = (Draw, Draw, Draw, usize, &'static [DType]);
    let float: &'static [DType] = &[DType::F32, DType::F64, DType::F16];
    let ints: &'static [DType] = &[DType::I32, DType::I64];
    let table: [R; 3] = [
        (
            Draw::Uniform(0.0, 0.2),
            Draw::Uniform(4.55, 4.65),
            Draw::Uniform(0.95, 1.05),
            5,
            float,
        ),
        (
            Draw::Uniform(3.0, 3.2),
            Draw::Uniform(-1.55, -1.45),
            Draw::Uniform(-1.05, -0.95),
            5,
            float,
        ),
        (
            Draw::Ints(0, 2),
            Draw::Ints(18, 20),
            Draw::Ints(5, 5),
            4,
            ints,
        ),
    ];
    let mut cases = vec![];
    for (k, (s, l, d, len, dts)) in table.into_iter().enumerate() {
        let one: &'static [usize] = &[];
        let ins = vec![
            Input::new("s", one, s),
            Input::new("l", one, l),
            Input::new("d", one, d),
        ];
        let c = Case::new(format!("range {k} len {len}"), ins, move |dt| {
            graph(&[("s", one, dt), ("l", one, dt), ("d", one, dt)], |g, x| {
                let y = g.range(x[0], x[1], x[2], len).unwrap();
                sin_if_float(g, y, dt)
            })
        });
        let c = c
            .dtypes(dts)
            .parity_dtypes(&dts[..1])
            .out(&[len])
            .fallback(fallbacks())
            .oracle(move |v, dt| {
                let r = range_ref(v[0][0], v[2][0], len);
                if dt.is_float() {
                    // The values are rounded to the dtype before the sine.
                    crate::case::through(dt, &r)
                        .iter()
                        .map(|v| v.sin())
                        .collect()
                } else {
                    r
                }
            });
        cases.push(if k < 2 { c.wrt(&["s", "d"]) } else { c });
    }
    cases
}

// ---- one_hot ----

pub fn one_hot() -> Vec<Case> {
    type O = (&'static [usize], usize, i64, DType);
    let table: [O; 4] = [
        (&[5], 4, -1, DType::I64),
        (&[2, 3], 5, 0, DType::I32),
        (&[2, 3], 3, 1, DType::F32),
        (&[3, 2], 4, -3, DType::I64),
    ];
    let mut cases = vec![];
    for (ish, depth, axis, idt) in table {
        let a = axis_of(axis, ish.len() + 1);
        let mut od = ish.to_vec();
        od.insert(a, depth);
        // Indices from −depth−1 to depth: some out of range (all off), some negative.
        let idx = Draw::custom(move |rng, n, _| {
            (0..n)
                .map(|_| rng.below(2 * depth + 2) as f64 - depth as f64 - 1.0)
                .collect()
        });
        let ins = vec![
            Input::new("i", ish, idx).of(idt),
            Input::new("v", &[2], Draw::custom(values)).grad(Draw::Normal(1.0)),
        ];
        let c = Case::new(
            format!("one_hot {ish:?} {idt} depth {depth} axis {axis}"),
            ins,
            move |dt| {
                graph(&[("i", ish, idt), ("v", &[2], dt)], |g, x| {
                    let y = g.one_hot(x[0], x[1], depth, axis).unwrap();
                    sin_if_float(g, y, dt)
                })
            },
        );
        cases.push(
            c.dtypes(&DATA)
                .parity_dtypes(&[DType::F32, DType::I64])
                .out(&od)
                .fallback(fallbacks())
                .wrt(&["v"])
                .oracle(move |v, dt| {
                    let r = one_hot_ref(&v[0], ish, depth, a, v[1][0], v[1][1]);
                    if dt.is_float() {
                        r.iter().map(|v| v.sin()).collect()
                    } else {
                        r
                    }
                }),
        );
    }
    cases
}
