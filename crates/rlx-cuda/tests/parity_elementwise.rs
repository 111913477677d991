//! GPU parity of the elementwise group: Activation, Binary, Compare, Where, Cast,
//! StopGradient, ElementwiseRegion (chains, mixed dtypes, the resize prologue, fusion-made
//! regions), BatchElementwiseRegion and FusedSwiGLU, against the CPU thunks.
mod common;
use common::*;
use rlx_cuda::CudaOptions;
use rlx_ir::ChainOperand::{Input, Step};
use rlx_ir::ChainStep as S;
use rlx_ir::{
    Activation, BinaryOp, ChainStep, CompareOp, DType, Graph, NodeId, Op, RegionPrologue, Shape,
};
use rlx_opt::Pass;

/// Every float dtype the generated kernels compute in (f64 included).
const FLOATS64: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];
const INTS: [DType; 3] = [DType::I32, DType::I64, DType::U8];
const NONE: RegionPrologue = RegionPrologue::None;

fn numel(d: &[usize]) -> usize {
    d.iter().product()
}

fn input(g: &mut Graph, name: &str, dims: &[usize], dt: DType) -> NodeId {
    g.input(name, Shape::new(dims, dt)).unwrap()
}

/// A graph of one output computed from inputs named `x0`, `x1`, ... of the given shapes.
fn graph(ins: &[(&[usize], DType)], body: impl Fn(&mut Graph, &[NodeId]) -> NodeId) -> Graph {
    let mut g = Graph::new("elementwise");
    let ids: Vec<NodeId> = ins
        .iter()
        .enumerate()
        .map(|(k, (d, dt))| input(&mut g, &format!("x{k}"), d, *dt))
        .collect();
    let y = body(&mut g, &ids);
    g.set_outputs(vec![y]);
    g
}

fn ints(rng: &mut Rng, n: usize, lo: i64, hi: i64) -> Vec<f64> {
    (0..n)
        .map(|_| (lo + rng.below((hi - lo + 1) as usize) as i64) as f64)
        .collect()
}

/// Values that keep every comparison against the integers -1, 0, 1 far from a tie in any
/// dtype (so rounding to f16/bf16 flips none of them).
fn off_grid(rng: &mut Rng, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| rng.below(4) as f64 - 2.0 + 0.5 + rng.range(-0.3, 0.3))
        .collect()
}

fn positive_only(a: Activation) -> bool {
    matches!(
        a,
        Activation::Log | Activation::Sqrt | Activation::Rsqrt | Activation::Recip
    )
}

#[test]
fn activations_every_kind_and_dtype() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("activations_every_kind_and_dtype");
    let shapes: [&[usize]; 4] = [&[1], &[7, 33], &[3, 5, 129], &[1001]];
    for act in Activation::ALL {
        for dims in shapes {
            let n = numel(dims);
            // Exp's relative error is |x| times the input's rounding: keep the bf16 tail
            // within tolerance.
            let data = if positive_only(act) {
                rng.uniforms(n, 0.1, 3.0)
            } else if act == Activation::Exp {
                rng.uniforms(n, -1.5, 1.5)
            } else {
                rng.normals(n)
            };
            let feeds = vec![feed("x0", dims, data)];
            let build = |dt| graph(&[(dims, dt)], |g, x| g.activation(act, x[0]).unwrap());
            for dt in FLOATS64 {
                parity(&format!("{act:?} {dims:?}"), &build, &feeds, dt);
            }
        }
    }
}

#[test]
fn activations_big() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("activations_big");
    let dims: &[usize] = &[4096, 1025];
    let feeds = vec![normal(&mut rng, "x0", dims)];
    for act in [Activation::Gelu, Activation::Silu, Activation::Tanh] {
        let build = |dt| graph(&[(dims, dt)], |g, x| g.activation(act, x[0]).unwrap());
        for dt in [DType::F32, DType::BF16] {
            parity(&format!("{act:?} big"), &build, &feeds, dt);
        }
    }
}

const BINARY: [BinaryOp; 7] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Max,
    BinaryOp::Min,
    BinaryOp::Pow,
];

