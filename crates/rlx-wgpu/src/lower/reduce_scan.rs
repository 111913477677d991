//! CumSum: one workgroup per line, the line walked in blocks of the workgroup's size, each
//! block an inclusive Hillis–Steele scan in workgroup memory plus the running carry of the
//! blocks before it. Exclusive sums scan the line shifted by one, reverse sums walk it from
//! the end. Floats sum in f32; integers in i32, which wraps as the CPU's i64 does once
//! narrowed to the dtype (i64 itself needs 64-bit arithmetic).
use super::reduce::{line_fns, lines, row_grid, wg_for};
use super::{Lowered, NodeCtx, PORTABLE};
use crate::shader::Shader;
use crate::unsupported;
use rlx_ir::DType;

pub fn lower_cumsum(ctx: &mut NodeCtx, axis: i64, exclusive: bool, reverse: bool) -> Lowered {
    let x = ctx.ins[0].clone();
    if x.dtype == DType::I64 {
        unsupported!("{PORTABLE} an i64 CumSum needs 64-bit integer arithmetic");
    }
    if x.dims != ctx.out.dims || x.dtype.is_float() != ctx.out.dtype.is_float() {
        unsupported!("CumSum of {} {:?} into {}", x.dtype, x.dims, ctx.out.dtype);
    }
    let (outer, len, inner) = lines(&x.dims, axis)?;
    if len == 0 {
        return Ok(());
    }
    let (ty, zero) = if x.dtype.is_float() {
        ("f32", "0.0")
    } else {
        ("i32", "0")
    };
    let y = ctx.word_out();
    let wg = wg_for(len);
    let blocks = len.div_ceil(wg as usize);
    let mut sh = Shader::new(format!(
        "cumsum {len} / {inner} ex {exclusive} rev {reverse}"
    ));
    sh.input("x", &x)?;
    sh.output("y", &y)?;
    sh.text(&line_fns(len, inner));
    // Step s of the walk visits element at(s); an exclusive sum's step s adds step s - 1's.
    let at = if reverse {
        format!("fn at(s: u32) -> u32 {{ return {}u - s; }}", len - 1)
    } else {
        "fn at(s: u32) -> u32 { return s; }".to_string()
    };
    let val = if exclusive {
        format!(
            "fn val(b0: u32, s: u32) -> {ty} {{ if (s == 0u || s >= {len}u) {{ return {zero}; }} return ld_x(b0 + at(s - 1u) * LS); }}"
        )
    } else {
        format!(
            "fn val(b0: u32, s: u32) -> {ty} {{ if (s >= {len}u) {{ return {zero}; }} return ld_x(b0 + at(s) * LS); }}"
        )
    };
    sh.text(&format!(
        "{at}\n{val}\nvar<workgroup> sc: array<{ty}, {wg}>;"
    ));
    let (groups, head) = row_grid(outer * inner, wg, ctx.caps);
    let body = format!(
        "    let b0 = lbase(row);
    var carry: {ty} = {zero};
    for (var blk = 0u; blk < {blocks}u; blk = blk + 1u) {{
        let s = blk * {wg}u + lid;
        sc[lid] = val(b0, s);
        workgroupBarrier();
        for (var o = 1u; o < {wg}u; o = o << 1u) {{
            var add: {ty} = {zero};
            if (lid >= o) {{ add = sc[lid - o]; }}
            workgroupBarrier();
            sc[lid] = sc[lid] + add;
            workgroupBarrier();
        }}
        let inc = sc[lid];
        let total = sc[{last}u];
        if (valid && s < {len}u) {{ st_y(b0 + at(s) * LS, carry + inc); }}
        carry = carry + total;
        workgroupBarrier();
    }}
}}
",
        last = wg - 1
    );
    ctx.push(sh.finish(&format!("{head}{body}"), groups));
    ctx.finish_out(&y)
}
