//! Ops that compose from a Gather of a host index table and a few elementwise / reduce
//! ops: Compress (its condition known at import time), LRN (the channel window as shifted
//! gathers), Det (the Leibniz sum over permutations, for small matrices), ReverseSequence
//! (its lengths known at import time).
use super::{one, Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::ImportCtx;
use rlx_ir::{BinaryOp as B, HostTensor, NodeId, Op, ReduceOp};

pub(super) fn register(r: &mut Registry) {
    r.insert("Compress", compress);
    r.insert("LRN", lrn);
    r.insert("Det", det);
    r.insert("ReverseSequence", reverse_sequence);
}

/// Each batch row's first `len[b]` time steps reversed: a GatherElements along the time
/// axis by a host table `[T, B]` (placed at the two axes, broadcast over the rest). The
/// lengths must be known at import time.
fn reverse_sequence(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let lens = c
        .const_ints(n, 1)?
        .ok_or_else(|| c.err("needs input 1 (sequence_lens)"))?;
    let a = Attrs(n);
    let (ta, ba) = (a.i_or("time_axis", 0), a.i_or("batch_axis", 1));
    let dims = c.static_dims(x)?;
    let r = dims.len();
    let ta = rlx_ir::normalize_axis(ta, r).map_err(|e| c.err(e))?;
    let ba = rlx_ir::normalize_axis(ba, r).map_err(|e| c.err(e))?;
    if ta == ba || lens.len() != dims[ba] {
        return Err(c.err(format!(
            "time axis {ta}, batch axis {ba}, {} lengths",
            lens.len()
        )));
    }
    let (t_len, b_len) = (dims[ta], dims[ba]);
    let numel: usize = dims.iter().product();
    c.limit("a ReverseSequence index table", numel)?;
    let mut tdims = vec![1usize; r];
    tdims[ta] = t_len;
    tdims[ba] = b_len;
    let mut table = vec![0i64; t_len * b_len];
    for t in 0..t_len {
        for (b, &l) in lens.iter().enumerate() {
            let l = l.clamp(0, t_len as i64) as usize;
            let src = if t < l { l - 1 - t } else { t };
            // Row-major over the table's own dims: whichever of the two axes comes first.
            let k = if ta < ba {
                t * b_len + b
            } else {
                b * t_len + t
            };
            table[k] = src as i64;
        }
    }
    let it = c.constant(HostTensor::from_i64(&tdims, &table))?;
    let full = dims.iter().map(|&d| rlx_ir::Dim::Static(d)).collect();
    let it = c.add(Op::Expand { shape: full }, &[it])?;
    one(c.add(Op::GatherElements { axis: ta as i64 }, &[x, it])?)
}

/// The largest matrix Det expands by permutations (7! = 5040 products).
const DET_MAX_N: usize = 7;

fn compress(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let mut x = c.input(n, 0)?;
    let cond = c
        .const_input(n, 1)?
        .ok_or_else(|| c.err("needs input 1 (condition)"))?;
    let keep: Vec<i64> = (cond.to_f64_vec().iter().enumerate())
        .filter(|(_, v)| **v != 0.0)
        .map(|(i, _)| i as i64)
        .collect();
    let axis = match Attrs(n).i("axis") {
        Some(a) => a,
        None => {
            // No axis: the flattened input.
            x = c.add(Op::Reshape { shape: vec![-1] }, &[x])?;
            0
        }
    };
    let dims = c.static_dims(x)?;
    let ax = rlx_ir::normalize_axis(axis, dims.len()).map_err(|e| c.err(e))?;
    if keep.last().is_some_and(|&i| i as usize >= dims[ax]) {
        return Err(c.err(format!(
            "condition selects index {} beyond axis {ax} ({})",
            keep[keep.len() - 1],
            dims[ax]
        )));
    }
    let idx = c.constant(HostTensor::from_i64(&[keep.len()], &keep))?;
    one(c.add(Op::Gather { axis: ax as i64 }, &[x, idx])?)
}

/// `x / (bias + alpha/size · Σ_window x²)^beta`, the window over channels
/// `[c − ⌊(size−1)/2⌋, c + ⌈(size−1)/2⌉]` clipped to the axis.
fn lrn(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let a = Attrs(n);
    let size = a.i("size").ok_or_else(|| c.err("needs attribute `size`"))?;
    if size < 1 {
        return Err(c.err(format!("size {size} < 1")));
    }
    let (alpha, beta, bias) = (
        a.f_or("alpha", 1e-4) as f64,
        a.f_or("beta", 0.75) as f64,
        a.f_or("bias", 1.0) as f64,
    );
    let dims = c.static_dims(x)?;
    if dims.len() < 2 {
        return Err(c.err(format!("needs [N, C, ..], got rank {}", dims.len())));
    }
    let ch = dims[1] as i64;
    let dt = c.dtype(x)?;
    let sq = c.add(Op::Binary(B::Mul), &[x, x])?;
    // Offsets of at least C reach no channel (their terms are all zero), so a huge `size`
    // would only add empty terms: clip the window to the axis.
    let (lo, hi) = (
        ((size - 1) / 2).min(ch),
        ((size - 1) - (size - 1) / 2).min(ch),
    );
    c.limit(
        "an LRN window table",
        (ch as usize).saturating_mul((lo + hi + 1) as usize),
    )?;
    let mut sum: Option<NodeId> = None;
    // The mask broadcasts over [N, C, spatial..].
    let mut mdims = vec![ch as usize];
    mdims.extend(std::iter::repeat_n(1, dims.len() - 2));
    for off in -lo..=hi {
        let idx: Vec<i64> = (0..ch).map(|i| (i + off).clamp(0, ch - 1)).collect();
        let valid: Vec<f64> = (0..ch)
            .map(|i| f64::from(u8::from((0..ch).contains(&(i + off)))))
            .collect();
        let it = c.constant(HostTensor::from_i64(&[ch as usize], &idx))?;
        let g = c.add(Op::Gather { axis: 1 }, &[sq, it])?;
        let m = c.constant(HostTensor::from_f64_as(&mdims, &valid, dt))?;
        let g = c.add(Op::Binary(B::Mul), &[g, m])?;
        sum = Some(match sum {
            None => g,
            Some(s) => c.add(Op::Binary(B::Add), &[s, g])?,
        });
    }
    let sum = sum.ok_or_else(|| c.err("empty window"))?;
    let k = c.scalar(alpha / size as f64, dt)?;
    let s = c.add(Op::Binary(B::Mul), &[sum, k])?;
    let b = c.scalar(bias, dt)?;
    let s = c.add(Op::Binary(B::Add), &[s, b])?;
    let e = c.scalar(beta, dt)?;
    let d = c.add(Op::Binary(B::Pow), &[s, e])?;
    one(c.add(Op::Binary(B::Div), &[x, d])?)
}

/// Every permutation of 0..n with its sign (Heap's algorithm would do; n is tiny).
fn permutations(n: usize) -> Vec<(Vec<usize>, f64)> {
    if n == 0 {
        return vec![(vec![], 1.0)];
    }
    let mut out = vec![];
    for (p, s) in permutations(n - 1) {
        // Insert n−1 at position k: that moves it past n−1−k elements.
        for k in 0..n {
            let mut q = p.clone();
            q.insert(k, n - 1);
            let sign = if (n - 1 - k).is_multiple_of(2) { s } else { -s };
            out.push((q, sign));
        }
    }
    out
}

/// det of `[*, n, n]` = Σ_p sign(p) Π_i x[i, p(i)]: one Gather of the flattened matrices by
/// a `[n!, n]` index table, a product over the last axis, a signed sum.
fn det(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let dims = c.static_dims(x)?;
    let r = dims.len();
    if r < 2 || dims[r - 1] != dims[r - 2] {
        return Err(c.err(format!("needs square matrices [*, n, n], got {dims:?}")));
    }
    let m = dims[r - 1];
    if m > DET_MAX_N {
        return Err(c.unsupported(format!("Det of {m}×{m} (at most {DET_MAX_N})")));
    }
    let dt = c.dtype(x)?;
    let mut flat: Vec<i64> = dims[..r - 2].iter().map(|&d| d as i64).collect();
    flat.push((m * m) as i64);
    let xf = c.add(Op::Reshape { shape: flat }, &[x])?;
    let perms = permutations(m);
    let idx: Vec<i64> = (perms.iter())
        .flat_map(|(p, _)| p.iter().enumerate().map(|(i, &j)| (i * m + j) as i64))
        .collect();
    let signs: Vec<f64> = perms.iter().map(|(_, s)| *s).collect();
    let it = c.constant(HostTensor::from_i64(&[perms.len(), m], &idx))?;
    let g = c.add(Op::Gather { axis: r as i64 - 2 }, &[xf, it])?;
    let prod = Op::Reduce {
        op: ReduceOp::Prod,
        axes: vec![-1],
        keep_dim: false,
    };
    let p = c.add(prod, &[g])?;
    let s = c.constant(HostTensor::from_f64_as(&[perms.len()], &signs, dt))?;
    let p = c.add(Op::Binary(B::Mul), &[p, s])?;
    let sum = Op::Reduce {
        op: ReduceOp::Sum,
        axes: vec![-1],
        keep_dim: false,
    };
    one(c.add(sum, &[p])?)
}

#[cfg(test)]
mod tests {
    /// Each permutation's sign matches its inversion count's parity (counted directly).
    #[test]
    fn permutation_signs_match_inversion_parity() {
        for n in 0..6 {
            let ps = super::permutations(n);
            let fact: usize = (1..=n).product();
            assert_eq!(ps.len(), fact.max(1));
            for (p, s) in ps {
                let inv = (0..n)
                    .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
                    .filter(|&(i, j)| p[i] > p[j])
                    .count();
                assert_eq!(s, if inv % 2 == 0 { 1.0 } else { -1.0 }, "{p:?}");
            }
        }
    }
}
