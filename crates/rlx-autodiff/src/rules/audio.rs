//! VJP rules of the Audio group: Fft, LogMel (LogMelBackward has none: no second order).
use super::Grads;
use crate::util::unsupported;
use rlx_ir::{FftNorm, Graph, Node, NodeId, Op};

pub(crate) fn fft(g: &mut Graph, dy: NodeId, inverse: bool, norm: FftNorm) -> Grads {
    // s·F has adjoint s·Fᴴ, and Fᴴ is the unscaled transform the other way: flip the
    // direction and pick the norm mode that applies the same factor s there.
    let norm = match norm {
        FftNorm::Backward => FftNorm::Forward,
        FftNorm::Forward => FftNorm::Backward,
        FftNorm::Ortho => FftNorm::Ortho,
    };
    let op = Op::Fft {
        inverse: !inverse,
        norm,
    };
    Ok(vec![Some(g.add_node(op, &[dy])?)])
}

pub(crate) fn log_mel(g: &mut Graph, node: &Node, dy: NodeId, needs: &[bool]) -> Grads {
    let ins = &node.inputs;
    if needs[1] {
        return Err(unsupported(
            node,
            "the gradient with respect to the mel filterbank is not supported",
        ));
    }
    Ok(vec![
        Some(g.add_node(Op::LogMelBackward, &[ins[0], ins[1], dy])?),
        None,
    ])
}
