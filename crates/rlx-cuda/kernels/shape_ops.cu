// rlx shape_ops kernels (see lower/shape_ops.rs). common.cuh is prepended.
//
// Data movement never looks at values, so these kernels move opaque units of 1, 2, 4, 8
// (and, where the lowering proved 16-byte alignment, 16) bytes: one instantiation per unit
// size serves every dtype. Suffixes: b1 = u8, b2 = unsigned short, b4 = unsigned int,
// b8 = unsigned long long, b16 = uint4. Rope is the only arithmetic here (f32 compute).

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#define RLX_UNITS(X) X(b1, u8) X(b2, u16) X(b4, u32) X(b8, u64)
#define RLX_UNITS16(X) RLX_UNITS(X) X(b16, uint4)

// Offset of row-major index `lin` of `v.d` with strides `v.s`, 32-bit divisions (the
// caller guarantees lin and every dim fit in 32 bits).
__device__ __forceinline__ i64 dims_offset32(const Dims8& v, u32 lin) {
    i64 off = 0;
    for (int k = v.rank - 1; k >= 0; --k) {
        u32 d = (u32)v.d[k];
        u32 q = lin / d;
        off += (i64)(lin - q * d) * v.s[k];
        lin = q;
    }
    return off;
}

// ---- generic strided gather into a contiguous output: dst[i] = src[offset of i in v].
// Used when no axis of the view reads contiguously (steps, broadcasts of the last axis).
template <typename T>
__device__ __forceinline__ void strided_copy(const T* __restrict__ src, T* __restrict__ dst,
                                             const Dims8& v, i64 n) {
    i64 stride = (i64)gridDim.x * blockDim.x;
    if (n < 0x7fffffffLL) {
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
            dst[i] = src[dims_offset32(v, (u32)i)];
    } else {
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
            dst[i] = src[dims_offset(v, i)];
    }
}

// ---- row copy: `rows` rows of `len` contiguous units; row r starts at offset(so, r) in src
// and offset(dof, r) in dst (both views share dims). Block (tpr, rpb): threadIdx.x walks a
// row (coalesced on both sides), threadIdx.y picks the row; blockIdx.y splits long rows.
template <typename T>
__device__ __forceinline__ void row_copy(const T* __restrict__ src, T* __restrict__ dst,
                                         const Dims8& so, const Dims8& dof, i64 rows, i64 len) {
    i64 rstep = (i64)gridDim.x * blockDim.y;
    i64 cstep = (i64)gridDim.y * blockDim.x;
    i64 c0 = (i64)blockIdx.y * blockDim.x + threadIdx.x;
    for (i64 r = (i64)blockIdx.x * blockDim.y + threadIdx.y; r < rows; r += rstep) {
        const T* s = src + dims_offset(so, r);
        T* d = dst + dims_offset(dof, r);
        for (i64 c = c0; c < len; c += cstep) d[c] = s[c];
    }
}

// ---- tiled transpose. The view's output axis `p` reads src contiguously (stride 1) and the
// last output axis `q` (length Q) reads src with stride `sq`; the other axes are a batch
// (offsets from bs / bd). A 32x32 tile goes through shared memory so that both the reads
// (along p) and the writes (along q) are coalesced. dp = dst stride of axis p.
template <typename T>
__device__ __forceinline__ void tile_transpose(const T* __restrict__ src, T* __restrict__ dst,
                                               const Dims8& bs, const Dims8& bd, i64 nb,
                                               i64 P, i64 Q, i64 sq, i64 dp, T (*tile)[33]) {
    i64 tp = (P + 31) / 32, tq = (Q + 31) / 32;
    int tx = threadIdx.x, ty = threadIdx.y;
    for (i64 b = blockIdx.z; b < nb; b += gridDim.z) {
        const T* s = src + dims_offset(bs, b);
        T* d = dst + dims_offset(bd, b);
        for (i64 bp = blockIdx.y; bp < tp; bp += gridDim.y) {
            for (i64 bq = blockIdx.x; bq < tq; bq += gridDim.x) {
                i64 p0 = bp * 32, q0 = bq * 32;
                for (int k = ty; k < 32; k += blockDim.y) {
                    i64 p = p0 + tx, q = q0 + k;
                    if (p < P && q < Q) tile[k][tx] = s[p + q * sq];
                }
                __syncthreads();
                for (int k = ty; k < 32; k += blockDim.y) {
                    i64 p = p0 + k, q = q0 + tx;
                    if (p < P && q < Q) d[p * dp + q] = tile[tx][k];
                }
                __syncthreads();
            }
        }
    }
}

