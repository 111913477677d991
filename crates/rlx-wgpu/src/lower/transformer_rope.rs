//! Rope: each head row of x rotates its first n_rot dims by the angles of the cos/sin row
//! it broadcasts to (the rest is copied), computed in f32 as the CPU does and rounded once
//! to the output's dtype. `val_fn` is shared with the rotated cache write.
use super::super::{LowerError, Lowered, NodeCtx};
use crate::shader::{grid_1d, per_word, Shader, WTensor};
use crate::unsupported;
use rlx_ir::ops::attention::rope_view;
use rlx_ir::{DType, Dim, RopeStyle};

/// The table row (in units of n_rot/2) of each head row of x, as a WGSL expression of the
/// head row `r`: x is seen as `[lead.., head_dim]` (rlx-ir's `rope_view`) and the tables'
/// lead dims broadcast against `lead` from the right.
fn table_row(
    x: &WTensor,
    cos: &WTensor,
    head_dim: usize,
    n_rot: usize,
) -> Result<String, LowerError> {
    let stat = |d: &[usize]| d.iter().map(|&v| Dim::Static(v)).collect::<Vec<_>>();
    let view = rope_view(&stat(&x.dims), &stat(&cos.dims), head_dim, n_rot)
        .map_err(LowerError::Unsupported)?;
    let lead: Vec<usize> = view[..view.len() - 1]
        .iter()
        .map(|d| d.as_static().unwrap_or(1))
        .collect();
    let Some((&last, cos_lead)) = cos.dims.split_last() else {
        unsupported!("cos must have rank >= 1");
    };
    if last != n_rot / 2 || cos_lead.len() > lead.len() {
        unsupported!(
            "cos {:?} does not fit x {:?} with n_rot {n_rot}",
            cos.dims,
            x.dims
        );
    }
    let off = lead.len() - cos_lead.len();
    let cst = rlx_ir::strides(cos_lead);
    let mut terms = Vec::new();
    let mut below = 1usize;
    for k in (0..lead.len()).rev() {
        let size = lead[k];
        if k >= off {
            let c = cos_lead[k - off];
            if c != 1 && c != size {
                unsupported!("cos {:?} does not broadcast to {lead:?}", cos.dims);
            }
            if c != 1 && cst[k - off] != 0 {
                terms.push(format!("((r / {below}u) % {size}u) * {}u", cst[k - off]));
            }
        }
        below *= size;
    }
    Ok(if terms.is_empty() {
        "0u".into()
    } else {
        terms.join(" + ")
    })
}

/// `fn val(i: u32) -> f32`: element i of Rope(x, cos, sin) in f32, before rounding.
pub(super) fn val_fn(
    sh: &mut Shader,
    x: &WTensor,
    cos: &WTensor,
    sin: &WTensor,
    (head_dim, n_rot, style): (usize, usize, RopeStyle),
) -> Lowered {
    if !x.dtype.is_float() || !cos.dtype.is_float() || !sin.dtype.is_float() {
        unsupported!("Rope runs on floats");
    }
    if sin.dims != cos.dims {
        unsupported!("sin {:?} differs from cos {:?}", sin.dims, cos.dims);
    }
    if head_dim == 0 || n_rot == 0 || n_rot % 2 == 1 || n_rot > head_dim {
        unsupported!("n_rot {n_rot} / head_dim {head_dim} are invalid");
    }
    let row = table_row(x, cos, head_dim, n_rot)?;
    sh.input("x", x)?;
    sh.input("rc", cos)?;
    sh.input("rs", sin)?;
    let half = n_rot / 2;
    let rot = match style {
        RopeStyle::Half => format!(
            "    if (j < {half}u) {{ return x * ld_rc(t + j) - ld_x(i + {half}u) * ld_rs(t + j); }}
    let p = j - {half}u;
    return x * ld_rc(t + p) + ld_x(i - {half}u) * ld_rs(t + p);"
        ),
        RopeStyle::Interleaved => "    let p = j / 2u;
    if ((j & 1u) == 0u) { return x * ld_rc(t + p) - ld_x(i + 1u) * ld_rs(t + p); }
    return x * ld_rc(t + p) + ld_x(i - 1u) * ld_rs(t + p);"
            .to_string(),
    };
    sh.text(&format!(
        "fn val(i: u32) -> f32 {{
    let r = i / {head_dim}u;
    let j = i % {head_dim}u;
    let x = ld_x(i);
    if (j >= {n_rot}u) {{ return x; }}
    let t = ({row}) * {half}u;
{rot}
}}"
    ));
    Ok(())
}

/// Rope over explicit tensors: x, cos, sin → out (shaped like x, any float dtype).
pub(super) fn rope_rows(
    ctx: &mut NodeCtx,
    [x, cos, sin, out]: [&WTensor; 4],
    geom: (usize, usize, RopeStyle),
) -> Lowered {
    if out.dims != x.dims || out.dtype != x.dtype {
        unsupported!("output {:?} differs from x {:?}", out.dims, x.dims);
    }
    let n = x.numel();
    if n == 0 {
        return Ok(());
    }
    if n > i32::MAX as usize {
        unsupported!("{n} elements are beyond the kernel's u32 indexing");
    }
    let mut sh = Shader::new(format!("rope {:?} x {:?} cos {:?}", geom, x.dims, cos.dims));
    val_fn(&mut sh, x, cos, sin, geom)?;
    sh.output("y", out)?;
    let k = per_word(out.dtype) as u64;
    let (groups, head) = grid_1d((n as u64).div_ceil(k), ctx.caps.max_groups_per_dim);
    let body = match out.dtype {
        DType::F16 | DType::BF16 => format!(
            "    var v1 = 0.0;\n    if (gi * 2u + 1u < {n}u) {{ v1 = val(gi * 2u + 1u); }}\n    st_y(gi, val(gi * 2u), v1);\n"
        ),
        DType::F32 => "    st_y(gi, val(gi));\n".to_string(),
        d => unsupported!("Rope into {d}"),
    };
    ctx.push(sh.finish(&format!("{head}{body}}}\n"), groups));
    Ok(())
}
