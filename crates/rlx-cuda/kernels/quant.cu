// rlx quant kernels, part 1 (see lower/linalg_quant.rs): block layouts and decoders, the
// warp-per-column GEMV and the prefill kernels. common.cuh is prepended and quant_gemv.cu
// (the staged decode GEMV, the instantiations) follows in the same module.
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
#define F16S 8
#define BF16S 9
// The 32-value schemes in the planar row layout (crates/rlx-cuda/src/planar.rs): a row of
// `units` blocks stored as [units × quants (16 B, Q8_0: 32 B)] [units × u32 fifth bits (Q5_0 /
// Q5_1)] [units × scales (f16 d; Q4_1 / Q5_1: f16 d, f16 m)] — the same bytes, regrouped so a
// unit's quants are one aligned 8-byte-word run instead of 9–17 two-byte loads.
#define Q8_0P 10
#define Q4_0P 11
#define Q4_1P 12
#define Q5_0P 13
#define Q5_1P 14

template <int S>
__device__ __forceinline__ constexpr bool is_planar() { return S >= Q8_0P && S <= Q5_1P; }
// The scheme whose blocks a planar scheme regroups (itself for the others).
template <int S>
__device__ __forceinline__ constexpr int base_of() { return is_planar<S>() ? S - Q8_0P : S; }

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

template <int S0>
__device__ __forceinline__ int block_bytes() {
    constexpr int S = base_of<S0>();
    return S == Q8_0   ? 34
           : S == Q4_0 ? 18
           : S == Q4_1 ? 20
           : S == Q5_0 ? 22
           : S == Q5_1 ? 24
           : S == Q4_K ? 144
           : S == Q5_K ? 176
           : S == Q6_K ? 210
                       : 64;
}

template <int S>
__device__ __forceinline__ int block_len() {
    return (S >= Q4_K && S <= Q6_K) ? 256 : 32;
}

// Byte offsets, within a planar row of `units` blocks, of unit u's quants, fifth bits and
// scale(s).
template <int S>
__device__ __forceinline__ int pl_qs(int u) { return (base_of<S>() == Q8_0 ? 32 : 16) * u; }
template <int S>
__device__ __forceinline__ int pl_qh(int units, int u) { return 16 * units + 4 * u; }
template <int S>
__device__ __forceinline__ int pl_sc(int units, int u) {
    constexpr int B = base_of<S>();
    const int start = (B == Q8_0 ? 32 : B == Q5_0 || B == Q5_1 ? 20 : 16) * units;
    return start + (B == Q4_1 || B == Q5_1 ? 4 : 2) * u;
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
    if (S == F16S) return f16_at(b + 2 * e);
    if (S == BF16S) return __uint_as_float(((unsigned)b[2 * e] | ((unsigned)b[2 * e + 1] << 8)) << 16);
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

// Element e of unit u of a planar row: dq_elem's formulas over the regrouped bytes.
template <int S>
__device__ __forceinline__ float dq_elem_planar(const u8* row, int units, int u, int e) {
    constexpr int B = base_of<S>();
    const u8* sc = row + pl_sc<S>(units, u);
    const u8* qs = row + pl_qs<S>(u);
    if (B == Q8_0) return f16_at(sc) * (float)(signed char)qs[e];
    int q = nib32(qs, e);
    if (B == Q5_0 || B == Q5_1) q |= (int)(((u32_at(row + pl_qh<S>(units, u)) >> e) & 1u) << 4);
    if (B == Q4_0) return f16_at(sc) * (float)(q - 8);
    if (B == Q5_0) return f16_at(sc) * (float)(q - 16);
    return f16_at(sc) * (float)q + f16_at(sc + 2);
}

// Element kk of a packed row of K values.
template <int S>
__device__ __forceinline__ float dq_row_elem(const u8* row, i64 K, i64 kk) {
    if (is_planar<S>()) return dq_elem_planar<S>(row, (int)(K >> 5), (int)(kk >> 5), (int)(kk & 31));
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
        for (int j = 0; j < GEMV_VPL; ++j)
            wv[j] = is_planar<S>() ? dq_row_elem<S>(row, K, k0 + j) : dq_elem<S>(blk, e0 + j);
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

// h[m, k] = silu(gate)·up over the halves of x's rows ([gate | up] for glu 1, [up | gate]
// for 2), the staged GEMV's SwiGLU formula, for the products too large for it.
template <typename T>
__device__ void dq_swiglu(const T* x, T* h, i64 M, i64 K, int glu) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < M * K;
         i += (i64)gridDim.x * blockDim.x) {
        const i64 m = i / K, k = i - m * K;
        const T* xm = x + m * 2 * K;
        const float gt = ldf(xm, glu == 1 ? k : K + k), up = ldf(xm, glu == 1 ? K + k : k);
        stf(h, i, up * (gt / (1.0f + expf(-gt))));
    }
}
#define RLX_DQ_SWIGLU(sfx, T)                                                                 \
    extern "C" __global__ void dq_swiglu_##sfx(const T* x, T* h, i64 M, i64 K, int glu) {     \
        dq_swiglu<T>(x, h, M, K, glu);                                                        \
    }
