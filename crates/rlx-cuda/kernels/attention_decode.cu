// rlx attention kernels, part 2: decode attention split over keys, and the fused
// CachedAttention kernel. Compiled as one module after attention.cu (AttnArgs, the helpers).

// ---- decode: split over keys

// One block (ATT_SPLIT_THREADS threads) per (query row, chunk of a.chunk keys).
// Dynamic shared memory: q row (D4 floats), chunk scores (a.chunk floats), a 32-float
// reduction buffer, and ATT_SPLIT_THREADS * 4 floats for the P.V partial sums.
#define ATT_SPLIT_THREADS 128

// The keys [j0, j1) of one chunk (or of the whole row); `direct`: the only chunk of its row,
// so the block writes the output row instead of a partial.
template <typename T>
__device__ __forceinline__ void attn_split_chunk(const T* __restrict__ q, const T* __restrict__ k,
                                                 const T* __restrict__ v,
                                                 const u8* __restrict__ keep, T* __restrict__ out,
                                                 float* __restrict__ part, const AttnArgs& a,
                                                 const int j0, const int j1, const bool direct) {
    extern __shared__ float4 att_smem4[];
    float* smem = reinterpret_cast<float*>(att_smem4);
    const int D4 = (a.d + 3) & ~3;
    float* qs = smem;
    float* sc = qs + D4;
    float* red = sc + ((a.chunk + 3) & ~3);
    float* acc = red + 32;

    const int tid = threadIdx.x;
    const i64 rowid = blockIdx.x;  // (b * heads + h) * sq + i
    const int split = blockIdx.y;
    const int i = (int)(rowid % a.sq);
    const int bh = (int)(rowid / a.sq);
    const int b = bh / a.heads, h = bh - b * a.heads, kvh = h / a.group;


    const T* qrow = q + b * a.q_b + h * a.q_h + (i64)i * a.q_s;
    const T* kb = k + b * a.k_b + kvh * a.k_h;
    const T* vb = v + b * a.v_b + kvh * a.v_h;
    const u8* kp = keep ? keep + (i64)b * a.sk : nullptr;

    for (int e = tid; e < D4; e += blockDim.x) qs[e] = e < a.d ? ldf(qrow, e) : 0.f;
    __syncthreads();

    // Scores: 8 lanes per key, each lane a strided share of the head dim; a group takes
    // two keys at a time so more loads are in flight. Every lane runs the same number of
    // iterations (the shuffles need the whole warp).
    const int g = tid >> 3, ln = tid & 7, ng = blockDim.x >> 3;
    const bool kvec = (a.vec & 2) != 0;
    for (int jb = j0; jb < j1; jb += 2 * ng) {
        const int ja = jb + g, jc = jb + ng + g;
        float da = 0.f, dc = 0.f;
        const T* ka = kb + (i64)min(ja, j1 - 1) * a.k_s;
        const T* kc = kb + (i64)min(jc, j1 - 1) * a.k_s;
        if (kvec) {
            for (int e = ln * 4; e < D4; e += 32) {
                const float4 xa = ld4(ka + e), xc = ld4(kc + e);
                da = fmaf(qs[e], xa.x, da);
                da = fmaf(qs[e + 1], xa.y, da);
                da = fmaf(qs[e + 2], xa.z, da);
                da = fmaf(qs[e + 3], xa.w, da);
                dc = fmaf(qs[e], xc.x, dc);
                dc = fmaf(qs[e + 1], xc.y, dc);
                dc = fmaf(qs[e + 2], xc.z, dc);
                dc = fmaf(qs[e + 3], xc.w, dc);
            }
        } else {
            for (int e = ln; e < a.d; e += 8) {
                da = fmaf(qs[e], ldf(ka, e), da);
                dc = fmaf(qs[e], ldf(kc, e), dc);
            }
        }
#pragma unroll
        for (int o = 1; o < 8; o <<= 1) {
            da += __shfl_xor_sync(0xffffffffu, da, o);
            dc += __shfl_xor_sync(0xffffffffu, dc, o);
        }
        if (ln == 0 && ja < j1) sc[ja - j0] = (!kp || kp[ja]) ? att_logit(da, a) : -INFINITY;
        if (ln == 0 && jc < j1) sc[jc - j0] = (!kp || kp[jc]) ? att_logit(dc, a) : -INFINITY;
    }
    __syncthreads();

    const int n = j1 > j0 ? j1 - j0 : 0;
    float mx = -INFINITY;
    for (int j = tid; j < n; j += blockDim.x) mx = fmaxf(mx, sc[j]);
    mx = block_max(mx, red);
    float sum = 0.f;
    if (mx != -INFINITY) {
        for (int j = tid; j < n; j += blockDim.x) {
            float p = expf(sc[j] - mx);
            sc[j] = p;
            sum += p;
        }
    }
    sum = block_sum(sum, red);  // its barriers also publish sc

    // P.V: thread = (key group, chunk of 4 columns).
    const int ncv = (a.dv + 3) >> 2;
    const bool vvec = (a.vec & 4) != 0;
    for (int cb = 0; cb < ncv; cb += blockDim.x) {
        const int nc = min((int)blockDim.x, ncv - cb);
        const int groups = blockDim.x / nc;
        const int grp = tid / nc, ch = cb + tid % nc;
        float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
        if (grp < groups && mx != -INFINITY) {
            const int col = ch * 4;
#pragma unroll 4
            for (int j = grp; j < n; j += groups) {
                const float p = sc[j];
                const T* vr = vb + (i64)(j0 + j) * a.v_s + col;
                float4 x;
                if (vvec) {
                    x = ld4(vr);
                } else {
                    x.x = ldf(vr, 0);
                    x.y = col + 1 < a.dv ? ldf(vr, 1) : 0.f;
                    x.z = col + 2 < a.dv ? ldf(vr, 2) : 0.f;
                    x.w = col + 3 < a.dv ? ldf(vr, 3) : 0.f;
                }
                o.x = fmaf(p, x.x, o.x);
                o.y = fmaf(p, x.y, o.y);
                o.z = fmaf(p, x.z, o.z);
                o.w = fmaf(p, x.w, o.w);
            }
        }
        reinterpret_cast<float4*>(acc)[tid] = o;
        __syncthreads();
        if (tid < nc) {
            float4 t = make_float4(0.f, 0.f, 0.f, 0.f);
            for (int gg = 0; gg < groups; ++gg) {
                float4 x = reinterpret_cast<float4*>(acc)[gg * nc + tid];
                t.x += x.x;
                t.y += x.y;
                t.z += x.z;
                t.w += x.w;
            }
            const int col = ch * 4;
            if (direct) {
                const float inv = sum > 0.f ? 1.f / sum : 0.f;
                T* orow = out + b * a.o_b + h * a.o_h + (i64)i * a.o_s;
                stf(orow, col, t.x * inv);
                if (col + 1 < a.dv) stf(orow, col + 1, t.y * inv);
                if (col + 2 < a.dv) stf(orow, col + 2, t.z * inv);
                if (col + 3 < a.dv) stf(orow, col + 3, t.w * inv);
            } else {
                float* pr = part + (rowid * a.nsplit + split) * (i64)(a.dv + 2) + 2;
                pr[col] = t.x;
                if (col + 1 < a.dv) pr[col + 1] = t.y;
                if (col + 2 < a.dv) pr[col + 2] = t.z;
                if (col + 3 < a.dv) pr[col + 3] = t.w;
            }
        }
        __syncthreads();
    }
    if (!direct && tid == 0) {
        float* pr = part + (rowid * a.nsplit + split) * (i64)(a.dv + 2);
        pr[0] = mx;
        pr[1] = sum;
    }
}

