//! The inverse trigonometric functions the IR has no activation for: Atan, Asin, Acos,
//! composed from sqrt, division and a short odd polynomial. atan's argument is folded into
//! |t| ≤ 1 by `atan(x) = ±π/2 − atan(1/x)`, then halved three times by
//! `atan(t) = 2·atan(t / (1 + √(1 + t²)))` to |t| < tan(π/16) ≈ 0.2, where the Taylor series
//! to t¹⁵ is exact to ~1e-12 — far inside f32 and close to f64 rounding.
use super::{one, Registry, Translated};
use crate::proto::NodeProto;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{Activation as A, BinaryOp as B, CompareOp as C, NodeId, Op};
use std::f64::consts::FRAC_PI_2;

pub(super) fn register(r: &mut Registry) {
    r.insert("Atan", |c, n| inverse(c, n, Inv::Atan));
    r.insert("Asin", |c, n| inverse(c, n, Inv::Asin));
    r.insert("Acos", |c, n| inverse(c, n, Inv::Acos));
}

#[derive(Clone, Copy)]
enum Inv {
    Atan,
    Asin,
    Acos,
}

fn k(c: &mut ImportCtx, x: NodeId, v: f64) -> Result<NodeId, OnnxError> {
    let dt = c.dtype(x)?;
    c.scalar(v, dt)
}

fn bin(c: &mut ImportCtx, op: B, a: NodeId, b: NodeId) -> Result<NodeId, OnnxError> {
    c.add(Op::Binary(op), &[a, b])
}

/// `t / (1 + √(1 + s·t²))` with s = +1 (atan's half-angle step) or −1 (asin's).
fn half(c: &mut ImportCtx, t: NodeId, s: f64) -> Result<NodeId, OnnxError> {
    let one_ = k(c, t, 1.0)?;
    let sq = bin(c, B::Mul, t, t)?;
    let sq = if s < 0.0 {
        bin(c, B::Sub, one_, sq)?
    } else {
        bin(c, B::Add, one_, sq)?
    };
    let r = c.add(Op::Activation(A::Sqrt), &[sq])?;
    let d = bin(c, B::Add, one_, r)?;
    bin(c, B::Div, t, d)
}

/// atan of |t| ≤ 1.
fn atan_unit(c: &mut ImportCtx, t: NodeId) -> Result<NodeId, OnnxError> {
    let mut u = t;
    for _ in 0..3 {
        u = half(c, u, 1.0)?;
    }
    // u − u³/3 + u⁵/5 − … by Horner in u².
    let u2 = bin(c, B::Mul, u, u)?;
    let mut p = k(c, t, -1.0 / 15.0)?;
    for j in (0..7).rev() {
        let coef = if j % 2 == 0 { 1.0 } else { -1.0 } / (2 * j + 1) as f64;
        let cj = k(c, t, coef)?;
        let m = bin(c, B::Mul, p, u2)?;
        p = bin(c, B::Add, m, cj)?;
    }
    let a = bin(c, B::Mul, p, u)?;
    let eight = k(c, t, 8.0)?;
    bin(c, B::Mul, a, eight)
}

/// atan over the whole line (±∞ included).
fn atan(c: &mut ImportCtx, x: NodeId) -> Result<NodeId, OnnxError> {
    let ax = c.add(Op::Activation(A::Abs), &[x])?;
    let one_ = k(c, x, 1.0)?;
    let big = c.add(Op::Compare(C::Gt), &[ax, one_])?;
    // Inside: x itself; outside: 1/x (so both branches stay finite).
    let inv = c.add(Op::Activation(A::Recip), &[x])?;
    let t = c.add(Op::Where, &[big, inv, x])?;
    let a = atan_unit(c, t)?;
    let zero = k(c, x, 0.0)?;
    let pos = c.add(Op::Compare(C::Gt), &[x, zero])?;
    let (p, m) = (k(c, x, FRAC_PI_2)?, k(c, x, -FRAC_PI_2)?);
    let edge = c.add(Op::Where, &[pos, p, m])?;
    let outer = bin(c, B::Sub, edge, a)?;
    c.add(Op::Where, &[big, outer, a])
}

fn inverse(c: &mut ImportCtx, n: &NodeProto, f: Inv) -> Translated {
    let x = c.input(n, 0)?;
    if !c.dtype(x)?.is_float() {
        return Err(c.err(format!("needs a float input, got {}", c.dtype(x)?)));
    }
    let y = match f {
        Inv::Atan => atan(c, x)?,
        Inv::Asin | Inv::Acos => {
            // asin(x) = 2·atan(x / (1 + √(1 − x²))): finite at ±1, NaN outside [−1, 1].
            let t = half(c, x, -1.0)?;
            let a = atan(c, t)?;
            let two = k(c, x, 2.0)?;
            let asin = bin(c, B::Mul, a, two)?;
            if matches!(f, Inv::Asin) {
                asin
            } else {
                let p = k(c, x, FRAC_PI_2)?;
                bin(c, B::Sub, p, asin)?
            }
        }
    };
    one(y)
}
