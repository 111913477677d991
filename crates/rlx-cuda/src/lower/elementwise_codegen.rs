//! Code generation of elementwise kernels. A chain becomes the text of one kernel: one thread
//! per output element (grid-stride, i64 indices), each used input loaded once through its own
//! index expression, one line per step, one store. The helpers the text calls (loads,
//! activations, casts, settling into a step's dtype) are `kernels/elementwise.cu`, which
//! every generated source starts with.
//!
//! Each input's read is specialised in the text from its broadcast pattern: after dropping
//! the output's size-1 axes and merging neighbouring axes that index the input alike, an
//! input equal to the output is `p[i]`, a broadcast scalar `p[0]`, a bias-like block
//! `p[i % m]` / `p[i / d]` / `p[(i / d) % m]`; only the rest pay for `dims_offset`. The sizes
//! are kernel arguments, so the text (and its compiled module) depends on the pattern and
//! the dtypes, not on the shapes.
use crate::lower::{Dims8, LowerError};
use crate::unsupported;
use rlx_ir::ops::region::chain_dtypes;
use rlx_ir::{
    Activation, BinaryOp, ChainOperand, ChainStep, CompareOp, ComputeClass, DType, RegionPrologue,
};
use std::fmt::Write;

/// The helper library every generated source starts with.
pub(crate) const HELPERS: &str = include_str!("../../kernels/elementwise.cu");

/// Kernel parameter bytes allowed (sm_70+ with CUDA >= 12.1 accepts 32764).
const MAX_PARAM_BYTES: usize = 32000;

/// Batch samples per launch of a batch region (the size of `EwPtrs64`).
pub(crate) const BATCH_TABLE: usize = 64;

/// How an input is indexed at output position `i`.
#[derive(Clone, Debug, PartialEq)]
enum Read {
    /// Same elements as the output: `p[i]`.
    Same,
    /// One element everywhere: `p[0]`.
    Scalar,
    /// `p[i % m]`
    Mod(i64),
    /// `p[i / d]`
    Div(i64),
    /// `p[(i / d) % m]`: (d, m)
    DivMod(i64, i64),
    /// `p[dims_offset(v, i)]`
    Strided(Dims8),
    /// `p[ew_offset_resize2x(v, i)]`: the ResizeNearest2x prologue.
    Resize(Dims8),
}

/// One kernel argument, in parameter order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Arg {
    Out,
    /// Elements this launch writes.
    N,
    /// `EwPtrs64`: the batch samples of this launch (chain input 0).
    Samples,
    /// Elements per batch sample.
    Per,
    /// Pointer of chain input k.
    In(usize),
    I64(i64),
    Dims(Dims8),
}

/// A generated kernel: full body (helpers + kernel), its name and its arguments.
pub(crate) struct Kernel {
    pub src: String,
    pub name: String,
    pub args: Vec<Arg>,
}

/// What a chain kernel computes.
pub(crate) struct Spec<'a> {
    pub chain: &'a [ChainStep],
    pub prologue: RegionPrologue,
    /// Dtype and dims of each chain input (`Input(k)`). For a batch region, input 0 is one
    /// sample (`[1, ..]`) and the rest are the shared inputs.
    pub ins: &'a [(DType, &'a [usize])],
    pub out_dtype: DType,
    /// Output dims (all samples for a batch region).
    pub out_dims: &'a [usize],
    /// Input 0 is a table of samples, sample b feeding output rows `b*per..(b+1)*per`.
    pub batch: bool,
}

/// The C type a dtype is stored as.
fn storage(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::F16 => "__half",
        DType::BF16 => "__nv_bfloat16",
        DType::F64 => "double",
        DType::I32 => "int",
        DType::I64 => "i64",
        DType::U8 | DType::Bool => "u8",
    }
}

/// The C type a dtype computes in.
fn class(d: DType) -> &'static str {
    match d.compute_class() {
        ComputeClass::F32 => "float",
        ComputeClass::F64 => "double",
        ComputeClass::I64 => "i64",
    }
}

fn act_fn(a: Activation) -> &'static str {
    match a {
        Activation::Gelu => "ew_gelu",
        Activation::GeluApprox => "ew_gelu_approx",
        Activation::Silu => "ew_silu",
        Activation::Relu => "ew_relu",
        Activation::Sigmoid => "ew_sigmoid",
        Activation::Tanh => "ew_tanh",
        Activation::Exp => "ew_exp",
        Activation::Log => "ew_log",
        Activation::Sqrt => "ew_sqrt",
        Activation::Rsqrt => "ew_rsqrt",
        Activation::Neg => "ew_neg",
        Activation::Abs => "ew_abs",
        Activation::Sin => "ew_sin",
        Activation::Cos => "ew_cos",
        Activation::Erf => "ew_erf",
        Activation::Softplus => "ew_softplus",
        Activation::Recip => "ew_recip",
        Activation::Square => "ew_square",
    }
}

