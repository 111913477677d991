//! Gradcheck: the VJP graph run on the CPU against central finite differences of the
//! forward graph, both in f64 (moved here from rlx-autodiff's tests so the case tables
//! drive it), and the case runner over it.
use crate::case::{draw_inputs, Case, Check};
use crate::Rng;
use rlx_autodiff::{grad, D_OUTPUT};
use rlx_ir::{DType, Graph, HostTensor, NodeId, Op};

/// ‖got − want‖₂ / max(‖want‖₂, tiny); anything non-finite gives infinity.
fn rel_l2(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "length mismatch");
    if got.iter().chain(want).any(|v| !v.is_finite()) {
        return f64::INFINITY;
    }
    let num: f64 = got.iter().zip(want).map(|(g, w)| (g - w) * (g - w)).sum();
    let den: f64 = want.iter().map(|w| w * w).sum();
    (num / den.max(1e-30)).sqrt()
}

fn run(graph: &Graph, inputs: &[(String, HostTensor)]) -> Vec<HostTensor> {
    let feed: Vec<(&str, HostTensor)> = inputs
        .iter()
        .map(|(n, t)| (n.as_str(), t.clone()))
        .collect();
    rlx_cpu::run_graph(graph, &[], &feed).unwrap_or_else(|e| panic!("run failed: {e}"))
}

/// Σ y ⊙ w for the forward graph's output 0.
fn objective(graph: &Graph, inputs: &[(String, HostTensor)], w: &[f64]) -> f64 {
    objective_and_magnitude(graph, inputs, w).0
}

/// The objective and Σ |y ⊙ w|: the sum's rounding error scales with the latter, which a
/// cancelling sum (1000 copies of one value against random weights) makes far larger than
/// the objective itself.
fn objective_and_magnitude(
    graph: &Graph,
    inputs: &[(String, HostTensor)],
    w: &[f64],
) -> (f64, f64) {
    let y = run(graph, inputs)[0].to_f64_vec();
    let terms = y.iter().zip(w).map(|(a, b)| a * b);
    (terms.clone().sum(), terms.map(f64::abs).sum())
}

pub const FD_STEP: f64 = 1e-5;
pub const FD_TOL: f64 = 1e-6;

/// Central-difference check of `grad(graph, wrt)` (every wrt must be an f64 `Input`).
/// Output 0's cotangent is random, so the whole Jacobian is exercised, not one row.
/// Returns the worst rel-L2 error.
pub fn gradcheck(
    what: &str,
    graph: &Graph,
    inputs: &[(&str, HostTensor)],
    wrt: &[NodeId],
    rng: &mut Rng,
) -> f64 {
    gradcheck_with(what, graph, inputs, wrt, rng, true)
}

/// `gradcheck`, choosing whether steps across a kink are detected (`allow_kinks`) or every
/// element must match the central difference: for rules whose value at a tie is defined
/// to be that average.
pub fn gradcheck_with(
    what: &str,
    graph: &Graph,
    inputs: &[(&str, HostTensor)],
    wrt: &[NodeId],
    rng: &mut Rng,
    allow_kinks: bool,
) -> f64 {
    let inputs: Vec<(String, HostTensor)> = inputs
        .iter()
        .map(|(n, t)| (n.to_string(), t.clone()))
        .collect();
    let y = &run(graph, &inputs)[0];
    let w = rng.normals(y.numel());
    let gg = grad(graph, wrt).unwrap_or_else(|e| panic!("{what}: grad failed: {e}"));
    let mut feed = inputs.clone();
    feed.push((
        D_OUTPUT.to_string(),
        HostTensor::from_f64_as(&y.shape, &w, y.dtype),
    ));
    let ad = run(&gg, &feed);
    assert_eq!(ad.len(), wrt.len(), "{what}: one gradient per wrt");
    let mut worst: f64 = 0.0;
    let (mut crossed, mut checked) = (0, 0);
    for (k, &wid) in wrt.iter().enumerate() {
        let name = match &graph.nodes[wid.0].op {
            Op::Input { name } => name.clone(),
            op => panic!("{what}: wrt {wid} is {}, not an Input", op.kind()),
        };
        let pos = inputs
            .iter()
            .position(|(n, _)| *n == name)
            .expect("wrt fed");
        let base = inputs[pos].1.clone();
        assert_eq!(base.dtype, DType::F64, "{what}: gradcheck inputs are f64");
        assert_eq!(ad[k].shape, base.shape, "{what}: gradient shape of {name}");
        let x = base.to_f64_vec();
        let (f0, f0_abs) = objective_and_magnitude(graph, &inputs, &w);
        // Differences per element: central, forward, backward at the step, and
        // forward − backward at twice the step.
        let diffs: Vec<Diffs> = (0..x.len())
            .map(|j| {
                let at = |delta: f64| {
                    let mut xs = x.clone();
                    xs[j] += delta;
                    let mut f = inputs.clone();
                    f[pos].1 = HostTensor::from_f64(&base.shape, &xs);
                    objective(graph, &f, &w)
                };
                let (up, dn) = (at(FD_STEP), at(-FD_STEP));
                let (up2, dn2) = (at(2.0 * FD_STEP), at(-2.0 * FD_STEP));
                Diffs {
                    central: (up - dn) / (2.0 * FD_STEP),
                    fwd: (up - f0) / FD_STEP,
                    bwd: (f0 - dn) / FD_STEP,
                    spread2: (up2 - 2.0 * f0 + dn2) / (2.0 * FD_STEP),
                    noise: 16.0 * f64::EPSILON * f0_abs.max(1.0) / FD_STEP,
                }
            })
            .collect();
        let got = ad[k].to_f64_vec();
        let kinks = if allow_kinks {
            check_kinks(what, &name, &got, &diffs)
        } else {
            vec![]
        };
        (crossed, checked) = (crossed + kinks.len(), checked + got.len());
        let keep = |v: &[f64]| -> Vec<f64> {
            v.iter()
                .enumerate()
                .filter(|(j, _)| !kinks.contains(j))
                .map(|(_, &g)| g)
                .collect()
        };
        let fd: Vec<f64> = diffs.iter().map(|d| d.central).collect();
        let e = rel_l2(&keep(&got), &keep(&fd));
        assert!(
            e <= FD_TOL,
            "{what}: d/d{name} rel-L2 {e:.3e} > {FD_TOL:.0e}\n  autodiff {:?}\n  finite-diff {:?}",
            &got[..got.len().min(6)],
            &fd[..fd.len().min(6)]
        );
        worst = worst.max(e);
    }
    // One ReLU at zero touches every weight feeding it; most steps must still be smooth.
    assert!(
        crossed * 4 <= checked,
        "{what}: {crossed} of {checked} steps crossed a kink"
    );
    println!("{what}: ok (worst rel-L2 {worst:.2e}, {crossed} of {checked} steps at a kink)");
    worst
}

