//! Reductions: ReduceSum (axes an input from opset 13), ReduceMean / Max / Min / Prod /
//! L1 / L2 / LogSum / LogSumExp / SumSquare (axes an input from opset 18), keepdims and
//! noop_with_empty_axes; ArgMax / ArgMin.
use super::shape::axes_of;
use super::{one, Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::ImportCtx;
use rlx_ir::{Activation as A, BinaryOp as B, NodeId, Op, ReduceOp};

/// What is applied before and after the reduction.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Plain(ReduceOp),
    L1,
    L2,
    LogSum,
    LogSumExp,
    SumSquare,
}

pub(super) fn register(r: &mut Registry) {
    r.insert("ReduceSum", |c, n| reduce(c, n, Kind::Plain(ReduceOp::Sum)));
    r.insert("ReduceMean", |c, n| {
        reduce(c, n, Kind::Plain(ReduceOp::Mean))
    });
    r.insert("ReduceMax", |c, n| reduce(c, n, Kind::Plain(ReduceOp::Max)));
    r.insert("ReduceMin", |c, n| reduce(c, n, Kind::Plain(ReduceOp::Min)));
    r.insert("ReduceProd", |c, n| {
        reduce(c, n, Kind::Plain(ReduceOp::Prod))
    });
    r.insert("ReduceL1", |c, n| reduce(c, n, Kind::L1));
    r.insert("ReduceL2", |c, n| reduce(c, n, Kind::L2));
    r.insert("ReduceLogSum", |c, n| reduce(c, n, Kind::LogSum));
    r.insert("ReduceLogSumExp", |c, n| reduce(c, n, Kind::LogSumExp));
    r.insert("ReduceSumSquare", |c, n| reduce(c, n, Kind::SumSquare));
    r.insert("ArgMax", |c, n| arg(c, n, false));
    r.insert("ArgMin", |c, n| arg(c, n, true));
}

fn reduce(c: &mut ImportCtx, n: &NodeProto, kind: Kind) -> Translated {
    let x = c.input(n, 0)?;
    let from = if kind == Kind::Plain(ReduceOp::Sum) {
        13
    } else {
        18
    };
    let axes = axes_of(c, n, from)?.unwrap_or_default();
    let a = Attrs(n);
    let keep_dim = a.i_or("keepdims", 1) != 0;
    let r = c.rank(x)?;
    if axes.is_empty() && a.i_or("noop_with_empty_axes", 0) != 0 {
        return one(x);
    }
    let axes: Vec<i64> = if axes.is_empty() {
        (0..r as i64).collect()
    } else {
        axes
    };
    let red = |c: &mut ImportCtx, op: ReduceOp, v: NodeId| {
        c.add(
            Op::Reduce {
                op,
                axes: axes.clone(),
                keep_dim,
            },
            &[v],
        )
    };
    let y = match kind {
        Kind::Plain(op) => red(c, op, x)?,
        Kind::L1 => {
            let v = c.add(Op::Activation(A::Abs), &[x])?;
            red(c, ReduceOp::Sum, v)?
        }
        Kind::L2 => {
            let v = c.add(Op::Binary(B::Mul), &[x, x])?;
            let s = red(c, ReduceOp::Sum, v)?;
            c.add(Op::Activation(A::Sqrt), &[s])?
        }
        Kind::SumSquare => {
            let v = c.add(Op::Binary(B::Mul), &[x, x])?;
            red(c, ReduceOp::Sum, v)?
        }
        Kind::LogSum => {
            let s = red(c, ReduceOp::Sum, x)?;
            c.add(Op::Activation(A::Log), &[s])?
        }
        Kind::LogSumExp => {
            // max + log(sum(exp(x − max))): no overflow for large x.
            let m = c.add(
                Op::Reduce {
                    op: ReduceOp::Max,
                    axes: axes.clone(),
                    keep_dim: true,
                },
                &[x],
            )?;
            let d = c.add(Op::Binary(B::Sub), &[x, m])?;
            let e = c.add(Op::Activation(A::Exp), &[d])?;
            let s = red(c, ReduceOp::Sum, e)?;
            let l = c.add(Op::Activation(A::Log), &[s])?;
            let m = if keep_dim {
                m
            } else {
                let dims = c.shape(l)?.dims.clone();
                super::shape::reshape_to(c, m, &dims)?
            };
            c.add(Op::Binary(B::Add), &[l, m])?
        }
    };
    one(y)
}

fn arg(c: &mut ImportCtx, n: &NodeProto, min: bool) -> Translated {
    let a = Attrs(n);
    if a.i_or("select_last_index", 0) != 0 {
        return Err(c.unsupported("select_last_index = 1"));
    }
    let mut x = c.input(n, 0)?;
    if min {
        // argmin(x) = argmax(−x), first index on ties either way.
        x = c.add(Op::Activation(A::Neg), &[x])?;
    }
    let axis = a.i_or("axis", 0);
    let keep_dim = a.i_or("keepdims", 1) != 0;
    one(c.add(Op::ArgMax { axis, keep_dim }, &[x])?)
}
