//! CUDA lowering of the transformer ops: Attention (`transformer_attention.rs`, kernels in
//! `kernels/attention.cu`), Rope and RopeCacheWrite (`transformer_rope.rs`, kernels in
//! `kernels/shape_ops.cu`)
//! and FusedSwiGLU (a kernel from the elementwise generator).
#[path = "transformer_attention.rs"]
mod attention_impl;
#[path = "transformer_rope.rs"]
mod rope_impl;

use super::elementwise::{plan_swiglu, record};
use super::{Lowered, NodeCtx};
use rlx_ir::{AttentionSpec, RopeStyle};

pub(crate) fn attention(ctx: &mut NodeCtx, spec: &AttentionSpec) -> Lowered {
    attention_impl::lower(ctx, spec)
}

pub(crate) fn cached_attention(
    ctx: &mut NodeCtx,
    spec: &AttentionSpec,
    rope: &Option<rlx_ir::CachedRope>,
) -> Lowered {
    attention_impl::lower_cached(ctx, spec, rope)
}

pub(crate) fn rope(ctx: &mut NodeCtx, head_dim: usize, n_rot: usize, style: RopeStyle) -> Lowered {
    rope_impl::rope(ctx, head_dim, n_rot, style)
}

pub(crate) fn rope_cache_write(
    ctx: &mut NodeCtx,
    axis: usize,
    head_dim: usize,
    n_rot: usize,
    style: RopeStyle,
) -> Lowered {
    rope_impl::rope_cache_write(ctx, axis, head_dim, n_rot, style)
}

/// CacheWrite: the output *is* the cache leaf (the memory plan aliases it), so this copies
/// only the new rows, at the position the kernel reads from device memory.
pub(crate) fn cache_write(ctx: &mut NodeCtx, axis: usize) -> Lowered {
    let (cache, new, pos) = (
        ctx.input(0)?.clone(),
        ctx.input(1)?.clone(),
        ctx.input(2)?.clone(),
    );
    if ctx.out.ptr != cache.ptr {
        return Err(super::LowerError::internal(
            ctx.node,
            "the memory plan did not alias the cache write to its cache",
        ));
    }
    cache_write_rows(ctx, &cache, &new, &pos, axis)
}

/// The cache write's kernel: `new`'s rows into `cache` at `*pos` along `axis`.
pub(super) fn cache_write_rows(
    ctx: &mut NodeCtx,
    cache: &super::DevTensor,
    new: &super::DevTensor,
    pos: &super::DevTensor,
    axis: usize,
) -> Lowered {
    if pos.dtype != rlx_ir::DType::I64 || pos.numel() != 1 || new.dtype != cache.dtype {
        crate::unsupported!("pos must be one i64 and new rows the cache's dtype");
    }
    let r = cache.rank();
    if axis >= r || new.rank() != r {
        crate::unsupported!("axis {axis} of cache {:?} / new {:?}", cache.dims, new.dims);
    }
    let outer: usize = cache.dims[..axis].iter().product();
    let inner: usize = cache.dims[axis + 1..].iter().product::<usize>() * cache.dtype.size_bytes();
    let (c, s) = (cache.dims[axis], new.dims[axis]);
    if new.numel() == 0 {
        return Ok(());
    }
    // The widest unit that divides a row and both pointers' alignment.
    let unit = [16usize, 8, 4, 2, 1]
        .into_iter()
        .find(|&u| inner.is_multiple_of(u) && (cache.ptr | new.ptr).is_multiple_of(u as u64))
        .unwrap_or(1);
    let kernel = crate::kernels::shape_ops::cache_write(
        crate::kernels::Unit::of_bytes(unit)?,
        (cache.ptr, new.ptr, pos.ptr),
        [outer as i64, c as i64, s as i64, (inner / unit) as i64],
    );
    ctx.run_1d_pdl(kernel, outer * s * inner / unit)
}

/// `cast_to` is already the output's dtype, which the generated kernel converts to.
pub(crate) fn fused_swiglu(ctx: &mut NodeCtx, gate_first: bool) -> Lowered {
    let p = plan_swiglu(&ctx.ins, &ctx.out, gate_first)?;
    record(ctx, p)
}
