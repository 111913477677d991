//! Reductions: Reduce over any set of axes and ArgMax, plus the pieces every row kernel of
//! the norm and reduce groups shares (the one-workgroup-per-row grid, the workgroup tree
//! reduction, strided index expressions).
//!
//! A reduction is an (outer rows) × (reduced elements) walk: the kept axes give a row's base
//! offset and the reduced axes the offset of its k-th element, each a mixed-radix expression
//! with the sizes baked in, so any axes set (contiguous or strided) is one kernel. One
//! workgroup reduces one row (or one chunk of a long float row: chunks' partials are then
//! reduced again), every invocation folding a strided slice serially before the tree.
//! Floats accumulate in f32; integers in i32, which wraps exactly as the CPU's i64 does
//! once narrowed back to the dtype (sum, product, max, min); an integer mean carries a
//! 64-bit sum in two words so its truncated quotient is the CPU's.
use super::{Lowered, NodeCtx, PORTABLE};
use crate::device::Caps;
use crate::shader::{Shader, WTensor};
use crate::unsupported;
use rlx_ir::{DType, ReduceOp};
use std::fmt::Write;

/// Elements one invocation folds serially before the tree, in a chunk of a split row.
const PER_THREAD: usize = 16;

/// The WGSL offset of linear index `v` over `axes` (`(size, stride)`, outermost first):
/// size-1 axes dropped, neighbours that step as one axis merged, no modulo on the outermost.
pub(super) fn radix_expr(axes: &[(usize, usize)], v: &str) -> String {
    let mut m: Vec<(usize, usize)> = Vec::new();
    for &(size, stride) in axes.iter().filter(|a| a.0 != 1) {
        match m.last_mut() {
            Some(last) if last.1 == stride * size => *last = (last.0 * size, stride),
            _ => m.push((size, stride)),
        }
    }
    let mut terms = Vec::new();
    let mut below = 1usize;
    for (k, &(size, stride)) in m.iter().enumerate().rev() {
        let mut c = if below == 1 {
            v.to_string()
        } else {
            format!("({v} / {below}u)")
        };
        if k != 0 {
            c = format!("({c} % {size}u)");
        }
        terms.push(if stride == 1 {
            c
        } else {
            format!("{c} * {stride}u")
        });
        below *= size;
    }
    if terms.is_empty() {
        "0u".into()
    } else {
        terms.join(" + ")
    }
}

/// Invocations per workgroup for rows of `count` elements: a power of two in 32..=256.
pub(super) fn wg_for(count: usize) -> u32 {
    count.next_power_of_two().clamp(32, 256) as u32
}

/// The grid of `rows` workgroups (spilling into y) and the entry point's head, which binds
/// `row` (the workgroup's row, clamped so that every load stays in bounds), `valid` (false
/// for the grid's overshoot: such a group must store nothing) and `lid`.
pub(super) fn row_grid(rows: usize, wg: u32, caps: &Caps) -> ([u32; 3], String) {
    row_grid_sg(rows, wg, caps, false)
}

/// [`row_grid`], with (`subgroups`) the subgroup size in the private `sg_size` that
/// [`tree_sg`]'s combines read.
pub(super) fn row_grid_sg(
    rows: usize,
    wg: u32,
    caps: &Caps,
    subgroups: bool,
) -> ([u32; 3], String) {
    let x = (rows.max(1) as u64).min(caps.max_groups_per_dim as u64) as u32;
    let y = (rows.max(1) as u64).div_ceil(x as u64) as u32;
    let (decl, param, set) = if subgroups {
        (
            "var<private> sg_size: u32;\n",
            ", @builtin(subgroup_size) sgs_in: u32",
            "    sg_size = sgs_in;\n",
        )
    } else {
        ("", "", "")
    };
    let head = format!(
        "{decl}@compute @workgroup_size({wg})\nfn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32{param}) {{\n{set}    let row_raw = wid.y * {x}u + wid.x;\n    let valid = row_raw < {rows}u;\n    let row = min(row_raw, {last}u);\n",
        last = rows.max(1) - 1
    );
    ([x, y, 1], head)
}