// ---- constant pad, one output row (last axis) at a time. `od`: output dims of the outer
// axes with the input's strides; `pd`: input dims (d) and pads-before (s) of those axes.
template <typename T>
__device__ __forceinline__ void pad_rows(const T* __restrict__ src, T* __restrict__ dst,
                                         const Dims8& od, const Dims8& pd, i64 rows, i64 L,
                                         i64 pb, i64 n, T value) {
    i64 rstep = (i64)gridDim.x * blockDim.y;
    for (i64 r = (i64)blockIdx.x * blockDim.y + threadIdx.y; r < rows; r += rstep) {
        i64 lin = r, off = 0;
        bool inside = true;
        for (int k = od.rank - 1; k >= 0; --k) {
            i64 q = lin / od.d[k];
            i64 c = lin - q * od.d[k] - pd.s[k];
            lin = q;
            inside = inside && c >= 0 && c < pd.d[k];
            off += c * od.s[k];
        }
        T* d = dst + r * L;
        for (i64 c = threadIdx.x; c < L; c += blockDim.x) {
            i64 ci = c - pb;
            d[c] = (inside && ci >= 0 && ci < n) ? src[off + ci] : value;
        }
    }
}

// ---- gather rows: output row r = (o, j) over outer x K copies the `inner` contiguous units
// of data row (o, idx[j]); negative indices count from the end. An index outside [0, N)
// (the CPU reports an error) writes zeros rather than reading out of bounds. Float indices
// truncate (the CPU rejects fractional ones, so whole numbers are all that matter).
__device__ __forceinline__ i64 ld_index(const float* p, i64 i) { return (i64)p[i]; }
__device__ __forceinline__ i64 ld_index(const __half* p, i64 i) { return (i64)__half2float(p[i]); }
__device__ __forceinline__ i64 ld_index(const __nv_bfloat16* p, i64 i) { return (i64)__bfloat162float(p[i]); }
__device__ __forceinline__ i64 ld_index(const double* p, i64 i) { return (i64)p[i]; }
__device__ __forceinline__ i64 ld_index(const int* p, i64 i) { return (i64)p[i]; }
__device__ __forceinline__ i64 ld_index(const i64* p, i64 i) { return p[i]; }
__device__ __forceinline__ i64 ld_index(const u8* p, i64 i) { return (i64)p[i]; }

template <typename T>
__device__ __forceinline__ void zero_unit(T& v) { v = T(0); }
__device__ __forceinline__ void zero_unit(uint4& v) { v = make_uint4(0, 0, 0, 0); }

template <typename T, typename I>
__device__ __forceinline__ void gather_rows(const T* __restrict__ src, const I* __restrict__ idx,
                                            T* __restrict__ dst, i64 rows, i64 K, i64 N,
                                            i64 inner) {
    i64 rstep = (i64)gridDim.x * blockDim.y;
    i64 cstep = (i64)gridDim.y * blockDim.x;
    i64 c0 = (i64)blockIdx.y * blockDim.x + threadIdx.x;
    for (i64 r = (i64)blockIdx.x * blockDim.y + threadIdx.y; r < rows; r += rstep) {
        i64 o = r / K, j = r - o * K;
        i64 p = ld_index(idx, j);
        if (p < 0) p += N;
        T* d = dst + r * inner;
        if (p < 0 || p >= N) {
            T z;
            zero_unit(z);
            for (i64 c = c0; c < inner; c += cstep) d[c] = z;
            continue;
        }
        const T* s = src + (o * N + p) * inner;
        for (i64 c = c0; c < inner; c += cstep) d[c] = s[c];
    }
}

