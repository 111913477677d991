//! CUDA lowering of the shape_ops ops (kernels in `kernels/shape_ops.cu`).
use super::{Lowered, NodeCtx};

pub(crate) fn lower(ctx: &mut NodeCtx) -> Lowered {
    crate::bail!("{} has no CUDA lowering yet", ctx.op().kind())
}
