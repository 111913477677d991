//! CPU thunks of the Transformer group: Attention, Rope, FusedSwiGLU.
//!
//! Attention runs in parallel over (batch, head, block of up to 128 queries). A block is
//! two products through the gemm crate, q·kᵀ into a QBLOCK × keys score block and
//! softmax(scores)·v straight into the output rows, around a vectorised row softmax
//! (masked keys as -inf). Scores cover only the keys the block may see (causal, window,
//! the valid part of a cache).
use super::arity;
use super::norm::for_rows;
use crate::error::op_err;
use crate::util::broadcast_offsets;
use crate::{Buf, BufMut, CpuError, Float, OutView, Storage, TensorView};
use rayon::prelude::*;
use rlx_ir::ops::{attention::rope_view, infer_shape};
use rlx_ir::{AttentionLayout, AttentionSpec, MaskKind, Op, RopeStyle, Shape};
use std::borrow::Cow;

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
    /// Positions before the first query (`AttentionSpec::past`); keys from `past + sq` on
    /// are not yet written.
    past: Option<usize>,
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
            past: None,
        }
    }

    /// Keys that exist: all Sk, or the `past + Sq` a KV cache holds so far (the scores'
    /// row length, so a step's scratch follows the valid length, not the cache's).
    fn valid(&self) -> usize {
        self.past.map_or(self.sk, |p| p + self.sq)
    }

    /// Keys `lo..hi` that query `i` may see under a positional mask.
    fn key_range(&self, kind: MaskKind, i: usize) -> (usize, usize) {
        // Queries are the last Sq positions of the valid keys.
        let valid = self.valid();
        let pos = valid as i64 - self.sq as i64 + i as i64;
        let clamp = |p: i64| p.clamp(0, valid as i64) as usize;
        match kind {
            MaskKind::None | MaskKind::Custom => (0, valid),
            MaskKind::Causal => (0, clamp(pos + 1)),
            MaskKind::SlidingWindow(w) => (clamp(pos + 1 - w as i64), clamp(pos + 1)),
        }
    }
}

/// Query rows of one task: the whole sequence of an encoder head in one block, while the
/// score block (QBLOCK × valid keys) stays small for long caches.
const QBLOCK: usize = 128;

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

/// A strided matrix inside a slice: element (r, c) at `off + r·rs + c·cs`.
#[derive(Clone, Copy)]
struct Mat<'a, T> {
    data: &'a [T],
    off: usize,
    rs: usize,
    cs: usize,
}

impl<T> Mat<'_, T> {
    /// Whether every element of a `rows × cols` view lies inside the slice.
    fn fits(&self, rows: usize, cols: usize) -> bool {
        rows == 0
            || cols == 0
            || self.off + (rows - 1) * self.rs + (cols - 1) * self.cs < self.data.len()
    }
}

/// `dst = alpha · lhs[m × k] · rhs[k × n]` through the gemm crate, `dst` row-major with row
/// stride `dst_rs`. Callers check the views fit (`Mat::fits`, the dst bound).
///
/// # Safety
/// `dst` must be valid for writes of `(m - 1)·dst_rs + n` elements that no other thread
/// touches during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_into<T: Float>(
    (m, n, k): (usize, usize, usize),
    lhs: Mat<T>,
    rhs: Mat<T>,
    dst: *mut T,
    dst_rs: usize,
    alpha: T,
) {
    debug_assert!(lhs.fits(m, k) && rhs.fits(k, n));
    gemm::gemm(
        m,
        n,
        k,
        dst,
        1,
        dst_rs as isize,
        false,
        lhs.data.as_ptr().add(lhs.off),
        lhs.cs as isize,
        lhs.rs as isize,
        rhs.data.as_ptr().add(rhs.off),
        rhs.cs as isize,
        rhs.rs as isize,
        T::zero(),
        alpha,
        false,
        false,
        false,
        gemm::Parallelism::None,
    );
}

/// The output buffer shared by the tasks of one call; each task writes only its own
/// (batch, head, query block) rows, which no other task touches.
struct OutPtr<T> {
    ptr: *mut T,
    len: usize,
}
// SAFETY: tasks write disjoint elements (see `attend_block`), and the buffer outlives them.
unsafe impl<T: Send> Send for OutPtr<T> {}
unsafe impl<T: Send> Sync for OutPtr<T> {}

