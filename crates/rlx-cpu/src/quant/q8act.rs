//! llama.cpp's numerics for products with a quantised weight ([`QuantAct::Q8`], opt-in): each
//! row of x is first quantised to 8 bits in the activation format ggml pairs with the
//! weight's scheme (its `vec_dot_type`), then every block's product is an integer dot, and
//! the blocks are combined in f32 as ggml's `ggml_vec_dot_*_q8_*` combine them.
//!
//! Activation formats, as ggml's `quantize_row_q8_0_ref` / `_q8_1_ref` / `_q8_K_ref`:
//! - Q8_0 (for Q4_0, Q5_0, Q8_0 weights): blocks of 32; d = amax / 127, kept as f16;
//!   q = roundf(x · id) (halves away from zero) with id = 1 / d in f32 (0 where d is 0).
//! - Q8_1 (for Q4_1, Q5_1): Q8_0's d and q, and s = f16(d · Σq) with the f32 d.
//! - Q8_K (for Q4_K, Q5_K, Q6_K): blocks of 256; with `max` the first value of largest
//!   magnitude, iscale = −127 / max, q = min(127, nearest-even(iscale · x)), d = 1 / iscale
//!   kept in f32, and `bsums`, the sums of each 16 quants. An all-zero block is d = 0, q = 0.
//!
//! Per block, with d_w, m_w the weight's scales and d_x, s_x the activation's:
//! - Q4_0, Q5_0, Q8_0: d_w·d_x · Σ q_w q_x, q_w signed (nibble − 8, five bits − 16, i8).
//! - Q4_1, Q5_1: d_w·d_x · Σ q_w q_x + m_w · s_x.
//! - Q4_K, Q5_K (a super-block of eight 32-value sub-blocks with 6-bit scale sc_j and min
//!   m_j): d_w·d_x · Σ_j sc_j Σ q_w q_x − dmin_w·d_x · Σ_j m_j (bsums_2j + bsums_2j+1).
//! - Q6_K (sixteen 16-value groups with i8 scale sc_g): d_w·d_x · Σ_g sc_g Σ (q_w − 32) q_x.
//!
//! The integer sums are exact, so a result differs from the f64 product of the dequantised
//! weight and the dequantised activation only by f32 rounding. x is quantised once per call
//! (per row), weight rows are spread over rayon's threads, and each weight block is unpacked
//! once for up to four rows of x. The kernels here are plain Rust; on x86-64 the ones in
//! `q8x86.rs` (AVX2, and AVX-512 VNNI / AVX-VNNI `vpdpbusd` where the CPU has it) are chosen
//! at run time, and from 8 rows of x (prefill) on a CPU with AVX-512 VNNI the tiled ones of
//! `q8tile.rs` (16 weight rows unpacked into the lanes of one vector).
use super::kquants::scale_min;
use crate::error::op_err;
use crate::CpuError;
use half::f16;
use rayon::prelude::*;
use rlx_ir::env::{self, Switch};
use rlx_ir::QuantScheme;

/// How the CPU multiplies activations by a quantised weight (DequantMatMul and
/// FusedDequantMatMul with a Q4_0 … Q6_K weight; F16 / BF16 weights are never affected).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum QuantAct {
    /// f32 activations times the decoded weight (the default, the more accurate).
    #[default]
    F32,
    /// llama.cpp's CPU numerics: x quantised to Q8_0 / Q8_1 / Q8_K, integer block dots.
    Q8,
}

impl QuantAct {
    /// `q8` (also `on`, `1`) or `f32` (also `off`, `0`, empty).
    pub fn parse(s: &str) -> Option<QuantAct> {
        match s.trim().to_ascii_lowercase().as_str() {
            "q8" | "on" | "1" => Some(QuantAct::Q8),
            "f32" | "off" | "0" | "" => Some(QuantAct::F32),
            _ => None,
        }
    }

