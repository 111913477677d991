//! The math of one value for every elementwise op, shared by the standalone thunks, the
//! region chain and fused epilogues (so they agree bit for bit), and the one place where
//! integer arithmetic and casts are defined (see `Op::Binary` and `Op::Cast` in rlx-ir).
use crate::Float;
use half::{bf16, f16};
use rlx_ir::{Activation, BinaryOp, CompareOp, ComputeClass, DType};

/// One activation on one value.
pub fn activation<T: Float>(act: Activation, x: T) -> T {
    let f = |v: f64| T::from_f64(v);
    let one = T::one();
    match act {
        // f32 (and the f16/bf16 held as f32) through the vectorisable f32 erf; f64 keeps
        // libm's erfc.
        Activation::Gelu if T::CLASS == ComputeClass::F32 => f(gelu_f32(x.to_f64() as f32) as f64),
        // erfc keeps the far negative tail accurate (1 + erf(x) cancels there).
        Activation::Gelu => f(gelu_erfc(x.to_f64())),
        // 0.5·x·(1 + tanh(u)) written as x·sigmoid(2u): the same function, without the
        // cancellation of 1 + tanh(u) for negative x.
        Activation::GeluApprox => {
            let k = T::from_f64(2.0 * (2.0 / std::f64::consts::PI).sqrt());
            let c = T::from_f64(0.044715);
            x / (one + (-(k * (x + c * x * x * x))).exp())
        }
        Activation::Silu => x / (one + (-x).exp()),
        // NaN passes through, as in PyTorch.
        Activation::Relu => {
            if x < T::zero() {
                T::zero()
            } else {
                x
            }
        }
        Activation::Sigmoid => one / (one + (-x).exp()),
        Activation::Tanh => x.tanh(),
        Activation::Exp => x.exp(),
        Activation::Log => x.ln(),
        Activation::Sqrt => x.sqrt(),
        Activation::Rsqrt => one / x.sqrt(),
        Activation::Neg => -x,
        Activation::Abs => x.abs(),
        Activation::Sin => x.sin(),
        Activation::Cos => x.cos(),
        Activation::Erf => f(libm::erf(x.to_f64())),
        // max(x, 0) + log(1 + e^-|x|): no overflow, and accurate in both tails.
        Activation::Softplus => x.max(T::zero()) + (-x.abs()).exp().ln_1p(),
        Activation::Recip => one / x,
        Activation::Square => x * x,
    }
}

/// The erf rational's coefficients: Eigen's published `generic_fast_erf_float` ones.
const ERF_P: [f64; 7] = [
    -1.609_603_332_624_15e-2,
    -2.954_599_808_540_25e-3,
    -7.349_906_303_268_55e-4,
    -5.692_506_394_623_46e-5,
    -2.101_024_020_825_08e-6,
    2.770_681_424_959_02e-8,
    -2.726_142_258_013_06e-10,
];
const ERF_Q: [f64; 5] = [
    -1.426_473_905_141_89e-2,
    -7.373_329_167_204_68e-3,
    -1.682_826_974_382_03e-3,
    -2.133_740_552_789_05e-4,
    -1.456_607_184_649_96e-5,
];

/// erf without branches or calls, so loops over it vectorise: erf(x) = x·P(x²)/Q(x²) on
/// [-4, 4] (beyond it erf rounds to ±1 in f32); evaluated in f64 (max abs error 6.5e-8) so that, rounded once to f32, erf is within 1e-7. NaN passes through the clamp.
#[inline(always)]
fn erf_rational(x: f64) -> f64 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    // Plain multiply-add: `mul_add` without a target FMA feature is a libm call per value.
    let p = ERF_P.iter().rev().fold(0.0, |acc, &c| acc * x2 + c);
    // Q has no real root (all its coefficients are negative), so the division is safe.
    let q = ERF_Q.iter().rev().fold(0.0, |acc, &c| acc * x2 + c);
    x * p / q
}

/// erf of an f32, within 1e-7 of the exact value.
#[inline(always)]
pub fn erf_f32(x: f32) -> f32 {
    erf_rational(x as f64) as f32
}

/// The f64 path's GELU: erfc keeps the far negative tail accurate.
fn gelu_erfc(x: f64) -> f64 {
    0.5 * x * libm::erfc(-x / std::f64::consts::SQRT_2)
}

/// The rational erf evaluated in f32 (what the vector GELU uses: 16 lanes a step with
/// AVX-512); within a few ulp of erf.
#[inline(always)]
fn erf_rational_f32(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let p = ERF_P.iter().rev().fold(0.0, |acc, &c| acc * x2 + c as f32);
    let q = ERF_Q.iter().rev().fold(0.0, |acc, &c| acc * x2 + c as f32);
    x * p / q
}

