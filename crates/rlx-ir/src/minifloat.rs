//! Low-precision float formats (float8 ×5, float4) that rlx holds in an f32 *carrier*: every
//! value of these formats is exact in f32, so a tensor "of" such a type is an F32 tensor
//! whose values all lie on the format's grid. [`Op::FloatRound`](crate::Op::FloatRound)
//! moves a value onto that grid; [`MiniFloat::decode`] reads a stored code.
//!
//! The rules are ONNX's (Cast, opset 19–25, which follow the OCP float8 and MX specs):
//! - E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ round to nearest, ties to even. Saturating: ±inf and
//!   anything beyond ±max give ±max. Not saturating: overflow gives inf (E5M2) or NaN (the
//!   others, which have no inf). FNUZ formats have no −0 (it becomes +0).
//! - E2M1 (float4) has neither inf nor NaN: it always saturates, and NaN gives +0 (ONNX's
//!   reference gives a signed zero there; the carrier compares zeros equal either way).
//! - E8M0 is a bare exponent, 2^−127 … 2^127 plus NaN, sign ignored: `round` picks the
//!   representable power of two (up, down, or nearest with ties up). A result beyond the
//!   range (0 and tiny values rounded down or to nearest, huge ones rounded up or to
//!   nearest) saturates to the end of the range, or is NaN when not saturating; inf
//!   saturates to 2^127 (ONNX's table) or is NaN.
use serde::{Deserialize, Serialize};

/// How E8M0 rounds to a power of two (ONNX Cast's `round_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum E8M0Round {
    /// The smallest power of two ≥ |x| (ONNX's default).
    Up,
    /// The largest power of two ≤ |x|.
    Down,
    /// The nearest power of two; 1.5·2^e (the midpoint) goes up.
    Nearest,
}

/// A low-precision float format carried in f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MiniFloat {
    E4M3FN,
    E4M3FNUZ,
    E5M2,
    E5M2FNUZ,
    /// float4: 1 sign, 2 exponent, 1 mantissa bit; no inf, no NaN.
    E2M1,
    /// An 8-bit exponent with no sign and no mantissa (the MX block scale).
    E8M0 {
        round: E8M0Round,
    },
}

/// Exponent bits, mantissa bits, bias, and the format's special-value style.
struct Layout {
    mbits: i32,
    bias: i32,
    ebits: i32,
    /// Largest finite value.
    max: f64,
}

impl MiniFloat {
    /// Every format; E8M0 with its default rounding.
    pub const ALL: [MiniFloat; 6] = [
        MiniFloat::E4M3FN,
        MiniFloat::E4M3FNUZ,
        MiniFloat::E5M2,
        MiniFloat::E5M2FNUZ,
        MiniFloat::E2M1,
        MiniFloat::E8M0 {
            round: E8M0Round::Up,
        },
    ];

    fn layout(self) -> Layout {
        let (ebits, mbits, bias, max) = match self {
            MiniFloat::E4M3FN => (4, 3, 7, 448.0),
            MiniFloat::E4M3FNUZ => (4, 3, 8, 240.0),
            MiniFloat::E5M2 => (5, 2, 15, 57344.0),
            MiniFloat::E5M2FNUZ => (5, 2, 16, 57344.0),
            MiniFloat::E2M1 => (2, 1, 1, 6.0),
            MiniFloat::E8M0 { .. } => (8, 0, 127, 2f64.powi(127)),
        };
        Layout {
            ebits,
            mbits,
            bias,
            max,
        }
    }

    /// Bits of one stored code: 8, or 4 for E2M1.
    pub fn bits(self) -> u32 {
        match self {
            MiniFloat::E2M1 => 4,
            _ => 8,
        }
    }

    /// The largest finite value.
    pub fn max(self) -> f64 {
        self.layout().max
    }

    /// Whether the format has no −0 and one NaN code (0x80) instead of infinities.
    pub fn is_fnuz(self) -> bool {
        matches!(self, MiniFloat::E4M3FNUZ | MiniFloat::E5M2FNUZ)
    }

