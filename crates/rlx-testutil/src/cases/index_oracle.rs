//! Plain f64 / exact-integer oracles of the ONNX-import ops (`index.rs`'s table): each is
//! written from the ONNX operator definition with multi-index arithmetic, sharing nothing
//! with the kernels.
use super::shape_oracle::ravel;
use super::{numel, unravel};
use rlx_ir::ScatterReduction;

/// An index counted from the end when negative.
fn wrap(v: f64, n: usize) -> usize {
    let v = v as i64;
    (if v < 0 { v + n as i64 } else { v }) as usize
}

pub fn tiled(shape: &[usize], reps: &[usize]) -> Vec<usize> {
    shape.iter().zip(reps).map(|(d, r)| d * r).collect()
}

/// out[o] = x[o mod shape].
pub fn tile_ref(x: &[f64], shape: &[usize], reps: &[usize]) -> Vec<f64> {
    let os = tiled(shape, reps);
    (0..numel(&os))
        .map(|k| {
            let o = unravel(k, &os);
            let src: Vec<usize> = o.iter().zip(shape).map(|(i, d)| i % d).collect();
            x[ravel(&src, shape)]
        })
        .collect()
}

/// out[o] = x[o with o[axis] = idx[o]].
pub fn gather_elements_ref(
    x: &[f64],
    shape: &[usize],
    idx: &[f64],
    ishape: &[usize],
    axis: usize,
) -> Vec<f64> {
    (0..numel(ishape))
        .map(|k| {
            let mut o = unravel(k, ishape);
            o[axis] = wrap(idx[k], shape[axis]);
            x[ravel(&o, shape)]
        })
        .collect()
}

/// `a` and update `u` combined under `red`.
pub fn combine(red: ScatterReduction, a: f64, u: f64) -> f64 {
    match red {
        ScatterReduction::None => u,
        ScatterReduction::Add => a + u,
        ScatterReduction::Mul => a * u,
        ScatterReduction::Max => {
            if u > a {
                u
            } else {
                a
            }
        }
        ScatterReduction::Min => {
            if u < a {
                u
            } else {
                a
            }
        }
    }
}

/// A copy of x, then every update in order combined into its position.
pub fn scatter_elements_ref(
    x: &[f64],
    shape: &[usize],
    idx: &[f64],
    ishape: &[usize],
    upd: &[f64],
    axis: usize,
    red: ScatterReduction,
) -> Vec<f64> {
    let mut out = x.to_vec();
    for k in 0..numel(ishape) {
        let mut o = unravel(k, ishape);
        o[axis] = wrap(idx[k], shape[axis]);
        let p = ravel(&o, shape);
        out[p] = combine(red, out[p], upd[k]);
    }
    out
}

/// GatherND's output dims.
pub fn gathered_nd(shape: &[usize], ishape: &[usize], b: usize) -> Vec<usize> {
    let q = ishape.len();
    let k = ishape[q - 1];
    let mut d = ishape[..q - 1].to_vec();
    d.extend(&shape[b + k..]);
    d
}

/// out[b.., q.., s..] = x[b.., idx[b.., q..], s..].
pub fn gather_nd_ref(
    x: &[f64],
    shape: &[usize],
    idx: &[f64],
    ishape: &[usize],
    b: usize,
) -> Vec<f64> {
    let os = gathered_nd(shape, ishape, b);
    let q = ishape.len();
    let k = ishape[q - 1];
    (0..numel(&os))
        .map(|n| {
            let o = unravel(n, &os);
            // o = [batch.., rows.., slice..]; the index row sits at o[..q-1].
            let mut at = o[..q - 1].to_vec();
            let mut src = o[..b].to_vec();
            for t in 0..k {
                at.push(0);
                at[q - 1] = t;
                src.push(wrap(idx[ravel(&at, ishape)], shape[b + t]));
                at.pop();
            }
            src.extend(&o[q - 1..]);
            x[ravel(&src, shape)]
        })
        .collect()
}

/// ScatterND's updates dims.
pub fn scatter_nd_updates(shape: &[usize], ishape: &[usize]) -> Vec<usize> {
    gathered_nd(shape, ishape, 0)
}

