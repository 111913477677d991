//! ONNX RotaryEmbedding (opset 23) composed from Gather (cos / sin rows by position id),
//! Slice / Narrow, elementwise math and Concat: 3-D `[B, S, H·D]` (num_heads) or 4-D
//! `[B, H, S, D]` input, half-split or interleaved pairs, partial rotation
//! (rotary_embedding_dim).
use super::{one, Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{BinaryOp as B, NodeId, Op};

pub(super) fn register(r: &mut Registry) {
    r.insert("RotaryEmbedding", rotary);
}

fn narrow(c: &mut ImportCtx, x: NodeId, start: usize, len: usize) -> Result<NodeId, OnnxError> {
    c.add(
        Op::Narrow {
            axis: -1,
            start,
            len,
        },
        &[x],
    )
}

/// Every second element of the last axis from `first`.
fn strided(c: &mut ImportCtx, x: NodeId, first: i64) -> Result<NodeId, OnnxError> {
    let op = Op::Slice {
        axes: vec![-1],
        starts: vec![first],
        ends: vec![i64::MAX],
        steps: vec![2],
    };
    c.add(op, &[x])
}

fn rotary(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let a = Attrs(n);
    let x0 = c.input(n, 0)?;
    let (mut cos, mut sin) = (c.input(n, 1)?, c.input(n, 2)?);
    let d0 = c.static_dims(x0)?;
    // Work in [B, S, H, D].
    let x = match d0.len() {
        4 => c.add(
            Op::Transpose {
                perm: vec![0, 2, 1, 3],
            },
            &[x0],
        )?,
        3 => {
            let h = a.i_or("num_heads", 0);
            if h <= 0 || d0[2] % h as usize != 0 {
                return Err(c.err(format!("num_heads {h} for input {d0:?}")));
            }
            let shape = vec![d0[0] as i64, d0[1] as i64, h, (d0[2] / h as usize) as i64];
            c.add(Op::Reshape { shape }, &[x0])?
        }
        r => return Err(c.err(format!("rank-{r} input"))),
    };
    let xd = c.static_dims(x)?;
    let head = xd[3];
    let rot = match a.i_or("rotary_embedding_dim", 0) {
        0 => head,
        r if r > 0 && (r as usize) <= head && r % 2 == 0 => r as usize,
        r => return Err(c.err(format!("rotary_embedding_dim {r} for head size {head}"))),
    };
    if let Some(pos) = c.opt_input(n, 3)? {
        cos = c.add(Op::Gather { axis: 0 }, &[cos, pos])?;
        sin = c.add(Op::Gather { axis: 0 }, &[sin, pos])?;
    }
    // [B, S, rot/2] → [B, S, 1, rot/2]
    let unsq = |c: &mut ImportCtx, v: NodeId| -> Result<NodeId, OnnxError> {
        let d = c.static_dims(v)?;
        if d.len() != 3 || d[2] != rot / 2 {
            return Err(c.err(format!("cos / sin cache {d:?} for rotary dim {rot}")));
        }
        c.add(
            Op::Reshape {
                shape: vec![d[0] as i64, d[1] as i64, 1, d[2] as i64],
            },
            &[v],
        )
    };
    let (cos, sin) = (unsq(c, cos)?, unsq(c, sin)?);
    let xr = if rot == head {
        x
    } else {
        narrow(c, x, 0, rot)?
    };
    let interleaved = a.i_or("interleaved", 0) != 0;
    let (x1, x2) = if interleaved {
        (strided(c, xr, 0)?, strided(c, xr, 1)?)
    } else {
        (narrow(c, xr, 0, rot / 2)?, narrow(c, xr, rot / 2, rot / 2)?)
    };
    let mul = |c: &mut ImportCtx, p: NodeId, q: NodeId| c.add(Op::Binary(B::Mul), &[p, q]);
    let (c1, s2) = (mul(c, cos, x1)?, mul(c, sin, x2)?);
    let real = c.add(Op::Binary(B::Sub), &[c1, s2])?;
    let (s1, c2) = (mul(c, sin, x1)?, mul(c, cos, x2)?);
    let imag = c.add(Op::Binary(B::Add), &[s1, c2])?;
    let rotated = if interleaved {
        // Pairs back in place: [.., rot/2, 2] → [.., rot].
        let mut shape: Vec<i64> = xd[..3].iter().map(|&v| v as i64).collect();
        shape.extend([(rot / 2) as i64, 1]);
        let r5 = c.add(
            Op::Reshape {
                shape: shape.clone(),
            },
            &[real],
        )?;
        let i5 = c.add(Op::Reshape { shape }, &[imag])?;
        let p = c.add(Op::Concat { axis: -1 }, &[r5, i5])?;
        let mut back: Vec<i64> = xd[..3].iter().map(|&v| v as i64).collect();
        back.push(rot as i64);
        c.add(Op::Reshape { shape: back }, &[p])?
    } else {
        c.add(Op::Concat { axis: -1 }, &[real, imag])?
    };
    let y = if rot == head {
        rotated
    } else {
        let rest = narrow(c, x, rot, head - rot)?;
        c.add(Op::Concat { axis: -1 }, &[rotated, rest])?
    };
    if d0.len() == 4 {
        return one(c.add(
            Op::Transpose {
                perm: vec![0, 2, 1, 3],
            },
            &[y],
        )?);
    }
    one(c.add(
        Op::Reshape {
            shape: d0.iter().map(|&v| v as i64).collect(),
        },
        &[y],
    )?)
}
