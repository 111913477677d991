//! Case table of the elementwise group: Activation, Binary, Compare, Where, Cast,
//! StopGradient, with their independent f64 oracles (plain loops and series, never rlx
//! code). Draws: `draw` is what the CPU oracle check sees; `gpu` keeps inputs where the
//! parity check against an f64 graph of unrounded inputs stays within tolerance; `grad`
//! keeps finite differences inside each function's domain and off its kinks.
pub use super::elementwise_oracle::*;
use super::{broadcast, numel, src_index, Dims};
use crate::case::{Case, Draw, Input};
use crate::Rng;
use rlx_ir::{Activation, BinaryOp, CompareOp, DType, Graph, NodeId, OpKind, OpKindSet, Shape};

pub const FLOATS: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];
pub const INTS: [DType; 3] = [DType::I32, DType::I64, DType::U8];
pub const BINARY: [BinaryOp; 7] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Max,
    BinaryOp::Min,
    BinaryOp::Pow,
];
pub const COMPARE: [CompareOp; 6] = [
    CompareOp::Eq,
    CompareOp::Ne,
    CompareOp::Lt,
    CompareOp::Le,
    CompareOp::Gt,
    CompareOp::Ge,
];

/// A graph of one output from inputs of the given names, dims and dtypes.
pub fn graph(
    ins: &[(&str, &[usize], DType)],
    body: impl Fn(&mut Graph, &[NodeId]) -> NodeId,
) -> Graph {
    let mut g = Graph::new("case");
    let ids: Vec<NodeId> = ins
        .iter()
        .map(|(n, d, dt)| g.input(*n, Shape::new(d, *dt)).unwrap())
        .collect();
    let y = body(&mut g, &ids);
    g.set_outputs(vec![y]);
    g
}

// ---- draws ----

/// Values from a small grid so that equal pairs occur.
pub fn grid(dt: DType, rng: &mut Rng, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| match dt {
            DType::Bool => rng.below(2) as f64,
            DType::U8 => rng.below(7) as f64,
            _ if dt.is_int() => rng.below(7) as f64 - 3.0,
            _ => (rng.below(7) as f64 - 3.0) * 0.75,
        })
        .collect()
}

/// Source values for a cast, with some exact zeros so a cast to bool sees both outcomes.
pub fn cast_source(from: DType, to: DType, rng: &mut Rng, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| {
            if rng.below(4) == 0 {
                return 0.0;
            }
            match from {
                DType::Bool => rng.below(2) as f64,
                DType::U8 => rng.below(256) as f64,
                DType::I32 | DType::I64 => rng.range(-3000.0, 3000.0).trunc(),
                // Float → u8 is only defined on the type's range.
                _ if to == DType::U8 => rng.range(0.0, 255.0),
                _ => rng.range(-300.0, 300.0),
            }
        })
        .collect()
}

/// Parity source values for a cast from `from`: zeros, exact halves (rounding ties) and
/// values up to ~1000 (u8 wraps, no f16 overflow) for floats; in-range integers otherwise.
fn cast_values(rng: &mut Rng, n: usize, from: DType) -> Vec<f64> {
    let ints = |rng: &mut Rng, lo: i64, hi: i64| Draw::Ints(lo, hi).sample(rng, n, from, &[]);
    match from {
        f if f.is_float() => (0..n)
            .map(|_| match rng.below(5) {
                0 => 0.0,
                1 => rng.below(2001) as f64 - 1000.0 + 0.5,
                _ => 300.0 * rng.normal(),
            })
            .collect(),
        DType::I32 | DType::I64 => ints(rng, -60000, 60000),
        DType::U8 => ints(rng, 0, 255),
        _ => ints(rng, 0, 1),
    }
}

/// The dtype whose tolerance a cast's output gets: its least precise float.
pub fn tol_dtype(a: DType, b: DType) -> DType {
    [DType::BF16, DType::F16, DType::F32, DType::F64]
        .into_iter()
        .find(|d| *d == a || *d == b)
        .unwrap_or(DType::F32)
}

fn positive_only(a: Activation) -> bool {
    matches!(
        a,
        Activation::Log | Activation::Sqrt | Activation::Rsqrt | Activation::Recip
    )
}

// ---- activation ----