/// [`tree`] for f32 where the adapter has subgroups (`sg_min`: its smallest subgroup size):
/// a sum (`add`) by `subgroupAdd`, any other combine by a butterfly of shuffles (which keeps
/// `f_max`'s NaN rule, unlike `subgroupMax`), then one value a subgroup through a small
/// workgroup array and one barrier. Subgroups are runs of consecutive `lid`; the head must
/// come from [`row_grid_sg`] with subgroups on.
pub(super) fn tree_sg(name: &str, wg: u32, sg_min: usize, comb: &str, add: bool) -> String {
    let sub = if add {
        "    let s = subgroupAdd(v);".to_string()
    } else {
        // A workgroup smaller than the subgroup has no lanes past `wg` to shuffle with.
        format!(
            "    var s = v;
    for (var o = 1u; o < min(sg_size, {wg}u); o = o << 1u) {{
        let a = s;
        let b = subgroupShuffleXor(s, o);
        s = {comb};
    }}"
        )
    };
    format!(
        "var<workgroup> sm_{name}: array<f32, {n}>;
fn wg_{name}(lid: u32, v: f32) -> f32 {{
{sub}
    if (lid % sg_size == 0u) {{ sm_{name}[lid / sg_size] = s; }}
    workgroupBarrier();
    var r = sm_{name}[0];
    for (var j = 1u; j < {wg}u / sg_size; j++) {{
        let a = r;
        let b = sm_{name}[j];
        r = {comb};
    }}
    workgroupBarrier();
    return r;
}}",
        n = (wg as usize / sg_min.min(wg as usize)).max(1)
    )
}

/// `fn wg_<name>(lid, v) -> ty`: the workgroup's combine of every invocation's `v` (by
/// `comb`, an expression of `a` and `b`), returned to all. Call it from uniform control flow.
pub(super) fn tree(name: &str, ty: &str, wg: u32, comb: &str) -> String {
    format!(
        "var<workgroup> sm_{name}: array<{ty}, {wg}>;
fn wg_{name}(lid: u32, v: {ty}) -> {ty} {{
    sm_{name}[lid] = v;
    workgroupBarrier();
    for (var s = {h}u; s > 0u; s = s >> 1u) {{
        if (lid < s) {{
            let a = sm_{name}[lid];
            let b = sm_{name}[lid + s];
            sm_{name}[lid] = {comb};
        }}
        workgroupBarrier();
    }}
    let r = sm_{name}[0];
    workgroupBarrier();
    return r;
}}",
        h = wg / 2
    )
}

/// 64-bit integer sums in two words (low, high) and their truncated quotient by a count.
const INT64: &str = "fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}
fn wide(v: i32) -> vec2<u32> { return vec2<u32>(u32(v), select(0u, 0xffffffffu, v < 0)); }
// s / d truncated toward zero (|s / d| fits i32 for a mean of i32 values); bitwise long
// division of the magnitude.
fn div64(s: vec2<u32>, d: u32) -> i32 {
    let neg = (s.y >> 31u) == 1u;
    var m = s;
    if (neg) { m = add64(vec2<u32>(~s.x, ~s.y), vec2<u32>(1u, 0u)); }
    var r = 0u;
    var q = 0u;
    for (var i = 0; i < 64; i = i + 1) {
        let bit = select(m.x >> u32(31 - i + 32), m.y >> u32(31 - i), i < 32) & 1u;
        let top = r >> 31u;
        r = (r << 1u) | bit;
        q = q << 1u;
        if (top == 1u || r >= d) { r = r - d; q = q | 1u; }
    }
    return select(i32(q), 0 - i32(q), neg);
}";

