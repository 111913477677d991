//! CPU thunk: Attention. One output row (a query of one head) at a time, in parallel over
//! rows: one row of scores, then the max-shifted softmax folded into the weighted sum of v,
//! so no `Sq × Sk` buffer exists.
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

    /// (batch, head, query) of output row `r` (rows are `dv` contiguous elements).
    fn row(&self, layout: AttentionLayout, r: usize) -> (usize, usize, usize) {
        match layout {
            AttentionLayout::Packed | AttentionLayout::Bshd => {
                let (bs, h) = (r / self.heads, r % self.heads);
                (bs / self.sq, h, bs % self.sq)
            }
            AttentionLayout::Bhsd => {
                let (bh, s) = (r / self.sq, r % self.sq);
                (bh / self.heads, bh % self.heads, s)
            }
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

struct Params<'a, T> {
    g: &'a Geometry,
    layout: AttentionLayout,
    kind: MaskKind,
    scale: T,
    cap: Option<T>,
    q: &'a [T],
    k: &'a [T],
    v: &'a [T],
    /// Keep-mask `[B, Sk]` for `Custom`.
    keep: Option<&'a [bool]>,
}

/// One output row: softmax(scale·q·kᵀ, capped, masked) · v. A row that sees no key is zeros.
fn attend_row<T: Float>(p: &Params<T>, r: usize, scores: &mut [T], out: &mut [T]) {
    let g = p.g;
    let (b, h, i) = g.row(p.layout, r);
    let kvh = h / g.group;
    let q0 = g.q.at(b, h, i);
    let qrow = &p.q[q0..q0 + g.d];
    let (lo, hi) = g.key_range(p.kind, i);
    let keep = p.keep.map(|m| &m[b * g.sk..(b + 1) * g.sk]);
    let sees = |j: usize| keep.is_none_or(|m| m[j]);

    let mut max = T::neg_infinity();
    let mut any = false;
    for j in lo..hi {
        if !sees(j) {
            continue;
        }
        let k0 = g.k.at(b, kvh, j);
        let mut s = dot(qrow, &p.k[k0..k0 + g.d]) * p.scale;
        if let Some(c) = p.cap {
            s = c * (s / c).tanh();
        }
        scores[j] = s;
        any = true;
        if s > max {
            max = s;
        }
    }
    out.fill(T::zero());
    if !any {
        return;
    }
    let mut sum = T::zero();
    for j in lo..hi {
        if !sees(j) {
            continue;
        }
        let e = (scores[j] - max).exp();
        sum += e;
        let v0 = g.v.at(b, kvh, j);
        for (o, &x) in out.iter_mut().zip(&p.v[v0..v0 + g.dv]) {
            *o += e * x;
        }
    }
    let inv = T::one() / sum;
    out.iter_mut().for_each(|o| *o *= inv);
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
        layout: spec.layout,
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
    if g.dv == 0 || out.is_empty() {
        return Ok(());
    }
    // Enough rows per task that rayon's bookkeeping stays small next to the work.
    let row_cost = (g.sk * (g.d + g.dv)).max(1);
    let min_rows = (1 << 15) / row_cost + 1;
    out.par_chunks_mut(g.dv)
        .enumerate()
        .with_min_len(min_rows)
        .for_each_init(
            || vec![T::zero(); g.sk],
            |scores, (r, row)| attend_row(&p, r, scores, row),
        );
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