/// erfc(−x/√2) for x ≤ 0 without branches: t·e^(−z² + P(t)) with z = −x/√2,
/// t = 1/(1 + z/2) and the Chebyshev-fitted P of Numerical Recipes' `erfcc` (relative
/// error < 1.2e-7 for all z ≥ 0), so nothing cancels where erfc is tiny. The exponent is
/// carried to about twice f32's precision: z² = x²/2 exactly (Dekker's square of x itself,
/// since z rounded to f32 would already be off by ~z²·1e-7), the sum with P exactly
/// (Knuth), and the low part corrects e^(hi) to first order — rounded plainly, the tail
/// would be off by tens of ulp.
#[inline(always)]
fn erfc_neg_half_sqrt2_f32(x: f32) -> f32 {
    const C: [f32; 10] = [
        -1.265_512_2,
        1.000_023_7,
        0.374_091_96,
        0.096_784_18,
        -0.186_288_06,
        0.278_868_07,
        -1.135_204,
        1.488_515_9,
        -0.822_152_2,
        0.170_872_77,
    ];
    let z = -x * std::f32::consts::FRAC_1_SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * z);
    let p = C.iter().rev().fold(0.0, |acc, &c| acc * t + c);
    let xx = x * x;
    let c = 4097.0 * x;
    let xh = c - (c - x);
    let xl = x - xh;
    let xx_lo = ((xh * xh - xx) + 2.0 * xh * xl) + xl * xl;
    let (zz, zz_lo) = (0.5 * xx, 0.5 * xx_lo);
    let hi = p - zz;
    let b = hi - p;
    let lo = (p - (hi - b)) + (-zz - b) - zz_lo;
    t * exp_f32(hi) * (1.0 + lo)
}

/// Exact (erf) GELU of an f32 in f32 arithmetic: from -1 up through the rational erf (1 + erf
/// ≥ 0.3 there), below as ½·x·erfc(−x/√2) (no cancellation in the tail). Both are computed and one
/// selected, so a loop over it vectorises. NaN stays NaN; -inf gives -0.
#[inline(always)]
pub fn gelu_f32(x: f32) -> f32 {
    // The rational overshoots ±1 by an ulp near its clamp: 1 + erf stays within [0, 2]
    // (else GELU(f32::MAX) would overflow).
    let phi2 = (1.0 + erf_rational_f32(x * std::f32::consts::FRAC_1_SQRT_2)).clamp(0.0, 2.0);
    let pos = 0.5 * x * phi2;
    // The negative branch on min(x, 0) clamped at -13 (below it the value is under f32's
    // normals and is returned as -0): intermediates stay normal — subnormals cost a microcode assist per
    // operation — and -inf cannot make 0·inf.
    let xn = x.clamp(-13.0, 0.0);
    let neg = 0.5 * xn * erfc_neg_half_sqrt2_f32(xn);
    // Above 5.7, Φ(x) rounds to 1 in f32: GELU is x (and f32::MAX stays finite).
    if x > 5.7 {
        x
    } else if x < -13.0 {
        -0.0
    } else if x < -1.0 {
        neg
    } else {
        pos
    }
}

/// [`gelu_f32`] over a slice in place, with the widest vector unit the CPU has (checked at
/// run time: the build targets baseline x86-64). Every path gives the same bits (IEEE ops,
/// no FMA contraction).
pub fn gelu_f32_in_place(v: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F, checked just above.
            return unsafe { gelu_avx512(v) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above.
            return unsafe { gelu_avx2(v) };
        }
    }
    gelu_loop(v)
}

