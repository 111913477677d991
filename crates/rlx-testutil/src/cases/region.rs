//! Case table of the region group: ElementwiseRegion (chains with broadcast operands, casts
//! inside a chain, compare + where, integer chains, the resize prologue) and
//! BatchElementwiseRegion (samples with shared operands), with f64 oracles that settle each
//! step into its dtype the way the executor does (FusedSwiGLU's cases are in the
//! transformer table).
//! Region ops are made by fusion and have no VJP rules: no case is gradchecked.
use super::elementwise::{graph, FLOATS};
use super::region_oracle::*;
use super::{broadcast, numel, src_index, Dims};
use crate::case::{Case, Draw, Input};
use rlx_ir::ChainOperand::{Input as In, Step};
use rlx_ir::ChainStep as S;
use rlx_ir::{Activation, BinaryOp, ChainStep, CompareOp, DType, Graph, RegionPrologue};

const NONE: RegionPrologue = RegionPrologue::None;
const RESIZE: RegionPrologue = RegionPrologue::ResizeNearest2x;

/// A name that lives as long as the table (batch regions take up to 70 sample inputs).
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// A graph of one ElementwiseRegion over inputs of the given names, dims and dtypes.
fn region_graph(
    ins: &[(&str, &[usize], DType)],
    chain: &[ChainStep],
    prologue: RegionPrologue,
) -> Graph {
    graph(ins, |g, x| {
        g.elementwise_region(x, chain.to_vec(), prologue).unwrap()
    })
}

/// Standard-normal inputs `x0, x1, ..` in the case dtype.
fn normals(dims: &[Dims]) -> Vec<Input> {
    dims.iter()
        .enumerate()
        .map(|(k, d)| Input::new(leak(format!("x{k}")), d, Draw::Normal(1.0)))
        .collect()
}

/// The leaves of `inputs` in the case dtype `dt` (fixed dtypes kept).
fn leaves(inputs: &[Input], dt: DType) -> Vec<(&str, &[usize], DType)> {
    inputs
        .iter()
        .map(|i| (i.name, &i.dims[..], i.dtype_in(dt)))
        .collect()
}

/// A region case: `f(dt, operands)` is the chain's value at one output element, given each
/// input's (broadcast) value there; with a resize prologue input 0 is upsampled first.
fn region_case(
    name: String,
    inputs: Vec<Input>,
    chain: Vec<ChainStep>,
    prologue: RegionPrologue,
    f: fn(DType, &[f64]) -> f64,
) -> Case {
    let mut dims: Vec<Vec<usize>> = inputs.iter().map(|i| i.dims.clone()).collect();
    let x0 = dims[0].clone();
    if prologue == RESIZE {
        dims[0] = doubled(&dims[0]);
    }
    let so = dims.iter().fold(vec![], |o, d| broadcast(&o, d));
    let o = so.clone();
    let ins = inputs.clone();
    Case::new(name, inputs, move |dt| {
        region_graph(&leaves(&ins, dt), &chain, prologue)
    })
    .out(&so)
    .oracle(move |v, dt| {
        let mut v = v.to_vec();
        if prologue == RESIZE {
            v[0] = upsample(&v[0], &x0);
        }
        (0..numel(&o))
            .map(|k| {
                let at: Vec<f64> = v
                    .iter()
                    .zip(&dims)
                    .map(|(x, d)| x[src_index(d, &o, k)])
                    .collect();
                f(dt, &at)
            })
            .collect()
    })
}

// ---- chains ----

/// A six-step chain over three broadcast operands, in every float dtype.
pub fn chain() -> Vec<Case> {
    let chain = vec![
        S::Binary(BinaryOp::Mul, In(0), In(1)),
        S::Binary(BinaryOp::Add, Step(0), In(2)),
        S::Activation(Activation::Silu, Step(1)),
        S::Binary(BinaryOp::Max, Step(2), In(0)),
        S::Activation(Activation::Tanh, Step(3)),
        S::Binary(BinaryOp::Sub, In(2), Step(4)),
    ];
    // Oracle shapes first, then the parity shapes (a strided 3-D broadcast, a big equal one).
    let shapes: [[Dims; 3]; 5] = [
        [&[2, 3, 5], &[5], &[]],
        [&[1, 9], &[4, 1], &[1]],
        [&[7], &[7], &[1, 1]],
        [&[7, 1, 33], &[5, 33], &[7, 5, 1]],
        [&[129, 65], &[129, 65], &[129, 65]],
    ];
    shapes
        .into_iter()
        .map(|s| {
            region_case(
                format!("chain {:?} {:?} {:?}", s[0], s[1], s[2]),
                normals(&s),
                chain.clone(),
                NONE,
                |dt, v| {
                    let t0 = r(dt, v[0] * v[1]);
                    let t1 = r(dt, t0 + v[2]);
                    let t2 = r(dt, silu(t1));
                    let t3 = t2.max(v[0]);
                    let t4 = r(dt, t3.tanh());
                    r(dt, v[2] - t4)
                },
            )
            .dtypes(&FLOATS)
        })
        .collect()
}