/// The device function of a binary op; the ONNX-only ops (Mod, bitwise, shifts) have no
/// kernel yet, so a chain holding one runs on the CPU (the dispatch report says so).
fn bin_fn(op: BinaryOp) -> Result<&'static str, LowerError> {
    Ok(match op {
        BinaryOp::Add => "ew_add",
        BinaryOp::Sub => "ew_sub",
        BinaryOp::Mul => "ew_mul",
        BinaryOp::Div => "ew_div",
        BinaryOp::Max => "ew_max",
        BinaryOp::Min => "ew_min",
        BinaryOp::Pow => "ew_pow",
        BinaryOp::Mod { .. }
        | BinaryOp::BitAnd
        | BinaryOp::BitOr
        | BinaryOp::BitXor
        | BinaryOp::ShiftLeft
        | BinaryOp::ShiftRight => unsupported!("no CUDA kernel for Binary {op:?} yet"),
    })
}

fn cmp_op(op: CompareOp) -> &'static str {
    match op {
        CompareOp::Eq => "==",
        CompareOp::Ne => "!=",
        CompareOp::Lt => "<",
        CompareOp::Le => "<=",
        CompareOp::Gt => ">",
        CompareOp::Ge => ">=",
    }
}

/// Wrap `e` so its value obeys `d` (what the CPU does after every step).
fn settle(d: DType, e: String) -> String {
    match d {
        DType::F16 => format!("ew_settle_f16({e})"),
        DType::BF16 => format!("ew_settle_bf16({e})"),
        DType::I32 => format!("ew_settle_i32({e})"),
        DType::U8 => format!("ew_settle_u8({e})"),
        DType::Bool => format!("ew_settle_bool({e})"),
        DType::F32 | DType::F64 | DType::I64 => e,
    }
}

/// The read of an input of `in_dims` broadcast (numpy rules) to `out_dims`.
fn classify(in_dims: &[usize], out_dims: &[usize]) -> Result<Read, LowerError> {
    if in_dims.len() > out_dims.len() {
        unsupported!("input {in_dims:?} has a higher rank than the output {out_dims:?}");
    }
    let lead = out_dims.len() - in_dims.len();
    let cs = rlx_ir::strides(in_dims);
    // (size, stride) of the output axes that matter, neighbours merged when the input
    // steps through them as through one axis.
    let mut axes: Vec<(usize, usize)> = Vec::new();
    for (k, &o) in out_dims.iter().enumerate() {
        let (d, s) = if k < lead {
            (1, 0)
        } else {
            (in_dims[k - lead], cs[k - lead])
        };
        if d != o && d != 1 {
            unsupported!("input {in_dims:?} does not broadcast to the output {out_dims:?}");
        }
        if o == 1 {
            continue;
        }
        let s = if d == 1 { 0 } else { s };
        if let Some(last) = axes.last_mut() {
            if (last.1 == 0 && s == 0) || (s != 0 && last.1 == s * o) {
                *last = (last.0 * o, s);
                continue;
            }
        }
        axes.push((o, s));
    }
    let n = |v: usize| v as i64;
    Ok(match axes.as_slice() {
        [] | [(_, 0)] => Read::Scalar,
        [(_, 1)] => Read::Same,
        [(_, 0), (m, 1)] => Read::Mod(n(*m)),
        [(_, 1), (d, 0)] => Read::Div(n(*d)),
        [(_, 0), (m, 1), (d, 0)] => Read::DivMod(n(*d), n(*m)),
        _ => {
            let (d, s): (Vec<usize>, Vec<usize>) = axes.into_iter().unzip();
            Read::Strided(Dims8::new(&d, &s)?)
        }
    })
}

/// Input 0 under the ResizeNearest2x prologue: `[N,C,H,W]` seen as `[N,C,2H,2W]`, then
/// broadcast to `out_dims`.
fn classify_resize(in_dims: &[usize], out_dims: &[usize]) -> Result<Read, LowerError> {
    if in_dims.len() != 4 {
        unsupported!("the ResizeNearest2x prologue needs a rank-4 input 0, got {in_dims:?}");
    }
    if out_dims.len() < 4 {
        unsupported!("output {out_dims:?} has a lower rank than the resized input 0");
    }
    let eff = [in_dims[0], in_dims[1], 2 * in_dims[2], 2 * in_dims[3]];
    let lead = out_dims.len() - 4;
    let cs = rlx_ir::strides(in_dims);
    let mut strides = vec![0usize; out_dims.len()];
    for k in 0..4 {
        let o = out_dims[lead + k];
        if eff[k] != o && eff[k] != 1 {
            unsupported!("resized input {eff:?} does not broadcast to the output {out_dims:?}");
        }
        if eff[k] != 1 {
            strides[lead + k] = cs[k];
        }
    }
    Ok(Read::Resize(Dims8::new(out_dims, &strides)?))
}

