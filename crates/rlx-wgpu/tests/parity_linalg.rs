//! wgpu parity of the linalg group (rlx-testutil's case table: MatMul, FusedMatMulBiasAct,
//! DequantMatMul and Dequantize for every scheme) against the CPU reference and the f64
//! oracle, plus FusedDequantMatMul's fusions (norm, SwiGLU, residual), which no case table
//! holds.
mod common;
use common::*;

rlx_testutil::case_tests!(linalg, wgpu);

use rlx_ir::{DType, Graph, Op, QuantScheme, Shape};

/// FusedDequantMatMul for every scheme: the GEMV (m = 1, 3) and the tiled product (m = 40),
/// each with the RMS norm of x, the SwiGLU of x's halves (either order) and the residual.
#[test]
fn fused_dequant_matmul() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("wgpu fused_dequant_matmul");
    let n = 37;
    for scheme in QuantScheme::ALL {
        let k = 2 * scheme.block_len();
        let vals: Vec<f32> = rng.normals(n * k).iter().map(|&v| v as f32).collect();
        let packed = rlx_cpu::quant::quantize(scheme, &vals, n, k).unwrap();
        let rb = k / scheme.block_len() * scheme.block_bytes();
        let w = feed(
            "w",
            &[n, rb],
            packed.iter().map(|&b| f64::from(b)).collect(),
        );
        for m in [1usize, 3, 40] {
            for (norm, glu, residual) in [
                (true, None, false),
                (true, None, true),
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
                for dt in FLOATS {
                    let what = format!("{scheme:?} m={m} norm={norm} glu={glu:?} res={residual}");
                    parity(&what, &build, &feeds, dt);
                }
            }
        }
    }
}

/// `gelu(a @ b + bias)` as one FusedMatMulBiasAct, a `[m, k]`, b `[k, n]`.
fn bias_gelu(d: DType, (m, k, n): (usize, usize, usize)) -> Graph {
    let mut g = Graph::new("matmul_bias_gelu");
    let a = g.input("a", Shape::new(&[m, k], d)).unwrap();
    let b = g.input("b", Shape::new(&[k, n], d)).unwrap();
    let c = g.input("bias", Shape::new(&[n], d)).unwrap();
    let op = Op::FusedMatMulBiasAct {
        activation: Some(rlx_ir::Activation::Gelu),
    };
    let y = g.add_node(op, &[a, b, c]).unwrap();
    g.set_outputs(vec![y]);
    g
}

/// Products with enough tiles for the 128-wide register-blocked GEMM (the case tables'
/// small shapes all take the 64-wide one): a batched MatMul with ragged edges (m, n, k not
/// multiples of the tile or the K slice), a bias + GELU epilogue, and a packed Q8_0 weight.
#[test]
fn large_tile_products() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("wgpu large_tile_products");
    let (nb, m, k, n) = (64, 129, 37, 130);
    let feeds = vec![
        normal(&mut rng, "a", &[nb, m, k]),
        normal(&mut rng, "b", &[nb, k, n]),
    ];
    let build = |d: DType| {
        let mut g = Graph::new("batched_matmul");
        let a = g.input("a", Shape::new(&[nb, m, k], d)).unwrap();
        let b = g.input("b", Shape::new(&[nb, k, n], d)).unwrap();
        let y = g.add_node(Op::MatMul, &[a, b]).unwrap();
        g.set_outputs(vec![y]);
        g
    };
    for dt in FLOATS {
        parity("batched matmul, large tiles", &build, &feeds, dt);
    }
    let (m, k, n) = (2051, 40, 2050);
    let feeds = vec![
        normal(&mut rng, "a", &[m, k]),
        normal(&mut rng, "b", &[k, n]),
        normal(&mut rng, "bias", &[n]),
    ];
    let build = |d: DType| bias_gelu(d, (m, k, n));
    parity(
        "matmul + bias + gelu, large tiles",
        &build,
        &feeds,
        DType::F32,
    );
    let scheme = QuantScheme::Q8_0;
    let k = 2 * scheme.block_len();
    let vals: Vec<f32> = rng.normals(n * k).iter().map(|&v| v as f32).collect();
    let packed = rlx_cpu::quant::quantize(scheme, &vals, n, k).unwrap();
    let rb = k / scheme.block_len() * scheme.block_bytes();
    let feeds = vec![
        normal(&mut rng, "x", &[m, k]),
        feed(
            "w",
            &[n, rb],
            packed.iter().map(|&b| f64::from(b)).collect(),
        ),
    ];
    let build = |d: DType| {
        let mut g = Graph::new("dequant_matmul_large");
        let x = g.input("x", Shape::new(&[m, k], d)).unwrap();
        let w = g.input("w", Shape::new(&[n, rb], DType::U8)).unwrap();
        let y = g.add_node(Op::DequantMatMul { scheme }, &[x, w]).unwrap();
        g.set_outputs(vec![y, w]);
        g
    };
    parity(
        "Q8_0 dequant matmul, large tiles",
        &build,
        &feeds,
        DType::F32,
    );
}

/// Few output tiles over a long K take the split-K GEMM (partials summed in order by a
/// second kernel, which also applies the epilogue): a bias + GELU product with K not a
/// multiple of the slice, and a batched one whose B broadcasts over the batch.
#[test]
fn split_k_products() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("wgpu split_k_products");
    let (m, k, n) = (33, 1000, 45);
    let feeds = vec![
        normal(&mut rng, "a", &[m, k]),
        normal(&mut rng, "b", &[k, n]),
        normal(&mut rng, "bias", &[n]),
    ];
    let build = |d: DType| bias_gelu(d, (m, k, n));
    for dt in FLOATS {
        parity("split-K matmul + bias + gelu", &build, &feeds, dt);
    }
    let (nb, m, k, n) = (3, 70, 300, 20);
    let feeds = vec![
        normal(&mut rng, "a", &[nb, m, k]),
        normal(&mut rng, "b", &[k, n]),
    ];
    let build = |d: DType| {
        let mut g = Graph::new("split_k_batched");
        let a = g.input("a", Shape::new(&[nb, m, k], d)).unwrap();
        let b = g.input("b", Shape::new(&[k, n], d)).unwrap();
        let y = g.add_node(Op::MatMul, &[a, b]).unwrap();
        g.set_outputs(vec![y]);
        g
    };
    for dt in FLOATS {
        parity("split-K batched matmul", &build, &feeds, dt);
    }
}
