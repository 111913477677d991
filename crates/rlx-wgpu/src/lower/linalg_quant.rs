//! The quantized products: DequantMatMul, FusedDequantMatMul and Dequantize, for every
//! [`QuantScheme`]. The packed weight stays packed: kernels decode its bytes where they
//! use them (`wgsl/linalg.wgsl`), so no f32 copy of the weight ever exists.
//!
//! `x @ Wᵀ` with W `[N, K]` runs as a GEMV for decode shapes (M ≤ 8 rows of x: a group of
//! invocations per weight row, each decoding 32-value units of the row and dotting them with
//! every row of x, then a workgroup tree reduction, or `subgroupAdd` and one barrier where the
//! adapter has subgroups) and above that as the tiled GEMM of
//! `linalg` with B's tile decoded from the packed rows. FusedDequantMatMul's prologue (the
//! RMS norm of x times gamma, or silu(gate)·up of x's halves) is one small kernel writing the
//! product's input, rounded to x's dtype as the CPU's unfused graph holds it; its residual
//! is added in the product's epilogue.
use super::linalg::subgroup_min;
use super::linalg_gemm::{tiled, Tile, TK};
use super::{Lowered, NodeCtx};
use crate::shader::{grid_1d, Kernel, Shader, WTensor};
use crate::unsupported;
use rlx_ir::{DType, Op, QuantScheme};

/// Decoders of every scheme (`dq_s_*`, `dq_q_*`), over a per-kernel byte reader `wb`.
const DECODE: &str = include_str!("../wgsl/linalg.wgsl");

/// At most this many rows of x take the GEMV (the CPU's `MATVEC_MAX_M`).
const GEMV_MAX_M: usize = 8;

fn suffix(s: QuantScheme) -> &'static str {
    match s {
        QuantScheme::Q8_0 => "q8_0",
        QuantScheme::Q4_0 => "q4_0",
        QuantScheme::Q4_1 => "q4_1",
        QuantScheme::Q5_0 => "q5_0",
        QuantScheme::Q5_1 => "q5_1",
        QuantScheme::Q4_K => "q4_k",
        QuantScheme::Q5_K => "q5_k",
        QuantScheme::Q6_K => "q6_k",
        QuantScheme::F16 => "f16",
        QuantScheme::BF16 => "bf16",
    }
}

/// Declare the packed weight `w` (any byte offset: its words from the one holding its first
/// byte) and the decoders of `scheme` as `dq_s` / `dq_q`.
fn weight(sh: &mut Shader, w: &WTensor, scheme: QuantScheme) -> Lowered {
    let aligned = WTensor {
        off: w.off & !3,
        ..w.clone()
    };
    sh.words("w", &aligned)?;
    let s = suffix(scheme);
    sh.text(&format!(
        "fn wb(i: u32) -> u32 {{\n    let e = i + {}u;\n    return (rd_w(e >> 2u) >> ((e & 3u) * 8u)) & 0xffu;\n}}\n{DECODE}\nfn dq_s(rb: u32, u: u32, hf: u32) -> vec2<f32> {{ return dq_s_{s}(rb, u, hf); }}\nfn dq_q(rb: u32, u: u32, l: u32) -> f32 {{ return dq_q_{s}(rb, u, l); }}",
        w.off & 3
    ));
    Ok(())
}

/// The packed weight's row bytes for rows of `k` values, or why it does not fit.
fn row_bytes(scheme: QuantScheme, w: &WTensor, k: usize) -> Result<usize, String> {
    if w.dtype != DType::U8 {
        return Err(format!("a packed weight held as {}", w.dtype));
    }
    if k == 0 || !k.is_multiple_of(scheme.block_len()) {
        return Err(format!("{scheme:?} rows of {k} values"));
    }
    Ok(k / scheme.block_len() * scheme.block_bytes())
}

