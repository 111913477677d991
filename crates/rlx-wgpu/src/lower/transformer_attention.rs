//! Attention: a tiled flash-attention kernel (`wgsl/attention.wgsl`), one workgroup of 64
//! invocations per (query block, head, batch). Every size, stride and mask parameter is
//! baked into the text; the layouts differ only in element strides, so one kernel text
//! serves Packed, Bshd and Bhsd, grouped-query heads (KV head h / group) and the cached
//! form (the valid key count `past + Sq` read from device memory, so one plan serves every
//! decode step). The result is written in f32 (`word_out`) and rounded once into a half
//! output, as the CPU computes in f32 and rounds once.
use super::super::{LowerError, Lowered, NodeCtx};
use crate::shader::{Shader, WTensor};
use crate::unsupported;
use rlx_ir::{AttentionLayout, AttentionSpec, DType, MaskKind};
use std::fmt::Write;

const KERNEL: &str = include_str!("../wgsl/attention.wgsl");

/// Workgroup memory the kernel may use, in f32 elements (the portable 16 KiB).
const WG_FLOATS: usize = 4096;
/// Invocations of a workgroup (the kernel text assumes 64).
const THREADS: usize = 64;
/// Largest head size handled (q/k and v): a 16 KiB workgroup still holds a useful tile.
const MAX_HEAD: usize = 256;

/// Element strides (batch, head, seq) of a q/k/v/out tensor; the head dim is contiguous.
fn strides(layout: AttentionLayout, heads: usize, seq: usize, size: usize) -> [usize; 3] {
    match layout {
        AttentionLayout::Packed | AttentionLayout::Bshd => [seq * heads * size, size, heads * size],
        AttentionLayout::Bhsd => [heads * seq * size, seq * size, size],
    }
}

/// Query rows per workgroup and keys per tile: as many rows as there are queries (up to
/// 16, so decode wastes no rows) while the per-invocation accumulator stays at most 32
/// values and the Q block at most half of workgroup memory; then the widest key tile
/// (up to 64) that fits what is left.
fn tiles(sq: usize, d: usize, dv: usize) -> (usize, usize) {
    let mut bq = sq.next_power_of_two().clamp(1, 16);
    while bq > 1 && (bq * dv > 32 * THREADS || bq * d > WG_FLOATS / 2) {
        bq /= 2;
    }
    let left = WG_FLOATS - bq * d - 3 * bq - 1;
    let bk = (left / ((d + 1).max(dv) + bq)).min(64);
    (bq, bk)
}

