//! Shared test support: a seeded RNG (seed printed; set RLX_SEED to replay), tolerance
//! checks against f64 oracles, and a one-call graph runner.
#![allow(dead_code)]
use rlx_ir::{DType, Graph, HostTensor};
use std::time::{SystemTime, UNIX_EPOCH};

/// splitmix64 — small, fast, good enough for test data.
pub struct Rng(u64);

impl Rng {
    /// Fresh seed per run (or `RLX_SEED`), printed so a failure can be replayed.
    pub fn new(test: &str) -> Rng {
        let seed = std::env::var("RLX_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                let t = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64;
                t ^ (test.len() as u64).wrapping_mul(0x9e3779b97f4a7c15)
            });
        println!("[{test}] seed = {seed} (replay with RLX_SEED={seed})");
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }
    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(1e-300);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
    pub fn normals(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.normal()).collect()
    }
    pub fn uniforms(&mut self, n: usize, lo: f64, hi: f64) -> Vec<f64> {
        (0..n).map(|_| self.range(lo, hi)).collect()
    }
    /// Integer in [0, n).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Tolerance of DESIGN.md for a dtype: rel-L2 error bound.
pub fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F16 | DType::BF16 => 1e-2,
        DType::F64 => 1e-12,
        _ => 1e-5,
    }
}

/// ‖got − want‖₂ / max(‖want‖₂, tiny); NaN anywhere gives infinity.
pub fn rel_l2(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(
        got.len(),
        want.len(),
        "length mismatch: got {} want {}",
        got.len(),
        want.len()
    );
    if got.iter().chain(want).any(|v| v.is_nan()) {
        return f64::INFINITY;
    }
    let num: f64 = got.iter().zip(want).map(|(g, w)| (g - w) * (g - w)).sum();
    let den: f64 = want.iter().map(|w| w * w).sum();
    (num / den.max(1e-30)).sqrt()
}

/// Assert `got` matches the f64 oracle within the tolerance of `dtype`.
pub fn assert_close(what: &str, got: &HostTensor, want: &[f64], dtype: DType) {
    let g = got.to_f64_vec();
    let e = rel_l2(&g, want);
    let t = tol(dtype);
    assert!(
        e <= t,
        "{what}: rel-L2 {e:.3e} > {t:.0e} ({dtype}); first values got {:?} want {:?}",
        &g[..g.len().min(6)],
        &want[..want.len().min(6)]
    );
}

/// Round f64 values through a storage dtype (so oracles see what the graph sees).
pub fn through(dtype: DType, v: &[f64]) -> Vec<f64> {
    HostTensor::from_f64_as(&[v.len()], v, dtype).to_f64_vec()
}

/// Run a graph on the CPU with inputs and params given by name.
pub fn run(
    graph: &Graph,
    inputs: &[(&str, HostTensor)],
    params: &[(&str, HostTensor)],
) -> Vec<HostTensor> {
    rlx_cpu::run_graph(graph, params, inputs).unwrap_or_else(|e| panic!("run failed: {e}"))
}
