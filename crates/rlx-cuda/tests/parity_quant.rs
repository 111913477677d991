//! GPU parity: DequantMatMul (every QuantScheme) with big weights from the reference
//! quantiser (the dequantise-then-cuBLASLt path in column chunks). Its per-op cases, the
//! decode GEMV path (M ≤ 8) and the unchunked GEMM, are in the linalg case table
//! (`parity_linalg`).
mod common;
use common::*;
use rlx_cuda::CudaOptions;
use rlx_ir::{DType, Graph, Op, QuantScheme, Shape};
use rlx_testutil::cases::linalg::SCHEMES;

fn dq_graph(xsh: &[usize], n: usize, scheme: QuantScheme, dt: DType) -> Graph {
    let k = xsh[xsh.len() - 1];
    let rb = k / scheme.block_len() * scheme.block_bytes();
    let mut g = Graph::new("dequant_matmul");
    let x = g.input("x", Shape::new(xsh, dt)).unwrap();
    let w = g.input("w", Shape::new(&[n, rb], DType::U8)).unwrap();
    let z = g.dequant_matmul(x, w, scheme).unwrap();
    g.set_outputs(vec![z]);
    g
}

/// `vals` (`[n, k]`) through the reference quantiser as the feed `w`, and its row bytes.
fn packed_weight(scheme: QuantScheme, vals: &[f32], n: usize, k: usize) -> (Feed, usize) {
    let packed = rlx_cpu::quant::quantize(scheme, vals, n, k).unwrap();
    let rb = k / scheme.block_len() * scheme.block_bytes();
    let w = feed(
        "w",
        &[n, rb],
        packed.iter().map(|&b| f64::from(b)).collect(),
    );
    (w, rb)
}

/// One random `[n, k]` matrix through the reference quantiser of every scheme: (scheme, the
/// feed `w`, its row bytes).
fn weights(rng: &mut Rng, n: usize, k: usize) -> Vec<(QuantScheme, Feed, usize)> {
    let vals: Vec<f32> = rng.normals(n * k).iter().map(|&v| v as f32).collect();
    SCHEMES
        .into_iter()
        .map(|scheme| {
            let (w, rb) = packed_weight(scheme, &vals, n, k);
            (scheme, w, rb)
        })
        .collect()
}

#[test]
fn dequant_matmul_quantised_weights_big() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("dequant_matmul_quantised_weights_big");
    // Weights from the reference quantiser; 4500 × 4096 f32 is over the 32 MiB dequant
    // scratch, so the prefill case runs in column chunks.
    let (n, k) = (4500, 4096);
    for (scheme, w, _) in weights(&mut rng, n, k) {
        for (xsh, dt) in [
            (&[1usize, 4096usize][..], DType::F16),
            (&[4, 4096][..], DType::BF16),
            (&[2, 8, 4096][..], DType::F32),
            (&[100, 4096][..], DType::F16),
        ] {
            let feeds = vec![normal(&mut rng, "x", xsh), w.clone()];
            parity(
                &format!("big {scheme:?} x{xsh:?}"),
                &|d| dq_graph(xsh, n, scheme, d),
                &feeds,
                dt,
            );
        }
    }
}

/// FusedDequantMatMul (RMS norm of x before, residual after) against the CPU's composition of
/// the three thunks: the decode GEMV's prologue and epilogue (M ≤ 8) and the prefill path (the
/// norm into a scratch, GEMMs accumulating onto the residual).
#[test]
fn fused_dequant_matmul_norm_and_residual() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("fused_dequant_matmul_norm_and_residual");
    let (n, k) = (300, 512);
    let vals: Vec<f32> = rng.normals(n * k).iter().map(|&v| v as f32).collect();
    for scheme in [
        QuantScheme::Q4_1,
        QuantScheme::Q8_0,
        QuantScheme::Q4_K,
        QuantScheme::Q6_K,
    ] {
        let (w, rb) = packed_weight(scheme, &vals, n, k);
        for m in [1usize, 3, 40] {
            for (norm, residual) in [(true, false), (false, true), (true, true)] {
                for dt in [DType::F32, DType::F16] {
                    let gamma: Vec<f64> = rng.normals(k).iter().map(|v| 1.0 + 0.3 * v).collect();
                    let feeds = vec![
                        normal(&mut rng, "x", &[m, k]),
                        w.clone(),
                        feed("gamma", &[k], gamma),
                        normal(&mut rng, "r", &[m, n]),
                    ];
                    let build = |d: DType| {
                        let mut g = Graph::new("fused_dequant_matmul");
                        let x = g.input("x", Shape::new(&[m, k], d)).unwrap();
                        let wi = g.input("w", Shape::new(&[n, rb], DType::U8)).unwrap();
                        let gi = g.input("gamma", Shape::new(&[k], d)).unwrap();
                        let ri = g.input("r", Shape::new(&[m, n], d)).unwrap();
                        let z = (g.fused_dequant_matmul(
                            x,
                            wi,
                            scheme,
                            norm.then_some((gi, 1e-5)),
                            residual.then_some(ri),
                        ))
                        .unwrap();
                        // Unused inputs still count as read, so every case has one signature.
                        let mut outs = vec![z];
                        if !norm {
                            outs.push(gi);
                        }
                        if !residual {
                            outs.push(ri);
                        }
                        g.set_outputs(outs);
                        g
                    };
                    let what = format!("{scheme:?} m={m} norm={norm} residual={residual}");
                    parity(&what, &build, &feeds, dt);
                }
            }
        }
    }
}

