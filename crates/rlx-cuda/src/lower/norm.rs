//! CUDA lowering of the norm ops (kernels in `kernels/norm.cu`): LayerNorm, RmsNorm,
//! FusedResidualLN and FusedResidualRmsNorm all become one row kernel launch.
use super::reduce::cached_tile;
use super::{Lowered, NodeCtx};
use crate::kernels::norm::{self as k, NormPtrs, NormRows};
use crate::kernels::Sfx;
use crate::unsupported;

pub(crate) fn layer_norm(ctx: &mut NodeCtx, axis: i64, eps: f32) -> Lowered {
    norm_rows(ctx, false, Some(axis), eps, false, false)
}

pub(crate) fn rms_norm(ctx: &mut NodeCtx, axis: i64, eps: f32) -> Lowered {
    norm_rows(ctx, true, Some(axis), eps, false, false)
}

pub(crate) fn fused_residual_ln(ctx: &mut NodeCtx, has_bias: bool, eps: f32) -> Lowered {
    norm_rows(ctx, false, None, eps, true, has_bias)
}

pub(crate) fn fused_residual_rms_norm(ctx: &mut NodeCtx, has_bias: bool, eps: f32) -> Lowered {
    norm_rows(ctx, true, None, eps, true, has_bias)
}

/// Every norm: `rms` or layer norm over axes `axis..` (None: the last), with the residual
/// form's extra input and optional bias.
fn norm_rows(
    ctx: &mut NodeCtx,
    rms: bool,
    axis: Option<i64>,
    eps: f32,
    residual: bool,
    has_bias: bool,
) -> Lowered {
    let x = ctx.input(0)?.clone();
    let sfx = Sfx::float(x.dtype)?;
    if let Some(t) = ctx.ins.iter().find(|t| t.dtype != x.dtype) {
        unsupported!(
            "mixed dtypes: x is {}, another input is {}",
            x.dtype,
            t.dtype
        );
    }
    if ctx.out.dtype != x.dtype || ctx.out.numel() != x.numel() {
        unsupported!("output {:?} does not match x {:?}", ctx.out, x);
    }
    if x.rank() == 0 {
        unsupported!("x must have rank >= 1");
    }
    let a = match axis {
        Some(a) => ctx.axis(a, x.rank())?,
        None => x.rank() - 1,
    };
    let len: usize = x.dims[a..].iter().product();
    if x.numel() == 0 {
        return Ok(());
    }
    if len > i32::MAX as usize {
        unsupported!("rows of {len} values exceed the kernels' 32-bit in-row index");
    }
    let rows = x.numel() / len;

    // Inputs after x: [residual], [bias], gamma, [beta].
    let mut i = 1;
    let mut next = |present: bool| {
        let at = i;
        i += present as usize;
        present.then_some(at)
    };
    let r = next(residual);
    let b = next(has_bias);
    let g = next(true);
    let be = next(ctx.ins.len() > if residual { 3 + has_bias as usize } else { 2 });
    if i != ctx.ins.len() {
        unsupported!("{} inputs do not fit {}", ctx.ins.len(), ctx.op().kind());
    }
    let ptr = |k: Option<usize>, want: usize| -> Result<u64, super::LowerError> {
        match k {
            None => Ok(0),
            Some(k) => {
                let t = ctx.input(k)?;
                if t.numel() != want {
                    unsupported!("input {k} holds {} values, expected {want}", t.numel());
                }
                Ok(t.ptr)
            }
        }
    };
    let (rp, bp, gp, bep) = (
        ptr(r, x.numel())?,
        ptr(b, len)?,
        ptr(g, len)?,
        ptr(be, len)?,
    );

    let p = NormPtrs {
        x: x.ptr,
        r: rp,
        b: bp,
        g: gp,
        be: bep,
        y: ctx.out.ptr,
    };
    launch_norm(ctx, sfx, x.dtype.size_bytes(), p, (rows, len), eps, rms)
}

/// One norm row-kernel launch over `rows` rows of `len` values at the pointers `p`.
pub(crate) fn launch_norm(
    ctx: &mut NodeCtx,
    sfx: Sfx,
    elem: usize,
    p: NormPtrs,
    (rows, len): (usize, usize),
    eps: f32,
    rms: bool,
) -> Lowered {
    let ptrs = [p.x, p.r, p.b, p.g, p.be, p.y];
    let (variant, grid, block) = match vec_rows(elem, rows, len, &ptrs) {
        Some(v) => v,
        None => {
            let (tile, grid, block) = cached_tile(rows, len);
            (NormRows::Cached(tile), grid, block)
        }
    };
    let kernel = k::norm(variant, sfx, p, rows as i64, len as i64, eps, rms as i32);
    ctx.run(kernel, grid, block, 0)
}

/// The vectorised warp-per-row kernel (`norm_v<V>`) when the row is a multiple of four
/// elements of at most 1024 and every pointer (0 = absent) is aligned to four elements.
pub(crate) fn vec_rows(
    elem: usize,
    rows: usize,
    len: usize,
    ptrs: &[u64],
) -> Option<(NormRows, [u32; 3], [u32; 3])> {
    if !len.is_multiple_of(4)
        || len > 1024
        || ptrs.iter().any(|p| !p.is_multiple_of(4 * elem as u64))
    {
        return None;
    }
    let v = (len / 4).div_ceil(32).next_power_of_two();
    let grid = rows.div_ceil(8).clamp(1, super::reduce::MAX_GRID) as u32;
    Some((NormRows::Vec4(v), [grid, 1, 1], [32, 8, 1]))
}
