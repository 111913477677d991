//! TopK: the I64 indices of the `k` best entries of every line (the values are a separate
//! GatherElements node of the IR), one workgroup per line.
//!
//! Every element becomes an unsigned sort key whose ascending order is the CPU's rank:
//! floats by their bits flipped into a total order (-0 folded onto +0, since the CPU's
//! `partial_cmp` finds them equal; every NaN onto one key above +inf), integers with the
//! sign bit flipped, i64 as a (high, low) word pair so the full 64-bit value is compared
//! (no arithmetic, only word compares). `largest` complements the key, so the sort is
//! always ascending by (key, index): the index breaks ties toward the lower index, as the
//! CPU's stable sort does, and NaN stays the largest either way.
//!
//! Lines up to [`BITONIC_MAX`] (half that for i64 keys, whose pairs take twice the room)
//! are padded to a power of two and bitonic-sorted in workgroup memory; longer lines with
//! a small k take k rounds of selection (each round the least pair above the last pick,
//! by a workgroup tree). Anything else answers `unsupported!`.
use super::reduce::{lines, row_grid};
use super::{Lowered, NodeCtx};
use crate::shader::Shader;
use crate::unsupported;
use rlx_ir::DType;

/// The longest line the bitonic sort takes with one-word keys: keys and indices of 2048
/// elements fill the 16 KiB of workgroup memory portable WGSL guarantees.
pub const BITONIC_MAX: usize = 2048;
/// The largest k the selection path takes (k passes over the line).
pub const SELECT_MAX_K: usize = 64;

pub fn lower_topk(ctx: &mut NodeCtx, k: usize, axis: i64, largest: bool) -> Lowered {
    let x = ctx.ins[0].clone();
    let (outer, len, inner) = lines(&x.dims, axis)?;
    let a = rlx_ir::normalize_axis(axis, x.dims.len()).map_err(super::LowerError::Unsupported)?;
    let mut od = x.dims.clone();
    od[a] = k;
    let out = ctx.out.clone();
    if out.dtype != DType::I64 || out.dims != od || k > len {
        unsupported!(
            "TopK k {k} of {:?} into {} {:?}",
            x.dims,
            out.dtype,
            out.dims
        );
    }
    let wide = x.dtype == DType::I64;
    let cap = if wide { BITONIC_MAX / 2 } else { BITONIC_MAX };
    let bitonic = len <= cap;
    if !bitonic && k > SELECT_MAX_K {
        unsupported!(
            "TopK of k {k} over lines of {len} (sorts lines up to {cap}, selects k up to {SELECT_MAX_K})"
        );
    }
    let mut sh = Shader::new(format!(
        "topk {len} / {inner} k {k} {} largest {largest}",
        x.dtype
    ));
    if wide {
        sh.words("xw", &x)?;
    } else {
        sh.input("x", &x)?;
    }
    sh.output("y", &out)?;
    sh.text(&key_fns(x.dtype, largest, len, inner, k));
    let rows = outer * inner;
    let (wg, body) = if bitonic {
        bitonic_body(len, k)
    } else {
        select_body(len, k)
    };
    if bitonic {
        let p = len.next_power_of_two().max(2);
        sh.text(&format!(
            "var<workgroup> sk: array<K, {p}>;\nvar<workgroup> si: array<u32, {p}>;"
        ));
    } else {
        sh.text(&format!(
            "var<workgroup> sk: array<K, {wg}>;\nvar<workgroup> si: array<u32, {wg}>;"
        ));
    }
    let (groups, head) = row_grid(rows, wg, ctx.caps);
    ctx.push(sh.finish(&format!("{head}{body}"), groups));
    Ok(())
}