/// Queries `i0..i1` (at most QBLOCK) of head `h` in batch `b`: softmax(scale·q·kᵀ, capped,
/// masked) · v, as two products through gemm around a row softmax. Scores cover the keys
/// `lo..hi` some query of the block may see; the rest of a row's mask is -inf there. A
/// query that sees no key gets zeros. `scores` holds QBLOCK rows of the valid keys.
fn attend_block<T: Float>(
    p: &Params<T>,
    (b, h, i0, i1): (usize, usize, usize, usize),
    scores: &mut [T],
    out: &OutPtr<T>,
    o: Strides,
) -> Result<(), CpuError> {
    let g = p.g;
    let (sk, d, dv, n) = (g.sk, g.d, g.dv, i1 - i0);
    let kvh = h / g.group;
    let mut ranges = [(0usize, 0usize); QBLOCK];
    for (r, range) in ranges.iter_mut().enumerate().take(n) {
        *range = g.key_range(p.kind, i0 + r);
    }
    let ranges = &ranges[..n];
    let lo = ranges.iter().map(|r| r.0).min().unwrap_or(0);
    let hi = ranges.iter().map(|r| r.1).max().unwrap_or(0).max(lo);
    let w = hi - lo;
    let dst = o.at(b, h, i0);
    if n > 0 && dst + (n - 1) * o.seq + dv > out.len {
        return Err(op_err("attention output is smaller than its shape says"));
    }
    if w == 0 {
        for r in 0..n {
            // SAFETY: inside `out` (checked above) and this task's own rows.
            unsafe { std::slice::from_raw_parts_mut(out.ptr.add(dst + r * o.seq), dv) }
                .fill(T::zero());
        }
        return Ok(());
    }
    let qm = Mat {
        data: p.q,
        off: g.q.at(b, h, i0),
        rs: g.q.seq,
        cs: 1,
    };
    // kᵀ: element (c, j) is k[j][c].
    let kt = Mat {
        data: p.k,
        off: g.k.at(b, kvh, lo),
        rs: 1,
        cs: g.k.seq,
    };
    let vm = Mat {
        data: p.v,
        off: g.v.at(b, kvh, lo),
        rs: g.v.seq,
        cs: 1,
    };
    let sc = &mut scores[..n * w];
    if !(qm.fits(n, d) && kt.fits(d, w) && vm.fits(w, dv)) {
        return Err(op_err("attention q/k/v is smaller than its shape says"));
    }
    // SAFETY: the views fit (checked above); `sc` is this task's scratch of n × w.
    unsafe { gemm_into((n, w, d), qm, kt, sc.as_mut_ptr(), w, p.scale) };

    let keep = p.keep.map(|m| &m[b * sk + lo..b * sk + hi]);
    for (r, &(l, u)) in ranges.iter().enumerate() {
        let row = &mut sc[r * w..(r + 1) * w];
        if let Some(c) = p.cap {
            row.iter_mut().for_each(|s| *s = c * (*s / c).tanh());
        }
        // Keys outside this query's range, or masked out, weigh nothing.
        row[..l.max(lo) - lo].fill(T::neg_infinity());
        row[u.clamp(lo, hi) - lo..].fill(T::neg_infinity());
        if let Some(keep) = keep {
            for (s, &k) in row.iter_mut().zip(keep) {
                if !k {
                    *s = T::neg_infinity();
                }
            }
        }
        T::softmax_in_place(row);
    }
    let pm = Mat {
        data: &*sc,
        off: 0,
        rs: w,
        cs: 1,
    };
    // SAFETY: the views fit; the dst rows are inside `out` (checked above) and belong to
    // this task alone (its batch, head and query block).
    unsafe { gemm_into((n, dv, w), pm, vm, out.ptr.add(dst), o.seq, T::one()) };
    Ok(())
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
    if out.is_empty() || sq == 0 {
        return Ok(());
    }
    let batch = out.len() / (sq * h * dv);
    let blocks = sq.div_ceil(QBLOCK);
    let o = Strides::new(spec.layout, h, sq, dv);
    let optr = OutPtr {
        ptr: out.as_mut_ptr(),
        len: out.len(),
    };
    let scratch = || vec![T::zero(); QBLOCK.min(sq) * g.valid()];
    // One task per (batch, head, query block): each writes only its own output rows.
    (0..batch * h * blocks)
        .into_par_iter()
        .try_for_each_init(scratch, |sc, t| {
            let (bh, blk) = (t / blocks, t % blocks);
            let i0 = blk * QBLOCK;
            let i1 = (i0 + QBLOCK).min(sq);
            attend_block(&p, (bh / h, bh % h, i0, i1), sc, &optr, o)
        })
}

