// Prepended to every rlx kernel source (hand-written and generated). Storage types are
// float / __half / __nv_bfloat16 (and double, long long, int, unsigned char for the ops
// that take them); arithmetic on half types happens in f32.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

typedef long long i64;
typedef unsigned char u8;
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

// Shape and element strides of a tensor view, rank <= 8. A broadcast dim has stride 0.
struct Dims8 {
    int rank;
    int pad_;
    i64 d[8];
    i64 s[8];
};

__device__ __forceinline__ float ldf(const float* p, i64 i) { return p[i]; }
__device__ __forceinline__ float ldf(const __half* p, i64 i) { return __half2float(p[i]); }
__device__ __forceinline__ float ldf(const __nv_bfloat16* p, i64 i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float ldf(const double* p, i64 i) { return (float)p[i]; }
__device__ __forceinline__ void stf(float* p, i64 i, float v) { p[i] = v; }
__device__ __forceinline__ void stf(__half* p, i64 i, float v) { p[i] = __float2half_rn(v); }
__device__ __forceinline__ void stf(__nv_bfloat16* p, i64 i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ __forceinline__ void stf(double* p, i64 i, float v) { p[i] = (double)v; }
// Four consecutive elements as a float4 (p aligned to four elements: 16 B for f32, 8 B for
// the half types), and back, rounding to nearest.
__device__ __forceinline__ float4 ld4f(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float4 ld4f(const __half* p) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&u.x));
    const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&u.y));
    return make_float4(a.x, a.y, b.x, b.y);
}
__device__ __forceinline__ float4 ld4f(const __nv_bfloat16* p) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
    return make_float4(a.x, a.y, b.x, b.y);
}
__device__ __forceinline__ void st4f(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
__device__ __forceinline__ void st4f(__half* p, float4 v) {
    __half2 a = __floats2half2_rn(v.x, v.y), b = __floats2half2_rn(v.z, v.w);
    uint2 u;
    u.x = *reinterpret_cast<unsigned*>(&a);
    u.y = *reinterpret_cast<unsigned*>(&b);
    *reinterpret_cast<uint2*>(p) = u;
}
__device__ __forceinline__ void st4f(__nv_bfloat16* p, float4 v) {
    __nv_bfloat162 a = __floats2bfloat162_rn(v.x, v.y), b = __floats2bfloat162_rn(v.z, v.w);
    uint2 u;
    u.x = *reinterpret_cast<unsigned*>(&a);
    u.y = *reinterpret_cast<unsigned*>(&b);
    *reinterpret_cast<uint2*>(p) = u;
}

// Offset of the element with row-major linear index `lin` of shape `v.d` in a view with
// strides `v.s`.
__device__ __forceinline__ i64 dims_offset(const Dims8& v, i64 lin) {
    i64 off = 0;
    for (int k = v.rank - 1; k >= 0; --k) {
        i64 q = lin / v.d[k];
        off += (lin - q * v.d[k]) * v.s[k];
        lin = q;
    }
    return off;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ double warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Block-wide sum / max; every thread gets the result. `sh` holds >= 32 floats. Must be
// called by all threads of the block.
__device__ __forceinline__ float block_sum(float v, float* sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = (threadIdx.x < nw) ? sh[threadIdx.x] : 0.f;
    if (w == 0) v = warp_sum(v);
    if (threadIdx.x == 0) sh[0] = v;
    __syncthreads();
    return sh[0];
}
__device__ __forceinline__ float block_max(float v, float* sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    v = (threadIdx.x < nw) ? sh[threadIdx.x] : -INFINITY;
    if (w == 0) v = warp_max(v);
    if (threadIdx.x == 0) sh[0] = v;
    __syncthreads();
    return sh[0];
}

// RoPE's a*c ∓ b*s rounded like the CPU (no FMA contraction), so f32 results match bit for
// bit (shape_ops.cu's Rope kernels, attention.cu's fused decode).
__device__ __forceinline__ float mul_sub(float a, float c, float b, float s) {
    return __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
}
__device__ __forceinline__ float mul_add(float a, float c, float b, float s) {
    return __fadd_rn(__fmul_rn(a, c), __fmul_rn(b, s));
}

// PDL (programmatic dependent launch, sm_90): wait for the previous kernel's results, and let
// the next kernel's blocks start early. Both are no-ops for a kernel launched without the
// attribute. A kernel launched with it (`plan::Launch::pdl`) calls pdl_wait() in every thread
// before it reads what an earlier kernel wrote or writes anything.
__device__ __forceinline__ void pdl_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_next() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// Instantiate a kernel template body for the three float storage types. `X(sfx, T)` is
// a macro the source defines; kernels are named `<name>_<sfx>` (f32, f16, bf16).
#define RLX_FLOAT_TYPES(X) X(f32, float) X(f16, __half) X(bf16, __nv_bfloat16)

// Library shards (kernels/mod.rs: Lib::shard_tags, Lib::shard_of): a big library's
// instantiations sit inside RLX_GATE_<tag>(…) — quant's by weight scheme (`base` for the
// scheme-free kernels), attention's by float type — and a shard's text defines RLX_SHARD
// with its own gates, keeping only its tag's kernels, so a model compiles the few it launches
// (in parallel) instead of the whole library. The whole library keeps every instantiation.
#ifndef RLX_SHARD
#define RLX_GATE_base(...) __VA_ARGS__
#define RLX_GATE_f32(...) __VA_ARGS__
#define RLX_GATE_f16(...) __VA_ARGS__
#define RLX_GATE_bf16(...) __VA_ARGS__
#define RLX_GATE_q8_0(...) __VA_ARGS__
#define RLX_GATE_q4_0(...) __VA_ARGS__
#define RLX_GATE_q4_1(...) __VA_ARGS__
#define RLX_GATE_q5_0(...) __VA_ARGS__
#define RLX_GATE_q5_1(...) __VA_ARGS__
#define RLX_GATE_q4_k(...) __VA_ARGS__
#define RLX_GATE_q5_k(...) __VA_ARGS__
#define RLX_GATE_q6_k(...) __VA_ARGS__
#define RLX_GATE_q8_0p(...) __VA_ARGS__
#define RLX_GATE_q4_0p(...) __VA_ARGS__
#define RLX_GATE_q4_1p(...) __VA_ARGS__
#define RLX_GATE_q5_0p(...) __VA_ARGS__
#define RLX_GATE_q5_1p(...) __VA_ARGS__
#endif
// RLX_FLOAT_TYPES with each type behind its gate (the libraries sharded by float type).
#define RLX_TYPE_SHARDS(X) RLX_GATE_f32(X(f32, float)) RLX_GATE_f16(X(f16, __half)) RLX_GATE_bf16(X(bf16, __nv_bfloat16))
