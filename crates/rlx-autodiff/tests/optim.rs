//! In-graph optimizer updates against plain f64 formulas over several steps. The loss
//! `Σ c⊙p²/2 + Σ d⊙p` (c, d fresh random inputs each step) has the gradient `c⊙p + d`,
//! which the reference computes by hand; the compiled step writes its new params and state
//! back in place (bind_update), so every step after the first also tests the write-back.
mod common;

use common::{rel_l2, Rng};
use rlx_autodiff::optim::{HP_LR, STEP_PARAM};
use rlx_autodiff::{train_step, AdError, Optimizer};
use rlx_ir::{Activation, DType, Graph, HostTensor, Op, ReduceOp, Shape};
use rlx_runtime::{CompiledGraph, Device, Session};

const SHAPES: [&[usize]; 2] = [&[3, 5], &[7]];

fn loss_graph(dtype: DType) -> Graph {
    let mut g = Graph::new("quadratic");
    let mut terms = Vec::new();
    for (i, dims) in SHAPES.iter().enumerate() {
        let p = g.param(format!("p{i}"), Shape::new(dims, dtype)).unwrap();
        let c = g.input(format!("c{i}"), Shape::new(dims, dtype)).unwrap();
        let d = g.input(format!("d{i}"), Shape::new(dims, dtype)).unwrap();
        let p2 = g.activation(Activation::Square, p).unwrap();
        let cp2 = g.mul(c, p2).unwrap();
        let half = g.scalar(0.5, dtype).unwrap();
        let q = g.mul(cp2, half).unwrap();
        let dp = g.mul(d, p).unwrap();
        let t = g.add(q, dp).unwrap();
        terms.push(
            g.add_node(
                Op::Reduce {
                    op: ReduceOp::Sum,
                    axes: vec![],
                    keep_dim: false,
                },
                &[t],
            )
            .unwrap(),
        );
    }
    let loss = g.add(terms[0], terms[1]).unwrap();
    g.set_outputs(vec![loss]);
    g
}

/// Reference state: params and per-param state vectors, all f64.
struct Ref {
    p: Vec<Vec<f64>>,
    a: Vec<Vec<f64>>, // momentum, or Adam's m
    b: Vec<Vec<f64>>, // Adam's v
    t: f64,
}

fn ref_step(r: &mut Ref, opt: &Optimizer, c: &[Vec<f64>], d: &[Vec<f64>]) -> f64 {
    let mut loss = 0.0;
    for k in 0..r.p.len() {
        for i in 0..r.p[k].len() {
            let p = r.p[k][i];
            loss += 0.5 * c[k][i] * p * p + d[k][i] * p;
        }
    }
    r.t += 1.0;
    for k in 0..r.p.len() {
        for i in 0..r.p[k].len() {
            let p = r.p[k][i];
            let g = c[k][i] * p + d[k][i];
            match *opt {
                Optimizer::Sgd {
                    lr,
                    momentum,
                    weight_decay,
                } => {
                    let g = g + weight_decay * p;
                    r.a[k][i] = momentum * r.a[k][i] + g;
                    r.p[k][i] = p - lr * r.a[k][i];
                }
                Optimizer::Adam {
                    lr,
                    beta1,
                    beta2,
                    eps,
                }
                | Optimizer::AdamW {
                    lr,
                    beta1,
                    beta2,
                    eps,
                    ..
                } => {
                    let wd = match *opt {
                        Optimizer::AdamW { weight_decay, .. } => weight_decay,
                        _ => 0.0,
                    };
                    let p = p * (1.0 - lr * wd);
                    r.a[k][i] = beta1 * r.a[k][i] + (1.0 - beta1) * g;
                    r.b[k][i] = beta2 * r.b[k][i] + (1.0 - beta2) * g * g;
                    let mhat = r.a[k][i] / (1.0 - beta1.powf(r.t));
                    let vhat = r.b[k][i] / (1.0 - beta2.powf(r.t));
                    r.p[k][i] = p - lr * mhat / (vhat.sqrt() + eps);
                }
            }
        }
    }
    loss
}

fn compile(opt: &Optimizer, dtype: DType, p0: &[Vec<f64>]) -> (CompiledGraph, Vec<String>) {
    let ts = train_step(&loss_graph(dtype), &["p0", "p1"], opt).unwrap();
    let n_out = 1 + ts.params.len() + ts.state.len();
    assert_eq!(ts.graph.outputs.len(), n_out);
    let cg = Session::new(Device::Cpu).compile(ts.graph.clone()).unwrap();
    for (k, name) in ts.updates() {
        cg.bind_update(k, &name).unwrap();
    }
    for (k, v) in p0.iter().enumerate() {
        cg.set_param_typed(
            &format!("p{k}"),
            HostTensor::from_f64_as(SHAPES[k], v, dtype),
        )
        .unwrap();
    }
    for (name, shape) in &ts.state {
        let dims = shape.static_dims().unwrap();
        let n = dims.iter().product();
        cg.set_param_typed(name, HostTensor::from_f64_as(&dims, &vec![0.0; n], dtype))
            .unwrap();
    }
    (cg, ts.state.iter().map(|s| s.0.clone()).collect())
}

