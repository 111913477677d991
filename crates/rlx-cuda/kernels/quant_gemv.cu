// rlx quant kernels, part 2 (see lower/linalg_quant.rs): the staged decode GEMV and the
// instantiations of every decode-side kernel. Compiled as one module after quant.cu (the
// block layouts, decoders, the warp-per-column GEMV and the prefill kernels).

// ---- Staged GEMV (decode, M ≤ 8): dq_gemv_st_<scheme>_m<MM>_<sfx> ----
// The block first stages h — x, x·gamma (the RMS norm's scale, linear in h, multiplies the
// sums at the end), or silu(gate)·up over the two halves of x's rows (glu = 1: gate first,
// 2: up first) — for its M rows in shared memory as f32 in one pass over x, 36 floats per
// 32-value unit (4 of padding, so the eight lanes of a quarter warp reading eight consecutive
// units' float4s hit 32 distinct banks). Then each group of `lpr` lanes (a power of two ≤ 32)
// computes one output column, lane i of the group taking 32-value units i, i + lpr, …; a lane
// requests its first unit's bytes before the staging and its next unit's before using the
// current one, so weight loads overlap everything else. The kernel is latency-bound at decode
// sizes, so each thread's dependent chain is kept short: one pass over x, one block
// reduction per row (the norm), two accumulators per dot, nibbles turned into floats by
// byte permutes instead of int-to-float conversions.
#define GS_STRIDE 36

__device__ __forceinline__ unsigned ld_u16(const u8* p) { return *reinterpret_cast<const unsigned short*>(p); }
__device__ __forceinline__ unsigned ld_u32(const u8* p) { return *reinterpret_cast<const unsigned*>(p); }
__device__ __forceinline__ float h16_lo(unsigned v) { return __half2float(__ushort_as_half((unsigned short)(v & 0xffffu))); }
__device__ __forceinline__ float h16_hi(unsigned v) { return __half2float(__ushort_as_half((unsigned short)(v >> 16))); }
// The bytes of a block of at most 4·NW − 2 bytes at p (2-byte aligned, as Q8_0's 34-byte
// blocks are) as NW words from NW aligned word loads and funnel shifts — half the load
// instructions of u16 reads (measured: Q8_0's head 22 % faster; Q5_0's slower, kept on u16). A load never passes the aligned word
// that holds the block's last byte; what e[NW − 1] holds past the block is garbage.
template <int NW>
__device__ __forceinline__ void ld_words(const u8* p, unsigned* e) {
    const unsigned off = (unsigned)(reinterpret_cast<size_t>(p) & 3u);
    const unsigned* a = reinterpret_cast<const unsigned*>(p - off);
    unsigned w[NW + 1];
#pragma unroll
    for (int i = 0; i < NW; ++i) w[i] = a[i];
    w[NW] = 0u;
#pragma unroll
    for (int i = 0; i < NW; ++i) e[i] = __funnelshift_r(w[i], w[i + 1], 8 * off);
}

// Byte j of v less `bias` as a float: the byte placed in the mantissa of 2^23, less 2^23 +
// bias (both exact). A permute and a subtract, no int-to-float conversion (those issue at a
// sixteenth of the FMA rate on sm_90, and a unit has 32 of them).
__device__ __forceinline__ float byte_f(unsigned v, int j, float bias = 0.f) {
    return __int_as_float(__byte_perm(v, 0x4B000000u, 0x7440 + j)) - (8388608.0f + bias);
}

// Bits 0..3 of b moved to bit 4 of bytes 0..3: the four shifted copies of b that the
// multiply adds do not overlap, so no carry disturbs the selected bits.
__device__ __forceinline__ unsigned spread4_to_bit4(unsigned b) {
    return (b * 0x02040810u) & 0x10101010u;
}

// Σ_e (q_e − BIAS)·h_e over one 32-value unit whose quants are the nibbles of four words
// (byte j of word i: element 4i + j in the low nibble, 16 + 4i + j in the high one), as in
// Q4_0 / Q4_1; with FIVE, bit e of qh is element e's fifth bit, as in Q5_0 / Q5_1.
template <bool FIVE, int BIAS>
__device__ __forceinline__ float dot_nib16(const unsigned* q, unsigned qh, const float4* h) {
    const float b = (float)BIAS;
    float s0 = 0.f, s1 = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float4 lo = h[i], hi = h[4 + i];
        unsigned l = q[i] & 0x0f0f0f0fu, u = (q[i] >> 4) & 0x0f0f0f0fu;
        if (FIVE) {
            l |= spread4_to_bit4((qh >> (4 * i)) & 15u);
            u |= spread4_to_bit4((qh >> (16 + 4 * i)) & 15u);
        }
        s0 = fmaf(byte_f(l, 0, b), lo.x, s0);
        s1 = fmaf(byte_f(u, 0, b), hi.x, s1);
        s0 = fmaf(byte_f(l, 1, b), lo.y, s0);
        s1 = fmaf(byte_f(u, 1, b), hi.y, s1);
        s0 = fmaf(byte_f(l, 2, b), lo.z, s0);
        s1 = fmaf(byte_f(u, 2, b), hi.z, s1);
        s0 = fmaf(byte_f(l, 3, b), lo.w, s0);
        s1 = fmaf(byte_f(u, 3, b), hi.w, s1);
    }
    return s0 + s1;
}

