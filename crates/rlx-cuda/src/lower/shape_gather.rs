//! Gather: row copies picked by an index tensor (kernels in `kernels/shape_ops.cu`).
use super::super::{LowerError, Lowered, NodeCtx};
use super::move_ops::{row_launch, unit_sfx, widest_unit};
use crate::kernels::{shape_ops, Sfx};
use crate::unsupported;
use rlx_ir::DType;

fn index_sfx(dtype: DType) -> Result<Sfx, LowerError> {
    Ok(match dtype {
        DType::F32 => Sfx::F32,
        DType::F16 => Sfx::F16,
        DType::BF16 => Sfx::BF16,
        DType::F64 => Sfx::F64,
        DType::I32 => Sfx::I32,
        DType::I64 => Sfx::I64,
        DType::U8 => Sfx::U8,
        d => unsupported!("gather indices of dtype {d}"),
    })
}

/// Output = indices.shape spliced into data.shape at `axis`: row (o, j) of the output copies
/// the `inner` contiguous elements of data row (o, idx[j]). An embedding lookup is outer = 1,
/// one row per token.
pub(super) fn gather(ctx: &mut NodeCtx, axis: i64) -> Lowered {
    let (data, idx, out) = (
        ctx.input(0)?.clone(),
        ctx.input(1)?.clone(),
        ctx.out.clone(),
    );
    let a = ctx.axis(axis, data.rank())?;
    let isfx = index_sfx(idx.dtype)?;
    let outer: usize = data.dims[..a].iter().product();
    let n = data.dims[a];
    let inner: usize = data.dims[a + 1..].iter().product();
    let k = idx.numel();
    let mut want = data.dims[..a].to_vec();
    want.extend(&idx.dims);
    want.extend(&data.dims[a + 1..]);
    if want != out.dims {
        unsupported!("gather gives {want:?}, the output is {:?}", out.dims);
    }
    let rows = outer * k;
    if rows == 0 || inner == 0 {
        return Ok(());
    }
    let es = data.dtype.size_bytes();
    let u = widest_unit(es, inner, &[], &[data.ptr, out.ptr]);
    let iu = inner * es / u;
    let (block, grid) = row_launch(rows, iu, 2);
    let ptrs = (data.ptr, idx.ptr, out.ptr);
    let (rows, k, n, iu) = (rows as i64, k as i64, n as i64, iu as i64);
    let kernel = shape_ops::gather_rows(unit_sfx(u)?, isfx, ptrs, rows, k, n, iu);
    ctx.run(kernel, grid, block, 0)
}
