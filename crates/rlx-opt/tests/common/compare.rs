//! Comparing two graphs' outputs on the CPU with an allowance for their conditioning:
//! fused and unfused rounding differ, and an ill-conditioned random draw may legitimately
//! differ by more than a dtype's tolerance, while a wrong rewrite must still fail.
use super::widen::{perturbed_feeds, widened, widened_feeds, widened_perturbed};
use super::{random_feeds, Rng, Val};
use rlx_ir::{DType, Graph, Op};
use std::collections::HashMap;

/// Outputs of `g` on the CPU for `feeds` (inputs and params by name).
pub fn cpu(g: &Graph, feeds: &HashMap<String, Val>) -> Vec<Val> {
    let mut ins = Vec::new();
    let mut params = Vec::new();
    for n in &g.nodes {
        match &n.op {
            Op::Input { name } => ins.push((name.as_str(), feeds[name].to_host())),
            Op::Param { name } => params.push((name.as_str(), feeds[name].to_host())),
            _ => {}
        }
    }
    let p: Vec<(&str, _)> = params.iter().map(|(n, t)| (*n, t.clone())).collect();
    let i: Vec<(&str, _)> = ins.iter().map(|(n, t)| (*n, t.clone())).collect();
    rlx_cpu::run_graph(g, &p, &i)
        .unwrap_or_else(|e| panic!("CPU run of {}: {e}", g.name))
        .iter()
        .map(Val::from_host)
        .collect()
}

/// rel-L2 tolerance for outputs computed in `dt` (a fused kernel skips the rounding
/// between the steps it fuses).
pub fn tol(dt: DType) -> f64 {
    match dt {
        DType::F64 => 1e-10,
        DType::F16 | DType::BF16 => 2e-2,
        _ => 1e-5,
    }
}

/// The tolerance for `g`'s outputs: that of the narrowest float type anywhere in it (an
/// f64 output can carry f32 rounding from upstream, and constant folding evaluates in f64
/// what the CPU evaluates in f32).
pub fn graph_tol(g: &Graph) -> f64 {
    g.nodes
        .iter()
        .filter(|n| n.shape.dtype.is_float())
        .map(|n| tol(n.shape.dtype))
        .fold(tol(DType::F64), f64::max)
}

/// `h` computes what `g` does on random feeds, on the CPU.
///
/// Rounding differs between the two (fused ops round less often, expanded ones more), so an
/// ill-conditioned draw (a variance that cancels, sin of a large SwiGLU output) may
/// legitimately differ by more than the dtype's tolerance. Each graph's own f32 error is
/// measured against the same graph with f32 widened to f64 (constants too), and the bound
/// becomes 4× the larger one. Where f32 keeps no useful digits at all (own error > 2.5e-3)
/// the f32 outputs say nothing about the rewrite, and the widened runs of `h` and `g` are
/// compared instead (a graph that is wrong is wrong in f64 too), allowing for outputs that
/// are rounding noise at every precision (an exact cancellation fed to a norm), measured
/// by how far the widened outputs move when every leaf moves by 2^-40. Constants folded
/// into `h` hold f32 results, which widening cannot undo: such an `h` is always compared
/// in f32.
pub fn same_on_cpu(g: &Graph, h: &Graph, rng: &mut Rng, what: &str) {
    h.verify()
        .unwrap_or_else(|e| panic!("{what}: result fails verification: {e}"));
    let feeds = random_feeds(g, rng);
    let (got, want) = (cpu(h, &feeds), cpu(g, &feeds));
    let (wide_h, wide_g) = (widened(h), widened(g));
    let wide_feeds = widened_feeds(&feeds);
    let exact = |w: &Option<Graph>| w.as_ref().map(|w| cpu(w, &wide_feeds));
    let (exact_h, exact_g) = (exact(&wide_h), exact(&wide_g));
    let finite = |d: f64| if d.is_finite() { d } else { 0.0 };
    // A constant of `h` that `g` lacks was folded, its ops rounded into f32 on the way:
    // widening `h` keeps that rounding, so only the f32 comparison is fair to it.
    let folded = folded_f32_constants(g, h);
    for k in 0..want.len() {
        let own = |out: &[Val], e: &Option<Vec<Val>>| {
            e.as_ref()
                .map_or(0.0, |e| finite(super::rel_err(&out[k].data, &e[k].data)))
        };
        let (own_h, own_g) = (own(&got, &exact_h), own(&want, &exact_g));
        let one = |v: &[Val]| std::slice::from_ref(&v[k]).to_vec();
        match (&exact_h, &exact_g, &wide_g) {
            (Some(eh), Some(eg), Some(wg)) if own_h.max(own_g) > 2.5e-3 && !folded => {
                // How far (absolutely) output k of a widened graph moves when every leaf
                // (feeds and constants) moves by a relative 2^-40: as far as the output
                // itself for rounding noise, κ·2^-40 of it at condition number κ.
                let moved = |x: &Graph, e: &[Val]| {
                    let delta = 2f64.powi(-40);
                    let w = widened_perturbed(x, delta).expect("x widens");
                    let f = perturbed_feeds(&feeds, delta);
                    finite(super::distance(&cpu(&w, &f)[k].data, &e[k].data).0)
                };
                // Two noisy outputs may differ by as much as both move; relative to `g`'s
                // output, as the comparison measures (a norm of an exact zero is zero).
                let scale = eg[k]
                    .data
                    .iter()
                    .filter(|v| v.is_finite())
                    .map(|v| v * v)
                    .sum::<f64>()
                    .sqrt();
                let noise = (moved(h, eh) + moved(g, eg)) / scale.max(1e-30);
                let label = format!(
                    "{what} (output {k}; own f32 error: h {own_h:.1e}, g {own_g:.1e}; \
                     leaf sensitivity in f64 {noise:.1e})"
                );
                // The same conditioning costs f64 2^-29 of what it cost f32.
                let tol = graph_tol(wg)
                    .max(4.0 * own_h.max(own_g) * 2f64.powi(-29))
                    .max(4.0 * noise);
                super::assert_same(&one(eh), &one(eg), tol, &label)
            }
            _ => {
                let label =
                    format!("{what} (output {k}; own f32 error: h {own_h:.1e}, g {own_g:.1e})");
                let tol = graph_tol(g).max(4.0 * own_h.max(own_g));
                super::assert_same(&one(&got), &one(&want), tol, &label)
            }
        }
    }
}

/// Whether `h` holds an f32 constant whose bytes no f32 constant of `g` has.
fn folded_f32_constants(g: &Graph, h: &Graph) -> bool {
    let f32_consts = |x: &Graph| -> Vec<Vec<u8>> {
        x.nodes
            .iter()
            .filter(|n| n.shape.dtype == DType::F32)
            .filter_map(|n| match &n.op {
                Op::Constant { data } => Some(data.clone()),
                _ => None,
            })
            .collect()
    };
    let in_g = f32_consts(g);
    f32_consts(h).iter().any(|c| !in_g.contains(c))
}
