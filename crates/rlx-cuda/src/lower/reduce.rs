//! CUDA lowering of the reduce ops (kernels in `kernels/reduce.cu`): Reduce here; Softmax,
//! ArgMax and the cross-entropy family in `reduce_softmax.rs`.
#[path = "reduce_softmax.rs"]
mod softmax;

use super::{Dims8, LowerError, Lowered, NodeCtx};
use crate::kernels::reduce::{self as k, RedOp, RowMode, RowTile};
use crate::kernels::Sfx;
use crate::unsupported;
use rlx_ir::{ops::reduce::reduce_axes, DType, ReduceOp};

/// Grid cap for kernels that loop over their rows / columns (any count works).
pub(crate) const MAX_GRID: usize = 1 << 20;
/// About 4 blocks per SM of an H200 (132 SMs): below this many blocks a reduction also
/// splits the reduced range across blocks.
const TARGET_BLOCKS: usize = 512;

/// A row kernel that keeps each thread's share of the row in registers (`<stem>_w<vpt>` and
/// `<stem>_b<vpt>` in norm.cu / reduce.cu): the variant, grid and block for `rows` rows
/// of `len`. Rows up to 512 get a warp each (8 rows a block, up to 16 values a lane: more
/// would cost occupancy); longer rows a block, cached up to 16 values a thread, beyond that
/// re-read from L1/L2 on every pass (vpt 0).
pub(crate) fn cached_tile(rows: usize, len: usize) -> (RowTile, [u32; 3], [u32; 3]) {
    if len <= 512 {
        let vpt = len.div_ceil(32).next_power_of_two();
        let grid = rows.div_ceil(8).clamp(1, MAX_GRID) as u32;
        let tile = RowTile {
            mode: RowMode::Warp,
            vpt,
        };
        return (tile, [grid, 1, 1], [32, 8, 1]);
    }
    let (threads, vpt) = match len {
        0..=1024 => (256, 4),
        1025..=2048 => (256, 8),
        2049..=4096 => (256, 16),
        4097..=8192 => (1024, 8),
        8193..=16384 => (1024, 16),
        _ => (1024, 0),
    };
    let grid = rows.clamp(1, MAX_GRID) as u32;
    let tile = RowTile {
        mode: RowMode::Block,
        vpt,
    };
    (tile, [grid, 1, 1], [threads, 1, 1])
}

/// A streaming row kernel (`<stem>_w` / `<stem>_b`): mode letter, grid and block.
pub(crate) fn stream_rows(rows: usize, len: usize) -> (RowMode, [u32; 3], [u32; 3]) {
    if len <= 1024 {
        let grid = rows.div_ceil(8).clamp(1, MAX_GRID) as u32;
        return (RowMode::Warp, [grid, 1, 1], [32, 8, 1]);
    }
    let threads = if len <= 16384 { 256 } else { 1024 };
    let grid = [rows.clamp(1, MAX_GRID) as u32, 1, 1];
    (RowMode::Block, grid, [threads, 1, 1])
}

/// Blocks over 32-column groups for the 32 x 8 column kernels.
pub(crate) fn col_grid(ncol: usize) -> u32 {
    ncol.div_ceil(32).clamp(1, MAX_GRID) as u32
}

pub(crate) use softmax::{argmax, softmax};

pub(crate) fn softmax_cross_entropy(ctx: &mut NodeCtx) -> Lowered {
    softmax::cross_entropy(ctx, softmax::CrossEntropy::Dense)
}

pub(crate) fn softmax_cross_entropy_with_logits(ctx: &mut NodeCtx) -> Lowered {
    softmax::cross_entropy(ctx, softmax::CrossEntropy::Sparse)
}

pub(crate) fn softmax_cross_entropy_backward(ctx: &mut NodeCtx) -> Lowered {
    softmax::cross_entropy(ctx, softmax::CrossEntropy::Backward)
}

/// Input dims with size-1 dims dropped and neighbours of one kind (reduced or kept) merged:
/// (size, reduced) groups, outermost first.
fn merged_groups(dims: &[usize], axes: &[usize]) -> Vec<(usize, bool)> {
    let mut g: Vec<(usize, bool)> = Vec::new();
    for (d, &n) in dims.iter().enumerate() {
        if n == 1 {
            continue;
        }
        let r = axes.contains(&d);
        match g.last_mut() {
            Some((m, lr)) if *lr == r => *m *= n,
            _ => g.push((n, r)),
        }
    }
    g
}

