// Exhaustive cuBLASLt search for strict-f32 GEMM shapes (row-major C[M,N] = A[M,K] B[K,N]):
// the heuristic's top candidates against every algo id x tile x stages x split-K the library
// accepts. An experiment for BENCHMARKS.md, built with nvcc on the device.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <vector>
#include <algorithm>
#define CK(x) do { auto s_ = (x); if ((int)s_ != 0) { printf("%s:%d err %d\n", __FILE__, __LINE__, (int)s_); } } while (0)

struct Res { float us; int id, tile, stages, splitk, red, swz; };

static float time_algo(cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t la,
                       cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc, const cublasLtMatmulAlgo_t* algo,
                       const float* A, const float* B, float* C, void* ws, size_t wss, cudaStream_t st) {
    float one = 1.f, zero = 0.f;
    for (int i = 0; i < 3; ++i)
        if (cublasLtMatmul(h, d, &one, A, la, B, lb, &zero, C, lc, C, lc, algo, ws, wss, st) != 0) return 1e9;
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    const int reps = 20;
    cudaEventRecord(e0, st);
    for (int i = 0; i < reps; ++i) cublasLtMatmul(h, d, &one, A, la, B, lb, &zero, C, lc, C, lc, algo, ws, wss, st);
    cudaEventRecord(e1, st); cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1);
    cudaEventDestroy(e0); cudaEventDestroy(e1);
    if (cudaGetLastError() != cudaSuccess) return 1e9;
    return ms * 1000.f / reps;
}

