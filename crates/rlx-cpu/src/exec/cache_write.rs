//! In-place cache writes (`CacheWrite`, `RopeCacheWrite`): the step's new rows, rotated by
//! the Rope thunk where the op fuses it, written into the cache leaf of this run at `pos`.
use super::{label, no_value, normalise, read_loc, Arenas, CpuExecutable, Leaves};
use crate::buffer::{Buf, BufMut, OutView, Storage, TensorView};
use crate::error::CpuError;
use crate::plan::Plan;
use rlx_ir::{Node, Op};

impl CpuExecutable {
    /// Run an in-place cache write (`CacheWrite`, `RopeCacheWrite`).
    pub(super) fn write_in_place(
        &self,
        plan: &Plan,
        arenas: &Arenas,
        shared: &[Option<Storage>],
        slots: &mut [Option<Storage>],
        node: &Node,
    ) -> Result<(), CpuError> {
        let ins: Vec<usize> = node.inputs.iter().map(|i| i.0).collect();
        let (axis, rope) = match node.op {
            Op::CacheWrite { axis } => (axis, None),
            Op::RopeCacheWrite {
                axis,
                head_dim,
                n_rot,
                style,
            } => (axis, Some((head_dim, n_rot, style, [ins[3], ins[4]]))),
            _ => return Err(no_value(node)),
        };
        let w = RowWrite {
            target: ins[0],
            new: ins[1],
            pos: ins[2],
            axis,
            rope,
        };
        self.write_rows(plan, arenas, shared, slots, node, w)
    }

    /// Write rows into a cache leaf in place: copy the rows and the position out (they are
    /// small: one step's rows), then borrow the target — this run's own slot — mutably.
    /// Rotated rows go through the Rope thunk itself, so a fused op writes exactly what
    /// Rope then CacheWrite would.
    pub(super) fn write_rows(
        &self,
        plan: &Plan,
        arenas: &Arenas,
        shared: &[Option<Storage>],
        slots: &mut [Option<Storage>],
        node: &Node,
        w: RowWrite,
    ) -> Result<(), CpuError> {
        let err = |msg: String| CpuError::Op {
            node: label(node),
            op: node.op.kind().name(),
            msg,
        };
        let RowWrite {
            target,
            new,
            pos,
            axis,
            rope,
        } = w;
        let (new_vals, pos) = {
            let leaves = Leaves {
                shared,
                inputs: slots,
            };
            // SAFETY: only shared views exist while these are read; bounds are checked.
            let read = |j: usize| unsafe { read_loc(arenas, &leaves, plan.locs[j]) };
            let new_vals = match read(new).ok_or_else(|| no_value(&self.graph.nodes[new]))? {
                Buf::F32(s) => Storage::F32(s.to_vec()),
                Buf::F64(s) => Storage::F64(s.to_vec()),
                Buf::I64(s) => Storage::I64(s.to_vec()),
                Buf::U8(s) => Storage::I64(s.iter().map(|&b| b as i64).collect()),
            };
            let pos = match read(pos) {
                Some(Buf::I64(s)) if s.len() == 1 => s[0],
                _ => return Err(err("pos must be one I64 value".into())),
            };
            let new_vals = match rope {
                None => new_vals,
                Some((head_dim, n_rot, style, [cos, sin])) => {
                    let view = |j: usize| -> Result<TensorView, CpuError> {
                        Ok(TensorView {
                            shape: &plan.shapes[j],
                            dtype: self.graph.nodes[j].shape.dtype,
                            data: read(j).ok_or_else(|| no_value(&self.graph.nodes[j]))?,
                        })
                    };
                    let (cos, sin) = (view(cos)?, view(sin)?);
                    let x = TensorView {
                        data: new_vals.as_buf(),
                        ..view(new)?
                    };
                    let mut out = match &new_vals {
                        Storage::F32(v) => Storage::F32(vec![0.0; v.len()]),
                        Storage::F64(v) => Storage::F64(vec![0.0; v.len()]),
                        _ => return Err(err("Rope needs float rows".into())),
                    };
                    let data = match &mut out {
                        Storage::F32(v) => BufMut::F32(v),
                        Storage::F64(v) => BufMut::F64(v),
                        _ => return Err(err("Rope needs float rows".into())),
                    };
                    let out_view = OutView {
                        shape: &plan.shapes[new],
                        dtype: x.dtype,
                        data,
                    };
                    crate::ops::attention::rope(head_dim, n_rot, style, &[x, cos, sin], out_view)
                        .map_err(|e| match e {
                        CpuError::Op { msg, .. } => err(msg),
                        other => other,
                    })?;
                    // The unfused Rope's output is rounded to its storage dtype here too.
                    match &mut out {
                        Storage::F32(v) => normalise(BufMut::F32(v), x.dtype),
                        Storage::F64(v) => normalise(BufMut::F64(v), x.dtype),
                        _ => {}
                    }
                    out
                }
            };
            (new_vals, pos)
        };
        let cache = slots
            .get_mut(target)
            .and_then(Option::as_mut)
            .ok_or_else(|| no_value(&self.graph.nodes[target]))?;
        let dst = match cache {
            Storage::F32(v) => BufMut::F32(v),
            Storage::F64(v) => BufMut::F64(v),
            Storage::I64(v) => BufMut::I64(v),
            Storage::U8(_) => return Err(err("a U8 cache cannot be written in place".into())),
        };
        crate::ops::cache_write::cache_write(
            axis,
            dst,
            &plan.shapes[target],
            new_vals.as_buf(),
            &plan.shapes[new],
            pos,
        )
        .map_err(|e| match e {
            CpuError::Op { msg, .. } => err(msg),
            other => other,
        })
    }
}

/// One cache write of [`CpuExecutable::write_rows`]: node indices of the cache, the new
/// rows and the position, the axis, and the rotation (head size, n_rot, style, cos, sin).
pub(super) struct RowWrite {
    pub target: usize,
    pub new: usize,
    pub pos: usize,
    pub axis: usize,
    pub rope: Option<(usize, usize, rlx_ir::RopeStyle, [usize; 2])>,
}
