// rlx elementwise helpers (see lower/elementwise.rs). common.cuh is prepended.
//
// Elementwise kernels are generated (one per region chain or single op, see
// lower/elementwise_codegen.rs); every generated source is this file followed by its kernel.
// Values live in their dtype's compute class, as in the CPU's chain engine
// (rlx-cpu/src/ops/region.rs): float for f32/f16/bf16, double for f64, long long for the
// integer types and bool. After each step the value is made to obey the step's dtype
// (half rounding, i32/u8 wrap, bool 0/1), so a fused region equals its unfused ops.

#define EW_I64_MAX 9223372036854775807LL
#define EW_I64_MIN (-9223372036854775807LL - 1)

// Up to 64 batch samples of a BatchElementwiseRegion, passed by value.
struct EwPtrs64 {
    const void* p[64];
};

// ---- storage <-> compute class
__device__ __forceinline__ float ew_ld(const float* p, i64 i) { return p[i]; }
__device__ __forceinline__ float ew_ld(const __half* p, i64 i) { return __half2float(p[i]); }
__device__ __forceinline__ float ew_ld(const __nv_bfloat16* p, i64 i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ double ew_ld(const double* p, i64 i) { return p[i]; }
__device__ __forceinline__ i64 ew_ld(const int* p, i64 i) { return (i64)p[i]; }
__device__ __forceinline__ i64 ew_ld(const i64* p, i64 i) { return p[i]; }
__device__ __forceinline__ i64 ew_ld(const u8* p, i64 i) { return (i64)p[i]; }

// Values are already settled to the output dtype, so these conversions are exact.
__device__ __forceinline__ void ew_st(float* p, i64 i, float v) { p[i] = v; }
__device__ __forceinline__ void ew_st(__half* p, i64 i, float v) { p[i] = __float2half_rn(v); }
__device__ __forceinline__ void ew_st(__nv_bfloat16* p, i64 i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ __forceinline__ void ew_st(double* p, i64 i, double v) { p[i] = v; }
__device__ __forceinline__ void ew_st(int* p, i64 i, i64 v) { p[i] = (int)v; }
__device__ __forceinline__ void ew_st(i64* p, i64 i, i64 v) { p[i] = v; }
__device__ __forceinline__ void ew_st(u8* p, i64 i, i64 v) { p[i] = (u8)v; }

// ---- settling a step's value into its dtype
__device__ __forceinline__ float ew_settle_f16(float v) { return __half2float(__float2half_rn(v)); }
__device__ __forceinline__ float ew_settle_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }
// Through unsigned types: wrapping without signed-overflow UB.
__device__ __forceinline__ i64 ew_settle_i32(i64 v) { return (i64)(int)(unsigned int)(unsigned long long)v; }
__device__ __forceinline__ i64 ew_settle_u8(i64 v) { return (i64)(u8)(unsigned long long)v; }
__device__ __forceinline__ i64 ew_settle_bool(i64 v) { return v != 0; }

// ---- offsets of broadcast / prologue reads
// `dims_offset` with the last two coordinates halved: input 0 of a ResizeNearest2x prologue
// (`v.d` are the output's dims, `v.s` the source strides, 0 on broadcast axes).
__device__ __forceinline__ i64 ew_offset_resize2x(const Dims8& v, i64 lin) {
    i64 off = 0;
    for (int k = v.rank - 1; k >= 0; --k) {
        i64 q = lin / v.d[k];
        i64 c = lin - q * v.d[k];
        if (k >= v.rank - 2) c >>= 1;
        off += c * v.s[k];
        lin = q;
    }
    return off;
}

// ---- activations (formulas of rlx-cpu/src/ops/elementwise.rs::activation)
#define EW_SQRT2 1.4142135623730951
// 2 * sqrt(2 / pi)
#define EW_GELU_K 1.5957691216057308
#define EW_GELU_C 0.044715

// erfc keeps the far negative tail accurate (1 + erf(x) cancels there).
__device__ __forceinline__ float ew_gelu(float x) { return 0.5f * x * erfcf(-x / (float)EW_SQRT2); }
__device__ __forceinline__ double ew_gelu(double x) { return 0.5 * x * erfc(-x / EW_SQRT2); }
// x * sigmoid(2u) == 0.5 * x * (1 + tanh(u)) without the cancellation for negative x.
__device__ __forceinline__ float ew_gelu_approx(float x) {
    const float k = (float)EW_GELU_K, c = (float)EW_GELU_C;
    return x / (1.0f + expf(-(k * (x + c * x * x * x))));
}
__device__ __forceinline__ double ew_gelu_approx(double x) {
    return x / (1.0 + exp(-(EW_GELU_K * (x + EW_GELU_C * x * x * x))));
}
__device__ __forceinline__ float ew_silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ double ew_silu(double x) { return x / (1.0 + exp(-x)); }
// NaN passes through, as in PyTorch.
__device__ __forceinline__ float ew_relu(float x) { return x < 0.0f ? 0.0f : x; }
__device__ __forceinline__ double ew_relu(double x) { return x < 0.0 ? 0.0 : x; }
__device__ __forceinline__ float ew_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ double ew_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
__device__ __forceinline__ float ew_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double ew_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float ew_exp(float x) { return expf(x); }
__device__ __forceinline__ double ew_exp(double x) { return exp(x); }
__device__ __forceinline__ float ew_log(float x) { return logf(x); }
__device__ __forceinline__ double ew_log(double x) { return log(x); }
__device__ __forceinline__ float ew_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double ew_sqrt(double x) { return sqrt(x); }
// 1 / sqrt (correctly rounded pieces) rather than the approximate rsqrtf.
__device__ __forceinline__ float ew_rsqrt(float x) { return 1.0f / sqrtf(x); }
__device__ __forceinline__ double ew_rsqrt(double x) { return 1.0 / sqrt(x); }
__device__ __forceinline__ float ew_neg(float x) { return -x; }
__device__ __forceinline__ double ew_neg(double x) { return -x; }
__device__ __forceinline__ float ew_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double ew_abs(double x) { return fabs(x); }
__device__ __forceinline__ float ew_sin(float x) { return sinf(x); }
__device__ __forceinline__ double ew_sin(double x) { return sin(x); }
__device__ __forceinline__ float ew_cos(float x) { return cosf(x); }
__device__ __forceinline__ double ew_cos(double x) { return cos(x); }
__device__ __forceinline__ float ew_erf(float x) { return erff(x); }
__device__ __forceinline__ double ew_erf(double x) { return erf(x); }
// max(x, 0) + log(1 + e^-|x|): no overflow, and accurate in both tails.
__device__ __forceinline__ float ew_softplus(float x) { return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x))); }
__device__ __forceinline__ double ew_softplus(double x) { return fmax(x, 0.0) + log1p(exp(-fabs(x))); }
__device__ __forceinline__ float ew_recip(float x) { return 1.0f / x; }
__device__ __forceinline__ double ew_recip(double x) { return 1.0 / x; }
__device__ __forceinline__ float ew_square(float x) { return x * x; }
__device__ __forceinline__ double ew_square(double x) { return x * x; }

