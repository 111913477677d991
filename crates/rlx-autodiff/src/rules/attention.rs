//! VJP rules of the Transformer group: Attention (by decomposition: every layout and mask
//! kind, GQA, scale, soft cap), Rope, FusedSwiGLU.
use super::{by_decomposition, elementwise, Grads};
use crate::util::{reshape, scalar_like, scale, select, static_dims, transpose, unsupported};
use crate::AdError;
use rlx_ir::{
    Activation, AttentionLayout, AttentionSpec, Dim, Graph, HostTensor, MaskKind, Node, NodeId, Op,
    RopeStyle,
};

pub(crate) fn attention(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
    spec: &AttentionSpec,
) -> Grads {
    by_decomposition(g, node, dy, needs, |g| decompose(g, node, spec))
}

pub(crate) fn rope(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
    head_dim: usize,
    n_rot: usize,
    style: RopeStyle,
) -> Grads {
    // A rotation by θ is orthogonal: its transpose rotates by −θ, i.e. the same op with sin
    // negated (unrotated dims pass through both ways).
    if needs[1] || needs[2] {
        return Err(unsupported(
            node,
            "gradients with respect to cos / sin are not supported (they are tables)",
        ));
    }
    let ins = &node.inputs;
    let nsin = g.activation(Activation::Neg, ins[2])?;
    let op = Op::Rope {
        head_dim,
        n_rot,
        style,
    };
    Ok(vec![Some(g.add_node(op, &[dy, ins[1], nsin])?), None, None])
}

/// `cast_to` only changes the output type; the cotangent is brought back first.
pub(crate) fn fused_swiglu(g: &mut Graph, node: &Node, dy: NodeId, gate_first: bool) -> Grads {
    let x = node.inputs[0];
    let xs = g.shape(x)?.clone();
    let two_n = xs.dims[xs.rank() - 1]
        .as_static()
        .ok_or_else(|| unsupported(node, "needs a static last dim"))?;
    let half = two_n / 2;
    let (gate_at, up_at) = if gate_first { (0, half) } else { (half, 0) };
    let narrow = |g: &mut Graph, start: usize| {
        g.add_node(
            Op::Narrow {
                axis: -1,
                start,
                len: half,
            },
            &[x],
        )
    };
    let gate = narrow(g, gate_at)?;
    let up = narrow(g, up_at)?;
    // cast_to changes only the output type: bring the cotangent back first.
    let dy = if g.shape(dy)?.dtype != xs.dtype {
        g.cast(dy, xs.dtype)?
    } else {
        dy
    };
    let silu = g.activation(Activation::Silu, gate)?;
    let dup = g.mul(dy, silu)?;
    let dsilu = g.mul(dy, up)?;
    let dgate = elementwise::act_grad(g, Activation::Silu, gate, silu, dsilu)?;
    let parts = if gate_first {
        [dgate, dup]
    } else {
        [dup, dgate]
    };
    Ok(vec![Some(g.add_node(Op::Concat { axis: -1 }, &parts)?)])
}

/// q/k/v from the op's layout to `[B, heads, S, size]`.
fn to_bhsd(
    g: &mut Graph,
    x: NodeId,
    layout: AttentionLayout,
    size: usize,
    node: &Node,
) -> Result<(NodeId, [usize; 4]), AdError> {
    let d = static_dims(g, x, node)?;
    Ok(match layout {
        AttentionLayout::Packed => {
            let heads = d[2] / size.max(1);
            let r = reshape(
                g,
                x,
                vec![d[0] as i64, d[1] as i64, heads as i64, size as i64],
            )?;
            (
                transpose(g, r, vec![0, 2, 1, 3])?,
                [d[0], heads, d[1], size],
            )
        }
        AttentionLayout::Bshd => (transpose(g, x, vec![0, 2, 1, 3])?, [d[0], d[2], d[1], d[3]]),
        AttentionLayout::Bhsd => (x, [d[0], d[1], d[2], d[3]]),
    })
}

