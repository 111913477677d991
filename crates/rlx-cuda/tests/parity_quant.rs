//! GPU parity: DequantMatMul (Q8_0, Q4_0, Q4_1) in the decode GEMV path (M ≤ 8) and the
//! dequantise-then-cuBLASLt path (chunked for large weights).
mod common;
use common::*;
use rlx_ir::{DType, Graph, QuantScheme, Shape};

const SCHEMES: [QuantScheme; 3] = [QuantScheme::Q8_0, QuantScheme::Q4_0, QuantScheme::Q4_1];

fn f16_bytes(v: f64) -> [u8; 2] {
    half::f16::from_f64(v).to_bits().to_le_bytes()
}

/// Random blocks for a `[rows, cols]` weight: random scales (and mins), random quants.
fn random_packed(rng: &mut Rng, scheme: QuantScheme, rows: usize, cols: usize) -> Vec<f64> {
    let mut out: Vec<u8> = vec![];
    for _ in 0..rows * cols / 32 {
        out.extend(f16_bytes(rng.range(0.01, 0.2)));
        match scheme {
            QuantScheme::Q8_0 => out.extend((0..32).map(|_| rng.below(256) as u8)),
            QuantScheme::Q4_0 => out.extend((0..16).map(|_| rng.below(256) as u8)),
            QuantScheme::Q4_1 => {
                out.extend(f16_bytes(rng.range(-1.0, 1.0)));
                out.extend((0..16).map(|_| rng.below(256) as u8));
            }
        }
    }
    out.into_iter().map(f64::from).collect()
}

fn dq_graph(xsh: &[usize], n: usize, scheme: QuantScheme, dt: DType) -> Graph {
    let k = xsh[xsh.len() - 1];
    let rb = k / 32 * scheme.block_bytes();
    let mut g = Graph::new("dequant_matmul");
    let x = g.input("x", Shape::new(xsh, dt)).unwrap();
    let w = g.input("w", Shape::new(&[n, rb], DType::U8)).unwrap();
    let z = g.dequant_matmul(x, w, scheme).unwrap();
    g.set_outputs(vec![z]);
    g
}

fn run_cases(test: &str, cases: &[(&[usize], usize)]) {
    let mut rng = Rng::new(test);
    for scheme in SCHEMES {
        for &(xsh, n) in cases {
            let k = xsh[xsh.len() - 1];
            let rb = k / 32 * scheme.block_bytes();
            for dt in FLOATS {
                let feeds = vec![
                    normal(&mut rng, "x", xsh),
                    feed("w", &[n, rb], random_packed(&mut rng, scheme, n, k)),
                ];
                parity(
                    &format!("{test} {scheme:?} x{xsh:?} n={n}"),
                    &|d| dq_graph(xsh, n, scheme, d),
                    &feeds,
                    dt,
                );
            }
        }
    }
}

#[test]
fn dequant_matmul_decode_gemv() {
    if !common::gpu() {
        return;
    }
    run_cases(
        "dequant_matmul_decode_gemv",
        &[
            (&[1, 32 * 7], 33),
            (&[3, 32 * 33], 129),
            (&[32 * 7], 5),
            (&[2, 4, 32 * 33], 1),
            (&[1, 32], 1001),
        ],
    );
}

#[test]
fn dequant_matmul_prefill_gemm() {
    if !common::gpu() {
        return;
    }
    run_cases(
        "dequant_matmul_prefill_gemm",
        &[
            (&[64, 32 * 7], 33),
            (&[64, 32 * 33], 129),
            (&[3, 5, 32 * 33], 7),
            (&[9, 32], 1),
        ],
    );
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
        let rb = k / 32 * scheme.block_bytes();
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
