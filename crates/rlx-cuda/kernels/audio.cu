// rlx audio kernels (see lower/audio.rs). common.cuh is prepended.

__device__ __forceinline__ double ld_d(const double* p, i64 i) { return p[i]; }
__device__ __forceinline__ void st_d(double* p, i64 i, double v) { p[i] = v; }
template <typename T>
__device__ __forceinline__ double ld_d(const T* p, i64 i) { return (double)ldf(p, i); }
template <typename T>
__device__ __forceinline__ void st_d(T* p, i64 i, double v) { stf(p, i, (float)v); }

__device__ __forceinline__ void twiddle(int r, int n, float* s, float* c) {
    sincospif((float)(2 * r) / (float)n, s, c);
}
__device__ __forceinline__ void twiddle(int r, int n, double* s, double* c) {
    sincospi((double)(2 * r) / (double)n, s, c);
}

extern __shared__ double audio_smem[];

// Direct DFT over axis -2 of `[items, n, 2]`, one thread per output bin, any n. The twiddle
// of term j for bin k is taken at r = (j·k) mod n, kept exact by stepping r += k, so large n
// loses nothing to angle growth; sums are in double. With `table`, the n twiddles are
// computed once per block into shared memory (2·n·sizeof(W) bytes of dynamic smem).
template <typename T, typename W>
__device__ void dft(const T* x, T* y, i64 items, int n, int inverse, double scale, int table) {
    W* tc = (W*)audio_smem;
    W* ts = tc + n;
    if (table) {
        for (int r = threadIdx.x; r < n; r += blockDim.x) twiddle(r, n, &ts[r], &tc[r]);
        __syncthreads();
    }
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) return;
    const double sg = inverse ? 1.0 : -1.0;
    for (i64 it = blockIdx.y; it < items; it += gridDim.y) {
        const T* xi = x + it * 2 * n;
        double re = 0.0, im = 0.0;
        int r = 0;
        for (int j = 0; j < n; ++j) {
            W c, s;
            if (table) {
                c = tc[r];
                s = ts[r];
            } else {
                twiddle(r, n, &s, &c);
            }
            double xr = ld_d(xi, 2 * (i64)j), xm = ld_d(xi, 2 * (i64)j + 1);
            double sd = sg * (double)s, cd = (double)c;
            re += xr * cd - xm * sd;
            im += xr * sd + xm * cd;
            r += k;
            if (r >= n) r -= n;
        }
        st_d(y, it * 2 * n + 2 * (i64)k, re * scale);
        st_d(y, it * 2 * n + 2 * (i64)k + 1, im * scale);
    }
}

#define RLX_FFT(sfx, T)                                                                       \
    extern "C" __global__ void fft_dft_##sfx(const T* x, T* y, i64 items, int n, int inverse, \
                                             double scale, int table) {                      \
        dft<T, float>(x, y, items, n, inverse, scale, table);                                 \
    }
RLX_FLOAT_TYPES(RLX_FFT)
extern "C" __global__ void fft_dft_f64(const double* x, double* y, i64 items, int n,
                                       int inverse, double scale, int table) {
    dft<double, double>(x, y, items, n, inverse, scale, table);
}

// ---- LogMel: m = spec·fb (f32 scratch), per-item max of log10(max(m, 1e-10)), then the
// Whisper transform; the backward reuses m and the max.

#define MEL_TILE 16

