//! Oracle tests of the elementwise group: the per-op cases (Activation, Binary, Compare,
//! Where, Cast, StopGradient) come from rlx-testutil's case table, run here against their
//! f64 oracles; below them the tests that are not per-op cases (tails, NaN, wrapping casts,
//! bad builds, a composed graph).
mod common;
use common::*;
use rlx_ir::{Activation, BinaryOp, CompareOp, DType, Graph, HostTensor, Shape};
use rlx_testutil::cases::elementwise::{act_ref, binary_ref_f};
use rlx_testutil::cases::src_index;
use rlx_testutil::run::cpu;
use rlx_testutil::run::cpu::assert_exact as exact;

rlx_testutil::case_tests!(elementwise, cpu);

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
