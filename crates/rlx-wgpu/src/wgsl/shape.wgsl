// Helpers of the shape and index kernels: 64-bit integers as (low, high) word pairs, so an
// i64 value is moved and combined exactly (wrapping, as the CPU's i64 arithmetic) with
// 32-bit operations only.
fn i64_of(v: i32) -> vec2<u32> { return vec2<u32>(bitcast<u32>(v), select(0u, 0xffffffffu, v < 0)); }
fn i64_add(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}
// The full 64-bit product of two u32 (16-bit limbs: no partial sum overflows).
fn u32_mul_wide(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return vec2<u32>((p00 & 0xffffu) | (mid << 16u), a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}
// Wrapping 64-bit product (the high words' cross terms only reach the high word).
fn i64_mul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let p = u32_mul_wide(a.x, b.x);
    return vec2<u32>(p.x, p.y + a.x * b.y + a.y * b.x);
}
fn i64_lt(a: vec2<u32>, b: vec2<u32>) -> bool {
    let ah = bitcast<i32>(a.y);
    let bh = bitcast<i32>(b.y);
    return ah < bh || (ah == bh && a.x < b.x);
}
fn i64_max(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return select(a, b, i64_lt(a, b)); }
fn i64_min(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return select(a, b, i64_lt(b, a)); }
// An index value as i32, or i32's minimum (out of range on every axis) when it has none.
fn idx_of_i64(w: vec2<u32>) -> i32 {
    if (w.y != select(0u, 0xffffffffu, bitcast<i32>(w.x) < 0)) { return -2147483647 - 1; }
    return bitcast<i32>(w.x);
}
fn idx_of_f32(f: f32) -> i32 {
    if (!(abs(f) < 2147483648.0)) { return -2147483647 - 1; }
    return i32(f);
}
