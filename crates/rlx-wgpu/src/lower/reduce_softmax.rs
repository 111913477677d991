//! Softmax and the softmax cross-entropy family: one workgroup per line, the max first (the
//! shift), then Σ exp(x − shift) through the workgroup tree, in f32. As on the CPU a line
//! whose max is not finite shifts by 0 (so all −inf gives 0/0 = NaN, as PyTorch does), and
//! an invalid label (not a class index) yields NaN where the CPU raises an error. Where the
//! adapter has subgroups the line's max and sum go through them (`tree_sg`).
use super::linalg::subgroup_min;
use super::reduce::{line_fns, lines, row_grid_sg, tree, tree_sg, wg_for};
use super::{LowerError, Lowered, NodeCtx};
use crate::shader::{Shader, WTensor};
use crate::unsupported;
use rlx_ir::DType;

/// exp with its edges pinned (NaN stays, −inf gives 0, overflow gives inf), whatever the
/// driver's exp does there; and the finite test of a shift.
const HELPERS: &str = "fn exp_(v: f32) -> f32 {
    if (is_nan(v)) { return v; }
    if (v > 88.72283) { return f_inf(); }
    if (v < -103.97208) { return 0.0; }
    return exp(v);
}
fn finite(v: f32) -> bool { return !is_nan(v) && abs(v) != f_inf(); }";

/// The text of a line's shift and Σ exp(x − shift) into `shift` and `s`, for a kernel
/// whose `ld_x` is the line's values at `b0 + k * LS`.
fn lse_body(len: usize, wg: u32) -> String {
    format!(
        "    var m = -f_inf();
    for (var k = lid; k < {len}u; k = k + {wg}u) {{ m = f_max(m, ld_x(b0 + k * LS)); }}
    m = wg_mx(lid, m);
    let shift = select(0.0, m, finite(m));
    var acc = 0.0;
    for (var k = lid; k < {len}u; k = k + {wg}u) {{ acc = acc + exp_(ld_x(b0 + k * LS) - shift); }}
    let s = wg_sum(lid, acc);
"
    )
}

fn line_shader(
    label: String,
    x: &WTensor,
    len: usize,
    inner: usize,
    wg: u32,
    sg: Option<usize>,
) -> Result<Shader, LowerError> {
    let mut sh = Shader::new(label);
    sh.input("x", x)?;
    sh.text(HELPERS);
    sh.text(&line_fns(len, inner));
    // Through subgroups where the adapter has them (the head from `row_grid_sg`).
    match sg {
        Some(m) => {
            sh.enable_subgroups();
            sh.text(&tree_sg("mx", wg, m, "f_max(a, b)", false));
            sh.text(&tree_sg("sum", wg, m, "a + b", true));
        }
        None => {
            sh.text(&tree("mx", "f32", wg, "f_max(a, b)"));
            sh.text(&tree("sum", "f32", wg, "a + b"));
        }
    }
    Ok(sh)
}

pub fn lower_softmax(ctx: &mut NodeCtx, axis: i64) -> Lowered {
    let x = ctx.ins[0].clone();
    if !x.dtype.is_float() || x.dims != ctx.out.dims {
        unsupported!("Softmax of {} {:?}", x.dtype, x.dims);
    }
    let (outer, len, inner) = lines(&x.dims, axis)?;
    if len == 0 {
        return Ok(());
    }
    let rows = outer * inner;
    let y = ctx.word_out();
    let wg = wg_for(len);
    let sg = subgroup_min(ctx.caps);
    let mut sh = line_shader(format!("softmax {len} / {inner}"), &x, len, inner, wg, sg)?;
    sh.output("y", &y)?;
    let (groups, head) = row_grid_sg(rows, wg, ctx.caps, sg.is_some());
    let body = format!(
        "    let b0 = lbase(row);
{lse}    let inv = 1.0 / s;
    if (valid) {{
        for (var k = lid; k < {len}u; k = k + {wg}u) {{
            let i = b0 + k * LS;
            st_y(i, exp_(ld_x(i) - shift) * inv);
        }}
    }}
}}
",
        lse = lse_body(len, wg)
    );
    ctx.push(sh.finish(&format!("{head}{body}"), groups));
    ctx.finish_out(&y)
}

/// `[N, C]` logits of a cross-entropy op.
fn logits(ctx: &NodeCtx) -> Result<(WTensor, usize, usize), LowerError> {
    let x = ctx.ins[0].clone();
    if x.dims.len() != 2 || !x.dtype.is_float() || !ctx.out.dtype.is_float() {
        unsupported!(
            "cross-entropy logits must be float [N, C], got {} {:?}",
            x.dtype,
            x.dims
        );
    }
    let (n, c) = (x.dims[0], x.dims[1]);
    if c == 0 {
        unsupported!("cross-entropy over zero classes");
    }
    Ok((x, n, c))
}