// ---- binary ops: floats (binary_f) and integers (binary_i, wrapping)
__device__ __forceinline__ float ew_add(float a, float b) { return a + b; }
__device__ __forceinline__ double ew_add(double a, double b) { return a + b; }
__device__ __forceinline__ float ew_sub(float a, float b) { return a - b; }
__device__ __forceinline__ double ew_sub(double a, double b) { return a - b; }
__device__ __forceinline__ float ew_mul(float a, float b) { return a * b; }
__device__ __forceinline__ double ew_mul(double a, double b) { return a * b; }
__device__ __forceinline__ float ew_div(float a, float b) { return a / b; }
__device__ __forceinline__ double ew_div(double a, double b) { return a / b; }
// NaN propagates, as in PyTorch's maximum/minimum (fmaxf would drop it).
__device__ __forceinline__ float ew_max(float a, float b) { return (a != a || b != b) ? a + b : fmaxf(a, b); }
__device__ __forceinline__ double ew_max(double a, double b) { return (a != a || b != b) ? a + b : fmax(a, b); }
__device__ __forceinline__ float ew_min(float a, float b) { return (a != a || b != b) ? a + b : fminf(a, b); }
__device__ __forceinline__ double ew_min(double a, double b) { return (a != a || b != b) ? a + b : fmin(a, b); }
__device__ __forceinline__ float ew_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double ew_pow(double a, double b) { return pow(a, b); }

typedef unsigned long long u64;
__device__ __forceinline__ i64 ew_add(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }
__device__ __forceinline__ i64 ew_sub(i64 a, i64 b) { return (i64)((u64)a - (u64)b); }
__device__ __forceinline__ i64 ew_mul(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }
// Truncates toward zero; x / 0 = 0; MIN / -1 wraps to MIN (Op::Binary's documented rules).
__device__ __forceinline__ i64 ew_div(i64 a, i64 b) {
    if (b == 0) return 0;
    if (b == -1) return (i64)(0ULL - (u64)a);
    return a / b;
}
__device__ __forceinline__ i64 ew_max(i64 a, i64 b) { return a > b ? a : b; }
__device__ __forceinline__ i64 ew_min(i64 a, i64 b) { return a < b ? a : b; }
// A negative exponent gives 0, except for bases 1 (-> 1) and -1 (-> +-1 by parity);
// otherwise a^b exactly, wrapping.
__device__ __forceinline__ i64 ew_pow(i64 a, i64 b) {
    if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
    u64 e = (u64)b;
    u64 base = (u64)a, r = 1;
    while (e) {
        if (e & 1) r *= base;
        base *= base;
        e >>= 1;
    }
    return (i64)r;
}