// Σ h over one unit.
__device__ __forceinline__ float hsum32(const float4* h) {
    float t0 = 0.f, t1 = 0.f;
#pragma unroll
    for (int i = 0; i < 8; i += 2) {
        t0 += (h[i].x + h[i].y) + (h[i].z + h[i].w);
        t1 += (h[i + 1].x + h[i + 1].y) + (h[i + 1].z + h[i + 1].w);
    }
    return t0 + t1;
}

// 32-value unit u of a packed row: `load` its bytes into registers, `dot` with h (the unit's
// 32 staged values). Blocks are 2-byte aligned in every scheme (4-byte in Q4_1, Q5_1, Q4_K,
// Q5_K), so the loads are u16 / u32 words, never single bytes.
template <int S>
struct GsUnit;

template <>
struct GsUnit<Q8_0> {
    unsigned v[9];  // d, then 32 i8 as 8 words
    __device__ __forceinline__ void load(const u8* row, int u, int) {
        // 34 bytes: words 0..8 hold d and the quants two bytes off their word boundaries.
        unsigned e[9];
        ld_words<9>(row + u * 34, e);
        v[0] = e[0] & 0xffffu;
#pragma unroll
        for (int i = 0; i < 8; ++i) v[1 + i] = __funnelshift_r(e[i], e[i + 1], 16);
    }
    __device__ __forceinline__ float dot(const float4* h) const {
        // Flipping each byte's sign bit gives q + 128 as an unsigned byte.
        float s0 = 0.f, s1 = 0.f;
#pragma unroll
        for (int i = 0; i < 8; i += 2) {
            const float4 x = h[i], y = h[i + 1];
            const unsigned a = v[1 + i] ^ 0x80808080u, c = v[2 + i] ^ 0x80808080u;
            s0 = fmaf(byte_f(a, 0, 128.f), x.x, s0);
            s1 = fmaf(byte_f(c, 0, 128.f), y.x, s1);
            s0 = fmaf(byte_f(a, 1, 128.f), x.y, s0);
            s1 = fmaf(byte_f(c, 1, 128.f), y.y, s1);
            s0 = fmaf(byte_f(a, 2, 128.f), x.z, s0);
            s1 = fmaf(byte_f(c, 2, 128.f), y.z, s1);
            s0 = fmaf(byte_f(a, 3, 128.f), x.w, s0);
            s1 = fmaf(byte_f(c, 3, 128.f), y.w, s1);
        }
        return h16_lo(v[0]) * (s0 + s1);
    }
};

template <>
struct GsUnit<Q4_0> {
    unsigned v[5];
    __device__ __forceinline__ void load(const u8* row, int u, int) {
        const u8* b = row + u * 18;
        v[0] = ld_u16(b);
#pragma unroll
        for (int i = 0; i < 4; ++i) v[1 + i] = ld_u16(b + 2 + 4 * i) | (ld_u16(b + 4 + 4 * i) << 16);
    }
    __device__ __forceinline__ float dot(const float4* h) const {
        return h16_lo(v[0]) * dot_nib16<false, 8>(v + 1, 0u, h);
    }
};

template <>
struct GsUnit<Q4_1> {
    unsigned v[5];
    __device__ __forceinline__ void load(const u8* row, int u, int) {
        const u8* b = row + u * 20;
#pragma unroll
        for (int i = 0; i < 5; ++i) v[i] = ld_u32(b + 4 * i);
    }
    __device__ __forceinline__ float dot(const float4* h) const {
        const float s = dot_nib16<false, 0>(v + 1, 0u, h);
        return fmaf(h16_lo(v[0]), s, h16_hi(v[0]) * hsum32(h));
    }
};

template <>
struct GsUnit<Q5_0> {
    unsigned v[6];  // d, qh, 4 nibble words
    __device__ __forceinline__ void load(const u8* row, int u, int) {
        const u8* b = row + u * 22;
        v[0] = ld_u16(b);
        v[1] = ld_u16(b + 2) | (ld_u16(b + 4) << 16);
#pragma unroll
        for (int i = 0; i < 4; ++i) v[2 + i] = ld_u16(b + 6 + 4 * i) | (ld_u16(b + 8 + 4 * i) << 16);
    }
    __device__ __forceinline__ float dot(const float4* h) const {
        return h16_lo(v[0]) * dot_nib16<true, 16>(v + 2, v[1], h);
    }
};

template <>
struct GsUnit<Q5_1> {
    unsigned v[6];
    __device__ __forceinline__ void load(const u8* row, int u, int) {
        const u8* b = row + u * 24;
#pragma unroll
        for (int i = 0; i < 6; ++i) v[i] = ld_u32(b + 4 * i);
    }
    __device__ __forceinline__ float dot(const float4* h) const {
        const float s = dot_nib16<true, 0>(v + 2, v[1], h);
        return fmaf(h16_lo(v[0]), s, h16_hi(v[0]) * hsum32(h));
    }
};