fn check(name: &str, opt: Optimizer, dtype: DType, tol: f64) {
    let mut rng = Rng::new(name);
    let p0: Vec<Vec<f64>> = SHAPES
        .iter()
        .map(|d| rng.normals(d.iter().product()))
        .collect();
    let (cg, state) = compile(&opt, dtype, &p0);
    let zeros = |v: &Vec<Vec<f64>>| v.iter().map(|x| vec![0.0; x.len()]).collect::<Vec<_>>();
    let mut r = Ref {
        a: zeros(&p0),
        b: zeros(&p0),
        p: p0,
        t: 0.0,
    };
    let mut opt = opt;
    for step in 0..6 {
        // A changing lr checks that hyperparameters are live inputs.
        opt = opt.with_lr(opt.lr() * (0.7 + 0.1 * step as f64));
        let c: Vec<Vec<f64>> = SHAPES
            .iter()
            .map(|d| rng.uniforms(d.iter().product(), 0.5, 2.0))
            .collect();
        let d: Vec<Vec<f64>> = SHAPES
            .iter()
            .map(|d| rng.normals(d.iter().product()))
            .collect();
        let mut inputs: Vec<(String, HostTensor)> = Vec::new();
        for k in 0..SHAPES.len() {
            inputs.push((
                format!("c{k}"),
                HostTensor::from_f64_as(SHAPES[k], &c[k], dtype),
            ));
            inputs.push((
                format!("d{k}"),
                HostTensor::from_f64_as(SHAPES[k], &d[k], dtype),
            ));
        }
        for (n, v) in opt.hyper_values() {
            inputs.push((n.to_string(), HostTensor::from_f64_as(&[], &[v], dtype)));
        }
        // f32 storage: the oracle sees the rounded inputs too.
        let c: Vec<Vec<f64>> = (0..2).map(|k| inputs[2 * k].1.to_f64_vec()).collect();
        let d: Vec<Vec<f64>> = (0..2).map(|k| inputs[2 * k + 1].1.to_f64_vec()).collect();
        let out = cg.run_step(&inputs).unwrap();
        assert_eq!(out.len(), 1, "{name}: run_step returns only the loss");
        let want_loss = ref_step(&mut r, &opt, &c, &d);
        let got_loss = out[0].to_f64_vec()[0];
        assert!(
            (got_loss - want_loss).abs() <= tol * want_loss.abs().max(1.0),
            "{name} step {step}: loss {got_loss} vs {want_loss}"
        );
        for k in 0..2 {
            let got = cg.param(&format!("p{k}")).unwrap().to_f64_vec();
            let e = rel_l2(&got, &r.p[k]);
            assert!(e <= tol, "{name} step {step} p{k}: rel-L2 {e:e}");
        }
        for s in &state {
            let got = cg.param(s).unwrap().to_f64_vec();
            let want: Vec<f64> = if s == STEP_PARAM {
                vec![r.t]
            } else {
                let k: usize = s[s.len() - 1..].parse().unwrap();
                if s.starts_with("opt.v.") {
                    r.b[k].clone()
                } else {
                    r.a[k].clone()
                }
            };
            let e = rel_l2(&got, &want);
            assert!(e <= tol, "{name} step {step} {s}: rel-L2 {e:e}");
        }
    }
}

#[test]
fn sgd_momentum_matches_formula() {
    let opt = Optimizer::Sgd {
        lr: 0.05,
        momentum: 0.9,
        weight_decay: 0.0,
    };
    check("sgd_momentum_matches_formula", opt, DType::F64, 1e-12);
}

#[test]
fn sgd_momentum_weight_decay_matches_formula() {
    let opt = Optimizer::Sgd {
        lr: 0.03,
        momentum: 0.8,
        weight_decay: 0.1,
    };
    check("sgd_momentum_weight_decay_f64", opt, DType::F64, 1e-12);
    check("sgd_momentum_weight_decay_f32", opt, DType::F32, 1e-5);
}

#[test]
fn adam_matches_formula() {
    let opt = Optimizer::Adam {
        lr: 0.02,
        beta1: 0.85,
        beta2: 0.99,
        eps: 1e-6,
    };
    check("adam_matches_formula_f64", opt, DType::F64, 1e-12);
    check("adam_matches_formula_f32", opt, DType::F32, 1e-5);
}

#[test]
fn adamw_matches_formula() {
    let opt = Optimizer::AdamW {
        lr: 0.02,
        beta1: 0.9,
        beta2: 0.995,
        eps: 1e-7,
        weight_decay: 0.2,
    };
    check("adamw_matches_formula_f64", opt, DType::F64, 1e-12);
    check("adamw_matches_formula_f32", opt, DType::F32, 1e-5);
}

#[test]
fn train_step_rejects_bad_requests() {
    let g = loss_graph(DType::F32);
    let opt = Optimizer::adam(1e-3);
    assert!(matches!(
        train_step(&g, &["nope"], &opt),
        Err(AdError::Optim(_))
    ));
    assert!(matches!(
        train_step(&g, &["p0", "p0"], &opt),
        Err(AdError::Optim(_))
    ));
    assert!(matches!(train_step(&g, &[], &opt), Err(AdError::Optim(_))));
    let mut clash = loss_graph(DType::F32);
    clash.input(HP_LR, Shape::new(&[], DType::F32)).unwrap();
    assert!(matches!(
        train_step(&clash, &["p0"], &opt),
        Err(AdError::NameClash(_))
    ));
    // Mixed dtypes cannot share one set of hyperparameter inputs.
    let mut mixed = loss_graph(DType::F32);
    mixed.param("p64", Shape::new(&[2], DType::F64)).unwrap();
    assert!(matches!(
        train_step(&mixed, &["p0", "p64"], &opt),
        Err(AdError::Optim(_))
    ));
}
