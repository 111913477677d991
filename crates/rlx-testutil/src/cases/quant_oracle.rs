//! The tests' own model of GGUF's packed blocks, written from ggml's block layouts and
//! `dequantize_row_*` formulas (never from rlx's dequantiser): a random packer (valid f16
//! scales, random quants) and an element-by-element f64 unpacker.
//!
//! Exactness: ggml computes in f32. Every type-0 value (d·q, d·sc·q) is exact in f32 (at
//! most 24 significant bits: an 11-bit f16 times integers below 2^13), so the f64 value
//! equals ggml's. A type-1 value (d·q + m, d·sc·q − dmin·m) is an exact product plus one
//! f32 rounding of the sum: it is exact in f64 for f16 inputs, then rounded once to f32
//! here, which is what ggml's f32 arithmetic gives.
use rlx_ir::QuantScheme;

/// The quant schemes DequantMatMul takes.
pub const SCHEMES: [QuantScheme; 10] = QuantScheme::ALL;

pub fn f16_bytes(v: f64) -> [u8; 2] {
    half::f16::from_f64(v).to_bits().to_le_bytes()
}

pub fn f16_val(b: &[u8]) -> f64 {
    half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64()
}

/// Random bytes in a header slot: any pattern is a valid quant or sub-scale.
fn bytes(rng: &mut crate::Rng, n: usize) -> impl Iterator<Item = u8> + '_ {
    (0..n).map(|_| rng.below(256) as u8)
}

/// Random blocks for a `[rows, cols]` weight: finite f16 scales (and mins) sized so the
/// values stay O(1), random quants and sub-block scales.
pub fn random_packed(
    rng: &mut crate::Rng,
    scheme: QuantScheme,
    rows: usize,
    cols: usize,
) -> Vec<u8> {
    let mut out = vec![];
    for _ in 0..rows * cols / scheme.block_len() {
        match scheme {
            QuantScheme::Q8_0 => {
                out.extend(f16_bytes(rng.range(0.01, 0.2)));
                out.extend(bytes(rng, 32));
            }
            QuantScheme::Q4_0 => {
                out.extend(f16_bytes(rng.range(0.01, 0.2)));
                out.extend(bytes(rng, 16));
            }
            QuantScheme::Q4_1 => {
                out.extend(f16_bytes(rng.range(0.01, 0.2)));
                out.extend(f16_bytes(rng.range(-1.0, 1.0)));
                out.extend(bytes(rng, 16));
            }
            QuantScheme::Q5_0 => {
                out.extend(f16_bytes(rng.range(0.01, 0.1)));
                out.extend(bytes(rng, 4 + 16));
            }
            QuantScheme::Q5_1 => {
                out.extend(f16_bytes(rng.range(0.01, 0.1)));
                out.extend(f16_bytes(rng.range(-1.0, 1.0)));
                out.extend(bytes(rng, 4 + 16));
            }
            QuantScheme::Q4_K | QuantScheme::Q5_K => {
                // d·63·31 and dmin·63 stay near 1.
                out.extend(f16_bytes(rng.range(2e-4, 1e-3)));
                out.extend(f16_bytes(rng.range(2e-3, 2e-2)));
                let n = if scheme == QuantScheme::Q4_K {
                    140
                } else {
                    172
                };
                out.extend(bytes(rng, n));
            }
            QuantScheme::Q6_K => {
                out.extend(bytes(rng, 208));
                // d·128·32 stays near 1.
                out.extend(f16_bytes(rng.range(5e-5, 3e-4)));
            }
            QuantScheme::F16 => {
                for _ in 0..32 {
                    out.extend(f16_bytes(rng.range(-1.0, 1.0)));
                }
            }
            QuantScheme::BF16 => {
                for _ in 0..32 {
                    let bits = half::bf16::from_f64(rng.range(-1.0, 1.0)).to_bits();
                    out.extend(bits.to_le_bytes());
                }
            }
        }
    }
    out
}

/// Bit `i` of a little-endian byte string.
fn bit(b: &[u8], i: usize) -> u32 {
    ((b[i / 8] >> (i % 8)) & 1) as u32
}

/// The 4-bit quant of element `e` of a 32-value nibble block: e < 16 the low nibble of
/// byte e, e ≥ 16 the high nibble of byte e − 16.
fn nib32(qs: &[u8], e: usize) -> u32 {
    if e < 16 {
        (qs[e] & 15) as u32
    } else {
        (qs[e - 16] >> 4) as u32
    }
}

/// Element e (< 256) of a Q4_K / Q5_K super-block: (sub-block, 4-bit quant). Each 64-value
/// chunk c reads bytes 32c..32c+32: its first 32 values low nibbles, its next 32 high.
fn nib256(qs: &[u8], e: usize) -> (usize, u32) {
    let (c, hi, l) = (e / 64, (e / 32) % 2 == 1, e % 32);
    let b = qs[32 * c + l];
    (e / 32, if hi { (b >> 4) as u32 } else { (b & 15) as u32 })
}