// Planar units: the same registers as their base scheme's unit (so the same dot), loaded
// from the row's planes — quants as aligned 8-byte words (rows are 8-byte aligned: the
// layout is only chosen when a row's bytes are a multiple of 8), fifth bits and scales one
// aligned load each.
__device__ __forceinline__ void ld_q16(const u8* p, unsigned* v) {
    const uint2 a = *reinterpret_cast<const uint2*>(p), b = *reinterpret_cast<const uint2*>(p + 8);
    v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
}
template <int S>
struct GsUnitP : GsUnit<base_of<S>()> {
    __device__ __forceinline__ void load(const u8* row, int u, int units) {
        constexpr int B = base_of<S>();
        // Register order as the base unit's: scale(s), [fifth bits], quant words.
        constexpr int q0 = (B == Q5_0 || B == Q5_1) ? 2 : 1;
        const u8* sc = row + pl_sc<S>(units, u);
        this->v[0] = (B == Q4_1 || B == Q5_1) ? ld_u32(sc) : ld_u16(sc);
        if (q0 == 2) this->v[1] = ld_u32(row + pl_qh<S>(units, u));
        ld_q16(row + pl_qs<S>(u), this->v + q0);
        if (B == Q8_0) ld_q16(row + pl_qs<S>(u) + 16, this->v + q0 + 4);
    }
};
template <>
struct GsUnit<Q8_0P> : GsUnitP<Q8_0P> {};
template <>
struct GsUnit<Q4_0P> : GsUnitP<Q4_0P> {};
template <>
struct GsUnit<Q4_1P> : GsUnitP<Q4_1P> {};
template <>
struct GsUnit<Q5_0P> : GsUnitP<Q5_0P> {};
template <>
struct GsUnit<Q5_1P> : GsUnitP<Q5_1P> {};

// F16 / BF16: 32 plain halves, 64 bytes (16-byte aligned rows: the lowering checks the
// weight pointer), read as four 16-byte words.
template <int S>
struct GsUnitHalf {
    uint4 v[4];
    __device__ __forceinline__ void load(const u8* row, int u, int) {
        const uint4* b = reinterpret_cast<const uint4*>(row + u * 64);
#pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = b[i];
    }
    __device__ __forceinline__ float2 pair(unsigned w) const {
        if (S == F16S) return __half22float2(*reinterpret_cast<const __half2*>(&w));
        return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
    }
    __device__ __forceinline__ float dot(const float4* h) const {
        float s0 = 0.f, s1 = 0.f;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float4 x = h[2 * i], y = h[2 * i + 1];
            const float2 a = pair(v[i].x), b = pair(v[i].y), c = pair(v[i].z), d = pair(v[i].w);
            s0 = fmaf(a.x, x.x, s0);
            s1 = fmaf(a.y, x.y, s1);
            s0 = fmaf(b.x, x.z, s0);
            s1 = fmaf(b.y, x.w, s1);
            s0 = fmaf(c.x, y.x, s0);
            s1 = fmaf(c.y, y.y, s1);
            s0 = fmaf(d.x, y.z, s0);
            s1 = fmaf(d.y, y.w, s1);
        }
        return s0 + s1;
    }
};
template <>
struct GsUnit<F16S> : GsUnitHalf<F16S> {};
template <>
struct GsUnit<BF16S> : GsUnitHalf<BF16S> {};

// Q4_K / Q5_K: unit u is sub-block j = u % 8 of super-block u / 8: its 6-bit scale and min,
// the 32 bytes whose low (even j) or high (odd j) nibbles are its quants, and for Q5_K the 32
// bytes whose bit j is its fifth bit.
template <int S>
struct GsUnitK {
    unsigned dd, sm, q[8], qh[8];
    int j;
    __device__ __forceinline__ void load(const u8* row, int u, int) {
        const u8* b = row + (u >> 3) * block_bytes<S>();
        j = u & 7;
        dd = ld_u32(b);
        // The bytes k_scale_min reads for sub-block j: s[j], s[j + 4] (j < 4) or s[j + 4],
        // s[j − 4], s[j] (j ≥ 4), packed as four bytes.
        const u8* s = b + 4;
        sm = j < 4 ? (unsigned)s[j] | ((unsigned)s[j + 4] << 8)
                   : (unsigned)s[j + 4] | ((unsigned)s[j - 4] << 8) | ((unsigned)s[j] << 16);
        const u8* qs = b + (S == Q5_K ? 48 : 16) + 32 * (j >> 1);
#pragma unroll
        for (int i = 0; i < 8; ++i) q[i] = ld_u32(qs + 4 * i);
        if (S == Q5_K) {
#pragma unroll
            for (int i = 0; i < 8; ++i) qh[i] = ld_u32(b + 16 + 4 * i);
        }
    }
    __device__ __forceinline__ float dot(const float4* h) const {
        const float hs = hsum32(h);
        int sc, m;
        if (j < 4) {
            sc = (int)(sm & 63u);
            m = (int)((sm >> 8) & 63u);
        } else {
            const unsigned a = sm & 255u, c = (sm >> 8) & 255u, e = (sm >> 16) & 255u;
            sc = (int)((a & 15u) | ((c >> 6) << 4));
            m = (int)((a >> 4) | ((e >> 6) << 4));
        }
        const int sh = 4 * (j & 1);
        float s0 = 0.f, s1 = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const float4 x = h[i];
            unsigned b = (q[i] >> sh) & 0x0f0f0f0fu;
            if (S == Q5_K) b |= ((qh[i] >> j) & 0x01010101u) << 4;
            s0 = fmaf(byte_f(b, 0), x.x, s0);
            s1 = fmaf(byte_f(b, 1), x.y, s1);
            s0 = fmaf(byte_f(b, 2), x.z, s0);
            s1 = fmaf(byte_f(b, 3), x.w, s1);
        }
        const float s = s0 + s1;
        return (h16_lo(dd) * (float)sc) * s - (h16_hi(dd) * (float)m) * hs;
    }
};
template <>
struct GsUnit<Q4_K> : GsUnitK<Q4_K> {};
template <>
struct GsUnit<Q5_K> : GsUnitK<Q5_K> {};

