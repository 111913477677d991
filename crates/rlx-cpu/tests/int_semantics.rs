//! The defined integer and cast semantics (see `Op::Cast` and `Op::Binary` in rlx-ir), each
//! rule checked against hand-computed values, both as a standalone op and inside a fused
//! ElementwiseRegion, so the two CPU paths agree with the rule and with each other.
use rlx_cpu::run_graph;
use rlx_ir::ChainOperand::{Input, Step};
use rlx_ir::{BinaryOp, ChainStep, DType, Graph, HostTensor, RegionPrologue, Shape};

const I32_MAX: i64 = i32::MAX as i64;
const I32_MIN: i64 = i32::MIN as i64;

/// Feed `ins` to a graph whose one output `build` makes, and return the output's values.
fn run(
    ins: &[HostTensor],
    build: impl Fn(&mut Graph, &[rlx_ir::NodeId]) -> rlx_ir::NodeId,
) -> HostTensor {
    let mut g = Graph::new("int_semantics");
    let ids: Vec<_> = ins
        .iter()
        .enumerate()
        .map(|(i, t)| {
            g.input(format!("in{i}"), Shape::new(&t.shape, t.dtype))
                .unwrap()
        })
        .collect();
    let y = build(&mut g, &ids);
    g.set_outputs(vec![y]);
    let names: Vec<String> = (0..ins.len()).map(|i| format!("in{i}")).collect();
    let feeds: Vec<(&str, HostTensor)> = names
        .iter()
        .map(String::as_str)
        .zip(ins.iter().cloned())
        .collect();
    run_graph(&g, &[], &feeds).unwrap().remove(0)
}

/// `x` cast to `to`, as a Cast op and as a one-step region: both must give `want`.
fn check_cast(what: &str, x: HostTensor, to: DType, want: &[i64]) {
    let op = run(std::slice::from_ref(&x), |g, ids| {
        g.cast(ids[0], to).unwrap()
    });
    let fused = run(std::slice::from_ref(&x), |g, ids| {
        g.elementwise_region(
            ids,
            vec![ChainStep::Cast(to, Input(0))],
            RegionPrologue::None,
        )
        .unwrap()
    });
    for (path, got) in [("Cast", op), ("region", fused)] {
        assert_eq!(got.dtype, to, "{what} ({path})");
        assert_eq!(got.to_i64_vec(), want, "{what} ({path})");
    }
}

/// `a op b` (same dtype, same shape), as a Binary op and as a one-step region.
fn check_binary(what: &str, op: BinaryOp, a: HostTensor, b: HostTensor, want: &[i64]) {
    let dt = a.dtype;
    let ins = [a, b];
    let plain = run(&ins, |g, ids| g.binary(op, ids[0], ids[1]).unwrap());
    let fused = run(&ins, |g, ids| {
        let chain = vec![ChainStep::Binary(op, Input(0), Input(1))];
        g.elementwise_region(ids, chain, RegionPrologue::None)
            .unwrap()
    });
    for (path, got) in [("Binary", plain), ("region", fused)] {
        assert_eq!(got.dtype, dt, "{what} ({path})");
        assert_eq!(got.to_i64_vec(), want, "{what} ({path})");
    }
}

fn f32s(v: &[f32]) -> HostTensor {
    HostTensor::from_f32(&[v.len()], v)
}
fn f64s(v: &[f64]) -> HostTensor {
    HostTensor::from_f64(&[v.len()], v)
}
fn i64s(v: &[i64]) -> HostTensor {
    HostTensor::from_i64(&[v.len()], v)
}
fn i32s(v: &[i32]) -> HostTensor {
    HostTensor::from_i32(&[v.len()], v)
}
fn u8s(v: &[u8]) -> HostTensor {
    HostTensor::from_u8(&[v.len()], v)
}

#[test]
fn float_to_i32_truncates_toward_zero_and_saturates_with_nan_as_zero() {
    let x = f32s(&[
        2.7,
        -2.7,
        0.5,
        -0.5,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        3e9,
        -3e9,
        2147483520.0,
        1e10,
    ]);
    let want = [
        2, -2, 0, 0, I32_MAX, I32_MIN, 0, I32_MAX, I32_MIN, 2147483520, I32_MAX,
    ];
    check_cast("f32 -> i32", x, DType::I32, &want);
    let x = f64s(&[4294967296.0, -2147483649.0, 1e300, -1e300, 2147483647.9]);
    check_cast(
        "f64 -> i32",
        x,
        DType::I32,
        &[I32_MAX, I32_MIN, I32_MAX, I32_MIN, I32_MAX],
    );
}