/// The IR rule on the concrete shapes is the one place sizes are validated: the thunks of
/// this file index their inputs only after it accepted them and `out` has its shape.
fn checked_shapes(op: &Op, ins: &[TensorView], out: &OutView) -> Result<Vec<Shape>, CpuError> {
    let shapes: Vec<Shape> = ins.iter().map(|t| Shape::new(t.shape, t.dtype)).collect();
    let refs: Vec<&Shape> = shapes.iter().collect();
    let want = infer_shape(op, &refs).map_err(op_err)?;
    if want.static_dims().as_deref() != Some(out.shape) {
        return Err(op_err(format!(
            "output buffer {:?} does not match {want}",
            out.shape
        )));
    }
    Ok(shapes)
}

/// q, k, v, [mask], [past].
pub fn attention(
    spec: &AttentionSpec,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    checked_shapes(&Op::Attention(spec.clone()), ins, &out)?;
    let mut g = Geometry::new(spec, ins[0].shape, ins[1].shape);
    if spec.past {
        let past = ins[ins.len() - 1].get::<i64>()?[0];
        let fits = usize::try_from(past)
            .ok()
            .filter(|p| p.checked_add(g.sq).is_some_and(|e| e <= g.sk));
        g.past = Some(fits.ok_or_else(|| {
            op_err(format!(
                "past = {past} with {} queries does not fit the {} cached keys",
                g.sq, g.sk
            ))
        })?);
    }
    let keep: Option<Vec<bool>> = (spec.mask_kind == MaskKind::Custom)
        .then(|| ins[3].to_f64_vec().iter().map(|&m| m != 0.0).collect());
    float_class!(out.class(), T => run::<T>(spec, &g, ins, keep.as_deref(), out.get_mut()?))
}

// ---- Rope: each head row of x rotates its first n_rot dims by the angles of the cos/sin
// row it broadcasts to; the rest is copied.

/// A float input as `T`, converted when it is held in the other float class.
fn as_t<'a, T: Float>(t: &TensorView<'a>) -> Cow<'a, [T]> {
    match t.get::<T>() {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => Cow::Owned(t.to_f64_vec().into_iter().map(T::from_f64).collect()),
    }
}

struct Rot<'a, T> {
    head_dim: usize,
    n_rot: usize,
    style: RopeStyle,
    cos: &'a [T],
    sin: &'a [T],
    /// Row of cos/sin (in units of n_rot/2) for each head row of x.
    rows: &'a [usize],
}

fn rotate<T: Float>(r: &Rot<T>, x: &[T], out: &mut [T]) {
    let half = r.n_rot / 2;
    let (hd, n_rot) = (r.head_dim, r.n_rot);
    // Enough head rows per task that rayon's bookkeeping stays small next to the work.
    let min_rows = (1 << 14) / hd + 1;
    out.par_chunks_mut(hd)
        .zip(x.par_chunks(hd))
        .zip(r.rows.par_iter())
        .with_min_len(min_rows)
        .for_each(|((o, x), &row)| {
            let c = &r.cos[row * half..(row + 1) * half];
            let s = &r.sin[row * half..(row + 1) * half];
            match r.style {
                RopeStyle::Half => {
                    let (x1, x2) = x[..n_rot].split_at(half);
                    let (o1, o2) = o[..n_rot].split_at_mut(half);
                    for i in 0..half {
                        o1[i] = x1[i] * c[i] - x2[i] * s[i];
                        o2[i] = x2[i] * c[i] + x1[i] * s[i];
                    }
                }
                RopeStyle::Interleaved => {
                    for i in 0..half {
                        let (a, b) = (x[2 * i], x[2 * i + 1]);
                        o[2 * i] = a * c[i] - b * s[i];
                        o[2 * i + 1] = b * c[i] + a * s[i];
                    }
                }
            }
            o[n_rot..].copy_from_slice(&x[n_rot..]);
        });
}

fn rope_t<T: Float>(
    head_dim: usize,
    n_rot: usize,
    style: RopeStyle,
    ins: &[TensorView],
    rows: &[usize],
    out: &mut [T],
) -> Result<(), CpuError> {
    let x = ins[0].get::<T>()?;
    let cos = as_t::<T>(&ins[1]);
    let sin = as_t::<T>(&ins[2]);
    let r = Rot {
        head_dim,
        n_rot,
        style,
        cos: &cos,
        sin: &sin,
        rows,
    };
    rotate(&r, x, out);
    Ok(())
}

