//! Fallible allocation for everything the executor sizes from a graph (arenas, params,
//! inputs, outputs, write-backs): a request the machine cannot meet becomes a typed
//! `CpuError::Alloc` saying how much was asked and what is available, not an abort.
use crate::buffer::{Buf, Storage};
use crate::error::CpuError;
use half::{bf16, f16};
use rlx_ir::{DType, HostTensor};

/// Requests above this many bytes are first compared with all the memory the process could
/// ever have (RAM + swap, or the cgroup limit): with overcommit the reservation itself would
/// succeed and the run would be killed when it first touches the pages.
const CHECK_ABOVE: u128 = 1 << 30;

/// Room for exactly `n` elements, or the typed error.
pub(crate) fn with_capacity<T>(n: usize, what: &dyn Fn() -> String) -> Result<Vec<T>, CpuError> {
    let mut v = Vec::new();
    reserve(&mut v, n, what)?;
    Ok(v)
}

/// `n` copies of `fill`.
pub(crate) fn filled<T: Clone>(
    n: usize,
    fill: T,
    what: &dyn Fn() -> String,
) -> Result<Vec<T>, CpuError> {
    let mut v = with_capacity(n, what)?;
    v.resize(n, fill);
    Ok(v)
}

/// Grow `v` to `n` elements of `fill` (never shrinks: a larger arena serves a smaller plan).
pub(crate) fn grow<T: Clone>(
    v: &mut Vec<T>,
    n: usize,
    fill: T,
    what: &dyn Fn() -> String,
) -> Result<(), CpuError> {
    if v.len() < n {
        // The old contents are dead (every thunk writes its whole output): free them first
        // so the peak is the new size, not old + new.
        *v = filled(n, fill, what)?;
    }
    Ok(())
}

/// The bytes `n` elements of `T` take, and the typed error for them; `Err` at once when the
/// request exceeds all the memory the process could ever have (see `CHECK_ABOVE`).
fn request<T>(n: usize, what: &dyn Fn() -> String) -> Result<impl Fn() -> CpuError + '_, CpuError> {
    let requested = n as u128 * std::mem::size_of::<T>() as u128;
    let fail = move || CpuError::Alloc {
        what: what(),
        requested,
        available: memory_available(),
    };
    if requested > CHECK_ABOVE && memory_ceiling().is_some_and(|c| requested > c as u128) {
        return Err(fail());
    }
    Ok(fail)
}

fn reserve<T>(v: &mut Vec<T>, n: usize, what: &dyn Fn() -> String) -> Result<(), CpuError> {
    let fail = request::<T>(n, what)?;
    v.try_reserve_exact(n.saturating_sub(v.len()))
        .map_err(|_| fail())
}

/// `key:` value of /proc/meminfo in bytes (Linux); `None` elsewhere.
fn meminfo(key: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with(key))?;
    let kb: u64 = line[key.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kb.checked_mul(1024)
}