/// Every activation on shapes from rank 0 to 1001 elements, in every float dtype.
pub fn activation() -> Vec<Case> {
    let shapes: [Dims; 9] = [
        &[],
        &[1],
        &[7],
        &[13],
        &[3, 5],
        &[3, 1, 7],
        &[7, 33],
        &[3, 5, 129],
        &[1001],
    ];
    let mut cases = vec![];
    for act in Activation::ALL {
        // Inside each function's domain (positive for Log/Sqrt/Rsqrt, away from 0 for Recip).
        let draw = match act {
            Activation::Log | Activation::Sqrt | Activation::Rsqrt => Draw::Uniform(0.1, 5.0),
            Activation::Recip => Draw::Signed(0.25, 4.0),
            _ => Draw::Normal(2.0),
        };
        // Exp's relative error is |x| times the input's rounding: keep the bf16 tail
        // within tolerance of the unrounded f64 graph.
        let gpu = if positive_only(act) {
            Draw::Uniform(0.1, 3.0)
        } else if act == Activation::Exp {
            Draw::Uniform(-1.5, 1.5)
        } else {
            Draw::Normal(1.0)
        };
        let grad = match act {
            Activation::Log | Activation::Sqrt | Activation::Rsqrt => Draw::Uniform(0.3, 3.0),
            Activation::Recip => Draw::Signed(0.4, 2.5),
            Activation::Relu | Activation::Abs => Draw::NormalAway(0.01),
            _ => Draw::Normal(1.5),
        };
        for dims in shapes {
            let x = Input::new("x", dims, draw.clone())
                .gpu(gpu.clone())
                .grad(grad.clone());
            let c = Case::new(format!("{act:?} {dims:?}"), vec![x], move |dt| {
                graph(&[("x", dims, dt)], |g, x| g.activation(act, x[0]).unwrap())
            })
            .dtypes(&FLOATS)
            .out(dims)
            .oracle(move |v, _| v[0].iter().map(|&x| act_ref(act, x)).collect())
            .wrt(&["x"]);
            // Gradchecks on the shapes of several elements only: finite differences cost
            // four runs per element, and one element whose slope is tiny (Erf far out)
            // leaves a rel-L2 of rounding noise.
            let grad_shape = dims == [3, 5] || dims == [7];
            cases.push(if grad_shape { c } else { c.no_grad() });
        }
    }
    cases
}

/// Big activations: parity only (the gridded launch paths).
pub fn activation_big() -> Vec<Case> {
    let dims: Dims = &[4096, 1025];
    [Activation::Gelu, Activation::Silu, Activation::Tanh]
        .into_iter()
        .map(|act| {
            Case::new(
                format!("{act:?} big"),
                vec![Input::new("x", dims, Draw::Normal(1.0))],
                move |dt| graph(&[("x", dims, dt)], |g, x| g.activation(act, x[0]).unwrap()),
            )
            .dtypes(&[DType::F32, DType::BF16])
            .only_parity()
        })
        .collect()
}

// ---- binary ----

/// The oracle check's operands: in each op's domain, integers in range of the dtype
/// (division away from zero, small powers so nothing overflows i64).
fn binary_draw(op: BinaryOp, lhs: bool) -> Draw {
    Draw::custom(move |rng, n, dt| {
        let f = |r: &mut Rng| -> f64 {
            match (dt, op, lhs) {
                (DType::U8, BinaryOp::Div, true) => r.below(256) as f64,
                (DType::U8, BinaryOp::Div, false) => 1.0 + r.below(255) as f64,
                (DType::U8, BinaryOp::Pow, true) => r.below(9) as f64,
                (DType::U8, BinaryOp::Pow, false) => r.below(4) as f64,
                (DType::U8, _, _) => r.below(256) as f64,
                (_, BinaryOp::Div, false) if dt.is_int() => {
                    Draw::Signed(1.0, 50.0).sample(r, 1, dt, &[])[0].trunc()
                }
                (_, BinaryOp::Pow, true) if dt.is_int() => r.below(13) as f64 - 6.0,
                (_, BinaryOp::Pow, false) if dt.is_int() => r.below(6) as f64,
                _ if dt.is_int() => r.range(-1000.0, 1000.0).trunc(),
                (_, BinaryOp::Div, false) => Draw::Signed(0.5, 2.0).sample(r, 1, dt, &[])[0],
                (_, BinaryOp::Pow, true) => r.range(0.2, 3.0),
                (_, BinaryOp::Pow, false) => r.range(-2.0, 2.0),
                _ => r.normal(),
            }
        };
        (0..n).map(|_| f(rng)).collect()
    })
}

