//! The index group: GatherElements, GatherND and OneHot are [`mover`] kernels (each output
//! element picks its source by index); Range computes its values; ScatterElements and
//! ScatterND copy the data and then combine the updates in, in the CPU's order. An index
//! out of range (after a negative one counts from the end) reads zeros / is skipped: the
//! CPU reports it as an error, a kernel cannot.
//!
//! Scatters stay deterministic without atomics: updates that may land on one position are
//! applied by one invocation, in row-major order of the updates. ScatterElements runs one
//! invocation per line of the indices along the axis (updates of different lines never
//! meet); ScatterND one per element of the slice, looping over the index rows. Values are
//! combined in the output's compute class (f32 for every float, i32, or i64 as word pairs).
use super::shape::{coords, index_reader, mover, reader, shader};
use super::{LowerError, Lowered, NodeCtx};
use crate::shader::{class, grid_1d, Shader, WTensor};
use crate::unsupported;
use rlx_ir::{DType, ScatterReduction};
use std::fmt::Write;

fn axis(axis: i64, rank: usize) -> Result<usize, LowerError> {
    rlx_ir::normalize_axis(axis, rank).map_err(LowerError::Unsupported)
}

fn same_width(x: &WTensor, out: &WTensor) -> Result<(), LowerError> {
    if x.dtype.size_bytes() != out.dtype.size_bytes() {
        unsupported!(
            "output {} differs from data {} in width",
            out.dtype,
            x.dtype
        );
    }
    Ok(())
}

/// `let v = ix_i(j);` normalised on an axis of `n` into `p<name>`, returning zeros when
/// it is out of range.
fn norm_index(var: &str, j: &str, n: usize) -> String {
    format!(
        "    var {var} = ix_i({j});\n    if ({var} < 0) {{ {var} += {n}; }}\n    if ({var} < 0 || {var} >= {n}) {{ return vec2<u32>(0u, 0u); }}\n"
    )
}

pub fn gather_elements(ctx: &mut NodeCtx, ax: i64) -> Lowered {
    let (data, idx, out) = (ctx.ins[0].clone(), ctx.ins[1].clone(), ctx.out.clone());
    same_width(&data, &out)?;
    let r = data.dims.len();
    let a = axis(ax, r)?;
    if idx.dims.len() != r || idx.dims != out.dims {
        unsupported!(
            "gather_elements of {:?} by {:?} into {:?}",
            data.dims,
            idx.dims,
            out.dims
        );
    }
    let ds = rlx_ir::strides(&data.dims);
    let mut sh = shader(format!(
        "gather_elements {:?} axis {a} {}",
        data.dims, data.dtype
    ));
    reader(&mut sh, "x", &data)?;
    index_reader(&mut sh, "i", &idx)?;
    let mut f = coords(&idx.dims, "i", "c");
    f.push_str(&norm_index("p", "i", data.dims[a]));
    let terms: Vec<String> = (0..r)
        .map(|d| {
            if d == a {
                format!("u32(p) * {}u", ds[d])
            } else {
                format!("c{d} * {}u", ds[d])
            }
        })
        .collect();
    let _ = writeln!(f, "    return rx_x({});", terms.join(" + "));
    sh.text(&format!("fn elem(i: u32) -> vec2<u32> {{\n{f}}}"));
    let k = mover(sh, &out, ctx.caps)?;
    ctx.push(k);
    Ok(())
}

