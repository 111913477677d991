//! Audio ops: Fft (a direct DFT for any n over a twiddle table), LogMel and its VJP.
//!
//! Fft: a first kernel fills a table of the n twiddles e^{2πi r/n} whose angles are
//! reduced in integers (quadrant by rounding 4r/n, so the polynomial only ever sees
//! |θ| ≤ π/4 and no rounding of 2π·r/n enters), then one invocation per output sums its
//! n terms with the table index (j·k mod n) stepped in integers, in blocks of 32 terms
//! added into the total so the f32 error grows like √32 + √(n/32), not √n.
//! LogMel follows the CPU thunk (`rlx-cpu/src/ops/audio.rs`): m = spec·fb, l = log10(max(m,
//! 1e-10)), the per-item max (NaN-propagating) and the (max − 8) clamp; the backward passes
//! gradient only where m ≥ 1e-10 and l ≥ max − 8, the max held constant.
use super::{LowerError, Lowered, NodeCtx};
use crate::shader::{grid_1d, Shader, WTensor};
use crate::unsupported;
use rlx_ir::{DType, FftNorm};

/// Index math is 32-bit.
const MAX_ELEMS: usize = 1 << 30;

fn floats(ctx: &NodeCtx, what: &str) -> Lowered {
    if let Some(t) = ctx
        .ins
        .iter()
        .chain([&ctx.out])
        .find(|t| !t.dtype.is_float())
    {
        unsupported!("{what} of {} values", t.dtype);
    }
    if let Some(t) = ctx
        .ins
        .iter()
        .chain([&ctx.out])
        .find(|t| t.numel() >= MAX_ELEMS)
    {
        unsupported!("{what}: {:?} is too large for 32-bit index math", t.dims);
    }
    Ok(())
}

/// NumPy's scale for this direction and norm mode.
fn fft_scale(n: usize, inverse: bool, norm: FftNorm) -> f64 {
    let n = n as f64;
    match (norm, inverse) {
        (FftNorm::Backward, false) | (FftNorm::Forward, true) => 1.0,
        (FftNorm::Backward, true) | (FftNorm::Forward, false) => 1.0 / n,
        (FftNorm::Ortho, _) => 1.0 / n.sqrt(),
    }
}

/// An f32 literal that WGSL parses back to the same value.
fn lit(v: f64) -> String {
    format!("{:?}", v as f32)
}

pub fn fft(ctx: &mut NodeCtx, inverse: bool, norm: FftNorm) -> Lowered {
    floats(ctx, "Fft")?;
    let x = ctx.ins[0].clone();
    let r = x.dims.len();
    if r < 2 || x.dims[r - 1] != 2 || x.dims[r - 2] == 0 {
        unsupported!("Fft input must be [.., n, 2], got {:?}", x.dims);
    }
    let n = x.dims[r - 2];
    // 8r + n (the quadrant rounding) must fit in u32.
    if n >= 1 << 28 {
        unsupported!("Fft of length {n}");
    }
    let tw = ctx.scratch(&[n, 2], DType::F32);
    let mut sh = Shader::new(format!("fft twiddles n={n}"));
    sh.output("t", &tw)?;
    let (groups, head) = grid_1d(n as u64, ctx.caps.max_groups_per_dim);
    // θ = 2π·r/n = (π/2)·(q + rem/n) with q = round(4r/n) and |rem| ≤ n/2; Taylor
    // polynomials on |θ| ≤ π/4 are below 2e-9.
    let body = format!(
        r#"    let q = (8u * gi + {n}u) / {n2}u;
    let rem = f32(i32(4u * gi) - i32(q * {n}u));
    let t = rem / {nf} * 1.5707963267948966;
    let z = t * t;
    let s = t * (1.0 + z * (-1.6666666666666666e-1 + z * (8.333333333333333e-3 + z * (-1.984126984126984e-4 + z * 2.7557319223985893e-6))));
    let c = 1.0 + z * (-0.5 + z * (4.1666666666666664e-2 + z * (-1.388888888888889e-3 + z * (2.48015873015873e-5 + z * -2.755731922398589e-7))));
    var v = vec2<f32>(c, s);
    switch (q & 3u) {{
        case 1u: {{ v = vec2<f32>(-s, c); }}
        case 2u: {{ v = vec2<f32>(-c, -s); }}
        case 3u: {{ v = vec2<f32>(s, -c); }}
        default: {{}}
    }}
    st_t(2u * gi, v.x);
    st_t(2u * gi + 1u, v.y);
}}
"#,
        n2 = 2 * n,
        nf = lit(n as f64)
    );
    ctx.push(sh.finish(&format!("{head}{body}"), groups));

    let y = ctx.word_out();
    let mut sh = Shader::new(format!("dft n={n} inverse={inverse} {norm:?}"));
    sh.input("x", &x)?;
    sh.input("t", &tw)?;
    sh.output("y", &y)?;
    let items = x.numel() / (2 * n);
    let (groups, head) = grid_1d((items * n) as u64, ctx.caps.max_groups_per_dim);
    // Forward multiplies by e^{-iθ}, inverse by e^{+iθ}.
    let (re, im) = if inverse {
        ("xr * c - xi * s", "xi * c + xr * s")
    } else {
        ("xr * c + xi * s", "xi * c - xr * s")
    };
    let body = format!(
        r#"    let k = gi % {n}u;
    let base = 2u * (gi - k);
    var re = 0.0;
    var im = 0.0;
    var r = 0u;
    for (var j0 = 0u; j0 < {n}u; j0 += 32u) {{
        var pr = 0.0;
        var pi = 0.0;
        let j1 = min(j0 + 32u, {n}u);
        for (var j = j0; j < j1; j++) {{
            let xr = ld_x(base + 2u * j);
            let xi = ld_x(base + 2u * j + 1u);
            let c = ld_t(2u * r);
            let s = ld_t(2u * r + 1u);
            pr += {re};
            pi += {im};
            r += k;
            if (r >= {n}u) {{ r -= {n}u; }}
        }}
        re += pr;
        im += pi;
    }}
    st_y(2u * gi, re * {sc});
    st_y(2u * gi + 1u, im * {sc});
}}
"#,
        sc = lit(fft_scale(n, inverse, norm))
    );
    ctx.push(sh.finish(&format!("{head}{body}"), groups));
    ctx.finish_out(&y)
}

