//! Shape rules and builders for this op group.
use crate::{Op, Shape};

pub(crate) fn infer(op: &Op, _inputs: &[&Shape]) -> Result<Shape, String> {
    Err(format!("{} has no shape rule yet", op.kind()))
}