// The keys [j0, j1) of one chunk with lanes in groups of G = D/8 (a.vec bit 3: D = Dv, G a
// power of two up to 32, q/k/v rows 4-aligned): each group takes one key at a time, each
// lane 8 consecutive dims of q, k and v, so a key's dot is 8 FMAs and log2(G) shuffles, and
// the softmax runs online per group in registers (running max, sum, 8 output dims a lane) —
// no score array, no block-wide max/sum passes. The blockDim/G groups' partials merge once
// in shared memory. Decode attention over a few hundred keys is a short chain of loads this
// way instead of two sweeps with four block barriers.
//
// CW (the fused CachedAttention kernel): q comes from `st.q` (rotated, in shared memory) and
// keys at or past st.p0 — this call's, not yet in the caches — from st.k / st.v.
struct AttStaged {
    const float* q;
    const float* k;
    const float* v;
    long long p0;
};
// A lane's 8 dims of key j and of its value: the staged rows for this call's keys (CW,
// j >= st.p0), else the caches (kb / vb already at the lane's dims).
template <typename T, bool CW>
__device__ __forceinline__ void att_key8(const T* __restrict__ kb, const T* __restrict__ vb,
                                         const AttnArgs& a, const AttStaged& st, int j, int ln,
                                         float4& k0, float4& k1, float4& v0, float4& v1) {
    if (CW && j >= st.p0) {
        const float* s = st.k + (j - st.p0) * a.d + ln * 8;
        const float* u = st.v + (j - st.p0) * a.dv + ln * 8;
        k0 = ld4(s); k1 = ld4(s + 4); v0 = ld4(u); v1 = ld4(u + 4);
    } else {
        const T* kr = kb + (i64)j * a.k_s;
        const T* vr = vb + (i64)j * a.v_s;
        k0 = ld4(kr); k1 = ld4(kr + 4); v0 = ld4(vr); v1 = ld4(vr + 4);
    }
}

