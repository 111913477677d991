//! Whole-model gradient checks: a small MLP classifier (fused matmul + tanh, matmul, bias
//! add, LayerNorm, integer-label cross-entropy, mean loss), through both `grad` and
//! `grad_with_loss`.
mod common;
use common::*;
use rlx_autodiff::{grad_with_loss, D_OUTPUT};
use rlx_ir::{Activation, DType, Graph, HostTensor, NodeId, Op, ReduceOp, Shape};

struct Mlp {
    g: Graph,
    params: Vec<NodeId>,
}

fn mlp(n: usize, d: usize, h: usize, c: usize) -> Mlp {
    let mut g = Graph::new("mlp");
    let x = f64_input(&mut g, "x", &[n, d]);
    let labels = g.input("labels", Shape::new(&[n], DType::I64)).unwrap();
    let w1 = f64_input(&mut g, "w1", &[d, h]);
    let b1 = f64_input(&mut g, "b1", &[h]);
    let gm = f64_input(&mut g, "gamma", &[h]);
    let w2 = f64_input(&mut g, "w2", &[h, c]);
    let b2 = f64_input(&mut g, "b2", &[c]);
    let h1 = g
        .matmul_bias_act(x, w1, b1, Some(Activation::Tanh))
        .unwrap();
    let h1n = g.layer_norm(h1, gm, None, -1, 1e-5).unwrap();
    // Residual path: h1 feeds two consumers.
    let h1r = g.add(h1n, h1).unwrap();
    let z = g.matmul(h1r, w2).unwrap();
    let logits = g.add(z, b2).unwrap();
    let per = g
        .add_node(Op::SoftmaxCrossEntropyWithLogits, &[logits, labels])
        .unwrap();
    let loss = g
        .add_node(
            Op::Reduce {
                op: ReduceOp::Mean,
                axes: vec![0],
                keep_dim: false,
            },
            &[per],
        )
        .unwrap();
    g.set_outputs(vec![loss]);
    Mlp {
        g,
        params: vec![w1, b1, gm, w2, b2],
    }
}

#[test]
fn mlp_whole_model_gradcheck() {
    let mut rng = Rng::new("mlp_whole_model_gradcheck");
    let (n, d, h, c) = (5, 4, 6, 3);
    let m = mlp(n, d, h, c);
    let labels: Vec<f64> = (0..n).map(|_| rng.below(c) as f64).collect();
    let feed = vec![
        ("x", rng.tensor(&[n, d])),
        ("labels", HostTensor::from_f64_as(&[n], &labels, DType::I64)),
        ("w1", rng.tensor(&[d, h])),
        ("b1", rng.tensor(&[h])),
        ("gamma", rng.tensor(&[h])),
        ("w2", rng.tensor(&[h, c])),
        ("b2", rng.tensor(&[c])),
    ];
    gradcheck("mlp via grad", &m.g, &feed, &m.params, &mut rng);

    // grad_with_loss: [loss, d…] equal grad's outputs with d_output = 1.
    let gl = grad_with_loss(&m.g, &m.params).unwrap();
    let owned: Vec<(String, HostTensor)> = feed
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let with_loss = run(&gl, &owned);
    let fwd = run(&m.g, &owned);
    assert_eq!(with_loss.len(), 1 + m.params.len());
    assert_eq!(with_loss[0].to_f64_vec(), fwd[0].to_f64_vec());
    let gg = rlx_autodiff::grad(&m.g, &m.params).unwrap();
    let mut seeded = owned.clone();
    seeded.push((D_OUTPUT.into(), HostTensor::from_f64(&[], &[1.0])));
    let plain = run(&gg, &seeded);
    for (k, p) in plain.iter().enumerate() {
        let e = rel_l2(&with_loss[k + 1].to_f64_vec(), &p.to_f64_vec());
        assert!(e < 1e-14, "param {k}: {e}");
    }
    // A gradient step lowers the loss (the gradients point the right way).
    let lr = 0.1;
    let mut stepped = owned.clone();
    for (k, &pid) in m.params.iter().enumerate() {
        let name = m.g.nodes[pid.0].name.clone().unwrap();
        let slot = stepped.iter_mut().find(|(n, _)| *n == name).unwrap();
        let v: Vec<f64> = slot
            .1
            .to_f64_vec()
            .iter()
            .zip(with_loss[k + 1].to_f64_vec())
            .map(|(p, g)| p - lr * g)
            .collect();
        slot.1 = HostTensor::from_f64(&slot.1.shape, &v);
    }
    let after = run(&m.g, &stepped)[0].to_f64_vec()[0];
    let before = fwd[0].to_f64_vec()[0];
    assert!(after < before, "loss {before} -> {after}");
}