pub fn lower_reduce(ctx: &mut NodeCtx, op: ReduceOp, axes: &[i64]) -> Lowered {
    let x = ctx.ins[0].clone();
    let rank = x.dims.len();
    let axes =
        rlx_ir::ops::reduce::reduce_axes(axes, rank).map_err(super::LowerError::Unsupported)?;
    if x.dtype == DType::I64 {
        unsupported!("{PORTABLE} an i64 reduction needs 64-bit integer arithmetic");
    }
    let strides = rlx_ir::strides(&x.dims);
    let (mut kept, mut red) = (Vec::new(), Vec::new());
    for d in 0..rank {
        let a = (x.dims[d], strides[d]);
        if axes.contains(&d) {
            red.push(a);
        } else {
            kept.push(a);
        }
    }
    let rows: usize = kept.iter().map(|a| a.0).product();
    let count: usize = red.iter().map(|a| a.0).product();
    if count == 0 {
        unsupported!("a Reduce over an empty axis");
    }
    if rows != ctx.out.numel() {
        unsupported!(
            "Reduce of {:?} keeps {rows} rows but the output holds {}",
            x.dims,
            ctx.out.numel()
        );
    }
    let float = x.dtype.is_float();
    if float != ctx.out.dtype.is_float() {
        unsupported!("a Reduce from {} to {}", x.dtype, ctx.out.dtype);
    }
    let y = ctx.word_out();
    if !float && op == ReduceOp::Mean {
        let k = int_mean(&x, &y, rows, count, &kept, &red, ctx.caps)?;
        ctx.push(k);
        return ctx.finish_out(&y);
    }
    let ty = if float { "f32" } else { "i32" };
    let (comb, init) = match (op, float) {
        (ReduceOp::Sum | ReduceOp::Mean, true) => ("a + b", "0.0"),
        (ReduceOp::Prod, true) => ("a * b", "1.0"),
        (ReduceOp::Max, true) => ("f_max(a, b)", "-f_inf()"),
        (ReduceOp::Min, true) => ("f_min(a, b)", "f_inf()"),
        (ReduceOp::Sum | ReduceOp::Mean, false) => ("a + b", "0"),
        (ReduceOp::Prod, false) => ("a * b", "1"),
        (ReduceOp::Max, false) => ("max(a, b)", "-2147483647 - 1"),
        (ReduceOp::Min, false) => ("min(a, b)", "2147483647"),
    };
    // A long row is cut into chunks whose partials (one scratch row) are reduced again.
    let mut src = x.clone();
    let (mut base, mut off) = (radix_expr(&kept, "row"), radix_expr(&red, "k"));
    let mut n = count;
    loop {
        let wg = wg_for(n);
        let chunk = wg as usize * PER_THREAD;
        let splits = n.div_ceil(chunk);
        let last = splits == 1;
        let dst = if last {
            y.clone()
        } else {
            ctx.scratch(
                &[rows * splits],
                if float { DType::F32 } else { DType::I32 },
            )
        };
        let scale = if last && op == ReduceOp::Mean {
            format!(" * {:?}", 1.0f32 / count as f32)
        } else {
            String::new()
        };
        let mut sh = Shader::new(format!("reduce {op:?} {n} x{splits} -> {}", dst.dtype));
        sh.input("x", &src)?;
        sh.output("y", &dst)?;
        sh.text(&tree("r", ty, wg, comb));
        sh.text(&format!(
            "fn comb(a: {ty}, b: {ty}) -> {ty} {{ return {comb}; }}\nfn base(row: u32) -> u32 {{ return {base}; }}\nfn off(k: u32) -> u32 {{ return {off}; }}"
        ));
        let (groups, head) = row_grid(rows * splits, wg, ctx.caps);
        let body = format!(
            "    let line = row / {splits}u;
    let start = (row % {splits}u) * {chunk}u;
    let end = min(start + {chunk}u, {n}u);
    let b0 = base(line);
    var acc: {ty} = {init};
    for (var k = start + lid; k < end; k = k + {wg}u) {{
        acc = comb(acc, ld_x(b0 + off(k)));
    }}
    let r = wg_r(lid, acc);
    if (valid && lid == 0u) {{ st_y(row, r{scale}); }}
}}
"
        );
        ctx.push(sh.finish(&format!("{head}{body}"), groups));
        if last {
            break;
        }
        src = dst;
        base = format!("row * {splits}u");
        off = "k".into();
        n = splits;
    }
    ctx.finish_out(&y)
}

/// An integer mean: a 64-bit sum per invocation and through the tree, then the quotient.
fn int_mean(
    x: &WTensor,
    y: &WTensor,
    rows: usize,
    count: usize,
    kept: &[(usize, usize)],
    red: &[(usize, usize)],
    caps: &Caps,
) -> Result<crate::shader::Kernel, super::LowerError> {
    let wg = wg_for(count);
    let mut sh = Shader::new(format!("reduce int mean {count} -> {}", y.dtype));
    sh.input("x", x)?;
    sh.output("y", y)?;
    sh.text(INT64);
    sh.text(&tree("s", "vec2<u32>", wg, "add64(a, b)"));
    sh.text(&format!(
        "fn base(row: u32) -> u32 {{ return {}; }}\nfn off(k: u32) -> u32 {{ return {}; }}",
        radix_expr(kept, "row"),
        radix_expr(red, "k")
    ));
    let (groups, head) = row_grid(rows, wg, caps);
    let body = format!(
        "    let b0 = base(row);
    var acc = vec2<u32>(0u, 0u);
    for (var k = lid; k < {count}u; k = k + {wg}u) {{
        acc = add64(acc, wide(ld_x(b0 + off(k))));
    }}
    let s = wg_s(lid, acc);
    if (valid && lid == 0u) {{ st_y(row, div64(s, {count}u)); }}
}}
"
    );
    Ok(sh.finish(&format!("{head}{body}"), groups))
}

