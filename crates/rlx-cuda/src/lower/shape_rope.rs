//! Gather (row copies picked by an index tensor) and Rope.
use super::super::{KArgs, LowerError, Lowered, NodeCtx};
use super::move_ops::{coalesce, dims8, istrides, row_launch, unit_sfx, widest_unit};
use crate::kernels::Src;
use crate::unsupported;
use rlx_ir::ops::attention::rope_view;
use rlx_ir::{DType, Dim, RopeStyle};

const SRC: Src = Src::Static("shape_ops");

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

pub(super) fn rope(ctx: &mut NodeCtx, head_dim: usize, n_rot: usize, style: RopeStyle) -> Lowered {
    let (x, cos, sin, out) = (
        ctx.input(0)?.clone(),
        ctx.input(1)?.clone(),
        ctx.input(2)?.clone(),
        ctx.out.clone(),
    );
    let xs = NodeCtx::float_sfx(x.dtype)?;
    let cs = NodeCtx::float_sfx(cos.dtype)?;
    if sin.dtype != cos.dtype || sin.dims != cos.dims {
        unsupported!(
            "sin {} {:?} differs from cos {} {:?}",
            sin.dtype,
            sin.dims,
            cos.dtype,
            cos.dims
        );
    }
    if out.dtype != x.dtype || out.dims != x.dims {
        unsupported!("output {:?} differs from x {:?}", out.dims, x.dims);
    }
    if n_rot == 0 || n_rot % 2 == 1 || n_rot > head_dim || cos.rank() == 0 {
        unsupported!(
            "n_rot {n_rot} / head_dim {head_dim} / cos {:?} are invalid",
            cos.dims
        );
    }
    let half = n_rot / 2;
    let stat = |d: &[usize]| d.iter().map(|&v| Dim::Static(v)).collect::<Vec<_>>();
    let view = rope_view(&stat(&x.dims), &stat(&cos.dims), head_dim, n_rot)
        .map_err(LowerError::Unsupported)?;
    let lead: Vec<usize> = view[..view.len() - 1]
        .iter()
        .map(|d| d.as_static().unwrap_or(1))
        .collect();
    let (cos_lead, cos_last) = cos.dims.split_at(cos.rank() - 1);
    if cos_last[0] != half || cos_lead.len() > lead.len() {
        unsupported!(
            "cos {:?} does not fit x {:?} with n_rot {n_rot}",
            cos.dims,
            x.dims
        );
    }
    // Row strides of cos broadcast onto the view's lead dims (units of `half`).
    let off = lead.len() - cos_lead.len();
    let cst = istrides(cos_lead);
    let mut st = vec![0i64; lead.len()];
    for (k, &c) in cos_lead.iter().enumerate() {
        if c == lead[off + k] && c != 1 {
            st[off + k] = cst[k];
        } else if c != 1 {
            unsupported!("cos {:?} does not broadcast to {lead:?}", cos.dims);
        }
    }
    let (d, s) = coalesce(&lead, &[&st]);
    let cv = dims8(&d, &s[0])?;
    let n = x.numel();
    if n == 0 {
        return Ok(());
    }
    let style = match style {
        RopeStyle::Half => 0,
        RopeStyle::Interleaved => 1,
    };
    let args = KArgs::new()
        .ptr(x.ptr)
        .ptr(cos.ptr)
        .ptr(sin.ptr)
        .ptr(out.ptr)
        .dims(cv)
        .i64((n / head_dim) as i64)
        .i64(head_dim as i64)
        .i64(n_rot as i64)
        .i32(style);
    ctx.launch_1d(SRC, &format!("rope_{xs}_{cs}"), n, args)
}
