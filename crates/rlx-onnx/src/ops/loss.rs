//! Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (reduction none / sum /
//! mean, class weights, ignore_index), composed through a one-hot of the targets so no
//! gather by run-time indices is needed: picked = Σ_c input·[t = c].
use super::{Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{Activation as A, BinaryOp as B, CompareOp as C, HostTensor, NodeId, Op, ReduceOp};

pub(super) fn register(r: &mut Registry) {
    r.insert("NegativeLogLikelihoodLoss", nll_loss);
    r.insert("SoftmaxCrossEntropyLoss", sce_loss);
}

fn sum(c: &mut ImportCtx, x: NodeId, axes: Vec<i64>) -> Result<NodeId, OnnxError> {
    c.add(
        Op::Reduce {
            op: ReduceOp::Sum,
            axes,
            keep_dim: false,
        },
        &[x],
    )
}

/// The loss of log-probabilities `lp` `[N, C, d…]` against integer targets `[N, d…]`.
fn nll(
    c: &mut ImportCtx,
    n: &NodeProto,
    lp: NodeId,
    t: NodeId,
    w: Option<NodeId>,
) -> Result<NodeId, OnnxError> {
    let a = Attrs(n);
    let reduction = a.s("reduction").unwrap_or_else(|| "mean".into());
    let d = c.static_dims(lp)?;
    let td = c.static_dims(t)?;
    if d.len() < 2 || td.len() + 1 != d.len() {
        return Err(c.err(format!("input {d:?} and target {td:?} do not fit")));
    }
    let dt = c.dtype(lp)?;
    let classes = d[1];
    // targets [N, 1, d…] against iota [1, C, 1…]
    let mut tdims: Vec<i64> = td.iter().map(|&v| v as i64).collect();
    tdims.insert(1, 1);
    let t64 = super::elementwise::cast_to(c, t, rlx_ir::DType::I64)?;
    let te = c.add(Op::Reshape { shape: tdims }, &[t64])?;
    let mut idims = vec![1usize; d.len()];
    idims[1] = classes;
    c.limit("a class index table", classes)?;
    let iota: Vec<i64> = (0..classes as i64).collect();
    let iota = c.constant(HostTensor::from_i64(&idims, &iota))?;
    let hit = c.add(Op::Compare(C::Eq), &[te, iota])?;
    let oh = c.add(Op::Cast { to: dt }, &[hit])?;
    let prod = c.add(Op::Binary(B::Mul), &[lp, oh])?;
    let picked = sum(c, prod, vec![1])?;
    // w_t: the target's class weight (1 without weights), 0 where the target is ignored.
    let mut wt = match w {
        Some(w) => {
            let wr = c.add(
                Op::Reshape {
                    shape: idims.iter().map(|&v| v as i64).collect(),
                },
                &[w],
            )?;
            let ow = c.add(Op::Binary(B::Mul), &[oh, wr])?;
            sum(c, ow, vec![1])?
        }
        None => sum(c, oh, vec![1])?,
    };
    if let Some(ii) = a.i("ignore_index") {
        let iiv = c.scalar(ii as f64, rlx_ir::DType::I64)?;
        let keep = c.add(Op::Compare(C::Ne), &[t64, iiv])?;
        let keep = c.add(Op::Cast { to: dt }, &[keep])?;
        wt = c.add(Op::Binary(B::Mul), &[wt, keep])?;
    }
    let pw = c.add(Op::Binary(B::Mul), &[picked, wt])?;
    let loss = c.add(Op::Activation(A::Neg), &[pw])?;
    let all: Vec<i64> = (0..td.len() as i64).collect();
    match reduction.as_str() {
        "none" => Ok(loss),
        "sum" => sum(c, loss, all),
        "mean" => {
            let s = sum(c, loss, all.clone())?;
            let ws = sum(c, wt, all)?;
            c.add(Op::Binary(B::Div), &[s, ws])
        }
        o => Err(c.err(format!("reduction \"{o}\""))),
    }
}

fn nll_loss(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (x, t) = (c.input(n, 0)?, c.input(n, 1)?);
    let w = c.opt_input(n, 2)?;
    Ok(Some(vec![nll(c, n, x, t, w)?]))
}

/// log_softmax over the class axis, then the NLL; output 1 is the log-probabilities.
fn sce_loss(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (x, t) = (c.input(n, 0)?, c.input(n, 1)?);
    let w = c.opt_input(n, 2)?;
    let m = c.add(
        Op::Reduce {
            op: ReduceOp::Max,
            axes: vec![1],
            keep_dim: true,
        },
        &[x],
    )?;
    let dlt = c.add(Op::Binary(B::Sub), &[x, m])?;
    let e = c.add(Op::Activation(A::Exp), &[dlt])?;
    let s = c.add(
        Op::Reduce {
            op: ReduceOp::Sum,
            axes: vec![1],
            keep_dim: true,
        },
        &[e],
    )?;
    let l = c.add(Op::Activation(A::Log), &[s])?;
    let lp = c.add(Op::Binary(B::Sub), &[dlt, l])?;
    let loss = nll(c, n, lp, t, w)?;
    Ok(Some(vec![loss, lp]))
}
