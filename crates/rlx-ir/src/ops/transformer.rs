//! Shape rules and builders of the transformer group: Attention, Rope, FusedSwiGLU.
use super::{arity, mul, require_float};
use crate::{
    AttentionLayout, AttentionSpec, DType, Dim, DimsFmt, Graph, IrError, MaskKind, NodeId, Op,
    OpKind, RopeStyle, Shape,
};

/// Two dims that must be equal. A symbol agrees with anything: the CPU re-runs this rule
/// once symbols are bound, so the check happens then.
fn agree(a: &Dim, b: &Dim) -> bool {
    match (a, b) {
        (Dim::Static(x), Dim::Static(y)) => x == y,
        _ => true,
    }
}

/// q/k/v dims split into batch, sequence, heads (None for Packed) and last dim.
struct Qkv<'a> {
    batch: &'a Dim,
    seq: &'a Dim,
    heads: Option<&'a Dim>,
    last: &'a Dim,
}

fn split_qkv<'a>(layout: AttentionLayout, name: &str, s: &'a Shape) -> Result<Qkv<'a>, String> {
    let (rank, form) = match layout {
        AttentionLayout::Packed => (3, "[B, S, H*D]"),
        AttentionLayout::Bshd => (4, "[B, S, H, D]"),
        AttentionLayout::Bhsd => (4, "[B, H, S, D]"),
    };
    if s.rank() != rank {
        return Err(format!(
            "{name} must be {form} for the {layout:?} layout, got {s}"
        ));
    }
    let d = &s.dims;
    Ok(match layout {
        AttentionLayout::Packed => Qkv {
            batch: &d[0],
            seq: &d[1],
            heads: None,
            last: &d[2],
        },
        AttentionLayout::Bshd => Qkv {
            batch: &d[0],
            seq: &d[1],
            heads: Some(&d[2]),
            last: &d[3],
        },
        AttentionLayout::Bhsd => Qkv {
            batch: &d[0],
            seq: &d[2],
            heads: Some(&d[1]),
            last: &d[3],
        },
    })
}

fn check_spec(spec: &AttentionSpec) -> Result<(), String> {
    if spec.num_heads == 0 || spec.head_dim == 0 || spec.v_dim() == 0 {
        return Err(format!(
            "num_heads, head_dim and v_head_dim must be positive (got {}, {}, {})",
            spec.num_heads,
            spec.head_dim,
            spec.v_dim()
        ));
    }
    if spec.mask_kind == MaskKind::SlidingWindow(0) {
        return Err("SlidingWindow(0) would mask every key; the window must be ≥ 1".into());
    }
    if let Some(s) = spec.score_scale {
        if !s.is_finite() {
            return Err(format!("score_scale must be finite, got {s}"));
        }
    }
    if let Some(c) = spec.attn_logit_softcap {
        if !(c.is_finite() && c > 0.0) {
            return Err(format!(
                "attn_logit_softcap must be finite and > 0, got {c}"
            ));
        }
    }
    Ok(())
}

