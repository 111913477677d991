//! Strided views and the kernels that materialise them. A view is read from a contiguous
//! buffer; the destination is contiguous (or, for `row_copy`, a strided slab of a larger
//! tensor). Dims are coalesced first, then the cheapest kernel that reads and writes
//! coalesced is picked: a memcpy, a row copy (contiguous last axis, vectorised up to 16
//! bytes), a shared-memory tiled transpose (contiguous axis moved), or a generic gather.
use super::super::{DevTensor, Dims8, LowerError, Lowered, NodeCtx};
use crate::kernels::shape_ops::{self, TileExtents};
use crate::kernels::Unit;
use crate::unsupported;

/// Dims, element strides (may be 0 or negative) and element offset into a buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct View {
    pub dims: Vec<usize>,
    pub strides: Vec<i64>,
    pub offset: i64,
}

impl View {
    pub fn contiguous(dims: &[usize]) -> View {
        View {
            dims: dims.to_vec(),
            strides: istrides(dims),
            offset: 0,
        }
    }

    /// A contiguous `in_dims` read broadcast (NumPy, right-aligned) to `out_dims`.
    pub fn broadcast(in_dims: &[usize], out_dims: &[usize]) -> Result<View, LowerError> {
        View::contiguous(in_dims).expand(out_dims)
    }

    /// This view broadcast to `out_dims`: new leading axes and size-1 axes get stride 0.
    pub fn expand(&self, out_dims: &[usize]) -> Result<View, LowerError> {
        let r = self.dims.len();
        if r > out_dims.len() {
            unsupported!("cannot expand {:?} to {out_dims:?}", self.dims);
        }
        let lead = out_dims.len() - r;
        let mut strides = vec![0i64; out_dims.len()];
        for k in 0..r {
            let (i, o) = (self.dims[k], out_dims[lead + k]);
            if i == o && i != 1 {
                strides[lead + k] = self.strides[k];
            } else if i != 1 {
                unsupported!("cannot expand {:?} to {out_dims:?}", self.dims);
            }
        }
        Ok(View {
            dims: out_dims.to_vec(),
            strides,
            offset: self.offset,
        })
    }

    pub fn permute(&self, perm: &[usize]) -> View {
        View {
            dims: perm.iter().map(|&p| self.dims[p]).collect(),
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
            offset: self.offset,
        }
    }

    pub fn narrow(mut self, axis: usize, start: usize, len: usize) -> View {
        self.offset += start as i64 * self.strides[axis];
        self.dims[axis] = len;
        self
    }

    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }
}

pub(crate) fn istrides(dims: &[usize]) -> Vec<i64> {
    rlx_ir::strides(dims)
        .into_iter()
        .map(|s| s as i64)
        .collect()
}

/// A `Dims8` with signed strides.
pub(crate) fn dims8(dims: &[usize], strides: &[i64]) -> Result<Dims8, LowerError> {
    let mut v = Dims8::new(dims, &vec![0; dims.len()])?;
    for (k, &s) in strides.iter().enumerate() {
        v.s[k] = s;
    }
    Ok(v)
}

/// Kernel suffix of a unit of `bytes`.
pub(crate) fn unit_sfx(bytes: usize) -> Result<Unit, LowerError> {
    Unit::of_bytes(bytes)
}

/// Drop size-1 axes and merge neighbours that are contiguous in every stride set.
pub(crate) fn coalesce(dims: &[usize], sets: &[&[i64]]) -> (Vec<usize>, Vec<Vec<i64>>) {
    let mut d: Vec<usize> = Vec::new();
    let mut s: Vec<Vec<i64>> = vec![Vec::new(); sets.len()];
    for k in 0..dims.len() {
        if dims[k] == 1 {
            continue;
        }
        if let Some(last) = d.last_mut() {
            let n = dims[k] as i64;
            if sets
                .iter()
                .zip(&s)
                .all(|(set, out)| out[out.len() - 1] == set[k] * n)
            {
                *last *= dims[k];
                for (set, out) in sets.iter().zip(s.iter_mut()) {
                    let l = out.len() - 1;
                    out[l] = set[k];
                }
                continue;
            }
        }
        d.push(dims[k]);
        for (set, out) in sets.iter().zip(s.iter_mut()) {
            out.push(set[k]);
        }
    }
    (d, s)
}

/// Block and grid for a row kernel: `rows` rows of `len` units. Threads per row cover the
/// row (a power of two up to 256), the rest of the 256 threads take more rows; `split`
/// allows long rows to be spread over grid.y.
pub(crate) fn row_launch(rows: usize, len: usize, split: usize) -> ([u32; 3], [u32; 3]) {
    let tpr = len.max(1).next_power_of_two().min(256);
    let rpb = 256 / tpr;
    let gy = if split > 1 {
        len.div_ceil(tpr * 4).clamp(1, 65535)
    } else {
        1
    };
    let gx = rows.div_ceil(rpb).clamp(1, ((1 << 20) / gy).max(1));
    ([tpr as u32, rpb as u32, 1], [gx as u32, gy as u32, 1])
}

