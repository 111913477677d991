//! GPU parity of the vision group: the per-op cases (Conv on the direct and im2col + GEMM
//! routes, groups, depthwise, 1×1, the 1-D form, chunked; its input and weight gradients;
//! Max / Avg pooling; the max-pool gradient; nearest 2× upsampling) come from
//! rlx-testutil's case table, against the CPU in the same dtype and in f64; below them the
//! NaN rule of max pooling.
mod common;
use common::*;
use rlx_ir::{PoolKind, PoolSpec};
use rlx_testutil::cases::vision::{grid_values, max_pool_backward_graph, pool_graph};

rlx_testutil::case_tests!(vision, cuda);

/// A NaN wins its window (forward) and takes the window's gradient (backward).
#[test]
fn max_pool_nan() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("max_pool_nan");
    let x = [1, 2, 6, 6];
    let mut v = grid_values(&mut rng, x.iter().product());
    v[7] = f64::NAN;
    v[50] = f64::NAN;
    let xs = feed("x", &x, v);
    let spec = |k, s, p| PoolSpec {
        kind: PoolKind::Max,
        kernel_size: k,
        stride: s,
        padding: p,
    };
    // Overlapping windows (gather) and windows that tile the plane (one thread per window).
    for (spec, yd) in [
        (spec([3, 3], [1, 1], [1, 1]), [1, 2, 6, 6]),
        (spec([2, 2], [2, 2], [0, 0]), [1, 2, 3, 3]),
    ] {
        let dy = normal(&mut rng, "dy", &yd);
        for dtype in FLOATS {
            let g = pool_graph(dtype, &x, spec, true);
            let mut exe = compile_gpu(&g, rlx_cuda::CudaOptions::strict());
            let got = run_gpu_exe(&mut exe, &g, std::slice::from_ref(&xs));
            let want = run_cpu(&g, std::slice::from_ref(&xs));
            for (a, b) in got.iter().zip(&want) {
                let (a, b) = (a.to_f64_vec(), b.to_f64_vec());
                for (i, (p, q)) in a.iter().zip(&b).enumerate() {
                    assert!(
                        (p.is_nan() && q.is_nan()) || p == q,
                        "max pool NaN [{dtype}] element {i}: {p} vs {q}"
                    );
                }
            }
            parity(
                "max pool backward NaN",
                &|d| max_pool_backward_graph(d, &x, spec),
                &[xs.clone(), dy.clone()],
                dtype,
            );
        }
    }
}
