//! Elementwise ops and fused regions: one generated shader per chain. An invocation makes
//! one output word (1 element of f32/i32, 2 of f16/bf16, 4 of u8/bool), each element through
//! `val(i)`: every used input loaded once through its broadcast index expression (sizes are
//! baked into the text, so the driver folds them), one line per step, each step's value
//! settled into its dtype as the CPU's chain engine does. Integer Mod, the bitwise ops and
//! shifts follow rlx-cpu's `binary_i` in i32 (helpers in `wgsl/elementwise_int.wgsl`), float
//! Mod is an exact fmod on the bits. FloatRound has its own kernel at the end.
use super::{LowerError, Lowered, NodeCtx, PORTABLE};
use crate::device::Caps;
use crate::shader::{class, grid_1d, per_word, Kernel, Shader, WTensor};
use crate::unsupported;
use rlx_ir::ops::region::chain_dtypes;
use rlx_ir::{Activation, BinaryOp, ChainOperand, ChainStep, CompareOp, DType, Op, RegionPrologue};
use rlx_ir::{E8M0Round, MiniFloat};
use std::fmt::Write;

pub fn lower(ctx: &mut NodeCtx, op: &Op) -> Lowered {
    use ChainOperand::Input as I;
    let one = |s: ChainStep| vec![s];
    let (chain, prologue) = match op {
        Op::Activation(a) => (one(ChainStep::Activation(*a, I(0))), RegionPrologue::None),
        Op::Binary(b) => (one(ChainStep::Binary(*b, I(0), I(1))), RegionPrologue::None),
        Op::Compare(c) => (
            one(ChainStep::Compare(*c, I(0), I(1))),
            RegionPrologue::None,
        ),
        Op::Where => (
            one(ChainStep::Where(I(0), I(1), I(2))),
            RegionPrologue::None,
        ),
        Op::Cast { to } => (one(ChainStep::Cast(*to, I(0))), RegionPrologue::None),
        Op::StopGradient => {
            let (src, dst) = (ctx.ins[0].clone(), ctx.out.clone());
            return ctx.copy(&src, &dst);
        }
        Op::FusedSwiGLU { gate_first, .. } => return swiglu(ctx, *gate_first),
        Op::FloatRound { format, saturate } => return float_round(ctx, *format, *saturate),
        Op::ElementwiseRegion { chain, prologue } => (chain.clone(), *prologue),
        Op::BatchElementwiseRegion {
            chain,
            num_batch_inputs,
            prologue,
        } => return batch(ctx, chain, *num_batch_inputs, *prologue),
        _ => unreachable!("routed here by lower_node"),
    };
    let ins: Vec<&WTensor> = ctx.ins.iter().collect();
    let k = chain_kernel(&chain, prologue, &ins, &ctx.out.clone(), ctx.caps)?;
    ctx.push(k);
    Ok(())
}

/// A BatchElementwiseRegion: the chain once per sample (input 0 of the chain is sample `b`,
/// the shared inputs follow), each kernel writing its rows of the output.
fn batch(ctx: &mut NodeCtx, chain: &[ChainStep], nb: usize, prologue: RegionPrologue) -> Lowered {
    let out = ctx.out.clone();
    if out.dims.is_empty() || nb == 0 || nb > ctx.ins.len() {
        unsupported!("a batch region of {nb} samples over output {:?}", out.dims);
    }
    let mut per_dims = out.dims.clone();
    per_dims[0] /= nb;
    let per_bytes = (per_dims.iter().product::<usize>() * out.dtype.size_bytes()) as u64;
    for b in 0..nb {
        let part = WTensor {
            off: out.off + b as u64 * per_bytes,
            dims: per_dims.clone(),
            ..out.clone()
        };
        if per_word(out.dtype) > 1 && !part.off.is_multiple_of(4) {
            unsupported!("batch samples of {} bytes are not word-aligned", per_bytes);
        }
        let mut ins: Vec<&WTensor> = vec![&ctx.ins[b]];
        ins.extend(ctx.ins[nb..].iter());
        let k = chain_kernel(chain, prologue, &ins, &part, ctx.caps)?;
        ctx.push(k);
    }
    Ok(())
}

/// `out = convert(src)` elementwise (a Cast, or a plain copy between equal dtypes).
pub fn convert(src: &WTensor, dst: &WTensor, caps: &Caps) -> Result<Kernel, LowerError> {
    let chain = [ChainStep::Cast(dst.dtype, ChainOperand::Input(0))];
    let flat = WTensor {
        dims: vec![src.numel()],
        ..src.clone()
    };
    let out = WTensor {
        dims: vec![dst.numel()],
        ..dst.clone()
    };
    chain_kernel(&chain, RegionPrologue::None, &[&flat], &out, caps)
}

