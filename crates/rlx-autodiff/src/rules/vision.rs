//! VJP rules of the Vision group: Conv, Pool (max and average), ResizeNearest2x (the
//! backward ops have none: no second order). Conv and max-pool emit the
//! dedicated backward ops; average pooling (padding counted) is a depthwise conv with a
//! constant 1/(kh·kw) kernel, so its VJP is that conv's input gradient.
use super::Grads;
use crate::util::{reduce, reshape, static_dims, unsupported};
use rlx_ir::{ConvSpec, Graph, HostTensor, Node, NodeId, Op, PoolKind, PoolSpec, ReduceOp};

pub(crate) fn conv(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
    spec: &ConvSpec,
) -> Grads {
    let ins = &node.inputs;
    let xd = static_dims(g, ins[0], node)?;
    let mut out = vec![None; ins.len()];
    if needs[0] {
        let op = Op::Conv2dBackwardInput {
            spec: *spec,
            input_hw: [xd[2], xd[3]],
        };
        out[0] = Some(g.add_node(op, &[dy, ins[1]])?);
    }
    if needs[1] {
        out[1] = Some(g.add_node(Op::Conv2dBackwardWeight(*spec), &[ins[0], dy])?);
    }
    if ins.len() > 2 && needs[2] {
        out[2] = Some(reduce(g, ReduceOp::Sum, dy, vec![0, 2, 3], false)?);
    }
    Ok(out)
}

pub(crate) fn pool(g: &mut Graph, node: &Node, dy: NodeId, spec: &PoolSpec) -> Grads {
    let x = node.inputs[0];
    match spec.kind {
        PoolKind::Max => Ok(vec![Some(
            g.add_node(Op::MaxPool2dBackward(*spec), &[x, dy])?,
        )]),
        PoolKind::Avg => {
            let xd = static_dims(g, x, node)?;
            let c = xd[1];
            let [kh, kw] = spec.kernel_size;
            if kh * kw == 0 {
                return Err(unsupported(node, "empty pooling window"));
            }
            let n = c * kh * kw;
            let wv = vec![1.0 / (kh * kw) as f64; n];
            let dt = g.shape(x)?.dtype;
            let w = g.constant(HostTensor::from_f64_as(&[c, 1, kh, kw], &wv, dt))?;
            let cs = ConvSpec {
                kernel_size: spec.kernel_size,
                stride: spec.stride,
                padding: spec.padding,
                dilation: [1, 1],
                groups: c,
            };
            let op = Op::Conv2dBackwardInput {
                spec: cs,
                input_hw: [xd[2], xd[3]],
            };
            Ok(vec![Some(g.add_node(op, &[dy, w])?)])
        }
    }
}

pub(crate) fn resize_nearest2x(g: &mut Graph, node: &Node, dy: NodeId) -> Grads {
    // Each input pixel feeds a 2×2 block: sum the block.
    let xd = static_dims(g, node.inputs[0], node)?;
    let [n, c, h, w] = [xd[0], xd[1], xd[2], xd[3]].map(|v| v as i64);
    let r = reshape(g, dy, vec![n, c, h, 2, w, 2])?;
    Ok(vec![Some(reduce(g, ReduceOp::Sum, r, vec![3, 5], false)?)])
}
