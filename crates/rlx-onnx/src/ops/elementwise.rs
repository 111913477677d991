//! Elementwise ops: arithmetic (with NumPy broadcasting), comparisons, Where, Cast, the
//! unary functions the IR has, and the activations ONNX defines that compose from them
//! (LeakyRelu, Elu, Selu, Celu, HardSigmoid, HardSwish, Softsign, Clip, PRelu, Mish …).
use super::{one, Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::tensor::rlx_dtype;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{Activation as A, BinaryOp as B, CompareOp as C, DType, NodeId, Op};

pub(super) fn register(r: &mut Registry) {
    r.insert("Add", |c, n| binary(c, n, B::Add));
    r.insert("Sub", |c, n| binary(c, n, B::Sub));
    r.insert("Mul", |c, n| binary(c, n, B::Mul));
    r.insert("Div", |c, n| binary(c, n, B::Div));
    r.insert("Pow", pow);
    r.insert("Max", |c, n| variadic(c, n, B::Max, false));
    r.insert("Min", |c, n| variadic(c, n, B::Min, false));
    r.insert("Sum", |c, n| variadic(c, n, B::Add, false));
    r.insert("Mean", |c, n| variadic(c, n, B::Add, true));
    r.insert("Equal", |c, n| compare(c, n, C::Eq));
    r.insert("Less", |c, n| compare(c, n, C::Lt));
    r.insert("LessOrEqual", |c, n| compare(c, n, C::Le));
    r.insert("Greater", |c, n| compare(c, n, C::Gt));
    r.insert("GreaterOrEqual", |c, n| compare(c, n, C::Ge));
    r.insert("Not", not);
    r.insert("Where", where_);
    r.insert("Cast", cast);
    r.insert("CastLike", cast_like);
    r.insert("Identity", identity);
    r.insert("Dropout", identity);
    for (name, act) in [
        ("Relu", A::Relu),
        ("Sigmoid", A::Sigmoid),
        ("Tanh", A::Tanh),
        ("Exp", A::Exp),
        ("Log", A::Log),
        ("Sqrt", A::Sqrt),
        ("Neg", A::Neg),
        ("Abs", A::Abs),
        ("Sin", A::Sin),
        ("Cos", A::Cos),
        ("Erf", A::Erf),
        ("Softplus", A::Softplus),
        ("Reciprocal", A::Recip),
    ] {
        r.insert(name, unary_for(act));
    }
    r.insert("Tan", tan);
    r.insert("Gelu", gelu);
    r.insert("LeakyRelu", leaky_relu);
    r.insert("PRelu", prelu);
    r.insert("Elu", elu);
    r.insert("Selu", selu);
    r.insert("Celu", celu);
    r.insert("ThresholdedRelu", thresholded_relu);
    r.insert("HardSigmoid", hard_sigmoid);
    r.insert("HardSwish", hard_swish);
    r.insert("Softsign", softsign);
    r.insert("Mish", mish);
    r.insert("Sign", sign);
    r.insert("Clip", clip);
    r.insert("Sinh", |c, n| hyperbolic(c, n, Hyp::Sinh));
    r.insert("Cosh", |c, n| hyperbolic(c, n, Hyp::Cosh));
    r.insert("Asinh", |c, n| hyperbolic(c, n, Hyp::Asinh));
    r.insert("Acosh", |c, n| hyperbolic(c, n, Hyp::Acosh));
    r.insert("Atanh", |c, n| hyperbolic(c, n, Hyp::Atanh));
    r.insert("Swish", swish);
    r.insert("Shrink", shrink);
    r.insert("IsNaN", is_nan);
    r.insert("IsInf", is_inf);
}

#[derive(Clone, Copy)]
enum Hyp {
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
}

/// The hyperbolic functions and their inverses from exp, log and sqrt.
fn hyperbolic(c: &mut ImportCtx, n: &NodeProto, h: Hyp) -> Translated {
    let x = c.input(n, 0)?;
    let (half, one_) = (k(c, x, 0.5)?, k(c, x, 1.0)?);
    let y = match h {
        Hyp::Sinh | Hyp::Cosh => {
            let e = act(c, A::Exp, x)?;
            let nx = act(c, A::Neg, x)?;
            let en = act(c, A::Exp, nx)?;
            let op = if matches!(h, Hyp::Sinh) {
                B::Sub
            } else {
                B::Add
            };
            let d = bin(c, op, e, en)?;
            bin(c, B::Mul, d, half)?
        }
        Hyp::Asinh | Hyp::Acosh => {
            // log(x + sqrt(x² ± 1))
            let sq = bin(c, B::Mul, x, x)?;
            let op = if matches!(h, Hyp::Asinh) {
                B::Add
            } else {
                B::Sub
            };
            let r = bin(c, op, sq, one_)?;
            let r = act(c, A::Sqrt, r)?;
            let s = bin(c, B::Add, x, r)?;
            act(c, A::Log, s)?
        }
        Hyp::Atanh => {
            // ½ log((1 + x) / (1 − x))
            let p = bin(c, B::Add, one_, x)?;
            let m = bin(c, B::Sub, one_, x)?;
            let q = bin(c, B::Div, p, m)?;
            let l = act(c, A::Log, q)?;
            bin(c, B::Mul, l, half)?
        }
    };
    one(y)
}

/// x · sigmoid(alpha · x)
fn swish(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let a = k(c, x, Attrs(n).f_or("alpha", 1.0) as f64)?;
    let ax = bin(c, B::Mul, x, a)?;
    let s = act(c, A::Sigmoid, ax)?;
    one(bin(c, B::Mul, x, s)?)
}

/// x < −lambd: x + bias; x > lambd: x − bias; else 0.
fn shrink(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let at = Attrs(n);
    let (l, b) = (at.f_or("lambd", 0.5) as f64, at.f_or("bias", 0.0) as f64);
    let (pl, ml, bb, zero) = (k(c, x, l)?, k(c, x, -l)?, k(c, x, b)?, k(c, x, 0.0)?);
    let lo = c.add(Op::Compare(C::Lt), &[x, ml])?;
    let hi = c.add(Op::Compare(C::Gt), &[x, pl])?;
    let xp = bin(c, B::Add, x, bb)?;
    let xm = bin(c, B::Sub, x, bb)?;
    let y = c.add(Op::Where, &[hi, xm, zero])?;
    one(c.add(Op::Where, &[lo, xp, y])?)
}

fn is_nan(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    one(c.add(Op::Compare(C::Ne), &[x, x])?)
}

fn is_inf(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let at = Attrs(n);
    let (pos, neg) = (
        at.i_or("detect_positive", 1) != 0,
        at.i_or("detect_negative", 1) != 0,
    );
    let (pi, ni) = (k(c, x, f64::INFINITY)?, k(c, x, f64::NEG_INFINITY)?);
    let p = c.add(Op::Compare(C::Eq), &[x, pi])?;
    let m = c.add(Op::Compare(C::Eq), &[x, ni])?;
    let y = match (pos, neg) {
        (true, true) => {
            let t = c.scalar(1.0, DType::Bool)?;
            c.add(Op::Where, &[p, t, m])?
        }
        (true, false) => p,
        (false, true) => m,
        // Nothing (not even NaN) is below −inf: all false, in x's shape.
        (false, false) => c.add(Op::Compare(C::Lt), &[x, ni])?,
    };
    one(y)
}

/// A translator for one IR activation (a plain fn pointer per activation).
fn unary_for(act: A) -> super::Translator {
    macro_rules! arm {
        ($($a:ident),*) => {
            match act {
                $(A::$a => |c: &mut ImportCtx, n: &NodeProto| unary(c, n, A::$a),)*
                _ => |c: &mut ImportCtx, _n: &NodeProto| Err(c.unsupported("activation")),
            }
        };
    }
    arm!(Relu, Sigmoid, Tanh, Exp, Log, Sqrt, Neg, Abs, Sin, Cos, Erf, Softplus, Recip)
}

fn unary(c: &mut ImportCtx, n: &NodeProto, act: A) -> Translated {
    let x = c.input(n, 0)?;
    if !c.dtype(x)?.is_float() {
        // The IR's activations are float-only; these three have exact integer forms.
        let zero = k(c, x, 0.0)?;
        return match act {
            A::Neg => one(bin(c, B::Sub, zero, x)?),
            A::Relu => one(bin(c, B::Max, x, zero)?),
            A::Abs => {
                let neg = bin(c, B::Sub, zero, x)?;
                let lt = c.add(Op::Compare(C::Lt), &[x, zero])?;
                one(c.add(Op::Where, &[lt, neg, x])?)
            }
            _ => Err(c.unsupported(format!("{act:?} of {}", c.dtype(x)?))),
        };
    }
    one(c.add(Op::Activation(act), &[x])?)
}

fn binary(c: &mut ImportCtx, n: &NodeProto, op: B) -> Translated {
    let (a, b) = (c.input(n, 0)?, c.input(n, 1)?);
    one(c.add(Op::Binary(op), &[a, b])?)
}

/// Pow allows an exponent of another numeric type; rlx's Binary wants one dtype.
fn pow(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (a, mut b) = (c.input(n, 0)?, c.input(n, 1)?);
    let dt = c.dtype(a)?;
    if c.dtype(b)? != dt {
        b = c.add(Op::Cast { to: dt }, &[b])?;
    }
    one(c.add(Op::Binary(B::Pow), &[a, b])?)
}

fn variadic(c: &mut ImportCtx, n: &NodeProto, op: B, mean: bool) -> Translated {
    let xs = c.inputs(n)?;
    let (&first, rest) = xs.split_first().ok_or_else(|| c.err("needs an input"))?;
    let mut acc = first;
    for &x in rest {
        acc = c.add(Op::Binary(op), &[acc, x])?;
    }
    if mean {
        let k = c.scalar(xs.len() as f64, c.dtype(acc)?)?;
        acc = c.add(Op::Binary(B::Div), &[acc, k])?;
    }
    one(acc)
}

fn compare(c: &mut ImportCtx, n: &NodeProto, op: C) -> Translated {
    let (a, b) = (c.input(n, 0)?, c.input(n, 1)?);
    one(c.add(Op::Compare(op), &[a, b])?)
}

fn not(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let f = c.scalar(0.0, DType::Bool)?;
    one(c.add(Op::Compare(C::Eq), &[x, f])?)
}

fn where_(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (k, a, b) = (c.input(n, 0)?, c.input(n, 1)?, c.input(n, 2)?);
    one(c.add(Op::Where, &[k, a, b])?)
}

/// The rlx dtype of an ONNX type code for a Cast target. Types rlx holds only widened
/// (I8, I16, U16, U32, U64) are refused: a cast into them must wrap, which a wider type
/// would not.
pub(super) fn cast_target(c: &ImportCtx, code: i64) -> Result<DType, OnnxError> {
    use crate::proto::tensor_proto::DataType as P;
    let code = i32::try_from(code).map_err(|_| c.err(format!("bad type code {code}")))?;
    let exact = matches!(
        P::try_from(code),
        Ok(P::Float
            | P::Double
            | P::Float16
            | P::Bfloat16
            | P::Int32
            | P::Int64
            | P::Uint8
            | P::Bool)
    );
    match rlx_dtype(code) {
        Some(dt) if exact => Ok(dt),
        _ => Err(c.unsupported(format!("cast to {}", crate::tensor::onnx_dtype_name(code)))),
    }
}

fn cast(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let code = Attrs(n)
        .i("to")
        .ok_or_else(|| c.err("needs attribute `to`"))?;
    let code32 = i32::try_from(code).map_err(|_| c.err(format!("bad type code {code}")))?;
    if let Some(out) = n.output.first() {
        // Consumers that need the exact ONNX type (a QuantizeLinear zero point) read it.
        c.onnx_types.insert(out.clone(), code32);
    }
    if let Some(y) = super::cast_lowp::cast(c, n, x, code32)? {
        return one(y);
    }
    let to = cast_target(c, code)?;
    one(cast_to(c, x, to)?)
}

/// Cast unless `x` already has dtype `to`.
pub(super) fn cast_to(c: &mut ImportCtx, x: NodeId, to: DType) -> Result<NodeId, OnnxError> {
    if c.dtype(x)? == to {
        Ok(x)
    } else {
        c.add(Op::Cast { to }, &[x])
    }
}

fn cast_like(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (x, like) = (c.input(n, 0)?, c.input(n, 1)?);
    if let Some(code) = c.onnx_type(n, 1) {
        if let Some(out) = n.output.first() {
            c.onnx_types.insert(out.clone(), code);
        }
        if let Some(y) = super::cast_lowp::cast(c, n, x, code)? {
            return one(y);
        }
    }
    let to = c.dtype(like)?;
    one(cast_to(c, x, to)?)
}

fn identity(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    if n.op_type.as_deref() != Some("Dropout") {
        return one(x);
    }
    // Dropout is the identity in inference mode, or with ratio 0; its mask is all true.
    let first = |t: Option<rlx_ir::HostTensor>| t.and_then(|t| t.to_f64_vec().first().copied());
    let training = c.opset >= 12 && first(c.const_input(n, 2)?).is_some_and(|v| v != 0.0);
    let ratio = if c.opset >= 12 {
        first(c.const_input(n, 1)?).unwrap_or(0.5)
    } else {
        Attrs(n).f_or("ratio", 0.5) as f64
    };
    if training && ratio != 0.0 {
        return Err(c.unsupported("Dropout in training mode (random)"));
    }
    let mut outs = vec![x];
    if n.output.get(1).is_some_and(|o| !o.is_empty()) {
        let dims = c.static_dims(x)?;
        let numel = dims
            .iter()
            .try_fold(1usize, |a, &v| a.checked_mul(v))
            .unwrap_or(usize::MAX);
        c.limit("a Dropout mask", numel)?;
        outs.push(c.constant(rlx_ir::HostTensor::from_bool(&dims, &vec![true; numel]))?);
    }
    Ok(Some(outs))
}

/// A scalar of x's dtype.
fn k(c: &mut ImportCtx, x: NodeId, v: f64) -> Result<NodeId, OnnxError> {
    let dt = c.dtype(x)?;
    c.scalar(v, dt)
}

fn bin(c: &mut ImportCtx, op: B, a: NodeId, b: NodeId) -> Result<NodeId, OnnxError> {
    c.add(Op::Binary(op), &[a, b])
}

fn act(c: &mut ImportCtx, a: A, x: NodeId) -> Result<NodeId, OnnxError> {
    c.add(Op::Activation(a), &[x])
}

fn tan(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let (s, co) = (act(c, A::Sin, x)?, act(c, A::Cos, x)?);
    one(bin(c, B::Div, s, co)?)
}

fn gelu(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let a = match Attrs(n).s("approximate").as_deref() {
        None | Some("none") => A::Gelu,
        Some("tanh") => A::GeluApprox,
        Some(o) => return Err(c.unsupported(format!("approximate = \"{o}\""))),
    };
    one(act(c, a, x)?)
}

/// where(x < 0, alpha·x, x)
fn leaky_relu(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let alpha = k(c, x, Attrs(n).f_or("alpha", 0.01) as f64)?;
    let ax = bin(c, B::Mul, x, alpha)?;
    let zero = k(c, x, 0.0)?;
    let neg = c.add(Op::Compare(C::Lt), &[x, zero])?;
    one(c.add(Op::Where, &[neg, ax, x])?)
}

fn prelu(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (x, slope) = (c.input(n, 0)?, c.input(n, 1)?);
    let ax = bin(c, B::Mul, x, slope)?;
    let zero = k(c, x, 0.0)?;
    let neg = c.add(Op::Compare(C::Lt), &[x, zero])?;
    one(c.add(Op::Where, &[neg, ax, x])?)
}

/// where(x > 0, x, alpha·(exp(x) − 1)) scaled by `gamma`.
fn elu_like(c: &mut ImportCtx, x: NodeId, alpha: f64, gamma: f64) -> Result<NodeId, OnnxError> {
    let e = act(c, A::Exp, x)?;
    let one_ = k(c, x, 1.0)?;
    let em1 = bin(c, B::Sub, e, one_)?;
    let a = k(c, x, alpha)?;
    let neg = bin(c, B::Mul, em1, a)?;
    let zero = k(c, x, 0.0)?;
    let pos = c.add(Op::Compare(C::Gt), &[x, zero])?;
    let y = c.add(Op::Where, &[pos, x, neg])?;
    if gamma == 1.0 {
        return Ok(y);
    }
    let g = k(c, x, gamma)?;
    bin(c, B::Mul, y, g)
}

fn elu(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    one(elu_like(c, x, Attrs(n).f_or("alpha", 1.0) as f64, 1.0)?)
}

fn selu(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let a = Attrs(n);
    let alpha = a.f_or("alpha", 1.673_263_2) as f64;
    let gamma = a.f_or("gamma", 1.050_701) as f64;
    one(elu_like(c, x, alpha, gamma)?)
}

/// max(0, x) + min(0, alpha·(exp(x/alpha) − 1))
fn celu(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let alpha = Attrs(n).f_or("alpha", 1.0) as f64;
    let a = k(c, x, alpha)?;
    let xa = bin(c, B::Div, x, a)?;
    one(elu_like(c, xa, alpha, 1.0).and_then(|y| {
        // elu_like(x/alpha) has x/alpha on the positive side; scale that side back.
        let zero = k(c, x, 0.0)?;
        let pos = c.add(Op::Compare(C::Gt), &[x, zero])?;
        c.add(Op::Where, &[pos, x, y])
    })?)
}

fn thresholded_relu(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let alpha = k(c, x, Attrs(n).f_or("alpha", 1.0) as f64)?;
    let zero = k(c, x, 0.0)?;
    let keep = c.add(Op::Compare(C::Gt), &[x, alpha])?;
    one(c.add(Op::Where, &[keep, x, zero])?)
}

/// max(0, min(1, alpha·x + beta))
fn hard_sigmoid_of(
    c: &mut ImportCtx,
    x: NodeId,
    alpha: f64,
    beta: f64,
) -> Result<NodeId, OnnxError> {
    let a = k(c, x, alpha)?;
    let b = k(c, x, beta)?;
    let ax = bin(c, B::Mul, x, a)?;
    let y = bin(c, B::Add, ax, b)?;
    let one_ = k(c, x, 1.0)?;
    let zero = k(c, x, 0.0)?;
    let y = bin(c, B::Min, y, one_)?;
    bin(c, B::Max, y, zero)
}

fn hard_sigmoid(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let a = Attrs(n);
    one(hard_sigmoid_of(
        c,
        x,
        a.f_or("alpha", 0.2) as f64,
        a.f_or("beta", 0.5) as f64,
    )?)
}

fn hard_swish(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let h = hard_sigmoid_of(c, x, 1.0 / 6.0, 0.5)?;
    one(bin(c, B::Mul, x, h)?)
}

fn softsign(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let ax = act(c, A::Abs, x)?;
    let one_ = k(c, x, 1.0)?;
    let d = bin(c, B::Add, ax, one_)?;
    one(bin(c, B::Div, x, d)?)
}

fn mish(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let sp = act(c, A::Softplus, x)?;
    let t = act(c, A::Tanh, sp)?;
    one(bin(c, B::Mul, x, t)?)
}

fn sign(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let (zero, p1, m1) = (k(c, x, 0.0)?, k(c, x, 1.0)?, k(c, x, -1.0)?);
    let pos = c.add(Op::Compare(C::Gt), &[x, zero])?;
    let neg = c.add(Op::Compare(C::Lt), &[x, zero])?;
    let y = c.add(Op::Where, &[neg, m1, zero])?;
    one(c.add(Op::Where, &[pos, p1, y])?)
}

/// Clip: bounds are attributes before opset 11, optional inputs from 11 on.
fn clip(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let mut y = c.input(n, 0)?;
    let (lo, hi) = if c.opset < 11 {
        let a = Attrs(n);
        let lo = match a.f("min") {
            Some(v) => Some(k(c, y, v as f64)?),
            None => None,
        };
        let hi = match a.f("max") {
            Some(v) => Some(k(c, y, v as f64)?),
            None => None,
        };
        (lo, hi)
    } else {
        (c.opt_input(n, 1)?, c.opt_input(n, 2)?)
    };
    if let Some(lo) = lo {
        y = bin(c, B::Max, y, lo)?;
    }
    if let Some(hi) = hi {
        y = bin(c, B::Min, y, hi)?;
    }
    one(y)
}
