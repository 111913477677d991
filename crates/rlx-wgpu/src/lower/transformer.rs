//! Transformer ops: Attention (`transformer_attention.rs`, a tiled flash-attention kernel
//! in `wgsl/attention.wgsl`), Rope and RopeCacheWrite (`transformer_rope.rs`), CacheWrite
//! (here) and CachedAttention (here: the kernels of the ops it stands for, in order).
//! FusedSwiGLU is an elementwise kernel (`elementwise.rs`).
//!
//! Cache writes are in place: the node's output is the cache's own storage (the plan
//! aliases it to input 0), so only the new rows are written, at the position the kernel
//! reads from device memory (one plan serves every decode step). A position that does not
//! fit the cache writes nothing (the CPU reports it as an error; a GPU kernel cannot, and
//! must never write past the rows it owns).
#[path = "transformer_attention.rs"]
mod attention_impl;
#[path = "transformer_rope.rs"]
mod rope_impl;

use super::{Lowered, NodeCtx};
use crate::shader::{grid_1d, per_word, Shader, WTensor};
use crate::unsupported;
use rlx_ir::{AttentionLayout, AttentionSpec, CachedRope, DType, RopeStyle};

pub fn attention(ctx: &mut NodeCtx, spec: &AttentionSpec) -> Lowered {
    let n = ctx.ins.len();
    let (q, k, v) = (ctx.ins[0].clone(), ctx.ins[1].clone(), ctx.ins[2].clone());
    let mask = (spec.mask_kind == rlx_ir::MaskKind::Custom).then(|| ctx.ins[3].clone());
    let past = spec.past.then(|| ctx.ins[n - 1].clone());
    attention_impl::attend(ctx, spec, [&q, &k, &v], mask.as_ref(), past.as_ref())
}

pub fn rope(ctx: &mut NodeCtx, head_dim: usize, n_rot: usize, style: RopeStyle) -> Lowered {
    let (x, cos, sin, out) = (
        ctx.ins[0].clone(),
        ctx.ins[1].clone(),
        ctx.ins[2].clone(),
        ctx.out.clone(),
    );
    rope_impl::rope_rows(ctx, [&x, &cos, &sin, &out], (head_dim, n_rot, style))
}

/// The output must be input 0's storage (the plan aliases an in-place node to it).
fn check_alias(ctx: &NodeCtx) -> Lowered {
    let c = &ctx.ins[0];
    if ctx.out.slab != c.slab || ctx.out.off != c.off {
        return Err(super::LowerError::Internal(crate::WgpuError::Node {
            node: ctx.node.label(),
            msg: "the memory plan did not alias the cache write to its cache".into(),
        }));
    }
    Ok(())
}

pub fn cache_write(ctx: &mut NodeCtx, axis: usize) -> Lowered {
    check_alias(ctx)?;
    let (cache, new, pos) = (ctx.ins[0].clone(), ctx.ins[1].clone(), ctx.ins[2].clone());
    write_rows(ctx, [&cache, &new, &pos], axis, None)
}

pub fn rope_cache_write(
    ctx: &mut NodeCtx,
    axis: usize,
    head_dim: usize,
    n_rot: usize,
    style: RopeStyle,
) -> Lowered {
    check_alias(ctx)?;
    let t: Vec<WTensor> = ctx.ins[..5].to_vec();
    let rope = Rotation {
        cos: &t[3],
        sin: &t[4],
        geom: (head_dim, n_rot, style),
    };
    write_rows(ctx, [&t[0], &t[1], &t[2]], axis, Some(rope))
}

/// The rotation a cache write applies to its new rows on the way in.
pub(super) struct Rotation<'a> {
    pub cos: &'a WTensor,
    pub sin: &'a WTensor,
    /// head_dim, n_rot, style.
    pub geom: (usize, usize, RopeStyle),
}

