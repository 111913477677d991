//! Oracle tests: Activation, Binary, Compare, Where, Cast, StopGradient.
mod common;
use common::*;
use rlx_ir::{Activation, BinaryOp, CompareOp, DType, Graph, HostTensor, Shape};
use std::f64::consts::{PI, SQRT_2};

const FLOATS: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];
const INTS: [DType; 3] = [DType::I32, DType::I64, DType::U8];
const BINARY: [BinaryOp; 7] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
    BinaryOp::Max,
    BinaryOp::Min,
    BinaryOp::Pow,
];
const COMPARE: [CompareOp; 6] = [
    CompareOp::Eq,
    CompareOp::Ne,
    CompareOp::Lt,
    CompareOp::Le,
    CompareOp::Gt,
    CompareOp::Ge,
];
/// (a, b, broadcast result): rank 0, size-1 dims, odd sizes, equal shapes.
const PAIRS: [(Dims, Dims, Dims); 6] = [
    (&[3, 1, 5], &[4, 1], &[3, 4, 5]),
    (&[], &[2, 3], &[2, 3]),
    (&[6, 1], &[], &[6, 1]),
    (&[1, 9], &[5, 1], &[5, 9]),
    (&[2, 3, 7], &[2, 3, 7], &[2, 3, 7]),
    (&[1], &[1, 1, 11], &[1, 1, 11]),
];

/// erf from its everywhere-convergent series erf(x) = 2/√π · e^{-x²} · Σ_n x (2x²)^n / (2n+1)!!;
/// every term is positive, so there is no cancellation (good to ~1e-15 for |x| ≤ 6).
fn erf(x: f64) -> f64 {
    if x.abs() > 6.0 {
        return x.signum();
    }
    let x2 = x * x;
    let (mut term, mut sum) = (x, x);
    for n in 1..1000 {
        term *= 2.0 * x2 / (2 * n + 1) as f64;
        sum += term;
        if term.abs() <= 1e-18 * sum.abs() {
            break;
        }
    }
    2.0 / PI.sqrt() * (-x2).exp() * sum
}

/// erfc for z ≥ 2 from its continued fraction
/// erfc z = e^{-z²}/√π · 1/(z + (1/2)/(z + 1/(z + (3/2)/(z + …)))), evaluated bottom-up;
/// unlike 1 − erf it keeps full relative precision in the tail.
fn erfc_tail(z: f64) -> f64 {
    let mut f = z;
    for n in (1..=400).rev() {
        f = z + (n as f64 / 2.0) / f;
    }
    (-z * z).exp() / PI.sqrt() / f
}

/// Φ-based GELU, x·(1 + erf(x/√2))/2, switching to erfc where 1 + erf would cancel.
fn gelu_ref(x: f64) -> f64 {
    let z = x / SQRT_2;
    if z < -2.0 {
        0.5 * x * erfc_tail(-z)
    } else {
        0.5 * x * (1.0 + erf(z))
    }
}

#[test]
fn oracle_erf_matches_tabulated_values() {
    for (z, want) in [
        (2.0, 4.677_734_981_047_266e-3),
        (3.0, 2.209_049_699_858_544e-5),
        (5.0, 1.537_459_794_428_035e-12),
    ] {
        let got = erfc_tail(z);
        assert!(((got - want) / want).abs() < 1e-13, "erfc({z}) = {got}");
        assert!((1.0 - erf(z) - want).abs() < 1e-15, "erf({z})");
    }
    // Abramowitz & Stegun table 7.1 / high-precision references.
    for (x, want) in [
        (0.5, 0.520_499_877_813_046_5),
        (1.0, 0.842_700_792_949_714_9),
        (2.0, 0.995_322_265_018_952_7),
        (-1.5, -0.966_105_146_475_310_7),
        (3.0, 0.999_977_909_503_001_4),
    ] {
        assert!((erf(x) - want).abs() < 1e-14, "erf({x}) = {}", erf(x));
    }
}

