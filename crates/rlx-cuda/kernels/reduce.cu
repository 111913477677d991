// rlx reduce kernels (see lower/reduce.rs). common.cuh is prepended.
//
// Float data accumulates in f32, integer data (i32 / i64 storage) in i64 with wrapping
// arithmetic, as the CPU reference does. Max / min let NaN win (PyTorch semantics).
// Row kernels come in two shapes: WARP (blockDim 32 x k, one warp per row) for short rows
// and block-per-row for long ones. Column kernels use blockDim 32 x 8: x walks outputs
// (adjacent in memory in the common case, so loads coalesce), y splits the reduced range.

#define RLX_I64_MIN (-9223372036854775807LL - 1)
#define RLX_I64_MAX 9223372036854775807LL

// ---- accumulator plumbing -------------------------------------------------------------

// Reduction ops: 0 sum, 1 max, 2 min, 3 prod (mean is a sum scaled at the end).
template <int OP>
__device__ __forceinline__ float rop(float a, float b) {
    if (OP == 0) return a + b;
    if (OP == 1) return (a > b || a != a) ? a : b;
    if (OP == 2) return (a < b || a != a) ? a : b;
    return a * b;
}
template <int OP>
__device__ __forceinline__ long long rop(long long a, long long b) {
    typedef unsigned long long u64;
    if (OP == 0) return (long long)((u64)a + (u64)b);
    if (OP == 1) return a > b ? a : b;
    if (OP == 2) return a < b ? a : b;
    return (long long)((u64)a * (u64)b);
}
template <int OP>
__device__ __forceinline__ float rid(float) {
    return OP == 0 ? 0.f : OP == 1 ? -INFINITY : OP == 2 ? INFINITY : 1.f;
}
template <int OP>
__device__ __forceinline__ long long rid(long long) {
    return OP == 0 ? 0LL : OP == 1 ? RLX_I64_MIN : OP == 2 ? RLX_I64_MAX : 1LL;
}

// Load as the accumulator type.
__device__ __forceinline__ float lda(const float* p, i64 i) { return p[i]; }
__device__ __forceinline__ float lda(const __half* p, i64 i) { return ldf(p, i); }
__device__ __forceinline__ float lda(const __nv_bfloat16* p, i64 i) { return ldf(p, i); }
__device__ __forceinline__ long long lda(const int* p, i64 i) { return p[i]; }
__device__ __forceinline__ long long lda(const long long* p, i64 i) { return p[i]; }

// Final store: mean scales floats by 1/count and truncates integers toward zero.
template <typename T>
__device__ __forceinline__ void sta(T* p, i64 i, float v, int mean, i64 cnt) {
    stf(p, i, mean ? v * (1.0f / (float)cnt) : v);
}
__device__ __forceinline__ void sta(int* p, i64 i, long long v, int mean, i64 cnt) {
    p[i] = (int)(mean ? v / cnt : v);
}
__device__ __forceinline__ void sta(long long* p, i64 i, long long v, int mean, i64 cnt) {
    p[i] = mean ? v / cnt : v;
}

// Reduce across threadIdx.x of a warp (WARP) or of the whole block (blockDim.y == 1); every
// thread gets the result. `sh` holds >= 32 values.
template <int OP, bool WARP, typename A>
__device__ __forceinline__ A grp_reduce(A v, A* sh) {
    for (int o = 16; o > 0; o >>= 1) v = rop<OP>(v, (A)__shfl_xor_sync(0xffffffffu, v, o));
    if (WARP) return v;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < nw ? sh[lane] : rid<OP>(v);
        for (int o = 16; o > 0; o >>= 1) v = rop<OP>(v, (A)__shfl_xor_sync(0xffffffffu, v, o));
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}

// Reduce across threadIdx.y of a 32 x 8 block (column kernels); every thread gets its
// column's result. `sh` is [8][33].
template <int OP, typename A>
__device__ __forceinline__ A col_reduce(A v, A (*sh)[33]) {
    const int tx = threadIdx.x, ty = threadIdx.y;
    sh[ty][tx] = v;
    __syncthreads();
    if (ty == 0) {
        for (int q = 1; q < 8; ++q) v = rop<OP>(v, sh[q][tx]);
        sh[0][tx] = v;
    }
    __syncthreads();
    v = sh[0][tx];
    __syncthreads();
    return v;
}