/// The (outer, len, inner) lines of `dims` along `axis`: line `l`'s element `i` sits at
/// `(l / inner) * len * inner + l % inner + i * inner`.
pub(super) fn lines(dims: &[usize], axis: i64) -> Result<(usize, usize, usize), super::LowerError> {
    let a = rlx_ir::normalize_axis(axis, dims.len()).map_err(super::LowerError::Unsupported)?;
    let outer = dims[..a].iter().product();
    let inner = dims[a + 1..].iter().product();
    Ok((outer, dims[a], inner))
}

/// WGSL text of `fn lbase(l) -> u32` (a line's first element) and the element stride.
pub(super) fn line_fns(len: usize, inner: usize) -> String {
    if inner == 1 {
        format!("fn lbase(l: u32) -> u32 {{ return l * {len}u; }}\nconst LS: u32 = 1u;")
    } else {
        format!(
            "fn lbase(l: u32) -> u32 {{ return (l / {inner}u) * {} + l % {inner}u; }}\nconst LS: u32 = {inner}u;",
            format_args!("{}u", len * inner)
        )
    }
}

/// ArgMax: the first index of the max along the axis, a NaN beating every number (the first
/// NaN wins), as the CPU's scan; written as I64 (low word and sign word).
pub fn lower_argmax(ctx: &mut NodeCtx, axis: i64) -> Lowered {
    let x = ctx.ins[0].clone();
    if x.dtype == DType::I64 {
        unsupported!("{PORTABLE} an i64 ArgMax compares 64-bit integers");
    }
    let (outer, len, inner) = lines(&x.dims, axis)?;
    if len == 0 {
        unsupported!("ArgMax over an empty axis");
    }
    let rows = outer * inner;
    let out = ctx.out.clone();
    if out.numel() != rows || out.dtype != DType::I64 {
        unsupported!(
            "ArgMax output {:?} {} for {rows} lines",
            out.dims,
            out.dtype
        );
    }
    let float = x.dtype.is_float();
    let ty = if float { "f32" } else { "i32" };
    let nan = if float { "is_nan" } else { "no_nan" };
    let wg = wg_for(len);
    let mut sh = Shader::new(format!("argmax {len} {}", x.dtype));
    sh.input("x", &x)?;
    sh.output("y", &out)?;
    sh.text(&line_fns(len, inner));
    // (value, index) pairs: b replaces a when it is a NaN and a is not, or greater; on equal
    // standing the lower index stays (a NaN pair stands equal with another NaN).
    sh.text(&format!(
        "fn no_nan(v: i32) -> bool {{ return false; }}
var<workgroup> sm_v: array<{ty}, {wg}>;
var<workgroup> sm_i: array<u32, {wg}>;
fn better(av: {ty}, ai: u32, bv: {ty}, bi: u32) -> bool {{
    let an = {nan}(av);
    let bn = {nan}(bv);
    if (an != bn) {{ return bn; }}
    if (!an && bv != av) {{ return bv > av; }}
    return bi < ai;
}}"
    ));
    let (groups, head) = row_grid(rows, wg, ctx.caps);
    let body = format!(
        "    let b0 = lbase(row);
    let first = min(lid, {l1}u);
    var bv = ld_x(b0 + first * LS);
    var bi = first;
    for (var k = lid + {wg}u; k < {len}u; k = k + {wg}u) {{
        let v = ld_x(b0 + k * LS);
        if (better(bv, bi, v, k)) {{ bv = v; bi = k; }}
    }}
    sm_v[lid] = bv;
    sm_i[lid] = bi;
    workgroupBarrier();
    for (var s = {h}u; s > 0u; s = s >> 1u) {{
        if (lid < s && better(sm_v[lid], sm_i[lid], sm_v[lid + s], sm_i[lid + s])) {{
            sm_v[lid] = sm_v[lid + s];
            sm_i[lid] = sm_i[lid + s];
        }}
        workgroupBarrier();
    }}
    if (valid && lid == 0u) {{ st_y(row, i32(sm_i[0])); }}
}}
",
        l1 = len - 1,
        h = wg / 2
    );
    ctx.push(sh.finish(&format!("{head}{body}"), groups));
    Ok(())
}

/// The text of a literal f32 (a `{:?}` float, always with a point or exponent).
pub(super) fn f32_lit(v: f32) -> String {
    let mut s = String::new();
    let _ = write!(s, "{v:?}");
    s
}
