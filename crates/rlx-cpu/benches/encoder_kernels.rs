//! `cargo bench -p rlx-cpu --bench encoder_kernels`: the CPU kernels of a MiniLM-shaped
//! encoder layer (hidden 384, FFN 1536, 12 heads of 32, S = 128) at batch 1 and 32 —
//! the MatMul thunk, Attention (no mask and a Custom keep-mask) and exact f32 GELU (the
//! vectorised rational erf against the scalar f64 erfc it replaced). Each cell reports its
//! fastest call over about 0.3 s (on a shared machine the fastest call is the least
//! disturbed), on one thread and on all of them.
use rlx_cpu::ops::attention::attention;
use rlx_cpu::ops::linalg::matmul;
use rlx_cpu::ops::scalar::gelu_f32_in_place;
use rlx_cpu::{Buf, BufMut, OutView, TensorView};
use rlx_ir::{AttentionSpec, DType, MaskKind};
use std::time::{Duration, Instant};

/// The fastest call of `f` in seconds, over calls filling about `budget`.
fn time(mut f: impl FnMut(), budget: Duration) -> f64 {
    f();
    let mut best = f64::INFINITY;
    let start = Instant::now();
    let mut n = 0;
    while start.elapsed() < budget || n < 5 {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
        n += 1;
    }
    best
}

fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect()
}

fn f32_in<'a>(shape: &'a [usize], v: &'a [f32]) -> TensorView<'a> {
    TensorView {
        shape,
        dtype: DType::F32,
        data: Buf::F32(v),
    }
}

fn f32_out<'a>(shape: &'a [usize], v: &'a mut [f32]) -> OutView<'a> {
    OutView {
        shape,
        dtype: DType::F32,
        data: BufMut::F32(v),
    }
}

/// Runs `f` on one thread and on all, printing both rates of `flop` per call.
fn row(label: &str, flop: f64, one: &rayon::ThreadPool, mut f: impl FnMut() + Send) {
    let budget = Duration::from_millis(300);
    let t1 = one.install(|| time(&mut f, budget));
    let tn = time(&mut f, budget);
    println!(
        "{label:<34} {:>9.3} {:>8.1} {:>9.3} {:>8.1}",
        t1 * 1e3,
        flop / t1 / 1e9,
        tn * 1e3,
        flop / tn / 1e9
    );
}

fn main() {
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a one-thread pool");
    println!(
        "{:<34} {:>9} {:>8} {:>9} {:>8}   (threads: {})",
        "kernel",
        "1-thr ms",
        "GFLOP/s",
        "all ms",
        "GFLOP/s",
        rayon::current_num_threads()
    );
    for b in [1usize, 32] {
        let m = b * 128;
        for (k, n) in [(384usize, 384usize), (384, 1536), (1536, 384)] {
            let (a, w) = (values(m * k, 1), values(k * n, 2));
            let mut o = vec![0f32; m * n];
            let (sa, sw, so) = ([m, k], [k, n], [m, n]);
            row(
                &format!("matmul {m}x{k}x{n}"),
                2.0 * (m * n * k) as f64,
                &one,
                || {
                    let ins = [f32_in(&sa, &a), f32_in(&sw, &w)];
                    matmul(&ins, f32_out(&so, &mut o)).expect("matmul");
                },
            );
        }
        let (h, d, s) = (12usize, 32usize, 128usize);
        let qkv: Vec<Vec<f32>> = (0..3).map(|i| values(b * s * h * d, 3 + i)).collect();
        let sh = [b, s, h * d];
        // Every row keeps its first 100 keys: the padded-batch mask of a sentence embedder.
        let keep: Vec<f32> = (0..b * s).map(|i| (i % s < 100) as u8 as f32).collect();
        let sm = [b, s];
        let mut o = vec![0f32; b * s * h * d];
        let flop = 4.0 * (b * h * s * s * d) as f64;
        for mask in [MaskKind::None, MaskKind::Custom] {
            let mut spec = AttentionSpec::new(h, d);
            spec.mask_kind = mask;
            row(
                &format!("attention {b}x{h}x{s}x{d} {mask:?}"),
                flop,
                &one,
                || {
                    let mut ins = vec![
                        f32_in(&sh, &qkv[0]),
                        f32_in(&sh, &qkv[1]),
                        f32_in(&sh, &qkv[2]),
                    ];
                    if mask == MaskKind::Custom {
                        ins.push(f32_in(&sm, &keep));
                    }
                    attention(&spec, &ins, f32_out(&sh, &mut o)).expect("attention");
                },
            );
        }
        // GELU rates are in G values/s.
        let x: Vec<f32> = values(m * 1536, 9).iter().map(|v| v * 12.0).collect();
        let mut y = x.clone();
        row(
            &format!("gelu f32 rational, {m}x1536"),
            x.len() as f64,
            &one,
            || {
                y.copy_from_slice(&x);
                gelu_f32_in_place(&mut y);
            },
        );
        row(
            &format!("gelu f64 erfc scalar, {m}x1536"),
            x.len() as f64,
            &one,
            || {
                for (y, &v) in y.iter_mut().zip(&x) {
                    let v = v as f64;
                    *y = (0.5 * v * libm::erfc(-v / std::f64::consts::SQRT_2)) as f32;
                }
            },
        );
    }
}