#[test]
fn float_to_u8_saturates_to_0_255() {
    let x = f32s(&[
        300.0,
        -1.0,
        255.9,
        0.99,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        127.5,
    ]);
    check_cast("f32 -> u8", x, DType::U8, &[255, 0, 255, 0, 0, 255, 0, 127]);
}

#[test]
fn float_to_i64_saturates() {
    let x = f64s(&[
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e19,
        -1e19,
        -7.9,
    ]);
    let want = [i64::MAX, i64::MIN, 0, i64::MAX, i64::MIN, -7];
    check_cast("f64 -> i64", x, DType::I64, &want);
    let x = f32s(&[f32::INFINITY, -1e30, 1.5]);
    check_cast("f32 -> i64", x, DType::I64, &[i64::MAX, i64::MIN, 1]);
}

#[test]
fn to_bool_is_nonzero_and_nan_is_true() {
    let x = f32s(&[0.0, -0.0, 0.1, f32::NAN, f32::NEG_INFINITY]);
    check_cast("f32 -> bool", x, DType::Bool, &[0, 0, 1, 1, 1]);
    // Nonzero, not the low bit or low byte: 256 is true.
    check_cast(
        "i64 -> bool",
        i64s(&[0, 2, -1, 256]),
        DType::Bool,
        &[0, 1, 1, 1],
    );
}

#[test]
fn integer_to_narrower_integer_wraps() {
    let x = i64s(&[(1 << 32) + 5, -1, 1 << 31, -(1 << 31) - 1, i64::MAX]);
    let want = [5, -1, I32_MIN, I32_MAX, -1];
    check_cast("i64 -> i32", x, DType::I32, &want);
    let x = i64s(&[256, 300, -1, -256, 511]);
    check_cast("i64 -> u8", x, DType::U8, &[0, 44, 255, 0, 255]);
    check_cast("i32 -> u8", i32s(&[-1, 1000]), DType::U8, &[255, 232]);
    // Widening keeps the value: u8 is zero-extended.
    check_cast("u8 -> i32", u8s(&[255, 0]), DType::I32, &[255, 0]);
}

#[test]
fn integer_to_float_rounds_once() {
    let x = i64s(&[16_777_217, (1 << 53) + 1]);
    let op = run(std::slice::from_ref(&x), |g, ids| {
        g.cast(ids[0], DType::F32).unwrap()
    });
    assert_eq!(op.to_f64_vec(), [16_777_216.0, 9_007_199_254_740_992.0]);
    // 2^25 + 2^17 + 1 is just above a bf16 tie: one rounding goes up; rounding to f32
    // first lands on the tie and then goes to even (down).
    let v = (1 << 25) + (1 << 17) + 1;
    for x in [i64s(&[v]), f64s(&[v as f64])] {
        bf16_once(x);
    }
}

fn bf16_once(x: HostTensor) {
    for fused in [false, true] {
        let y = run(std::slice::from_ref(&x), |g, ids| {
            if fused {
                let chain = vec![ChainStep::Cast(DType::BF16, Input(0))];
                g.elementwise_region(ids, chain, RegionPrologue::None)
                    .unwrap()
            } else {
                g.cast(ids[0], DType::BF16).unwrap()
            }
        });
        assert_eq!(
            y.to_f64_vec(),
            [((1 << 25) + (1 << 18)) as f64],
            "{} fused {fused}",
            x.dtype
        );
    }
}

#[test]
fn integer_div_truncates_by_zero_is_zero_and_min_by_minus_one_wraps() {
    let a = i64s(&[7, -7, 7, -7, 2, 0, i64::MIN, i64::MIN, 5]);
    let b = i64s(&[2, 2, -2, -2, 0, 0, -1, 1, i64::MIN]);
    let want = [3, -3, -3, 3, 0, 0, i64::MIN, i64::MIN, 0];
    check_binary("i64 div", BinaryOp::Div, a, b, &want);
    let a = i32s(&[i32::MIN, -9, 9]);
    let b = i32s(&[-1, 0, 4]);
    check_binary("i32 div", BinaryOp::Div, a, b, &[I32_MIN, 0, 2]);
    check_binary(
        "u8 div",
        BinaryOp::Div,
        u8s(&[7, 255]),
        u8s(&[0, 2]),
        &[0, 127],
    );
}