    /// `RLX_QUANT_ACT`, or the default where it is unset or unparsable.
    pub fn from_env() -> QuantAct {
        env::text(Switch::QuantAct)
            .and_then(|v| QuantAct::parse(&v))
            .unwrap_or_default()
    }
}

/// ggml's activation format for a weight scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActFormat {
    Q8_0,
    Q8_1,
    Q8K,
}

impl ActFormat {
    /// Values per block: 32, or 256 for Q8_K.
    pub fn block_len(self) -> usize {
        match self {
            ActFormat::Q8K => 256,
            _ => 32,
        }
    }
}

/// The format x is quantised to for a weight of `scheme` (none for F16 / BF16).
pub fn act_format(scheme: QuantScheme) -> Option<ActFormat> {
    match scheme {
        QuantScheme::Q4_0 | QuantScheme::Q5_0 | QuantScheme::Q8_0 => Some(ActFormat::Q8_0),
        QuantScheme::Q4_1 | QuantScheme::Q5_1 => Some(ActFormat::Q8_1),
        QuantScheme::Q4_K | QuantScheme::Q5_K | QuantScheme::Q6_K => Some(ActFormat::Q8K),
        QuantScheme::F16 | QuantScheme::BF16 => None,
    }
}

/// Rows of x quantised to 8 bits. Scales are held as f32 values: the f16-rounded d (and s)
/// of Q8_0 / Q8_1, the f32 d of Q8_K.
#[derive(Clone, Debug)]
pub struct Q8Act {
    format: ActFormat,
    k: usize,
    qs: Vec<i8>,
    /// Per block.
    d: Vec<f32>,
    /// Per 32 values: Q8_1's s (zero for the other formats).
    s: Vec<f32>,
    /// Per 16 values: Σq (Q8_K's bsums; kept for every format).
    bsums: Vec<i16>,
}

/// One row of a [`Q8Act`], as the kernels read it.
#[derive(Clone, Copy)]
pub(crate) struct Act<'a> {
    pub qs: &'a [i8],
    pub d: &'a [f32],
    pub s: &'a [f32],
    pub bsums: &'a [i16],
}

/// C's `roundf` for |a| < 2^23: halves away from zero (no libm call, so it vectorises).
#[inline(always)]
fn round_away(a: f32) -> i32 {
    let t = a as i32;
    let f = a - t as f32; // exact below 2^23
    t + i32::from(f >= 0.5) - i32::from(f <= -0.5)
}

