//! The K-quants (Q4_K, Q5_K, Q6_K): 256-value super-blocks whose sub-block scales are
//! themselves quantised against an f16 super-scale. Dequantisation is ggml's
//! `dequantize_row_q{4,5,6}_K`; the quantisers are simpler than ggml's `_ref` ones (those
//! search for the error-minimising scale): each sub-block scale is rounded *up*, so every
//! value lands inside the grid and the error is at most half a step of its sub-block.
//!
//! Layouts (little-endian), as ggml's `block_q4_K` / `block_q5_K` / `block_q6_K`:
//! - Q4_K: f16 d, f16 dmin, 12 bytes of scales, 128 nibble bytes. Eight sub-blocks of 32
//!   with a 6-bit scale sc and 6-bit min m each (packing: [`scale_min`]). Values
//!   64c..64c+32 are the low nibbles of bytes 32c..32c+32, the next 32 the high nibbles;
//!   x = d·sc·q − dmin·m.
//! - Q5_K: Q4_K's header, 32 bytes qh, 128 nibble bytes; the fifth bit of value 64c + l is
//!   bit 2c of qh[l], of value 64c + 32 + l bit 2c + 1.
//! - Q6_K: 128 bytes ql, 64 bytes qh, 16 × i8 scales (sub-blocks of 16), f16 d. In half h
//!   (128 values), value 32g + l (g < 4, l < 32) takes its low 4 bits from ql[64h + l +
//!   32·(g & 1)] (low nibble for g < 2, high for g ≥ 2) and its top 2 bits from
//!   qh[32h + l] >> 2g; its scale is scales[8h + 2g + l/16]; x = d·sc·(q − 32).
use super::{get_f16, put_f16};
use half::f16;
use rlx_ir::QuantScheme;

const QK_K: usize = 256;