RLX_GATE_base(RLX_FLOAT_TYPES(RLX_DQ_SWIGLU))

// out[r, k] = W[r, k] for `rows` rows of K values (a chunk of the weight, row-major).
template <int S, typename T>
__device__ void dq_dequant(const u8* w, T* out, i64 rows, i64 K) {
    const i64 rb = (K / block_len<S>()) * block_bytes<S>(), total = rows * K;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (i64)gridDim.x * blockDim.x) {
        i64 r = i / K, kk = i - r * K;
        stf(out, i, dq_row_elem<S>(w + r * rb, K, kk));
    }
}


// A product of a half weight past the GEMV's rows: x (or its prepared form h) cast to the
// weight's dtype for cuBLASLt, and the product cast back to the output's with the residual
// added (res may be null).
#define RLX_DQ_HALF_CAST(sfx, T, wsfx, W)                                                     \
    extern "C" __global__ void dq_cast_in_##sfx##_##wsfx(const T* x, W* h, i64 n) {           \
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;                       \
             i += (i64)gridDim.x * blockDim.x)                                                \
            stf(h, i, ldf(x, i));                                                             \
    }                                                                                         \
    extern "C" __global__ void dq_cast_out_##wsfx##_##sfx(const W* y, T* out, const T* res,   \
                                                         i64 n) {                             \
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;                       \
             i += (i64)gridDim.x * blockDim.x)                                                \
            stf(out, i, ldf(y, i) + (res != nullptr ? ldf(res, i) : 0.f));                    \
    }
#define RLX_DQ_HALF_CASTS(sfx, T) \
    RLX_DQ_HALF_CAST(sfx, T, f16, __half) RLX_DQ_HALF_CAST(sfx, T, bf16, __nv_bfloat16)
RLX_GATE_base(RLX_FLOAT_TYPES(RLX_DQ_HALF_CASTS))

// ---- The strict product with a half weight on tensor cores: x as a sum of `parts` half
// values (dq_split_in: row r of x scaled by a power of two s_r that puts its largest |value|
// in [2^13, 2^14), so f16 neither overflows nor loses the small parts to underflow; part p
// is the half rounding of what the parts before it left, written as row p·m + r), one
// half GEMM of all the parts with f32 accumulation (each product of two halves is exact in
// f32), and dq_split_out summing a row's parts, smallest first, unscaled, plus the residual.
// Two f16 parts carry 22 significant bits and three bf16 parts 24: the f32 product's
// accuracy at tensor-core speed. One block (256 threads) per row.
// Value i of row xr as the split sees it: x itself (glu 0), or silu(gate)·up of the row's
// halves (x is [m, 2k]; glu as dq_swiglu's) rounded to T as dq_swiglu stores it, so the fused
// split of the down projection's input writes the bytes dq_swiglu then dq_split_in write.
template <typename T>
__device__ __forceinline__ float dq_split_val(const T* __restrict__ xr, i64 i, i64 k, int glu) {
    if (glu == 0) return ldf(xr, i);
    const float gt = ldf(xr, glu == 1 ? i : k + i), up = ldf(xr, glu == 1 ? k + i : i);
    T t;
    stf(&t, 0, up * (gt / (1.0f + expf(-gt))));
    return ldf(&t, 0);
}
template <typename T, typename W>
__device__ __forceinline__ void dq_split_row(const T* __restrict__ x, W* __restrict__ h,
                                             float* __restrict__ inv, i64 m, i64 k, int parts,
                                             int glu) {
    __shared__ float red[32];
    const i64 r = blockIdx.x;
    const T* xr = x + r * k * (glu != 0 ? 2 : 1);
    float mx = 0.f;
    for (i64 i = threadIdx.x; i < k; i += blockDim.x) mx = fmaxf(mx, fabsf(dq_split_val(xr, i, k, glu)));
    mx = block_max(mx, red);
    const int e = mx > 0.f && isfinite(mx) ? min(max(13 - ilogbf(mx), -120), 120) : 0;
    const float s = ldexpf(1.f, e);
    if (threadIdx.x == 0) inv[r] = ldexpf(1.f, -e);
    for (i64 i = threadIdx.x; i < k; i += blockDim.x) {
        float left = dq_split_val(xr, i, k, glu) * s;
        for (int p = 0; p < parts; ++p) {
            W* dst = h + (p * m + r) * k + i;
            stf(dst, 0, left);
            left -= ldf(dst, 0);
        }
    }
}
// glu 1 / 2: x is [m, 2k] and the split is of silu(gate)·up (the SwiGLU that the down
// projection reads), computed here instead of by dq_swiglu into a scratch first.
#define RLX_DQ_SPLIT(sfx, T, wsfx, W)                                                         \
    extern "C" __global__ void dq_split_in_##sfx##_##wsfx(const T* x, W* h, float* inv,       \
                                                         i64 m, i64 k, int parts, int glu) {  \
        dq_split_row<T, W>(x, h, inv, m, k, parts, glu);                                      \
    }
