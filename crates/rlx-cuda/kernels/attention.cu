// rlx attention kernels (see lower/attention.rs). common.cuh is prepended and
// attention_decode.cu (the decode kernels) follows in the same module.
//
// attn_fwd_*: flash-style forward. One block = 128 threads = one (batch, head, tile of
// 16*ROWS queries). K/V tiles of 8*KJ keys go through shared memory as f32; the softmax
// runs online with the running max / sum / output in registers, so no Sq x Sk buffer
// exists. Thread t owns query rows r + 16*i (r = t/8, i < ROWS), keys c + 8*j of each tile
// (c = t%8, j < KJ) and output chunks of 4 columns c + 8*u (u < CV). The 8 lanes sharing
// a row sit in one warp, so row max / sum are 3 shuffles and the probabilities a warp
// writes to shared memory are read back only by that warp.
//
// attn_split_*: few query rows (decode). One block per (query row, chunk of keys), threads
// across keys; each chunk's partial (max, sum, unnormalised output) goes to `part`, and the
// last block of a row to finish (an atomic ticket per row) merges the row's partials and
// writes the output, so decode attention is one launch. With no ticket buffer the partials
// are left for attn_combine_* (the older two-launch path); one chunk writes directly.
//
// Semantics follow the CPU thunk: s = (q.k) * scale, then cap * tanh(s / cap), then the
// mask; a row that sees no key is zeros.

// Mirrors AttnArgs in lower/attention.rs (element strides; D/Dv are head sizes).
struct AttnArgs {
    i64 q_b, q_h, q_s;
    i64 k_b, k_h, k_s;
    i64 v_b, v_h, v_s;
    i64 o_b, o_h, o_s;
    int heads, group, sq, sk;
    int d, dv, mask, window;
    float scale, cap;
    // bit 0: q rows 4-aligned, bit 1: k, bit 2: v (vector loads allowed); bit 3: the split
    // kernel's lane-group chunk body (D = Dv = 8·2^i ≤ 256, bits 0-2 set)
    int vec, chunk;
    int nsplit, pad_;
    // Device address of an i64 `past` (positions before the first query, a KV cache), or 0.
    unsigned long long past;
};

// With a KV cache only its first past + sq keys are written: every kernel then works on
// that many keys (read from device memory at run time, so a captured graph serves every
// decode step), clamped to the buffer.
__device__ __forceinline__ void att_apply_past(AttnArgs& a) {
    if (a.past) {
        long long valid = *reinterpret_cast<const long long*>(a.past) + a.sq;
        a.sk = (int)(valid < 0 ? 0 : (valid > a.sk ? a.sk : valid));
    }
}

#define ATT_NONE 0
#define ATT_CAUSAL 1
#define ATT_SLIDING 2
#define ATT_CUSTOM 3

// Four consecutive elements as floats; `p` is aligned to 4 elements.
__device__ __forceinline__ float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float4 ld4(const __half* p) {
    uint2 u = *reinterpret_cast<const uint2*>(p);
    float2 a = __half22float2(*reinterpret_cast<const __half2*>(&u.x));
    float2 b = __half22float2(*reinterpret_cast<const __half2*>(&u.y));
    return make_float4(a.x, a.y, b.x, b.y);
}
__device__ __forceinline__ float4 ld4(const __nv_bfloat16* p) {
    uint2 u = *reinterpret_cast<const uint2*>(p);
    float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
    float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
    return make_float4(a.x, a.y, b.x, b.y);
}

// Keys [lo, hi) that query row `i` (absolute in 0..sq) may see under a positional mask.
// Queries are the last sq positions of the sk keys (KV-cache decode).
__device__ __forceinline__ void att_range(const AttnArgs& a, int i, int& lo, int& hi) {
    long long pos = (long long)a.sk - a.sq + i;
    long long l = 0, h = a.sk;
    if (a.mask == ATT_CAUSAL || a.mask == ATT_SLIDING) {
        h = pos + 1;
        if (a.mask == ATT_SLIDING) l = pos + 1 - a.window;
    }
    l = l < 0 ? 0 : (l > a.sk ? a.sk : l);
    h = h < 0 ? 0 : (h > a.sk ? a.sk : h);
    lo = (int)l;
    hi = (int)h;
}

