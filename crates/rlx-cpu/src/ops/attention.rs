//! CPU thunk: Attention, in parallel over blocks of queries of one head. A block keeps one
//! row of scores per query (no `Sq × Sk` buffer), reads each k/v row once for all its
//! queries, and applies the max-shifted softmax while summing v.
use crate::error::op_err;
use crate::{CpuError, Float, OutView, TensorView};
use rayon::prelude::*;
use rlx_ir::ops::infer_shape;
use rlx_ir::{AttentionLayout, AttentionSpec, ComputeClass, MaskKind, Node, Op, Shape};

/// Element strides of one q/k/v/out tensor; the head dim is always contiguous.
#[derive(Clone, Copy)]
struct Strides {
    batch: usize,
    head: usize,
    seq: usize,
}

impl Strides {
    fn new(layout: AttentionLayout, heads: usize, seq: usize, size: usize) -> Strides {
        match layout {
            AttentionLayout::Packed | AttentionLayout::Bshd => Strides {
                batch: seq * heads * size,
                head: size,
                seq: heads * size,
            },
            AttentionLayout::Bhsd => Strides {
                batch: heads * seq * size,
                head: seq * size,
                seq: size,
            },
        }
    }
    fn at(&self, b: usize, h: usize, s: usize) -> usize {
        b * self.batch + h * self.head + s * self.seq
    }
}

/// Sizes of one attention call, read from concrete shapes the IR rule accepted.
struct Geometry {
    sq: usize,
    sk: usize,
    heads: usize,
    group: usize,
    d: usize,
    dv: usize,
    q: Strides,
    k: Strides,
    v: Strides,
}

impl Geometry {
    fn new(spec: &AttentionSpec, q: &[usize], k: &[usize]) -> Geometry {
        let (h, d, dv) = (spec.num_heads, spec.head_dim, spec.v_dim());
        let (sq, sk, hkv) = match spec.layout {
            AttentionLayout::Packed => (q[1], k[1], k[2] / d),
            AttentionLayout::Bshd => (q[1], k[1], k[2]),
            AttentionLayout::Bhsd => (q[2], k[2], k[1]),
        };
        let layout = spec.layout;
        Geometry {
            sq,
            sk,
            heads: h,
            group: h / hkv,
            d,
            dv,
            q: Strides::new(layout, h, sq, d),
            k: Strides::new(layout, hkv, sk, d),
            v: Strides::new(layout, hkv, sk, dv),
        }
    }

    /// Keys `lo..hi` that query `i` may see under a positional mask.
    fn key_range(&self, kind: MaskKind, i: usize) -> (usize, usize) {
        // Queries are the last Sq positions of the Sk keys (KV-cache decode).
        let pos = self.sk as i64 - self.sq as i64 + i as i64;
        let clamp = |p: i64| p.clamp(0, self.sk as i64) as usize;
        match kind {
            MaskKind::None | MaskKind::Custom => (0, self.sk),
            MaskKind::Causal => (0, clamp(pos + 1)),
            MaskKind::SlidingWindow(w) => (clamp(pos + 1 - w as i64), clamp(pos + 1)),
        }
    }
}

/// Dot product with several accumulators so the loop vectorises.
fn dot<T: Float>(a: &[T], b: &[T]) -> T {
    let mut acc = [T::zero(); 8];
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    let mut s = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .fold(T::zero(), |s, (&x, &y)| s + x * y);
    for a in acc {
        s += a;
    }
    s
}

/// Query rows handled together: each k and v row is loaded once per block, not per query.
const QBLOCK: usize = 16;

struct Params<'a, T> {
    g: &'a Geometry,
    kind: MaskKind,
    scale: T,
    cap: Option<T>,
    q: &'a [T],
    k: &'a [T],
    v: &'a [T],
    /// Keep-mask `[B, Sk]` for `Custom`.
    keep: Option<&'a [bool]>,
}