/// Output element (batch, row, s) copies element s of the slice its index row names.
pub fn gather_nd(ctx: &mut NodeCtx, b: usize) -> Lowered {
    let (data, idx, out) = (ctx.ins[0].clone(), ctx.ins[1].clone(), ctx.out.clone());
    same_width(&data, &out)?;
    let Some(&k) = idx.dims.last() else {
        unsupported!("gather_nd indices of rank 0");
    };
    if k == 0 || b + k > data.dims.len() {
        unsupported!(
            "gather_nd rows of {k} into {:?} (batch dims {b})",
            data.dims
        );
    }
    let batches: usize = data.dims[..b].iter().product();
    let per_batch: usize = data.dims[b..].iter().product();
    let slice: usize = data.dims[b + k..].iter().product();
    let rows = idx.numel() / k / batches.max(1);
    if batches * rows * slice != out.numel() {
        unsupported!(
            "gather_nd of {:?} by {:?} into {:?}",
            data.dims,
            idx.dims,
            out.dims
        );
    }
    let st = rlx_ir::strides(&data.dims[b..]);
    let mut sh = shader(format!(
        "gather_nd {:?} batch {b} k {k} {}",
        data.dims, data.dtype
    ));
    reader(&mut sh, "x", &data)?;
    index_reader(&mut sh, "i", &idx)?;
    let mut f = format!(
        "    let s = i % {slice}u;\n    let row = i / {slice}u;\n    let bi = row / {rows}u;\n"
    );
    let mut terms = vec![format!("bi * {per_batch}u"), "s".into()];
    for t in 0..k {
        f.push_str(&norm_index(
            &format!("p{t}"),
            &format!("row * {k}u + {t}u"),
            data.dims[b + t],
        ));
        terms.push(format!("u32(p{t}) * {}u", st[t]));
    }
    let _ = writeln!(f, "    return rx_x({});", terms.join(" + "));
    sh.text(&format!("fn elem(i: u32) -> vec2<u32> {{\n{f}}}"));
    let kn = mover(sh, &out, ctx.caps)?;
    ctx.push(kn);
    Ok(())
}

/// `on` where the index (negative counts from the end) equals the position on the depth
/// axis, else `off` (so an index out of range is all `off`).
pub fn one_hot(ctx: &mut NodeCtx, ax: i64, depth: usize) -> Lowered {
    let (idx, vals, out) = (ctx.ins[0].clone(), ctx.ins[1].clone(), ctx.out.clone());
    same_width(&vals, &out)?;
    let a = axis(ax, idx.dims.len() + 1)?;
    let inner: usize = idx.dims[a..].iter().product();
    if idx.numel() * depth != out.numel() || vals.numel() < 2 {
        unsupported!(
            "one_hot of {:?} depth {depth} into {:?}",
            idx.dims,
            out.dims
        );
    }
    let mut sh = shader(format!("one_hot depth {depth} axis {a} {}", out.dtype));
    reader(&mut sh, "v", &vals)?;
    index_reader(&mut sh, "i", &idx)?;
    sh.text(&format!(
        "fn elem(i: u32) -> vec2<u32> {{\n    let c = i % {inner}u;\n    let d = i32((i / {inner}u) % {depth}u);\n    let r = i / {};\n    var p = ix_i(r * {inner}u + c);\n    if (p < 0) {{ p += {depth}; }}\n    return select(rx_v(0u), rx_v(1u), p == d);\n}}",
        inner * depth
    ));
    let k = mover(sh, &out, ctx.caps)?;
    ctx.push(k);
    Ok(())
}

/// `start + i·delta` (floats in f32, integers wrapping in their width; i64 as word pairs).
/// The CPU also checks that the values give the graph's length; a kernel cannot report.
pub fn range(ctx: &mut NodeCtx) -> Lowered {
    let out = ctx.out.clone();
    let (s, d) = (ctx.ins[0].clone(), ctx.ins[2].clone());
    if s.dtype != out.dtype || d.dtype != out.dtype {
        unsupported!("range of {} / {} into {}", s.dtype, d.dtype, out.dtype);
    }
    let mut sh = shader(format!("range {}", out.dtype));
    let e = match out.dtype {
        DType::F32 | DType::F16 | DType::BF16 => {
            sh.input("s", &s)?;
            sh.input("d", &d)?;
            let v = "ld_s(0u) + f32(i) * ld_d(0u)";
            match out.dtype {
                DType::F32 => format!("vec2<u32>(bitcast<u32>({v}), 0u)"),
                DType::F16 => format!("vec2<u32>(f16_bits({v}), 0u)"),
                _ => format!("vec2<u32>(bf16_bits({v}), 0u)"),
            }
        }
        DType::I32 | DType::U8 => {
            reader(&mut sh, "s", &s)?;
            reader(&mut sh, "d", &d)?;
            "vec2<u32>(rx_s(0u).x + i * rx_d(0u).x, 0u)".into()
        }
        DType::I64 => {
            reader(&mut sh, "s", &s)?;
            reader(&mut sh, "d", &d)?;
            "i64_add(rx_s(0u), i64_mul(vec2<u32>(i, 0u), rx_d(0u)))".into()
        }
        t => unsupported!("range of {t}"),
    };
    sh.text(&format!(
        "fn elem(i: u32) -> vec2<u32> {{\n    return {e};\n}}"
    ));
    let k = mover(sh, &out, ctx.caps)?;
    ctx.push(k);
    Ok(())
}