__device__ __forceinline__ float att_logit(float dot, const AttnArgs& a) {
    float s = dot * a.scale;
    if (a.cap > 0.f) s = a.cap * tanhf(s / a.cap);
    return s;
}

// dst[r][c] (row stride dstride floats) = src row r col c, for r < nrows and c < cols4
// (cols rounded up to 4); rows >= nvalid and cols >= cols are zero. Each thread issues
// four loads before it stores, so their latencies overlap.
template <typename T>
__device__ __forceinline__ void att_load_tile(float* dst, int dstride, const T* src, i64 sstride,
                                              int nrows, int nvalid, int cols, int cols4,
                                              bool vec) {
    const int n4 = cols4 >> 2;
    const int total = nrows * n4;
    const int nt = blockDim.x;
    for (int base = threadIdx.x; base < total; base += 4 * nt) {
        float4 x[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const int idx = base + u * nt;
            const int r = idx / n4, c4 = idx - r * n4;
            x[u] = make_float4(0.f, 0.f, 0.f, 0.f);
            if (idx < total && r < nvalid) {
                const T* p = src + (i64)r * sstride + c4 * 4;
                if (vec) {
                    x[u] = ld4(p);
                } else {
                    const int c = c4 * 4;
                    if (c < cols) x[u].x = ldf(p, 0);
                    if (c + 1 < cols) x[u].y = ldf(p, 1);
                    if (c + 2 < cols) x[u].z = ldf(p, 2);
                    if (c + 3 < cols) x[u].w = ldf(p, 3);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const int idx = base + u * nt;
            const int r = idx / n4, c4 = idx - r * n4;
            if (idx < total) *reinterpret_cast<float4*>(dst + r * dstride + c4 * 4) = x[u];
        }
    }
}

// Row stride (floats) of the Q/K tiles: a multiple of 4 whose quarter is odd, so the 8
// key rows a warp reads at once (and the 4 query rows) fall in distinct bank groups.
__host__ __device__ constexpr int att_qk_stride(int d4) { return ((d4 >> 2) & 1) ? d4 : d4 + 4; }

template <typename T, int ROWS, int CV, int DQ, int KJ>
__device__ __forceinline__ void attn_fwd_body(const T* __restrict__ q, const T* __restrict__ k,
                                              const T* __restrict__ v,
                                              const u8* __restrict__ keep, T* __restrict__ out,
                                              const AttnArgs& a) {
    constexpr int BQ = 16 * ROWS;
    constexpr int BK = 8 * KJ;
    constexpr int PS = BK + 8;  // P row stride: 8 rows of a warp hit distinct banks
    extern __shared__ float4 att_smem4[];
    float* smem = reinterpret_cast<float*>(att_smem4);

    const int D = DQ > 0 ? DQ : a.d;
    const int D4 = DQ > 0 ? DQ : ((a.d + 3) & ~3);
    const int DS = att_qk_stride(D4);
    const int DV4 = (a.dv + 3) & ~3;
    const int NCV = DV4 >> 2;

    float* Qs = smem;
    float* Ks = Qs + BQ * DS;
    float* Vs = Ks + BK * DS;
    float* Ps = Vs + BK * DV4;
    float* Km = Ps + BQ * PS;

    const int tid = threadIdx.x, r = tid >> 3, c = tid & 7;
    const int bh = blockIdx.x;
    const int b = bh / a.heads, h = bh - b * a.heads, kvh = h / a.group;
    const int q0 = blockIdx.y * BQ;
    const int nq = min(BQ, a.sq - q0);

    const T* qb = q + b * a.q_b + h * a.q_h + (i64)q0 * a.q_s;
    const T* kb = k + b * a.k_b + kvh * a.k_h;
    const T* vb = v + b * a.v_b + kvh * a.v_h;
    const u8* kp = keep ? keep + (i64)b * a.sk : nullptr;

    att_load_tile(Qs, DS, qb, a.q_s, BQ, nq, a.d, D4, (a.vec & 1) != 0);

    int lo[ROWS], hi[ROWS];
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
        int row = q0 + r + 16 * i;
        if (row < a.sq) {
            att_range(a, row, lo[i], hi[i]);
        } else {
            lo[i] = 0;
            hi[i] = 0;
        }
    }
    // lo and hi grow with the row: the block's keys are [lo(first), hi(last)); a tile inside
    // [lo(last), hi(first)) needs no per-key check.
    int blo, bhi, flo, fhi;
    att_range(a, q0, blo, fhi);
    att_range(a, q0 + nq - 1, flo, bhi);

    float m[ROWS], l[ROWS];
    float4 o[ROWS][CV];
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
        m[i] = -INFINITY;
        l[i] = 0.f;
#pragma unroll
        for (int u = 0; u < CV; ++u) o[i][u] = make_float4(0.f, 0.f, 0.f, 0.f);
    }

    for (int kt = blo; kt < bhi; kt += BK) {
        const int nk = min(BK, a.sk - kt);
        __syncthreads();
        att_load_tile(Ks, DS, kb + (i64)kt * a.k_s, a.k_s, BK, nk, a.d, D4, (a.vec & 2) != 0);
        att_load_tile(Vs, DV4, vb + (i64)kt * a.v_s, a.v_s, BK, nk, a.dv, DV4,
                      (a.vec & 4) != 0);
        if (kp) {
            for (int j = tid; j < BK; j += blockDim.x) Km[j] = (j < nk && kp[kt + j]) ? 1.f : 0.f;
        }
        __syncthreads();

        float s[ROWS][KJ];
#pragma unroll
        for (int i = 0; i < ROWS; ++i)
#pragma unroll
            for (int j = 0; j < KJ; ++j) s[i][j] = 0.f;

        const float4* Q4 = reinterpret_cast<const float4*>(Qs);
        const float4* K4 = reinterpret_cast<const float4*>(Ks);
        const int DS4 = DS >> 2;
#pragma unroll(DQ > 0 ? DQ / 4 : 4)
        for (int d4 = 0; d4 < (D4 >> 2); ++d4) {
            float4 qv[ROWS], kv[KJ];
#pragma unroll
            for (int i = 0; i < ROWS; ++i) qv[i] = Q4[(r + 16 * i) * DS4 + d4];
#pragma unroll
            for (int j = 0; j < KJ; ++j) kv[j] = K4[(c + 8 * j) * DS4 + d4];
#pragma unroll
            for (int i = 0; i < ROWS; ++i)
#pragma unroll
                for (int j = 0; j < KJ; ++j) {
                    float t = s[i][j];
                    t = fmaf(qv[i].x, kv[j].x, t);
                    t = fmaf(qv[i].y, kv[j].y, t);
                    t = fmaf(qv[i].z, kv[j].z, t);
                    t = fmaf(qv[i].w, kv[j].w, t);
                    s[i][j] = t;
                }
        }

        const bool full = !kp && kt >= flo && kt + BK <= fhi;
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < KJ; ++j) {
                int key = c + 8 * j;
                bool ok = full || (kt + key >= lo[i] && kt + key < hi[i] && (!kp || Km[key] != 0.f));
                s[i][j] = ok ? att_logit(s[i][j], a) : -INFINITY;
                mx = fmaxf(mx, s[i][j]);
            }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
            const float mn = fmaxf(m[i], mx);
            float alpha = 1.f, sum = 0.f;
            float* prow = Ps + (r + 16 * i) * PS + c;
            if (mn == -INFINITY) {
#pragma unroll
                for (int j = 0; j < KJ; ++j) prow[8 * j] = 0.f;
            } else {
                alpha = expf(m[i] - mn);
#pragma unroll
                for (int j = 0; j < KJ; ++j) {
                    float p = expf(s[i][j] - mn);
                    sum += p;
                    prow[8 * j] = p;
                }
            }
            m[i] = mn;
            l[i] = l[i] * alpha + sum;
#pragma unroll
            for (int u = 0; u < CV; ++u) {
                o[i][u].x *= alpha;
                o[i][u].y *= alpha;
                o[i][u].z *= alpha;
                o[i][u].w *= alpha;
            }
        }
        __syncwarp();

        const float4* P4 = reinterpret_cast<const float4*>(Ps);
        const float4* V4 = reinterpret_cast<const float4*>(Vs);
        const int kend = min(BK, bhi - kt);