pub(crate) fn attention(spec: &AttentionSpec, inputs: &[&Shape]) -> Result<Shape, String> {
    let inputs = if spec.past {
        let (past, rest) = inputs
            .split_last()
            .ok_or("attention with past needs q, k, v[, mask], past")?;
        past_scalar("past", past)?;
        arity(OpKind::Attention, rest, 3, 4)?;
        rest
    } else {
        arity(OpKind::Attention, inputs, 3, 4)?;
        inputs
    };
    require_float(OpKind::Attention, inputs, &[0, 1, 2])?;
    check_spec(spec)?;
    let (qs, ks, vs) = (inputs[0], inputs[1], inputs[2]);
    if ks.dtype != qs.dtype || vs.dtype != qs.dtype {
        return Err(format!(
            "q, k and v must share a dtype, got {}, {}, {}",
            qs.dtype, ks.dtype, vs.dtype
        ));
    }
    let layout = spec.layout;
    let (h, d, dv) = (spec.num_heads, spec.head_dim, spec.v_dim());
    let hd = mul("num_heads·head_dim", h, d)?;
    let hdv = mul("num_heads·v_head_dim", h, dv)?;
    let q = split_qkv(layout, "q", qs)?;
    let k = split_qkv(layout, "k", ks)?;
    let v = split_qkv(layout, "v", vs)?;

    // Query heads and head size.
    match q.heads {
        None if !agree(q.last, &Dim::Static(hd)) => {
            return Err(format!(
                "q's last dim must be num_heads*head_dim = {h}*{d}, got {qs}"
            ))
        }
        Some(qh) if !agree(qh, &Dim::Static(h)) || !agree(q.last, &Dim::Static(d)) => {
            return Err(format!(
                "q must have num_heads = {h} heads of head_dim = {d}, got {qs}"
            ))
        }
        _ => {}
    }

    // KV heads come from k; None while a needed dim is symbolic.
    let hkv = match k.heads {
        None => match k.last {
            Dim::Static(n) if *n % d != 0 => {
                return Err(format!(
                    "k's last dim {n} is not a multiple of head_dim {d} (got {ks})"
                ))
            }
            Dim::Static(n) => Some(n / d),
            Dim::Dynamic(_) => None,
        },
        Some(kh) => {
            if !agree(k.last, &Dim::Static(d)) {
                return Err(format!("k's head size must be head_dim = {d}, got {ks}"));
            }
            kh.as_static()
        }
    };
    if let Some(n) = hkv {
        if n == 0 || h % n != 0 {
            return Err(format!(
                "num_heads {h} is not a multiple of the {n} KV heads of k {ks}"
            ));
        }
    }

    // v: the same KV heads, head size v_dim.
    let v_ok = match (v.heads, hkv) {
        // n ≤ h, so n·dv ≤ h·dv, which fits.
        (None, Some(n)) => agree(v.last, &Dim::Static(n * dv)),
        (None, None) => v.last.as_static().is_none_or(|m| m % dv == 0),
        (Some(vh), _) => agree(vh, k.heads.unwrap_or(vh)) && agree(v.last, &Dim::Static(dv)),
    };
    if !v_ok {
        return Err(format!(
            "v must hold k's KV heads with head size {dv}, got k {ks}, v {vs}"
        ));
    }
    if !agree(q.batch, k.batch) || !agree(q.batch, v.batch) {
        return Err(format!("batch sizes differ: q {qs}, k {ks}, v {vs}"));
    }
    if !agree(k.seq, v.seq) {
        return Err(format!(
            "k and v must have the same sequence length, got k {ks}, v {vs}"
        ));
    }

    match (spec.mask_kind, inputs.get(3)) {
        (MaskKind::Custom, None) => {
            return Err("a Custom mask needs the keep-mask [B, Sk] as 4th input".into())
        }
        (MaskKind::Custom, Some(m)) => {
            if m.rank() != 2 || !agree(&m.dims[0], q.batch) || !agree(&m.dims[1], k.seq) {
                return Err(format!(
                    "the keep-mask must be [B, Sk] = [{}, {}], got {m}",
                    q.batch, k.seq
                ));
            }
        }
        (kind, Some(_)) => {
            return Err(format!(
                "mask kind {kind:?} takes no 4th input (only Custom does)"
            ))
        }
        (_, None) => {}
    }

    let dims = match layout {
        AttentionLayout::Packed => vec![q.batch.clone(), q.seq.clone(), Dim::Static(hdv)],
        AttentionLayout::Bshd => vec![
            q.batch.clone(),
            q.seq.clone(),
            Dim::Static(h),
            Dim::Static(dv),
        ],
        AttentionLayout::Bhsd => vec![
            q.batch.clone(),
            Dim::Static(h),
            q.seq.clone(),
            Dim::Static(dv),
        ],
    };
    Ok(Shape::with_dims(dims, qs.dtype))
}

