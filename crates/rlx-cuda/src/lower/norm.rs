//! CUDA lowering of the norm ops (kernels in `kernels/norm.cu`).
use super::{Lowered, NodeCtx};

pub(crate) fn lower(ctx: &mut NodeCtx) -> Lowered {
    crate::bail!("{} has no CUDA lowering yet", ctx.op().kind())
}