template <typename T, bool CW = false>
__device__ __forceinline__ void attn_split_chunk_grp(const T* __restrict__ q, const T* __restrict__ k,
                                                     const T* __restrict__ v,
                                                     const u8* __restrict__ keep,
                                                     T* __restrict__ out, float* __restrict__ part,
                                                     const AttnArgs& a, const int j0, const int j1,
                                                     const bool direct,
                                                     const AttStaged st = AttStaged{}) {
    extern __shared__ float4 att_smem4[];
    float* smem = reinterpret_cast<float*>(att_smem4);
    const int tid = threadIdx.x;
    const i64 rowid = blockIdx.x;
    const int split = blockIdx.y;
    const int i = (int)(rowid % a.sq);
    const int bh = (int)(rowid / a.sq);
    const int b = bh / a.heads, h = bh - b * a.heads, kvh = h / a.group;
    const int G = a.d >> 3, ng = blockDim.x / G, g = tid / G, ln = tid - g * G;
    const T* qrow = q + b * a.q_b + h * a.q_h + (i64)i * a.q_s;
    const T* kb = k + b * a.k_b + kvh * a.k_h + ln * 8;
    const T* vb = v + b * a.v_b + kvh * a.v_h + ln * 8;
    const u8* kp = keep ? keep + (i64)b * a.sk : nullptr;
    float qv[8], acc[8];
    {
        const float4 q0 = CW ? ld4(st.q + ln * 8) : ld4(qrow + ln * 8);
        const float4 q1 = CW ? ld4(st.q + ln * 8 + 4) : ld4(qrow + ln * 8 + 4);
        qv[0] = q0.x; qv[1] = q0.y; qv[2] = q0.z; qv[3] = q0.w;
        qv[4] = q1.x; qv[5] = q1.y; qv[6] = q1.z; qv[7] = q1.w;
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] = 0.f;
    float m = -INFINITY, l = 0.f;
    // Groups of G lanes are aligned within a warp; every lane of a warp runs the same number
    // of iterations (the shuffles need the whole warp), keys past j1 count as masked.
    // A step's two keys are requested one step ahead (the next pair's loads overlap this
    // pair's dot, shuffles and softmax), so a short context pays one memory latency, not one
    // a step.
    const int steps = (j1 - j0 + 2 * ng - 1) / (2 * ng);
    float4 na0, na1, nc0, nc1, nva0, nva1, nvc0, nvc1;
    if (steps > 0) {
        att_key8<T, CW>(kb, vb, a, st, min(j0 + g, j1 - 1), ln, na0, na1, nva0, nva1);
        att_key8<T, CW>(kb, vb, a, st, min(j0 + g + ng, j1 - 1), ln, nc0, nc1, nvc0, nvc1);
    }
    for (int t = 0; t < steps; ++t) {
        const int ja = j0 + 2 * ng * t + g, jc = ja + ng;
        const float4 ka0 = na0, ka1 = na1, kc0 = nc0, kc1 = nc1;
        const float4 va0 = nva0, va1 = nva1, vc0 = nvc0, vc1 = nvc1;
        if (t + 1 < steps) {
            const int jn = ja + 2 * ng;
            att_key8<T, CW>(kb, vb, a, st, min(jn, j1 - 1), ln, na0, na1, nva0, nva1);
            att_key8<T, CW>(kb, vb, a, st, min(jn + ng, j1 - 1), ln, nc0, nc1, nvc0, nvc1);
        }
        float da = qv[0] * ka0.x, dc = qv[0] * kc0.x;
        da = fmaf(qv[1], ka0.y, da); dc = fmaf(qv[1], kc0.y, dc);
        da = fmaf(qv[2], ka0.z, da); dc = fmaf(qv[2], kc0.z, dc);
        da = fmaf(qv[3], ka0.w, da); dc = fmaf(qv[3], kc0.w, dc);
        da = fmaf(qv[4], ka1.x, da); dc = fmaf(qv[4], kc1.x, dc);
        da = fmaf(qv[5], ka1.y, da); dc = fmaf(qv[5], kc1.y, dc);
        da = fmaf(qv[6], ka1.z, da); dc = fmaf(qv[6], kc1.z, dc);
        da = fmaf(qv[7], ka1.w, da); dc = fmaf(qv[7], kc1.w, dc);
        for (int o = 1; o < G; o <<= 1) {
            da += __shfl_xor_sync(0xffffffffu, da, o);
            dc += __shfl_xor_sync(0xffffffffu, dc, o);
        }
        const float sa = (ja < j1 && (!kp || kp[ja])) ? att_logit(da, a) : -INFINITY;
        const float sc = (jc < j1 && (!kp || kp[jc])) ? att_logit(dc, a) : -INFINITY;
        const float mn = fmaxf(m, fmaxf(sa, sc));
        if (mn == -INFINITY) continue;
        const float cr = m == -INFINITY ? 0.f : expf(m - mn);
        const float pa = sa == -INFINITY ? 0.f : expf(sa - mn);
        const float pc = sc == -INFINITY ? 0.f : expf(sc - mn);
        m = mn;
        l = fmaf(l, cr, pa + pc);
        const float vx[8] = {va0.x, va0.y, va0.z, va0.w, va1.x, va1.y, va1.z, va1.w};
        const float vz[8] = {vc0.x, vc0.y, vc0.z, vc0.w, vc1.x, vc1.y, vc1.z, vc1.w};
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[e] = fmaf(pc, vz[e], fmaf(pa, vx[e], acc[e] * cr));
    }
    // The groups of a warp merge their partials by shuffles (lane ln of every group holds
    // the same 8 dims), so only one partial a warp — [m, l, Dv values] — goes through shared
    // memory and the block's final merge reads blockDim/32 of them, not blockDim/G.
    for (int o = G; o < 32; o <<= 1) {
        const float mo = __shfl_xor_sync(0xffffffffu, m, o);
        const float lo = __shfl_xor_sync(0xffffffffu, l, o);
        const float mn = fmaxf(m, mo);
        const float ca = m == -INFINITY ? 0.f : expf(m - mn);
        const float cb = mo == -INFINITY ? 0.f : expf(mo - mn);
        l = l * ca + lo * cb;
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[e] = acc[e] * ca + __shfl_xor_sync(0xffffffffu, acc[e], o) * cb;
        m = mn;
    }
    const int w = a.dv + 2, nw = blockDim.x >> 5;
    if ((tid & 31) < G) {
        float* gp = smem + (tid >> 5) * w;
        if (ln == 0) {
            gp[0] = m;
            gp[1] = l;
        }
#pragma unroll
        for (int e = 0; e < 8; ++e) gp[2 + ln * 8 + e] = acc[e];
    }
    __syncthreads();
    float mx = -INFINITY;
    for (int s = 0; s < nw; ++s) mx = fmaxf(mx, smem[s * w]);
    float sum = 0.f;
    if (mx != -INFINITY) {
        for (int s = 0; s < nw; ++s) {
            const float ms = smem[s * w];
            if (ms != -INFINITY) sum += smem[s * w + 1] * expf(ms - mx);
        }
    }
    for (int col = tid; col < a.dv; col += blockDim.x) {
        float t = 0.f;
        if (mx != -INFINITY) {
            for (int s = 0; s < nw; ++s) {
                const float ms = smem[s * w];
                if (ms != -INFINITY) t += smem[s * w + 2 + col] * expf(ms - mx);
            }
        }
        if (direct) {
            const float inv = sum > 0.f ? 1.f / sum : 0.f;
            T* orow = out + b * a.o_b + h * a.o_h + (i64)i * a.o_s;
            stf(orow, col, t * inv);
        } else {
            part[(rowid * a.nsplit + split) * (i64)(a.dv + 2) + 2 + col] = t;
        }
    }
    if (!direct && tid == 0) {
        float* pr = part + (rowid * a.nsplit + split) * (i64)(a.dv + 2);
        pr[0] = mx;
        pr[1] = sum;
    }
}

