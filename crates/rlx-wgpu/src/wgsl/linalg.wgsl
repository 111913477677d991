// Packed-weight decoders of the quantized matmuls (GGUF block layouts, as rlx-cpu's quant
// module reads them). A row of the weight is read in "units" of 32 values (a legacy block,
// or one 32-value slice of a K-quant super-block): value l of unit u of the row starting at
// byte rb is `s.x * dq_q_*(rb, u, l) + s.y` with `s = dq_s_*(rb, u, l / 16)` (only Q6_K has
// two scales a unit, one per 16 values). Bytes come through `wb` (defined per kernel over
// the weight's words), so any row or block alignment works.

fn wh(i: u32) -> u32 { return wb(i) | (wb(i + 1u) << 8u); }
fn wf16(i: u32) -> f32 { return unpack2x16float(wh(i)).x; }
fn wu32(i: u32) -> u32 { return wh(i) | (wh(i + 2u) << 16u); }
// Value l of the 16 nibble bytes at `at`: low nibbles are values 0..16, high ones 16..32.
fn nib16(at: u32, l: u32) -> u32 {
    let b = wb(at + (l & 15u));
    return select(b & 15u, b >> 4u, l >= 16u);
}

// ---- Q8_0: f16 d, 32 x i8 (34 bytes): x = d * q
fn dq_s_q8_0(rb: u32, u: u32, hf: u32) -> vec2<f32> { return vec2<f32>(wf16(rb + u * 34u), 0.0); }
fn dq_q_q8_0(rb: u32, u: u32, l: u32) -> f32 {
    return f32((i32(wb(rb + u * 34u + 2u + l)) << 24u) >> 24u);
}
// ---- Q4_0: f16 d, 16 nibble bytes (18): x = d * (q - 8)
fn dq_s_q4_0(rb: u32, u: u32, hf: u32) -> vec2<f32> { return vec2<f32>(wf16(rb + u * 18u), 0.0); }
fn dq_q_q4_0(rb: u32, u: u32, l: u32) -> f32 { return f32(i32(nib16(rb + u * 18u + 2u, l)) - 8); }
// ---- Q4_1: f16 d, f16 m, 16 nibble bytes (20): x = d * q + m
fn dq_s_q4_1(rb: u32, u: u32, hf: u32) -> vec2<f32> {
    let o = rb + u * 20u;
    return vec2<f32>(wf16(o), wf16(o + 2u));
}
fn dq_q_q4_1(rb: u32, u: u32, l: u32) -> f32 { return f32(nib16(rb + u * 20u + 4u, l)); }
// ---- Q5_0: f16 d, u32 fifth bits, 16 nibble bytes (22): x = d * (q - 16)
fn dq_s_q5_0(rb: u32, u: u32, hf: u32) -> vec2<f32> { return vec2<f32>(wf16(rb + u * 22u), 0.0); }
fn dq_q_q5_0(rb: u32, u: u32, l: u32) -> f32 {
    let o = rb + u * 22u;
    let h = (wu32(o + 2u) >> l) & 1u;
    return f32(i32(nib16(o + 6u, l) | (h << 4u)) - 16);
}
// ---- Q5_1: f16 d, f16 m, u32 fifth bits, 16 nibble bytes (24): x = d * q + m
fn dq_s_q5_1(rb: u32, u: u32, hf: u32) -> vec2<f32> {
    let o = rb + u * 24u;
    return vec2<f32>(wf16(o), wf16(o + 2u));
}
fn dq_q_q5_1(rb: u32, u: u32, l: u32) -> f32 {
    let o = rb + u * 24u;
    let h = (wu32(o + 4u) >> l) & 1u;
    return f32(nib16(o + 8u, l) | (h << 4u));
}
// ---- Q4_K / Q5_K: f16 d, f16 dmin, 12 bytes of 6-bit (scale, min) for 8 sub-blocks, [32
// bytes of fifth bits], 128 nibble bytes: x = d*sc * q - dmin*m. Unit u is sub-block u % 8
// of super-block u / 8 (ggml's get_scale_min_k4 for the 6-bit pairs).
fn kq_scale(o: u32, j: u32) -> vec2<f32> {
    let sc = o + 4u;
    var s: u32;
    var m: u32;
    if (j < 4u) {
        s = wb(sc + j) & 63u;
        m = wb(sc + j + 4u) & 63u;
    } else {
        s = (wb(sc + j + 4u) & 15u) | ((wb(sc + j - 4u) >> 6u) << 4u);
        m = (wb(sc + j + 4u) >> 4u) | ((wb(sc + j) >> 6u) << 4u);
    }
    return vec2<f32>(wf16(o) * f32(s), -(wf16(o + 2u) * f32(m)));
}
fn kq_nib(qs: u32, j: u32, l: u32) -> u32 {
    let b = wb(qs + 32u * (j >> 1u) + l);
    return select(b & 15u, b >> 4u, (j & 1u) == 1u);
}
fn dq_s_q4_k(rb: u32, u: u32, hf: u32) -> vec2<f32> { return kq_scale(rb + (u >> 3u) * 144u, u & 7u); }
fn dq_q_q4_k(rb: u32, u: u32, l: u32) -> f32 {
    return f32(kq_nib(rb + (u >> 3u) * 144u + 16u, u & 7u, l));
}
fn dq_s_q5_k(rb: u32, u: u32, hf: u32) -> vec2<f32> { return kq_scale(rb + (u >> 3u) * 176u, u & 7u); }
fn dq_q_q5_k(rb: u32, u: u32, l: u32) -> f32 {
    let o = rb + (u >> 3u) * 176u;
    let j = u & 7u;
    let h = (wb(o + 16u + l) >> j) & 1u;
    return f32(kq_nib(o + 48u, j, l) | (h << 4u));
}
// ---- Q6_K: 128 low-nibble bytes, 64 bytes of 2-bit highs, 16 x i8 scales (one per 16
// values), f16 d last (210 bytes): x = d*sc * (q - 32). Unit j = 4h + g of a super-block.
fn dq_s_q6_k(rb: u32, u: u32, hf: u32) -> vec2<f32> {
    let o = rb + (u >> 3u) * 210u;
    let j = u & 7u;
    let s = (i32(wb(o + 192u + 8u * (j >> 2u) + 2u * (j & 3u) + hf)) << 24u) >> 24u;
    return vec2<f32>(wf16(o + 208u) * f32(s), 0.0);
}
fn dq_q_q6_k(rb: u32, u: u32, l: u32) -> f32 {
    let o = rb + (u >> 3u) * 210u;
    let j = u & 7u;
    let h = j >> 2u;
    let g = j & 3u;
    let b = wb(o + 64u * h + l + 32u * (g & 1u));
    let lo = select(b & 15u, b >> 4u, g >= 2u);
    let hi = (wb(o + 128u + 32u * h + l) >> (2u * g)) & 3u;
    return f32(i32(lo | (hi << 4u)) - 32);
}
// ---- F16 / BF16 rows: "blocks" of 32 little-endian halves (64 bytes), no scale.
fn dq_s_f16(rb: u32, u: u32, hf: u32) -> vec2<f32> { return vec2<f32>(1.0, 0.0); }
fn dq_q_f16(rb: u32, u: u32, l: u32) -> f32 { return wf16(rb + u * 64u + 2u * l); }
fn dq_s_bf16(rb: u32, u: u32, hf: u32) -> vec2<f32> { return vec2<f32>(1.0, 0.0); }
fn dq_q_bf16(rb: u32, u: u32, l: u32) -> f32 { return bitcast<f32>(wh(rb + u * 64u + 2u * l) << 16u); }
