//! CUDA lowering of the shape ops (kernels in `kernels/shape_ops.cu`). Expand, Transpose,
//! Narrow and Slice are strided views of their input (dims, element strides, element
//! offset) that one copy materialises; `move_ops` picks the copy kernel for a view. Reshape
//! is a copy, Concat row copies, Pad a fill plus a copy, Gather indexed row copies. Data
//! movement is dtype-agnostic: kernels move 1/2/4/8/16-byte units, so every dtype is lowered.
#[path = "shape_gather.rs"]
mod gather_rows;
#[path = "shape_move.rs"]
pub(crate) mod move_ops;

use super::{DevTensor, Lowered, NodeCtx};
use crate::unsupported;
use rlx_ir::ops::shape_ops::{slice_params, slice_range};
use rlx_ir::DType;

pub(crate) use move_ops::View;

/// Data movement keeps the element width (a shape op never converts).
fn same_width(ctx: &NodeCtx) -> Result<DevTensor, super::LowerError> {
    let x = ctx.input(0)?.clone();
    if ctx.out.dtype.size_bytes() != x.dtype.size_bytes() {
        unsupported!(
            "output {} differs from input {} in width",
            ctx.out.dtype,
            x.dtype
        );
    }
    Ok(x)
}

/// Materialise `view` of input 0 into the output.
fn copy_out(ctx: &mut NodeCtx, x: &DevTensor, view: View) -> Lowered {
    if view.dims != ctx.out.dims {
        unsupported!(
            "view {:?} does not give the output {:?}",
            view.dims,
            ctx.out.dims
        );
    }
    let out = ctx.out.clone();
    move_ops::copy_view(ctx, x, &view, out.ptr)
}

pub(crate) fn expand(ctx: &mut NodeCtx) -> Lowered {
    let x = same_width(ctx)?;
    let view = View::broadcast(&x.dims, &ctx.out.dims)?;
    copy_out(ctx, &x, view)
}

pub(crate) fn transpose(ctx: &mut NodeCtx, perm: &[usize]) -> Lowered {
    let x = same_width(ctx)?;
    let r = x.rank();
    let mut seen = vec![false; r];
    if perm.len() != r
        || !perm
            .iter()
            .all(|&p| p < r && !std::mem::replace(&mut seen[p], true))
    {
        unsupported!("perm {perm:?} is not a permutation of rank {r}");
    }
    let view = View::contiguous(&x.dims).permute(perm);
    copy_out(ctx, &x, view)
}

pub(crate) fn narrow(ctx: &mut NodeCtx, axis: i64, start: usize, len: usize) -> Lowered {
    let x = same_width(ctx)?;
    let a = ctx.axis(axis, x.rank())?;
    if start + len > x.dims[a] {
        unsupported!(
            "narrow [{start}, +{len}) out of range for dim {}",
            x.dims[a]
        );
    }
    let view = View::contiguous(&x.dims).narrow(a, start, len);
    copy_out(ctx, &x, view)
}

pub(crate) fn slice(
    ctx: &mut NodeCtx,
    axes: &[i64],
    starts: &[i64],
    ends: &[i64],
    steps: &[i64],
) -> Lowered {
    let x = same_width(ctx)?;
    let mut v = View::contiguous(&x.dims);
    let params = slice_params(x.rank(), axes, starts, ends, steps)
        .map_err(super::LowerError::Unsupported)?;
    for (a, s, e, step) in params {
        let (first, len) = slice_range(x.dims[a], s, e, step);
        v.offset += first as i64 * v.strides[a];
        // With one element the step is never taken (and a huge step must not overflow).
        v.strides[a] = if len > 1 { v.strides[a] * step } else { 0 };
        v.dims[a] = len;
    }
    copy_out(ctx, &x, v)
}

pub(crate) fn gather(ctx: &mut NodeCtx, axis: i64) -> Lowered {
    same_width(ctx)?;
    gather_rows::gather(ctx, axis)
}

/// A plain copy, or a broadcast when a 1-element tensor expands.
pub(crate) fn reshape(ctx: &mut NodeCtx) -> Lowered {
    same_width(ctx)?;
    let (x, out) = (ctx.input(0)?.clone(), ctx.out.clone());
    if x.numel() == out.numel() {
        if x.ptr == out.ptr {
            return Ok(());
        }
        return ctx.copy(out.ptr, x.ptr, out.bytes());
    }
    if x.numel() != 1 {
        unsupported!("cannot reshape {:?} into {:?}", x.dims, out.dims);
    }
    let v = View {
        strides: vec![0; out.rank()],
        dims: out.dims.clone(),
        offset: 0,
    };
    move_ops::copy_view(ctx, &x, &v, out.ptr)
}