/// A plain index loop, so everything inlines into the `target_feature` callers: a generic
/// iterator adapter here is one instantiation shared by all of them and compiled for the
/// baseline target, which loses the vector width.
#[inline(always)]
fn gelu_loop(v: &mut [f32]) {
    for i in 0..v.len() {
        v[i] = gelu_f32(v[i]);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn gelu_avx512(v: &mut [f32]) {
    gelu_loop(v)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn gelu_avx2(v: &mut [f32]) {
    gelu_loop(v)
}

/// e^x of an f32 without branches or calls (so loops vectorise): x = n·ln2 + r with
/// |r| ≤ ln2/2, e^r by its Taylor polynomial to degree 7 (truncation < 1e-8 relative),
/// times 2^n built in the exponent bits. Relative error a few ulp; x is clamped to
/// [-87, 88] (where 2^n stays normal), so large negative x gives ~1e-38, not 0.
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    // ln 2 split so that n·LN2_HI is exact for |n| < 2^7.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding 1.5·2^23 rounds to an integer held in the low mantissa bits: n + ROUND has
    // the bits ROUND_BITS + n, so 2^n is built with integer ops alone (a float→int
    // conversion would keep the loop from vectorising).
    const ROUND: f32 = 12_582_912.0;
    const ROUND_BITS: u32 = 0x4B40_0000;
    let x = x.clamp(-87.0, 88.0);
    let nr = x * std::f32::consts::LOG2_E + ROUND;
    let n = nr - ROUND;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let mut p = 1.0 / 5040.0;
    for c in [
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ] {
        p = p * r + c;
    }
    let e = nr.to_bits().wrapping_sub(ROUND_BITS).wrapping_add(127) << 23;
    p * f32::from_bits(e)
}

/// Softmax of one row in place, -inf entries meaning "masked": they get weight 0, and a
/// row of only -inf becomes zeros. Vectorised (run-time AVX-512/AVX2 dispatch like GELU).
pub fn softmax_f32_in_place(row: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F, checked just above.
            return unsafe { softmax_avx512(row) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above.
            return unsafe { softmax_avx2(row) };
        }
    }
    softmax_loop(row)
}

/// Lanes of the max and sum reductions: float adds do not reassociate, so the vector
/// width has to be written out.
const LANES: usize = 16;

#[inline(always)]
fn softmax_loop(row: &mut [f32]) {
    let mut m = [f32::NEG_INFINITY; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for c in &mut chunks {
        for l in 0..LANES {
            m[l] = m[l].max(c[l]);
        }
    }
    let max = chunks.remainder().iter().fold(
        m.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)),
        |a, &b| a.max(b),
    );
    if max == f32::NEG_INFINITY {
        row.fill(0.0);
        return;
    }
    let e = |v: f32| {
        if v == f32::NEG_INFINITY {
            0.0
        } else {
            exp_f32(v - max)
        }
    };
    let mut s = [0.0f32; LANES];
    let mut chunks = row.chunks_exact_mut(LANES);
    for c in &mut chunks {
        for l in 0..LANES {
            c[l] = e(c[l]);
            s[l] += c[l];
        }
    }
    let mut sum: f32 = s.iter().sum();
    for v in chunks.into_remainder() {
        *v = e(*v);
        sum += *v;
    }
    let inv = 1.0 / sum;
    for i in 0..row.len() {
        row[i] *= inv;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn softmax_avx512(row: &mut [f32]) {
    softmax_loop(row)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn softmax_avx2(row: &mut [f32]) {
    softmax_loop(row)
}

/// One binary op on floats.
pub fn binary_f<T: Float>(op: BinaryOp, a: T, b: T) -> T {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        // NaN propagates, as in PyTorch's maximum/minimum.
        BinaryOp::Max => {
            if a.is_nan() || b.is_nan() {
                T::nan()
            } else {
                a.max(b)
            }
        }
        BinaryOp::Min => {
            if a.is_nan() || b.is_nan() {
                T::nan()
            } else {
                a.min(b)
            }
        }
        BinaryOp::Pow => a.powf(b),
        BinaryOp::Mod { fmod } => {
            // Rust's float `%` is C's fmod (the dividend's sign); Python's mod moves a
            // nonzero remainder of the other sign over by one divisor.
            let r = a % b;
            if !fmod && r != T::zero() && (r < T::zero()) != (b < T::zero()) {
                r + b
            } else {
                r
            }
        }
        // Integer-only ops: the shape rule refuses float operands, so this is not reached.
        BinaryOp::BitAnd
        | BinaryOp::BitOr
        | BinaryOp::BitXor
        | BinaryOp::ShiftLeft
        | BinaryOp::ShiftRight => T::nan(),
    }
}

/// One binary op on integers (I64, I32, U8 and Bool values are all held as i64; the
/// result is then wrapped to the dtype by [`wrap_int`], so an I32 or U8 result is the
/// same as computing in that type with two's-complement wrapping):
/// - Add, Sub, Mul wrap.
/// - Div truncates toward zero; `x / 0 = 0`; `MIN / −1 = MIN` (wraps).
/// - Pow with a non-negative exponent is repeated wrapping multiplication (`0^0 = 1`); with
///   a negative exponent it is `1 / a^|b|` truncated toward zero: 1 for base 1, ±1 for
///   base −1 (by the exponent's parity), 0 for every other base, 0 included.
/// - Max, Min are exact.
/// - Mod: `x mod 0 = 0`; `fmod` keeps the dividend's sign, else the divisor's.
/// - Bitwise ops act on the two's-complement bits (Bool's 0/1 make them logical).
/// - Shifts by ≥ 64 or < 0 give 0 (a right shift of a negative value gives −1); the
///   dtype wrap then drops the bits shifted past its width.
pub fn binary_i(op: BinaryOp, a: i64, b: i64) -> i64 {
    match op {
        BinaryOp::Add => a.wrapping_add(b),
        BinaryOp::Sub => a.wrapping_sub(b),
        BinaryOp::Mul => a.wrapping_mul(b),
        BinaryOp::Div => {
            if b == 0 {
                0
            } else {
                a.wrapping_div(b)
            }
        }
        BinaryOp::Max => a.max(b),
        BinaryOp::Min => a.min(b),
        BinaryOp::Pow => match (a, b) {
            (_, 0..) => wrapping_pow(a, b as u64),
            (1, _) => 1,
            (-1, _) => {
                if b % 2 == 0 {
                    1
                } else {
                    -1
                }
            }
            _ => 0,
        },
        BinaryOp::Mod { fmod } => {
            if b == 0 {
                return 0;
            }
            let r = a.wrapping_rem(b);
            if !fmod && r != 0 && (r < 0) != (b < 0) {
                r + b
            } else {
                r
            }
        }
        BinaryOp::BitAnd => a & b,
        BinaryOp::BitOr => a | b,
        BinaryOp::BitXor => a ^ b,
        BinaryOp::ShiftLeft => match u32::try_from(b) {
            Ok(s) if s < 64 => a << s,
            _ => 0,
        },
        BinaryOp::ShiftRight => match u32::try_from(b) {
            Ok(s) if s < 64 => a >> s,
            _ => {
                if a < 0 {
                    -1
                } else {
                    0
                }
            }
        },
    }
}

/// `a^e` modulo 2^64, by squaring (exact for every exponent, however large).
fn wrapping_pow(mut a: i64, mut e: u64) -> i64 {
    let mut acc: i64 = 1;
    while e > 0 {
        if e & 1 == 1 {
            acc = acc.wrapping_mul(a);
        }
        a = a.wrapping_mul(a);
        e >>= 1;
    }
    acc
}

/// An integer value (held as i64) made to obey integer dtype `to`: I32 and U8 keep their
/// low 32 / 8 bits (two's-complement wrap, as C's `(int)` / `(unsigned char)` of an int64,
/// NumPy's `astype` and ONNX Cast do); Bool is `v != 0`; other dtypes are unchanged.
pub fn wrap_int(v: i64, to: DType) -> i64 {
    match to {
        DType::I32 => v as i32 as i64,
        DType::U8 => v as u8 as i64,
        DType::Bool => (v != 0) as i64,
        _ => v,
    }
}

/// A float cast to integer dtype `to`: truncation toward zero, saturated to the target's
/// range (`+inf`, `3e9` → `i32::MAX` for I32; `300` → 255, `−1` → 0 for U8), NaN → 0. To
/// Bool: `v != 0`, so NaN → 1. This is Rust's `as` and CUDA's `cvt.rzi.sat`.
pub fn float_to_int(v: f64, to: DType) -> i64 {
    match to {
        DType::I32 => v as i32 as i64,
        DType::U8 => v as u8 as i64,
        DType::Bool => (v != 0.0) as i64,
        _ => v as i64,
    }
}

pub fn compare<T: PartialOrd>(op: CompareOp, a: T, b: T) -> bool {
    match op {
        CompareOp::Eq => a == b,
        CompareOp::Ne => a != b,
        CompareOp::Lt => a < b,
        CompareOp::Le => a <= b,
        CompareOp::Gt => a > b,
        CompareOp::Ge => a >= b,
    }
}

/// `v` rounded to f32 with round-to-odd: exact values stay, inexact ones land on the
/// bracketing f32 whose last mantissa bit is 1. Rounding that to a format with at least
/// two bits fewer (f16, bf16) then gives the correctly rounded result, as one rounding
/// would; rounding to nearest twice would not (ties would be made by the first rounding).
fn f64_to_f32_odd(v: f64) -> f32 {
    let f = v as f32;
    if !f.is_finite() || f as f64 == v || f.to_bits() & 1 == 1 {
        return f;
    }
    // f is even and inexact: the other bracketing neighbour (one ulp toward v) is odd.
    let toward_zero = (f as f64).abs() > v.abs();
    f32::from_bits(if toward_zero {
        f.to_bits() - 1
    } else {
        f.to_bits() + 1
    })
}

/// A wider value rounded once to `to` and held as f32: to nearest even for F16 / BF16
/// (half's own `from_f64` drops the low mantissa bits first, which can round twice), to
/// nearest even for F32 too.
pub fn round_to_f32_storage(v: f64, to: DType) -> f32 {
    match to {
        DType::F16 => f16::from_f32(f64_to_f32_odd(v)).to_f32(),
        DType::BF16 => bf16::from_f32(f64_to_f32_odd(v)).to_f32(),
        _ => v as f32,
    }
}
