//! Ops that add values into a zero image at positions known at import (or given as
//! indices): Col2Im (a ScatterElements-add of every column entry to its pixel, positions
//! from a host table) and MaxUnpool (a scatter of the pooled values to their indices).
use super::{one, Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{HostTensor, Op, ScatterReduction};

pub(super) fn register(r: &mut Registry) {
    r.insert("Col2Im", col2im);
    r.insert("MaxUnpool", max_unpool);
}

/// A per-spatial-dim attribute list, defaulting to `d` for each dim.
fn per_dim(
    c: &ImportCtx,
    n: &NodeProto,
    name: &str,
    k: usize,
    d: i64,
) -> Result<Vec<i64>, OnnxError> {
    match Attrs(n).ints(name) {
        Some(v) if v.len() == k => Ok(v.to_vec()),
        Some(v) => Err(c.err(format!("{name} has {} entries for {k} dims", v.len()))),
        None => Ok(vec![d; k]),
    }
}

fn col2im(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let image = c
        .const_ints(n, 1)?
        .ok_or_else(|| c.err("needs image_shape"))?;
    let block = c
        .const_ints(n, 2)?
        .ok_or_else(|| c.err("needs block_shape"))?;
    let k = image.len();
    if block.len() != k || k == 0 || image.iter().chain(&block).any(|&v| v < 1) {
        return Err(c.err(format!("image_shape {image:?} / block_shape {block:?}")));
    }
    let dil = per_dim(c, n, "dilations", k, 1)?;
    let strides = per_dim(c, n, "strides", k, 1)?;
    let pads = match Attrs(n).ints("pads") {
        Some(v) if v.len() == 2 * k => v.to_vec(),
        Some(v) => return Err(c.err(format!("pads has {} entries for {k} dims", v.len()))),
        None => vec![0; 2 * k],
    };
    let xd = c.static_dims(x)?;
    let [batch, ck, l] = xd[..] else {
        return Err(c.err(format!("input must be [N, C·Πblock, L], got {xd:?}")));
    };
    let kprod: i64 = block.iter().product();
    if ck as i64 % kprod != 0 {
        return Err(c.err(format!(
            "dim 1 ({ck}) is not a multiple of Πblock ({kprod})"
        )));
    }
    let ch = ck / kprod as usize;
    // Blocks per dim, and the padded image the columns index.
    let mut nb = vec![];
    let mut padded = vec![];
    for s in 0..k {
        let p = image[s] + pads[s] + pads[s + k];
        let span = dil[s] * (block[s] - 1) + 1;
        let cnt = (p - span) / strides[s] + 1;
        if cnt < 1 {
            return Err(c.err(format!("no block fits dim {s}")));
        }
        nb.push(cnt);
        padded.push(p);
    }
    if nb.iter().product::<i64>() != l as i64 {
        return Err(c.err(format!(
            "L = {l}, but the blocks number {}",
            nb.iter().product::<i64>()
        )));
    }
    let plane: i64 = padded.iter().product();
    c.limit("a Col2Im index table", ck * l)?;
    // Column entry (c, kernel offset, block) → pixel of channel c in the padded image.
    let mut idx = Vec::with_capacity(ck * l);
    for ci in 0..ch as i64 {
        for kk in 0..kprod {
            for bl in 0..l as i64 {
                let (mut kr, mut br, mut pos) = (kk, bl, 0i64);
                let mut coords = vec![0i64; k];
                for s in (0..k).rev() {
                    let (ko, bo) = (kr % block[s], br % nb[s]);
                    kr /= block[s];
                    br /= nb[s];
                    coords[s] = bo * strides[s] + ko * dil[s];
                }
                for s in 0..k {
                    pos = pos * padded[s] + coords[s];
                }
                idx.push(ci * plane + pos);
            }
        }
    }
    let dt = c.dtype(x)?;
    let flat = c.add(
        Op::Reshape {
            shape: vec![batch as i64, (ck * l) as i64],
        },
        &[x],
    )?;
    let it = c.constant(HostTensor::from_i64(&[1, ck * l], &idx))?;
    let it = c.add(
        Op::Expand {
            shape: vec![rlx_ir::Dim::Static(batch), rlx_ir::Dim::Static(ck * l)],
        },
        &[it],
    )?;
    let total = ch * plane as usize;
    c.limit("a Col2Im image", batch * total)?;
    let zeros = c.constant(HostTensor::from_f64_as(
        &[batch, total],
        &vec![0.0; batch * total],
        dt,
    ))?;
    let op = Op::ScatterElements {
        axis: 1,
        reduction: ScatterReduction::Add,
    };
    let img = c.add(op, &[zeros, it, flat])?;
    let mut shape = vec![batch as i64, ch as i64];
    shape.extend(&padded);
    let mut y = c.add(Op::Reshape { shape }, &[img])?;
    for s in 0..k {
        if pads[s] != 0 || pads[s + k] != 0 {
            let op = Op::Narrow {
                axis: 2 + s as i64,
                start: pads[s] as usize,
                len: image[s] as usize,
            };
            y = c.add(op, &[y])?;
        }
    }
    one(y)
}

fn max_unpool(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (x, i) = (c.input(n, 0)?, c.input(n, 1)?);
    let xd = c.static_dims(x)?;
    if xd.len() < 3 {
        return Err(c.err(format!("X must be [N, C, D..], got {xd:?}")));
    }
    let k = xd.len() - 2;
    let kernel = Attrs(n)
        .ints("kernel_shape")
        .ok_or_else(|| c.err("needs kernel_shape"))?
        .to_vec();
    if kernel.len() != k {
        return Err(c.err("kernel_shape does not match X's spatial rank"));
    }
    let strides = per_dim(c, n, "strides", k, 1)?;
    let pads = match Attrs(n).ints("pads") {
        Some(v) if v.len() == 2 * k => v.to_vec(),
        Some(_) => return Err(c.err("pads must have 2 entries per spatial dim")),
        None => vec![0; 2 * k],
    };
    // The indices address the shape MaxPool's input had (the inferred one); a larger
    // output_shape keeps those coordinates and pads each dim at its end.
    let mut inferred = xd[..2].to_vec();
    for s in 0..k {
        // In i128, so hostile strides, pads or kernels give an error rather than a wrap.
        let v =
            (xd[2 + s] as i128 - 1) * strides[s] as i128 - pads[s] as i128 - pads[s + k] as i128
                + kernel[s] as i128;
        inferred.push(usize::try_from(v).map_err(|_| c.err(format!("output size {v}")))?);
    }
    let out: Vec<usize> = match c.const_ints(n, 2)? {
        Some(s) if s.len() == xd.len() && s.iter().all(|&v| v >= 0) => {
            s.iter().map(|&v| v as usize).collect()
        }
        Some(s) => return Err(c.err(format!("output_shape {s:?}"))),
        None => inferred.clone(),
    };
    if out.iter().zip(&inferred).any(|(o, i)| o < i) {
        return Err(c.unsupported(format!(
            "output_shape {out:?} smaller than the pooled input's {inferred:?}"
        )));
    }
    // Saturating counts: every out dim is at least its inferred one, so a total that fits
    // the limit is exact.
    let count = |d: &[usize]| d.iter().try_fold(1usize, |n, &x| n.checked_mul(x));
    c.limit("a MaxUnpool output", count(&out).unwrap_or(usize::MAX))?;
    let total = count(&inferred).unwrap_or(usize::MAX);
    let dt = c.dtype(x)?;
    // The indices are flat over the whole output tensor (as MaxPool's Indices output).
    let xf = c.add(Op::Reshape { shape: vec![-1] }, &[x])?;
    let ifl = c.add(Op::Reshape { shape: vec![-1] }, &[i])?;
    let zeros = c.constant(HostTensor::from_f64_as(&[total], &vec![0.0; total], dt))?;
    let op = Op::ScatterElements {
        axis: 0,
        reduction: ScatterReduction::None,
    };
    let y = c.add(op, &[zeros, ifl, xf])?;
    let shape = inferred.iter().map(|&v| v as i64).collect();
    let y = c.add(Op::Reshape { shape }, &[y])?;
    if out == inferred {
        return one(y);
    }
    let pads = out.iter().zip(&inferred).map(|(o, i)| [0, o - i]).collect();
    one(c.add(Op::Pad { pads, value: 0.0 }, &[y])?)
}