// Row iteration: WARP mode gives each warp its rows, block mode each block.
#define RLX_ROW0 (WARP ? (i64)blockIdx.x * blockDim.y + threadIdx.y : (i64)blockIdx.x)
#define RLX_RSTEP (WARP ? (i64)gridDim.x * blockDim.y : (i64)gridDim.x)

// ---- Reduce -----------------------------------------------------------------------------

// `rows` contiguous rows of `len`; blockIdx.y picks a `chunk` of each row. With one chunk
// the result is final, otherwise raw partials go to part[chunk][row].
template <typename T, typename A, int OP, bool WARP>
__device__ __forceinline__ void reduce_rows(const T* __restrict__ x, T* __restrict__ y,
                                            A* __restrict__ part, i64 rows, i64 len, i64 chunk,
                                            int mean, i64 cnt) {
    __shared__ A sh[32];
    const int t = threadIdx.x, G = blockDim.x;
    const i64 s = blockIdx.y, S = gridDim.y;
    const i64 lo = s * chunk, hi = min(len, lo + chunk);
    for (i64 row = RLX_ROW0; row < rows; row += RLX_RSTEP) {
        const T* p = x + row * len;
        A acc = rid<OP>(A());
#pragma unroll 4
        for (i64 j = lo + t; j < hi; j += G) acc = rop<OP>(acc, lda(p, j));
        acc = grp_reduce<OP, WARP>(acc, sh);
        if (t == 0) {
            if (S == 1)
                sta(y, row, acc, mean, cnt);
            else
                part[s * rows + row] = acc;
        }
    }
}

// Any set of axes: output o starts at dims_offset(kept, o) and walks the reduced sub-space
// `red` (dims and input strides). blockIdx.y splits the reduced range as in reduce_rows.
template <typename T, typename A, int OP>
__device__ __forceinline__ void reduce_cols(const T* __restrict__ x, T* __restrict__ y,
                                            A* __restrict__ part, Dims8 kept, Dims8 red,
                                            i64 nout, i64 nred, int mean, i64 cnt) {
    __shared__ A sh[8][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const i64 s = blockIdx.y, S = gridDim.y;
    const i64 k0 = s * 8 + ty, kstep = 8 * S;
    for (i64 ob = (i64)blockIdx.x * 32; ob < nout; ob += (i64)gridDim.x * 32) {
        const i64 o = ob + tx;
        A acc = rid<OP>(A());
        if (o < nout) {
            const i64 base = dims_offset(kept, o);
            if (red.rank == 1) {
                const i64 st = red.s[0];
#pragma unroll 4
                for (i64 k = k0; k < nred; k += kstep) acc = rop<OP>(acc, lda(x, base + k * st));
            } else {
                for (i64 k = k0; k < nred; k += kstep)
                    acc = rop<OP>(acc, lda(x, base + dims_offset(red, k)));
            }
        }
        acc = col_reduce<OP>(acc, sh);
        if (ty == 0 && o < nout) {
            if (S == 1)
                sta(y, o, acc, mean, cnt);
            else
                part[s * nout + o] = acc;
        }
    }
}

// Combine the S partials of each output (in split order: deterministic).
template <typename T, typename A, int OP>
__device__ __forceinline__ void reduce_finish(const A* __restrict__ part, T* __restrict__ y,
                                              i64 nout, i64 S, int mean, i64 cnt) {
    for (i64 o = (i64)blockIdx.x * blockDim.x + threadIdx.x; o < nout;
         o += (i64)gridDim.x * blockDim.x) {
        A acc = part[o];
        for (i64 s = 1; s < S; ++s) acc = rop<OP>(acc, part[s * nout + o]);
        sta(y, o, acc, mean, cnt);
    }
}

#define RLX_REDUCE_OP(sfx, T, A, OP, opn)                                                    \
    extern "C" __global__ void __launch_bounds__(256)                                        \
        reduce_rows_w_##opn##_##sfx(const T* x, T* y, A* part, i64 rows, i64 len, i64 chunk, \
                                    int mean, i64 cnt) {                                     \
        reduce_rows<T, A, OP, true>(x, y, part, rows, len, chunk, mean, cnt);                \
    }                                                                                        \
    extern "C" __global__ void __launch_bounds__(1024)                                       \
        reduce_rows_b_##opn##_##sfx(const T* x, T* y, A* part, i64 rows, i64 len, i64 chunk, \
                                    int mean, i64 cnt) {                                     \
        reduce_rows<T, A, OP, false>(x, y, part, rows, len, chunk, mean, cnt);               \
    }                                                                                        \
    extern "C" __global__ void __launch_bounds__(256)                                        \
        reduce_cols_##opn##_##sfx(const T* x, T* y, A* part, Dims8 kept, Dims8 red,          \
                                  i64 nout, i64 nred, int mean, i64 cnt) {                   \
        reduce_cols<T, A, OP>(x, y, part, kept, red, nout, nred, mean, cnt);                 \
    }                                                                                        \
    extern "C" __global__ void reduce_finish_##opn##_##sfx(const A* part, T* y, i64 nout,    \
                                                           i64 S, int mean, i64 cnt) {       \
        reduce_finish<T, A, OP>(part, y, nout, S, mean, cnt);                                \
    }
