// rlx vision kernels (see lower/vision.rs). common.cuh is prepended.
//
// Layouts are NCHW (data) and OIHW (weights). Every tensor a kernel indexes holds fewer than
// 2^31 elements (the lowering checks), so index math is 32-bit: 64-bit division would cost
// more than the memory traffic of these kernels.
//
// Column buffers ("col") hold, per group (at a padded stride `gs` elements, so every group's
// block starts 256-byte aligned for cuBLASLt), a [rows][nb*P] matrix with row stride `ld`
// (>= nb*P, a multiple of 8 so rows stay 16-byte aligned): one row per (c_in, ki, kj) of the
// group (plus an all-ones row when the bias rides in the GEMM), and the nb images of a chunk
// side by side along the columns, P = Ho*Wo each. That one layout serves the forward GEMM
// (batched over images with a column offset of P) and the weight gradient (one GEMM with
// k = nb*P).

// Conv geometry in true 2-D terms (the 1-D form already rewritten); mirrors `ConvG` in
// lower/vision_conv.rs.
struct ConvG {
    int n, c, h, w, o, ho, wo;
    int kh, kw, sh, sw, ph, pw, dh, dw;
    int groups, cg, og;
};

#define GRID_STRIDE(i, total)                                                  \
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (total);          \
         i += blockDim.x * gridDim.x)

__device__ __forceinline__ bool inside(int v, int len) { return (unsigned)v < (unsigned)len; }

// q = v / s when s divides v >= 0; the stride-1 case skips the division.
__device__ __forceinline__ bool exact_div(int v, int s, int& q) {
    if (s == 1) {
        q = v;
        return true;
    }
    q = v / s;
    return q * s == v;
}

// y[n, o, oy, ox] = sum_{ci, ki, kj} x[n, g*cg+ci, iy, ix] * w[o, ci, ki, kj] (+ bias[o]),
// one thread per output. Used when the reduction is short (small cg*kh*kw, depthwise).
template <typename T>
__device__ void conv_direct(const T* x, const T* w, const T* bias, T* y, ConvG g) {
    const int P = g.ho * g.wo, kk = g.kh * g.kw, total = g.n * g.o * P;
    GRID_STRIDE(i, total) {
        int p = i % P, t = i / P;
        int oc = t % g.o, n = t / g.o;
        int oy = p / g.wo, ox = p - oy * g.wo;
        int grp = oc / g.og;
        const T* xb = x + (n * g.c + grp * g.cg) * g.h * g.w;
        const T* wb = w + oc * g.cg * kk;
        int iy0 = oy * g.sh - g.ph, ix0 = ox * g.sw - g.pw;
        float acc = 0.f;
        for (int ci = 0; ci < g.cg; ++ci) {
            const T* xp = xb + ci * g.h * g.w;
            const T* wp = wb + ci * kk;
            for (int ki = 0; ki < g.kh; ++ki) {
                int iy = iy0 + ki * g.dh;
                if (!inside(iy, g.h)) continue;
                for (int kj = 0; kj < g.kw; ++kj) {
                    int ix = ix0 + kj * g.dw;
                    if (!inside(ix, g.w)) continue;
                    acc += ldf(xp, iy * g.w + ix) * ldf(wp, ki * g.kw + kj);
                }
            }
        }
        if (bias) acc += ldf(bias, oc);
        stf(y, i, acc);
    }
}