/// Casts inside a chain round through their dtype: each residual is exact in f32, so each
/// case compares exactly. The graphs hold fixed dtypes: parity keeps them (frozen).
pub fn casts() -> Vec<Case> {
    let d: Dims = &[3, 17];
    let f16r = |v: f64| half::f16::from_f32(v as f32).to_f64();
    let bf16r = |v: f64| half::bf16::from_f32(v as f32).to_f64();
    let residual = |to: DType| {
        vec![
            S::Cast(to, In(0)),
            S::Cast(DType::F32, Step(0)),
            S::Binary(BinaryOp::Sub, In(0), Step(1)),
        ]
    };
    let wide = || Input::new("x0", d, Draw::Normal(40.0));
    let one = |name: &str, x: Input, chain: Vec<ChainStep>, dt: DType| {
        let ins = vec![x];
        let i2 = ins.clone();
        Case::new(format!("casts {name}"), ins, move |_| {
            region_graph(&leaves(&i2, dt), &chain, NONE)
        })
        .dtypes(&[dt])
        .out(d)
        .exact()
        .frozen(DType::F32)
    };
    vec![
        one("x - f16(x)", wide(), residual(DType::F16), DType::F32).oracle(move |v, _| {
            let want: Vec<f64> = v[0].iter().map(|&x| x - f16r(x)).collect();
            assert!(want.iter().any(|&w| w != 0.0), "f16 rounding must show");
            want
        }),
        one("x - bf16(x)", wide(), residual(DType::BF16), DType::F32)
            .oracle(move |v, _| v[0].iter().map(|&x| x - bf16r(x)).collect()),
        one("x - i32(x)", wide(), residual(DType::I32), DType::F32)
            .oracle(|v, _| v[0].iter().map(|&x| x - x.trunc()).collect()),
        one(
            "f64(bf16(x))",
            wide(),
            vec![S::Cast(DType::BF16, In(0)), S::Cast(DType::F64, Step(0))],
            DType::F32,
        )
        .out_dtype(|_| DType::F64)
        .oracle(move |v, _| v[0].iter().map(|&x| bf16r(x)).collect()),
        one(
            "i64(u8(i))",
            Input::new("x0", d, Draw::Ints(-999, 999)),
            vec![S::Cast(DType::U8, In(0)), S::Cast(DType::I64, Step(0))],
            DType::I64,
        )
        .oracle(|v, _| {
            v[0].iter()
                .map(|&x| (x as i64).rem_euclid(256) as f64)
                .collect()
        }),
        one(
            "f32(bool(z))",
            Input::new(
                "x0",
                d,
                Draw::custom(|rng, n, _| {
                    (0..n)
                        .map(|_| if rng.below(3) == 0 { 0.0 } else { rng.normal() })
                        .collect()
                }),
            ),
            vec![S::Cast(DType::Bool, In(0)), S::Cast(DType::F32, Step(0))],
            DType::F32,
        )
        .oracle(|v, _| v[0].iter().map(|&x| (x != 0.0) as u8 as f64).collect()),
    ]
}

/// Compare, where (over a computed and an integer condition) and unused casts, broadcast.
/// Frozen per dtype: a comparison of rounded operands may flip against an f64 graph.
pub fn compare_where() -> Vec<Case> {
    let chain = vec![
        S::Compare(CompareOp::Gt, In(0), In(1)),
        S::Activation(Activation::Exp, In(0)),
        S::Where(Step(0), Step(1), In(2)),
        S::Cast(DType::F32, In(3)),
        S::Cast(DType::F16, Step(3)),
        S::Where(In(3), Step(2), In(1)),
        S::Binary(BinaryOp::Mul, Step(5), In(1)),
    ];
    [DType::F32, DType::F16, DType::F64]
        .into_iter()
        .map(|dt| {
            let mut ins = normals(&[&[4, 1, 6], &[5, 1], &[]]);
            ins.push(Input::new("x3", &[1, 5, 6], Draw::Ints(0, 2)).of(DType::I32));
            region_case(
                format!("compare/where {dt}"),
                ins,
                chain.clone(),
                NONE,
                |dt, v| {
                    let t2 = if v[0] > v[1] { r(dt, v[0].exp()) } else { v[2] };
                    let t5 = if v[3] != 0.0 { t2 } else { v[1] };
                    r(dt, t5 * v[1])
                },
            )
            .dtypes(&[dt])
            .frozen(dt)
        })
        .collect()
}

