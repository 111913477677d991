//! The many-rows-of-x (prefill) path of the 8-bit activation product on CPUs with AVX-512
//! VNNI. Sixteen weight rows are unpacked once into a tile whose 32-bit lanes are the rows:
//! for each group of 4 consecutive values, 16 rows × 4 bytes make one 512-bit vector. One
//! `vpdpbusd` with 4 bytes of x broadcast then adds 4 products into each row's lane, so a
//! block's 16 integer sums come out in one vector with no horizontal sums, and the block's
//! scales are applied to all 16 rows at once. The tile is reused for every row of x.
//!
//! `vpdpbusd` multiplies unsigned bytes by signed ones: the weight quants are held unsigned
//! (Q4_0 + 8, Q5_0 + 16, Q8_0 + 128, Q6_K + 32) and the offset is taken back exactly in the
//! integers, as bias · Σ x of the block (Q8_K's and our bsums). The arithmetic is that of
//! q8act.rs; each output is its blocks summed in order in f32 (with FMA), so results differ
//! from the one-row kernels' by f32 rounding only.
use super::q8act::{code, k_block, legacy_block, Q8Act, S_BYTES};
use std::arch::x86_64::*;

/// Weight rows per tile (the lanes of a 512-bit vector of i32).
pub(crate) const ROWS: usize = 16;

/// Whether this CPU runs the tiled kernels.
pub(crate) fn available() -> bool {
    use std::arch::is_x86_feature_detected as has;
    has!("avx512f") && has!("avx512bw") && has!("avx512vnni") && has!("fma")
}

/// Sixteen weight rows unpacked (rows past the weight's end are zeros).
#[derive(Default)]
pub(crate) struct Tile {
    /// Per block (legacy) or super-block (K), per group of 4 values: 16 rows × 4 u8 (one
    /// u32 a row).
    q: Vec<u32>,
    /// Per (super-)block, 16 rows: d.
    d: Vec<f32>,
    /// Per (super-)block, 16 rows: Q4_1 / Q5_1's m, the K-quants' dmin.
    m: Vec<f32>,
    /// K-quants, per super-block, 16 sub-blocks (Q4_K / Q5_K: the first 8), 16 rows.
    sc: Vec<i32>,
    /// Q4_K / Q5_K, per super-block, 8 sub-blocks, 16 rows: the mins.
    mn: Vec<i32>,
}

/// The offset that makes scheme `S`'s signed quants unsigned.
const fn bias(s: u8) -> i32 {
    match s {
        code::Q4_0 => 8,
        code::Q5_0 => 16,
        code::Q8_0 => 128,
        code::Q6_K => 32,
        _ => 0,
    }
}

fn is_k(s: u8) -> bool {
    matches!(s, code::Q4_K | code::Q5_K | code::Q6_K)
}

