//! CPU thunks: Activation, Binary, Compare, Where, Cast, StopGradient. The scalar functions
//! are public so region thunks evaluate chains with exactly the same math.
use crate::error::op_err;
use crate::util::broadcast_offsets;
use crate::{CpuError, Float, OutView, TensorView};
use rlx_ir::{Activation, BinaryOp, CompareOp, ComputeClass, Node, Op};

/// One activation on one value.
pub fn activation<T: Float>(act: Activation, x: T) -> T {
    let f = |v: f64| T::from_f64(v);
    let one = T::one();
    match act {
        Activation::Gelu => {
            let xf = x.to_f64();
            f(0.5 * xf * (1.0 + libm::erf(xf / std::f64::consts::SQRT_2)))
        }
        Activation::GeluApprox => {
            let k = T::from_f64((2.0 / std::f64::consts::PI).sqrt());
            let c = T::from_f64(0.044715);
            T::from_f64(0.5) * x * (one + (k * (x + c * x * x * x)).tanh())
        }
        Activation::Silu => x / (one + (-x).exp()),
        Activation::Relu => {
            if x > T::zero() {
                x
            } else {
                T::zero()
            }
        }
        Activation::Sigmoid => one / (one + (-x).exp()),
        Activation::Tanh => x.tanh(),
        Activation::Exp => x.exp(),
        Activation::Log => x.ln(),
        Activation::Sqrt => x.sqrt(),
        Activation::Rsqrt => one / x.sqrt(),
        Activation::Neg => -x,
        Activation::Abs => x.abs(),
        Activation::Sin => x.sin(),
        Activation::Cos => x.cos(),
        Activation::Erf => f(libm::erf(x.to_f64())),
        // log(1 + e^x) without overflow for large x.
        Activation::Softplus => {
            if x > T::from_f64(20.0) {
                x
            } else {
                x.exp().ln_1p()
            }
        }
        Activation::Recip => one / x,
        Activation::Square => x * x,
    }
}

/// One binary op on floats.
pub fn binary_f<T: Float>(op: BinaryOp, a: T, b: T) -> T {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        // NaN propagates, as in PyTorch's maximum/minimum.
        BinaryOp::Max => {
            if a.is_nan() || b.is_nan() {
                T::nan()
            } else {
                a.max(b)
            }
        }
        BinaryOp::Min => {
            if a.is_nan() || b.is_nan() {
                T::nan()
            } else {
                a.min(b)
            }
        }
        BinaryOp::Pow => a.powf(b),
    }
}

/// One binary op on integers: division truncates toward zero, division by zero gives 0.
pub fn binary_i(op: BinaryOp, a: i64, b: i64) -> i64 {
    match op {
        BinaryOp::Add => a.wrapping_add(b),
        BinaryOp::Sub => a.wrapping_sub(b),
        BinaryOp::Mul => a.wrapping_mul(b),
        BinaryOp::Div => a.checked_div(b).unwrap_or(0),
        BinaryOp::Max => a.max(b),
        BinaryOp::Min => a.min(b),
        BinaryOp::Pow => {
            if b < 0 {
                0
            } else {
                a.wrapping_pow(b.min(u32::MAX as i64) as u32)
            }
        }
    }
}

pub fn compare<T: PartialOrd>(op: CompareOp, a: T, b: T) -> bool {
    match op {
        CompareOp::Eq => a == b,
        CompareOp::Ne => a != b,
        CompareOp::Lt => a < b,
        CompareOp::Le => a <= b,
        CompareOp::Gt => a > b,
        CompareOp::Ge => a >= b,
    }
}

fn map_unary<T: Float>(act: Activation, x: &TensorView, out: &mut OutView) -> Result<(), CpuError> {
    let x = x.get::<T>()?;
    let o = out.get_mut::<T>()?;
    o.iter_mut()
        .zip(x)
        .for_each(|(o, &v)| *o = activation(act, v));
    Ok(())
}

