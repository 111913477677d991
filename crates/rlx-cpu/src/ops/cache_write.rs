//! CacheWrite (transformer group): rows of `new` written into the cache's own storage at a
//! run-time position. The executor calls this with the cache leaf borrowed mutably (the
//! op is in place: see `Op::CacheWrite`), so nothing but the written rows is touched.
use crate::buffer::{Buf, BufMut};
use crate::error::op_err;
use crate::CpuError;

/// Write `new` (shape `new_shape`) into `cache` (shape `cache_shape`) at `pos` along `axis`.
/// Every size is checked here: a position past the end is an error, never a wild write.
pub fn cache_write(
    axis: usize,
    cache: BufMut,
    cache_shape: &[usize],
    new: Buf,
    new_shape: &[usize],
    pos: i64,
) -> Result<(), CpuError> {
    if axis >= cache_shape.len() || new_shape.len() != cache_shape.len() {
        return Err(op_err(format!(
            "axis {axis}: cache {cache_shape:?} and new rows {new_shape:?} do not agree"
        )));
    }
    let (c, s) = (cache_shape[axis], new_shape[axis]);
    let start = usize::try_from(pos)
        .ok()
        .filter(|p| p.checked_add(s).is_some_and(|e| e <= c))
        .ok_or_else(|| {
            op_err(format!(
                "writing {s} rows at position {pos} overruns the cache's {c} (axis {axis})"
            ))
        })?;
    let outer: usize = cache_shape[..axis].iter().product();
    let inner: usize = cache_shape[axis + 1..].iter().product();
    if new_shape[..axis] != cache_shape[..axis] || new_shape[axis + 1..] != cache_shape[axis + 1..]
    {
        return Err(op_err(format!(
            "new rows {new_shape:?} differ from the cache {cache_shape:?} off axis {axis}"
        )));
    }
    fn copy<T: Copy>(
        dst: &mut [T],
        src: &[T],
        o: usize,
        c: usize,
        s: usize,
        at: usize,
        inner: usize,
    ) -> Result<(), CpuError> {
        let (d0, s0) = ((o * c + at) * inner, o * s * inner);
        let n = s * inner;
        match (dst.get_mut(d0..d0 + n), src.get(s0..s0 + n)) {
            (Some(d), Some(v)) => {
                d.copy_from_slice(v);
                Ok(())
            }
            _ => Err(op_err(
                "cache or new rows shorter than their shapes".to_string(),
            )),
        }
    }
    match (cache, new) {
        (BufMut::F32(d), Buf::F32(v)) => {
            (0..outer).try_for_each(|o| copy(d, v, o, c, s, start, inner))
        }
        (BufMut::F64(d), Buf::F64(v)) => {
            (0..outer).try_for_each(|o| copy(d, v, o, c, s, start, inner))
        }
        (BufMut::I64(d), Buf::I64(v)) => {
            (0..outer).try_for_each(|o| copy(d, v, o, c, s, start, inner))
        }
        _ => Err(op_err("cache and new rows are held in different classes")),
    }
}
