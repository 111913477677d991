//! In-place param updates: an output bound with `bind_update` replaces its param after
//! every run, so the next run sees the new value.
use rlx_ir::{Activation, DType, Graph, HostTensor, Op, ReduceOp, Shape};
use rlx_runtime::{CompiledGraph, Device, Error, Session};
use rlx_testutil::Rng;

const DIMS: [usize; 2] = [3, 5];

/// Outputs `[sum(x ⊙ w), w - 0.5·tanh(x) ⊙ w, x]`: a loss-like value, an update, and an
/// output of the param's shape that is not bound.
fn graph(dtype: DType) -> Graph {
    let mut g = Graph::new("update");
    let x = g.input("x", Shape::new(&DIMS, dtype)).unwrap();
    let w = g.param("w", Shape::new(&DIMS, dtype)).unwrap();
    let xw = g.mul(x, w).unwrap();
    let s = g
        .add_node(
            Op::Reduce {
                op: ReduceOp::Sum,
                axes: vec![],
                keep_dim: false,
            },
            &[xw],
        )
        .unwrap();
    let t = g.activation(Activation::Tanh, x).unwrap();
    let half = g.scalar(0.5, dtype).unwrap();
    let t = g.mul(t, half).unwrap();
    let tw = g.mul(t, w).unwrap();
    let w_new = g.sub(w, tw).unwrap();
    g.set_outputs(vec![s, w_new, x]);
    g
}

fn compiled(dtype: DType) -> CompiledGraph {
    Session::new(Device::Cpu).compile(graph(dtype)).unwrap()
}

#[test]
fn bound_output_replaces_param_every_run() {
    for dtype in [DType::F32, DType::F64] {
        let mut rng = Rng::new("bound_output_replaces_param_every_run");
        let n = DIMS[0] * DIMS[1];
        let cg = compiled(dtype);
        let mut w = rng.uniforms(n, -1.0, 1.0);
        cg.set_param_typed("w", HostTensor::from_f64_as(&DIMS, &w, dtype))
            .unwrap();
        cg.bind_update(1, "w").unwrap();
        assert_eq!(cg.updates(), vec![(1, "w".to_string())]);
        let tol = if dtype == DType::F64 { 1e-12 } else { 1e-5 };
        for step in 0..5 {
            let xt = HostTensor::from_f64_as(&DIMS, &rng.uniforms(n, -1.0, 1.0), dtype);
            let x = xt.to_f64_vec();
            let want_sum: f64 = x.iter().zip(&w).map(|(a, b)| a * b).sum();
            for i in 0..n {
                w[i] -= 0.5 * x[i].tanh() * w[i];
            }
            // Alternate the two entry points: both apply the update.
            let (got_sum, all) = if step % 2 == 0 {
                let out = cg.run_step(&[("x", xt)]).unwrap();
                assert_eq!(out.len(), 2, "run_step leaves out the bound output");
                assert_eq!(out[1].to_f64_vec(), x);
                (out[0].to_f64_vec()[0], None)
            } else {
                let out = cg.run_typed(&[("x", xt)]).unwrap();
                assert_eq!(out.len(), 3, "run_typed returns every output");
                (out[0].to_f64_vec()[0], Some(out[1].to_f64_vec()))
            };
            assert!(
                (got_sum - want_sum).abs() <= tol * want_sum.abs().max(1.0),
                "step {step}: {got_sum} vs {want_sum} (the run must see the previous update)"
            );
            let now = cg.param("w").unwrap().to_f64_vec();
            if let Some(returned) = all {
                assert_eq!(returned, now, "the returned output is what was written");
            }
            let err = now
                .iter()
                .zip(&w)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(err <= tol, "step {step}: w off by {err:e}");
        }
    }
}

#[test]
fn swapped_params_read_before_written() {
    // Outputs that are the params themselves (leaf views): all sources must be read before
    // any param is overwritten, or the swap would duplicate one value.
    let mut g = Graph::new("swap");
    let a = g.param("a", Shape::new(&[4], DType::F32)).unwrap();
    let b = g.param("b", Shape::new(&[4], DType::F32)).unwrap();
    let s = g.add(a, b).unwrap();
    g.set_outputs(vec![s, b, a]);
    let cg = Session::new(Device::Cpu).compile(g).unwrap();
    let mut rng = Rng::new("swapped_params_read_before_written");
    let va: Vec<f32> = rng
        .uniforms(4, -1.0, 1.0)
        .iter()
        .map(|&v| v as f32)
        .collect();
    let vb: Vec<f32> = rng
        .uniforms(4, -1.0, 1.0)
        .iter()
        .map(|&v| v as f32)
        .collect();
    cg.set_param("a", &va).unwrap();
    cg.set_param("b", &vb).unwrap();
    cg.bind_update(1, "a").unwrap();
    cg.bind_update(2, "b").unwrap();
    let none: [(&str, HostTensor); 0] = [];
    cg.run_step(&none).unwrap();
    assert_eq!(cg.param("a").unwrap().to_f32_vec(), vb);
    assert_eq!(cg.param("b").unwrap().to_f32_vec(), va);
    cg.run_step(&none).unwrap();
    assert_eq!(cg.param("a").unwrap().to_f32_vec(), va);
}

#[test]
fn bind_update_errors_are_typed() {
    let cg = compiled(DType::F32);
    assert!(matches!(
        cg.bind_update(1, "nope"),
        Err(Error::UnknownParam { .. })
    ));
    assert!(matches!(
        cg.bind_update(3, "w"),
        Err(Error::NoSuchOutput { index: 3, count: 3 })
    ));
    // Output 0 is a 0-d sum: wrong shape for w.
    assert!(matches!(
        cg.bind_update(0, "w"),
        Err(Error::UpdateShapeMismatch { output: 0, .. })
    ));
    cg.bind_update(1, "w").unwrap();
    assert!(matches!(
        cg.bind_update(2, "w"),
        Err(Error::DuplicateUpdate { existing: 1, .. })
    ));
    // Same dims, other dtype.
    let mut g = Graph::new("dtype");
    let w = g.param("w", Shape::new(&[2], DType::F32)).unwrap();
    let c = g.cast(w, DType::F64).unwrap();
    g.set_outputs(vec![c]);
    let cg = Session::new(Device::Cpu).compile(g).unwrap();
    assert!(matches!(
        cg.bind_update(0, "w"),
        Err(Error::UpdateShapeMismatch { .. })
    ));
    // Reading a param never set is an error, not a panic.
    assert!(matches!(cg.param("w"), Err(Error::ParamNotSet { .. })));
    assert!(matches!(cg.param("x"), Err(Error::UnknownParam { .. })));
}
