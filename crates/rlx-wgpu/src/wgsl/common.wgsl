// rlx WGSL helpers, prepended to every kernel (see shader.rs).
//
// Values compute as f32 (float dtypes) or i32 (integer dtypes and bool), as the CPU's chain
// engine computes them (rlx-cpu ops/region.rs), and are settled into a step's dtype after
// each step. Nothing here relies on the driver's NaN handling, its f32->f16 conversion
// rounding or its transcendental accuracy (WGSL allows 2^-11 absolute error for sin):
// rounding is done on bits, NaN is tested on bits, sin/cos/tanh/erf are our own.

fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn f_inf() -> f32 { return bitcast<f32>(0x7f800000u); }
fn f_nan() -> f32 { return bitcast<f32>(0x7fc00000u); }

// f32 -> f16 bits, round to nearest even (overflow to inf, subnormals exact).
fn f16_bits(x: f32) -> u32 {
    let u = bitcast<u32>(x);
    let sign = (u >> 16u) & 0x8000u;
    let a = u & 0x7fffffffu;
    if (a > 0x7f800000u) { return sign | 0x7e00u; }
    if (a >= 0x477ff000u) { return sign | 0x7c00u; }
    if (a >= 0x38800000u) {
        let r = a - 0x38000000u;
        return sign | ((r + 0xfffu + ((r >> 13u) & 1u)) >> 13u);
    }
    let f = bitcast<f32>(a) * 16777216.0;
    let i = u32(f);
    let frac = f - f32(i);
    var r = i;
    if (frac > 0.5 || (frac == 0.5 && (i & 1u) == 1u)) { r = i + 1u; }
    return sign | r;
}
// f32 -> bf16 bits, round to nearest even (NaN stays a quiet NaN).
fn bf16_bits(x: f32) -> u32 {
    let u = bitcast<u32>(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) { return ((u >> 16u) | 0x40u) & 0xffffu; }
    return (u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u;
}
fn settle_f16(v: f32) -> f32 { return unpack2x16float(f16_bits(v)).x; }
fn settle_bf16(v: f32) -> f32 { return bitcast<f32>(bf16_bits(v) << 16u); }
fn settle_u8(v: i32) -> i32 { return v & 0xff; }
fn settle_bool(v: i32) -> i32 { return select(0, 1, v != 0); }

// ---- accurate transcendental pieces
// e^x - 1 without the cancellation near 0.
fn expm1_(x: f32) -> f32 {
    if (abs(x) < 0.5) {
        return x * (1.0 + x * (0.5 + x * (0.16666667 + x * (0.041666668 + x * (0.008333334
            + x * (0.0013888889 + x * (0.0001984127 + x * (0.0000248016 + x * 0.0000027557))))))));
    }
    return exp(x) - 1.0;
}
// Natural log to about 1 ulp: WGSL lets `log` be 2^-21 off absolutely near 1, where the
// result itself is small. x = m * 2^e with m in [sqrt(1/2), sqrt(2)), then
// log(m) = 2 atanh(f / (2 + f)) with f = m - 1 (odd series in s = f / (2 + f), |s| < 0.172).
fn log_(x: f32) -> f32 {
    if (is_nan(x) || x < 0.0) { return f_nan(); }
    if (x == 0.0) { return -f_inf(); }
    if (x == f_inf()) { return x; }
    var u = bitcast<u32>(x);
    var e = 0;
    if (u < 0x00800000u) {
        u = bitcast<u32>(x * 16777216.0);
        e = -24;
    }
    e = e + i32(u >> 23u) - 127;
    var m = bitcast<f32>((u & 0x007fffffu) | 0x3f800000u);
    if (m > 1.41421356) {
        m = m * 0.5;
        e = e + 1;
    }
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let t = z * (0.66666667 + z * (0.4 + z * (0.28571429 + z * (0.22222222 + z * (0.18181818 + z * 0.15384615)))));
    let lm = f - s * (f - t);
    let ef = f32(e);
    // ln 2 as 0.693359375 (9 bits: e times it is exact) minus 2.12194440e-4 (cephes).
    return (ef * -2.12194440e-4 + lm) + ef * 0.693359375;
}
// log(1 + y), accurate for small y (Kahan's correction).
fn log1p_(y: f32) -> f32 {
    let u = 1.0 + y;
    if (u == 1.0) { return y; }
    return log_(u) * (y / (u - 1.0));
}
fn tanh_(x: f32) -> f32 {
    if (is_nan(x)) { return x; }
    let e = expm1_(-2.0 * abs(x));
    let t = -e / (e + 2.0);
    return select(-t, t, x >= 0.0);
}
// erfc with relative error below 1.2e-7 on the whole line (Numerical Recipes' Chebyshev fit).
fn erfc_(x: f32) -> f32 {
    let z = abs(x);
    let t = 1.0 / (1.0 + 0.5 * z);
    let p = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418
        + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
        + t * (-0.82215223 + t * 0.17087277))))))));
    let r = t * exp(p);
    return select(2.0 - r, r, x >= 0.0);
}
// erf: its Maclaurin series near 0 (where 1 - erfc cancels), 1 - erfc elsewhere.
fn erf_(x: f32) -> f32 {
    if (is_nan(x)) { return x; }
    if (abs(x) < 0.5) {
        let x2 = x * x;
        return 1.1283791671 * x * (1.0 + x2 * (-0.33333333 + x2 * (0.1 + x2 * (-0.023809524
            + x2 * (0.0046296296 + x2 * (-0.00075757576 + x2 * (0.00010683761 + x2 * -0.000013227513)))))));
    }
    return 1.0 - erfc_(x);
}
// sin / cos: Cody-Waite reduction by pi/2, then cephes' minimax polynomials on [-pi/4, pi/4].
fn sincos_q(x: f32) -> vec3<f32> {
    let k = round(x * 0.63661977);
    var r = x - k * 1.5703125;
    r = r - k * 4.8375129699707031e-4;
    r = r - k * 7.5497899548918821e-8;
    let z = r * r;
    let s = r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
    let c = 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
    return vec3<f32>(s, c, k);
}
fn sin_(x: f32) -> f32 {
    if (is_nan(x) || abs(x) == f_inf()) { return f_nan(); }
    let q = sincos_q(x);
    let m = i32(q.z) & 3;
    if (m == 0) { return q.x; }
    if (m == 1) { return q.y; }
    if (m == 2) { return -q.x; }
    return -q.y;
}
fn cos_(x: f32) -> f32 {
    if (is_nan(x) || abs(x) == f_inf()) { return f_nan(); }
    let q = sincos_q(x);
    let m = i32(q.z) & 3;
    if (m == 0) { return q.y; }
    if (m == 1) { return -q.x; }
    if (m == 2) { return -q.y; }
    return q.x;
}