// Q6_K: unit u is 32-value group g = u % 4 of half hh = (u / 4) % 2 of super-block u / 8.
template <>
struct GsUnit<Q6_K> {
    unsigned lo[8], hi[8], sc, d;
    int g;
    __device__ __forceinline__ void load(const u8* row, int u, int) {
        const u8* b = row + (u >> 3) * 210;
        g = u & 3;
        const int hh = (u >> 2) & 1;
        const u8* pl = b + 64 * hh + 32 * (g & 1);
        const u8* ph = b + 128 + 32 * hh;
        // Each 32-byte run (2-byte aligned: super-blocks are 210 bytes) as nine aligned words
        // and funnel shifts, not sixteen 2-byte loads (the ninth word stays inside the
        // super-block: the runs end by byte 192 of 210).
        unsigned e[9];
        ld_words<9>(pl, e);
#pragma unroll
        for (int i = 0; i < 8; ++i) lo[i] = e[i];
        ld_words<9>(ph, e);
#pragma unroll
        for (int i = 0; i < 8; ++i) hi[i] = e[i];
        sc = ld_u16(b + 192 + 8 * hh + 2 * g);
        d = ld_u16(b + 208);
    }
    __device__ __forceinline__ float dot(const float4* h) const {
        const int ls = g < 2 ? 0 : 4, hs2 = 2 * g;
        float s0 = 0.f, s1 = 0.f, t0 = 0.f, t1 = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const float4 x = h[i];
            const unsigned b = ((lo[i] >> ls) & 0x0f0f0f0fu) | (((hi[i] >> hs2) & 0x03030303u) << 4);
            // Elements 0..15 take the first scale, 16..31 the second.
            float& a = i < 4 ? s0 : s1;
            float& c = i < 4 ? t0 : t1;
            a = fmaf(byte_f(b, 0, 32.f), x.x, a);
            c = fmaf(byte_f(b, 1, 32.f), x.y, c);
            a = fmaf(byte_f(b, 2, 32.f), x.z, a);
            c = fmaf(byte_f(b, 3, 32.f), x.w, c);
        }
        s0 += t0;
        s1 += t1;
        const float sc0 = (float)(signed char)(sc & 255u), sc1 = (float)(signed char)(sc >> 8);
        const float dd = h16_lo(d);
        return (dd * sc0) * s0 + (dd * sc1) * s1;
    }
};