#pragma unroll 2
        for (int kk = 0; kk < kend; kk += 4) {
            float4 pv[ROWS];
#pragma unroll
            for (int i = 0; i < ROWS; ++i) pv[i] = P4[((r + 16 * i) * PS + kk) >> 2];
#pragma unroll
            for (int u = 0; u < CV; ++u) {
                const int ch = c + 8 * u;
                if (CV == 1 || ch < NCV) {
                    const float4 v0 = V4[(kk + 0) * NCV + ch];
                    const float4 v1 = V4[(kk + 1) * NCV + ch];
                    const float4 v2 = V4[(kk + 2) * NCV + ch];
                    const float4 v3 = V4[(kk + 3) * NCV + ch];
#pragma unroll
                    for (int i = 0; i < ROWS; ++i) {
                        float4 acc = o[i][u];
                        acc.x = fmaf(pv[i].x, v0.x, acc.x);
                        acc.y = fmaf(pv[i].x, v0.y, acc.y);
                        acc.z = fmaf(pv[i].x, v0.z, acc.z);
                        acc.w = fmaf(pv[i].x, v0.w, acc.w);
                        acc.x = fmaf(pv[i].y, v1.x, acc.x);
                        acc.y = fmaf(pv[i].y, v1.y, acc.y);
                        acc.z = fmaf(pv[i].y, v1.z, acc.z);
                        acc.w = fmaf(pv[i].y, v1.w, acc.w);
                        acc.x = fmaf(pv[i].z, v2.x, acc.x);
                        acc.y = fmaf(pv[i].z, v2.y, acc.y);
                        acc.z = fmaf(pv[i].z, v2.z, acc.z);
                        acc.w = fmaf(pv[i].z, v2.w, acc.w);
                        acc.x = fmaf(pv[i].w, v3.x, acc.x);
                        acc.y = fmaf(pv[i].w, v3.y, acc.y);
                        acc.z = fmaf(pv[i].w, v3.z, acc.z);
                        acc.w = fmaf(pv[i].w, v3.w, acc.w);
                        o[i][u] = acc;
                    }
                }
            }
        }
    }

