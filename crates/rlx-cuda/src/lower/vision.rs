//! CUDA lowering of the vision ops (kernels in `kernels/vision.cu`): pooling, its max
//! gradient and nearest 2× upsampling here; the convolutions in `vision_conv.rs`.
use super::{DevTensor, Lowered, NodeCtx};
use crate::kernels::vision::{self as k, PoolGeom};
use crate::kernels::{Sfx, Unit};
use crate::unsupported;
use rlx_ir::{ConvSpec, PoolKind, PoolSpec};

#[path = "vision_conv.rs"]
mod conv;

/// The kernels index with 32-bit ints; a tensor must stay well below 2^31 elements so a
/// grid-stride index never overflows.
const MAX_ELEMS: usize = 1 << 30;

pub(crate) fn conv(ctx: &mut NodeCtx, spec: &ConvSpec) -> Lowered {
    conv::forward(ctx, spec)
}

pub(crate) fn conv2d_backward_input(
    ctx: &mut NodeCtx,
    spec: &ConvSpec,
    input_hw: [usize; 2],
) -> Lowered {
    conv::backward_input(ctx, spec, input_hw)
}

pub(crate) fn conv2d_backward_weight(ctx: &mut NodeCtx, spec: &ConvSpec) -> Lowered {
    conv::backward_weight(ctx, spec)
}

pub(crate) fn max_pool2d_backward(ctx: &mut NodeCtx, spec: &PoolSpec) -> Lowered {
    max_pool_backward(ctx, spec)
}

/// Every tensor in `ts` is small enough for the kernels' 32-bit index math.
fn check_sizes(ts: &[&DevTensor]) -> Lowered {
    for t in ts {
        if t.numel() >= MAX_ELEMS {
            unsupported!(
                "tensor {:?} has {} elements; the vision kernels take fewer than {MAX_ELEMS}",
                t.dims,
                t.numel()
            );
        }
    }
    Ok(())
}

/// Pool geometry over x `[N, C, H, W]`: (planes, h, w, ho, wo).
fn pool_geom(spec: &PoolSpec, x: &DevTensor) -> Result<[usize; 5], super::LowerError> {
    if x.rank() != 4 {
        unsupported!("pool input must be rank 4, got {:?}", x.dims);
    }
    let mut out = [0usize; 2];
    for i in 0..2 {
        let (k, s, p) = (spec.kernel_size[i], spec.stride[i], spec.padding[i]);
        if p > k / 2 {
            unsupported!("pool padding {:?} exceeds half the kernel", spec.padding);
        }
        out[i] = match rlx_ir::ops::vision::conv_out_len(x.dims[2 + i], k, s, p, 1) {
            Some(v) => v,
            None => unsupported!("pool kernel is larger than the padded input"),
        };
    }
    Ok([x.dims[0] * x.dims[1], x.dims[2], x.dims[3], out[0], out[1]])
}

/// The pool geometry as the kernels take it.
fn pool_args(spec: &PoolSpec, [planes, h, w, ho, wo]: [usize; 5]) -> PoolGeom {
    let pair = |v: [usize; 2]| [v[0] as i32, v[1] as i32];
    PoolGeom {
        planes: planes as i32,
        h: h as i32,
        w: w as i32,
        ho: ho as i32,
        wo: wo as i32,
        k: pair(spec.kernel_size),
        s: pair(spec.stride),
        p: pair(spec.padding),
    }
}

pub(crate) fn pool(ctx: &mut NodeCtx, spec: &PoolSpec) -> Lowered {
    let x = ctx.input(0)?.clone();
    let sfx = Sfx::float(x.dtype)?;
    let geom = pool_geom(spec, &x)?;
    let [planes, _, _, ho, wo] = geom;
    if ctx.out.dims != [x.dims[0], x.dims[1], ho, wo] || ctx.out.dtype != x.dtype {
        unsupported!("pool output {:?} does not match the geometry", ctx.out.dims);
    }
    check_sizes(&[&x, &ctx.out])?;
    let n = planes * ho * wo;
    if n == 0 {
        return Ok(());
    }
    let is_max = (spec.kind == PoolKind::Max) as i32;
    let kernel = k::pool2d(sfx, x.ptr, ctx.out.ptr, pool_args(spec, geom), is_max);
    ctx.run_1d(kernel, n)
}