/// ggml's `nearest_int`: to nearest, ties to even, through the 1.5·2^23 magic add.
#[inline(always)]
fn nearest_int(v: f32) -> i32 {
    let t = v + 12_582_912.0;
    (t.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// The largest |x| (`a > b ? a : b` as ggml's MAX, so the same for any order of finite x).
#[inline(always)]
fn abs_max(x: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    for c in x.chunks_exact(8) {
        for l in 0..8 {
            let a = c[l].abs();
            lanes[l] = if lanes[l] > a { lanes[l] } else { a };
        }
    }
    lanes.iter().fold(0f32, |m, &a| if m > a { m } else { a })
}

fn to_f16(v: f32) -> f32 {
    f16::from_f32(v).to_f32()
}

/// One 32-value block as `quantize_row_q8_0_ref` (and `_q8_1_ref` with `s`): returns
/// (d as f16, s as f16).
#[inline(always)]
fn quantize_32(x: &[f32], q: &mut [i8]) -> (f32, f32) {
    let d = abs_max(x) / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut sum = 0i32;
    for (q, &v) in q.iter_mut().zip(x) {
        let r = round_away(v * id);
        *q = r as i8;
        sum += r;
    }
    (to_f16(d), to_f16(sum as f32 * d))
}

/// One 256-value block as `quantize_row_q8_K_ref`: returns d.
#[inline(always)]
fn quantize_256(x: &[f32], q: &mut [i8]) -> f32 {
    let amax = abs_max(x);
    if amax == 0.0 {
        q.fill(0);
        return 0.0;
    }
    // ggml keeps the first value whose magnitude beats every earlier one: the first of
    // magnitude amax.
    let max = x.iter().copied().find(|v| v.abs() == amax).unwrap_or(amax);
    let iscale = -127.0 / max;
    for (q, &v) in q.iter_mut().zip(x) {
        *q = nearest_int(iscale * v).min(127) as i8;
    }
    1.0 / iscale
}

/// Quantise one row of x (`k` values) into its slots.
#[inline(always)]
fn quantize_row(
    format: ActFormat,
    x: &[f32],
    qs: &mut [i8],
    d: &mut [f32],
    s: &mut [f32],
    bsums: &mut [i16],
) {
    match format {
        ActFormat::Q8_0 | ActFormat::Q8_1 => {
            for (((xb, qb), d), s) in (x.chunks_exact(32))
                .zip(qs.chunks_exact_mut(32))
                .zip(d.iter_mut())
                .zip(s.iter_mut())
            {
                let (dh, sh) = quantize_32(xb, qb);
                *d = dh;
                *s = if format == ActFormat::Q8_1 { sh } else { 0.0 };
            }
        }
        ActFormat::Q8K => {
            for ((xb, qb), d) in (x.chunks_exact(256))
                .zip(qs.chunks_exact_mut(256))
                .zip(d.iter_mut())
            {
                *d = quantize_256(xb, qb);
            }
        }
    }
    for (b, q) in bsums.iter_mut().zip(qs.chunks_exact(16)) {
        *b = q.iter().map(|&v| v as i16).sum();
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn quantize_row_avx2(
    format: ActFormat,
    x: &[f32],
    qs: &mut [i8],
    d: &mut [f32],
    s: &mut [f32],
    bsums: &mut [i16],
) {
    quantize_row(format, x, qs, d, s, bsums)
}

fn quantize_row_any(
    format: ActFormat,
    x: &[f32],
    qs: &mut [i8],
    d: &mut [f32],
    s: &mut [f32],
    bsums: &mut [i16],
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has the features quantize_row_avx2 is compiled for.
        return unsafe { quantize_row_avx2(format, x, qs, d, s, bsums) };
    }
    quantize_row(format, x, qs, d, s, bsums)
}

impl Q8Act {
    /// Quantise the rows of `x` (each `k` values, `k` a multiple of the format's block).
    pub fn quantize(format: ActFormat, x: &[f32], k: usize) -> Result<Q8Act, CpuError> {
        let bl = format.block_len();
        if k == 0 || !k.is_multiple_of(bl) || !x.len().is_multiple_of(k) {
            return Err(op_err(format!(
                "{format:?} activations: rows of {k} values (a multiple of {bl}) from {}",
                x.len()
            )));
        }
        let m = x.len() / k;
        let mut a = Q8Act {
            format,
            k,
            qs: vec![0; m * k],
            d: vec![0.0; m * (k / bl)],
            s: vec![0.0; m * (k / 32)],
            bsums: vec![0; m * (k / 16)],
        };
        let (nb, ns, n16) = (k / bl, k / 32, k / 16);
        let rows = (x.chunks_exact(k))
            .zip(a.qs.chunks_exact_mut(k))
            .zip(a.d.chunks_exact_mut(nb))
            .zip(a.s.chunks_exact_mut(ns))
            .zip(a.bsums.chunks_exact_mut(n16));
        if m * k >= 1 << 15 {
            (rows.collect::<Vec<_>>().into_par_iter())
                .for_each(|((((x, q), d), s), b)| quantize_row_any(format, x, q, d, s, b));
        } else {
            rows.for_each(|((((x, q), d), s), b)| quantize_row_any(format, x, q, d, s, b));
        }
        Ok(a)
    }

    pub fn format(&self) -> ActFormat {
        self.format
    }
    /// Values per row.
    pub fn k(&self) -> usize {
        self.k
    }
    pub fn rows(&self) -> usize {
        self.qs.len() / self.k
    }
    /// The quants, row-major.
    pub fn qs(&self) -> &[i8] {
        &self.qs
    }
    /// The scale of each block.
    pub fn d(&self) -> &[f32] {
        &self.d
    }
    /// Q8_1's s of each block (zeros for the other formats).
    pub fn s(&self) -> &[f32] {
        &self.s
    }
    /// Σq of each 16 values.
    pub fn bsums(&self) -> &[i16] {
        &self.bsums
    }

    /// The values the quants stand for, d·q.
    pub fn dequantize(&self) -> Vec<f32> {
        let bl = self.format.block_len();
        (self.qs.chunks_exact(bl))
            .zip(&self.d)
            .flat_map(|(q, &d)| q.iter().map(move |&v| d * v as f32))
            .collect()
    }

    pub(crate) fn row(&self, i: usize) -> Act<'_> {
        let (k, bl) = (self.k, self.format.block_len());
        Act {
            qs: &self.qs[i * k..(i + 1) * k],
            d: &self.d[i * (k / bl)..(i + 1) * (k / bl)],
            s: &self.s[i * (k / 32)..(i + 1) * (k / 32)],
            bsums: &self.bsums[i * (k / 16)..(i + 1) * (k / 16)],
        }
    }
}

// ---- the plain-Rust kernels (the reference the SIMD ones are tested against)

/// Scheme codes for the kernels' const parameter.
pub(crate) mod code {
    pub const Q4_0: u8 = 0;
    pub const Q4_1: u8 = 1;
    pub const Q5_0: u8 = 2;
    pub const Q5_1: u8 = 3;
    pub const Q8_0: u8 = 4;
    pub const Q4_K: u8 = 5;
    pub const Q5_K: u8 = 6;
    pub const Q6_K: u8 = 7;
}

fn f16_at(b: &[u8]) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32()
}

#[inline(always)]
fn idot(w: &[i8], y: &[i8]) -> i32 {
    let w: &[i8; 32] = w[..32].try_into().expect("32 quants");
    let y: &[i8; 32] = y[..32].try_into().expect("32 quants");
    let mut s = 0i32;
    for l in 0..32 {
        s += w[l] as i32 * y[l] as i32;
    }
    s
}

/// A 32-value block's weight quants (signed, as the dot takes them) and its d and m.
#[inline(always)]
pub(crate) fn legacy_block<const S: u8>(b: &[u8]) -> ([i8; 32], f32, f32) {
    let mut q = [0i8; 32];
    let (d, m, bias, nib, qh) = match S {
        code::Q8_0 => {
            for (q, &v) in q.iter_mut().zip(&b[2..34]) {
                *q = v as i8;
            }
            return (q, f16_at(&b[0..2]), 0.0);
        }
        code::Q4_0 => (f16_at(&b[0..2]), 0.0, 8, &b[2..18], None),
        code::Q4_1 => (f16_at(&b[0..2]), f16_at(&b[2..4]), 0, &b[4..20], None),
        code::Q5_0 => (f16_at(&b[0..2]), 0.0, 16, &b[6..22], Some(&b[2..6])),
        _ => (
            f16_at(&b[0..2]),
            f16_at(&b[2..4]),
            0,
            &b[8..24],
            Some(&b[4..8]),
        ),
    };
    let h = qh.map_or(0, |h| u32::from_le_bytes([h[0], h[1], h[2], h[3]]));
    for j in 0..16 {
        let (h0, h1) = (((h >> j) & 1) << 4, ((h >> (j + 16)) & 1) << 4);
        q[j] = (((nib[j] & 15) as u32 | h0) as i32 - bias) as i8;
        q[j + 16] = (((nib[j] >> 4) as u32 | h1) as i32 - bias) as i8;
    }
    (q, d, m)
}

/// A K-quant super-block: its 256 quants (Q6_K's less 32), the scale of each 16 values,
/// the min of each 32 (zeros for Q6_K), d and dmin.
pub(crate) struct KBlock {
    pub q: [i8; 256],
    pub sc: [i32; 16],
    pub mn: [i32; 8],
    pub d: f32,
    pub dmin: f32,
}

#[inline(always)]
pub(crate) fn k_block<const S: u8>(b: &[u8]) -> KBlock {
    let mut k = KBlock {
        q: [0; 256],
        sc: [0; 16],
        mn: [0; 8],
        d: 0.0,
        dmin: 0.0,
    };
    if S == code::Q6_K {
        let (ql, qh, sc) = (&b[0..128], &b[128..192], &b[192..208]);
        k.d = f16_at(&b[208..210]);
        for h in 0..2 {
            for g in 0..4 {
                for l in 0..32 {
                    let lo = (ql[64 * h + l + 32 * (g & 1)] >> (4 * (g / 2))) & 15;
                    let hi = (qh[32 * h + l] >> (2 * g)) & 3;
                    k.q[128 * h + 32 * g + l] = ((lo | (hi << 4)) as i32 - 32) as i8;
                }
            }
        }
        for (s, &v) in k.sc.iter_mut().zip(sc) {
            *s = v as i8 as i32;
        }
        return k;
    }
    let five = S == code::Q5_K;
    k.d = f16_at(&b[0..2]);
    k.dmin = f16_at(&b[2..4]);
    let (qh, qs) = if five {
        (&b[16..48], &b[48..176])
    } else {
        (&b[0..0], &b[16..144])
    };
    for j in 0..8 {
        let (s, m) = scale_min(j, &b[4..16]);
        k.sc[2 * j] = s as i32;
        k.sc[2 * j + 1] = s as i32;
        k.mn[j] = m as i32;
        let (c, half) = (j / 2, j % 2);
        for l in 0..32 {
            let mut q = (qs[32 * c + l] >> (4 * half)) & 15;
            if five {
                q |= ((qh[l] >> j) & 1) << 4;
            }
            k.q[32 * j + l] = q as i8;
        }
    }
    k
}

/// One packed weight row against R rows of x, in plain Rust.
#[inline(always)]
fn dot_portable<const S: u8, const R: usize>(w: &[u8], acts: &[Act; R]) -> [f32; R] {
    let mut sum = [0f32; R];
    if matches!(S, code::Q4_K | code::Q5_K | code::Q6_K) {
        for (i, b) in w.chunks_exact(S_BYTES[S as usize]).enumerate() {
            let kb = k_block::<S>(b);
            for (a, sum) in acts.iter().zip(&mut sum) {
                let y = &a.qs[256 * i..256 * (i + 1)];
                let mut sumi = 0i32;
                for g in 0..16 {
                    let mut p = 0i32;
                    for l in 0..16 {
                        p += kb.q[16 * g + l] as i32 * y[16 * g + l] as i32;
                    }
                    sumi += kb.sc[g] * p;
                }
                let bs = &a.bsums[16 * i..16 * (i + 1)];
                let summ: i32 = (0..8)
                    .map(|j| kb.mn[j] * (bs[2 * j] as i32 + bs[2 * j + 1] as i32))
                    .sum();
                let dx = a.d[i];
                *sum += (kb.d * dx) * sumi as f32 - (kb.dmin * dx) * summ as f32;
            }
        }
    } else {
        for (i, b) in w.chunks_exact(S_BYTES[S as usize]).enumerate() {
            let (q, d, m) = legacy_block::<S>(b);
            for (a, sum) in acts.iter().zip(&mut sum) {
                let sumi = idot(&q, &a.qs[32 * i..]);
                *sum += (d * a.d[i]) * sumi as f32;
                if matches!(S, code::Q4_1 | code::Q5_1) {
                    *sum += m * a.s[i];
                }
            }
        }
    }
    sum
}

/// Block bytes by scheme code.
pub(crate) const S_BYTES: [usize; 8] = [18, 20, 22, 24, 34, 144, 176, 210];

/// The code of a quantised scheme.
pub(crate) fn scheme_code(s: QuantScheme) -> Option<u8> {
    Some(match s {
        QuantScheme::Q4_0 => code::Q4_0,
        QuantScheme::Q4_1 => code::Q4_1,
        QuantScheme::Q5_0 => code::Q5_0,
        QuantScheme::Q5_1 => code::Q5_1,
        QuantScheme::Q8_0 => code::Q8_0,
        QuantScheme::Q4_K => code::Q4_K,
        QuantScheme::Q5_K => code::Q5_K,
        QuantScheme::Q6_K => code::Q6_K,
        QuantScheme::F16 | QuantScheme::BF16 => return None,
    })
}

/// Weight rows `w` (each `rb` bytes) against every row of `act` into `out` (`[rows, m]`),
/// rows of x four at a time so each weight block is unpacked once per four.
#[inline(always)]
fn rows_portable<const S: u8>(w: &[u8], rb: usize, act: &Q8Act, out: &mut [f32]) {
    let m = act.rows();
    let mut i = 0;
    while i < m {
        let r = (m - i).min(4);
        match r {
            4 => group_portable::<S, 4>(w, rb, act, i, out),
            3 => group_portable::<S, 3>(w, rb, act, i, out),
            2 => group_portable::<S, 2>(w, rb, act, i, out),
            _ => group_portable::<S, 1>(w, rb, act, i, out),
        }
        i += r;
    }
}

#[inline(always)]
fn group_portable<const S: u8, const R: usize>(
    w: &[u8],
    rb: usize,
    act: &Q8Act,
    i0: usize,
    out: &mut [f32],
) {
    let m = act.rows();
    let acts: [Act; R] = std::array::from_fn(|j| act.row(i0 + j));
    for (row, o) in w.chunks_exact(rb).zip(out.chunks_exact_mut(m)) {
        o[i0..i0 + R].copy_from_slice(&dot_portable::<S, R>(row, &acts));
    }
}

fn rows_portable_any(s: u8, w: &[u8], rb: usize, act: &Q8Act, out: &mut [f32]) {
    match s {
        code::Q4_0 => rows_portable::<{ code::Q4_0 }>(w, rb, act, out),
        code::Q4_1 => rows_portable::<{ code::Q4_1 }>(w, rb, act, out),
        code::Q5_0 => rows_portable::<{ code::Q5_0 }>(w, rb, act, out),
        code::Q5_1 => rows_portable::<{ code::Q5_1 }>(w, rb, act, out),
        code::Q8_0 => rows_portable::<{ code::Q8_0 }>(w, rb, act, out),
        code::Q4_K => rows_portable::<{ code::Q4_K }>(w, rb, act, out),
        code::Q5_K => rows_portable::<{ code::Q5_K }>(w, rb, act, out),
        _ => rows_portable::<{ code::Q6_K }>(w, rb, act, out),
    }
}

/// Which kernels a product runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Q8Kernel {
    /// The plain-Rust ones, on any CPU.
    Portable,
    /// The fastest this CPU has (x86-64: AVX-512 VNNI, AVX-VNNI or AVX2; else portable).
    Best,
}