/// An integer chain whose i32 step wraps, a compare, and an f64 result.
pub fn integer_chain() -> Vec<Case> {
    let chain = vec![
        S::Cast(DType::I64, In(1)),
        S::Binary(BinaryOp::Mul, In(0), Step(0)),
        S::Binary(BinaryOp::Add, Step(1), In(0)),
        // Products reach ~3.6e9: the i32 step must wrap.
        S::Cast(DType::I32, Step(2)),
        S::Compare(CompareOp::Ge, Step(3), In(1)),
        S::Cast(DType::F64, Step(3)),
        S::Activation(Activation::Abs, Step(5)),
        S::Activation(Activation::Neg, Step(6)),
        S::Where(Step(4), Step(6), Step(7)),
    ];
    let ins = vec![
        Input::new("x0", &[3, 7], Draw::Ints(-59999, 59999)),
        Input::new("x1", &[7], Draw::Ints(-59999, 59999)).of(DType::I32),
    ];
    vec![
        region_case("integer chain".into(), ins, chain, NONE, |_, v| {
            let (p, q) = (v[0] as i64, v[1] as i64);
            let m = (p * q + p).rem_euclid(1 << 32);
            let w = if m >= 1 << 31 { m - (1 << 32) } else { m };
            let ab = (w as f64).abs();
            if w >= q {
                ab
            } else {
                -ab
            }
        })
        .dtypes(&[DType::I64])
        .out_dtype(|_| DType::F64)
        .exact(),
    ]
}

/// Mixed dtypes: compare -> where over an int cast -> square in f64 -> back to the float
/// dtype; and an integer result (float -> i32, times an i32 input, compare, u8 arithmetic)
/// from every float dtype.
pub fn mixed() -> Vec<Case> {
    let (a, b, c): (Dims, Dims, Dims) = (&[9, 65], &[65], &[9, 1]);
    let mut cases = vec![];
    let ins = vec![
        Input::new("x0", a, off_grid(1.0)),
        Input::new("x1", b, Draw::Ints(-1, 1)),
        Input::new("x2", c, Draw::Ints(-3, 3)).of(DType::I32),
    ];
    let i2 = ins.clone();
    cases.push(
        Case::new("mixed chain", ins, move |d| {
            let chain = vec![
                S::Compare(CompareOp::Lt, In(0), In(1)),
                S::Cast(d, In(2)),
                S::Where(Step(0), Step(1), In(0)),
                S::Cast(DType::F64, Step(2)),
                S::Binary(BinaryOp::Mul, Step(3), Step(3)),
                S::Cast(d, Step(4)),
            ];
            region_graph(&leaves(&i2, d), &chain, NONE)
        })
        .dtypes(&FLOATS)
        .out(a)
        .oracle(move |v, dt| {
            (0..numel(a))
                .map(|k| {
                    let (x, y, z) = (v[0][k], v[1][k % 65], v[2][k / 65]);
                    let w = if x < y { z } else { x };
                    r(dt, w * w)
                })
                .collect()
        }),
    );
    let chain = vec![
        S::Cast(DType::I32, In(0)),
        S::Binary(BinaryOp::Mul, Step(0), In(2)),
        S::Compare(CompareOp::Ge, Step(1), In(2)),
        S::Cast(DType::U8, Step(1)),
        S::Binary(BinaryOp::Add, Step(3), Step(3)),
        S::Where(Step(2), Step(4), Step(3)),
    ];
    for dt in FLOATS {
        let ins = vec![
            Input::new("x0", a, off_grid(40.0)),
            Input::new("x1", b, Draw::Normal(1.0)),
            Input::new("x2", c, Draw::Ints(-20, 20)).of(DType::I32),
        ];
        let (i2, ch) = (ins.clone(), chain.clone());
        cases.push(
            Case::new(format!("int chain from {dt}"), ins, move |_| {
                region_graph(&leaves(&i2, dt), &ch, NONE)
            })
            .dtypes(&[dt])
            .out(a)
            .out_dtype(|_| DType::U8)
            .frozen(DType::F32)
            .oracle(move |v, _| {
                (0..numel(a))
                    .map(|k| {
                        let (x, z) = (v[0][k].trunc() as i64, v[2][k / 65] as i64);
                        let s1 = x * z;
                        let s3 = s1.rem_euclid(256);
                        let s4 = (s3 + s3) % 256;
                        (if s1 >= z { s4 } else { s3 }) as f64
                    })
                    .collect()
            }),
        );
    }
    cases
}