// C[it, r, c] = Σ_q A[it·sa + r·ars + q·acs] · B[q·brs + c·bcs], r < R, c < Cn, q < Q;
// f32 accumulation, 16×16 tiles, blocks (16, 16), grid (⌈Cn/16⌉, ⌈R/16⌉, items-stride).
template <typename TA, typename TB, typename TC>
__device__ void mel_gemm(const TA* A, const TB* B, TC* C, i64 items, i64 R, i64 Cn, i64 Q,
                         i64 sa, i64 ars, i64 acs, i64 brs, i64 bcs) {
    __shared__ float As[MEL_TILE][MEL_TILE + 1];
    __shared__ float Bs[MEL_TILE][MEL_TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const i64 r = (i64)blockIdx.y * MEL_TILE + ty;
    const i64 c = (i64)blockIdx.x * MEL_TILE + tx;
    for (i64 it = blockIdx.z; it < items; it += gridDim.z) {
        const TA* Ai = A + it * sa;
        float acc = 0.f;
        for (i64 q0 = 0; q0 < Q; q0 += MEL_TILE) {
            i64 qa = q0 + tx, qb = q0 + ty;
            As[ty][tx] = (r < R && qa < Q) ? ldf(Ai, r * ars + qa * acs) : 0.f;
            Bs[ty][tx] = (c < Cn && qb < Q) ? ldf(B, qb * brs + c * bcs) : 0.f;
            __syncthreads();
#pragma unroll
            for (int q = 0; q < MEL_TILE; ++q) acc += As[ty][q] * Bs[q][tx];
            __syncthreads();
        }
        if (r < R && c < Cn) stf(C, (it * R + r) * Cn + c, acc);
    }
}

#define RLX_MEL_GEMM(sfx, T)                                                                  \
    extern "C" __global__ void mel_gemm_##sfx(const T* A, const T* B, float* C, i64 items,   \
                                              i64 R, i64 Cn, i64 Q, i64 sa, i64 ars, i64 acs, \
                                              i64 brs, i64 bcs) {                            \
        mel_gemm<T, T, float>(A, B, C, items, R, Cn, Q, sa, ars, acs, brs, bcs);              \
    }                                                                                         \
    extern "C" __global__ void mel_gemm_t_##sfx(const float* A, const T* B, T* C, i64 items, \
                                                i64 R, i64 Cn, i64 Q, i64 sa, i64 ars,        \
                                                i64 acs, i64 brs, i64 bcs) {                 \
        mel_gemm<float, T, T>(A, B, C, items, R, Cn, Q, sa, ars, acs, brs, bcs);              \
    }
RLX_FLOAT_TYPES(RLX_MEL_GEMM)

#define MEL_FLOOR 1e-10f
#define MEL_RANGE 8.f

// log10(max(m, floor)) as the CPU writes it: `m < floor ? floor : m`, so NaN stays NaN.
__device__ __forceinline__ float mel_log(float m) {
    return log10f(m < MEL_FLOOR ? MEL_FLOOR : m);
}

// mx[it] = max over item `it` (`per` values of m) of mel_log(m); NaN if any is NaN.
// One block per item.
extern "C" __global__ void mel_max(const float* m, float* mx, i64 per) {
    __shared__ float sh[32];
    const float* mi = m + (i64)blockIdx.x * per;
    float v = -INFINITY, nan = 0.f;
    for (i64 i = threadIdx.x; i < per; i += blockDim.x) {
        float l = mel_log(mi[i]);
        if (isnan(l)) nan = 1.f;
        else v = fmaxf(v, l);
    }
    v = block_max(v, sh);
    nan = block_sum(nan, sh);
    if (threadIdx.x == 0) mx[blockIdx.x] = nan > 0.f ? __int_as_float(0x7fc00000) : v;
}

// out = (max(l, mx − 8) + 4) / 4 over `total` values, items of `per`.
template <typename T>
__device__ void mel_out(const float* m, const float* mx, T* out, i64 total, i64 per) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (i64)gridDim.x * blockDim.x) {
        float x = mx[i / per], lo = x - MEL_RANGE, l = mel_log(m[i]);
        float c = (isnan(x) || l < lo) ? lo : l;
        stf(out, i, (c + 4.f) / 4.f);
    }
}

// g = dy · d(out)/dm where live (m ≥ floor and l ≥ mx − 8), else 0: the CPU's subgradients.
template <typename T>
__device__ void mel_grad(float* m, const float* mx, const T* dy, i64 total, i64 per) {
    const float k = 0.25f / 2.302585092994045684f;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (i64)gridDim.x * blockDim.x) {
        float mv = m[i], l = mel_log(mv);
        bool live = mv >= MEL_FLOOR && l >= mx[i / per] - MEL_RANGE;
        m[i] = live ? ldf(dy, i) * k / mv : 0.f;
    }
}

#define RLX_MEL_EW(sfx, T)                                                                    \
    extern "C" __global__ void mel_out_##sfx(const float* m, const float* mx, T* out,         \
                                             i64 total, i64 per) {                           \
        mel_out<T>(m, mx, out, total, per);                                                   \
    }                                                                                         \
    extern "C" __global__ void mel_grad_##sfx(float* m, const float* mx, const T* dy,         \
                                              i64 total, i64 per) {                          \
        mel_grad<T>(m, mx, dy, total, per);                                                   \
    }
RLX_FLOAT_TYPES(RLX_MEL_EW)
