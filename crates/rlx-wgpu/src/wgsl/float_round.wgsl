// FloatRound (rlx-ir's MiniFloat::round) on the bits of an f32: the input's exponent and
// mantissa are read as integers and the result is built as bits, so no driver flushes a
// subnormal on either side (E8M0's 2^-127 is an f32 subnormal). The lowering prepends the
// format's constants: MB (mantissa bits), EMIN (1 - bias), MAXB (bits of the largest finite
// value), OVER (bits of an overflow: max, inf or NaN), NAN_OUT (bits NaN becomes), FNUZ
// (no -0), SAT, and E8M0's rounding in e8m0_bump / e8m0_edge.

// 2^k as f32 bits, k in -149..=127.
fn pow2_bits(k: i32) -> u32 {
    if (k >= -126) { return u32(k + 127) << 23u; }
    return 1u << u32(k + 149);
}

fn bits_nan(b: u32) -> bool { return (b & 0x7fffffffu) > 0x7f800000u; }

// Round to nearest, ties to even, at the quantum of the value's binade (or the subnormal
// quantum below EMIN): the integer mantissa shifted right with its remainder compared to
// half, then scaled back by an exact power of two.
fn fr_grid(b: u32) -> u32 {
    let a = b & 0x7fffffffu;
    if (a > 0x7f800000u) { return NAN_OUT; }
    var y = OVER;
    if (a != 0x7f800000u) {
        let be = i32(a >> 23u);
        var m = a & 0x7fffffu;
        var e = -126;
        if (be > 0) { m = m | 0x800000u; e = be - 127; }
        // m * 2^(e - 23) is the value; the quantum is 2^(eff - MB).
        let eff = max(e, EMIN);
        let sh = u32(min(23 + eff - MB - e, 31));
        var n = m >> sh;
        let rem = m & ((1u << sh) - 1u);
        let half = 1u << (sh - 1u);
        if (rem > half || (rem == half && (n & 1u) == 1u)) { n = n + 1u; }
        // Exact: n has at most MB + 2 bits and the scale is a normal power of two (an
        // overflow past f32 becomes inf, above MAXB either way).
        let v = bitcast<u32>(f32(n) * bitcast<f32>(pow2_bits(eff - MB)));
        if (v <= MAXB) { y = v; }
    }
    if (bits_nan(y)) { return y; }
    if ((b >> 31u) == 1u && !(y == 0u && FNUZ)) { y = y | 0x80000000u; }
    return y;
}

// E8M0: the power of two picked from the exponent and the mantissa bits below it, the sign
// dropped; outside 2^-127..2^127 saturated or NaN.
fn fr_e8m0(b: u32) -> u32 {
    let a = b & 0x7fffffffu;
    if (a > 0x7f800000u) { return 0x7fc00000u; }
    if (a == 0x7f800000u) { return select(0x7fc00000u, pow2_bits(127), SAT); }
    // Zero stands below the whole range.
    var k = -1000;
    if (a != 0u) {
        let be = i32(a >> 23u);
        var e: i32;
        var up: bool;
        var near: bool;
        if (be > 0) {
            let f = a & 0x7fffffu;
            e = be - 127;
            up = f != 0u;
            near = (f >> 22u) == 1u;
        } else {
            let p = firstLeadingBit(a);
            e = -149 + i32(p);
            up = (a & ((1u << p) - 1u)) != 0u;
            near = false;
            if (p >= 1u) { near = ((a >> (p - 1u)) & 1u) == 1u; }
        }
        k = e + e8m0_bump(up, near);
    }
    k = e8m0_edge(k);
    if (k >= -127 && k <= 127) { return pow2_bits(k); }
    if (SAT) { return pow2_bits(clamp(k, -127, 127)); }
    return 0x7fc00000u;
}
