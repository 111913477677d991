// Device-time microbenchmark of the decode GEMVs (kernels/quant.cu as NVRTC compiles it):
// the warp-per-column dq_gemv against the staged dq_gemv_st at the decode shapes of the
// benchmark models, each launch configuration timed as a CUDA graph of REPS back-to-back
// launches (the way a captured decode step runs them), with and without programmatic
// dependent launch, at each register depth the source has. Outputs are checked against
// dq_gemv's first. Run by
// bench/cuda_micro/run.sh on the device: nvcc -arch=sm_90 -O3 gemv_bench.cu -lcuda.
#include "../../crates/rlx-cuda/kernels/common.cuh"
#include "../../crates/rlx-cuda/kernels/quant.cu"
#include "../../crates/rlx-cuda/kernels/quant_gemv.cu"  // (an older quant.cu: run.sh drops this line)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <algorithm>
#include <string>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

typedef void (*OldK)(const float*, const u8*, float*, const float*, const float*, int, i64, i64, float);
typedef void (*StK)(const float*, const u8*, float*, const float*, const float*, int, i64, i64, float, int, int);

// st1d[i]: the one-row kernel holding 2 << i units a lane in registers (R in quant.cu); a
// quant.cu from before the register depths (no RLX_DQ_ST_DEEP) has only R = 2.
// pl1d: the planar layout's one-row kernels (crates/rlx-cuda/src/planar.rs), with the block's
// (quants, fifth bits, scales) byte counts qb / qhb / scb for packing.
struct Scheme { const char* name; int bl, bb; OldK old; StK st1d[3], st8; StK pl1d[3]; int qb, qhb, scb; };
#ifdef RLX_DQ_ST_DEEP
#define D4(n) dq_gemv_st_##n##_m1d4_f32
#define D8(n) dq_gemv_st_##n##_m1d8_f32
#else
#define D4(n) nullptr
#define D8(n) nullptr
#endif
#ifdef Q8_0P
#define PL(n) {dq_gemv_st_##n##p_m1_f32, dq_gemv_st_##n##p_m1d4_f32, dq_gemv_st_##n##p_m1d8_f32}
#else
#define PL(n) {nullptr, nullptr, nullptr}
#endif
#define SCH(n, S, bl, bb, qb, qhb, scb) {#n, bl, bb, dq_gemv_##n##_f32, {dq_gemv_st_##n##_m1_f32, D4(n), D8(n)}, dq_gemv_st_##n##_m8_f32, PL(n), qb, qhb, scb}
#define SCHK(n, S, bl, bb) {#n, bl, bb, dq_gemv_##n##_f32, {dq_gemv_st_##n##_m1_f32, D4(n), nullptr}, dq_gemv_st_##n##_m8_f32, {nullptr, nullptr, nullptr}, 0, 0, 0}
static Scheme SCHEMES[] = {SCH(q8_0, Q8_0, 32, 34, 32, 0, 2), SCH(q4_0, Q4_0, 32, 18, 16, 0, 2),
                           SCH(q4_1, Q4_1, 32, 20, 16, 0, 4), SCH(q5_0, Q5_0, 32, 22, 16, 4, 2),
                           SCH(q5_1, Q5_1, 32, 24, 16, 4, 4), SCHK(q4_k, Q4_K, 256, 144),
                           SCHK(q5_k, Q5_K, 256, 176), SCHK(q6_k, Q6_K, 256, 210),
                           SCHK(f16, F16S, 32, 64), SCHK(bf16, BF16S, 32, 64)};

static unsigned short half_bits(float f) { __half h = __float2half(f); return *reinterpret_cast<unsigned short*>(&h); }
static unsigned rng = 12345u;
static unsigned nxt() { rng ^= rng << 13; rng ^= rng >> 17; rng ^= rng << 5; return rng; }
static float unif() { return (nxt() & 0xffffff) / 16777216.0f * 2.f - 1.f; }

