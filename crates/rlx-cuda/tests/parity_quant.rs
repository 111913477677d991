//! GPU parity: DequantMatMul (every QuantScheme) with big weights from the reference
//! quantiser (the dequantise-then-cuBLASLt path in column chunks). Its per-op cases, the
//! decode GEMV path (M ≤ 8) and the unchunked GEMM, are in the linalg case table
//! (`parity_linalg`).
mod common;
use common::*;
use rlx_ir::{DType, Graph, QuantScheme, Shape};
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

#[test]
fn dequant_matmul_quantised_weights_big() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("dequant_matmul_quantised_weights_big");
    // Weights from the reference quantiser; 4500 × 4096 f32 is over the 32 MiB dequant
    // scratch, so the prefill case runs in column chunks.
    let (n, k) = (4500, 4096);
    let vals: Vec<f32> = rng.normals(n * k).iter().map(|&v| v as f32).collect();
    for scheme in SCHEMES {
        let packed = rlx_cpu::quant::quantize(scheme, &vals, n, k).unwrap();
        let rb = k / scheme.block_len() * scheme.block_bytes();
        let w = feed(
            "w",
            &[n, rb],
            packed.iter().map(|&b| f64::from(b)).collect(),
        );
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