/// softmax(scale·q·kᵀ [soft-capped, masked])·v in primitives, matching the CPU kernel:
/// masked keys get zero weight and a query that sees no key outputs zeros.
fn decompose(g: &mut Graph, node: &Node, spec: &AttentionSpec) -> Result<NodeId, AdError> {
    let ins = &node.inputs;
    let (d, dv, h) = (spec.head_dim, spec.v_dim(), spec.num_heads);
    let (q, [b, _, sq, _]) = to_bhsd(g, ins[0], spec.layout, d, node)?;
    let (mut k, [_, hkv, sk, _]) = to_bhsd(g, ins[1], spec.layout, d, node)?;
    let (mut v, _) = to_bhsd(g, ins[2], spec.layout, dv, node)?;
    if hkv == 0 || h % hkv != 0 {
        return Err(unsupported(
            node,
            format!("{h} query heads over {hkv} KV heads"),
        ));
    }
    let group = h / hkv;
    if group > 1 {
        // Query head i uses KV head i / group: repeat each KV head `group` times.
        for (t, size) in [(&mut k, d), (&mut v, dv)] {
            let r = reshape(g, *t, vec![b as i64, hkv as i64, 1, sk as i64, size as i64])?;
            let e = g.add_node(
                Op::Expand {
                    shape: [b, hkv, group, sk, size].map(Dim::Static).to_vec(),
                },
                &[r],
            )?;
            *t = reshape(g, e, vec![b as i64, h as i64, sk as i64, size as i64])?;
        }
    }
    let kt = transpose(g, k, vec![0, 1, 3, 2])?;
    let s = g.matmul(q, kt)?;
    // The default scale in f64, as the kernel computes it (not via the f32 field).
    let sc = spec.score_scale.map_or(1.0 / (d as f64).sqrt(), f64::from);
    let mut s = scale(g, s, sc)?;
    if let Some(cap) = spec.attn_logit_softcap {
        let c = cap as f64;
        let t = scale(g, s, 1.0 / c)?;
        let t = g.activation(Activation::Tanh, t)?;
        s = scale(g, t, c)?;
    }
    let keep = match spec.mask_kind {
        MaskKind::None => None,
        MaskKind::Custom => {
            let m = *ins
                .get(3)
                .ok_or_else(|| unsupported(node, "a Custom mask needs its 4th input"))?;
            Some(reshape(g, m, vec![b as i64, 1, 1, sk as i64])?)
        }
        kind => {
            // Query i sits at position sk − sq + i; it sees keys in its causal window.
            let mut v = vec![false; sq * sk];
            for i in 0..sq {
                let pos = sk as i64 - sq as i64 + i as i64;
                let lo = match kind {
                    MaskKind::SlidingWindow(w) => pos + 1 - w as i64,
                    _ => 0,
                };
                for j in 0..sk {
                    v[i * sk + j] = (j as i64) >= lo && (j as i64) <= pos;
                }
            }
            Some(g.constant(HostTensor::from_bool(&[sq, sk], &v))?)
        }
    };
    let p = match keep {
        Some(keep) => {
            let low = scalar_like(g, -1e30, s)?;
            let sm = select(g, keep, s, low)?;
            let p = g.add_node(Op::Softmax { axis: -1 }, &[sm])?;
            let zero = scalar_like(g, 0.0, p)?;
            select(g, keep, p, zero)?
        }
        None => g.add_node(Op::Softmax { axis: -1 }, &[s])?,
    };
    let o = g.matmul(p, v)?;
    Ok(match spec.layout {
        AttentionLayout::Bhsd => o,
        AttentionLayout::Bshd => transpose(g, o, vec![0, 2, 1, 3])?,
        AttentionLayout::Packed => {
            let t = transpose(g, o, vec![0, 2, 1, 3])?;
            reshape(g, t, vec![b as i64, sq as i64, (h * dv) as i64])?
        }
    })
}