/// The combine of reduction `red` in class `c` ("f32", "i32" or "i64") as WGSL text of `a`
/// (current) and `u` (the update).
fn combine(red: ScatterReduction, c: &str) -> String {
    use ScatterReduction as R;
    match (red, c) {
        (R::None, _) => "u".into(),
        (R::Add, "i64") => "i64_add(a, u)".into(),
        (R::Mul, "i64") => "i64_mul(a, u)".into(),
        (R::Max, "i64") => "i64_max(a, u)".into(),
        (R::Min, "i64") => "i64_min(a, u)".into(),
        (R::Add, _) => "a + u".into(),
        (R::Mul, _) => "a * u".into(),
        (R::Max, "f32") => "f_max(a, u)".into(),
        (R::Min, "f32") => "f_min(a, u)".into(),
        (R::Max, _) => "max(a, u)".into(),
        (R::Min, _) => "min(a, u)".into(),
    }
}

/// Shared by both scatters: `y` (the word output, already holding the data) gets
/// `upd(j)` combined at element `o` by `fn apply(o: u32, j: u32)`.
fn scatter_apply(
    sh: &mut Shader,
    y: &WTensor,
    upd: &WTensor,
    red: ScatterReduction,
) -> Result<(), LowerError> {
    let c = if y.dtype == DType::I64 {
        "i64"
    } else {
        class(y.dtype)
    };
    sh.words("y", y)?;
    let comb = combine(red, c);
    let text = match c {
        "i64" => {
            reader(sh, "u", upd)?;
            format!("fn apply(o: u32, j: u32) {{\n    let a = vec2<u32>(rd_y(2u * o), rd_y(2u * o + 1u));\n    let u = rx_u(j);\n    let v = {comb};\n    wr_y(2u * o, v.x);\n    wr_y(2u * o + 1u, v.y);\n}}")
        }
        _ => {
            sh.input("u", upd)?;
            format!("fn apply(o: u32, j: u32) {{\n    let a = bitcast<{c}>(rd_y(o));\n    let u = ld_u(j);\n    wr_y(o, bitcast<u32>({comb}));\n}}")
        }
    };
    sh.text(&text);
    Ok(())
}

/// The output's word tensor holding a copy of the data (converted to f32 / i32 for the
/// sub-word dtypes).
fn start_scatter(ctx: &mut NodeCtx) -> Result<WTensor, LowerError> {
    let (data, out) = (ctx.ins[0].clone(), ctx.out.clone());
    if data.dtype != out.dtype || ctx.ins[2].dtype != out.dtype {
        unsupported!(
            "a scatter of {} updates into {} data gives {}",
            ctx.ins[2].dtype,
            data.dtype,
            out.dtype
        );
    }
    if data.dims != out.dims {
        unsupported!("a scatter of {:?} into {:?}", data.dims, out.dims);
    }
    let y = ctx.word_out();
    if y.dtype == data.dtype {
        if y.slab != data.slab || y.off != data.off {
            super::shape::copy_view(ctx, &data, &super::shape::View::contiguous(&data.dims), &y)?;
        }
    } else {
        let k = super::elementwise::convert(&data, &y, ctx.caps)?;
        ctx.push(k);
    }
    Ok(y)
}