impl Tile {
    /// Unpack rows `w` (at most [`ROWS`], each `rb` bytes) of scheme `S`.
    fn fill<const S: u8>(&mut self, w: &[u8], rb: usize) {
        let bb = S_BYTES[S as usize];
        let nb = rb / bb;
        let groups = if is_k(S) { 64 } else { 8 };
        self.q.clear();
        self.q.resize(nb * groups * ROWS, 0);
        for v in [&mut self.d, &mut self.m] {
            v.clear();
            v.resize(nb * ROWS, 0.0);
        }
        if is_k(S) {
            for v in [&mut self.sc, &mut self.mn] {
                v.clear();
                v.resize(nb * 16 * ROWS, 0);
            }
        }
        let off = bias(S) as i8;
        // 4 quants, made unsigned, as one little-endian word.
        let word =
            |q: &[i8]| u32::from_le_bytes([0, 1, 2, 3].map(|l| q[l].wrapping_add(off) as u8));
        for (r, row) in w.chunks_exact(rb).enumerate() {
            for (b, blk) in row.chunks_exact(bb).enumerate() {
                let at = |g: usize| (b * groups + g) * ROWS + r;
                if is_k(S) {
                    let kb = k_block::<S>(blk);
                    for (g, q) in kb.q.chunks_exact(4).enumerate() {
                        self.q[at(g)] = word(q);
                    }
                    self.d[b * ROWS + r] = kb.d;
                    self.m[b * ROWS + r] = kb.dmin;
                    for g in 0..16 {
                        // Q4_K / Q5_K hold one scale per 32 values, twice in kb.sc.
                        let s = if S == code::Q6_K {
                            kb.sc[g]
                        } else {
                            kb.sc[2 * (g % 8)]
                        };
                        self.sc[(b * 16 + g) * ROWS + r] = s;
                    }
                    for j in 0..8 {
                        self.mn[(b * 16 + j) * ROWS + r] = kb.mn[j];
                    }
                } else {
                    let (q, d, m) = legacy_block::<S>(blk);
                    for (g, q) in q.chunks_exact(4).enumerate() {
                        self.q[at(g)] = word(q);
                    }
                    self.d[b * ROWS + r] = d;
                    self.m[b * ROWS + r] = m;
                }
            }
        }
    }
}

