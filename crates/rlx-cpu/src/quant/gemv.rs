//! The small-M (decode) product `x @ Wᵀ` straight from packed weight rows: each row is
//! walked once, a block at a time; its quants are widened to f32 in registers, scaled and
//! multiplied into 32 f32 lane accumulators — no dequantised tile, no GEMM. Decode is bound
//! by the weight's bytes, so the point is to touch each byte once and keep the arithmetic
//! vectorised.
//!
//! Type-1 formats (Q4_1, Q5_1, Q4_K, Q5_K) subtract or add a per-32-value offset; its term
//! `offset · Σ x` uses the 32-value sums of x computed once per call.
//!
//! The kernels are plain Rust written so LLVM vectorises them (fixed 32-value arrays, no
//! data-dependent branches). On x86-64 the same code is also compiled with AVX2 + FMA + F16C
//! enabled and chosen at run time, since the default target stops at SSE2.
use super::kquants::scale_min;
use crate::CpuError;
use rayon::prelude::*;
use rlx_ir::QuantScheme;

/// Below this many weight bytes a product runs on the calling thread.
const PAR_BYTES: usize = 1 << 16;

/// `a · b + c`, fused where the kernel is compiled with FMA (a libm call otherwise).
#[inline(always)]
fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// `acc[l] += q[l]·s·x[l]`, with scale `s0` on lanes 0..16 and `s1` on 16..32.
#[inline(always)]
fn fma32<const FMA: bool>(acc: &mut [f32; 32], q: &[f32; 32], x: &[f32], s0: f32, s1: f32) {
    let x: &[f32; 32] = x[..32].try_into().expect("32 values");
    for l in 0..16 {
        acc[l] = madd::<FMA>(q[l] * s0, x[l], acc[l]);
    }
    for l in 16..32 {
        acc[l] = madd::<FMA>(q[l] * s1, x[l], acc[l]);
    }
}

/// The 16 nibble bytes of a 32-value block as values: low nibbles first, then high.
#[inline(always)]
fn nibbles(b: &[u8], bias: f32) -> [f32; 32] {
    let b: &[u8; 16] = b[..16].try_into().expect("16 bytes");
    let mut q = [0f32; 32];
    for j in 0..16 {
        q[j] = (b[j] & 15) as f32 - bias;
        q[j + 16] = (b[j] >> 4) as f32 - bias;
    }
    q
}

/// Like [`nibbles`], with element j's fifth bit from bit j of `qh`.
#[inline(always)]
fn five_bits(b: &[u8], qh: u32, bias: f32) -> [f32; 32] {
    let b: &[u8; 16] = b[..16].try_into().expect("16 bytes");
    let mut q = [0f32; 32];
    for j in 0..16 {
        let h0 = ((qh >> j) & 1) << 4;
        let h1 = ((qh >> (j + 16)) & 1) << 4;
        q[j] = ((b[j] & 15) as u32 | h0) as f32 - bias;
        q[j + 16] = ((b[j] >> 4) as u32 | h1) as f32 - bias;
    }
    q
}

/// The f16 at `b[0..2]` as f32, exactly. In the kernels built for AVX2 / AVX-512 (`HW`) it
/// is one F16C conversion; elsewhere a few inlined integer and float ops: the exponent and
/// mantissa moved to f32's places, then rebiased by one multiply by 2^112 (which also scales
/// f16 subnormals, read as f32 subnormals, to their value). A call into `half` here would
/// spill the vector accumulators around every block's scale, and the integer version costs
/// a block of Q4_1 (two scales) as many instructions as its 32 products.
#[inline(always)]
fn f16_at<const HW: bool>(b: &[u8]) -> f32 {
    let h = u16::from_le_bytes([b[0], b[1]]);
    #[cfg(target_arch = "x86_64")]
    if HW {
        // SAFETY: HW kernels are only compiled into functions with F16C enabled and only run
        // where rows_any has detected it.
        unsafe {
            use std::arch::x86_64::{_mm_cvtph_ps, _mm_cvtsi32_si128, _mm_cvtss_f32};
            return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(h))));
        }
    }
    let h = h as u32;
    let sign = (h & 0x8000) << 16;
    let em = h & 0x7fff;
    let v = if em >= 0x7c00 {
        // Inf and NaN: all-ones exponent, mantissa kept.
        f32::from_bits(0x7f80_0000 | ((em & 0x3ff) << 13))
    } else {
        f32::from_bits(em << 13) * f32::from_bits(0x7780_0000)
    };
    f32::from_bits(v.to_bits() | sign)
}