/// How input `k` is indexed at output element `i`.
fn index_expr(in_dims: &[usize], out_dims: &[usize], resize: bool) -> Result<String, LowerError> {
    if in_dims.len() > out_dims.len() && !resize {
        unsupported!("input {in_dims:?} has a higher rank than the output {out_dims:?}");
    }
    // The input as seen at output rank: its dims (a resized input doubles H and W) and its
    // element strides, 0 along broadcast axes.
    let eff: Vec<usize> = if resize {
        if in_dims.len() != 4 || out_dims.len() < 4 {
            unsupported!("the ResizeNearest2x prologue needs rank-4 input 0, got {in_dims:?}");
        }
        vec![in_dims[0], in_dims[1], 2 * in_dims[2], 2 * in_dims[3]]
    } else {
        in_dims.to_vec()
    };
    let lead = out_dims.len() - eff.len();
    let cs = rlx_ir::strides(in_dims);
    let r = out_dims.len();
    // (size, stride, halve) of the output axes that matter, neighbours merged where the
    // input steps through them as through one axis.
    let mut axes: Vec<(usize, usize, bool)> = Vec::new();
    for (k, &o) in out_dims.iter().enumerate() {
        let (d, s) = if k < lead {
            (1, 0)
        } else {
            (eff[k - lead], cs[k - lead])
        };
        if d != o && d != 1 {
            unsupported!("input {in_dims:?} does not broadcast to the output {out_dims:?}");
        }
        if o == 1 {
            continue;
        }
        let s = if d == 1 { 0 } else { s };
        let halve = resize && k >= r - 2 && d != 1;
        if let Some(last) = axes.last_mut() {
            if !halve && !last.2 && ((last.1 == 0 && s == 0) || (s != 0 && last.1 == s * o)) {
                *last = (last.0 * o, s, false);
                continue;
            }
        }
        axes.push((o, s, halve));
    }
    if axes.iter().all(|a| a.1 == 0) {
        return Ok("0u".into());
    }
    if let [(_, 1, false)] = axes.as_slice() {
        return Ok("i".into());
    }
    // Innermost axis first: coordinate (i / below) % size, times the stride.
    let mut terms = Vec::new();
    let mut below = 1usize;
    for &(size, stride, halve) in axes.iter().rev() {
        if stride != 0 {
            let mut c = if below == 1 {
                format!("i % {size}u")
            } else {
                format!("(i / {below}u) % {size}u")
            };
            if below * size == out_dims.iter().product::<usize>() {
                // the outermost axis needs no modulo
                c = if below == 1 {
                    "i".into()
                } else {
                    format!("(i / {below}u)")
                };
            }
            if halve {
                c = format!("(({c}) >> 1u)");
            }
            terms.push(if stride == 1 {
                c
            } else {
                format!("({c}) * {stride}u")
            });
        }
        below *= size;
    }
    Ok(terms.join(" + "))
}

fn operand(o: &ChainOperand) -> String {
    match *o {
        ChainOperand::Input(i) => format!("x{i}"),
        ChainOperand::Step(j) => format!("s{j}"),
    }
}

/// Wrap `e` so its value obeys `d` (the CPU settles after every step).
fn settle(d: DType, e: String) -> String {
    match d {
        DType::F16 => format!("settle_f16({e})"),
        DType::BF16 => format!("settle_bf16({e})"),
        DType::U8 => format!("settle_u8({e})"),
        DType::Bool => format!("settle_bool({e})"),
        _ => e,
    }
}

/// The WGSL expression of activation `a` applied to the f32 expression `x`.
pub fn activation(a: Activation, x: &str) -> String {
    match a {
        Activation::Gelu => format!("act_gelu({x})"),
        Activation::GeluApprox => format!("act_gelu_approx({x})"),
        Activation::Silu => format!("act_silu({x})"),
        Activation::Relu => format!("act_relu({x})"),
        Activation::Sigmoid => format!("act_sigmoid({x})"),
        Activation::Tanh => format!("tanh_({x})"),
        Activation::Exp => format!("exp({x})"),
        Activation::Log => format!("log_({x})"),
        Activation::Sqrt => format!("sqrt({x})"),
        Activation::Rsqrt => format!("(1.0 / sqrt({x}))"),
        Activation::Neg => format!("(-{x})"),
        Activation::Abs => format!("abs({x})"),
        Activation::Sin => format!("sin_({x})"),
        Activation::Cos => format!("cos_({x})"),
        Activation::Erf => format!("erf_({x})"),
        Activation::Softplus => format!("act_softplus({x})"),
        Activation::Recip => format!("(1.0 / {x})"),
        Activation::Square => format!("({x} * {x})"),
    }
}

