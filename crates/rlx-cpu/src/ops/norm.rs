//! CPU thunks of the Norm group: LayerNorm, RmsNorm, FusedResidualLN, FusedResidualRmsNorm.
//! Row statistics accumulate in f64 whatever the compute class (cheap next to the pass
//! over the row, and it keeps long rows of f32 exact enough).
use super::arity;
use crate::error::op_err;
use crate::{CpuError, Elem, Float, OutView, TensorView};
use rayon::prelude::*;
use rlx_ir::normalize_axis;

/// Rows at least this many elements in total are normalised in parallel.
const PAR_ELEMS: usize = 1 << 15;

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Layer,
    Rms,
}

/// Normalise each `len`-long row of `h` (in place) then scale by gamma and shift by beta.
fn norm_row<T: Float>(kind: Kind, h: &mut [T], gamma: &[T], beta: Option<&[T]>, eps: f64) {
    let n = h.len() as f64;
    let (mean, var) = match kind {
        Kind::Layer => {
            let mean = h.iter().map(|&v| Elem::to_f64(v)).sum::<f64>() / n;
            let var = h
                .iter()
                .map(|v| {
                    let d = Elem::to_f64(*v) - mean;
                    d * d
                })
                .sum::<f64>()
                / n;
            (mean, var)
        }
        Kind::Rms => (
            0.0,
            h.iter().map(|&v| Elem::to_f64(v).powi(2)).sum::<f64>() / n,
        ),
    };
    let rstd = 1.0 / (var + eps).sqrt();
    let (mean, rstd) = (T::from_f64(mean), T::from_f64(rstd));
    for (j, v) in h.iter_mut().enumerate() {
        let y = (*v - mean) * rstd * gamma[j];
        *v = match beta {
            Some(b) => y + b[j],
            None => y,
        };
    }
}

pub(super) fn for_rows<T: Float>(
    out: &mut [T],
    len: usize,
    f: impl Fn(usize, &mut [T]) + Sync + Send,
) {
    if len == 0 {
        return;
    }
    if out.len() >= PAR_ELEMS && out.len() / len > 1 {
        out.par_chunks_mut(len)
            .enumerate()
            .for_each(|(i, r)| f(i, r));
    } else {
        out.chunks_mut(len).enumerate().for_each(|(i, r)| f(i, r));
    }
}

fn param<'a, T: Float>(what: &str, t: &TensorView<'a>, len: usize) -> Result<&'a [T], CpuError> {
    let v = t.get::<T>()?;
    if v.len() != len {
        return Err(op_err(format!(
            "{what} holds {} values, the normalised dims hold {len}",
            v.len()
        )));
    }
    Ok(v)
}

/// LayerNorm / RmsNorm over dims `axis..rank`.
fn axis_norm<T: Float>(
    kind: Kind,
    axis: i64,
    eps: f32,
    ins: &[TensorView],
    out: &mut [T],
) -> Result<(), CpuError> {
    let x = &ins[0];
    let a = normalize_axis(axis, x.rank()).map_err(op_err)?;
    let len: usize = x.shape[a..].iter().product();
    let gamma = param::<T>("gamma", &ins[1], len)?;
    let beta = ins.get(2).map(|b| param::<T>("beta", b, len)).transpose()?;
    let xv = x.get::<T>()?;
    if out.len() != xv.len() {
        return Err(op_err("output and x sizes differ"));
    }
    out.copy_from_slice(xv);
    for_rows(out, len, |_, r| norm_row(kind, r, gamma, beta, eps as f64));
    Ok(())
}

/// Norm of `x + residual (+ bias)` over the last dim.
fn residual_norm<T: Float>(
    kind: Kind,
    has_bias: bool,
    eps: f32,
    ins: &[TensorView],
    out: &mut [T],
) -> Result<(), CpuError> {
    let want = if has_bias { 4 } else { 3 };
    if ins.len() < want || ins.len() > want + 1 {
        return Err(op_err(format!(
            "takes {want} or {} inputs, got {}",
            want + 1,
            ins.len()
        )));
    }
    let x = &ins[0];
    let len = *x
        .shape
        .last()
        .ok_or_else(|| op_err("x must have rank >= 1"))?;
    let (xv, rv) = (x.get::<T>()?, ins[1].get::<T>()?);
    if rv.len() != xv.len() || out.len() != xv.len() {
        return Err(op_err(format!(
            "x {:?}, residual {:?} and output must have one size",
            x.shape, ins[1].shape
        )));
    }
    let mut i = 2;
    let bias = if has_bias {
        i += 1;
        Some(param::<T>("bias", &ins[2], len)?)
    } else {
        None
    };
    let gamma = param::<T>("gamma", &ins[i], len)?;
    let beta = ins
        .get(i + 1)
        .map(|b| param::<T>("beta", b, len))
        .transpose()?;
    for_rows(out, len, |row, r| {
        let base = row * len;
        for (j, v) in r.iter_mut().enumerate() {
            let s = xv[base + j] + rv[base + j];
            *v = match bias {
                Some(b) => s + b[j],
                None => s,
            };
        }
        norm_row(kind, r, gamma, beta, eps as f64);
    });
    Ok(())
}

/// LayerNorm / RmsNorm need x and gamma at least; the rest is checked by each thunk.
fn norm_inputs<'s, 'a>(ins: &'s [TensorView<'a>]) -> Result<&'s [TensorView<'a>], CpuError> {
    arity(ins, 2, 3)
}

/// x, gamma, [beta] normalised over dims `axis..rank`.
pub fn layer_norm(
    axis: i64,
    eps: f32,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let ins = norm_inputs(ins)?;
    float_class!(out.class(), T => axis_norm::<T>(Kind::Layer, axis, eps, ins, out.get_mut()?))
}

pub fn rms_norm(axis: i64, eps: f32, ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let ins = norm_inputs(ins)?;
    float_class!(out.class(), T => axis_norm::<T>(Kind::Rms, axis, eps, ins, out.get_mut()?))
}

/// x, residual, [bias], gamma, [beta]: layer-norm of x + residual (+ bias) over the last dim.
pub fn fused_residual_ln(
    has_bias: bool,
    eps: f32,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    float_class!(out.class(), T => residual_norm::<T>(Kind::Layer, has_bias, eps, ins, out.get_mut()?))
}

pub fn fused_residual_rms_norm(
    has_bias: bool,
    eps: f32,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    float_class!(out.class(), T => residual_norm::<T>(Kind::Rms, has_bias, eps, ins, out.get_mut()?))
}
