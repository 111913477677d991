//! Family functions of `kernels/reduce.cu`: each owns one kernel's name and argument order.
use super::{Kernel, Lib, Sfx};
use crate::lower::{Dims8, KArgs};

/// The reduction a `reduce_*` kernel applies (Mean is `Sum` with `mean = 1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedOp {
    Sum,
    Max,
    Min,
    Prod,
}

impl RedOp {
    fn name(self) -> &'static str {
        match self {
            RedOp::Sum => "sum",
            RedOp::Max => "max",
            RedOp::Min => "min",
            RedOp::Prod => "prod",
        }
    }
}

/// How a row kernel maps rows to threads: a warp a row or a block a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowMode {
    Warp,
    Block,
}

impl RowMode {
    pub(crate) fn tag(self) -> &'static str {
        match self {
            RowMode::Warp => "w",
            RowMode::Block => "b",
        }
    }
}

/// A cached-row kernel variant (`<stem>_w<vpt>` / `<stem>_b<vpt>`): mode and values a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowTile {
    pub mode: RowMode,
    pub vpt: usize,
}

impl RowTile {
    pub(crate) fn tag(self) -> String {
        format!("{}{}", self.mode.tag(), self.vpt)
    }
}

/// `reduce_rows_<w|b>_<op>_<sfx>(x, y, part, rows, len, chunk, mean, cnt)`.
#[allow(clippy::too_many_arguments)]
pub fn reduce_rows(
    op: RedOp,
    mode: RowMode,
    sfx: Sfx,
    (x, y, part): (u64, u64, u64),
    rows: i64,
    len: i64,
    chunk: i64,
    mean: i32,
    cnt: i64,
) -> Kernel {
    let args = KArgs::new()
        .ptr(x)
        .ptr(y)
        .ptr(part)
        .i64(rows)
        .i64(len)
        .i64(chunk)
        .i32(mean)
        .i64(cnt);
    let name = format!("reduce_rows_{}_{}_{}", mode.tag(), op.name(), sfx.name());
    Kernel::new(Lib::Reduce, name, args)
}

/// `reduce_cols_<op>_<sfx>(x, y, part, kept, red, nout, nred, mean, cnt)`.
#[allow(clippy::too_many_arguments)]
pub fn reduce_cols(
    op: RedOp,
    sfx: Sfx,
    (x, y, part): (u64, u64, u64),
    kept: Dims8,
    red: Dims8,
    nout: i64,
    nred: i64,
    mean: i32,
    cnt: i64,
) -> Kernel {
    let args = KArgs::new()
        .ptr(x)
        .ptr(y)
        .ptr(part)
        .dims(kept)
        .dims(red)
        .i64(nout)
        .i64(nred)
        .i32(mean)
        .i64(cnt);
    let name = format!("reduce_cols_{}_{}", op.name(), sfx.name());
    Kernel::new(Lib::Reduce, name, args)
}

/// `reduce_finish_<op>_<sfx>(part, y, nout, S, mean, cnt)`.
#[allow(clippy::too_many_arguments)]
pub fn reduce_finish(
    op: RedOp,
    sfx: Sfx,
    part: u64,
    y: u64,
    nout: i64,
    splits: i64,
    mean: i32,
    cnt: i64,
) -> Kernel {
    let args = KArgs::new()
        .ptr(part)
        .ptr(y)
        .i64(nout)
        .i64(splits)
        .i32(mean)
        .i64(cnt);
    let name = format!("reduce_finish_{}_{}", op.name(), sfx.name());
    Kernel::new(Lib::Reduce, name, args)
}

/// `softmax_<w|b><vpt>_<sfx>(x, y, rows, len)`.
pub fn softmax_rows(tile: RowTile, sfx: Sfx, x: u64, y: u64, rows: i64, len: i64) -> Kernel {
    let args = KArgs::new().ptr(x).ptr(y).i64(rows).i64(len);
    let name = format!("softmax_{}_{}", tile.tag(), sfx.name());
    Kernel::new(Lib::Reduce, name, args)
}

/// `softmax_cols_<sfx>(x, y, ncol, len, inner)`.
pub fn softmax_cols(sfx: Sfx, x: u64, y: u64, ncol: i64, len: i64, inner: i64) -> Kernel {
    let args = KArgs::new().ptr(x).ptr(y).i64(ncol).i64(len).i64(inner);
    Kernel::new(Lib::Reduce, format!("softmax_cols_{}", sfx.name()), args)
}

/// `argmax_rows_<w|b>_<sfx>(x, y, rows, len)`; `sfx` float, I32 or I64.
pub fn argmax_rows(mode: RowMode, sfx: Sfx, x: u64, y: u64, rows: i64, len: i64) -> Kernel {
    let args = KArgs::new().ptr(x).ptr(y).i64(rows).i64(len);
    let name = format!("argmax_rows_{}_{}", mode.tag(), sfx.name());
    Kernel::new(Lib::Reduce, name, args)
}

/// `argmax_cols_<sfx>(x, y, ncol, len, inner)`.
pub fn argmax_cols(sfx: Sfx, x: u64, y: u64, ncol: i64, len: i64, inner: i64) -> Kernel {
    let args = KArgs::new().ptr(x).ptr(y).i64(ncol).i64(len).i64(inner);
    Kernel::new(Lib::Reduce, format!("argmax_cols_{}", sfx.name()), args)
}

/// Labels (or dense targets) of a cross-entropy kernel: pointer, dtype code
/// (`dtype_code` in lower/reduce_softmax.rs) and whether they are dense.
#[derive(Clone, Copy, Debug)]
pub struct CeLabels {
    pub ptr: u64,
    pub code: i32,
    pub dense: i32,
}

/// `ce_loss_<w|b>_<sfx>(x, lab, lcode, dense, y, n, c)`.
pub fn ce_loss(mode: RowMode, sfx: Sfx, x: u64, lab: CeLabels, y: u64, n: i64, c: i64) -> Kernel {
    let args = KArgs::new()
        .ptr(x)
        .ptr(lab.ptr)
        .i32(lab.code)
        .i32(lab.dense)
        .ptr(y)
        .i64(n)
        .i64(c);
    let name = format!("ce_loss_{}_{}", mode.tag(), sfx.name());
    Kernel::new(Lib::Reduce, name, args)
}

/// `ce_back_<w|b>_<sfx>(x, lab, lcode, dense, dl, dcode, y, n, c)`.
#[allow(clippy::too_many_arguments)]
pub fn ce_back(
    mode: RowMode,
    sfx: Sfx,
    x: u64,
    lab: CeLabels,
    (dl, dcode): (u64, i32),
    y: u64,
    n: i64,
    c: i64,
) -> Kernel {
    let args = KArgs::new()
        .ptr(x)
        .ptr(lab.ptr)
        .i32(lab.code)
        .i32(lab.dense)
        .ptr(dl)
        .i32(dcode)
        .ptr(y)
        .i64(n)
        .i64(c);
    let name = format!("ce_back_{}_{}", mode.tag(), sfx.name());
    Kernel::new(Lib::Reduce, name, args)
}