    /// The value of stored code `code` (its low `bits()` bits), exact in f32.
    pub fn decode(self, code: u8) -> f32 {
        let Layout {
            ebits, mbits, bias, ..
        } = self.layout();
        if let MiniFloat::E8M0 { .. } = self {
            return if code == 0xFF {
                f32::NAN
            } else {
                2f64.powi(code as i32 - bias) as f32
            };
        }
        let nbits = 1 + ebits + mbits;
        let code = (code as u32) & ((1u32 << nbits) - 1);
        let sign = code >> (nbits - 1) != 0;
        let e = ((code >> mbits) & ((1 << ebits) - 1)) as i32;
        let m = (code & ((1 << mbits) - 1)) as i32;
        let emax = (1 << ebits) - 1;
        let nan = match self {
            MiniFloat::E4M3FNUZ | MiniFloat::E5M2FNUZ => code == 0x80,
            MiniFloat::E4M3FN => e == emax && m == (1 << mbits) - 1,
            MiniFloat::E5M2 => e == emax && m != 0,
            _ => false,
        };
        if nan {
            return f32::NAN;
        }
        if self == MiniFloat::E5M2 && e == emax {
            return if sign {
                f32::NEG_INFINITY
            } else {
                f32::INFINITY
            };
        }
        let mag = if e == 0 {
            m as f64 * 2f64.powi(1 - bias - mbits)
        } else {
            ((1 << mbits) + m) as f64 * 2f64.powi(e - bias - mbits)
        };
        (if sign { -mag } else { mag }) as f32
    }

    /// `x` rounded to this format (see the module doc for the rules), as its f32 carrier.
    pub fn round(self, x: f64, saturate: bool) -> f32 {
        if let MiniFloat::E8M0 { round } = self {
            return round_e8m0(x, round, saturate);
        }
        let Layout {
            mbits, bias, max, ..
        } = self.layout();
        // E2M1 has nothing but max to overflow to.
        let saturate = saturate || self == MiniFloat::E2M1;
        if x.is_nan() {
            return if self == MiniFloat::E2M1 {
                0.0
            } else {
                f32::NAN
            };
        }
        let neg = x.is_sign_negative();
        let a = x.abs();
        let overflow = || -> f64 {
            if saturate {
                max
            } else if self == MiniFloat::E5M2 {
                f64::INFINITY
            } else {
                f64::NAN
            }
        };
        let y = if a.is_infinite() {
            overflow()
        } else {
            // The quantum at a's binade (or the subnormal quantum below the normal range);
            // a / q is exact (a power-of-two scaling far inside f64's range).
            let emin = 1 - bias;
            let e = if a == 0.0 {
                emin
            } else {
                exponent(a).max(emin)
            };
            let q = 2f64.powi(e - mbits);
            let y = round_half_even(a / q) * q;
            if y > max {
                overflow()
            } else {
                y
            }
        };
        if y.is_nan() {
            return f32::NAN;
        }
        // FNUZ has no −0.
        let y = if neg && !(y == 0.0 && self.is_fnuz()) {
            -y
        } else {
            y
        };
        y as f32
    }
}

/// ⌊log2 a⌋ of a finite a > 0, exactly (from the f64's bits, subnormals included).
fn exponent(a: f64) -> i32 {
    let bits = a.to_bits();
    let be = ((bits >> 52) & 0x7FF) as i32;
    if be == 0 {
        // f64 subnormal: the top set bit of the fraction.
        let frac = bits & ((1u64 << 52) - 1);
        -1074 + (63 - frac.leading_zeros() as i32)
    } else {
        be - 1023
    }
}

fn round_half_even(v: f64) -> f64 {
    let f = v.floor();
    let d = v - f;
    if d > 0.5 || (d == 0.5 && f % 2.0 != 0.0) {
        f + 1.0
    } else {
        f
    }
}

fn round_e8m0(x: f64, round: E8M0Round, saturate: bool) -> f32 {
    if x.is_nan() {
        return f32::NAN;
    }
    let a = x.abs();
    if a.is_infinite() {
        return if saturate { 2f32.powi(127) } else { f32::NAN };
    }
    let k: i64 = if a == 0.0 {
        i64::MIN
    } else {
        let e = exponent(a);
        let m = a / 2f64.powi(e); // in [1, 2), exact
        (e + match round {
            E8M0Round::Up => (m > 1.0) as i32,
            E8M0Round::Down => 0,
            E8M0Round::Nearest => (m >= 1.5) as i32,
        }) as i64
    };
    // Rounding up never leaves the range at the bottom (2^−127 is above every smaller
    // value, 0 included), nor rounding down at the top.
    let k = match round {
        E8M0Round::Up => k.max(-127),
        E8M0Round::Down => k.min(127),
        E8M0Round::Nearest => k,
    };
    let k = if (-127..=127).contains(&k) {
        k
    } else if saturate {
        k.clamp(-127, 127)
    } else {
        return f32::NAN;
    };
    2f64.powi(k as i32) as f32
}