/// Queries `i0..i1` (at most QBLOCK) of head `h` in batch `b`: softmax(scale·q·kᵀ, capped,
/// masked) · v. Query `i0 + r` is written to `out[r * stride..][..dv]`. A query that sees
/// no key gets zeros. `scores` holds QBLOCK rows of Sk.
#[allow(clippy::too_many_arguments)]
fn attend_block<T: Float>(
    p: &Params<T>,
    b: usize,
    h: usize,
    i0: usize,
    i1: usize,
    scores: &mut [T],
    out: &mut [T],
    stride: usize,
) {
    let g = p.g;
    let (sk, d, dv, n) = (g.sk, g.d, g.dv, i1 - i0);
    let kvh = h / g.group;
    let keep = p.keep.map(|m| &m[b * sk..(b + 1) * sk]);
    let sees = |j: usize| keep.is_none_or(|m| m[j]);
    let mut ranges = [(0usize, 0usize); QBLOCK];
    for (r, range) in ranges.iter_mut().enumerate().take(n) {
        *range = g.key_range(p.kind, i0 + r);
    }
    let ranges = &ranges[..n];
    let lo = ranges.iter().map(|r| r.0).min().unwrap_or(0);
    let hi = ranges.iter().map(|r| r.1).max().unwrap_or(0);
    let qrow = |r: usize| {
        let q0 = g.q.at(b, h, i0 + r);
        &p.q[q0..q0 + d]
    };

    for j in (lo..hi).filter(|&j| sees(j)) {
        let k0 = g.k.at(b, kvh, j);
        let kj = &p.k[k0..k0 + d];
        for (r, &(l, u)) in ranges.iter().enumerate() {
            if (l..u).contains(&j) {
                let mut s = dot(qrow(r), kj) * p.scale;
                if let Some(c) = p.cap {
                    s = c * (s / c).tanh();
                }
                scores[r * sk + j] = s;
            }
        }
    }

    // Scores become unnormalised weights exp(s − max); `inv` keeps 1/Σ per row.
    let mut inv = [T::zero(); QBLOCK];
    for (r, &(l, u)) in ranges.iter().enumerate() {
        let row = &mut scores[r * sk..(r + 1) * sk];
        let mut max = T::neg_infinity();
        let mut any = false;
        for j in (l..u).filter(|&j| sees(j)) {
            any = true;
            if row[j] > max {
                max = row[j];
            }
        }
        if !any {
            continue;
        }
        let mut sum = T::zero();
        for j in (l..u).filter(|&j| sees(j)) {
            let e = (row[j] - max).exp();
            row[j] = e;
            sum += e;
        }
        inv[r] = T::one() / sum;
    }

    for r in 0..n {
        out[r * stride..r * stride + dv].fill(T::zero());
    }
    for j in (lo..hi).filter(|&j| sees(j)) {
        let v0 = g.v.at(b, kvh, j);
        let vj = &p.v[v0..v0 + dv];
        for (r, &(l, u)) in ranges.iter().enumerate() {
            if (l..u).contains(&j) {
                let w = scores[r * sk + j];
                let o = &mut out[r * stride..r * stride + dv];
                o.iter_mut().zip(vj).for_each(|(o, &x)| *o += w * x);
            }
        }
    }
    for (r, &f) in inv.iter().enumerate().take(n) {
        out[r * stride..r * stride + dv]
            .iter_mut()
            .for_each(|o| *o *= f);
    }
}

fn run<T: Float>(
    spec: &AttentionSpec,
    g: &Geometry,
    ins: &[TensorView],
    keep: Option<&[bool]>,
    out: &mut [T],
) -> Result<(), CpuError> {
    let p = Params {
        g,
        kind: spec.mask_kind,
        // The default scale in T's own precision (f64 runs check against 1e-12).
        scale: T::from_f64(
            spec.score_scale
                .map_or(1.0 / (spec.head_dim as f64).sqrt(), f64::from),
        ),
        cap: spec.attn_logit_softcap.map(|c| T::from_f64(c as f64)),
        q: ins[0].get::<T>()?,
        k: ins[1].get::<T>()?,
        v: ins[2].get::<T>()?,
        keep,
    };
    let (sq, h, dv) = (g.sq, g.heads, g.dv);
    if out.is_empty() {
        return Ok(());
    }
    let scratch = || vec![T::zero(); QBLOCK * g.sk];
    // Parallel over query blocks; a chunk of `out` is exactly what its block writes.
    match spec.layout {
        AttentionLayout::Bhsd => out.par_chunks_mut(sq * dv).enumerate().for_each(|(bh, o)| {
            o.par_chunks_mut(QBLOCK * dv)
                .enumerate()
                .for_each_init(scratch, |sc, (blk, ob)| {
                    let i0 = blk * QBLOCK;
                    let i1 = i0 + ob.len() / dv;
                    attend_block(&p, bh / h, bh % h, i0, i1, sc, ob, dv);
                })
        }),
        // Rows of one query for all heads are contiguous: a block holds every head.
        AttentionLayout::Packed | AttentionLayout::Bshd => out
            .par_chunks_mut(sq * h * dv)
            .enumerate()
            .for_each(|(b, o)| {
                o.par_chunks_mut(QBLOCK * h * dv).enumerate().for_each_init(
                    scratch,
                    |sc, (blk, ob)| {
                        let i0 = blk * QBLOCK;
                        let i1 = i0 + ob.len() / (h * dv);
                        for hh in 0..h {
                            attend_block(&p, b, hh, i0, i1, sc, &mut ob[hh * dv..], h * dv);
                        }
                    },
                )
            }),
    }
    Ok(())
}

pub(crate) fn eval(node: &Node, ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let Op::Attention(spec) = &node.op else {
        return Err(op_err(format!("{} is not Attention", node.op.kind())));
    };
    // The IR rule on the concrete shapes is the one place sizes are validated.
    let shapes: Vec<Shape> = ins.iter().map(|t| Shape::new(t.shape, t.dtype)).collect();
    let refs: Vec<&Shape> = shapes.iter().collect();
    let want = infer_shape(&node.op, &refs).map_err(op_err)?;
    if want.static_dims().as_deref() != Some(out.shape) {
        return Err(op_err(format!(
            "output buffer {:?} does not match {want}",
            out.shape
        )));
    }
    let g = Geometry::new(spec, ins[0].shape, ins[1].shape);
    let keep: Option<Vec<bool>> = (spec.mask_kind == MaskKind::Custom)
        .then(|| ins[3].to_f64_vec().iter().map(|&m| m != 0.0).collect());
    match out.class() {
        ComputeClass::F32 => run::<f32>(spec, &g, ins, keep.as_deref(), out.get_mut()?),
        ComputeClass::F64 => run::<f64>(spec, &g, ins, keep.as_deref(), out.get_mut()?),
        ComputeClass::I64 => Err(op_err("Attention needs float inputs")),
    }
}