fn act_ref(a: Activation, x: f64) -> f64 {
    match a {
        Activation::Gelu => gelu_ref(x),
        // 0.5·x·(1 + tanh u) = x / (1 + e^{-2u}); the second form does not cancel for x < 0.
        Activation::GeluApprox => {
            let u = (2.0 / PI).sqrt() * (x + 0.044715 * x * x * x);
            x / (1.0 + (-2.0 * u).exp())
        }
        Activation::Silu => x / (1.0 + (-x).exp()),
        Activation::Relu => x.max(0.0),
        Activation::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        Activation::Tanh => x.tanh(),
        Activation::Exp => x.exp(),
        Activation::Log => x.ln(),
        Activation::Sqrt => x.sqrt(),
        Activation::Rsqrt => 1.0 / x.sqrt(),
        Activation::Neg => -x,
        Activation::Abs => x.abs(),
        Activation::Sin => x.sin(),
        Activation::Cos => x.cos(),
        Activation::Erf => erf(x),
        Activation::Softplus => (1.0 + x.exp()).ln(),
        Activation::Recip => 1.0 / x,
        Activation::Square => x * x,
    }
}

/// Inputs inside each function's domain (positive for Log/Sqrt/Rsqrt, away from 0 for Recip).
fn act_inputs(a: Activation, rng: &mut Rng, n: usize) -> Vec<f64> {
    match a {
        Activation::Log | Activation::Sqrt | Activation::Rsqrt => rng.uniforms(n, 0.1, 5.0),
        Activation::Recip => (0..n)
            .map(|_| {
                let s = if rng.below(2) == 0 { -1.0 } else { 1.0 };
                s * rng.range(0.25, 4.0)
            })
            .collect(),
        _ => (0..n).map(|_| 2.0 * rng.normal()).collect(),
    }
}

/// Flat index into an input of `ins` broadcast to `out`, for output element `k`.
fn src_index(ins: &[usize], out: &[usize], k: usize) -> usize {
    let mut idx = vec![0; out.len()];
    let mut rem = k;
    for d in (0..out.len()).rev() {
        idx[d] = rem % out[d];
        rem /= out[d];
    }
    let off = out.len() - ins.len();
    let mut s = 0;
    for i in 0..ins.len() {
        let j = if ins[i] == 1 { 0 } else { idx[i + off] };
        s = s * ins[i] + j;
    }
    s
}

/// A shape written inline in a case table.
type Dims = &'static [usize];

fn numel(s: &[usize]) -> usize {
    s.iter().product()
}

fn exact(what: &str, got: &HostTensor, want: &[f64]) {
    let g = got.to_f64_vec();
    assert_eq!(g.len(), want.len(), "{what}: length");
    for (k, (a, b)) in g.iter().zip(want).enumerate() {
        assert!(a == b, "{what}: element {k} got {a} want {b}");
    }
}

#[test]
fn every_activation_matches_f64_oracle() {
    let mut rng = Rng::new("every_activation");
    let shapes: [&[usize]; 4] = [&[], &[1], &[13], &[3, 1, 7]];
    for act in Activation::ALL {
        for dt in FLOATS {
            for shape in shapes {
                let x = through(dt, &act_inputs(act, &mut rng, numel(shape)));
                let mut g = Graph::new("act");
                let xi = g.input("x", Shape::new(shape, dt)).unwrap();
                let y = g.activation(act, xi).unwrap();
                g.set_outputs(vec![y]);
                let out = run(&g, &[("x", HostTensor::from_f64_as(shape, &x, dt))], &[]);
                assert_eq!(out[0].shape, shape);
                assert_eq!(out[0].dtype, dt);
                // Rounded into the output dtype: f16 subnormal results hold only a few bits.
                let want: Vec<f64> =
                    through(dt, &x.iter().map(|&v| act_ref(act, v)).collect::<Vec<_>>());
                assert_close(&format!("{act:?} {dt} {shape:?}"), &out[0], &want, dt);
            }
        }
    }
}