impl Q8Kernel {
    /// The name of the kernels `Best` picks on this CPU.
    pub fn best_name() -> &'static str {
        #[cfg(target_arch = "x86_64")]
        if let Some(isa) = super::q8x86::Isa::detect() {
            return isa.name();
        }
        "portable"
    }
}

fn rows_any(kernel: Q8Kernel, s: u8, w: &[u8], rb: usize, act: &Q8Act, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if kernel == Q8Kernel::Best {
        if let Some(isa) = super::q8x86::Isa::detect() {
            return isa.rows(s, w, rb, act, out);
        }
    }
    let _ = kernel;
    rows_portable_any(s, w, rb, act, out)
}

/// From this many rows of x on, CPUs with AVX-512 VNNI unpack 16 weight rows at a time into
/// a tile whose lanes are the rows (`q8tile.rs`) and reuse it for every row of x.
const TILE_MIN_M: usize = 8;

/// The tiled product: tiles spread over rayon's threads, each writing its `[m, 16]` block.
#[cfg(target_arch = "x86_64")]
fn tiled(s: u8, w: &[u8], n: usize, rb: usize, act: &Q8Act, out: &mut [f32]) {
    use super::q8tile::{rows, Tile, ROWS};
    let m = act.rows();
    let tiles = n.div_ceil(ROWS);
    let mut tmp = vec![0f32; tiles * m * ROWS];
    (tmp.par_chunks_mut(m * ROWS))
        .zip(w.par_chunks(ROWS * rb))
        .for_each_init(Tile::default, |t, (o, wt)| rows(s, wt, rb, act, o, t));
    for (ti, blk) in tmp.chunks_exact(m * ROWS).enumerate() {
        let cols = ROWS.min(n - ti * ROWS);
        for i in 0..m {
            out[i * n + ti * ROWS..i * n + ti * ROWS + cols]
                .copy_from_slice(&blk[i * ROWS..i * ROWS + cols]);
        }
    }
}

