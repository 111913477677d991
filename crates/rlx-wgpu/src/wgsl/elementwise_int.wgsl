// Mod and the shifts as rlx-cpu's scalar code defines them (binary_i / binary_f), added to
// a chain kernel that uses them. Integer values are i32 here (i32, u8 and bool all
// compute in it); the chain settles each result into its dtype, which drops what the
// CPU's i64 would have kept past the width, so the i32 results below are the CPU's.

// x mod 0 = 0; x mod -1 = 0 (the one case where i32 `%` could overflow); `fmod` keeps the
// dividend's sign (WGSL's `%` truncates), else a nonzero remainder takes the divisor's.
fn i_mod(a: i32, b: i32, fmod: bool) -> i32 {
    if (b == 0 || b == -1) { return 0; }
    let r = a % b;
    if (!fmod && r != 0 && ((r < 0) != (b < 0))) { return r + b; }
    return r;
}

// A shift by < 0 or >= the width gives 0 (a right shift of a negative value -1): the CPU's
// 64-bit shift of an i32 value by 32..63 leaves nothing in the low 32 bits either, and
// WGSL leaves such shifts undefined.
fn i_shl(a: i32, b: i32) -> i32 {
    if (b < 0 || b >= 32) { return 0; }
    return a << u32(b);
}
fn i_shr(a: i32, b: i32) -> i32 {
    if (b < 0 || b >= 32) { return select(0, -1, a < 0); }
    return a >> u32(b);
}

// C's fmod, exact (WGSL's float `%` is x - y * trunc(x / y), which rounds): musl's fmodf
// on the bits, a long division of the mantissas one exponent step at a time.
fn f_fmod(x: f32, y: f32) -> f32 {
    let ux = bitcast<u32>(x);
    let ax = ux & 0x7fffffffu;
    let ay = bitcast<u32>(y) & 0x7fffffffu;
    let sx = ux & 0x80000000u;
    if (ay == 0u || ax >= 0x7f800000u || ay > 0x7f800000u) { return f_nan(); }
    if (ax < ay) { return x; }
    var ex = i32(ax >> 23u);
    var ey = i32(ay >> 23u);
    var mx = (ax & 0x7fffffu) | 0x800000u;
    var my = (ay & 0x7fffffu) | 0x800000u;
    // Subnormals: normalise the mantissa, lowering the exponent below 1.
    if (ex == 0) {
        mx = ax;
        ex = 1;
        while ((mx >> 23u) == 0u) { mx = mx << 1u; ex = ex - 1; }
    }
    if (ey == 0) {
        my = ay;
        ey = 1;
        while ((my >> 23u) == 0u) { my = my << 1u; ey = ey - 1; }
    }
    for (; ex > ey; ex = ex - 1) {
        if (mx >= my) { mx = mx - my; }
        if (mx == 0u) { return bitcast<f32>(sx); }
        mx = mx << 1u;
    }
    if (mx >= my) { mx = mx - my; }
    if (mx == 0u) { return bitcast<f32>(sx); }
    while ((mx >> 23u) == 0u) { mx = mx << 1u; ex = ex - 1; }
    var r: u32;
    if (ex > 0) {
        r = (mx - 0x800000u) | (u32(ex) << 23u);
    } else {
        r = mx >> u32(1 - ex);
    }
    return bitcast<f32>(r | sx);
}

// Python's mod: a nonzero remainder of the other sign moves over by one divisor. Decided
// and added on the bits: drivers may flush f32 subnormals (NVIDIA's Vulkan does), where
// `r == 0.0` would hold for a subnormal r and `r + b` would drop it.
fn f_pymod(a: f32, b: f32) -> f32 {
    let r = f_fmod(a, b);
    let ur = bitcast<u32>(r);
    let ub = bitcast<u32>(b);
    let ar = ur & 0x7fffffffu;
    let ab = ub & 0x7fffffffu;
    if (ar == 0u || ar > 0x7f800000u || (ur >> 31u) == (ub >> 31u)) { return r; }
    if (ab == 0x7f800000u) { return b; }
    // |r| < |b| (a remainder), so r + b is |b| - |r| with b's sign.
    return bitcast<f32>(f_sub_mag(ab, ar) | (ub & 0x80000000u));
}

// |a| - |r| for finite a > r > 0 given as magnitude bits, rounded to nearest even: the
// mantissas carry guard, round and sticky bits; subnormals take exponent 1 without the
// implicit bit, so a subnormal difference comes out exact.
fn f_sub_mag(ua: u32, ur: u32) -> u32 {
    var ea = i32(ua >> 23u);
    var er = i32(ur >> 23u);
    var ma = ua & 0x7fffffu;
    var mr = ur & 0x7fffffu;
    if (ea == 0) { ea = 1; } else { ma = ma | 0x800000u; }
    if (er == 0) { er = 1; } else { mr = mr | 0x800000u; }
    ma = ma << 3u;
    mr = mr << 3u;
    let d = ea - er;
    var rs = mr;
    if (d >= 27) {
        rs = 1u;
    } else if (d > 0) {
        let lost = mr & ((1u << u32(d)) - 1u);
        rs = (mr >> u32(d)) | select(0u, 1u, lost != 0u);
    }
    var m = ma - rs;
    while (m < 0x4000000u && ea > 1) { m = m << 1u; ea = ea - 1; }
    let low = m & 7u;
    m = m >> 3u;
    if (low > 4u || (low == 4u && (m & 1u) == 1u)) { m = m + 1u; }
    if (m >= 0x1000000u) { m = m >> 1u; ea = ea + 1; }
    if (m >= 0x800000u) { return (u32(ea) << 23u) | (m & 0x7fffffu); }
    return m;
}
