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

// Python's mod: a nonzero remainder of the other sign moves over by one divisor.
fn f_pymod(a: f32, b: f32) -> f32 {
    let r = f_fmod(a, b);
    if (!(r == 0.0) && ((r < 0.0) != (b < 0.0))) { return r + b; }
    return r;
}
