// rlx norm kernels (see lower/norm.rs). common.cuh is prepended.
//
// One kernel family covers LayerNorm, RmsNorm and their fused-residual forms: the row value
// is x (+ residual) (+ bias), normalised by its own mean / variance (layer) or mean square
// (rms), then scaled by gamma and shifted by beta. Statistics accumulate in f32 and the
// variance is two-pass (sum of squared deviations from the mean), which stays accurate
// where E[x²] − E[x]² would cancel.
//
// Threads are grouped per row: WARP mode runs one warp per row (blockDim = 32 x rows per
// block) for rows up to 1024 long; block mode runs one block per row. Each thread keeps its
// VPT values of the row in registers (VPT = 0: the row is too long, so every pass re-reads
// it from global memory, where it stays L1/L2 resident).

// Row value j: x (+ residual) (+ bias), added in the order the CPU reference adds them.
// xr / rr point at the row; in-row offsets fit in 32 bits.
template <typename T>
__device__ __forceinline__ float norm_in(const T* __restrict__ xr, const T* __restrict__ rr,
                                         const T* __restrict__ b, int j) {
    float v = ldf(xr, j);
    if (rr) v += ldf(rr, j);
    if (b) v += ldf(b, j);
    return v;
}

template <bool WARP>
__device__ __forceinline__ float grp_sum(float v, float* sh) {
    if (WARP) return warp_sum(v);
    return block_sum(v, sh);
}

template <typename T, int VPT, bool WARP>
__device__ __forceinline__ void norm_rows(const T* __restrict__ x, const T* __restrict__ r,
                                          const T* __restrict__ b, const T* __restrict__ g,
                                          const T* __restrict__ be, T* __restrict__ y, i64 rows,
                                          i64 len64, float eps, int rms) {
    __shared__ float sh[32];
    const int t = threadIdx.x;
    const int G = blockDim.x;
    const int len = (int)len64;
    const i64 row0 = WARP ? (i64)blockIdx.x * blockDim.y + threadIdx.y : (i64)blockIdx.x;
    const i64 rstep = WARP ? (i64)gridDim.x * blockDim.y : (i64)gridDim.x;
    const float inv_n = 1.0f / (float)len;
    for (i64 row = row0; row < rows; row += rstep) {
        const T* xr = x + row * len64;
        const T* rr = r ? r + row * len64 : r;
        T* yr = y + row * len64;
        float v[VPT > 0 ? VPT : 1];
        float s = 0.f;
        if (VPT > 0) {
#pragma unroll
            for (int k = 0; k < VPT; ++k) {
                const int j = t + k * G;
                v[k] = j < len ? norm_in(xr, rr, b, j) : 0.f;
                s += v[k];
            }
        } else {
            for (int j = t; j < len; j += G) s += norm_in(xr, rr, b, j);
        }
        float mean = 0.f;
        if (!rms) mean = grp_sum<WARP>(s, sh) * inv_n;
        float q = 0.f;
        if (VPT > 0) {
#pragma unroll
            for (int k = 0; k < VPT; ++k) {
                const float d = v[k] - mean;
                if (t + k * G < len) q += d * d;
            }
        } else {
            for (int j = t; j < len; j += G) {
                const float d = norm_in(xr, rr, b, j) - mean;
                q += d * d;
            }
        }
        const float var = grp_sum<WARP>(q, sh) * inv_n;
        const float rstd = 1.0f / sqrtf(var + eps);
        if (VPT > 0) {
#pragma unroll
            for (int k = 0; k < VPT; ++k) {
                const int j = t + k * G;
                if (j < len) {
                    float o = (v[k] - mean) * rstd * ldf(g, j);
                    if (be) o += ldf(be, j);
                    stf(yr, j, o);
                }
            }
        } else {
            for (int j = t; j < len; j += G) {
                float o = (norm_in(xr, rr, b, j) - mean) * rstd * ldf(g, j);
                if (be) o += ldf(be, j);
                stf(yr, j, o);
            }
        }
    }
}

// norm_w<VPT>_<sfx>: warp per row (blockDim 32 x k), rows up to 32·VPT long (VPT <= 16:
// a warp caching 32 values a lane needs ~170 registers, which starves occupancy).
// norm_b<VPT>_<sfx>: block per row, rows up to blockDim·VPT long (VPT 0: any length).
#define RLX_NORM_KERNEL(sfx, T, VPT, WARP, NAME, BOUND)                                     \
    extern "C" __global__ void __launch_bounds__(BOUND)                                     \
        NAME##_##sfx(const T* x, const T* r, const T* b, const T* g, const T* be, T* y,    \
                     i64 rows, i64 len, float eps, int rms) {                               \
        norm_rows<T, VPT, WARP>(x, r, b, g, be, y, rows, len, eps, rms);                    \
    }
