//! ONNX LinearAttention (opset 27): the recurrent matrix-state attention of linear
//! transformers, DeltaNet and Gated DeltaNet, composed from Reshape / Transpose / Narrow,
//! elementwise math and MatMul. Packed `[B, T, H·D]` query / key / value, grouped-query heads
//! (query head h reads KV state h / (Hq / Hkv)), the four update rules (linear, gated, delta,
//! gated_delta), per-key-channel or per-head log-space decay, per-head or shared beta, the
//! optional erase gate on the delta retrieval key, past_state in and present_state out.
//!
//! The recurrence is unrolled over the sequence length, which must be static at import; it
//! is bounded by `MAX_STEPS` so a huge declared length is an error, not a huge graph. Half
//! precision inputs are computed in f32 (the state accumulates over every step) and the
//! results cast back, as the operator's definition does.
use super::elementwise::cast_to;
use super::{Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{Activation as A, BinaryOp as B, DType, HostTensor, NodeId, Op};

/// The most time steps unrolled into the graph (each step is ~16 IR nodes).
const MAX_STEPS: usize = 4096;

pub(super) fn register(r: &mut Registry) {
    r.insert("LinearAttention", linear_attention);
}

fn reshape(c: &mut ImportCtx, x: NodeId, dims: &[usize]) -> Result<NodeId, OnnxError> {
    let shape = dims.iter().map(|&d| d as i64).collect();
    c.add(Op::Reshape { shape }, &[x])
}

fn transpose(c: &mut ImportCtx, x: NodeId, perm: &[usize]) -> Result<NodeId, OnnxError> {
    c.add(
        Op::Transpose {
            perm: perm.to_vec(),
        },
        &[x],
    )
}

/// Step `t` of a time-major-at-`axis` tensor, reshaped to `dims`.
fn step(
    c: &mut ImportCtx,
    x: NodeId,
    axis: i64,
    t: usize,
    dims: &[usize],
) -> Result<NodeId, OnnxError> {
    let s = c.add(
        Op::Narrow {
            axis,
            start: t,
            len: 1,
        },
        &[x],
    )?;
    reshape(c, s, dims)
}

/// `[B, T, H·X]` → `[B, H, T, X]` in the compute dtype, checking the packed width.
fn per_head(
    c: &mut ImportCtx,
    x: NodeId,
    what: &str,
    (b, t, h): (usize, usize, usize),
    widths: &[usize],
    dt: DType,
) -> Result<(NodeId, usize), OnnxError> {
    let d = c.static_dims(x)?;
    let ok = d.len() == 3 && d[0] == b && d[1] == t && widths.iter().any(|&w| w * h == d[2]);
    if !ok {
        let want: Vec<String> = widths
            .iter()
            .map(|w| format!("[{b}, {t}, {}]", w * h))
            .collect();
        return Err(c.err(format!("{what} is {d:?}, expected {}", want.join(" or "))));
    }
    let x = cast_to(c, x, dt)?;
    let w = d[2] / h;
    let r = reshape(c, x, &[b, t, h, w])?;
    Ok((transpose(c, r, &[0, 2, 1, 3])?, w))
}

fn linear_attention(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let a = Attrs(n);
    for at in &n.attribute {
        let name = at.name.as_deref().unwrap_or("");
        if !matches!(
            name,
            "q_num_heads" | "kv_num_heads" | "scale" | "update_rule" | "chunk_size"
        ) {
            return Err(c.unsupported(format!("attribute \"{name}\"")));
        }
    }
    let rule = a.s("update_rule").unwrap_or_else(|| "gated_delta".into());
    let (gating, delta) = match rule.as_str() {
        "linear" => (false, false),
        "gated" => (true, false),
        "delta" => (false, true),
        "gated_delta" => (true, true),
        r => return Err(c.unsupported(format!("update_rule \"{r}\""))),
    };
    let heads = |name: &str| match a.i(name) {
        Some(h) if h > 0 => Ok(h as usize),
        h => Err(c.err(format!("{name} must be a positive integer, got {h:?}"))),
    };
    let (hq, hkv) = (heads("q_num_heads")?, heads("kv_num_heads")?);
    if hq % hkv != 0 {
        return Err(c.err(format!(
            "q_num_heads {hq} is not a multiple of kv_num_heads {hkv}"
        )));
    }
    let group = hq / hkv;
    let (q0, k0, v0) = (c.input(n, 0)?, c.input(n, 1)?, c.input(n, 2)?);
    let past = c.opt_input(n, 3)?;
    let (decay, beta, erase) = (c.opt_input(n, 4)?, c.opt_input(n, 5)?, c.opt_input(n, 6)?);
    if gating != decay.is_some() {
        let need = if gating { "requires" } else { "takes no" };
        return Err(c.err(format!("update_rule \"{rule}\" {need} decay (input 4)")));
    }
    if delta != beta.is_some() {
        let need = if delta { "requires" } else { "takes no" };
        return Err(c.err(format!("update_rule \"{rule}\" {need} beta (input 5)")));
    }
    if erase.is_some() && !delta {
        return Err(c.err(format!(
            "update_rule \"{rule}\" takes no erase_gate (input 6)"
        )));
    }
    if n.input.len() > 7 {
        return Err(c.unsupported(format!("{} inputs (at most 7)", n.input.len())));
    }
    let qd = c.static_dims(q0)?;
    if qd.len() != 3 || qd[2] % hq != 0 {
        return Err(c.err(format!("query {qd:?} is not [B, T, {hq}·d_k]")));
    }
    let (b, t, dk) = (qd[0], qd[1], qd[2] / hq);
    if t == 0 || t > MAX_STEPS {
        return Err(c.unsupported(format!(
            "sequence length {t} (the recurrence is unrolled at import: 1 to {MAX_STEPS} steps)"
        )));
    }
    let out_dt = c.dtype(q0)?;
    if !out_dt.is_float() {
        return Err(c.unsupported(format!("{out_dt:?} query")));
    }
    // Half precision is widened: the state is a running sum over every step.
    let dt = if out_dt == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    let vd = c.static_dims(v0)?;
    if vd.len() != 3 || vd[2] % hkv != 0 {
        return Err(c.err(format!("value {vd:?} is not [B, T, {hkv}·d_v]")));
    }
    let dv = vd[2] / hkv;
    let bth = (b, t, hkv);
    let (k, _) = per_head(c, k0, "key", bth, &[dk], dt)?;
    let (v, _) = per_head(c, v0, "value", bth, &[dv], dt)?;
    // Query heads grouped by the KV head they read: [B, Hkv, G, T, d_k].
    let q = {
        let q = cast_to(c, q0, dt)?;
        let r = reshape(c, q, &[b, t, hkv, group, dk])?;
        transpose(c, r, &[0, 2, 3, 1, 4])?
    };
    // exp(decay) once for every step: [B, Hkv, T, d_k or 1].
    let gate = match decay {
        Some(g) => {
            let (g, w) = per_head(c, g, "decay", bth, &[dk, 1], dt)?;
            Some((c.add(Op::Activation(A::Exp), &[g])?, w))
        }
        None => None,
    };
    let beta = match beta {
        Some(x) => {
            let bd = c.static_dims(x)?;
            let hb = if bd.last() == Some(&1) { 1 } else { hkv };
            let (x, _) = per_head(c, x, "beta", (b, t, hb), &[1], dt)?;
            Some((x, hb))
        }
        None => None,
    };
    let erase = match erase {
        Some(e) => Some(per_head(c, e, "erase_gate", bth, &[dk], dt)?.0),
        None => None,
    };
    let state_dt = match past {
        Some(p) => c.dtype(p)?,
        None => out_dt,
    };
    let mut s = match past {
        Some(p) => {
            let pd = c.static_dims(p)?;
            if pd != [b, hkv, dk, dv] {
                return Err(c.err(format!(
                    "past_state is {pd:?}, expected [{b}, {hkv}, {dk}, {dv}]"
                )));
            }
            cast_to(c, p, dt)?
        }
        None => {
            c.limit("a zero state", b * hkv * dk * dv)?;
            c.constant(HostTensor::from_f64_as(
                &[b, hkv, dk, dv],
                &vec![0.0; b * hkv * dk * dv],
                dt,
            ))?
        }
    };
    let mut outs = Vec::with_capacity(t);
    for i in 0..t {
        let k_row = step(c, k, 2, i, &[b, hkv, 1, dk])?;
        let k_col = reshape(c, k_row, &[b, hkv, dk, 1])?;
        let mut write = step(c, v, 2, i, &[b, hkv, 1, dv])?;
        if let Some((g, w)) = gate {
            // Decay along d_k: a [d_k, 1] (or [1, 1]) column scales the state's rows.
            let g = step(c, g, 2, i, &[b, hkv, w, 1])?;
            s = c.add(Op::Binary(B::Mul), &[s, g])?;
        }
        if let Some((beta, hb)) = beta {
            let probe = match erase {
                Some(e) => {
                    let e = step(c, e, 2, i, &[b, hkv, 1, dk])?;
                    c.add(Op::Binary(B::Mul), &[e, k_row])?
                }
                None => k_row,
            };
            // What the state recalls for this key, S^T k, as a row [1, d_v].
            let recalled = c.add(Op::MatMul, &[probe, s])?;
            let diff = c.add(Op::Binary(B::Sub), &[write, recalled])?;
            let bt = step(c, beta, 2, i, &[b, hb, 1, 1])?;
            write = c.add(Op::Binary(B::Mul), &[bt, diff])?;
        }
        let outer = c.add(Op::Binary(B::Mul), &[k_col, write])?;
        s = c.add(Op::Binary(B::Add), &[s, outer])?;
        let q_t = step(c, q, 3, i, &[b, hkv, group, dk])?;
        let o = c.add(Op::MatMul, &[q_t, s])?;
        outs.push(reshape(c, o, &[b, hkv, group, 1, dv])?);
    }
    let o = if outs.len() == 1 {
        outs[0]
    } else {
        c.add(Op::Concat { axis: 3 }, &outs)?
    };
    let o = transpose(c, o, &[0, 3, 1, 2, 4])?;
    let o = reshape(c, o, &[b, t, hq * dv])?;
    let scale = match a.f("scale") {
        Some(s) if s != 0.0 => s as f64,
        _ => 1.0 / (dk as f64).sqrt(),
    };
    let sc = c.scalar(scale, dt)?;
    let o = c.add(Op::Binary(B::Mul), &[o, sc])?;
    let y = cast_to(c, o, out_dt)?;
    let present = cast_to(c, s, state_dt)?;
    Ok(Some(vec![y, present]))
}
