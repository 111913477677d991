//! The x86-64 kernels of the 8-bit activation product (q8act.rs states the arithmetic),
//! written with std::arch intrinsics and compiled three times: for AVX2 (+ FMA, F16C), where
//! `vpmaddubsw` + `vpmaddwd` make the u8 × i8 products of a 32-value block and their sums
//! of four; for AVX-VNNI and for AVX-512 VNNI (256-bit vectors), where one `vpdpbusd` does
//! both. [`Isa::detect`] picks one at run time.
//!
//! Signed weight quants (Q4_0, Q5_0, Q8_0) go through the sign trick: |w| (unsigned) times y
//! with w's sign moved onto y. The K-quants scale each block's 16-bit pair sums by their
//! sub-block scale in `vpmaddwd`. Every integer sum is exact; a 32-value block's scale is
//! applied in 8 f32 lanes (as ggml's AVX2 code), so those results differ from the portable
//! kernels' by f32 rounding only, while a K-quant super-block is summed to one integer and
//! combined in the portable kernels' order (bit for bit the same).
use super::q8act::{code, Act, Q8Act, S_BYTES};
use std::arch::x86_64::*;

/// An x86-64 build of the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    Avx2,
    AvxVnni,
    Avx512Vnni,
}

impl Isa {
    /// The best build this CPU runs (none without AVX2, FMA and F16C).
    pub(crate) fn detect() -> Option<Isa> {
        [Isa::Avx512Vnni, Isa::AvxVnni, Isa::Avx2]
            .into_iter()
            .find(|i| i.supported())
    }

    /// Every build this CPU runs.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn available() -> Vec<Isa> {
        [Isa::Avx2, Isa::AvxVnni, Isa::Avx512Vnni]
            .into_iter()
            .filter(|i| i.supported())
            .collect()
    }

    fn supported(self) -> bool {
        use std::arch::is_x86_feature_detected as has;
        let base = has!("avx2") && has!("fma") && has!("f16c");
        base && match self {
            Isa::Avx2 => true,
            Isa::AvxVnni => has!("avxvnni"),
            Isa::Avx512Vnni => has!("avx512f") && has!("avx512vl") && has!("avx512vnni"),
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Isa::Avx2 => "avx2",
            Isa::AvxVnni => "avx-vnni",
            Isa::Avx512Vnni => "avx512-vnni",
        }
    }

    /// Weight rows `w` (each `rb` bytes, scheme code `s`) against every row of `act` into
    /// `out` (`[rows, m]`). Only for a build [`Isa::available`] lists.
    pub(crate) fn rows(self, s: u8, w: &[u8], rb: usize, act: &Q8Act, out: &mut [f32]) {
        assert!(self.supported(), "{self:?} kernels on this CPU");
        assert!(
            w.len() == out.len() / act.rows() * rb,
            "{} weight bytes",
            w.len()
        );
        // SAFETY: the CPU has the build's features (asserted above); the kernels check the
        // sizes of what they read.
        unsafe {
            match self {
                Isa::Avx2 => avx2::rows(s, w, rb, act, out),
                Isa::AvxVnni => avxvnni::rows(s, w, rb, act, out),
                Isa::Avx512Vnni => avx512vnni::rows(s, w, rb, act, out),
            }
        }
    }
}