fn u32_at(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// One block of `scheme` (`b` its bytes, `x` its values of x, `xs` their 32-value sums)
/// into the lanes; returns the block's scalar (offset) term. Layouts: legacy.rs, kquants.rs.
#[inline(always)]
fn block<const FMA: bool>(
    scheme: QuantScheme,
    b: &[u8],
    x: &[f32],
    xs: &[f32],
    acc: &mut [f32; 32],
) -> f32 {
    match scheme {
        QuantScheme::Q8_0 => {
            let d = f16_at::<FMA>(&b[0..2]);
            let qb: &[u8; 32] = b[2..34].try_into().expect("32 bytes");
            let mut q = [0f32; 32];
            for l in 0..32 {
                q[l] = qb[l] as i8 as f32;
            }
            fma32::<FMA>(acc, &q, x, d, d);
            0.0
        }
        QuantScheme::Q4_0 => {
            let d = f16_at::<FMA>(&b[0..2]);
            fma32::<FMA>(acc, &nibbles(&b[2..18], 8.0), x, d, d);
            0.0
        }
        QuantScheme::Q4_1 => {
            let (d, m) = (f16_at::<FMA>(&b[0..2]), f16_at::<FMA>(&b[2..4]));
            fma32::<FMA>(acc, &nibbles(&b[4..20], 0.0), x, d, d);
            m * xs[0]
        }
        QuantScheme::Q5_0 => {
            let d = f16_at::<FMA>(&b[0..2]);
            fma32::<FMA>(acc, &five_bits(&b[6..22], u32_at(&b[2..6]), 16.0), x, d, d);
            0.0
        }
        QuantScheme::Q5_1 => {
            let (d, m) = (f16_at::<FMA>(&b[0..2]), f16_at::<FMA>(&b[2..4]));
            fma32::<FMA>(acc, &five_bits(&b[8..24], u32_at(&b[4..8]), 0.0), x, d, d);
            m * xs[0]
        }
        QuantScheme::Q4_K | QuantScheme::Q5_K => {
            let five = scheme == QuantScheme::Q5_K;
            let mut off = 0.0;
            // Spelled out per chunk so every shift and scale index is a constant (a loop
            // here is left rolled, and its variable shifts and spills cost ~2× the time).
            off += k_chunk::<FMA, 0>(five, b, x, xs, acc);
            off += k_chunk::<FMA, 1>(five, b, x, xs, acc);
            off += k_chunk::<FMA, 2>(five, b, x, xs, acc);
            off += k_chunk::<FMA, 3>(five, b, x, xs, acc);
            off
        }
        QuantScheme::Q6_K => {
            q6_half::<FMA, 0>(b, x, acc);
            q6_half::<FMA, 1>(b, x, acc);
            0.0
        }
        QuantScheme::F16 | QuantScheme::BF16 => {
            let hb: &[u8; 64] = b[..64].try_into().expect("64 bytes");
            let mut q = [0f32; 32];
            for l in 0..32 {
                let h = u16::from_le_bytes([hb[2 * l], hb[2 * l + 1]]);
                q[l] = if scheme == QuantScheme::F16 {
                    f16_at::<FMA>(&hb[2 * l..])
                } else {
                    f32::from_bits(u32::from(h) << 16)
                };
            }
            fma32::<FMA>(acc, &q, x, 1.0, 1.0);
            0.0
        }
    }
}

/// Chunk `C` (values 64C..64C + 64) of a Q4_K / Q5_K super-block: the low nibbles of
/// bytes 32C.. are sub-block 2C, the high ones 2C + 1; returns the chunk's min term.
#[inline(always)]
fn k_chunk<const FMA: bool, const C: usize>(
    five: bool,
    b: &[u8],
    x: &[f32],
    xs: &[f32],
    acc: &mut [f32; 32],
) -> f32 {
    let (d, dmin) = (f16_at::<FMA>(&b[0..2]), f16_at::<FMA>(&b[2..4]));
    let sc = &b[4..16];
    let qh: &[u8; 32] = b[16..48].try_into().expect("32 bytes");
    let at = if five { 48 } else { 16 } + 32 * C;
    let qb: &[u8; 32] = b[at..at + 32].try_into().expect("32 bytes");
    let (mut lo, mut hi) = ([0f32; 32], [0f32; 32]);
    for l in 0..32 {
        let (mut a, mut z) = (qb[l] & 15, qb[l] >> 4);
        if five {
            a |= ((qh[l] >> (2 * C)) & 1) << 4;
            z |= ((qh[l] >> (2 * C + 1)) & 1) << 4;
        }
        lo[l] = a as f32;
        hi[l] = z as f32;
    }
    let (s0, m0) = scale_min(2 * C, sc);
    let (s1, m1) = scale_min(2 * C + 1, sc);
    let (d0, d1) = (d * s0 as f32, d * s1 as f32);
    fma32::<FMA>(acc, &lo, &x[64 * C..], d0, d0);
    fma32::<FMA>(acc, &hi, &x[64 * C + 32..], d1, d1);
    -(dmin * m0 as f32 * xs[2 * C] + dmin * m1 as f32 * xs[2 * C + 1])
}

/// Half `H` (values 128H..128H + 128) of a Q6_K super-block in one pass over its 96
/// bytes: group g takes nibble g / 2 of ql[64H + 32(g & 1) + l] and bits 2g.. of
/// qh[32H + l]; its two 16-value sub-blocks have scales sc[8H + 2g], sc[8H + 2g + 1].
#[inline(always)]
fn q6_half<const FMA: bool, const H: usize>(b: &[u8], x: &[f32], acc: &mut [f32; 32]) {
    let sc = &b[192..208];
    let d = f16_at::<FMA>(&b[208..210]);
    let qa: &[u8; 32] = b[64 * H..64 * H + 32].try_into().expect("32 bytes");
    let qb: &[u8; 32] = b[64 * H + 32..64 * H + 64].try_into().expect("32 bytes");
    let qh: &[u8; 32] = b[128 + 32 * H..160 + 32 * H].try_into().expect("32 bytes");
    let mut q = [[0f32; 32]; 4];
    for l in 0..32 {
        let (a, z, t) = (qa[l], qb[l], qh[l]);
        q[0][l] = ((a & 15) | ((t & 3) << 4)) as f32 - 32.0;
        q[1][l] = ((z & 15) | (((t >> 2) & 3) << 4)) as f32 - 32.0;
        q[2][l] = ((a >> 4) | (((t >> 4) & 3) << 4)) as f32 - 32.0;
        q[3][l] = ((z >> 4) | ((t >> 6) << 4)) as f32 - 32.0;
    }
    let s = |j: usize| d * (sc[8 * H + j] as i8) as f32;
    fma32::<FMA>(acc, &q[0], &x[128 * H..], s(0), s(1));
    fma32::<FMA>(acc, &q[1], &x[128 * H + 32..], s(2), s(3));
    fma32::<FMA>(acc, &q[2], &x[128 * H + 64..], s(4), s(5));
    fma32::<FMA>(acc, &q[3], &x[128 * H + 96..], s(6), s(7));
}

/// One packed row dotted with one row of x (`xs` its 32-value sums).
#[inline(always)]
fn row_dot<const FMA: bool>(scheme: QuantScheme, row: &[u8], x: &[f32], xs: &[f32]) -> f32 {
    let (bb, bl) = (scheme.block_bytes(), scheme.block_len());
    let mut acc = [0f32; 32];
    let mut off = 0f32;
    for ((b, xb), sb) in (row.chunks_exact(bb))
        .zip(x.chunks_exact(bl))
        .zip(xs.chunks_exact(bl / 32))
    {
        off += block::<FMA>(scheme, b, xb, sb, &mut acc);
    }
    acc.iter().sum::<f32>() + off
}

/// Rows `w` (each `rb` bytes) against the rows of x (each `k` values, `k / 32` sums in
/// `xs`) into `out`, `[rows, m]`. Called with a constant scheme, so the match in [`block`]
/// folds away and every kernel is specialised.
#[inline(always)]
fn rows<const FMA: bool>(
    s: QuantScheme,
    w: &[u8],
    rb: usize,
    k: usize,
    x: &[f32],
    xs: &[f32],
    out: &mut [f32],
) {
    let m = x.len() / k;
    let ks = k / 32;
    for (row, o) in w.chunks_exact(rb).zip(out.chunks_exact_mut(m)) {
        for (i, o) in o.iter_mut().enumerate() {
            *o = row_dot::<FMA>(s, row, &x[i * k..(i + 1) * k], &xs[i * ks..(i + 1) * ks]);
        }
    }
}

macro_rules! specialise {
    ($s:expr, $f:ident, $fma:literal, $($a:expr),*) => {
        match $s {
            QuantScheme::Q8_0 => $f::<$fma>(QuantScheme::Q8_0, $($a),*),
            QuantScheme::Q4_0 => $f::<$fma>(QuantScheme::Q4_0, $($a),*),
            QuantScheme::Q4_1 => $f::<$fma>(QuantScheme::Q4_1, $($a),*),
            QuantScheme::Q5_0 => $f::<$fma>(QuantScheme::Q5_0, $($a),*),
            QuantScheme::Q5_1 => $f::<$fma>(QuantScheme::Q5_1, $($a),*),
            QuantScheme::Q4_K => $f::<$fma>(QuantScheme::Q4_K, $($a),*),
            QuantScheme::Q5_K => $f::<$fma>(QuantScheme::Q5_K, $($a),*),
            QuantScheme::Q6_K => $f::<$fma>(QuantScheme::Q6_K, $($a),*),
            QuantScheme::F16 => $f::<$fma>(QuantScheme::F16, $($a),*),
            QuantScheme::BF16 => $f::<$fma>(QuantScheme::BF16, $($a),*),
        }
    };
}

/// [`rows`] compiled with `$features` enabled: AVX2 + FMA, and AVX-512 (16-lane vectors
/// for the 32-lane accumulators); `rows_any` picks one at run time.
macro_rules! rows_with {
    ($name:ident, $features:literal) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        fn $name(
            s: QuantScheme,
            w: &[u8],
            rb: usize,
            k: usize,
            x: &[f32],
            xs: &[f32],
            out: &mut [f32],
        ) {
            specialise!(s, rows, true, w, rb, k, x, xs, out)
        }
    };
}
rows_with!(rows_avx2, "avx2,fma,f16c");
rows_with!(rows_avx512, "avx512f,avx512bw,avx512vl,avx2,fma,f16c");

