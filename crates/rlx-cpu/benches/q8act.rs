//! `cargo bench -p rlx-cpu --bench q8act [SCHEME…]`: the products with a quantised weight
//! under `QuantAct::Q8` (x quantised to 8 bits, integer block dots; `quant::matmul_q8`)
//! against the f32 ones (`ops::linalg::dequant_matmul`: packed rows walked once at M ≤ 8,
//! dequantised tiles and a GEMM above), at SmolLM2-135M's shapes, for decode (M = 1) and a
//! 128-token prefill. Prints the fastest call of about 0.3 s each and GB/s of packed weight.
use rlx_cpu::ops::linalg::dequant_matmul;
use rlx_cpu::quant::{matmul_q8_with, quantize, Q8Kernel};
use rlx_cpu::{Buf, BufMut, OutView, TensorView};
use rlx_ir::{DType, QuantScheme};
use std::time::{Duration, Instant};

fn time(mut f: impl FnMut(), budget: Duration) -> f64 {
    f();
    let mut best = f64::INFINITY;
    let (start, mut n) = (Instant::now(), 0);
    while start.elapsed() < budget || n < 5 {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
        n += 1;
    }
    best
}

fn main() {
    let budget = Duration::from_millis(300);
    let want: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    println!(
        "threads: {}, q8 kernels: {}",
        rayon::current_num_threads(),
        Q8Kernel::best_name()
    );
    println!(
        "{:<6} {:>4} {:>5} {:>6} {:>10} {:>10} {:>10} {:>8} {:>9}",
        "scheme", "M", "K", "N", "f32 µs", "q8 µs", "q8-port µs", "speedup", "q8 GB/s"
    );
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        ((seed >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    };
    for scheme in QuantScheme::ALL {
        if scheme.is_half() || !(want.is_empty() || want.contains(&format!("{scheme:?}"))) {
            continue;
        }
        let kq = scheme.block_len() == 256;
        let shapes: &[(usize, usize)] = if kq {
            &[(768, 768), (768, 2048), (2048, 768)]
        } else {
            &[
                (576, 576),
                (576, 1536),
                (1536, 576),
                (576, 49152),
                (1536, 32768),
            ]
        };
        for &(k, n) in shapes {
            let vals: Vec<f32> = (0..n * k).map(|_| next() * 0.2).collect();
            let w = quantize(scheme, &vals, n, k).expect("quantise");
            for m in [1usize, 128] {
                if m > 1 && std::env::var_os("Q8_DECODE_ONLY").is_some() {
                    continue;
                }
                let x: Vec<f32> = (0..m * k).map(|_| next()).collect();
                let mut out = vec![0f32; m * n];
                let (xs, ws, os) = ([m, k], [n, w.len() / n], [m, n]);
                let f32_path = |out: &mut [f32]| {
                    let ins = [
                        TensorView {
                            shape: &xs,
                            dtype: DType::F32,
                            data: Buf::F32(&x),
                        },
                        TensorView {
                            shape: &ws,
                            dtype: DType::U8,
                            data: Buf::U8(&w),
                        },
                    ];
                    let ov = OutView {
                        shape: &os,
                        dtype: DType::F32,
                        data: BufMut::F32(out),
                    };
                    dequant_matmul(scheme, &ins, ov).expect("f32 path");
                };
                let tf = time(|| f32_path(&mut out), budget);
                let q8 = |kern, out: &mut [f32]| {
                    matmul_q8_with(kern, scheme, &w, n, k, &x, out).expect("q8 path")
                };
                let tq = time(|| q8(Q8Kernel::Best, &mut out), budget);
                let tp = time(|| q8(Q8Kernel::Portable, &mut out), budget);
                println!(
                    "{:<6} {:>4} {:>5} {:>6} {:>10.1} {:>10.1} {:>10.1} {:>7.2}x {:>9.2}",
                    format!("{scheme:?}"),
                    m,
                    k,
                    n,
                    tf * 1e6,
                    tq * 1e6,
                    tp * 1e6,
                    tf / tq,
                    w.len() as f64 / 1e9 / tq
                );
            }
        }
    }
}