// col (see top) from the chunk of nb images starting at x. blockIdx.y walks the rows
// (group, c_in, ki, kj) so each thread only splits its column index into (image, oy, ox).
// With `ones`, each group gets an extra all-ones row (and waug a bias column) so the GEMM
// adds the per-row bias for free. When waug is given, the extra row index `rows` packs it:
// per group, at stride wgs (aligned like col's groups), an [O/g, kr] matrix with row stride
// ldw holding w's rows, the bias appended when `ones`.
template <typename T>
__device__ void im2col(const T* x, T* col, const T* w, const T* bias, T* waug, ConvG g, int nb,
                       int ld, int gs, int ones, int ldw, int wgs) {
    const int P = g.ho * g.wo, kk = g.kh * g.kw, kg = g.cg * kk, kr = kg + ones;
    const int rows = g.groups * kr, nq = nb * P, chw = g.c * g.h * g.w;
    for (int row = blockIdx.y; row <= rows; row += gridDim.y) {
        if (row == rows) {
            if (!waug) continue;
            GRID_STRIDE(j, g.o * kr) {
                int grp = j / (g.og * kr), rem = j - grp * (g.og * kr);
                int oi = rem / kr, r = rem - oi * kr, oc = grp * g.og + oi;
                waug[grp * wgs + oi * ldw + r] = r < kg ? w[oc * kg + r] : bias[oc];
            }
            continue;
        }
        int grp = row / kr, r = row - grp * kr;
        T* dst = col + grp * gs + r * ld;
        if (r == kg) {
            GRID_STRIDE(q, nq) stf(dst, q, 1.f);
            continue;
        }
        int ci = r / kk, tap = r - ci * kk;
        int ki = tap / g.kw, kj = tap - ki * g.kw;
        const T* xc = x + (grp * g.cg + ci) * g.h * g.w;
        int offy = ki * g.dh - g.ph, offx = kj * g.dw - g.pw;
        GRID_STRIDE(q, nq) {
            int n = q / P, p = q - n * P;
            int oy = p / g.wo, ox = p - oy * g.wo;
            int iy = oy * g.sh + offy, ix = ox * g.sw + offx;
            if (inside(iy, g.h) && inside(ix, g.w))
                dst[q] = xc[n * chw + iy * g.w + ix];
            else
                stf(dst, q, 0.f);
        }
    }
}

// dx for the chunk of nb images at dx, gathered from dcol (col layout, no ones row; = Wᵀ·dy):
// each input position sums the column entries that read it, in the CPU's row order.
template <typename T>
__device__ void col2im(const T* dcol, T* dx, ConvG g, int nb, int ld, int gs) {
    const int P = g.ho * g.wo, kk = g.kh * g.kw, kg = g.cg * kk;
    const int total = nb * g.c * g.h * g.w;
    GRID_STRIDE(i, total) {
        int ix = i % g.w, t = i / g.w;
        int iy = t % g.h;
        t /= g.h;
        int c = t % g.c, n = t / g.c;
        int grp = c / g.cg, ci = c - grp * g.cg;
        float acc = 0.f;
        for (int ki = 0; ki < g.kh; ++ki) {
            int ty = iy + g.ph - ki * g.dh, oy;
            if (ty < 0) break;
            if (!exact_div(ty, g.sh, oy) || oy >= g.ho) continue;
            for (int kj = 0; kj < g.kw; ++kj) {
                int tx = ix + g.pw - kj * g.dw, ox;
                if (tx < 0) break;
                if (!exact_div(tx, g.sw, ox) || ox >= g.wo) continue;
                int r = ci * kk + ki * g.kw + kj;
                acc += ldf(dcol, grp * gs + r * ld + n * P + oy * g.wo + ox);
            }
        }
        stf(dx, i, acc);
    }
}

// dx[n, c, iy, ix] = sum over the taps that read (iy, ix) and the group's out channels of
// w * dy, one thread per input position (short reductions). Taps outside, channels inside,
// so the tap arithmetic is done once per position.
template <typename T>
__device__ void conv_bwd_input_direct(const T* dy, const T* w, T* dx, ConvG g) {
    const int P = g.ho * g.wo, kk = g.kh * g.kw;
    const int total = g.n * g.c * g.h * g.w;
    GRID_STRIDE(i, total) {
        int ix = i % g.w, t = i / g.w;
        int iy = t % g.h;
        t /= g.h;
        int c = t % g.c, n = t / g.c;
        int grp = c / g.cg, ci = c - grp * g.cg;
        const T* dyg = dy + (n * g.o + grp * g.og) * P;
        const T* wg = w + (grp * g.og * g.cg + ci) * kk;
        float acc = 0.f;
        for (int ki = 0; ki < g.kh; ++ki) {
            int ty = iy + g.ph - ki * g.dh, oy;
            if (ty < 0) break;
            if (!exact_div(ty, g.sh, oy) || oy >= g.ho) continue;
            for (int kj = 0; kj < g.kw; ++kj) {
                int tx = ix + g.pw - kj * g.dw, ox;
                if (tx < 0) break;
                if (!exact_div(tx, g.sw, ox) || ox >= g.wo) continue;
                const T* dyp = dyg + oy * g.wo + ox;
                const T* wp = wg + ki * g.kw + kj;
                for (int oi = 0; oi < g.og; ++oi)
                    acc += ldf(wp, oi * g.cg * kk) * ldf(dyp, oi * P);
            }
        }
        stf(dx, i, acc);
    }
}

