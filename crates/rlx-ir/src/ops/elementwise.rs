//! Shape rules and builders: Activation, Binary, Compare, Where, Cast, FloatRound,
//! StopGradient.
use super::{arity, require_float};
use crate::{
    broadcast_dims, Activation, BinaryOp, CompareOp, DType, Graph, IrError, NodeId, Op, OpKind,
    Shape,
};

pub(crate) fn activation(act: Activation, inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::Activation, inputs, 1, 1)?;
    if !(act.takes_integers() && inputs[0].dtype.is_int()) {
        require_float(OpKind::Activation, inputs, &[0])?;
    }
    Ok(inputs[0].clone())
}

pub(crate) fn stop_gradient(inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::StopGradient, inputs, 1, 1)?;
    Ok(inputs[0].clone())
}

pub(crate) fn cast(to: DType, inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::Cast, inputs, 1, 1)?;
    Ok(inputs[0].with_dtype(to))
}

/// Any float input; the result is its format's f32 carrier.
pub(crate) fn float_round(inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::FloatRound, inputs, 1, 1)?;
    require_float(OpKind::FloatRound, inputs, &[0])?;
    Ok(inputs[0].with_dtype(DType::F32))
}

/// Two operands of one dtype, broadcast; the result has dtype `out` (or theirs).
fn broadcast_pair(kind: OpKind, inputs: &[&Shape], out: Option<DType>) -> Result<Shape, String> {
    arity(kind, inputs, 2, 2)?;
    let (a, b) = (inputs[0], inputs[1]);
    if a.dtype != b.dtype {
        return Err(format!("dtypes differ: {} vs {}", a.dtype, b.dtype));
    }
    let dims = broadcast_dims(&a.dims, &b.dims)?;
    Ok(Shape::with_dims(dims, out.unwrap_or(a.dtype)))
}

pub(crate) fn binary(op: BinaryOp, inputs: &[&Shape]) -> Result<Shape, String> {
    let out = broadcast_pair(OpKind::Binary, inputs, None)?;
    if op.is_integer_only() && out.dtype.is_float() {
        return Err(format!(
            "{op:?} needs integer or bool operands, got {}",
            out.dtype
        ));
    }
    Ok(out)
}

pub(crate) fn compare(inputs: &[&Shape]) -> Result<Shape, String> {
    broadcast_pair(OpKind::Compare, inputs, Some(DType::Bool))
}

pub(crate) fn where_(inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::Where, inputs, 3, 3)?;
    let (c, a, b) = (inputs[0], inputs[1], inputs[2]);
    if a.dtype != b.dtype {
        return Err(format!("branch dtypes differ: {} vs {}", a.dtype, b.dtype));
    }
    let dims = broadcast_dims(&broadcast_dims(&c.dims, &a.dims)?, &b.dims)?;
    Ok(Shape::with_dims(dims, a.dtype))
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
    /// `x` rounded onto `format`'s grid, as F32 (see `Op::FloatRound`).
    pub fn float_round(
        &mut self,
        x: NodeId,
        format: crate::MiniFloat,
        saturate: bool,
    ) -> Result<NodeId, IrError> {
        self.add_node(Op::FloatRound { format, saturate }, &[x])
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
    /// ONNX Mod (`fmod` picks the sign rule, see `BinaryOp::Mod`).
    pub fn modulo(&mut self, a: NodeId, b: NodeId, fmod: bool) -> Result<NodeId, IrError> {
        self.binary(BinaryOp::Mod { fmod }, a, b)
    }
    /// Bitwise not of an integer (`x ^ −1`), logical not of a Bool (`x ^ true`): one
    /// `BitXor` with a broadcast scalar constant, so the IR needs no unary op for it.
    pub fn bit_not(&mut self, x: NodeId) -> Result<NodeId, IrError> {
        // A float operand fails in BitXor's shape rule, naming the node.
        let dt = self.shape(x)?.dtype;
        let ones = match dt {
            DType::Bool => 1.0,
            DType::U8 => 255.0,
            _ => -1.0,
        };
        let c = self.constant(crate::HostTensor::from_f64_as(&[], &[ones], dt))?;
        self.binary(BinaryOp::BitXor, x, c)
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