fn operand(o: &ChainOperand) -> String {
    match *o {
        ChainOperand::Input(i) => format!("x{i}"),
        ChainOperand::Step(j) => format!("s{j}"),
    }
}

/// Give the kernel text its name: `<prefix>_<hash of the text>`, so equal text is one module
/// and different dtypes or patterns never share a name.
fn named(prefix: &str, kernel: String) -> (String, String) {
    let name = format!("{prefix}_{:016x}", crate::kernels::hash(&kernel));
    let kernel = kernel.replace("@NAME@", &name);
    (format!("{HELPERS}\n{kernel}"), name)
}

const LOOP: &str = "    const i64 stride = (i64)gridDim.x * blockDim.x;\n    \
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {\n";

/// Generate the kernel of a chain.
pub(crate) fn chain_kernel(spec: &Spec) -> Result<Kernel, LowerError> {
    let in_dtypes: Vec<DType> = spec.ins.iter().map(|(d, _)| *d).collect();
    let step_dtypes = chain_dtypes(spec.chain, &in_dtypes).map_err(LowerError::Unsupported)?;
    let result = step_dtypes[step_dtypes.len() - 1];
    if result != spec.out_dtype {
        unsupported!(
            "the chain yields {result} but the output is {}",
            spec.out_dtype
        );
    }
    let mut used = vec![false; spec.ins.len()];
    for step in spec.chain {
        let ops: &[&ChainOperand] = match step {
            ChainStep::Activation(_, x) | ChainStep::Cast(_, x) => &[x],
            ChainStep::Binary(_, a, b) | ChainStep::Compare(_, a, b) => &[a, b],
            ChainStep::Where(c, a, b) => &[c, a, b],
        };
        for o in ops {
            if let ChainOperand::Input(i) = o {
                used[*i] = true;
            }
        }
    }
    let resize = spec.prologue == RegionPrologue::ResizeNearest2x;
    let batch = spec.batch && used[0];
    // A sample's own output: the output with axis 0 of size 1.
    let per_dims: Vec<usize> = if spec.batch {
        if spec.out_dims.is_empty() {
            unsupported!("a batch region's output needs an axis 0");
        }
        let mut d = spec.out_dims.to_vec();
        d[0] = 1;
        d
    } else {
        spec.out_dims.to_vec()
    };

    let mut params = vec![format!("{}* __restrict__ out", storage(spec.out_dtype))];
    params.push("const i64 n".into());
    let mut args = vec![Arg::Out, Arg::N];
    let mut bytes = 16;
    if batch {
        params.push("const EwPtrs64 smp".into());
        params.push("const i64 per".into());
        args.extend([Arg::Samples, Arg::Per]);
        bytes += 8 * BATCH_TABLE + 8;
    }
    let mut body = String::new();
    if batch {
        let t = storage(spec.ins[0].0);
        let _ = writeln!(
            body,
            "        const i64 b = i / per;\n        const i64 j = i - b * per;\n        \
             const {t}* __restrict__ in0 = (const {t}*)smp.p[b];"
        );
    }
    for (k, &(dt, dims)) in spec.ins.iter().enumerate() {
        if !used[k] {
            continue;
        }
        let (read, iv) = match (k, batch) {
            (0, true) if resize => (classify_resize(dims, &per_dims)?, "j"),
            (0, true) => (classify(dims, &per_dims)?, "j"),
            (0, false) if resize => (classify_resize(dims, spec.out_dims)?, "i"),
            _ => (classify(dims, spec.out_dims)?, "i"),
        };
        if !(k == 0 && batch) {
            params.push(format!("const {}* __restrict__ in{k}", storage(dt)));
            args.push(Arg::In(k));
            bytes += 8;
        }
        let idx = match &read {
            Read::Same => iv.to_string(),
            Read::Scalar => "0".to_string(),
            Read::Mod(m) => {
                params.push(format!("const i64 in{k}_m"));
                args.push(Arg::I64(*m));
                format!("{iv} % in{k}_m")
            }
            Read::Div(d) => {
                params.push(format!("const i64 in{k}_d"));
                args.push(Arg::I64(*d));
                format!("{iv} / in{k}_d")
            }
            Read::DivMod(d, m) => {
                params.push(format!("const i64 in{k}_d"));
                params.push(format!("const i64 in{k}_m"));
                args.extend([Arg::I64(*d), Arg::I64(*m)]);
                format!("({iv} / in{k}_d) % in{k}_m")
            }
            Read::Strided(v) => {
                params.push(format!("const Dims8 in{k}_v"));
                args.push(Arg::Dims(*v));
                format!("dims_offset(in{k}_v, {iv})")
            }
            Read::Resize(v) => {
                params.push(format!("const Dims8 in{k}_v"));
                args.push(Arg::Dims(*v));
                format!("ew_offset_resize2x(in{k}_v, {iv})")
            }
        };
        bytes += match read {
            Read::Strided(_) | Read::Resize(_) => std::mem::size_of::<Dims8>(),
            Read::DivMod(..) => 16,
            Read::Mod(_) | Read::Div(_) => 8,
            Read::Same | Read::Scalar => 0,
        };
        let _ = writeln!(
            body,
            "        const {} x{k} = ew_ld(in{k}, {idx});",
            class(dt)
        );
    }
    if bytes > MAX_PARAM_BYTES {
        unsupported!("{bytes} bytes of kernel parameters (limit {MAX_PARAM_BYTES})");
    }
    for (k, step) in spec.chain.iter().enumerate() {
        let dt = step_dtypes[k];
        let e = match step {
            // The device functions are float-only; integer Neg / Abs run on the CPU for now.
            ChainStep::Activation(a, _) if !dt.is_float() => {
                unsupported!("no CUDA kernel for integer {a:?} yet")
            }
            ChainStep::Activation(a, x) => settle(dt, format!("{}({})", act_fn(*a), operand(x))),
            ChainStep::Binary(op, a, b) => settle(
                dt,
                format!("{}({}, {})", bin_fn(*op)?, operand(a), operand(b)),
            ),
            ChainStep::Compare(op, a, b) => {
                format!("(i64)({} {} {})", operand(a), cmp_op(*op), operand(b))
            }
            // The cast helpers return values already settled into the target dtype; the
            // branches of a where already obey its dtype.
            ChainStep::Cast(to, x) => format!("ew_cast_{}({})", to.name(), operand(x)),
            ChainStep::Where(c, a, b) => format!(
                "ew_truthy({}) ? {} : {}",
                operand(c),
                operand(a),
                operand(b)
            ),
        };
        let _ = writeln!(body, "        const {} s{k} = {e};", class(dt));
    }
    let _ = writeln!(body, "        ew_st(out, i, s{});", spec.chain.len() - 1);

    let kernel = format!(
        "// {}\nextern \"C\" __global__ void __launch_bounds__(256) @NAME@(\n    {}) {{\n{LOOP}{body}    }}\n}}\n",
        describe(spec, &in_dtypes),
        params.join(",\n    ")
    );
    let (src, name) = named("region", kernel);
    Ok(Kernel { src, name, args })
}