/// (items, frames, n_freq, n_mels) of spec `[.., frames, n_freq]` and fb `[n_freq, n_mels]`.
fn mel_dims(spec: &WTensor, fb: &WTensor) -> Result<[usize; 4], LowerError> {
    let (s, b) = (&spec.dims, &fb.dims);
    let r = s.len();
    if r < 2 || b.len() != 2 || b[0] != s[r - 1] {
        unsupported!("LogMel of spectrum {s:?} and filterbank {b:?}");
    }
    Ok([s[..r - 2].iter().product(), s[r - 2], s[r - 1], b[1]])
}

/// m = spec·fb per (item, frame, mel) into an f32 scratch: raw (`log` false) or as
/// l = log10(max(m, 1e-10)), a NaN kept.
fn mel_kernel(
    ctx: &mut NodeCtx,
    [items, f, nf, nm]: [usize; 4],
    log: bool,
) -> Result<WTensor, LowerError> {
    let (spec, fb) = (ctx.ins[0].clone(), ctx.ins[1].clone());
    let m = ctx.scratch(&[items * f * nm], DType::F32);
    let mut sh = Shader::new(format!("log-mel m {:?}x{nm} log={log}", spec.dims));
    sh.input("s", &spec)?;
    sh.input("fb", &fb)?;
    sh.output("m", &m)?;
    sh.text(LOG10);
    let (groups, head) = grid_1d(m.numel() as u64, ctx.caps.max_groups_per_dim);
    let v = if log { "lg(acc)" } else { "acc" };
    let body = format!(
        "    let mel = gi % {nm}u;\n    let row = (gi / {nm}u) * {nf}u;\n    var acc = 0.0;\n    for (var q = 0u; q < {nf}u; q++) {{ acc += ld_s(row + q) * ld_fb(q * {nm}u + mel); }}\n    st_m(gi, {v});\n}}\n"
    );
    ctx.push(sh.finish(&format!("{head}{body}"), groups));
    Ok(m)
}

/// `lg(m)` = log10(max(m, 1e-10)) with a NaN kept (a plain max could hide it).
const LOG10: &str = "fn lg(m: f32) -> f32 {\n    if (is_nan(m)) { return m; }\n    return log_(max(m, 1e-10)) * 0.43429448190325182;\n}";

/// The per-item max of `lg(m)` (`log` false: m is raw) over `per` values, NaN-propagating:
/// one workgroup per item, a tree in workgroup memory.
fn item_max(
    ctx: &mut NodeCtx,
    m: &WTensor,
    items: usize,
    per: usize,
    log: bool,
) -> Result<WTensor, LowerError> {
    if items > ctx.caps.max_groups_per_dim as usize {
        unsupported!("LogMel over {items} items (one workgroup each)");
    }
    let mx = ctx.scratch(&[items], DType::F32);
    let mut sh = Shader::new(format!("log-mel item max {items}x{per}"));
    sh.input("m", m)?;
    sh.output("mx", &mx)?;
    sh.text(LOG10);
    sh.text("var<workgroup> red: array<f32, 256>;");
    let v = if log { "ld_m(i)" } else { "lg(ld_m(i))" };
    let main = format!(
        r#"@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    var a = -f_inf();
    for (var i = wid.x * {per}u + lid; i < (wid.x + 1u) * {per}u; i += 256u) {{ a = f_max(a, {v}); }}
    red[lid] = a;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w >>= 1u) {{
        if (lid < w) {{ red[lid] = f_max(red[lid], red[lid + w]); }}
        workgroupBarrier();
    }}
    if (lid == 0u) {{ st_mx(wid.x, red[0]); }}
}}
"#
    );
    ctx.push(sh.finish(&main, [items as u32, 1, 1]));
    Ok(mx)
}

