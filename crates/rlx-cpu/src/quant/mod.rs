//! GGUF block quantisation: the reference quantisers and the dequantiser behind
//! `DequantMatMul`. A row of `cols` values is `cols / block_len` blocks of `block_bytes`;
//! the 32-value formats live in [`legacy`], the 256-value K-quants in [`kquants`] (each file
//! states its byte layouts).
mod gemv;
mod kquants;
mod legacy;
mod q8act;
#[cfg(target_arch = "x86_64")]
mod q8tile;
#[cfg(target_arch = "x86_64")]
mod q8x86;

pub use gemv::matvec;
pub use q8act::{act_format, matmul_q8, matmul_q8_with, ActFormat, Q8Act, Q8Kernel, QuantAct};

/// Checks a packed product's operands — weight `[n, k]` of `scheme` as `w`, x as whole
/// rows of `k`, out `[m, n]` — and returns (bytes per weight row, rows of x). `what` names
/// the product in the error.
fn product_dims(
    scheme: QuantScheme,
    what: &str,
    (w, n, k): (&[u8], usize, usize),
    x: &[f32],
    out: &[f32],
) -> Result<(usize, usize), CpuError> {
    let rb = row_bytes(scheme, k)?;
    let m = x.len().checked_div(k).unwrap_or(0);
    if w.len() != n * rb || x.len() != m * k || out.len() != m * n {
        return Err(crate::error::op_err(format!(
            "{scheme:?} {what}: weight [{n}, {k}] needs {} bytes (got {}), x {} values, \
             out {} (got {} and {})",
            n * rb,
            w.len(),
            m * k,
            m * n,
            x.len(),
            out.len()
        )));
    }
    Ok((rb, m))
}

/// `out[i·n + r] = tmp[r·m + i]`: the row-at-a-time drivers' `[n, m]` products laid out as
/// the `[m, n]` result.
fn rows_to_columns(tmp: &[f32], m: usize, n: usize, out: &mut [f32]) {
    for (r, vals) in tmp.chunks_exact(m).enumerate() {
        for (i, &v) in vals.iter().enumerate() {
            out[i * n + r] = v;
        }
    }
}

use crate::error::op_err;
use crate::CpuError;
use half::f16;
use rayon::prelude::*;
use rlx_ir::QuantScheme;

/// Bytes of one packed row of `cols` values.
pub fn row_bytes(scheme: QuantScheme, cols: usize) -> Result<usize, CpuError> {
    let bl = scheme.block_len();
    if !cols.is_multiple_of(bl) {
        return Err(op_err(format!(
            "{scheme:?}: row length {cols} is not a multiple of {bl}"
        )));
    }
    Ok(cols / bl * scheme.block_bytes())
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

fn is_k(scheme: QuantScheme) -> bool {
    scheme.block_len() == 256
}

/// Quantise one block (`block_len` values) into `dst` (`block_bytes` long).
fn quantize_block(scheme: QuantScheme, x: &[f32], dst: &mut [u8]) {
    if is_k(scheme) {
        kquants::quantize_block(scheme, x, dst)
    } else {
        legacy::quantize_block(scheme, x, dst)
    }
}

/// Dequantise one block into `block_len` values.
fn dequantize_block(scheme: QuantScheme, src: &[u8], y: &mut [f32]) {
    if is_k(scheme) {
        kquants::dequantize_block(scheme, src, y)
    } else {
        legacy::dequantize_block(scheme, src, y)
    }
}

/// Dequantise one packed row (`src` exactly `y.len() / block_len` blocks) into `y`; the
/// matmul calls it per weight row so no f32 copy of the whole weight exists. Lengths are
/// the caller's to check (`row_bytes`).
pub(crate) fn dequantize_row(scheme: QuantScheme, src: &[u8], y: &mut [f32]) {
    let (bb, bl) = (scheme.block_bytes(), scheme.block_len());
    for (s, o) in src.chunks_exact(bb).zip(y.chunks_exact_mut(bl)) {
        dequantize_block(scheme, s, o);
    }
}

/// Quantise a row-major `[rows, cols]` matrix: ggml's reference quantiser for the 32-value
/// formats, a round-up-the-scales one for the K-quants (see [`kquants`]).
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
    let (bb, bl) = (scheme.block_bytes(), scheme.block_len());
    for (x, dst) in values.chunks_exact(bl).zip(out.chunks_exact_mut(bb)) {
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
    let row = |(src, y): (&[u8], &mut [f32])| dequantize_row(scheme, src, y);
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