#define RLX_REDUCE(sfx, T, A)              \
    RLX_REDUCE_OP(sfx, T, A, 0, sum)       \
    RLX_REDUCE_OP(sfx, T, A, 1, max)       \
    RLX_REDUCE_OP(sfx, T, A, 2, min)       \
    RLX_REDUCE_OP(sfx, T, A, 3, prod)
#define RLX_REDUCE_F(sfx, T) RLX_REDUCE(sfx, T, float)
RLX_FLOAT_TYPES(RLX_REDUCE_F)
RLX_REDUCE(i32, int, long long)
RLX_REDUCE(i64, long long, long long)

// ---- Softmax ----------------------------------------------------------------------------

// Softmax of contiguous rows, max-subtracted (an all -inf or NaN max shifts by 0, as the
// CPU does). VPT values per thread stay in registers; VPT 0 re-reads the row.
template <typename T, int VPT, bool WARP>
__device__ __forceinline__ void softmax_rows(const T* __restrict__ x, T* __restrict__ y,
                                             i64 rows, i64 len64) {
    __shared__ float sh[32];
    const int t = threadIdx.x, G = blockDim.x;
    const int len = (int)len64;
    for (i64 row = RLX_ROW0; row < rows; row += RLX_RSTEP) {
        const T* xr = x + row * len64;
        T* yr = y + row * len64;
        float v[VPT > 0 ? VPT : 1];
        float m = -INFINITY;
        if (VPT > 0) {
#pragma unroll
            for (int k = 0; k < VPT; ++k) {
                const int j = t + k * G;
                v[k] = j < len ? ldf(xr, j) : -INFINITY;
                m = rop<1>(m, v[k]);
            }
        } else {
            for (int j = t; j < len; j += G) m = rop<1>(m, ldf(xr, j));
        }
        m = grp_reduce<1, WARP>(m, sh);
        const float shift = isfinite(m) ? m : 0.f;
        float s = 0.f;
        if (VPT > 0) {
#pragma unroll
            for (int k = 0; k < VPT; ++k) {
                v[k] = expf(v[k] - shift);
                if (t + k * G < len) s += v[k];
            }
        } else {
            for (int j = t; j < len; j += G) s += expf(ldf(xr, j) - shift);
        }
        const float inv = 1.0f / grp_reduce<0, WARP>(s, sh);
        if (VPT > 0) {
#pragma unroll
            for (int k = 0; k < VPT; ++k) {
                const int j = t + k * G;
                if (j < len) stf(yr, j, v[k] * inv);
            }
        } else {
            for (int j = t; j < len; j += G) stf(yr, j, expf(ldf(xr, j) - shift) * inv);
        }
    }
}