// Weight gradient for short reductions: block (o, c_in, split) sums dy * x over its slice of
// the N*P positions for up to WG_TAPS taps at once (each position's dy and coordinates are
// then shared by the taps). With one split the block writes dw; otherwise f32 partials that
// conv_bwd_weight_reduce adds up in a fixed order (deterministic).
#define WG_TAPS 16
template <typename T>
__device__ void conv_bwd_weight_direct(const T* x, const T* dy, T* dw, float* part, ConvG g,
                                       int splits) {
    __shared__ float red[WG_TAPS][33];
    const int P = g.ho * g.wo, kk = g.kh * g.kw;
    const int row = blockIdx.x, oc = row / g.cg, ci = row - oc * g.cg;
    const int c = (oc / g.og) * g.cg + ci;
    const int Q = g.n * P, per = (Q + splits - 1) / splits;
    const int q0 = blockIdx.y * per, q1 = min(q0 + per, Q);
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (int t0 = 0; t0 < kk; t0 += WG_TAPS) {
        const int ki0 = t0 / g.kw, kj0 = t0 - ki0 * g.kw;
        float acc[WG_TAPS];
#pragma unroll
        for (int t = 0; t < WG_TAPS; ++t) acc[t] = 0.f;
        for (int q = q0 + threadIdx.x; q < q1; q += blockDim.x) {
            int n = q / P, p = q - n * P;
            int oy = p / g.wo, ox = p - oy * g.wo;
            float d = ldf(dy, (n * g.o + oc) * P + p);
            const T* xp = x + (n * g.c + c) * g.h * g.w;
            int iy0 = oy * g.sh - g.ph, ix0 = ox * g.sw - g.pw;
            int ki = ki0, kj = kj0;
#pragma unroll
            for (int t = 0; t < WG_TAPS; ++t) {
                if (t0 + t < kk) {
                    int iy = iy0 + ki * g.dh, ix = ix0 + kj * g.dw;
                    if (inside(iy, g.h) && inside(ix, g.w)) acc[t] += d * ldf(xp, iy * g.w + ix);
                }
                if (++kj == g.kw) {
                    kj = 0;
                    ++ki;
                }
            }
        }
#pragma unroll
        for (int t = 0; t < WG_TAPS; ++t) {
            float v = warp_sum(acc[t]);
            if (lane == 0) red[t][wid] = v;
        }
        __syncthreads();
        if (threadIdx.x < WG_TAPS && t0 + threadIdx.x < kk) {
            float v = 0.f;
            for (int k = 0; k < nwarps; ++k) v += red[threadIdx.x][k];
            int widx = row * kk + t0 + threadIdx.x;
            if (splits == 1)
                stf(dw, widx, v);
            else
                part[widx * splits + blockIdx.y] = v;
        }
        __syncthreads();
    }
}

template <typename T>
__device__ void conv_bwd_weight_reduce(const float* part, T* dw, int nw, int splits) {
    GRID_STRIDE(i, nw) {
        float acc = 0.f;
        for (int s = 0; s < splits; ++s) acc += part[i * splits + s];
        stf(dw, i, acc);
    }
}

// [a, b, P] -> [b, a*P] with row stride ld: dy [N, O, P] to dyT [O, N*P] for the
// weight-gradient GEMM.
template <typename T>
__device__ void swap01(const T* src, T* dst, int a, int b, int P, int ld) {
    GRID_STRIDE(i, a * b * P) {
        int p = i % P, t = i / P;
        int ia = t % a, ib = t / a;
        dst[ib * ld + ia * P + p] = src[(ia * b + ib) * P + p];
    }
}