/// Parity operands: positive bases and moderate exponents for Pow, divisors away from
/// zero for Div, normals otherwise.
fn binary_gpu(op: BinaryOp, lhs: bool) -> Draw {
    match (op, lhs) {
        (BinaryOp::Pow, true) => Draw::Uniform(0.5, 2.0),
        (BinaryOp::Pow, false) => Draw::Uniform(-1.5, 1.5),
        (BinaryOp::Div, false) => Draw::Signed(0.5, 2.0),
        _ => Draw::Normal(1.0),
    }
}

/// Gradcheck operands; Max/Min take a from the grid k·0.1 and b from k·0.1 + 0.05, so no
/// perturbation crosses a tie.
fn binary_grad(op: BinaryOp, lhs: bool) -> Draw {
    match (op, lhs) {
        (BinaryOp::Pow, true) => Draw::Uniform(0.4, 2.5),
        (BinaryOp::Pow, false) => Draw::Uniform(-2.0, 2.0),
        (BinaryOp::Div, false) => Draw::NormalAway(0.5),
        (BinaryOp::Max | BinaryOp::Min, _) => {
            let off = if lhs { 0.0 } else { 0.05 };
            Draw::custom(move |rng, n, _| {
                (0..n)
                    .map(|_| (rng.below(21) as f64 - 10.0) * 0.1 + off)
                    .collect()
            })
        }
        _ => Draw::Normal(1.0),
    }
}

fn binary_case(op: BinaryOp, sa: Dims, sb: Dims, dtypes: &[DType]) -> Case {
    let so = broadcast(sa, sb);
    let ins = vec![
        Input::new("a", sa, binary_draw(op, true))
            .gpu(binary_gpu(op, true))
            .grad(binary_grad(op, true)),
        Input::new("b", sb, binary_draw(op, false))
            .gpu(binary_gpu(op, false))
            .grad(binary_grad(op, false)),
    ];
    let o = so.clone();
    Case::new(format!("{op:?} {sa:?} {sb:?}"), ins, move |dt| {
        graph(&[("a", sa, dt), ("b", sb, dt)], |g, x| {
            g.binary(op, x[0], x[1]).unwrap()
        })
    })
    .dtypes(dtypes)
    .out(&so)
    .oracle(move |v, dt| {
        (0..numel(&o))
            .map(|k| {
                let (u, w) = (v[0][src_index(sa, &o, k)], v[1][src_index(sb, &o, k)]);
                if dt.is_int() {
                    binary_ref_i(op, u as i64, w as i64, dt)
                } else {
                    binary_ref_f(op, u, w)
                }
            })
            .collect()
    })
    .wrt(&["a", "b"])
}

/// Integer binaries beyond the oracle's plain i64 loop: zero divisors (integer division by
/// zero gives 0) and powers that overflow i64 (wrapping is part of the contract). Parity
/// only: the device must agree with the CPU bit for bit.
fn binary_wrapping(op: BinaryOp, dt: DType) -> Case {
    let (sa, sb): (Dims, Dims) = (&[7, 1, 33], &[5, 33]);
    let (lo, hi) = if dt == DType::U8 {
        (0, 255)
    } else {
        (-1000, 1000)
    };
    let (da, db) = match op {
        BinaryOp::Pow => (Draw::Ints(-4, 4), Draw::Ints(-2, 40)),
        BinaryOp::Div => (Draw::Ints(lo, hi), Draw::Ints((-5i64).max(lo), 5)),
        _ => (Draw::Ints(lo, hi), Draw::Ints(lo, hi)),
    };
    Case::new(
        format!("{op:?} {dt} wrapping"),
        vec![Input::new("a", sa, da), Input::new("b", sb, db)],
        move |dt| {
            graph(&[("a", sa, dt), ("b", sb, dt)], |g, x| {
                g.binary(op, x[0], x[1]).unwrap()
            })
        },
    )
    .dtypes(&[dt])
    .only_parity()
}

