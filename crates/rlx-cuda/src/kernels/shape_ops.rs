//! Family functions of `kernels/shape_ops.cu`: each owns one kernel's name and argument
//! order. Move kernels are picked by element width (`Unit`), not dtype.
use super::{Kernel, Lib, Sfx, Unit};
use crate::lower::{Dims8, KArgs};

/// `strided_copy_<unit>(src, dst, v, n)`; units B1..B8.
pub fn strided_copy(unit: Unit, src: u64, dst: u64, v: Dims8, n: i64) -> Kernel {
    let args = KArgs::new().ptr(src).ptr(dst).dims(v).i64(n);
    let name = format!("strided_copy_{}", unit.name());
    Kernel::new(Lib::ShapeOps, name, args)
}

/// The extents of a tiled transpose: `nb` batches of a `P × Q` tile grid, `sq` the source
/// stride of axis Q and `dp` the destination stride of axis P.
#[derive(Clone, Copy, Debug)]
pub struct TileExtents {
    pub nb: i64,
    pub p: i64,
    pub q: i64,
    pub sq: i64,
    pub dp: i64,
}

/// `tile_transpose_<unit>(src, dst, bs, bd, nb, P, Q, sq, dp)`; units B1..B8.
pub fn tile_transpose(
    unit: Unit,
    (src, dst): (u64, u64),
    bs: Dims8,
    bd: Dims8,
    e: TileExtents,
) -> Kernel {
    let args = KArgs::new()
        .ptr(src)
        .ptr(dst)
        .dims(bs)
        .dims(bd)
        .i64(e.nb)
        .i64(e.p)
        .i64(e.q)
        .i64(e.sq)
        .i64(e.dp);
    let name = format!("tile_transpose_{}", unit.name());
    Kernel::new(Lib::ShapeOps, name, args)
}

/// `pad_rows_<unit>(src, dst, od, pd, rows, L, pb, n, bits)`; units B1..B8.
#[allow(clippy::too_many_arguments)]
pub fn pad_rows(
    unit: Unit,
    (src, dst): (u64, u64),
    od: Dims8,
    pd: Dims8,
    rows: i64,
    l: i64,
    pb: i64,
    n: i64,
    bits: u64,
) -> Kernel {
    let args = KArgs::new()
        .ptr(src)
        .ptr(dst)
        .dims(od)
        .dims(pd)
        .i64(rows)
        .i64(l)
        .i64(pb)
        .i64(n)
        .pod(bits);
    Kernel::new(Lib::ShapeOps, format!("pad_rows_{}", unit.name()), args)
}

/// `row_copy_<unit>(src, dst, so, dof, rows, len)`; units B1..B16.
pub fn row_copy(
    unit: Unit,
    src: u64,
    dst: u64,
    so: Dims8,
    dof: Dims8,
    rows: i64,
    len: i64,
) -> Kernel {
    let args = KArgs::new()
        .ptr(src)
        .ptr(dst)
        .dims(so)
        .dims(dof)
        .i64(rows)
        .i64(len);
    Kernel::new(Lib::ShapeOps, format!("row_copy_{}", unit.name()), args)
}

/// `gather_rows_<unit>_<isfx>(src, idx, dst, rows, K, N, inner)`; `isfx` is the index
/// tensor's dtype (any of `Sfx`).
#[allow(clippy::too_many_arguments)]
pub fn gather_rows(
    unit: Unit,
    isfx: Sfx,
    (src, idx, dst): (u64, u64, u64),
    rows: i64,
    k: i64,
    n: i64,
    inner: i64,
) -> Kernel {
    let args = KArgs::new()
        .ptr(src)
        .ptr(idx)
        .ptr(dst)
        .i64(rows)
        .i64(k)
        .i64(n)
        .i64(inner);
    let name = format!("gather_rows_{}_{}", unit.name(), isfx.name());
    Kernel::new(Lib::ShapeOps, name, args)
}