fn binary(op: BinaryOp, float: bool, a: &str, b: &str) -> Result<String, LowerError> {
    Ok(match (op, float) {
        (BinaryOp::Add, _) => format!("({a} + {b})"),
        (BinaryOp::Sub, _) => format!("({a} - {b})"),
        (BinaryOp::Mul, _) => format!("({a} * {b})"),
        (BinaryOp::Div, true) => format!("({a} / {b})"),
        (BinaryOp::Div, false) => format!("i_div({a}, {b})"),
        (BinaryOp::Max, true) => format!("f_max({a}, {b})"),
        (BinaryOp::Min, true) => format!("f_min({a}, {b})"),
        (BinaryOp::Max, false) => format!("max({a}, {b})"),
        (BinaryOp::Min, false) => format!("min({a}, {b})"),
        (BinaryOp::Pow, true) => format!("f_pow({a}, {b})"),
        (BinaryOp::Pow, false) => format!("i_pow({a}, {b})"),
        (BinaryOp::Mod { fmod: true }, true) => format!("f_fmod({a}, {b})"),
        (BinaryOp::Mod { fmod: false }, true) => format!("f_pymod({a}, {b})"),
        (BinaryOp::Mod { fmod }, false) => format!("i_mod({a}, {b}, {fmod})"),
        (BinaryOp::BitAnd, false) => format!("({a} & {b})"),
        (BinaryOp::BitOr, false) => format!("({a} | {b})"),
        (BinaryOp::BitXor, false) => format!("({a} ^ {b})"),
        (BinaryOp::ShiftLeft, false) => format!("i_shl({a}, {b})"),
        (BinaryOp::ShiftRight, false) => format!("i_shr({a}, {b})"),
        _ => unsupported!("no wgpu kernel for Binary {op:?} on floats"),
    })
}

fn compare(op: CompareOp, a: &str, b: &str) -> String {
    let c = match op {
        CompareOp::Eq => format!("{a} == {b}"),
        // `!(==)`: true for NaN, whatever the driver does with unordered compares.
        CompareOp::Ne => format!("!({a} == {b})"),
        CompareOp::Lt => format!("{a} < {b}"),
        CompareOp::Le => format!("{a} <= {b}"),
        CompareOp::Gt => format!("{a} > {b}"),
        CompareOp::Ge => format!("{a} >= {b}"),
    };
    format!("select(0, 1, {c})")
}

fn cast(from: DType, to: DType, x: &str) -> String {
    match (from.is_float(), to) {
        (true, DType::F32) => x.to_string(),
        (true, DType::F16 | DType::BF16) => settle(to, x.to_string()),
        (true, DType::I32 | DType::I64) => format!("cast_i32_f({x})"),
        (true, DType::U8) => format!("cast_u8_f({x})"),
        (true, _) => format!("select(0, 1, truthy_f({x}))"),
        (false, DType::F32) => format!("f32({x})"),
        (false, DType::F16 | DType::BF16) => settle(to, format!("f32({x})")),
        (false, DType::U8) => format!("({x} & 0xff)"),
        (false, DType::Bool) => format!("select(0, 1, {x} != 0)"),
        (false, _) => x.to_string(),
    }
}

fn truthy(d: DType, c: &str) -> String {
    if d.is_float() {
        format!("truthy_f({c})")
    } else {
        format!("({c} != 0)")
    }
}

