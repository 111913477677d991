//! CPU thunks for this op group.
use crate::{CpuError, OutView, TensorView};
use rlx_ir::Node;

pub(crate) fn eval(node: &Node, _ins: &[TensorView], _out: OutView) -> Result<(), CpuError> {
    Err(crate::error::op_err(format!(
        "{} has no CPU thunk yet",
        node.op.kind()
    )))
}