/// `new`'s rows (rotated when `rope` is given) into `cache` at `*pos` along `axis`.
///
/// Caches of 4- and 8-byte elements are written a word per invocation. Sub-word caches
/// (f16/bf16/u8/bool) are written a whole cache word per invocation: the word's elements
/// that fall in the written rows take the new values, the others keep the cache's bits, so
/// a row that does not start on a word boundary (odd rows of f16) is still written
/// exactly. Two invocations may compute the same boundary word; they compute it from the
/// same values (membership is decided per element over every written range), so they
/// store identical bits.
fn write_rows(
    ctx: &mut NodeCtx,
    [cache, new, pos]: [&WTensor; 3],
    axis: usize,
    rope: Option<Rotation>,
) -> Lowered {
    if pos.dtype != DType::I64 || pos.numel() != 1 {
        unsupported!("pos must be one i64, got {} {:?}", pos.dtype, pos.dims);
    }
    if new.dtype != cache.dtype {
        unsupported!(
            "new rows {} differ from the cache's {}",
            new.dtype,
            cache.dtype
        );
    }
    let r = cache.dims.len();
    if axis >= r || new.dims.len() != r {
        unsupported!("axis {axis} of cache {:?} / new {:?}", cache.dims, new.dims);
    }
    if (0..r).any(|a| a != axis && new.dims[a] != cache.dims[a]) {
        unsupported!(
            "new rows {:?} differ from the cache {:?} off axis {axis}",
            new.dims,
            cache.dims
        );
    }
    if new.numel() == 0 {
        return Ok(());
    }
    if cache.numel() > (i32::MAX as usize) / 2 {
        unsupported!(
            "a cache of {} elements is beyond the kernel's u32 indexing",
            cache.numel()
        );
    }
    if rope.is_some() && !cache.dtype.is_float() {
        unsupported!("a rotated cache write of {}", cache.dtype);
    }
    let outer: usize = cache.dims[..axis].iter().product();
    let inner: usize = cache.dims[axis + 1..].iter().product();
    let (c, s) = (cache.dims[axis], new.dims[axis]);
    let mut sh = Shader::new(format!(
        "cache_write {:?} axis {axis} <- {:?}",
        cache.dims, new.dims
    ));
    sh.words("cache", cache)?;
    sh.input("pos", pos)?;
    let size = cache.dtype.size_bytes();
    // `src(i)`: the bits of new element i as the cache stores them.
    match (&rope, size) {
        (Some(rot), _) => {
            rope_impl::val_fn(&mut sh, new, rot.cos, rot.sin, rot.geom)?;
            let enc = match cache.dtype {
                DType::F16 => "f16_bits(val(i))",
                DType::BF16 => "bf16_bits(val(i))",
                DType::F32 => "bitcast<u32>(val(i))",
                d => unsupported!("a rotated cache write of {d}"),
            };
            sh.text(&format!("fn src(i: u32) -> u32 {{ return {enc}; }}"));
        }
        (None, 1 | 2) => {
            // Raw bits straight from new's words (new may start mid-word).
            let k = 4 / size as u64;
            let lead = (new.off % 4) / size as u64;
            let aligned = WTensor {
                off: new.off - new.off % 4,
                ..new.clone()
            };
            sh.words("new", &aligned)?;
            let bits = 8 * size;
            let mask = (1u64 << bits) - 1;
            sh.text(&format!(
                "fn src(i: u32) -> u32 {{\n    let e = {lead}u + i;\n    return (rd_new(e / {k}u) >> ((e % {k}u) * {bits}u)) & {mask}u;\n}}"
            ));
        }
        (None, _) => {
            if !new.off.is_multiple_of(4) {
                unsupported!("new rows at byte {} are not word-aligned", new.off);
            }
            sh.words("new", new)?;
        }
    }
    let pos_ok = format!(
        "    let p = ld_pos(0u);\n    if (p < 0 || p > {}) {{ return; }}\n    let pos = u32(p);\n",
        c - s
    );
    let k = per_word(cache.dtype) as usize;
    let (n, body) = if k == 1 {
        // Words per element (1, or 2 for 8-byte elements) and per row block of one outer.
        let wpe = size / 4;
        let (row, blk) = (inner * wpe, s * inner * wpe);
        let put = if rope.is_some() {
            "src(gi)".to_string()
        } else {
            "rd_new(gi)".to_string()
        };
        let body = format!(
            "{pos_ok}    let o = gi / {blk}u;\n    wr_cache((o * {c}u + pos) * {row}u + gi % {blk}u, {put});\n"
        );
        (outer * s * inner * wpe, body)
    } else {
        // Words one outer's rows can touch: their elements over k, plus both ends.
        let wpr = (s * inner) / k + 2;
        let bits = 32 / k;
        let mask = (1u64 << bits) - 1;
        let ci = c * inner;
        let body = format!(
            "{pos_ok}    let o = gi / {wpr}u;
    let start = (o * {c}u + pos) * {inner}u;
    let w = start / {k}u + gi % {wpr}u;
    if (w * {k}u >= start + {si}u) {{ return; }}
    var word = rd_cache(w);
    for (var h = 0u; h < {k}u; h++) {{
        let e = w * {k}u + h;
        let oo = e / {ci}u;
        let row = (e % {ci}u) / {inner}u;
        if (oo < {outer}u && row >= pos && row < pos + {s}u) {{
            let i = (oo * {s}u + row - pos) * {inner}u + e % {inner}u;
            let sh = h * {bits}u;
            word = (word & ~({mask}u << sh)) | (src(i) << sh);
        }}
    }}
    wr_cache(w, word);
",
            si = s * inner
        );
        (outer * wpr, body)
    };
    let (groups, head) = grid_1d(n as u64, ctx.caps.max_groups_per_dim);
    ctx.push(sh.finish(&format!("{head}{body}}}\n"), groups));
    Ok(())
}

