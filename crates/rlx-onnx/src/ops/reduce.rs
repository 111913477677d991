//! Reductions: ReduceSum (axes an input from opset 13), ReduceMean / Max / Min / Prod /
//! L1 / L2 / LogSum / LogSumExp / SumSquare (axes an input from opset 18), keepdims and
//! noop_with_empty_axes; ArgMax / ArgMin.
use super::shape::axes_of;
use super::{one, Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{Activation as A, BinaryOp as B, HostTensor, NodeId, Op, ReduceOp};

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
    if let Some(y) = empty_reduce(c, x, &axes, keep_dim, kind)? {
        return one(y);
    }
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

/// A reduction over an empty axis: the identity of the op everywhere (ONNX: 0 for sums, 1
/// for products, −inf / +inf for max / min, log 0 = −inf for the log-sums).
fn empty_reduce(
    c: &mut ImportCtx,
    x: NodeId,
    axes: &[i64],
    keep_dim: bool,
    kind: Kind,
) -> Result<Option<NodeId>, OnnxError> {
    let s = c.shape(x)?.clone();
    let Some(dims) = s.static_dims() else {
        return Ok(None);
    };
    let ax: Vec<usize> = axes
        .iter()
        .map(|&a| s.axis(a))
        .collect::<Result<_, _>>()
        .map_err(|e| c.err(e))?;
    if !ax.iter().any(|&a| dims[a] == 0) {
        return Ok(None);
    }
    let out: Vec<usize> = (0..dims.len())
        .filter_map(|i| match (ax.contains(&i), keep_dim) {
            (true, true) => Some(1),
            (true, false) => None,
            (false, _) => Some(dims[i]),
        })
        .collect();
    let v = match kind {
        Kind::Plain(ReduceOp::Prod) => 1.0,
        Kind::Plain(ReduceOp::Max) | Kind::LogSum | Kind::LogSumExp => f64::NEG_INFINITY,
        Kind::Plain(ReduceOp::Min) => f64::INFINITY,
        _ => 0.0,
    };
    let numel = out.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    let numel = numel.ok_or_else(|| c.err(format!("output dims {out:?} overflow")))?;
    c.limit("an empty reduction's output", numel)?;
    let v = if s.dtype.is_float() {
        v
    } else if v.is_infinite() {
        return Err(c.unsupported("an integer max / min over an empty axis"));
    } else {
        v
    };
    let t = HostTensor::from_f64_as(&out, &vec![v; numel], s.dtype);
    Ok(Some(c.constant(t)?))
}

fn arg(c: &mut ImportCtx, n: &NodeProto, min: bool) -> Translated {
    let a = Attrs(n);
    let mut x = c.input(n, 0)?;
    if min {
        if !c.dtype(x)?.is_float() {
            return Err(c.unsupported(format!("ArgMin of {}", c.dtype(x)?)));
        }
        // argmin(x) = argmax(−x), first index on ties either way.
        x = c.add(Op::Activation(A::Neg), &[x])?;
    }
    let axis = a.i_or("axis", 0);
    let keep_dim = a.i_or("keepdims", 1) != 0;
    if a.i_or("select_last_index", 0) == 0 {
        return one(c.add(Op::ArgMax { axis, keep_dim }, &[x])?);
    }
    // The last maximum: the first one of x reversed along the axis, counted from the end.
    let ax = c.shape(x)?.axis(axis).map_err(|e| c.err(e))?;
    let len = c.shape(x)?.dims[ax]
        .as_static()
        .ok_or_else(|| c.unsupported("select_last_index on a symbolic dim"))?;
    let rev = c.add(
        Op::Slice {
            axes: vec![ax as i64],
            starts: vec![-1],
            ends: vec![i64::MIN],
            steps: vec![-1],
        },
        &[x],
    )?;
    let am = c.add(Op::ArgMax { axis, keep_dim }, &[rev])?;
    let last = c.scalar(len as f64 - 1.0, rlx_ir::DType::I64)?;
    one(c.add(Op::Binary(B::Sub), &[last, am])?)
}