/// The shader of `chain` over `ins` (chain input k is `ins[k]`) into `out`.
pub fn chain_kernel(
    chain: &[ChainStep],
    prologue: RegionPrologue,
    ins: &[&WTensor],
    out: &WTensor,
    caps: &Caps,
) -> Result<Kernel, LowerError> {
    let in_dtypes: Vec<DType> = ins.iter().map(|t| t.dtype).collect();
    let dts = chain_dtypes(chain, &in_dtypes).map_err(LowerError::Unsupported)?;
    let result = dts[dts.len() - 1];
    if result != out.dtype {
        unsupported!("the chain yields {result} but the output is {}", out.dtype);
    }
    if dts.contains(&DType::F64) {
        unsupported!("{PORTABLE} an f64 step has no type (no f64 without an extension)");
    }
    if dts.iter().chain(&in_dtypes).any(|d| *d == DType::I64) {
        unsupported!("{PORTABLE} i64 elementwise math needs 64-bit integers");
    }
    let mut used = vec![false; ins.len()];
    for step in chain {
        let ops: Vec<&ChainOperand> = match step {
            ChainStep::Activation(_, x) | ChainStep::Cast(_, x) => vec![x],
            ChainStep::Binary(_, a, b) | ChainStep::Compare(_, a, b) => vec![a, b],
            ChainStep::Where(c, a, b) => vec![c, a, b],
        };
        for o in ops {
            if let ChainOperand::Input(i) = o {
                used[*i] = true;
            }
        }
    }
    let mut sh = Shader::new(format!("region {:?} -> {}", chain, out.dtype));
    let needs_int = chain.iter().any(|s| {
        matches!(
            s,
            ChainStep::Binary(
                BinaryOp::Mod { .. } | BinaryOp::ShiftLeft | BinaryOp::ShiftRight,
                ..
            )
        )
    });
    if needs_int {
        sh.text(include_str!("../wgsl/elementwise_int.wgsl"));
    }
    let mut val = String::new();
    for (k, t) in ins.iter().enumerate() {
        if !used[k] {
            continue;
        }
        let resize = k == 0 && prologue == RegionPrologue::ResizeNearest2x;
        let idx = index_expr(&t.dims, &out.dims, resize)?;
        sh.input(&format!("x{k}"), t)?;
        let _ = writeln!(val, "    let x{k} = ld_x{k}({idx});");
    }
    for (k, step) in chain.iter().enumerate() {
        let dt = dts[k];
        let float_in = |o: &ChainOperand| match *o {
            ChainOperand::Input(i) => in_dtypes[i].is_float(),
            ChainOperand::Step(j) => dts[j].is_float(),
        };
        let dtype_of = |o: &ChainOperand| match *o {
            ChainOperand::Input(i) => in_dtypes[i],
            ChainOperand::Step(j) => dts[j],
        };
        let e = match step {
            // Integer Neg / Abs wrap (|i32::MIN| is itself), as the CPU's wrapping ops
            // narrowed to the dtype; u8's negation wraps modulo 256 in the settle.
            ChainStep::Activation(Activation::Neg, x) if !dt.is_float() => {
                settle(dt, format!("(0 - {})", operand(x)))
            }
            ChainStep::Activation(Activation::Abs, x) if !dt.is_float() => {
                let x = operand(x);
                settle(dt, format!("select({x}, 0 - {x}, {x} < 0)"))
            }
            ChainStep::Activation(a, _) if !dt.is_float() => {
                unsupported!("integer {a:?} is not defined")
            }
            ChainStep::Activation(a, x) => settle(dt, activation(*a, &operand(x))),
            ChainStep::Binary(op, a, b) => {
                settle(dt, binary(*op, dt.is_float(), &operand(a), &operand(b))?)
            }
            ChainStep::Compare(op, a, b) => {
                if float_in(a) != float_in(b) {
                    unsupported!("a compare of a float with an integer");
                }
                compare(*op, &operand(a), &operand(b))
            }
            ChainStep::Cast(to, x) => cast(dtype_of(x), *to, &operand(x)),
            ChainStep::Where(c, a, b) => format!(
                "select({}, {}, {})",
                operand(b),
                operand(a),
                truthy(dtype_of(c), &operand(c))
            ),
        };
        let _ = writeln!(val, "    let s{k} = {e};");
    }
    let c = class(out.dtype);
    let last = chain.len() - 1;
    sh.text(&format!(
        "fn val(i: u32) -> {c} {{\n{val}    return s{last};\n}}"
    ));
    sh.output("y", out)?;
    let n = out.numel() as u64;
    let k = per_word(out.dtype) as u64;
    let words = n.div_ceil(k);
    let (groups, head) = grid_1d(words, caps.max_groups_per_dim);
    let zero = if out.dtype.is_float() { "0.0" } else { "0" };
    let body = if k == 1 {
        "    st_y(gi, val(gi));\n".to_string()
    } else {
        let mut b = String::new();
        let mut args = Vec::new();
        for j in 0..k {
            let _ = writeln!(
                b,
                "    var v{j}: {c} = {zero};\n    if (gi * {k}u + {j}u < {n}u) {{ v{j} = val(gi * {k}u + {j}u); }}"
            );
            args.push(format!("v{j}"));
        }
        let _ = writeln!(b, "    st_y(gi, {});", args.join(", "));
        b
    };
    Ok(sh.finish(&format!("{head}{body}}}\n"), groups))
}