pub fn lower_dequant_matmul(ctx: &mut NodeCtx, op: &Op) -> Lowered {
    let (scheme, norm_eps, residual, glu) = match op {
        Op::DequantMatMul { scheme } => (*scheme, None, false, None),
        Op::FusedDequantMatMul {
            scheme,
            norm_eps,
            residual,
            glu,
        } => (*scheme, *norm_eps, *residual, *glu),
        _ => unreachable!("routed here by lower_node"),
    };
    let (x, w) = (ctx.ins[0].clone(), ctx.ins[1].clone());
    if !x.dtype.is_float() || !ctx.out.dtype.is_float() {
        unsupported!("a dequant matmul of {} x -> {}", x.dtype, ctx.out.dtype);
    }
    if x.dims.is_empty() || w.dims.len() != 2 {
        unsupported!(
            "want x [.., K] and W [N, bytes], got {:?}, {:?}",
            x.dims,
            w.dims
        );
    }
    let xk = x.dims[x.dims.len() - 1];
    if norm_eps.is_some() && glu.is_some() {
        unsupported!("FusedDequantMatMul with both a norm and a SwiGLU");
    }
    let k = if glu.is_some() { xk / 2 } else { xk };
    if glu.is_some() && !xk.is_multiple_of(2) {
        unsupported!("a SwiGLU input row of {xk} values");
    }
    let n = w.dims[0];
    let rb = match row_bytes(scheme, &w, k) {
        Ok(rb) if rb == w.dims[1] => rb,
        Ok(rb) => unsupported!("{scheme:?} rows of {k} need {rb} bytes, W is {:?}", w.dims),
        Err(e) => unsupported!("{e}"),
    };
    let m = x.numel() / xk.max(1);
    if m * n != ctx.out.numel() {
        unsupported!("output {:?} for x {:?} and {n} rows", ctx.out.dims, x.dims);
    }
    // The product's input: x itself, or the prologue's f32 rows.
    let h = match (norm_eps, glu) {
        (Some(eps), _) => {
            let gamma = ctx.ins[2].clone();
            if gamma.numel() != k {
                unsupported!("gamma {:?} for rows of {k}", gamma.dims);
            }
            if m > ctx.caps.max_groups_per_dim as usize {
                unsupported!("{m} rows to normalise exceed the grid's x limit");
            }
            let h = ctx.scratch(&[m, k], DType::F32);
            let kern = rms_prologue(&x, &gamma, &h, (m, k), eps)?;
            ctx.push(kern);
            h
        }
        (None, Some(gate_first)) => {
            let h = ctx.scratch(&[m, k], DType::F32);
            let kern = glu_prologue(&x, &h, (m, k), gate_first, ctx.caps.max_groups_per_dim)?;
            ctx.push(kern);
            h
        }
        (None, None) => x.clone(),
    };
    let res = if residual {
        let r = ctx.ins[ctx.ins.len() - 1].clone();
        if r.numel() != m * n || !r.dtype.is_float() {
            unsupported!("residual {:?} for a {m}×{n} output", r.dims);
        }
        Some(r)
    } else {
        None
    };
    let y = ctx.word_out();
    let max = ctx.caps.max_groups_per_dim as usize;
    let mut sh = Shader::new(format!("dequant matmul {scheme:?} m={m} k={k} n={n}"));
    sh.input("a", &h)?;
    weight(&mut sh, &w, scheme)?;
    let epi = match &res {
        Some(r) => {
            sh.input("r", r)?;
            format!("v + ld_r(gm * {n}u + gn)")
        }
        None => "v".to_string(),
    };
    sh.text(&format!(
        "fn epi(v: f32, gm: u32, gn: u32) -> f32 {{\n    return {epi};\n}}"
    ));
    sh.output("y", &y)?;
    let kern = if m <= GEMV_MAX_M {
        gemv(sh, (m, n, k), rb, max, subgroup_min(ctx.caps))
    } else {
        let t = Tile::pick(m, n, 1);
        let (gx, gy) = t.groups(m, n);
        if gx > max || gy > max {
            unsupported!("a {m}×{n} product needs more tiles than the grid holds");
        }
        // B's tile (E weight rows × a 16-value half unit): task t decodes 4 values of row
        // t / 4, with one scale read, and scatters them down the tile's k rows.
        let q = t.edge() / 4;
        let mut load_b = String::new();
        for j in 0..t.edge() / 64 {
            load_b += &format!(
                "    {{
        let t = lid + {o}u;
        let nn = t / 4u;
        let part = t % 4u;
        let gn = n0 + nn;
        let u = k0 / 32u;
        let hf = (k0 / {TK}u) % 2u;
        var v = vec4<f32>(0.0);
        if (gn < {n}u) {{
            let row = gn * {rb}u;
            let s = dq_s(row, u, hf);
            let l = hf * 16u + part * 4u;
            v = s.x * vec4<f32>(dq_q(row, u, l), dq_q(row, u, l + 1u), dq_q(row, u, l + 2u), dq_q(row, u, l + 3u)) + s.y;
        }}
        for (var i = 0u; i < 4u; i++) {{ Bs[(part * 4u + i) * {q}u + nn / 4u][nn % 4u] = v[i]; }}
    }}\n",
                o = 256 * j
            );
        }
        tiled(sh, t, (m, n, k), 1, ("0u", "0u"), &load_b, 1)
    };
    ctx.push(kern);
    ctx.finish_out(&y)
}

