//! Layout ops from Reshape / Transpose / Slice / Pad with static shapes: DepthToSpace
//! (DCR and CRD), SpaceToDepth, CenterCropPad, and EyeLike (a constant).
use super::{one, Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::ImportCtx;
use rlx_ir::{normalize_axis, HostTensor, Op};

pub(super) fn register(r: &mut Registry) {
    r.insert("DepthToSpace", depth_to_space);
    r.insert("SpaceToDepth", space_to_depth);
    r.insert("CenterCropPad", center_crop_pad);
    r.insert("EyeLike", eye_like);
}

fn blocksize(c: &ImportCtx, n: &NodeProto) -> Result<usize, crate::OnnxError> {
    let b = Attrs(n)
        .i("blocksize")
        .ok_or_else(|| c.err("needs blocksize"))?;
    usize::try_from(b)
        .ok()
        .filter(|&b| b > 0)
        .ok_or_else(|| c.err(format!("blocksize {b}")))
}

fn depth_to_space(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let d = c.static_dims(x)?;
    let b = blocksize(c, n)?;
    // The output's spatial dims are b times the input's: b², h·b and w·b must not overflow.
    let fits = |v: usize| v.checked_mul(b).is_some_and(|x| i64::try_from(x).is_ok());
    if d.len() != 4
        || b.checked_mul(b).is_none_or(|bb| d[1] % bb != 0)
        || !fits(d[2])
        || !fits(d[3])
    {
        return Err(c.err(format!("input {d:?} for blocksize {b}")));
    }
    let (nn, ch, h, w) = (
        d[0] as i64,
        (d[1] / (b * b)) as i64,
        d[2] as i64,
        d[3] as i64,
    );
    let bi = b as i64;
    let crd = Attrs(n).s("mode").as_deref() == Some("CRD");
    let (shape, perm) = if crd {
        (vec![nn, ch, bi, bi, h, w], vec![0, 1, 4, 2, 5, 3])
    } else {
        (vec![nn, bi, bi, ch, h, w], vec![0, 3, 4, 1, 5, 2])
    };
    let r = c.add(Op::Reshape { shape }, &[x])?;
    let t = c.add(Op::Transpose { perm }, &[r])?;
    one(c.add(
        Op::Reshape {
            shape: vec![nn, ch, h * bi, w * bi],
        },
        &[t],
    )?)
}

fn space_to_depth(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let d = c.static_dims(x)?;
    let b = blocksize(c, n)?;
    if d.len() != 4 || d[2] % b != 0 || d[3] % b != 0 {
        return Err(c.err(format!("input {d:?} for blocksize {b}")));
    }
    let (nn, ch, h, w, bi) = (
        d[0] as i64,
        d[1] as i64,
        (d[2] / b) as i64,
        (d[3] / b) as i64,
        b as i64,
    );
    let r = c.add(
        Op::Reshape {
            shape: vec![nn, ch, h, bi, w, bi],
        },
        &[x],
    )?;
    let t = c.add(
        Op::Transpose {
            perm: vec![0, 3, 5, 1, 2, 4],
        },
        &[r],
    )?;
    one(c.add(
        Op::Reshape {
            shape: vec![nn, ch * bi * bi, h, w],
        },
        &[t],
    )?)
}

/// Crop (centred, the extra element at the end) or zero-pad (likewise) each listed axis to
/// the target size.
fn center_crop_pad(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let d = c.static_dims(x)?;
    let target = c.const_ints(n, 1)?.ok_or_else(|| c.err("needs a shape"))?;
    let axes: Vec<usize> = match Attrs(n).ints("axes") {
        Some(a) => a
            .iter()
            .map(|&a| normalize_axis(a, d.len()))
            .collect::<Result<_, _>>()
            .map_err(|e| c.err(e))?,
        None => (0..d.len()).collect(),
    };
    if axes.len() != target.len() {
        return Err(c.err(format!("{} sizes for {} axes", target.len(), axes.len())));
    }
    let mut y = x;
    let mut pads = vec![[0usize, 0]; d.len()];
    for (&a, &t) in axes.iter().zip(&target) {
        let t = usize::try_from(t).map_err(|_| c.err(format!("size {t}")))?;
        if t < d[a] {
            let start = (d[a] - t) / 2;
            y = c.add(
                Op::Narrow {
                    axis: a as i64,
                    start,
                    len: t,
                },
                &[y],
            )?;
        } else if t > d[a] {
            let before = (t - d[a]) / 2;
            pads[a] = [before, t - d[a] - before];
        }
    }
    if pads.iter().any(|p| *p != [0, 0]) {
        y = c.add(Op::Pad { pads, value: 0.0 }, &[y])?;
    }
    one(y)
}

/// Ones on diagonal `k` of a 2-D shape like the input's, in `dtype` (default: the input's).
fn eye_like(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let d = c.static_dims(x)?;
    if d.len() != 2 {
        return Err(c.err(format!("input {d:?} is not 2-D")));
    }
    let a = Attrs(n);
    let dt = match a.i("dtype") {
        Some(code) => super::elementwise::cast_target(c, code)?,
        None => c.dtype(x)?,
    };
    let kk = a.i_or("k", 0);
    c.limit("an identity", d[0].saturating_mul(d[1]))?;
    let mut v = vec![0.0; d[0] * d[1]];
    for i in 0..d[0] {
        let j = i as i64 + kk;
        if (0..d[1] as i64).contains(&j) {
            v[i * d[1] + j as usize] = 1.0;
        }
    }
    one(c.constant(HostTensor::from_f64_as(&d, &v, dt))?)
}
