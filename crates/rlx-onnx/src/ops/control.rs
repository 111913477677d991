//! Control flow unrolled at import: Scan over a static sequence length, Loop with a trip
//! count and condition known at import, If (one branch when the condition is a constant,
//! else both branches joined by Where when their outputs agree in shape). A body is
//! translated inline, its formal inputs bound to the current values; outer-scope names
//! resolve through the shared value map.
use super::{registry, translate, Translated};
use crate::attrs::Attrs;
use crate::proto::{GraphProto, NodeProto};
use crate::tensor::decode_tensor;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{DType, HostTensor, NodeId, Op};

pub(super) fn register(r: &mut super::Registry) {
    r.insert("Scan", scan);
    r.insert("Loop", loop_);
    r.insert("If", if_);
}

/// The most iterations a Scan or Loop is unrolled to.
const MAX_UNROLL: usize = 4096;

/// Translate `body` with its inputs bound to `args`; its outputs, in order.
pub(super) fn inline(
    c: &mut ImportCtx,
    n: &NodeProto,
    body: &GraphProto,
    args: &[NodeId],
) -> Result<Vec<NodeId>, OnnxError> {
    if body.input.len() != args.len() {
        return Err(c.err(format!(
            "the body takes {} inputs, {} given",
            body.input.len(),
            args.len()
        )));
    }
    for t in &body.initializer {
        let v = decode_tensor(t, None)?;
        c.define_init(t.name.as_deref().unwrap_or(""), v);
    }
    for (v, &a) in body.input.iter().zip(args) {
        c.define(v.name.as_deref().unwrap_or(""), a);
    }
    let reg = registry();
    let opsets = c.opsets.clone();
    for node in &body.node {
        translate(c, &reg, node, &opsets)?;
    }
    let mut outs = vec![];
    for v in &body.output {
        outs.push(c.value(v.name.as_deref().unwrap_or(""))?);
    }
    // Messages after the body name the control-flow node again.
    c.begin(n);
    Ok(outs)
}

fn body<'a>(c: &ImportCtx, n: &'a NodeProto, name: &str) -> Result<&'a GraphProto, OnnxError> {
    Attrs(n)
        .g(name)
        .ok_or_else(|| c.err(format!("needs graph attribute `{name}`")))
}

/// x with axis `ax` (of size 1) removed.
fn squeeze(c: &mut ImportCtx, x: NodeId, ax: usize) -> Result<NodeId, OnnxError> {
    let mut d: Vec<i64> = c.static_dims(x)?.iter().map(|&v| v as i64).collect();
    d.remove(ax);
    c.add(Op::Reshape { shape: d }, &[x])
}

/// The per-iteration values stacked along a new axis `axis` (−r−1..=r of one element).
fn stack(c: &mut ImportCtx, xs: &[NodeId], axis: i64) -> Result<NodeId, OnnxError> {
    let Some(&first) = xs.first() else {
        return Err(c.unsupported("a scan output of zero iterations"));
    };
    let r = c.rank(first)?;
    let ax = rlx_ir::normalize_axis(axis, r + 1).map_err(|e| c.err(e))?;
    let mut parts = vec![];
    for &x in xs {
        let mut d: Vec<i64> = c.static_dims(x)?.iter().map(|&v| v as i64).collect();
        d.insert(ax, 1);
        parts.push(c.add(Op::Reshape { shape: d }, &[x])?);
    }
    if parts.len() == 1 {
        return Ok(parts[0]);
    }
    c.add(Op::Concat { axis: ax as i64 }, &parts)
}

