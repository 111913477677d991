//! f64 oracles of the linalg group: NumPy matmul as plain loops (rank-1 operands, broadcast
//! batch dims). The quantised-weight blocks' oracle is `quant_oracle`, re-exported here.
pub use super::quant_oracle::*;

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