// Merge the a.nsplit partials of query row `rowid` into its output row, threads across
// columns. The partials were written by other blocks: __ldcg reads them from L2, never from
// a stale L1 line. A chunk that saw no key has max -inf and no output columns.
template <typename T>
__device__ __forceinline__ void att_merge_row(const float* __restrict__ part, T* __restrict__ out,
                                              const AttnArgs& a, const i64 rowid, const int ns) {
    const int i = (int)(rowid % a.sq);
    const int bh = (int)(rowid / a.sq);
    const int b = bh / a.heads, h = bh - b * a.heads;
    const i64 w = a.dv + 2;
    const float* pr = part + rowid * a.nsplit * w;
    float mx = -INFINITY;
    for (int s = 0; s < ns; ++s) mx = fmaxf(mx, __ldcg(pr + s * w));
    float sum = 0.f;
    if (mx != -INFINITY) {
        for (int s = 0; s < ns; ++s) {
            const float ms = __ldcg(pr + s * w);
            if (ms != -INFINITY) sum += __ldcg(pr + s * w + 1) * expf(ms - mx);
        }
    }
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    T* orow = out + b * a.o_b + h * a.o_h + (i64)i * a.o_s;
    for (int col = threadIdx.x; col < a.dv; col += blockDim.x) {
        float t = 0.f;
        if (mx != -INFINITY) {
            for (int s = 0; s < ns; ++s) {
                const float ms = __ldcg(pr + s * w);
                if (ms != -INFINITY) t += __ldcg(pr + s * w + 2 + col) * expf(ms - mx);
            }
        }
        stf(orow, col, t * inv);
    }
}

