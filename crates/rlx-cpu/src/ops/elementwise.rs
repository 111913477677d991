//! CPU thunks: Activation, Binary, Compare, Where, Cast, StopGradient. The scalar functions
//! are public so region thunks evaluate chains with exactly the same math.
use super::region::run_chain;
use crate::error::op_err;
use crate::{CpuError, Float, OutView, TensorView};
use rlx_ir::{Activation, BinaryOp, ChainOperand, ChainStep, CompareOp, Node, Op, RegionPrologue};

/// One activation on one value.
pub fn activation<T: Float>(act: Activation, x: T) -> T {
    let f = |v: f64| T::from_f64(v);
    let one = T::one();
    match act {
        Activation::Gelu => {
            let xf = x.to_f64();
            // erfc keeps the far negative tail accurate (1 + erf(x) cancels there).
            f(0.5 * xf * libm::erfc(-xf / std::f64::consts::SQRT_2))
        }
        // 0.5·x·(1 + tanh(u)) written as x·sigmoid(2u): the same function, without the
        // cancellation of 1 + tanh(u) for negative x.
        Activation::GeluApprox => {
            let k = T::from_f64(2.0 * (2.0 / std::f64::consts::PI).sqrt());
            let c = T::from_f64(0.044715);
            x / (one + (-(k * (x + c * x * x * x))).exp())
        }
        Activation::Silu => x / (one + (-x).exp()),
        // NaN passes through, as in PyTorch.
        Activation::Relu => {
            if x < T::zero() {
                T::zero()
            } else {
                x
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
        // max(x, 0) + log(1 + e^-|x|): no overflow, and accurate in both tails.
        Activation::Softplus => x.max(T::zero()) + (-x.abs()).exp().ln_1p(),
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

/// Each standalone op is a one-step chain run by the region engine: one code path, and the
/// unfused ops agree bit for bit with the regions fusion makes of them.
pub(crate) fn eval(node: &Node, ins: &[TensorView], out: OutView) -> Result<(), CpuError> {
    use ChainOperand::Input;
    let step = match &node.op {
        Op::Activation(a) => ChainStep::Activation(*a, Input(0)),
        Op::Binary(op) => ChainStep::Binary(*op, Input(0), Input(1)),
        Op::Compare(op) => ChainStep::Compare(*op, Input(0), Input(1)),
        Op::Where => ChainStep::Where(Input(0), Input(1), Input(2)),
        Op::Cast { to } => ChainStep::Cast(*to, Input(0)),
        Op::StopGradient => ChainStep::Cast(out.dtype, Input(0)),
        op => return Err(op_err(format!("{} is not an elementwise op", op.kind()))),
    };
    run_chain(
        &[step],
        ins,
        RegionPrologue::None,
        out.shape,
        out.dtype,
        out.data,
    )
}