/// A comment line for the generated text (dtypes and the chain, for humans reading a dump).
fn describe(spec: &Spec, in_dtypes: &[DType]) -> String {
    let ins: Vec<&str> = in_dtypes.iter().map(|d| d.name()).collect();
    format!(
        "in [{}] -> {}{}{}: {:?}",
        ins.join(", "),
        spec.out_dtype,
        if spec.batch { ", batch" } else { "" },
        if spec.prologue == RegionPrologue::ResizeNearest2x {
            ", resize2x"
        } else {
            ""
        },
        spec.chain
    )
}

/// `[.., 2n] -> [.., n]`: up * silu(gate) in the input's class. Arguments: out, x, n
/// (half the last dim), number of outputs.
pub(crate) fn swiglu(
    in_dtype: DType,
    out_dtype: DType,
    gate_first: bool,
) -> Result<(String, String), LowerError> {
    if !in_dtype.is_float() || !out_dtype.is_float() {
        unsupported!("FusedSwiGLU runs from float to float, not {in_dtype} to {out_dtype}");
    }
    let (u, g) = if gate_first {
        ("base + half_n", "base")
    } else {
        ("base", "base + half_n")
    };
    let (ic, oc) = (class(in_dtype), class(out_dtype));
    let kernel = format!(
        "// swiglu {in_dtype} -> {out_dtype}, gate_first {gate_first}\n\
         extern \"C\" __global__ void __launch_bounds__(256) @NAME@(\n    \
         {}* __restrict__ out, const {}* __restrict__ x, const i64 half_n, const i64 n) {{\n{LOOP}        \
         // row r starts at 2*half_n*r: i + r*half_n is column (i - r*half_n) of that row.\n        \
         const i64 base = i + (i / half_n) * half_n;\n        \
         const {ic} u = ew_ld(x, {u});\n        \
         const {ic} g = ew_ld(x, {g});\n        \
         ew_st(out, i, ({oc})ew_swiglu(u, g));\n    }}\n}}\n",
        storage(out_dtype),
        storage(in_dtype),
    );
    Ok(named("swiglu", kernel))
}
