//! Shape rules and builders: Activation, Binary, Compare, Where, Cast, StopGradient.
use super::{arity, require_float};
use crate::{
    broadcast_dims, Activation, BinaryOp, CompareOp, DType, Graph, IrError, NodeId, Op, Shape,
};

pub(crate) fn infer(op: &Op, inputs: &[&Shape]) -> Result<Shape, String> {
    match op {
        Op::Activation(_) => {
            arity(op, inputs, 1, 1)?;
            require_float(op, inputs, &[0])?;
            Ok(inputs[0].clone())
        }
        Op::StopGradient => {
            arity(op, inputs, 1, 1)?;
            Ok(inputs[0].clone())
        }
        Op::Cast { to } => {
            arity(op, inputs, 1, 1)?;
            Ok(inputs[0].with_dtype(*to))
        }
        Op::Binary(_) | Op::Compare(_) => {
            arity(op, inputs, 2, 2)?;
            let (a, b) = (inputs[0], inputs[1]);
            if a.dtype != b.dtype {
                return Err(format!("dtypes differ: {} vs {}", a.dtype, b.dtype));
            }
            let dims = broadcast_dims(&a.dims, &b.dims)?;
            let dtype = if matches!(op, Op::Compare(_)) {
                DType::Bool
            } else {
                a.dtype
            };
            Ok(Shape::with_dims(dims, dtype))
        }
        Op::Where => {
            arity(op, inputs, 3, 3)?;
            let (c, a, b) = (inputs[0], inputs[1], inputs[2]);
            if a.dtype != b.dtype {
                return Err(format!("branch dtypes differ: {} vs {}", a.dtype, b.dtype));
            }
            let dims = broadcast_dims(&broadcast_dims(&c.dims, &a.dims)?, &b.dims)?;
            Ok(Shape::with_dims(dims, a.dtype))
        }
        _ => Err(format!("{} is not an elementwise op", op.kind())),
    }
}

impl Graph {
    pub fn activation(&mut self, act: Activation, x: NodeId) -> Result<NodeId, IrError> {
        self.add_node(Op::Activation(act), &[x])
    }
    pub fn binary(&mut self, op: BinaryOp, a: NodeId, b: NodeId) -> Result<NodeId, IrError> {
        self.add_node(Op::Binary(op), &[a, b])
    }
    pub fn add(&mut self, a: NodeId, b: NodeId) -> Result<NodeId, IrError> {
        self.binary(BinaryOp::Add, a, b)
    }
    pub fn sub(&mut self, a: NodeId, b: NodeId) -> Result<NodeId, IrError> {
        self.binary(BinaryOp::Sub, a, b)
    }
    pub fn mul(&mut self, a: NodeId, b: NodeId) -> Result<NodeId, IrError> {
        self.binary(BinaryOp::Mul, a, b)
    }
    pub fn div(&mut self, a: NodeId, b: NodeId) -> Result<NodeId, IrError> {
        self.binary(BinaryOp::Div, a, b)
    }
    pub fn cast(&mut self, x: NodeId, to: DType) -> Result<NodeId, IrError> {
        self.add_node(Op::Cast { to }, &[x])
    }
    pub fn maximum(&mut self, a: NodeId, b: NodeId) -> Result<NodeId, IrError> {
        self.binary(BinaryOp::Max, a, b)
    }
    pub fn minimum(&mut self, a: NodeId, b: NodeId) -> Result<NodeId, IrError> {
        self.binary(BinaryOp::Min, a, b)
    }
    pub fn pow(&mut self, a: NodeId, b: NodeId) -> Result<NodeId, IrError> {
        self.binary(BinaryOp::Pow, a, b)
    }
    /// Elementwise comparison with broadcasting; the result is Bool.
    pub fn compare(&mut self, op: CompareOp, a: NodeId, b: NodeId) -> Result<NodeId, IrError> {
        self.add_node(Op::Compare(op), &[a, b])
    }
    /// `cond ? a : b` with broadcasting (`cond` of any dtype: nonzero = true).
    pub fn where_(&mut self, cond: NodeId, a: NodeId, b: NodeId) -> Result<NodeId, IrError> {
        self.add_node(Op::Where, &[cond, a, b])
    }
    /// Identity forward; blocks gradients in autodiff.
    pub fn stop_gradient(&mut self, x: NodeId) -> Result<NodeId, IrError> {
        self.add_node(Op::StopGradient, &[x])
    }
}
