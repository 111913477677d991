//! The 32-value blocks (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1): ggml's `quantize_row_*_ref` and
//! `dequantize_row_*`, one block at a time.
//!
//! Layouts (little-endian), as ggml's `block_q8_0` … `block_q5_1`:
//! - Q8_0: f16 d, 32 × i8 q; x = d·q.
//! - Q4_0: f16 d, 16 bytes; byte j holds element j in its low nibble and element j + 16 in
//!   its high nibble; x = d·(q − 8).
//! - Q4_1: f16 d, f16 m, 16 nibble bytes (same order); x = d·q + m.
//! - Q5_0: f16 d, u32 qh, 16 nibble bytes; bit j of qh is the fifth bit of element j;
//!   x = d·(q − 16).
//! - Q5_1: f16 d, f16 m, u32 qh, 16 nibble bytes; x = d·q + m.
//! - F16 / BF16: 32 plain halves (no scale), rounded to nearest when written.
use super::{get_f16, put_f16};
use half::bf16;
use rlx_ir::QuantScheme;

const QK: usize = 32;
const HALF: usize = QK / 2;

/// Quantise one block of 32 values into `dst`, as ggml's `_ref` code.
pub(super) fn quantize_block(scheme: QuantScheme, x: &[f32], dst: &mut [u8]) {
    match scheme {
        QuantScheme::Q8_0 => {
            let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            put_f16(&mut dst[0..2], d);
            for (q, &v) in dst[2..].iter_mut().zip(x) {
                *q = ((v * id).round() as i8) as u8;
            }
        }
        QuantScheme::Q4_0 | QuantScheme::Q5_0 => {
            // The scale maps the value of largest magnitude to the most negative level
            // exactly (sign included): -8 or -16.
            let (mut amax, mut max) = (0.0f32, 0.0f32);
            for &v in x {
                if amax < v.abs() {
                    amax = v.abs();
                    max = v;
                }
            }
            let five = scheme == QuantScheme::Q5_0;
            let (lv, top) = if five { (16.0, 31) } else { (8.0, 15) };
            let d = max / -lv;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            put_f16(&mut dst[0..2], d);
            // ggml truncates toward zero after adding lv + ½ (x·id ≥ −lv, so it rounds).
            let q = |v: f32| ((v * id + lv + 0.5) as i8).min(top) as u8;
            pack_nibbles(x, q, five, &mut dst[2..]);
        }
        QuantScheme::Q4_1 | QuantScheme::Q5_1 => {
            let min = x.iter().fold(f32::MAX, |m, &v| m.min(v));
            let max = x.iter().fold(-f32::MAX, |m, &v| m.max(v));
            let five = scheme == QuantScheme::Q5_1;
            let (levels, top) = if five { (31.0, 31) } else { (15.0, 15) };
            let d = (max - min) / levels;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            put_f16(&mut dst[0..2], d);
            put_f16(&mut dst[2..4], min);
            let q = |v: f32| (((v - min) * id + 0.5) as i8).min(top) as u8;
            pack_nibbles(x, q, five, &mut dst[4..]);
        }
        QuantScheme::F16 => {
            for (d, &v) in dst.chunks_exact_mut(2).zip(x) {
                put_f16(d, v);
            }
        }
        QuantScheme::BF16 => {
            for (d, &v) in dst.chunks_exact_mut(2).zip(x) {
                d.copy_from_slice(&bf16::from_f32(v).to_bits().to_le_bytes());
            }
        }
        _ => unreachable!("legacy::quantize_block called with {scheme:?}"),
    }
}

/// Writes the (optional) u32 of fifth bits and then the 16 nibble bytes.
fn pack_nibbles(x: &[f32], q: impl Fn(f32) -> u8, five: bool, dst: &mut [u8]) {
    let mut qh = 0u32;
    let qs = if five { 4 } else { 0 };
    for j in 0..HALF {
        let (q0, q1) = (q(x[j]), q(x[j + HALF]));
        dst[qs + j] = (q0 & 0x0f) | ((q1 & 0x0f) << 4);
        qh |= (((q0 >> 4) & 1) as u32) << j;
        qh |= (((q1 >> 4) & 1) as u32) << (j + HALF);
    }
    if five {
        dst[0..4].copy_from_slice(&qh.to_le_bytes());
    }
}

/// Dequantise one block into 32 values.
pub(super) fn dequantize_block(scheme: QuantScheme, src: &[u8], y: &mut [f32]) {
    let d = get_f16(&src[0..2]);
    match scheme {
        QuantScheme::Q8_0 => {
            for (o, &q) in y.iter_mut().zip(&src[2..2 + QK]) {
                *o = d * (q as i8) as f32;
            }
        }
        QuantScheme::Q4_0 => {
            for (j, &b) in src[2..2 + HALF].iter().enumerate() {
                y[j] = d * ((b & 0x0f) as i32 - 8) as f32;
                y[j + HALF] = d * ((b >> 4) as i32 - 8) as f32;
            }
        }
        QuantScheme::Q4_1 => {
            let m = get_f16(&src[2..4]);
            for (j, &b) in src[4..4 + HALF].iter().enumerate() {
                y[j] = d * (b & 0x0f) as f32 + m;
                y[j + HALF] = d * (b >> 4) as f32 + m;
            }
        }
        QuantScheme::Q5_0 => {
            let qh = u32::from_le_bytes([src[2], src[3], src[4], src[5]]);
            for (j, &b) in src[6..6 + HALF].iter().enumerate() {
                let (q0, q1) = five_bit(b, qh, j);
                y[j] = d * (q0 - 16) as f32;
                y[j + HALF] = d * (q1 - 16) as f32;
            }
        }
        QuantScheme::Q5_1 => {
            let m = get_f16(&src[2..4]);
            let qh = u32::from_le_bytes([src[4], src[5], src[6], src[7]]);
            for (j, &b) in src[8..8 + HALF].iter().enumerate() {
                let (q0, q1) = five_bit(b, qh, j);
                y[j] = d * q0 as f32 + m;
                y[j + HALF] = d * q1 as f32 + m;
            }
        }
        QuantScheme::F16 => {
            for (o, h) in y.iter_mut().zip(src.chunks_exact(2)) {
                *o = get_f16(h);
            }
        }
        QuantScheme::BF16 => {
            for (o, h) in y.iter_mut().zip(src.chunks_exact(2)) {
                *o = bf16::from_bits(u16::from_le_bytes([h[0], h[1]])).to_f32();
            }
        }
        _ => unreachable!("legacy::dequantize_block called with {scheme:?}"),
    }
}

/// Elements j and j + 16 of a 5-bit block: nibbles of byte b, fifth bits from qh.
fn five_bit(b: u8, qh: u32, j: usize) -> (i32, i32) {
    let h0 = ((qh >> j) & 1) as i32;
    let h1 = ((qh >> (j + HALF)) & 1) as i32;
    ((b & 0x0f) as i32 | (h0 << 4), (b >> 4) as i32 | (h1 << 4))
}
