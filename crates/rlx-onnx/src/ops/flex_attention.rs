//! ai.onnx.preview FlexAttention (version 1): scaled dot-product attention over rank-4
//! `[B, H, L, E]` inputs with the `score_mod` (after Q·Kᵀ·scale) and `prob_mod` (after the
//! softmax) customisation subgraphs, each translated inline into the same graph as Scan / If
//! bodies are (their one input bound to the scores / probabilities; their initializers and
//! outer-scope names resolve through the shared value map). Grouped-query heads: query head
//! h reads K/V head h / (Hq / Hkv), done by folding each group's queries into one KV head's
//! rows rather than repeating K and V. Half precision is computed in f32, f64 in f64.
use super::control::inline;
use super::elementwise::cast_to;
use super::{one, Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{BinaryOp as B, DType, NodeId, Op};

pub(super) fn register(r: &mut Registry) {
    r.insert("ai.onnx.preview::FlexAttention", flex_attention);
}

fn reshape(c: &mut ImportCtx, x: NodeId, dims: &[usize]) -> Result<NodeId, OnnxError> {
    let shape = dims.iter().map(|&d| d as i64).collect();
    c.add(Op::Reshape { shape }, &[x])
}

/// Run the optional subgraph attribute `name` on `x`, which it must map to the same shape.
fn modify(c: &mut ImportCtx, n: &NodeProto, name: &str, x: NodeId) -> Result<NodeId, OnnxError> {
    let Some(g) = Attrs(n).g(name) else {
        return Ok(x);
    };
    if g.input.len() != 1 || g.output.len() != 1 {
        return Err(c.err(format!(
            "{name} takes {} inputs and gives {} outputs (one of each expected)",
            g.input.len(),
            g.output.len()
        )));
    }
    let want = c.static_dims(x)?;
    let dt = c.dtype(x)?;
    let y = inline(c, n, g, &[x])?[0];
    let got = c.static_dims(y)?;
    if got != want {
        return Err(c.err(format!("{name} maps {want:?} to {got:?}")));
    }
    cast_to(c, y, dt)
}

fn flex_attention(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    for at in &n.attribute {
        let name = at.name.as_deref().unwrap_or("");
        if !matches!(name, "scale" | "score_mod" | "prob_mod") {
            return Err(c.unsupported(format!("attribute \"{name}\"")));
        }
    }
    if n.input.len() > 3 {
        return Err(c.unsupported(format!("{} inputs (3 expected)", n.input.len())));
    }
    let (q0, k0, v0) = (c.input(n, 0)?, c.input(n, 1)?, c.input(n, 2)?);
    let (qd, kd, vd) = (c.static_dims(q0)?, c.static_dims(k0)?, c.static_dims(v0)?);
    if qd.len() != 4 || kd.len() != 4 || vd.len() != 4 {
        return Err(c.err(format!("Q {qd:?}, K {kd:?}, V {vd:?} must all be rank 4")));
    }
    let (b, hq, l, e) = (qd[0], qd[1], qd[2], qd[3]);
    let (hkv, s, ev) = (kd[1], kd[2], vd[3]);
    if kd[0] != b || vd[0] != b || kd[3] != e || vd[1] != hkv || vd[2] != s {
        return Err(c.err(format!("Q {qd:?}, K {kd:?}, V {vd:?} do not agree")));
    }
    if hkv == 0 || hq % hkv != 0 {
        return Err(c.err(format!("{hq} query heads for {hkv} K/V heads")));
    }
    let g = hq / hkv;
    let out_dt = c.dtype(q0)?;
    if !out_dt.is_float() {
        return Err(c.unsupported(format!("{out_dt:?} inputs")));
    }
    let dt = if out_dt == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    let (q, k, v) = (
        cast_to(c, q0, dt)?,
        cast_to(c, k0, dt)?,
        cast_to(c, v0, dt)?,
    );
    // Each KV head's group of query heads as one block of G·L rows.
    let qg = reshape(c, q, &[b, hkv, g * l, e])?;
    let kt = c.add(
        Op::Transpose {
            perm: vec![0, 1, 3, 2],
        },
        &[k],
    )?;
    let raw = c.add(Op::MatMul, &[qg, kt])?;
    let raw = reshape(c, raw, &[b, hq, l, s])?;
    let scale = match Attrs(n).f("scale") {
        Some(v) => v as f64,
        None => 1.0 / (e as f64).sqrt(),
    };
    let sc = c.scalar(scale, dt)?;
    let scores = c.add(Op::Binary(B::Mul), &[raw, sc])?;
    let scores = modify(c, n, "score_mod", scores)?;
    let p = c.add(Op::Softmax { axis: -1 }, &[scores])?;
    let p = modify(c, n, "prob_mod", p)?;
    let pg = reshape(c, p, &[b, hkv, g * l, s])?;
    let y = c.add(Op::MatMul, &[pg, v])?;
    let y = reshape(c, y, &[b, hq, l, ev])?;
    one(cast_to(c, y, out_dt)?)
}