/// True when `cos` broadcasts onto `view` with its last dim replaced by `half` without
/// growing it (every cos dim is 1 or the view's dim).
fn cos_fits(cos: &[Dim], view: &[Dim], half: usize) -> bool {
    let Some((c_last, c_lead)) = cos.split_last() else {
        return false;
    };
    let v_lead = &view[..view.len() - 1];
    agree(c_last, &Dim::Static(half))
        && c_lead.len() <= v_lead.len()
        && c_lead
            .iter()
            .rev()
            .zip(v_lead.iter().rev())
            .all(|(c, v)| c.is_one() || agree(c, v))
}

/// How RoPE sees x: `[.., head_dim]`. x's last dim is either head_dim itself or a packed
/// `H*head_dim`, which is split into `[H, head_dim]`. When both readings are possible
/// (last dim == head_dim) the one cos/sin broadcast against wins; if both fit, rank ≤ 3
/// prefers the split (packed `[B, S, D]` with cos `[S, 1, n_rot/2]`, one head) and rank ≥ 4
/// keeps x as is (`[B, S, H, D]` / `[B, H, S, D]`).
pub fn rope_view(
    x: &[Dim],
    cos: &[Dim],
    head_dim: usize,
    n_rot: usize,
) -> Result<Vec<Dim>, String> {
    let Some((last, lead)) = x.split_last() else {
        return Err("x must have rank ≥ 1".into());
    };
    let Dim::Static(n) = *last else {
        return Err(format!(
            "x's last dim must be static (head_dim or H*head_dim), got {}",
            DimsFmt(x)
        ));
    };
    if head_dim == 0 || n == 0 || n % head_dim != 0 {
        return Err(format!(
            "x's last dim {n} is not a positive multiple of head_dim {head_dim}"
        ));
    }
    let as_is = (n == head_dim).then(|| x.to_vec());
    let mut split = lead.to_vec();
    split.push(Dim::Static(n / head_dim));
    split.push(Dim::Static(head_dim));
    let order = if x.len() <= 3 {
        [Some(split), as_is]
    } else {
        [as_is, Some(split)]
    };
    let half = n_rot / 2;
    let tried: Vec<Vec<Dim>> = order.into_iter().flatten().collect();
    for view in &tried {
        if cos_fits(cos, view, half) {
            return Ok(view.clone());
        }
    }
    let wants: Vec<String> = tried
        .iter()
        .map(|v| {
            let mut a = v.clone();
            *a.last_mut().expect("non-empty view") = Dim::Static(half);
            DimsFmt(&a).to_string()
        })
        .collect();
    Err(format!(
        "cos/sin {} do not broadcast against x {} seen as {}",
        DimsFmt(cos),
        DimsFmt(x),
        wants.join(" or ")
    ))
}

pub(crate) fn rope(head_dim: usize, n_rot: usize, inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::Rope, inputs, 3, 3)?;
    require_float(OpKind::Rope, inputs, &[0, 1, 2])?;
    if head_dim == 0 {
        return Err("head_dim must be positive".into());
    }
    if n_rot == 0 || n_rot % 2 == 1 || n_rot > head_dim {
        return Err(format!(
            "n_rot must be even and in 2..=head_dim ({head_dim}), got {n_rot}"
        ));
    }
    let (x, cos, sin) = (inputs[0], inputs[1], inputs[2]);
    if cos.dims.len() != sin.dims.len() || !cos.dims.iter().zip(&sin.dims).all(|(a, b)| agree(a, b))
    {
        return Err(format!("cos {cos} and sin {sin} must have the same shape"));
    }
    rope_view(&x.dims, &cos.dims, head_dim, n_rot)?;
    Ok(x.clone())
}

/// `[.., 2n]` → `[.., n]`, in `cast_to` when given.
pub(crate) fn fused_swiglu(cast_to: Option<DType>, inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::FusedSwiGLU, inputs, 1, 1)?;
    require_float(OpKind::FusedSwiGLU, inputs, &[0])?;
    let x = inputs[0];
    if x.rank() == 0 {
        return Err("x must have rank >= 1".into());
    }
    let dtype = cast_to.unwrap_or(x.dtype);
    if !dtype.is_float() {
        return Err(format!("cast_to must be a float type, got {dtype}"));
    }
    let mut dims = x.dims.clone();
    let last = dims.len() - 1;
    dims[last] = match &dims[last] {
        Dim::Static(n) if n.is_multiple_of(2) => Dim::Static(n / 2),
        Dim::Static(n) => {
            return Err(format!("last dim {n} must be even ([up ‖ gate])"));
        }
        // A symbolic 2n has no name for n; the run-time rule sees the bound size.
        Dim::Dynamic(s) => Dim::Dynamic(format!("{s}/2")),
    };
    Ok(Shape::with_dims(dims, dtype))
}

