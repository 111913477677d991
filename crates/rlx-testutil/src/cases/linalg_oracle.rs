//! f64 oracles of the linalg group: NumPy matmul as plain loops (rank-1 operands, broadcast
//! batch dims), and the quantised-weight block layout (the tests' own packer and unpacker,
//! written from the GGML block format, never rlx's dequantiser).
use rlx_ir::QuantScheme;

/// The quant schemes DequantMatMul takes.
pub const SCHEMES: [QuantScheme; 3] = [QuantScheme::Q8_0, QuantScheme::Q4_0, QuantScheme::Q4_1];

/// NumPy matmul in f64 with plain loops: (values, output dims).
pub fn ref_matmul(a: &[f64], ash: &[usize], b: &[f64], bsh: &[usize]) -> (Vec<f64>, Vec<usize>) {
    let a2: Vec<usize> = if ash.len() == 1 {
        vec![1, ash[0]]
    } else {
        ash.to_vec()
    };
    let b2: Vec<usize> = if bsh.len() == 1 {
        vec![bsh[0], 1]
    } else {
        bsh.to_vec()
    };
    let (m, k, n) = (a2[a2.len() - 2], a2[a2.len() - 1], b2[b2.len() - 1]);
    assert_eq!(b2[b2.len() - 2], k);
    let ab = &a2[..a2.len() - 2];
    let bb = &b2[..b2.len() - 2];
    let r = ab.len().max(bb.len());
    let pad = |s: &[usize]| {
        let mut v = vec![1; r - s.len()];
        v.extend_from_slice(s);
        v
    };
    let (pa, pb) = (pad(ab), pad(bb));
    let ob: Vec<usize> = (0..r).map(|i| pa[i].max(pb[i])).collect();
    let nb: usize = ob.iter().product();
    let mut out = vec![0.0; nb * m * n];
    for bi in 0..nb {
        // Decompose the batch index and map it into each operand (size-1 dims repeat).
        let (mut rem, mut ia, mut ib) = (bi, 0, 0);
        let (mut sa, mut sb) = (1, 1);
        for d in (0..r).rev() {
            let idx = rem % ob[d];
            rem /= ob[d];
            if pa[d] != 1 {
                ia += idx * sa;
            }
            if pb[d] != 1 {
                ib += idx * sb;
            }
            sa *= pa[d];
            sb *= pb[d];
        }
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for p in 0..k {
                    s += a[ia * m * k + i * k + p] * b[ib * k * n + p * n + j];
                }
                out[bi * m * n + i * n + j] = s;
            }
        }
    }
    let mut dims = ob;
    if ash.len() > 1 {
        dims.push(m);
    }
    if bsh.len() > 1 {
        dims.push(n);
    }
    (out, dims)
}

/// The output dims of `ash @ bsh` (NumPy rules), from the oracle.
pub fn matmul_dims(ash: &[usize], bsh: &[usize]) -> Vec<usize> {
    let zeros = |s: &[usize]| vec![0.0; s.iter().product()];
    ref_matmul(&zeros(ash), ash, &zeros(bsh), bsh).1
}

pub fn abs(v: &[f64]) -> Vec<f64> {
    v.iter().map(|x| x.abs()).collect()
}

pub fn f16_bytes(v: f64) -> [u8; 2] {
    half::f16::from_f64(v).to_bits().to_le_bytes()
}

pub fn f16_val(b: &[u8]) -> f64 {
    half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64()
}

/// Random blocks for a `[rows, cols]` weight: random scales (and mins) and random quants.
pub fn random_packed(
    rng: &mut crate::Rng,
    scheme: QuantScheme,
    rows: usize,
    cols: usize,
) -> Vec<u8> {
    let mut out = vec![];
    for _ in 0..rows * cols / 32 {
        out.extend(f16_bytes(rng.range(0.01, 0.2)));
        match scheme {
            QuantScheme::Q8_0 => {
                out.extend((0..32).map(|_| (rng.below(256) as i64 - 128) as i8 as u8));
            }
            QuantScheme::Q4_0 => out.extend((0..16).map(|_| rng.below(256) as u8)),
            QuantScheme::Q4_1 => {
                out.extend(f16_bytes(rng.range(-1.0, 1.0)));
                out.extend((0..16).map(|_| rng.below(256) as u8));
            }
        }
    }
    out
}

/// The `[rows, cols]` weight a packed buffer holds, element by element from the layout.
pub fn unpack(scheme: QuantScheme, bytes: &[u8], rows: usize, cols: usize) -> Vec<f64> {
    let bb = scheme.block_bytes();
    let mut out = vec![0.0; rows * cols];
    for (blk, b) in bytes.chunks(bb).enumerate() {
        let base = blk * 32;
        let d = f16_val(&b[0..2]);
        for e in 0..32 {
            out[base + e] = match scheme {
                QuantScheme::Q8_0 => d * (b[2 + e] as i8) as f64,
                QuantScheme::Q4_0 | QuantScheme::Q4_1 => {
                    let off = if scheme == QuantScheme::Q4_0 { 2 } else { 4 };
                    // Element e < 16 is the low nibble of byte e, e ≥ 16 the high nibble of e - 16.
                    let q = if e < 16 {
                        b[off + e] & 0x0f
                    } else {
                        b[off + e - 16] >> 4
                    } as f64;
                    if scheme == QuantScheme::Q4_0 {
                        d * (q - 8.0)
                    } else {
                        // Weights are f32 values, as in ggml: d·q is exact there, and the
                        // sum with m rounds once (visible when |m| is tiny).
                        (d * q + f16_val(&b[2..4])) as f32 as f64
                    }
                }
            };
        }
    }
    out
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