/// The key type `K`, `key(row, i)` (the key of the line's element i), the pair order
/// `pless`, the line and output offsets.
fn key_fns(dt: DType, largest: bool, len: usize, inner: usize, k: usize) -> String {
    let flip = if largest { "~" } else { "" };
    let (ty, kmax, less, eq, key) = if dt == DType::I64 {
        (
            "vec2<u32>",
            "vec2<u32>(0xffffffffu, 0xffffffffu)",
            "a.x < b.x || (a.x == b.x && a.y < b.y)",
            "all(a == b)",
            // high word (signed: its sign bit flipped), then the low word.
            format!(
                "let e = xoff(l, i);\n    return {flip}vec2<u32>(rd_xw(2u * e + 1u) ^ 0x80000000u, rd_xw(2u * e));"
            ),
        )
    } else if dt.is_float() {
        (
            "u32",
            "0xffffffffu",
            "a < b",
            "a == b",
            format!(
                "var b = bitcast<u32>(ld_x(xoff(l, i)));
    if ((b & 0x7fffffffu) > 0x7f800000u) {{ b = 0xffffffffu; }}
    else if (b == 0x80000000u) {{ b = 0x80000000u; }}
    else if ((b >> 31u) == 1u) {{ b = ~b; }}
    else {{ b = b | 0x80000000u; }}
    return {flip}b;"
            ),
        )
    } else {
        (
            "u32",
            "0xffffffffu",
            "a < b",
            "a == b",
            format!("return {flip}(bitcast<u32>(ld_x(xoff(l, i))) ^ 0x80000000u);"),
        )
    };
    format!(
        "alias K = {ty};
const KMAX: K = {kmax};
fn kless(a: K, b: K) -> bool {{ return {less}; }}
fn keq(a: K, b: K) -> bool {{ return {eq}; }}
// (key, index) pairs: the index breaks ties, so equal values keep index order.
fn pless(ak: K, ai: u32, bk: K, bi: u32) -> bool {{
    return kless(ak, bk) || (keq(ak, bk) && ai < bi);
}}
fn xoff(l: u32, i: u32) -> u32 {{ return (l / {inner}u) * {xl}u + l % {inner}u + i * {inner}u; }}
fn yoff(l: u32, j: u32) -> u32 {{ return (l / {inner}u) * {yl}u + l % {inner}u + j * {inner}u; }}
fn key(l: u32, i: u32) -> K {{
    {key}
}}",
        xl = len * inner,
        yl = k * inner,
    )
}

/// Bitonic sort of the padded line (pads: key KMAX and an index past the line, so they sort
/// after every element), then the first k indices stored.
fn bitonic_body(len: usize, k: usize) -> (u32, String) {
    let p = len.next_power_of_two().max(2);
    let wg = (p / 2).min(256) as u32;
    let half = p / 2;
    let body = format!(
        "    for (var e = lid; e < {p}u; e = e + {wg}u) {{
        if (e < {len}u) {{ sk[e] = key(row, e); }} else {{ sk[e] = KMAX; }}
        si[e] = e;
    }}
    workgroupBarrier();
    for (var size = 2u; size <= {p}u; size = size << 1u) {{
        for (var stride = size >> 1u; stride > 0u; stride = stride >> 1u) {{
            for (var t = lid; t < {half}u; t = t + {wg}u) {{
                let i = (t / stride) * stride * 2u + t % stride;
                let j = i + stride;
                let up = (i & size) == 0u;
                let ki = sk[i];
                let kj = sk[j];
                let ii = si[i];
                let ij = si[j];
                // ascending blocks put the lesser pair first, descending ones last.
                if (pless(kj, ij, ki, ii) == up) {{
                    sk[i] = kj; sk[j] = ki; si[i] = ij; si[j] = ii;
                }}
            }}
            workgroupBarrier();
        }}
    }}
    if (valid) {{
        for (var j = lid; j < {k}u; j = j + {wg}u) {{ st_y(yoff(row, j), i32(si[j])); }}
    }}
}}
"
    );
    (wg, body)
}

/// k rounds of selection: each the least (key, index) pair above the previous pick, every
/// invocation scanning a strided slice before the tree.
fn select_body(len: usize, k: usize) -> (u32, String) {
    let wg = 256u32;
    let body = format!(
        "    var pk: K = KMAX;
    var pi = 0xffffffffu;
    var first = true;
    for (var r = 0u; r < {k}u; r = r + 1u) {{
        var bk: K = KMAX;
        var bi = 0xffffffffu;
        for (var i = lid; i < {len}u; i = i + {wg}u) {{
            let v = key(row, i);
            if ((first || pless(pk, pi, v, i)) && pless(v, i, bk, bi)) {{ bk = v; bi = i; }}
        }}
        sk[lid] = bk;
        si[lid] = bi;
        workgroupBarrier();
        for (var s = {h}u; s > 0u; s = s >> 1u) {{
            if (lid < s && pless(sk[lid + s], si[lid + s], sk[lid], si[lid])) {{
                sk[lid] = sk[lid + s];
                si[lid] = si[lid + s];
            }}
            workgroupBarrier();
        }}
        pk = sk[0];
        pi = si[0];
        first = false;
        if (valid && lid == 0u) {{ st_y(yoff(row, r), i32(pi)); }}
        workgroupBarrier();
    }}
}}
",
        h = wg / 2
    );
    (wg, body)
}
