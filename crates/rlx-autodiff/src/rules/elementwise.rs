//! VJP rules of the Elementwise group: Activation, Binary, Compare, Where, Cast, FloatRound,
//! StopGradient.
use super::Grads;
use crate::util::{compare, neg, scalar_like, scale, select, unbroadcast};
use crate::AdError;
use rlx_ir::{Activation, BinaryOp, CompareOp, Graph, MiniFloat, Node, NodeId};
use std::f64::consts::{PI, SQRT_2};

pub(crate) fn activation(g: &mut Graph, node: &Node, dy: NodeId, act: Activation) -> Grads {
    Ok(vec![Some(act_grad(g, act, node.inputs[0], node.id, dy)?)])
}

pub(crate) fn where_(g: &mut Graph, node: &Node, dy: NodeId, needs: &[bool]) -> Grads {
    let ins = &node.inputs;
    let zero = scalar_like(g, 0.0, dy)?;
    let mut out = vec![None; 3];
    for (k, on_true) in [(1, true), (2, false)] {
        if needs[k] {
            let (a, b) = if on_true { (dy, zero) } else { (zero, dy) };
            let d = select(g, ins[0], a, b)?;
            out[k] = Some(unbroadcast(g, d, &g.shape(ins[k])?.clone())?);
        }
    }
    Ok(out)
}

pub(crate) fn cast(g: &mut Graph, node: &Node, dy: NodeId) -> Grads {
    let from = g.shape(node.inputs[0])?.dtype;
    // Float → float casts pass the cotangent back in the source type; from an integer
    // source nothing is differentiable (and `needs` is false there).
    Ok(vec![if from.is_float() {
        Some(g.cast(dy, from)?)
    } else {
        None
    }])
}

/// Straight-through, as PyTorch's fake-quantize (`fake_quantize_per_tensor_affine`'s
/// backward is `dy · mask`, the mask true where the value was not clamped): rounding itself
/// has derivative zero almost everywhere, which would stop all learning, so the cotangent
/// passes unchanged where `x` lies in the format's range and is zero where the op saturates
/// or overflows. E8M0 ignores the sign, so its range is `[2^−127, 2^127]`.
pub(crate) fn float_round(g: &mut Graph, node: &Node, dy: NodeId, format: MiniFloat) -> Grads {
    let x = node.inputs[0];
    let from = g.shape(x)?.dtype;
    let (lo, hi) = match format {
        MiniFloat::E8M0 { .. } => (2f64.powi(-127), 2f64.powi(127)),
        f => (-f.max(), f.max()),
    };
    let (lo, hi) = (scalar_like(g, lo, x)?, scalar_like(g, hi, x)?);
    let above = compare(g, CompareOp::Ge, x, lo)?;
    let below = compare(g, CompareOp::Le, x, hi)?;
    let zero = scalar_like(g, 0.0, dy)?;
    let d = select(g, above, dy, zero)?;
    let d = select(g, below, d, zero)?;
    Ok(vec![Some(g.cast(d, from)?)])
}

// Not differentiable: Compare's bool output and StopGradient never become active, so these
// rules only answer "no gradient" for completeness.
pub(crate) fn compare_op() -> Grads {
    Ok(vec![None, None])
}

pub(crate) fn stop_gradient() -> Grads {
    Ok(vec![None])
}

