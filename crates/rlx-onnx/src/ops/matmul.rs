//! MatMul and Gemm (transA / transB / alpha / beta, C broadcast), as IR MatMul plus
//! elementwise steps that fusion re-forms.
use super::{one, Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::ImportCtx;
use rlx_ir::{BinaryOp as B, Op};

pub(super) fn register(r: &mut Registry) {
    r.insert("MatMul", matmul);
    r.insert("Gemm", gemm);
}

fn matmul(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (a, b) = (c.input(n, 0)?, c.input(n, 1)?);
    one(c.add(Op::MatMul, &[a, b])?)
}

fn gemm(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let at = Attrs(n);
    let (mut a, mut b) = (c.input(n, 0)?, c.input(n, 1)?);
    if c.rank(a)? != 2 || c.rank(b)? != 2 {
        return Err(c.err("A and B must be 2-D"));
    }
    if at.i_or("transA", 0) != 0 {
        a = c.add(Op::Transpose { perm: vec![1, 0] }, &[a])?;
    }
    if at.i_or("transB", 0) != 0 {
        b = c.add(Op::Transpose { perm: vec![1, 0] }, &[b])?;
    }
    let mut y = c.add(Op::MatMul, &[a, b])?;
    let dt = c.dtype(y)?;
    let alpha = at.f_or("alpha", 1.0) as f64;
    if alpha != 1.0 {
        let k = c.scalar(alpha, dt)?;
        y = c.add(Op::Binary(B::Mul), &[y, k])?;
    }
    if let Some(mut cc) = c.opt_input(n, 2)? {
        let beta = at.f_or("beta", 1.0) as f64;
        if beta != 1.0 {
            let k = c.scalar(beta, dt)?;
            cc = c.add(Op::Binary(B::Mul), &[cc, k])?;
        }
        y = c.add(Op::Binary(B::Add), &[y, cc])?;
    }
    one(y)
}