// Max / average pooling over planes of h x w, one thread per output. Max keeps the first
// maximum and lets a NaN win (the CPU's rule); Avg divides by the full window
// (count_include_pad).
template <typename T>
__device__ void pool2d(const T* x, T* y, int planes, int h, int w, int ho, int wo, int kh, int kw,
                       int sh, int sw, int ph, int pw, int is_max) {
    GRID_STRIDE(i, planes * ho * wo) {
        int ox = i % wo, t = i / wo;
        int oy = t % ho, pl = t / ho;
        const T* xp = x + pl * h * w;
        int y0 = oy * sh - ph, x0 = ox * sw - pw;
        int ys = max(y0, 0), ye = min(y0 + kh, h), xs = max(x0, 0), xe = min(x0 + kw, w);
        float r;
        if (is_max) {
            bool have = false;
            float best = -INFINITY;
            for (int iy = ys; iy < ye; ++iy)
                for (int ix = xs; ix < xe; ++ix) {
                    float v = ldf(xp, iy * w + ix);
                    if (!have || (!isnan(best) && (v > best || isnan(v)))) {
                        best = v;
                        have = true;
                    }
                }
            r = best;
        } else {
            float s = 0.f;
            for (int iy = ys; iy < ye; ++iy)
                for (int ix = xs; ix < xe; ++ix) s += ldf(xp, iy * w + ix);
            r = s / (float)(kh * kw);
        }
        stf(y, i, r);
    }
}

// Offset inside the plane of window (oy, ox)'s first maximum (NaN wins), or -1 if empty.
template <typename T>
__device__ __forceinline__ int window_argmax(const T* xp, int h, int w, int oy, int ox, int kh,
                                             int kw, int sh, int sw, int ph, int pw) {
    int y0 = oy * sh - ph, x0 = ox * sw - pw;
    int ys = max(y0, 0), ye = min(y0 + kh, h), xs = max(x0, 0), xe = min(x0 + kw, w);
    int bi = -1;
    float best = -INFINITY;
    for (int iy = ys; iy < ye; ++iy)
        for (int ix = xs; ix < xe; ++ix) {
            float v = ldf(xp, iy * w + ix);
            if (bi < 0 || (!isnan(best) && (v > best || isnan(v)))) {
                best = v;
                bi = iy * w + ix;
            }
        }
    return bi;
}

// The windows [o0, o1] along one axis that cover input position i: those o with
// o*s - p <= i < o*s - p + k, clipped to the n outputs.
__device__ __forceinline__ void covering(int i, int k, int s, int p, int n, int& o0, int& o1) {
    const int l = i + p - k + 1;
    o0 = l <= 0 ? 0 : (l + s - 1) / s;
    o1 = min((i + p) / s, n - 1);
}

// dx of max pooling as a gather: each input position sums dy over the windows (in row-major
// window order, as the CPU adds them) whose first maximum it is.
template <typename T>
__device__ void maxpool2d_bwd(const T* x, const T* dy, T* dx, int planes, int h, int w, int ho,
                              int wo, int kh, int kw, int sh, int sw, int ph, int pw) {
    GRID_STRIDE(i, planes * h * w) {
        int ix = i % w, t = i / w;
        int iy = t % h, pl = t / h;
        const T* xp = x + pl * h * w;
        const T* dyp = dy + pl * ho * wo;
        int oy0, oy1, ox0, ox1;
        covering(iy, kh, sh, ph, ho, oy0, oy1);
        covering(ix, kw, sw, pw, wo, ox0, ox1);
        int me = iy * w + ix;
        float acc = 0.f;
        for (int oy = oy0; oy <= oy1; ++oy)
            for (int ox = ox0; ox <= ox1; ++ox)
                if (window_argmax(xp, h, w, oy, ox, kh, kw, sh, sw, ph, pw) == me)
                    acc += ldf(dyp, oy * wo + ox);
        stf(dx, i, acc);
    }
}