/// Float operands for `op`: positive bases and moderate exponents for Pow, divisors away
/// from zero for Div, normals otherwise.
fn float_operands(rng: &mut Rng, op: BinaryOp, a: &[usize], b: &[usize]) -> Vec<Feed> {
    let (na, nb) = (numel(a), numel(b));
    match op {
        BinaryOp::Pow => vec![
            feed("x0", a, rng.uniforms(na, 0.5, 2.0)),
            feed("x1", b, rng.uniforms(nb, -1.5, 1.5)),
        ],
        BinaryOp::Div => {
            let d = rng
                .uniforms(nb, 0.5, 2.0)
                .into_iter()
                .map(|v| if rng.chance(0.5) { -v } else { v })
                .collect();
            vec![feed("x0", a, rng.normals(na)), feed("x1", b, d)]
        }
        _ => vec![normal(rng, "x0", a), normal(rng, "x1", b)],
    }
}

#[test]
fn binary_every_op_float_with_broadcast() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("binary_every_op_float_with_broadcast");
    let shapes: [(&[usize], &[usize]); 3] = [
        (&[7, 1, 33], &[5, 33]),
        (&[129], &[129]),
        (&[3, 1], &[1, 1000]),
    ];
    for op in BINARY {
        for (a, b) in shapes {
            let feeds = float_operands(&mut rng, op, a, b);
            let build = |dt| {
                graph(&[(a, dt), (b, dt)], |g, x| {
                    g.binary(op, x[0], x[1]).unwrap()
                })
            };
            for dt in FLOATS64 {
                parity(&format!("{op:?} {a:?} {b:?}"), &build, &feeds, dt);
            }
        }
    }
}

#[test]
fn binary_broadcast_patterns() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("binary_broadcast_patterns");
    // scalar, rank 0, bias row, column, middle block, general strided on both sides, and a
    // rank-9 output whose axes cannot merge below 8: that one must fall back, explicitly.
    let shapes: [(&[usize], &[usize]); 7] = [
        (&[1], &[1000]),
        (&[], &[17]),
        (&[33, 65], &[65]),
        (&[33, 1], &[33, 65]),
        (&[2, 3, 4, 5], &[3, 1, 1]),
        (&[4, 1, 5, 1], &[3, 1, 7]),
        (&[2, 1, 2, 1, 2, 1, 2, 1, 3], &[2, 1, 2, 1, 2, 1, 2, 3]),
    ];
    for (a, b) in shapes {
        for op in [BinaryOp::Mul, BinaryOp::Sub] {
            let feeds = float_operands(&mut rng, op, a, b);
            let build = |dt| {
                graph(&[(a, dt), (b, dt)], |g, x| {
                    g.binary(op, x[0], x[1]).unwrap()
                })
            };
            let allow = if a.len() > 8 {
                OpKindSet::of(&[OpKind::Binary])
            } else {
                OpKindSet::empty()
            };
            for dt in [DType::F32, DType::BF16] {
                let name = format!("{op:?} {a:?} {b:?}");
                parity_with(&name, &build, &feeds, dt, CudaOptions::strict(), allow);
            }
        }
    }
}

#[test]
fn binary_every_op_integer() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("binary_every_op_integer");
    let (a, b): (&[usize], &[usize]) = (&[7, 1, 33], &[5, 33]);
    for dt in INTS {
        for op in BINARY {
            let (na, nb) = (numel(a), numel(b));
            let (lo, hi) = if dt == DType::U8 {
                (0, 255)
            } else {
                (-1000, 1000)
            };
            let feeds = match op {
                // 3^40 overflows i64: wrapping is part of the contract.
                BinaryOp::Pow => vec![
                    feed("x0", a, ints(&mut rng, na, -4, 4)),
                    feed("x1", b, ints(&mut rng, nb, -2, 40)),
                ],
                // Integer division by zero gives 0: keep some zero divisors.
                BinaryOp::Div => vec![
                    feed("x0", a, ints(&mut rng, na, lo, hi)),
                    feed("x1", b, ints(&mut rng, nb, (-5i64).max(lo), 5)),
                ],
                _ => vec![
                    feed("x0", a, ints(&mut rng, na, lo, hi)),
                    feed("x1", b, ints(&mut rng, nb, lo, hi)),
                ],
            };
            let build = move |_: DType| {
                graph(&[(a, dt), (b, dt)], |g, x| {
                    g.binary(op, x[0], x[1]).unwrap()
                })
            };
            parity(&format!("{op:?} {dt}"), &build, &feeds, DType::F32);
        }
    }
}