/// Attention of q, k, v (k/v a KV cache when `past` is given) into the node's output.
pub(super) fn attend(
    ctx: &mut NodeCtx,
    spec: &AttentionSpec,
    [q, k, v]: [&WTensor; 3],
    mask: Option<&WTensor>,
    past: Option<&WTensor>,
) -> Lowered {
    let out = ctx.out.clone();
    if !q.dtype.is_float() || k.dtype != q.dtype || v.dtype != q.dtype || out.dtype != q.dtype {
        unsupported!("q, k, v and the output must share a float dtype");
    }
    let (h, d, dv) = (spec.num_heads, spec.head_dim, spec.v_dim());
    let rank = if spec.layout == AttentionLayout::Packed {
        3
    } else {
        4
    };
    if [q, k, v, &out].iter().any(|t| t.dims.len() != rank) {
        unsupported!("q/k/v/out ranks do not match the {:?} layout", spec.layout);
    }
    let (b, sq, sk, hkv) = match spec.layout {
        AttentionLayout::Packed => (q.dims[0], q.dims[1], k.dims[1], k.dims[2] / d.max(1)),
        AttentionLayout::Bshd => (q.dims[0], q.dims[1], k.dims[1], k.dims[2]),
        AttentionLayout::Bhsd => (q.dims[0], q.dims[2], k.dims[2], k.dims[1]),
    };
    if hkv == 0 || !h.is_multiple_of(hkv) {
        unsupported!("{h} query heads are not a multiple of {hkv} KV heads");
    }
    if d == 0 || dv == 0 || d > MAX_HEAD || dv > MAX_HEAD {
        unsupported!("head sizes {d}/{dv}: the kernel takes 1..={MAX_HEAD}");
    }
    if out.numel() == 0 {
        return Ok(());
    }
    let big = [q, k, v, &out]
        .iter()
        .any(|t| t.numel() > i32::MAX as usize)
        || b * sk > i32::MAX as usize
        || sk + sq > i32::MAX as usize / 2;
    if big {
        unsupported!("tensors beyond the kernel's 32-bit indexing");
    }
    let (bq, bk) = tiles(sq, d, dv);
    let blocks = sq.div_ceil(bq);
    let lim = ctx.caps.max_groups_per_dim as usize;
    if blocks > lim || h > lim || b > lim {
        unsupported!("a grid of {blocks} x {h} x {b} workgroups is beyond the limit {lim}");
    }
    let (mask_code, win) = match spec.mask_kind {
        MaskKind::None => (0, 0),
        MaskKind::Causal => (1, 0),
        // A window wider than every position is plain causal; clamped to fit an i32.
        MaskKind::SlidingWindow(w) => (2, w.min(sk + sq + 1)),
        MaskKind::Custom => (3, 0),
    };

    let mut sh = Shader::new(format!(
        "attention {:?} b{b} sq{sq} sk{sk} h{h}/{hkv} d{d}/{dv} {:?} past {}",
        spec.layout,
        spec.mask_kind,
        past.is_some()
    ));
    sh.input("q", q)?;
    sh.input("k", k)?;
    sh.input("v", v)?;
    let mut consts = String::new();
    let mut c = |name: &str, val: usize| {
        let _ = writeln!(consts, "const {name}: u32 = {val}u;");
    };
    c("BQ", bq);
    c("BK", bk);
    c("D", d);
    c("DV", dv);
    c("SQ", sq);
    c("GROUP", h / hkv);
    c("MASK", mask_code);
    c("WIN", win);
    c("QN", bq * d);
    c("KD", d + 1);
    c("KVN", bk * (d + 1).max(dv));
    c("PN", bq * bk);
    c("NA", (bq * dv).div_ceil(THREADS));
    for (p, t) in [
        ("Q", strides(spec.layout, h, sq, d)),
        ("K", strides(spec.layout, hkv, sk, d)),
        ("V", strides(spec.layout, hkv, sk, dv)),
        ("O", strides(spec.layout, h, sq, dv)),
    ] {
        c(&format!("{p}B"), t[0]);
        c(&format!("{p}H"), t[1]);
        c(&format!("{p}S"), t[2]);
    }
    sh.text(&consts);
    // The default scale rounded once to f32 from f64, as the CPU reference does.
    let scale = spec.score_scale.unwrap_or((1.0 / (d as f64).sqrt()) as f32);
    let scaled = format!("bitcast<f32>({:#x}u) * dot", scale.to_bits());
    let score = match spec.attn_logit_softcap {
        Some(cap) => format!(
            "let s = {scaled};\n    let cap = bitcast<f32>({:#x}u);\n    return cap * tanh_(s / cap);",
            cap.to_bits()
        ),
        None => format!("return {scaled};"),
    };
    sh.text(&format!("fn score(dot: f32) -> f32 {{\n    {score}\n}}"));
    match mask {
        Some(m) => {
            if m.numel() != b * sk {
                unsupported!("keep-mask {:?} is not [{b}, {sk}]", m.dims);
            }
            sh.input("mask", m)?;
            let zero = if m.dtype.is_float() { "0.0" } else { "0" };
            // `!(== 0)`: a NaN keeps its key, as on the CPU (`m != 0.0`).
            sh.text(&format!(
                "fn keep(b: u32, j: u32) -> bool {{ return !(ld_mask(b * {sk}u + j) == {zero}); }}"
            ));
        }
        None if spec.mask_kind == MaskKind::Custom => {
            unsupported!("a Custom mask without its keep-mask input")
        }
        None => sh.text("fn keep(b: u32, j: u32) -> bool { return true; }"),
    }
    let most = sk.saturating_sub(sq);
    match past {
        Some(p) => {
            if p.dtype != DType::I64 || p.numel() != 1 {
                unsupported!("past must be one i64, got {} {:?}", p.dtype, p.dims);
            }
            sh.input("past", p)?;
            // A past that does not fit is an error on the CPU; here it is clamped so no
            // read leaves the cache.
            sh.text(&format!(
                "fn first_pos() -> i32 {{ return clamp(ld_past(0u), 0, {most}); }}"
            ));
        }
        None => sh.text(&format!(
            "fn first_pos() -> i32 {{ return {}; }}",
            sk as i64 - sq as i64
        )),
    }
    let y = ctx.word_out();
    if y.dtype != DType::F32 {
        return Err(LowerError::Internal(crate::WgpuError::Node {
            node: ctx.node.label(),
            msg: format!("a float output's word form is {}", y.dtype),
        }));
    }
    sh.output("o", &y)?;
    let k = sh.finish(KERNEL, [blocks as u32, h as u32, b as u32]);
    ctx.push(k);
    ctx.finish_out(&y)
}