// The split products' sums are memory-bound passes over [parts·m, n] f32: where a row's
// length allows, a thread takes four columns with 16-byte loads (the scratch rows start on
// 16-byte boundaries) and one 32-bit row division, the sums in the same order as one column
// a thread (the same bits). A grid sized for the columns or for the quads serves both.
__device__ __forceinline__ i64 dq_row_of(i64 q, i64 per_row, i64 total) {
    return total <= 0x7fffffffll ? (i64)((unsigned)q / (unsigned)per_row) : q / per_row;
}
__device__ __forceinline__ void f4_add(float4& t, const float4 v) {
    t.x += v.x;
    t.y += v.y;
    t.z += v.z;
    t.w += v.w;
}
template <typename T>
__device__ __forceinline__ void dq_split_out_body(const float* __restrict__ y,
                                                  const float* __restrict__ inv,
                                                  T* __restrict__ out, const T* __restrict__ res,
                                                  i64 m, i64 n, int parts) {
    const i64 first = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    if ((n & 3) == 0) {
        const i64 n4 = n >> 2, total = m * n4;
        for (i64 q = first; q < total; q += stride) {
            const i64 r = dq_row_of(q, n4, total), i = q << 2;
            float4 t = make_float4(0.f, 0.f, 0.f, 0.f);
            for (int p = parts - 1; p >= 0; --p)
                f4_add(t, *reinterpret_cast<const float4*>(y + p * m * n + i));
            const float s = inv[r];
            const float tv[4] = {t.x, t.y, t.z, t.w};
#pragma unroll
            for (int j = 0; j < 4; ++j)
                stf(out, i + j, tv[j] * s + (res != nullptr ? ldf(res, i + j) : 0.f));
        }
        return;
    }
    for (i64 i = first; i < m * n; i += stride) {
        const i64 r = i / n;
        float t = 0.f;
        for (int p = parts - 1; p >= 0; --p) t += y[p * m * n + i];
        stf(out, i, t * inv[r] + (res != nullptr ? ldf(res, i) : 0.f));
    }
}
#define RLX_DQ_SPLIT_OUT(sfx, T)                                                              \
    extern "C" __global__ void dq_split_out_##sfx(const float* y, const float* inv, T* out,   \
                                                  const T* res, i64 m, i64 n, int parts) {    \
        dq_split_out_body<T>(y, inv, out, res, m, n, parts);                                  \
    }
// A quantized weight's chunk: y holds [x_hi; x_lo] · [w_hi; w_lo]ᵀ ([2m, 2·rows]); column
// c of row r of the output sums its four parts smallest first and unscales them by x's row
// scale ix[r] and the weight row's iw[c] (powers of two: exact).
template <typename T>
__device__ __forceinline__ void dq_split2_out_body(const float* __restrict__ y,
                                                   const float* __restrict__ ix,
                                                   const float* __restrict__ iw,
                                                   T* __restrict__ out, const T* __restrict__ res,
                                                   i64 m, i64 rows, i64 ldo, i64 n0) {
    const i64 w2 = 2 * rows;
    const i64 first = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    if ((rows & 3) == 0) {
        const i64 r4 = rows >> 2, total = m * r4;
        for (i64 q = first; q < total; q += stride) {
            const i64 r = dq_row_of(q, r4, total), c = (q - r * r4) << 2;
            const float* hi = y + r * w2;
            const float* lo = y + (m + r) * w2;
            const float4 a = *reinterpret_cast<const float4*>(lo + rows + c);
            const float4 b = *reinterpret_cast<const float4*>(lo + c);
            const float4 d = *reinterpret_cast<const float4*>(hi + rows + c);
            const float4 e = *reinterpret_cast<const float4*>(hi + c);
            const float4 w = *reinterpret_cast<const float4*>(iw + c);
            const float tv[4] = {((a.x + b.x) + d.x) + e.x, ((a.y + b.y) + d.y) + e.y,
                                 ((a.z + b.z) + d.z) + e.z, ((a.w + b.w) + d.w) + e.w};
            const float wv[4] = {w.x, w.y, w.z, w.w};
            const float sx = ix[r];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const i64 o = r * ldo + n0 + c + j;
                stf(out, o, tv[j] * sx * wv[j] + (res != nullptr ? ldf(res, o) : 0.f));
            }
        }
        return;
    }
    for (i64 i = first; i < m * rows; i += stride) {
        const i64 r = i / rows, c = i - r * rows;
        const float* hi = y + r * w2;
        const float* lo = y + (m + r) * w2;
        const float t = ((lo[rows + c] + lo[c]) + hi[rows + c]) + hi[c];
        const i64 o = r * ldo + n0 + c;
        stf(out, o, t * ix[r] * iw[c] + (res != nullptr ? ldf(res, o) : 0.f));
    }
}
#define RLX_DQ_SPLIT2_OUT(sfx, T)                                                             \
    extern "C" __global__ void dq_split2_out_##sfx(const float* y, const float* ix,           \
                                                   const float* iw, T* out, const T* res,     \
                                                   i64 m, i64 rows, i64 ldo, i64 n0) {        \
        dq_split2_out_body<T>(y, ix, iw, out, res, m, rows, ldo, n0);                         \
    }