#[test]
fn binary_big() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("binary_big");
    let (a, b): (&[usize], &[usize]) = (&[2049, 2049], &[2049]);
    let feeds = vec![normal(&mut rng, "x0", a), normal(&mut rng, "x1", b)];
    let build = |dt| graph(&[(a, dt), (b, dt)], |g, x| g.add(x[0], x[1]).unwrap());
    for dt in [DType::F32, DType::F16] {
        parity("Add big", &build, &feeds, dt);
    }
    let feeds = vec![normal(&mut rng, "x0", a), normal(&mut rng, "x1", a)];
    let build = |dt| graph(&[(a, dt), (a, dt)], |g, x| g.mul(x[0], x[1]).unwrap());
    parity("Mul big same shape", &build, &feeds, DType::BF16);
}

const COMPARE: [CompareOp; 6] = [
    CompareOp::Eq,
    CompareOp::Ne,
    CompareOp::Lt,
    CompareOp::Le,
    CompareOp::Gt,
    CompareOp::Ge,
];

#[test]
fn compare_every_op_and_dtype() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("compare_every_op_and_dtype");
    let d: &[usize] = &[9, 41];
    for dt in FLOATS64.into_iter().chain([DType::I32, DType::I64]) {
        for op in COMPARE {
            // b repeats about a third of a's values: ties for Eq / Le / Ge.
            let av = if dt.is_float() {
                rng.normals(numel(d))
            } else {
                ints(&mut rng, numel(d), -5, 5)
            };
            let bv: Vec<f64> = av
                .iter()
                .map(|&v| {
                    if rng.chance(0.3) {
                        v
                    } else if dt.is_float() {
                        rng.normal()
                    } else {
                        rng.below(11) as f64 - 5.0
                    }
                })
                .collect();
            let feeds = vec![feed("x0", d, av), feed("x1", d, bv)];
            let build = move |_: DType| {
                graph(&[(d, dt), (d, dt)], |g, x| {
                    g.compare(op, x[0], x[1]).unwrap()
                })
            };
            parity(&format!("{op:?} {dt}"), &build, &feeds, DType::F32);
            // Broadcast operands.
            let (a, b): (&[usize], &[usize]) = (&[7, 1, 33], &[5, 1]);
            let feeds = if dt.is_float() {
                vec![normal(&mut rng, "x0", a), normal(&mut rng, "x1", b)]
            } else {
                vec![
                    feed("x0", a, ints(&mut rng, numel(a), -3, 3)),
                    feed("x1", b, ints(&mut rng, numel(b), -3, 3)),
                ]
            };
            let build = move |_: DType| {
                graph(&[(a, dt), (b, dt)], |g, x| {
                    g.compare(op, x[0], x[1]).unwrap()
                })
            };
            parity(
                &format!("{op:?} {dt} broadcast"),
                &build,
                &feeds,
                DType::F32,
            );
        }
    }
}

#[test]
fn where_with_broadcast_and_any_condition() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("where_with_broadcast_and_any_condition");
    let (c, a, b): (&[usize], &[usize], &[usize]) = (&[7, 1], &[1, 33], &[33]);
    for cond in [DType::Bool, DType::F32, DType::I32] {
        // -1 / 0 / 1: zeros are false, anything else true.
        let cv = ints(&mut rng, numel(c), -1, 1);
        for dt in FLOATS64 {
            let feeds = vec![
                feed("x0", c, cv.clone()),
                normal(&mut rng, "x1", a),
                normal(&mut rng, "x2", b),
            ];
            let build = |d| {
                graph(&[(c, cond), (a, d), (b, d)], |g, x| {
                    g.where_(x[0], x[1], x[2]).unwrap()
                })
            };
            parity(&format!("Where {cond} {dt}"), &build, &feeds, dt);
        }
        let feeds = vec![
            feed("x0", c, cv.clone()),
            feed("x1", a, ints(&mut rng, numel(a), -100, 100)),
            feed("x2", b, ints(&mut rng, numel(b), -100, 100)),
        ];
        let build = |_| {
            graph(&[(c, cond), (a, DType::I64), (b, DType::I64)], |g, x| {
                g.where_(x[0], x[1], x[2]).unwrap()
            })
        };
        parity(&format!("Where {cond} i64"), &build, &feeds, DType::F32);
    }
}

