//! wgpu parity of the integer and logical elementwise ops: the index group's `int_binary`
//! cases (Mod in both sign rules on integers and floats, the bitwise ops, shifts, Not,
//! integer Neg / Abs) with no fallback allowed but the portable-WGSL ones (i64, f64),
//! plus the edges those draws do not reach: shifts by negative and out-of-width amounts,
//! Mod by 0 and -1 and of i32::MIN, u8 wrapping, and exact float fmod (huge quotients,
//! subnormals, infinities, a zero divisor) compared bit for bit.
mod common;
use common::*;
use rlx_ir::{Activation, BinaryOp, DType, Graph, Shape};

#[test]
fn int_binary_lowered() {
    let mut cases = rlx_testutil::cases::index::int_binary();
    for c in &mut cases {
        c.fallback = OpKindSet::empty();
    }
    wgpu::check("index::int_binary", &cases);
}

/// `a op b` over every pair of `xs` × `ys` (a `[n, 1]` against `[m]`, broadcast).
fn pairs(op: BinaryOp, dt: DType, xs: &[f64], ys: &[f64]) -> (Graph, Vec<Feed>) {
    let (n, m) = (xs.len(), ys.len());
    let mut g = Graph::new("int_ops");
    let a = g.input("a", Shape::new(&[n, 1], dt)).unwrap();
    let b = g.input("b", Shape::new(&[m], dt)).unwrap();
    let y = g.binary(op, a, b).unwrap();
    g.set_outputs(vec![y]);
    let feeds = vec![
        feed("a", &[n, 1], xs.to_vec()),
        feed("b", &[m], ys.to_vec()),
    ];
    (g, feeds)
}

/// GPU against the CPU, exactly (NaN matching NaN, zeros by sign), no fallback allowed.
fn exact(what: &str, g: &Graph, feeds: &[Feed]) {
    let mut exe = rlx_wgpu::WgpuExecutable::new(g.clone(), 0, rlx_wgpu::WgpuOptions::default())
        .expect("wgpu compile");
    let got = run_gpu_exe(&mut exe, g, feeds);
    for (id, kind, reason) in exe.dispatch() {
        assert!(
            reason.is_none(),
            "{what}: node {id} ({kind}) fell back: {reason:?}"
        );
    }
    let want = run_cpu(g, feeds);
    let (a, b) = (&got[0], &want[0]);
    assert_eq!(a.shape, b.shape, "{what}: shape");
    if a.dtype.is_float() {
        let key = |v: f32| if v.is_nan() { u32::MAX } else { v.to_bits() };
        let (x, y) = (a.to_f32_vec(), b.to_f32_vec());
        // Every mismatch, with its operands, so one device run shows the whole pattern.
        let operands = |i: usize| match feeds {
            [(_, _, xs), (_, _, ys)] => format!("{:e} op {:e}", xs[i / ys.len()], ys[i % ys.len()]),
            _ => String::new(),
        };
        let bad: Vec<String> = x
            .iter()
            .zip(&y)
            .enumerate()
            .filter(|(_, (p, q))| key(**p) != key(**q))
            .map(|(i, (p, q))| {
                let on = operands(i);
                format!("  [{i}] {on}: GPU {p:e} ({:#010x}), CPU {q:e}", p.to_bits())
            })
            .collect();
        assert!(
            bad.is_empty(),
            "{what}: {} of {} differ:\n{}",
            bad.len(),
            x.len(),
            bad.join("\n")
        );
    } else {
        assert_eq!(a.to_i64_vec(), b.to_i64_vec(), "{what}");
    }
}

