//! Norms: LayerNorm / RmsNorm over the trailing dims `axis..`, and the fused norms of
//! `x + residual (+ bias)` over the last dim. The normalised dims are contiguous, so each
//! row is one workgroup: the mean in one tree pass, the variance as Σ (h − mean)² in a
//! second (two passes keep an offset row exact where Σh² − n·mean² would cancel), then the
//! row is written as `(h − mean) · rstd · gamma (+ beta)`, all in f32 as the CPU computes
//! its class (its statistics in f64 rounded to f32). `h` is recomputed from the inputs on
//! each pass: rows run to tens of thousands of elements, past workgroup memory. Where the
//! adapter has subgroups the sums go through `subgroupAdd` and one barrier (`tree_sg`).
use super::linalg::subgroup_min;
use super::reduce::{f32_lit, row_grid_sg, tree, tree_sg, wg_for};
use super::{Lowered, NodeCtx};
use crate::shader::{Shader, WTensor};
use crate::unsupported;

/// The pieces of one norm: x, an optional residual and bias summed into it, gamma, beta.
struct Parts {
    x: WTensor,
    residual: Option<WTensor>,
    bias: Option<WTensor>,
    gamma: WTensor,
    beta: Option<WTensor>,
    len: usize,
}

pub fn lower_axis_norm(ctx: &mut NodeCtx, rms: bool, axis: i64, eps: f32) -> Lowered {
    let x = ctx.ins[0].clone();
    let a = rlx_ir::normalize_axis(axis, x.dims.len()).map_err(super::LowerError::Unsupported)?;
    let len = x.dims[a..].iter().product();
    if !(2..=3).contains(&ctx.ins.len()) {
        unsupported!("a norm of {} inputs", ctx.ins.len());
    }
    let p = Parts {
        x,
        residual: None,
        bias: None,
        gamma: ctx.ins[1].clone(),
        beta: ctx.ins.get(2).cloned(),
        len,
    };
    norm(ctx, rms, eps, p)
}

pub fn lower_residual_norm(ctx: &mut NodeCtx, rms: bool, has_bias: bool, eps: f32) -> Lowered {
    let want = if has_bias { 4 } else { 3 };
    if ctx.ins.len() != want && ctx.ins.len() != want + 1 {
        unsupported!("a residual norm of {} inputs", ctx.ins.len());
    }
    let x = ctx.ins[0].clone();
    let Some(&len) = x.dims.last() else {
        unsupported!("a residual norm of a scalar");
    };
    let r = ctx.ins[1].clone();
    if r.numel() != x.numel() {
        unsupported!("residual {:?} for x {:?}", r.dims, x.dims);
    }
    let g = if has_bias { 3 } else { 2 };
    let p = Parts {
        x,
        residual: Some(r),
        bias: has_bias.then(|| ctx.ins[2].clone()),
        gamma: ctx.ins[g].clone(),
        beta: ctx.ins.get(g + 1).cloned(),
        len,
    };
    norm(ctx, rms, eps, p)
}

fn norm(ctx: &mut NodeCtx, rms: bool, eps: f32, p: Parts) -> Lowered {
    let len = p.len;
    let all = [
        Some(&p.x),
        p.residual.as_ref(),
        p.bias.as_ref(),
        Some(&p.gamma),
        p.beta.as_ref(),
    ];
    if all.iter().flatten().any(|t| !t.dtype.is_float()) || !ctx.out.dtype.is_float() {
        unsupported!("a norm of non-float tensors");
    }
    for (what, t) in [
        ("gamma", Some(&p.gamma)),
        ("beta", p.beta.as_ref()),
        ("bias", p.bias.as_ref()),
    ] {
        if let Some(t) = t {
            if t.numel() != len {
                unsupported!(
                    "{what} holds {} values, the normalised dims hold {len}",
                    t.numel()
                );
            }
        }
    }
    if len == 0 || ctx.out.numel() != p.x.numel() {
        unsupported!("a norm of rows of {len} into {:?}", ctx.out.dims);
    }
    let rows = p.x.numel() / len;
    let y = ctx.word_out();
    let wg = wg_for(len);
    let mut sh = Shader::new(format!("norm rms {rms} {len} res {}", p.residual.is_some()));
    sh.input("x", &p.x)?;
    sh.input("g", &p.gamma)?;
    let mut h = "ld_x(i)".to_string();
    if let Some(r) = &p.residual {
        sh.input("r", r)?;
        h = format!("({h} + ld_r(i))");
    }
    if let Some(b) = &p.bias {
        sh.input("b", b)?;
        h = format!("({h} + ld_b(j))");
    }
    let shift = if let Some(b) = &p.beta {
        sh.input("be", b)?;
        " + ld_be(k)"
    } else {
        ""
    };
    sh.output("y", &y)?;
    // h(i, j): element j of the row at flat index i (x + residual rounded as the CPU adds).
    sh.text(&format!("fn h(i: u32, j: u32) -> f32 {{ return {h}; }}"));
    // The row sums through subgroups where the adapter has them.
    let sg = subgroup_min(ctx.caps);
    match sg {
        Some(m) => {
            sh.enable_subgroups();
            sh.text(&tree_sg("sum", wg, m, "a + b", true));
        }
        None => sh.text(&tree("sum", "f32", wg, "a + b")),
    }
    let inv_n = f32_lit(1.0 / len as f32);
    let mean = if rms {
        "    let mean = 0.0;\n".to_string()
    } else {
        format!(
            "    var acc = 0.0;
    for (var k = lid; k < {len}u; k = k + {wg}u) {{ acc = acc + h(b0 + k, k); }}
    let mean = wg_sum(lid, acc) * {inv_n};
"
        )
    };
    let (groups, head) = row_grid_sg(rows, wg, ctx.caps, sg.is_some());
    let body = format!(
        "    let b0 = row * {len}u;
{mean}    var acc2 = 0.0;
    for (var k = lid; k < {len}u; k = k + {wg}u) {{ let d = h(b0 + k, k) - mean; acc2 = acc2 + d * d; }}
    let var_ = wg_sum(lid, acc2) * {inv_n};
    let rstd = 1.0 / sqrt(var_ + {eps});
    if (valid) {{
        for (var k = lid; k < {len}u; k = k + {wg}u) {{
            st_y(b0 + k, (h(b0 + k, k) - mean) * rstd * ld_g(k){shift});
        }}
    }}
}}
",
        eps = f32_lit(eps)
    );
    ctx.push(sh.finish(&format!("{head}{body}"), groups));
    ctx.finish_out(&y)
}