/// The cgroup (v2) memory limit and current use, where one is set.
fn cgroup() -> Option<(u64, u64)> {
    let read = |f: &str| -> Option<u64> {
        std::fs::read_to_string(format!("/sys/fs/cgroup/{f}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    Some((read("memory.max")?, read("memory.current").unwrap_or(0)))
}

/// The most memory this process could ever hold.
fn memory_ceiling() -> Option<u64> {
    let sys = meminfo("MemTotal:")?.saturating_add(meminfo("SwapTotal:").unwrap_or(0));
    Some(cgroup().map_or(sys, |(max, _)| max.min(sys)))
}

/// Memory the system could give now.
pub(crate) fn memory_available() -> Option<u64> {
    let sys = meminfo("MemAvailable:")?.saturating_add(meminfo("SwapFree:").unwrap_or(0));
    Some(cgroup().map_or(sys, |(max, cur)| max.saturating_sub(cur).min(sys)))
}

fn arr<const N: usize>(c: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(c);
    a
}

fn collect<T>(
    n: usize,
    it: impl Iterator<Item = T>,
    what: &dyn Fn() -> String,
) -> Result<Vec<T>, CpuError> {
    let mut v = with_capacity(n, what)?;
    v.extend(it);
    Ok(v)
}

/// Element types whose all-zero bit pattern is the value zero.
trait ZeroBits: Copy {}
impl ZeroBits for f32 {}
impl ZeroBits for f64 {}
impl ZeroBits for i64 {}
impl ZeroBits for u8 {}

/// `n` zeros from zeroed pages: the OS maps them on first write, so a large zero leaf (a KV
/// cache sized for the whole context) costs neither time nor resident memory until used.
fn zeroed<T: ZeroBits>(n: usize, what: &dyn Fn() -> String) -> Result<Vec<T>, CpuError> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let fail = request::<T>(n, what)?;
    let layout = std::alloc::Layout::array::<T>(n).map_err(|_| fail())?;
    // SAFETY: the layout has a non-zero size (n > 0, T is not zero-sized); the pointer, if not
    // null, comes from the global allocator with exactly this layout, so Vec may own and free
    // it, and every T of it is initialised (zero bits are a valid T by ZeroBits).
    unsafe {
        let p = std::alloc::alloc_zeroed(layout) as *mut T;
        if p.is_null() {
            return Err(fail());
        }
        Ok(Vec::from_raw_parts(p, n, n))
    }
}

/// Whether every byte is zero (stops at the first that is not: real weights end at once).
fn all_zero(bytes: &[u8]) -> bool {
    // SAFETY: every bit pattern is a valid u64; align_to keeps the unaligned ends as bytes.
    let (head, words, tail) = unsafe { bytes.align_to::<u64>() };
    head.iter().all(|&b| b == 0) && words.iter().all(|&w| w == 0) && tail.iter().all(|&b| b == 0)
}

/// Leaves at least this large are checked for being all zeros (then held as lazily mapped
/// zero pages rather than copied).
const ZERO_LEAF_MIN: usize = 1 << 20;

/// Little-endian `dtype` bytes in the dtype's compute class (what `to_storage` gives).
pub(crate) fn decode(
    bytes: &[u8],
    dtype: DType,
    what: &dyn Fn() -> String,
) -> Result<Storage, CpuError> {
    let n = bytes.len() / dtype.size_bytes().max(1);
    if bytes.len() >= ZERO_LEAF_MIN && all_zero(bytes) {
        return Ok(match dtype {
            DType::F32 | DType::F16 | DType::BF16 => Storage::F32(zeroed(n, what)?),
            DType::F64 => Storage::F64(zeroed(n, what)?),
            DType::I32 | DType::I64 | DType::Bool => Storage::I64(zeroed(n, what)?),
            DType::U8 => Storage::U8(zeroed(n, what)?.into()),
        });
    }
    Ok(match dtype {
        DType::F32 => Storage::F32(collect(
            n,
            bytes.chunks_exact(4).map(|c| f32::from_le_bytes(arr(c))),
            what,
        )?),
        DType::F16 => Storage::F32(collect(
            n,
            bytes
                .chunks_exact(2)
                .map(|c| f16::from_le_bytes(arr(c)).to_f32()),
            what,
        )?),
        DType::BF16 => Storage::F32(collect(
            n,
            bytes
                .chunks_exact(2)
                .map(|c| bf16::from_le_bytes(arr(c)).to_f32()),
            what,
        )?),
        DType::F64 => Storage::F64(collect(
            n,
            bytes.chunks_exact(8).map(|c| f64::from_le_bytes(arr(c))),
            what,
        )?),
        DType::I32 => Storage::I64(collect(
            n,
            bytes
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes(arr(c)) as i64),
            what,
        )?),
        DType::I64 => Storage::I64(collect(
            n,
            bytes.chunks_exact(8).map(|c| i64::from_le_bytes(arr(c))),
            what,
        )?),
        // U8 leaves keep their bytes (packed quantised weights are most of a model).
        DType::U8 => {
            let mut v = with_capacity(n, what)?;
            v.extend_from_slice(&bytes[..n]);
            Storage::U8(v.into())
        }
        DType::Bool => Storage::I64(collect(n, bytes.iter().map(|&b| b as i64), what)?),
    })
}

/// A host tensor's values in its compute class.
pub(crate) fn storage_of(t: &HostTensor, what: &dyn Fn() -> String) -> Result<Storage, CpuError> {
    decode(&t.data, t.dtype, what)
}

/// `storage_of` taking the tensor: U8 bytes are kept as they are.
pub(crate) fn storage_from(t: HostTensor, what: &dyn Fn() -> String) -> Result<Storage, CpuError> {
    if t.dtype == DType::U8 {
        return Ok(Storage::U8(t.data.into()));
    }
    storage_of(&t, what)
}

/// An owned copy of computed values as the leaf storage of `dtype` (a write-back's new param
/// value): U8 values computed in the i64 arena go back to bytes (they are already wrapped
/// to 0..=255 by the executor's normalisation).
pub(crate) fn copy_buf(
    buf: Buf,
    dtype: DType,
    what: &dyn Fn() -> String,
) -> Result<Storage, CpuError> {
    fn copy<T: Copy>(s: &[T], what: &dyn Fn() -> String) -> Result<Vec<T>, CpuError> {
        let mut v = with_capacity(s.len(), what)?;
        v.extend_from_slice(s);
        Ok(v)
    }
    Ok(match buf {
        Buf::F32(s) => Storage::F32(copy(s, what)?),
        Buf::F64(s) => Storage::F64(copy(s, what)?),
        Buf::I64(s) if dtype == DType::U8 => {
            Storage::U8(collect(s.len(), s.iter().map(|&v| v as u8), what)?.into())
        }
        Buf::I64(s) => Storage::I64(copy(s, what)?),
        Buf::U8(s) => Storage::U8(copy(s, what)?.into()),
    })
}

/// One value into `dtype` bytes, as `HostTensor::from_f64_as` rounds or truncates it.
fn push_f64(out: &mut Vec<u8>, v: f64, dtype: DType) {
    match dtype {
        DType::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
        DType::F64 => out.extend_from_slice(&v.to_le_bytes()),
        DType::F16 => out.extend_from_slice(&f16::from_f64(v).to_le_bytes()),
        DType::BF16 => out.extend_from_slice(&bf16::from_f64(v).to_le_bytes()),
        DType::I32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
        DType::I64 => out.extend_from_slice(&(v as i64).to_le_bytes()),
        DType::U8 => out.push(v as u8),
        DType::Bool => out.push((v != 0.0) as u8),
    }
}

/// Computed values back into a `dtype` host tensor (what `from_buf` gives).
pub(crate) fn tensor_of(
    buf: Buf,
    shape: &[usize],
    dtype: DType,
    what: &dyn Fn() -> String,
) -> Result<HostTensor, CpuError> {
    let n = buf.len();
    let mut data = with_capacity(n.saturating_mul(dtype.size_bytes()), what)?;
    match (buf, dtype) {
        (Buf::F32(s), DType::F32) => s
            .iter()
            .for_each(|v| data.extend_from_slice(&v.to_le_bytes())),
        (Buf::F32(s), _) => s.iter().for_each(|&v| push_f64(&mut data, v as f64, dtype)),
        (Buf::F64(s), _) => s.iter().for_each(|&v| push_f64(&mut data, v, dtype)),
        (Buf::I64(s), DType::I64) => s
            .iter()
            .for_each(|v| data.extend_from_slice(&v.to_le_bytes())),
        (Buf::I64(s), _) => s.iter().for_each(|&v| push_f64(&mut data, v as f64, dtype)),
        (Buf::U8(s), DType::U8) => data.extend_from_slice(s),
        (Buf::U8(s), _) => s.iter().for_each(|&v| push_f64(&mut data, v as f64, dtype)),
    }
    Ok(HostTensor {
        shape: shape.to_vec(),
        dtype,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn what() -> String {
        "test leaf".into()
    }

    /// A zero leaf becomes zeroed storage of the right class and length; one non-zero byte
    /// anywhere (first, middle, last, unaligned) makes it an ordinary decode of the values.
    #[test]
    fn zero_leaves_decode_lazily_and_nonzero_ones_exactly() {
        let n = ZERO_LEAF_MIN / 4 + 3;
        let zeros = vec![0u8; n * 4];
        match decode(&zeros, DType::F32, &what).unwrap() {
            Storage::F32(v) => assert!(v.len() == n && v.iter().all(|&x| x == 0.0)),
            s => panic!("f32 zeros decoded as {} values of another class", s.len()),
        }
        match decode(&zeros, DType::I32, &what).unwrap() {
            Storage::I64(v) => assert!(v.len() == n && v.iter().all(|&x| x == 0)),
            s => panic!("i32 zeros decoded as {} values of another class", s.len()),
        }
        match decode(&zeros[..n * 2], DType::F16, &what).unwrap() {
            Storage::F32(v) => assert!(v.len() == n && v.iter().all(|&x| x == 0.0)),
            s => panic!("f16 zeros decoded as {} values of another class", s.len()),
        }
        for at in [0, 5, n * 2 + 1, n * 4 - 1] {
            let mut b = zeros.clone();
            b[at] = 0x3f;
            let Storage::F32(v) = decode(&b, DType::F32, &what).unwrap() else {
                panic!("f32 decoded to another class");
            };
            let want = f32::from_le_bytes(arr(&b[at / 4 * 4..at / 4 * 4 + 4]));
            assert_ne!(want, 0.0);
            assert_eq!(v[at / 4], want, "byte {at}");
            assert_eq!(v.iter().filter(|&&x| x != 0.0).count(), 1, "byte {at}");
        }
        // The byte scan on its own, at every alignment of a short slice.
        let mut b = [0u8; 64];
        for i in 0..64 {
            assert!(all_zero(&b[i..]));
            b[i] = 1;
            assert!(!all_zero(&b[..=i]) && (i == 63 || all_zero(&b[i + 1..])));
            b[i] = 0;
        }
    }
}
