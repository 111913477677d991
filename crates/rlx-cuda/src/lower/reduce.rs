//! CUDA lowering of the reduce ops (kernels in `kernels/reduce.cu`).
use super::{Lowered, NodeCtx};

pub(crate) fn lower(ctx: &mut NodeCtx) -> Lowered {
    crate::bail!("{} has no CUDA lowering yet", ctx.op().kind())
}