/// Sub-block j's (scale, min) from the 12 packed bytes, as ggml's `get_scale_min_k4`:
/// j < 4 are the low 6 bits of bytes j and j + 4; j ≥ 4 take their low 4 bits from the
/// nibbles of byte j + 4 and their top 2 bits from the top bits of bytes j − 4 and j.
pub(super) fn scale_min(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// The inverse of [`scale_min`] for eight 6-bit (scale, min) pairs.
fn pack_scale_min(ls: &[u8; 8], lm: &[u8; 8], s: &mut [u8]) {
    for j in 0..4 {
        s[j] = (ls[j] & 63) | ((ls[j + 4] >> 4) << 6);
        s[j + 4] = (lm[j] & 63) | ((lm[j + 4] >> 4) << 6);
        s[j + 8] = (ls[j + 4] & 0x0f) | ((lm[j + 4] & 0x0f) << 4);
    }
}

/// `v` rounded to an f16 that is not below it (so a scale derived from it never shrinks).
fn f16_up(v: f32) -> f32 {
    let h = f16::from_f32(v);
    if h.to_f32() >= v {
        h.to_f32()
    } else {
        f16::from_bits(h.to_bits() + 1).to_f32()
    }
}

/// ceil(v / unit) as a level in 0..=top (0 where unit is 0).
fn level_up(v: f32, unit: f32, top: u8) -> u8 {
    if unit > 0.0 {
        (v / unit).ceil().clamp(0.0, top as f32) as u8
    } else {
        0
    }
}

pub(super) fn dequantize_block(scheme: QuantScheme, src: &[u8], y: &mut [f32]) {
    match scheme {
        QuantScheme::Q4_K | QuantScheme::Q5_K => {
            let (d, dmin) = (get_f16(&src[0..2]), get_f16(&src[2..4]));
            let sc = &src[4..16];
            let five = scheme == QuantScheme::Q5_K;
            let (qh, qs) = if five {
                (&src[16..48], &src[48..176])
            } else {
                (&src[0..0], &src[16..144])
            };
            for c in 0..4 {
                for half in 0..2 {
                    let (s, m) = scale_min(2 * c + half, sc);
                    let (d1, m1) = (d * s as f32, dmin * m as f32);
                    for l in 0..32 {
                        let b = qs[32 * c + l];
                        let mut q = if half == 0 { b & 0x0f } else { b >> 4 };
                        if five && qh[l] & (1 << (2 * c + half)) != 0 {
                            q += 16;
                        }
                        y[64 * c + 32 * half + l] = d1 * q as f32 - m1;
                    }
                }
            }
        }
        QuantScheme::Q6_K => {
            let (ql, qh) = (&src[0..128], &src[128..192]);
            let sc = &src[192..208];
            let d = get_f16(&src[208..210]);
            for h in 0..2 {
                for g in 0..4 {
                    for l in 0..32 {
                        let b = ql[64 * h + l + 32 * (g & 1)];
                        let lo = if g < 2 { b & 0x0f } else { b >> 4 };
                        let hi = (qh[32 * h + l] >> (2 * g)) & 3;
                        let q = (lo | (hi << 4)) as i32 - 32;
                        let s = sc[8 * h + 2 * g + l / 16] as i8;
                        y[128 * h + 32 * g + l] = d * s as f32 * q as f32;
                    }
                }
            }
        }
        _ => unreachable!("kquants::dequantize_block called with {scheme:?}"),
    }
}

pub(super) fn quantize_block(scheme: QuantScheme, x: &[f32], dst: &mut [u8]) {
    match scheme {
        QuantScheme::Q4_K | QuantScheme::Q5_K => {
            let five = scheme == QuantScheme::Q5_K;
            let top: u8 = if five { 31 } else { 15 };
            // Per sub-block of 32: the offset that lifts its minimum to 0 (mins ≤ 0 only, as
            // ggml: the format subtracts dmin·m), then the step covering the lifted range.
            let mut off = [0f32; 8];
            let mut max = [0f32; 8];
            for (j, sub) in x.chunks_exact(32).enumerate() {
                off[j] = -sub.iter().fold(0f32, |m, &v| m.min(v));
                max[j] = sub.iter().fold(f32::MIN, |m, &v| m.max(v));
            }
            let dmin = f16_up(off.iter().fold(0f32, |m, &v| m.max(v)) / 63.0);
            let mut lm = [0u8; 8];
            let mut step = [0f32; 8];
            for j in 0..8 {
                lm[j] = level_up(off[j], dmin, 63);
                step[j] = (max[j] + dmin * lm[j] as f32).max(0.0) / top as f32;
            }
            let d = f16_up(step.iter().fold(0f32, |m, &v| m.max(v)) / 63.0);
            let mut ls = [0u8; 8];
            for j in 0..8 {
                ls[j] = level_up(step[j], d, 63);
            }
            put_f16(&mut dst[0..2], d);
            put_f16(&mut dst[2..4], dmin);
            pack_scale_min(&ls, &lm, &mut dst[4..16]);
            let (qh_at, qs_at) = if five { (16, 48) } else { (16, 16) };
            dst[qh_at..].fill(0);
            for (e, &v) in x.iter().enumerate() {
                let j = e / 32;
                let (s, o) = (d * ls[j] as f32, dmin * lm[j] as f32);
                let q = if s > 0.0 {
                    ((v + o) / s).round().clamp(0.0, top as f32) as u8
                } else {
                    0
                };
                let (c, half, l) = (e / 64, (e / 32) % 2, e % 32);
                dst[qs_at + 32 * c + l] |= (q & 0x0f) << (4 * half);
                if five {
                    dst[qh_at + l] |= ((q >> 4) & 1) << (2 * c + half);
                }
            }
        }
        QuantScheme::Q6_K => {
            let mut step = [0f32; 16];
            for (j, sub) in x.chunks_exact(16).enumerate() {
                step[j] = sub.iter().fold(0f32, |m, &v| m.max(v.abs())) / 31.0;
            }
            let d = f16_up(step.iter().fold(0f32, |m, &v| m.max(v)) / 127.0);
            dst.fill(0);
            for j in 0..16 {
                dst[192 + j] = level_up(step[j], d, 127);
            }
            put_f16(&mut dst[208..210], d);
            for (e, &v) in x.iter().enumerate() {
                let s = d * dst[192 + e / 16] as f32;
                let q = if s > 0.0 {
                    (v / s).round().clamp(-32.0, 31.0) as i32
                } else {
                    0
                };
                let u = (q + 32) as u8;
                let (h, g, l) = (e / 128, (e % 128) / 32, e % 32);
                dst[64 * h + l + 32 * (g & 1)] |= (u & 0x0f) << (4 * (g / 2));
                dst[128 + 32 * h + l] |= (u >> 4) << (2 * g);
            }
        }
        _ => unreachable!("kquants::quantize_block called with {scheme:?}"),
    }
    debug_assert_eq!(x.len(), QK_K);
}
