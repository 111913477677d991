// rlx quant kernels (see lower/linalg_quant.rs). common.cuh is prepended.
//
// GGUF blocks, byte layouts as crates/rlx-cpu/src/quant/{legacy,kquants}.rs state them.
// 32-value blocks: Q8_0 = f16 d + 32 i8 (d·q); Q4_0 = f16 d + 16 nibble bytes (d·(q − 8));
// Q4_1 = f16 d, f16 m + 16 nibble bytes (d·q + m); Q5_0 / Q5_1 add a u32 of fifth bits
// (bit e for element e) after the header (d·(q − 16), d·q + m). In the nibble schemes byte j
// holds element j (low nibble) and element j + 16 (high).
// 256-value super-blocks: Q4_K / Q5_K = f16 d, f16 dmin, 12 bytes of 6-bit sub-block scales
// and mins, (Q5_K: 32 bytes of fifth bits), 128 nibble bytes (d·sc·q − dmin·m); Q6_K = 128
// bytes low nibbles, 64 bytes 2-bit highs, 16 i8 scales, f16 d (d·sc·(q − 32)).

#define Q8_0 0
#define Q4_0 1
#define Q4_1 2
#define Q5_0 3
#define Q5_1 4
#define Q4_K 5
#define Q5_K 6
#define Q6_K 7

// A little-endian f16 at an arbitrary (unaligned) byte address.
__device__ __forceinline__ float f16_at(const u8* p) {
    unsigned short h = (unsigned short)p[0] | ((unsigned short)p[1] << 8);
    return __half2float(__ushort_as_half(h));
}

// A little-endian u32 at an arbitrary (unaligned) byte address.
__device__ __forceinline__ unsigned u32_at(const u8* p) {
    return (unsigned)p[0] | ((unsigned)p[1] << 8) | ((unsigned)p[2] << 16) |
           ((unsigned)p[3] << 24);
}

template <int S>
__device__ __forceinline__ int block_bytes() {
    return S == Q8_0   ? 34
           : S == Q4_0 ? 18
           : S == Q4_1 ? 20
           : S == Q5_0 ? 22
           : S == Q5_1 ? 24
           : S == Q4_K ? 144
           : S == Q5_K ? 176
                       : 210;
}

template <int S>
__device__ __forceinline__ int block_len() {
    return S >= Q4_K ? 256 : 32;
}

// The 4-bit quant of element e (0..31) of a 32-value nibble block.
__device__ __forceinline__ int nib32(const u8* qs, int e) {
    unsigned byte = qs[e & 15];
    return e < 16 ? (int)(byte & 15u) : (int)(byte >> 4);
}

