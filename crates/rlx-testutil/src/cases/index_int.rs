//! Cases of the integer and logical elementwise ops ONNX needs: Mod (both sign rules, on
//! integers and floats), BitAnd / BitOr / BitXor (logical on Bool), the shifts, Not (as
//! `bit_not`) and integer Neg / Abs, against the oracles of `elementwise_oracle` (bitwise
//! ops evaluated bit by bit). Re-exported by `index.rs`.
use super::elementwise::graph;
use super::elementwise_oracle::{binary_ref_f, binary_ref_i};
use super::index::{fallbacks, sin};
use super::numel;
use crate::case::{Case, Draw, Input};
use rlx_ir::{Activation, BinaryOp, DType};

// ---- integer and bitwise binary ops ----

pub fn int_binary() -> Vec<Case> {
    let mut cases = vec![];
    let dims: &'static [usize] = &[3, 4];
    let bdims: &'static [usize] = &[4];
    let mods = [BinaryOp::Mod { fmod: false }, BinaryOp::Mod { fmod: true }];
    let bits = [BinaryOp::BitAnd, BinaryOp::BitOr, BinaryOp::BitXor];
    let shifts = [BinaryOp::ShiftLeft, BinaryOp::ShiftRight];
    type B = (BinaryOp, DType, Draw, Draw);
    let mut table: Vec<B> = vec![];
    for op in mods {
        table.push((op, DType::I64, Draw::Ints(-40, 40), Draw::Signed(1.0, 9.0)));
        table.push((op, DType::I32, Draw::Ints(-40, 40), Draw::Ints(-7, 7)));
        table.push((op, DType::U8, Draw::Ints(0, 255), Draw::Ints(0, 9)));
        table.push((op, DType::F32, Draw::Normal(5.0), Draw::Signed(0.5, 3.0)));
        table.push((op, DType::F64, Draw::Normal(5.0), Draw::Signed(0.5, 3.0)));
    }
    for op in bits {
        table.push((
            op,
            DType::I64,
            Draw::Ints(-1000, 1000),
            Draw::Ints(-1000, 1000),
        ));
        table.push((
            op,
            DType::I32,
            Draw::Ints(-1000, 1000),
            Draw::Ints(-1000, 1000),
        ));
        table.push((op, DType::U8, Draw::Ints(0, 255), Draw::Ints(0, 255)));
        table.push((op, DType::Bool, Draw::Ints(0, 1), Draw::Ints(0, 1)));
    }
    for op in shifts {
        table.push((op, DType::U8, Draw::Ints(0, 255), Draw::Ints(0, 9)));
        table.push((op, DType::I32, Draw::Ints(-500, 500), Draw::Ints(0, 33)));
        table.push((op, DType::I64, Draw::Ints(-500, 500), Draw::Ints(0, 65)));
    }
    for (op, dt, da, db) in table {
        // Integer draws of Signed are whole divisors of either sign.
        let db = match (dt.is_int(), db) {
            (true, Draw::Signed(lo, hi)) => Draw::custom(move |rng, n, _| {
                (0..n)
                    .map(|_| {
                        let m = (lo + rng.below((hi - lo) as usize + 1) as f64).round();
                        if rng.chance(0.5) {
                            -m
                        } else {
                            m
                        }
                    })
                    .collect()
            }),
            (_, d) => d,
        };
        let ins = vec![Input::new("a", dims, da), Input::new("b", bdims, db)];
        let c = Case::new(format!("binary {op:?} {dt}"), ins, move |d| {
            graph(&[("a", dims, d), ("b", bdims, d)], |g, x| {
                g.binary(op, x[0], x[1]).unwrap()
            })
        });
        let oracle = move |v: &[Vec<f64>], d: DType| {
            (0..numel(dims))
                .map(|k| {
                    let (a, b) = (v[0][k], v[1][k % bdims[0]]);
                    if d.is_float() {
                        binary_ref_f(op, a, b)
                    } else {
                        binary_ref_i(op, a as i64, b as i64, d)
                    }
                })
                .collect()
        };
        let c = c
            .dtypes(&[dt])
            .parity_dtypes(&[dt])
            .out(dims)
            .fallback(fallbacks())
            .no_grad()
            .oracle(oracle);
        cases.push(if dt.is_float() { c } else { c.exact() });
    }
    // Not: BitXor with all ones (−1 for integers, true for Bool).
    for dt in [DType::I32, DType::I64, DType::U8, DType::Bool] {
        let hi = if dt == DType::Bool { 1 } else { 200 };
        let c = Case::new(
            format!("bit_not {dt}"),
            vec![Input::new("a", dims, Draw::Ints(0, hi))],
            move |d| graph(&[("a", dims, d)], |g, x| g.bit_not(x[0]).unwrap()),
        );
        let oracle = move |v: &[Vec<f64>], d: DType| {
            v[0].iter()
                .map(|&a| match d {
                    DType::Bool => 1.0 - a,
                    DType::U8 => 255.0 - a,
                    _ => -a - 1.0,
                })
                .collect()
        };
        cases.push(
            c.dtypes(&[dt])
                .exact()
                .out(dims)
                .fallback(fallbacks())
                .oracle(oracle),
        );
    }
    // Neg and Abs of integers (U8 negation wraps modulo 256).
    for act in [Activation::Neg, Activation::Abs] {
        for dt in [DType::I32, DType::I64, DType::U8] {
            let (lo, hi) = if dt == DType::U8 {
                (0, 255)
            } else {
                (-1000, 1000)
            };
            let c = Case::new(
                format!("{act:?} {dt}"),
                vec![Input::new("a", dims, Draw::Ints(lo, hi))],
                move |d| graph(&[("a", dims, d)], |g, x| g.activation(act, x[0]).unwrap()),
            );
            let oracle = move |v: &[Vec<f64>], d: DType| {
                v[0].iter()
                    .map(|&a| match (act, d) {
                        (Activation::Neg, DType::U8) => (256.0 - a) % 256.0,
                        (Activation::Neg, _) => -a,
                        _ => a.abs(),
                    })
                    .collect()
            };
            cases.push(
                c.dtypes(&[dt])
                    .exact()
                    .out(dims)
                    .fallback(fallbacks())
                    .oracle(oracle),
            );
        }
    }
    // Mod's gradient in f64, off the jumps (a/b kept away from whole numbers).
    for fmod in [false, true] {
        let away = Draw::custom(|rng, n, _| {
            (0..n)
                .map(|_| {
                    let q = rng.below(9) as f64 - 4.0 + rng.range(0.15, 0.85);
                    q * 2.0
                })
                .collect()
        });
        let ins = vec![
            Input::new("a", dims, away),
            Input::new("b", bdims, Draw::Uniform(1.99, 2.01)),
        ];
        let op = BinaryOp::Mod { fmod };
        let c = Case::new(format!("grad mod fmod {fmod}"), ins, move |d| {
            graph(&[("a", dims, d), ("b", bdims, d)], |g, x| {
                let y = g.binary(op, x[0], x[1]).unwrap();
                sin(g, y)
            })
        });
        cases.push(c.wrt(&["a", "b"]).only_grad());
    }
    cases
}