#define RLX_NORM(sfx, T)                                \
    RLX_NORM_KERNEL(sfx, T, 1, true, norm_w1, 256)      \
    RLX_NORM_KERNEL(sfx, T, 2, true, norm_w2, 256)      \
    RLX_NORM_KERNEL(sfx, T, 4, true, norm_w4, 256)      \
    RLX_NORM_KERNEL(sfx, T, 8, true, norm_w8, 256)      \
    RLX_NORM_KERNEL(sfx, T, 16, true, norm_w16, 256)    \
    RLX_NORM_KERNEL(sfx, T, 4, false, norm_b4, 1024)    \
    RLX_NORM_KERNEL(sfx, T, 8, false, norm_b8, 1024)    \
    RLX_NORM_KERNEL(sfx, T, 16, false, norm_b16, 1024)  \
    RLX_NORM_KERNEL(sfx, T, 0, false, norm_b0, 1024)
RLX_FLOAT_TYPES(RLX_NORM)

// norm_v<V>_<sfx>: the warp-per-row form for rows of len = 4k <= 128·V elements with every
// pointer aligned to four elements. Each lane moves four elements per access (V accesses a
// lane per tensor), which cuts the instruction count of the scalar form by about four: that
// form was latency-bound (Nsight Compute on the H200: 21 cycles per issued instruction,
// 70 % of them waiting on loads, 390 GB/s on MiniLM's 4096 x 384 rows).
__device__ __forceinline__ float4 add4(float4 a, float4 b) {
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

template <typename T, int V>
__device__ __forceinline__ void norm_rows_vec(const T* __restrict__ x, const T* __restrict__ r,
                                              const T* __restrict__ b, const T* __restrict__ g,
                                              const T* __restrict__ be, T* __restrict__ y,
                                              i64 rows, i64 len64, float eps, int rms) {
    const int lane = threadIdx.x;
    const int n4 = (int)(len64 >> 2);
    const i64 rstep = (i64)gridDim.x * blockDim.y;
    const float inv_n = 1.0f / (float)len64;
    for (i64 row = (i64)blockIdx.x * blockDim.y + threadIdx.y; row < rows; row += rstep) {
        const T* xr = x + row * len64;
        const T* rr = r ? r + row * len64 : r;
        T* yr = y + row * len64;
        float4 v[V];
        float s = 0.f;
#pragma unroll
        for (int k = 0; k < V; ++k) {
            const int e = 4 * (lane + 32 * k);
            v[k] = make_float4(0.f, 0.f, 0.f, 0.f);
            if (e < 4 * n4) {
                float4 a = ld4f(xr + e);
                if (rr) a = add4(a, ld4f(rr + e));
                if (b) a = add4(a, ld4f(b + e));
                v[k] = a;
                s += (a.x + a.y) + (a.z + a.w);
            }
        }
        const float mean = rms ? 0.f : warp_sum(s) * inv_n;
        float q = 0.f;
#pragma unroll
        for (int k = 0; k < V; ++k) {
            if (4 * (lane + 32 * k) < 4 * n4) {
                const float dx = v[k].x - mean, dy = v[k].y - mean;
                const float dz = v[k].z - mean, dw = v[k].w - mean;
                q += (dx * dx + dy * dy) + (dz * dz + dw * dw);
            }
        }
        const float rstd = 1.0f / sqrtf(warp_sum(q) * inv_n + eps);
#pragma unroll
        for (int k = 0; k < V; ++k) {
            const int e = 4 * (lane + 32 * k);
            if (e < 4 * n4) {
                const float4 gv = ld4f(g + e);
                float4 o = make_float4((v[k].x - mean) * rstd * gv.x, (v[k].y - mean) * rstd * gv.y,
                                       (v[k].z - mean) * rstd * gv.z, (v[k].w - mean) * rstd * gv.w);
                if (be) o = add4(o, ld4f(be + e));
                st4f(yr + e, o);
            }
        }
    }
}

#define RLX_NORM_VEC_KERNEL(sfx, T, V)                                                       \
    extern "C" __global__ void __launch_bounds__(256)                                        \
        norm_v##V##_##sfx(const T* x, const T* r, const T* b, const T* g, const T* be, T* y, \
                          i64 rows, i64 len, float eps, int rms) {                           \
        norm_rows_vec<T, V>(x, r, b, g, be, y, rows, len, eps, rms);                         \
    }
#define RLX_NORM_VEC(sfx, T)                                                                 \
    RLX_NORM_VEC_KERNEL(sfx, T, 1)                                                           \
    RLX_NORM_VEC_KERNEL(sfx, T, 2)                                                           \
    RLX_NORM_VEC_KERNEL(sfx, T, 4)                                                           \
    RLX_NORM_VEC_KERNEL(sfx, T, 8)