/// Source values for a cast from `from`: zeros, exact halves (rounding ties) and values up
/// to ~1000 (u8 wraps, no f16 overflow) for floats; in-range integers otherwise.
fn cast_values(rng: &mut Rng, n: usize, from: DType) -> Vec<f64> {
    match from {
        f if f.is_float() => (0..n)
            .map(|_| match rng.below(5) {
                0 => 0.0,
                1 => rng.below(2001) as f64 - 1000.0 + 0.5,
                _ => 300.0 * rng.normal(),
            })
            .collect(),
        DType::I32 | DType::I64 => ints(rng, n, -60000, 60000),
        DType::U8 => ints(rng, n, 0, 255),
        _ => ints(rng, n, 0, 1),
    }
}

/// The dtype whose tolerance a cast's output gets: its least precise float.
fn tol_dtype(a: DType, b: DType) -> DType {
    [DType::BF16, DType::F16, DType::F32, DType::F64]
        .into_iter()
        .find(|d| *d == a || *d == b)
        .unwrap_or(DType::F32)
}

#[test]
fn cast_between_all_dtypes() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("cast_between_all_dtypes");
    let d: &[usize] = &[3, 337];
    for from in DType::ALL {
        for to in DType::ALL {
            let feeds = vec![feed("x0", d, cast_values(&mut rng, numel(d), from))];
            let build = move |_: DType| graph(&[(d, from)], |g, x| g.cast(x[0], to).unwrap());
            parity(
                &format!("Cast {from} -> {to}"),
                &build,
                &feeds,
                tol_dtype(from, to),
            );
        }
    }
    // Beyond the target's range: float -> int saturates then wraps, like the CPU.
    let big: Vec<f64> = (0..200)
        .map(|_| rng.range(-6e9, 6e9))
        .chain([1e30, -1e30, 4294967295.0, 255.9, 256.0, -2.5])
        .collect();
    for from in [DType::F32, DType::F64] {
        for to in [DType::I32, DType::I64, DType::U8, DType::Bool] {
            let nd = [big.len()];
            let n: &[usize] = &nd;
            let feeds = vec![feed("x0", n, big.clone())];
            let build = move |_: DType| graph(&[(n, from)], |g, x| g.cast(x[0], to).unwrap());
            parity(
                &format!("Cast big {from} -> {to}"),
                &build,
                &feeds,
                DType::F32,
            );
        }
    }
}

#[test]
fn stop_gradient_copies() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("stop_gradient_copies");
    let d: &[usize] = &[5, 77];
    let feeds = vec![normal(&mut rng, "x0", d)];
    // Fed through an op so the copy is not just an alias of a graph input.
    let build = |dt| {
        graph(&[(d, dt)], |g, x| {
            let s = g.stop_gradient(x[0]).unwrap();
            g.activation(Activation::Neg, s).unwrap()
        })
    };
    for dt in FLOATS64 {
        parity("StopGradient", &build, &feeds, dt);
    }
}

fn region(g: &mut Graph, ins: &[NodeId], chain: &[ChainStep], prologue: RegionPrologue) -> NodeId {
    g.elementwise_region(ins, chain.to_vec(), prologue).unwrap()
}

#[test]
fn region_chains_with_broadcast_inputs() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("region_chains_with_broadcast_inputs");
    let chain = [
        S::Binary(BinaryOp::Mul, Input(0), Input(1)),
        S::Binary(BinaryOp::Add, Step(0), Input(2)),
        S::Activation(Activation::Silu, Step(1)),
        S::Binary(BinaryOp::Max, Step(2), Input(0)),
        S::Activation(Activation::Tanh, Step(3)),
        S::Binary(BinaryOp::Sub, Input(2), Step(4)),
    ];
    let shapes: [(&[usize], &[usize], &[usize]); 4] = [
        (&[2, 3, 5], &[5], &[]),
        (&[1, 9], &[4, 1], &[1]),
        (&[7, 1, 33], &[5, 33], &[7, 5, 1]),
        (&[129, 65], &[129, 65], &[129, 65]),
    ];
    for (a, b, c) in shapes {
        let feeds = vec![
            normal(&mut rng, "x0", a),
            normal(&mut rng, "x1", b),
            normal(&mut rng, "x2", c),
        ];
        let build = |dt| {
            graph(&[(a, dt), (b, dt), (c, dt)], |g, x| {
                region(g, x, &chain, NONE)
            })
        };
        for dt in FLOATS64 {
            parity(&format!("chain {a:?} {b:?} {c:?}"), &build, &feeds, dt);
        }
    }
}