// ---- the resize prologue ----

/// Input 0 upsampled nearest-2x, then a chain: with spatial broadcast, a batch of 1
/// widened by another input, a rank-5 operand, and the prologue alone.
pub fn resize() -> Vec<Case> {
    let chain4 = vec![
        S::Binary(BinaryOp::Add, In(0), In(1)),
        S::Binary(BinaryOp::Mul, Step(0), In(2)),
        S::Activation(Activation::Tanh, Step(1)),
        S::Binary(BinaryOp::Sub, Step(2), In(3)),
    ];
    let mut cases = vec![];
    // (input 0, bias, full): spatial broadcast, and a batch of 1 widened by input 2.
    let shapes: [[Dims; 3]; 3] = [
        [&[2, 3, 3, 5], &[1, 3, 1, 1], &[2, 3, 6, 10]],
        [&[1, 2, 1, 3], &[2, 1, 1], &[4, 1, 1, 6]],
        [&[1, 1, 5, 1], &[1], &[10, 1]],
    ];
    for s in shapes {
        let ins = normals(&[s[0], s[1], s[2], &[]]);
        cases.push(
            region_case(
                format!("resize {:?} {:?} {:?}", s[0], s[1], s[2]),
                ins,
                chain4.clone(),
                RESIZE,
                |dt, v| {
                    let t0 = r(dt, v[0] + v[1]);
                    let t1 = r(dt, t0 * v[2]);
                    let t2 = r(dt, t1.tanh());
                    r(dt, t2 - v[3])
                },
            )
            .dtypes(&[DType::F32, DType::F16, DType::F64]),
        );
    }
    let relu = vec![
        S::Binary(BinaryOp::Add, In(0), In(1)),
        S::Activation(Activation::Relu, Step(0)),
    ];
    let x: Dims = &[2, 3, 5, 7];
    for b in [
        &[3usize, 1, 1][..],
        &[14],
        &[2, 3, 10, 14],
        &[2, 1, 1, 1, 1],
    ] {
        cases.push(
            region_case(
                format!("resize + {b:?}"),
                normals(&[x, b]),
                relu.clone(),
                RESIZE,
                |dt, v| r(dt, v[0] + v[1]).max(0.0),
            )
            .dtypes(&FLOATS),
        );
    }
    cases.push(
        region_case(
            "resize alone".into(),
            normals(&[&[1, 4, 33, 17]]),
            vec![S::Activation(Activation::Sigmoid, In(0))],
            RESIZE,
            |dt, v| r(dt, sigmoid(v[0])),
        )
        .dtypes(&FLOATS),
    );
    cases
}

// ---- batch regions ----

/// A BatchElementwiseRegion of `nb` samples of dims `sample` (inputs `s0..`) and shared
/// inputs; `f(dt, x, shared)` is the chain at one element of a sample.
fn batch_case(
    nb: usize,
    sample: Dims,
    shared: Vec<Input>,
    chain: Vec<ChainStep>,
    prologue: RegionPrologue,
    f: fn(DType, f64, &[f64]) -> f64,
) -> Case {
    let sd = if prologue == RESIZE {
        doubled(sample)
    } else {
        sample.to_vec()
    };
    let so = shared
        .iter()
        .fold(sd.clone(), |o, i| broadcast(&o, &i.dims));
    let mut out = so.clone();
    out[0] = nb;
    let mut ins: Vec<Input> = (0..nb)
        .map(|k| Input::new(leak(format!("s{k}")), sample, Draw::Normal(1.0)))
        .collect();
    let shared_dims: Vec<Vec<usize>> = shared.iter().map(|i| i.dims.clone()).collect();
    ins.extend(shared);
    let i2 = ins.clone();
    Case::new(
        format!("batch x{nb} {sample:?} {prologue:?}"),
        ins,
        move |dt| {
            graph(&leaves(&i2, dt), |g, x| {
                g.batch_elementwise_region(x, chain.clone(), nb, prologue)
                    .unwrap()
            })
        },
    )
    .out(&out)
    .oracle(move |v, dt| {
        let mut want = vec![];
        for s in &v[..nb] {
            let xs = if prologue == RESIZE {
                upsample(s, sample)
            } else {
                s.clone()
            };
            for k in 0..numel(&so) {
                let sh: Vec<f64> = v[nb..]
                    .iter()
                    .zip(&shared_dims)
                    .map(|(x, d)| x[src_index(d, &so, k)])
                    .collect();
                want.push(f(dt, xs[src_index(&sd, &so, k)], &sh));
            }
        }
        want
    })
}

