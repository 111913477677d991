//! Test support shared by every rlx crate's tests: a seeded RNG whose seed is printed (set
//! `RLX_SEED` to replay a failure), the rel-L2 measure the tolerances of DESIGN.md use, and
//! the per-op case tables (`cases`) with their runners (`run`): one list of cases per op
//! group drives the CPU-vs-f64-oracle, device-parity and gradcheck checks through
//! `case_tests!`.
use rlx_ir::env::{self, Switch};
use rlx_ir::rng::{SplitMix64, GOLDEN_GAMMA};
use std::time::{SystemTime, UNIX_EPOCH};

pub mod case;
pub mod cases;
pub mod run;

/// Test data from rlx's one SplitMix64 (`rlx_ir::SplitMix64`), seeded fresh per run.
pub struct Rng(SplitMix64);

impl Rng {
    /// A fresh seed per run (or `RLX_SEED`), printed so a failure can be replayed.
    pub fn new(test: &str) -> Rng {
        let seed = env::number(Switch::Seed).unwrap_or_else(|| {
            let t = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            t ^ (test.len() as u64).wrapping_mul(GOLDEN_GAMMA)
        });
        println!("[{test}] seed = {seed} (replay with RLX_SEED={seed})");
        Rng(SplitMix64::new(seed))
    }

    /// A fixed seed (for data that must be the same every run, e.g. a training split).
    pub fn seeded(seed: u64) -> Rng {
        Rng(SplitMix64::new(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        self.0.unit_f64()
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        self.0.range(lo, hi)
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        self.0.normal()
    }

    pub fn normals(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.normal()).collect()
    }

    pub fn uniforms(&mut self, n: usize, lo: f64, hi: f64) -> Vec<f64> {
        (0..n).map(|_| self.range(lo, hi)).collect()
    }

    /// Normals pushed at least `gap` away from 0 (keeps finite differences off kinks).
    pub fn normals_away(&mut self, n: usize, gap: f64) -> Vec<f64> {
        (0..n)
            .map(|_| {
                let v = self.normal();
                if v.abs() < gap {
                    v.signum() * gap + v
                } else {
                    v
                }
            })
            .collect()
    }

    /// Integer in [0, n) (0 when n is 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.0.below(n)
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.uniform() < p
    }

    pub fn pick<T: Clone>(&mut self, v: &[T]) -> T {
        v[self.below(v.len())].clone()
    }
}

/// ‖got − want‖₂ / max(‖want‖₂, tiny); NaN anywhere gives infinity (NaN never passes).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rel_l2_measures_and_rejects_nan() {
        assert_eq!(rel_l2(&[1.0, 2.0], &[1.0, 2.0]), 0.0);
        let e = rel_l2(&[1.0, 2.0 + 1e-3], &[1.0, 2.0]);
        assert!((e - 1e-3 / 5f64.sqrt()).abs() < 1e-12);
        assert!(rel_l2(&[f64::NAN], &[1.0]).is_infinite());
    }

    #[test]
    fn replayable_seed() {
        let mut a = Rng::seeded(7);
        let mut b = Rng::seeded(7);
        assert_eq!(a.next_u64(), b.next_u64());
        let u = a.uniform();
        assert!((0.0..1.0).contains(&u));
    }
}