#define RLX_DQ_SPLITS(sfx, T) \
    RLX_DQ_SPLIT(sfx, T, f16, __half) RLX_DQ_SPLIT(sfx, T, bf16, __nv_bfloat16) \
    RLX_DQ_SPLIT_OUT(sfx, T) RLX_DQ_SPLIT2_OUT(sfx, T)
RLX_GATE_base(RLX_FLOAT_TYPES(RLX_DQ_SPLITS))

// A chunk of quantized weight rows decoded straight into the strict product's two f16 parts:
// what dq_dequant (to f32) followed by dq_split_in (f32 → 2 × f16) compute, bit for bit, in
// one launch and without the f32 scratch between them (8 bytes a value of traffic less). Per
// row (one block each) the largest |value| sets the row's power-of-two scale; the values are
// then decoded a second time (the row's bytes are in L1 by then) and split. h is
// [2·rows, K] (part p of row r at row p·rows + r), inv[r] the scale's inverse.
template <int S>
__device__ void dq_split_w(const u8* w, __half* h, float* inv, i64 rows, i64 K) {
    __shared__ float red[32];
    const i64 r = blockIdx.x;
    const u8* row = w + r * ((K / block_len<S>()) * block_bytes<S>());
    float mx = 0.f;
    for (i64 i = threadIdx.x; i < K; i += blockDim.x) mx = fmaxf(mx, fabsf(dq_row_elem<S>(row, K, i)));
    mx = block_max(mx, red);
    const int e = mx > 0.f && isfinite(mx) ? min(max(13 - ilogbf(mx), -120), 120) : 0;
    const float s = ldexpf(1.f, e);
    if (threadIdx.x == 0) inv[r] = ldexpf(1.f, -e);
    for (i64 i = threadIdx.x; i < K; i += blockDim.x) {
        float left = dq_row_elem<S>(row, K, i) * s;
        for (int p = 0; p < 2; ++p) {
            __half* dst = h + (p * rows + r) * K + i;
            stf(dst, 0, left);
            left -= ldf(dst, 0);
        }
    }
}
#define RLX_DQ_SPLIT_W(name, S)                                                               \
    extern "C" __global__ void dq_split_w_##name(const u8* w, __half* h, float* inv, i64 rows, \
                                                 i64 K) {                                     \
        dq_split_w<S>(w, h, inv, rows, K);                                                    \
    }
RLX_GATE_q8_0(RLX_DQ_SPLIT_W(q8_0, Q8_0))
RLX_GATE_q4_0(RLX_DQ_SPLIT_W(q4_0, Q4_0))
RLX_GATE_q4_1(RLX_DQ_SPLIT_W(q4_1, Q4_1))
RLX_GATE_q5_0(RLX_DQ_SPLIT_W(q5_0, Q5_0))
RLX_GATE_q5_1(RLX_DQ_SPLIT_W(q5_1, Q5_1))
RLX_GATE_q4_k(RLX_DQ_SPLIT_W(q4_k, Q4_K))
RLX_GATE_q5_k(RLX_DQ_SPLIT_W(q5_k, Q5_K))
RLX_GATE_q6_k(RLX_DQ_SPLIT_W(q6_k, Q6_K))
RLX_GATE_q8_0p(RLX_DQ_SPLIT_W(q8_0p, Q8_0P))
RLX_GATE_q4_0p(RLX_DQ_SPLIT_W(q4_0p, Q4_0P))
RLX_GATE_q4_1p(RLX_DQ_SPLIT_W(q4_1p, Q4_1P))
RLX_GATE_q5_0p(RLX_DQ_SPLIT_W(q5_0p, Q5_0P))
RLX_GATE_q5_1p(RLX_DQ_SPLIT_W(q5_1p, Q5_1P))