#[test]
fn activations_stay_accurate_in_the_tails() {
    let mut rng = Rng::new("activation_tails");
    let x: Vec<f64> = (0..17)
        .map(|_| {
            let s = if rng.below(2) == 0 { -1.0 } else { 1.0 };
            s * rng.range(15.0, 30.0)
        })
        .collect();
    for act in [Activation::Softplus, Activation::Gelu, Activation::Sigmoid] {
        let mut g = Graph::new("tails");
        let xi = g.input("x", Shape::new(&[17], DType::F64)).unwrap();
        let y = g.activation(act, xi).unwrap();
        g.set_outputs(vec![y]);
        let out = run(&g, &[("x", HostTensor::from_f64(&[17], &x))], &[]);
        let got = out[0].to_f64_vec();
        for (k, &v) in x.iter().enumerate() {
            // Tails where the plain formulas lose nothing in f64 (x > 0 side) or where the
            // value is known analytically to double precision.
            let want = match act {
                Activation::Softplus if v > 0.0 => v + (-v).exp().ln_1p(),
                Activation::Softplus => v.exp().ln_1p(),
                Activation::Gelu if v > 0.0 => v,
                Activation::Gelu => 0.0,
                _ => act_ref(act, v),
            };
            let err = (got[k] - want).abs();
            let scale = want.abs().max(1e-300);
            let ok = if act == Activation::Gelu && v < 0.0 {
                err < 1e-40
            } else {
                err / scale < 1e-12
            };
            assert!(ok, "{act:?}({v}) = {} want {want}", got[k]);
        }
    }
}

fn binary_ref_f(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Max => a.max(b),
        BinaryOp::Min => a.min(b),
        BinaryOp::Pow => a.powf(b),
    }
}

/// Integer semantics: wrap to the dtype's width, division truncates toward zero.
fn binary_ref_i(op: BinaryOp, a: i64, b: i64, dt: DType) -> f64 {
    let v = match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Max => a.max(b),
        BinaryOp::Min => a.min(b),
        BinaryOp::Pow => (0..b).fold(1i64, |acc, _| acc * a),
    };
    match dt {
        DType::U8 => v.rem_euclid(256) as f64,
        _ => v as f64,
    }
}

fn signed_away_from_zero(rng: &mut Rng, lo: f64, hi: f64) -> f64 {
    let s = if rng.below(2) == 0 { -1.0 } else { 1.0 };
    s * rng.range(lo, hi)
}

fn binary_operands(
    op: BinaryOp,
    dt: DType,
    rng: &mut Rng,
    na: usize,
    nb: usize,
) -> (Vec<f64>, Vec<f64>) {
    let gen = |rng: &mut Rng, n: usize, f: &dyn Fn(&mut Rng) -> f64| -> Vec<f64> {
        (0..n).map(|_| f(rng)).collect()
    };
    let (a, b) = match (dt, op) {
        (DType::U8, BinaryOp::Div) => (
            gen(rng, na, &|r| r.below(256) as f64),
            gen(rng, nb, &|r| 1.0 + r.below(255) as f64),
        ),
        (DType::U8, BinaryOp::Pow) => (
            gen(rng, na, &|r| r.below(9) as f64),
            gen(rng, nb, &|r| r.below(4) as f64),
        ),
        (DType::U8, _) => (
            gen(rng, na, &|r| r.below(256) as f64),
            gen(rng, nb, &|r| r.below(256) as f64),
        ),
        (_, BinaryOp::Div) if dt.is_int() => (
            gen(rng, na, &|r| r.range(-1000.0, 1000.0).trunc()),
            gen(rng, nb, &|r| signed_away_from_zero(r, 1.0, 50.0).trunc()),
        ),
        (_, BinaryOp::Pow) if dt.is_int() => (
            gen(rng, na, &|r| r.below(13) as f64 - 6.0),
            gen(rng, nb, &|r| r.below(6) as f64),
        ),
        _ if dt.is_int() => (
            gen(rng, na, &|r| r.range(-1000.0, 1000.0).trunc()),
            gen(rng, nb, &|r| r.range(-1000.0, 1000.0).trunc()),
        ),
        (_, BinaryOp::Div) => (
            gen(rng, na, &|r| r.normal()),
            gen(rng, nb, &|r| signed_away_from_zero(r, 0.5, 2.0)),
        ),
        (_, BinaryOp::Pow) => (
            gen(rng, na, &|r| r.range(0.2, 3.0)),
            gen(rng, nb, &|r| r.range(-2.0, 2.0)),
        ),
        _ => (gen(rng, na, &|r| r.normal()), gen(rng, nb, &|r| r.normal())),
    };
    (through(dt, &a), through(dt, &b))
}