static void fix_headers(std::vector<u8>& w, const Scheme& s) {
    std::string nm = s.name;
    if (nm == "f16" || nm == "bf16") {
        for (size_t i = 0; i + 2 <= w.size(); i += 2) {
            float v = 0.05f * unif();
            unsigned short h = half_bits(v);
            if (nm == "bf16") { unsigned u; memcpy(&u, &v, 4); h = (unsigned short)(u >> 16); }
            w[i] = h & 255; w[i + 1] = h >> 8;
        }
        return;
    }
    for (size_t b = 0; b + s.bb <= w.size(); b += s.bb) {
        auto put = [&](int off, float v) { unsigned short h = half_bits(v); w[b + off] = h & 255; w[b + off + 1] = h >> 8; };
        std::string n = s.name;
        if (n == "q6_k") put(208, 0.002f + 0.002f * fabsf(unif()));
        else put(0, 0.01f + 0.02f * fabsf(unif()));
        if (n == "q4_1" || n == "q5_1" || n == "q4_k" || n == "q5_k") put(2, 0.02f * unif());
    }
}

// GGUF rows → planar rows (a block is [scales][fifth bits][quants]; planar.rs's `pack`).
static std::vector<u8> to_planar(const std::vector<u8>& w, const Scheme& s, i64 rb) {
    std::vector<u8> p(w.size());
    const int units = (int)(rb / s.bb);
    for (size_t r = 0; r + rb <= w.size(); r += rb)
        for (int u = 0; u < units; ++u) {
            const u8* b = &w[r + (size_t)u * s.bb];
            memcpy(&p[r + (size_t)u * s.qb], b + s.scb + s.qhb, s.qb);
            memcpy(&p[r + (size_t)units * s.qb + (size_t)u * s.qhb], b + s.scb, s.qhb);
            memcpy(&p[r + (size_t)units * (s.qb + s.qhb) + (size_t)u * s.scb], b, s.scb);
        }
    return p;
}

struct Case { const char* scheme; int n, k; bool norm, res; int glu; const char* what; };

static float time_graph(void (*enq)(cudaStream_t, void*), void* ctx, int reps, cudaStream_t st) {
    cudaGraph_t g; cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int r = 0; r < reps; ++r) enq(st, ctx);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    CK(cudaGraphLaunch(ge, st)); CK(cudaStreamSynchronize(st));
    std::vector<float> ts;
    for (int i = 0; i < 7; ++i) {
        cudaEventRecord(a, st); CK(cudaGraphLaunch(ge, st)); cudaEventRecord(b, st); CK(cudaEventSynchronize(b));
        float ms; cudaEventElapsedTime(&ms, a, b); ts.push_back(ms);
    }
    std::sort(ts.begin(), ts.end());
    cudaGraphExecDestroy(ge); cudaGraphDestroy(g);
    return ts[3] * 1000.f / reps;
}

struct L { void* fn; dim3 grid, block; size_t smem; void** args; bool pdl; };
static void enq_l(cudaStream_t st, void* p) {
    L* l = (L*)p;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = l->grid; cfg.blockDim = l->block; cfg.dynamicSmemBytes = l->smem; cfg.stream = st;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at; cfg.numAttrs = l->pdl ? 1 : 0;
    CK(cudaLaunchKernelExC(&cfg, l->fn, l->args));
}
__global__ void empty_k(int) { pdl_wait(); pdl_launch_next(); }

