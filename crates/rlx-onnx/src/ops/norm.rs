//! Normalizations, composed from reductions and elementwise ops (fusion re-forms them):
//! BatchNormalization (inference), LayerNormalization (the IR op, or composed when its
//! Mean / InvStdDev outputs are wanted or the input is half), InstanceNormalization,
//! RMSNormalization, GroupNormalization, MeanVarianceNormalization, LpNormalization.
use super::shape::reshape_to;
use super::{one, Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{Activation as A, BinaryOp as B, Dim, NodeId, Op, ReduceOp};

pub(super) fn register(r: &mut Registry) {
    r.insert("BatchNormalization", batch_norm);
    r.insert("LayerNormalization", layer_norm);
    r.insert("InstanceNormalization", instance_norm);
    r.insert("RMSNormalization", rms_norm);
    r.insert("GroupNormalization", group_norm);
    r.insert("MeanVarianceNormalization", mvn);
    r.insert("LpNormalization", lp_norm);
}

/// A per-channel vector `[C]` reshaped to broadcast against `[N, C, …]` of rank `r`.
fn per_channel(c: &mut ImportCtx, v: NodeId, r: usize) -> Result<NodeId, OnnxError> {
    let d = c.shape(v)?.dims.clone();
    let mut dims = d.clone();
    dims.extend(std::iter::repeat_n(
        Dim::Static(1),
        r.saturating_sub(1 + d.len()),
    ));
    reshape_to(c, v, &dims)
}

fn batch_norm(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let extra = n.output.iter().skip(1).any(|o| !o.is_empty());
    if Attrs(n).i_or("training_mode", 0) != 0 || extra {
        if c.opset < 14 {
            return Err(c.unsupported("training mode before opset 14 (saved statistics)"));
        }
        return batch_norm_training(c, n);
    }
    let x = c.input(n, 0)?;
    let r = c.rank(x)?;
    let mut p = vec![];
    for i in 1..5 {
        let v = c.input(n, i)?;
        p.push(per_channel(c, v, r)?);
    }
    let dt = c.dtype(p[3])?;
    let eps = c.scalar(Attrs(n).f_or("epsilon", 1e-5) as f64, dt)?;
    let var = c.add(Op::Binary(B::Add), &[p[3], eps])?;
    let inv = c.add(Op::Activation(A::Rsqrt), &[var])?;
    let scale = c.add(Op::Binary(B::Mul), &[p[0], inv])?;
    let xc = c.add(Op::Binary(B::Sub), &[x, p[2]])?;
    let y = c.add(Op::Binary(B::Mul), &[xc, scale])?;
    one(c.add(Op::Binary(B::Add), &[y, p[1]])?)
}

/// Training mode: normalise by the batch's own mean and (population) variance over every
/// axis but the channel, and output the running statistics moved toward them by
/// `1 − momentum`.
fn batch_norm_training(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let r = c.rank(x)?;
    let axes: Vec<i64> = (0..r as i64).filter(|&a| a != 1).collect();
    let mean = mean_keep(c, x, &axes)?;
    let xc = c.add(Op::Binary(B::Sub), &[x, mean])?;
    let sq = c.add(Op::Binary(B::Mul), &[xc, xc])?;
    let var = mean_keep(c, sq, &axes)?;
    let dt = c.dtype(x)?;
    let eps = c.scalar(Attrs(n).f_or("epsilon", 1e-5) as f64, dt)?;
    let ve = c.add(Op::Binary(B::Add), &[var, eps])?;
    let inv = c.add(Op::Activation(A::Rsqrt), &[ve])?;
    let (scale, bias) = (c.input(n, 1)?, c.input(n, 2)?);
    let (scale, bias) = (per_channel(c, scale, r)?, per_channel(c, bias, r)?);
    let y = c.add(Op::Binary(B::Mul), &[xc, inv])?;
    let y = c.add(Op::Binary(B::Mul), &[y, scale])?;
    let y = c.add(Op::Binary(B::Add), &[y, bias])?;
    let m = Attrs(n).f_or("momentum", 0.9) as f64;
    let mut outs = vec![y];
    for (i, cur) in [(3usize, mean), (4, var)] {
        let run = c.input(n, i)?;
        let rdt = c.dtype(run)?;
        let cur = c.add(Op::Reshape { shape: vec![-1] }, &[cur])?;
        let cur = super::elementwise::cast_to(c, cur, rdt)?;
        let (km, k1) = (c.scalar(m, rdt)?, c.scalar(1.0 - m, rdt)?);
        let a = c.add(Op::Binary(B::Mul), &[run, km])?;
        let b = c.add(Op::Binary(B::Mul), &[cur, k1])?;
        outs.push(c.add(Op::Binary(B::Add), &[a, b])?);
    }
    Ok(Some(outs))
}

/// Reduce-mean over `axes` (kept), the normalisation statistics.
fn mean_keep(c: &mut ImportCtx, x: NodeId, axes: &[i64]) -> Result<NodeId, OnnxError> {
    c.add(
        Op::Reduce {
            op: ReduceOp::Mean,
            axes: axes.to_vec(),
            keep_dim: true,
        },
        &[x],
    )
}

/// The computation type of a norm: `stash_type` (default float) for half inputs.
fn stash(c: &mut ImportCtx, n: &NodeProto, x: NodeId) -> Result<NodeId, OnnxError> {
    let dt = c.dtype(x)?;
    if Attrs(n).i_or("stash_type", 1) == 1 && matches!(dt, rlx_ir::DType::F16 | rlx_ir::DType::BF16)
    {
        return super::elementwise::cast_to(c, x, rlx_ir::DType::F32);
    }
    Ok(x)
}

/// LayerNormalization with its Mean / InvStdDev outputs, composed.
fn layer_norm_stats(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x0 = c.input(n, 0)?;
    let out_dt = c.dtype(x0)?;
    let x = stash(c, n, x0)?;
    let r = c.rank(x)? as i64;
    let axis = Attrs(n).i_or("axis", -1);
    let a = rlx_ir::normalize_axis(axis, r as usize).map_err(|e| c.err(e))? as i64;
    let axes: Vec<i64> = (a..r).collect();
    let dt = c.dtype(x)?;
    let mean = mean_keep(c, x, &axes)?;
    let d = c.add(Op::Binary(B::Sub), &[x, mean])?;
    let sq = c.add(Op::Binary(B::Mul), &[d, d])?;
    let var = mean_keep(c, sq, &axes)?;
    let eps = c.scalar(Attrs(n).f_or("epsilon", 1e-5) as f64, dt)?;
    let ve = c.add(Op::Binary(B::Add), &[var, eps])?;
    let inv = c.add(Op::Activation(A::Rsqrt), &[ve])?;
    let mut y = c.add(Op::Binary(B::Mul), &[d, inv])?;
    let s = c.input(n, 1)?;
    let s = super::elementwise::cast_to(c, s, dt)?;
    y = c.add(Op::Binary(B::Mul), &[y, s])?;
    if let Some(b) = c.opt_input(n, 2)? {
        let b = super::elementwise::cast_to(c, b, dt)?;
        y = c.add(Op::Binary(B::Add), &[y, b])?;
    }
    let y = super::elementwise::cast_to(c, y, out_dt)?;
    Ok(Some(vec![y, mean, inv]))
}

/// x / sqrt(mean(x²) + eps) · scale over dims axis..rank.
fn rms_norm(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x0 = c.input(n, 0)?;
    let out_dt = c.dtype(x0)?;
    let x = stash(c, n, x0)?;
    let r = c.rank(x)? as i64;
    let axis = Attrs(n).i_or("axis", -1);
    let a = rlx_ir::normalize_axis(axis, r as usize).map_err(|e| c.err(e))? as i64;
    let axes: Vec<i64> = (a..r).collect();
    let dt = c.dtype(x)?;
    let sq = c.add(Op::Binary(B::Mul), &[x, x])?;
    let ms = mean_keep(c, sq, &axes)?;
    let eps = c.scalar(Attrs(n).f_or("epsilon", 1e-5) as f64, dt)?;
    let ve = c.add(Op::Binary(B::Add), &[ms, eps])?;
    let inv = c.add(Op::Activation(A::Rsqrt), &[ve])?;
    let y = c.add(Op::Binary(B::Mul), &[x, inv])?;
    let s = c.input(n, 1)?;
    let s = super::elementwise::cast_to(c, s, dt)?;
    let y = c.add(Op::Binary(B::Mul), &[y, s])?;
    one(super::elementwise::cast_to(c, y, out_dt)?)
}

/// Normalise each of `num_groups` channel groups of `[N, C, …]`, then scale and shift per
/// channel (opset 21; opset 18's per-group scale is repeated over each group's channels).
fn group_norm(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x0 = c.input(n, 0)?;
    let out_dt = c.dtype(x0)?;
    let x = stash(c, n, x0)?;
    let d = c.static_dims(x)?;
    let g = Attrs(n)
        .i("num_groups")
        .ok_or_else(|| c.err("needs num_groups"))?;
    let g = usize::try_from(g)
        .ok()
        .filter(|&g| g > 0 && d.len() >= 2 && d[1] % g == 0)
        .ok_or_else(|| c.err(format!("num_groups {g} for {d:?}")))?;
    let (nn, ch) = (d[0], d[1]);
    let xg = c.add(
        Op::Reshape {
            shape: vec![nn as i64, g as i64, -1],
        },
        &[x],
    )?;
    let dt = c.dtype(x)?;
    let mean = mean_keep(c, xg, &[2])?;
    let dv = c.add(Op::Binary(B::Sub), &[xg, mean])?;
    let sq = c.add(Op::Binary(B::Mul), &[dv, dv])?;
    let var = mean_keep(c, sq, &[2])?;
    let eps = c.scalar(Attrs(n).f_or("epsilon", 1e-5) as f64, dt)?;
    let ve = c.add(Op::Binary(B::Add), &[var, eps])?;
    let inv = c.add(Op::Activation(A::Rsqrt), &[ve])?;
    let y = c.add(Op::Binary(B::Mul), &[dv, inv])?;
    let y = c.add(
        Op::Reshape {
            shape: d.iter().map(|&v| v as i64).collect(),
        },
        &[y],
    )?;
    let per = |c: &mut ImportCtx, v: NodeId| -> Result<NodeId, OnnxError> {
        let v = super::elementwise::cast_to(c, v, dt)?;
        let len = c.static_dims(v)?.iter().product::<usize>();
        let v = if len == g && g != ch {
            let v = c.add(
                Op::Reshape {
                    shape: vec![g as i64, 1],
                },
                &[v],
            )?;
            let v = c.add(
                Op::Expand {
                    shape: vec![Dim::Static(g), Dim::Static(ch / g)],
                },
                &[v],
            )?;
            c.add(
                Op::Reshape {
                    shape: vec![ch as i64],
                },
                &[v],
            )?
        } else {
            v
        };
        per_channel(c, v, d.len())
    };
    let s = c.input(n, 1)?;
    let s = per(c, s)?;
    let b = c.input(n, 2)?;
    let b = per(c, b)?;
    let y = c.add(Op::Binary(B::Mul), &[y, s])?;
    let y = c.add(Op::Binary(B::Add), &[y, b])?;
    one(super::elementwise::cast_to(c, y, out_dt)?)
}

/// (x − mean) / (sqrt(mean(x²) − mean²) + 1e-9) over `axes` (default [0, 2, 3]).
fn mvn(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let axes = Attrs(n).ints("axes").map_or(vec![0, 2, 3], <[i64]>::to_vec);
    let dt = c.dtype(x)?;
    let mean = mean_keep(c, x, &axes)?;
    let sq = c.add(Op::Binary(B::Mul), &[x, x])?;
    let msq = mean_keep(c, sq, &axes)?;
    let m2 = c.add(Op::Binary(B::Mul), &[mean, mean])?;
    let var = c.add(Op::Binary(B::Sub), &[msq, m2])?;
    let sd = c.add(Op::Activation(A::Sqrt), &[var])?;
    let eps = c.scalar(1e-9, dt)?;
    let den = c.add(Op::Binary(B::Add), &[sd, eps])?;
    let d = c.add(Op::Binary(B::Sub), &[x, mean])?;
    one(c.add(Op::Binary(B::Div), &[d, den])?)
}

fn layer_norm(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let half = c
        .input(n, 0)
        .and_then(|x| c.dtype(x))
        .is_ok_and(|d| !matches!(d, rlx_ir::DType::F32 | rlx_ir::DType::F64));
    if half || n.output.iter().skip(1).any(|o| !o.is_empty()) {
        return layer_norm_stats(c, n);
    }
    let x = c.input(n, 0)?;
    let xs = c.shape(x)?.clone();
    let axis = Attrs(n).i_or("axis", -1);
    let a = xs.axis(axis).map_err(|e| c.err(e))?;
    let eps = Attrs(n).f_or("epsilon", 1e-5);
    let normed = xs.dims[a..].to_vec();
    let fit = |c: &mut ImportCtx, v: NodeId| -> Result<NodeId, OnnxError> {
        let v = super::elementwise::cast_to(c, v, xs.dtype)?;
        if c.shape(v)?.dims == normed {
            return Ok(v);
        }
        c.add(
            Op::Expand {
                shape: normed.clone(),
            },
            &[v],
        )
    };
    let gamma = c.input(n, 1)?;
    let gamma = fit(c, gamma)?;
    let mut ins = vec![x, gamma];
    if let Some(b) = c.opt_input(n, 2)? {
        ins.push(fit(c, b)?);
    }
    one(c.add(
        Op::LayerNorm {
            axis: a as i64,
            eps,
        },
        &ins,
    )?)
}

/// (x − mean) / sqrt(var + eps) · scale + B over the spatial dims of each (n, c).
fn instance_norm(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let r = c.rank(x)?;
    let axes: Vec<i64> = (2..r as i64).collect();
    let dt = c.dtype(x)?;
    let mean = c.add(
        Op::Reduce {
            op: ReduceOp::Mean,
            axes: axes.clone(),
            keep_dim: true,
        },
        &[x],
    )?;
    let xc = c.add(Op::Binary(B::Sub), &[x, mean])?;
    let sq = c.add(Op::Binary(B::Mul), &[xc, xc])?;
    let var = c.add(
        Op::Reduce {
            op: ReduceOp::Mean,
            axes,
            keep_dim: true,
        },
        &[sq],
    )?;
    let eps = c.scalar(Attrs(n).f_or("epsilon", 1e-5) as f64, dt)?;
    let ve = c.add(Op::Binary(B::Add), &[var, eps])?;
    let inv = c.add(Op::Activation(A::Rsqrt), &[ve])?;
    let y = c.add(Op::Binary(B::Mul), &[xc, inv])?;
    let s = c.input(n, 1)?;
    let s = per_channel(c, s, r)?;
    let b = c.input(n, 2)?;
    let b = per_channel(c, b, r)?;
    let y = c.add(Op::Binary(B::Mul), &[y, s])?;
    one(c.add(Op::Binary(B::Add), &[y, b])?)
}

/// x / ‖x‖_p along `axis` (p = 1 or 2).
fn lp_norm(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let a = Attrs(n);
    let axis = a.i_or("axis", -1);
    let p = a.i_or("p", 2);
    let red = |c: &mut ImportCtx, v: NodeId| {
        c.add(
            Op::Reduce {
                op: ReduceOp::Sum,
                axes: vec![axis],
                keep_dim: true,
            },
            &[v],
        )
    };
    let norm = match p {
        1 => {
            let ab = c.add(Op::Activation(A::Abs), &[x])?;
            red(c, ab)?
        }
        2 => {
            let sq = c.add(Op::Binary(B::Mul), &[x, x])?;
            let s = red(c, sq)?;
            c.add(Op::Activation(A::Sqrt), &[s])?
        }
        p => return Err(c.err(format!("p = {p} (must be 1 or 2)"))),
    };
    // A zero norm gives zeros (ONNX's reference), not 0/0.
    let dt = c.dtype(x)?;
    let (zero, unit) = (c.scalar(0.0, dt)?, c.scalar(1.0, dt)?);
    let is0 = c.add(Op::Compare(rlx_ir::CompareOp::Eq), &[norm, zero])?;
    let den = c.add(Op::Where, &[is0, unit, norm])?;
    one(c.add(Op::Binary(B::Div), &[x, den])?)
}
