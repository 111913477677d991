//! Softmax, ArgMax and the softmax cross-entropy family (kernels in `kernels/reduce.cu`).
use super::{cached_tile, col_grid, stream_rows};
use crate::kernels::reduce::{self as k, CeLabels};
use crate::kernels::{Kernel, Sfx};
use crate::lower::{DevTensor, Lowered, NodeCtx};
use crate::unsupported;
use rlx_ir::DType;

/// (outer, len, inner) around `axis`.
fn outer_inner(dims: &[usize], axis: usize) -> (usize, usize, usize) {
    let outer = dims[..axis].iter().product();
    let inner = dims[axis + 1..].iter().product();
    (outer, dims[axis], inner)
}

pub(crate) fn softmax(ctx: &mut NodeCtx, axis: i64) -> Lowered {
    let x = ctx.input(0)?.clone();
    let sfx = Sfx::float(x.dtype)?;
    if ctx.out.dtype != x.dtype || ctx.out.numel() != x.numel() {
        unsupported!("output {:?} does not match x {:?}", ctx.out, x);
    }
    let a = ctx.axis(axis, x.rank())?;
    if x.numel() == 0 {
        return Ok(());
    }
    let (outer, len, inner) = outer_inner(&x.dims, a);
    let y = ctx.out.ptr;
    if inner == 1 && len <= i32::MAX as usize {
        let (tile, grid, block) = cached_tile(outer, len);
        let kernel = k::softmax_rows(tile, sfx, x.ptr, y, outer as i64, len as i64);
        return ctx.run(kernel, grid, block, 0);
    }
    launch_cols(ctx, k::softmax_cols, sfx, x.ptr, y, outer, len, inner)
}

/// A `*_cols` family: `(sfx, x, y, ncol, len, inner)`.
type ColsFamily = fn(Sfx, u64, u64, i64, i64, i64) -> Kernel;

/// A `*_cols` kernel: the op along a strided axis of `len`, `outer * inner` columns.
#[allow(clippy::too_many_arguments)]
fn launch_cols(
    ctx: &mut NodeCtx,
    family: ColsFamily,
    sfx: Sfx,
    x: u64,
    y: u64,
    outer: usize,
    len: usize,
    inner: usize,
) -> Lowered {
    let ncol = outer * inner;
    let kernel = family(sfx, x, y, ncol as i64, len as i64, inner as i64);
    ctx.run(kernel, [col_grid(ncol), 1, 1], [32, 8, 1], 0)
}

pub(crate) fn argmax(ctx: &mut NodeCtx, axis: i64) -> Lowered {
    let x = ctx.input(0)?.clone();
    let sfx = match x.dtype {
        DType::I32 => Sfx::I32,
        DType::I64 => Sfx::I64,
        d => Sfx::float(d)?,
    };
    let a = ctx.axis(axis, x.rank())?;
    let (outer, len, inner) = outer_inner(&x.dims, a);
    if ctx.out.dtype != DType::I64 || ctx.out.numel() != outer * inner {
        unsupported!("output {:?} is not the I64 argmax of x {:?}", ctx.out, x);
    }
    if len == 0 {
        unsupported!("ArgMax over an empty axis of {:?}", x.dims);
    }
    if ctx.out.numel() == 0 {
        return Ok(());
    }
    let y = ctx.out.ptr;
    if inner == 1 {
        let (mode, grid, block) = stream_rows(outer, len);
        let kernel = k::argmax_rows(mode, sfx, x.ptr, y, outer as i64, len as i64);
        return ctx.run(kernel, grid, block, 0);
    }
    launch_cols(ctx, k::argmax_cols, sfx, x.ptr, y, outer, len, inner)
}

/// The run-time dtype code `ld_any` in reduce.cu reads labels, targets and d_loss with.
fn dtype_code(d: DType) -> i32 {
    match d {
        DType::F32 => 0,
        DType::F16 => 1,
        DType::BF16 => 2,
        DType::F64 => 3,
        DType::I32 => 4,
        DType::I64 => 5,
        DType::U8 | DType::Bool => 6,
    }
}

fn check_numel(what: &str, t: &DevTensor, want: usize) -> Lowered {
    if t.numel() != want {
        unsupported!("{what} holds {} values, expected {want}", t.numel());
    }
    Ok(())
}

/// SoftmaxCrossEntropy (dense targets), SoftmaxCrossEntropyWithLogits (class labels; a
/// label that is not a class index gives a NaN loss where the CPU reference errors) and
/// SoftmaxCrossEntropyBackward (either target form). Labels, targets and d_loss may have
/// any dtype; logits are a float storage type.
/// The three cross-entropy ops: dense targets, class indices, and the backward (dense
/// when its targets are rank 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CrossEntropy {
    Dense,
    Sparse,
    Backward,
}

pub(super) fn cross_entropy(ctx: &mut NodeCtx, form: CrossEntropy) -> Lowered {
    let x = ctx.input(0)?.clone();
    let lab = ctx.input(1)?.clone();
    let sfx = Sfx::float(x.dtype)?;
    if x.rank() != 2 {
        unsupported!("logits must be [N, C], got {:?}", x.dims);
    }
    let (n, c) = (x.dims[0], x.dims[1]);
    if c == 0 {
        unsupported!("logits {:?} have no classes", x.dims);
    }
    if ctx.out.dtype != x.dtype {
        unsupported!(
            "output dtype {} differs from the logits' {}",
            ctx.out.dtype,
            x.dtype
        );
    }
    let dense = match form {
        CrossEntropy::Dense => true,
        CrossEntropy::Sparse => false,
        CrossEntropy::Backward => lab.rank() == 2,
    };
    check_numel("targets", &lab, if dense { n * c } else { n })?;
    if dense && !lab.dtype.is_float() {
        unsupported!("dense targets must be a float type, got {}", lab.dtype);
    }
    let backward = form == CrossEntropy::Backward;
    check_numel("output", &ctx.out, if backward { n * c } else { n })?;
    if n == 0 {
        return Ok(());
    }
    let (mode, grid, block) = stream_rows(n, c);
    let labels = CeLabels {
        ptr: lab.ptr,
        code: dtype_code(lab.dtype),
        dense: dense as i32,
    };
    let (y, n, c) = (ctx.out.ptr, n as i64, c as i64);
    let kernel = if backward {
        let dl = ctx.input(2)?.clone();
        check_numel("d_loss", &dl, n as usize)?;
        let d_loss = (dl.ptr, dtype_code(dl.dtype));
        k::ce_back(mode, sfx, x.ptr, labels, d_loss, y, n, c)
    } else {
        k::ce_loss(mode, sfx, x.ptr, labels, y, n, c)
    };
    ctx.run(kernel, grid, block, 0)
}