/// Below this many weight bytes × rows of x a product runs on the calling thread.
const PAR_WORK: usize = 1 << 16;

/// `out[i, r] = Σ_k x[i, k] · W[r, k]` as llama.cpp computes it on the CPU: each row of `x`
/// (`[m, k]`, f32) quantised to the scheme's 8-bit activation format, then integer block
/// dots against the packed `[n, k]` weight. Any m (decode and prefill).
pub fn matmul_q8(
    scheme: QuantScheme,
    w: &[u8],
    n: usize,
    k: usize,
    x: &[f32],
    out: &mut [f32],
) -> Result<(), CpuError> {
    matmul_q8_with(Q8Kernel::Best, scheme, w, n, k, x, out)
}

/// [`matmul_q8`] through the chosen kernels.
pub fn matmul_q8_with(
    kernel: Q8Kernel,
    scheme: QuantScheme,
    w: &[u8],
    n: usize,
    k: usize,
    x: &[f32],
    out: &mut [f32],
) -> Result<(), CpuError> {
    let (Some(format), Some(s)) = (act_format(scheme), scheme_code(scheme)) else {
        return Err(op_err(format!(
            "{scheme:?} has no 8-bit activation product"
        )));
    };
    let (rb, m) = super::product_dims(scheme, "q8 matmul", (w, n, k), x, out)?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    let act = Q8Act::quantize(format, x, k)?;
    #[cfg(target_arch = "x86_64")]
    if kernel == Q8Kernel::Best && m >= TILE_MIN_M && super::q8tile::available() {
        tiled(s, w, n, rb, &act, out);
        return Ok(());
    }
    // Results land as [n, m]; for one row of x that is already out's layout.
    let mut tmp = if m == 1 {
        Vec::new()
    } else {
        vec![0f32; n * m]
    };
    let dst: &mut [f32] = if m == 1 { out } else { &mut tmp };
    let threads = rayon::current_num_threads().max(1);
    if n * rb * m < PAR_WORK || threads == 1 {
        rows_any(kernel, s, w, rb, &act, dst);
    } else {
        // A few chunks per thread so a thread slowed by a neighbour does not hold up the
        // product; at least 16 rows each so the task overhead stays small.
        let chunk = n.div_ceil(threads * 4).max(16);
        (dst.par_chunks_mut(chunk * m))
            .zip(w.par_chunks(chunk * rb))
            .for_each(|(o, wc)| rows_any(kernel, s, wc, rb, &act, o));
    }
    if m > 1 {
        super::rows_to_columns(&tmp, m, n, out);
    }
    Ok(())
}

#[cfg(test)]
#[path = "q8act_tests.rs"]
mod tests;