/// Cotangent of `x` for `y = act(x)`. Also used by fused ops that end in an activation
/// (`x` is then the recomputed pre-activation, `y` the fused node).
pub(crate) fn act_grad(
    g: &mut Graph,
    act: Activation,
    x: NodeId,
    y: NodeId,
    dy: NodeId,
) -> Result<NodeId, AdError> {
    use Activation as A;
    let one = || 1.0;
    let d = match act {
        A::Neg => return neg(g, dy),
        A::Exp => g.mul(dy, y)?,
        A::Log => g.div(dy, x)?,
        A::Square => {
            let t = g.mul(dy, x)?;
            scale(g, t, 2.0)?
        }
        A::Sqrt => {
            // d/dx sqrt(x) = 1 / (2 sqrt(x)) = 0.5 / y
            let t = g.div(dy, y)?;
            scale(g, t, 0.5)?
        }
        A::Rsqrt => {
            // y = x^(-1/2): dy/dx = -0.5 y^3
            let y2 = g.mul(y, y)?;
            let y3 = g.mul(y2, y)?;
            let t = g.mul(dy, y3)?;
            scale(g, t, -0.5)?
        }
        A::Recip => {
            let y2 = g.mul(y, y)?;
            let t = g.mul(dy, y2)?;
            neg(g, t)?
        }
        A::Sigmoid => {
            let s = sigmoid_slope(g, y)?;
            g.mul(dy, s)?
        }
        A::Tanh => {
            let y2 = g.mul(y, y)?;
            let o = scalar_like(g, one(), y)?;
            let s = g.sub(o, y2)?;
            g.mul(dy, s)?
        }
        A::Relu => {
            let zero = scalar_like(g, 0.0, x)?;
            let pos = compare(g, CompareOp::Gt, x, zero)?;
            select(g, pos, dy, zero)?
        }
        A::Abs => {
            // sign(x), with 0 at 0 as in PyTorch.
            let zero = scalar_like(g, 0.0, x)?;
            let pos = compare(g, CompareOp::Gt, x, zero)?;
            let negx = compare(g, CompareOp::Lt, x, zero)?;
            let ndy = neg(g, dy)?;
            let inner = select(g, negx, ndy, zero)?;
            select(g, pos, dy, inner)?
        }
        A::Sin => {
            let c = g.activation(A::Cos, x)?;
            g.mul(dy, c)?
        }
        A::Cos => {
            let s = g.activation(A::Sin, x)?;
            let t = g.mul(dy, s)?;
            neg(g, t)?
        }
        A::Erf => {
            // 2/sqrt(pi) · exp(-x²)
            let e = gaussian(g, x, 1.0)?;
            let t = g.mul(dy, e)?;
            scale(g, t, 2.0 / PI.sqrt())?
        }
        A::Softplus => {
            let s = g.activation(A::Sigmoid, x)?;
            g.mul(dy, s)?
        }
        A::Silu => {
            // s + x·s·(1 − s), s = sigmoid(x)
            let s = g.activation(A::Sigmoid, x)?;
            let ds = sigmoid_slope(g, s)?;
            let xds = g.mul(x, ds)?;
            let slope = g.add(s, xds)?;
            g.mul(dy, slope)?
        }
        A::Gelu => {
            // Φ(x) + x·φ(x), Φ(x) = (1 + erf(x/√2))/2, φ(x) = exp(−x²/2)/√(2π)
            let xs = scale(g, x, 1.0 / SQRT_2)?;
            let e = g.activation(A::Erf, xs)?;
            let o = scalar_like(g, one(), x)?;
            let e1 = g.add(o, e)?;
            let cdf = scale(g, e1, 0.5)?;
            let pdf = gaussian(g, x, 0.5)?;
            let pdf = scale(g, pdf, 1.0 / (2.0 * PI).sqrt())?;
            let xpdf = g.mul(x, pdf)?;
            let slope = g.add(cdf, xpdf)?;
            g.mul(dy, slope)?
        }
        A::GeluApprox => {
            // y = x/2·(1 + t), t = tanh(k(x + c x³)):
            // dy/dx = (1 + t)/2 + x/2·(1 − t²)·k(1 + 3c x²)
            let k = (2.0 / PI).sqrt();
            let c = 0.044715;
            let x2 = g.mul(x, x)?;
            let x3 = g.mul(x2, x)?;
            let cx3 = scale(g, x3, c)?;
            let inner = g.add(x, cx3)?;
            let u = scale(g, inner, k)?;
            let t = g.activation(A::Tanh, u)?;
            let o = scalar_like(g, one(), x)?;
            let one_t = g.add(o, t)?;
            let first = scale(g, one_t, 0.5)?;
            let t2 = g.mul(t, t)?;
            let sech2 = g.sub(o, t2)?;
            let x2c = scale(g, x2, 3.0 * c)?;
            let du = g.add(o, x2c)?;
            let du = scale(g, du, k * 0.5)?;
            let xs = g.mul(x, sech2)?;
            let second = g.mul(xs, du)?;
            let slope = g.add(first, second)?;
            g.mul(dy, slope)?
        }
    };
    Ok(d)
}