fn max_pool_backward(ctx: &mut NodeCtx, spec: &PoolSpec) -> Lowered {
    if spec.kind != PoolKind::Max {
        unsupported!("MaxPool2dBackward needs a max PoolSpec");
    }
    let x = ctx.input(0)?.clone();
    let dy = ctx.input(1)?.clone();
    let sfx = Sfx::float(x.dtype)?;
    let geom = pool_geom(spec, &x)?;
    let [planes, h, w, ho, wo] = geom;
    if dy.dims != [x.dims[0], x.dims[1], ho, wo] || dy.dtype != x.dtype {
        unsupported!("dy {:?} does not match the pool output", dy.dims);
    }
    if ctx.out.dims != x.dims || ctx.out.dtype != x.dtype {
        unsupported!("dx {:?} does not match x {:?}", ctx.out.dims, x.dims);
    }
    check_sizes(&[&x, &dy])?;
    let n = planes * h * w;
    if n == 0 {
        return Ok(());
    }
    let dx = ctx.out.ptr;
    let (k, st, pad) = (spec.kernel_size, spec.stride, spec.padding);
    if k == st && pad == [0, 0] {
        // Windows tile the plane: a thread per window writes all of it; rows and columns
        // past the last window get zeros first.
        if ho * k[0] < h || wo * k[1] < w {
            ctx.zero(dx, ctx.out.bytes())?;
        }
        let kernel = k::maxpool2d_bwd_tiled(sfx, x.ptr, dy.ptr, dx, pool_args(spec, geom));
        return ctx.run_1d(kernel, planes * ho * wo);
    }
    let overlap = (0..2).any(|i| spec.kernel_size[i] > spec.stride[i]);
    if !overlap {
        // Each input sits in at most one window: rescanning it is as cheap as a stored index.
        let kernel = k::maxpool2d_bwd(sfx, x.ptr, dy.ptr, dx, pool_args(spec, geom));
        return ctx.run_1d(kernel, n);
    }
    // Overlapping windows: find each window's first maximum once, then gather.
    let idx = ctx.scratch(planes * ho * wo * 4)?;
    let g = pool_args(spec, geom);
    ctx.run_1d(k::pool_argmax(sfx, x.ptr, idx, g), planes * ho * wo)?;
    ctx.run_1d(k::maxpool2d_bwd_idx(sfx, idx, dy.ptr, dx, g), n)
}

/// Any dtype: the kernel only moves elements, so it is picked by element size.
pub(crate) fn resize_nearest2x(ctx: &mut NodeCtx) -> Lowered {
    let x = ctx.input(0)?.clone();
    if x.rank() != 4 {
        unsupported!("ResizeNearest2x input must be rank 4, got {:?}", x.dims);
    }
    let d = &x.dims;
    if ctx.out.dims != [d[0], d[1], 2 * d[2], 2 * d[3]] || ctx.out.dtype != x.dtype {
        unsupported!(
            "ResizeNearest2x output {:?} is not 2x the input",
            ctx.out.dims
        );
    }
    check_sizes(&[&ctx.out])?;
    let unit = match x.dtype.size_bytes() {
        1 => Unit::B1,
        2 => Unit::B2,
        4 => Unit::B4,
        8 => Unit::B8,
        s => unsupported!("no ResizeNearest2x kernel for {s}-byte elements"),
    };
    let n = x.numel();
    if n == 0 {
        return Ok(());
    }
    let (planes, h, w) = ((d[0] * d[1]) as i32, d[2] as i32, d[3] as i32);
    let kernel = k::resize_nearest2x(unit, x.ptr, ctx.out.ptr, planes, h, w);
    ctx.run_1d(kernel, n)
}