// Stage h for the M rows of x into shared memory `sh` (GS_STRIDE floats per 32-value unit):
// x, x·gamma (the RMS norm's scale goes to scale[m], applied to the sums at the end) or
// silu(gate)·up; the caller's barrier publishes it.
template <typename T, int MM>
__device__ __forceinline__ void gs_stage(const T* x, const T* gamma, float* sh, float* red,
                                         int M, i64 K, float eps, int glu, float* scale) {
    const int units = (int)(K >> 5), k32 = (int)K, tid = threadIdx.x, lane = tid & 31;
    const int xs = glu ? 2 * k32 : k32;
#pragma unroll
    for (int m = 0; m < MM; ++m) {
        scale[m] = 1.f;
        if (m < M) {
            const T* xm = x + (i64)m * xs;
            float* hm = sh + m * units * GS_STRIDE;
            float ss = 0.f;
            int k0 = 0;
            const bool a16 = ((reinterpret_cast<size_t>(xm) | reinterpret_cast<size_t>(gamma)) & 15u) == 0;
            if (sizeof(T) == 4 && (k32 & 3) == 0 && a16) {
                // f32 rows four values a load (a long row, as the down product's, staged by
                // every block, must not cost a chain of dependent scalar reads).
                const float4* x4 = reinterpret_cast<const float4*>(xm);
                const float4* g4 = reinterpret_cast<const float4*>(gamma);
                float4* h4 = reinterpret_cast<float4*>(hm);
                const int q32 = k32 >> 2;
#pragma unroll 4
                for (int q = tid; q < q32; q += blockDim.x) {
                    float4 v;
                    if (glu == 0) {
                        v = x4[q];
                        ss = fmaf(v.x, v.x, fmaf(v.y, v.y, fmaf(v.z, v.z, fmaf(v.w, v.w, ss))));
                        if (gamma != nullptr) {
                            const float4 gm = g4[q];
                            v.x *= gm.x, v.y *= gm.y, v.z *= gm.z, v.w *= gm.w;
                        }
                    } else {
                        const float4 gt = x4[glu == 1 ? q : q32 + q];
                        const float4 up = x4[glu == 1 ? q32 + q : q];
                        v.x = up.x * (gt.x / (1.0f + expf(-gt.x)));
                        v.y = up.y * (gt.y / (1.0f + expf(-gt.y)));
                        v.z = up.z * (gt.z / (1.0f + expf(-gt.z)));
                        v.w = up.w * (gt.w / (1.0f + expf(-gt.w)));
                    }
                    const int k = 4 * q;
                    h4[((k >> 5) * GS_STRIDE + (k & 31)) >> 2] = v;
                }
                k0 = k32;
            }
            // blockDim is a multiple of 32, so lane = k mod 32.
            for (int k = k0 + tid; k < k32; k += blockDim.x) {
                float v;
                if (glu == 0) {
                    v = ldf(xm, k);
                    ss = fmaf(v, v, ss);
                    if (gamma != nullptr) v *= ldf(gamma, k);
                } else {
                    const float gt = ldf(xm, glu == 1 ? k : k32 + k);
                    const float up = ldf(xm, glu == 1 ? k32 + k : k);
                    v = up * (gt / (1.0f + expf(-gt)));
                }
                hm[(k >> 5) * GS_STRIDE + lane] = v;
            }
            // The norm's scale multiplies the sums at the end (its barriers also publish h).
            if (gamma != nullptr) scale[m] = rsqrtf(block_sum(ss, red) / (float)K + eps);
        }
    }
}

