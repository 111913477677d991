//! Shape ops: Reshape (allowzero), Flatten, Squeeze / Unsqueeze (axes attribute before opset
//! 13, input from 13), Transpose, Concat, Split (attribute / input / num_outputs), Slice
//! (attributes before opset 10), Gather, Expand, Pad (constant mode; attributes before 11),
//! and the shape-valued ops Shape, Size, Constant, ConstantOfShape, which are constants when
//! dims are static (what lets shape subgraphs fold).
use super::{one, Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::tensor::decode_tensor;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{broadcast_dims, normalize_axis, Dim, HostTensor, NodeId, Op};

pub(super) fn register(r: &mut Registry) {
    r.insert("Reshape", reshape);
    r.insert("Flatten", flatten);
    r.insert("Squeeze", squeeze);
    r.insert("Unsqueeze", unsqueeze);
    r.insert("Transpose", transpose);
    r.insert("Concat", concat);
    r.insert("Split", split);
    r.insert("Slice", slice);
    r.insert("Gather", gather);
    r.insert("Expand", expand);
    r.insert("Pad", pad);
    r.insert("Shape", shape);
    r.insert("Size", size);
    r.insert("Constant", constant);
    r.insert("ConstantOfShape", constant_of_shape);
}

/// Reshape `x` to `dims`: static dims by value, at most one symbolic dim as -1.
pub(super) fn reshape_to(c: &mut ImportCtx, x: NodeId, dims: &[Dim]) -> Result<NodeId, OnnxError> {
    if c.shape(x)?.dims == dims {
        return Ok(x);
    }
    let mut target = vec![];
    let mut dynamic = 0;
    for d in dims {
        target.push(match d {
            Dim::Static(n) => *n as i64,
            Dim::Dynamic(_) => {
                dynamic += 1;
                -1
            }
        });
    }
    if dynamic > 1 {
        return Err(c.unsupported(format!(
            "a reshape to {} (more than one symbolic dim)",
            rlx_ir::DimsFmt(dims)
        )));
    }
    c.add(Op::Reshape { shape: target }, &[x])
}

fn reshape(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let target = if c.opset < 5 {
        Attrs(n).ints("shape").map(<[i64]>::to_vec)
    } else {
        c.const_ints(n, 1)?
    }
    .ok_or_else(|| c.err("needs a target shape"))?;
    if Attrs(n).i_or("allowzero", 0) != 0 && target.contains(&0) {
        // A literal 0 dim: the result is empty, so it is a constant of that shape.
        if target.iter().any(|&d| d < 0) {
            return Err(c.err("allowzero with both 0 and -1 in the shape"));
        }
        let dims: Vec<usize> = target.iter().map(|&d| d as usize).collect();
        if c.shape(x)?.numel() != Some(0) {
            return Err(c.err(format!("cannot reshape a non-empty tensor to {dims:?}")));
        }
        let dt = c.dtype(x)?;
        return one(
            c.constant(HostTensor::new(&dims, dt, vec![]).map_err(|e| c.err(e.to_string()))?)?
        );
    }
    one(c.add(Op::Reshape { shape: target }, &[x])?)
}

fn flatten(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let dims = c.shape(x)?.dims.clone();
    let a = Attrs(n).i_or("axis", 1);
    let r = dims.len() as i64;
    let a = if a < 0 { a + r } else { a };
    if !(0..=r).contains(&a) {
        return Err(c.err(format!("axis {a} is out of range for rank {r}")));
    }
    let prod = |ds: &[Dim]| -> Option<usize> { ds.iter().map(Dim::as_static).product() };
    let (l, rr) = (prod(&dims[..a as usize]), prod(&dims[a as usize..]));
    let target = match (l, rr) {
        (Some(l), Some(r)) => vec![l as i64, r as i64],
        (Some(l), None) => vec![l as i64, -1],
        (None, Some(r)) => vec![-1, r as i64],
        _ => return Err(c.unsupported("flatten with symbolic dims on both sides")),
    };
    one(c.add(Op::Reshape { shape: target }, &[x])?)
}

/// The axes of Squeeze / Unsqueeze / Reduce*: an attribute before `input_from`, else input 1.
pub(super) fn axes_of(
    c: &mut ImportCtx,
    n: &NodeProto,
    input_from: i64,
) -> Result<Option<Vec<i64>>, OnnxError> {
    if c.opset < input_from {
        Ok(Attrs(n).ints("axes").map(<[i64]>::to_vec))
    } else {
        c.const_ints(n, 1)
    }
}

fn squeeze(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let dims = c.shape(x)?.dims.clone();
    let axes = match axes_of(c, n, 13)? {
        Some(a) => a
            .iter()
            .map(|&a| normalize_axis(a, dims.len()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| c.err(e))?,
        None => (0..dims.len()).filter(|&i| dims[i].is_one()).collect(),
    };
    let mut out = vec![];
    for (i, d) in dims.iter().enumerate() {
        if axes.contains(&i) {
            if !d.is_one() {
                return Err(c.err(format!("cannot squeeze axis {i} of size {d}")));
            }
        } else {
            out.push(d.clone());
        }
    }
    one(reshape_to(c, x, &out)?)
}

fn unsqueeze(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let dims = c.shape(x)?.dims.clone();
    let axes = axes_of(c, n, 13)?.ok_or_else(|| c.err("needs axes"))?;
    let r = dims.len() + axes.len();
    let mut axes: Vec<usize> = axes
        .iter()
        .map(|&a| normalize_axis(a, r))
        .collect::<Result<_, _>>()
        .map_err(|e| c.err(e))?;
    axes.sort_unstable();
    let mut src = dims.into_iter();
    let out: Vec<Dim> = (0..r)
        .map(|i| {
            if axes.contains(&i) {
                Dim::Static(1)
            } else {
                src.next().unwrap_or(Dim::Static(1))
            }
        })
        .collect();
    one(reshape_to(c, x, &out)?)
}

fn transpose(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let r = c.rank(x)?;
    let perm = match Attrs(n).ints("perm") {
        Some(p) => p
            .iter()
            .map(|&a| normalize_axis(a, r))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| c.err(e))?,
        None => (0..r).rev().collect(),
    };
    one(c.add(Op::Transpose { perm }, &[x])?)
}

fn concat(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let xs = c.inputs(n)?;
    let axis = Attrs(n).i("axis").ok_or_else(|| c.err("needs axis"))?;
    if xs.len() == 1 {
        return one(xs[0]);
    }
    one(c.add(Op::Concat { axis }, &xs)?)
}

fn split(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let a = Attrs(n);
    let dims = c.shape(x)?.dims.clone();
    let axis = normalize_axis(a.i_or("axis", 0), dims.len()).map_err(|e| c.err(e))?;
    let len = dims[axis]
        .as_static()
        .ok_or_else(|| c.unsupported("split along a symbolic dim"))?;
    let sizes = if c.opset < 13 {
        a.ints("split").map(<[i64]>::to_vec)
    } else {
        c.const_ints(n, 1)?
    };
    let k = n.output.len().max(1);
    let sizes: Vec<usize> = match sizes {
        Some(s) => s
            .iter()
            .map(|&v| usize::try_from(v).map_err(|_| c.err(format!("negative split {v}"))))
            .collect::<Result<_, _>>()?,
        None => {
            // Equal parts; from opset 18 the last may be smaller (ceil division).
            if a.i("num_outputs").is_some_and(|v| v != k as i64) {
                return Err(c.err(format!("num_outputs disagrees with the {k} outputs")));
            }
            let parts = k;
            let each = len.div_ceil(parts);
            (0..parts)
                .map(|i| each.min(len.saturating_sub(i * each)))
                .collect()
        }
    };
    if sizes.iter().sum::<usize>() != len {
        return Err(c.err(format!("split sizes {sizes:?} do not add up to {len}")));
    }
    let mut outs = vec![];
    let mut start = 0;
    for s in sizes {
        outs.push(c.add(
            Op::Narrow {
                axis: axis as i64,
                start,
                len: s,
            },
            &[x],
        )?);
        start += s;
    }
    Ok(Some(outs))
}

fn slice(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let (starts, ends, axes, steps) = if c.opset < 10 {
        let a = Attrs(n);
        let g = |k: &str| a.ints(k).map(<[i64]>::to_vec);
        (g("starts"), g("ends"), g("axes"), None)
    } else {
        (
            c.const_ints(n, 1)?,
            c.const_ints(n, 2)?,
            c.const_ints(n, 3)?,
            c.const_ints(n, 4)?,
        )
    };
    let starts = starts.ok_or_else(|| c.err("needs starts"))?;
    let ends = ends.ok_or_else(|| c.err("needs ends"))?;
    one(c.add(
        Op::Slice {
            axes: axes.unwrap_or_default(),
            starts,
            ends,
            steps: steps.unwrap_or_default(),
        },
        &[x],
    )?)
}

fn gather(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (x, i) = (c.input(n, 0)?, c.input(n, 1)?);
    let axis = Attrs(n).i_or("axis", 0);
    one(c.add(Op::Gather { axis }, &[x, i])?)
}

fn expand(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let target = c.const_ints(n, 1)?.ok_or_else(|| c.err("needs a shape"))?;
    let mut want = vec![];
    for &d in &target {
        want.push(Dim::Static(
            usize::try_from(d).map_err(|_| c.err(format!("negative dim {d}")))?,
        ));
    }
    // ONNX Expand broadcasts both ways: a target dim of 1 keeps the input's dim.
    let dims = broadcast_dims(&c.shape(x)?.dims, &want).map_err(|e| c.err(e))?;
    if dims == c.shape(x)?.dims {
        return one(x);
    }
    one(c.add(Op::Expand { shape: dims }, &[x])?)
}

fn pad(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let a = Attrs(n);
    let mode = a.s("mode").unwrap_or_else(|| "constant".into());
    if !matches!(mode.as_str(), "constant" | "edge" | "reflect" | "wrap") {
        return Err(c.unsupported(format!("mode \"{mode}\"")));
    }
    let r = c.rank(x)?;
    let (pads, value, axes) = if c.opset < 11 {
        let p = a.ints(if c.opset < 2 { "paddings" } else { "pads" });
        (p.map(<[i64]>::to_vec), a.f_or("value", 0.0) as f64, None)
    } else {
        let v = c
            .const_input(n, 2)?
            .map_or(0.0, |t| t.to_f64_vec().first().copied().unwrap_or(0.0));
        (c.const_ints(n, 1)?, v, c.const_ints(n, 3)?)
    };
    let pads = pads.ok_or_else(|| c.err("needs pads"))?;
    let axes: Vec<usize> = match axes {
        Some(ax) => ax
            .iter()
            .map(|&a| normalize_axis(a, r))
            .collect::<Result<_, _>>()
            .map_err(|e| c.err(e))?,
        None => (0..r).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(c.err(format!("{} pads for {} axes", pads.len(), axes.len())));
    }
    let mut signed = vec![[0i64; 2]; r];
    for (k, &ax) in axes.iter().enumerate() {
        signed[ax] = [pads[k], pads[k + axes.len()]];
    }
    let mut y = x;
    let mut out = vec![[0usize; 2]; r];
    for (ax, &[b, e]) in signed.iter().enumerate() {
        if mode == "constant" {
            // Negative pads crop (a gather of the kept range); the rest is a constant Pad.
            if b < 0 || e < 0 {
                y = pad_axis(c, y, ax, b.min(0), e.min(0), &mode)?;
            }
            out[ax] = [b.max(0) as usize, e.max(0) as usize];
        } else if b != 0 || e != 0 {
            y = pad_axis(c, y, ax, b, e, &mode)?;
        }
    }
    if out.iter().all(|p| *p == [0, 0]) {
        return one(y);
    }
    one(c.add(Op::Pad { pads: out, value }, &[y])?)
}

/// Pad (or crop, for negative amounts) one axis by a Gather of a host index table: output
/// position o reads input `o − before` mapped into the axis by the mode (edge: clamped,
/// reflect: mirrored without repeating the end, wrap: cyclic; constant: only crops here).
fn pad_axis(
    c: &mut ImportCtx,
    x: NodeId,
    ax: usize,
    before: i64,
    after: i64,
    mode: &str,
) -> Result<NodeId, OnnxError> {
    let d = c.static_dims(x)?[ax] as i64;
    let len = d + before + after;
    if len < 0 {
        return Err(c.err(format!(
            "pads {before}, {after} remove more than axis {ax} ({d})"
        )));
    }
    if d == 0 && len > 0 {
        return Err(c.err(format!("mode \"{mode}\" cannot pad the empty axis {ax}")));
    }
    c.limit("a Pad index table", len as usize)?;
    let idx: Vec<i64> = (0..len)
        .map(|o| {
            let i = o - before;
            match mode {
                "reflect" if d > 1 => {
                    let p = 2 * (d - 1);
                    let m = i.rem_euclid(p);
                    if m < d {
                        m
                    } else {
                        p - m
                    }
                }
                "wrap" => i.rem_euclid(d),
                _ => i.clamp(0, d - 1),
            }
        })
        .collect();
    let t = c.constant(rlx_ir::HostTensor::from_i64(&[len as usize], &idx))?;
    c.add(Op::Gather { axis: ax as i64 }, &[x, t])
}

fn shape(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let dims = c.static_dims(x)?;
    let r = dims.len() as i64;
    let a = Attrs(n);
    let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let (s, e) = (clamp(a.i_or("start", 0)), clamp(a.i_or("end", r)));
    let vals: Vec<i64> = dims[s..e.max(s)].iter().map(|&d| d as i64).collect();
    one(c.constant(HostTensor::from_i64(&[vals.len()], &vals))?)
}

fn size(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let numel: usize = c.static_dims(x)?.iter().product();
    one(c.constant(HostTensor::from_i64(&[], &[numel as i64]))?)
}

fn constant(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let a = Attrs(n);
    let t = if let Some(t) = a.t("value") {
        // A consumer that needs the exact ONNX type (a zero point, a float8 value) reads it.
        if let (Some(out), Some(code)) = (n.output.first(), t.data_type) {
            c.onnx_types.insert(out.clone(), code);
        }
        decode_tensor(t, None)?
    } else if let Some(v) = a.f("value_float") {
        HostTensor::from_f32(&[], &[v])
    } else if let Some(v) = a.floats("value_floats") {
        HostTensor::from_f32(&[v.len()], v)
    } else if let Some(v) = a.i("value_int") {
        HostTensor::from_i64(&[], &[v])
    } else if let Some(v) = a.ints("value_ints") {
        HostTensor::from_i64(&[v.len()], v)
    } else {
        return Err(c.unsupported("a Constant that is not a dense numeric tensor"));
    };
    one(c.constant(t)?)
}

fn constant_of_shape(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let dims = c.const_ints(n, 0)?.ok_or_else(|| c.err("needs a shape"))?;
    let dims: Vec<usize> = dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| c.err(format!("negative dim {d}"))))
        .collect::<Result<_, _>>()?;
    let value = match Attrs(n).t("value") {
        Some(t) => decode_tensor(t, None)?,
        None => HostTensor::from_f32(&[1], &[0.0]),
    };
    if value.numel() != 1 {
        return Err(c.err("value must hold one element"));
    }
    let numel = dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| c.unsupported(format!("a constant of {dims:?} elements")))?;
    c.limit("a constant", numel)?;
    let data = value.data.repeat(numel);
    let t = HostTensor::new(&dims, value.dtype, data).map_err(|e| c.err(e.to_string()))?;
    one(c.constant(t)?)
}
