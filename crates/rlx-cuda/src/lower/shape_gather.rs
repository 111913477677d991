//! Gather: row copies picked by an index tensor (kernels in `kernels/shape_ops.cu`).
use super::super::{KArgs, LowerError, Lowered, NodeCtx};
use super::move_ops::{row_launch, unit_sfx, widest_unit};
use crate::kernels::{Lib, Src};
use crate::unsupported;
use rlx_ir::DType;

const SRC: Src = Src::Lib(Lib::ShapeOps);

fn index_sfx(dtype: DType) -> Result<&'static str, LowerError> {
    Ok(match dtype {
        DType::F32 => "f32",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::F64 => "f64",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::U8 => "u8",
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
    let args = KArgs::new()
        .ptr(data.ptr)
        .ptr(idx.ptr)
        .ptr(out.ptr)
        .i64(rows as i64)
        .i64(k as i64)
        .i64(n as i64)
        .i64(iu as i64);
    let func = format!("gather_rows_{}_{isfx}", unit_sfx(u)?);
    ctx.launch(SRC, &func, grid, block, 0, args)
}