#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
        float sum = l[i];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        sum += __shfl_xor_sync(0xffffffffu, sum, 4);
        const int row = q0 + r + 16 * i;
        if (row >= a.sq) continue;
        const float inv = sum > 0.f ? 1.f / sum : 0.f;
        T* orow = out + b * a.o_b + h * a.o_h + (i64)row * a.o_s;
#pragma unroll
        for (int u = 0; u < CV; ++u) {
            const int col = (c + 8 * u) * 4;
            if (col < a.dv) stf(orow, col, o[i][u].x * inv);
            if (col + 1 < a.dv) stf(orow, col + 1, o[i][u].y * inv);
            if (col + 2 < a.dv) stf(orow, col + 2, o[i][u].z * inv);
            if (col + 3 < a.dv) stf(orow, col + 3, o[i][u].w * inv);
        }
    }
}

#define ATT_FWD(R, C, DQ, KJ, sfx, T)                                                        \
    extern "C" __global__ void __launch_bounds__(128)                                        \
        attn_fwd_r##R##_c##C##_d##DQ##_k##KJ##_##sfx(const T* q, const T* k, const T* v,     \
                                                     const u8* keep, T* out, AttnArgs a) {   \
        att_apply_past(a);                                                                    \
        attn_fwd_body<T, R, C, DQ, KJ>(q, k, v, keep, out, a);                               \
    }
// Query tiles of 16, 32 or 64 rows: the lowering times the ones that fit and keeps the fastest.
#define ATT_FWD_ROWS(C, DQ, KJ, sfx, T) \
    ATT_FWD(1, C, DQ, KJ, sfx, T) ATT_FWD(2, C, DQ, KJ, sfx, T) ATT_FWD(4, C, DQ, KJ, sfx, T)
