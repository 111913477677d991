//! GGUF block quantisation (Q8_0, Q4_0, Q4_1): ggml's reference quantisers and the
//! dequantiser used by `DequantMatMul`. A row of `cols` values is `cols / 32` blocks.
//!
//! Block layouts (little-endian), as in ggml's `block_q8_0` / `block_q4_0` / `block_q4_1`:
//! - Q8_0: f16 d, 32 × i8 q; x = d·q.
//! - Q4_0: f16 d, 16 bytes; byte j holds element j in its low nibble and element j + 16 in
//!   its high nibble; x = d·(q − 8).
//! - Q4_1: f16 d, f16 m, 16 nibble bytes (same order); x = d·q + m.
use crate::error::op_err;
use crate::CpuError;
use half::f16;
use rayon::prelude::*;
use rlx_ir::QuantScheme;

const QK: usize = QuantScheme::BLOCK;

/// Bytes of one packed row of `cols` values.
pub fn row_bytes(scheme: QuantScheme, cols: usize) -> Result<usize, CpuError> {
    if !cols.is_multiple_of(QK) {
        return Err(op_err(format!(
            "{scheme:?}: row length {cols} is not a multiple of {QK}"
        )));
    }
    Ok(cols / QK * scheme.block_bytes())
}

fn total(rows: usize, per_row: usize) -> Result<usize, CpuError> {
    rows.checked_mul(per_row)
        .ok_or_else(|| op_err(format!("{rows} × {per_row} overflows")))
}

fn put_f16(dst: &mut [u8], v: f32) {
    dst.copy_from_slice(&f16::from_f32(v).to_bits().to_le_bytes());
}

fn get_f16(src: &[u8]) -> f32 {
    f16::from_bits(u16::from_le_bytes([src[0], src[1]])).to_f32()
}

/// Quantise one block of 32 values into `dst` (`block_bytes` long), as ggml's `_ref` code.
fn quantize_block(scheme: QuantScheme, x: &[f32], dst: &mut [u8]) {
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
        QuantScheme::Q4_0 => {
            // The scale maps the value of largest magnitude to -8 exactly (sign included).
            let (mut amax, mut max) = (0.0f32, 0.0f32);
            for &v in x {
                if amax < v.abs() {
                    amax = v.abs();
                    max = v;
                }
            }
            let d = max / -8.0;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            put_f16(&mut dst[0..2], d);
            for j in 0..QK / 2 {
                let q0 = ((x[j] * id + 8.5) as i8).min(15) as u8;
                let q1 = ((x[j + QK / 2] * id + 8.5) as i8).min(15) as u8;
                dst[2 + j] = q0 | (q1 << 4);
            }
        }
        QuantScheme::Q4_1 => {
            let min = x.iter().fold(f32::MAX, |m, &v| m.min(v));
            let max = x.iter().fold(-f32::MAX, |m, &v| m.max(v));
            let d = (max - min) / 15.0;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            put_f16(&mut dst[0..2], d);
            put_f16(&mut dst[2..4], min);
            for j in 0..QK / 2 {
                let q0 = (((x[j] - min) * id + 0.5) as i8).min(15) as u8;
                let q1 = (((x[j + QK / 2] - min) * id + 0.5) as i8).min(15) as u8;
                dst[4 + j] = q0 | (q1 << 4);
            }
        }
    }
}

/// Dequantise one block into 32 values.
fn dequantize_block(scheme: QuantScheme, src: &[u8], y: &mut [f32]) {
    match scheme {
        QuantScheme::Q8_0 => {
            let d = get_f16(&src[0..2]);
            for (o, &q) in y.iter_mut().zip(&src[2..2 + QK]) {
                *o = d * (q as i8) as f32;
            }
        }
        QuantScheme::Q4_0 => {
            let d = get_f16(&src[0..2]);
            for (j, &b) in src[2..2 + QK / 2].iter().enumerate() {
                y[j] = d * ((b & 0x0f) as i32 - 8) as f32;
                y[j + QK / 2] = d * ((b >> 4) as i32 - 8) as f32;
            }
        }
        QuantScheme::Q4_1 => {
            let d = get_f16(&src[0..2]);
            let m = get_f16(&src[2..4]);
            for (j, &b) in src[4..4 + QK / 2].iter().enumerate() {
                y[j] = d * (b & 0x0f) as f32 + m;
                y[j + QK / 2] = d * (b >> 4) as f32 + m;
            }
        }
    }
}

/// Quantise a row-major `[rows, cols]` matrix with ggml's reference quantiser.
pub fn quantize(
    scheme: QuantScheme,
    values: &[f32],
    rows: usize,
    cols: usize,
) -> Result<Vec<u8>, CpuError> {
    let rb = row_bytes(scheme, cols)?;
    if values.len() != total(rows, cols)? {
        return Err(op_err(format!(
            "quantize: [{rows}, {cols}] needs {} values, got {}",
            rows * cols,
            values.len()
        )));
    }
    let mut out = vec![0u8; total(rows, rb)?];
    let bb = scheme.block_bytes();
    for (x, dst) in values.chunks_exact(QK).zip(out.chunks_exact_mut(bb)) {
        quantize_block(scheme, x, dst);
    }
    Ok(out)
}

/// Dequantise packed `[rows, cols]` into `out` (`rows * cols` values), rows in parallel.
pub fn dequantize_into(
    scheme: QuantScheme,
    bytes: &[u8],
    rows: usize,
    cols: usize,
    out: &mut [f32],
) -> Result<(), CpuError> {
    let rb = row_bytes(scheme, cols)?;
    if bytes.len() != total(rows, rb)? {
        return Err(op_err(format!(
            "dequantize: [{rows}, {cols}] as {scheme:?} needs {} bytes, got {}",
            rows * rb,
            bytes.len()
        )));
    }
    if out.len() != total(rows, cols)? {
        return Err(op_err(format!(
            "dequantize: output holds {} values, [{rows}, {cols}] needs {}",
            out.len(),
            rows * cols
        )));
    }
    if cols == 0 {
        return Ok(());
    }
    let bb = scheme.block_bytes();
    let row = |(src, y): (&[u8], &mut [f32])| {
        for (s, o) in src.chunks_exact(bb).zip(y.chunks_exact_mut(QK)) {
            dequantize_block(scheme, s, o);
        }
    };
    if out.len() >= 1 << 16 {
        bytes
            .par_chunks(rb)
            .zip(out.par_chunks_mut(cols))
            .for_each(row);
    } else {
        bytes.chunks(rb).zip(out.chunks_mut(cols)).for_each(row);
    }
    Ok(())
}

/// Dequantise packed `[rows, cols]` into row-major f32 values.
pub fn dequantize(
    scheme: QuantScheme,
    bytes: &[u8],
    rows: usize,
    cols: usize,
) -> Result<Vec<f32>, CpuError> {
    let mut out = vec![0.0; total(rows, cols)?];
    dequantize_into(scheme, bytes, rows, cols, &mut out)?;
    Ok(out)
}