/// The decode GEMV: `T` invocations a weight row (as many as its 32-value units, up to
/// 256), `256 / T` rows a workgroup; each invocation keeps one partial sum per row of x,
/// and the row's lanes meet in a tree reduction (or, with subgroups, `subgroupAdd` and one
/// barrier).
fn gemv(
    mut sh: Shader,
    (m, n, k): (usize, usize, usize),
    rb: usize,
    max: usize,
    subgroup_min: Option<usize>,
) -> Kernel {
    let units = k / 32;
    let t = units.next_power_of_two().clamp(8, 256);
    let r = 256 / t;
    let gx = n.div_ceil(r);
    let (x, y) = (gx.min(max), gx.div_ceil(gx.min(max)));
    let (head, reduce) = if let Some(sg_min) = subgroup_min {
        // A row's T lanes are consecutive `lid`, and so are a subgroup's: a subgroup no
        // larger than T lies in one row and `subgroupAdd` sums it; a larger one holds whole
        // rows, which a butterfly of shuffles over the row's lanes sums. One lane a row and
        // subgroup leaves its sum (per row of x) in a small array, sized for the smallest
        // subgroup; one barrier, and the row's first lane adds the T / min(T, size) sums.
        let gmax = t / t.min(sg_min);
        sh.enable_subgroups();
        sh.text(&format!(
            "var<workgroup> red: array<f32, {}>;",
            m * r * gmax
        ));
        (
            ", @builtin(subgroup_size) sgs: u32",
            format!(
                "    let lanes = min(sgs, {t}u);
    for (var mm = 0u; mm < M; mm++) {{
        var v = acc[mm];
        if (sgs <= {t}u) {{
            v = subgroupAdd(v);
        }} else {{
            for (var o = 1u; o < {t}u; o = o << 1u) {{ v += subgroupShuffleXor(v, o); }}
        }}
        if (t % lanes == 0u) {{ red[(mm * {r}u + lid / {t}u) * {gmax}u + t / lanes] = v; }}
    }}
    workgroupBarrier();
    if (t == 0u && gn < {n}u) {{
        for (var mm = 0u; mm < M; mm++) {{
            var v = 0.0;
            for (var j = 0u; j < {t}u / lanes; j++) {{ v += red[(mm * {r}u + lid / {t}u) * {gmax}u + j]; }}
            st_y(mm * {n}u + gn, epi(v, mm, gn));
        }}
    }}
"
            ),
        )
    } else {
        sh.text(&format!("var<workgroup> red: array<f32, {}>;", 256 * m));
        (
            "",
            format!(
                "    for (var mm = 0u; mm < M; mm++) {{ red[mm * 256u + lid] = acc[mm]; }}
    workgroupBarrier();
    for (var h = {half}u; h > 0u; h = h >> 1u) {{
        if (t < h) {{
            for (var mm = 0u; mm < M; mm++) {{ red[mm * 256u + lid] += red[mm * 256u + lid + h]; }}
        }}
        workgroupBarrier();
    }}
    if (t == 0u && gn < {n}u) {{
        for (var mm = 0u; mm < M; mm++) {{ st_y(mm * {n}u + gn, epi(red[mm * 256u + lid], mm, gn)); }}
    }}
",
                half = t / 2
            ),
        )
    };
    let main = format!(
        "const M: u32 = {m}u;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32{head}) {{
    let t = lid % {t}u;
    let gn = (wid.y * {x}u + wid.x) * {r}u + lid / {t}u;
    var acc: array<f32, {m}>;
    if (gn < {n}u) {{
        let row = gn * {rb}u;
        for (var u = t; u < {units}u; u += {t}u) {{
            for (var hf = 0u; hf < 2u; hf++) {{
                let s = dq_s(row, u, hf);
                for (var i = 0u; i < 16u; i++) {{
                    let l = hf * 16u + i;
                    let wv = s.x * dq_q(row, u, l) + s.y;
                    let kk = u * 32u + l;
                    for (var mm = 0u; mm < M; mm++) {{ acc[mm] += wv * ld_a(mm * {k}u + kk); }}
                }}
            }}
        }}
    }}
{reduce}}}
"
    );
    sh.finish(&main, [x as u32, y as u32, 1])
}