int main() {
    const int REPS = 200;
    cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    {
        int z = 0; void* args[] = {&z};
        for (int pdl = 0; pdl < 2; ++pdl) {
            L l{(void*)empty_k, dim3(132), dim3(128), 0, args, pdl == 1};
            printf("empty kernel, 132 blocks, pdl=%d: %.2f us/launch\n", pdl, time_graph(enq_l, &l, REPS, st));
        }
    }
    Case cases[] = {
        {"q4_1", 960, 576, true, false, 0, "SmolLM2 qkv"},
        {"q4_1", 576, 576, false, true, 0, "SmolLM2 o"},
        {"q4_1", 3072, 576, true, false, 0, "SmolLM2 gate/up"},
        {"q4_1", 576, 1536, false, true, 1, "SmolLM2 down (+swiglu)"},
        {"q8_0", 49152, 576, true, false, 0, "SmolLM2 head"},
        {"q5_0", 1152, 896, true, false, 0, "0.5B qkv (Q4_K_M fallback)"},
        {"q8_0", 896, 896, false, true, 0, "0.5B o"},
        {"q5_0", 9728, 896, true, false, 0, "0.5B gate/up"},
        {"q4_k", 896, 4864, false, true, 0, "0.5B down Q4_K"},
        {"q6_k", 896, 4864, false, true, 0, "0.5B down Q6_K"},
        {"f16", 1152, 896, true, false, 0, "0.5B qkv F16"},
        {"f16", 896, 896, false, true, 0, "0.5B o F16"},
        {"f16", 9728, 896, true, false, 0, "0.5B gate/up F16"},
        {"f16", 896, 4864, false, true, 1, "0.5B down F16 (+swiglu)"},
        {"bf16", 9728, 896, true, false, 0, "0.5B gate/up BF16"},
        {"f16", 151936, 896, true, false, 0, "0.5B head F16"},
        {"q8_0", 151936, 896, true, false, 0, "0.5B head Q8_0"},
        {"q4_0", 576, 576, true, true, 0, "check"},
        {"q5_1", 576, 576, true, false, 0, "check"},
        {"q5_k", 512, 1024, true, true, 0, "check"},
        {"q5_k", 512, 1024, false, true, 2, "check glu"},
    };
    // MICRO_ONLY=text: only the cases whose description holds the text (e.g. for ncu).
    const char* only = getenv("MICRO_ONLY");
    for (auto& c : cases) {
        if (only != nullptr && strstr(c.what, only) == nullptr) continue;
        const Scheme* s = nullptr;
        for (auto& x : SCHEMES) if (!strcmp(x.name, c.scheme)) s = &x;
        const i64 N = c.n, K = c.k, rb = K / s->bl * s->bb;
        const int MMAX = 3;
        std::vector<u8> hw(N * rb);
        for (auto& b : hw) b = nxt() & 255;
        fix_headers(hw, *s);
        const i64 xw = c.glu ? 2 * K : K;
        std::vector<float> hx(MMAX * xw), hg(K), hr(MMAX * N), hh(MMAX * K);
        for (auto& v : hx) v = unif();
        for (auto& v : hg) v = 0.5f + unif();
        for (auto& v : hr) v = unif();
        for (int m = 0; m < MMAX; ++m) for (i64 k = 0; k < K; ++k) {
            float g = hx[m * xw + (c.glu == 1 ? k : K + k)], u = hx[m * xw + (c.glu == 1 ? K + k : k)];
            hh[m * K + k] = c.glu ? u * (g / (1.f + expf(-g))) : hx[m * xw + k];
        }
        u8* dw; float *dx, *dh, *dg, *dr, *dy0, *dy1;
        CK(cudaMalloc(&dw, hw.size())); CK(cudaMalloc(&dx, hx.size() * 4)); CK(cudaMalloc(&dh, hh.size() * 4));
        CK(cudaMalloc(&dg, K * 4)); CK(cudaMalloc(&dr, hr.size() * 4));
        CK(cudaMalloc(&dy0, MMAX * N * 4)); CK(cudaMalloc(&dy1, MMAX * N * 4));
        cudaMemcpy(dw, hw.data(), hw.size(), cudaMemcpyHostToDevice);
        // The planar copy where the scheme has planar kernels and rows stay 8-byte aligned.
        const bool planar = s->pl1d[0] != nullptr && rb % 8 == 0;
        u8* dwp = nullptr;
        if (planar) {
            const std::vector<u8> hp = to_planar(hw, *s, rb);
            CK(cudaMalloc(&dwp, hp.size()));
            cudaMemcpy(dwp, hp.data(), hp.size(), cudaMemcpyHostToDevice);
        }
        cudaMemcpy(dx, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice);
        cudaMemcpy(dh, hh.data(), hh.size() * 4, cudaMemcpyHostToDevice);
        cudaMemcpy(dg, hg.data(), K * 4, cudaMemcpyHostToDevice);
        cudaMemcpy(dr, hr.data(), hr.size() * 4, cudaMemcpyHostToDevice);
        const float* gam = c.norm ? dg : nullptr;
        const float* res = c.res ? dr : nullptr;
        float eps = 1e-5f;
        int glu = c.glu;
        // Reference: the old kernel on h (the glu input computed on the host).
        const float* xin_old = c.glu ? dh : dx;
        printf("\n%s %s N=%lld K=%lld%s%s%s\n", c.what, s->name, N, K, c.norm ? " +norm" : "", c.res ? " +res" : "", c.glu ? " +glu" : "");
        for (int M : {1, 3}) {
            if (((size_t)M * (K / 32) * 36 + 32) * 4 > 48 * 1024) continue;  // needs the opt-in size
            s->old<<<(N + 3) / 4, 128, 0, st>>>(xin_old, dw, dy0, gam, res, M, N, K, eps);
            const int units = K / 32;
            size_t smem = ((size_t)M * units * 36 + 32) * 4;
            for (int di = 0; di < (M == 1 ? 6 : 1); ++di) {
                StK f = M != 1 ? s->st8 : di < 3 ? s->st1d[di] : planar ? s->pl1d[di - 3] : nullptr;
                if (f == nullptr) continue;
                f<<<(N + 7) / 8, 128, smem, st>>>(dx, di < 3 ? dw : dwp, dy1, gam, res, M, N, K, eps, glu, 16);
                CK(cudaStreamSynchronize(st));
                std::vector<float> a(M * N), b(M * N);
                cudaMemcpy(a.data(), dy0, M * N * 4, cudaMemcpyDeviceToHost);
                cudaMemcpy(b.data(), dy1, M * N * 4, cudaMemcpyDeviceToHost);
                double md = 0, mx = 0;
                for (size_t i = 0; i < a.size(); ++i) { md = fmax(md, fabs(a[i] - b[i])); mx = fmax(mx, fabs(a[i])); }
                printf("  check M=%d depth %d%s: max|st-old| = %.3g (max|old| %.3g) %s\n", M, 2 << (di % 3),
                       di < 3 ? "" : " planar", md, mx,
                       md <= 1e-4 * mx + 1e-5 ? "ok" : "MISMATCH");
            }
        }
        int M = 1;
        i64 Nv = N, Kv = K;
        const int units = K / 32;
        size_t smem = ((size_t)units * 36 + 32) * 4;
        // Cold: enough copies of the weight that a graph's launches stream from HBM (the
        // working set of a decode step is far larger than the 50 MB L2).
        const size_t bytes = hw.size();
        int copies = (int)std::min<size_t>(256, (size_t)(768u << 20) / bytes + 1);
        std::vector<u8*> cw(copies), cwp(copies, nullptr);
        cw[0] = dw;
        cwp[0] = dwp;
        for (int c = 1; c < copies; ++c) { CK(cudaMalloc(&cw[c], bytes)); CK(cudaMemcpy(cw[c], dw, bytes, cudaMemcpyDeviceToDevice)); }
        if (planar)
            for (int c = 1; c < copies; ++c) { CK(cudaMalloc(&cwp[c], bytes)); CK(cudaMemcpy(cwp[c], dwp, bytes, cudaMemcpyDeviceToDevice)); }
        struct Cfg { int lpr, warps, grid, di; float hot, cold; };
        std::vector<Cfg> cfgs;
        std::vector<std::pair<int, int>> shapes;
        for (int lpr : {4, 8, 16, 32}) for (int warps : {4, 8}) shapes.push_back({lpr, warps});
        if (units >= 64) { shapes.push_back({64, 2}); shapes.push_back({128, 4}); shapes.push_back({256, 8}); }
        for (auto [lpr, warps] : shapes) {
            const i64 rows = std::max(1, 32 * warps / lpr);
            const int full = (int)((N + rows - 1) / rows);
            for (int grid : {full, 132, 264, 528, 1056}) {
                if (grid > full || (grid != full && grid * 2 > full * 1)) { if (grid != full) continue; }
                for (int di = 0; di < 6; ++di)
                    if (di < 3 ? s->st1d[di] != nullptr : planar && s->pl1d[di - 3] != nullptr)
                        cfgs.push_back({lpr, warps, grid, di, 0.f, 0.f});
            }
        }
        // The capped grids must compute the same output as the full one.
        {
          for (int lp0 : {32, 128}) {
            int lp = lp0, warps = lp0 == 128 ? 4 : 4, grid = lp0 == 128 ? (int)std::min<i64>(N, 264) : 132;
            void* sargs[] = {&dx, &dw, &dy1, &gam, &res, &M, &Nv, &Kv, &eps, &glu, &lp};
            CK(cudaMemset(dy1, 0, N * 4));
            L l{(void*)s->st1d[0], dim3(grid), dim3(32 * warps), smem, sargs, true};
            enq_l(st, &l); CK(cudaStreamSynchronize(st));
            s->old<<<(N + 3) / 4, 128, 0, st>>>(xin_old, dw, dy0, gam, res, M, N, K, eps);
            std::vector<float> a(N), b(N);
            cudaMemcpy(a.data(), dy0, N * 4, cudaMemcpyDeviceToHost);
            cudaMemcpy(b.data(), dy1, N * 4, cudaMemcpyDeviceToHost);
            double md = 0, mx = 0;
            for (i64 i = 0; i < N; ++i) { md = fmax(md, fabs(a[i] - b[i])); mx = fmax(mx, fabs(a[i])); }
            printf("  check grid-stride (lpr %d, grid %d): %s\n", lp, grid, md <= 1e-4 * mx + 1e-5 ? "ok" : "MISMATCH");
          }
        }
        for (auto& c : cfgs) {
            int lp = c.lpr;
            std::vector<std::vector<void*>> args(copies);
            std::vector<L> ls(copies);
            for (int k = 0; k < copies; ++k) {
                args[k] = {&dx, c.di < 3 ? &cw[k] : &cwp[k], &dy1, &gam, &res, &M, &Nv, &Kv, &eps, &glu, &lp};
                StK f = c.di < 3 ? s->st1d[c.di] : s->pl1d[c.di - 3];
                ls[k] = L{(void*)f, dim3(c.grid), dim3(32 * c.warps), smem, args[k].data(), true};
            }
            c.hot = time_graph(enq_l, &ls[0], REPS, st);
            struct Rot { std::vector<L>* ls; int i; } rot{&ls, 0};
            c.cold = time_graph([](cudaStream_t s2, void* p) { Rot* r = (Rot*)p; enq_l(s2, &(*r->ls)[r->i++ % r->ls->size()]); }, &rot, std::max(REPS, copies), st);
        }
        auto show = [&](const Cfg& c, const char* tag) {
            printf("  %-26s lpr=%2d warps=%d grid=%5d depth=%d%s: hot %6.2f us (%5.0f GB/s)  cold %6.2f us (%5.0f GB/s)\n", tag,
                   c.lpr, c.warps, c.grid, 2 << (c.di % 3), c.di < 3 ? "" : " planar", c.hot, bytes / (c.hot * 1e3), c.cold,
                   bytes / (c.cold * 1e3));
        };
        Cfg hf = cfgs[0], hb = cfgs[0], cb = cfgs[0];
        bool seen = false;
        for (auto& c : cfgs) {
            const i64 rows = std::max(1, 32 * c.warps / c.lpr);
            const bool full = c.grid == (int)((N + rows - 1) / rows);
            if (full && (!seen || c.hot < hf.hot)) { hf = c; seen = true; }
            if (c.hot < hb.hot) hb = c;
            if (c.cold < cb.cold) cb = c;
        }
        printf("  weight %.1f KB, %d copies for cold\n", bytes / 1024.0, copies);
        show(hf, "today (hot-best full grid)");
        show(hb, "hot best");
        show(cb, "cold best");
        for (auto& c : cfgs) if (c.lpr > 32) show(c, "wide");
        // The best cold timing at each register depth (what the deeper rings buy).
        for (int di = 0; di < 6; ++di) {
            const Cfg* best = nullptr;
            for (auto& c : cfgs) if (c.di == di && (best == nullptr || c.cold < best->cold)) best = &c;
            if (best != nullptr) show(*best, "cold best at this depth");
        }
        for (int c = 1; c < copies; ++c) { cudaFree(cw[c]); if (cwp[c]) cudaFree(cwp[c]); }
        if (dwp) cudaFree(dwp);
        cudaFree(dw); cudaFree(dx); cudaFree(dh); cudaFree(dg); cudaFree(dr); cudaFree(dy0); cudaFree(dy1);
    }
    return 0;
}
