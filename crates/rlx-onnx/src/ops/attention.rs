//! ONNX Attention (opset 23/24) composed from MatMul, Softmax and elementwise ops: 3-D
//! `[B, S, H·D]` or 4-D `[B, H, S, D]` q/k/v, grouped-query heads (each KV head repeated for
//! its query heads), past key/value concatenated into the present outputs, boolean or additive
//! masks (padded to the key length), is_causal with the past offset, nonpad_kv_seqlen,
//! softcap, and the qk_matmul_output modes.
use super::{Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{Activation as A, BinaryOp as B, CompareOp as C, DType, Dim, HostTensor, NodeId, Op};

pub(super) fn register(r: &mut Registry) {
    r.insert("Attention", attention);
}

/// `[B, S, H·D]` → `[B, H, S, D]`.
fn heads_first(
    c: &mut ImportCtx,
    x: NodeId,
    heads: usize,
    what: &str,
) -> Result<NodeId, OnnxError> {
    let d = c.dims_of_rank(x, 3, what)?;
    if heads == 0 || d[2] % heads != 0 {
        return Err(c.err(format!("{heads} heads do not divide {d:?}")));
    }
    let shape = vec![
        d[0] as i64,
        d[1] as i64,
        heads as i64,
        (d[2] / heads) as i64,
    ];
    let r = c.add(Op::Reshape { shape }, &[x])?;
    c.add(
        Op::Transpose {
            perm: vec![0, 2, 1, 3],
        },
        &[r],
    )
}

/// Scores bias where `keep` is false: 0 where true, −inf where false.
fn bias_of(c: &mut ImportCtx, keep: NodeId, dt: DType) -> Result<NodeId, OnnxError> {
    let (z, ninf) = (c.scalar(0.0, dt)?, c.scalar(f64::NEG_INFINITY, dt)?);
    c.add(Op::Where, &[keep, z, ninf])
}

fn attention(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let a = Attrs(n);
    let (q0, k0, v0) = (c.input(n, 0)?, c.input(n, 1)?, c.input(n, 2)?);
    let mask = c.opt_input(n, 3)?;
    let (past_k, past_v) = (c.opt_input(n, 4)?, c.opt_input(n, 5)?);
    let nonpad = c.opt_input(n, 6)?;
    let three_d = c.rank(q0)? == 3;
    let dt = c.dtype(q0)?;
    let (mut q, mut k, mut v) = (q0, k0, v0);
    if three_d {
        let hq = a
            .i("q_num_heads")
            .ok_or_else(|| c.err("3-D inputs need q_num_heads"))?;
        let hkv = a
            .i("kv_num_heads")
            .ok_or_else(|| c.err("3-D inputs need kv_num_heads"))?;
        q = heads_first(c, q, hq.max(0) as usize, "Q")?;
        k = heads_first(c, k, hkv.max(0) as usize, "K")?;
        v = heads_first(c, v, hkv.max(0) as usize, "V")?;
    }
    let qd = c.dims_of_rank(q, 4, "Q")?;
    c.dims_of_rank(k, 4, "K")?;
    c.dims_of_rank(v, 4, "V")?;
    let head = qd[3];
    let past_len = match past_k {
        Some(p) => c.dims_of_rank(p, 4, "past_key")?[2],
        None => 0,
    };
    if let Some(p) = past_k {
        k = c.add(Op::Concat { axis: 2 }, &[p, k])?;
    }
    if let Some(p) = past_v {
        v = c.add(Op::Concat { axis: 2 }, &[p, v])?;
    }
    let (present_k, present_v) = (k, v);
    let kd = c.static_dims(k)?;
    let (hq, hkv, sq, skv) = (qd[1], kd[1], qd[2], kd[2]);
    if hq != hkv {
        if hkv == 0 || hq % hkv != 0 {
            return Err(c.err(format!("{hq} query heads for {hkv} KV heads")));
        }
        // Query head h reads KV head h / (hq / hkv): repeat each KV head in place.
        let rep = hq / hkv;
        let expand = |c: &mut ImportCtx, x: NodeId| -> Result<NodeId, OnnxError> {
            let d = c.static_dims(x)?;
            let r5 = vec![d[0] as i64, d[1] as i64, 1, d[2] as i64, d[3] as i64];
            let x5 = c.add(Op::Reshape { shape: r5 }, &[x])?;
            let e: Vec<Dim> = [d[0], d[1], rep, d[2], d[3]].map(Dim::Static).to_vec();
            let x5 = c.add(Op::Expand { shape: e }, &[x5])?;
            let back = vec![d[0] as i64, hq as i64, d[2] as i64, d[3] as i64];
            c.add(Op::Reshape { shape: back }, &[x5])
        };
        k = expand(c, k)?;
        v = expand(c, v)?;
    }
    let scale = match a.f("scale") {
        Some(s) => s as f64,
        None => 1.0 / (head as f64).sqrt(),
    };
    let kt = c.add(
        Op::Transpose {
            perm: vec![0, 1, 3, 2],
        },
        &[k],
    )?;
    let raw = c.add(Op::MatMul, &[q, kt])?;
    let sc = c.scalar(scale, dt)?;
    let mut qk = c.add(Op::Binary(B::Mul), &[raw, sc])?;
    let softcap = a.f_or("softcap", 0.0) as f64;
    if softcap > 0.0 {
        let cap = c.scalar(softcap, dt)?;
        let d = c.add(Op::Binary(B::Div), &[qk, cap])?;
        let t = c.add(Op::Activation(A::Tanh), &[d])?;
        qk = c.add(Op::Binary(B::Mul), &[t, cap])?;
    }
    // The additive bias: mask (padded to the key length), causal, non-padding lengths.
    let mut bias: Option<NodeId> = None;
    let mut add_bias = |c: &mut ImportCtx, b: NodeId| -> Result<(), OnnxError> {
        bias = Some(match bias {
            Some(x) => c.add(Op::Binary(B::Add), &[x, b])?,
            None => b,
        });
        Ok(())
    };
    if let Some(m) = mask {
        let md = c.static_dims(m)?;
        let mdt = c.dtype(m)?;
        let last = *md.last().ok_or_else(|| c.err("a 0-d mask"))?;
        let mut m = m;
        if last < skv {
            let mut pads = vec![[0, 0]; md.len()];
            pads[md.len() - 1] = [0, skv - last];
            let value = if mdt == DType::Bool {
                0.0
            } else {
                f64::NEG_INFINITY
            };
            m = c.add(Op::Pad { pads, value }, &[m])?;
        }
        let b = if mdt == DType::Bool {
            bias_of(c, m, dt)?
        } else {
            m
        };
        add_bias(c, b)?;
    }
    if a.i_or("is_causal", 0) != 0 {
        c.limit("a causal mask", sq.saturating_mul(skv))?;
        let mut keep = Vec::with_capacity(sq * skv);
        for i in 0..sq {
            for j in 0..skv {
                keep.push(j <= i + past_len);
            }
        }
        let keep = c.constant(HostTensor::from_bool(&[sq, skv], &keep))?;
        let b = bias_of(c, keep, dt)?;
        add_bias(c, b)?;
    }
    if let Some(len) = nonpad {
        let b = qd[0];
        c.limit("a key position table", skv)?;
        let iota: Vec<i64> = (0..skv as i64).collect();
        let iota = c.constant(HostTensor::from_i64(&[1, 1, 1, skv], &iota))?;
        let len = super::elementwise::cast_to(c, len, DType::I64)?;
        let len = c.add(
            Op::Reshape {
                shape: vec![b as i64, 1, 1, 1],
            },
            &[len],
        )?;
        let keep = c.add(Op::Compare(C::Lt), &[iota, len])?;
        let bb = bias_of(c, keep, dt)?;
        add_bias(c, bb)?;
    }
    let with_bias = match bias {
        Some(b) => c.add(Op::Binary(B::Add), &[qk, b])?,
        None => qk,
    };
    let p = c.add(Op::Softmax { axis: -1 }, &[with_bias])?;
    let mut y = c.add(Op::MatMul, &[p, v])?;
    if three_d {
        let t = c.add(
            Op::Transpose {
                perm: vec![0, 2, 1, 3],
            },
            &[y],
        )?;
        let d = c.static_dims(t)?;
        y = c.add(
            Op::Reshape {
                shape: vec![d[0] as i64, d[1] as i64, -1],
            },
            &[t],
        )?;
    }
    let qk_out = match a.i_or("qk_matmul_output_mode", 0) {
        0 | 1 => qk,
        2 => with_bias,
        3 => p,
        m => return Err(c.unsupported(format!("qk_matmul_output_mode {m}"))),
    };
    Ok(Some(vec![y, present_k, present_v, qk_out]))
}
