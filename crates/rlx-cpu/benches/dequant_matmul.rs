//! `cargo bench -p rlx-cpu --bench dequant_matmul`: DequantMatMul at decode shape (M = 1)
//! for every scheme, the old path (weight held one byte per i64, dequantised 64-row tiles
//! and a GEMM) against the new one (weight held as bytes, each packed row walked once).
//! Prints time per call and GB/s of packed weight read. K = 576 (SmolLM2-135M's width) for
//! the 32-value formats; the K-quants need a multiple of 256, so they use K = 768. Each
//! cell runs for about 0.3 s and reports its fastest call: on a machine shared with other
//! work the fastest call is the one least disturbed, the median mostly measures the others.
use rlx_cpu::ops::linalg::{dequant_matmul, dequant_matmul_tiled};
use rlx_cpu::{Buf, BufMut, OutView, TensorView};
use rlx_ir::{DType, QuantScheme};
use std::time::{Duration, Instant};

/// The fastest call of `f` in seconds, over calls filling about `budget`.
fn time(mut f: impl FnMut(), budget: Duration) -> f64 {
    f();
    let mut samples = vec![];
    let start = Instant::now();
    while start.elapsed() < budget || samples.len() < 5 {
        let t = Instant::now();
        f();
        samples.push(t.elapsed().as_secs_f64());
    }
    samples.into_iter().fold(f64::INFINITY, f64::min)
}

fn main() {
    let budget = Duration::from_millis(300);
    println!(
        "threads: {}  (M = 1; GB/s = packed weight bytes / time)",
        rayon::current_num_threads()
    );
    println!(
        "{:<6} {:>5} {:>6} {:>7} {:>10} {:>9} {:>9} {:>9} {:>8} {:>10}",
        "scheme",
        "K",
        "N",
        "MB",
        "old µs",
        "old GB/s",
        "new µs",
        "new GB/s",
        "speedup",
        "1-thr GB/s"
    );
    // The new path on one thread: per-core throughput, less disturbed by neighbours.
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a one-thread pool");
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for scheme in QuantScheme::ALL {
        let k = if scheme.block_len() == 256 { 768 } else { 576 };
        for n in [576usize, 1536, 49152] {
            // Real-looking weights (quantised normals), so the scales are sane.
            let vals: Vec<f32> = (0..n * k)
                .map(|_| ((next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.2)
                .collect();
            let w = rlx_cpu::quant::quantize(scheme, &vals, n, k).expect("quantise");
            let wi: Vec<i64> = w.iter().map(|&b| b as i64).collect();
            let x: Vec<f32> = (0..k)
                .map(|_| (next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
                .collect();
            let rb = w.len() / n;
            let (xs, ws, os) = ([1, k], [n, rb], [1, n]);
            let mut out = vec![0f32; n];
            let call = |data: Buf, tiled: bool, out: &mut [f32]| {
                let ins = [
                    TensorView {
                        shape: &xs,
                        dtype: DType::F32,
                        data: Buf::F32(&x),
                    },
                    TensorView {
                        shape: &ws,
                        dtype: DType::U8,
                        data,
                    },
                ];
                let ov = OutView {
                    shape: &os,
                    dtype: DType::F32,
                    data: BufMut::F32(out),
                };
                if tiled {
                    dequant_matmul_tiled(scheme, &ins, ov).expect("old path");
                } else {
                    dequant_matmul(scheme, &ins, ov).expect("new path");
                }
            };
            let old = time(|| call(Buf::I64(&wi), true, &mut out), budget);
            let want = out.clone();
            let new1 = one.install(|| time(|| call(Buf::U8(&w), false, &mut out), budget));
            let new = time(|| call(Buf::U8(&w), false, &mut out), budget);
            let err = out
                .iter()
                .zip(&want)
                .map(|(a, b)| ((a - b) as f64).powi(2))
                .sum::<f64>()
                .sqrt()
                / want.iter().map(|&b| (b as f64).powi(2)).sum::<f64>().sqrt();
            assert!(err < 1e-4, "{scheme:?} N {n}: paths differ, rel-L2 {err}");
            let mb = w.len() as f64 / 1e6;
            println!(
                "{:<6} {:>5} {:>6} {:>7.2} {:>10.1} {:>9.2} {:>9.1} {:>9.2} {:>7.1}x {:>10.2}",
                format!("{scheme:?}"),
                k,
                n,
                mb,
                old * 1e6,
                mb / 1e3 / old,
                new * 1e6,
                mb / 1e3 / new,
                old / new,
                mb / 1e3 / new1
            );
        }
    }
}
