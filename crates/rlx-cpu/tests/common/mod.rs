//! Shared test support: a seeded RNG (seed printed; set RLX_SEED to replay), tolerance
//! checks against f64 oracles, and a one-call graph runner.
#![allow(dead_code)]
use rlx_ir::{DType, Graph, HostTensor};

pub use rlx_testutil::Rng;

/// Tolerance of DESIGN.md for a dtype: rel-L2 error bound.
pub fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F16 | DType::BF16 => 1e-2,
        DType::F64 => 1e-12,
        _ => 1e-5,
    }
}

pub use rlx_testutil::rel_l2;

/// Assert `got` matches the f64 oracle within the tolerance of `dtype`.
pub fn assert_close(what: &str, got: &HostTensor, want: &[f64], dtype: DType) {
    let g = got.to_f64_vec();
    check(what, rel_l2(&g, want), "rel-L2", &g, want, dtype);
}

/// Fail, naming the case and its first values, when `e` exceeds the dtype's tolerance.
fn check(what: &str, e: f64, measure: &str, g: &[f64], want: &[f64], dtype: DType) {
    let t = tol(dtype);
    assert!(
        e <= t,
        "{what}: {measure} {e:.3e} > {t:.0e} ({dtype}); first values got {:?} want {:?}",
        &g[..g.len().min(6)],
        &want[..want.len().min(6)]
    );
}

/// `assert_close` for sums of products (matmul, dot): the error is measured against `abs`,
/// the oracle of the same sums over |terms|. Rounding error is a fraction of Σ|a·b|, so a
/// sum that cancels to near zero keeps f32's digits of its terms, not of its result.
pub fn assert_close_sums(what: &str, got: &HostTensor, want: &[f64], abs: &[f64], dtype: DType) {
    let g = got.to_f64_vec();
    assert_eq!(g.len(), want.len(), "{what}: length");
    let norm = |v: &mut dyn Iterator<Item = f64>| v.map(|x| x * x).sum::<f64>().sqrt();
    // NaN anywhere makes e NaN, which fails the check.
    let e = norm(&mut g.iter().zip(want).map(|(a, b)| a - b)) / norm(&mut abs.iter().copied());
    check(what, e, "error of Σ|terms|", &g, want, dtype);
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