/// spec `[.., frames, n_freq]`, fb `[n_freq, n_mels]` → Whisper's log-mel.
pub fn log_mel(ctx: &mut NodeCtx) -> Lowered {
    floats(ctx, "LogMel")?;
    let dims = mel_dims(&ctx.ins[0], &ctx.ins[1])?;
    let [items, f, _, nm] = dims;
    if items == 0 || f * nm == 0 {
        return Ok(());
    }
    let l = mel_kernel(ctx, dims, true)?;
    let mx = item_max(ctx, &l, items, f * nm, true)?;
    let y = ctx.word_out();
    let mut sh = Shader::new(format!("log-mel clamp {items}x{}", f * nm));
    sh.input("l", &l)?;
    sh.input("mx", &mx)?;
    sh.output("y", &y)?;
    let (groups, head) = grid_1d(y.numel() as u64, ctx.caps.max_groups_per_dim);
    let body = format!(
        "    let mx = ld_mx(gi / {}u);\n    let lo = mx - 8.0;\n    var c = ld_l(gi);\n    if (is_nan(mx) || c < lo) {{ c = lo; }}\n    st_y(gi, (c + 4.0) / 4.0);\n}}\n",
        f * nm
    );
    ctx.push(sh.finish(&format!("{head}{body}"), groups));
    ctx.finish_out(&y)
}

/// spec, fb, dy → dspec = (dy · 0.25 / (ln 10 · m) where live) · fbᵀ.
pub fn log_mel_backward(ctx: &mut NodeCtx) -> Lowered {
    floats(ctx, "LogMelBackward")?;
    let dims = mel_dims(&ctx.ins[0], &ctx.ins[1])?;
    let [items, f, nf, nm] = dims;
    let dy = ctx.ins[2].clone();
    if dy.numel() != items * f * nm {
        unsupported!(
            "LogMelBackward: dy {:?} does not match the LogMel output",
            dy.dims
        );
    }
    if items * f * nm == 0 {
        let y = ctx.word_out();
        let mut sh = Shader::new("log-mel backward zeros");
        sh.output("y", &y)?;
        let (groups, head) = grid_1d(y.numel() as u64, ctx.caps.max_groups_per_dim);
        ctx.push(sh.finish(&format!("{head}    st_y(gi, 0.0);\n}}\n"), groups));
        return ctx.finish_out(&y);
    }
    let m = mel_kernel(ctx, dims, false)?;
    let mx = item_max(ctx, &m, items, f * nm, false)?;
    // G = dy · dout/dm where live, else 0.
    let g = ctx.scratch(&[items * f * nm], DType::F32);
    let mut sh = Shader::new(format!("log-mel backward g {items}x{}", f * nm));
    sh.input("m", &m)?;
    sh.input("mx", &mx)?;
    sh.input("dy", &dy)?;
    sh.output("g", &g)?;
    sh.text(LOG10);
    let (groups, head) = grid_1d(g.numel() as u64, ctx.caps.max_groups_per_dim);
    let k = lit(0.25 / std::f64::consts::LN_10);
    let body = format!(
        "    let m = ld_m(gi);\n    let mx = ld_mx(gi / {}u);\n    let live = !is_nan(m) && !is_nan(mx) && m >= 1e-10 && lg(m) >= mx - 8.0;\n    var v = 0.0;\n    if (live) {{ v = ld_dy(gi) * {k} / m; }}\n    st_g(gi, v);\n}}\n",
        f * nm
    );
    ctx.push(sh.finish(&format!("{head}{body}"), groups));
    let y = ctx.word_out();
    let fb = ctx.ins[1].clone();
    let mut sh = Shader::new(format!("log-mel backward dspec {items}x{f}x{nf}"));
    sh.input("g", &g)?;
    sh.input("fb", &fb)?;
    sh.output("y", &y)?;
    let (groups, head) = grid_1d(y.numel() as u64, ctx.caps.max_groups_per_dim);
    let body = format!(
        "    let q = gi % {nf}u;\n    let row = (gi / {nf}u) * {nm}u;\n    var acc = 0.0;\n    for (var j = 0u; j < {nm}u; j++) {{ acc += ld_g(row + j) * ld_fb(q * {nm}u + j); }}\n    st_y(gi, acc);\n}}\n"
    );
    ctx.push(sh.finish(&format!("{head}{body}"), groups));
    ctx.finish_out(&y)
}