/// `fn lab(row) -> i32`: row's label as a class index in 0..c, or -1 where it is none.
fn labels(sh: &mut Shader, t: &WTensor, n: usize, c: usize) -> Lowered {
    if t.numel() != n {
        unsupported!("{} labels for {n} rows", t.numel());
    }
    sh.input("lab", t)?;
    let text = if t.dtype.is_float() {
        format!(
            "fn lab(r: u32) -> i32 {{
    let v = ld_lab(r);
    if (is_nan(v) || v != floor(v) || v < 0.0 || v >= {c}.0) {{ return -1; }}
    return i32(v);
}}"
        )
    } else {
        // An i64 label is a class index only if its high word is 0.
        let hi = if t.dtype == DType::I64 {
            sh.words("labw", t)?;
            "rd_labw(2u * r + 1u) != 0u || "
        } else {
            ""
        };
        format!(
            "fn lab(r: u32) -> i32 {{
    let v = ld_lab(r);
    if ({hi}v < 0 || v >= {c}) {{ return -1; }}
    return v;
}}"
        )
    };
    sh.text(&text);
    Ok(())
}

/// SoftmaxCrossEntropy (dense targets, `labels` false) and SoftmaxCrossEntropyWithLogits:
/// `[N, C]` → `[N]`.
pub fn lower_ce(ctx: &mut NodeCtx, sparse: bool) -> Lowered {
    let (x, n, c) = logits(ctx)?;
    let t = ctx.ins[1].clone();
    if ctx.out.numel() != n {
        unsupported!("cross-entropy output {:?} for {n} rows", ctx.out.dims);
    }
    let y = ctx.word_out();
    let wg = wg_for(c);
    let sg = subgroup_min(ctx.caps);
    let mut sh = line_shader(
        format!("cross entropy {n}x{c} sparse {sparse}"),
        &x,
        c,
        1,
        wg,
        sg,
    )?;
    sh.output("y", &y)?;
    let tail = if sparse {
        labels(&mut sh, &t, n, c)?;
        "    let l = lab(row);
    let loss = select(f_nan(), shift + lse - ld_x(b0 + u32(max(l, 0))), l >= 0);
"
        .to_string()
    } else {
        if t.dims != x.dims || !t.dtype.is_float() {
            unsupported!(
                "dense targets {} {:?} for logits {:?}",
                t.dtype,
                t.dims,
                x.dims
            );
        }
        sh.input("t", &t)?;
        format!(
            "    var acc2 = 0.0;
    for (var k = lid; k < {c}u; k = k + {wg}u) {{
        acc2 = acc2 - ld_t(b0 + k) * (ld_x(b0 + k) - shift - lse);
    }}
    let loss = wg_sum(lid, acc2);
"
        )
    };
    let (groups, head) = row_grid_sg(n, wg, ctx.caps, sg.is_some());
    let body = format!(
        "    let b0 = lbase(row);
{lse}    let lse = log_(s);
{tail}    if (valid && lid == 0u) {{ st_y(row, loss); }}
}}
",
        lse = lse_body(c, wg)
    );
    ctx.push(sh.finish(&format!("{head}{body}"), groups));
    ctx.finish_out(&y)
}

/// SoftmaxCrossEntropyBackward: `(softmax(x) − target) · d_loss[row]` over `[N, C]`, the
/// target dense `[N, C]` or the one-hot of integer labels `[N]`.
pub fn lower_ce_backward(ctx: &mut NodeCtx) -> Lowered {
    let (x, n, c) = logits(ctx)?;
    let (t, dl) = (ctx.ins[1].clone(), ctx.ins[2].clone());
    if ctx.out.dims != x.dims || dl.numel() != n || !dl.dtype.is_float() {
        unsupported!(
            "cross-entropy backward of {:?} with d_loss {:?}",
            x.dims,
            dl.dims
        );
    }
    let dense = t.dims.len() == 2;
    let y = ctx.word_out();
    let wg = wg_for(c);
    let sg = subgroup_min(ctx.caps);
    let mut sh = line_shader(
        format!("cross entropy backward {n}x{c} dense {dense}"),
        &x,
        c,
        1,
        wg,
        sg,
    )?;
    sh.output("y", &y)?;
    sh.input("d", &dl)?;
    let target = if dense {
        if t.dims != x.dims || !t.dtype.is_float() {
            unsupported!(
                "dense targets {} {:?} for logits {:?}",
                t.dtype,
                t.dims,
                x.dims
            );
        }
        sh.input("t", &t)?;
        "ld_t(b0 + k)"
    } else {
        labels(&mut sh, &t, n, c)?;
        "select(0.0, 1.0, i32(k) == l)"
    };
    let (groups, head) = row_grid_sg(n, wg, ctx.caps, sg.is_some());
    let body = format!(
        "    let b0 = lbase(row);
{lse}    let lse = log_(s);
    let l = {lab};
    let g = select(f_nan(), ld_d(row), l >= 0);
    if (valid) {{
        for (var k = lid; k < {c}u; k = k + {wg}u) {{
            let p = exp_(ld_x(b0 + k) - shift - lse);
            st_y(b0 + k, (p - {target}) * g);
        }}
    }}
}}
",
        lse = lse_body(c, wg),
        lab = if dense { "0" } else { "lab(row)" }
    );
    ctx.push(sh.finish(&format!("{head}{body}"), groups));
    ctx.finish_out(&y)
}