/// Rows `w` (at most 16, each `rb` bytes, scheme code `s`) against every row of `act`:
/// `out[i·16 + j]` = row j · x row i. Only where [`available`].
pub(crate) fn rows(s: u8, w: &[u8], rb: usize, act: &Q8Act, out: &mut [f32], t: &mut Tile) {
    assert!(available() && w.len() <= ROWS * rb && out.len() == act.rows() * ROWS);
    // SAFETY: the CPU has the features (asserted); the kernels check what they index.
    unsafe {
        match s {
            code::Q4_0 => tile::<{ code::Q4_0 }>(w, rb, act, out, t),
            code::Q4_1 => tile::<{ code::Q4_1 }>(w, rb, act, out, t),
            code::Q5_0 => tile::<{ code::Q5_0 }>(w, rb, act, out, t),
            code::Q5_1 => tile::<{ code::Q5_1 }>(w, rb, act, out, t),
            code::Q8_0 => tile::<{ code::Q8_0 }>(w, rb, act, out, t),
            code::Q4_K => tile::<{ code::Q4_K }>(w, rb, act, out, t),
            code::Q5_K => tile::<{ code::Q5_K }>(w, rb, act, out, t),
            _ => tile::<{ code::Q6_K }>(w, rb, act, out, t),
        }
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vnni,fma")]
unsafe fn tile<const S: u8>(w: &[u8], rb: usize, act: &Q8Act, out: &mut [f32], t: &mut Tile) {
    t.fill::<S>(w, rb);
    let m = act.rows();
    let mut i = 0;
    while i < m {
        let r = (m - i).min(4);
        let o = &mut out[i * ROWS..(i + r) * ROWS];
        match r {
            4 => group::<S, 4>(t, act, i, o),
            3 => group::<S, 3>(t, act, i, o),
            2 => group::<S, 2>(t, act, i, o),
            _ => group::<S, 1>(t, act, i, o),
        }
        i += r;
    }
}

/// 4 bytes of x at `p`, broadcast to every lane.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,fma")]
unsafe fn x4(p: *const i8) -> __m512i {
    _mm512_set1_epi32(std::ptr::read_unaligned(p as *const i32))
}

/// The tile against rows `i0..i0 + R` of x, into `out` (`R × 16`).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,fma")]
unsafe fn group<const S: u8, const R: usize>(t: &Tile, act: &Q8Act, i0: usize, out: &mut [f32]) {
    let acts: [_; R] = std::array::from_fn(|j| act.row(i0 + j));
    let nb = t.d.len() / ROWS;
    let groups = if is_k(S) { 64 } else { 8 };
    let bl = if is_k(S) { 256 } else { 32 };
    assert!(t.q.len() == nb * groups * ROWS && out.len() == R * ROWS);
    for a in &acts {
        assert!(a.qs.len() == nb * bl && a.d.len() == nb && a.bsums.len() == nb * bl / 16);
        assert!(is_k(S) || a.s.len() == nb);
    }
    let off = bias(S);
    let mut sum = [_mm512_setzero_ps(); R];
    for b in 0..nb {
        let wq = t.q.as_ptr().add(b * groups * ROWS);
        let dv = _mm512_loadu_ps(t.d.as_ptr().add(b * ROWS));
        let mv = _mm512_loadu_ps(t.m.as_ptr().add(b * ROWS));
        if !is_k(S) {
            let mut acc = [_mm512_setzero_si512(); R];
            for r in 0..R {
                if off != 0 {
                    let bs = &acts[r].bsums[2 * b..2 * b + 2];
                    acc[r] = _mm512_set1_epi32(-off * (bs[0] as i32 + bs[1] as i32));
                }
            }
            for g in 0..8 {
                let v = _mm512_loadu_si512(wq.add(ROWS * g) as *const _);
                for r in 0..R {
                    let x = x4(acts[r].qs.as_ptr().add(32 * b + 4 * g));
                    acc[r] = _mm512_dpbusd_epi32(acc[r], v, x);
                }
            }
            for r in 0..R {
                let a = &acts[r];
                let scale = _mm512_mul_ps(dv, _mm512_set1_ps(*a.d.get_unchecked(b)));
                sum[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r]), scale, sum[r]);
                if matches!(S, code::Q4_1 | code::Q5_1) {
                    let sx = _mm512_set1_ps(*a.s.get_unchecked(b));
                    sum[r] = _mm512_fmadd_ps(mv, sx, sum[r]);
                }
            }
            continue;
        }
        // K-quants: sub-blocks of 32 values (8 groups; Q6_K: 16 values, 4 groups), each
        // sum scaled by its sub-block scale in the integers.
        let (subs, per) = if S == code::Q6_K { (16, 4) } else { (8, 8) };
        let mut acc = [_mm512_setzero_si512(); R];
        for j in 0..subs {
            let mut p = [_mm512_setzero_si512(); R];
            for r in 0..R {
                if off != 0 {
                    let bs = acts[r].bsums[16 * b + j] as i32;
                    p[r] = _mm512_set1_epi32(-off * bs);
                }
            }
            for g in per * j..per * (j + 1) {
                let v = _mm512_loadu_si512(wq.add(ROWS * g) as *const _);
                for r in 0..R {
                    let x = x4(acts[r].qs.as_ptr().add(256 * b + 4 * g));
                    p[r] = _mm512_dpbusd_epi32(p[r], v, x);
                }
            }
            let sc = _mm512_loadu_si512(t.sc.as_ptr().add((b * 16 + j) * ROWS) as *const _);
            for r in 0..R {
                acc[r] = _mm512_add_epi32(acc[r], _mm512_mullo_epi32(p[r], sc));
            }
        }
        for r in 0..R {
            let a = &acts[r];
            let dx = _mm512_set1_ps(a.d[b]);
            sum[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r]), _mm512_mul_ps(dv, dx), sum[r]);
            if S != code::Q6_K {
                let mut summ = _mm512_setzero_si512();
                for j in 0..8 {
                    let bs = &a.bsums[16 * b + 2 * j..16 * b + 2 * j + 2];
                    let mn = _mm512_loadu_si512(t.mn.as_ptr().add((b * 16 + j) * ROWS) as *const _);
                    let xs = _mm512_set1_epi32(bs[0] as i32 + bs[1] as i32);
                    summ = _mm512_add_epi32(summ, _mm512_mullo_epi32(mn, xs));
                }
                let dm = _mm512_mul_ps(mv, dx);
                sum[r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ), dm, sum[r]);
            }
        }
    }
    for r in 0..R {
        _mm512_storeu_ps(out.as_mut_ptr().add(r * ROWS), sum[r]);
    }
}