#define RLX_MOVE_KERNELS(sfx, T)                                                              \
    extern "C" __global__ void strided_copy_##sfx(const T* src, T* dst, Dims8 v, i64 n) {     \
        strided_copy<T>(src, dst, v, n);                                                      \
    }                                                                                         \
    extern "C" __global__ void tile_transpose_##sfx(const T* src, T* dst, Dims8 bs, Dims8 bd, \
                                                    i64 nb, i64 P, i64 Q, i64 sq, i64 dp) {   \
        __shared__ T tile[32][33];                                                            \
        tile_transpose<T>(src, dst, bs, bd, nb, P, Q, sq, dp, tile);                          \
    }                                                                                         \
    extern "C" __global__ void pad_rows_##sfx(const T* src, T* dst, Dims8 od, Dims8 pd,       \
                                              i64 rows, i64 L, i64 pb, i64 n, u64 bits) {     \
        pad_rows<T>(src, dst, od, pd, rows, L, pb, n, (T)bits);                               \
    }
RLX_UNITS(RLX_MOVE_KERNELS)

#define RLX_GATHER_KERNEL(sfx, T, isfx, I)                                                    \
    extern "C" __global__ void gather_rows_##sfx##_##isfx(const T* src, const I* idx, T* dst, \
                                                          i64 rows, i64 K, i64 N, i64 inner) {\
        gather_rows<T, I>(src, idx, dst, rows, K, N, inner);                                  \
    }
#define RLX_GATHER_IDX(sfx, T)                                                                \
    RLX_GATHER_KERNEL(sfx, T, f32, float)                                                     \
    RLX_GATHER_KERNEL(sfx, T, f16, __half)                                                    \
    RLX_GATHER_KERNEL(sfx, T, bf16, __nv_bfloat16)                                            \
    RLX_GATHER_KERNEL(sfx, T, f64, double)                                                    \
    RLX_GATHER_KERNEL(sfx, T, i32, int)                                                       \
    RLX_GATHER_KERNEL(sfx, T, i64, i64)                                                       \
    RLX_GATHER_KERNEL(sfx, T, u8, u8)
#define RLX_ROW_KERNELS(sfx, T)                                                               \
    extern "C" __global__ void row_copy_##sfx(const T* src, T* dst, Dims8 so, Dims8 dof,      \
                                              i64 rows, i64 len) {                            \
        row_copy<T>(src, dst, so, dof, rows, len);                                            \
    }                                                                                         \
    RLX_GATHER_IDX(sfx, T)
RLX_UNITS16(RLX_ROW_KERNELS)

// ---- CacheWrite: `outer` blocks of s rows (each `inner` units) copied into the cache at row
// *pos of its c. The position is read from device memory, so one captured launch serves
// every decode step; a position outside [0, c - s] writes nothing (no wild write; the CPU
// path reports it as an error and the generator checks it before each step).
#define RLX_CACHE_WRITE(sfx, T)                                                               \
    extern "C" __global__ void cache_write_##sfx(T* cache, const T* src, const i64* pos,      \
                                                 i64 outer, i64 c, i64 s, i64 inner) {        \
        pdl_wait();                                                                           \
        pdl_launch_next();                                                                    \
        const i64 p = *pos;                                                                   \
        if (p < 0 || p > c - s) return;                                                       \
        const i64 row = s * inner, n = outer * row;                                           \
        for (i64 e = blockIdx.x * (i64)blockDim.x + threadIdx.x; e < n;                       \
             e += (i64)gridDim.x * blockDim.x) {                                              \
            const i64 o = e / row, rem = e - o * row;                                         \
            cache[(o * c + p) * inner + rem] = src[e];                                        \
        }                                                                                     \
    }