// Windows that tile the plane (kernel == stride, no padding): one thread per window finds
// its first maximum once and writes the whole window of dx (dy at the maximum, 0 elsewhere).
// Per input element the gather above pays eight integer divisions and a window rescan;
// this pays them once per window. Inputs no window covers are zeroed before the launch.
template <typename T>
__device__ void maxpool2d_bwd_tiled(const T* x, const T* dy, T* dx, int planes, int h, int w,
                                    int ho, int wo, int kh, int kw) {
    GRID_STRIDE(i, planes * ho * wo) {
        int ox = i % wo, t = i / wo;
        int oy = t % ho, pl = t / ho;
        const T* xp = x + pl * h * w;
        T* dxp = dx + pl * h * w;
        const int bi = window_argmax(xp, h, w, oy, ox, kh, kw, kh, kw, 0, 0);
        const float g = ldf(dy, i);
        const int y0 = oy * kh, x0 = ox * kw;
        const int ye = min(y0 + kh, h), xe = min(x0 + kw, w);
        for (int iy = y0; iy < ye; ++iy)
            for (int ix = x0; ix < xe; ++ix) {
                const int o = iy * w + ix;
                stf(dxp, o, o == bi ? g : 0.f);
            }
    }
}

// Overlapping windows: each window's first maximum (plane offset, -1 if none) once ...
template <typename T>
__device__ void pool_argmax(const T* x, int* idx, int planes, int h, int w, int ho, int wo,
                            int kh, int kw, int sh, int sw, int ph, int pw) {
    GRID_STRIDE(i, planes * ho * wo) {
        int ox = i % wo, t = i / wo;
        int oy = t % ho, pl = t / ho;
        idx[i] = window_argmax(x + pl * h * w, h, w, oy, ox, kh, kw, sh, sw, ph, pw);
    }
}

// ... then the gather of maxpool2d_bwd reads those instead of rescanning every window.
template <typename T>
__device__ void maxpool2d_bwd_idx(const int* idx, const T* dy, T* dx, int planes, int h, int w,
                                  int ho, int wo, int kh, int kw, int sh, int sw, int ph,
                                  int pw) {
    GRID_STRIDE(i, planes * h * w) {
        int ix = i % w, t = i / w;
        int iy = t % h, pl = t / h;
        const int* ip = idx + pl * ho * wo;
        const T* dyp = dy + pl * ho * wo;
        int oy0, oy1, ox0, ox1;
        covering(iy, kh, sh, ph, ho, oy0, oy1);
        covering(ix, kw, sw, pw, wo, ox0, ox1);
        int me = iy * w + ix;
        float acc = 0.f;
        for (int oy = oy0; oy <= oy1; ++oy)
            for (int ox = ox0; ox <= ox1; ++ox)
                if (ip[oy * wo + ox] == me) acc += ldf(dyp, oy * wo + ox);
        stf(dx, i, acc);
    }
}

// Nearest 2x upsampling, one thread per input element writing its 2x2 block. Typed by
// element size only, so it serves every dtype.
template <typename T>
__device__ void resize_nearest2x(const T* x, T* y, int planes, int h, int w) {
    GRID_STRIDE(i, planes * h * w) {
        int ix = i % w, t = i / w;
        int iy = t % h, pl = t / h;
        T v = x[i];
        int b = ((pl * 2 * h + 2 * iy) * 2 * w) + 2 * ix;
        y[b] = v;
        y[b + 1] = v;
        y[b + 2 * w] = v;
        y[b + 2 * w + 1] = v;
    }
}