/// s·(1 − s) for s = sigmoid(·).
fn sigmoid_slope(g: &mut Graph, s: NodeId) -> Result<NodeId, AdError> {
    let o = scalar_like(g, 1.0, s)?;
    let one_s = g.sub(o, s)?;
    Ok(g.mul(s, one_s)?)
}

/// exp(−a·x²)
fn gaussian(g: &mut Graph, x: NodeId, a: f64) -> Result<NodeId, AdError> {
    let x2 = g.mul(x, x)?;
    let t = scale(g, x2, -a)?;
    Ok(g.activation(Activation::Exp, t)?)
}

pub(crate) fn binary(
    g: &mut Graph,
    node: &Node,
    dy: NodeId,
    needs: &[bool],
    op: BinaryOp,
) -> Grads {
    let (a, b, y) = (node.inputs[0], node.inputs[1], node.id);
    let mut full: [Option<NodeId>; 2] = [None, None];
    match op {
        BinaryOp::Add => full = [Some(dy), Some(dy)],
        BinaryOp::Sub => {
            full[0] = Some(dy);
            if needs[1] {
                full[1] = Some(neg(g, dy)?);
            }
        }
        BinaryOp::Mul => {
            if needs[0] {
                full[0] = Some(g.mul(dy, b)?);
            }
            if needs[1] {
                full[1] = Some(g.mul(dy, a)?);
            }
        }
        BinaryOp::Div => {
            if needs[0] {
                full[0] = Some(g.div(dy, b)?);
            }
            if needs[1] {
                // −dy·a/b² = −dy·y/b
                let t = g.mul(dy, y)?;
                let t = g.div(t, b)?;
                full[1] = Some(neg(g, t)?);
            }
        }
        BinaryOp::Max | BinaryOp::Min => {
            // The larger (smaller) operand takes the cotangent; ties split it evenly, as
            // PyTorch's maximum / minimum do.
            let win = if op == BinaryOp::Max {
                CompareOp::Gt
            } else {
                CompareOp::Lt
            };
            let zero = scalar_like(g, 0.0, dy)?;
            let tie = compare(g, CompareOp::Eq, a, b)?;
            let half = scale(g, dy, 0.5)?;
            let on_tie = select(g, tie, half, zero)?;
            for (k, (p, q)) in [(a, b), (b, a)].into_iter().enumerate() {
                if needs[k] {
                    let wins = compare(g, win, p, q)?;
                    full[k] = Some(select(g, wins, dy, on_tie)?);
                }
            }
        }
        BinaryOp::Pow => {
            if needs[0] {
                // b·a^(b−1)
                let o = scalar_like(g, 1.0, b)?;
                let bm1 = g.sub(b, o)?;
                let p = g.binary(BinaryOp::Pow, a, bm1)?;
                let s = g.mul(b, p)?;
                full[0] = Some(g.mul(dy, s)?);
            }
            if needs[1] {
                // y·ln(a); 0 where a = 0 (the limit of 0^b·ln 0 for b > 0), as PyTorch does.
                let ln = g.activation(Activation::Log, a)?;
                let t = g.mul(y, ln)?;
                let t = g.mul(dy, t)?;
                let zero = scalar_like(g, 0.0, a)?;
                let at0 = compare(g, CompareOp::Eq, a, zero)?;
                full[1] = Some(select(g, at0, zero, t)?);
            }
        }
        BinaryOp::Mod { fmod: _ } => {
            // y = a − q·b with q = floor(a/b) (or trunc) piecewise constant: dy/da = 1,
            // dy/db = −q = (y − a)/b.
            full[0] = Some(dy);
            if needs[1] {
                let t = g.sub(y, a)?;
                let t = g.div(t, b)?;
                full[1] = Some(g.mul(dy, t)?);
            }
        }
        // Integer-only ops carry no gradient (their operands are not floats).
        BinaryOp::BitAnd
        | BinaryOp::BitOr
        | BinaryOp::BitXor
        | BinaryOp::ShiftLeft
        | BinaryOp::ShiftRight => {}
    }
    let mut out = vec![None, None];
    for (k, inp) in [a, b].into_iter().enumerate() {
        if needs[k] {
            if let Some(d) = full[k] {
                let to = g.shape(inp)?.clone();
                out[k] = Some(unbroadcast(g, d, &to)?);
            }
        }
    }
    Ok(out)
}