#[test]
fn every_binary_op_broadcasts_against_oracle() {
    let mut rng = Rng::new("every_binary_op");
    for op in BINARY {
        for dt in FLOATS.into_iter().chain(INTS) {
            for (sa, sb, so) in PAIRS {
                let (a, b) = binary_operands(op, dt, &mut rng, numel(sa), numel(sb));
                let mut g = Graph::new("bin");
                let x = g.input("a", Shape::new(sa, dt)).unwrap();
                let y = g.input("b", Shape::new(sb, dt)).unwrap();
                let z = g.binary(op, x, y).unwrap();
                g.set_outputs(vec![z]);
                let out = run(
                    &g,
                    &[
                        ("a", HostTensor::from_f64_as(sa, &a, dt)),
                        ("b", HostTensor::from_f64_as(sb, &b, dt)),
                    ],
                    &[],
                );
                assert_eq!(out[0].shape, so);
                assert_eq!(out[0].dtype, dt);
                let want: Vec<f64> = (0..numel(so))
                    .map(|k| {
                        let (u, v) = (a[src_index(sa, so, k)], b[src_index(sb, so, k)]);
                        // Rounded into the output dtype (half results can be subnormal).
                        if dt.is_int() {
                            binary_ref_i(op, u as i64, v as i64, dt)
                        } else {
                            through(dt, &[binary_ref_f(op, u, v)])[0]
                        }
                    })
                    .collect();
                let what = format!("{op:?} {dt} {sa:?} {sb:?}");
                if dt.is_int() {
                    exact(&what, &out[0], &want);
                } else {
                    assert_close(&what, &out[0], &want, dt);
                }
            }
        }
    }
}

#[test]
fn max_and_min_propagate_nan() {
    let mut rng = Rng::new("max_min_nan");
    let a: Vec<f64> = (0..7)
        .map(|k| if k % 3 == 0 { f64::NAN } else { rng.normal() })
        .collect();
    let b = rng.normals(7);
    for op in [BinaryOp::Max, BinaryOp::Min] {
        for dt in [DType::F32, DType::F64] {
            let mut g = Graph::new("nan");
            let x = g.input("a", Shape::new(&[7], dt)).unwrap();
            let y = g.input("b", Shape::new(&[7], dt)).unwrap();
            let z = g.binary(op, x, y).unwrap();
            g.set_outputs(vec![z]);
            let out = run(
                &g,
                &[
                    ("a", HostTensor::from_f64_as(&[7], &a, dt)),
                    ("b", HostTensor::from_f64_as(&[7], &b, dt)),
                ],
                &[],
            );
            for (k, v) in out[0].to_f64_vec().into_iter().enumerate() {
                let want = binary_ref_f(op, through(dt, &[a[k]])[0], through(dt, &[b[k]])[0]);
                if a[k].is_nan() {
                    assert!(v.is_nan(), "{op:?} {dt} element {k}: got {v}, want NaN");
                } else {
                    assert_eq!(v, want, "{op:?} {dt} element {k}");
                }
            }
        }
    }
}

/// Values from a small grid so that equal pairs occur.
fn grid(dt: DType, rng: &mut Rng, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| match dt {
            DType::Bool => rng.below(2) as f64,
            DType::U8 => rng.below(7) as f64,
            _ if dt.is_int() => rng.below(7) as f64 - 3.0,
            _ => (rng.below(7) as f64 - 3.0) * 0.75,
        })
        .collect()
}

fn compare_ref(op: CompareOp, a: f64, b: f64) -> bool {
    match op {
        CompareOp::Eq => a == b,
        CompareOp::Ne => a != b,
        CompareOp::Lt => a < b,
        CompareOp::Le => a <= b,
        CompareOp::Gt => a > b,
        CompareOp::Ge => a >= b,
    }
}

