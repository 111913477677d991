//! Collectives as NCCL calls over the plan's fixed pointers, recorded as steps of the plan
//! like kernels, so they are captured into its CUDA graph.
//!
//! NCCL gathers and scatters rank-major: rank r's part is the r-th contiguous slab. That is
//! the IR's concatenation along `axis` when every dim before the axis is 1; otherwise the
//! parts are moved through a scratch buffer (`[ranks, outer, run]` ↔ `[outer, ranks, run]`)
//! with the strided-copy kernels. Without a communicator the group is this one rank: each
//! collective is a copy.
use super::shape::move_ops::{copy_view_raw, View};
use super::{Lowered, NodeCtx};
use crate::nccl::{data_type, red_op, CollKind, CollectiveCall, Overlap};
use crate::plan::{Pending, Step};
use crate::unsupported;
use rlx_ir::Op;

pub(crate) fn lower(ctx: &mut NodeCtx) -> Lowered {
    let x = ctx.input(0)?.clone();
    let out = ctx.out.clone();
    let op = ctx.op().clone();
    let ranks = match op {
        Op::AllGather { ranks, .. } | Op::ReduceScatter { ranks, .. } => Some(ranks),
        _ => None,
    };
    let Some(comm) = ctx.env.comm.clone() else {
        if ranks.is_some_and(|r| r != 1) {
            unsupported!(
                "{} spans {} ranks and this executable has no NCCL communicator (compile it on \
                 a CUDA mesh)",
                op.kind(),
                ranks.unwrap_or(0)
            );
        }
        return ctx.copy(out.ptr, x.ptr, out.bytes());
    };
    if ranks.is_some_and(|r| r != comm.ranks()) {
        unsupported!(
            "{} spans {} ranks but the communicator has {}",
            op.kind(),
            ranks.unwrap_or(0),
            comm.ranks()
        );
    }
    let dtype = data_type(x.dtype);
    let n = comm.ranks();
    let es = x.dtype.size_bytes();
    let label = format!("{}#{} nccl", op.kind(), ctx.node.id.0);
    // `beside`: run on the side stream (see `nccl::Overlap`) — not when a kernel of this
    // node reads what the call writes.
    let call = |ctx: &mut NodeCtx, kind, send, recv, count, beside: bool| -> Lowered {
        let overlap = if beside {
            let (ready, done) = (ctx.env.events.make()?, ctx.env.events.make()?);
            let (sb, rb) = match kind {
                CollKind::AllGather => (count * es, count * n * es),
                CollKind::ReduceScatter(_) => (count * n * es, count * es),
                CollKind::AllReduce(_) => (count * es, count * es),
            };
            ctx.env.pending.push(Pending {
                ranges: [(send, sb), (recv, rb)],
                done,
            });
            Some(Overlap {
                side: ctx.env.side,
                ready,
                done,
            })
        } else {
            None
        };
        let c = CollectiveCall {
            kind,
            send,
            recv,
            count,
            dtype,
            comm: comm.clone(),
            label: label.clone(),
            overlap,
        };
        ctx.env.steps.push(Step::Collective(Box::new(c)));
        Ok(())
    };
    // (outer, run): the extent before the axis, and one part's contiguous run after it.
    let split = |axis: usize| -> (usize, usize) {
        let d = &x.dims;
        (d[..axis].iter().product(), d[axis..].iter().product())
    };
    match op {
        Op::AllReduce { reduce } => {
            let k = CollKind::AllReduce(red_op(reduce));
            call(ctx, k, x.ptr, out.ptr, x.numel(), true)?;
        }
        Op::AllGather { axis, .. } => {
            let (outer, run) = split(axis);
            if outer == 1 {
                call(ctx, CollKind::AllGather, x.ptr, out.ptr, x.numel(), true)?;
            } else {
                // Gather rank-major into scratch, then [ranks, outer, run] → [outer, ranks, run].
                let tmp = ctx.scratch(out.bytes())?;
                // The copy below reads what the call writes: it stays on the main stream.
                call(ctx, CollKind::AllGather, x.ptr, tmp, x.numel(), false)?;
                let view = View::contiguous(&[n, outer, run]).permute(&[1, 0, 2]);
                copy_view_raw(ctx, tmp, &view, out.ptr, es)?;
            }
        }
        Op::ReduceScatter { reduce, axis, .. } => {
            let (outer, run) = split(axis);
            let piece = run / n;
            if outer == 1 {
                let k = CollKind::ReduceScatter(red_op(reduce));
                call(ctx, k, x.ptr, out.ptr, out.numel(), true)?;
            } else {
                // [outer, ranks, piece] → [ranks, outer, piece], then scatter rank-major.
                let tmp = ctx.scratch(x.bytes())?;
                let view = View::contiguous(&[outer, n, piece]).permute(&[1, 0, 2]);
                copy_view_raw(ctx, x.ptr, &view, tmp, es)?;
                let k = CollKind::ReduceScatter(red_op(reduce));
                call(ctx, k, tmp, out.ptr, out.numel(), true)?;
            }
        }
        _ => unsupported!("not a collective"),
    }
    Ok(())
}