// How a row's valid keys [lo, hi) split at run time: `ns` chunks of `ck` keys, one per 256
// keys up to the a.nsplit chunks the grid has (the lowering sizes the grid for the whole
// cache, in chunks of at least 256). A short context in a long KV cache then runs one block
// per row that writes its output itself — no partials, no ticket, no merge — and a longer
// one a few blocks whose merge reads few partials. ck ≤ a.chunk always: with ns = a.nsplit,
// L ≤ a.sk ≤ a.nsplit·a.chunk; otherwise ck ≤ 256 ≤ a.chunk.
#define ATT_SPLIT_KEYS 256
__device__ __forceinline__ void att_splits(const AttnArgs& a, int lo, int hi, int& ns, int& ck) {
    const int L = hi > lo ? hi - lo : 0;
    ns = a.nsplit == 1 ? 1 : max(1, min(a.nsplit, (L + ATT_SPLIT_KEYS - 1) / ATT_SPLIT_KEYS));
    ck = ns == 1 ? L : (((L + ns - 1) / ns + 31) & ~31);
}

// This block's query row (blockIdx.x = (b · heads + h) · sq + i) and its chunk of keys
// [j0, j1) (chunk blockIdx.y of the row's ns run-time chunks); false for a block past ns.
struct AttBlock {
    i64 rowid;
    int i, b, h, kvh, ns, j0, j1;
};
__device__ __forceinline__ bool att_block(const AttnArgs& a, AttBlock& k) {
    k.rowid = blockIdx.x;
    k.i = (int)(k.rowid % a.sq);
    const int bh = (int)(k.rowid / a.sq);
    k.b = bh / a.heads;
    k.h = bh - k.b * a.heads;
    k.kvh = k.h / a.group;
    int lo, hi, ck;
    att_range(a, k.i, lo, hi);
    att_splits(a, lo, hi, k.ns, ck);
    const int split = blockIdx.y;
    if (split >= k.ns) return false;
    k.j0 = k.ns == 1 ? lo : lo + split * ck;
    k.j1 = k.ns == 1 ? hi : min(hi, k.j0 + ck);
    return true;
}