#define ATT_FWD_ALL(sfx, T)                                                                   \
    ATT_FWD_ROWS(1, 32, 8, sfx, T)                                                            \
    ATT_FWD_ROWS(2, 64, 8, sfx, T)                                                            \
    ATT_FWD_ROWS(4, 128, 8, sfx, T)                                                           \
    ATT_FWD_ROWS(1, 0, 8, sfx, T)                                                             \
    ATT_FWD_ROWS(2, 0, 8, sfx, T)                                                             \
    ATT_FWD_ROWS(4, 0, 8, sfx, T)                                                             \
    ATT_FWD(1, 8, 0, 4, sfx, T) ATT_FWD(2, 8, 0, 4, sfx, T)
RLX_TYPE_SHARDS(ATT_FWD_ALL)

// ---- tensor-core forward (f16 / bf16, head_dim == v_head_dim in {32, 64, 128})
//
// FlashAttention-2 layout: one warp = 16 query rows, NW warps a block; K/V tiles of 64 keys
// in shared memory as storage type. S = Q.K^T and O += P.V run on mma.m16n8k16 with f32
// accumulators; the S accumulator of two adjacent 8-key tiles is exactly the A operand of
// the P.V product, so P never leaves registers. Lane (g = lane/4, t = lane%4) owns rows g
// and g+8 of its warp's 16, and columns 2t, 2t+1 of every 8-wide tile.

__device__ __forceinline__ unsigned att_pack(float x, float y, const __half*) {
    __half2 h = __floats2half2_rn(x, y);
    return *reinterpret_cast<unsigned*>(&h);
}
__device__ __forceinline__ unsigned att_pack(float x, float y, const __nv_bfloat16*) {
    __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<unsigned*>(&h);
}
__device__ __forceinline__ void att_mma(float* c, const unsigned* a, unsigned b0, unsigned b1,
                                        const __half*) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void att_mma(float* c, const unsigned* a, unsigned b0, unsigned b1,
                                        const __nv_bfloat16*) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void att_ldsm(unsigned* r, const void* p) {
    unsigned addr = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void att_ldsm_t(unsigned* r, const void* p) {
    unsigned addr = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// Asynchronous rows x D tile of storage type into shared memory (row stride DS) in 16-byte
// cp.async chunks; rows >= nvalid are zero-filled (source size 0). Rows of src are 16-byte
// aligned (checked at lowering).
template <typename T, int D, int DS>
__device__ __forceinline__ void att_cp_tile(T* dst, const T* src, i64 sstride, int nrows,
                                            int nvalid) {
    constexpr int E = 16 / (int)sizeof(T), C = D / E;
    for (int idx = threadIdx.x; idx < nrows * C; idx += blockDim.x) {
        const int r = idx / C, c = idx - r * C;
        const bool ok = r < nvalid;
        const T* g = src + (ok ? (i64)r * sstride : 0) + c * E;
        const unsigned sa = (unsigned)__cvta_generic_to_shared(dst + r * DS + c * E);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sa), "l"(g),
                     "r"(ok ? 16 : 0));
    }
}
__device__ __forceinline__ void att_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void att_cp_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