pub fn binary() -> Vec<Case> {
    let all: Vec<DType> = FLOATS.into_iter().chain(INTS).collect();
    // Rank 0, size-1 dims, odd sizes, equal shapes; then the parity and gradcheck shapes.
    let pairs: [(Dims, Dims); 16] = [
        (&[3, 1, 5], &[4, 1]),
        (&[], &[2, 3]),
        (&[6, 1], &[]),
        (&[1, 9], &[5, 1]),
        (&[2, 3, 7], &[2, 3, 7]),
        (&[1], &[1, 1, 11]),
        (&[7, 1, 33], &[5, 33]),
        (&[129], &[129]),
        (&[3, 1], &[1, 1000]),
        (&[4, 3], &[4, 3]),
        (&[5], &[5]),
        (&[2, 3, 4], &[3, 1]),
        (&[3, 1, 5], &[3, 2, 1]),
        (&[7], &[2, 1, 7]),
        (&[1, 5], &[4, 1]),
        (&[], &[3, 2]),
    ];
    let mut cases = vec![];
    for op in BINARY {
        for (sa, sb) in pairs {
            let c = binary_case(op, sa, sb, &all);
            let n = numel(&broadcast(sa, sb));
            cases.push(if n > 300 { c.no_grad() } else { c });
        }
        for dt in INTS {
            cases.push(binary_wrapping(op, dt));
        }
    }
    // Broadcast patterns of the device kernels: scalar, rank 0, bias row, column, middle
    // block, general strided on both sides, and a rank-9 output whose axes cannot merge
    // below 8: that one may fall back, explicitly.
    let patterns: [(Dims, Dims); 7] = [
        (&[1], &[1000]),
        (&[], &[17]),
        (&[33, 65], &[65]),
        (&[33, 1], &[33, 65]),
        (&[2, 3, 4, 5], &[3, 1, 1]),
        (&[4, 1, 5, 1], &[3, 1, 7]),
        (&[2, 1, 2, 1, 2, 1, 2, 1, 3], &[2, 1, 2, 1, 2, 1, 2, 3]),
    ];
    for (sa, sb) in patterns {
        for op in [BinaryOp::Mul, BinaryOp::Sub] {
            let c = binary_case(op, sa, sb, &[DType::F32, DType::BF16]).no_grad();
            cases.push(if sa.len() > 8 {
                c.fallback(OpKindSet::of(&[OpKind::Binary]))
            } else {
                c
            });
        }
    }
    // Big enough to be split across threads; odd so the last chunk is partial.
    cases.push(binary_case(BinaryOp::Mul, &[301, 1, 257], &[7, 1], &[DType::F32]).no_grad());
    let big: Dims = &[2049, 2049];
    cases.push(binary_case(BinaryOp::Add, big, &[2049], &[DType::F32, DType::F16]).only_parity());
    cases.push(binary_case(BinaryOp::Mul, big, big, &[DType::BF16]).only_parity());
    cases
}

// ---- compare ----

fn compare_case(op: CompareOp, sa: Dims, sb: Dims, dtypes: &[DType], a: Draw, b: Draw) -> Case {
    let so = broadcast(sa, sb);
    let o = so.clone();
    Case::new(
        format!("{op:?} {sa:?} {sb:?}"),
        vec![Input::new("a", sa, a), Input::new("b", sb, b)],
        move |dt| {
            graph(&[("a", sa, dt), ("b", sb, dt)], |g, x| {
                g.compare(op, x[0], x[1]).unwrap()
            })
        },
    )
    .dtypes(dtypes)
    .out(&so)
    .out_dtype(|_| DType::Bool)
    .oracle(move |v, _| {
        (0..numel(&o))
            .map(|k| {
                compare_ref(op, v[0][src_index(sa, &o, k)], v[1][src_index(sb, &o, k)]) as u8 as f64
            })
            .collect()
    })
    .exact()
    // Rounding the operands of an f64 graph would flip ties: the graph is frozen.
    .frozen(DType::F32)
}