#[test]
fn region_mixed_dtypes() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("region_mixed_dtypes");
    let (a, b, c): (&[usize], &[usize], &[usize]) = (&[9, 65], &[65], &[9, 1]);
    // compare -> where over an int cast -> square in f64 -> back to the float dtype.
    let mixed = |d: DType| {
        vec![
            S::Compare(CompareOp::Lt, Input(0), Input(1)),
            S::Cast(d, Input(2)),
            S::Where(Step(0), Step(1), Input(0)),
            S::Cast(DType::F64, Step(2)),
            S::Binary(BinaryOp::Mul, Step(3), Step(3)),
            S::Cast(d, Step(4)),
        ]
    };
    let feeds = vec![
        feed("x0", a, off_grid(&mut rng, numel(a))),
        feed("x1", b, ints(&mut rng, numel(b), -1, 1)),
        feed("x2", c, ints(&mut rng, numel(c), -3, 3)),
    ];
    let build = |d| {
        graph(&[(a, d), (b, d), (c, DType::I32)], |g, x| {
            region(g, x, &mixed(d), NONE)
        })
    };
    for dt in FLOATS64 {
        parity("mixed chain", &build, &feeds, dt);
    }
    // An integer result: float -> i32, times an i32 input, compare, u8 arithmetic.
    let chain = [
        S::Cast(DType::I32, Input(0)),
        S::Binary(BinaryOp::Mul, Step(0), Input(2)),
        S::Compare(CompareOp::Ge, Step(1), Input(2)),
        S::Cast(DType::U8, Step(1)),
        S::Binary(BinaryOp::Add, Step(3), Step(3)),
        S::Where(Step(2), Step(4), Step(3)),
    ];
    let feeds = vec![
        feed(
            "x0",
            a,
            off_grid(&mut rng, numel(a))
                .iter()
                .map(|v| 40.0 * v)
                .collect(),
        ),
        feed("x1", b, rng.normals(numel(b))),
        feed("x2", c, ints(&mut rng, numel(c), -20, 20)),
    ];
    for dt in FLOATS64 {
        let chain = &chain;
        let build = move |_: DType| {
            graph(&[(a, dt), (b, dt), (c, DType::I32)], |g, x| {
                region(g, x, chain, NONE)
            })
        };
        parity(&format!("int chain from {dt}"), &build, &feeds, DType::F32);
    }
}

#[test]
fn region_made_by_fusion() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("region_made_by_fusion");
    let (a, b): (&[usize], &[usize]) = (&[17, 129], &[129]);
    let feeds = vec![normal(&mut rng, "x0", a), normal(&mut rng, "x1", b)];
    // gelu(x * w + w) - sigmoid(x), fused into one region.
    let build = |dt| {
        let g = graph(&[(a, dt), (b, dt)], |g, x| {
            let m = g.mul(x[0], x[1]).unwrap();
            let s = g.add(m, x[1]).unwrap();
            let h = g.activation(Activation::Gelu, s).unwrap();
            let q = g.activation(Activation::Sigmoid, x[0]).unwrap();
            g.sub(h, q).unwrap()
        });
        let f = rlx_opt::FuseElementwise.run(&g).unwrap();
        let regions = f
            .nodes
            .iter()
            .filter(|n| matches!(n.op, Op::ElementwiseRegion { .. }))
            .count();
        assert_eq!(regions, 1, "fusion made one region");
        f
    };
    for dt in FLOATS64 {
        parity("fused region", &build, &feeds, dt);
    }
}

#[test]
fn region_resize_prologue() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("region_resize_prologue");
    let x: &[usize] = &[2, 3, 5, 7];
    let chain = [
        S::Binary(BinaryOp::Add, Input(0), Input(1)),
        S::Activation(Activation::Relu, Step(0)),
    ];
    for b in [
        &[3usize, 1, 1][..],
        &[14],
        &[2, 3, 10, 14],
        &[2, 1, 1, 1, 1],
    ] {
        let feeds = vec![normal(&mut rng, "x0", x), normal(&mut rng, "x1", b)];
        let build = |dt| {
            graph(&[(x, dt), (b, dt)], |g, i| {
                region(g, i, &chain, RegionPrologue::ResizeNearest2x)
            })
        };
        for dt in FLOATS64 {
            parity(&format!("resize + {b:?}"), &build, &feeds, dt);
        }
    }
    let x: &[usize] = &[1, 4, 33, 17];
    let feeds = vec![normal(&mut rng, "x0", x)];
    let build = |dt| {
        graph(&[(x, dt)], |g, i| {
            region(
                g,
                i,
                &[S::Activation(Activation::Sigmoid, Input(0))],
                RegionPrologue::ResizeNearest2x,
            )
        })
    };
    for dt in FLOATS64 {
        parity("resize alone", &build, &feeds, dt);
    }
}