#[test]
fn int_op_edges() {
    if !gpu() {
        return;
    }
    let min = i32::MIN as f64;
    let max = i32::MAX as f64;
    let i32s = [
        min,
        min + 1.0,
        -1000.0,
        -7.0,
        -1.0,
        0.0,
        1.0,
        5.0,
        77.0,
        max - 1.0,
        max,
    ];
    let amounts = [
        -65.0, -33.0, -1.0, 0.0, 1.0, 7.0, 8.0, 9.0, 31.0, 32.0, 33.0, 63.0, 64.0, 100.0,
    ];
    let mods = [min, -7.0, -3.0, -1.0, 0.0, 1.0, 2.0, 3.0, 7.0, 1000.0, max];
    let u8s = [0.0, 1.0, 2.0, 7.0, 100.0, 127.0, 128.0, 200.0, 255.0];
    let u8_amounts = [
        0.0, 1.0, 3.0, 7.0, 8.0, 9.0, 31.0, 32.0, 33.0, 64.0, 200.0, 255.0,
    ];
    for op in [BinaryOp::ShiftLeft, BinaryOp::ShiftRight] {
        let (g, f) = pairs(op, DType::I32, &i32s, &amounts);
        exact(&format!("{op:?} i32"), &g, &f);
        let (g, f) = pairs(op, DType::U8, &u8s, &u8_amounts);
        exact(&format!("{op:?} u8"), &g, &f);
        let (g, f) = pairs(op, DType::Bool, &[0.0, 1.0], &[0.0, 1.0]);
        exact(&format!("{op:?} bool"), &g, &f);
    }
    for fmod in [false, true] {
        let op = BinaryOp::Mod { fmod };
        let (g, f) = pairs(op, DType::I32, &i32s, &mods);
        exact(&format!("{op:?} i32"), &g, &f);
        let (g, f) = pairs(op, DType::U8, &u8s, &u8s);
        exact(&format!("{op:?} u8"), &g, &f);
    }
    for op in [BinaryOp::BitAnd, BinaryOp::BitOr, BinaryOp::BitXor] {
        let (g, f) = pairs(op, DType::I32, &i32s, &i32s);
        exact(&format!("{op:?} i32"), &g, &f);
        let (g, f) = pairs(op, DType::U8, &u8s, &u8s);
        exact(&format!("{op:?} u8"), &g, &f);
        let (g, f) = pairs(op, DType::Bool, &[0.0, 1.0], &[0.0, 1.0]);
        exact(&format!("{op:?} bool"), &g, &f);
    }
    for act in [Activation::Neg, Activation::Abs] {
        for (dt, xs) in [(DType::I32, &i32s[..]), (DType::U8, &u8s[..])] {
            let mut g = Graph::new("int_act");
            let a = g.input("a", Shape::new(&[xs.len()], dt)).unwrap();
            let y = g.activation(act, a).unwrap();
            g.set_outputs(vec![y]);
            exact(
                &format!("{act:?} {dt}"),
                &g,
                &[feed("a", &[xs.len()], xs.to_vec())],
            );
        }
    }
}

#[test]
fn float_mod_exact() {
    if !gpu() {
        return;
    }
    let sub = f32::from_bits(0x0000_1234) as f64;
    let xs = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        5.5,
        -5.5,
        1e30,
        -1e30,
        3.4e38,
        123456.789,
        1e-30,
        sub,
        -sub,
        f32::MIN_POSITIVE as f64,
        f64::INFINITY,
        f64::NAN,
    ];
    let ys = [
        1.0,
        -1.0,
        0.75,
        -3.0,
        3.0,
        1e-3,
        1e-38,
        sub,
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
    for fmod in [false, true] {
        let op = BinaryOp::Mod { fmod };
        for dt in FLOATS {
            let (g, f) = pairs(op, dt, &xs, &ys);
            exact(&format!("{op:?} {dt}"), &g, &f);
        }
    }
    // Seeded magnitudes across the range (quotients up to ~2^60).
    let mut rng = Rng::new("float_mod_exact");
    let draw = |rng: &mut Rng, n: usize, span: f64| -> Vec<f64> {
        (0..n)
            .map(|_| {
                let e = (rng.uniform() * 2.0 - 1.0) * span;
                let s = if rng.uniform() < 0.5 { -1.0 } else { 1.0 };
                s * (rng.uniform() + 0.5) * 2f64.powf(e)
            })
            .collect()
    };
    let a = draw(&mut rng, 40, 30.0);
    let b = draw(&mut rng, 25, 20.0);
    for fmod in [false, true] {
        let (g, f) = pairs(BinaryOp::Mod { fmod }, DType::F32, &a, &b);
        exact(&format!("Mod fmod {fmod} seeded"), &g, &f);
    }
    // Around the subnormal boundary (2^-126), where a flushing driver loses the remainder
    // and Python's adjustment `r + b` must still round exactly.
    let tiny = |v: Vec<f64>| -> Vec<f64> { v.into_iter().map(|x| x * 2f64.powi(-126)).collect() };
    let a = tiny(draw(&mut rng, 40, 20.0));
    let b = tiny(draw(&mut rng, 25, 20.0));
    for fmod in [false, true] {
        let (g, f) = pairs(BinaryOp::Mod { fmod }, DType::F32, &a, &b);
        exact(&format!("Mod fmod {fmod} near subnormal"), &g, &f);
    }
}