// ---- where: any nonzero condition is true (NaN included)
__device__ __forceinline__ bool ew_truthy(float c) { return c != 0.0f; }
__device__ __forceinline__ bool ew_truthy(double c) { return c != 0.0; }
__device__ __forceinline__ bool ew_truthy(i64 c) { return c != 0; }

// ---- casts: the value a step of the target dtype holds (rlx-cpu ops/scalar.rs + settle)
__device__ __forceinline__ float ew_cast_f32(float v) { return v; }
__device__ __forceinline__ float ew_cast_f32(double v) { return (float)v; }
__device__ __forceinline__ float ew_cast_f32(i64 v) { return (float)v; }
__device__ __forceinline__ float ew_cast_f16(float v) { return ew_settle_f16(v); }
// Straight from double so a half target is rounded once.
__device__ __forceinline__ float ew_cast_f16(double v) { return __half2float(__double2half(v)); }
// Through double (exact below 2^53) so the half target is rounded once.
__device__ __forceinline__ float ew_cast_f16(i64 v) { return __half2float(__double2half((double)v)); }
__device__ __forceinline__ float ew_cast_bf16(float v) { return ew_settle_bf16(v); }
__device__ __forceinline__ float ew_cast_bf16(double v) { return __bfloat162float(__double2bfloat16(v)); }
__device__ __forceinline__ float ew_cast_bf16(i64 v) { return __bfloat162float(__double2bfloat16((double)v)); }
__device__ __forceinline__ double ew_cast_f64(float v) { return (double)v; }
__device__ __forceinline__ double ew_cast_f64(double v) { return v; }
__device__ __forceinline__ double ew_cast_f64(i64 v) { return (double)v; }
// Rust's `as i64`: truncate toward zero, saturate, NaN -> 0.
__device__ __forceinline__ i64 ew_cast_i64(float v) {
    if (v != v) return 0;
    if (v >= 9.2233720368547758e18f) return EW_I64_MAX;
    if (v <= -9.2233720368547758e18f) return EW_I64_MIN;
    return (i64)v;
}
__device__ __forceinline__ i64 ew_cast_i64(double v) {
    if (v != v) return 0;
    if (v >= 9.2233720368547758e18) return EW_I64_MAX;
    if (v <= -9.2233720368547758e18) return EW_I64_MIN;
    return (i64)v;
}
__device__ __forceinline__ i64 ew_cast_i64(i64 v) { return v; }
// Float to I32 / U8 saturates to the target's range (truncating, NaN -> 0), as Rust's `as`;
// integer to a narrower integer wraps.
__device__ __forceinline__ i64 ew_cast_i32(float v) {
    if (v != v) return 0;
    if (v >= 2147483648.0f) return 2147483647LL;
    if (v <= -2147483648.0f) return -2147483648LL;
    return (i64)v;
}
__device__ __forceinline__ i64 ew_cast_i32(double v) {
    if (v != v) return 0;
    if (v >= 2147483647.0) return 2147483647LL;
    if (v <= -2147483648.0) return -2147483648LL;
    return (i64)v;
}
__device__ __forceinline__ i64 ew_cast_i32(i64 v) { return ew_settle_i32(v); }
__device__ __forceinline__ i64 ew_cast_u8(float v) { return v != v || v <= 0.0f ? 0 : v >= 255.0f ? 255 : (i64)v; }
__device__ __forceinline__ i64 ew_cast_u8(double v) { return v != v || v <= 0.0 ? 0 : v >= 255.0 ? 255 : (i64)v; }
__device__ __forceinline__ i64 ew_cast_u8(i64 v) { return ew_settle_u8(v); }
// Float to bool tests against zero (NaN is true).
__device__ __forceinline__ i64 ew_cast_bool(float v) { return v != 0.0f; }
__device__ __forceinline__ i64 ew_cast_bool(double v) { return v != 0.0; }
__device__ __forceinline__ i64 ew_cast_bool(i64 v) { return v != 0; }

// ---- FusedSwiGLU: up * silu(gate) in the input's class (rlx-cpu/src/ops/norm.rs::swiglu)
__device__ __forceinline__ float ew_swiglu(float u, float g) { return u * (g / (1.0f + expf(-g))); }
__device__ __forceinline__ double ew_swiglu(double u, double g) { return u * (g / (1.0 + exp(-g))); }