/// Finite differences of the objective at one element.
struct Diffs {
    central: f64,
    fwd: f64,
    bwd: f64,
    /// (forward − backward) at twice the step: 2·step·f'' where smooth, like fwd − bwd's
    /// step·f''; a kink inside ±2·step breaks that proportion.
    spread2: f64,
    /// Rounding in one difference of objective values.
    noise: f64,
}

/// Elements whose ±step may have crossed a kink (a ReLU at zero, a max-pool winner changing,
/// a tie): the spread of forward and backward differences is not linear in the step. There
/// the central difference averages two slopes, and autodiff's value must match one side's
/// slope, or their average (the split a tie rule takes); those elements leave the rel-L2
/// comparison. Returns their indices.
fn check_kinks(what: &str, name: &str, got: &[f64], diffs: &[Diffs]) -> Vec<usize> {
    let scale = diffs.iter().map(|d| d.central.abs()).fold(0.0, f64::max);
    let kinks: Vec<usize> = (0..diffs.len())
        .filter(|&j| {
            let d = &diffs[j];
            (d.spread2 - 2.0 * (d.fwd - d.bwd)).abs() > 1e-8 * scale + 8.0 * d.noise
        })
        .collect();
    for &j in &kinks {
        let d = &diffs[j];
        let near = |side: f64| (got[j] - side).abs() <= 1e-3 * scale;
        assert!(
            near(d.fwd) || near(d.bwd) || near(d.central),
            "{what}: d/d{name}[{j}] = {} matches neither side of a kink ({}, {})",
            got[j],
            d.fwd,
            d.bwd
        );
    }
    kinks
}

/// Gradcheck every differentiable case of a set, in f64 (fixed-dtype inputs, such as
/// integer labels, keep their dtype). The set must hold at least one.
pub fn check(set: &str, cases: &[Case]) {
    let mut rng = Rng::new(set);
    let mut ran = 0;
    for case in cases.iter().filter(|c| c.grads()) {
        let raw = draw_inputs(case, Check::Grad, &mut rng, DType::F64);
        let g = (case.build)(DType::F64);
        let feeds: Vec<(&str, HostTensor)> = case
            .inputs
            .iter()
            .zip(&raw)
            .map(|(i, v)| {
                (
                    i.name,
                    HostTensor::from_f64_as(&i.dims, v, i.dtype_in(DType::F64)),
                )
            })
            .collect();
        let wrt: Vec<NodeId> = case
            .wrt
            .iter()
            .map(|w| {
                g.nodes
                    .iter()
                    .position(|n| matches!(&n.op, Op::Input { name } if name == w))
                    .map(NodeId)
                    .unwrap_or_else(|| panic!("{}: wrt {w} is not an input", case.name))
            })
            .collect();
        gradcheck_with(&case.name, &g, &feeds, &wrt, &mut rng, case.allow_kinks);
        ran += 1;
    }
    assert!(ran > 0, "{set}: no case has a gradcheck");
    println!("{set}: {ran} gradchecks passed");
}