// Sub-block j's 6-bit scale and min of a Q4_K / Q5_K super-block (ggml's get_scale_min_k4).
__device__ __forceinline__ void k_scale_min(const u8* s, int j, int& sc, int& m) {
    if (j < 4) {
        sc = s[j] & 63;
        m = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

// Element e (0..block_len − 1) of the block at `b`. Every product is exact in f32 and the
// type-1 sums round once (an FMA gives the same), so values match the CPU's bit for bit.
template <int S>
__device__ __forceinline__ float dq_elem(const u8* b, int e) {
    if (S == Q8_0) return f16_at(b) * (float)(signed char)b[2 + e];
    if (S == Q4_0) return f16_at(b) * (float)(nib32(b + 2, e) - 8);
    if (S == Q4_1) return f16_at(b) * (float)nib32(b + 4, e) + f16_at(b + 2);
    if (S == Q5_0) {
        int q = nib32(b + 6, e) | (int)(((u32_at(b + 2) >> e) & 1u) << 4);
        return f16_at(b) * (float)(q - 16);
    }
    if (S == Q5_1) {
        int q = nib32(b + 8, e) | (int)(((u32_at(b + 4) >> e) & 1u) << 4);
        return f16_at(b) * (float)q + f16_at(b + 2);
    }
    if (S == Q4_K || S == Q5_K) {
        const int j = e >> 5, l = e & 31;
        const u8* qs = b + (S == Q5_K ? 48 : 16);
        unsigned byte = qs[32 * (e >> 6) + l];
        int q = (j & 1) ? (int)(byte >> 4) : (int)(byte & 15u);
        if (S == Q5_K) q |= ((b[16 + l] >> j) & 1) << 4;
        int sc, m;
        k_scale_min(b + 4, j, sc, m);
        return (f16_at(b) * (float)sc) * (float)q - f16_at(b + 2) * (float)m;
    }
    // Q6_K: half h, quarter g, lane l.
    const int h = e >> 7, g = (e >> 5) & 3, l = e & 31;
    unsigned lo_byte = b[64 * h + 32 * (g & 1) + l];
    int lo = g < 2 ? (int)(lo_byte & 15u) : (int)(lo_byte >> 4);
    int hi = (b[128 + 32 * h + l] >> (2 * g)) & 3;
    float sc = (float)(signed char)b[192 + 8 * h + 2 * g + (l >> 4)];
    return (f16_at(b + 208) * sc) * (float)((lo | (hi << 4)) - 32);
}

// Element kk of a packed row.
template <int S>
__device__ __forceinline__ float dq_row_elem(const u8* row, i64 kk) {
    return dq_elem<S>(row + (kk / block_len<S>()) * block_bytes<S>(), (int)(kk % block_len<S>()));
}

#define GEMV_MAX_M 8
// Values one lane decodes per step: 8 consecutive elements of one block, so a warp covers 256
// values a step (eight 32-value blocks or one super-block) with every load of the step
// independent of the others — the warp is bound by memory-level parallelism, not by a chain
// of one dependent block read per 32 values.
#define GEMV_VPL 8

// y[m, n] = Σ_k h[m, k] · W[n, k] (+ res[m, n] when res is not null) for m < M ≤ 8: one
// warp per n, 2–8 warps a block. h is x, or rms_norm(x)·gamma over the row when gamma is not
// null: each warp takes the row's mean square itself (K values it reads anyway, from L1), so
// the norm costs no launch and no round trip through memory.
template <int S, typename T>
__device__ void dq_gemv(const T* x, const u8* w, T* y, const T* gamma, const T* res, int M,
                        i64 N, i64 K, float eps) {
    const int lane = threadIdx.x & 31;
    const i64 n = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (n >= N) return;
    const u8* row = w + n * (K / block_len<S>()) * block_bytes<S>();
    float acc[GEMV_MAX_M], scale[GEMV_MAX_M];
#pragma unroll
    for (int m = 0; m < GEMV_MAX_M; ++m) {
        acc[m] = 0.f;
        scale[m] = 1.f;
        if (gamma != nullptr && m < M) {
            float ss = 0.f;
            for (i64 k = lane; k < K; k += 32) {
                float v = ldf(x, (i64)m * K + k);
                ss = fmaf(v, v, ss);
            }
            scale[m] = rsqrtf(warp_sum(ss) / (float)K + eps);
        }
    }
    // K is a whole number of blocks, hence of 8-value runs: a lane's run is all in or all out.
#pragma unroll 2
    for (i64 k0 = (i64)lane * GEMV_VPL; k0 < K; k0 += 32 * GEMV_VPL) {
        const u8* blk = row + (k0 / block_len<S>()) * block_bytes<S>();
        const int e0 = (int)(k0 % block_len<S>());
        float wv[GEMV_VPL];
#pragma unroll
        for (int j = 0; j < GEMV_VPL; ++j) wv[j] = dq_elem<S>(blk, e0 + j);
        if (gamma != nullptr) {
#pragma unroll
            for (int j = 0; j < GEMV_VPL; ++j) wv[j] *= ldf(gamma, k0 + j);
        }
#pragma unroll
        for (int m = 0; m < GEMV_MAX_M; ++m) {
            if (m < M) {
                const T* xm = x + (i64)m * K + k0;
                float part = 0.f;
#pragma unroll
                for (int j = 0; j < GEMV_VPL; ++j) part = fmaf(wv[j], ldf(xm, j), part);
                acc[m] = fmaf(part, scale[m], acc[m]);
            }
        }
    }
#pragma unroll
    for (int m = 0; m < GEMV_MAX_M; ++m) {
        if (m < M) {
            float v = warp_sum(acc[m]);
            if (lane == 0) {
                if (res != nullptr) v += ldf(res, (i64)m * N + n);
                stf(y, (i64)m * N + n, v);
            }
        }
    }
}

// out[r, k] = W[r, k] for `rows` rows of K values (a chunk of the weight, row-major).
template <int S, typename T>
__device__ void dq_dequant(const u8* w, T* out, i64 rows, i64 K) {
    const i64 rb = (K / block_len<S>()) * block_bytes<S>(), total = rows * K;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (i64)gridDim.x * blockDim.x) {
        i64 r = i / K, kk = i - r * K;
        stf(out, i, dq_row_elem<S>(w + r * rb, kk));
    }
}

#define RLX_DQ_ONE(name, S, sfx, T)                                                          \
    extern "C" __global__ void dq_gemv_##name##_##sfx(const T* x, const u8* w, T* y,          \
                                                      const T* gamma, const T* res, int M,   \
                                                      i64 N, i64 K, float eps) {             \
        dq_gemv<S, T>(x, w, y, gamma, res, M, N, K, eps);                                    \
    }                                                                                        \
    extern "C" __global__ void dq_dequant_##name##_##sfx(const u8* w, T* out, i64 rows,       \
                                                         i64 K) {                            \
        dq_dequant<S, T>(w, out, rows, K);                                                   \
    }
#define RLX_DQ(sfx, T)                                                                       \
    RLX_DQ_ONE(q8_0, Q8_0, sfx, T)                                                           \
    RLX_DQ_ONE(q4_0, Q4_0, sfx, T)                                                           \
    RLX_DQ_ONE(q4_1, Q4_1, sfx, T)                                                           \
    RLX_DQ_ONE(q5_0, Q5_0, sfx, T)                                                           \
    RLX_DQ_ONE(q5_1, Q5_1, sfx, T)                                                           \
    RLX_DQ_ONE(q4_k, Q4_K, sfx, T)                                                           \
    RLX_DQ_ONE(q5_k, Q5_K, sfx, T)                                                           \
    RLX_DQ_ONE(q6_k, Q6_K, sfx, T)
RLX_FLOAT_TYPES(RLX_DQ)