RLX_UNITS16(RLX_CACHE_WRITE)

// ---- RoPE. x is `rows` head rows of head_dim; head row r rotates with cos/sin row
// offset(cv, r) (cv: the view's lead dims with cos's broadcast row strides, in rows of
// half = n_rot/2). One thread per output element; the pair partner is re-read (cached).
// style 0 = Half (i pairs with i + half), 1 = Interleaved (2i with 2i+1).
// The rotation is mul_sub / mul_add (common.cuh), rounded like the CPU.

// Element e (< rows * hd, head row r = e / hd, dim d < nrot) of rope(x) as a float.
template <typename X, typename C>
__device__ __forceinline__ float rope_at(const X* __restrict__ x, const C* __restrict__ cs,
                                         const C* __restrict__ sn, const Dims8& cv, i64 e, i64 r,
                                         i64 d, i64 half, int style) {
    i64 crow = dims_offset(cv, r) * half;
    if (style == 0) {
        i64 i = d < half ? d : d - half;
        float c = ldf(cs, crow + i), s = ldf(sn, crow + i);
        float a = ldf(x, e);
        if (d < half) return mul_sub(a, c, ldf(x, e + half), s);
        return mul_add(a, c, ldf(x, e - half), s);
    }
    i64 i = d >> 1;
    float c = ldf(cs, crow + i), s = ldf(sn, crow + i);
    float a = ldf(x, e);
    if ((d & 1) == 0) return mul_sub(a, c, ldf(x, e + 1), s);
    return mul_add(a, c, ldf(x, e - 1), s);
}

template <typename X, typename C>
__device__ __forceinline__ void rope(const X* __restrict__ x, const C* __restrict__ cs,
                                     const C* __restrict__ sn, X* __restrict__ out,
                                     const Dims8& cv, i64 rows, i64 hd, i64 nrot, int style) {
    pdl_wait();
    pdl_launch_next();
    i64 n = rows * hd, half = nrot / 2;
    i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        i64 r = e / hd, d = e - r * hd;
        if (d >= nrot) {
            out[e] = x[e];
            continue;
        }
        stf(out, e, rope_at<X, C>(x, cs, sn, cv, e, r, d, half, style));
    }
}

// ---- RopeCacheWrite: rope(x) written straight into the cache, laid out as CacheWrite's
// `outer` blocks of s rows of `inner` elements (x is contiguous, so element e of x is
// element rem = e mod s*inner of block o = e / (s*inner)); position *pos as in CacheWrite,
// and the same rounding as rope followed by a copy.
template <typename X, typename C>
__device__ __forceinline__ void rope_cache_write(X* __restrict__ cache, const X* __restrict__ x,
                                                 const i64* __restrict__ pos,
                                                 const C* __restrict__ cs,
                                                 const C* __restrict__ sn, const Dims8& cv,
                                                 i64 outer, i64 c, i64 s, i64 inner, i64 hd,
                                                 i64 nrot, int style) {
    pdl_wait();
    pdl_launch_next();
    const i64 p = *pos;
    if (p < 0 || p > c - s) return;
    const i64 row = s * inner, n = outer * row, half = nrot / 2;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        const i64 o = e / row, rem = e - o * row;
        const i64 r = e / hd, d = e - r * hd;
        X* dst = cache + (o * c + p) * inner + rem;
        if (d >= nrot) *dst = x[e];
        else stf(dst, 0, rope_at<X, C>(x, cs, sn, cv, e, r, d, half, style));
    }
}