#[test]
fn every_compare_op_on_every_dtype() {
    let mut rng = Rng::new("every_compare_op");
    for op in COMPARE {
        for dt in DType::ALL {
            for (sa, sb, so) in PAIRS {
                let a = grid(dt, &mut rng, numel(sa));
                let b = grid(dt, &mut rng, numel(sb));
                let mut g = Graph::new("cmp");
                let x = g.input("a", Shape::new(sa, dt)).unwrap();
                let y = g.input("b", Shape::new(sb, dt)).unwrap();
                let z = g.add_node(rlx_ir::Op::Compare(op), &[x, y]).unwrap();
                g.set_outputs(vec![z]);
                let out = run(
                    &g,
                    &[
                        ("a", HostTensor::from_f64_as(sa, &a, dt)),
                        ("b", HostTensor::from_f64_as(sb, &b, dt)),
                    ],
                    &[],
                );
                assert_eq!(out[0].dtype, DType::Bool);
                assert_eq!(out[0].shape, so);
                let want: Vec<f64> = (0..numel(so))
                    .map(|k| {
                        compare_ref(op, a[src_index(sa, so, k)], b[src_index(sb, so, k)]) as u8
                            as f64
                    })
                    .collect();
                exact(&format!("{op:?} {dt} {sa:?} {sb:?}"), &out[0], &want);
            }
        }
    }
}

#[test]
fn where_selects_with_broadcast_and_any_condition_dtype() {
    let mut rng = Rng::new("where_broadcast");
    let triples: [(Dims, Dims, Dims, Dims); 4] = [
        (&[3, 1, 5], &[4, 1], &[], &[3, 4, 5]),
        (&[], &[2, 7], &[2, 1], &[2, 7]),
        (&[1, 6], &[6], &[5, 1], &[5, 6]),
        (&[9], &[9], &[9], &[9]),
    ];
    for cdt in [DType::Bool, DType::F32, DType::I32] {
        for dt in DType::ALL {
            for (sc, sa, sb, so) in triples {
                let c = grid(cdt, &mut rng, numel(sc));
                let a = through(dt, &grid(dt, &mut rng, numel(sa)));
                let b = through(dt, &rng.uniforms(numel(sb), 0.0, 200.0));
                let b = if dt.is_float() {
                    b
                } else {
                    b.iter().map(|v| v.trunc()).collect()
                };
                let b = through(dt, &b);
                let mut g = Graph::new("where");
                let ci = g.input("c", Shape::new(sc, cdt)).unwrap();
                let ai = g.input("a", Shape::new(sa, dt)).unwrap();
                let bi = g.input("b", Shape::new(sb, dt)).unwrap();
                let w = g.add_node(rlx_ir::Op::Where, &[ci, ai, bi]).unwrap();
                g.set_outputs(vec![w]);
                let out = run(
                    &g,
                    &[
                        ("c", HostTensor::from_f64_as(sc, &c, cdt)),
                        ("a", HostTensor::from_f64_as(sa, &a, dt)),
                        ("b", HostTensor::from_f64_as(sb, &b, dt)),
                    ],
                    &[],
                );
                assert_eq!(out[0].shape, so);
                let want: Vec<f64> = (0..numel(so))
                    .map(|k| {
                        if c[src_index(sc, so, k)] != 0.0 {
                            a[src_index(sa, so, k)]
                        } else {
                            b[src_index(sb, so, k)]
                        }
                    })
                    .collect();
                exact(&format!("where {cdt}->{dt} {sc:?}"), &out[0], &want);
            }
        }
    }
}

/// Source values for a cast, with some exact zeros so a cast to bool sees both outcomes.
fn cast_source(from: DType, to: DType, rng: &mut Rng, n: usize) -> Vec<f64> {
    let v: Vec<f64> = (0..n)
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
        .collect();
    through(from, &v)
}

