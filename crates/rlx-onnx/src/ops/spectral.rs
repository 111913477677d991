//! DFT and STFT as the IR's complex `Fft` (over the second-to-last axis of `[.., n, 2]`): a real
//! input gains a zero imaginary part, the transformed axis is moved next to the complex
//! pair and back, `dft_length` zero-pads or truncates, `onesided` keeps the first n/2 + 1
//! bins. ONNX's inverse is scaled by 1/n, the IR's `Backward` norm.
use super::{one, Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::ImportCtx;
use rlx_ir::{FftNorm, Op};

pub(super) fn register(r: &mut Registry) {
    r.insert("DFT", dft);
    r.insert("STFT", stft);
}

/// STFT: frames gathered by a host index table `[frames, frame_length]`, windowed, then one
/// `Fft` over the frame axis; `onesided` keeps the first n/2 + 1 bins.
fn stft(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let mut x = c.input(n, 0)?;
    let dims = c.static_dims(x)?;
    let [_, sig, pair] = dims[..] else {
        return Err(c.err(format!(
            "signal must be [batch, length, 1 | 2], got {dims:?}"
        )));
    };
    if !matches!(pair, 1 | 2) {
        return Err(c.err(format!("signal's last dim must be 1 or 2, got {pair}")));
    }
    fn one_int(
        c: &ImportCtx,
        v: Option<Vec<i64>>,
        what: &str,
    ) -> Result<Option<usize>, crate::OnnxError> {
        match v.as_deref() {
            None => Ok(None),
            Some([s]) if *s >= 1 => Ok(Some(*s as usize)),
            Some(o) => Err(c.err(format!("{what} {o:?} must be one integer ≥ 1"))),
        }
    }
    let step = c.const_ints(n, 1)?;
    let step = one_int(c, step, "frame_step")?.ok_or_else(|| c.err("needs frame_step"))?;
    let window = c.opt_input(n, 2)?;
    let flen = c.const_ints(n, 3)?;
    let flen = match (one_int(c, flen, "frame_length")?, window) {
        (Some(l), _) => l,
        (None, Some(w)) => c.static_dims(w)?.first().copied().unwrap_or(0),
        (None, None) => return Err(c.err("needs a window or frame_length")),
    };
    if flen == 0 || flen > sig {
        return Err(c.err(format!("frame_length {flen} for a signal of {sig}")));
    }
    let frames = (sig - flen) / step + 1;
    c.limit("an STFT frame table", frames * flen)?;
    if pair == 1 {
        let pads = vec![[0, 0], [0, 0], [0, 1]];
        x = c.add(Op::Pad { pads, value: 0.0 }, &[x])?;
    }
    let idx: Vec<i64> = (0..frames)
        .flat_map(|f| (0..flen).map(move |t| (f * step + t) as i64))
        .collect();
    let it = c.constant(rlx_ir::HostTensor::from_i64(&[frames, flen], &idx))?;
    // [batch, frames, flen, 2]
    let mut y = c.add(Op::Gather { axis: 1 }, &[x, it])?;
    if let Some(w) = window {
        let w = c.add(
            Op::Reshape {
                shape: vec![flen as i64, 1],
            },
            &[w],
        )?;
        let w = super::elementwise::cast_to(c, w, c.dtype(y)?)?;
        y = c.add(Op::Binary(rlx_ir::BinaryOp::Mul), &[y, w])?;
    }
    let norm = FftNorm::Backward;
    y = c.add(
        Op::Fft {
            inverse: false,
            norm,
        },
        &[y],
    )?;
    if Attrs(n).i_or("onesided", 1) != 0 {
        let op = Op::Narrow {
            axis: 2,
            start: 0,
            len: flen / 2 + 1,
        };
        y = c.add(op, &[y])?;
    }
    one(y)
}

fn dft(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let mut x = c.input(n, 0)?;
    let a = Attrs(n);
    let (inverse, onesided) = (a.i_or("inverse", 0) != 0, a.i_or("onesided", 0) != 0);
    if inverse && onesided {
        return Err(c.unsupported("inverse with onesided (a real output)"));
    }
    let dims = c.static_dims(x)?;
    let r = dims.len();
    if r < 2 || !matches!(dims[r - 1], 1 | 2) {
        return Err(c.err(format!("needs [.., signal.., 1 | 2], got {dims:?}")));
    }
    let axis = if c.opset >= 20 {
        match c.const_ints(n, 2)? {
            Some(v) if v.len() == 1 => v[0],
            Some(_) => return Err(c.err("axis must hold one integer")),
            None => -2,
        }
    } else {
        a.i_or("axis", 1)
    };
    let ax = rlx_ir::normalize_axis(axis, r).map_err(|e| c.err(e))?;
    if ax == r - 1 {
        return Err(c.err("axis must not be the last (complex) axis"));
    }
    let len = match c.const_ints(n, 1)? {
        Some(v) if v.len() == 1 && v[0] >= 1 => Some(v[0] as usize),
        Some(v) => return Err(c.err(format!("dft_length {v:?} must be one integer ≥ 1"))),
        None => None,
    };
    if dims[r - 1] == 1 {
        // A zero imaginary part: pad the size-1 pair axis to 2.
        let mut pads = vec![[0usize; 2]; r];
        pads[r - 1] = [0, 1];
        x = c.add(Op::Pad { pads, value: 0.0 }, &[x])?;
    }
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(ax, r - 2);
    let moved = ax != r - 2;
    if moved {
        x = c.add(Op::Transpose { perm: perm.clone() }, &[x])?;
    }
    let have = dims[ax];
    if let Some(l) = len {
        if l < have {
            x = c.add(
                Op::Narrow {
                    axis: r as i64 - 2,
                    start: 0,
                    len: l,
                },
                &[x],
            )?;
        } else if l > have {
            let mut pads = vec![[0usize; 2]; r];
            pads[r - 2] = [0, l - have];
            x = c.add(Op::Pad { pads, value: 0.0 }, &[x])?;
        }
    }
    let l = len.unwrap_or(have);
    let norm = FftNorm::Backward;
    x = c.add(Op::Fft { inverse, norm }, &[x])?;
    if onesided {
        let keep = l / 2 + 1;
        let op = Op::Narrow {
            axis: r as i64 - 2,
            start: 0,
            len: keep,
        };
        x = c.add(op, &[x])?;
    }
    if moved {
        // A swap is its own inverse.
        x = c.add(Op::Transpose { perm }, &[x])?;
    }
    one(x)
}
