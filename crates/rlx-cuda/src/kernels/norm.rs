//! Family functions of `kernels/norm.cu`: each owns one kernel's name and argument order.
use super::reduce::RowTile;
use super::{Kernel, Lib, Sfx};
use crate::lower::KArgs;

#[cfg(test)]
#[path = "norm_split_hosttest.rs"]
mod split_hosttest;

/// Which row kernel of norm.cu: a cached-row tile (`norm_w<vpt>` / `norm_b<vpt>`) or the
/// four-wide vector kernel with `v` vectors a lane (`norm_v<v>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormRows {
    Cached(RowTile),
    Vec4(usize),
}

/// The row pointers of a norm launch: x, residual, bias, gamma, beta (0 when absent), y.
#[derive(Clone, Copy, Debug)]
pub struct NormPtrs {
    pub x: u64,
    pub r: u64,
    pub b: u64,
    pub g: u64,
    pub be: u64,
    pub y: u64,
}

/// `norm_<variant>_<sfx>(x, r, b, g, be, y, rows, len, eps, rms)`.
pub fn norm(
    rows_kind: NormRows,
    sfx: Sfx,
    p: NormPtrs,
    rows: i64,
    len: i64,
    eps: f32,
    rms: i32,
) -> Kernel {
    let args = KArgs::new()
        .ptr(p.x)
        .ptr(p.r)
        .ptr(p.b)
        .ptr(p.g)
        .ptr(p.be)
        .ptr(p.y)
        .i64(rows)
        .i64(len)
        .f32(eps)
        .i32(rms);
    let variant = match rows_kind {
        NormRows::Cached(t) => t.tag(),
        NormRows::Vec4(v) => format!("v{v}"),
    };
    Kernel::new(Lib::Norm, format!("norm_{variant}_{}", sfx.name()), args)
}

/// `norm_split_v<v>_<sfx>_<wsfx>(x, g, h, inv, rows, len, eps, parts)`: the RMS norm of
/// `norm_v<v>` split into `parts` half values per element as `dq_split_in` splits (h
/// `[parts · rows, len]`, inv the rows' scale inverses), one warp a row.
#[allow(clippy::too_many_arguments)]
pub fn norm_split(
    v: usize,
    sfx: Sfx,
    wsfx: Sfx,
    (x, g, h, inv): (u64, u64, u64, u64),
    rows: i64,
    len: i64,
    eps: f32,
    parts: i32,
) -> Kernel {
    let args = KArgs::new()
        .ptr(x)
        .ptr(g)
        .ptr(h)
        .ptr(inv)
        .i64(rows)
        .i64(len)
        .f32(eps)
        .i32(parts);
    let name = format!("norm_split_v{v}_{}_{}", sfx.name(), wsfx.name());
    Kernel::new(Lib::Norm, name, args)
}
