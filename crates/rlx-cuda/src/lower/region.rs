//! CUDA lowering of the regions fusion makes. An elementwise region's chain becomes one
//! generated kernel (the elementwise generator, `elementwise_codegen.rs`); a batch region
//! runs that kernel over a table of samples; a transform region composes its steps into one
//! strided view and copies it (`region_transform.rs`).
#[path = "region_transform.rs"]
mod transform;

use super::elementwise::{plan_chain, record};
use super::{Lowered, NodeCtx};
use rlx_ir::{ChainStep, RegionPrologue, TransformStep};

pub(crate) fn elementwise_region(
    ctx: &mut NodeCtx,
    chain: &[ChainStep],
    prologue: RegionPrologue,
) -> Lowered {
    let p = plan_chain(chain, prologue, None, &ctx.ins, &ctx.out)?;
    record(ctx, p)
}

pub(crate) fn batch_elementwise_region(
    ctx: &mut NodeCtx,
    chain: &[ChainStep],
    num_batch_inputs: usize,
    prologue: RegionPrologue,
) -> Lowered {
    let p = plan_chain(chain, prologue, Some(num_batch_inputs), &ctx.ins, &ctx.out)?;
    record(ctx, p)
}

pub(crate) fn transform_region(ctx: &mut NodeCtx, steps: &[TransformStep]) -> Lowered {
    transform::lower(ctx, steps)
}
