//! CUDA lowering of the elementwise ops (kernels in `kernels/elementwise.cu`).
use super::{Lowered, NodeCtx};

pub(crate) fn lower(ctx: &mut NodeCtx) -> Lowered {
    crate::bail!("{} has no CUDA lowering yet", ctx.op().kind())
}