/// The kernels, for the features `$feat`; each module defines `dotu(a, b)`: eight i32 sums
/// of four products of a's u8 and b's i8 bytes.
macro_rules! kernels {
    ($feat:literal) => {
        use super::*;

        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn load(p: *const u8) -> __m256i {
            _mm256_loadu_si256(p as *const __m256i)
        }

        /// The f16 at `p` as f32 (F16C).
        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn half(p: *const u8) -> f32 {
            let h = std::ptr::read_unaligned(p as *const u16);
            _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h as i32)))
        }

        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn hsum_f(v: __m256) -> f32 {
            let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
            _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
        }

        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn hsum_i(v: __m256i) -> i32 {
            let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
            let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
            _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s)))
        }

        /// 16 nibble bytes as 32 values: the low nibbles (values 0..16), then the high.
        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn nibbles(p: *const u8) -> __m256i {
            let t = _mm_loadu_si128(p as *const __m128i);
            let v = _mm256_set_m128i(_mm_srli_epi16::<4>(t), t);
            _mm256_and_si256(v, _mm256_set1_epi8(15))
        }

        /// 0xFF in byte j where bit j of `qh` is set, else 0.
        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn bits(qh: u32) -> __m256i {
            let pick = _mm256_setr_epi8(
                0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3,
                3, 3, 3, 3,
            );
            let v = _mm256_shuffle_epi8(_mm256_set1_epi32(qh as i32), pick);
            let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
            _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit)
        }

        /// Bits 0..2 of each byte of `v`, moved to bits 4..6 (Q6_K's top bits).
        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn up(v: __m256i) -> __m256i {
            _mm256_slli_epi16::<4>(_mm256_and_si256(v, _mm256_set1_epi8(3)))
        }

        /// Bit `s` of each byte of `qh` as 16 or 0 (Q5_K's fifth bits).
        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn fifth(qh: __m256i, s: usize) -> __m256i {
            let v = _mm256_srl_epi16(qh, _mm_cvtsi32_si128(s as i32));
            _mm256_slli_epi16::<4>(_mm256_and_si256(v, _mm256_set1_epi8(1)))
        }

        /// One row of a 32-value scheme against R rows of x.
        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn legacy<const S: u8, const R: usize>(w: &[u8], acts: &[Act; R]) -> [f32; R] {
            let bb = S_BYTES[S as usize];
            let nb = w.len() / bb;
            for a in acts {
                assert!(a.qs.len() >= 32 * nb && a.d.len() >= nb && a.s.len() >= nb);
            }
            let signed = matches!(S, code::Q4_0 | code::Q5_0 | code::Q8_0);
            let type1 = matches!(S, code::Q4_1 | code::Q5_1);
            let mut acc = [_mm256_setzero_ps(); R];
            let mut off = [0f32; R];
            for i in 0..nb {
                let p = w.as_ptr().add(i * bb);
                let (q, d, m) = match S {
                    code::Q8_0 => (load(p.add(2)), half(p), 0.0),
                    code::Q4_0 => {
                        let q = _mm256_sub_epi8(nibbles(p.add(2)), _mm256_set1_epi8(8));
                        (q, half(p), 0.0)
                    }
                    code::Q4_1 => (nibbles(p.add(4)), half(p), half(p.add(2))),
                    code::Q5_0 => {
                        // (nibble | 16·bit) − 16: the nibble where the bit is set, else the
                        // nibble − 16, which as a byte is nibble | 0xF0.
                        let qh = std::ptr::read_unaligned(p.add(2) as *const u32);
                        let hi = _mm256_andnot_si256(bits(qh), _mm256_set1_epi8(-16));
                        (_mm256_or_si256(nibbles(p.add(6)), hi), half(p), 0.0)
                    }
                    _ => {
                        let qh = std::ptr::read_unaligned(p.add(4) as *const u32);
                        let hi = _mm256_and_si256(bits(qh), _mm256_set1_epi8(16));
                        (
                            _mm256_or_si256(nibbles(p.add(8)), hi),
                            half(p),
                            half(p.add(2)),
                        )
                    }
                };
                let qa = if signed { _mm256_sign_epi8(q, q) } else { q };
                for r in 0..R {
                    let a = &acts[r];
                    let y = load(a.qs.as_ptr().add(32 * i) as *const u8);
                    let y = if signed { _mm256_sign_epi8(y, q) } else { y };
                    let dx = *a.d.get_unchecked(i);
                    let s = _mm256_cvtepi32_ps(dotu(qa, y));
                    acc[r] = _mm256_fmadd_ps(s, _mm256_set1_ps(d * dx), acc[r]);
                    if type1 {
                        off[r] += m * *a.s.get_unchecked(i);
                    }
                }
            }
            let mut out = [0f32; R];
            for r in 0..R {
                out[r] = hsum_f(acc[r]) + off[r];
            }
            out
        }

        /// One row of a K-quant against R rows of x.
        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn kquant<const S: u8, const R: usize>(w: &[u8], acts: &[Act; R]) -> [f32; R] {
            let bb = S_BYTES[S as usize];
            let nb = w.len() / bb;
            for a in acts {
                assert!(a.qs.len() >= 256 * nb && a.d.len() >= nb && a.bsums.len() >= 16 * nb);
            }
            let m4 = _mm256_set1_epi8(15);
            let mut sum = [0f32; R];
            for (i, b) in w.chunks_exact(bb).enumerate() {
                let p = b.as_ptr();
                let mut isum = [_mm256_setzero_si256(); R];
                let mut bias = [0i32; R];
                let mut mn = [0i32; 8];
                let (d, dmin);
                if S == code::Q6_K {
                    (d, dmin) = (half(p.add(208)), 0.0);
                    let sc = &b[192..208];
                    for h in 0..2 {
                        let qa = load(p.add(64 * h));
                        let qb = load(p.add(64 * h + 32));
                        let qh = load(p.add(128 + 32 * h));
                        let q = [
                            _mm256_or_si256(_mm256_and_si256(qa, m4), up(qh)),
                            _mm256_or_si256(
                                _mm256_and_si256(qb, m4),
                                up(_mm256_srli_epi16::<2>(qh)),
                            ),
                            _mm256_or_si256(
                                _mm256_and_si256(_mm256_srli_epi16::<4>(qa), m4),
                                up(_mm256_srli_epi16::<4>(qh)),
                            ),
                            _mm256_or_si256(
                                _mm256_and_si256(_mm256_srli_epi16::<4>(qb), m4),
                                up(_mm256_srli_epi16::<6>(qh)),
                            ),
                        ];
                        for (g, &qg) in q.iter().enumerate() {
                            let s0 = sc[8 * h + 2 * g] as i8 as i16;
                            let s1 = sc[8 * h + 2 * g + 1] as i8 as i16;
                            let scv = _mm256_set_m128i(_mm_set1_epi16(s1), _mm_set1_epi16(s0));
                            for r in 0..R {
                                let at = 256 * i + 128 * h + 32 * g;
                                let y = load(acts[r].qs.as_ptr().add(at) as *const u8);
                                let pr = _mm256_madd_epi16(_mm256_maddubs_epi16(qg, y), scv);
                                isum[r] = _mm256_add_epi32(isum[r], pr);
                            }
                        }
                    }
                    // The quants were taken unsigned (q + 32): less 32 · Σ_g sc_g Σ y.
                    for r in 0..R {
                        let bs = &acts[r].bsums[16 * i..16 * i + 16];
                        let t: i32 = (0..16).map(|g| sc[g] as i8 as i32 * bs[g] as i32).sum();
                        bias[r] = 32 * t;
                    }
                } else {
                    let five = S == code::Q5_K;
                    (d, dmin) = (half(p), half(p.add(2)));
                    let mut sc = [0i16; 8];
                    for j in 0..8 {
                        let (s, m) = super::super::kquants::scale_min(j, &b[4..16]);
                        sc[j] = s as i16;
                        mn[j] = m as i32;
                    }
                    let qh = if five {
                        load(p.add(16))
                    } else {
                        _mm256_setzero_si256()
                    };
                    let qs = p.add(if five { 48 } else { 16 });
                    for c in 0..4 {
                        let q = load(qs.add(32 * c));
                        let mut lo = _mm256_and_si256(q, m4);
                        let mut hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4);
                        if five {
                            lo = _mm256_or_si256(lo, fifth(qh, 2 * c));
                            hi = _mm256_or_si256(hi, fifth(qh, 2 * c + 1));
                        }
                        let s0 = _mm256_set1_epi16(sc[2 * c]);
                        let s1 = _mm256_set1_epi16(sc[2 * c + 1]);
                        for r in 0..R {
                            let y = acts[r].qs.as_ptr().add(256 * i + 64 * c) as *const u8;
                            let p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load(y)), s0);
                            let p1 =
                                _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load(y.add(32))), s1);
                            isum[r] = _mm256_add_epi32(isum[r], _mm256_add_epi32(p0, p1));
                        }
                    }
                }
                for r in 0..R {
                    let a = &acts[r];
                    let sumi = hsum_i(isum[r]) - bias[r];
                    let bs = &a.bsums[16 * i..16 * i + 16];
                    let summ: i32 = (0..8)
                        .map(|j| mn[j] * (bs[2 * j] as i32 + bs[2 * j + 1] as i32))
                        .sum();
                    let dx = a.d[i];
                    sum[r] += (d * dx) * sumi as f32 - (dmin * dx) * summ as f32;
                }
            }
            sum
        }

        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn group<const S: u8, const R: usize>(
            w: &[u8],
            rb: usize,
            act: &Q8Act,
            i0: usize,
            out: &mut [f32],
        ) {
            let m = act.rows();
            let acts: [Act; R] = std::array::from_fn(|j| act.row(i0 + j));
            let k = matches!(S, code::Q4_K | code::Q5_K | code::Q6_K);
            for (row, o) in w.chunks_exact(rb).zip(out.chunks_exact_mut(m)) {
                let v = if k {
                    kquant::<S, R>(row, &acts)
                } else {
                    legacy::<S, R>(row, &acts)
                };
                o[i0..i0 + R].copy_from_slice(&v);
            }
        }

        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn rows_s<const S: u8>(w: &[u8], rb: usize, act: &Q8Act, out: &mut [f32]) {
            let m = act.rows();
            let mut i = 0;
            while i < m {
                let r = (m - i).min(4);
                match r {
                    4 => group::<S, 4>(w, rb, act, i, out),
                    3 => group::<S, 3>(w, rb, act, i, out),
                    2 => group::<S, 2>(w, rb, act, i, out),
                    _ => group::<S, 1>(w, rb, act, i, out),
                }
                i += r;
            }
        }

        #[target_feature(enable = $feat)]
        pub(super) unsafe fn rows(s: u8, w: &[u8], rb: usize, act: &Q8Act, out: &mut [f32]) {
            match s {
                code::Q4_0 => rows_s::<{ code::Q4_0 }>(w, rb, act, out),
                code::Q4_1 => rows_s::<{ code::Q4_1 }>(w, rb, act, out),
                code::Q5_0 => rows_s::<{ code::Q5_0 }>(w, rb, act, out),
                code::Q5_1 => rows_s::<{ code::Q5_1 }>(w, rb, act, out),
                code::Q8_0 => rows_s::<{ code::Q8_0 }>(w, rb, act, out),
                code::Q4_K => rows_s::<{ code::Q4_K }>(w, rb, act, out),
                code::Q5_K => rows_s::<{ code::Q5_K }>(w, rb, act, out),
                _ => rows_s::<{ code::Q6_K }>(w, rb, act, out),
            }
        }
    };
}

mod avx2 {
    kernels!("avx2,fma,f16c");

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn dotu(a: __m256i, b: __m256i) -> __m256i {
        _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1))
    }
}

mod avxvnni {
    kernels!("avx2,fma,f16c,avxvnni");

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avxvnni")]
    unsafe fn dotu(a: __m256i, b: __m256i) -> __m256i {
        _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), a, b)
    }
}

mod avx512vnni {
    kernels!("avx2,fma,f16c,avx512f,avx512vl,avx512vnni");

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
    unsafe fn dotu(a: __m256i, b: __m256i) -> __m256i {
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), a, b)
    }
}