int main() {
    int shapes[][3] = {{4096, 384, 384}, {4096, 1152, 384}, {4096, 1536, 384}, {4096, 384, 1536}, {128, 384, 384}, {128, 1536, 384}};
    cublasLtHandle_t h; CK(cublasLtCreate(&h));
    size_t wss = 32 << 20; void* ws; cudaMalloc(&ws, wss);
    cudaStream_t st; cudaStreamCreate(&st);
    for (auto& s : shapes) {
        int M = s[0], N = s[1], K = s[2];
        float *A, *B, *C;
        cudaMalloc(&A, (size_t)M * K * 4); cudaMalloc(&B, (size_t)K * N * 4); cudaMalloc(&C, (size_t)M * N * 4);
        cudaMemset(A, 0, (size_t)M * K * 4); cudaMemset(B, 0, (size_t)K * N * 4);
        cublasLtMatmulDesc_t d; CK(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        cublasLtMatrixLayout_t la, lb, lc;
        CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, N, K, N));
        CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, K, M, K));
        CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, N, M, N));
        cublasLtMatmulPreference_t pref; CK(cublasLtMatmulPreferenceCreate(&pref));
        CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wss, sizeof(wss)));
        cublasLtMatmulHeuristicResult_t hr[32]; int cnt = 0;
        CK(cublasLtMatmulAlgoGetHeuristic(h, d, la, lb, lc, lc, pref, 32, hr, &cnt));
        float heur_best = 1e9, heur0 = 1e9;
        for (int i = 0; i < cnt; ++i) {
            float t = time_algo(h, d, la, lb, lc, &hr[i].algo, B, A, C, ws, wss, st);
            if (i == 0) heur0 = t;
            if (i < 8) heur_best = std::min(heur_best, t);
        }
        float heur32 = 1e9;
        for (int i = 0; i < cnt; ++i) heur32 = std::min(heur32, time_algo(h, d, la, lb, lc, &hr[i].algo, B, A, C, ws, wss, st));
        int ids[256], nid = 0;
        CK(cublasLtMatmulAlgoGetIds(h, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 256, ids, &nid));
        std::vector<Res> all;
        int tried = 0;
        for (int a = 0; a < nid; ++a) {
            cublasLtMatmulAlgo_t algo;
            if (cublasLtMatmulAlgoInit(h, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, ids[a], &algo) != 0) continue;
            size_t sz = 0;
            cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, nullptr, 0, &sz);
            std::vector<int> tiles(std::max<size_t>(1, sz / 4), CUBLASLT_MATMUL_TILE_UNDEFINED);
            if (sz) cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, tiles.data(), sz, &sz);
            cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS, nullptr, 0, &sz);
            std::vector<int> stages(std::max<size_t>(1, sz / 4), CUBLASLT_MATMUL_STAGES_UNDEFINED);
            if (sz) cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS, stages.data(), sz, &sz);
            int splitk_sup = 0, swz_sup = 0; uint32_t redmask = 0;
            cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &splitk_sup, 4, &sz);
            cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT, &swz_sup, 4, &sz);
            cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &redmask, 4, &sz);
            for (int t : tiles) for (int sg : stages) for (int sk : {1, 2, 3, 4}) for (int swz = 0; swz <= swz_sup; ++swz) {
                if (sk > 1 && !splitk_sup) continue;
                int reds[] = {CUBLASLT_REDUCTION_SCHEME_NONE, CUBLASLT_REDUCTION_SCHEME_INPLACE, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE};
                for (int red : reds) {
                    if (sk == 1 && red != CUBLASLT_REDUCTION_SCHEME_NONE) continue;
                    if (sk > 1 && (red == CUBLASLT_REDUCTION_SCHEME_NONE || !(redmask & red))) continue;
                    cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &t, 4);
                    cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &sg, 4);
                    cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &sk, 4);
                    cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, 4);
                    cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz, 4);
                    cublasLtMatmulHeuristicResult_t r;
                    if (cublasLtMatmulAlgoCheck(h, d, la, lb, lc, lc, &algo, &r) != 0 || r.workspaceSize > wss) continue;
                    ++tried;
                    float us = time_algo(h, d, la, lb, lc, &algo, B, A, C, ws, wss, st);
                    all.push_back({us, ids[a], t, sg, sk, red, swz});
                }
            }
        }
        std::sort(all.begin(), all.end(), [](const Res& x, const Res& y) { return x.us < y.us; });
        double fl = 2.0 * M * N * K;
        printf("M=%d N=%d K=%d: heur[0] %.1f us (%.1f TF), best of 8 %.1f us, best of %d %.1f us (%.1f TF); exhaustive %d configs best %.1f us (%.1f TF)\n",
               M, N, K, heur0, fl / heur0 / 1e6, heur_best, cnt, heur32, fl / heur32 / 1e6, tried,
               all.empty() ? 0.f : all[0].us, all.empty() ? 0.0 : fl / all[0].us / 1e6);
        for (int i = 0; i < std::min<int>(5, all.size()); ++i)
            printf("   %.1f us id %d tile %d stages %d splitk %d red %d swz %d\n", all[i].us, all[i].id, all[i].tile, all[i].stages, all[i].splitk, all[i].red, all[i].swz);
        cudaFree(A); cudaFree(B); cudaFree(C);
    }
    // Three 4096x384x384 GEMMs back to back vs on three streams at once.
    {
        int M = 4096, N = 384, K = 384;
        float *A, *B[3], *C[3];
        cudaMalloc(&A, (size_t)M * K * 4);
        for (int i = 0; i < 3; ++i) { cudaMalloc(&B[i], (size_t)K * N * 4); cudaMalloc(&C[i], (size_t)M * N * 4); }
        cublasLtMatmulDesc_t d; cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
        cublasLtMatrixLayout_t la, lb, lc;
        cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, N, K, N);
        cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, K, M, K);
        cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, N, M, N);
        cublasLtMatmulPreference_t pref; cublasLtMatmulPreferenceCreate(&pref);
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wss, sizeof(wss));
        cublasLtMatmulHeuristicResult_t hr; int cnt;
        cublasLtMatmulAlgoGetHeuristic(h, d, la, lb, lc, lc, pref, 1, &hr, &cnt);
        cudaStream_t s3[3]; void* w3[3];
        for (int i = 0; i < 3; ++i) { cudaStreamCreateWithFlags(&s3[i], cudaStreamNonBlocking); cudaMalloc(&w3[i], wss); }
        float one = 1, zero = 0;
        cudaEvent_t e0, e1, ev[3]; cudaEventCreate(&e0); cudaEventCreate(&e1);
        for (int i = 0; i < 3; ++i) cudaEventCreate(&ev[i]);
        for (int mode = 0; mode < 2; ++mode) {
            float best = 1e9;
            for (int rep = 0; rep < 30; ++rep) {
                cudaEventRecord(e0, s3[0]);
                for (int i = 0; i < 3; ++i) {
                    cudaStream_t s = mode ? s3[i] : s3[0];
                    if (mode && i) cudaStreamWaitEvent(s, e0, 0);
                    cublasLtMatmul(h, d, &one, B[i], la, A, lb, &zero, C[i], lc, C[i], lc, &hr.algo, w3[i], wss, s);
                    if (mode && i) { cudaEventRecord(ev[i], s); cudaStreamWaitEvent(s3[0], ev[i], 0); }
                }
                cudaEventRecord(e1, s3[0]); cudaEventSynchronize(e1);
                float ms; cudaEventElapsedTime(&ms, e0, e1); best = std::min(best, ms);
            }
            printf("3x 4096x384x384 %s: %.1f us\n", mode ? "on 3 streams" : "serial", best * 1000);
        }
    }
    return 0;
}
