//! CUDA lowering of the transformer ops: Attention (`transformer_attention.rs`, kernels in
//! `kernels/attention.cu`), Rope (`transformer_rope.rs`, kernels in `kernels/shape_ops.cu`)
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

pub(crate) fn rope(ctx: &mut NodeCtx, head_dim: usize, n_rot: usize, style: RopeStyle) -> Lowered {
    rope_impl::rope(ctx, head_dim, n_rot, style)
}

/// `cast_to` is already the output's dtype, which the generated kernel converts to.
pub(crate) fn fused_swiglu(ctx: &mut NodeCtx, gate_first: bool) -> Lowered {
    let p = plan_swiglu(&ctx.ins, &ctx.out, gate_first)?;
    record(ctx, p)
}
