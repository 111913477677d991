//! The f64 oracles of the elementwise group: plain loops and series, independent of rlx's
//! kernels (the CPU oracle check trusts them, so they are checked against tables here).
use rlx_ir::{Activation, BinaryOp, CompareOp, DType};
use std::f64::consts::{PI, SQRT_2};

/// erf from its everywhere-convergent series erf(x) = 2/√π · e^{-x²} · Σ_n x (2x²)^n / (2n+1)!!;
/// every term is positive, so there is no cancellation (good to ~1e-15 for |x| ≤ 6).
pub fn erf(x: f64) -> f64 {
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
pub fn erfc_tail(z: f64) -> f64 {
    let mut f = z;
    for n in (1..=400).rev() {
        f = z + (n as f64 / 2.0) / f;
    }
    (-z * z).exp() / PI.sqrt() / f
}

/// Φ-based GELU, x·(1 + erf(x/√2))/2, switching to erfc where 1 + erf would cancel.
pub fn gelu_ref(x: f64) -> f64 {
    let z = x / SQRT_2;
    if z < -2.0 {
        0.5 * x * erfc_tail(-z)
    } else {
        0.5 * x * (1.0 + erf(z))
    }
}

pub fn act_ref(a: Activation, x: f64) -> f64 {
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

pub fn binary_ref_f(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Max => a.max(b),
        BinaryOp::Min => a.min(b),
        BinaryOp::Pow => a.powf(b),
        // The quotient rounded down (Python) or toward zero (C), then the remainder.
        BinaryOp::Mod { fmod: false } => a - b * (a / b).floor(),
        BinaryOp::Mod { fmod: true } => a - b * (a / b).trunc(),
        BinaryOp::BitAnd
        | BinaryOp::BitOr
        | BinaryOp::BitXor
        | BinaryOp::ShiftLeft
        | BinaryOp::ShiftRight => f64::NAN,
    }
}

/// Bit `i` of `v` in two's complement (the oracle's own bit reading: by division).
fn bit(v: i64, i: u32) -> i64 {
    (v as i128).div_euclid(1i128 << i).rem_euclid(2) as i64
}

/// A bitwise op evaluated bit by bit on 64-bit two's complement.
fn bitwise_ref(a: i64, b: i64, f: fn(i64, i64) -> i64) -> i64 {
    let mut v: i128 = 0;
    for i in 0..63 {
        v += (f(bit(a, i), bit(b, i)) as i128) << i;
    }
    // The sign bit weighs −2^63.
    v -= (f(bit(a, 63), bit(b, 63)) as i128) << 63;
    v as i64
}

/// Integer semantics: wrap to the dtype's width, division truncates toward zero.
pub fn binary_ref_i(op: BinaryOp, a: i64, b: i64, dt: DType) -> f64 {
    let v = match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Max => a.max(b),
        BinaryOp::Min => a.min(b),
        BinaryOp::Pow => (0..b).fold(1i64, |acc, _| acc * a),
        _ if b == 0 && matches!(op, BinaryOp::Mod { .. }) => 0,
        BinaryOp::Mod { fmod: false } => a - b * (a as f64 / b as f64).floor() as i64,
        BinaryOp::Mod { fmod: true } => a - b * (a as f64 / b as f64).trunc() as i64,
        BinaryOp::BitAnd => bitwise_ref(a, b, |x, y| x * y),
        BinaryOp::BitOr => bitwise_ref(a, b, |x, y| x.max(y)),
        BinaryOp::BitXor => bitwise_ref(a, b, |x, y| (x + y) % 2),
        // Shifts as multiplication / floor division by powers of two, then the width wrap.
        BinaryOp::ShiftLeft => (a as i128).wrapping_mul(1i128 << b.clamp(0, 100)) as i64,
        BinaryOp::ShiftRight => (a as f64 / 2f64.powi(b as i32)).floor() as i64,
    };
    match dt {
        DType::U8 => v.rem_euclid(256) as f64,
        DType::I32 => ((v as i128 + (1 << 31)).rem_euclid(1 << 32) - (1 << 31)) as f64,
        DType::Bool => (v != 0) as i64 as f64,
        _ => v as f64,
    }
}

pub fn compare_ref(op: CompareOp, a: f64, b: f64) -> bool {
    match op {
        CompareOp::Eq => a == b,
        CompareOp::Ne => a != b,
        CompareOp::Lt => a < b,
        CompareOp::Le => a <= b,
        CompareOp::Gt => a > b,
        CompareOp::Ge => a >= b,
    }
}

pub fn cast_ref(from: DType, to: DType, v: f64) -> f64 {
    match to {
        DType::Bool => (v != 0.0) as u8 as f64,
        DType::U8 => (v.trunc() as i64).rem_euclid(256) as f64,
        DType::I32 | DType::I64 => v.trunc(),
        DType::F64 => v,
        DType::F32 => v as f32 as f64,
        // Non-f64 sources are exact in f32; an f64 source rounds once, as storage does.
        DType::F16 if from != DType::F64 => half::f16::from_f32(v as f32).to_f64(),
        DType::BF16 if from != DType::F64 => half::bf16::from_f32(v as f32).to_f64(),
        // From f64, one correct rounding computed here (half's `from_f64` can round twice).
        DType::F16 => round_nearest_even(v, 11, -14, 65504.0),
        DType::BF16 => round_nearest_even(v, 8, -126, 3.389_531_389_251_535e38),
    }
}

/// `v` rounded to nearest (ties to even) in a binary format with `bits` significant bits,
/// smallest normal exponent `min_exp` (below it the spacing stays that of 2^min_exp:
/// subnormals) and largest finite value `max`; beyond `max` it is ±∞.
fn round_nearest_even(v: f64, bits: i32, min_exp: i32, max: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let e = (((v.abs().to_bits() >> 52) as i32) - 1023).max(min_exp);
    let ulp = 2f64.powi(e - (bits - 1));
    let r = (v / ulp).round_ties_even() * ulp;
    if r.abs() > max {
        f64::INFINITY.copysign(v)
    } else {
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_rounding_from_f64_is_single() {
        // Just above a bf16 tie: a round through f32 would make the tie and go to even.
        let v = 105.25 + 2f64.powi(-40);
        assert_eq!(cast_ref(DType::F64, DType::BF16, v), 105.5);
        assert_eq!(cast_ref(DType::F64, DType::BF16, 105.25), 105.0);
        assert_eq!(cast_ref(DType::F64, DType::F16, 1.0 + 2f64.powi(-11)), 1.0);
        assert_eq!(
            cast_ref(
                DType::F64,
                DType::F16,
                1.0 + 2f64.powi(-11) + 2f64.powi(-40)
            ),
            1.0 + 2f64.powi(-10)
        );
        assert_eq!(cast_ref(DType::F64, DType::F16, 65520.0), f64::INFINITY);
        assert_eq!(
            cast_ref(DType::F64, DType::F16, 2f64.powi(-25) * 1.5),
            2f64.powi(-24)
        );
        for x in [0.1f64, -3.7, 1e-6, 12345.678, -6e-8] {
            assert_eq!(
                cast_ref(DType::F64, DType::F16, x),
                half::f16::from_f64(x).to_f64(),
                "{x}"
            );
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
}
