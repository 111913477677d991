//! Softmax, ArgMax and the softmax cross-entropy family (kernels in `kernels/reduce.cu`).
use super::{cached_rows, col_grid, stream_rows};
use crate::kernels::{Lib, Src};
use crate::lower::{DevTensor, KArgs, Lowered, NodeCtx};
use crate::unsupported;
use rlx_ir::DType;

const SRC: Src = Src::Lib(Lib::Reduce);

/// (outer, len, inner) around `axis`.
fn outer_inner(dims: &[usize], axis: usize) -> (usize, usize, usize) {
    let outer = dims[..axis].iter().product();
    let inner = dims[axis + 1..].iter().product();
    (outer, dims[axis], inner)
}

pub(crate) fn softmax(ctx: &mut NodeCtx, axis: i64) -> Lowered {
    let x = ctx.input(0)?.clone();
    let sfx = NodeCtx::float_sfx(x.dtype)?;
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
        let (name, grid, block) = cached_rows("softmax", sfx, outer, len);
        let args = KArgs::new()
            .ptr(x.ptr)
            .ptr(y)
            .i64(outer as i64)
            .i64(len as i64);
        return ctx.launch(SRC, &name, grid, block, 0, args);
    }
    launch_cols(
        ctx,
        &format!("softmax_cols_{sfx}"),
        x.ptr,
        y,
        outer,
        len,
        inner,
    )
}

/// A `*_cols` kernel: the op along a strided axis of `len`, `outer * inner` columns.
fn launch_cols(
    ctx: &mut NodeCtx,
    name: &str,
    x: u64,
    y: u64,
    outer: usize,
    len: usize,
    inner: usize,
) -> Lowered {
    let ncol = outer * inner;
    let args = KArgs::new()
        .ptr(x)
        .ptr(y)
        .i64(ncol as i64)
        .i64(len as i64)
        .i64(inner as i64);
    ctx.launch(SRC, name, [col_grid(ncol), 1, 1], [32, 8, 1], 0, args)
}

pub(crate) fn argmax(ctx: &mut NodeCtx, axis: i64) -> Lowered {
    let x = ctx.input(0)?.clone();
    let sfx = match x.dtype {
        DType::I32 => "i32",
        DType::I64 => "i64",
        d => NodeCtx::float_sfx(d)?,
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
        let args = KArgs::new()
            .ptr(x.ptr)
            .ptr(y)
            .i64(outer as i64)
            .i64(len as i64);
        return ctx.launch(
            SRC,
            &format!("argmax_rows_{mode}_{sfx}"),
            grid,
            block,
            0,
            args,
        );
    }
    launch_cols(
        ctx,
        &format!("argmax_cols_{sfx}"),
        x.ptr,
        y,
        outer,
        len,
        inner,
    )
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
    let sfx = NodeCtx::float_sfx(x.dtype)?;
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
    let mut args = KArgs::new()
        .ptr(x.ptr)
        .ptr(lab.ptr)
        .i32(dtype_code(lab.dtype))
        .i32(dense as i32);
    let name = if backward {
        let dl = ctx.input(2)?.clone();
        check_numel("d_loss", &dl, n)?;
        args = args.ptr(dl.ptr).i32(dtype_code(dl.dtype));
        format!("ce_back_{mode}_{sfx}")
    } else {
        format!("ce_loss_{mode}_{sfx}")
    };
    let args = args.ptr(ctx.out.ptr).i64(n as i64).i64(c as i64);
    ctx.launch(SRC, &name, grid, block, 0, args)
}