/// Copy `rows` rows of `len` contiguous elements (of `es` bytes); row r starts at element
/// offset(`ss`, r) from `src` and offset(`ds`, r) from `dst`, rows indexed over `outer`. The
/// unit is widened up to 16 bytes when every address and stride allows it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn row_copy(
    ctx: &mut NodeCtx,
    src: u64,
    dst: u64,
    outer: &[usize],
    ss: &[i64],
    ds: &[i64],
    len: usize,
    es: usize,
) -> Lowered {
    let rows: usize = outer.iter().product();
    if rows == 0 || len == 0 {
        return Ok(());
    }
    if rows == 1 {
        return ctx.copy(dst, src, len * es);
    }
    let u = widest_unit(es, len, &[ss, ds], &[src, dst]);
    // Exact: u divides every stride in bytes.
    let scale = |s: &[i64]| -> Vec<i64> { s.iter().map(|&v| v * es as i64 / u as i64).collect() };
    let lu = len * es / u;
    let so = dims8(outer, &scale(ss))?;
    let dof = dims8(outer, &scale(ds))?;
    let (block, grid) = row_launch(rows, lu, 2);
    let kernel = shape_ops::row_copy(unit_sfx(u)?, src, dst, so, dof, rows as i64, lu as i64);
    ctx.run(kernel, grid, block, 0)
}

/// The widest unit (16, 8, 4, 2 or 1 bytes) dividing a row of `len` elements, every stride
/// (in bytes) and every address.
pub(crate) fn widest_unit(es: usize, len: usize, strides: &[&[i64]], ptrs: &[u64]) -> usize {
    [16usize, 8, 4, 2, 1]
        .into_iter()
        .find(|&u| {
            (len * es).is_multiple_of(u)
                && strides
                    .iter()
                    .all(|s| s.iter().all(|&v| (v * es as i64).rem_euclid(u as i64) == 0))
                && ptrs.iter().all(|&p| p.is_multiple_of(u as u64))
        })
        .unwrap_or(1)
}

/// Materialise `view` of `x`'s buffer into the contiguous `dst`.
pub(crate) fn copy_view(ctx: &mut NodeCtx, x: &DevTensor, view: &View, dst: u64) -> Lowered {
    let es = x.dtype.size_bytes();
    copy_view_raw(ctx, x.ptr, view, dst, es)
}

/// `copy_view` over a raw buffer of `es`-byte elements.
pub(crate) fn copy_view_raw(
    ctx: &mut NodeCtx,
    base: u64,
    view: &View,
    dst: u64,
    es: usize,
) -> Lowered {
    let n = view.numel();
    if n == 0 {
        return Ok(());
    }
    let src = (base as i64 + view.offset * es as i64) as u64;
    let ds = istrides(&view.dims);
    let (d, sets) = coalesce(&view.dims, &[&view.strides, &ds]);
    let (s, t) = (&sets[0], &sets[1]);
    let r = d.len();
    if r == 0 {
        return ctx.copy(dst, src, es);
    }
    if s[r - 1] == 1 {
        return row_copy(
            ctx,
            src,
            dst,
            &d[..r - 1],
            &s[..r - 1],
            &t[..r - 1],
            d[r - 1],
            es,
        );
    }
    let sfx = unit_sfx(es)?;
    if let Some(p) = (0..r - 1).find(|&p| s[p] == 1) {
        if d[p] >= 8 && d[r - 1] >= 8 {
            return tile(ctx, src, dst, &d, s, t, p, sfx);
        }
    }
    let v = dims8(&d, s)?;
    ctx.run_1d(shape_ops::strided_copy(sfx, src, dst, v, n as i64), n)
}

/// Tiled transpose of a coalesced view whose axis `p` reads contiguously.
#[allow(clippy::too_many_arguments)]
fn tile(
    ctx: &mut NodeCtx,
    src: u64,
    dst: u64,
    d: &[usize],
    s: &[i64],
    t: &[i64],
    p: usize,
    sfx: Unit,
) -> Lowered {
    let q = d.len() - 1;
    let batch: Vec<usize> = (0..d.len()).filter(|&k| k != p && k != q).collect();
    let bdims: Vec<usize> = batch.iter().map(|&k| d[k]).collect();
    let bs = dims8(&bdims, &batch.iter().map(|&k| s[k]).collect::<Vec<_>>())?;
    let bd = dims8(&bdims, &batch.iter().map(|&k| t[k]).collect::<Vec<_>>())?;
    let nb: usize = bdims.iter().product();
    let grid = [
        d[q].div_ceil(32).min(1 << 16) as u32,
        d[p].div_ceil(32).min(65535) as u32,
        nb.min(65535) as u32,
    ];
    let e = TileExtents {
        nb: nb as i64,
        p: d[p] as i64,
        q: d[q] as i64,
        sq: s[q],
        dp: t[p],
    };
    let kernel = shape_ops::tile_transpose(sfx, (src, dst), bs, bd, e);
    ctx.run(kernel, grid, [32, 8, 1], 0)
}