#[test]
fn batch_region_samples_and_shared_inputs() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("batch_region_samples_and_shared_inputs");
    let chain = vec![
        S::Binary(BinaryOp::Sub, Input(0), Input(1)),
        S::Binary(BinaryOp::Mul, Step(0), Input(2)),
    ];
    // (samples, sample dims, shared mean dims, prologue); 70 samples take two launches.
    let cases: [(usize, &[usize], &[usize], RegionPrologue); 4] = [
        (3, &[1, 4, 6, 5], &[4, 1, 1], NONE),
        (
            2,
            &[1, 4, 3, 5],
            &[4, 1, 1],
            RegionPrologue::ResizeNearest2x,
        ),
        (70, &[1, 4, 33], &[4, 1], NONE),
        (1, &[1, 129], &[129], NONE),
    ];
    for (nb, s, m, prologue) in cases {
        let mut feeds: Vec<Feed> = (0..nb)
            .map(|k| normal(&mut rng, &format!("s{k}"), s))
            .collect();
        feeds.push(normal(&mut rng, "mean", m));
        feeds.push(feed("scale", &[1], vec![rng.range(0.5, 2.0)]));
        let build = |dt| {
            let mut g = Graph::new("batch");
            let mut ins: Vec<NodeId> = (0..nb)
                .map(|k| input(&mut g, &format!("s{k}"), s, dt))
                .collect();
            ins.push(input(&mut g, "mean", m, dt));
            ins.push(input(&mut g, "scale", &[1], dt));
            let y = g
                .batch_elementwise_region(&ins, chain.clone(), nb, prologue)
                .unwrap();
            g.set_outputs(vec![y]);
            g
        };
        for dt in FLOATS64 {
            parity(
                &format!("batch x{nb} {s:?} {prologue:?}"),
                &build,
                &feeds,
                dt,
            );
        }
    }
}

#[test]
fn swiglu_halves_and_casts() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("swiglu_halves_and_casts");
    for dims in [&[7usize, 66][..], &[1, 2], &[3, 5, 258]] {
        let feeds = vec![normal(&mut rng, "x0", dims)];
        for gate_first in [false, true] {
            for dt in FLOATS64 {
                for cast_to in [None, Some(DType::F32), Some(DType::F16), Some(DType::F64)] {
                    let build = move |_: DType| {
                        graph(&[(dims, dt)], |g, x| {
                            g.swiglu(x[0], gate_first, cast_to).unwrap()
                        })
                    };
                    let t = tol_dtype(dt, cast_to.unwrap_or(dt));
                    parity(
                        &format!("swiglu {dims:?} {dt} -> {cast_to:?} gate_first {gate_first}"),
                        &build,
                        &feeds,
                        t,
                    );
                }
            }
        }
    }
}

#[test]
fn big_region_and_swiglu() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("big_region_and_swiglu");
    let (a, b): (&[usize], &[usize]) = (&[64, 257, 257], &[257]);
    let feeds = vec![normal(&mut rng, "x0", a), normal(&mut rng, "x1", b)];
    let chain = [
        S::Binary(BinaryOp::Mul, Input(0), Input(1)),
        S::Activation(Activation::GeluApprox, Step(0)),
        S::Binary(BinaryOp::Add, Step(1), Input(0)),
    ];
    let build = |dt| graph(&[(a, dt), (b, dt)], |g, x| region(g, x, &chain, NONE));
    for dt in [DType::F32, DType::BF16] {
        parity("big region", &build, &feeds, dt);
    }
    let d: &[usize] = &[1024, 8192];
    let feeds = vec![normal(&mut rng, "x0", d)];
    let build = |dt| graph(&[(d, dt)], |g, x| g.swiglu(x[0], false, None).unwrap());
    for dt in [DType::F32, DType::F16] {
        parity("big swiglu", &build, &feeds, dt);
    }
}
