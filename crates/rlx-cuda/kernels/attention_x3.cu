// ---- strict f32 tensor-core forward (attn_x3_*), between attention.cu and attention_decode.cu
//
// f32 q/k/v/out with both products on tensor cores, each as three TF32 products: a value x
// is big + small, big = tf32(x) and small = tf32(x - big) (22 significant bits together),
// and a·b is accumulated in f32 as as·bb + ab·bs + ab·bb. The dropped as·bs term and the
// rounding of small are 2^-22 of the product, a few f32 roundings, so this kernel is as
// accurate as the SIMT one (attn_fwd_*_f32) at a fraction of its time — the strict prefill's
// attention. The structure is attn_mma_body's: one warp a 16-row query tile, 64/32-key K/V
// tiles double-buffered through shared memory by cp.async, the online softmax on the score
// fragments in registers. The probabilities feed the second product straight from the score
// fragment: an m16n8k8 TF32 A fragment holds columns t4 and t4 + 4 where the score fragment
// holds keys 2·t4 and 2·t4 + 1, so the keys of each 8-key step are taken in that order and
// the V fragment is read with the same order (no shuffles).
__device__ __forceinline__ unsigned att_tf32(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ void att_mma_tf32(float* c, const unsigned* a, unsigned b0,
                                             unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- x3 body (host-emulated: attention_hosttest.rs supplies the three helpers above and
// att_cp_tile / att_cp_commit / att_cp_wait)
__device__ __forceinline__ void att_split3(float x, unsigned& big, unsigned& small) {
    big = att_tf32(x);
    small = att_tf32(x - __uint_as_float(big));
}
// c += a·b from the split fragments: the small terms first, so they are not lost against
// the big product.
__device__ __forceinline__ void att_mma3(float* c, const unsigned* ab, const unsigned* as,
                                         unsigned bb0, unsigned bb1, unsigned bs0,
                                         unsigned bs1) {
    att_mma_tf32(c, as, bb0, bb1);
    att_mma_tf32(c, ab, bs0, bs1);
    att_mma_tf32(c, ab, bb0, bb1);
}

// SK (split keys): the NW warps share one 16-row query tile and each takes its own BK / NW
// keys of every key tile, with its own running max, sum and output; at the end the warps'
// partials are merged through shared memory. A prompt's attention has few 16-row tiles (14
// heads × 32 at pp512 on the 0.5B shape: one warp per SM sub-partition), and one warp's
// chain of dependent products leaves the tensor cores idle: splitting the keys gives each SM
// four times the warps for the same work.
template <int D, int NW, int BK, bool SK>
__device__ __forceinline__ void attn_x3_body(const float* __restrict__ q,
                                             const float* __restrict__ k,
                                             const float* __restrict__ v,
                                             const u8* __restrict__ keep,
                                             float* __restrict__ out, const AttnArgs& a) {
    // Row stride D + 4 floats: the 8 rows × 4 columns a fragment load touches, and the
    // 4 key pairs × 8 columns of a V fragment, fall in 32 distinct banks.
    constexpr int BQ = SK ? 16 : 16 * NW, DS = D + 4, NT = D / 8, KW = SK ? BK / NW : BK;
    constexpr int NB = KW / 8;
    extern __shared__ float4 att_smem4[];
    // Q, then two K/V buffers (the next tile loads while this one is used), then masks.
    float* Qs = reinterpret_cast<float*>(att_smem4);
    float* KV = Qs + BQ * DS;
    float* Kms = KV + 4 * BK * DS;

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    const int bh = blockIdx.x;
    const int b = bh / a.heads, h = bh - b * a.heads, kvh = h / a.group;
    // Under a causal mask the last query tiles see the most keys: they start first, so the
    // grid does not end on a few long blocks.
    const int q0 = (int)(gridDim.y - 1 - blockIdx.y) * BQ;
    const int nq = min(BQ, a.sq - q0);
    const float* kb = k + b * a.k_b + kvh * a.k_h;
    const float* vb = v + b * a.v_b + kvh * a.v_h;
    const u8* kp = keep ? keep + (i64)b * a.sk : nullptr;

    // The warp's query rows (its own 16, or the block's) and its keys of each tile.
    const int wr = SK ? 0 : warp * 16, kofs = SK ? warp * KW : 0;
    const int row0 = q0 + wr + g, row1 = row0 + 8;
    int lo0 = 0, hi0 = 0, lo1 = 0, hi1 = 0;
    if (row0 < a.sq) att_range(a, row0, lo0, hi0);
    if (row1 < a.sq) att_range(a, row1, lo1, hi1);
    int blo, bhi, flo, fhi;
    att_range(a, q0, blo, fhi);
    att_range(a, q0 + nq - 1, flo, bhi);

    auto issue = [&](int kt, int buf) {
        const int nk = min(BK, a.sk - kt);
        float* Kb = KV + buf * 2 * BK * DS;
        att_cp_tile<float, D, DS>(Kb, kb + (i64)kt * a.k_s, a.k_s, BK, nk);
        att_cp_tile<float, D, DS>(Kb + BK * DS, vb + (i64)kt * a.v_s, a.v_s, BK, nk);
        if (kp) {
            for (int j = tid; j < BK; j += blockDim.x)
                Kms[buf * BK + j] = (j < nk && kp[kt + j]) ? 1.f : 0.f;
        }
    };
    att_cp_tile<float, D, DS>(Qs, q + b * a.q_b + h * a.q_h + (i64)q0 * a.q_s, a.q_s, BQ, nq);
    if (blo < bhi) issue(blo, 0);
    att_cp_commit();

    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
    float o[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    const float* Qw = Qs + (wr + g) * DS + t4;

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
        const float* Ks = KV + buf * 2 * BK * DS + kofs * DS;
        const float* Vs = Ks + BK * DS;
        const float* Km = Kms + buf * BK + kofs;

        float s[NB][4];
#pragma unroll
        for (int n = 0; n < NB; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < NT; ++ks) {
            // A fragment: (g, t4), (g + 8, t4), (g, t4 + 4), (g + 8, t4 + 4) of the tile.
            unsigned qb[4], qs[4];
            const float* qp = Qw + ks * 8;
            att_split3(qp[0], qb[0], qs[0]);
            att_split3(qp[8 * DS], qb[1], qs[1]);
            att_split3(qp[4], qb[2], qs[2]);
            att_split3(qp[8 * DS + 4], qb[3], qs[3]);
#pragma unroll
            for (int n = 0; n < NB; ++n) {
                // B fragment (k = d, n = key): key g, dims t4 and t4 + 4.
                const float* kr = Ks + (n * 8 + g) * DS + ks * 8 + t4;
                unsigned bb0, bs0, bb1, bs1;
                att_split3(kr[0], bb0, bs0);
                att_split3(kr[4], bb1, bs1);
                att_mma3(s[n], qb, qs, bb0, bb1, bs0, bs1);
            }
        }

        const bool full = !kp && kt >= flo && kt + BK <= fhi;
        const int k0 = kt + kofs;
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int n = 0; n < NB; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int key = k0 + n * 8 + 2 * t4 + (e & 1);
                const int lo = e < 2 ? lo0 : lo1, hi = e < 2 ? hi0 : hi1;
                const bool ok =
                    full || (key >= lo && key < hi && (!kp || Km[key - k0] != 0.f));
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
        for (int n = 0; n < NB; ++n) {
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

        // Keys past the block's last visible one have probability 0 in every row.
        const int kend = min(BK, bhi - kt) - kofs;
#pragma unroll
        for (int kk = 0; kk < NB; ++kk) {
            if (kk * 8 >= kend) break;
            // A column t4 is key 2·t4 of the step, column t4 + 4 key 2·t4 + 1.
            unsigned pb[4], ps[4];
            att_split3(s[kk][0], pb[0], ps[0]);
            att_split3(s[kk][2], pb[1], ps[1]);
            att_split3(s[kk][1], pb[2], ps[2]);
            att_split3(s[kk][3], pb[3], ps[3]);
            const float* vr = Vs + (kk * 8 + 2 * t4) * DS + g;
#pragma unroll
            for (int cp = 0; cp < NT; ++cp) {
                // B fragment (k = key in that order, n = column g of the 8-column step).
                unsigned bb0, bs0, bb1, bs1;
                att_split3(vr[cp * 8], bb0, bs0);
                att_split3(vr[cp * 8 + DS], bb1, bs1);
                att_mma3(o[cp], pb, ps, bb0, bb1, bs0, bs1);
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
    float* ob = out + b * a.o_b + h * a.o_h;
    if (SK) {
        // Each warp's rows (m, l) and unnormalised outputs into the freed K/V tiles, then
        // every thread merges some of the tile's 16 × D outputs over the warps.
        __syncthreads();
        constexpr int PW = 16 * D + 32;
        float* mine = KV + warp * PW;
#pragma unroll
        for (int n = 0; n < NT; ++n) {
            const int col = n * 8 + 2 * t4;
            mine[g * D + col] = o[n][0];
            mine[g * D + col + 1] = o[n][1];
            mine[(g + 8) * D + col] = o[n][2];
            mine[(g + 8) * D + col + 1] = o[n][3];
        }
        if (t4 == 0) {
            mine[16 * D + g] = m0;
            mine[16 * D + g + 8] = m1;
            mine[16 * D + 16 + g] = l0;
            mine[16 * D + 16 + g + 8] = l1;
        }
        __syncthreads();
        for (int idx = tid; idx < 16 * D; idx += blockDim.x) {
            const int r = idx / D, c = idx - r * D;
            if (q0 + r >= a.sq) continue;
            float mx = -INFINITY;
            for (int w = 0; w < NW; ++w) mx = fmaxf(mx, KV[w * PW + 16 * D + r]);
            float lsum = 0.f, acc = 0.f;
            for (int w = 0; w < NW; ++w) {
                const float mw = KV[w * PW + 16 * D + r];
                const float f = mw == -INFINITY ? 0.f : __expf(mw - mx);
                lsum += KV[w * PW + 16 * D + 16 + r] * f;
                acc += KV[w * PW + r * D + c] * f;
            }
            ob[(i64)(q0 + r) * a.o_s + c] = lsum > 0.f ? acc / lsum : 0.f;
        }
        return;
    }
    const float inv0 = l0 > 0.f ? 1.f / l0 : 0.f, inv1 = l1 > 0.f ? 1.f / l1 : 0.f;
#pragma unroll
    for (int n = 0; n < NT; ++n) {
        const int col = n * 8 + 2 * t4;
        if (row0 < a.sq)
            *reinterpret_cast<float2*>(ob + (i64)row0 * a.o_s + col) =
                make_float2(o[n][0] * inv0, o[n][1] * inv0);
        if (row1 < a.sq)
            *reinterpret_cast<float2*>(ob + (i64)row1 * a.o_s + col) =
                make_float2(o[n][2] * inv1, o[n][3] * inv1);
    }
}

#define ATT_X3(D, NW, BK, SK, name)                                                           \
    extern "C" __global__ void __launch_bounds__(32 * NW)                                    \
        name##_d##D##_w##NW##_k##BK##_f32(const float* q, const float* k, const float* v,    \
                                           const u8* keep, float* out, AttnArgs a) {          \
        att_apply_past(a);                                                                    \
        attn_x3_body<D, NW, BK, SK>(q, k, v, keep, out, a);                                  \
    }
#define ATT_X3_D(D)                                                                           \
    ATT_X3(D, 1, 32, false, attn_x3) ATT_X3(D, 2, 32, false, attn_x3)                        \
    ATT_X3(D, 4, 32, false, attn_x3) ATT_X3(D, 1, 64, false, attn_x3)                        \
    ATT_X3(D, 2, 64, false, attn_x3) ATT_X3(D, 4, 64, false, attn_x3)                        \
    ATT_X3(D, 2, 32, true, attn_x3s) ATT_X3(D, 4, 32, true, attn_x3s)                        \
    ATT_X3(D, 2, 64, true, attn_x3s) ATT_X3(D, 4, 64, true, attn_x3s)
RLX_GATE_f32(ATT_X3_D(32) ATT_X3_D(64) ATT_X3_D(128))

