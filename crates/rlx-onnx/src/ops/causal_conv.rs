//! ONNX CausalConvWithState (opset 27): the stateful causal depthwise 1-D convolution of
//! Mamba / Gated DeltaNet blocks, composed as Concat (past_state, or k − 1 zeros, before the
//! input) → depthwise Conv (+ bias) → optional SiLU, with present_state the last k − 1
//! positions of the padded input. Half precision is computed in f32 and cast back once, as the
//! operator's definition does.
use super::elementwise::cast_to;
use super::{Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{Activation as A, ConvSpec, DType, NodeId, Op};

pub(super) fn register(r: &mut Registry) {
    r.insert("CausalConvWithState", causal_conv);
}

fn reshape(c: &mut ImportCtx, x: NodeId, dims: &[usize]) -> Result<NodeId, OnnxError> {
    let shape = dims.iter().map(|&d| d as i64).collect();
    c.add(Op::Reshape { shape }, &[x])
}

fn causal_conv(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    for at in &n.attribute {
        let name = at.name.as_deref().unwrap_or("");
        if name != "activation" {
            return Err(c.unsupported(format!("attribute \"{name}\"")));
        }
    }
    let silu = match Attrs(n).s("activation").as_deref().unwrap_or("none") {
        "none" => false,
        "silu" | "swish" => true,
        other => return Err(c.unsupported(format!("activation \"{other}\""))),
    };
    if n.input.len() > 4 {
        return Err(c.unsupported(format!("{} inputs (at most 4)", n.input.len())));
    }
    let (x0, w0) = (c.input(n, 0)?, c.input(n, 1)?);
    let (bias, past) = (c.opt_input(n, 2)?, c.opt_input(n, 3)?);
    let xd = c.static_dims(x0)?;
    let wd = c.static_dims(w0)?;
    if xd.len() != 3 {
        return Err(c.err(format!("input {xd:?} is not [B, C, L]")));
    }
    let (b, ch, len) = (xd[0], xd[1], xd[2]);
    if wd.len() != 3 || wd[0] != ch || wd[1] != 1 || wd[2] == 0 {
        return Err(c.err(format!("weight {wd:?} is not [{ch}, 1, k] with k ≥ 1")));
    }
    let k = wd[2];
    let out_dt = c.dtype(x0)?;
    if !out_dt.is_float() {
        return Err(c.unsupported(format!("{out_dt:?} input")));
    }
    let dt = match out_dt {
        DType::F64 => DType::F64,
        _ => DType::F32,
    };
    let x = cast_to(c, x0, dt)?;
    let padded = match past {
        Some(p) => {
            let pd = c.static_dims(p)?;
            if pd != [b, ch, k - 1] {
                return Err(c.err(format!(
                    "past_state is {pd:?}, expected [{b}, {ch}, {}]",
                    k - 1
                )));
            }
            let p = cast_to(c, p, dt)?;
            if k == 1 {
                x
            } else {
                c.add(Op::Concat { axis: 2 }, &[p, x])?
            }
        }
        None if k == 1 => x,
        None => c.add(
            Op::Pad {
                pads: vec![[0, 0], [0, 0], [k - 1, 0]],
                value: 0.0,
            },
            &[x],
        )?,
    };
    // Depthwise: one group per channel, in the IR's 2-D form [B, C, 1, L] ⊛ [C, 1, k, 1]
    // (a 1-D conv keeps its length parameters at index 0).
    let spec = ConvSpec {
        kernel_size: [k, 1],
        stride: [1, 1],
        padding: [0, 0],
        dilation: [1, 1],
        groups: ch,
    };
    let xi = reshape(c, padded, &[b, ch, 1, len + k - 1])?;
    let w = cast_to(c, w0, dt)?;
    let wi = reshape(c, w, &[ch, 1, k, 1])?;
    let mut ins = vec![xi, wi];
    if let Some(bias) = bias {
        let bd = c.static_dims(bias)?;
        if bd != [ch] {
            return Err(c.err(format!("bias is {bd:?}, expected [{ch}]")));
        }
        ins.push(cast_to(c, bias, dt)?);
    }
    let y = c.add(Op::Conv(spec), &ins)?;
    let mut y = reshape(c, y, &[b, ch, len])?;
    if silu {
        y = c.add(Op::Activation(A::Silu), &[y])?;
    }
    let present = c.add(
        Op::Narrow {
            axis: 2,
            start: len,
            len: k - 1,
        },
        &[padded],
    )?;
    let state_dt = match past {
        Some(p) => c.dtype(p)?,
        None => out_dt,
    };
    Ok(Some(vec![
        cast_to(c, y, out_dt)?,
        cast_to(c, present, state_dt)?,
    ]))
}
