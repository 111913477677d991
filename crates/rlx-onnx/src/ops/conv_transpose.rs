//! ConvTranspose (1-D and 2-D) as a Conv: the input with stride−1 zeros between elements
//! (Reshape + Pad + Reshape), padded by dilation·(k−1) − pads (a negative amount crops),
//! convolved at stride 1 with the spatially flipped, in/out-swapped weights (per group).
use super::{one, Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{BinaryOp as B, ConvSpec, Op};

pub(super) fn register(r: &mut Registry) {
    r.insert("ConvTranspose", conv_transpose);
}

fn ints(c: &ImportCtx, n: &NodeProto, name: &str, k: usize, d: i64) -> Result<Vec<i64>, OnnxError> {
    match Attrs(n).ints(name) {
        Some(v) if v.len() == k && v.iter().all(|&x| (0..1 << 24).contains(&x)) => Ok(v.to_vec()),
        Some(v) => Err(c.err(format!("{name} {v:?} for {k} spatial dims"))),
        None => Ok(vec![d; k]),
    }
}

fn conv_transpose(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (x0, w0) = (c.input(n, 0)?, c.input(n, 1)?);
    let bias = c.opt_input(n, 2)?;
    let xd0 = c.static_dims(x0)?;
    let wd0 = c.static_dims(w0)?;
    if !(xd0.len() == 3 || xd0.len() == 4) || wd0.len() != xd0.len() {
        return Err(c.unsupported(format!("a {}-D ConvTranspose", xd0.len().saturating_sub(2))));
    }
    let one_d = xd0.len() == 3;
    // Work in 2-D: a 1-D op is [N,C,1,L] with kernel [1,k].
    let (x, w) = if one_d {
        let xs = vec![xd0[0] as i64, xd0[1] as i64, 1, xd0[2] as i64];
        let ws = vec![wd0[0] as i64, wd0[1] as i64, 1, wd0[2] as i64];
        (
            c.add(Op::Reshape { shape: xs }, &[x0])?,
            c.add(Op::Reshape { shape: ws }, &[w0])?,
        )
    } else {
        (x0, w0)
    };
    let k = xd0.len() - 2;
    let lift = |v: Vec<i64>, fill: i64| if one_d { vec![fill, v[0]] } else { v };
    let lift_pads = |v: Vec<i64>| if one_d { vec![0, v[0], 0, v[1]] } else { v };
    let stride = lift(ints(c, n, "strides", k, 1)?, 1);
    let dil = lift(ints(c, n, "dilations", k, 1)?, 1);
    let opad = lift(ints(c, n, "output_padding", k, 0)?, 0);
    let xd = c.static_dims(x)?;
    let wd = c.static_dims(w)?;
    let groups = Attrs(n).i_or("group", 1).max(1) as usize;
    let (cin, m_per, kh, kw) = (wd[0], wd[1], wd[2] as i64, wd[3] as i64);
    if cin != xd[1] || cin % groups != 0 || stride.iter().chain(&dil).any(|&v| v < 1) {
        return Err(c.err(format!("W {wd:?} for x {xd:?}, group {groups}")));
    }
    let kern = [kh, kw];
    // Attributes a file may set to anything: bounded so that the i64 geometry below (products
    // of a dim and a stride plus a few terms) cannot overflow.
    const MAX: i64 = 1 << 24;
    let big = |v: &[i64]| v.iter().any(|&x| !(-MAX..=MAX).contains(&x));
    if big(&stride) || big(&dil) || big(&opad) || xd.iter().chain(&wd).any(|&d| d > 1 << 30) {
        return Err(c.err(format!(
            "strides {stride:?}, dilations {dil:?}, output_padding {opad:?} for x {xd:?}, W {wd:?}"
        )));
    }
    let ext: Vec<i64> = (0..2).map(|i| dil[i] * (kern[i] - 1) + 1).collect();
    let auto = Attrs(n).s("auto_pad").unwrap_or_else(|| "NOTSET".into());
    let out_shape = match Attrs(n).ints("output_shape") {
        Some(v) if v.len() < k => {
            return Err(c.err(format!("output_shape {v:?} for {k} spatial dims")))
        }
        Some(v) => Some(lift(v[v.len() - k..].to_vec(), 1)),
        None => None,
    };
    let pads: Vec<i64> = if out_shape.is_some() || auto.starts_with("SAME") {
        let mut p = vec![0; 4];
        for i in 0..2 {
            let input = xd[2 + i] as i64;
            let want = match &out_shape {
                Some(o) if !(0..=MAX << 6).contains(&o[i]) => {
                    return Err(c.err(format!("output_shape {o:?}")))
                }
                Some(o) => o[i],
                None => input * stride[i],
            };
            let total = stride[i] * (input - 1) + opad[i] + ext[i] - want;
            // A larger output_shape than the natural one grows the end (negative padding).
            let (b, e) = if total < 0 {
                (0, total)
            } else if auto == "SAME_UPPER" {
                (total / 2, total - total / 2)
            } else {
                (total - total / 2, total / 2)
            };
            p[i] = b;
            p[i + 2] = e;
        }
        p
    } else {
        lift_pads(ints(c, n, "pads", 2 * k, 0)?)
    };
    if big(&pads) {
        return Err(c.err(format!("pads {pads:?}")));
    }
    // Zeros between input elements: [N,C,H,1,W,1] padded to [N,C,H,sh,W,sw], cropped.
    let mut xi = x;
    if stride != [1, 1] {
        let (h, wl) = (xd[2] as i64, xd[3] as i64);
        let r6 = vec![xd[0] as i64, xd[1] as i64, h, 1, wl, 1];
        let x6 = c.add(Op::Reshape { shape: r6 }, &[x])?;
        let pads6 = vec![
            [0, 0],
            [0, 0],
            [0, 0],
            [0, stride[0] as usize - 1],
            [0, 0],
            [0, stride[1] as usize - 1],
        ];
        let x6 = c.add(
            Op::Pad {
                pads: pads6,
                value: 0.0,
            },
            &[x6],
        )?;
        let r4 = vec![xd[0] as i64, xd[1] as i64, h * stride[0], wl * stride[1]];
        xi = c.add(Op::Reshape { shape: r4 }, &[x6])?;
        let ends = vec![(h - 1) * stride[0] + 1, (wl - 1) * stride[1] + 1];
        xi = c.add(
            Op::Slice {
                axes: vec![2, 3],
                starts: vec![0, 0],
                ends,
                steps: vec![],
            },
            &[xi],
        )?;
    }
    // Full padding dil·(k−1) minus the op's pads (plus output_padding at the end).
    let mut grow = vec![[0usize; 2]; 4];
    let (mut starts, mut ends) = (vec![0i64; 2], vec![i64::MAX; 2]);
    let cur = c.static_dims(xi)?;
    for i in 0..2 {
        let full = ext[i] - 1;
        let (b, e) = (full - pads[i], full - pads[i + 2] + opad[i]);
        let len = cur[2 + i] as i64;
        if b >= 0 {
            grow[2 + i][0] = b as usize;
        } else {
            starts[i] = -b;
        }
        if e >= 0 {
            grow[2 + i][1] = e as usize;
        } else {
            ends[i] = len + e;
        }
    }
    if starts != [0, 0] || ends != [i64::MAX; 2] {
        xi = c.add(
            Op::Slice {
                axes: vec![2, 3],
                starts,
                ends,
                steps: vec![],
            },
            &[xi],
        )?;
    }
    if grow.iter().any(|g| *g != [0, 0]) {
        xi = c.add(
            Op::Pad {
                pads: grow,
                value: 0.0,
            },
            &[xi],
        )?;
    }
    // Weights [C, M/g, kh, kw] → [M, C/g, kh, kw], flipped in space.
    let g = groups as i64;
    let w5 = c.add(
        Op::Reshape {
            shape: vec![g, cin as i64 / g, m_per as i64, kh, kw],
        },
        &[w],
    )?;
    let w5 = c.add(
        Op::Transpose {
            perm: vec![0, 2, 1, 3, 4],
        },
        &[w5],
    )?;
    let wt = c.add(
        Op::Reshape {
            shape: vec![g * m_per as i64, cin as i64 / g, kh, kw],
        },
        &[w5],
    )?;
    let wt = c.add(
        Op::Slice {
            axes: vec![2, 3],
            starts: vec![-1, -1],
            ends: vec![i64::MIN, i64::MIN],
            steps: vec![-1, -1],
        },
        &[wt],
    )?;
    let spec = ConvSpec {
        kernel_size: [kh as usize, kw as usize],
        stride: [1, 1],
        padding: [0, 0],
        dilation: [dil[0] as usize, dil[1] as usize],
        groups,
    };
    // A 1-D op's [1, k] kernel on H = 1 is a genuine 2-D conv (not the IR's [k, 1] form).
    let mut y = c.add(Op::Conv(spec), &[xi, wt])?;
    if let Some(b) = bias {
        let mb = c.static_dims(b)?[0] as i64;
        let b4 = c.add(
            Op::Reshape {
                shape: vec![1, mb, 1, 1],
            },
            &[b],
        )?;
        y = c.add(Op::Binary(B::Add), &[y, b4])?;
    }
    if one_d {
        let d = c.static_dims(y)?;
        y = c.add(
            Op::Reshape {
                shape: vec![d[0] as i64, d[1] as i64, d[3] as i64],
            },
            &[y],
        )?;
    }
    one(y)
}