/// A copy of x, then each update slice combined into the slice its index row names.
pub fn scatter_nd_ref(
    x: &[f64],
    shape: &[usize],
    idx: &[f64],
    ishape: &[usize],
    upd: &[f64],
    red: ScatterReduction,
) -> Vec<f64> {
    let us = scatter_nd_updates(shape, ishape);
    let q = ishape.len();
    let k = ishape[q - 1];
    let mut out = x.to_vec();
    for n in 0..numel(&us) {
        let o = unravel(n, &us);
        let row = ravel(&o[..q - 1], &ishape[..q - 1]);
        let mut dst: Vec<usize> = (0..k).map(|t| wrap(idx[row * k + t], shape[t])).collect();
        dst.extend(&o[q - 1..]);
        let p = ravel(&dst, shape);
        out[p] = combine(red, out[p], upd[n]);
    }
    out
}

/// TopK indices by selection: each pick is the best remaining entry (larger, or smaller,
/// value first; NaN above every number; the lower index on ties).
pub fn top_k_ref(x: &[f64], shape: &[usize], k: usize, axis: usize, largest: bool) -> Vec<f64> {
    let mut os = shape.to_vec();
    os[axis] = k;
    let better = |a: f64, ia: usize, b: f64, ib: usize| -> bool {
        match (a.is_nan(), b.is_nan()) {
            (true, true) => ia < ib,
            // NaN is the largest value: first when the largest lead, last otherwise.
            (true, false) => largest,
            (false, true) => !largest,
            _ if a == b => ia < ib,
            _ if largest => a > b,
            _ => a < b,
        }
    };
    let mut out = vec![0.0; numel(&os)];
    for n in 0..numel(&os) {
        let o = unravel(n, &os);
        if o[axis] != 0 {
            continue;
        }
        let mut taken = vec![false; shape[axis]];
        for j in 0..k {
            let mut best: Option<usize> = None;
            for i in 0..shape[axis] {
                if taken[i] {
                    continue;
                }
                let mut p = o.clone();
                p[axis] = i;
                let v = x[ravel(&p, shape)];
                let win = match best {
                    None => true,
                    Some(bi) => {
                        let mut pb = o.clone();
                        pb[axis] = bi;
                        better(v, i, x[ravel(&pb, shape)], bi)
                    }
                };
                if win {
                    best = Some(i);
                }
            }
            let bi = best.expect("k ≤ axis size");
            taken[bi] = true;
            let mut q = o.clone();
            q[axis] = j;
            out[ravel(&q, &os)] = bi as f64;
        }
    }
    out
}

/// out[i] = Σ x[j] over j ≤ i (j < i exclusive; j ≥ i / j > i reversed), as a direct sum.
pub fn cumsum_ref(
    x: &[f64],
    shape: &[usize],
    axis: usize,
    exclusive: bool,
    reverse: bool,
) -> Vec<f64> {
    (0..x.len())
        .map(|n| {
            let o = unravel(n, shape);
            let i = o[axis];
            (0..shape[axis])
                .filter(|&j| match (exclusive, reverse) {
                    (false, false) => j <= i,
                    (true, false) => j < i,
                    (false, true) => j >= i,
                    (true, true) => j > i,
                })
                .map(|j| {
                    let mut p = o.clone();
                    p[axis] = j;
                    x[ravel(&p, shape)]
                })
                .sum()
        })
        .collect()
}

/// OneHot: the output dims and values.
pub fn one_hot_ref(
    idx: &[f64],
    ishape: &[usize],
    depth: usize,
    axis: usize,
    off: f64,
    on: f64,
) -> Vec<f64> {
    let mut os = ishape.to_vec();
    os.insert(axis, depth);
    (0..numel(&os))
        .map(|n| {
            let mut o = unravel(n, &os);
            let d = o.remove(axis) as i64;
            let v = idx[ravel(&o, ishape)].trunc() as i64;
            let hit = v == d || v + depth as i64 == d;
            if hit && v >= -(depth as i64) && v < depth as i64 {
                on
            } else {
                off
            }
        })
        .collect()
}

/// start + i·delta.
pub fn range_ref(start: f64, delta: f64, len: usize) -> Vec<f64> {
    (0..len).map(|i| start + i as f64 * delta).collect()
}