fn cast_ref(from: DType, to: DType, v: f64) -> f64 {
    match to {
        DType::Bool => (v != 0.0) as u8 as f64,
        DType::U8 => (v.trunc() as i64).rem_euclid(256) as f64,
        DType::I32 | DType::I64 => v.trunc(),
        DType::F64 => v,
        DType::F32 => v as f32 as f64,
        // Non-f64 sources are exact in f32; an f64 source rounds once, as storage does.
        DType::F16 if from != DType::F64 => half::f16::from_f32(v as f32).to_f64(),
        DType::BF16 if from != DType::F64 => half::bf16::from_f32(v as f32).to_f64(),
        _ => through(to, &[v])[0],
    }
}

#[test]
fn cast_between_every_dtype_pair() {
    let mut rng = Rng::new("cast_every_pair");
    for from in DType::ALL {
        for to in DType::ALL {
            for shape in [&[2usize, 7][..], &[]] {
                let x = cast_source(from, to, &mut rng, numel(shape));
                let mut g = Graph::new("cast");
                let xi = g.input("x", Shape::new(shape, from)).unwrap();
                let y = g.cast(xi, to).unwrap();
                g.set_outputs(vec![y]);
                let out = run(&g, &[("x", HostTensor::from_f64_as(shape, &x, from))], &[]);
                assert_eq!(out[0].dtype, to);
                assert_eq!(out[0].shape, shape);
                let want: Vec<f64> = x.iter().map(|&v| cast_ref(from, to, v)).collect();
                exact(&format!("cast {from}->{to}"), &out[0], &want);
            }
        }
    }
}

#[test]
fn cast_to_narrow_integers_wraps() {
    let mut rng = Rng::new("cast_wraps");
    let x: Vec<f64> = (0..11).map(|_| rng.range(-3e9, 3e9).trunc()).collect();
    for to in [DType::I32, DType::U8] {
        let mut g = Graph::new("wrap");
        let xi = g.input("x", Shape::new(&[11], DType::I64)).unwrap();
        let y = g.cast(xi, to).unwrap();
        g.set_outputs(vec![y]);
        let out = run(
            &g,
            &[("x", HostTensor::from_f64_as(&[11], &x, DType::I64))],
            &[],
        );
        let m = if to == DType::U8 {
            1i64 << 8
        } else {
            1i64 << 32
        };
        let want: Vec<f64> = x
            .iter()
            .map(|&v| {
                let r = (v as i64).rem_euclid(m);
                if to == DType::I32 && r >= m / 2 {
                    (r - m) as f64
                } else {
                    r as f64
                }
            })
            .collect();
        exact(&format!("i64->{to}"), &out[0], &want);
    }
}

#[test]
fn stop_gradient_is_identity_for_every_dtype() {
    let mut rng = Rng::new("stop_gradient");
    for dt in DType::ALL {
        for shape in [&[3usize, 1, 5][..], &[]] {
            let x = cast_source(dt, dt, &mut rng, numel(shape));
            let mut g = Graph::new("sg");
            let xi = g.input("x", Shape::new(shape, dt)).unwrap();
            let y = g.add_node(rlx_ir::Op::StopGradient, &[xi]).unwrap();
            g.set_outputs(vec![y]);
            let out = run(&g, &[("x", HostTensor::from_f64_as(shape, &x, dt))], &[]);
            assert_eq!(out[0].dtype, dt);
            exact(&format!("stop_gradient {dt}"), &out[0], &x);
        }
    }
}

#[test]
fn large_binary_uses_every_element() {
    // Big enough to be split across threads; odd so the last chunk is partial.
    let mut rng = Rng::new("large_binary");
    let (sa, sb, so) = ([301usize, 1, 257], [7usize, 1], [301usize, 7, 257]);
    let a = through(DType::F32, &rng.normals(numel(&sa)));
    let b = through(DType::F32, &rng.normals(numel(&sb)));
    let mut g = Graph::new("large");
    let x = g.input("a", Shape::new(&sa, DType::F32)).unwrap();
    let y = g.input("b", Shape::new(&sb, DType::F32)).unwrap();
    let z = g.mul(x, y).unwrap();
    g.set_outputs(vec![z]);
    let out = run(
        &g,
        &[
            ("a", HostTensor::from_f64_as(&sa, &a, DType::F32)),
            ("b", HostTensor::from_f64_as(&sb, &b, DType::F32)),
        ],
        &[],
    );
    let want: Vec<f64> = (0..numel(&so))
        .map(|k| a[src_index(&sa, &so, k)] * b[src_index(&sb, &so, k)])
        .collect();
    assert_close("large mul", &out[0], &want, DType::F32);
}