fn zip_binary<A: crate::Elem, O: crate::Elem>(
    a: &TensorView,
    b: &TensorView,
    out: &mut OutView,
    f: impl Fn(A, A) -> O,
) -> Result<(), CpuError> {
    let shape = out.shape.to_vec();
    let (av, bv) = (a.get::<A>()?, b.get::<A>()?);
    let o = out.get_mut::<O>()?;
    if a.shape == b.shape {
        o.iter_mut()
            .zip(av.iter().zip(bv))
            .for_each(|(o, (&x, &y))| *o = f(x, y));
    } else {
        let ia = broadcast_offsets(a.shape, &shape);
        let ib = broadcast_offsets(b.shape, &shape);
        for (k, o) in o.iter_mut().enumerate() {
            *o = f(av[ia[k]], bv[ib[k]]);
        }
    }
    Ok(())
}

fn where_op<T: crate::Elem>(ins: &[TensorView], out: &mut OutView) -> Result<(), CpuError> {
    let shape = out.shape.to_vec();
    let c = ins[0].to_f64_vec();
    let (a, b) = (ins[1].get::<T>()?, ins[2].get::<T>()?);
    let ic = broadcast_offsets(ins[0].shape, &shape);
    let ia = broadcast_offsets(ins[1].shape, &shape);
    let ib = broadcast_offsets(ins[2].shape, &shape);
    let o = out.get_mut::<T>()?;
    for (k, o) in o.iter_mut().enumerate() {
        *o = if c[ic[k]] != 0.0 { a[ia[k]] } else { b[ib[k]] };
    }
    Ok(())
}

/// Copy values across compute classes; the executor rounds / wraps into the target dtype.
fn cast(x: &TensorView, out: &mut OutView) -> Result<(), CpuError> {
    match out.class() {
        ComputeClass::F32 => {
            let v = x.to_f64_vec();
            let o = out.get_mut::<f32>()?;
            o.iter_mut().zip(v).for_each(|(o, v)| *o = v as f32);
        }
        ComputeClass::F64 => {
            let v = x.to_f64_vec();
            out.get_mut::<f64>()?.copy_from_slice(&v);
        }
        ComputeClass::I64 => {
            let v = if out.dtype == rlx_ir::DType::Bool {
                x.to_f64_vec().iter().map(|&v| (v != 0.0) as i64).collect()
            } else {
                x.to_i64_vec()
            };
            out.get_mut::<i64>()?.copy_from_slice(&v);
        }
    }
    Ok(())
}

pub(crate) fn eval(node: &Node, ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let in_class = ins.first().map(|t| t.dtype.compute_class());
    match (&node.op, in_class) {
        (Op::Activation(a), Some(ComputeClass::F32)) => map_unary::<f32>(*a, &ins[0], &mut out),
        (Op::Activation(a), Some(ComputeClass::F64)) => map_unary::<f64>(*a, &ins[0], &mut out),
        (Op::Binary(op), Some(ComputeClass::F32)) => {
            zip_binary::<f32, f32>(&ins[0], &ins[1], &mut out, |a, b| binary_f(*op, a, b))
        }
        (Op::Binary(op), Some(ComputeClass::F64)) => {
            zip_binary::<f64, f64>(&ins[0], &ins[1], &mut out, |a, b| binary_f(*op, a, b))
        }
        (Op::Binary(op), Some(ComputeClass::I64)) => {
            zip_binary::<i64, i64>(&ins[0], &ins[1], &mut out, |a, b| binary_i(*op, a, b))
        }
        (Op::Compare(op), Some(ComputeClass::F32)) => {
            zip_binary::<f32, i64>(&ins[0], &ins[1], &mut out, |a, b| compare(*op, a, b) as i64)
        }
        (Op::Compare(op), Some(ComputeClass::F64)) => {
            zip_binary::<f64, i64>(&ins[0], &ins[1], &mut out, |a, b| compare(*op, a, b) as i64)
        }
        (Op::Compare(op), Some(ComputeClass::I64)) => {
            zip_binary::<i64, i64>(&ins[0], &ins[1], &mut out, |a, b| compare(*op, a, b) as i64)
        }
        (Op::Where, _) => match out.class() {
            ComputeClass::F32 => where_op::<f32>(ins, &mut out),
            ComputeClass::F64 => where_op::<f64>(ins, &mut out),
            ComputeClass::I64 => where_op::<i64>(ins, &mut out),
        },
        (Op::Cast { .. }, _) | (Op::StopGradient, _) => cast(&ins[0], &mut out),
        (op, c) => Err(op_err(format!(
            "{} does not run on inputs held as {c:?}",
            op.kind()
        ))),
    }
}