pub fn compare() -> Vec<Case> {
    let pairs: [(Dims, Dims); 6] = [
        (&[3, 1, 5], &[4, 1]),
        (&[], &[2, 3]),
        (&[6, 1], &[]),
        (&[1, 9], &[5, 1]),
        (&[2, 3, 7], &[2, 3, 7]),
        (&[1], &[1, 1, 11]),
    ];
    let on_grid = || Draw::custom(|rng, n, dt| grid(dt, rng, n));
    let mut cases = vec![];
    for op in COMPARE {
        for (sa, sb) in pairs {
            cases.push(compare_case(op, sa, sb, &DType::ALL, on_grid(), on_grid()));
        }
        // b repeats about a third of a's values: ties for Eq / Le / Ge.
        let value = || {
            Draw::custom(|rng, n, dt| {
                if dt.is_float() {
                    rng.normals(n)
                } else {
                    Draw::Ints(-5, 5).sample(rng, n, dt, &[])
                }
            })
        };
        let tied = Draw::TiedWith {
            of: 0,
            p: 0.3,
            other: Box::new(value()),
        };
        let dts = [
            DType::F32,
            DType::F16,
            DType::BF16,
            DType::F64,
            DType::I32,
            DType::I64,
        ];
        let d: Dims = &[9, 41];
        cases.push(compare_case(op, d, d, &dts, value(), tied));
        let small = || {
            Draw::custom(|rng, n, dt| {
                if dt.is_float() {
                    rng.normals(n)
                } else {
                    Draw::Ints(-3, 3).sample(rng, n, dt, &[])
                }
            })
        };
        cases.push(compare_case(
            op,
            &[7, 1, 33],
            &[5, 1],
            &dts,
            small(),
            small(),
        ));
    }
    cases
}

// ---- where ----

fn where_case(cdt: DType, sc: Dims, sa: Dims, sb: Dims, dtypes: &[DType]) -> Case {
    let so = broadcast(&broadcast(sc, sa), sb);
    let o = so.clone();
    // Oracle draws from grids (ties between branches do not matter: selection is exact);
    // parity draws -1 / 0 / 1 conditions (zeros false, anything else true) and normal or
    // integer branches.
    let branch_b = Draw::custom(|rng, n, dt| {
        let b = rng.uniforms(n, 0.0, 200.0);
        if dt.is_float() {
            b
        } else {
            b.iter().map(|v| v.trunc()).collect()
        }
    });
    let gpu_branch = Draw::custom(|rng, n, dt| {
        if dt.is_float() {
            rng.normals(n)
        } else {
            Draw::Ints(-100, 100).sample(rng, n, dt, &[])
        }
    });
    let ins = vec![
        Input::new("c", sc, Draw::custom(|rng, n, dt| grid(dt, rng, n)))
            .of(cdt)
            .gpu(Draw::Ints(-1, 1)),
        Input::new("a", sa, Draw::custom(|rng, n, dt| grid(dt, rng, n)))
            .gpu(gpu_branch.clone())
            .grad(Draw::Normal(1.0)),
        Input::new("b", sb, branch_b)
            .gpu(gpu_branch)
            .grad(Draw::Normal(1.0)),
    ];
    Case::new(
        format!("Where {cdt} {sc:?} {sa:?} {sb:?}"),
        ins,
        move |dt| {
            graph(&[("c", sc, cdt), ("a", sa, dt), ("b", sb, dt)], |g, x| {
                g.where_(x[0], x[1], x[2]).unwrap()
            })
        },
    )
    .dtypes(dtypes)
    .out(&so)
    .oracle(move |v, _| {
        (0..numel(&o))
            .map(|k| {
                if v[0][src_index(sc, &o, k)] != 0.0 {
                    v[1][src_index(sa, &o, k)]
                } else {
                    v[2][src_index(sb, &o, k)]
                }
            })
            .collect()
    })
    .exact()
    .wrt(&["a", "b"])
}

pub fn where_select() -> Vec<Case> {
    let triples: [(Dims, Dims, Dims); 5] = [
        (&[3, 1, 5], &[4, 1], &[]),
        (&[], &[2, 7], &[2, 1]),
        (&[1, 6], &[6], &[5, 1]),
        (&[9], &[9], &[9]),
        (&[7, 1], &[1, 33], &[33]),
    ];
    let mut cases = vec![];
    for cdt in [DType::Bool, DType::F32, DType::I32] {
        for (sc, sa, sb) in triples {
            cases.push(where_case(cdt, sc, sa, sb, &DType::ALL));
        }
    }
    // The VJP routes by a condition computed from an f64 input: c only feeds the bool
    // condition, so its gradient is genuinely zero.
    for (dc, da, db) in [
        (&[4usize, 3][..], &[4usize, 3][..], &[4usize, 3][..]),
        (&[4, 3], &[3], &[4, 1]),
    ] {
        let ins = vec![
            Input::new("c", dc, Draw::NormalAway(0.01)),
            Input::new("a", da, Draw::Normal(1.0)),
            Input::new("b", db, Draw::Normal(1.0)),
        ];
        cases.push(
            Case::new(
                format!("Where of c > 0 {dc:?} {da:?} {db:?}"),
                ins,
                move |dt| {
                    graph(&[("c", dc, dt), ("a", da, dt), ("b", db, dt)], |g, x| {
                        let zero = g.scalar(0.0, dt).unwrap();
                        let cond = g.compare(CompareOp::Gt, x[0], zero).unwrap();
                        let sa = g.activation(Activation::Sin, x[1]).unwrap();
                        g.where_(cond, sa, x[2]).unwrap()
                    })
                },
            )
            .wrt(&["a", "b", "c"])
            .only_grad(),
        );
    }
    cases
}