#[test]
fn bad_elementwise_builds_are_errors() {
    let mut g = Graph::new("bad");
    let f = g.input("f", Shape::new(&[2, 3], DType::F32)).unwrap();
    let h = g.input("h", Shape::new(&[2, 3], DType::F16)).unwrap();
    let i = g.input("i", Shape::new(&[2, 3], DType::I64)).unwrap();
    let w = g.input("w", Shape::new(&[4], DType::F32)).unwrap();
    assert!(
        g.activation(Activation::Exp, i).is_err(),
        "activation on ints"
    );
    assert!(g.add(f, h).is_err(), "dtype mismatch");
    assert!(g.add(f, w).is_err(), "broadcast mismatch");
    assert!(g
        .add_node(rlx_ir::Op::Compare(CompareOp::Lt), &[f, i])
        .is_err());
    assert!(
        g.add_node(rlx_ir::Op::Where, &[i, f, h]).is_err(),
        "where branches"
    );
    assert!(
        g.add_node(rlx_ir::Op::Where, &[i, f]).is_err(),
        "where arity"
    );
    assert!(g.add_node(rlx_ir::Op::StopGradient, &[f, f]).is_err());
}

#[test]
fn tanh_of_broadcast_sum_against_f64_oracle() {
    let mut rng = Rng::new("binary_add_broadcast");
    let (a_shape, b_shape, o_shape) = ([3usize, 1, 5], [4usize, 1], [3usize, 4, 5]);
    let a = rng.normals(15);
    let b = rng.normals(4);
    let mut g = Graph::new("add");
    let x = g.input("a", Shape::new(&a_shape, DType::F32)).unwrap();
    let y = g.input("b", Shape::new(&b_shape, DType::F32)).unwrap();
    let s = g.add(x, y).unwrap();
    let t = g.activation(Activation::Tanh, s).unwrap();
    g.set_outputs(vec![t]);
    let out = run(
        &g,
        &[
            ("a", HostTensor::from_f64_as(&a_shape, &a, DType::F32)),
            ("b", HostTensor::from_f64_as(&b_shape, &b, DType::F32)),
        ],
        &[],
    );
    let a32 = through(DType::F32, &a);
    let b32 = through(DType::F32, &b);
    let want: Vec<f64> = (0..60)
        .map(|k| {
            (a32[src_index(&a_shape, &o_shape, k)] + b32[src_index(&b_shape, &o_shape, k)]).tanh()
        })
        .collect();
    assert_eq!(out[0].shape, o_shape);
    assert_close("tanh(a+b)", &out[0], &want, DType::F32);
}

#[test]
fn activations_propagate_nan() {
    let mut rng = Rng::new("activation_nan");
    let x: Vec<f64> = (0..9)
        .map(|k| {
            if k % 4 == 1 {
                f64::NAN
            } else {
                rng.range(0.5, 2.0)
            }
        })
        .collect();
    for act in Activation::ALL {
        for dt in [DType::F32, DType::F64] {
            let mut g = Graph::new("nan");
            let xi = g.input("x", Shape::new(&[9], dt)).unwrap();
            let y = g.activation(act, xi).unwrap();
            g.set_outputs(vec![y]);
            let out = run(&g, &[("x", HostTensor::from_f64_as(&[9], &x, dt))], &[]);
            for (k, v) in out[0].to_f64_vec().into_iter().enumerate() {
                assert_eq!(v.is_nan(), x[k].is_nan(), "{act:?} {dt} element {k}: {v}");
            }
        }
    }
}
