//! Resize (opset 10+) and Upsample as separable per-axis interpolation with static sizes:
//! for every resized axis, a Gather of the neighbour rows (indices computed here, clamped as
//! ONNX's edge padding) and, for linear / cubic, a weighted sum with constant coefficients.
//! Every coordinate transformation mode (tf_crop_and_resize with its roi and
//! extrapolation_value), every nearest mode,
//! cubic_coeff_a, exclude_outside, antialias, keep_aspect_ratio_policy, axes.
use super::{one, Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{normalize_axis, BinaryOp as B, HostTensor, NodeId, Op, ReduceOp};

pub(super) fn register(r: &mut Registry) {
    r.insert("Resize", resize);
    r.insert("Upsample", upsample);
}

/// How output positions map to input coordinates, and how they are sampled.
struct Mode {
    coord: String,
    mode: String,
    nearest: String,
    cubic_a: f64,
    exclude_outside: bool,
    /// tf_crop_and_resize: (start, end) of each axis's region, as fractions of the axis.
    roi: Vec<(f64, f64)>,
    extrapolation: f64,
    /// Downsampling widens the linear / cubic kernel by 1/scale (ONNX's antialias).
    antialias: bool,
}

/// The input coordinate of output position `x` (ONNX's coordinate transformation modes).
fn source(m: &Mode, axis: usize, x: f64, scale: f64, len_in: usize, len_out: usize) -> Option<f64> {
    let out_f = scale * len_in as f64;
    let last = len_in as f64 - 1.0;
    Some(match m.coord.as_str() {
        "tf_crop_and_resize" => {
            let (r0, r1) = *m.roi.get(axis)?;
            let span = if out_f == 1.0 {
                (r1 - r0) * last / 2.0
            } else {
                x * (r1 - r0) * last / (out_f - 1.0)
            };
            span + r0 * last
        }
        "align_corners" if out_f == 1.0 => 0.0,
        "align_corners" => x * (len_in as f64 - 1.0) / (out_f - 1.0),
        "asymmetric" => x / scale,
        "pytorch_half_pixel" if out_f == 1.0 => -0.5,
        "pytorch_half_pixel" | "half_pixel" => (x + 0.5) / scale - 0.5,
        "tf_half_pixel_for_nn" => (x + 0.5) / scale,
        "half_pixel_symmetric" => {
            let adjustment = len_out as f64 / out_f;
            let offset = len_in as f64 / 2.0 * (1.0 - adjustment);
            offset + (x + 0.5) / scale - 0.5
        }
        _ => return None,
    })
}

/// Neighbour indices (unclamped) and coefficients of one output position.
fn taps(m: &Mode, xo: f64, scale: f64) -> (Vec<i64>, Vec<f64>) {
    let fl = xo.floor();
    let ratio = if xo == fl { 1.0 } else { xo - fl };
    let a = m.cubic_a;
    let coeffs = if m.antialias {
        // Kernel taps i_start..1−i_start at distance scale·(i − ratio), normalised.
        let s = scale.min(1.0);
        let cubic = m.mode == "cubic";
        let reach = if cubic { 2.0 } else { 1.0 };
        let i_start = (-reach / s).floor() as i64 + 1;
        let w: Vec<f64> = (i_start..2 - i_start)
            .map(|i| {
                let t = (s * (i as f64 - ratio)).abs();
                if !cubic {
                    (1.0 - t).clamp(0.0, 1.0)
                } else if t <= 1.0 {
                    ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0
                } else if t < 2.0 {
                    ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a
                } else {
                    0.0
                }
            })
            .collect();
        let sum: f64 = w.iter().sum();
        w.iter().map(|v| v / sum).collect()
    } else if m.mode == "cubic" {
        let r = ratio;
        let far = |t: f64| ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a;
        let near = |t: f64| ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0;
        vec![far(r + 1.0), near(r), near(1.0 - r), far(2.0 - r)]
    } else {
        vec![1.0 - ratio, ratio]
    };
    let n = coeffs.len() as i64;
    // Window of n taps around xo; at an integer xo the window leans left (ratio = 1).
    let start = if xo == fl {
        fl as i64 - n / 2
    } else {
        fl as i64 - n / 2 + 1
    };
    ((0..n).map(|j| start + j).collect(), coeffs)
}

fn nearest_index(m: &Mode, xo: f64) -> i64 {
    let fl = xo.floor();
    let frac = xo - fl;
    (match m.nearest.as_str() {
        "floor" => fl,
        "ceil" => xo.ceil(),
        "round_prefer_ceil" if frac == 0.5 => xo.ceil(),
        "round_prefer_ceil" => xo.round(),
        _ if frac == 0.5 => fl,
        _ => xo.round(),
    }) as i64
}

/// Resize one axis of `x` from `len_in` to `len_out` with `scale`.
fn resize_axis(
    c: &mut ImportCtx,
    x: NodeId,
    axis: usize,
    scale: f64,
    len_out: usize,
    m: &Mode,
) -> Result<NodeId, OnnxError> {
    let d = c.static_dims(x)?;
    let len_in = d[axis];
    c.limit("a resize index table", len_out.saturating_mul(4))?;
    let mut srcs = Vec::with_capacity(len_out);
    for o in 0..len_out {
        srcs.push(
            source(m, axis, o as f64, scale, len_in, len_out).ok_or_else(|| {
                c.unsupported(format!("coordinate_transformation_mode {}", m.coord))
            })?,
        );
    }
    let outside: Vec<bool> = srcs
        .iter()
        .map(|&xo| m.coord == "tf_crop_and_resize" && (xo < 0.0 || xo > len_in as f64 - 1.0))
        .collect();
    let y = interpolate(c, x, axis, m, &srcs, scale)?;
    if !outside.contains(&true) {
        return Ok(y);
    }
    // tf_crop_and_resize: positions whose source lies outside the input take the value.
    let mut md = vec![1usize; d.len()];
    md[axis] = len_out;
    let mask = c.constant(HostTensor::from_bool(&md, &outside))?;
    let dt = c.dtype(x)?;
    let v = c.scalar(m.extrapolation, dt)?;
    c.add(Op::Where, &[mask, v, y])
}

/// The gathers (and weighted sum) of one axis.
fn interpolate(
    c: &mut ImportCtx,
    x: NodeId,
    axis: usize,
    m: &Mode,
    srcs: &[f64],
    scale: f64,
) -> Result<NodeId, OnnxError> {
    let d = c.static_dims(x)?;
    let len_in = d[axis];
    let len_out = srcs.len();
    let clamp = |i: i64| i.clamp(0, len_in as i64 - 1);
    if m.mode == "nearest" {
        let mut idx = Vec::with_capacity(len_out);
        for o in 0..len_out {
            idx.push(clamp(nearest_index(m, srcs[o])));
        }
        let idx = c.constant(HostTensor::from_i64(&[len_out], &idx))?;
        return c.add(Op::Gather { axis: axis as i64 }, &[x, idx]);
    }
    let (mut idx, mut w) = (vec![], vec![]);
    let mut taps_n = 0;
    for o in 0..len_out {
        let (ii, mut cc) = taps(m, srcs[o], scale);
        if m.exclude_outside {
            for (j, &i) in ii.iter().enumerate() {
                if i < 0 || i >= len_in as i64 {
                    cc[j] = 0.0;
                }
            }
            let s: f64 = cc.iter().sum();
            let s = if s == 0.0 { 1.0 } else { s };
            cc.iter_mut().for_each(|v| *v /= s);
        }
        taps_n = ii.len();
        idx.extend(ii.into_iter().map(clamp));
        w.extend(cc);
    }
    let idx = c.constant(HostTensor::from_i64(&[len_out * taps_n], &idx))?;
    let g = c.add(Op::Gather { axis: axis as i64 }, &[x, idx])?;
    // [.., out·n, ..] → [.., out, n, ..], weighted, summed over the taps.
    let mut split: Vec<i64> = d.iter().map(|&v| v as i64).collect();
    split[axis] = len_out as i64;
    split.insert(axis + 1, taps_n as i64);
    let g = c.add(Op::Reshape { shape: split }, &[g])?;
    let mut wd = vec![1usize; d.len() + 1];
    wd[axis] = len_out;
    wd[axis + 1] = taps_n;
    let dt = c.dtype(x)?;
    let w = c.constant(HostTensor::from_f64_as(&wd, &w, dt))?;
    let p = c.add(Op::Binary(B::Mul), &[g, w])?;
    let axes = vec![axis as i64 + 1];
    c.add(
        Op::Reduce {
            op: ReduceOp::Sum,
            axes,
            keep_dim: false,
        },
        &[p],
    )
}

/// Resize every axis whose size or scale changes.
fn apply(c: &mut ImportCtx, x: NodeId, scales: &[f64], sizes: &[usize], m: &Mode) -> Translated {
    if !c.dtype(x)?.is_float() && m.mode != "nearest" {
        return Err(c.unsupported(format!("{} resize of {}", m.mode, c.dtype(x)?)));
    }
    let d = c.static_dims(x)?;
    let mut y = x;
    for a in 0..d.len() {
        if sizes[a] != d[a] || scales[a] != 1.0 {
            y = resize_axis(c, y, a, scales[a], sizes[a], m)?;
        }
    }
    one(y)
}

fn resize(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let at = Attrs(n);
    let m = Mode {
        coord: at
            .s("coordinate_transformation_mode")
            .unwrap_or_else(|| "half_pixel".into()),
        mode: at.s("mode").unwrap_or_else(|| "nearest".into()),
        nearest: at
            .s("nearest_mode")
            .unwrap_or_else(|| "round_prefer_floor".into()),
        cubic_a: at.f_or("cubic_coeff_a", -0.75) as f64,
        exclude_outside: at.i_or("exclude_outside", 0) != 0,
        roi: vec![],
        extrapolation: at.f_or("extrapolation_value", 0.0) as f64,
        antialias: at.i_or("antialias", 0) != 0,
    };
    let mut m = m;
    if !matches!(m.mode.as_str(), "nearest" | "linear" | "cubic") {
        return Err(c.err(format!("mode \"{}\"", m.mode)));
    }
    let x = c.input(n, 0)?;
    let d = c.static_dims(x)?;
    let r = d.len();
    let (scales, sizes) = if c.opset < 11 {
        (c.const_input(n, 1)?.map(|t| t.to_f64_vec()), None)
    } else {
        let sizes = c.const_ints(n, 3)?.filter(|v| !v.is_empty());
        let scales = c
            .const_input(n, 2)?
            .map(|t| t.to_f64_vec())
            .filter(|v| !v.is_empty());
        (scales, sizes)
    };
    let axes: Vec<usize> = match at.ints("axes") {
        Some(a) => a
            .iter()
            .map(|&v| normalize_axis(v, r))
            .collect::<Result<_, _>>()
            .map_err(|e| c.err(e))?,
        None => (0..r).collect(),
    };
    if m.coord == "tf_crop_and_resize" {
        let roi = c
            .const_input(n, 1)?
            .map(|t| t.to_f64_vec())
            .ok_or_else(|| c.err("needs roi"))?;
        if roi.len() != 2 * axes.len() {
            return Err(c.err(format!(
                "roi of {} values for {} axes",
                roi.len(),
                axes.len()
            )));
        }
        m.roi = vec![(0.0, 1.0); r];
        for (i, &a) in axes.iter().enumerate() {
            m.roi[a] = (roi[i], roi[i + axes.len()]);
        }
    }
    let mut sc = vec![1.0; r];
    let mut out = d.clone();
    if let Some(s) = sizes {
        if s.len() != axes.len() {
            return Err(c.err(format!("{} sizes for {} axes", s.len(), axes.len())));
        }
        for (&a, &v) in axes.iter().zip(&s) {
            out[a] = usize::try_from(v).map_err(|_| c.err(format!("size {v}")))?;
            sc[a] = out[a] as f64 / d[a] as f64;
        }
        let policy = at
            .s("keep_aspect_ratio_policy")
            .unwrap_or_else(|| "stretch".into());
        if policy != "stretch" {
            let pick = axes.iter().map(|&a| sc[a]);
            let s = if policy == "not_larger" {
                pick.fold(f64::INFINITY, f64::min)
            } else {
                pick.fold(0.0, f64::max)
            };
            for &a in &axes {
                sc[a] = s;
                out[a] = (s * d[a] as f64 + 0.5) as usize;
            }
        }
    } else if let Some(s) = scales {
        if s.len() != axes.len() {
            return Err(c.err(format!("{} scales for {} axes", s.len(), axes.len())));
        }
        for (&a, &v) in axes.iter().zip(&s) {
            if !(v > 0.0 && v.is_finite()) {
                return Err(c.err(format!("scale {v}")));
            }
            sc[a] = v;
            out[a] = (v * d[a] as f64) as usize;
        }
    } else {
        return Err(c.err("needs scales or sizes"));
    }
    apply(c, x, &sc, &out, &m)
}

/// Upsample (opsets 7–9): asymmetric coordinates, nearest (floor) or linear.
fn upsample(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let at = Attrs(n);
    let x = c.input(n, 0)?;
    let d = c.static_dims(x)?;
    let scales: Vec<f64> = match at.floats("scales") {
        Some(s) => s.iter().map(|&v| v as f64).collect(),
        None => c
            .const_input(n, 1)?
            .map(|t| t.to_f64_vec())
            .ok_or_else(|| c.err("needs scales"))?,
    };
    if scales.len() != d.len() {
        return Err(c.err(format!("{} scales for rank {}", scales.len(), d.len())));
    }
    let out: Vec<usize> = d
        .iter()
        .zip(&scales)
        .map(|(&l, &s)| (l as f64 * s) as usize)
        .collect();
    let m = Mode {
        coord: "asymmetric".into(),
        mode: at.s("mode").unwrap_or_else(|| "nearest".into()),
        nearest: "floor".into(),
        cubic_a: -0.75,
        exclude_outside: false,
        roi: vec![],
        extrapolation: 0.0,
        antialias: false,
    };
    apply(c, x, &scales, &out, &m)
}