// ---- cast ----

fn cast_case(from: DType, to: DType, d: Dims, draw: Draw, gpu: Draw) -> Case {
    Case::new(
        format!("Cast {from} -> {to} {d:?}"),
        vec![Input::new("x", d, draw).gpu(gpu)],
        move |dt| graph(&[("x", d, dt)], |g, x| g.cast(x[0], to).unwrap()),
    )
    .dtypes(&[from])
    .out(d)
    .out_dtype(move |_| to)
    .oracle(move |v, _| v[0].iter().map(|&x| cast_ref(from, to, x)).collect())
    .exact()
    .frozen(tol_dtype(from, to))
}

pub fn cast() -> Vec<Case> {
    let mut cases = vec![];
    for from in DType::ALL {
        for to in DType::ALL {
            for d in [&[2usize, 7][..], &[], &[3, 337]] {
                let draw = Draw::custom(move |rng, n, _| cast_source(from, to, rng, n));
                let gpu = Draw::custom(move |rng, n, _| cast_values(rng, n, from));
                cases.push(cast_case(from, to, d, draw, gpu));
            }
        }
    }
    // Beyond the target's range: float -> int saturates then wraps, like the CPU. Parity
    // only: the device must match the CPU's semantics bit for bit.
    let big = Draw::custom(|rng, n, _| {
        let mut v: Vec<f64> = (0..n - 6).map(|_| rng.range(-6e9, 6e9)).collect();
        v.extend([1e30, -1e30, 4294967295.0, 255.9, 256.0, -2.5]);
        v
    });
    for from in [DType::F32, DType::F64] {
        for to in [DType::I32, DType::I64, DType::U8, DType::Bool] {
            let d: Dims = &[206];
            cases.push(
                Case::new(
                    format!("Cast big {from} -> {to}"),
                    vec![Input::new("x", d, big.clone())],
                    move |dt| graph(&[("x", d, dt)], |g, x| g.cast(x[0], to).unwrap()),
                )
                .dtypes(&[from])
                .frozen(DType::F32)
                .only_parity(),
            );
        }
    }
    cases
}

// ---- stop gradient ----

pub fn stop_gradient() -> Vec<Case> {
    let mut cases = vec![];
    for d in [&[3usize, 1, 5][..], &[]] {
        cases.push(
            Case::new(
                format!("StopGradient {d:?}"),
                vec![Input::new(
                    "x",
                    d,
                    Draw::custom(|rng, n, dt| cast_source(dt, dt, rng, n)),
                )],
                move |dt| graph(&[("x", d, dt)], |g, x| g.stop_gradient(x[0]).unwrap()),
            )
            .dtypes(&DType::ALL)
            .out(d)
            .oracle(|v, _| v[0].clone())
            .exact(),
        );
    }
    // Fed through an op so the device copy is not just an alias of a graph input.
    let d: Dims = &[5, 77];
    cases.push(
        Case::new(
            "StopGradient then Neg",
            vec![Input::new("x", d, Draw::Normal(1.0))],
            move |dt| {
                graph(&[("x", d, dt)], |g, x| {
                    let s = g.stop_gradient(x[0]).unwrap();
                    g.activation(Activation::Neg, s).unwrap()
                })
            },
        )
        .dtypes(&FLOATS)
        .out(d)
        .oracle(|v, _| v[0].iter().map(|x| -x).collect())
        .exact(),
    );
    cases
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_and_index_agree() {
        assert_eq!(broadcast(&[3, 1, 5], &[4, 1]), vec![3, 4, 5]);
        assert_eq!(broadcast(&[], &[2, 3]), vec![2, 3]);
        assert_eq!(src_index(&[4, 1], &[3, 4, 5], 7), 1);
    }
}