/// `x`'s rounding into its own dtype, as the CPU's unfused graph stores the norm's output.
fn settle(d: DType, v: &str) -> String {
    match d {
        DType::F16 => format!("settle_f16({v})"),
        DType::BF16 => format!("settle_bf16({v})"),
        _ => v.to_string(),
    }
}

/// `h = x / sqrt(mean(x²) + eps) · gamma` per row: a workgroup a row, a tree reduction of
/// the sum of squares.
fn rms_prologue(
    x: &WTensor,
    gamma: &WTensor,
    h: &WTensor,
    (m, k): (usize, usize),
    eps: f32,
) -> Result<Kernel, super::LowerError> {
    let mut sh = Shader::new(format!("dequant matmul rms prologue m={m} k={k}"));
    sh.input("x", x)?;
    sh.input("g", gamma)?;
    sh.output("h", h)?;
    sh.text("var<workgroup> red: array<f32, 256>;");
    let val = settle(x.dtype, "ld_x(o + kk) * rs * ld_g(kk)");
    let main = format!(
        "@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let o = wid.x * {k}u;
    var s = 0.0;
    for (var kk = lid; kk < {k}u; kk += 256u) {{ let v = ld_x(o + kk); s += v * v; }}
    red[lid] = s;
    workgroupBarrier();
    for (var st = 128u; st > 0u; st = st >> 1u) {{
        if (lid < st) {{ red[lid] += red[lid + st]; }}
        workgroupBarrier();
    }}
    let rs = 1.0 / sqrt(red[0] / {kf:?} + {eps:?});
    for (var kk = lid; kk < {k}u; kk += 256u) {{ st_h(o + kk, {val}); }}
}}
",
        kf = k as f32,
        eps = eps
    );
    Ok(sh.finish(&main, [m as u32, 1, 1]))
}

/// `h = silu(gate) · up` of each row's halves (`gate_first`: the gate is the first half).
fn glu_prologue(
    x: &WTensor,
    h: &WTensor,
    (m, k): (usize, usize),
    gate_first: bool,
    max: u32,
) -> Result<Kernel, super::LowerError> {
    let mut sh = Shader::new(format!("dequant matmul swiglu prologue m={m} k={k}"));
    sh.input("x", x)?;
    sh.output("h", h)?;
    let (g, u) = if gate_first {
        ("base", "base + K")
    } else {
        ("base + K", "base")
    };
    let (groups, head) = grid_1d((m * k) as u64, max);
    let val = settle(x.dtype, "up * (g / (1.0 + exp(-g)))");
    let main = format!(
        "const K: u32 = {k}u;
{head}    let base = gi + (gi / K) * K;
    let g = ld_x({g});
    let up = ld_x({u});
    st_h(gi, {val});
}}
"
    );
    Ok(sh.finish(&main, groups))
}

/// Dequantize: packed rows `[.., bytes]` → `[.., K]`, an invocation a value.
pub fn lower_dequantize(ctx: &mut NodeCtx, scheme: QuantScheme) -> Lowered {
    let w = ctx.ins[0].clone();
    if !ctx.out.dtype.is_float() {
        unsupported!("Dequantize into {}", ctx.out.dtype);
    }
    let Some(&rb) = w.dims.last() else {
        unsupported!("Dequantize of a scalar");
    };
    let k = rb / scheme.block_bytes() * scheme.block_len();
    match row_bytes(scheme, &w, k) {
        Ok(r) if r == rb => {}
        Ok(_) => unsupported!("{scheme:?} rows of {rb} bytes are not whole blocks"),
        Err(e) => unsupported!("{e}"),
    }
    let rows = w.numel() / rb;
    if rows * k != ctx.out.numel() {
        unsupported!("output {:?} for {rows} rows of {k}", ctx.out.dims);
    }
    let y = ctx.word_out();
    let mut sh = Shader::new(format!("dequantize {scheme:?} {rows}x{k}"));
    weight(&mut sh, &w, scheme)?;
    sh.output("y", &y)?;
    let (groups, head) = grid_1d((rows * k) as u64, ctx.caps.max_groups_per_dim);
    let main = format!(
        "{head}    let row = (gi / {k}u) * {rb}u;
    let c = gi % {k}u;
    let u = c / 32u;
    let l = c % 32u;
    let s = dq_s(row, u, l / 16u);
    st_y(gi, s.x * dq_q(row, u, l) + s.y);
}}
"
    );
    ctx.push(sh.finish(&main, groups));
    ctx.finish_out(&y)
}