// Softmax over a non-last axis: x is [outer, len, inner]; column c = (a, b) walks stride
// `inner`. Block 32 x 8: x over columns, y splits the axis.
template <typename T>
__device__ __forceinline__ void softmax_cols(const T* __restrict__ x, T* __restrict__ y,
                                             i64 ncol, i64 len, i64 inner) {
    __shared__ float sh[8][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (i64 cb = (i64)blockIdx.x * 32; cb < ncol; cb += (i64)gridDim.x * 32) {
        const i64 c = cb + tx;
        const bool ok = c < ncol;
        const i64 base = ok ? (c / inner) * len * inner + c % inner : 0;
        float m = -INFINITY;
        if (ok)
            for (i64 k = ty; k < len; k += 8) m = rop<1>(m, ldf(x, base + k * inner));
        m = col_reduce<1>(m, sh);
        const float shift = isfinite(m) ? m : 0.f;
        float s = 0.f;
        if (ok)
            for (i64 k = ty; k < len; k += 8) s += expf(ldf(x, base + k * inner) - shift);
        const float inv = 1.0f / col_reduce<0>(s, sh);
        if (ok)
            for (i64 k = ty; k < len; k += 8)
                stf(y, base + k * inner, expf(ldf(x, base + k * inner) - shift) * inv);
    }
}

#define RLX_SOFTMAX_ROWS(sfx, T, VPT, WARP, NAME, BOUND)                                  \
    extern "C" __global__ void __launch_bounds__(BOUND)                                   \
        NAME##_##sfx(const T* x, T* y, i64 rows, i64 len) {                               \
        softmax_rows<T, VPT, WARP>(x, y, rows, len);                                      \
    }
#define RLX_SOFTMAX(sfx, T)                                                               \
    RLX_SOFTMAX_ROWS(sfx, T, 1, true, softmax_w1, 256)                                    \
    RLX_SOFTMAX_ROWS(sfx, T, 2, true, softmax_w2, 256)                                    \
    RLX_SOFTMAX_ROWS(sfx, T, 4, true, softmax_w4, 256)                                    \
    RLX_SOFTMAX_ROWS(sfx, T, 8, true, softmax_w8, 256)                                    \
    RLX_SOFTMAX_ROWS(sfx, T, 16, true, softmax_w16, 256)                                  \
    RLX_SOFTMAX_ROWS(sfx, T, 4, false, softmax_b4, 1024)                                  \
    RLX_SOFTMAX_ROWS(sfx, T, 8, false, softmax_b8, 1024)                                  \
    RLX_SOFTMAX_ROWS(sfx, T, 16, false, softmax_b16, 1024)                                \
    RLX_SOFTMAX_ROWS(sfx, T, 0, false, softmax_b0, 1024)                                  \
    extern "C" __global__ void __launch_bounds__(256)                                     \
        softmax_cols_##sfx(const T* x, T* y, i64 ncol, i64 len, i64 inner) {              \
        softmax_cols<T>(x, y, ncol, len, inner);                                          \
    }
RLX_FLOAT_TYPES(RLX_SOFTMAX)

// ---- ArgMax -----------------------------------------------------------------------------

// Whether candidate (v2, i2) beats (v1, i1): the first NaN wins, then the larger value,
// then the smaller index. Associative, so any reduction order gives the sequential answer.
template <typename K>
__device__ __forceinline__ bool amax_better(K v2, i64 i2, K v1, i64 i1) {
    const bool n1 = v1 != v1, n2 = v2 != v2;
    if (n1 || n2) return n2 && (!n1 || i2 < i1);
    if (v2 != v1) return v2 > v1;
    return i2 < i1;
}
__device__ __forceinline__ float amax_lowest(float) { return -INFINITY; }
__device__ __forceinline__ long long amax_lowest(long long) { return RLX_I64_MIN; }

template <typename K>
__device__ __forceinline__ void amax_warp(K& v, i64& i) {
    for (int o = 16; o > 0; o >>= 1) {
        const K ov = __shfl_xor_sync(0xffffffffu, v, o);
        const i64 oi = __shfl_xor_sync(0xffffffffu, i, o);
        if (amax_better(ov, oi, v, i)) {
            v = ov;
            i = oi;
        }
    }
}