/// A run-time position: I64 with exactly one element (`[]` or `[1]`).
fn past_scalar(what: &str, s: &Shape) -> Result<(), String> {
    let one = s.dims.iter().all(|d| agree(d, &Dim::Static(1)));
    if s.dtype != DType::I64 || !one {
        return Err(format!("{what} must be an I64 with one element, got {s}"));
    }
    Ok(())
}

pub(crate) fn cache_write(axis: usize, inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::CacheWrite, inputs, 3, 3)?;
    let (cache, new, pos) = (inputs[0], inputs[1], inputs[2]);
    past_scalar("pos", pos)?;
    if new.dtype != cache.dtype {
        return Err(format!(
            "new rows {new} must have the cache's dtype {}",
            cache.dtype
        ));
    }
    if axis >= cache.rank() || new.rank() != cache.rank() {
        return Err(format!(
            "axis {axis} must lie in the cache {cache}, and new {new} must have its rank"
        ));
    }
    for (k, (c, n)) in cache.dims.iter().zip(&new.dims).enumerate() {
        let fits = match (c, n) {
            (Dim::Static(c), Dim::Static(n)) if k == axis => n <= c,
            _ if k == axis => true,
            _ => agree(c, n),
        };
        if !fits {
            return Err(format!(
                "new rows {new} do not fit the cache {cache} (writes along axis {axis})"
            ));
        }
    }
    Ok(cache.clone())
}

/// cache, new, pos, cos, sin: the Rope rule on (new, cos, sin), then the CacheWrite rule
/// on the rotated rows (Rope keeps the shape and dtype of `new`).
pub(crate) fn rope_cache_write(
    axis: usize,
    head_dim: usize,
    n_rot: usize,
    inputs: &[&Shape],
) -> Result<Shape, String> {
    arity(OpKind::RopeCacheWrite, inputs, 5, 5)?;
    let rotated = rope(head_dim, n_rot, &[inputs[1], inputs[3], inputs[4]])?;
    cache_write(axis, &[inputs[0], &rotated, inputs[2]])
}

/// q, k, v, k_cache, v_cache, pos[, cos, sin]: the rules of the ops it stands for (see
/// `Op::CachedAttention`): Rope on q and k, CacheWrite along axis 1 into each cache, then
/// Attention over the caches with `past`.
pub(crate) fn cached_attention(
    spec: &AttentionSpec,
    rope_spec: &Option<crate::CachedRope>,
    inputs: &[&Shape],
) -> Result<Shape, String> {
    let n = if rope_spec.is_some() { 8 } else { 6 };
    arity(OpKind::CachedAttention, inputs, n, n)?;
    if spec.layout == AttentionLayout::Bhsd || spec.mask_kind == MaskKind::Custom {
        return Err(format!(
            "the caches are written along axis 1 and no keep-mask is taken: layout {:?} / \
             mask {:?} are not allowed",
            spec.layout, spec.mask_kind
        ));
    }
    let (q, k, v, kc, vc, pos) = (
        inputs[0], inputs[1], inputs[2], inputs[3], inputs[4], inputs[5],
    );
    if let Some(r) = rope_spec {
        rope(spec.head_dim, r.n_rot, &[q, inputs[6], inputs[7]])?;
        rope(spec.head_dim, r.n_rot, &[k, inputs[6], inputs[7]])?;
    }
    cache_write(1, &[kc, k, pos]).map_err(|e| format!("k cache: {e}"))?;
    cache_write(1, &[vc, v, pos]).map_err(|e| format!("v cache: {e}"))?;
    let mut spec = spec.clone();
    spec.past = true;
    attention(&spec, &[q, kc, vc, pos])
}