template <typename T, int D, int NW>
__device__ __forceinline__ void attn_mma_body(const T* __restrict__ q, const T* __restrict__ k,
                                              const T* __restrict__ v,
                                              const u8* __restrict__ keep, T* __restrict__ out,
                                              const AttnArgs& a) {
    constexpr int BQ = 16 * NW, BK = 64, DS = D + 8, NT = D / 8;
    extern __shared__ float4 att_smem4[];
    // Q, then two K/V buffers (the next tile loads while this one is used), then masks.
    T* Qs = reinterpret_cast<T*>(att_smem4);
    T* KV = Qs + BQ * DS;
    float* Kms = reinterpret_cast<float*>(KV + 4 * BK * DS);

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    const int bh = blockIdx.x;
    const int b = bh / a.heads, h = bh - b * a.heads, kvh = h / a.group;
    const int q0 = blockIdx.y * BQ;
    const int nq = min(BQ, a.sq - q0);
    const T* kb = k + b * a.k_b + kvh * a.k_h;
    const T* vb = v + b * a.v_b + kvh * a.v_h;
    const u8* kp = keep ? keep + (i64)b * a.sk : nullptr;

    const int row0 = q0 + warp * 16 + g, row1 = row0 + 8;
    int lo0 = 0, hi0 = 0, lo1 = 0, hi1 = 0;
    if (row0 < a.sq) att_range(a, row0, lo0, hi0);
    if (row1 < a.sq) att_range(a, row1, lo1, hi1);
    int blo, bhi, flo, fhi;
    att_range(a, q0, blo, fhi);
    att_range(a, q0 + nq - 1, flo, bhi);

    // Issue the loads of key tile `kt` into buffer `buf`.
    auto issue = [&](int kt, int buf) {
        const int nk = min(BK, a.sk - kt);
        T* Kb = KV + buf * 2 * BK * DS;
        att_cp_tile<T, D, DS>(Kb, kb + (i64)kt * a.k_s, a.k_s, BK, nk);
        att_cp_tile<T, D, DS>(Kb + BK * DS, vb + (i64)kt * a.v_s, a.v_s, BK, nk);
        if (kp) {
            for (int j = tid; j < BK; j += blockDim.x)
                Kms[buf * BK + j] = (j < nk && kp[kt + j]) ? 1.f : 0.f;
        }
    };
    att_cp_tile<T, D, DS>(Qs, q + b * a.q_b + h * a.q_h + (i64)q0 * a.q_s, a.q_s, BQ, nq);
    if (blo < bhi) issue(blo, 0);
    att_cp_commit();

    unsigned qf[D / 16][4];
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
    float o[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;

    int buf = 0;
    for (int kt = blo; kt < bhi; kt += BK, buf ^= 1) {
        if (kt + BK < bhi) {
            issue(kt + BK, buf ^ 1);
            att_cp_commit();
            att_cp_wait<1>();
        } else {
            att_cp_wait<0>();
        }
        __syncthreads();
        if (kt == blo) {
#pragma unroll
            for (int ks = 0; ks < D / 16; ++ks)
                att_ldsm(qf[ks], Qs + (warp * 16 + (lane & 15)) * DS + ks * 16 + (lane >> 4) * 8);
        }
        const T* Ks = KV + buf * 2 * BK * DS;
        const T* Vs = Ks + BK * DS;
        const float* Km = Kms + buf * BK;

        float s[8][4];
#pragma unroll
        for (int n = 0; n < 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
            for (int np = 0; np < 4; ++np) {
                unsigned bf[4];
                att_ldsm(bf, Ks + (np * 16 + (lane & 7) + ((lane >> 4) << 3)) * DS + ks * 16 +
                                 ((lane >> 3) & 1) * 8);
                att_mma(s[2 * np], qf[ks], bf[0], bf[1], q);
                att_mma(s[2 * np + 1], qf[ks], bf[2], bf[3], q);
            }
        }

        const bool full = !kp && kt >= flo && kt + BK <= fhi;
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int n = 0; n < 8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int key = kt + n * 8 + 2 * t4 + (e & 1);
                const int lo = e < 2 ? lo0 : lo1, hi = e < 2 ? hi0 : hi1;
                const bool ok =
                    full || (key >= lo && key < hi && (!kp || Km[key - kt] != 0.f));
                const float x = ok ? att_logit(s[n][e], a) : -INFINITY;
                s[n][e] = x;
                if (e < 2) mx0 = fmaxf(mx0, x);
                else mx1 = fmaxf(mx1, x);
            }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
        const float a0 = mn0 == -INFINITY ? 1.f : __expf(m0 - mn0);
        const float a1 = mn1 == -INFINITY ? 1.f : __expf(m1 - mn1);
        const float z0 = mn0 == -INFINITY ? 0.f : mn0, z1 = mn1 == -INFINITY ? 0.f : mn1;
        float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
        for (int n = 0; n < 8; ++n) {
            // exp(-inf - finite) = 0 covers masked keys and rows with nothing seen yet.
            s[n][0] = __expf(s[n][0] - z0);
            s[n][1] = __expf(s[n][1] - z0);
            s[n][2] = __expf(s[n][2] - z1);
            s[n][3] = __expf(s[n][3] - z1);
            sum0 += s[n][0] + s[n][1];
            sum1 += s[n][2] + s[n][3];
        }
        m0 = mn0;
        m1 = mn1;
        l0 = l0 * a0 + sum0;
        l1 = l1 * a1 + sum1;
#pragma unroll
        for (int n = 0; n < NT; ++n) {
            o[n][0] *= a0;
            o[n][1] *= a0;
            o[n][2] *= a1;
            o[n][3] *= a1;
        }

        const int kend = min(BK, bhi - kt);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            if (kk * 16 >= kend) break;
            unsigned pa[4] = {att_pack(s[2 * kk][0], s[2 * kk][1], q),
                              att_pack(s[2 * kk][2], s[2 * kk][3], q),
                              att_pack(s[2 * kk + 1][0], s[2 * kk + 1][1], q),
                              att_pack(s[2 * kk + 1][2], s[2 * kk + 1][3], q)};
#pragma unroll
            for (int cp = 0; cp < D / 16; ++cp) {
                unsigned bf[4];
                att_ldsm_t(bf, Vs + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * DS +
                                   cp * 16 + (lane >> 4) * 8);
                att_mma(o[2 * cp], pa, bf[0], bf[1], q);
                att_mma(o[2 * cp + 1], pa, bf[2], bf[3], q);
            }
        }
        // The next iteration starts by refilling the buffer this one read.
        __syncthreads();
    }
    att_cp_wait<0>();

    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float inv0 = l0 > 0.f ? 1.f / l0 : 0.f, inv1 = l1 > 0.f ? 1.f / l1 : 0.f;
    T* ob = out + b * a.o_b + h * a.o_h;