#define VISION_FLOAT(sfx, T)                                                                   \
    extern "C" __global__ void conv_direct_##sfx(const T* x, const T* w, const T* bias, T* y,  \
                                                 ConvG g) {                                    \
        conv_direct<T>(x, w, bias, y, g);                                                      \
    }                                                                                          \
    extern "C" __global__ void im2col_##sfx(const T* x, T* col, const T* w, const T* bias,     \
                                            T* waug, ConvG g, int nb, int ld, int gs,          \
                                            int ones, int ldw, int wgs) {                      \
        im2col<T>(x, col, w, bias, waug, g, nb, ld, gs, ones, ldw, wgs);                       \
    }                                                                                          \
    extern "C" __global__ void col2im_##sfx(const T* dcol, T* dx, ConvG g, int nb, int ld,     \
                                            int gs) {                                          \
        col2im<T>(dcol, dx, g, nb, ld, gs);                                                    \
    }                                                                                          \
    extern "C" __global__ void conv_bwd_input_direct_##sfx(const T* dy, const T* w, T* dx,     \
                                                           ConvG g) {                          \
        conv_bwd_input_direct<T>(dy, w, dx, g);                                                \
    }                                                                                          \
    extern "C" __global__ void conv_bwd_weight_direct_##sfx(const T* x, const T* dy, T* dw,    \
                                                            float* part, ConvG g,              \
                                                            int splits) {                      \
        conv_bwd_weight_direct<T>(x, dy, dw, part, g, splits);                                 \
    }                                                                                          \
    extern "C" __global__ void conv_bwd_weight_reduce_##sfx(const float* part, T* dw, int nw,  \
                                                            int splits) {                      \
        conv_bwd_weight_reduce<T>(part, dw, nw, splits);                                       \
    }                                                                                          \
    extern "C" __global__ void swap01_##sfx(const T* src, T* dst, int a, int b, int P,         \
                                            int ld) {                                          \
        swap01<T>(src, dst, a, b, P, ld);                                                      \
    }                                                                                          \
    extern "C" __global__ void pool2d_##sfx(const T* x, T* y, int planes, int h, int w,        \
                                            int ho, int wo, int kh, int kw, int sh, int sw,    \
                                            int ph, int pw, int is_max) {                      \
        pool2d<T>(x, y, planes, h, w, ho, wo, kh, kw, sh, sw, ph, pw, is_max);                 \
    }                                                                                          \
    extern "C" __global__ void maxpool2d_bwd_tiled_##sfx(const T* x, const T* dy, T* dx,      \
                                                         int planes, int h, int w, int ho,     \
                                                         int wo, int kh, int kw) {             \
        maxpool2d_bwd_tiled<T>(x, dy, dx, planes, h, w, ho, wo, kh, kw);                       \
    }                                                                                          \
    extern "C" __global__ void maxpool2d_bwd_##sfx(const T* x, const T* dy, T* dx, int planes, \
                                                   int h, int w, int ho, int wo, int kh,       \
                                                   int kw, int sh, int sw, int ph, int pw) {   \
        maxpool2d_bwd<T>(x, dy, dx, planes, h, w, ho, wo, kh, kw, sh, sw, ph, pw);             \
    }                                                                                          \
    extern "C" __global__ void pool_argmax_##sfx(const T* x, int* idx, int planes, int h,      \
                                                 int w, int ho, int wo, int kh, int kw,        \
                                                 int sh, int sw, int ph, int pw) {             \
        pool_argmax<T>(x, idx, planes, h, w, ho, wo, kh, kw, sh, sw, ph, pw);                  \
    }                                                                                          \
    extern "C" __global__ void maxpool2d_bwd_idx_##sfx(const int* idx, const T* dy, T* dx,     \
                                                       int planes, int h, int w, int ho,       \
                                                       int wo, int kh, int kw, int sh, int sw, \
                                                       int ph, int pw) {                       \
        maxpool2d_bwd_idx<T>(idx, dy, dx, planes, h, w, ho, wo, kh, kw, sh, sw, ph, pw);       \
    }
RLX_FLOAT_TYPES(VISION_FLOAT)

#define VISION_BYTES(sfx, T)                                                                   \
    extern "C" __global__ void resize_nearest2x_##sfx(const T* x, T* y, int planes, int h,     \
                                                      int w) {                                 \
        resize_nearest2x<T>(x, y, planes, h, w);                                               \
    }
VISION_BYTES(b1, unsigned char)
VISION_BYTES(b2, unsigned short)
VISION_BYTES(b4, unsigned int)
VISION_BYTES(b8, unsigned long long)
