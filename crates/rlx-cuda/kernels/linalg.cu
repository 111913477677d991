// rlx linalg kernels (see lower/linalg.rs). common.cuh is prepended.
//
// The products themselves are cuBLASLt calls; these kernels do what its epilogues cannot
// (activations other than Relu / tanh-GELU, f64) and gather broadcast batch operands whose
// strides no single strided-batch call can express.

// Math in the compute type (float for f32/f16/bf16 storage, double for f64).
#define RLX_MATH2(name, f, d) \
    __device__ __forceinline__ float name(float x) { return f(x); } \
    __device__ __forceinline__ double name(double x) { return d(x); }
RLX_MATH2(m_exp, expf, exp)
RLX_MATH2(m_log, logf, log)
RLX_MATH2(m_log1p, log1pf, log1p)
RLX_MATH2(m_sqrt, sqrtf, sqrt)
RLX_MATH2(m_tanh, tanhf, tanh)
RLX_MATH2(m_sin, sinf, sin)
RLX_MATH2(m_cos, cosf, cos)
RLX_MATH2(m_erf, erff, erf)
RLX_MATH2(m_erfc, erfcf, erfc)
RLX_MATH2(m_abs, fabsf, fabs)

// Activation ids follow `rlx_ir::Activation`'s declaration order; the formulas are the CPU
// thunk's (crates/rlx-cpu/src/ops/elementwise.rs), including its NaN behaviour.
template <typename C>
__device__ __forceinline__ C act_apply(int act, C x) {
    const C one = (C)1, zero = (C)0;
    switch (act) {
        case 0: return (C)0.5 * x * m_erfc(-x * (C)0.70710678118654752440);
        case 1: {
            const C k = (C)1.59576912160573071176;  // 2·sqrt(2/π)
            const C c = (C)0.044715;
            return x / (one + m_exp(-(k * (x + c * x * x * x))));
        }
        case 2: return x / (one + m_exp(-x));
        case 3: return x < zero ? zero : x;
        case 4: return one / (one + m_exp(-x));
        case 5: return m_tanh(x);
        case 6: return m_exp(x);
        case 7: return m_log(x);
        case 8: return m_sqrt(x);
        case 9: return one / m_sqrt(x);
        case 10: return -x;
        case 11: return m_abs(x);
        case 12: return m_sin(x);
        case 13: return m_cos(x);
        case 14: return m_erf(x);
        case 15: return (x > zero ? x : zero) + m_log1p(m_exp(-m_abs(x)));
        case 16: return one / x;
        case 17: return x * x;
        default: return x;
    }
}

__device__ __forceinline__ double ld_c(const double* p, i64 i) { return p[i]; }
__device__ __forceinline__ void st_c(double* p, i64 i, double v) { p[i] = v; }
template <typename T>
__device__ __forceinline__ float ld_c(const T* p, i64 i) { return ldf(p, i); }
template <typename T>
__device__ __forceinline__ void st_c(T* p, i64 i, float v) { stf(p, i, v); }

// c[r, j] = act(c[r, j] + bias[j]) over `rows` rows of `n`; bias may be null; act < 0: no
// activation. Threads own columns (blockIdx.x / threadIdx.x) and walk rows (blockIdx.y), so
// each keeps its bias value in a register and no thread divides an index: a 64-bit modulo
// per element made the first version compute-bound at half the memory bandwidth.
template <typename T, typename C>
__device__ void bias_act(T* c, const T* bias, i64 rows, i64 n, int act) {
    const i64 j = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    const C b = bias ? (C)ld_c(bias, j) : (C)0;
    for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
        const i64 i = r * n + j;
        C v = (C)ld_c(c, i);
        if (bias) v += b;
        if (act >= 0) v = act_apply<C>(act, v);
        st_c(c, i, v);
    }
}

// The same over quads of columns (n a multiple of four, c and bias aligned to four
// elements): one wide access per quad, so the per-element cost is the activation's math.
template <typename T>
__device__ void bias_act4(T* c, const T* bias, i64 rows, i64 n, int act) {
    const i64 j = 4 * ((i64)blockIdx.x * blockDim.x + threadIdx.x);
    if (j >= n) return;
    const float4 b = bias ? ld4f(bias + j) : make_float4(0.f, 0.f, 0.f, 0.f);
    for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
        T* p = c + r * n + j;
        float4 v = ld4f(p);
        if (bias) {
            v.x += b.x;
            v.y += b.y;
            v.z += b.z;
            v.w += b.w;
        }
        if (act >= 0) {
            v.x = act_apply<float>(act, v.x);
            v.y = act_apply<float>(act, v.y);
            v.z = act_apply<float>(act, v.z);
            v.w = act_apply<float>(act, v.w);
        }
        st4f(p, v);
    }
}

#define RLX_BIAS_ACT4(sfx, T)                                                               \
    extern "C" __global__ void mm_bias_act4_##sfx(T* c, const T* bias, i64 rows, i64 n,      \
                                                  int act) {                                \
        bias_act4<T>(c, bias, rows, n, act);                                                \
    }
RLX_FLOAT_TYPES(RLX_BIAS_ACT4)

#define RLX_BIAS_ACT(sfx, T)                                                                \
    extern "C" __global__ void mm_bias_act_##sfx(T* c, const T* bias, i64 rows, i64 n,       \
                                                 int act) {                                 \
        bias_act<T, float>(c, bias, rows, n, act);                                          \
    }
RLX_FLOAT_TYPES(RLX_BIAS_ACT)
extern "C" __global__ void mm_bias_act_f64(double* c, const double* bias, i64 rows, i64 n,
                                           int act) {
    bias_act<double, double>(c, bias, rows, n, act);
}

// dst (contiguous, `total` elements of the view's shape) = the strided view `v` of src.
// Used to materialise a broadcast batch operand; elements are moved as raw bits.
#define RLX_GATHER(name, U)                                                                 \
    extern "C" __global__ void name(const U* src, U* dst, Dims8 v, i64 total) {             \
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total;                 \
             i += (i64)gridDim.x * blockDim.x)                                              \
            dst[i] = src[dims_offset(v, i)];                                                \
    }
RLX_GATHER(mm_gather_b2, unsigned short)
RLX_GATHER(mm_gather_b4, unsigned int)
RLX_GATHER(mm_gather_b8, unsigned long long)
