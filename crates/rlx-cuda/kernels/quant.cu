// rlx quant kernels (see lower/quant.rs). common.cuh is prepended.
//
// GGUF blocks of 32 values (crates/rlx-cpu/src/quant.rs): Q8_0 = f16 d + 32 i8 (d·q);
// Q4_0 = f16 d + 16 nibble bytes (d·(q − 8)); Q4_1 = f16 d, f16 m + 16 nibble bytes (d·q + m).
// In the nibble schemes byte j holds element j (low nibble) and element j + 16 (high).
// Element `e` of a block is lane `e` of a warp, so a warp reads a block's bytes and the
// matching 32 x values coalesced.

#define Q8_0 0
#define Q4_0 1
#define Q4_1 2

// A little-endian f16 at an arbitrary (unaligned) byte address.
__device__ __forceinline__ float f16_at(const u8* p) {
    unsigned short h = (unsigned short)p[0] | ((unsigned short)p[1] << 8);
    return __half2float(__ushort_as_half(h));
}

template <int S>
__device__ __forceinline__ int block_bytes() {
    return S == Q8_0 ? 34 : (S == Q4_0 ? 18 : 20);
}

// Element e (0..31) of the block at `b`.
template <int S>
__device__ __forceinline__ float dq_elem(const u8* b, int e) {
    float d = f16_at(b);
    if (S == Q8_0) return d * (float)(signed char)b[2 + e];
    int off = S == Q4_0 ? 2 : 4;
    unsigned byte = b[off + (e & 15)];
    int q = e < 16 ? (int)(byte & 15u) : (int)(byte >> 4);
    if (S == Q4_0) return d * (float)(q - 8);
    return d * (float)q + f16_at(b + 2);
}

#define GEMV_MAX_M 8

// y[m, n] = Σ_k x[m, k] · W[n, k] for m < M ≤ 8: one warp per n, 8 warps a block.
template <int S, typename T>
__device__ void dq_gemv(const T* x, const u8* w, T* y, int M, i64 N, i64 K) {
    const int lane = threadIdx.x & 31;
    const i64 n = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (n >= N) return;
    const i64 nb = K >> 5;
    const u8* row = w + n * nb * block_bytes<S>();
    float acc[GEMV_MAX_M];
#pragma unroll
    for (int m = 0; m < GEMV_MAX_M; ++m) acc[m] = 0.f;
#pragma unroll 4
    for (i64 kb = 0; kb < nb; ++kb) {
        float wv = dq_elem<S>(row + kb * block_bytes<S>(), lane);
        i64 xk = kb * 32 + lane;
#pragma unroll
        for (int m = 0; m < GEMV_MAX_M; ++m)
            if (m < M) acc[m] += wv * ldf(x, (i64)m * K + xk);
    }
#pragma unroll
    for (int m = 0; m < GEMV_MAX_M; ++m) {
        if (m < M) {
            float v = warp_sum(acc[m]);
            if (lane == 0) stf(y, (i64)m * N + n, v);
        }
    }
}

// out[r, k] = W[r, k] for `rows` rows of K values (a chunk of the weight, row-major).
template <int S, typename T>
__device__ void dq_dequant(const u8* w, T* out, i64 rows, i64 K) {
    const i64 nb = K >> 5, total = rows * K;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (i64)gridDim.x * blockDim.x) {
        i64 r = i / K, kk = i - r * K;
        const u8* b = w + (r * nb + (kk >> 5)) * block_bytes<S>();
        stf(out, i, dq_elem<S>(b, (int)(kk & 31)));
    }
}

#define RLX_DQ(sfx, T)                                                                       \
    extern "C" __global__ void dq_gemv_q8_0_##sfx(const T* x, const u8* w, T* y, int M,       \
                                                  i64 N, i64 K) {                            \
        dq_gemv<Q8_0, T>(x, w, y, M, N, K);                                                  \
    }                                                                                        \
    extern "C" __global__ void dq_gemv_q4_0_##sfx(const T* x, const u8* w, T* y, int M,       \
                                                  i64 N, i64 K) {                            \
        dq_gemv<Q4_0, T>(x, w, y, M, N, K);                                                  \
    }                                                                                        \
    extern "C" __global__ void dq_gemv_q4_1_##sfx(const T* x, const u8* w, T* y, int M,       \
                                                  i64 N, i64 K) {                            \
        dq_gemv<Q4_1, T>(x, w, y, M, N, K);                                                  \
    }                                                                                        \
    extern "C" __global__ void dq_dequant_q8_0_##sfx(const u8* w, T* out, i64 rows, i64 K) { \
        dq_dequant<Q8_0, T>(w, out, rows, K);                                                \
    }                                                                                        \
    extern "C" __global__ void dq_dequant_q4_0_##sfx(const u8* w, T* out, i64 rows, i64 K) { \
        dq_dequant<Q4_0, T>(w, out, rows, K);                                                \
    }                                                                                        \
    extern "C" __global__ void dq_dequant_q4_1_##sfx(const u8* w, T* out, i64 rows, i64 K) { \
        dq_dequant<Q4_1, T>(w, out, rows, K);                                                \
    }
RLX_FLOAT_TYPES(RLX_DQ)