fn rows_any(s: QuantScheme, w: &[u8], rb: usize, k: usize, x: &[f32], xs: &[f32], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("f16c")
    {
        // SAFETY: the CPU has the features rows_avx512 is compiled for (checked just above).
        return unsafe { rows_avx512(s, w, rb, k, x, xs, out) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("f16c")
    {
        // SAFETY: the CPU has the features rows_avx2 is compiled for (checked just above).
        return unsafe { rows_avx2(s, w, rb, k, x, xs, out) };
    }
    specialise!(s, rows, false, w, rb, k, x, xs, out)
}

/// `out[i, r] = Σ_k x[i, k] · W[r, k]` for `x` `[m, k]` (f32) and `w` the packed `[n, k]`
/// weight, walking each packed row once. Meant for small `m` (decode): the row bytes of
/// one row are reused from L1 for every row of x. Rows are spread over rayon's threads.
pub fn matvec(
    scheme: QuantScheme,
    w: &[u8],
    n: usize,
    k: usize,
    x: &[f32],
    out: &mut [f32],
) -> Result<(), CpuError> {
    let (rb, m) = super::product_dims(scheme, "matvec", (w, n, k), x, out)?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    let xs: Vec<f32> = x.chunks_exact(32).map(|c| c.iter().sum()).collect();
    // Results land as [n, m]; for one row of x that is already out's layout.
    let mut tmp = if m == 1 {
        Vec::new()
    } else {
        vec![0f32; n * m]
    };
    let dst: &mut [f32] = if m == 1 { out } else { &mut tmp };
    let threads = rayon::current_num_threads().max(1);
    if n * rb * m < PAR_BYTES || threads == 1 {
        rows_any(scheme, w, rb, k, x, &xs, dst);
    } else {
        // A few chunks per thread, so a thread slowed by a neighbour does not hold up the
        // product; at least 16 rows each so the task overhead stays small.
        let chunk = n.div_ceil(threads * 4).max(16);
        (dst.par_chunks_mut(chunk * m))
            .zip(w.par_chunks(chunk * rb))
            .for_each(|(o, wc)| rows_any(scheme, wc, rb, k, x, &xs, o));
    }
    if m > 1 {
        super::rows_to_columns(&tmp, m, n, out);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The inlined f16 reading equals `half`'s for every one of the 65536 bit patterns, in
    /// the portable form and (where the CPU has F16C) the one the AVX kernels use.
    #[test]
    fn f16_at_is_exact_for_every_pattern() {
        let check = |bits: u16, got: f32, how: &str| {
            let want = half::f16::from_bits(bits).to_f32();
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{how} {bits:#06x}: {got} vs {want}"
            );
        };
        for bits in 0..=u16::MAX {
            check(bits, super::f16_at::<false>(&bits.to_le_bytes()), "integer");
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("f16c") {
            #[target_feature(enable = "f16c")]
            fn hw(b: &[u8]) -> f32 {
                super::f16_at::<true>(b)
            }
            for bits in 0..=u16::MAX {
                // SAFETY: F16C was detected just above.
                check(bits, unsafe { hw(&bits.to_le_bytes()) }, "F16C");
            }
        }
    }
}