/// q, k, v, k_cache, v_cache, pos[, cos, sin] of `Op::CachedAttention`, once the executor
/// has written this call's k/v rows into the caches in place (`exec.rs`): q rotated by the
/// Rope thunk (and rounded to its dtype, as the unfused Rope's output is), then attention
/// over the caches.
pub fn cached_attention(
    spec: &AttentionSpec,
    rope_spec: &Option<rlx_ir::CachedRope>,
    ins: &[TensorView],
    out: OutView,
) -> Result<(), CpuError> {
    if ins.len() != if rope_spec.is_some() { 8 } else { 6 } {
        return Err(op_err(format!("{} inputs", ins.len())));
    }
    let spec = spec.clone().with_past();
    let rotated;
    let q = match rope_spec {
        None => ins[0],
        Some(r) => {
            let mut q = match ins[0].data {
                Buf::F32(s) => Storage::F32(vec![0.0; s.len()]),
                Buf::F64(s) => Storage::F64(vec![0.0; s.len()]),
                _ => return Err(op_err("q must be a float tensor")),
            };
            let data = match &mut q {
                Storage::F32(v) => BufMut::F32(v),
                Storage::F64(v) => BufMut::F64(v),
                _ => unreachable!("made as a float above"),
            };
            let qv = OutView {
                shape: ins[0].shape,
                dtype: ins[0].dtype,
                data,
            };
            let tables = [ins[0], ins[6], ins[7]];
            rope(spec.head_dim, r.n_rot, r.style, &tables, qv)?;
            if let Storage::F32(v) = &mut q {
                crate::exec::normalise(BufMut::F32(v), ins[0].dtype);
            }
            rotated = q;
            TensorView {
                data: rotated.as_buf(),
                ..ins[0]
            }
        }
    };
    let over = [q, ins[3], ins[4], ins[5]];
    attention(&spec, &over, out)
}

/// x, cos, sin.
pub fn rope(
    head_dim: usize,
    n_rot: usize,
    style: RopeStyle,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let op = Op::Rope {
        head_dim,
        n_rot,
        style,
    };
    let shapes = checked_shapes(&op, ins, &out)?;
    let view = rope_view(&shapes[0].dims, &shapes[1].dims, head_dim, n_rot).map_err(op_err)?;
    let lead: Vec<usize> = view[..view.len() - 1]
        .iter()
        .map(|d| d.as_static().unwrap_or(1))
        .collect();
    let cos_lead = &ins[1].shape[..ins[1].shape.len() - 1];
    let rows = broadcast_offsets(cos_lead, &lead);
    float_class!(out.class(), T => rope_t::<T>(head_dim, n_rot, style, ins, &rows, out.get_mut()?))
}

// ---- FusedSwiGLU

/// `[.., 2n]` → `[.., n]`: up · silu(gate), computed in the input's class.
fn swiglu<I: Float, O: Float>(
    gate_first: bool,
    x: &TensorView,
    out: &mut [O],
) -> Result<(), CpuError> {
    let xv = x.get::<I>()?;
    let two_n = *x
        .shape
        .last()
        .ok_or_else(|| op_err("x must have rank >= 1"))?;
    if !two_n.is_multiple_of(2) {
        return Err(op_err(format!("last dim {two_n} is odd")));
    }
    let n = two_n / 2;
    if out.len() * 2 != xv.len() {
        return Err(op_err("output must hold half of x"));
    }
    for_rows(out, n, |row, o| {
        let r = &xv[row * two_n..(row + 1) * two_n];
        let (up, gate) = if gate_first {
            (&r[n..], &r[..n])
        } else {
            (&r[..n], &r[n..])
        };
        for ((o, &u), &g) in o.iter_mut().zip(up).zip(gate) {
            let silu = g / (I::one() + (-g).exp());
            *o = O::from_f64((u * silu).to_f64());
        }
    });
    Ok(())
}

/// `[.., 2n]` → `[.., n]`: up · silu(gate), from the input's float class to the output's.
pub fn fused_swiglu(
    gate_first: bool,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let x = &arity(ins, 1, 1)?[0];
    float_class!(x.dtype.compute_class(), I => {
        float_class!(out.class(), O => swiglu::<I, O>(gate_first, x, out.get_mut()?))
    })
}