// R: the lane keeps R units in registers, R − 1 of them requested ahead of the one it is
// using (a tuning choice: a short row's lane has all its units in flight at once, instead of
// paying HBM's latency once per unit).
template <int S, typename T, int MM, int R>
__device__ void dq_gemv_st(const T* x, const u8* w, T* y, const T* gamma, const T* res, int M,
                           i64 N, i64 K, float eps, int glu, int lpr) {
    extern __shared__ float4 gs_sh4[];
    float* sh = reinterpret_cast<float*>(gs_sh4);
    const int units = (int)(K >> 5);
    float* red = sh + M * units * GS_STRIDE;
    // lpr > 32 (= blockDim.x): a long row (the down products' K) taken by the whole block,
    // its sums reduced through shared memory — enough lanes on few rows to keep HBM busy.
    const bool wide = lpr > 32;
    const int tid = threadIdx.x, lane = tid & 31;
    const int gi = wide ? tid : (lane & (lpr - 1)), g = wide ? 0 : lane / lpr;
    // Rows are taken warp by warp, grid-stride: a grid smaller than the rows (a few blocks a
    // multiprocessor) stages h once per block and streams many rows with no wave tail. The
    // loop is warp-uniform (the shuffles need every lane); group g of the warp takes row
    // nb + g, and each lane walks (row, unit) pairs requesting the next pair's bytes — the
    // next row's first unit at a row's end — before it uses the current one.
    const int gpw = wide ? 1 : 32 / lpr, per = (units + lpr - 1) / lpr;
    const i64 stride = wide ? (i64)gridDim.x : (i64)gridDim.x * (blockDim.x >> 5) * gpw;
    const i64 rb = (K / block_len<S>()) * block_bytes<S>();
    i64 nb = wide ? (i64)blockIdx.x : ((i64)blockIdx.x * (blockDim.x >> 5) + (tid >> 5)) * gpw;
    // The lane's (row, unit) pairs in order: (nb, it) the one it uses next, (lnb, lit) the
    // next it requests; unit gi + it·lpr of row nb + g.
    GsUnit<S> ring[R];
    i64 lnb = nb;
    int lit = 0;
    bool launched = false;
    auto request = [&](GsUnit<S>& slot) {
        const int lu = gi + lit * lpr;
        if (lnb + g < N && lu < units) slot.load(w + (lnb + g) * rb, lu, units);
        if (++lit == per) {
            lit = 0;
            lnb += stride;
        }
        if (!launched && lnb >= N) {
            pdl_launch_next();
            launched = true;
        }
    };
#pragma unroll
    for (int j = 0; j + 1 < R; ++j) request(ring[j]);
    pdl_wait();
    float scale[MM];
    gs_stage<T, MM>(x, gamma, sh, red, M, K, eps, glu, scale);
    __syncthreads();
    float acc[MM];
#pragma unroll
    for (int m = 0; m < MM; ++m) acc[m] = 0.f;
    int it = 0;
    while (nb < N) {
#pragma unroll
        for (int j = 0; j < R; ++j) {
            request(ring[(j + R - 1) % R]);
            const int u = gi + it * lpr;
            if (nb + g < N && u < units) {
#pragma unroll
                for (int m = 0; m < MM; ++m) {
                    if (m < M) acc[m] += ring[j].dot(gs_sh4 + (m * units + u) * (GS_STRIDE / 4));
                }
            }
            if (it == per - 1) {
                const i64 n = nb + g;
#pragma unroll
                for (int m = 0; m < MM; ++m) {
                    if (m < M) {
                        float v = acc[m];
                        if (wide) {
                            v = warp_sum(v);
                            if (lane == 0) red[tid >> 5] = v;
                            __syncthreads();
                            if (tid == 0)
                                for (int w2 = 1; w2 < (int)(blockDim.x >> 5); ++w2) v += red[w2];
                            __syncthreads();
                        } else {
                            for (int o = lpr >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
                        }
                        if (n < N && gi == 0) {
                            v *= scale[m];
                            if (res != nullptr) v += ldf(res, (i64)m * N + n);
                            stf(y, (i64)m * N + n, v);
                        }
                        acc[m] = 0.f;
                    }
                }
                it = 0;
                nb += stride;
            } else {
                ++it;
            }
            // Warp-uniform (block-uniform for whole-block rows), as the shuffles need.
            if (nb >= N) break;
        }
    }
    pdl_launch_next();
}

// ---- Tile-staged GEMV (decode, one f32 row): dq_gemv_ts_<scheme>_c<CH>_f32 ----
// A block takes `tile` consecutive rows — one contiguous run of weight bytes — and its
// TS_THREADS threads load that run as 16-byte words (CH a thread, all requested before the
// wait for the previous kernel), then store them to shared memory, stage h as dq_gemv_st
// does and decode the units from shared memory, `lpr` lanes a row. The staged GEMV's lanes
// each read their own units with 2- or 4-byte loads (a Q5_0 unit is eleven of them, a warp's
// load spread over several cache lines): here every global load is a full, coalesced 16-byte
// word and the whole tile is in flight at once.
#define TS_THREADS 256
template <int S, int CH>
__device__ void dq_gemv_ts(const float* x, const u8* w, float* y, const float* gamma,
                           const float* res, i64 N, i64 K, float eps, int glu, int lpr, int tile,
                           i64 wbytes) {
    extern __shared__ float4 gs_sh4[];
    float* sh = reinterpret_cast<float*>(gs_sh4);
    const int units = (int)(K >> 5), tid = threadIdx.x;
    float* red = sh + units * GS_STRIDE;
    // 16-byte aligned: units·144 bytes of h, then 32 floats.
    u8* tb = reinterpret_cast<u8*>(red + 32);
    const i64 rb = (K / block_len<S>()) * block_bytes<S>();
    const i64 r0 = (i64)blockIdx.x * tile, r1 = min(N, r0 + tile);
    // The 16-byte words that overlap the tile's bytes [b0, b1) and lie wholly inside the
    // weight (w is 16-byte aligned); a tail under 16 bytes at the weight's end is copied
    // in 2-byte pieces below.
    const i64 b0 = r0 * rb, b1 = r1 * rb, a0 = b0 & ~(i64)15;
    const i64 a1 = min((b1 + 15) & ~(i64)15, wbytes & ~(i64)15);
    const int words = (int)((a1 - a0) >> 4);
    const uint4* src = reinterpret_cast<const uint4*>(w + a0);
    uint4 v[CH];
#pragma unroll
    for (int c = 0; c < CH; ++c) {
        const int i = tid + c * TS_THREADS;
        if (i < words) v[c] = src[i];
    }
    pdl_launch_next();
    pdl_wait();
    float scale;
    gs_stage<float, 1>(x, gamma, sh, red, 1, K, eps, glu, &scale);
#pragma unroll
    for (int c = 0; c < CH; ++c) {
        const int i = tid + c * TS_THREADS;
        if (i < words) reinterpret_cast<uint4*>(tb)[i] = v[c];
    }
    for (i64 o = a1 + 2 * tid; o < b1; o += 2 * TS_THREADS)
        *reinterpret_cast<unsigned short*>(tb + (o - a0)) = *reinterpret_cast<const unsigned short*>(w + o);
    __syncthreads();
    // Group g of lpr lanes (aligned within a warp) takes rows r0 + g, r0 + g + groups, …;
    // every lane runs every pass (the shuffles need the whole warp).
    const int groups = TS_THREADS / lpr, g = tid / lpr, gi = tid - g * lpr;
    for (i64 rp = r0; rp < r1; rp += groups) {
        const i64 r = rp + g;
        float acc = 0.f;
        if (r < r1) {
            const u8* row = tb + (r * rb - a0);
            for (int u = gi; u < units; u += lpr) {
                GsUnit<S> un;
                un.load(row, u, units);
                acc += un.dot(gs_sh4 + u * (GS_STRIDE / 4));
            }
        }
        for (int o = lpr >> 1; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (r < r1 && gi == 0) {
            float t = acc * scale;
            if (res != nullptr) t += res[r];
            y[r] = t;
        }
    }
}

#define RLX_DQ_TS(name, S)                                                                    \
    RLX_DQ_TS_C(name, S, 1) RLX_DQ_TS_C(name, S, 2) RLX_DQ_TS_C(name, S, 4) RLX_DQ_TS_C(name, S, 6)
#define RLX_DQ_TS_C(name, S, CH)                                                              \
    extern "C" __global__ void __launch_bounds__(TS_THREADS) dq_gemv_ts_##name##_c##CH##_f32( \
        const float* x, const u8* w, float* y, const float* gamma, const float* res, i64 N,   \
        i64 K, float eps, int glu, int lpr, int tile, i64 wbytes) {                           \
        dq_gemv_ts<S, CH>(x, w, y, gamma, res, N, K, eps, glu, lpr, tile, wbytes);            \
    }
RLX_GATE_q8_0(RLX_DQ_TS(q8_0, Q8_0))
RLX_GATE_q4_0(RLX_DQ_TS(q4_0, Q4_0))
RLX_GATE_q4_1(RLX_DQ_TS(q4_1, Q4_1))
RLX_GATE_q5_0(RLX_DQ_TS(q5_0, Q5_0))
RLX_GATE_q5_1(RLX_DQ_TS(q5_1, Q5_1))
RLX_GATE_q4_k(RLX_DQ_TS(q4_k, Q4_K))
RLX_GATE_q5_k(RLX_DQ_TS(q5_k, Q5_K))
RLX_GATE_q6_k(RLX_DQ_TS(q6_k, Q6_K))
RLX_GATE_f16(RLX_DQ_TS(f16, F16S))
RLX_GATE_bf16(RLX_DQ_TS(bf16, BF16S))

#define RLX_DQ_ONE(name, S, sfx, T)                                                          \
    extern "C" __global__ void dq_gemv_##name##_##sfx(const T* x, const u8* w, T* y,          \
                                                      const T* gamma, const T* res, int M,   \
                                                      i64 N, i64 K, float eps) {             \
        dq_gemv<S, T>(x, w, y, gamma, res, M, N, K, eps);                                    \
    }                                                                                        \
    extern "C" __global__ void dq_gemv_st_##name##_m1_##sfx(                                 \
        const T* x, const u8* w, T* y, const T* gamma, const T* res, int M, i64 N, i64 K,    \
        float eps, int glu, int lpr) {                                                       \
        dq_gemv_st<S, T, 1, 2>(x, w, y, gamma, res, M, N, K, eps, glu, lpr);                 \
    }                                                                                        \
    extern "C" __global__ void dq_gemv_st_##name##_m8_##sfx(                                 \
        const T* x, const u8* w, T* y, const T* gamma, const T* res, int M, i64 N, i64 K,    \
        float eps, int glu, int lpr) {                                                       \
        dq_gemv_st<S, T, GEMV_MAX_M, 2>(x, w, y, gamma, res, M, N, K, eps, glu, lpr);        \
    }                                                                                        \
    extern "C" __global__ void dq_dequant_##name##_##sfx(const u8* w, T* out, i64 rows,       \
                                                         i64 K) {                            \
        dq_dequant<S, T>(w, out, rows, K);                                                   \
    }