// ---- The prefill's q, k and v straight from the fused qkv product. x is `rows` rows of w
// elements holding q (columns oq.., nq of them), k (ok.., nk) and v (ov.., nv); one launch
// rotates q into qo ([rows, nq]), rotates k into the k cache and copies v into the v cache
// (CacheWrite's layout: blocks of s rows, cap rows a block, at row *pos; a position out of
// range writes no cache row), each element rounded as rope, rope_cache_write and cache_write
// round it. It stands for the three narrows' copies and those three launches.
struct QkvArgs {
    i64 rows, s, cap, w, oq, nq, ok, nk, ov, nv, hd, nrot;
    int style, pad_;
};
template <typename X, typename C>
__device__ __forceinline__ void qkv_rope_cache(const X* __restrict__ x, X* __restrict__ qo,
                                               X* __restrict__ kc, X* __restrict__ vc,
                                               const i64* __restrict__ pos,
                                               const C* __restrict__ cs,
                                               const C* __restrict__ sn, const Dims8& cvq,
                                               const Dims8& cvk, const QkvArgs& a) {
    pdl_wait();
    pdl_launch_next();
    const i64 p = *pos;
    const bool in_range = p >= 0 && p <= a.cap - a.s;
    const i64 tot = a.nq + a.nk + a.nv, n = a.rows * tot, half = a.nrot / 2;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        const i64 row = e / tot;
        i64 c = e - row * tot;
        const X* xr = x + row * a.w;
        if (c < a.nq) {
            const i64 r = row * (a.nq / a.hd) + c / a.hd, d = c % a.hd;
            X* dst = qo + row * a.nq + c;
            if (d >= a.nrot) *dst = xr[a.oq + c];
            else stf(dst, 0, rope_at<X, C>(xr + a.oq, cs, sn, cvq, c, r, d, half, a.style));
            continue;
        }
        if (!in_range) continue;
        const i64 o = row / a.s, at = o * a.cap + p + (row - o * a.s);
        c -= a.nq;
        if (c < a.nk) {
            const i64 r = row * (a.nk / a.hd) + c / a.hd, d = c % a.hd;
            X* dst = kc + at * a.nk + c;
            if (d >= a.nrot) *dst = xr[a.ok + c];
            else stf(dst, 0, rope_at<X, C>(xr + a.ok, cs, sn, cvk, c, r, d, half, a.style));
        } else {
            c -= a.nk;
            vc[at * a.nv + c] = xr[a.ov + c];
        }
    }
}

#define RLX_ROPE_KERNEL(xs, X, cs_, C)                                                        \
    extern "C" __global__ void rope_##xs##_##cs_(const X* x, const C* cs, const C* sn, X* out,\
                                                Dims8 cv, i64 rows, i64 hd, i64 nrot,          \
                                                int style) {                                   \
        rope<X, C>(x, cs, sn, out, cv, rows, hd, nrot, style);                                \
    }                                                                                         \
    extern "C" __global__ void rope_cache_write_##xs##_##cs_(                                 \
        X* cache, const X* x, const i64* pos, const C* cs, const C* sn, Dims8 cv, i64 outer,  \
        i64 c, i64 s, i64 inner, i64 hd, i64 nrot, int style) {                               \
        rope_cache_write<X, C>(cache, x, pos, cs, sn, cv, outer, c, s, inner, hd, nrot,       \
                               style);                                                        \
    }                                                                                         \
    extern "C" __global__ void qkv_rope_cache_##xs##_##cs_(                                   \
        const X* x, X* qo, X* kc, X* vc, const i64* pos, const C* cs, const C* sn, Dims8 cvq,  \
        Dims8 cvk, QkvArgs a) {                                                               \
        qkv_rope_cache<X, C>(x, qo, kc, vc, pos, cs, sn, cvq, cvk, a);                        \
    }
#define RLX_ROPE_COS(xs, X)                                                                   \
    RLX_ROPE_KERNEL(xs, X, f32, float)                                                        \
    RLX_ROPE_KERNEL(xs, X, f16, __half) RLX_ROPE_KERNEL(xs, X, bf16, __nv_bfloat16)
RLX_FLOAT_TYPES(RLX_ROPE_COS)
