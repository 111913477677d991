//! Rope: rotary position embedding of q/k heads (kernels in `kernels/shape_ops.cu`, beside
//! the row copies it shares its launch shape with).
use super::super::shape::move_ops::{coalesce, dims8, istrides};
use super::super::{LowerError, Lowered, NodeCtx};
use crate::kernels::{shape_ops, Sfx};
use crate::unsupported;
use rlx_ir::ops::attention::rope_view;
use rlx_ir::{Dim, RopeStyle};

pub(super) fn rope(ctx: &mut NodeCtx, head_dim: usize, n_rot: usize, style: RopeStyle) -> Lowered {
    let (x, cos, sin, out) = (
        ctx.input(0)?.clone(),
        ctx.input(1)?.clone(),
        ctx.input(2)?.clone(),
        ctx.out.clone(),
    );
    let xs = Sfx::float(x.dtype)?;
    let cs = Sfx::float(cos.dtype)?;
    if sin.dtype != cos.dtype || sin.dims != cos.dims {
        unsupported!(
            "sin {} {:?} differs from cos {} {:?}",
            sin.dtype,
            sin.dims,
            cos.dtype,
            cos.dims
        );
    }
    if out.dtype != x.dtype || out.dims != x.dims {
        unsupported!("output {:?} differs from x {:?}", out.dims, x.dims);
    }
    if n_rot == 0 || n_rot % 2 == 1 || n_rot > head_dim || cos.rank() == 0 {
        unsupported!(
            "n_rot {n_rot} / head_dim {head_dim} / cos {:?} are invalid",
            cos.dims
        );
    }
    let half = n_rot / 2;
    let stat = |d: &[usize]| d.iter().map(|&v| Dim::Static(v)).collect::<Vec<_>>();
    let view = rope_view(&stat(&x.dims), &stat(&cos.dims), head_dim, n_rot)
        .map_err(LowerError::Unsupported)?;
    let lead: Vec<usize> = view[..view.len() - 1]
        .iter()
        .map(|d| d.as_static().unwrap_or(1))
        .collect();
    let (cos_lead, cos_last) = cos.dims.split_at(cos.rank() - 1);
    if cos_last[0] != half || cos_lead.len() > lead.len() {
        unsupported!(
            "cos {:?} does not fit x {:?} with n_rot {n_rot}",
            cos.dims,
            x.dims
        );
    }
    // Row strides of cos broadcast onto the view's lead dims (units of `half`).
    let off = lead.len() - cos_lead.len();
    let cst = istrides(cos_lead);
    let mut st = vec![0i64; lead.len()];
    for (k, &c) in cos_lead.iter().enumerate() {
        if c == lead[off + k] && c != 1 {
            st[off + k] = cst[k];
        } else if c != 1 {
            unsupported!("cos {:?} does not broadcast to {lead:?}", cos.dims);
        }
    }
    let (d, s) = coalesce(&lead, &[&st]);
    let cv = dims8(&d, &s[0])?;
    let n = x.numel();
    if n == 0 {
        return Ok(());
    }
    let style = match style {
        RopeStyle::Half => 0,
        RopeStyle::Interleaved => 1,
    };
    let ptrs = (x.ptr, cos.ptr, sin.ptr, out.ptr);
    let (rows, hd, nrot) = ((n / head_dim) as i64, head_dim as i64, n_rot as i64);
    let kernel = shape_ops::rope(xs, cs, ptrs, cv, rows, hd, nrot, style);
    ctx.run_1d(kernel, n)
}
