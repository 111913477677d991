//! CPU thunk: Rope. Each head row of x rotates its first n_rot dims by the angles of the
//! cos/sin row it broadcasts to; the rest is copied.
use crate::error::op_err;
use crate::util::broadcast_offsets;
use crate::{CpuError, Float, OutView, TensorView};
use rayon::prelude::*;
use rlx_ir::ops::{attention::rope_view, infer_shape};
use rlx_ir::{ComputeClass, Node, Op, RopeStyle, Shape};
use std::borrow::Cow;

/// A float input as `T`, converted when it is held in the other float class.
fn as_t<'a, T: Float>(t: &TensorView<'a>) -> Cow<'a, [T]> {
    match t.get::<T>() {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => Cow::Owned(t.to_f64_vec().into_iter().map(T::from_f64).collect()),
    }
}

struct Rot<'a, T> {
    head_dim: usize,
    n_rot: usize,
    style: RopeStyle,
    cos: &'a [T],
    sin: &'a [T],
    /// Row of cos/sin (in units of n_rot/2) for each head row of x.
    rows: &'a [usize],
}

fn rotate<T: Float>(r: &Rot<T>, x: &[T], out: &mut [T]) {
    let half = r.n_rot / 2;
    let (hd, n_rot) = (r.head_dim, r.n_rot);
    // Enough head rows per task that rayon's bookkeeping stays small next to the work.
    let min_rows = (1 << 14) / hd + 1;
    out.par_chunks_mut(hd)
        .zip(x.par_chunks(hd))
        .zip(r.rows.par_iter())
        .with_min_len(min_rows)
        .for_each(|((o, x), &row)| {
            let c = &r.cos[row * half..(row + 1) * half];
            let s = &r.sin[row * half..(row + 1) * half];
            match r.style {
                RopeStyle::Half => {
                    let (x1, x2) = x[..n_rot].split_at(half);
                    let (o1, o2) = o[..n_rot].split_at_mut(half);
                    for i in 0..half {
                        o1[i] = x1[i] * c[i] - x2[i] * s[i];
                        o2[i] = x2[i] * c[i] + x1[i] * s[i];
                    }
                }
                RopeStyle::Interleaved => {
                    for i in 0..half {
                        let (a, b) = (x[2 * i], x[2 * i + 1]);
                        o[2 * i] = a * c[i] - b * s[i];
                        o[2 * i + 1] = b * c[i] + a * s[i];
                    }
                }
            }
            o[n_rot..].copy_from_slice(&x[n_rot..]);
        });
}

fn run<T: Float>(
    head_dim: usize,
    n_rot: usize,
    style: RopeStyle,
    ins: &[TensorView],
    rows: &[usize],
    out: &mut [T],
) -> Result<(), CpuError> {
    let x = ins[0].get::<T>()?;
    let cos = as_t::<T>(&ins[1]);
    let sin = as_t::<T>(&ins[2]);
    let r = Rot {
        head_dim,
        n_rot,
        style,
        cos: &cos,
        sin: &sin,
        rows,
    };
    rotate(&r, x, out);
    Ok(())
}

pub(crate) fn eval(node: &Node, ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let Op::Rope {
        head_dim,
        n_rot,
        style,
    } = node.op
    else {
        return Err(op_err(format!("{} is not Rope", node.op.kind())));
    };
    let shapes: Vec<Shape> = ins.iter().map(|t| Shape::new(t.shape, t.dtype)).collect();
    let refs: Vec<&Shape> = shapes.iter().collect();
    infer_shape(&node.op, &refs).map_err(op_err)?;
    if out.shape != ins[0].shape {
        return Err(op_err(format!(
            "output buffer {:?} does not match x {:?}",
            out.shape, ins[0].shape
        )));
    }
    let view = rope_view(&shapes[0].dims, &shapes[1].dims, head_dim, n_rot).map_err(op_err)?;
    let lead: Vec<usize> = view[..view.len() - 1]
        .iter()
        .map(|d| d.as_static().unwrap_or(1))
        .collect();
    let cos_lead = &ins[1].shape[..ins[1].shape.len() - 1];
    let rows = broadcast_offsets(cos_lead, &lead);
    match out.class() {
        ComputeClass::F32 => run::<f32>(head_dim, n_rot, style, ins, &rows, out.get_mut()?),
        ComputeClass::F64 => run::<f64>(head_dim, n_rot, style, ins, &rows, out.get_mut()?),
        ComputeClass::I64 => Err(op_err("Rope needs float inputs")),
    }
}