// After a block's chunk: with several chunks, take the row's ticket; the last taker merges.
template <typename T>
__device__ __forceinline__ void att_split_finish(const float* __restrict__ part, T* __restrict__ out,
                                                 unsigned int* __restrict__ ticket,
                                                 const AttnArgs& a, const i64 rowid, const int ns) {
    if (ns == 1 || !ticket) return;
    __shared__ unsigned int att_last;
    __threadfence();  // this thread's partial writes before the ticket below
    __syncthreads();
    if (threadIdx.x == 0) att_last = atomicAdd(ticket + rowid, 1u) == (unsigned)ns - 1;
    __syncthreads();
    if (!att_last) return;
    __threadfence();  // the other blocks' partials, published before their tickets
    att_merge_row<T>(part, out, a, rowid, ns);
    if (threadIdx.x == 0) ticket[rowid] = 0u;
}

// One block of the split kernel. `ticket` (a.nsplit > 1 only) holds one counter per query
// row, zero between launches: every block of the row's `ns` run-time chunks takes a ticket
// after publishing its partial, so the taker of the last ticket sees them all; it merges,
// then puts the counter back to zero for the next replay of the captured graph. Blocks past
// `ns` take no ticket.
template <typename T>
__device__ __forceinline__ void attn_split_body(const T* __restrict__ q, const T* __restrict__ k,
                                                const T* __restrict__ v,
                                                const u8* __restrict__ keep, T* __restrict__ out,
                                                float* __restrict__ part,
                                                unsigned int* __restrict__ ticket,
                                                const AttnArgs& a) {
    AttBlock blk;
    if (!att_block(a, blk)) return;
    const int j0 = blk.j0, j1 = blk.j1, ns = blk.ns;
    if (a.vec & 8) attn_split_chunk_grp<T>(q, k, v, keep, out, part, a, j0, j1, ns == 1);
    else attn_split_chunk<T>(q, k, v, keep, out, part, a, j0, j1, ns == 1);
    att_split_finish<T>(part, out, ticket, a, blk.rowid, ns);
}


// ---- decode: the fused CachedAttention kernel (lower/transformer_cached.rs)

// Mirrors AttnCw in kernels/attention.rs.
struct AttnCw {
    unsigned long long kn, vn, cs, sn;
    i64 kn_b, kn_h, kn_s;
    i64 vn_b, vn_h, vn_s;
    int n_rot, style, stage, pf_n;
    unsigned long long pf[4], pf_bytes[4];
};

// Element e of head row x, rotated as shape_ops.cu's rope_at does (the f32 table rows cs/sn
// of its query) when e < n_rot.
template <typename T>
__device__ __forceinline__ float att_rot(const T* __restrict__ x, const float* __restrict__ cs,
                                         const float* __restrict__ sn, int e, int n_rot,
                                         int style) {
    const float a = ldf(x, e);
    if (e >= n_rot) return a;
    const int half = n_rot >> 1;
    if (style == 0) {
        const int i = e < half ? e : e - half;
        return e < half ? mul_sub(a, cs[i], ldf(x, e + half), sn[i])
                        : mul_add(a, cs[i], ldf(x, e - half), sn[i]);
    }
    const int i = e >> 1;
    return (e & 1) == 0 ? mul_sub(a, cs[i], ldf(x, e + 1), sn[i])
                        : mul_add(a, cs[i], ldf(x, e - 1), sn[i]);
}

// v rounded to T and back (the unfused Rope stores its output as T).
template <typename T>
__device__ __forceinline__ float att_round(float v) {
    T t;
    stf(&t, 0, v);
    return ldf(&t, 0);
}

