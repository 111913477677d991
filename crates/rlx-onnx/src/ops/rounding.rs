//! Floor, Ceil and Round (half to even) from Cast: truncation toward zero through I64, fixed
//! up by a comparison. Values of 2^52 and above are already integers and pass through, as do
//! NaN and ±inf, so the result is exact for every float.
use super::{one, Registry, Translated};
use crate::proto::NodeProto;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{Activation as A, BinaryOp as B, CompareOp as C, DType, NodeId, Op};

pub(super) fn register(r: &mut Registry) {
    r.insert("Floor", |c, n| unary(c, n, floor));
    r.insert("Ceil", |c, n| unary(c, n, ceil));
    r.insert("Round", |c, n| unary(c, n, round));
}

type Rounder = fn(&mut ImportCtx, NodeId) -> Result<NodeId, OnnxError>;

fn unary(c: &mut ImportCtx, n: &NodeProto, f: Rounder) -> Translated {
    let x = c.input(n, 0)?;
    if !c.dtype(x)?.is_float() {
        return one(x);
    }
    one(f(c, x)?)
}

fn k(c: &mut ImportCtx, x: NodeId, v: f64) -> Result<NodeId, OnnxError> {
    let dt = c.dtype(x)?;
    c.scalar(v, dt)
}

/// `y` where x is finite and below 2^52 in magnitude, else x itself.
fn guard(c: &mut ImportCtx, x: NodeId, y: NodeId) -> Result<NodeId, OnnxError> {
    let ab = c.add(Op::Activation(A::Abs), &[x])?;
    let big = k(c, x, 4_503_599_627_370_496.0)?;
    let large = c.add(Op::Compare(C::Ge), &[ab, big])?;
    let nan = c.add(Op::Compare(C::Ne), &[x, x])?;
    let t = c.scalar(1.0, DType::Bool)?;
    let keep = c.add(Op::Where, &[large, t, nan])?;
    c.add(Op::Where, &[keep, x, y])
}

pub(super) fn floor(c: &mut ImportCtx, x: NodeId) -> Result<NodeId, OnnxError> {
    let dt = c.dtype(x)?;
    let i = c.add(Op::Cast { to: DType::I64 }, &[x])?;
    let t = c.add(Op::Cast { to: dt }, &[i])?;
    // Truncation rounds negative non-integers up: step those down by one.
    let over = c.add(Op::Compare(C::Gt), &[t, x])?;
    let over = c.add(Op::Cast { to: dt }, &[over])?;
    let f = c.add(Op::Binary(B::Sub), &[t, over])?;
    guard(c, x, f)
}

fn ceil(c: &mut ImportCtx, x: NodeId) -> Result<NodeId, OnnxError> {
    let nx = c.add(Op::Activation(A::Neg), &[x])?;
    let f = floor(c, nx)?;
    c.add(Op::Activation(A::Neg), &[f])
}

/// Half to even: floor, then up by one above .5, and at exactly .5 when the floor is odd.
pub(super) fn round(c: &mut ImportCtx, x: NodeId) -> Result<NodeId, OnnxError> {
    let dt = c.dtype(x)?;
    let f = floor(c, x)?;
    let d = c.add(Op::Binary(B::Sub), &[x, f])?;
    let half = k(c, x, 0.5)?;
    let fh = c.add(Op::Binary(B::Mul), &[f, half])?;
    let fh = floor(c, fh)?;
    let two = k(c, x, 2.0)?;
    let even = c.add(Op::Binary(B::Mul), &[fh, two])?;
    let odd = c.add(Op::Compare(C::Ne), &[f, even])?;
    let above = c.add(Op::Compare(C::Gt), &[d, half])?;
    let tie = c.add(Op::Compare(C::Eq), &[d, half])?;
    let no = c.scalar(0.0, DType::Bool)?;
    let tie_up = c.add(Op::Where, &[tie, odd, no])?;
    let yes = c.scalar(1.0, DType::Bool)?;
    let up = c.add(Op::Where, &[above, yes, tie_up])?;
    let up = c.add(Op::Cast { to: dt }, &[up])?;
    let r = c.add(Op::Binary(B::Add), &[f, up])?;
    guard(c, x, r)
}
