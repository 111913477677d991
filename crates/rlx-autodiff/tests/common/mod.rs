//! Gradient-check support: a seeded RNG (seed printed; RLX_SEED replays), and `gradcheck`
//! (from rlx-testutil), which compares the VJP graph run on the CPU against central finite
//! differences of the forward graph, both in f64.
#![allow(dead_code)]
use rlx_ir::{DType, Graph, HostTensor, NodeId};

pub use rlx_testutil::Rng;

/// Random f64 tensors for gradient checks.
pub trait RngTensor {
    fn tensor(&mut self, dims: &[usize]) -> HostTensor;
}

impl RngTensor for Rng {
    fn tensor(&mut self, dims: &[usize]) -> HostTensor {
        let n = dims.iter().product();
        HostTensor::from_f64(dims, &self.normals(n))
    }
}

/// ‖got − want‖₂ / max(‖want‖₂, tiny); NaN anywhere gives infinity.
pub fn rel_l2(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "length mismatch");
    if got.iter().chain(want).any(|v| !v.is_finite()) {
        return f64::INFINITY;
    }
    let num: f64 = got.iter().zip(want).map(|(g, w)| (g - w) * (g - w)).sum();
    let den: f64 = want.iter().map(|w| w * w).sum();
    (num / den.max(1e-30)).sqrt()
}

pub fn run(graph: &Graph, inputs: &[(String, HostTensor)]) -> Vec<HostTensor> {
    let feed: Vec<(&str, HostTensor)> = inputs
        .iter()
        .map(|(n, t)| (n.as_str(), t.clone()))
        .collect();
    rlx_cpu::run_graph(graph, &[], &feed).unwrap_or_else(|e| panic!("run failed: {e}"))
}

// The gradcheck lives in rlx-testutil, where the case tables drive it too.
#[allow(unused_imports)]
pub use rlx_testutil::run::grad::{gradcheck, gradcheck_with, FD_TOL};

pub fn f64_input(g: &mut Graph, name: &str, dims: &[usize]) -> NodeId {
    g.input(name, rlx_ir::Shape::new(dims, DType::F64)).unwrap()
}
