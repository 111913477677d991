//! Neural-network ops: Conv (1-D and 2-D), MaxPool / AveragePool / LpPool (asymmetric pads
//! and ceil_mode through an explicit Pad), the global pools, Softmax / LogSoftmax (the
//! opset < 13 "coerce to 2-D" form included), Hardmax, Trilu. Normalizations: `norm.rs`.
use super::shape::reshape_to;
use super::{one, Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{
    Activation as A, BinaryOp as B, ConvSpec, HostTensor, NodeId, Op, PoolKind, PoolSpec, ReduceOp,
};

pub(super) fn register(r: &mut Registry) {
    r.insert("Conv", conv);
    r.insert("MaxPool", |c, n| pool(c, n, PoolKind::Max));
    r.insert("AveragePool", |c, n| pool(c, n, PoolKind::Avg));
    r.insert("LpPool", lp_pool);
    r.insert("GlobalAveragePool", |c, n| {
        global_pool(c, n, ReduceOp::Mean)
    });
    r.insert("GlobalMaxPool", |c, n| global_pool(c, n, ReduceOp::Max));
    r.insert("Hardmax", hardmax);
    r.insert("Trilu", trilu);
    r.insert("Softmax", |c, n| softmax(c, n, false));
    r.insert("LogSoftmax", |c, n| softmax(c, n, true));
}

/// Spatial geometry of Conv / pools for the spatial dims of size `sizes`: kernel, strides,
/// dilations and (begin, end) pads per dim. Asymmetric pads (explicit, from auto_pad, or the
/// extra end padding ceil_mode needs) are applied by an explicit Pad node.
struct Geometry {
    kernel: Vec<usize>,
    stride: Vec<usize>,
    pads: Vec<(usize, usize)>,
    /// End padding ceil_mode adds beyond `pads` (never counted by an average).
    extra: Vec<usize>,
    dilation: Vec<usize>,
}

fn geometry(
    c: &ImportCtx,
    n: &NodeProto,
    kernel: Vec<usize>,
    sizes: &[usize],
) -> Result<Geometry, OnnxError> {
    let a = Attrs(n);
    let k = kernel.len();
    let list = |name: &str, d: usize| -> Result<Vec<usize>, OnnxError> {
        match a.ints(name) {
            Some(v) if v.len() == k && v.iter().all(|&x| x >= 1) => {
                Ok(v.iter().map(|&x| x as usize).collect())
            }
            Some(v) => Err(c.err(format!("{name} {v:?} for {k} spatial dims"))),
            None => Ok(vec![d; k]),
        }
    };
    let stride = list("strides", 1)?;
    let dilation = list("dilations", 1)?;
    // Bounded so that no window arithmetic below can overflow.
    const MAX: usize = 1 << 24;
    if kernel.len() != sizes.len()
        || [&kernel, &stride, &dilation]
            .iter()
            .any(|v| v.iter().any(|&x| x > MAX))
    {
        return Err(c.err(format!(
            "kernel {kernel:?}, strides {stride:?}, dilations {dilation:?} for {} spatial dims",
            sizes.len()
        )));
    }
    let ext: Vec<usize> = (0..k)
        .map(|i| dilation[i] * (kernel[i].max(1) - 1) + 1)
        .collect();
    let auto = a.s("auto_pad").unwrap_or_else(|| "NOTSET".into());
    let pads = match auto.as_str() {
        "NOTSET" => match a.ints("pads") {
            Some(p) if p.len() == 2 * k && p.iter().all(|&v| v >= 0) => {
                (0..k).map(|i| (p[i] as usize, p[i + k] as usize)).collect()
            }
            Some(p) => return Err(c.err(format!("pads {p:?} for {k} spatial dims"))),
            None => vec![(0, 0); k],
        },
        "VALID" => vec![(0, 0); k],
        "SAME_UPPER" | "SAME_LOWER" => (0..k)
            .map(|i| {
                let out = sizes[i].div_ceil(stride[i]);
                let total = (out
                    .saturating_sub(1)
                    .saturating_mul(stride[i])
                    .saturating_add(ext[i]))
                .saturating_sub(sizes[i]);
                let small = total / 2;
                if auto == "SAME_UPPER" {
                    (small, total - small)
                } else {
                    (total - small, small)
                }
            })
            .collect(),
        o => return Err(c.err(format!("auto_pad \"{o}\""))),
    };
    if pads.iter().any(|p| p.0 > MAX || p.1 > MAX) {
        return Err(c.err(format!("pads {pads:?}")));
    }
    let mut extra = vec![0; k];
    if a.i_or("ceil_mode", 0) != 0 {
        // Pad the end so that flooring gives ONNX's ceil count; a window that would start
        // inside the end padding is dropped, as ONNX does.
        for i in 0..k {
            let span = sizes[i] + pads[i].0 + pads[i].1;
            if span < ext[i] {
                continue;
            }
            let mut out = (span - ext[i]).div_ceil(stride[i]) + 1;
            if (out - 1) * stride[i] >= sizes[i] + pads[i].0 {
                out -= 1;
            }
            let need = (out - 1) * stride[i] + ext[i];
            extra[i] = need.saturating_sub(span);
        }
    }
    Ok(Geometry {
        kernel,
        stride,
        pads,
        extra,
        dilation,
    })
}

/// `[N,C,L]` → `[N,C,1,L]` (the 2-D form of a 1-D op); 4-D unchanged.
fn to_4d(c: &mut ImportCtx, x: NodeId, d: &[usize]) -> Result<NodeId, OnnxError> {
    if d.len() == 4 {
        return Ok(x);
    }
    let shape = vec![d[0] as i64, d[1] as i64, 1, d[2] as i64];
    c.add(Op::Reshape { shape }, &[x])
}

/// Back from the 2-D form: `[N,C,1,L]` → `[N,C,L]` when the op was 1-D.
fn from_4d(c: &mut ImportCtx, y: NodeId, one_d: bool) -> Result<NodeId, OnnxError> {
    if !one_d {
        return Ok(y);
    }
    let d = c.static_dims(y)?;
    let shape = vec![d[0] as i64, d[1] as i64, d[3] as i64];
    c.add(Op::Reshape { shape }, &[y])
}

/// Pad the spatial dims of a 4-D `x` by `pads` (H then W) with `value`.
fn pad_spatial(
    c: &mut ImportCtx,
    x: NodeId,
    pads: [(usize, usize); 2],
    value: f64,
) -> Result<NodeId, OnnxError> {
    if pads == [(0, 0); 2] {
        return Ok(x);
    }
    let pads = vec![
        [0, 0],
        [0, 0],
        [pads[0].0, pads[0].1],
        [pads[1].0, pads[1].1],
    ];
    c.add(Op::Pad { pads, value }, &[x])
}

fn conv(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (x, w) = (c.input(n, 0)?, c.input(n, 1)?);
    let bias = c.opt_input(n, 2)?;
    one(conv_of(c, n, x, w, bias)?)
}

/// The conv of `x` with `w` (+ bias) under node `n`'s attributes.
pub(super) fn conv_of(
    c: &mut ImportCtx,
    n: &NodeProto,
    x: NodeId,
    w: NodeId,
    bias: Option<NodeId>,
) -> Result<NodeId, OnnxError> {
    let xd = c.static_dims(x)?;
    let wd = c.static_dims(w)?;
    if !(xd.len() == 3 || xd.len() == 4) || wd.len() != xd.len() {
        return Err(c.unsupported(format!("a {}-D conv", xd.len().saturating_sub(2))));
    }
    let kernel = wd[2..].to_vec();
    if let Some(ks) = Attrs(n).ints("kernel_shape") {
        if ks.iter().map(|&v| v as usize).ne(kernel.iter().copied()) {
            return Err(c.err(format!("kernel_shape {ks:?} disagrees with W {wd:?}")));
        }
    }
    let g = geometry(c, n, kernel, &xd[2..])?;
    let groups = Attrs(n).i_or("group", 1).max(1) as usize;
    let one_d = xd.len() == 3;
    let sym = g.pads.iter().all(|p| p.0 == p.1);
    // The 1-D form keeps its length parameters at index 0 (x [N,C,1,L], w [O,C,k,1]).
    let two = |v: &[usize], fill: usize| if one_d { [v[0], fill] } else { [v[0], v[1]] };
    let pad_sym: Vec<usize> = g.pads.iter().map(|p| if sym { p.0 } else { 0 }).collect();
    let spec = ConvSpec {
        kernel_size: two(&g.kernel, 1),
        stride: two(&g.stride, 1),
        padding: two(&pad_sym, 0),
        dilation: two(&g.dilation, 1),
        groups,
    };
    let mut xi = to_4d(c, x, &xd)?;
    if !sym {
        let p = if one_d {
            [(0, 0), g.pads[0]]
        } else {
            [g.pads[0], g.pads[1]]
        };
        xi = pad_spatial(c, xi, p, 0.0)?;
    }
    let wi = if one_d {
        let shape = vec![wd[0] as i64, wd[1] as i64, wd[2] as i64, 1];
        c.add(Op::Reshape { shape }, &[w])?
    } else {
        w
    };
    let mut ins = vec![xi, wi];
    ins.extend(bias);
    let y = c.add(Op::Conv(spec), &ins)?;
    from_4d(c, y, one_d)
}

fn pool(c: &mut ImportCtx, n: &NodeProto, kind: PoolKind) -> Translated {
    if n.output.get(1).is_some_and(|o| !o.is_empty()) {
        return Err(c.unsupported("MaxPool's Indices output"));
    }
    let x = c.input(n, 0)?;
    one(pool_of(c, n, x, kind, false)?)
}

/// (Σ_window |x|^p)^(1/p), as ONNX defines it: the average pool of |x|^p times the window size.
fn lp_pool(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let p = Attrs(n).i_or("p", 2);
    let dt = c.dtype(x)?;
    let ab = c.add(Op::Activation(A::Abs), &[x])?;
    let pk = c.scalar(p as f64, dt)?;
    let xp = c.add(Op::Binary(B::Pow), &[ab, pk])?;
    // ONNX sums the window, padding included.
    let avg = pool_of(c, n, xp, PoolKind::Avg, true)?;
    // In f64: the window's size only scales the average, and an i64 product can overflow.
    let k: f64 = Attrs(n)
        .ints("kernel_shape")
        .map_or(1.0, |v| v.iter().map(|&x| x as f64).product());
    let kk = c.scalar(k, dt)?;
    let s = c.add(Op::Binary(B::Mul), &[avg, kk])?;
    let inv = c.scalar(1.0 / p as f64, dt)?;
    one(c.add(Op::Binary(B::Pow), &[s, inv])?)
}

/// The pool of `x` with node `n`'s geometry; `include_pads` counts padding in an average
/// whatever `count_include_pad` says.
fn pool_of(
    c: &mut ImportCtx,
    n: &NodeProto,
    x: NodeId,
    kind: PoolKind,
    include_pads: bool,
) -> Result<NodeId, OnnxError> {
    let xd = c.static_dims(x)?;
    if xd.len() < 3 {
        return Err(c.err(format!("a pool of rank {}", xd.len())));
    }
    let int = !c.dtype(x)?.is_float();
    if int && kind != PoolKind::Max {
        return Err(c.unsupported(format!("average pooling of {}", c.dtype(x)?)));
    }
    let a = Attrs(n);
    let kernel: Vec<usize> = a
        .ints("kernel_shape")
        .ok_or_else(|| c.err("needs kernel_shape"))?
        .iter()
        .map(|&v| v.max(1) as usize)
        .collect();
    let g = geometry(c, n, kernel, &xd[2..])?;
    let include = include_pads || a.i_or("count_include_pad", 0) != 0;
    if int || xd.len() > 4 || g.dilation.iter().any(|&d| d != 1) {
        // The IR's Pool is 2-D, undilated and float: the window as strided slices instead
        // (an integer max pads with −inf saturated to the type's minimum).
        return sliced_pool(c, x, &g, kind, include);
    }
    let one_d = xd.len() == 3;
    // The 1-D form is [N,C,1,L] with a [1,k] window.
    let two = |v: &[usize], fill: usize| if one_d { [fill, v[0]] } else { [v[0], v[1]] };
    let real = if one_d {
        [(0, 0), g.pads[0]]
    } else {
        [g.pads[0], g.pads[1]]
    };
    let ex = if one_d {
        [0, g.extra[0]]
    } else {
        [g.extra[0], g.extra[1]]
    };
    let pads = [
        (real[0].0, real[0].1 + ex[0]),
        (real[1].0, real[1].1 + ex[1]),
    ];
    let kernel = two(&g.kernel, 1);
    // Symmetric pads up to half the window go into the op; anything else is an explicit Pad
    // (−inf for max; zeros for average, whose divisor is fixed below).
    let inline = (0..2).all(|i| pads[i].0 == pads[i].1 && 2 * pads[i].0 <= kernel[i]);
    let spec = PoolSpec {
        kind,
        kernel_size: kernel,
        stride: two(&g.stride, 1),
        padding: if inline {
            [pads[0].0, pads[1].0]
        } else {
            [0, 0]
        },
    };
    let fill = if kind == PoolKind::Max {
        f64::NEG_INFINITY
    } else {
        0.0
    };
    let x4 = to_4d(c, x, &xd)?;
    let xi = if inline {
        x4
    } else {
        pad_spatial(c, x4, pads, fill)?
    };
    let mut y = c.add(Op::Pool(spec), &[xi])?;
    let excluded = if include {
        ex != [0, 0]
    } else {
        pads != [(0, 0); 2]
    };
    if kind == PoolKind::Avg && excluded {
        // rlx divides by the full window; ONNX's default divides by the in-bounds count:
        // divide by the same pool over a ones map (each window's in-bounds fraction).
        let hw = &c.static_dims(x4)?[2..];
        c.limit("a ones map", hw[0].saturating_mul(hw[1]))?;
        let dt = c.dtype(x)?;
        let ones = HostTensor::from_f64_as(&[1, 1, hw[0], hw[1]], &vec![1.0; hw[0] * hw[1]], dt);
        let ones = c.constant(ones)?;
        let ones = if inline {
            ones
        } else if include {
            // Counted pads hold ones, ceil_mode's extra end padding zeros.
            let o = pad_spatial(c, ones, real, 1.0)?;
            pad_spatial(c, o, [(0, ex[0]), (0, ex[1])], 0.0)?
        } else {
            pad_spatial(c, ones, pads, 0.0)?
        };
        let frac = c.add(Op::Pool(spec), &[ones])?;
        y = c.add(Op::Binary(B::Div), &[y, frac])?;
    }
    from_4d(c, y, one_d)
}

fn global_pool(c: &mut ImportCtx, n: &NodeProto, op: ReduceOp) -> Translated {
    let x = c.input(n, 0)?;
    let r = c.rank(x)?;
    let axes: Vec<i64> = (2..r as i64).collect();
    one(c.add(
        Op::Reduce {
            op,
            axes,
            keep_dim: true,
        },
        &[x],
    )?)
}

/// Softmax / LogSoftmax. Before opset 13 the input is read as 2-D `[prod(..axis), prod(axis..)]`
/// (default axis 1); from 13 it is one axis (default −1).
fn softmax(c: &mut ImportCtx, n: &NodeProto, log: bool) -> Translated {
    let x = c.input(n, 0)?;
    let xs = c.shape(x)?.clone();
    let r = xs.rank() as i64;
    let legacy = c.opset < 13;
    let axis = Attrs(n).i_or("axis", if legacy { 1 } else { -1 });
    let (xi, ax) = if legacy {
        let a = if axis < 0 { axis + r } else { axis };
        let dims = xs
            .static_dims()
            .ok_or_else(|| c.unsupported("legacy softmax on symbolic dims"))?;
        let a = a.clamp(0, r) as usize;
        let (l, rr): (usize, usize) = (dims[..a].iter().product(), dims[a..].iter().product());
        (
            c.add(
                Op::Reshape {
                    shape: vec![l as i64, rr as i64],
                },
                &[x],
            )?,
            1,
        )
    } else {
        (x, axis)
    };
    let y = if log {
        // x − max − log(sum(exp(x − max))): stays finite where log(softmax) would underflow.
        let m = c.add(
            Op::Reduce {
                op: ReduceOp::Max,
                axes: vec![ax],
                keep_dim: true,
            },
            &[xi],
        )?;
        let d = c.add(Op::Binary(B::Sub), &[xi, m])?;
        let e = c.add(Op::Activation(A::Exp), &[d])?;
        let s = c.add(
            Op::Reduce {
                op: ReduceOp::Sum,
                axes: vec![ax],
                keep_dim: true,
            },
            &[e],
        )?;
        let l = c.add(Op::Activation(A::Log), &[s])?;
        c.add(Op::Binary(B::Sub), &[d, l])?
    } else {
        c.add(Op::Softmax { axis: ax }, &[xi])?
    };
    if legacy {
        return one(reshape_to(c, y, &xs.dims)?);
    }
    one(y)
}

/// One-hot of the first maximum along the axis (opset < 13: the 2-D coerced form).
fn hardmax(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let xs = c.shape(x)?.clone();
    let dims = xs
        .static_dims()
        .ok_or_else(|| c.unsupported("Hardmax on symbolic dims"))?;
    let r = dims.len() as i64;
    let legacy = c.opset < 13;
    let axis = Attrs(n).i_or("axis", if legacy { 1 } else { -1 });
    let a = (if axis < 0 { axis + r } else { axis }).clamp(0, r.max(1) - 1) as usize;
    let (xi, view): (NodeId, Vec<usize>) = if legacy {
        let (l, rr) = (dims[..a].iter().product(), dims[a..].iter().product());
        (
            c.add(
                Op::Reshape {
                    shape: vec![l as i64, rr as i64],
                },
                &[x],
            )?,
            vec![l, rr],
        )
    } else {
        (x, dims.clone())
    };
    let ax = if legacy { 1 } else { a };
    let am = c.add(
        Op::ArgMax {
            axis: ax as i64,
            keep_dim: true,
        },
        &[xi],
    )?;
    let mut idims = vec![1usize; view.len()];
    idims[ax] = view[ax];
    c.limit("an index table", view[ax])?;
    let iota: Vec<i64> = (0..view[ax] as i64).collect();
    let iota = c.constant(HostTensor::from_i64(&idims, &iota))?;
    let hit = c.add(Op::Compare(rlx_ir::CompareOp::Eq), &[am, iota])?;
    let y = c.add(Op::Cast { to: xs.dtype }, &[hit])?;
    one(reshape_to(c, y, &xs.dims)?)
}

/// Keep the upper (j − i ≥ k) or lower (j − i ≤ k) triangle of the last two dims.
fn trilu(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let d = c.static_dims(x)?;
    if d.len() < 2 {
        return Err(c.err("needs rank 2 or more"));
    }
    let k = c
        .const_ints(n, 1)?
        .and_then(|v| v.first().copied())
        .unwrap_or(0);
    let upper = Attrs(n).i_or("upper", 1) != 0;
    let (rows, cols) = (d[d.len() - 2], d[d.len() - 1]);
    c.limit("a triangle mask", rows.saturating_mul(cols))?;
    let mut mask = Vec::with_capacity(rows * cols);
    for i in 0..rows as i64 {
        for j in 0..cols as i64 {
            mask.push(if upper { j - i >= k } else { j - i <= k });
        }
    }
    let m = c.constant(HostTensor::from_bool(&[rows, cols], &mask))?;
    let dt = c.dtype(x)?;
    let zero = c.scalar(0.0, dt)?;
    one(c.add(Op::Where, &[m, x, zero])?)
}

/// Any-rank, dilated pooling: the max (or sum) over the window's offsets of strided slices of
/// the explicitly padded input; an average divides by the same sum over a ones map (padding
/// counted as `include` says, ceil_mode's extra end padding never).
fn sliced_pool(
    c: &mut ImportCtx,
    x: NodeId,
    g: &Geometry,
    kind: PoolKind,
    include: bool,
) -> Result<NodeId, OnnxError> {
    let xd = c.static_dims(x)?;
    let k = g.kernel.len();
    let full: Vec<[usize; 2]> = (0..k)
        .map(|i| [g.pads[i].0, g.pads[i].1 + g.extra[i]])
        .collect();
    let pad_all = |c: &mut ImportCtx, v: NodeId, p: &[[usize; 2]], value: f64| {
        if p.iter().all(|q| *q == [0, 0]) {
            return Ok(v);
        }
        let mut pads = vec![[0, 0]; 2];
        pads.extend_from_slice(p);
        c.add(Op::Pad { pads, value }, &[v])
    };
    let mut out = vec![];
    for i in 0..k {
        let span = xd[2 + i] + full[i][0] + full[i][1];
        let ext = g.dilation[i] * (g.kernel[i] - 1) + 1;
        if span < ext {
            return Err(c.err(format!("window {ext} longer than the padded input {span}")));
        }
        out.push((span - ext) / g.stride[i] + 1);
    }
    let windows = g
        .kernel
        .iter()
        .try_fold(1usize, |a, &v| a.checked_mul(v))
        .unwrap_or(usize::MAX);
    if windows > 4096 {
        return Err(c.unsupported(format!("a {windows}-element dilated pooling window")));
    }
    // Σ or max over the window offsets of one (padded) map.
    let reduce = |c: &mut ImportCtx, v: NodeId, max: bool| -> Result<NodeId, OnnxError> {
        let mut acc: Option<NodeId> = None;
        for w in 0..windows {
            let (mut rem, mut starts, mut ends) = (w, vec![], vec![]);
            for i in (0..k).rev() {
                let j = rem % g.kernel[i];
                rem /= g.kernel[i];
                let s = (j * g.dilation[i]) as i64;
                starts.insert(0, s);
                ends.insert(0, s + ((out[i] - 1) * g.stride[i]) as i64 + 1);
            }
            let axes = (2..2 + k as i64).collect();
            let steps = g.stride.iter().map(|&s| s as i64).collect();
            let sl = c.add(
                Op::Slice {
                    axes,
                    starts,
                    ends,
                    steps,
                },
                &[v],
            )?;
            acc = Some(match acc {
                None => sl,
                Some(a) => c.add(Op::Binary(if max { B::Max } else { B::Add }), &[a, sl])?,
            });
        }
        acc.ok_or_else(|| c.err("an empty window"))
    };
    let max = kind == PoolKind::Max;
    let fill = if max { f64::NEG_INFINITY } else { 0.0 };
    let xp = pad_all(c, x, &full, fill)?;
    let y = reduce(c, xp, max)?;
    if max {
        return Ok(y);
    }
    let dt = c.dtype(x)?;
    let mut od = vec![1, 1];
    od.extend_from_slice(&xd[2..]);
    let numel = od
        .iter()
        .try_fold(1usize, |a, &v| a.checked_mul(v))
        .unwrap_or(usize::MAX);
    c.limit("a ones map", numel)?;
    let ones = c.constant(HostTensor::from_f64_as(&od, &vec![1.0; numel], dt))?;
    let ones = if include {
        let real: Vec<[usize; 2]> = g.pads.iter().map(|p| [p.0, p.1]).collect();
        let o = pad_all(c, ones, &real, 1.0)?;
        let extra: Vec<[usize; 2]> = g.extra.iter().map(|&e| [0, e]).collect();
        pad_all(c, o, &extra, 0.0)?
    } else {
        pad_all(c, ones, &full, 0.0)?
    };
    let count = reduce(c, ones, false)?;
    c.add(Op::Binary(B::Div), &[y, count])
}