impl Graph {
    /// `cache_write(cache, rope(new, cos, sin, …), pos, axis)` as one in-place op (see
    /// `Op::RopeCacheWrite`); returns the written cache.
    #[allow(clippy::too_many_arguments)]
    pub fn rope_cache_write(
        &mut self,
        cache: NodeId,
        new: NodeId,
        pos: NodeId,
        cos: NodeId,
        sin: NodeId,
        axis: usize,
        head_dim: usize,
        n_rot: usize,
        style: crate::RopeStyle,
    ) -> Result<NodeId, IrError> {
        let op = Op::RopeCacheWrite {
            axis,
            head_dim,
            n_rot,
            style,
        };
        self.add_node(op, &[cache, new, pos, cos, sin])
    }

    /// Write `new` into `cache` at run-time position `pos` along `axis`, in place; returns
    /// the written cache (read it through this node). See `Op::CacheWrite`.
    pub fn cache_write(
        &mut self,
        cache: NodeId,
        new: NodeId,
        pos: NodeId,
        axis: usize,
    ) -> Result<NodeId, IrError> {
        self.add_node(Op::CacheWrite { axis }, &[cache, new, pos])
    }

    /// One attention block over KV caches as one in-place op (see `Op::CachedAttention`):
    /// writes this call's k/v rows (k rotated with `rope`, as is q) into the caches at `pos`
    /// and returns the attention output.
    #[allow(clippy::too_many_arguments)]
    pub fn cached_attention(
        &mut self,
        [q, k, v]: [NodeId; 3],
        [k_cache, v_cache]: [NodeId; 2],
        pos: NodeId,
        rope: Option<(crate::CachedRope, NodeId, NodeId)>,
        spec: AttentionSpec,
    ) -> Result<NodeId, IrError> {
        let mut ins = vec![q, k, v, k_cache, v_cache, pos];
        let rope = rope.map(|(r, cos, sin)| {
            ins.extend([cos, sin]);
            r
        });
        let spec = spec.with_past();
        self.add_node(Op::CachedAttention { spec, rope }, &ins)
    }

    /// Attention of this call's queries over a KV cache holding `past` earlier positions
    /// (plus this call's, already written): `spec` gains `past` (see `AttentionSpec::past`).
    pub fn attention_cached(
        &mut self,
        q: NodeId,
        k_cache: NodeId,
        v_cache: NodeId,
        past: NodeId,
        spec: AttentionSpec,
    ) -> Result<NodeId, IrError> {
        let spec = spec.with_past();
        let mut ins = vec![q, k_cache, v_cache];
        ins.push(past);
        self.add_node(Op::Attention(spec), &ins)
    }

    /// Scaled dot-product attention over q, k, v (and a keep-mask when `spec.mask_kind` is
    /// `Custom`); see `AttentionSpec`.
    pub fn attention(
        &mut self,
        q: NodeId,
        k: NodeId,
        v: NodeId,
        mask: impl Into<Option<NodeId>>,
        spec: AttentionSpec,
    ) -> Result<NodeId, IrError> {
        let mut ins = vec![q, k, v];
        ins.extend(mask.into());
        self.add_node(Op::Attention(spec), &ins)
    }

    /// Rotary position embedding of the first `n_rot` dims of each head of x.
    pub fn rope(
        &mut self,
        x: NodeId,
        cos: NodeId,
        sin: NodeId,
        head_dim: usize,
        n_rot: usize,
        style: RopeStyle,
    ) -> Result<NodeId, IrError> {
        self.add_node(
            Op::Rope {
                head_dim,
                n_rot,
                style,
            },
            &[x, cos, sin],
        )
    }

    /// `[.., 2n]` → `[.., n]`: up · silu(gate), halves `[up ‖ gate]` (or `[gate ‖ up]`).
    pub fn swiglu(
        &mut self,
        x: NodeId,
        gate_first: bool,
        cast_to: Option<DType>,
    ) -> Result<NodeId, IrError> {
        self.add_node(
            Op::FusedSwiGLU {
                cast_to,
                gate_first,
            },
            &[x],
        )
    }
}