/// ggml's 6-bit (scale, min) of sub-block j from the 12 scale bytes: j < 4 in the low 6
/// bits of bytes j / j + 4; j ≥ 4 split: low 4 bits from the nibbles of byte j + 4, high 2
/// bits from the top 2 bits of bytes j − 4 (scale) and j (min).
fn k_scale_min(s: &[u8], j: usize) -> (f64, f64) {
    let (sc, m) = if j < 4 {
        (s[j] % 64, s[j + 4] % 64)
    } else {
        (
            s[j + 4] % 16 + 16 * (s[j - 4] / 64),
            s[j + 4] / 16 + 16 * (s[j] / 64),
        )
    };
    (sc as f64, m as f64)
}

/// Rounded once to f32, as ggml's f32 arithmetic leaves a type-1 value (module doc).
fn f32_once(v: f64) -> f64 {
    v as f32 as f64
}

/// The `[rows, cols]` weight a packed buffer holds, element by element from the layout.
pub fn unpack(scheme: QuantScheme, bytes: &[u8], rows: usize, cols: usize) -> Vec<f64> {
    let (bb, bl) = (scheme.block_bytes(), scheme.block_len());
    let mut out = vec![0.0; rows * cols];
    for (blk, b) in bytes.chunks(bb).enumerate().take(rows * cols / bl) {
        for e in 0..bl {
            out[blk * bl + e] = unpack_one(scheme, b, e);
        }
    }
    out
}

/// Element `e` of one block `b`.
fn unpack_one(scheme: QuantScheme, b: &[u8], e: usize) -> f64 {
    match scheme {
        QuantScheme::Q8_0 => f16_val(&b[0..2]) * (b[2 + e] as i8) as f64,
        QuantScheme::Q4_0 => f16_val(&b[0..2]) * (nib32(&b[2..], e) as f64 - 8.0),
        QuantScheme::Q4_1 => {
            f32_once(f16_val(&b[0..2]) * nib32(&b[4..], e) as f64 + f16_val(&b[2..4]))
        }
        QuantScheme::Q5_0 => {
            // qh (bytes 2..6) holds the fifth bit of element e at bit e.
            let q = nib32(&b[6..], e) + 16 * bit(&b[2..6], e);
            f16_val(&b[0..2]) * (q as f64 - 16.0)
        }
        QuantScheme::Q5_1 => {
            let q = nib32(&b[8..], e) + 16 * bit(&b[4..8], e);
            f32_once(f16_val(&b[0..2]) * q as f64 + f16_val(&b[2..4]))
        }
        QuantScheme::Q4_K | QuantScheme::Q5_K => {
            let (d, dmin) = (f16_val(&b[0..2]), f16_val(&b[2..4]));
            let five = scheme == QuantScheme::Q5_K;
            let qs = if five { &b[48..176] } else { &b[16..144] };
            let (j, mut q) = nib256(qs, e);
            if five {
                // qh[l] (bytes 16..48) holds the fifth bit of element e = 32j + l at bit j.
                q += 16 * ((b[16 + e % 32] >> j) & 1) as u32;
            }
            let (sc, m) = k_scale_min(&b[4..16], j);
            f32_once(d * sc * q as f64 - dmin * m)
        }
        QuantScheme::F16 => f16_val(&b[2 * e..2 * e + 2]),
        QuantScheme::BF16 => {
            let bits = u16::from_le_bytes([b[2 * e], b[2 * e + 1]]);
            f64::from(f32::from_bits(u32::from(bits) << 16))
        }
        QuantScheme::Q6_K => {
            // Half h, quarter g, lane l: low 4 bits in ql (bytes 0..128), top 2 in qh
            // (bytes 128..192), i8 scale per 16 values (bytes 192..208), f16 d last.
            let (h, g, l) = (e / 128, (e % 128) / 32, e % 32);
            let lo_byte = b[64 * h + 32 * (g % 2) + l];
            let lo = if g < 2 { lo_byte % 16 } else { lo_byte / 16 };
            let hi = (b[128 + 32 * h + l] >> (2 * g)) % 4;
            let q = (lo + 16 * hi) as f64 - 32.0;
            let sc = b[192 + 8 * h + 2 * g + l / 16] as i8 as f64;
            f16_val(&b[208..210]) * sc * q
        }
    }
}

/// `x [.., K] · Wᵀ` for a packed `W [n, K]`: (values, the same sums over |terms|).
pub fn dequant_ref(
    scheme: QuantScheme,
    x: &[f64],
    k: usize,
    packed: &[f64],
    n: usize,
) -> (Vec<f64>, Vec<f64>) {
    let bytes: Vec<u8> = packed.iter().map(|&b| b as u8).collect();
    let w = unpack(scheme, &bytes, n, k);
    let m = x.len() / k;
    let (mut want, mut abs) = (vec![0.0; m * n], vec![0.0; m * n]);
    for i in 0..m {
        for j in 0..n {
            let terms = (0..k).map(|p| x[i * k + p] * w[j * k + p]);
            want[i * n + j] = terms.clone().sum();
            abs[i * n + j] = terms.map(f64::abs).sum();
        }
    }
    (want, abs)
}
