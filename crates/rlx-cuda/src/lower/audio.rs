//! CUDA lowering of the audio ops (kernels in `kernels/audio.cu`).
use super::{Lowered, NodeCtx};

pub(crate) fn lower(ctx: &mut NodeCtx) -> Lowered {
    crate::bail!("{} has no CUDA lowering yet", ctx.op().kind())
}