/// One invocation per line of the indices along the axis, its updates in order.
pub fn scatter_elements(ctx: &mut NodeCtx, ax: i64, red: ScatterReduction) -> Lowered {
    let (idx, upd) = (ctx.ins[1].clone(), ctx.ins[2].clone());
    let dims = ctx.ins[0].dims.clone();
    let r = dims.len();
    let a = axis(ax, r)?;
    if idx.dims.len() != r
        || idx.dims != upd.dims
        || (0..r).any(|d| idx.dims[d] > dims[d] && d != a)
    {
        unsupported!(
            "scatter_elements of {:?} by {:?} into {dims:?}",
            upd.dims,
            idx.dims
        );
    }
    if idx.numel() == 0 {
        return start_scatter(ctx).and_then(|y| ctx.finish_out(&y));
    }
    let y = start_scatter(ctx)?;
    let m = idx.dims[a];
    let inner: usize = idx.dims[a + 1..].iter().product();
    let lines = idx.numel() / m;
    let ds = rlx_ir::strides(&dims);
    let mut sh = shader(format!(
        "scatter_elements {dims:?} axis {a} {red:?} {}",
        y.dtype
    ));
    index_reader(&mut sh, "i", &idx)?;
    scatter_apply(&mut sh, &y, &upd, red)?;
    let (groups, head) = grid_1d(lines as u64, ctx.caps.max_groups_per_dim);
    let mut body = format!(
        "    let l = gi;\n    let rr = l % {inner}u;\n    let oo = l / {inner}u;\n    for (var t = 0u; t < {m}u; t++) {{\n        let j = (oo * {m}u + t) * {inner}u + rr;\n"
    );
    for line in coords(&idx.dims, "j", "c").lines() {
        let _ = writeln!(body, "    {line}");
    }
    let n = dims[a];
    let _ = writeln!(
        body,
        "        var p = ix_i(j);\n        if (p < 0) {{ p += {n}; }}\n        if (p < 0 || p >= {n}) {{ continue; }}"
    );
    let terms: Vec<String> = (0..r)
        .map(|d| {
            if d == a {
                format!("u32(p) * {}u", ds[d])
            } else {
                format!("c{d} * {}u", ds[d])
            }
        })
        .collect();
    let _ = writeln!(body, "        apply({}, j);\n    }}", terms.join(" + "));
    ctx.push(sh.finish(&format!("{head}{body}}}\n"), groups));
    ctx.finish_out(&y)
}

/// One invocation per element of the slice, looping over the index rows in order.
pub fn scatter_nd(ctx: &mut NodeCtx, red: ScatterReduction) -> Lowered {
    let (idx, upd) = (ctx.ins[1].clone(), ctx.ins[2].clone());
    let dims = ctx.ins[0].dims.clone();
    let Some(&k) = idx.dims.last() else {
        unsupported!("scatter_nd indices of rank 0");
    };
    if k == 0 || k > dims.len() {
        unsupported!("scatter_nd rows of {k} into {dims:?}");
    }
    let rows = idx.numel() / k;
    let slice: usize = dims[k..].iter().product();
    if rows * slice != upd.numel() {
        unsupported!(
            "scatter_nd of {:?} by {:?} into {dims:?}",
            upd.dims,
            idx.dims
        );
    }
    let y = start_scatter(ctx)?;
    if rows == 0 || slice == 0 {
        return ctx.finish_out(&y);
    }
    let st = rlx_ir::strides(&dims);
    let mut sh = shader(format!("scatter_nd {dims:?} k {k} {red:?} {}", y.dtype));
    index_reader(&mut sh, "i", &idx)?;
    scatter_apply(&mut sh, &y, &upd, red)?;
    let (groups, head) = grid_1d(slice as u64, ctx.caps.max_groups_per_dim);
    let mut body = format!("    for (var j = 0u; j < {rows}u; j++) {{\n        var off = gi;\n        var ok = true;\n");
    for t in 0..k {
        let n = dims[t];
        let _ = writeln!(
            body,
            "        var p{t} = ix_i(j * {k}u + {t}u);\n        if (p{t} < 0) {{ p{t} += {n}; }}\n        ok = ok && p{t} >= 0 && p{t} < {n};\n        off += u32(p{t}) * {}u;",
            st[t]
        );
    }
    let _ = writeln!(
        body,
        "        if (ok) {{ apply(off, j * {slice}u + gi); }}\n    }}"
    );
    ctx.push(sh.finish(&format!("{head}{body}}}\n"), groups));
    ctx.finish_out(&y)
}