#[test]
fn integer_add_sub_mul_wrap() {
    let (a, b) = (i64s(&[i64::MAX, i64::MIN, i64::MAX]), i64s(&[1, 1, 2]));
    check_binary(
        "i64 add",
        BinaryOp::Add,
        a.clone(),
        b.clone(),
        &[i64::MIN, i64::MIN + 1, i64::MIN + 1],
    );
    check_binary(
        "i64 sub",
        BinaryOp::Sub,
        a.clone(),
        b.clone(),
        &[i64::MAX - 1, i64::MAX, i64::MAX - 2],
    );
    check_binary("i64 mul", BinaryOp::Mul, a, b, &[i64::MAX, i64::MIN, -2]);
    let (a, b) = (i32s(&[i32::MAX, i32::MIN, 65536]), i32s(&[1, 1, 65536]));
    check_binary(
        "i32 add",
        BinaryOp::Add,
        a.clone(),
        b.clone(),
        &[I32_MIN, I32_MIN + 1, 131072],
    );
    check_binary(
        "i32 sub",
        BinaryOp::Sub,
        a.clone(),
        b.clone(),
        &[I32_MAX - 1, I32_MAX, 0],
    );
    check_binary("i32 mul", BinaryOp::Mul, a, b, &[I32_MAX, I32_MIN, 0]);
    let (a, b) = (u8s(&[3, 200, 16]), u8s(&[5, 100, 16]));
    check_binary("u8 add", BinaryOp::Add, a.clone(), b.clone(), &[8, 44, 32]);
    check_binary(
        "u8 sub",
        BinaryOp::Sub,
        a.clone(),
        b.clone(),
        &[254, 100, 0],
    );
    check_binary("u8 mul", BinaryOp::Mul, a, b, &[15, 32, 0]);
}

#[test]
fn integer_pow_wraps_and_negative_exponents_truncate() {
    let a = i64s(&[2, 2, 1, -1, -1, 0, 0, 3, -2, 3, 7]);
    let b = i64s(&[10, -1, -5, -3, -4, -2, 0, 40, 3, 1 << 33, -1]);
    let want = [
        1024,
        0,
        1,
        -1,
        1,
        0,
        1,
        // 3^40 mod 2^64 and 3^(2^33) mod 2^64, as signed (computed by modular exponentiation)
        -6289078614652622815,
        -8,
        4982619357117939713,
        0,
    ];
    check_binary("i64 pow", BinaryOp::Pow, a, b, &want);
    let a = i32s(&[2, 2, -2]);
    let b = i32s(&[31, 32, 31]);
    check_binary("i32 pow", BinaryOp::Pow, a, b, &[I32_MIN, 0, I32_MIN]);
}

/// A longer fused chain: the saturating cast feeds an integer division, and the result is
/// the same as the two unfused ops.
#[test]
fn a_fused_cast_then_divide_matches_the_unfused_ops() {
    let x = f32s(&[3e9, -3e9, f32::INFINITY, f32::NAN, -7.5]);
    let d = i32s(&[-1, -1, 2, 5, 2]);
    let want = [-I32_MAX, I32_MIN, I32_MAX / 2, 0, -3];
    let ins = [x, d];
    let plain = run(&ins, |g, ids| {
        let c = g.cast(ids[0], DType::I32).unwrap();
        g.div(c, ids[1]).unwrap()
    });
    let fused = run(&ins, |g, ids| {
        let chain = vec![
            ChainStep::Cast(DType::I32, Input(0)),
            ChainStep::Binary(BinaryOp::Div, Step(0), Input(1)),
        ];
        g.elementwise_region(ids, chain, RegionPrologue::None)
            .unwrap()
    });
    assert_eq!(plain.to_i64_vec(), want);
    assert_eq!(fused.to_i64_vec(), want);
}

/// Pad's fill converts as a float Cast does: into integers truncated and saturated (NaN to
/// 0), into Bool `v != 0` (a review found −1.5 wrapping to 255 in u8).
#[test]
fn pad_fill_saturates_like_a_cast() {
    let fills: [(DType, f64, f64); 9] = [
        (DType::U8, -1.5, 0.0),
        (DType::U8, 300.7, 255.0),
        (DType::U8, f64::NAN, 0.0),
        (DType::U8, 7.9, 7.0),
        (DType::I32, 3e9, I32_MAX as f64),
        (DType::I32, -3e9, I32_MIN as f64),
        (DType::I32, -2.5, -2.0),
        (DType::I64, -1e30, i64::MIN as f64),
        (DType::Bool, 0.5, 1.0),
    ];
    for (dt, fill, want) in fills {
        let x = HostTensor::from_f64_as(&[1], &[1.0], dt);
        let y = run(&[x], |g, ids| g.pad(ids[0], vec![[1, 1]], fill).unwrap());
        assert_eq!(
            y.to_f64_vec(),
            vec![want, 1.0, want],
            "pad {dt} with {fill}"
        );
    }
}