template <typename T, bool WARP>
__device__ __forceinline__ void argmax_rows(const T* __restrict__ x, i64* __restrict__ y, i64 rows,
                                            i64 len) {
    typedef decltype(lda(x, 0)) K;
    __shared__ K shv[32];
    __shared__ i64 shi[32];
    const int t = threadIdx.x, G = blockDim.x;
    for (i64 row = RLX_ROW0; row < rows; row += RLX_RSTEP) {
        const T* p = x + row * len;
        K bv = amax_lowest(K());
        i64 bi = RLX_I64_MAX;
        for (i64 j = t; j < len; j += G) {
            const K v = lda(p, j);
            if (amax_better(v, j, bv, bi)) {
                bv = v;
                bi = j;
            }
        }
        amax_warp(bv, bi);
        if (!WARP) {
            const int lane = t & 31, w = t >> 5, nw = (G + 31) >> 5;
            __syncthreads();
            if (lane == 0) {
                shv[w] = bv;
                shi[w] = bi;
            }
            __syncthreads();
            if (w == 0) {
                bv = lane < nw ? shv[lane] : amax_lowest(K());
                bi = lane < nw ? shi[lane] : RLX_I64_MAX;
                amax_warp(bv, bi);
            }
        }
        if (t == 0) y[row] = bi;
    }
}

// ArgMax over a non-last axis of [outer, len, inner] (block 32 x 8 as softmax_cols).
template <typename T>
__device__ __forceinline__ void argmax_cols(const T* __restrict__ x, i64* __restrict__ y, i64 ncol,
                                            i64 len, i64 inner) {
    typedef decltype(lda(x, 0)) K;
    __shared__ K shv[8][33];
    __shared__ i64 shi[8][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (i64 cb = (i64)blockIdx.x * 32; cb < ncol; cb += (i64)gridDim.x * 32) {
        const i64 c = cb + tx;
        const bool ok = c < ncol;
        const i64 base = ok ? (c / inner) * len * inner + c % inner : 0;
        K bv = amax_lowest(K());
        i64 bi = RLX_I64_MAX;
        if (ok)
            for (i64 k = ty; k < len; k += 8) {
                const K v = lda(x, base + k * inner);
                if (amax_better(v, k, bv, bi)) {
                    bv = v;
                    bi = k;
                }
            }
        shv[ty][tx] = bv;
        shi[ty][tx] = bi;
        __syncthreads();
        if (ty == 0 && ok) {
            for (int q = 1; q < 8; ++q)
                if (amax_better(shv[q][tx], shi[q][tx], bv, bi)) {
                    bv = shv[q][tx];
                    bi = shi[q][tx];
                }
            y[c] = bi;
        }
        __syncthreads();
    }
}

#define RLX_ARGMAX(sfx, T)                                                                  \
    extern "C" __global__ void __launch_bounds__(256)                                       \
        argmax_rows_w_##sfx(const T* x, i64* y, i64 rows, i64 len) {                        \
        argmax_rows<T, true>(x, y, rows, len);                                              \
    }                                                                                       \
    extern "C" __global__ void __launch_bounds__(1024)                                      \
        argmax_rows_b_##sfx(const T* x, i64* y, i64 rows, i64 len) {                        \
        argmax_rows<T, false>(x, y, rows, len);                                             \
    }                                                                                       \
    extern "C" __global__ void __launch_bounds__(256)                                       \
        argmax_cols_##sfx(const T* x, i64* y, i64 ncol, i64 len, i64 inner) {               \
        argmax_cols<T>(x, y, ncol, len, inner);                                             \
    }
RLX_FLOAT_TYPES(RLX_ARGMAX)
RLX_ARGMAX(i32, int)
RLX_ARGMAX(i64, long long)

// ---- Softmax cross-entropy --------------------------------------------------------------

// Element i of a tensor whose dtype is only known at run time (labels, targets, d_loss).
// Codes (lower/reduce_softmax.rs): 0 f32, 1 f16, 2 bf16, 3 f64, 4 i32, 5 i64, 6 u8 / bool.
__device__ __forceinline__ double ld_any(const void* p, int code, i64 i) {
    switch (code) {
        case 0: return ((const float*)p)[i];
        case 1: return __half2float(((const __half*)p)[i]);
        case 2: return __bfloat162float(((const __nv_bfloat16*)p)[i]);
        case 3: return ((const double*)p)[i];
        case 4: return ((const int*)p)[i];
        case 5: return (double)((const long long*)p)[i];
        default: return ((const unsigned char*)p)[i];
    }
}

// Class index of row r, or -1 when the label is not an integer in 0..c (the CPU reference
// rejects such labels; here the row's result becomes NaN).
__device__ __forceinline__ i64 ce_label(const void* lab, int code, i64 r, i64 c) {
    const double v = ld_any(lab, code, r);
    return (v == floor(v) && v >= 0.0 && v < (double)c) ? (i64)v : -1;
}