#pragma unroll
    for (int n = 0; n < NT; ++n) {
        const int col = n * 8 + 2 * t4;
        if (row0 < a.sq)
            *reinterpret_cast<unsigned*>(ob + (i64)row0 * a.o_s + col) =
                att_pack(o[n][0] * inv0, o[n][1] * inv0, q);
        if (row1 < a.sq)
            *reinterpret_cast<unsigned*>(ob + (i64)row1 * a.o_s + col) =
                att_pack(o[n][2] * inv1, o[n][3] * inv1, q);
    }
}

#define ATT_MMA(D, NW, sfx, T)                                                               \
    extern "C" __global__ void __launch_bounds__(32 * NW)                                    \
        attn_mma_d##D##_w##NW##_##sfx(const T* q, const T* k, const T* v, const u8* keep,    \
                                      T* out, AttnArgs a) {                                  \
        att_apply_past(a);                                                                    \
        attn_mma_body<T, D, NW>(q, k, v, keep, out, a);                                      \
    }
#define ATT_MMA_ALL(sfx, T)                                                                   \
    ATT_MMA(32, 1, sfx, T) ATT_MMA(32, 2, sfx, T) ATT_MMA(32, 4, sfx, T)                     \
    ATT_MMA(64, 1, sfx, T) ATT_MMA(64, 2, sfx, T) ATT_MMA(64, 4, sfx, T)                     \
    ATT_MMA(128, 1, sfx, T) ATT_MMA(128, 2, sfx, T) ATT_MMA(128, 4, sfx, T)
RLX_GATE_f16(ATT_MMA_ALL(f16, __half))
RLX_GATE_bf16(ATT_MMA_ALL(bf16, __nv_bfloat16))

// ---- Custom keep-mask of any dtype -> u8 (nonzero = attend; NaN counts as nonzero).
#define ATT_KEEP(sfx, T)                                                                      \
    extern "C" __global__ void attn_keep_##sfx(const T* m, u8* keep, i64 n) {                 \
        for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n;                       \
             i += (i64)gridDim.x * blockDim.x)                                                \
            keep[i] = ldf(m, i) != 0.f;                                                       \
    }
RLX_TYPE_SHARDS(ATT_KEEP)
extern "C" __global__ void attn_keep_f64(const double* m, u8* keep, i64 n) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
        keep[i] = m[i] != 0.0;
}
extern "C" __global__ void attn_keep_i32(const int* m, u8* keep, i64 n) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
        keep[i] = m[i] != 0;
}
extern "C" __global__ void attn_keep_i64(const i64* m, u8* keep, i64 n) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
        keep[i] = m[i] != 0;
}