/// `rope_<xs>_<cs>(x, cos, sin, out, cv, rows, hd, nrot, style)`: `xs` the float dtype of
/// x / out, `cs` that of cos / sin.
#[allow(clippy::too_many_arguments)]
pub fn rope(
    xs: Sfx,
    cs: Sfx,
    (x, cos, sin, out): (u64, u64, u64, u64),
    cv: Dims8,
    rows: i64,
    hd: i64,
    nrot: i64,
    style: i32,
) -> Kernel {
    let args = KArgs::new()
        .ptr(x)
        .ptr(cos)
        .ptr(sin)
        .ptr(out)
        .dims(cv)
        .i64(rows)
        .i64(hd)
        .i64(nrot)
        .i32(style);
    let name = format!("rope_{}_{}", xs.name(), cs.name());
    Kernel::new(Lib::ShapeOps, name, args)
}

/// `rope_cache_write_<xs>_<cs>(cache, x, pos, cos, sin, cv, outer, C, S, inner, hd, nrot,
/// style)`: `rope` of x (contiguous, `outer` × `S` rows of `inner` elements) written into
/// the cache at row `*pos` of `C`, as `cache_write` lays rows out.
#[allow(clippy::too_many_arguments)]
pub fn rope_cache_write(
    xs: Sfx,
    cs: Sfx,
    (cache, x, pos, cos, sin): (u64, u64, u64, u64, u64),
    cv: Dims8,
    [outer, c, s, inner]: [i64; 4],
    hd: i64,
    nrot: i64,
    style: i32,
) -> Kernel {
    let args = KArgs::new()
        .ptr(cache)
        .ptr(x)
        .ptr(pos)
        .ptr(cos)
        .ptr(sin)
        .dims(cv)
        .i64(outer)
        .i64(c)
        .i64(s)
        .i64(inner)
        .i64(hd)
        .i64(nrot)
        .i32(style);
    let name = format!("rope_cache_write_{}_{}", xs.name(), cs.name());
    Kernel::new(Lib::ShapeOps, name, args)
}

/// Mirrors `QkvArgs` in `shape_ops.cu` (element counts and offsets; 104 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct QkvArgs {
    /// Rows of the fused product (batch × sequence).
    pub rows: i64,
    /// Rows a cache block takes at a time (the sequence length).
    pub s: i64,
    /// Rows of a cache block.
    pub cap: i64,
    /// Elements of a fused row.
    pub w: i64,
    pub oq: i64,
    pub nq: i64,
    pub ok: i64,
    pub nk: i64,
    pub ov: i64,
    pub nv: i64,
    pub hd: i64,
    pub nrot: i64,
    pub style: i32,
    pub pad: i32,
}

/// `qkv_rope_cache_<xs>_<cs>(x, qo, kc, vc, pos, cos, sin, cvq, cvk, a)`: q rotated out of
/// the fused product x into qo, k rotated into the k cache and v copied into the v cache at
/// row `*pos` (the prefill's q/k/v, see `QkvArgs`).
#[allow(clippy::too_many_arguments)]
pub fn qkv_rope_cache(
    xs: Sfx,
    cs: Sfx,
    (x, qo, kc, vc): (u64, u64, u64, u64),
    (pos, cos, sin): (u64, u64, u64),
    cvq: Dims8,
    cvk: Dims8,
    a: QkvArgs,
) -> Kernel {
    let args = KArgs::new()
        .ptr(x)
        .ptr(qo)
        .ptr(kc)
        .ptr(vc)
        .ptr(pos)
        .ptr(cos)
        .ptr(sin)
        .dims(cvq)
        .dims(cvk)
        .pod(a);
    let name = format!("qkv_rope_cache_{}_{}", xs.name(), cs.name());
    Kernel::new(Lib::ShapeOps, name, args)
}

/// `cache_write_<unit>(cache, new, pos, outer, C, S, inner)`: `outer` × `S` rows of `inner`
/// units into the cache at row `*pos` of `C`; units B1..B16.
pub fn cache_write(
    unit: Unit,
    (cache, new, pos): (u64, u64, u64),
    [outer, c, s, inner]: [i64; 4],
) -> Kernel {
    let args = KArgs::new()
        .ptr(cache)
        .ptr(new)
        .ptr(pos)
        .i64(outer)
        .i64(c)
        .i64(s)
        .i64(inner);
    Kernel::new(Lib::ShapeOps, format!("cache_write_{}", unit.name()), args)
}