pub(crate) fn reduce(ctx: &mut NodeCtx, op: ReduceOp, axes: &[i64]) -> Lowered {
    let x = ctx.input(0)?.clone();
    let (sfx, int) = match x.dtype {
        DType::I32 => (Sfx::I32, true),
        DType::I64 => (Sfx::I64, true),
        d => (Sfx::float(d)?, false),
    };
    if ctx.out.dtype != x.dtype {
        unsupported!(
            "output dtype {} differs from x's {}",
            ctx.out.dtype,
            x.dtype
        );
    }
    let axes = reduce_axes(axes, x.rank()).map_err(LowerError::Unsupported)?;
    let cnt: usize = axes.iter().map(|&a| x.dims[a]).product();
    let nout = ctx.out.numel();
    if nout * cnt != x.numel() {
        unsupported!("output {:?} does not fit x {:?}", ctx.out.dims, x.dims);
    }
    if nout == 0 {
        return Ok(());
    }
    if cnt == 0 && (matches!(op, ReduceOp::Max | ReduceOp::Min) || int) {
        unsupported!("{op:?} over an empty axis of {:?}", x.dims);
    }
    if cnt == 1 {
        // Every op of one value is that value (mean: · 1/1 or / 1).
        return ctx.copy(ctx.out.ptr, x.ptr, ctx.out.bytes());
    }
    let (opn, mean) = match op {
        ReduceOp::Sum => (RedOp::Sum, false),
        ReduceOp::Mean => (RedOp::Sum, true),
        ReduceOp::Max => (RedOp::Max, false),
        ReduceOp::Min => (RedOp::Min, false),
        ReduceOp::Prod => (RedOp::Prod, false),
    };
    let acc_bytes = if int { 8 } else { 4 };
    let groups = merged_groups(&x.dims, &axes);
    let n_red_groups = groups.iter().filter(|g| g.1).count();
    let trailing = groups.last().is_some_and(|g| g.1) && n_red_groups == 1;

    // The kernel is built once the split count (and so the scratch `part`) is known.
    type Build = Box<dyn FnOnce(u64) -> crate::kernels::Kernel>;
    let (mean_i, cnt_i) = (mean as i32, cnt as i64);
    let (x_ptr, y_ptr) = (x.ptr, ctx.out.ptr);
    let (build, grid, block, splits): (Build, _, _, _) = if trailing || cnt == 0 {
        // nout contiguous rows of cnt values.
        let (mode, g, b) = stream_rows(nout, cnt);
        let mut s = 1;
        if mode == RowMode::Block && nout < TARGET_BLOCKS / 2 {
            s = TARGET_BLOCKS
                .div_ceil(nout)
                .min(cnt.div_ceil(b[0] as usize * 8))
                .max(1);
        }
        let chunk = cnt.div_ceil(s).max(1);
        s = cnt.div_ceil(chunk).max(1);
        let (rows, len, chunk) = (nout as i64, cnt as i64, chunk as i64);
        let build: Build = Box::new(move |part| {
            let ptrs = (x_ptr, y_ptr, part);
            k::reduce_rows(opn, mode, sfx, ptrs, rows, len, chunk, mean_i, cnt_i)
        });
        (build, [g[0], s as u32, 1], b, s)
    } else {
        // General strided reduction over the merged groups.
        let sizes: Vec<usize> = groups.iter().map(|g| g.0).collect();
        let strides = rlx_ir::strides(&sizes);
        let pick = |want: bool| -> (Vec<usize>, Vec<usize>) {
            groups
                .iter()
                .zip(&strides)
                .filter(|(g, _)| g.1 == want)
                .map(|(g, s)| (g.0, *s))
                .unzip()
        };
        let (kd, ks) = pick(false);
        let (rd, rs) = pick(true);
        let bx = col_grid(nout) as usize;
        let s = if bx >= TARGET_BLOCKS / 2 {
            1
        } else {
            TARGET_BLOCKS.div_ceil(bx).min(cnt / 256).clamp(1, 65535)
        };
        let (kept, red) = (Dims8::new(&kd, &ks)?, Dims8::new(&rd, &rs)?);
        let (no, nr) = (nout as i64, cnt as i64);
        let build: Build = Box::new(move |part| {
            let ptrs = (x_ptr, y_ptr, part);
            k::reduce_cols(opn, sfx, ptrs, kept, red, no, nr, mean_i, cnt_i)
        });
        (build, [bx as u32, s as u32, 1], [32, 8, 1], s)
    };
    let part = if splits > 1 {
        ctx.scratch(splits * nout * acc_bytes)?
    } else {
        0
    };
    ctx.run(build(part), grid, block, 0)?;
    if splits > 1 {
        let (no, s) = (nout as i64, splits as i64);
        let fin = k::reduce_finish(opn, sfx, part, y_ptr, no, s, mean_i, cnt_i);
        ctx.run_1d(fin, nout)?;
    }
    Ok(())
}