#define RLX_DQ(sfx, T)                                                                       \
    RLX_GATE_q8_0(RLX_DQ_ONE(q8_0, Q8_0, sfx, T))                                            \
    RLX_GATE_q4_0(RLX_DQ_ONE(q4_0, Q4_0, sfx, T))                                            \
    RLX_GATE_q4_1(RLX_DQ_ONE(q4_1, Q4_1, sfx, T))                                            \
    RLX_GATE_q5_0(RLX_DQ_ONE(q5_0, Q5_0, sfx, T))                                            \
    RLX_GATE_q5_1(RLX_DQ_ONE(q5_1, Q5_1, sfx, T))                                            \
    RLX_GATE_q4_k(RLX_DQ_ONE(q4_k, Q4_K, sfx, T))                                            \
    RLX_GATE_q5_k(RLX_DQ_ONE(q5_k, Q5_K, sfx, T))                                            \
    RLX_GATE_q6_k(RLX_DQ_ONE(q6_k, Q6_K, sfx, T))                                            \
    RLX_GATE_f16(RLX_DQ_ONE(f16, F16S, sfx, T))                                              \
    RLX_GATE_bf16(RLX_DQ_ONE(bf16, BF16S, sfx, T))
RLX_FLOAT_TYPES(RLX_DQ)
// dq_gemv_st_<scheme>_m1d<R>_f32: one f32 row (decode) with R units a lane in registers;
// R = 8 only for the 32-value schemes (5–9 registers a unit).
#define RLX_DQ_ST_DEEP(name, S, R)                                                            \
    extern "C" __global__ void dq_gemv_st_##name##_m1d##R##_f32(                              \
        const float* x, const u8* w, float* y, const float* gamma, const float* res, int M,   \
        i64 N, i64 K, float eps, int glu, int lpr) {                                          \
        dq_gemv_st<S, float, 1, R>(x, w, y, gamma, res, M, N, K, eps, glu, lpr);              \
    }