// ---- activations (formulas of rlx-cpu ops/elementwise.rs::activation)
fn act_gelu(x: f32) -> f32 { return 0.5 * x * erfc_(-x * 0.70710678118654752); }
fn act_gelu_approx(x: f32) -> f32 {
    return x / (1.0 + exp(-(1.5957691216057308 * (x + 0.044715 * x * x * x))));
}
fn act_silu(x: f32) -> f32 { return x / (1.0 + exp(-x)); }
fn act_relu(x: f32) -> f32 { return select(x, 0.0, x < 0.0); }
fn act_sigmoid(x: f32) -> f32 { return 1.0 / (1.0 + exp(-x)); }
fn act_softplus(x: f32) -> f32 { return max(x, 0.0) + log1p_(exp(-abs(x))); }

// ---- binary ops on floats (NaN propagates through max / min, as in PyTorch)
fn f_max(a: f32, b: f32) -> f32 { if (is_nan(a) || is_nan(b)) { return f_nan(); } return max(a, b); }
fn f_min(a: f32, b: f32) -> f32 { if (is_nan(a) || is_nan(b)) { return f_nan(); } return min(a, b); }
fn f_pow(a: f32, b: f32) -> f32 {
    if (b == 0.0 || a == 1.0) { return 1.0; }
    if (is_nan(a) || is_nan(b)) { return f_nan(); }
    let m = abs(a);
    var r: f32;
    if (m == 0.0) {
        r = select(f_inf(), 0.0, b > 0.0);
    } else if (m == f_inf()) {
        r = select(0.0, f_inf(), b > 0.0);
    } else {
        r = exp2(b * log2(m));
    }
    if (a < 0.0 || (a == 0.0 && (bitcast<u32>(a) >> 31u) == 1u)) {
        if (floor(b) != b) {
            return select(f_nan(), r, m == 0.0 || m == f_inf());
        }
        let odd = abs(b) < 16777216.0 && (i32(abs(b)) & 1) == 1;
        if (odd) { r = -r; }
    }
    return r;
}

// ---- binary ops on integers (i32 wraps; x / 0 = 0; MIN / -1 = MIN)
fn i_div(a: i32, b: i32) -> i32 {
    if (b == 0) { return 0; }
    if (b == -1) { return 0 - a; }
    return a / b;
}
fn i_pow(a: i32, b: i32) -> i32 {
    if (b < 0) {
        if (a == 1) { return 1; }
        if (a == -1) { return select(1, -1, (b & 1) == 1); }
        return 0;
    }
    var e = u32(b);
    var base = a;
    var r = 1;
    loop {
        if (e == 0u) { break; }
        if ((e & 1u) == 1u) { r = r * base; }
        base = base * base;
        e = e >> 1u;
    }
    return r;
}

// ---- casts (Rust's `as`: truncate, saturate, NaN -> 0; integers wrap when narrowed)
fn cast_i32_f(v: f32) -> i32 {
    if (is_nan(v)) { return 0; }
    if (v >= 2147483648.0) { return 2147483647; }
    if (v <= -2147483648.0) { return -2147483647 - 1; }
    return i32(v);
}
fn cast_u8_f(v: f32) -> i32 {
    if (is_nan(v) || v <= 0.0) { return 0; }
    if (v >= 255.0) { return 255; }
    return i32(v);
}
fn truthy_f(c: f32) -> bool { return !(c == 0.0); }