/// FusedSwiGLU `[.., 2n] -> [.., n]`: up * silu(gate), computed in f32.
fn swiglu(ctx: &mut NodeCtx, gate_first: bool) -> Lowered {
    let x = ctx.ins[0].clone();
    if !x.dtype.is_float() || !ctx.out.dtype.is_float() {
        unsupported!("FusedSwiGLU runs from float to float");
    }
    let half = *x.dims.last().unwrap_or(&0) / 2;
    if half == 0 {
        unsupported!("FusedSwiGLU over an empty last axis");
    }
    let out = ctx.out.clone();
    let mut sh = Shader::new("swiglu");
    sh.input("x", &x)?;
    let (u, g) = if gate_first {
        ("base + HALF", "base")
    } else {
        ("base", "base + HALF")
    };
    sh.text(&format!(
        "const HALF: u32 = {half}u;\nfn val(i: u32) -> f32 {{\n    let base = i + (i / HALF) * HALF;\n    let u = ld_x({u});\n    let g = ld_x({g});\n    return {};\n}}",
        settle(out.dtype, "u * (g / (1.0 + exp(-g)))".into())
    ));
    sh.output("y", &out)?;
    let n = out.numel() as u64;
    let k = per_word(out.dtype) as u64;
    let (groups, head) = grid_1d(n.div_ceil(k), ctx.caps.max_groups_per_dim);
    let body = if k == 1 {
        "    st_y(gi, val(gi));\n".to_string()
    } else {
        format!(
            "    var v1 = 0.0;\n    if (gi * 2u + 1u < {n}u) {{ v1 = val(gi * 2u + 1u); }}\n    st_y(gi, val(gi * 2u), v1);\n"
        )
    };
    ctx.push(sh.finish(&format!("{head}{body}}}\n"), groups));
    Ok(())
}

/// FloatRound: each element onto `format`'s grid, into the F32 output, by the bit-level
/// rounding of `wgsl/float_round.wgsl` (one element per invocation).
fn float_round(ctx: &mut NodeCtx, format: MiniFloat, saturate: bool) -> Lowered {
    let x = ctx.ins[0].clone();
    let out = ctx.out.clone();
    if !x.dtype.is_float() || out.dtype != DType::F32 || out.numel() != x.numel() {
        unsupported!("FloatRound of {} into {}", x.dtype, out.dtype);
    }
    const NAN: u32 = 0x7fc0_0000;
    let max = (format.max() as f32).to_bits();
    // E2M1 has nothing but max to overflow to.
    let sat = saturate || format == MiniFloat::E2M1;
    let over = if sat {
        max
    } else if format == MiniFloat::E5M2 {
        f32::INFINITY.to_bits()
    } else {
        NAN
    };
    // The grid formats' mantissa bits and exponent bias; E8M0 has its own function.
    let (mb, bias) = match format {
        MiniFloat::E4M3FN => (3, 7),
        MiniFloat::E4M3FNUZ => (3, 8),
        MiniFloat::E5M2 => (2, 15),
        MiniFloat::E5M2FNUZ => (2, 16),
        MiniFloat::E2M1 => (1, 1),
        MiniFloat::E8M0 { .. } => (0, 127),
    };
    let nan_out = if format == MiniFloat::E2M1 { 0 } else { NAN };
    let (bump, edge, f) = match format {
        MiniFloat::E8M0 { round } => match round {
            E8M0Round::Up => ("select(0, 1, up)", "max(k, -127)", "fr_e8m0"),
            E8M0Round::Down => ("0", "min(k, 127)", "fr_e8m0"),
            E8M0Round::Nearest => ("select(0, 1, near)", "k", "fr_e8m0"),
        },
        _ => ("0", "k", "fr_grid"),
    };
    let mut sh = Shader::new(format!("float_round {format:?} sat {saturate} {}", x.dtype));
    sh.input("x", &x)?;
    sh.output("y", &out)?;
    sh.text(&format!(
        "const MB: i32 = {mb};
const EMIN: i32 = {emin};
const MAXB: u32 = {max}u;
const OVER: u32 = {over}u;
const NAN_OUT: u32 = {nan_out}u;
const FNUZ: bool = {fnuz};
const SAT: bool = {sat};
fn e8m0_bump(up: bool, near: bool) -> i32 {{ return {bump}; }}
fn e8m0_edge(k: i32) -> i32 {{ return {edge}; }}
{}",
        include_str!("../wgsl/float_round.wgsl"),
        emin = 1 - bias,
        fnuz = format.is_fnuz(),
    ));
    let (groups, head) = grid_1d(out.numel() as u64, ctx.caps.max_groups_per_dim);
    let body = format!("    st_y(gi, bitcast<f32>({f}(bitcast<u32>(ld_x(gi)))));\n}}\n");
    ctx.push(sh.finish(&format!("{head}{body}"), groups));
    Ok(())
}