fn scan(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    if c.opset < 9 {
        return Err(c.unsupported("opset 8 Scan (batched, with sequence_lens)"));
    }
    let g = body(c, n, "body")?;
    let a = Attrs(n);
    let m = a
        .i("num_scan_inputs")
        .ok_or_else(|| c.err("needs num_scan_inputs"))?;
    let m = usize::try_from(m).map_err(|_| c.err("num_scan_inputs < 0"))?;
    let xs = c.inputs(n)?;
    if m == 0 || m > xs.len() {
        return Err(c.err(format!("{m} scan inputs of {} inputs", xs.len())));
    }
    let ns = xs.len() - m;
    let list =
        |name: &str, len: usize| -> Vec<i64> { a.ints(name).map_or(vec![0; len], <[i64]>::to_vec) };
    let (in_axes, in_dirs) = (list("scan_input_axes", m), list("scan_input_directions", m));
    let k = g.output.len().saturating_sub(ns);
    let (out_axes, out_dirs) = (
        list("scan_output_axes", k),
        list("scan_output_directions", k),
    );
    if in_axes.len() != m || in_dirs.len() != m || out_axes.len() != k || out_dirs.len() != k {
        return Err(c.err("scan axes / directions do not match the inputs and outputs"));
    }
    let mut axes = vec![];
    let mut len = None;
    for (j, &x) in xs[ns..].iter().enumerate() {
        let d = c.static_dims(x)?;
        let ax = rlx_ir::normalize_axis(in_axes[j], d.len()).map_err(|e| c.err(e))?;
        if len.is_some_and(|l| l != d[ax]) {
            return Err(c.err("scan inputs differ in sequence length"));
        }
        len = Some(d[ax]);
        axes.push(ax);
    }
    let t_len = len.unwrap_or(0);
    if t_len > MAX_UNROLL {
        return Err(c.unsupported(format!(
            "a Scan of {t_len} steps (unrolled up to {MAX_UNROLL})"
        )));
    }
    let mut states = xs[..ns].to_vec();
    let mut per: Vec<Vec<NodeId>> = vec![vec![]; k];
    for t in 0..t_len {
        let mut args = states.clone();
        for (j, &x) in xs[ns..].iter().enumerate() {
            let pos = if in_dirs[j] != 0 { t_len - 1 - t } else { t };
            let op = Op::Narrow {
                axis: axes[j] as i64,
                start: pos,
                len: 1,
            };
            let s = c.add(op, &[x])?;
            args.push(squeeze(c, s, axes[j])?);
        }
        let outs = inline(c, n, g, &args)?;
        if outs.len() != ns + k {
            return Err(c.err("the body's outputs do not match the states"));
        }
        states = outs[..ns].to_vec();
        for (p, &o) in per.iter_mut().zip(&outs[ns..]) {
            p.push(o);
        }
    }
    let mut result = states;
    for (j, mut p) in per.into_iter().enumerate() {
        if out_dirs[j] != 0 {
            p.reverse();
        }
        result.push(stack(c, &p, out_axes[j])?);
    }
    Ok(Some(result))
}

/// The one Bool of a condition known at import.
fn known_bool(c: &ImportCtx, id: NodeId) -> Option<bool> {
    let v = c.known(id)?.to_f64_vec();
    (v.len() == 1).then(|| v[0] != 0.0)
}

fn loop_(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let g = body(c, n, "body")?;
    let max = match c.const_input(n, 0)? {
        Some(t) => match t.to_i64_vec()[..] {
            [v] => Some(v.max(0) as usize),
            _ => return Err(c.err("M must hold one integer")),
        },
        None => None,
    };
    let mut cond = match c.const_input(n, 1)? {
        Some(t) => t.to_f64_vec().first().is_some_and(|&v| v != 0.0),
        None => true,
    };
    let mut carried = vec![];
    for i in 2..n.input.len() {
        carried.push(c.input(n, i)?);
    }
    let nc = carried.len();
    let k = g.output.len().saturating_sub(1 + nc);
    let mut per: Vec<Vec<NodeId>> = vec![vec![]; k];
    let mut i = 0usize;
    while cond && max.is_none_or(|m| i < m) {
        if i >= MAX_UNROLL {
            return Err(c.unsupported(format!("a Loop of over {MAX_UNROLL} iterations")));
        }
        let it = c.constant(HostTensor::from_i64(&[], &[i as i64]))?;
        let cv = c.scalar(1.0, DType::Bool)?;
        let mut args = vec![it, cv];
        args.extend(&carried);
        let outs = inline(c, n, g, &args)?;
        if outs.len() != 1 + nc + k {
            return Err(c.err("the body's outputs do not match the loop-carried values"));
        }
        cond = known_bool(c, outs[0])
            .ok_or_else(|| c.unsupported("a Loop whose condition is only known at run time"))?;
        carried = outs[1..1 + nc].to_vec();
        for (p, &o) in per.iter_mut().zip(&outs[1 + nc..]) {
            p.push(o);
        }
        i += 1;
    }
    let mut result = carried;
    for p in per {
        result.push(stack(c, &p, 0)?);
    }
    Ok(Some(result))
}

fn if_(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let cond = c.input(n, 0)?;
    let (tb, eb) = (body(c, n, "then_branch")?, body(c, n, "else_branch")?);
    if let Some(b) = known_bool(c, cond) {
        return Ok(Some(inline(c, n, if b { tb } else { eb }, &[])?));
    }
    let t = inline(c, n, tb, &[])?;
    let e = inline(c, n, eb, &[])?;
    let same = t.len() == e.len()
        && t.iter()
            .zip(&e)
            .all(|(&a, &b)| c.shape(a).ok() == c.shape(b).ok());
    if !same {
        // The branches disagree in shape: the condition must be known (specialised).
        let v = c
            .const_input(n, 0)?
            .ok_or_else(|| c.err("needs input 0 (cond)"))?;
        let b = v.to_f64_vec().first().is_some_and(|&x| x != 0.0);
        return Ok(Some(if b { t } else { e }));
    }
    let k = c.add(Op::Reshape { shape: vec![] }, &[cond])?;
    let mut outs = vec![];
    for (a, b) in t.into_iter().zip(e) {
        outs.push(c.add(Op::Where, &[k, a, b])?);
    }
    Ok(Some(outs))
}