/// One row copy per input: input i's rows (outer × its slab) land at its column offset.
pub(crate) fn concat(ctx: &mut NodeCtx, axis: i64) -> Lowered {
    same_width(ctx)?;
    let out = ctx.out.clone();
    let a = ctx.axis(axis, out.rank())?;
    let es = out.dtype.size_bytes();
    let outer: usize = out.dims[..a].iter().product();
    let inner: usize = out.dims[a + 1..].iter().product();
    let total = out.dims[a] * inner;
    let mut off = 0usize;
    for x in ctx.ins.clone() {
        if x.rank() != out.rank() || x.dtype.size_bytes() != es {
            unsupported!(
                "concat input {:?} {} does not match output {:?}",
                x.dims,
                x.dtype,
                out.dims
            );
        }
        let w = x.dims[a] * inner;
        if off + w > total {
            unsupported!("concat inputs overflow the output axis");
        }
        move_ops::row_copy(
            ctx,
            x.ptr,
            out.at(off),
            &[outer],
            &[w as i64],
            &[total as i64],
            w,
            es,
        )?;
        off += w;
    }
    if off != total {
        unsupported!("concat inputs fill {off} of {total} columns");
    }
    Ok(())
}

/// The bits of `value` in `dtype`, converted the way the CPU reference does (f32 for the
/// half types; integers saturate as `Cast` does).
fn pad_bits(value: f64, dtype: DType) -> u64 {
    let int = rlx_cpu::ops::scalar::float_to_int(value, dtype);
    match dtype {
        DType::F32 => (value as f32).to_bits() as u64,
        DType::F64 => value.to_bits(),
        DType::F16 => half::f16::from_f32(value as f32).to_bits() as u64,
        DType::BF16 => half::bf16::from_f32(value as f32).to_bits() as u64,
        DType::I64 => int as u64,
        // In range already: the low bits are the value.
        DType::I32 => int as i32 as u32 as u64,
        DType::U8 | DType::Bool => int as u8 as u64,
    }
}

pub(crate) fn pad(ctx: &mut NodeCtx, pads: &[[usize; 2]], value: f64) -> Lowered {
    same_width(ctx)?;
    let (x, out) = (ctx.input(0)?.clone(), ctx.out.clone());
    let r = x.rank();
    if pads.len() != r {
        unsupported!("pad lists {} pairs for rank {r}", pads.len());
    }
    let want: Vec<usize> = x
        .dims
        .iter()
        .zip(pads)
        .map(|(d, p)| d + p[0] + p[1])
        .collect();
    if want != out.dims {
        unsupported!(
            "pad of {:?} gives {want:?}, output is {:?}",
            x.dims,
            out.dims
        );
    }
    if out.numel() == 0 {
        return Ok(());
    }
    if r == 0 {
        return ctx.copy(out.ptr, x.ptr, out.bytes());
    }
    let es = out.dtype.size_bytes();
    let sfx = move_ops::unit_sfx(es)?;
    let xs: Vec<i64> = rlx_ir::strides(&x.dims).iter().map(|&s| s as i64).collect();
    let before: Vec<i64> = pads[..r - 1].iter().map(|p| p[0] as i64).collect();
    let od = move_ops::dims8(&out.dims[..r - 1], &xs[..r - 1])?;
    let pd = move_ops::dims8(&x.dims[..r - 1], &before)?;
    let rows: usize = out.dims[..r - 1].iter().product();
    let l = out.dims[r - 1];
    let (block, grid) = move_ops::row_launch(rows, l, 1);
    let (rows, l) = (rows as i64, l as i64);
    let (pb, n) = (pads[r - 1][0] as i64, x.dims[r - 1] as i64);
    let bits = pad_bits(value, out.dtype);
    let kernel =
        crate::kernels::shape_ops::pad_rows(sfx, (x.ptr, out.ptr), od, pd, rows, l, pb, n, bits);
    ctx.run(kernel, [grid[0], 1, 1], block, 0)
}