/// CachedAttention (q, k, v, k_cache, v_cache, pos[, cos, sin]): the ops it stands for, in
/// the unfused graph's order: k's rows (rotated) and v's rows into the caches in place, q
/// rotated into scratch (rounded to its dtype, as the unfused Rope's output is), then
/// attention over the caches with `past = pos`.
pub fn cached_attention(
    ctx: &mut NodeCtx,
    spec: &AttentionSpec,
    rope: &Option<CachedRope>,
) -> Lowered {
    let n = if rope.is_some() { 8 } else { 6 };
    if ctx.ins.len() != n {
        unsupported!("CachedAttention with {} inputs", ctx.ins.len());
    }
    let t: Vec<WTensor> = ctx.ins.clone();
    let (q, kn, vn, kc, vc, pos) = (&t[0], &t[1], &t[2], &t[3], &t[4], &t[5]);
    if [kn, vn, kc, vc].iter().any(|x| x.dtype != q.dtype) {
        unsupported!("q, k, v and the caches must share a dtype");
    }
    if spec.layout == AttentionLayout::Bhsd || kc.dims.len() < 2 {
        unsupported!("the caches are written along axis 1 ({:?})", spec.layout);
    }
    if spec.mask_kind == rlx_ir::MaskKind::Custom {
        unsupported!("CachedAttention takes no keep-mask input");
    }
    let tables = rope.map(|r| (r, &t[6], &t[7]));
    match tables {
        Some((r, cos, sin)) => {
            let rot = Rotation {
                cos,
                sin,
                geom: (spec.head_dim, r.n_rot, r.style),
            };
            write_rows(ctx, [kc, kn, pos], 1, Some(rot))?;
        }
        None => write_rows(ctx, [kc, kn, pos], 1, None)?,
    }
    write_rows(ctx, [vc, vn, pos], 1, None)?;
    let q = match tables {
        Some((r, cos, sin)) => {
            let rotated = ctx.scratch(&q.dims, q.dtype);
            rope_impl::rope_rows(
                ctx,
                [q, cos, sin, &rotated],
                (spec.head_dim, r.n_rot, r.style),
            )?;
            rotated
        }
        None => q.clone(),
    };
    let spec = spec.clone().with_past();
    attention_impl::attend(ctx, &spec, [&q, kc, vc], None, Some(pos))
}