// Row max (as the shift) and log Σ exp(x − shift) of the row at p.
template <typename T, bool WARP>
__device__ __forceinline__ void ce_lse(const T* __restrict__ p, i64 c, float* sh, float& shift,
                                       float& lse) {
    const int t = threadIdx.x, G = blockDim.x;
    float m = -INFINITY;
    for (i64 j = t; j < c; j += G) m = rop<1>(m, ldf(p, j));
    m = grp_reduce<1, WARP>(m, sh);
    shift = isfinite(m) ? m : 0.f;
    float s = 0.f;
    for (i64 j = t; j < c; j += G) s += expf(ldf(p, j) - shift);
    lse = logf(grp_reduce<0, WARP>(s, sh));
}

// Loss per row. dense: Σ −t·(x − shift − lse) with targets t [N, C]; else shift + lse −
// x[label] with labels [N].
template <typename T, bool WARP>
__device__ __forceinline__ void ce_loss(const T* __restrict__ x, const void* lab, int lcode,
                                        int dense, T* __restrict__ y, i64 n, i64 c) {
    __shared__ float sh[32];
    const int t = threadIdx.x, G = blockDim.x;
    for (i64 row = RLX_ROW0; row < n; row += RLX_RSTEP) {
        const T* p = x + row * c;
        float shift, lse;
        ce_lse<T, WARP>(p, c, sh, shift, lse);
        if (dense) {
            float acc = 0.f;
            for (i64 j = t; j < c; j += G)
                acc += -(float)ld_any(lab, lcode, row * c + j) * (ldf(p, j) - shift - lse);
            acc = grp_reduce<0, WARP>(acc, sh);
            if (t == 0) stf(y, row, acc);
        } else if (t == 0) {
            const i64 k = ce_label(lab, lcode, row, c);
            stf(y, row, k < 0 ? __int_as_float(0x7fc00000) : shift + lse - ldf(p, k));
        }
    }
}

// dlogits = (softmax(x) − target) · d_loss[row]; target is dense [N, C] or one-hot of labels.
template <typename T, bool WARP>
__device__ __forceinline__ void ce_back(const T* __restrict__ x, const void* lab, int lcode,
                                        int dense, const void* dl, int dcode, T* __restrict__ y,
                                        i64 n, i64 c) {
    __shared__ float sh[32];
    const int t = threadIdx.x, G = blockDim.x;
    for (i64 row = RLX_ROW0; row < n; row += RLX_RSTEP) {
        const T* p = x + row * c;
        float shift, lse;
        ce_lse<T, WARP>(p, c, sh, shift, lse);
        const i64 k = dense ? 0 : ce_label(lab, lcode, row, c);
        const float d = k < 0 ? __int_as_float(0x7fc00000) : (float)ld_any(dl, dcode, row);
        for (i64 j = t; j < c; j += G) {
            const float tg = dense ? (float)ld_any(lab, lcode, row * c + j) : (j == k ? 1.f : 0.f);
            stf(y, row * c + j, (expf(ldf(p, j) - shift - lse) - tg) * d);
        }
    }
}

#define RLX_CE_MODE(sfx, T, WARP, m, BOUND)                                                 \
    extern "C" __global__ void __launch_bounds__(BOUND)                                     \
        ce_loss_##m##_##sfx(const T* x, const void* lab, int lcode, int dense, T* y, i64 n, \
                            i64 c) {                                                        \
        ce_loss<T, WARP>(x, lab, lcode, dense, y, n, c);                                    \
    }                                                                                       \
    extern "C" __global__ void __launch_bounds__(BOUND)                                     \
        ce_back_##m##_##sfx(const T* x, const void* lab, int lcode, int dense,              \
                            const void* dl, int dcode, T* y, i64 n, i64 c) {                \
        ce_back<T, WARP>(x, lab, lcode, dense, dl, dcode, y, n, c);                         \
    }
#define RLX_CE(sfx, T) RLX_CE_MODE(sfx, T, true, w, 256) RLX_CE_MODE(sfx, T, false, b, 1024)
RLX_FLOAT_TYPES(RLX_CE)