RLX_GATE_q8_0(RLX_DQ_ST_DEEP(q8_0, Q8_0, 4) RLX_DQ_ST_DEEP(q8_0, Q8_0, 8))
RLX_GATE_q4_0(RLX_DQ_ST_DEEP(q4_0, Q4_0, 4) RLX_DQ_ST_DEEP(q4_0, Q4_0, 8))
RLX_GATE_q4_1(RLX_DQ_ST_DEEP(q4_1, Q4_1, 4) RLX_DQ_ST_DEEP(q4_1, Q4_1, 8))
RLX_GATE_q5_0(RLX_DQ_ST_DEEP(q5_0, Q5_0, 4) RLX_DQ_ST_DEEP(q5_0, Q5_0, 8))
RLX_GATE_q5_1(RLX_DQ_ST_DEEP(q5_1, Q5_1, 4) RLX_DQ_ST_DEEP(q5_1, Q5_1, 8))
RLX_GATE_q4_k(RLX_DQ_ST_DEEP(q4_k, Q4_K, 4))
RLX_GATE_q5_k(RLX_DQ_ST_DEEP(q5_k, Q5_K, 4))
RLX_GATE_q6_k(RLX_DQ_ST_DEEP(q6_k, Q6_K, 4))
RLX_GATE_f16(RLX_DQ_ST_DEEP(f16, F16S, 4))
RLX_GATE_bf16(RLX_DQ_ST_DEEP(bf16, BF16S, 4))

// The planar schemes' kernels: f32 activations (decode GEMVs, the warp-per-column one, the
// prefill's weight decode to each float type and its fused split).
#define RLX_DQ_PLANAR(name, S)                                                                \
    extern "C" __global__ void dq_gemv_##name##_f32(const float* x, const u8* w, float* y,    \
                                                    const float* gamma, const float* res,     \
                                                    int M, i64 N, i64 K, float eps) {         \
        dq_gemv<S, float>(x, w, y, gamma, res, M, N, K, eps);                                 \
    }                                                                                         \
    extern "C" __global__ void dq_gemv_st_##name##_m1_f32(                                    \
        const float* x, const u8* w, float* y, const float* gamma, const float* res, int M,   \
        i64 N, i64 K, float eps, int glu, int lpr) {                                          \
        dq_gemv_st<S, float, 1, 2>(x, w, y, gamma, res, M, N, K, eps, glu, lpr);              \
    }                                                                                         \
    extern "C" __global__ void dq_gemv_st_##name##_m1d4_f32(                                  \
        const float* x, const u8* w, float* y, const float* gamma, const float* res, int M,   \
        i64 N, i64 K, float eps, int glu, int lpr) {                                          \
        dq_gemv_st<S, float, 1, 4>(x, w, y, gamma, res, M, N, K, eps, glu, lpr);              \
    }                                                                                         \
    extern "C" __global__ void dq_gemv_st_##name##_m1d8_f32(                                  \
        const float* x, const u8* w, float* y, const float* gamma, const float* res, int M,   \
        i64 N, i64 K, float eps, int glu, int lpr) {                                          \
        dq_gemv_st<S, float, 1, 8>(x, w, y, gamma, res, M, N, K, eps, glu, lpr);              \
    }                                                                                         \
    extern "C" __global__ void dq_gemv_st_##name##_m8_f32(                                    \
        const float* x, const u8* w, float* y, const float* gamma, const float* res, int M,   \
        i64 N, i64 K, float eps, int glu, int lpr) {                                          \
        dq_gemv_st<S, float, GEMV_MAX_M, 2>(x, w, y, gamma, res, M, N, K, eps, glu, lpr);     \
    }                                                                                         \
    extern "C" __global__ void dq_dequant_##name##_f32(const u8* w, float* out, i64 rows,     \
                                                       i64 K) {                               \
        dq_dequant<S, float>(w, out, rows, K);                                                \
    }                                                                                         \
    extern "C" __global__ void dq_dequant_##name##_f16(const u8* w, __half* out, i64 rows,    \
                                                       i64 K) {                               \
        dq_dequant<S, __half>(w, out, rows, K);                                               \
    }                                                                                         \
    extern "C" __global__ void dq_dequant_##name##_bf16(const u8* w, __nv_bfloat16* out,      \
                                                        i64 rows, i64 K) {                    \
        dq_dequant<S, __nv_bfloat16>(w, out, rows, K);                                        \
    }
RLX_GATE_q8_0p(RLX_DQ_PLANAR(q8_0p, Q8_0P))
RLX_GATE_q4_0p(RLX_DQ_PLANAR(q4_0p, Q4_0P))
RLX_GATE_q4_1p(RLX_DQ_PLANAR(q4_1p, Q4_1P))
RLX_GATE_q5_0p(RLX_DQ_PLANAR(q5_0p, Q5_0P))
RLX_GATE_q5_1p(RLX_DQ_PLANAR(q5_1p, Q5_1P))
