//! Vision ops (NCHW): pooling, its max gradient and nearest 2× upsampling here; the
//! convolutions and their gradients (implicit-GEMM kernels) in `vision_conv.rs`.
//!
//! Semantics follow the CPU thunks (`rlx-cpu/src/ops/pool.rs`): windows are clipped to the
//! plane (padding never wins a max and is never read), the average divides by the full
//! kernel area (`count_include_pad`), the max takes the first maximum in window scan order
//! and a NaN beats any number. Values are computed in f32 and stored through the accessors.
use super::{Lowered, NodeCtx};
use crate::shader::{grid_1d, Shader, WTensor};
use crate::unsupported;
use rlx_ir::{DType, PoolKind, PoolSpec};

#[path = "vision_conv.rs"]
mod conv;
pub use conv::{conv, conv2d_backward_input, conv2d_backward_weight};

/// Index math is 32-bit: every tensor must stay below 2^31 elements.
pub(super) const MAX_ELEMS: usize = 1 << 31;

pub(super) fn check_sizes(ts: &[&WTensor]) -> Lowered {
    for t in ts {
        if t.numel() >= MAX_ELEMS {
            unsupported!(
                "tensor {:?} has {} elements; the vision kernels index with 32 bits",
                t.dims,
                t.numel()
            );
        }
    }
    Ok(())
}

/// Pool geometry over x `[N, C, H, W]`: (planes, h, w, ho, wo), checked as the CPU does.
fn pool_geom(spec: &PoolSpec, x: &WTensor) -> Result<[usize; 5], super::LowerError> {
    if x.dims.len() != 4 {
        unsupported!("pool input must be rank 4, got {:?}", x.dims);
    }
    let mut out = [0usize; 2];
    for (i, o) in out.iter_mut().enumerate() {
        let (k, s, p) = (spec.kernel_size[i], spec.stride[i], spec.padding[i]);
        if p > k / 2 {
            unsupported!("pool padding {:?} exceeds half the kernel", spec.padding);
        }
        match rlx_ir::ops::vision::conv_out_len(x.dims[2 + i], k, s, p, 1) {
            Some(l) => *o = l,
            None => unsupported!("pool kernel {:?} is larger than the padded input", k),
        }
    }
    Ok([x.dims[0] * x.dims[1], x.dims[2], x.dims[3], out[0], out[1]])
}

/// The pool constants every pool kernel shares.
fn pool_consts(spec: &PoolSpec, [_, h, w, ho, wo]: [usize; 5]) -> String {
    let (k, s, p) = (spec.kernel_size, spec.stride, spec.padding);
    format!(
        "const H: i32 = {h};\nconst W: i32 = {w};\nconst HO: u32 = {ho}u;\nconst WO: u32 = {wo}u;\n\
         const KH: i32 = {};\nconst KW: i32 = {};\nconst SH: i32 = {};\nconst SW: i32 = {};\n\
         const PH: i32 = {};\nconst PW: i32 = {};\n",
        k[0], k[1], s[0], s[1], p[0], p[1]
    )
}

/// `win(o)`: output element `o`'s plane and clipped window `(plane, y0, y1, x0, x1)`.
const WINDOW: &str = r#"
fn win(o: u32) -> vec4<i32> {
    let ox = i32(o % WO);
    let oy = i32((o / WO) % HO);
    let ys = oy * SH - PH;
    let xs = ox * SW - PW;
    return vec4<i32>(max(ys, 0), min(ys + KH, H), max(xs, 0), min(xs + KW, W));
}
// The first maximum of output o's window as a plane offset (-1 for an empty window):
// a NaN wins over any number and nothing wins over a NaN.
fn argmax(o: u32) -> i32 {
    let r = win(o);
    let base = (o / (WO * HO)) * u32(H * W);
    var best = 0.0;
    var bi = -1;
    for (var iy = r.x; iy < r.y; iy++) {
        for (var ix = r.z; ix < r.w; ix++) {
            let i = iy * W + ix;
            let v = ld_x(base + u32(i));
            if (bi < 0 || (!is_nan(best) && (is_nan(v) || v > best))) {
                best = v;
                bi = i;
            }
        }
    }
    return bi;
}
"#;

pub fn pool(ctx: &mut NodeCtx, spec: &PoolSpec) -> Lowered {
    let x = ctx.ins[0].clone();
    if !x.dtype.is_float() {
        unsupported!("Pool of {} values", x.dtype);
    }
    let geo = pool_geom(spec, &x)?;
    check_sizes(&[&x])?;
    let y = ctx.word_out();
    let mut sh = Shader::new(format!("pool {:?} {:?}", spec, x.dims));
    sh.input("x", &x)?;
    sh.output("y", &y)?;
    sh.text(&pool_consts(spec, geo));
    sh.text(WINDOW);
    let n = y.numel() as u64;
    let (groups, head) = grid_1d(n, ctx.caps.max_groups_per_dim);
    let body = match spec.kind {
        PoolKind::Max => "    let i = argmax(gi);\n    var v = -f_inf();\n    if (i >= 0) { v = ld_x((gi / (WO * HO)) * u32(H * W) + u32(i)); }\n    st_y(gi, v);\n".to_string(),
        // Summed in scan order like the CPU, then divided by the whole kernel's area.
        PoolKind::Avg => format!(
            "    let r = win(gi);\n    let base = (gi / (WO * HO)) * u32(H * W);\n    var s = 0.0;\n    for (var iy = r.x; iy < r.y; iy++) {{\n        for (var ix = r.z; ix < r.w; ix++) {{\n            s += ld_x(base + u32(iy * W + ix));\n        }}\n    }}\n    st_y(gi, s / {}.0);\n",
            spec.kernel_size[0] * spec.kernel_size[1]
        ),
    };
    ctx.push(sh.finish(&format!("{head}{body}}}\n"), groups));
    ctx.finish_out(&y)
}