/// Samples with shared operands (broadcast and rank 0), with the resize prologue, and the
/// device's launch split (70 samples take two launches).
pub fn batch() -> Vec<Case> {
    let sig = vec![
        S::Binary(BinaryOp::Mul, In(0), In(1)),
        S::Binary(BinaryOp::Add, Step(0), In(2)),
        S::Activation(Activation::Sigmoid, Step(1)),
        S::Binary(BinaryOp::Sub, Step(2), In(0)),
    ];
    let shared = |d: &[Dims]| -> Vec<Input> {
        d.iter()
            .enumerate()
            .map(|(k, d)| Input::new(leak(format!("shared{k}")), d, Draw::Normal(1.0)))
            .collect()
    };
    let mut cases = vec![
        batch_case(
            3,
            &[1, 4, 5],
            shared(&[&[4, 1], &[]]),
            sig,
            NONE,
            |dt, x, s| {
                let t0 = r(dt, x * s[0]);
                let t1 = r(dt, t0 + s[1]);
                let t2 = r(dt, sigmoid(t1));
                r(dt, t2 - x)
            },
        )
        .dtypes(&[DType::F32, DType::BF16, DType::F64]),
        batch_case(
            2,
            &[1, 3, 2, 3],
            shared(&[&[1, 3, 1, 1]]),
            vec![
                S::Binary(BinaryOp::Add, In(0), In(1)),
                S::Activation(Activation::Silu, Step(0)),
            ],
            RESIZE,
            |dt, x, s| r(dt, silu(r(dt, x + s[0]))),
        ),
    ];
    let sub_mul = vec![
        S::Binary(BinaryOp::Sub, In(0), In(1)),
        S::Binary(BinaryOp::Mul, Step(0), In(2)),
    ];
    let parity: [(usize, Dims, Dims, RegionPrologue); 4] = [
        (3, &[1, 4, 6, 5], &[4, 1, 1], NONE),
        (2, &[1, 4, 3, 5], &[4, 1, 1], RESIZE),
        (70, &[1, 4, 33], &[4, 1], NONE),
        (1, &[1, 129], &[129], NONE),
    ];
    for (nb, s, m, prologue) in parity {
        let sh = vec![
            Input::new("mean", m, Draw::Normal(1.0)),
            Input::new("scale", &[1], Draw::Uniform(0.5, 2.0)),
        ];
        cases.push(
            batch_case(nb, s, sh, sub_mul.clone(), prologue, |dt, x, s| {
                r(dt, r(dt, x - s[0]) * s[1])
            })
            .dtypes(&FLOATS),
        );
    }
    cases
}

// ---- big regions ----

/// Regions big enough to be split across CPU threads (and a big resize).
pub fn large() -> Vec<Case> {
    let chain = vec![
        S::Binary(BinaryOp::Mul, In(0), In(1)),
        S::Binary(BinaryOp::Add, Step(0), In(0)),
        S::Activation(Activation::GeluApprox, Step(1)),
    ];
    vec![
        region_case(
            "large chain".into(),
            normals(&[&[129, 1031], &[1031]]),
            chain,
            NONE,
            |_, v| gelu_tanh(v[0] * v[1] + v[0]),
        ),
        region_case(
            "large resize".into(),
            normals(&[&[1, 8, 64, 65]]),
            vec![S::Activation(Activation::Square, In(0))],
            RESIZE,
            |_, v| v[0] * v[0],
        )
        .out(&[1, 8, 128, 130]),
    ]
}

/// A big region on the device's gridded launch path: parity only.
pub fn big() -> Vec<Case> {
    let chain = vec![
        S::Binary(BinaryOp::Mul, In(0), In(1)),
        S::Activation(Activation::GeluApprox, Step(0)),
        S::Binary(BinaryOp::Add, Step(1), In(0)),
    ];
    let ins = normals(&[&[64, 257, 257], &[257]]);
    let i2 = ins.clone();
    vec![Case::new("big region", ins, move |dt| {
        region_graph(&leaves(&i2, dt), &chain, NONE)
    })
    .dtypes(&[DType::F32, DType::BF16])
    .only_parity()]
}