RLX_FLOAT_TYPES(RLX_NORM_VEC)

// norm_split_v<V>_<sfx>_<wsfx>: the RMS norm of norm_v<V> (same sums, same rounding to T)
// with the strict product's input split as its epilogue (quant.cu's dq_split_in): the row
// scaled by the power of two that puts its largest |value| in [2^13, 2^14), then `parts` half
// parts, part p of row r at h row p·rows + r, inv[r] the scale's inverse. One launch instead
// of the norm's and the split's, and no [rows, len] scratch between them: the bytes of
// norm_v<V> then dq_split_in.
template <typename T, typename W, int V>
__device__ __forceinline__ void norm_split_rows(const T* __restrict__ x, const T* __restrict__ g,
                                                W* __restrict__ h, float* __restrict__ inv,
                                                i64 rows, i64 len64, float eps, int parts) {
    const int lane = threadIdx.x;
    const int n4 = (int)(len64 >> 2);
    const i64 rstep = (i64)gridDim.x * blockDim.y;
    const float inv_n = 1.0f / (float)len64;
    for (i64 row = (i64)blockIdx.x * blockDim.y + threadIdx.y; row < rows; row += rstep) {
        const T* xr = x + row * len64;
        float4 v[V];
        float q = 0.f;
#pragma unroll
        for (int k = 0; k < V; ++k) {
            const int e = 4 * (lane + 32 * k);
            v[k] = make_float4(0.f, 0.f, 0.f, 0.f);
            if (e < 4 * n4) {
                const float4 a = ld4f(xr + e);
                v[k] = a;
                q += (a.x * a.x + a.y * a.y) + (a.z * a.z + a.w * a.w);
            }
        }
        const float rstd = 1.0f / sqrtf(warp_sum(q) * inv_n + eps);
        float mx = 0.f;
#pragma unroll
        for (int k = 0; k < V; ++k) {
            const int e = 4 * (lane + 32 * k);
            if (e < 4 * n4) {
                const float4 gv = ld4f(g + e);
                const float4 o = make_float4(v[k].x * rstd * gv.x, v[k].y * rstd * gv.y,
                                             v[k].z * rstd * gv.z, v[k].w * rstd * gv.w);
                // The norm's output as norm_v<V> stores it.
                __align__(16) T t[4];
                st4f(t, o);
                v[k] = ld4f(t);
                mx = fmaxf(mx, fmaxf(fmaxf(fabsf(v[k].x), fabsf(v[k].y)),
                                     fmaxf(fabsf(v[k].z), fabsf(v[k].w))));
            }
        }
        mx = warp_max(mx);
        const int sc = mx > 0.f && isfinite(mx) ? min(max(13 - ilogbf(mx), -120), 120) : 0;
        const float s = ldexpf(1.f, sc);
        if (lane == 0) inv[row] = ldexpf(1.f, -sc);
#pragma unroll
        for (int k = 0; k < V; ++k) {
            const int e = 4 * (lane + 32 * k);
            if (e < 4 * n4) {
                const float vals[4] = {v[k].x, v[k].y, v[k].z, v[k].w};
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    float left = vals[c] * s;
                    for (int p = 0; p < parts; ++p) {
                        W* dst = h + (p * rows + row) * len64 + e + c;
                        stf(dst, 0, left);
                        left -= ldf(dst, 0);
                    }
                }
            }
        }
    }
}

#define RLX_NORM_SPLIT_KERNEL(sfx, T, wsfx, W, V)                                            \
    extern "C" __global__ void __launch_bounds__(256)                                        \
        norm_split_v##V##_##sfx##_##wsfx(const T* x, const T* g, W* h, float* inv, i64 rows, \
                                         i64 len, float eps, int parts) {                    \
        norm_split_rows<T, W, V>(x, g, h, inv, rows, len, eps, parts);                       \
    }
#define RLX_NORM_SPLIT_W(sfx, T, wsfx, W)                                                    \
    RLX_NORM_SPLIT_KERNEL(sfx, T, wsfx, W, 1) RLX_NORM_SPLIT_KERNEL(sfx, T, wsfx, W, 2)      \
    RLX_NORM_SPLIT_KERNEL(sfx, T, wsfx, W, 4) RLX_NORM_SPLIT_KERNEL(sfx, T, wsfx, W, 8)
#define RLX_NORM_SPLIT(sfx, T)                                                               \
    RLX_NORM_SPLIT_W(sfx, T, f16, __half) RLX_NORM_SPLIT_W(sfx, T, bf16, __nv_bfloat16)
RLX_FLOAT_TYPES(RLX_NORM_SPLIT)