// One block of the fused kernel: stage q (rotated) and this call's k (rotated, rounded to
// the cache dtype) / v rows of the block's KV head in shared memory after the chunk body's
// area (c.stage floats in); the block of (batch, first query head of the group, query 0,
// chunk 0) writes the staged rows into the caches at p0 = *a.past — a position outside
// [0, cap - sq] writes nothing, as CacheWrite — then the chunk runs with keys >= p0 taken
// from the staged rows. Every block reads only cache rows below p0, which no block writes.
template <typename T>
__device__ __forceinline__ void attn_split_cw_body(const T* __restrict__ q, T* __restrict__ kc,
                                                   T* __restrict__ vc, T* __restrict__ out,
                                                   float* __restrict__ part,
                                                   unsigned int* __restrict__ ticket,
                                                   const AttnArgs& a, const AttnCw& c,
                                                   const int cap) {
    extern __shared__ float4 att_smem4[];
    float* smem = reinterpret_cast<float*>(att_smem4);
    AttBlock blk;
    if (!att_block(a, blk)) return;  // never the writer: chunk 0 always runs
    const int split = blockIdx.y, i = blk.i, b = blk.b, h = blk.h, kvh = blk.kvh, ns = blk.ns;
    const i64 rowid = blk.rowid;
    const long long p0 = *reinterpret_cast<const long long*>(a.past);
    const int D = a.d, tid = threadIdx.x;
    float* qs = smem + c.stage;
    float* nk = qs + ((D + 3) & ~3);
    float* nv = nk + a.sq * D;
    const float* cs = reinterpret_cast<const float*>(c.cs);
    const float* sn = reinterpret_cast<const float*>(c.sn);
    const int half = c.n_rot >> 1;
    const T* qrow = q + b * a.q_b + h * a.q_h + (i64)i * a.q_s;
    for (int e = tid; e < D; e += blockDim.x)
        qs[e] = c.n_rot ? att_round<T>(att_rot(qrow, cs + i * half, sn + i * half, e, c.n_rot, c.style))
                        : ldf(qrow, e);
    const T* kn = reinterpret_cast<const T*>(c.kn) + b * c.kn_b + kvh * c.kn_h;
    const T* vn = reinterpret_cast<const T*>(c.vn) + b * c.vn_b + kvh * c.vn_h;
    for (int x = tid; x < a.sq * D; x += blockDim.x) {
        const int r = x / D, e = x - r * D;
        const T* kr = kn + r * c.kn_s;
        nk[x] = c.n_rot ? att_round<T>(att_rot(kr, cs + r * half, sn + r * half, e, c.n_rot, c.style))
                        : ldf(kr, e);
        nv[x] = ldf(vn + r * c.vn_s, e);
    }
    __syncthreads();
    if (split == 0 && i == 0 && h % a.group == 0 && p0 >= 0 && p0 <= cap - a.sq) {
        T* kw = kc + b * a.k_b + kvh * a.k_h + p0 * a.k_s;
        T* vw = vc + b * a.v_b + kvh * a.v_h + p0 * a.v_s;
        for (int x = tid; x < a.sq * D; x += blockDim.x) {
            const int r = x / D, e = x - r * D;
            stf(kw + r * a.k_s, e, nk[x]);
            stf(vw + r * a.v_s, e, nv[x]);
        }
    }
    const AttStaged st{qs, nk, nv, p0};
    attn_split_chunk_grp<T, true>(q, kc, vc, nullptr, out, part, a, blk.j0, blk.j1, ns == 1, st);
    att_split_finish<T>(part, out, ticket, a, rowid, ns);
}

// Before the wait for the previous kernel: the cache rows this block will read (its chunk's
// keys below the call's position) requested into L2, so its first key loads after the wait
// hit L2 instead of paying HBM's latency — a decode step streams its weights past L2 and
// evicts the caches between layers. A prefetch is only a hint: *past may still be being
// written (the block then fetches other rows; the addresses stay inside the caches), and the
// real loads come after the wait.
__device__ __forceinline__ void prefetch_l2(const void* p) {
#if __CUDA_ARCH__ >= 900
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#else
    (void)p;
#endif
}
template <typename T>
__device__ __forceinline__ void att_cw_prefetch(const T* __restrict__ kc, const T* __restrict__ vc,
                                                AttnArgs a) {
    if (!a.past) return;
    const long long p0 = *reinterpret_cast<const volatile long long*>(a.past);
    att_apply_past(a);
    AttBlock k;
    if (!att_block(a, k)) return;
    const int b = k.b, kvh = k.kvh, j0 = k.j0;
    const int j1 = (int)min((long long)k.j1, p0 < 0 ? 0ll : p0);
    const int lines = (int)((a.d * (int)sizeof(T) + 127) / 128);
    const int total = min(max(j1 - j0, 0) * lines, 4096);
    const char* kb = reinterpret_cast<const char*>(kc + b * a.k_b + kvh * a.k_h);
    const char* vb = reinterpret_cast<const char*>(vc + b * a.v_b + kvh * a.v_h);
    for (int x = threadIdx.x; x < total; x += blockDim.x) {
        const int j = j0 + x / lines, l = x - (x / lines) * lines;
        prefetch_l2(kb + ((i64)j * a.k_s) * (i64)sizeof(T) + l * 128);
        prefetch_l2(vb + ((i64)j * a.v_s) * (i64)sizeof(T) + l * 128);
    }
}