/// The decode GEMV's launch candidates (forced one by one: the staged kernel's lanes-per-column
/// × warps shapes, grids and register depths, then the warp-per-column kernel's two) and the prefill
/// path, for every scheme, with each fusion around the product: the RMS norm of x, the SwiGLU
/// of x's halves (either order) and the residual. A variant index past a candidate list runs
/// its last entry (a SwiGLU product has no warp-per-column candidate).
#[test]
fn fused_dequant_matmul_every_gemv_variant_and_swiglu() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("fused_dequant_matmul_every_gemv_variant_and_swiglu");
    let (n, k) = (200, 512);
    for (scheme, w, rb) in weights(&mut rng, n, k) {
        // M = 1 has the most candidates (shapes × grids × register depths): the first 24.
        for (m, variants) in [(1usize, 24usize), (3, 8), (40, 1)] {
            for (norm, glu, residual) in [
                (true, None, false),
                (false, Some(true), true),
                (false, Some(false), false),
                (false, None, true),
            ] {
                let xk = if glu.is_some() { 2 * k } else { k };
                let gamma: Vec<f64> = rng.normals(k).iter().map(|v| 1.0 + 0.3 * v).collect();
                let feeds = vec![
                    normal(&mut rng, "x", &[m, xk]),
                    w.clone(),
                    feed("gamma", &[k], gamma),
                    normal(&mut rng, "r", &[m, n]),
                ];
                let build = |d: DType| {
                    let mut g = Graph::new("fused_dequant_matmul");
                    let x = g.input("x", Shape::new(&[m, xk], d)).unwrap();
                    let wi = g.input("w", Shape::new(&[n, rb], DType::U8)).unwrap();
                    let gi = g.input("gamma", Shape::new(&[k], d)).unwrap();
                    let ri = g.input("r", Shape::new(&[m, n], d)).unwrap();
                    let mut ins = vec![x, wi];
                    if norm {
                        ins.push(gi);
                    }
                    if residual {
                        ins.push(ri);
                    }
                    let op = Op::FusedDequantMatMul {
                        scheme,
                        norm_eps: norm.then_some(1e-5),
                        residual,
                        glu,
                    };
                    let z = g.add_node(op, &ins).unwrap();
                    g.set_outputs(vec![z, gi, ri]);
                    g
                };
                for variant in 0..variants {
                    let what = format!(
                        "{scheme:?} m={m} norm={norm} glu={glu:?} residual={residual} variant {variant}"
                    );
                    let opts = CudaOptions {
                        force_variant: Some(variant),
                        ..CudaOptions::strict()
                    };
                    parity_with(&what, &build, &feeds, DType::F32, opts, OpKindSet::empty());
                }
                for dt in [DType::F16, DType::BF16] {
                    let what = format!("{scheme:?} m={m} norm={norm} glu={glu:?} {dt} tuned");
                    parity(&what, &build, &feeds, dt);
                }
            }
        }
    }
}

/// Under a half precision policy a prefill-size product (M > 8) decodes the whole weight to
/// the policy's dtype once and multiplies on tensor cores with x rounded to it, as for a half
/// weight: the half tolerance against the f32 CPU and f64, for every scheme.
#[test]
fn dequant_matmul_prefill_under_half_policies() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("dequant_matmul_prefill_under_half_policies");
    let (n, k) = (320, 512);
    let xsh = [2usize, 24, 512];
    for (scheme, w, _) in weights(&mut rng, n, k) {
        for precision in [rlx_cuda::Precision::F16, rlx_cuda::Precision::Bf16] {
            let opts = CudaOptions {
                precision,
                ..CudaOptions::strict()
            };
            let feeds = vec![normal(&mut rng, "x", &xsh), w.clone()];
            parity_with(
                &format!("{precision} policy {scheme:?}"),
                &|d| dq_graph(&xsh, n, scheme, d),
                &feeds,
                DType::F32,
                opts,
                OpKindSet::empty(),
            );
        }
    }
}

/// Weights held as params in the planar row layout (`CudaOptions::planar`, `RLX_PLANAR=1`):
/// every planar scheme through the decode GEMV's candidates, a few rows and the prefill
/// path, against the CPU; the param is really held planar and reads back as its GGUF bytes
/// (the harness compares every param after the run).
#[test]
fn dequant_matmul_planar_params() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("dequant_matmul_planar_params");
    let (n, k) = (320, 512);
    for (scheme, w, rb) in weights(&mut rng, n, k) {
        if !rlx_cuda::planar::eligible(scheme, rb) {
            continue;
        }
        for (m, variants) in [(1usize, 24usize), (3, 8), (40, 1)] {
            let xsh = [m, k];
            let build = |d: DType| {
                let mut g = Graph::new("planar");
                let x = g.input("x", Shape::new(&xsh, d)).unwrap();
                let wp = g.param("w", Shape::new(&[n, rb], DType::U8)).unwrap();
                let z = g.dequant_matmul(x, wp, scheme).unwrap();
                g.set_outputs(vec![z]);
                g
            };
            let feeds = vec![normal(&mut rng, "x", &xsh), w.clone()];
            for variant in 0..variants {
                let opts = CudaOptions {
                    planar: true,
                    force_variant: Some(variant),
                    ..CudaOptions::strict()
                };
                let exe = compile_gpu(&build(DType::F32), opts.clone());
                assert_eq!(
                    exe.planar_params(),
                    ["w"],
                    "{scheme:?}: the weight is not held planar"
                );
                let what = format!("{scheme:?} planar m={m} variant {variant}");
                parity_with(&what, &build, &feeds, DType::F32, opts, OpKindSet::empty());
            }
        }
    }
}