/// dx of a max pool: each window's first max is found once (an i32 scratch of plane
/// offsets), then every input element gathers the dy of the windows that picked it, in
/// the CPU's (oy, ox) order, so the sums match it exactly.
pub fn max_pool2d_backward(ctx: &mut NodeCtx, spec: &PoolSpec) -> Lowered {
    let (x, dy) = (ctx.ins[0].clone(), ctx.ins[1].clone());
    if !x.dtype.is_float() || !dy.dtype.is_float() {
        unsupported!("MaxPool2dBackward of {} values", x.dtype);
    }
    let geo = pool_geom(spec, &x)?;
    let [planes, _, _, ho, wo] = geo;
    if dy.numel() != planes * ho * wo {
        unsupported!("dy {:?} does not match the pool output", dy.dims);
    }
    check_sizes(&[&x])?;
    let arg = ctx.scratch(&[dy.numel()], DType::I32);
    let mut sh = Shader::new(format!("max pool argmax {:?} {:?}", spec, x.dims));
    sh.input("x", &x)?;
    sh.output("a", &arg)?;
    sh.text(&pool_consts(spec, geo));
    sh.text(WINDOW);
    let (groups, head) = grid_1d(arg.numel() as u64, ctx.caps.max_groups_per_dim);
    ctx.push(sh.finish(&format!("{head}    st_a(gi, argmax(gi));\n}}\n"), groups));

    let y = ctx.word_out();
    let mut sh = Shader::new(format!("max pool backward {:?} {:?}", spec, x.dims));
    sh.input("a", &arg)?;
    sh.input("dy", &dy)?;
    sh.output("y", &y)?;
    sh.text(&pool_consts(spec, geo));
    let (groups, head) = grid_1d(y.numel() as u64, ctx.caps.max_groups_per_dim);
    // Output oy's window covers iy when oy*SH - PH <= iy < oy*SH - PH + KH.
    let body = r#"    let ix = i32(gi % u32(W));
    let iy = i32((gi / u32(W)) % u32(H));
    let pl = gi / u32(H * W);
    let i = iy * W + ix;
    let ly = iy + PH - KH + 1;
    let lx = ix + PW - KW + 1;
    let oy0 = select(0, (ly + SH - 1) / SH, ly > 0);
    let ox0 = select(0, (lx + SW - 1) / SW, lx > 0);
    let oy1 = min((iy + PH) / SH, i32(HO) - 1);
    let ox1 = min((ix + PW) / SW, i32(WO) - 1);
    var s = 0.0;
    for (var oy = oy0; oy <= oy1; oy++) {
        for (var ox = ox0; ox <= ox1; ox++) {
            let o = pl * HO * WO + u32(oy) * WO + u32(ox);
            if (ld_a(o) == i) { s += ld_dy(o); }
        }
    }
    st_y(gi, s);
}
"#;
    ctx.push(sh.finish(&format!("{head}{body}"), groups));
    ctx.finish_out(&y)
}

/// `[N, C, H, W]` → `[N, C, 2H, 2W]` over raw words, so every dtype moves bit-exactly
/// (i64 as its two words, halves and bytes extracted from and packed into whole words,
/// one output word per invocation).
pub fn resize_nearest2x(ctx: &mut NodeCtx) -> Lowered {
    let (x, y) = (ctx.ins[0].clone(), ctx.out.clone());
    if x.dims.len() != 4 || x.dtype != y.dtype {
        unsupported!("ResizeNearest2x of {:?} {}", x.dims, x.dtype);
    }
    if !x.off.is_multiple_of(4) || !y.off.is_multiple_of(4) {
        unsupported!("ResizeNearest2x of a tensor not starting on a word");
    }
    check_sizes(&[&y])?;
    let (h, w) = (x.dims[2], x.dims[3]);
    let es = x.dtype.size_bytes();
    let mut sh = Shader::new(format!("resize nearest2x {:?} {}", x.dims, x.dtype));
    sh.words("x", &x)?;
    sh.words("y", &y)?;
    // src(e): the input element output element e copies.
    sh.text(&format!(
        "fn src(e: u32) -> u32 {{\n    let ox = e % {w2}u;\n    let oy = (e / {w2}u) % {h2}u;\n    let pl = e / {hw4}u;\n    return pl * {hw}u + (oy >> 1u) * {w}u + (ox >> 1u);\n}}",
        w2 = 2 * w,
        h2 = 2 * h,
        hw4 = 4 * h * w,
        hw = h * w,
    ));
    let n = y.numel() as u64;
    let (words, body) = if es >= 4 {
        let q = es / 4;
        (
            n * q as u64,
            format!("    wr_y(gi, rd_x(src(gi / {q}u) * {q}u + gi % {q}u));\n"),
        )
    } else {
        let k = 4 / es;
        let bits = 8 * es;
        let mask = (1u64 << bits) - 1;
        (
            n.div_ceil(k as u64),
            format!(
                "    var word = 0u;\n    for (var j = 0u; j < {k}u; j++) {{\n        let e = gi * {k}u + j;\n        if (e < {n}u) {{\n            let s = src(e);\n            let v = (rd_x(s / {k}u) >> ((s % {k}u) * {bits}u)) & {mask}u;\n            word |= v << (j * {bits}u);\n        }}\n    }}\n    wr_y(gi, word);\n"
            ),
        )
    };
    let (groups, head) = grid_1d(words, ctx.caps.max_groups_per_dim);
    ctx.push(sh.finish(&format!("{head}{body}}}\n"), groups));
    Ok(())
}