// After the wait: the weights of the products that follow this layer's attention (c.pf,
// exec/l2_prefetch.rs) requested into L2 as 32 KB bulk prefetches, spread over the grid's
// blocks first (each SM's copy engine issues its own). HBM is idle while this kernel runs —
// its cache rows were requested before the wait and are few — so the o / gate-up / down
// GEMVs after it find their weights in L2 or already on the way. Only a hint: nothing reads
// what it fetches but those GEMVs' own loads.
__device__ __forceinline__ void att_weight_prefetch(const AttnCw& c) {
#if __CUDA_ARCH__ >= 900
    if (c.pf_n <= 0) return;
    constexpr unsigned long long PIECE = 32768;
    const int n = min(c.pf_n, 4);
    unsigned long long pieces[4], total = 0;
    for (int r = 0; r < n; ++r) total += (pieces[r] = (c.pf_bytes[r] + PIECE - 1) / PIECE);
    const unsigned long long blocks = (unsigned long long)gridDim.x * gridDim.y;
    const unsigned long long stride = blocks * blockDim.x;
    const unsigned long long me = threadIdx.x * blocks + (blockIdx.y * gridDim.x + blockIdx.x);
    for (unsigned long long g = me; g < total; g += stride) {
        int r = 0;
        unsigned long long q = g;
        while (r < n - 1 && q >= pieces[r]) q -= pieces[r++];
        const unsigned long long off = q * PIECE;
        const unsigned size = (unsigned)min(PIECE, c.pf_bytes[r] - off);
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(c.pf[r] + off), "r"(size)
                     : "memory");
    }
#else
    (void)c;
#endif
}

#define ATT_SPLIT_CW(sfx, T)                                                                  \
    extern "C" __global__ void __launch_bounds__(ATT_SPLIT_THREADS)                           \
        attn_split_cw_##sfx(const T* q, T* k, T* v, const u8* keep, T* out, float* part,      \
                            unsigned int* ticket, AttnArgs a, AttnCw c) {                     \
        att_cw_prefetch<T>(k, v, a);                                                          \
        pdl_wait();                                                                           \
        pdl_launch_next();                                                                    \
        att_weight_prefetch(c);                                                               \
        const int cap = a.sk;                                                                 \
        att_apply_past(a);                                                                    \
        attn_split_cw_body<T>(q, k, v, out, part, ticket, a, c, cap);                         \
    }
RLX_TYPE_SHARDS(ATT_SPLIT_CW)

// The two-launch merge: one block per row, threads across columns (a row of one chunk was
// written by the split kernel).
template <typename T>
__device__ __forceinline__ void attn_combine_body(const float* __restrict__ part,
                                                  T* __restrict__ out, const AttnArgs& a) {
    const i64 rowid = blockIdx.x;
    int lo, hi, ns, ck;
    att_range(a, (int)(rowid % a.sq), lo, hi);
    att_splits(a, lo, hi, ns, ck);
    if (ns > 1) att_merge_row<T>(part, out, a, rowid, ns);
}

#define ATT_SPLIT(sfx, T)                                                                     \
    extern "C" __global__ void __launch_bounds__(ATT_SPLIT_THREADS)                           \
        attn_split_##sfx(const T* q, const T* k, const T* v, const u8* keep, T* out,          \
                         float* part, unsigned int* ticket, AttnArgs a) {                     \
        pdl_wait();                                                                           \
        pdl_launch_next();                                                                    \
        att_apply_past(a);                                                                    \
        attn_split_body<T>(q, k, v, keep, out, part, ticket, a);                              \
    }                                                                                         \
    extern "C" __global__ void attn_combine_##sfx(const float* part, T* out, AttnArgs a) {    \
        att_apply_past(a);                                                                    \
        attn_combine_body<T>(part, out, a);                                                   \
    }
RLX_TYPE_SHARDS(ATT_SPLIT)
